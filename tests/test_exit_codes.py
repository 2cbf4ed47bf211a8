"""The README's exit-status table holds for every command: each is run on a missing path and
on a malformed file, and must exit with the status the table gives, in one line."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, CliRun, parser_commands

TABLE_ROW = re.compile(r"^\| `([a-z ]+)` \| (\d|-) \| (\d|-) \| (\d|-) \| .+ \|$")

# The command line of each command with PATH in the place the table means.
ARGV = {
    "verify": ["verify", "PATH"],
    "seal": ["seal", "PATH"],
    "db build": ["db", "build", "PATH", "--db", "OUT/new.duckdb"],
    "sql": ["sql", "SELECT 1", "--from", "PATH"],
    "export": ["export", "--from", "PATH", "--parquet", "OUT/export"],
    "derive": ["derive", "PATH", "--baseline", "a", "--candidate", "b"],
    "import": [
        "import",
        "vllm",
        "PATH",
        "--raw-dir",
        "OUT/raw",
        "--campaign",
        "2026-11-30-x",
        "--arm",
        "a",
    ],
    "publish": ["publish", "PATH", "--out", "OUT/public"],
    "signature verify": [
        "signature",
        "verify",
        "PATH",
        "--bundle",
        "PATH",
        "--identity",
        "a@example.com",
        "--issuer",
        "https://issuer.example",
    ],
    "decide": ["decide", "PATH"],
    "gate": ["gate", "PATH"],
    "report": ["report", "PATH"],
    "ticket new": ["ticket", "new", "PATH"],
    "history": ["history", "PATH", "--html", "OUT/history.html"],
    "approve": ["approve", "PATH", "--no-sign"],
    "audit": ["audit", "PATH", "--identity", "a@example.com", "--issuer", "https://issuer.example"],
    "demo": ["demo", "--out", "PATH"],
    "bench": [
        "bench",
        "--base-url",
        "http://127.0.0.1:9",
        "--model",
        "m",
        "--dataset-name",
        "sharegpt",
        "--dataset-path",
        "PATH",
        "--raw-dir",
        "OUT/raw",
    ],
    "run": ["run", "PATH", "--raw-dir", "OUT/raw"],
    "sign": ["sign", "PATH"],
    "simulate": ["simulate", "--port", "1", "--profile", "PATH"],
}


# Where the one line on stderr need not name the path: verify prints its findings (which
# name it) on stdout, and signature verify names what it failed to parse, the bundle.
NOT_NAMING = {("verify", "malformed"), ("signature verify", "malformed")}


def _table() -> dict[str, tuple[str, str, str]]:
    rows = {}
    for line in (ROOT / "README.md").read_text().splitlines():
        match = TABLE_ROW.match(line)
        if match:
            rows[match[1]] = (match[2], match[3], match[4])
    return rows


def test_the_table_names_every_command() -> None:
    assert set(_table()) == set(parser_commands()) == set(ARGV)


CASES = [
    (command, kind, expected)
    for command, (missing, malformed, _) in _table().items()
    for kind, expected in (("missing", missing), ("malformed", malformed))
    if expected != "-"
]
PIPE_CASES = [(command, pipe) for command, (_, _, pipe) in _table().items() if pipe != "-"]


@pytest.mark.parametrize(
    ("command", "kind", "expected"), CASES, ids=[f"{c}-{k}" for c, k, _ in CASES]
)
def test_every_command_exits_as_the_table_says(
    cli: CliRun, tmp_path: Path, command: str, kind: str, expected: str
) -> None:
    if kind == "missing":
        path = tmp_path / "no-such-thing"
    else:
        path = tmp_path / ("broken.toml" if command in ("run", "simulate") else "broken.json")
        path.write_text('{"schema": [1,\n' if path.suffix == ".json" else "x = [\n")
    out = tmp_path / "out"
    out.mkdir()
    argv = [
        a.replace("PATH", str(path)).replace("OUT", str(out)) if "PATH" in a or "OUT" in a else a
        for a in ARGV[command]
    ]
    status, stdout, err = cli(*argv)
    assert status == int(expected), (argv, stdout, err)
    assert "Traceback" not in err
    if (command, kind) not in NOT_NAMING:
        assert path.name in err, err
    if kind == "missing":
        # A path that is not there is said to be missing, not to be something else.
        assert "not a folder" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    # verify prints its findings on stdout and a verdict on stderr; everything else one line.
    assert len(lines) == 1, err
    assert lines[0].startswith(("error:", "ledger ", "FAIL", "usage:")), err
    # Nothing was written for a command that could not run.
    if status == 2:
        assert not any(out.iterdir()), list(out.iterdir())


@pytest.mark.parametrize("command", ["gate", "report"])
def test_a_root_of_campaigns_is_not_judged_as_one(
    cli: CliRun, tmp_path: Path, command: str
) -> None:
    """gate listed every rule as failed for an arm '' of a folder of campaigns, and report
    asked for it to be sealed (which seal refuses): neither is a campaign."""
    campaign = tmp_path / "root" / "2026-11-30-a"
    campaign.mkdir(parents=True)
    (campaign / "manifest.json").write_text("{}")
    status, out, err = cli(command, str(tmp_path / "root"))
    assert status == 2 and out == ""
    assert err == (
        f"ledger {command}: error: {tmp_path / 'root'}: not a campaign folder (it is not named "
        "like one and holds none of manifest.json, SHA256SUMS, summary.json, run-manifest.json)\n"
    )
    (tmp_path / "file.json").write_text("{}")
    status, out, err = cli(command, str(tmp_path / "file.json"))
    assert (status, out, err) == (
        2,
        "",
        f"ledger {command}: error: {tmp_path / 'file.json'}: not a folder\n",
    )


def _run_with_deadline(argv: list[str], cwd: Path) -> tuple[int, str]:
    # A process of its own, with a deadline: a command that waits on a pipe would hang an
    # in-process test forever.
    done = subprocess.run(
        [sys.executable, "-m", "ledger", *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    return done.returncode, done.stderr


NAMED_TOO = [
    ["verify", "--policy", "PIPE", "FOLDER"],
    ["decide", "FOLDER", "--policy", "PIPE"],
    ["gate", "FOLDER", "--policy", "PIPE"],
    ["signature", "verify", "FILE", "--bundle", "PIPE", "--identity", "a@x.example",
     "--issuer", "https://issuer.example"],
    ["signature", "verify", "PIPE", "--bundle", "FILE", "--identity", "a@x.example",
     "--issuer", "https://issuer.example"],
]  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "expected"),
    [(ARGV[command], int(status)) for command, status in PIPE_CASES]
    + [(argv, 2) for argv in NAMED_TOO],
    ids=[command for command, _ in PIPE_CASES] + [" ".join(a[:3]) for a in NAMED_TOO],
)
def test_a_named_pipe_is_refused_not_waited_on(
    tmp_path: Path, argv: list[str], expected: int
) -> None:
    pipe = tmp_path / "fifo-input"
    os.mkfifo(pipe)
    folder = tmp_path / "2026-11-30-x"
    folder.mkdir()
    (folder / "manifest.json").write_text("{}")
    out = tmp_path / "out"
    out.mkdir()
    places = {"PATH": pipe, "PIPE": pipe, "OUT": out, "FOLDER": folder, "FILE": ROOT / "README.md"}
    filled = list(argv)
    for index in range(len(filled)):
        for name, value in places.items():
            filled[index] = filled[index].replace(name, str(value))
    status, err = _run_with_deadline(filled, tmp_path)
    assert status == expected, (filled, err)
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and pipe.name in lines[0], err
    # Where a file was expected, the pipe is named as what it is.
    if "folder" not in lines[0] and "exists" not in lines[0]:
        assert "a named pipe, not a regular file" in lines[0], err
    assert not any(out.iterdir())


def test_dev_zero_is_refused_before_a_byte_is_read(cli: CliRun) -> None:
    status, _, err = cli("signature", "verify", "/dev/zero", "--bundle", str(ROOT / "README.md"),
                         "--identity", "a@x.example", "--issuer", "https://issuer.example")  # fmt: skip
    assert status == 2
    assert (
        err == "ledger signature verify: error: /dev/zero: a character device, not a regular file\n"
    )


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["decide", "CAMPAIGN", "--candidate", "nosuch"], "no arm named 'nosuch'"),
        (["gate", "CAMPAIGN", "--candidate", "nosuch"], "no arm 'nosuch'"),
        (["approve", "CAMPAIGN", "--candidate", "nosuch", "--no-sign"], "no arm named 'nosuch'"),
        (["derive", "CAMPAIGN", "--baseline", "linux", "--candidate", "nosuch"],
         "has no cells of arm 'nosuch'"),
        (["derive", "CAMPAIGN", "--baseline", "linux", "--candidate", "linux"],
         "the same arm 'linux'"),
        (["derive", "CAMPAIGN", "--baseline", "windows", "--candidate", "linux", "--differs",
          "nosuch"], "'nosuch': neither arm's identity nor request has this key"),
        (["sql", "SELECT 1", "--from", "NOTES"], "no campaign folder here"),
        (["db", "build", "NOTES", "--db", "OUT/x.duckdb"], "no campaign folder here"),
        (["export", "--from", "NOTES", "--parquet", "OUT/x"], "no campaign folder here"),
        (["sql", "SELECT 1", "--from", "/proc"], "no campaign folder here"),
        (["sql", "SELECT 1", "--from", "MARKER"], "holds anvil-ledger-export.json but not"),
        # An output that cannot be made there is named as given, not by a temporary name.
        (["db", "build", "CAMPAIGN", "--db", "/proc/x.db"], "/proc/x.db: cannot be written there"),
        (["export", "--from", "CAMPAIGN", "--parquet", "/proc/x"], "/proc/x: cannot be written there"),
        (["sql", "SELECT 1", "--from", "/dev"], "no campaign folder here"),
        (["sign", "PUBLISHED", "--identity-token", "garbage", "--replace"],
         "the identity token is not usable"),
    ],
)  # fmt: skip
def test_a_mistyped_argument_is_unusable_input(
    cli: CliRun, two_arm_campaign: Path, tmp_path: Path, argv: list[str], said: str
) -> None:
    campaign = tmp_path / two_arm_campaign.name
    shutil.copytree(two_arm_campaign, campaign)
    notes = tmp_path / "notes"
    (notes / "foo").mkdir(parents=True)
    (notes / "foo" / "x.txt").write_text("not a campaign\n")
    out = tmp_path / "out"
    out.mkdir()
    before = sorted(p.relative_to(campaign) for p in campaign.rglob("*"))
    published = tmp_path / "public" / "2026-11-29-simulated-example"
    if "PUBLISHED" in argv:
        shutil.copytree(ROOT / "evidence" / published.name, published)
    marker = tmp_path / "marker-only"
    marker.mkdir()
    (marker / "anvil-ledger-export.json").write_text("{}")
    places = {"CAMPAIGN": campaign, "NOTES": notes, "OUT": out, "PUBLISHED": published,
              "MARKER": marker}  # fmt: skip
    filled = list(argv)
    for index in range(len(filled)):
        for name, value in places.items():
            filled[index] = filled[index].replace(name, str(value))
    status, stdout, err = cli(*filled)
    assert (status, stdout) == (2, ""), err
    assert said in err and len(err.splitlines()) == 1, err
    assert sorted(p.relative_to(campaign) for p in campaign.rglob("*")) == before
    assert not any(out.iterdir())


@pytest.mark.parametrize("rows", [1, 300_000])
@pytest.mark.parametrize("unbuffered", [True, False])
def test_a_reader_that_goes_away_ends_the_command_quietly(
    two_arm_campaign: Path, rows: int, unbuffered: bool
) -> None:
    """``ledger sql ... | head``: the pipe closes before the rows are written, while they
    are written (many rows), or when they are flushed at the end (one row, buffered)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "ledger", "sql", f"SELECT * FROM range({rows})", "--from",
             str(two_arm_campaign)],
            stdout=write, stderr=subprocess.PIPE, text=True, timeout=120, check=False, env=env,
        )  # fmt: skip
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (141, "")


