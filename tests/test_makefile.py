"""The Makefile's installs, read from `make -n` (nothing runs): `make demo` installs the
runtime dependencies only, the test extras come with `make test`, `make lint` and plain
`make`, each stamp is touched after its install, and uv installs where it is on the PATH."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from tests.conftest import ROOT

# Set by an enclosing `make test` or a user's shell: they would steer the make run here.
STEERING = {"UV", "VENV", "MAKEFLAGS", "MFLAGS", "MAKELEVEL"}


def _dry_run(
    target: str | None, venv: Path, *, uv: str | None = "", path: str | None = None
) -> list[str]:
    """What ``make -n target`` would run with ``venv``; ``uv=None`` leaves UV to the PATH."""
    make = shutil.which("make")
    assert make is not None, "make is one of the Quickstart's requirements"
    env = {key: value for key, value in os.environ.items() if key not in STEERING}
    if path is not None:
        env["PATH"] = path
    args = [make, "-n", f"VENV={venv}"]
    if uv is not None:
        args.append(f"UV={uv}")
    if target is not None:
        args.append(target)
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return done.stdout.splitlines()


def _index(lines: list[str], part: str) -> int:
    found = [i for i, line in enumerate(lines) if part in line]
    assert len(found) == 1, (part, lines)
    return found[0]


def _installs(lines: list[str]) -> list[str]:
    return [line for line in lines if " install " in line]


def test_the_demo_installs_the_runtime_dependencies_only(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    lines = _dry_run("demo", venv)
    assert _installs(lines) == [
        f"{venv}/bin/python -m pip install --quiet --upgrade pip",
        f"{venv}/bin/python -m pip install --quiet --no-compile -e .",
    ]
    stamp = _index(lines, f"touch {venv}/.installed-stamp")
    assert _index(lines, "--no-compile -e .") < stamp < _index(lines, "ledger demo --out")
    assert not any(".test-stamp" in line for line in lines)


def test_make_test_after_make_demo_adds_the_test_extras(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    venv.mkdir()
    # The runtime stamp of an earlier `make demo`, newer than pyproject.toml.
    later = time.time() + 60
    (venv / ".installed-stamp").touch()
    os.utime(venv / ".installed-stamp", (later, later))
    assert _installs(_dry_run("demo", venv)) == []
    lines = _dry_run("test", venv)
    assert not any("-m venv" in line for line in lines)
    assert _installs(lines) == [
        f"{venv}/bin/python -m pip install --quiet --no-compile -e '.[test]'"
    ]
    stamp = _index(lines, f"touch {venv}/.test-stamp")
    assert _index(lines, "-e '.[test]'") < stamp < _index(lines, "ruff check")


def test_plain_make_builds_the_environment_with_the_test_extras(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    lines = _dry_run(None, venv)
    assert _installs(lines)[-1].endswith("-e '.[test]'")
    assert lines[-1] == f"touch {venv}/.test-stamp"


def test_uv_installs_where_it_is_on_the_path(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    tools = tmp_path / "bin"
    tools.mkdir()
    uv = tools / "uv"
    uv.write_text("#!/bin/sh\n")
    uv.chmod(0o755)
    lines = _dry_run("demo", venv, uv=None, path=str(tools))
    assert _installs(lines) == [f"{uv} pip install --quiet --python {venv}/bin/python -e ."]
    # Without uv on the PATH, or with UV emptied, pip installs.
    for without in (_dry_run("demo", venv, uv=None, path=str(tmp_path)), _dry_run("demo", venv)):
        assert (
            _installs(without)[-1] == f"{venv}/bin/python -m pip install --quiet --no-compile -e ."
        )
