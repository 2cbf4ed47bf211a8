from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml

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
    # Every module of every package, every runner command, and the demo's plan.
    modules = {
        path.relative_to(ROOT).as_posix()
        for root in ("ledger", "runners")
        for path in (ROOT / root).rglob("*.py")
    }
    assert modules <= names
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for name, target in project["entry-points"]["anvil_ledger.commands"].items():
        assert f"{name} = {target}" in declared
    assert "runners/_demo/plan.toml" in names
    # Installed, the schemas are found inside the package, not beside a checkout.
    installed = tmp_path / "installed"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "-t", str(installed), wheel],
        check=True,
        capture_output=True,
    )
    found = subprocess.run(
        [sys.executable, "-c", "from ledger.formats import schema; print(schema.schema_root())"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(installed), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert found == str(installed / "ledger" / "_schemas")


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
            str(root / "pyproject.toml"),
        ],
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )


CONTRACTS = {
    "layers": "The core's layers",
    "runner layers": "The runners' layers",
    "forbidden": "The core (ledger) never imports the runners",
    "private": "A package's private modules are imported only inside it",
    "acyclic": "No cycles between the modules of a package",
}


def test_the_import_contracts_hold_with_no_ignored_import() -> None:
    checked = _lint_imports(ROOT)
    assert checked.returncode == 0, checked.stdout
    for name in CONTRACTS.values():
        assert f"{name} KEPT" in checked.stdout
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    assert {c["name"] for c in config["contracts"]} == set(CONTRACTS.values())
    assert not any("ignore_imports" in c for c in config["contracts"])


# Each plants one import that breaks one contract and no other.
PLANTED = [
    # The core imports a public module of the runners.
    ("forbidden", "ledger/cli/_main.py", "import runners.plan", "ledger.cli._main -> runners.plan"),
    # One of two packages on one layer imports the other.
    (
        "layers",
        "ledger/publication/_publish.py",
        "import ledger.reporting",
        "ledger.publication._publish -> ledger.reporting",
    ),
    # One of two runner packages on one layer imports the other.
    (
        "runner layers",
        "runners/client/_client.py",
        "import runners.workload",
        "runners.client._client -> runners.workload",
    ),
    # A higher layer imports a lower package's private module.
    (
        "private",
        "ledger/verification/_verify.py",
        "import ledger.sanitizer._prefilter",
        "ledger.verification._verify -> ledger.sanitizer._prefilter",
    ),
    # Two modules of one package import each other.
    (
        "acyclic",
        "ledger/evidence/tree.py",
        "import ledger.evidence.manifest",
        "- .tree -> .manifest",
    ),
    # The same in the runners, and the other contracts from elsewhere than above.
    (
        "acyclic",
        "runners/campaign/_stats.py",
        "import runners.campaign.progress",
        "No cycles are allowed in runners.campaign.",
    ),
    ("forbidden", "ledger/formats/schema.py", "import runners.client", "runners.client"),
    (
        "private",
        "runners/campaign/_campaign.py",
        "import runners.client._sse",
        "runners.campaign._campaign -> runners.client._sse",
    ),
    # A lower layer imports a higher one.
    # (From below formats: every package above it imports formats, so formats importing
    # one of them would be a cycle too.)
    (
        "layers",
        "ledger/exit_status.py",
        "import ledger.formats",
        "ledger.exit_status -> ledger.formats",
    ),
    (
        "runner layers",
        "runners/client/_client.py",
        "import runners.simulate",
        "runners.client._client -> runners.simulate",
    ),
]


def _independent(contract: str) -> list[tuple[str, str, str]]:
    """(contract, importer, imported) for each two packages that share a layer."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c for c in config["contracts"] if c["name"] == CONTRACTS[contract]]
    (container,) = layers["containers"]
    pairs = []
    for layer in layers["layers"]:
        siblings = [name.strip() for name in layer.split("|")]
        pairs += [
            (contract, f"{container}.{a}", f"{container}.{b}")
            for i, a in enumerate(siblings)
            for b in siblings[i + 1 :]
        ]
    return pairs


@pytest.mark.parametrize(
    ("contract", "importer", "imported"),
    _independent("layers") + _independent("runner layers"),
)
def test_two_packages_of_one_layer_import_neither_each_other(
    tmp_path: Path, contract: str, importer: str, imported: str
) -> None:
    copy = _copy_tree(tmp_path)
    path = copy / importer.replace(".", "/")
    _plant(path / "__init__.py" if path.is_dir() else path.with_suffix(".py"), f"import {imported}")
    broken = _broken_alone(copy, contract)
    assert f"{importer} -> {imported}" in broken.stdout


@pytest.mark.parametrize(("contract", "module", "line", "shown"), PLANTED)
def test_an_import_contract_refuses_what_breaks_it_alone(
    tmp_path: Path, contract: str, module: str, line: str, shown: str
) -> None:
    copy = _copy_tree(tmp_path)
    _plant(copy / module, line)
    broken = _broken_alone(copy, contract)
    assert shown in broken.stdout


@pytest.mark.parametrize(("root", "contract"), [("ledger", "layers"), ("runners", "runner layers")])
def test_a_package_no_layer_names_breaks_the_layers(
    tmp_path: Path, root: str, contract: str
) -> None:
    copy = _copy_tree(tmp_path)
    (copy / root / "leftovers").mkdir()
    (copy / root / "leftovers" / "__init__.py").write_text('"""Anything."""\n')
    broken = _broken_alone(copy, contract)
    assert f"{root}.leftovers" in broken.stdout


def _plant(path: Path, line: str) -> None:
    path.write_text(path.read_text() + f"\n{line}  # noqa\n")


def _broken_alone(copy: Path, contract: str) -> subprocess.CompletedProcess[str]:
    """lint-imports on ``copy``, which must break ``contract`` and keep every other."""
    broken = _lint_imports(copy)
    assert broken.returncode == 1
    for name, title in CONTRACTS.items():
        assert f"{title} {'BROKEN' if name == contract else 'KEPT'}" in broken.stdout
    return broken


def _copy_tree(tmp_path: Path) -> Path:
    copy = tmp_path / "tree"
    for name in ("ledger", "runners"):
        shutil.copytree(ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    return copy


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
    # mypy and import-linter read their configuration from pyproject.toml: a commit that
    # changes only a contract must run them too.
    config = yaml.safe_load(hooks)["repos"][0]["hooks"]
    by_id = {hook["id"]: hook for hook in config}
    for hook in ("mypy", "import-linter"):
        assert "toml" in by_id[hook].get("types_or", []), hook
