"""A cell run's records in parts (``cell-run/v2``): the compact chunk times, the writer's
parts and their seal, verify's hold on every record, and the same numbers from a cell
split in parts as from the same requests in one file."""

from __future__ import annotations

import hashlib
import json
import random
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from ledger.database import build
from ledger.derivation._derive import derive
from ledger.errors import RunnerError
from ledger.formats import cell_records
from ledger.formats.schema import validate
from runners.campaign._records import CellParts
from tests import cells
from tests.conftest import CliRun, forge_seal, run_plan_text, verify_json

CELL = "linux/capacity/ctx256-c1-nothink.json"

# -- the compact form ------------------------------------------------------------------


def test_chunk_times_round_trip_to_the_microsecond() -> None:
    rng = random.Random(5)
    for _ in range(200):
        first = rng.randrange(10**12)
        times = [first]
        for _ in range(rng.randrange(0, 600)):
            step = rng.choice([0, 1, 499, 500, 12_500_000 + rng.randrange(-90_000, 90_000), 10**13])
            times.append(times[-1] + step)
        text = cell_records.encode_chunks(first, times)
        decoded = cell_records.decode_chunks(text)
        assert decoded == [cell_records.offset_us(first, t) for t in times]
        assert set(text) <= set(cell_records.DIGITS)
    assert cell_records.encode_chunks(None, []) == cell_records.encode_chunks(5, [5]) == ""
    assert cell_records.decode_chunks("") == [0]


@pytest.mark.parametrize(("jitter_us", "most"), [(3, 1.0), (100, 2.0), (3_000, 3.0)])
def test_a_steady_decode_costs_what_its_jitter_does(jitter_us: int, most: float) -> None:
    """512 chunks 12.5 ms apart, each up to ``jitter_us`` early or late: a gap changes by
    at most four times that, and a change of at most 15 us takes one character, 495 us
    two, 15 ms three, whatever the rate."""
    rng = random.Random(1)
    times = [i * 12_500_000 + rng.randrange(-jitter_us, jitter_us + 1) * 1000 for i in range(512)]
    text = cell_records.encode_chunks(times[0], times)
    # The first gap is all change (12,500 us: three characters); the 510 after it:
    assert (len(text) - 3) / 510 <= most


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("ab/c", "'/' is not a digit"),
        ("0V", "cut short"),  # V: a digit that more follow
        ("V" * 15 + "0", "longer than 64 bits"),
        ("1", "negative"),  # zigzag 1 is -1: a gap below 0
    ],
)
def test_chunk_times_that_are_no_times_are_refused(text: str, said: str) -> None:
    with pytest.raises(ValueError, match=said):
        cell_records.decode_chunks(text)


def test_out_of_order_chunk_times_are_not_encoded() -> None:
    with pytest.raises(ValueError, match="not in order"):
        cell_records.encode_chunks(0, [0, 5_000, 1_000])


def test_channels_are_run_length_coded() -> None:
    assert cell_records.encode_channels("rrrcct") == "r3c2t1"
    assert cell_records.decode_channels("r3c2t1") == "rrrcct"
    assert cell_records.channel_count("r300c212") == 512
    assert cell_records.encode_channels("") == ""


# -- the writer --------------------------------------------------------------------------


LINE = 500
"""Bytes of each record's line in the writer's tests: nine fill a part of 4,500."""


def _record(index: int) -> dict[str, Any]:
    """A valid record whose line is :data:`LINE` bytes (its response id the padding)."""
    record: dict[str, Any] = {
        "index": index, "warmup": False, "prompt_sha256": "0" * 64, "sent_ns": 0,
        "headers_ns": 1, "first_token_ns": 2, "first_content_ns": 2, "last_token_ns": 2,
        "end_ns": 3, "chunks_us": "", "channel_runs": "c1", "usage": None,
        "finish_reason": "stop", "response_id": "", "content_chars": 1,
        "content_sha256": "0" * 64, "output_as_requested": None,
    }  # fmt: skip
    record["response_id"] = "x" * (LINE - len(orjson.dumps(record)) - 1)
    return record


