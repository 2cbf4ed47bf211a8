"""Every command against mistakes and hostile input: one test per finding of the issue
"Every command holds", each reproducing what was seen, and the mechanisms behind them."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from ledger.errors import InvalidArtifact
from ledger.evidence import manifest
from ledger.formats.jsonio import read_json, write_json
from ledger.formats.outputs import Changes, OutputExists
from ledger.hashing import sha256_file
from tests import cells
from tests.conftest import ROOT, TWO_ARMS_PLAN, CliRun, forge_seal, verify_json

PUBLISHED = "2026-11-29-simulated-example"
VLLM = ROOT / "tests" / "assets" / "imports" / "vllm_save_detailed.json"


def _files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` with its bytes (hidden temporary files included)."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A copy of the repository's evidence/ and tickets/."""
    for name in ("evidence", "tickets"):
        shutil.copytree(ROOT / name, tmp_path / name)
    return tmp_path


@pytest.fixture
def raw(tmp_path: Path, two_arm_campaign: Path) -> Path:
    """A copy of a sealed raw campaign of two simulated arms."""
    folder = tmp_path / "raw" / two_arm_campaign.name
    shutil.copytree(two_arm_campaign, folder)
    return folder


# 1. Tampering laundered ------------------------------------------------------------------


def test_tampering_is_not_laundered_by_report_or_ticket(repo: Path, cli: CliRun) -> None:
    campaign = repo / "evidence" / PUBLISHED
    summary = campaign / "summary.json"
    text = summary.read_text()
    assert "+25.0%" in text
    summary.write_text(text.replace("+25.0%", "+66.7%"))
    before = _files(repo)
    for argv in (
        ["report", str(campaign)],
        ["ticket", "new", str(campaign), "--slug", "again", "--created", "2026-11-30"],
        ["seal", str(campaign)],
        # Refused before any credential is looked for: no signature over changed files.
        ["sign", str(campaign)],
    ):
        status, _, err = cli(*argv)
        assert status == 1, argv
        assert "summary.json (changed)" in err and "--reseal-after-review" in err
        assert _files(repo) == before, argv
    status, report = verify_json(cli, repo / "evidence")
    assert status == 1 and "hash-mismatch" in {f["code"] for f in report["findings"]}
    # Reviewed, the change is sealed, and the review stays visible to every verifier. The
    # report then differs from the one in place, which is replaced only when asked.
    status, _, err = cli("report", str(campaign), "--reseal-after-review")
    assert status == 2 and "report.md exists with other content" in err
    assert _files(repo) == before
    status, _, err = cli("report", str(campaign), "--reseal-after-review", "--replace")
    assert status == 0, err
    document = read_json(campaign / "manifest.json")
    (review,) = document["reviews"]
    assert review["command"] == "report"
    (change,) = review["changes"]
    assert change["path"] == "summary.json" and change["change"] == "changed"
    assert change["sealed_sha256"] != change["sha256"]
    _, report = verify_json(cli, campaign)
    assert [f["pointer"] for f in report["findings"] if f["code"] == "resealed-after-review"] == [
        "/reviews/0"
    ]
    # A later seal keeps the record.
    assert cli("seal", str(campaign))[0] == 0
    assert read_json(campaign / "manifest.json")["reviews"] == document["reviews"]


def test_tampered_raw_campaign_is_not_derived_decided_or_published(
    raw: Path, tmp_path: Path, cli: CliRun
) -> None:
    cell = raw / "linux" / "capacity" / "ctx256-c1-nothink.json"
    document = cells.load(cell)
    document["requests"][3]["end_ns"] -= 1_000_000
    cells.save(cell, document)
    before = _files(raw)
    for argv in (
        ["derive", str(raw), "--baseline", "windows", "--candidate", "linux", "--differs", "os"],
        ["decide", str(raw)],
        ["publish", str(raw), "--out", str(tmp_path / "public")],
    ):
        status, _, err = cli(*argv)
        assert status == 1, (argv, err)
        assert "linux/capacity/ctx256-c1-nothink.json (changed)" in err
    assert _files(raw) == before
    assert not (tmp_path / "public").exists()


def test_a_resumed_run_refuses_a_cell_changed_since_its_seal(
    raw: Path, tmp_path: Path, cli: CliRun
) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(TWO_ARMS_PLAN)
    cell = raw / "linux" / "capacity" / "ctx256-c1-nothink.json"
    document = cells.load(cell)
    document["requests"][1]["end_ns"] += 1_000_000_000
    cells.save(cell, document)
    before = _files(raw)
    status, _, err = cli("run", str(plan), "--raw-dir", str(raw.parent), "--resume")
    assert status == 1
    assert "linux/capacity/ctx256-c1-nothink.json (changed)" in err
    assert _files(raw) == before


def test_derive_never_replaces_a_comparison_with_another(raw: Path, cli: CliRun) -> None:
    argv = ["derive", str(raw), "--baseline", "windows", "--candidate", "linux"]
    declared = ["--differs", "os", "--differs", "simulated_profile"]
    assert cli(*argv, *declared)[0] == 0
    before = _files(raw)
    assert cli(*argv, *declared)[0] == 0  # the same comparison again changes nothing
    assert _files(raw) == before
    status, _, err = cli(*argv)  # without the declared differences: another comparison
    assert status == 2 and "exists with other content" in err
    assert _files(raw) == before
    assert cli(*argv, "--replace")[0] == 0
    assert read_json(raw / "derived/ab-comparison-windows-vs-linux.json")["matched"] is False


def test_an_unsealed_campaign_is_not_extended(raw: Path, cli: CliRun) -> None:
    (raw / manifest.MANIFEST_NAME).unlink()
    (raw / manifest.SUMS_NAME).unlink()
    status, _, err = cli("derive", str(raw), "--baseline", "windows", "--candidate", "linux")
    assert status == 1 and "has lost its seal" in err
    assert not (raw / "derived").exists()


# 2. ledger sql reads and writes anything ---------------------------------------------------


SQL_REFUSALS = [
    ("SELECT * FROM read_text('/etc/passwd')", "Permission Error"),
    ("SELECT * FROM read_csv('/etc/passwd')", "Permission Error"),
    ("COPY (SELECT 1) TO 'OUT/x.csv'", "COPY is not allowed"),
    ("ATTACH 'OUT/x.duckdb'", "ATTACH is not allowed"),
    ("INSTALL httpfs", "INSTALL or LOAD is not allowed"),
    ("LOAD httpfs", "INSTALL or LOAD is not allowed"),
    ("SET enable_external_access = true", "SET is not allowed"),
    ("RESET lock_configuration", "is not allowed"),
    ("CREATE TABLE t AS SELECT 1", "CREATE is not allowed"),
    ("SELECT 1; COPY (SELECT 1) TO 'OUT/y.csv'", "2 statements; ledger sql runs one"),
    ("SELECT 1; SELECT 2", "2 statements; ledger sql runs one"),
    ("PRAGMA version", "PRAGMA is not allowed"),
    ("CALL duckdb_settings()", "CALL is not allowed"),
    ("CHECKPOINT", "CHECKPOINT (CALL) is not allowed"),
    ("WITH x AS (SELECT 1) INSERT INTO t SELECT 1", "SQL: INSERT is not allowed"),
    ("EXPLAIN ANALYZE CREATE TABLE t AS SELECT 1", "EXPLAIN is not allowed"),
    ("EXPLAIN ANALYZE COPY (SELECT 1) TO 'OUT/z.csv'", "EXPLAIN is not allowed"),
]


