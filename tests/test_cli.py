from __future__ import annotations

import subprocess
import sys

import pytest

from ledger import __version__
from tests.conftest import ROOT, CliRun

COMMANDS = ["verify", "seal"]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(cli: CliRun, command: str) -> None:
    status, out, _ = cli(command, "--help")
    assert status == 0
    assert f"usage: ledger {command}" in out


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_is_documented_in_the_readme(command: str) -> None:
    assert f"ledger {command}" in (ROOT / "README.md").read_text()


def test_version(cli: CliRun) -> None:
    status, out, _ = cli("--version")
    assert status == 0
    assert out.strip() == f"ledger {__version__}"


def test_console_script_exit_codes() -> None:
    ledger = [sys.executable, "-m", "ledger"]
    ok = subprocess.run(
        [*ledger, "verify", str(ROOT / "evidence")], capture_output=True, text=True, check=False
    )
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.splitlines()[-1].startswith("0 errors, 37 warnings in 3 campaigns")
    missing = subprocess.run(
        [*ledger, "verify", "/no/such"], capture_output=True, text=True, check=False
    )
    assert missing.returncode == 2
    assert missing.stderr.strip() == "ledger verify: error: /no/such: No such file or directory"
