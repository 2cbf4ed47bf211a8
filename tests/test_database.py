"""The ledger database: views, metric definitions in SQL, exports, and the sql command."""

from __future__ import annotations

import gc
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from generate_verify_assets import cell_run, load_cell_run

from ledger.database import _database as database
from ledger.database import build
from ledger.formats.jsonio import write_json
from ledger.formats.outputs import OutputExists
from ledger.imports import import_files
from tests import cells
from tests.conftest import DATA, ROOT, CliRun, forge_seal, verify_json

DATED = "2026-12-01-dated-arm"

REQUEST_COLUMNS = (
    "campaign_id, arm, stage, cell, context_target, concurrency, request_index, warmup, ok, "
    "error_class, prompt_tokens, completion_tokens, finish_reason, ttft_ms, first_token_ms, "
    "e2e_ms, decode_tok_s, effective_prefill_tok_s, server_prompt_ms, server_decode_tok_s, "
    "lateness_ms, ttft_from_schedule_ms, e2e_from_schedule_ms"
).split(", ")


def _campaign_with(tmp_path: Path, document: dict[str, object]) -> Path:
    folder = tmp_path / "2026-11-01-asset-campaign"
    folder.mkdir()
    write_json(folder / "cell.json", document)
    return folder


def test_requests_view_columns_and_definitions(tmp_path: Path) -> None:
    document = cell_run()
    folder = _campaign_with(tmp_path, document)
    db = build([folder])
    table = db.query("SELECT * FROM requests ORDER BY request_index")
    assert list(table.columns) == REQUEST_COLUMNS
    row = table.to_json()[0]
    # _record(0, sent=1 ms): chunks 5 ms apart... first at sent + 5 ms, last at sent + 35 ms.
    assert row["ttft_ms"] == pytest.approx(5.0)
    assert row["first_token_ms"] == pytest.approx(5.0)
    assert row["e2e_ms"] == pytest.approx(35.2)
    assert row["decode_tok_s"] == pytest.approx(3 / 0.030)
    assert row["effective_prefill_tok_s"] == pytest.approx(1000 / 0.005)
    assert (row["ok"], row["warmup"], row["completion_tokens"]) == (True, False, 4)


def test_server_timings_are_compared_with_the_clients_clock(tmp_path: Path) -> None:
    document = cell_run()
    requests = document["requests"]
    assert isinstance(requests, list)
    # Client: first token 5 ms after sent, decode 100 tok/s (see the test above). The server
    # says prompt 3 ms for the first, 4 ms for the second; 3 tokens in 25 ms (120 tok/s).
    timings = [
        {"prompt_n": 1000, "prompt_ms": 3.0, "predicted_n": 3, "predicted_ms": 25.0},
        {"prompt_n": 1000, "prompt_ms": 4.0, "predicted_n": 3, "predicted_ms": 25.0},
    ]
    # Visible content 2 ms after the first token (a reasoning token first): the server's
    # prompt time ends with the first token of any channel, so that is what it is set against.
    document["requests"] = [
        dict(r, server_timings=t, first_content_ns=r["first_content_ns"] + 2_000_000)
        for r, t in zip(requests, timings, strict=False)
    ] + requests[len(timings) :]
    db = build([_campaign_with(tmp_path, document)])
    rows = db.query("SELECT * FROM requests ORDER BY request_index").to_json()
    assert [r["server_prompt_ms"] for r in rows[:2]] == [3.0, 4.0]
    assert rows[0]["server_decode_tok_s"] == pytest.approx(120.0)
    assert all(r["server_prompt_ms"] is None for r in rows[2:])
    cell = db.query("SELECT * FROM cells").to_json()[0]
    assert cell["server_timed"] == 2
    assert cell["server_gap_ms_p50"] == pytest.approx(1.5)  # median of 5-3 and 5-4
    assert cell["server_decode_tok_s_p50"] == pytest.approx(120.0)
    assert cell["decode_vs_server_pct_p50"] == pytest.approx((100 - 120) / 120 * 100)


def test_cells_without_server_timings_say_so(tmp_path: Path) -> None:
    db = build([_campaign_with(tmp_path, cell_run())])
    cell = db.query("SELECT * FROM cells").to_json()[0]
    assert cell["server_timed"] == 0
    assert cell["server_gap_ms_p50"] is None and cell["decode_vs_server_pct_p50"] is None