@pytest.mark.parametrize(("statement", "refusal"), SQL_REFUSALS)
def test_sql_reads_and_writes_nothing_outside_the_evidence(
    cli: CliRun, tmp_path: Path, statement: str, refusal: str
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    status, stdout, err = cli(
        "sql", statement.replace("OUT", str(out)), "--from", str(ROOT / "evidence" / PUBLISHED)
    )
    assert status == 2, (stdout, err)
    assert err.startswith("error: SQL: ") and err.count("\n") == 1
    assert refusal in err
    assert "root:" not in stdout
    assert not any(out.iterdir())


class _Spill(str):
    """Equal to the private spill folder ledger gives DuckDB, whatever its random name."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and "/ledger-duckdb-" in other and other.endswith("/")

    __hash__ = str.__hash__


ANY_SPILL = _Spill()


def test_sql_configuration_is_locked(cli: CliRun) -> None:
    status, out, _ = cli(
        "sql",
        "SELECT current_setting('enable_external_access') AS external, "
        "current_setting('lock_configuration') AS locked, "
        "current_setting('autoinstall_known_extensions') AS install, "
        "current_setting('autoload_known_extensions') AS load, "
        "current_setting('allow_community_extensions') AS community, "
        "current_setting('allowed_directories') AS allowed",
        "--from",
        str(ROOT / "evidence" / PUBLISHED),
        "--format",
        "json",
    )
    assert status == 0
    assert json.loads(out) == [
        {
            "external": False,
            "locked": True,
            "install": False,
            "load": False,
            "community": False,
            "allowed": [ANY_SPILL],
        }
    ]


# 3. SQL injection through a path ---------------------------------------------------------


def test_sql_injection_through_a_path_runs_nothing(
    cli: CliRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    hostile = "x' (FORMAT csv); COPY (SELECT 42) TO 'pwned.csv' (FORMAT csv); --"
    status, _, err = cli("export", "--from", str(ROOT / "evidence"), "--parquet", hostile)
    assert status == 0, err
    assert not (tmp_path / "pwned.csv").exists()
    assert (tmp_path / hostile / "request_rows").is_dir()
    # A folder with an apostrophe, as a source and as an export read back.
    quoted = tmp_path / "it's evidence"
    shutil.copytree(ROOT / "evidence" / PUBLISHED, quoted / PUBLISHED)
    for source in (quoted, tmp_path / hostile):
        status, out, err = cli("sql", "SELECT count(*) AS n FROM requests", "--from", str(source))
        assert status == 0, err
        assert out.split() == ["n", "106"]


# 4. Writes outside --raw-dir -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--stage", "/ABS/stage"),
        ("--stage", "../../.."),
        ("--stage", "a/b"),
        ("--arm", "../x"),
        ("--arm", "/ABS/arm"),
        ("--campaign", "/ABS/2026-11-30-x"),
        ("--campaign", "../2026-11-30-x"),
        ("--campaign", "not-a-campaign"),
    ],
)
def test_import_writes_nothing_outside_raw_dir(
    cli: CliRun, tmp_path: Path, option: str, value: str
) -> None:
    raw_dir = tmp_path / "deep" / "raw"
    raw_dir.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    argv = {"--campaign": "2026-11-30-import", "--arm": "vllm", "--stage": "imported"}
    argv[option] = value.replace("/ABS", str(outside))
    before = sorted(p for p in tmp_path.rglob("*"))
    status, _, err = cli(
        "import", "vllm", str(VLLM), "--raw-dir", str(raw_dir), *sum(argv.items(), ())
    )
    assert status == 2, err
    assert f"name {value.replace('/ABS', str(outside))!r} is not valid" in err
    assert sorted(p for p in tmp_path.rglob("*")) == before


# 5. The private digest map published ---------------------------------------------------------


def test_publish_of_an_evidence_root_is_refused(repo: Path, tmp_path: Path, cli: CliRun) -> None:
    status, _, err = cli("publish", str(repo / "evidence"), "--out", str(tmp_path / "public"))
    assert status == 2
    assert "not a sealed campaign folder" in err
    assert not (tmp_path / "public").exists()
    assert not list(repo.glob("*.publish-map.json"))


def test_a_digest_map_inside_a_campaign_is_never_published(
    raw: Path, tmp_path: Path, cli: CliRun
) -> None:
    status, _, err = cli("publish", str(raw), "--out", str(tmp_path / "public"))
    assert status == 0, err
    shutil.rmtree(tmp_path / "public")
    # The map, moved into the raw campaign and sealed there.
    shutil.move(raw.parent / f"{raw.name}.publish-map.json", raw / "notes.json")
    forge_seal(raw)
    status, _, err = cli("publish", str(raw), "--out", str(tmp_path / "public"))
    assert status == 1
    assert "notes.json: a private raw-to-public digest map" in err
    assert not (tmp_path / "public").exists()


# 6. Memory exhaustion from a typo ------------------------------------------------------------


def test_a_context_target_typo_is_refused_before_anything_runs(cli: CliRun, tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(TWO_ARMS_PLAN.replace("[256, 1024]", "[256, 10000000000]"))
    status, _, err = cli("run", str(plan), "--raw-dir", str(tmp_path / "raw"))
    assert status == 2
    assert "10000000000 tokens is beyond any serving context window" in err
    assert not (tmp_path / "raw").exists()
    # Beyond a simulated arm's own limit.
    plan.write_text(TWO_ARMS_PLAN.replace("[256, 1024]", "[256, 200000]"))
    status, _, err = cli("run", str(plan), "--raw-dir", str(tmp_path / "raw"))
    assert status == 2
    assert "context target 200000 is beyond the endpoint's context of 131072 tokens" in err
    assert not (tmp_path / "raw").exists()


def test_a_target_beyond_the_endpoints_reported_context_is_refused(
    cli: CliRun, tmp_path: Path, simulator: object
) -> None:
    endpoint = simulator(context_limit=4096)  # type: ignore[operator]
    plan = tmp_path / "plan.toml"
    plan.write_text(
        f"""
campaign_id = "2026-11-30-context"
[[arms]]
name = "real"
base_url = "{endpoint.base_url}"
model = "anvil-sim"
[[stages]]
kind = "capacity"
context_targets = [1024, 8192]
requests = 2
max_tokens = 8
"""
    )
    status, _, err = cli("run", str(plan), "--raw-dir", str(tmp_path / "raw"))
    assert status == 2
    assert (
        "cell ctx8192-c1-nothink: context target 8192 is beyond the endpoint's context of "
        "4096 tokens (max_model_len at /v1/models)" in err
    )
    # Nothing was measured: the folder the run made is gone, so the corrected plan runs
    # (it held the refused plan, which refused the corrected one, with or without --resume).
    folder = tmp_path / "raw" / "2026-11-30-context"
    assert not folder.exists()
    plan.write_text(plan.read_text().replace("[1024, 8192]", "[1024]"))
    status, _, err = cli("run", str(plan), "--raw-dir", str(tmp_path / "raw"))
    assert status == 0, err
    assert verify_json(cli, folder)[0] == 0


def test_calibration_never_builds_a_prompt_beyond_its_bound() -> None:
    import asyncio

    from runners.workload import calibrate

    sizes: list[int] = []

    async def probe(words: int) -> int:
        sizes.append(words)
        return 20 + int(words * 0.5)  # a tokenizer that packs two words in a token

    calibration = asyncio.run(calibrate("a", 100_000, probe, hint_words=None, max_words=131_072))
    assert len(sizes) >= 2 and max(sizes) <= 131_072
    assert calibration.error == "the target needs more than 131072 filler words, the most sent"
    # Within its bound it lands as before.
    sizes.clear()
    calibration = asyncio.run(calibrate("a", 50_000, probe, hint_words=None, max_words=131_072))
    assert calibration.ok and max(sizes) <= 131_072


def test_the_endpoints_limit_bounds_calibration_and_the_plan(
    cli: CliRun, tmp_path: Path, simulator: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    import runners.campaign._cells
    from runners.plan import Stage, check_context, parse_plan

    bounds: list[int] = []
    real = runners.campaign._cells.calibrate

    async def recording(*args: object, max_words: int, **kwargs: object) -> object:
        bounds.append(max_words)
        return await real(*args, max_words=max_words, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(runners.campaign._cells, "calibrate", recording)
    endpoint = simulator(context_limit=4096)  # type: ignore[operator]
    plan = tmp_path / "plan.toml"
    plan.write_text(
        f'campaign_id = "2026-11-30-bound"\n[[arms]]\nname = "real"\n'
        f'base_url = "{endpoint.base_url}"\nmodel = "anvil-sim"\n[[stages]]\n'
        'kind = "capacity"\ncontext_targets = [512, 4096]\nrequests = 1\nmax_tokens = 4\n'
    )
    status, _, err = cli("run", str(plan), "--raw-dir", str(tmp_path / "raw"))
    assert status == 0, err
    assert bounds == [4096, 4096]
    # A target at the limit runs; one token more is refused.
    stage = parse_plan(tomllib.loads(plan.read_text())).stages[0]
    assert isinstance(stage, Stage)
    check_context("real", [stage], 4096, "test")
    with pytest.raises(InvalidArtifact, match="context target 4096 is beyond"):
        check_context("real", [stage], 4095, "test")


# 7. Wrong statistics, silently ---------------------------------------------------------------


def test_db_build_loads_each_campaign_once(repo: Path, tmp_path: Path, cli: CliRun) -> None:
    evidence = repo / "evidence"
    for sources in ([evidence, evidence / PUBLISHED], [evidence / PUBLISHED] * 2):
        status, _, err = cli("db", "build", *map(str, sources), "--db", str(tmp_path / "x.db"))
        assert status == 2
        assert f"campaign {PUBLISHED} given twice" in err
        assert not (tmp_path / "x.db").exists()
    status, out, _ = cli("sql", "SELECT count(*) AS n FROM requests", "--from", str(evidence))
    assert out.split() == ["n", "106"]
    # A campaign and its own export, or two copies of one export.
    export = tmp_path / "export"
    assert cli("export", "--from", str(evidence), "--parquet", str(export))[0] == 0
    shutil.copytree(export, tmp_path / "copy")
    for other in (evidence / PUBLISHED, tmp_path / "copy"):
        status, _, err = cli("sql", "SELECT 1", "--from", str(export), "--from", str(other))
        assert status == 2
        assert " in two places (" in err and "each campaign is loaded once" in err


def test_a_copied_campaign_is_named_and_not_merged(repo: Path, cli: CliRun) -> None:
    evidence = repo / "evidence"
    copy = evidence / "2026-11-30-copied-example"
    shutil.copytree(evidence / PUBLISHED, copy)
    summary = read_json(copy / "summary.json")
    summary["campaign_id"] = copy.name
    write_json(copy / "summary.json", summary)
    forge_seal(copy)
    status, report = verify_json(cli, copy)
    assert status == 1
    mismatched = {f["path"] for f in report["findings"] if f["code"] == "campaign-id-mismatch"}
    assert f"{copy}/baseline/capacity/ctx1024-c1-nothink.json" in mismatched
    status, _, err = cli("sql", "SELECT count(*) FROM requests", "--from", str(evidence))
    assert status == 2
    assert f"campaign_id '{PUBLISHED}' but the folder is '{copy.name}'" in err


# 8. Evidence overwritten --------------------------------------------------------------------


def test_decide_with_an_unknown_candidate_changes_nothing(raw: Path, cli: CliRun) -> None:
    assert cli("decide", str(raw))[0] == 0
    before = _files(raw)
    status, _, err = cli("decide", str(raw), "--candidate", "nope")
    assert status == 2  # a mistyped argument, as gate says of it
    assert "no arm named 'nope' (arms: linux, windows)" in err
    assert _files(raw) == before


def test_a_second_import_never_replaces_the_first(cli: CliRun, tmp_path: Path) -> None:
    argv = ["import", "vllm", str(VLLM), "--raw-dir", str(tmp_path), "--campaign"]
    argv += ["2026-11-30-import", "--arm", "vllm"]
    assert cli(*argv)[0] == 0
    before = _files(tmp_path)
    status, _, err = cli(*argv)
    assert status == 2
    assert "exists; an import never replaces evidence" in err
    assert _files(tmp_path) == before
    # Another stage of the same campaign extends it, under a seal that still holds.
    assert cli(*argv, "--stage", "again")[0] == 0
    assert verify_json(cli, tmp_path / "2026-11-30-import")[0] == 0


def test_seal_refuses_an_evidence_root_and_misnamed_folders(
    repo: Path, tmp_path: Path, cli: CliRun
) -> None:
    for folder in (repo / "evidence", tmp_path / "My Campaign"):
        folder.mkdir(exist_ok=True)
        (folder / "notes.txt").write_text("x\n")
        status, _, err = cli("seal", str(folder))
        assert status == 2
        assert f"campaign name {folder.name!r} is not valid" in err
        assert not (folder / "manifest.json").exists()
        assert not (folder / "SHA256SUMS").exists()


def test_seal_withhold_moves_a_present_file_beside_the_campaign(
    raw: Path, tmp_path: Path, cli: CliRun
) -> None:
    log = raw / "serve.log"
    log.write_bytes(b"\x00 a core dump \xff")
    forge_seal(raw)
    status, _, err = cli("publish", str(raw), "--out", str(tmp_path / "public"))
    assert status == 1 and "serve.log: not UTF-8 text" in err
    status, out, err = cli("seal", str(raw), "--withhold", "serve.log")
    assert status == 0, err
    assert "without a digest" not in out  # present: its digest is disclosed
    aside = raw.parent / f"{raw.name}.withheld" / "serve.log"
    assert aside.read_bytes() == b"\x00 a core dump \xff" and not log.exists()
    (held,) = read_json(raw / "manifest.json")["withheld"]
    assert held["path"] == "serve.log"
    assert held["sha256"] == sha256_file(aside)[0]
    assert cli("publish", str(raw), "--out", str(tmp_path / "public"))[0] == 0
    public = tmp_path / "public" / raw.name
    assert not (public / "serve.log").exists()
    assert read_json(public / "manifest.json")["withheld"] == [held]
    assert verify_json(cli, public)[0] == 0


# 9. Half-written results ---------------------------------------------------------------------


def test_a_failed_db_build_leaves_no_file(raw: Path, tmp_path: Path, cli: CliRun) -> None:
    cell = raw / "linux" / "capacity" / "ctx256-c1-nothink.part-0001.jsonl"
    good = cell.read_bytes()
    cell.write_bytes(b"}" + good)
    target = tmp_path / "ledger.duckdb"
    status, _, err = cli("db", "build", str(raw), "--db", str(target))
    assert status == 1, err
    assert "not the part its cell run lists (its digest differs)" in err
    assert not target.exists() and not list(tmp_path.glob(".ledger.duckdb*"))
    cell.write_bytes(good)
    assert cli("db", "build", str(raw), "--db", str(target))[0] == 0


def test_a_failed_report_writes_no_chart(repo: Path, cli: CliRun) -> None:
    campaign = repo / "evidence" / PUBLISHED
    shutil.rmtree(campaign / "report")
    (campaign / "report.md").unlink()
    forge_seal(campaign)
    (campaign / "report.md").mkdir()  # in the way of the last file the report writes
    before = _files(campaign)
    status, _, err = cli("report", str(campaign), "--reseal-after-review")
    assert status == 2
    assert "report.md is in the way" in err
    assert _files(campaign) == before
    assert not (campaign / "report").exists()


def test_a_failed_ticket_leaves_no_orphan(repo: Path, cli: CliRun) -> None:
    campaign = repo / "evidence" / PUBLISHED
    (campaign / "follow-up.json").write_text('{"schema": "anvil-serving.follow-up/v1"}\n')
    forge_seal(campaign)
    before = _files(repo)
    status, _, err = cli("ticket", "new", str(campaign), "--slug", "second")
    assert status == 1
    assert "follow-up.json" in err
    assert _files(repo) == before
    # Fixed, the retry is not blocked by anything the failure left.
    shutil.copy(ROOT / "evidence" / PUBLISHED / "follow-up.json", campaign / "follow-up.json")
    forge_seal(campaign)
    status, _, err = cli("ticket", "new", str(campaign), "--slug", "second")
    assert status == 0, err


def test_a_refused_publication_leaves_no_out_folder(raw: Path, tmp_path: Path, cli: CliRun) -> None:
    (raw / "core.bin").write_bytes(b"\x00\xff")
    forge_seal(raw)
    out = tmp_path / "new" / "public"
    status, _, _ = cli("publish", str(raw), "--out", str(out))
    assert status == 1
    assert not (tmp_path / "new").exists()
    assert not list(raw.parent.glob("*.publish-map.json"))


def test_publish_into_the_raw_campaign_is_refused(raw: Path, cli: CliRun) -> None:
    before = _files(raw)
    elsewhere = str(raw.parent.parent / "elsewhere")
    for argv in (["--out", str(raw / "public")], ["--out", elsewhere, "--map", str(raw / "m")]):
        status, _, err = cli("publish", str(raw), *argv)
        assert status == 2
        assert "would be written inside the raw campaign" in err
    assert _files(raw) == before


def test_changes_put_back_what_was_there_when_a_rename_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a.txt").write_text("old a")
    (tmp_path / "c.txt").write_text("old c")  # moved aside, then its replacement fails
    changes = Changes()
    changes.put(tmp_path, "a.txt", b"new a")
    changes.put(tmp_path, "sub/b.txt", b"new b")
    changes.put(tmp_path, "c.txt", b"new c")
    real = os.replace
    calls: list[str] = []

    def failing(source: str, target: str) -> None:
        calls.append(str(target))
        if str(source).endswith(".tmp") and str(target).endswith("c.txt"):
            raise OSError(28, "No space left on device")
        real(source, target)

    monkeypatch.setattr(os, "replace", failing)
    with pytest.raises(OSError, match="No space"):
        changes.commit()
    monkeypatch.setattr(os, "replace", real)
    assert _files(tmp_path) == {"a.txt": b"old a", "c.txt": b"old c"}
    assert not (tmp_path / "sub").exists()
    # And a file that may not be replaced stops the commit before anything is written.
    changes = Changes()
    changes.put(tmp_path, "d.txt", b"d")
    changes.put(tmp_path, "a.txt", b"a", replace=False)
    with pytest.raises(OutputExists):
        changes.commit()
    assert _files(tmp_path) == {"a.txt": b"old a", "c.txt": b"old c"}


# 10. Tracebacks -------------------------------------------------------------------------------


@pytest.mark.parametrize("statement", ["", ";", "-- c", "  \n"])
def test_sql_without_a_statement_is_one_line(cli: CliRun, statement: str) -> None:
    status, _, err = cli("sql", statement, "--from", str(ROOT / "evidence" / PUBLISHED))
    assert status == 2
    assert err == "error: SQL: no statement (only whitespace, ';' or comments)\n"


def test_integers_beyond_64_bits_are_one_line(cli: CliRun, tmp_path: Path) -> None:
    big = str(1 << 70)
    document = json.loads(VLLM.read_text())
    document["output_lens"][0] = 1 << 70
    imported = tmp_path / "big.json"
    imported.write_text(json.dumps(document))
    status, _, err = cli(
        "import", "vllm", str(imported), "--raw-dir", str(tmp_path / "raw"), "--campaign",
        "2026-11-30-big", "--arm", "a",
    )  # fmt: skip
    assert status == 2 and err.count("\n") == 1
    assert "output_lens[0]" in err and "a count must be from 0 to 2^63-1" in err
    policy = tmp_path / "policy.toml"
    policy.write_text(f'schema = "anvil-serving.promotion-policy/v1"\nname = "x"\nn = {big}\n')
    status, _, err = cli("gate", str(ROOT / "evidence" / PUBLISHED), "--policy", str(policy))
    assert status == 2 and err.count("\n") == 1
    assert f"n: {big} is beyond the 64-bit integer range" in err
    plan = tmp_path / "plan.toml"
    plan.write_text(TWO_ARMS_PLAN.replace("seed = 11", f"seed = {big}"))
    status, _, err = cli("run", str(plan), "--raw-dir", str(tmp_path / "raw"))
    assert status == 2 and err.count("\n") == 1
    assert f"seed: {big} is beyond the 64-bit integer range" in err
    assert not (tmp_path / "raw").exists()


def test_null_per_request_arrays_are_one_line(cli: CliRun, tmp_path: Path) -> None:
    document = json.loads(VLLM.read_text())
    document["itls"] = None
    imported = tmp_path / "null.json"
    imported.write_text(json.dumps(document))
    status, _, err = cli(
        "import", "vllm", str(imported), "--raw-dir", str(tmp_path / "raw"), "--campaign",
        "2026-11-30-null", "--arm", "a",
    )  # fmt: skip
    assert status == 2
    assert err == "error: null.json: line 1: itls is null, not an array\n"
    assert not (tmp_path / "raw").exists()


def _run_refuses_the_url(cli: CliRun, tmp_path: Path, url: str) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(
        f'campaign_id = "2026-11-30-url"\n[[arms]]\nname = "a"\nbase_url = "{url}"\n'
        'model = "m"\n[[stages]]\nkind = "capacity"\ncontext_targets = [256]\nrequests = 1\n'
        "max_tokens = 4\n"
    )
    status, _, err = cli("run", str(plan), "--raw-dir", str(tmp_path / "raw"))
    assert status == 2 and err.count("\n") == 1 and "base_url" in err


@pytest.mark.parametrize("url", ["http://[::1", "http://[::1]:99999/v1", "http://:80/v1"])
def test_bad_urls_are_one_line(cli: CliRun, tmp_path: Path, url: str) -> None:
    _run_refuses_the_url(cli, tmp_path, url)
    status, _, err = cli("audit", url, "--identity", "a", "--issuer", "https://x")
    assert status == 2 and err.count("\n") == 1
    assert err.startswith(f"ledger audit: error: {url}: ")


# 11. Other wrong behaviour ---------------------------------------------------------------


def test_sql_json_is_strict_and_csv_plain(cli: CliRun) -> None:
    statement = (
        "SELECT 'nan'::DOUBLE AS a, 'inf'::DOUBLE AS b, '-inf'::DOUBLE AS c, "
        "'\\x01\\xff'::BLOB AS d, INTERVAL 90 MINUTE AS e, {'k': 1.5::DOUBLE, 'v': [1, 2]} AS f, "
        "3.25::DECIMAL(4, 2) AS g, DATE '2026-11-30' AS h, NULL AS i"
    )
    source = ["--from", str(ROOT / "evidence" / PUBLISHED)]
    status, out, _ = cli("sql", statement, *source, "--format", "json")
    assert status == 0
    (row,) = json.loads(out, parse_constant=lambda name: pytest.fail(f"{name} in JSON"))
    assert row == {
        "a": "NaN",
        "b": "Infinity",
        "c": "-Infinity",
        "d": "01ff",
        "e": "P0DT5400S",
        "f": {"k": 1.5, "v": [1, 2]},
        "g": "3.25",
        "h": "2026-11-30",
        "i": None,
    }
    status, out, _ = cli("sql", statement, *source, "--format", "csv")
    assert status == 0
    assert out.splitlines()[1] == (
        'NaN,Infinity,-Infinity,01ff,P0DT5400S,"{""k"": 1.5, ""v"": [1, 2]}",3.25,2026-11-30,'
    )


@pytest.mark.parametrize("port", ["70000", "-1", "0", "http"])
def test_simulate_refuses_a_port_that_is_not_one(cli: CliRun, port: str) -> None:
    status, _, err = cli("simulate", "--port", port)
    assert status == 2
    assert "argument --port:" in err and "serving" not in err


def test_simulate_refuses_a_port_in_use_before_saying_it_serves(cli: CliRun) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        status, _, err = cli("simulate", "--port", str(port))
    assert status == 2
    assert err == f"error: cannot listen on 127.0.0.1:{port}: Address already in use\n"


@pytest.mark.parametrize(("number", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_demo_stops_with_130_or_143(
    tmp_path: Path, number: signal.Signals, status: int
) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "ledger", "demo", "--out", str(tmp_path / "demo")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    # The first artifact of the run, then the signal: derive, decide and publish never run.
    for line in process.stderr:
        if "preflight" in line:
            break
    process.send_signal(number)
    _, err = process.communicate(timeout=120)
    assert process.returncode == status, err
    assert "Traceback" not in err
    assert sorted(p.name for p in (tmp_path / "demo").iterdir()) == ["raw"]
    (campaign,) = (tmp_path / "demo" / "raw").iterdir()
    assert not (campaign / "derived").exists() and not (campaign / "summary.json").exists()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(ttfts=d["ttfts"][:-1]), "has 5 entries for 4 requests (ttfts)"),
        (
            lambda d: d.update(generated_texts=d["generated_texts"][1:]),
            "generated_texts has 4 entries for 5 requests (ttfts)",
        ),
        (lambda d: d["output_lens"].__setitem__(2, -5), "output_lens[2] is -5"),
        (lambda d: d.update(max_concurrency=-4), "max_concurrency is -4"),
        (lambda d: d.update(max_concurrency=0), "max_concurrency is 0"),
    ],
    ids=[
        "ttfts-short",
        "texts-short",
        "negative-tokens",
        "negative-concurrency",
        "zero-concurrency",
    ],
)
def test_malformed_imports_are_refused(
    cli: CliRun, tmp_path: Path, edit: object, message: str
) -> None:
    document = json.loads(VLLM.read_text())
    edit(document)  # type: ignore[operator]
    source = tmp_path / "edited.json"
    source.write_text(json.dumps(document))
    status, _, err = cli(
        "import", "vllm", str(source), "--raw-dir", str(tmp_path / "raw"), "--campaign",
        "2026-11-30-edit", "--arm", "a",
    )  # fmt: skip
    assert status == 2 and err.count("\n") == 1, err
    assert message in err
    assert not (tmp_path / "raw").exists()


def test_an_aiperf_unit_it_does_not_read_is_refused(cli: CliRun, tmp_path: Path) -> None:
    lines = (ROOT / "tests/data/realworld/aiperf_gpt-oss-20b_run1/profile_export.jsonl").read_text()
    first = lines.index('"ttft":{')
    edited = lines[:first] + lines[first:].replace('"unit":"ms"', '"unit":"parsecs"', 1)
    assert edited != lines
    source = tmp_path / "profile_export.jsonl"
    source.write_text(edited)
    status, _, err = cli(
        "import", "aiperf", str(source), "--raw-dir", str(tmp_path / "raw"), "--campaign",
        "2026-11-30-aiperf", "--arm", "a",
    )  # fmt: skip
    assert status == 2
    assert "metrics.ttft has unit 'parsecs'; this import reads 'ms' only" in err


# Found by trying every command again, after the mechanisms were in -------------------------


def test_sql_spill_folder_is_not_a_way_out(
    cli: CliRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = tmp_path / "elsewhere"
    secret.mkdir()
    (secret / "hostname").write_text("private\n")
    os.symlink(secret, tmp_path / ".tmp")
    monkeypatch.chdir(tmp_path)
    status, out, err = cli(
        "sql",
        "SELECT content FROM read_text('.tmp/hostname')",
        "--from",
        str(ROOT / "evidence" / PUBLISHED),
    )
    assert status == 2 and "Permission Error" in err
    assert "private" not in out


def test_an_interrupt_a_library_reports_as_its_own_error_exits_130(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import ledger.cli._main as cli_module

    def query_interrupted(_: object) -> int:
        # What DuckDB does with Ctrl-C during a query: its own RuntimeError.
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            raise RuntimeError("Query interrupted") from None
        return 0

    def register(commands: object, common: object) -> None:
        parser = commands.add_parser("stuck", parents=[common])  # type: ignore[attr-defined]
        parser.set_defaults(func=query_interrupted)

    monkeypatch.setattr(cli_module, "_add_plugin_commands", register)
    assert cli_module.main(["stuck"]) == 130


@pytest.mark.parametrize(
    ("number", "status", "said"),
    [(signal.SIGHUP, 129, "hung up"), (signal.SIGTERM, 143, "terminated")],
)
def test_a_hang_up_ends_a_command_as_a_termination_does(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    number: int,
    status: int,
    said: str,
) -> None:
    """A closed terminal or a dropped ssh session sends SIGHUP: the command's cleanup runs
    (here a database's spill folder), as after SIGTERM, rather than the process dying."""
    import ledger.cli._main as cli_module
    from ledger.database import build

    spills: list[Path] = []

    def query_hung_up(_: object) -> int:
        database = build([ROOT / "evidence" / PUBLISHED])
        try:
            spills.append(
                Path(database.query("SELECT current_setting('temp_directory')").rows[0][0])
            )
            signal.raise_signal(number)
        finally:
            database.close()
        return 0

    def register(commands: object, common: object) -> None:
        parser = commands.add_parser("hung", parents=[common])  # type: ignore[attr-defined]
        parser.set_defaults(func=query_hung_up)

    monkeypatch.setattr(cli_module, "_add_plugin_commands", register)
    assert cli_module.main(["hung"]) == status
    assert capsys.readouterr().err == f"{said}\n"
    assert spills and not spills[0].exists()
    # The handlers are given back.
    assert signal.getsignal(number) is signal.SIG_DFL


@pytest.mark.parametrize("path", ["manifest.json", "SHA256SUMS", "linux", "../x", "/etc/passwd"])
def test_seal_withhold_refuses_what_is_not_an_artifact(raw: Path, cli: CliRun, path: str) -> None:
    before = _files(raw.parent)
    status, _, err = cli("seal", str(raw), "--withhold", path)
    assert status == 2 and err.startswith(f"error: cannot withhold {path!r}")
    assert _files(raw.parent) == before


def test_an_internal_error_says_where_to_put_vv(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import ledger.cli._main as cli_module

    def broken(_: object) -> int:
        raise RuntimeError("boom")

    def register(commands: object, common: object) -> None:
        parser = commands.add_parser("broken", parents=[common])  # type: ignore[attr-defined]
        parser.set_defaults(func=broken)

    monkeypatch.setattr(cli_module, "_add_plugin_commands", register)
    assert cli_module.main(["broken"]) == 1
    said = capsys.readouterr().err
    assert said == (
        "error: internal error (RuntimeError: boom); please report it, with the output of "
        "the same command run with -vv after its name (ledger verify -vv ...)\n"
    )
    # Where it says: after the command's name -vv re-raises, with the traceback.
    with pytest.raises(RuntimeError, match="boom"):
        cli_module.main(["broken", "-vv"])


@pytest.mark.parametrize(
    "name", [b"a\nb.txt", b"a\\b.txt", b"a\tb.txt", "a\u2028b.txt".encode(), b"bad\xffname.txt"]
)
def test_seal_refuses_a_name_its_manifest_cannot_hold(raw: Path, cli: CliRun, name: bytes) -> None:
    """Sealed, such a folder was one verify refuses (path-invalid, a broken SHA256SUMS), or
    a line a reader splits; a name that is not UTF-8 was an internal error."""
    with open(os.path.join(bytes(raw), name), "wb") as stream:
        stream.write(b"x\n")
    before = _files(raw.parent)
    status, _, err = cli("seal", str(raw), "--reseal-after-review")
    assert status == 1 and err.count("\n") == 1
    assert err.startswith(f"error: cannot seal {raw}: ") and "rename the file" in err
    assert _files(raw.parent) == before


def test_control_characters_never_reach_the_terminal(repo: Path, cli: CliRun) -> None:
    campaign = repo / "evidence" / PUBLISHED
    (campaign / "evil\n0 errors, 0 warnings\nOK\x1b[2J.txt").write_text("x\n")
    status, out, _ = cli("verify", str(campaign))
    assert status == 1
    assert "\x1b" not in out
    assert "0 errors, 0 warnings\nOK" not in out
    assert "evil 0 errors" not in out and "evil\\n0 errors, 0 warnings\\nOK\\x1b[2J.txt" in out


def test_seal_refuses_paths_that_differ_only_by_case(raw: Path, cli: CliRun) -> None:
    (raw / "Run-Plan.json").write_bytes((raw / "run-plan.json").read_bytes())
    status, _, err = cli("seal", str(raw), "--reseal-after-review")
    assert status == 1
    assert "'Run-Plan.json' and 'run-plan.json' differ only by case" in err


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--campaign", "2026-13-45-import", "does not start with a real date"),
        ("--arm", "approvals", "is a campaign's own folder"),
        ("--arm", "derived", "is a campaign's own folder"),
    ],
)
def test_import_refuses_names_that_are_not_names(
    cli: CliRun, tmp_path: Path, option: str, value: str, message: str
) -> None:
    argv = {"--campaign": "2026-11-30-import", "--arm": "vllm"}
    argv[option] = value
    status, _, err = cli(
        "import", "vllm", str(VLLM), "--raw-dir", str(tmp_path), *sum(argv.items(), ())
    )
    assert status == 2 and message in err
    assert not any(tmp_path.iterdir())


def test_import_never_mixes_into_a_runs_own_stage(raw: Path, cli: CliRun) -> None:
    before = _files(raw)
    status, _, err = cli(
        "import", "vllm", str(VLLM), "--raw-dir", str(raw.parent), "--campaign", raw.name,
        "--arm", "linux", "--stage", "capacity",
    )  # fmt: skip
    assert status == 2
    assert "holds the run's own artifacts (ctx1024-c1-nothink.json)" in err
    assert _files(raw) == before


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["ttfts"].__setitem__(1, "a"), "ttfts[1] is 'a', not a number"),
        (lambda d: d["ttfts"].__setitem__(2, True), "ttfts[2] is True, not a number"),
        (lambda d: d.update(max_concurrency=4.5), "max_concurrency is 4.5"),
        (lambda d: d.update(max_concurrency="abc"), "max_concurrency is 'abc'"),
        (lambda d: d["output_lens"].__setitem__(0, "²"), None),
        (lambda d: d["itls"].__setitem__(0, [1e308, 1e308]), "itls[0] sums beyond any time"),
    ],
    ids=[
        "ttft-text",
        "ttft-bool",
        "concurrency-fraction",
        "concurrency-text",
        "superscript",
        "itl-overflow",
    ],
)
def test_import_values_that_are_not_numbers_are_refused(
    cli: CliRun, tmp_path: Path, edit: object, message: str | None
) -> None:
    test_malformed_imports_are_refused(cli, tmp_path, edit, message or "output_lens[0]")