@pytest.mark.parametrize("command", ["sql", "verify"])
def test_a_reader_that_reads_a_little_then_goes_ends_the_command_quietly(
    two_arm_campaign: Path, tmp_path: Path, command: str
) -> None:
    """``| head -1`` reads the first line and goes, while the command is mid-write: with
    unbuffered output (PYTHONUNBUFFERED) the rest was dropped unsaid and the command
    exited 0, as if it had said everything."""
    if command == "sql":
        argv = ["sql", "SELECT * FROM range(300000)", "--from", str(two_arm_campaign)]
    else:
        # Thousands of findings: a campaign of unlisted files.
        campaign = tmp_path / two_arm_campaign.name
        shutil.copytree(two_arm_campaign, campaign)
        for index in range(3000):
            (campaign / f"stray-{index:04}.txt").write_text("x\n")
        argv = ["verify", str(campaign)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    child = subprocess.Popen(
        [sys.executable, "-m", "ledger", *argv],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )  # fmt: skip
    assert child.stdout is not None and child.stderr is not None
    assert child.stdout.read(10)
    child.stdout.close()
    try:
        status = child.wait(timeout=120)
    finally:
        child.kill()
    assert (status, child.stderr.read()) == (141, b"")


def _returned_statuses(path: Path) -> set[int]:
    """Every whole number a module's functions return (directly or as a branch of a
    conditional) or exit with."""
    found: set[int] = set()

    def constants(node: ast.expr | None) -> None:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            found.add(node.value)
        elif isinstance(node, ast.IfExp):
            constants(node.body)
            constants(node.orelse)

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Return):
            constants(node.value)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") in ("exit", "_exit"):
            constants(node.args[0] if node.args else None)
    return found


def test_the_command_line_returns_only_the_statuses_it_documents() -> None:
    from ledger.cli import _main as _cli
    from ledger.errors import Error
    from ledger.exit_status import MEANINGS, ExitStatus

    assert set(MEANINGS) == set(ExitStatus)
    returned = set().union(
        *(
            _returned_statuses(ROOT / module)
            for module in ("ledger/cli/_main.py", "ledger/cli/_decisions.py", "runners/_cli.py")
        )
    )
    assert returned >= {0, 1, 2}
    signalled = {128 + signum for signum in _cli._STOPPING} | {_cli.SIGPIPE_STATUS}
    raised = {kind.exit_status for kind in _subclasses(Error)}
    assert returned | signalled | raised <= set(ExitStatus)


def _subclasses(kind: type) -> list[type]:
    import ledger.derivation._derive  # noqa: F401 - defines an error of its own

    return [kind, *(s for sub in kind.__subclasses__() for s in _subclasses(sub))]
