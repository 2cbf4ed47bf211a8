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
    assert ok.stdout.splitlines()[-1].startswith("0 errors, 38 warnings in 4 campaigns")
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


@pytest.mark.parametrize(
    ("host", "message"),
    [
        ("localhost", "argument --host: expected an IP address, got 'localhost'"),
        ("300.1.1.1", "argument --host: expected an IP address, got '300.1.1.1'"),
        # An address this machine does not have: refused when it is bound, in one line.
        ("192.0.2.1", "error: cannot listen on 192.0.2.1:"),
        ("2001:db8::1", "error: cannot listen on [2001:db8::1]:1:"),
    ],
)
def test_simulate_refuses_an_address_it_cannot_listen_on(
    cli: CliRun, host: str, message: str
) -> None:
    status, _, err = cli("simulate", "--port", "1", "--host", host)
    assert status == 2
    assert message in err and len(err.strip().splitlines()) == 1


def test_simulate_with_a_bad_profile_is_one_line(cli: CliRun, tmp_path: Path) -> None:
    profile = tmp_path / "profile.toml"
    profile.write_text("decode_tok_s = -5\n")
    status, _, err = cli("simulate", "--port", "1", "--profile", str(profile))
    assert status == 2
    assert err.strip() == f"error: {profile}: decode_tok_s must be > 0, got -5"


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("abc", "expected a whole number, got 'abc'"),
        ("0", "must be at least 1, got 0"),
        ("-2", "expected a whole number, got '-2'"),
        ("1.5", "expected a whole number, got '1.5'"),
        # What int() takes, and a number no machine has processes for.
        (" 2 ", "expected a whole number, got ' 2 '"),
        ("1_0", "expected a whole number, got '1_0'"),
        ("\u0663", "expected a whole number, got '\u0663'"),
        ("1025", "must be at most 1024, got 1025"),
        ("99999999999999999999", "must be below 10**18, got 99999999999999999999... (20 digits)"),
        # Past 4,300 digits int() refuses with an error of its own.
        ("9" * 5000, f"must be below 10**18, got {'9' * 20}... (5000 digits)"),
    ],
)
def test_a_bad_ledger_jobs_is_refused_in_one_line_where_jobs_are_used(
    cli: CliRun, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str, why: str
) -> None:
    monkeypatch.setenv("LEDGER_JOBS", value)
    for command in (["verify", str(ROOT / "evidence")], ["seal", str(tmp_path)]):
        code, out, err = cli(*command)
        assert (code, out, err) == (2, "", f"error: LEDGER_JOBS: {why}\n")
    # --jobs wins; help, the version and commands without processes are not stopped.
    assert cli("verify", "--jobs", "1", str(ROOT / "evidence"))[0] == 0
    assert cli("--version")[0] == 0
    assert cli("sql", "--from", str(ROOT / "evidence"), "SELECT 1")[0] == 0
    code, out, _ = cli("verify", "--help")
    assert code == 0 and "LEDGER_JOBS" in out


@pytest.mark.parametrize("value", ["", "3"])
def test_ledger_jobs_sets_the_default(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    from ledger.cli._jobs import jobs_of as _jobs_of
    from ledger.cli._main import _parser

    monkeypatch.setenv("LEDGER_JOBS", value)
    assert _jobs_of(_parser(plugins=False).parse_args(["verify", "x"])) == (int(value or 0) or None)
    assert _jobs_of(_parser(plugins=False).parse_args(["verify", "--jobs", "1", "x"])) == 1


@pytest.mark.parametrize(
    "args",
    [
        ["verify", ""],
        ["verify", "--tickets", "", str(ROOT / "evidence")],
        ["publish", str(ROOT / "evidence"), "--out", ""],
        ["derive", "", "--baseline", "a", "--candidate", "b"],
        ["sql", "--from", "", "SELECT 1"],
        ["export", "--from", "", "--parquet", "x"],
        ["run", "", "--raw-dir", "x"],
        # In a mutually exclusive group.
        [
            "signature",
            "verify",
            "--bundle",
            "b",
            "--identity",
            "a",
            "--issuer",
            "i",
            "--trusted-root",
            "",
            "f",
        ],
        ["sign", "--trust-config", "", "x"],
    ],
)
def test_an_empty_path_is_refused_not_read_as_the_current_folder(
    cli: CliRun, args: list[str]
) -> None:
    # Path("") is "."; `sql --from ''` read the folder the command ran in.
    code, out, err = cli(*args)
    assert code == 2 and out == "" and len(err.splitlines()) == 1
    assert ": an empty path (see ledger " in err