@pytest.mark.parametrize(
    ("replace", "message"),
    [
        ("decode_tok_s = 300.0", "decode_tok_s = inf"),
        ("decode_tok_s = 300.0", "decode_tok_s = nan"),
        ("requests = 12", "requests = 9223372036854775807"),
        (
            "requests = 12\nmax_tokens = 16",
            "requests = 12\nconcurrency = [1, 100000]\nmax_tokens = 16",
        ),
    ],
    ids=["inf", "nan", "requests", "concurrency"],
)
def test_plan_values_beyond_reason_are_refused_before_anything_runs(
    cli: CliRun, tmp_path: Path, replace: str, message: str
) -> None:
    plan = tmp_path / "plan.toml"
    text = TWO_ARMS_PLAN.replace(replace, message, 1)
    assert text != TWO_ARMS_PLAN
    plan.write_text(text)
    status, _, err = cli("run", str(plan), "--raw-dir", str(tmp_path / "raw"))
    assert status == 2 and err.count("\n") == 1, err
    assert not (tmp_path / "raw").exists()


def test_a_url_with_credentials_is_refused(cli: CliRun, tmp_path: Path) -> None:
    url = "http://user:secretpw@127.0.0.1:1/v1"
    _run_refuses_the_url(cli, tmp_path, url)
    # An audit never echoes them.
    status, _, err = cli("audit", url, "--identity", "a", "--issuer", "https://x")
    assert status == 2
    assert err == (
        "ledger audit: error: http://<credentials>@127.0.0.1/...: holds credentials "
        "(user:password@); a publication is fetched without them\n"
    )