def test_cells_view_excludes_warmups_and_failures(tmp_path: Path) -> None:
    document = cell_run()
    requests = document["requests"]
    assert isinstance(requests, list)
    warm = dict(requests[0], index=0, warmup=True, sent_ns=0)
    failed = dict(requests[1], index=2, error={"class": "stall", "status": None, "message": "x"})
    document["requests"] = [warm, *requests, failed]
    db = build([_campaign_with(tmp_path, document)])
    cell = db.query("SELECT * FROM cells").to_json()[0]
    assert (cell["n"], cell["failed"]) == (3, 1)
    assert cell["percentile_label"] == "descriptive"
    assert cell["ttft_ms_p50"] == pytest.approx(5.0)
    assert cell["decode_tok_s_p50"] == pytest.approx(100.0)
    # Completion tokens of the two successes over first sent (1 ms) to last end (95.2 ms).
    assert cell["throughput_tok_s"] == pytest.approx(8 / 0.0942)
    assert cell["median_output_tokens"] == 4
    assert cell["actual_prompt_tokens"] == 1000
    for metric in (
        "ttft_ms",
        "first_token_ms",
        "e2e_ms",
        "decode_tok_s",
        "effective_prefill_tok_s",
    ):
        assert {f"{metric}_p50", f"{metric}_p90", f"{metric}_p99"} <= set(cell)


def test_gates_decisions_and_artifacts_from_evidence() -> None:
    db = build([ROOT / "evidence"])
    decisions = db.query("SELECT campaign_id, promotion_authorized FROM decisions ORDER BY 1")
    assert [r[1] for r in decisions.rows] == [False, False, False, False]
    failed = db.query(
        "SELECT name FROM gates WHERE passed = false AND campaign_id LIKE '2026-09-08%' "
        "ORDER BY position"
    )
    assert [r[0] for r in failed.rows] == [
        "direct-preflight-disabled.json",
        "routed-preflight-disabled.json",
        "routed-thinking-enabled.json",
        "context/artifact.json",
    ]
    assert db.query("SELECT count(*) FROM artifacts").rows[0][0] >= 3


def test_export_is_partitioned_deterministic_and_reads_back(
    tmp_path: Path, two_arm_campaign: Path
) -> None:
    db = build([two_arm_campaign], locked=False)
    db.export_parquet(tmp_path / "one")
    db.export_parquet(tmp_path / "two")
    files = sorted(
        p.relative_to(tmp_path / "one").as_posix() for p in (tmp_path / "one").rglob("*.parquet")
    )
    assert "request_rows/campaign_id=2026-11-29-two-arms/arm=linux/data_0.parquet" in files
    assert "request_rows/campaign_id=2026-11-29-two-arms/arm=windows/data_0.parquet" in files
    for name in files:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()
    query = "SELECT * FROM cells ORDER BY arm, stage, cell"
    assert build([tmp_path / "one"]).query(query) == db.query(query)
    with pytest.raises(OutputExists, match="not an empty folder"):
        db.export_parquet(tmp_path / "one")
    (tmp_path / "file").write_text("")
    with pytest.raises(OutputExists, match="file is a file; export writes a new folder"):
        db.export_parquet(tmp_path / "file")


def test_an_export_from_before_the_server_columns_still_reads(
    tmp_path: Path, two_arm_campaign: Path
) -> None:
    db = build([two_arm_campaign], locked=False)
    db.export_parquet(tmp_path / "new")
    old = tmp_path / "old"
    shutil.copytree(tmp_path / "new", old, ignore=shutil.ignore_patterns("request_rows"))
    # request_rows as an export written before server_prompt_ms/server_decode_tok_s existed.
    con = duckdb.connect()
    scan = (tmp_path / "new" / "request_rows" / "**" / "*.parquet").as_posix()
    con.execute(
        f"COPY (SELECT * EXCLUDE (server_prompt_ms, server_decode_tok_s) FROM read_parquet("
        f"'{scan}', hive_partitioning=true)) TO '{(old / 'request_rows').as_posix()}' "
        "(FORMAT parquet, PARTITION_BY (campaign_id, arm))"
    )
    con.close()
    query = "SELECT * FROM cells ORDER BY arm, stage, cell"
    assert build([old]).query(query) == db.query(query)


