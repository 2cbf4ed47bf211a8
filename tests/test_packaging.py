from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from ledger.formats import schema
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
    assert "ledger/cli/_main.py" in names
    for schema_id in schema.known_schemas():
        assert f"ledger/_schemas/{schema_id.kind}/v{schema_id.version}.schema.json" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    declared = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "ledger = ledger.cli:main" in declared
    # The runner commands reach the CLI through entry points, not imports from the core.
    assert "[anvil_ledger.commands]" in declared
    assert "run = runners._cli:register_run" in declared
    assert "runners/simulate/_app.py" in names
    # Data the code reads at run time: sanitizer rules and the pinned sigstore roots.
    assert "ledger/_rules/sanitizer-v1.json" in names
    assert "ledger/_trust/production_trusted_root.json" in names
    assert "ledger/_trust/staging_trusted_root.json" in names
    assert "ledger/_policy/default.toml" in names
    assert "approve = runners._cli:register_approve" in declared
    # The licence pyproject declares, in the text it names.
    shipped = next(n for n in names if n.endswith(".dist-info/licenses/LICENSE"))
    assert "Apache License" in zipfile.ZipFile(wheel).read(shipped).decode()


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


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(Path(sys.executable).parent / "lint-imports"),
            "--config",
            str(root / "pyproject.toml"),
        ],
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_import_contracts_hold_and_refuse_what_breaks_them(
    tmp_path: Path,
) -> None:
    assert _lint_imports(ROOT).returncode == 0
    copy = tmp_path / "tree"
    for name in ("ledger", "runners"):
        shutil.copytree(ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    hashing = copy / "ledger" / "hashing.py"
    original = hashing.read_text()
    hashing.write_text(original + "\nimport runners.campaign._stats  # noqa\n")
    broken = _lint_imports(copy)
    assert broken.returncode == 1
    assert "ledger.hashing -> runners.campaign._stats" in broken.stdout
    assert "The core (ledger) never imports the runners BROKEN" in broken.stdout
    # A package's private module imported from outside it.
    hashing.write_text(original + "\nimport ledger.sanitizer._prefilter  # noqa\n")
    broken = _lint_imports(copy)
    assert broken.returncode == 1
    assert "imported only inside it BROKEN" in broken.stdout
    assert "ledger.hashing -> ledger.sanitizer._prefilter" in broken.stdout


def test_pre_commit_runs_what_make_lint_runs() -> None:
    lint = (ROOT / "Makefile").read_text().split("\nlint:", 1)[1].split("\n\n", 1)[0]
    commands = [
        line.strip().replace("$(BIN)/", ".venv/bin/")
        for line in lint.splitlines()[1:]
        if line.startswith("\t")
    ]
    hooks = (ROOT / ".pre-commit-config.yaml").read_text()
    entries = [
        line.split("entry:", 1)[1].strip() for line in hooks.splitlines() if "entry:" in line
    ]
    assert commands and sorted(commands) == sorted(entries)