def test_parts_close_at_their_size_each_sealed_in_the_header(tmp_path: Path) -> None:
    rel = "a/s/ctx1-c1-nothink.json"
    (tmp_path / "a/s").mkdir(parents=True)
    closed: list[int] = []
    parts = CellParts(tmp_path, rel, lambda: closed.append(len(parts.listed)), max_bytes=9 * LINE)
    for index in range(25):
        parts.append(_record(index))
    parts.close_part()
    assert closed == [1, 2, 3]  # 9 records fill a part; 7 left for the last
    assert [p["requests"] for p in parts.listed] == [9, 9, 7]
    for part in parts.listed:
        data = (tmp_path / part["path"]).read_bytes()
        assert (hashlib.sha256(data).hexdigest(), len(data)) == (part["sha256"], part["bytes"])
    header = {"schema": cell_records.CELL_RUN_V2, "parts": parts.listed}
    assert [r["index"] for r in cell_records.records(tmp_path, header)] == list(range(25))
    parts.close_part()  # none open: nothing listed twice
    assert len(parts.listed) == 3


def test_a_killed_writer_is_taken_up_where_its_last_whole_line_ends(tmp_path: Path) -> None:
    rel = "a/s/ctx1-c1-nothink.json"
    (tmp_path / "a/s").mkdir(parents=True)
    first = CellParts(tmp_path, rel, lambda: None, max_bytes=9 * LINE)
    for index in range(12):
        first.append(_record(index))
    listed = list(first.listed)
    open_part = tmp_path / cell_records.part_rel(rel, 2)
    with open(open_part, "ab") as stream:
        stream.write(b'{"index": 12, "pa')  # the line a SIGKILL cut
    again = CellParts(tmp_path, rel, lambda: None, max_bytes=9 * LINE)
    again.reopen(listed)
    assert [r["index"] for r in again.on_disk({"schema": cell_records.CELL_RUN_V2})] == list(
        range(12)
    )
    again.append(_record(12))
    again.close_part()
    # The part taken up is listed with what it holds: its records and bytes, the cut gone.
    assert again.listed[1]["requests"] == 4
    assert again.listed[1]["bytes"] == open_part.stat().st_size == 4 * LINE
    header = {"schema": cell_records.CELL_RUN_V2, "parts": again.listed}
    assert [r["index"] for r in cell_records.records(tmp_path, header)] == list(range(13))


def test_a_bad_line_before_the_last_is_not_what_a_kill_leaves(tmp_path: Path) -> None:
    rel = "a/s/ctx1-c1-nothink.json"
    (tmp_path / "a/s").mkdir(parents=True)
    first = CellParts(tmp_path, rel, lambda: None)
    for index in range(3):
        first.append(_record(index))
    first.abandon()
    part = tmp_path / cell_records.part_rel(rel, 1)
    lines = part.read_bytes().splitlines(keepends=True)
    part.write_bytes(lines[0] + b"{not json}\n" + lines[2])
    with pytest.raises(RunnerError, match=r"cannot resume: .*:2: not JSON"):
        CellParts(tmp_path, rel, lambda: None).reopen([])
    assert part.read_bytes() == lines[0] + b"{not json}\n" + lines[2]  # nothing cut