@pytest.mark.parametrize("command", ["run", "gate", "simulate"])
def test_an_endless_file_is_not_read_forever(cli: CliRun, tmp_path: Path, command: str) -> None:
    argv = {
        "run": ["run", "/dev/zero", "--raw-dir", str(tmp_path / "raw")],
        "gate": ["gate", str(ROOT / "evidence" / PUBLISHED), "--policy", "/dev/zero"],
        "simulate": ["simulate", "--port", "1", "--profile", "/dev/zero"],
    }[command]
    status, _, err = cli(*argv)
    assert status == 2
    # Refused before a byte is read: a device is no file of a plan, policy or profile.
    assert "/dev/zero: cannot read: a character device, not a regular file" in err


def test_a_trusted_root_that_is_not_one_is_never_quoted(cli: CliRun, tmp_path: Path) -> None:
    secret = tmp_path / "passwords.txt"
    secret.write_text("root:hunter2\n")
    target = tmp_path / "file.txt"
    target.write_text("x")
    bundle = ROOT / "tests/data/sigstore/staging-rekor-v2.txt.sigstore.json"
    status, _, err = cli(
        "signature", "verify", str(target), "--bundle", str(bundle), "--identity", "a",
        "--issuer", "https://x", "--trusted-root", str(secret),
    )  # fmt: skip
    assert status == 2
    assert "not a sigstore trusted root" in err and "hunter2" not in err


