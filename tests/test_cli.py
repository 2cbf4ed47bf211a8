from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ledger import __version__
from tests.conftest import ROOT, CliRun, parser_commands

COMMANDS = parser_commands()


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(cli: CliRun, command: str) -> None:
    status, out, _ = cli(*command.split(), "--help")
    assert status == 0
    assert f"usage: ledger {command}" in out


def test_the_commands_are_all_there() -> None:
    assert len(COMMANDS) >= 19 and {"verify", "gate", "ticket new", "audit"} <= set(COMMANDS)


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
    assert ok.stdout.splitlines()[-1].startswith("0 errors, 37 warnings in 4 campaigns")
    missing = subprocess.run(
        [*ledger, "verify", "/no/such"], capture_output=True, text=True, check=False
    )
    assert missing.returncode == 2
    assert missing.stderr.strip() == "ledger verify: error: /no/such: No such file or directory"


def test_simulate_serves_until_stopped(tmp_path: Path) -> None:
    import socket
    import time

    import httpx

    profile = tmp_path / "profile.toml"
    profile.write_text('model = "cli-sim"\n')
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ledger",
            "simulate",
            "--port",
            str(port),
            "--profile",
            str(profile),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                models = httpx.get(f"http://127.0.0.1:{port}/v1/models", trust_env=False)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "ledger simulate did not answer"
                time.sleep(0.05)
        assert models.json()["data"][0]["id"] == "cli-sim"
    finally:
        process.terminate()
        _, err = process.communicate(timeout=10)
    assert f"serving 'cli-sim' on http://127.0.0.1:{port}/v1" in err


def test_simulate_with_a_bad_profile_is_one_line(cli: CliRun, tmp_path: Path) -> None:
    profile = tmp_path / "profile.toml"
    profile.write_text("decode_tok_s = -5\n")
    status, _, err = cli("simulate", "--port", "1", "--profile", str(profile))
    assert status == 2
    assert err.strip() == f"error: {profile}: decode_tok_s must be > 0, got -5"


@pytest.mark.parametrize("value", ["abc", "0", "-2", "1.5"])
def test_a_bad_ledger_jobs_is_refused_in_one_line(
    cli: CliRun, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("LEDGER_JOBS", value)
    code, out, err = cli("verify", str(ROOT / "evidence"))
    assert code == 2 and out == ""
    assert err.startswith("error: LEDGER_JOBS: ") and value in err
    assert len(err.strip().splitlines()) == 1


def test_ledger_jobs_sets_the_default(cli: CliRun, monkeypatch: pytest.MonkeyPatch) -> None:
    from ledger._cli import _parser

    monkeypatch.setenv("LEDGER_JOBS", " 3 ")
    assert _parser(plugins=False).parse_args(["verify", "x"]).jobs == 3
    assert _parser(plugins=False).parse_args(["verify", "--jobs", "1", "x"]).jobs == 1
    monkeypatch.setenv("LEDGER_JOBS", "")
    assert _parser(plugins=False).parse_args(["verify", "x"]).jobs is None