def test_a_part_changed_since_it_was_sealed_or_a_stray_one_is_not_taken_up(
    tmp_path: Path,
) -> None:
    rel = "a/s/ctx1-c1-nothink.json"
    (tmp_path / "a/s").mkdir(parents=True)
    first = CellParts(tmp_path, rel, lambda: None, max_bytes=3 * LINE)
    for index in range(6):
        first.append(_record(index))
    first.close_part()
    listed = list(first.listed)
    part = tmp_path / listed[0]["path"]
    good = part.read_bytes()
    part.write_bytes(good.replace(b'"index":0', b'"index":9'))
    with pytest.raises(RunnerError, match="is not the part its cell run sealed"):
        CellParts(tmp_path, rel, lambda: None).reopen(listed)
    part.write_bytes(good)
    for strays in ([9], [4, 5]):  # two parts listed: a third is the one a run writes
        for number in strays:
            (tmp_path / cell_records.part_rel(rel, number)).write_bytes(b"")
        with pytest.raises(RunnerError, match=rf"parts \[{', '.join(map(str, strays))}\] are not"):
            CellParts(tmp_path, rel, lambda: None).reopen(listed)
        for number in strays:
            (tmp_path / cell_records.part_rel(rel, number)).unlink()
    # Another cell's part listed as this one's: its records would count twice.
    other = [dict(listed[0], path=cell_records.part_rel("a/s/ctx2-c1-nothink.json", 1))]
    with pytest.raises(
        RunnerError, match=re.escape("lists a/s/ctx2-c1-nothink.part-0001.jsonl as its part 1")
    ):
        CellParts(tmp_path, rel, lambda: None).reopen(other)
    # A part listed that is gone.
    part.unlink()
    with pytest.raises(RunnerError, match=r"cannot resume: a/s/ctx1-c1-nothink.part-0001.jsonl: "):
        CellParts(tmp_path, rel, lambda: None).reopen(listed)


def test_records_read_back_refuse_a_part_that_is_not_the_one_listed(tmp_path: Path) -> None:
    rel = "a/s/ctx1-c1-nothink.json"
    (tmp_path / "a/s").mkdir(parents=True)
    parts = CellParts(tmp_path, rel, lambda: None)
    parts.append(_record(0))
    parts.close_part()
    (tmp_path / parts.listed[0]["path"]).write_bytes(orjson.dumps(_record(1)) + b"\n")
    header = {"schema": cell_records.CELL_RUN_V2, "parts": parts.listed}
    with pytest.raises(Exception, match="not the one its cell run lists"):
        list(cell_records.records(tmp_path, header))


# -- verify's hold on every record -------------------------------------------------------


@pytest.fixture
def campaign(two_arm_campaign: Path, tmp_path: Path) -> Path:
    copy = tmp_path / two_arm_campaign.name
    shutil.copytree(two_arm_campaign, copy)
    return copy


def _reseal(campaign: Path, rel: str) -> None:
    """Every digest made to agree with an edit: the run manifest's and the seal."""
    run_path = campaign / "run-manifest.json"
    run = json.loads(run_path.read_text())
    for entry in run["cells"]:
        if entry["artifact"] and entry["artifact"]["path"] == rel:
            entry["artifact"]["sha256"] = hashlib.sha256((campaign / rel).read_bytes()).hexdigest()
    run_path.write_text(json.dumps(run))
    forge_seal(campaign)


def _findings(cli: CliRun, campaign: Path) -> set[tuple[str, str, str, str]]:
    """(code, path in the campaign, pointer, message) of every error verify finds."""
    _, report = verify_json(cli, campaign)
    return {
        (f["code"], f["path"].removeprefix(f"{campaign}/"), f["pointer"], f["message"])
        for f in report["findings"]
        if f["severity"] == "error"
    }