def test_publish_refuses_a_secret_in_a_file_name(raw: Path, tmp_path: Path, cli: CliRun) -> None:
    token = "ghp_1234567890abcdefghijABCDEFGHIJ123456"
    (raw / "notes").mkdir()
    (raw / "notes" / f"{token}.json").write_text("{}\n")
    forge_seal(raw)
    status, _, err = cli("publish", str(raw), "--out", str(tmp_path / "public"))
    assert status == 1
    assert err == (
        "error: notes/<redacted:credential>.json: the name holds private data (credential); "
        "names are published as they are, so rename the file or folder\n"
    )
    assert not (tmp_path / "public").exists()
    # Published anyway (by hand), verify names it, masked as publish did: a finding's
    # path is printed, and kept in CI logs.
    public = tmp_path / "public" / raw.name
    shutil.copytree(raw, public)
    (public / "statement.intoto.json").write_text("{}\n")
    status, report = verify_json(cli, public)
    assert (
        "private-data",
        f"{public}/notes/<redacted:credential>.json",
        "credential in a public file name",
    ) in {(f["code"], f["path"], f["message"]) for f in report["findings"]}
    # Every finding about that file names it so (it has no schema, and a warning says so).
    assert "schema-undeclared" in {f["code"] for f in report["findings"]}
    assert token not in json.dumps(report)


