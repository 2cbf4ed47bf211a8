"""The README's exit-code table holds for every command: each is run on a missing path and
on a malformed file, and must exit with the status the table gives, in one line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import ROOT, CliRun, parser_commands

TABLE_ROW = re.compile(r"^\| `([a-z ]+)` \| (\d|-) \| (\d|-) \| .+ \|$")

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
    "approve": ["approve", "PATH", "--no-sign"],
    "audit": ["audit", "PATH", "--identity", "a@example.com", "--issuer", "https://issuer.example"],
    "demo": ["demo", "--out", "PATH"],
    "run": ["run", "PATH", "--raw-dir", "OUT/raw"],
    "sign": ["sign", "PATH"],
    "simulate": ["simulate", "--port", "1", "--profile", "PATH"],
}


# Where the one line on stderr need not name the path: verify prints its findings (which
# name it) on stdout, and signature verify names what it failed to parse, the bundle.
NOT_NAMING = {("verify", "malformed"), ("signature verify", "malformed")}


def _table() -> dict[str, tuple[str, str]]:
    rows = {}
    for line in (ROOT / "README.md").read_text().splitlines():
        match = TABLE_ROW.match(line)
        if match:
            rows[match[1]] = (match[2], match[3])
    return rows


def test_the_table_names_every_command() -> None:
    assert set(_table()) == set(parser_commands()) == set(ARGV)


CASES = [
    (command, kind, expected)
    for command, (missing, malformed) in _table().items()
    for kind, expected in (("missing", missing), ("malformed", malformed))
    if expected != "-"
]


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