def test_sql_command_formats(cli: CliRun, two_arm_campaign: Path) -> None:
    query = "SELECT arm, count(*) AS n FROM requests WHERE NOT warmup GROUP BY arm ORDER BY arm"
    status, out, _ = cli("sql", "--from", str(two_arm_campaign), query)
    assert status == 0
    assert out.splitlines() == ["arm      n", "linux    28", "windows  28"]
    status, out, _ = cli("sql", "--from", str(two_arm_campaign), "--format", "json", query)
    assert json.loads(out) == [{"arm": "linux", "n": 28}, {"arm": "windows", "n": 28}]
    status, out, _ = cli("sql", "--from", str(two_arm_campaign), "--format", "csv", query)
    assert out == "arm,n\nlinux,28\nwindows,28\n"


def test_sql_errors_are_one_line(cli: CliRun, tmp_path: Path, two_arm_campaign: Path) -> None:
    status, _, err = cli("sql", "--from", str(two_arm_campaign), "SELECT nope FROM cells")
    assert status == 2
    assert err.startswith("error: ") and err.count("\n") == 1
    status, _, err = cli("sql", "--from", str(tmp_path / "missing"), "SELECT 1")
    assert status == 2
    assert f"{tmp_path / 'missing'}: no such folder (an evidence root" in err
    (tmp_path / "file").write_text("")
    status, _, err = cli("sql", "--from", str(tmp_path / "file"), "SELECT 1")
    assert status == 2
    assert f"{tmp_path / 'file'}: not a folder (an evidence root" in err


def test_db_build_writes_a_file_once(cli: CliRun, tmp_path: Path, two_arm_campaign: Path) -> None:
    target = tmp_path / "ledger.duckdb"
    status, out, _ = cli("db", "build", str(two_arm_campaign), "--db", str(target))
    assert status == 0
    # 2 arms x (2 capacity cells of 1 warm-up + 12, and an endurance cell of 4).
    assert out.strip() == f"built {target}: 60 request rows"
    copy = tmp_path / "copy"
    shutil.copytree(two_arm_campaign, copy / two_arm_campaign.name)
    status, _, err = cli("db", "build", str(copy), "--db", str(target))
    assert status == 2
    assert "exists" in err


def test_an_arm_named_like_a_date_reads_back_from_an_export_as_named(tmp_path: Path) -> None:
    """Partition values are names: DuckDB's type guess would read the arm "2026-1-1" back as
    the date 2026-01-01, and every row of that arm would change arm."""
    source = DATA / "realworld/vllm-bench-serve/vllm-0.15.0-qwen3-8b-tp8-c50-detailed.json"
    import_files("vllm", [source], raw_dir=tmp_path / "raw", campaign=DATED, arm="2026-1-1")
    campaign = tmp_path / "raw" / DATED
    build([campaign], locked=False).export_parquet(tmp_path / "export")
    for table in ("requests", "cells"):
        query = f"SELECT DISTINCT arm FROM {table}"
        assert build([tmp_path / "export"]).query(query).rows == (("2026-1-1",),)


def test_an_export_inside_a_campaign_it_reads_is_refused(
    tmp_path: Path, two_arm_campaign: Path, cli: CliRun
) -> None:
    """Files the campaign's seal does not list would break it."""
    campaign = tmp_path / two_arm_campaign.name
    shutil.copytree(two_arm_campaign, campaign)
    before = sorted(p.relative_to(campaign) for p in campaign.rglob("*"))
    status, _, err = cli("export", "--from", str(campaign), "--parquet", str(campaign / "x"))
    assert status == 2
    assert err.strip() == f"error: {campaign / 'x'}: the export would be written inside {campaign}"
    # A database file too.
    status, _, err = cli("db", "build", str(campaign), "--db", str(campaign / "x.duckdb"))
    assert status == 2
    assert err.strip() == (
        f"error: {campaign / 'x.duckdb'}: the database would be written inside {campaign}"
    )
    assert sorted(p.relative_to(campaign) for p in campaign.rglob("*")) == before