def test_the_map_is_never_written_into_another_campaign(
    raw: Path, repo: Path, tmp_path: Path, cli: CliRun
) -> None:
    other = repo / "evidence" / PUBLISHED
    before = _files(other)
    status, _, err = cli(
        "publish", str(raw), "--out", str(tmp_path / "public"), "--map", str(other / "m.json")
    )
    assert status == 2 and "would be written inside campaign" in err
    assert _files(other) == before
    assert not (tmp_path / "public").exists()


@pytest.mark.parametrize(
    "argv", [["verify"], ["sql", "SELECT 1"], ["simulate", "--port", "x"], ["nope"]]
)
def test_usage_errors_are_one_line(cli: CliRun, argv: list[str]) -> None:
    status, out, err = cli(*argv)
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and "error: " in err and "--help" in err


def test_sql_json_keeps_every_column_of_a_join(cli: CliRun) -> None:
    status, out, _ = cli(
        "sql",
        "SELECT 1 AS arm, 2 AS arm, 3 AS arm",
        "--from",
        str(ROOT / "evidence" / PUBLISHED),
        "--format",
        "json",
    )
    assert status == 0
    assert json.loads(out) == [{"arm": 1, "arm:2": 2, "arm:3": 3}]


@pytest.mark.parametrize(
    ("seal_file", "named"),
    [
        ("SHA256SUMS", "SHA256SUMS (changed)"),
        ("statement.intoto.json", "statement.intoto.json (changed)"),
        ("manifest.json", "SHA256SUMS (changed)"),
    ],
)
def test_a_seal_file_edited_alone_breaks_the_seal(
    repo: Path, cli: CliRun, seal_file: str, named: str
) -> None:
    campaign = repo / "evidence" / PUBLISHED
    path = campaign / seal_file
    if seal_file == "SHA256SUMS":
        first, rest = path.read_text().split("\n", 1)
        path.write_text("0" * 64 + first[64:] + "\n" + rest)
    else:
        document = read_json(path)
        if seal_file == "manifest.json":
            document["artifacts"][0]["sha256"] = "0" * 64
        else:
            document["subject"][0]["digest"]["sha256"] = "0" * 64
        write_json(path, document)
    before = _files(campaign)
    status, _, err = cli("report", str(campaign))
    assert status == 1
    assert named in err
    assert _files(campaign) == before