def _edited(campaign: Path, edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    document = cells.load(campaign / CELL)
    edit(document)
    cells.save(campaign / CELL, document)
    _reseal(campaign, CELL)
    return document


def _edited_header(campaign: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """The cell run's own file edited, its parts as they are, every digest made to agree."""
    header = json.loads((campaign / CELL).read_text())
    edit(header)
    (campaign / CELL).write_text(json.dumps(header))
    _reseal(campaign, CELL)


def _first_measured(document: dict[str, Any]) -> dict[str, Any]:
    return next(r for r in document["requests"] if not r["warmup"])


def _nth(document: dict[str, Any], n: int) -> dict[str, Any]:
    record: dict[str, Any] = document["requests"][n]
    return record


RECORD_RULES: list[tuple[str, Callable[[dict[str, Any]], None], str, str, str]] = [
    (
        "duplicate",  # the second to hold an index is the one named
        lambda d: _nth(d, 2).update(index=_nth(d, 1)["index"]),
        "/index",
        "appears twice",
        "record-inconsistent",
    ),
    (
        "index-past-the-cell",
        lambda d: _nth(d, 2).update(index=99),
        "/index",
        "the cell has 13",
        "record-inconsistent",
    ),
    (
        "channels",
        lambda d: _nth(d, 2).update(channel_runs="c3"),
        "/channel_runs",
        "channels for",
        "record-inconsistent",
    ),
    (
        "last-token",
        lambda d: _nth(d, 2).update(last_token_ns=_nth(d, 2)["last_token_ns"] + 5_000),
        "/last_token_ns",
        "first/last token times",
        "record-inconsistent",
    ),
    (
        "first-content",
        lambda d: _nth(d, 2).update(first_content_ns=_nth(d, 2)["first_content_ns"] + 1_700),
        "/first_content_ns",
        "not the time of any chunk",
        "record-inconsistent",
    ),
    (
        "usage-flag",
        lambda d: _nth(d, 2).update(usage_mismatch=True),
        "/usage_mismatch",
        "usage_mismatch is True",
        "record-inconsistent",
    ),
    (
        "chunks-no-digits",
        lambda d: _nth(d, 2).update(chunks_us="a/b"),
        "/chunks_us",
        "match",
        "schema-invalid",
    ),
    (
        "chunks-no-times",
        lambda d: _nth(d, 2).update(chunks_us="1"),
        "/chunks_us",
        "negative",
        "record-inconsistent",
    ),
    (
        "chunks-without-first-token",
        lambda d: _nth(d, 2).update(first_token_ns=None, first_content_ns=None),
        "/chunks_us",
        "without a first token time",
        "record-inconsistent",
    ),
    (
        "out-of-order",
        lambda d: _nth(d, 2).update(end_ns=_nth(d, 2)["sent_ns"] - 1),
        "/end_ns",
        "is before",
        "record-inconsistent",
    ),
]


@pytest.mark.parametrize(
    ("edit", "pointer", "said", "code"),
    [rule[1:] for rule in RECORD_RULES],
    ids=[rule[0] for rule in RECORD_RULES],
)
def test_each_record_rule_is_held_on_its_own_in_a_part(
    campaign: Path,
    cli: CliRun,
    edit: Callable[[dict[str, Any]], None],
    pointer: str,
    said: str,
    code: str,
) -> None:
    document = _edited(campaign, edit)
    part, line = cells.where(campaign / CELL, document, 2)
    ((found_code, path, at, message),) = _findings(cli, campaign)
    assert (found_code, path, at) == (code, part, pointer), message
    assert message.startswith(f"line {line}: ") and said in message, message


def test_a_record_against_its_schema_is_named_by_line_and_pointer(
    campaign: Path, cli: CliRun
) -> None:
    document = _edited(
        campaign,
        lambda d: _nth(d, 4).update(error={"class": "gone", "status": None, "message": ""}),
    )
    part, line = cells.where(campaign / CELL, document, 4)
    found = _findings(cli, campaign)
    assert {(c, p, at) for c, p, at, _ in found} == {("schema-invalid", part, "/error/class")}
    assert all(m.startswith(f"line {line}: ") and "record of cell-run/v2" in m for *_, m in found)


def test_a_complete_cell_short_of_its_requests_is_held(campaign: Path, cli: CliRun) -> None:
    _edited(campaign, lambda d: d["requests"].pop())
    assert _findings(cli, campaign) == {
        (
            "record-inconsistent",
            CELL,
            "/parts",
            "a complete cell holds 11 measured requests, cell.requests is 12",
        )
    }


@pytest.mark.parametrize(
    ("edit", "pointer", "said"),
    [
        (lambda h: h.update(records=h["records"] + 1), "/records", "the parts hold 13"),
        (
            lambda h: h["parts"][0].update(requests=h["parts"][0]["requests"] - 1),
            "/parts/0/requests",
            "holds 13",
        ),
    ],
    ids=["records", "part-count"],
)
def test_the_header_s_counts_are_held_to_its_parts(
    campaign: Path, cli: CliRun, edit: Callable[[dict[str, Any]], None], pointer: str, said: str
) -> None:
    _edited_header(campaign, edit)
    found = _findings(cli, campaign)
    assert {(c, p, at) for c, p, at, _ in found} == {("record-inconsistent", CELL, pointer)}
    assert all(said in m for *_, m in found)


def test_a_part_no_cell_run_lists_and_a_line_cut_short_are_findings(
    campaign: Path, cli: CliRun
) -> None:
    stray = CELL.replace(".json", ".part-0002.jsonl")
    (campaign / stray).write_bytes(b'{"index": 0}\n')
    forge_seal(campaign)
    assert {(c, p) for c, p, *_ in _findings(cli, campaign)} == {("run-unlisted", stray)}
    (campaign / stray).unlink()
    header = json.loads((campaign / CELL).read_text())
    part = campaign / header["parts"][0]["path"]
    data = part.read_bytes()[:-1]  # the last newline gone: a write cut short
    part.write_bytes(data)
    header["parts"][0].update(sha256=hashlib.sha256(data).hexdigest(), bytes=len(data))
    (campaign / CELL).write_text(json.dumps(header))
    _reseal(campaign, CELL)
    found = _findings(cli, campaign)
    assert ("json-syntax", header["parts"][0]["path"], "") in {(c, p, at) for c, p, at, _ in found}
    assert any("line 13: the line does not end" in m for *_, m in found)


def test_a_part_is_hashed_and_its_digest_held_by_the_cell_run(campaign: Path, cli: CliRun) -> None:
    header = json.loads((campaign / CELL).read_text())
    part = header["parts"][0]["path"]
    (campaign / part).write_bytes(
        (campaign / part).read_bytes().replace(b'"warmup":false', b'"warmup":false ', 1)
    )
    forge_seal(campaign)
    found = {(c, p) for c, p, *_ in _findings(cli, campaign)}
    assert ("reference-mismatch", CELL) in found


LOAD = """
campaign_id = "2026-12-03-parts-load"
seed = 3
[[arms]]
name = "base"
[arms.simulated]
decode_tok_s = 2000.0
[[stages]]
kind = "load"
context_target = 128
rate = 40
requests = 12
max_tokens = 4
controlled_output = true
warmup = 1
"""
LOAD_CELL = "base/load/ctx128-r40-nothink.json"


@pytest.fixture(scope="module")
def load_campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_plan_text(LOAD, tmp_path_factory.mktemp("parts-load"))[1]


def _measured_first(document: dict[str, Any]) -> dict[str, Any]:
    return min((r for r in document["requests"] if not r["warmup"]), key=lambda r: r["index"])


@pytest.mark.parametrize(
    ("edit", "expected", "moved"),
    [
        (lambda d: None, set(), False),
        (
            lambda d: _measured_first(d).pop("scheduled_ns"),
            {("record-inconsistent", "part", "")},
            True,
        ),
        (
            lambda d: _measured_first(d).update(scheduled_ns=_measured_first(d)["sent_ns"] + 1),
            {("record-inconsistent", "part", "/sent_ns"),
             ("schedule-mismatch", "part", "/scheduled_ns")},
            None,  # 1 ns early: the percentiles may or may not move with it
        ),
        (
            lambda d: d["cell"]["arrival"]["lateness"].update(threshold_ms=1000.0),
            {("derived-mismatch", "header", "/cell/arrival/lateness/threshold_ms")},
            False,
        ),
        # Without its settings, the cell's due times are not checked against any.
        (lambda d: d["cell"].pop("arrival"), {("record-inconsistent", "header", "/cell")}, False),
    ],
    ids=["valid", "no-due-time", "sent-before-due", "threshold", "no-arrival"],
)  # fmt: skip
def test_a_load_cell_in_parts_is_held_to_its_schedule(
    load_campaign: Path,
    tmp_path: Path,
    cli: CliRun,
    edit: Callable[[dict[str, Any]], None],
    expected: set[tuple[str, str, str]],
    moved: bool | None,
) -> None:
    """``moved``: the edit changes a due time, so the lateness the header states (of the
    records as run) no longer follows from them either."""
    campaign = tmp_path / load_campaign.name
    shutil.copytree(load_campaign, campaign)
    document = cells.load(campaign / LOAD_CELL)
    edit(document)
    cells.save(campaign / LOAD_CELL, document)
    _reseal(campaign, LOAD_CELL)
    named = {"part": document["parts"][0]["path"], "header": LOAD_CELL}
    found = {(c, p, at) for c, p, at, _ in _findings(cli, campaign)}
    lateness = {
        f for f in found if f[0] == "derived-mismatch" and f[2].rsplit("/", 1)[1].endswith("_ms")
        and not f[2].endswith("threshold_ms")
    }  # fmt: skip
    assert found - lateness == {(c, named[which], at) for c, which, at in expected}
    if moved is not None:
        assert bool(lateness) == moved


# -- the same numbers, split or whole ----------------------------------------------------


def _as_v1(document: dict[str, Any]) -> dict[str, Any]:
    """The same cell as a v1 document: its records in it, chunk times in nanoseconds."""
    whole = {k: v for k, v in document.items() if k not in ("parts", "records", "resumed")}
    whole["schema"] = cell_records.CELL_RUN_V1
    requests = []
    for record in document["requests"]:
        record = dict(record)
        first = record["first_token_ns"]
        offsets = cell_records.decode_chunks(record.pop("chunks_us")) if first is not None else []
        # Microseconds rounded half up can pass the exact last token: held to it, the
        # chunk times stay in order, as a v1 writer's nanoseconds were.
        last = record["last_token_ns"]
        record["chunks_ns"] = [min(first + 1000 * o, last) for o in offsets]
        record["chunk_channels"] = cell_records.decode_channels(record.pop("channel_runs"))
        if record["chunks_ns"]:
            record["chunks_ns"][-1] = last
        requests.append(record)
    whole["requests"] = sorted(requests, key=lambda r: (not r["warmup"], r["index"]))
    return whole


def _numbers(campaign: Path) -> str:
    """A derived comparison's numbers: what differs with the files (their digests) aside."""
    document = derive(build([campaign]), campaign.name, "windows", "linux", kind="ab",
                      differs=["os", "simulated_profile"])  # fmt: skip
    for row in document["rows"]:
        row.pop("sources", None)
    document.pop("sources", None)
    return json.dumps(document, sort_keys=True)


def test_a_cell_split_in_parts_gives_the_numbers_of_the_same_requests_whole(
    campaign: Path, tmp_path: Path
) -> None:
    reference = _numbers(campaign)
    split = tmp_path / "split" / campaign.name
    whole = tmp_path / "whole" / campaign.name
    shutil.copytree(campaign, split)
    shutil.copytree(campaign, whole)
    for path in sorted(split.glob("*/*/ctx*.json")):
        document = cells.load(path)
        cells.save(path, document, split=[1, 4, 2])  # 1, 4, and the rest in a third
        assert len(json.loads(path.read_text())["parts"]) == 3
    for path in sorted(whole.glob("*/*/ctx*.json")):
        document = cells.load(path)
        for part in document["parts"]:
            (whole / part["path"]).unlink()
        v1 = _as_v1(document)
        validate(v1)
        path.write_text(json.dumps(v1))
    assert _numbers(split) == reference
    assert _numbers(whole) == reference
    rows = "SELECT * FROM requests ORDER BY campaign_id, arm, stage, cell, request_index"
    expected = build([campaign]).query(rows).to_json()
    for other in (split, whole):
        got = build([other]).query(rows).to_json()
        # The same rows: the artifact each names is the cell run either way.
        assert got == expected


# -- what publication leaves of them -----------------------------------------------------


def test_the_sanitizer_leaves_chunk_times_as_they_are() -> None:
    """Base64's ``/`` and ``+`` made 49 of 6,000 such strings read as a path or a token,
    which the sanitizer redacted in part: the published chunk times would be no times."""
    from ledger.sanitizer import Sanitizer

    sanitizer = Sanitizer()
    rng = random.Random(7)
    for _ in range(3000):
        times = [0]
        for _ in range(rng.randrange(2, 600)):
            times.append(times[-1] + rng.choice([0, 12_500_000]) + rng.randrange(0, 6_000_000))
        document = {"chunks_us": cell_records.encode_chunks(0, times), "channel_runs": "c9"}
        assert sanitizer.document(document) == document


def test_a_publication_keeps_every_record_of_every_part(campaign: Path, tmp_path: Path) -> None:
    from ledger.publication import publish

    public = publish(campaign, tmp_path / "public", digest_map=tmp_path / "map.json").folder
    for path in sorted(campaign.glob("*/*/ctx*.json")):
        raw, published = cells.load(path), cells.load(public / path.relative_to(campaign))
        assert published["requests"] == raw["requests"]
        assert [p["path"] for p in published["parts"]] == [p["path"] for p in raw["parts"]]


def test_the_database_reads_only_parts_its_campaign_holds(
    campaign: Path, tmp_path: Path, cli: CliRun
) -> None:
    """A part is read where the campaign's listing found it: a cell run naming a file
    elsewhere (outside the campaign, or never written) is refused, never read."""
    outside = tmp_path / "elsewhere.part-0001.jsonl"
    outside.write_bytes(
        (campaign / json.loads((campaign / CELL).read_text())["parts"][0]["path"]).read_bytes()
    )
    for named in (
        "../../../elsewhere.part-0001.jsonl",
        CELL.replace("ctx256", "ctx999").replace(".json", ".part-0001.jsonl"),
    ):
        header = json.loads((campaign / CELL).read_text())
        header["parts"][0]["path"] = named
        (campaign / CELL).write_text(json.dumps(header))
        status, out, err = cli("sql", "SELECT count(*) FROM requests", "--from", str(campaign))
        assert (status, out) == (1, ""), err
        assert "which is not its part 1 in its campaign" in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("edit", "pointer", "said"),
    [
        (
            lambda h: h["parts"][0].update(path=CELL.replace("ctx256", "ctx1024")[:-5] + ".part-0001.jsonl"),
            "/parts/0/path",
            "is not this cell run's part 1",
        ),
        (lambda h: h["parts"][0].update(bytes=h["parts"][0]["bytes"] + 1), "/parts/0/bytes", "holds"),
    ],
    ids=["another-cell-s-part", "bytes"],
)  # fmt: skip
def test_a_part_listed_is_the_cell_run_s_own_and_of_its_size(
    campaign: Path, cli: CliRun, edit: Callable[[dict[str, Any]], None], pointer: str, said: str
) -> None:
    """Another cell's part listed as this one's would have its records counted twice."""
    _edited_header(campaign, edit)
    found = {(c, p, at) for c, p, at, m in _findings(cli, campaign) if said in m}
    assert ("record-inconsistent", CELL, pointer) in found


@pytest.mark.parametrize(
    ("line", "code", "said"),
    [
        (b"[1, 2]\n", "schema-invalid", "not a JSON object"),
        (b'{"index": 1, "index": 2}\n', "duplicate-key", "duplicate key"),
        (b'{"index": NaN}\n', "json-nonfinite", "non-finite"),
    ],
    ids=["no-object", "duplicate-key", "nan"],
)
def test_a_line_that_is_no_record_is_named_by_its_line(
    campaign: Path, cli: CliRun, line: bytes, code: str, said: str
) -> None:
    header = json.loads((campaign / CELL).read_text())
    part = campaign / header["parts"][0]["path"]
    data = part.read_bytes()
    first = data.index(b"\n") + 1
    data = data[:first] + line + data[first:]
    part.write_bytes(data)
    header["parts"][0].update(
        sha256=hashlib.sha256(data).hexdigest(),
        bytes=len(data),
        requests=header["parts"][0]["requests"] + 1,
    )
    (campaign / CELL).write_text(json.dumps(header))
    _reseal(campaign, CELL)
    found = [
        (c, p, m) for c, p, _, m in _findings(cli, campaign) if p == header["parts"][0]["path"]
    ]
    assert [(c, m.split(":")[0]) for c, _, m in found] == [(code, "line 2")], found
    assert said in found[0][2]


def test_a_part_over_the_size_cap_is_hashed_not_read(campaign: Path, cli: CliRun) -> None:
    header = json.loads((campaign / CELL).read_text())
    size = header["parts"][0]["bytes"]
    _, report = verify_json(cli, "--max-json-bytes", str(size - 1), campaign)
    found = {(f["code"], f["path"].removeprefix(f"{campaign}/")) for f in report["findings"]}
    assert ("json-too-large", header["parts"][0]["path"]) in found
    # Its records were not read: the cell's own counts cannot be held to them.
    assert ("record-inconsistent", CELL) in found


def test_a_part_that_is_a_named_pipe_is_a_finding_not_a_wait(campaign: Path) -> None:
    import os
    import subprocess
    import sys

    header = json.loads((campaign / CELL).read_text())
    part = campaign / header["parts"][0]["path"]
    part.unlink()
    os.mkfifo(part)
    done = subprocess.run(
        [sys.executable, "-m", "ledger", "verify", "--format", "json", str(campaign)],
        capture_output=True,
        timeout=120,
        check=False,
    )
    report = json.loads(done.stdout)
    found = {(f["code"], f["path"].removeprefix(f"{campaign}/")) for f in report["findings"]}
    assert done.returncode == 1
    assert ("not-regular-file", header["parts"][0]["path"]) in found


def test_a_record_the_sanitizer_changes_leaves_its_part_listed_as_published(
    campaign: Path, tmp_path: Path, cli: CliRun
) -> None:
    """A key a server echoed into a response id is redacted in the part: the cell run
    lists the published part's digest and size, and the publication verifies."""
    from ledger.publication import publish

    document = cells.load(campaign / CELL)
    _nth(document, 3)["response_id"] = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zC7"
    cells.save(campaign / CELL, document)
    _reseal(campaign, CELL)
    public = publish(campaign, tmp_path / "public", digest_map=tmp_path / "map.json").folder
    header = json.loads((public / CELL).read_text())
    part = public / header["parts"][0]["path"]
    assert b"sk-proj-" not in part.read_bytes()
    assert (header["parts"][0]["bytes"], header["parts"][0]["sha256"]) == (
        part.stat().st_size,
        hashlib.sha256(part.read_bytes()).hexdigest(),
    )
    assert header["parts"][0]["bytes"] != document["parts"][0]["bytes"]
    _, report = verify_json(cli, public)
    # (A publication without its ticket is a finding of its own, ticket-missing.)
    broken = {"record-inconsistent", "reference-mismatch", "schema-invalid", "file-changed"}
    assert [f for f in report["findings"] if f["code"] in broken] == [], report


def test_records_taken_up_are_held_to_their_schema(tmp_path: Path) -> None:
    """The part a killed run was writing is held by no digest: its records are checked
    before a resumed run counts on them."""
    rel = "a/s/ctx1-c1-nothink.json"
    (tmp_path / "a/s").mkdir(parents=True)
    (tmp_path / cell_records.part_rel(rel, 1)).write_bytes(b'{"index": 0, "sent_ns": "5"}\n')
    parts = CellParts(tmp_path, rel, lambda: None)
    parts.reopen([])
    with pytest.raises(RunnerError, match=r"cannot go on with a/s/ctx1-c1-nothink.json: .*:1 at /"):
        list(parts.on_disk({"schema": cell_records.CELL_RUN_V2}))