def test_an_open_loop_cell_s_lateness_and_latency_from_its_due_times(tmp_path: Path) -> None:
    """Each request of the asset's load cell was sent 0.1, 0.2 and 0.3 ms after it was due:
    latency from the due time is latency from the send plus that."""
    document = load_cell_run()
    db = build([_campaign_with(tmp_path, document)])
    rows = db.query("SELECT * FROM requests ORDER BY request_index").to_json()
    assert [r["lateness_ms"] for r in rows] == pytest.approx([0.1, 0.2, 0.3])
    for row in rows:
        assert row["ttft_from_schedule_ms"] == pytest.approx(row["ttft_ms"] + row["lateness_ms"])
        assert row["e2e_from_schedule_ms"] == pytest.approx(row["e2e_ms"] + row["lateness_ms"])
    cell = db.query("SELECT * FROM cells").to_json()[0]
    assert cell["lateness_ms_p50"] == pytest.approx(0.2)
    assert cell["lateness_ms_p99"] == pytest.approx(0.2 + 0.98 * 0.1)
    assert cell["lateness_ms_max"] == pytest.approx(0.3)
    assert cell["limited_by_client"] is False
    sent = [r["sent_ns"] for r in document["requests"]]
    assert cell["achieved_rate_rps"] == pytest.approx(2 / ((sent[-1] - sent[0]) / 1e9))
    assert cell["e2e_from_schedule_ms_p50"] == pytest.approx(
        sorted(r["e2e_from_schedule_ms"] for r in rows)[1]
    )
    # A closed-loop cell was never due: none of it applies.
    (tmp_path / "closed").mkdir()
    closed = build([_campaign_with(tmp_path / "closed", cell_run())]).query("SELECT * FROM cells")
    row = closed.to_json()[0]
    assert (row["lateness_ms_p99"], row["limited_by_client"], row["achieved_rate_rps"]) == (
        None, None, None,
    )  # fmt: skip


def test_a_cell_set_aside_by_a_resumed_run_is_not_pooled_with_its_rerun(
    tmp_path: Path, two_arm_campaign: Path
) -> None:
    """``ledger run --resume`` keeps an interrupted cell as ``<cell>.interrupted-N.json``
    and runs the cell again: the kept one is evidence of the interruption, not rows."""
    from ledger.derivation._derive import derive

    campaign = tmp_path / two_arm_campaign.name
    shutil.copytree(two_arm_campaign, campaign)
    query = "SELECT arm, stage, cell, n FROM cells ORDER BY ALL"
    before = build([campaign]).query(query)
    cell = next(campaign.glob("linux/capacity/*.json"))
    document = cells.load(cell)
    document.update(status="incomplete", reason="interrupted by SIGINT")
    document["requests"] = document["requests"][:2]
    cells.save(cell.with_name(cell.stem + ".interrupted-1.json"), document, split=[2])
    forge_seal(campaign)
    db = build([campaign])
    assert db.query(query) == before
    assert (
        db.query("SELECT count(*) FROM cell_settings").rows
        == build([two_arm_campaign]).query("SELECT count(*) FROM cell_settings").rows
    )
    assert derive(db, campaign.name, "windows", "linux", kind="os", differs=["os"])["rows"]


SNIFFED = {
    "plain.json": b'{"schema": "anvil-serving.cell-run/v1", "campaign_id": "c1"}',
    "no-campaign.json": b'{"schema": "anvil-serving.manifest/v1"}',
    "escaped.json": b'{"schema": "anvil-serving.cell-run/v1", "campaign_id": "c\\u00e9\\n"}',
    "number-campaign.json": b'{"schema": "anvil-serving.cell-run/v1", "campaign_id": 7}',
    "no-schema.json": b'{"campaign_id": "c1"}',
    "null-schema.json": b'{"schema": null, "campaign_id": "c1"}',
    "number-schema.json": b'{"schema": 5, "campaign_id": "c1"}',
    "array.json": b'[{"schema": "anvil-serving.cell-run/v1", "campaign_id": "c1"}]',
    "scalar.json": b'"anvil-serving.cell-run/v1"',
}
NOT_JSON = {
    "lines.json": b'{"schema": "anvil-serving.cell-run/v1", "campaign_id": "a"}\n{"x": 1}\n',
    "broken.json": b'{"schema": "anvil-serving.cell-run/v1", "campaign_id": ',
    "duplicate.json": b'{"schema": "a/v1", "schema": "anvil-serving.cell-run/v1"}',
    "nan.json": b'{"schema": "anvil-serving.cell-run/v1", "campaign_id": "c1", "x": NaN}',
    "bom.json": b'\xef\xbb\xbf{"schema": "anvil-serving.cell-run/v1", "campaign_id": "c1"}',
    "empty.json": b"",
}