@pytest.mark.parametrize(
    ("damage", "named"),
    [
        (lambda c: (c / "notes.txt").write_text("x\n"), "notes.txt (added)"),
        (lambda c: (c / "run-plan.json").unlink(), "run-plan.json (missing)"),
        (lambda c: (c / "SHA256SUMS").unlink(), "SHA256SUMS (missing)"),
        (lambda c: (c / "manifest.json").write_text("{garbled"), "manifest.json (changed)"),
        (lambda c: (c / "manifest.json").unlink(), "manifest.json (missing)"),
    ],
    ids=["added", "missing", "sums-deleted", "manifest-garbled", "manifest-deleted"],
)
def test_every_kind_of_seal_damage_is_refused(
    raw: Path, cli: CliRun, damage: object, named: str
) -> None:
    damage(raw)  # type: ignore[operator]
    before = _files(raw)
    status, _, err = cli("derive", str(raw), "--baseline", "windows", "--candidate", "linux")
    assert status == 1, err
    assert named in err
    assert _files(raw) == before


@pytest.mark.parametrize("command", ["approve", "import"])
def test_approve_and_import_check_the_seal_first(raw: Path, cli: CliRun, command: str) -> None:
    (raw / "notes.txt").write_text("added by hand\n")
    before = _files(raw)
    argv = {
        "approve": ["approve", str(raw), "--no-sign"],
        "import": ["import", "vllm", str(VLLM), "--raw-dir", str(raw.parent), "--campaign",
                   raw.name, "--arm", "vllm"],
    }[command]  # fmt: skip
    status, _, err = cli(*argv)
    assert status == 1
    assert "notes.txt (added)" in err
    assert _files(raw) == before


