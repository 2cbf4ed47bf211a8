from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from ledger import schema
from tests.conftest import ROOT


def test_wheel_ships_schemas_and_type_marker(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    wheel = next(tmp_path.glob("anvil_ledger-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "ledger/py.typed" in names
    assert "ledger/_cli.py" in names
    for schema_id in schema.known_schemas():
        assert f"ledger/_schemas/{schema_id.kind}/v{schema_id.version}.schema.json" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    declared = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "ledger = ledger._cli:main" in declared
    # The runner commands reach the CLI through entry points, not imports from the core.
    assert "[anvil_ledger.commands]" in declared
    assert "run = runners._cli:register_run" in declared
    assert "runners/simulate/app.py" in names
    # Data the code reads at run time: sanitizer rules and the pinned sigstore roots.
    assert "ledger/_rules/sanitizer-v1.json" in names
    assert "ledger/_trust/production_trusted_root.json" in names
    assert "ledger/_trust/staging_trusted_root.json" in names
    assert "ledger/_policy/default.toml" in names
    assert "approve = runners._cli:register_approve" in declared


def test_core_never_imports_runners() -> None:
    offenders = [
        path.relative_to(ROOT).as_posix()
        for path in sorted((ROOT / "ledger").rglob("*.py"))
        if "runners"
        in "".join(
            line
            for line in path.read_text().splitlines()
            if line.lstrip().startswith(("import", "from"))
        )
    ]
    assert offenders == []