def test_what_the_database_takes_for_an_artifact(tmp_path: Path) -> None:
    """One JSON object with a string schema; its campaign_id as it is. An array's items or
    a file of lines would each be taken as artifacts by DuckDB's reader (and their rows
    pooled with a cell's own): none is one."""
    for name, data in {**SNIFFED, **NOT_JSON}.items():
        (tmp_path / name).write_bytes(data)
    con = duckdb.connect()
    found = database._schemas(con, [str(tmp_path / name) for name in SNIFFED])
    assert {Path(f).name: v for f, v in found.items()} == {
        "plain.json": ("anvil-serving.cell-run/v1", "c1"),
        "no-campaign.json": ("anvil-serving.manifest/v1", None),
        "escaped.json": ("anvil-serving.cell-run/v1", "c\u00e9\n"),
        "number-campaign.json": ("anvil-serving.cell-run/v1", 7),
    }
    for name in NOT_JSON:
        with pytest.raises(database.DatabaseError, match=f"^{tmp_path / name}: .+verify"):
            database._schemas(con, [str(tmp_path / "plain.json"), str(tmp_path / name)])


def test_a_large_file_is_left_to_duckdb_unless_it_is_no_object(tmp_path: Path) -> None:
    pad = b"x" * (database._SNIFF_IN_PYTHON + 1)
    big = tmp_path / "big.json"
    big.write_bytes(
        b' {"schema": "anvil-serving.cell-run/v1", "campaign_id": "big", "p": "%s"}' % pad
    )
    listed = tmp_path / "listed.json"
    listed.write_bytes(
        b'[{"schema": "anvil-serving.cell-run/v1", "campaign_id": "l", "p": "%s"}]' % pad
    )
    assert database._sniff(str(big)) is False
    assert database._sniff(str(listed)) is None
    # A large file that is no JSON value is refused as a small one is, not left out unsaid
    # (its cell would be missing from every query); another JSON value is no artifact.
    body = b'{"schema": "anvil-serving.cell-run/v1", "campaign_id": "big", "p": "%s"}' % pad
    odd = tmp_path / "odd.json"
    for start, why in (
        (b"\xef\xbb\xbf", "starts with a byte-order mark"),
        (b"\xff\xfe", "starts with a byte-order mark"),
        (b"\x00", r"not valid JSON: it starts with b'\\x00'"),
        (b"\x0c", r"not valid JSON: it starts with b'\\x0c'"),
        (b"x", "not valid JSON: it starts with b'x'"),
    ):
        odd.write_bytes(start + body)
        with pytest.raises(database.DatabaseError, match=f"^{odd}: {why}.*verify"):
            database._sniff(str(odd))
    odd.write_bytes(b" " * (database._SNIFF_IN_PYTHON + 1))
    with pytest.raises(database.DatabaseError, match="nothing but white space"):
        database._sniff(str(odd))
    for value in (b'"%s"' % pad, b"[%s]" % pad, b"1" * len(pad), b"\n null" + pad):
        odd.write_bytes(value)
        assert database._sniff(str(odd)) is None
    found = database._schemas(duckdb.connect(), [str(big), str(listed)])
    assert found == {str(big): ("anvil-serving.cell-run/v1", "big")}
    # A file of lines starts as an object too; DuckDB would read each line as an artifact.
    lines = tmp_path / "lines.json"
    line = b'{"schema": "anvil-serving.cell-run/v1", "campaign_id": "big", "p": "%s"}' % pad
    lines.write_bytes(line + b"\n" + line + b"\n")
    assert database._sniff(str(lines)) is False
    with pytest.raises(database.DatabaseError, match=f"^{lines}: not valid JSON: 2 JSON values"):
        database._schemas(duckdb.connect(), [str(big), str(lines)])
    # The second value counts even when it names no schema.
    lines.write_bytes(line + b'\n{"other": 1}\n')
    with pytest.raises(database.DatabaseError, match=f"^{lines}: not valid JSON: 2 JSON values"):
        database._schemas(duckdb.connect(), [str(lines)])


def _copy(campaign: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(campaign, tmp_path / campaign.name, symlinks=True))