def test_a_publication_carries_the_raw_reviews_and_never_its_digests(
    raw: Path, tmp_path: Path, cli: CliRun
) -> None:
    (raw / "notes.txt").write_text("reviewed\n")
    assert cli("seal", str(raw), "--reseal-after-review")[0] == 0
    assert cli("publish", str(raw), "--out", str(tmp_path / "public"))[0] == 0
    public = read_json(tmp_path / "public" / raw.name / "manifest.json")
    assert public["reviews"] == [
        {"command": "seal", "changes": [{"path": "notes.txt", "change": "added"}]}
    ]


def test_a_failure_inside_a_new_publication_leaves_nothing(
    raw: Path, tmp_path: Path, cli: CliRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing(*args: object, **kwargs: object) -> object:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(manifest, "seal_files", failing)
    status, _, err = cli("publish", str(raw), "--out", str(tmp_path / "new" / "public"))
    assert status == 2 and "No space left on device" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["raw"]
    assert sorted(p.name for p in raw.parent.iterdir()) == [raw.name]


def test_the_map_may_not_land_in_the_public_tree(raw: Path, tmp_path: Path, cli: CliRun) -> None:
    out = tmp_path / "public"
    status, _, err = cli("publish", str(raw), "--out", str(out), "--map", str(out / "m.json"))
    assert status == 2 and "inside the public tree" in err
    assert not out.exists()


def test_publish_refuses_an_unsealed_folder_named_like_a_campaign(
    raw: Path, tmp_path: Path, cli: CliRun
) -> None:
    (raw / "manifest.json").unlink()
    status, _, err = cli("publish", str(raw), "--out", str(tmp_path / "public"))
    assert status == 2 and "not a sealed campaign folder" in err


def test_seal_says_when_a_withheld_path_is_not_in_the_folder(raw: Path, cli: CliRun) -> None:
    # Declaring an artifact kept elsewhere is allowed; a typo must not pass unseen.
    status, out, _ = cli("seal", str(raw), "--withhold", "serve.lgo")
    assert status == 0
    assert "serve.lgo: not in the folder; declared withheld without a digest" in out


@pytest.mark.parametrize("placed", [False, True])
def test_an_interrupt_after_the_output_is_in_place_lets_the_command_finish(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, placed: bool
) -> None:
    import ledger.cli._main as cli_module
    from ledger.formats.outputs import new_file

    target = tmp_path / "built.duckdb"

    def build(_: object) -> int:
        with new_file(target) as temp:
            temp.write_text("whole\n")
            if not placed:
                signal.raise_signal(signal.SIGINT)  # before the rename: nothing is written
        signal.raise_signal(signal.SIGINT)  # after it: too late to undo, so it finishes
        return 0

    def register(commands: object, common: object) -> None:
        parser = commands.add_parser("build", parents=[common])  # type: ignore[attr-defined]
        parser.set_defaults(func=build)

    monkeypatch.setattr(cli_module, "_add_plugin_commands", register)
    assert cli_module.main(["build"]) == (0 if placed else 130)
    assert target.exists() == placed
    assert sorted(p.name for p in tmp_path.iterdir()) == (["built.duckdb"] if placed else [])


def test_an_interrupt_after_a_new_folder_is_in_place_lets_the_command_finish(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import ledger.cli._main as cli_module
    from ledger.formats.outputs import new_folder

    def export(_: object) -> int:
        with new_folder(tmp_path / "export") as work:
            (work / "part.parquet").write_text("whole\n")
        signal.raise_signal(signal.SIGINT)  # a publication or export already renamed
        return 0

    def register(commands: object, common: object) -> None:
        parser = commands.add_parser("export2", parents=[common])  # type: ignore[attr-defined]
        parser.set_defaults(func=export)

    monkeypatch.setattr(cli_module, "_add_plugin_commands", register)
    assert cli_module.main(["export2"]) == 0
    assert (tmp_path / "export" / "part.parquet").exists()


def test_an_output_that_could_not_be_placed_leaves_an_interrupt_its_effect(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import ledger.cli._main as cli_module
    from ledger.formats.outputs import new_folder

    target = tmp_path / "export"

    def export(_: object) -> int:
        try:
            with new_folder(target) as work:
                (work / "part.parquet").write_text("whole\n")
                (target / "theirs").mkdir(parents=True)  # made by another, meanwhile
        except OSError:
            pass  # the rename failed: nothing of this command is in place
        signal.raise_signal(signal.SIGINT)
        return 0

    def register(commands: object, common: object) -> None:
        parser = commands.add_parser("export3", parents=[common])  # type: ignore[attr-defined]
        parser.set_defaults(func=export)

    monkeypatch.setattr(cli_module, "_add_plugin_commands", register)
    assert cli_module.main(["export3"]) == 130
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]
    assert [p.name for p in target.iterdir()] == ["theirs"]