def test_a_cell_run_wrapped_in_an_array_is_not_pooled_with_the_cell(
    tmp_path: Path, cli: CliRun, two_arm_campaign: Path
) -> None:
    campaign = _copy(two_arm_campaign, tmp_path)
    cell = next(campaign.glob("linux/*/*.json"))
    (campaign / "wrapped.json").write_bytes(b"[" + cell.read_bytes() + b"]")
    db = build([campaign])
    artifacts = {r[0] for r in db.query("SELECT DISTINCT artifact FROM request_rows").rows}
    assert "wrapped.json" not in artifacts and cell.relative_to(campaign).as_posix() in artifacts
    (campaign / "wrapped.json").write_bytes(b"")
    code, _, err = cli("sql", "--from", str(campaign), "SELECT 1")
    assert code == 1 and err.count("\n") == 1 and "wrapped.json: not valid JSON" in err, err


def test_a_campaign_id_that_is_no_string_is_named_as_it_is(
    tmp_path: Path, cli: CliRun, two_arm_campaign: Path
) -> None:
    campaign = _copy(two_arm_campaign, tmp_path)
    cell = next(campaign.glob("linux/*/*.json"))
    document = json.loads(cell.read_bytes())
    document["campaign_id"] = 7
    cell.write_text(json.dumps(document))
    code, _, err = cli("sql", "--from", str(campaign), "SELECT 1")
    assert code == 2 and "campaign_id is 7, not a string" in err, err


def test_a_file_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    with pytest.raises(database.DatabaseError, match=f"^{missing}: "):
        database._schemas(duckdb.connect(), [str(missing)])


def test_a_cell_run_its_run_manifest_does_not_list_is_a_finding(
    tmp_path: Path, cli: CliRun, two_arm_campaign: Path
) -> None:
    """A copy of a cell under another name, sealed after review, would be pooled with the
    cell by the database: verify names it. A cell a resumed run set aside is no copy."""
    campaign = _copy(two_arm_campaign, tmp_path)
    cell = next(campaign.glob("linux/*/*.json"))
    copies = [cell.with_name("ctx8-c8-nothink.json"), cell.with_name("ctx9-c9-nothink.json")]
    set_aside = cell.with_name(cell.stem + ".interrupted-1.json")
    for copy in (*copies, set_aside):
        # A whole copy: the cell run and its parts, each under the copy's name.
        header = json.loads(cell.read_text())
        for part in header["parts"]:
            renamed = part["path"].replace(cell.stem + ".part-", copy.stem + ".part-")
            shutil.copyfile(campaign / part["path"], campaign / renamed)
            part["path"] = renamed
        copy.write_text(json.dumps(header))
    code, _, err = cli("seal", str(campaign), "--reseal-after-review")
    assert code == 0, err
    status, report = verify_json(cli, campaign)
    errors = [(f["code"], f["path"]) for f in report["findings"] if f["severity"] == "error"]
    assert status == 1
    assert sorted(errors) == [("run-unlisted", str(copy)) for copy in copies]
    for copy in copies:
        for part in json.loads(copy.read_text())["parts"]:
            (campaign / part["path"]).unlink()
        copy.unlink()
    code, _, err = cli("seal", str(campaign), "--reseal-after-review")
    status, report = verify_json(cli, campaign)
    assert status == 0, report["findings"]


def test_a_folder_with_no_campaign_is_refused_not_read_as_empty(
    tmp_path: Path, cli: CliRun
) -> None:
    """Verify calls it no-campaign; loaded as nothing, every query answered empty."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "notes.json").write_text('{"schema": "anvil-serving.cell-run/v1"}')
    for argv in (
        ("sql", "--from", str(folder), "SELECT count(*) FROM request_rows"),
        ("export", "--from", str(folder), "--parquet", str(tmp_path / "out")),
    ):
        status, out, err = cli(*argv)
        assert (status, out) == (2, ""), err
        assert err.startswith(f"error: {folder}: no campaign folder here"), err
    assert not (tmp_path / "out").exists()


def test_a_cell_run_duckdb_cannot_read_is_one_line_without_reader_advice(
    tmp_path: Path, two_arm_campaign: Path, cli: CliRun
) -> None:
    campaign = tmp_path / two_arm_campaign.name
    shutil.copytree(two_arm_campaign, campaign)
    cell = min(campaign.glob("linux/capacity/*.json"))
    document = cells.load(cell)
    document["requests"][0]["sent_ns"] = "soon"
    cells.save(cell, document)
    part = campaign / cells.where(cell, document, 0)[0]
    status, _, err = cli("sql", "--from", str(campaign), "SELECT count(*) FROM requests")
    assert status != 0 and err.count("\n") == 1
    assert f'{part}: line 1 at /sent_ns: "soon" is not a whole number' in err
    assert "auto_detect" not in err and "ledger verify names every artifact" in err


def _spill_of(db: database.Database) -> Path:
    folder = db.query("SELECT current_setting('temp_directory')").rows[0][0]
    assert "ledger-duckdb-" in folder
    return Path(folder)


def test_the_spill_folder_goes_with_the_database_closed_or_not() -> None:
    campaign = ROOT / "evidence" / "2026-11-29-simulated-example"
    with build([campaign]) as db:
        closed = _spill_of(db)
        assert closed.is_dir()
    assert not closed.exists()
    # A library caller that never closes it: the folder goes when the database does.
    dropped = build([campaign])
    spill = _spill_of(dropped)
    assert spill.is_dir()
    del dropped
    gc.collect()
    assert not spill.exists()


def test_a_forked_worker_leaves_its_parents_spill_folder() -> None:
    db = build([ROOT / "evidence" / "2026-11-29-simulated-example"])
    spill = _spill_of(db)
    child = os.fork()
    if child == 0:  # pragma: no cover - the parent's assertions tell
        try:
            # DuckDB's connection is not to be closed in a fork (it crashes): only ours goes.
            connection = db.connection
            del db
            gc.collect()
        finally:
            os._exit(0 if connection is not None else 1)
    assert os.waitpid(child, 0)[1] == 0
    assert spill.is_dir()
    assert db.query("SELECT 1").rows == ((1,),)
    db.close()
    assert not spill.exists()


def test_the_spill_folder_goes_at_exit_and_may_be_gone_already(tmp_path: Path) -> None:
    campaign = ROOT / "evidence" / "2026-11-29-simulated-example"
    # Removed by someone else (a tmp cleaner): closing is still quiet.
    db = build([campaign])
    shutil.rmtree(_spill_of(db))
    db.close()
    # An interpreter that exits with the database open (a script, a notebook) removes it.
    script = (
        "import sys\n"
        "from ledger.database import build\n"
        f"db = build([{str(campaign)!r}])\n"
        "print(db.query(\"SELECT current_setting('temp_directory')\").rows[0][0])\n"
        "sys.modules['__main__'].kept = db\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    spill = Path(done.stdout.strip())
    assert "ledger-duckdb-" in spill.name and not spill.exists()


@pytest.mark.parametrize(
    ("field", "value", "pointer"),
    [
        ("completion_tokens", -5, "/requests/3/usage/completion_tokens"),
        ("prompt_tokens", 2**64, "/requests/3/usage/prompt_tokens"),
        ("end_ns", 2**63, "/requests/3/end_ns"),
        ("sent_ns", -1, "/requests/3/sent_ns"),
        # The document's own numbers, not only its requests'.
        ("concurrency", 0, "/cell/concurrency"),
    ],
)
def test_verify_and_the_database_share_one_definition_of_a_valid_record(
    two_arm_campaign: Path, tmp_path: Path, cli: CliRun, field: str, value: int, pointer: str
) -> None:
    """Verify called -5 completion tokens schema-invalid while sql computed from it, and
    sql refused 2**64 saying verify names the artifact, which verify did not."""
    campaign = tmp_path / two_arm_campaign.name
    shutil.copytree(two_arm_campaign, campaign)
    rel = "linux/capacity/ctx256-c1-nothink.json"
    document = cells.load(campaign / rel)
    record = document["requests"][3]
    if field in ("completion_tokens", "prompt_tokens"):
        record["usage"][field] = value
    elif field == "concurrency":
        document["cell"][field] = value
    else:
        record[field] = value
    cells.save(campaign / rel, document)
    if pointer.startswith("/requests/3"):
        # The record is line 4 of a part, its pointer one into the line.
        rel, line = cells.where(campaign / rel, document, 3)
        pointer = pointer.removeprefix("/requests/3")
        at = f": line {line} at {pointer}"
    else:
        at = f"#{pointer}"
    status, report = verify_json(cli, campaign)
    invalid = [f for f in report["findings"] if f["code"] == "schema-invalid"]
    assert status == 1
    assert [(f["path"], f["pointer"]) for f in invalid] == [(f"{campaign}/{rel}", pointer)]
    for argv in (
        ["sql", "SELECT count(*) FROM requests", "--from", str(campaign)],
        ["derive", str(campaign), "--baseline", "windows", "--candidate", "linux",
         "--reseal-after-review"],
    ):  # fmt: skip
        status, out, err = cli(*argv)
        assert (status, out) == (1, ""), err
        assert rel in err and "ledger verify names every artifact that breaks its schema" in err
        if value < 1:
            least = 1 if field == "concurrency" else 0
            assert f"{rel}{at}: {value} is less than the minimum of {least}" in err
    assert not (campaign / "derived").exists()


def test_an_open_loop_rate_of_zero_is_refused_by_its_exclusive_bound(
    two_arm_campaign: Path, tmp_path: Path, cli: CliRun
) -> None:
    campaign = tmp_path / two_arm_campaign.name
    shutil.copytree(two_arm_campaign, campaign)
    rel = "linux/capacity/ctx256-c1-nothink.json"
    document = json.loads((campaign / rel).read_bytes())
    document["cell"]["arrival"] = {"rate": 0.0}
    (campaign / rel).write_text(json.dumps(document))
    status, _, err = cli("sql", "SELECT count(*) FROM requests", "--from", str(campaign))
    assert status == 1
    assert f"{rel}#/cell/arrival/rate: 0 is less than or equal to the minimum of 0" in err


def test_an_imported_run_is_held_to_its_own_schema_s_bounds(tmp_path: Path, cli: CliRun) -> None:
    argv = ["import", "vllm", str(ROOT / "tests/assets/imports/vllm_save_detailed.json"),
            "--raw-dir", str(tmp_path), "--campaign", "2026-11-30-imported", "--arm", "vllm"]  # fmt: skip
    assert cli(*argv)[0] == 0
    (path,) = (tmp_path / "2026-11-30-imported").glob("vllm/imported/*.json")
    document = json.loads(path.read_bytes())
    document["requests"][1]["index"] = -1
    path.write_text(json.dumps(document))
    status, _, err = cli("sql", "SELECT 1", "--from", str(tmp_path / "2026-11-30-imported"))
    assert status == 1
    assert (
        "#/requests/1/index: -1 is less than the minimum of 0 (anvil-serving.imported-run/v1)"
        in err
    )


@pytest.mark.parametrize(
    ("bounds", "value", "said"),
    [
        ({"minimum": 0}, -1, "-1 is less than the minimum of 0"),
        ({"maximum": 2**63 - 1}, 2**63, f"{2**63} is greater than the maximum of {2**63 - 1}"),
        ({"exclusive_minimum": 0}, 0, "0 is less than or equal to the minimum of 0"),
        ({"exclusive_maximum": 1.5}, 1.5, "1.5 is greater than or equal to the maximum of 1.5"),
        ({"minimum": 0, "maximum": 10}, 10, None),
        ({"exclusive_minimum": 0}, 0.25, None),
    ],
)
def test_each_kind_of_bound_is_held(
    bounds: dict[str, float], value: float, said: str | None
) -> None:
    from ledger.database._record_bounds import Bound

    found = {"minimum": None, "maximum": None, "exclusive_minimum": None,
             "exclusive_maximum": None} | bounds  # fmt: skip
    assert Bound(("x",), None, **found).broken(value) == said


@pytest.mark.parametrize("value", [True, "253", 2.5])
def test_a_count_of_another_json_type_is_refused_as_verify_refuses_it(
    two_arm_campaign: Path, tmp_path: Path, cli: CliRun, value: object
) -> None:
    """DuckDB's reader takes true for 1, "253" for 253 and 2.5 for 2: the database
    computed from a record verify calls schema-invalid."""
    campaign = tmp_path / two_arm_campaign.name
    shutil.copytree(two_arm_campaign, campaign)
    rel = "linux/capacity/ctx256-c1-nothink.json"
    document = cells.load(campaign / rel)
    document["requests"][0]["usage"]["prompt_tokens"] = value
    cells.save(campaign / rel, document)
    part, line = cells.where(campaign / rel, document, 0)
    status, report = verify_json(cli, campaign)
    assert [
        (f["path"], f["pointer"]) for f in report["findings"] if f["code"] == "schema-invalid"
    ] == [(f"{campaign}/{part}", "/usage/prompt_tokens")]
    status, out, err = cli("sql", "SELECT count(*) FROM requests", "--from", str(campaign))
    assert (status, out) == (1, "")
    shown = json.dumps(value)
    assert f"{part}: line {line} at /usage/prompt_tokens: {shown} is not a whole number" in err
