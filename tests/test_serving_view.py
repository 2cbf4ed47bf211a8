"""The ``serving_metrics`` view: vLLM's standard figures per cell. Checked against the real
files of vLLM and SGLang (each file's own stated aggregates), against numpy over a
simulated run's records, and rule by rule on cells made for each rule."""

from __future__ import annotations

import collections
import itertools
import json
import shutil
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest
from generate_verify_assets import CAMPAIGN, cell_run
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.database import DatabaseError, Table, _chunk_gaps, build
from ledger.database._chunk_gaps import ChunkGaps, gap_counts
from ledger.formats.cell_records import (
    CELL_RUN_V2,
    decode_chunks,
    encode_channels,
    encode_chunks,
    records,
)
from ledger.formats.jsonio import write_json
from tests import cells
from tests.conftest import DATA, CliRun

REAL = DATA / "realworld"
VLLM = REAL / "vllm-bench-serve" / "vllm-0.15.0-qwen3-8b-tp8-c50-detailed.json"
SGLANG = REAL / "sglang-bench-serving" / "sglang-0.5.9-qwen3-8b-c100-output-details.jsonl"
METRICS = ("ttft", "tpot", "itl", "e2el")
STATS = ("mean", "median", "std", "p90", "p99")


def _rows(paths: list[Path], **options: Any) -> list[dict[str, Any]]:
    with build(paths, **options) as db:
        return db.query("SELECT * FROM serving_metrics ORDER BY arm, stage, cell").to_json()


def _imported(cli: CliRun, tmp_path: Path, tool: str, source: Path) -> dict[str, Any]:
    campaign = f"2026-12-03-{tool}"
    status, _, err = cli(
        "import", tool, str(source), "--raw-dir", str(tmp_path), "--campaign", campaign,
        "--arm", tool,
    )  # fmt: skip
    assert status == 0, err
    (row,) = _rows([tmp_path / campaign])
    return row


def _numpy(values: Any) -> dict[str, float]:
    """vLLM's statistics of a series, as it computes them."""
    data = np.asarray(values, dtype=float)
    return {
        "mean": float(np.mean(data)),
        "median": float(np.median(data)),
        "std": float(np.std(data)),
        "p90": float(np.percentile(data, 90)),
        "p99": float(np.percentile(data, 99)),
    }


def test_vllm_s_own_aggregates_from_its_real_file(tmp_path: Path, cli: CliRun) -> None:
    """vLLM 0.15.0's --save-detailed file, imported: the view states what the file states."""
    row = _imported(cli, tmp_path, "vllm", VLLM)
    stated = json.loads(VLLM.read_text())
    for key in ("completed", "failed", "total_input_tokens", "total_output_tokens"):
        assert row[key] == stated[key], key
    # TTFT and ITL are the file's own per-request values: equal to the last bits numpy
    # and DuckDB round differently.
    for metric in ("ttft", "itl"):
        for stat in ("mean", "median", "std", "p99"):
            assert row[f"{stat}_{metric}_ms"] == pytest.approx(
                stated[f"{stat}_{metric}_ms"], rel=1e-12
            ), (stat, metric)
    # vLLM's file keeps no per-request latency: E2E is ttft + sum(itls), which exceeds the
    # latency vLLM took from its own clock by 0.4 us on average here; TPOT with it.
    for metric in ("tpot", "e2el"):
        for stat in ("mean", "median", "std", "p99"):
            assert row[f"{stat}_{metric}_ms"] == pytest.approx(
                stated[f"{stat}_{metric}_ms"], rel=1e-6
            ), (stat, metric)
    # The file states no p90: numpy's over the same arrays. It is not the p99.
    ttfts = np.asarray(stated["ttfts"]) * 1000
    gaps = [g * 1000 for gaps in stated["itls"] for g in gaps]
    assert row["p90_ttft_ms"] == pytest.approx(_numpy(ttfts)["p90"], rel=1e-12)
    assert row["p90_itl_ms"] == pytest.approx(_numpy(gaps)["p90"], rel=1e-12)
    assert row["p90_itl_ms"] < 0.95 * row["p99_itl_ms"]
    # The duration is the run's own, from its requests' starts (monotonic seconds) to
    # their ends; vLLM's timer also holds the setting up of its tasks and their gathering,
    # 3.2 ms more here, so its throughputs are that much lower.
    starts = stated["start_times"]
    ends = [s + t + sum(g) for s, t, g in zip(starts, stated["ttfts"], stated["itls"], strict=True)]
    duration = row["duration_s"]
    assert duration == pytest.approx(max(ends) - min(starts), rel=1e-9)
    assert 0 < stated["duration"] - duration < 0.005
    assert row["request_throughput"] == pytest.approx(500 / duration, rel=1e-12)
    assert row["output_throughput"] == pytest.approx(64_000 / duration, rel=1e-12)
    assert row["total_token_throughput"] == pytest.approx((2_048_000 + 64_000) / duration)
    for key in ("request_throughput", "output_throughput", "total_token_throughput"):
        assert row[key] == pytest.approx(stated[key], rel=2e-4), key
        assert row[key] > stated[key]


def test_sglang_s_own_aggregates_from_its_real_file(tmp_path: Path, cli: CliRun) -> None:
    """SGLang 0.5.9's --output-details line, imported."""
    row = _imported(cli, tmp_path, "sglang", SGLANG)
    (line,) = SGLANG.read_text().splitlines()
    stated = json.loads(line.replace("Infinity", '"inf"'))
    assert (row["completed"], row["failed"]) == (stated["completed"], 0) == (100, 0)
    assert row["total_input_tokens"] == stated["total_input_tokens"]
    assert row["total_output_tokens"] == stated["total_output_tokens"]
    for metric in ("ttft", "itl"):
        for stat in ("mean", "median", "std", "p99"):
            assert row[f"{stat}_{metric}_ms"] == pytest.approx(
                stated[f"{stat}_{metric}_ms"], rel=1e-12
            ), (stat, metric)
    # SGLang takes its latency at [DONE], after the last chunk; its file keeps no
    # per-request latency, so E2E is ttft + sum(itls), short of SGLang's by that last wait
    # (10 us on average here), and TPOT with it.
    for metric, name in (("tpot", "tpot"), ("e2el", "e2e_latency")):
        for stat in ("mean", "median", "std", "p99"):
            ours, theirs = row[f"{stat}_{metric}_ms"], stated[f"{stat}_{name}_ms"]
            assert ours == pytest.approx(theirs, rel=1e-4), (stat, metric)
    assert row["mean_e2el_ms"] < stated["mean_e2e_latency_ms"]
    # SGLang writes no request's start: the run's duration cannot be had from the file,
    # so its throughputs are left empty rather than taken from the tool.
    assert row["duration_s"] is None and row["request_throughput"] is None
    assert row["output_throughput"] is None and row["total_token_throughput"] is None


def _expected(campaign: Path) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Every cell's figures computed from its records with numpy, as vLLM computes them."""
    out = {}
    for path in sorted(campaign.glob("*/*/*.json")):
        document = json.loads(path.read_text())
        if document.get("schema") != CELL_RUN_V2:
            continue
        measured = [r for r in records(campaign, document) if not r["warmup"]]
        done = [r for r in measured if r["error"] is None and r["first_token_ns"] is not None]
        ttft = [(r["first_token_ns"] - r["sent_ns"]) / 1e6 for r in done]
        e2el = [(r["end_ns"] - r["sent_ns"]) / 1e6 for r in done]
        output = [r["usage"]["completion_tokens"] for r in done]
        tpot = [(e - t) / (n - 1) for e, t, n in zip(e2el, ttft, output, strict=True) if n > 1]
        gaps = [
            (b - a) / 1e3
            for r in done
            for a, b in itertools.pairwise(decode_chunks(r["chunks_us"]))
        ]
        duration = (max(r["end_ns"] for r in measured) - min(r["sent_ns"] for r in measured)) / 1e9
        row: dict[str, Any] = {
            "completed": len(done),
            "failed": len(measured) - len(done),
            "duration_s": duration,
            "request_throughput": len(done) / duration,
            "output_throughput": sum(output) / duration,
            "total_token_throughput": (sum(r["usage"]["prompt_tokens"] for r in done) + sum(output))
            / duration,
        }
        for metric, values in (("ttft", ttft), ("tpot", tpot), ("itl", gaps), ("e2el", e2el)):
            for stat, value in _numpy(values).items():
                row[f"{stat}_{metric}_ms"] = value
        out[document["arm"], document["stage"]["name"], document["cell"]["id"]] = row
    return out


def test_a_simulated_run_s_figures_are_numpy_s_over_its_records(two_arm_campaign: Path) -> None:
    rows = _rows([two_arm_campaign])
    expected = _expected(two_arm_campaign)
    assert {(r["arm"], r["stage"], r["cell"]) for r in rows} == set(expected) and len(rows) == 6
    for row in rows:
        wanted = expected[row["arm"], row["stage"], row["cell"]]
        for key, value in wanted.items():
            assert row[key] == pytest.approx(value, rel=1e-9), (row["cell"], key)
        assert row["completed"] == {"capacity": 12, "endurance": 4}[row["stage"]]
        if row["stage"] == "capacity":
            # Twelve requests: the 90th and 99th percentiles are different order statistics.
            assert row["p90_e2el_ms"] != row["p99_e2el_ms"]


def _record(index: int, sent: int, gaps_ns: list[int], **changes: Any) -> dict[str, Any]:
    """A v1 record: first token 5 ms after it was sent, then a chunk after each gap."""
    chunks = [sent + 5_000_000]
    for gap in gaps_ns:
        chunks.append(chunks[-1] + gap)
    record = {
        "index": index, "warmup": False, "prompt_sha256": "ab" * 32, "sent_ns": sent,
        "headers_ns": sent + 1_000_000, "first_token_ns": chunks[0],
        "first_content_ns": chunks[0], "last_token_ns": chunks[-1],
        "end_ns": chunks[-1] + 200_000, "chunks_ns": chunks,
        "chunk_channels": "c" * len(chunks), "chunk_tokens": len(chunks),
        "usage": {"prompt_tokens": 100, "completion_tokens": len(chunks),
                  "total_tokens": 100 + len(chunks)},
        "usage_mismatch": False, "finish_reason": "length", "done_marker": True,
        "response_id": f"chatcmpl-{index}", "error": None, "content_chars": 20,
        "content_sha256": "cd" * 32, "reasoning_chars": 0, "tool_calls": [],
        "output_as_requested": True,
    }  # fmt: skip
    return record | changes


def _v1(tmp_path: Path, requests: list[dict[str, Any]]) -> Path:
    document = cell_run()
    document["requests"] = requests
    folder = tmp_path / CAMPAIGN
    (folder / "linux" / "capacity").mkdir(parents=True)
    write_json(folder / "linux" / "capacity" / "ctx1024-c1-nothink.json", document)
    return folder


def _v2(tmp_path: Path, requests: list[dict[str, Any]]) -> Path:
    """The same records as the runner writes them now: a header and a part."""
    document = cell_run()
    document["schema"] = CELL_RUN_V2
    document["requests"] = [
        {k: v for k, v in r.items() if k not in ("chunks_ns", "chunk_channels", "chunk_tokens")}
        | {
            "chunks_us": encode_chunks(r["first_token_ns"], r["chunks_ns"]),
            "channel_runs": encode_channels(r["chunk_channels"]),
        }
        for r in requests
    ]
    folder = tmp_path / CAMPAIGN
    path = folder / "linux" / "capacity" / "ctx1024-c1-nothink.json"
    path.parent.mkdir(parents=True)
    cells.save(path, document)
    return folder


def test_each_rule_of_the_view_on_a_cell_made_for_it(tmp_path: Path) -> None:
    ms = 1_000_000
    requests = [
        # A warm-up, sent first: in no figure, not even the duration.
        _record(0, 0, [2 * ms], warmup=True),
        _record(1, 10 * ms, [2 * ms, 3 * ms]),
        # One output token: in TTFT and E2E, not in TPOT.
        _record(2, 20 * ms, [], usage={"prompt_tokens": 100, "completion_tokens": 1}),
        # Failed: counted, its span in the duration (it ends last), its gaps nowhere.
        _record(3, 30 * ms, [40 * ms], error={"class": "stall", "status": None, "message": "x"}),
        # Succeeded without a token: vLLM's failure too.
        _record(4, 40 * ms, [], first_token_ns=None, first_content_ns=None,
                last_token_ns=None, chunks_ns=[], chunk_channels="", chunk_tokens=0),
        _record(5, 50 * ms, [7 * ms], usage={"prompt_tokens": 100, "completion_tokens": 3}),
    ]  # fmt: skip
    (row,) = _rows([_v1(tmp_path, requests)])
    assert (row["completed"], row["failed"]) == (3, 2)
    # Sent 10 ms (the first measured) to request 3's end: 30 + 5 + 40 + 0.2 ms.
    assert row["duration_s"] == pytest.approx(0.0652, rel=1e-12)
    assert row["total_input_tokens"] == 300
    assert row["total_output_tokens"] == 3 + 1 + 3
    assert row["output_throughput"] == pytest.approx(7 / 0.0652, rel=1e-12)
    assert row["mean_ttft_ms"] == pytest.approx(5.0)
    # E2E: 5 + 5 + 0.2, 5 + 0.2, 5 + 7 + 0.2 ms; TPOT of the first and last only.
    assert row["mean_e2el_ms"] == pytest.approx((10.2 + 5.2 + 12.2) / 3)
    assert row["mean_tpot_ms"] == pytest.approx((5.2 / 2 + 7.2 / 2) / 2)
    assert row["median_itl_ms"] == pytest.approx(3.0)  # 2, 3 and 7 ms: not the failure's 40
    # Ranks 1.98 of 0, 1, 2: 3 ms and 98 % of the way on to 7 ms.
    assert row["p99_itl_ms"] == pytest.approx(3 + 0.98 * (7 - 3))


def test_itl_percentiles_read_from_the_histogram_are_numpy_s(tmp_path: Path) -> None:
    """Ties, an even count, and gaps not on a whole microsecond (rounded as v2 rounds)."""
    ms = 1_000_000
    gaps = [
        [1 * ms, 1 * ms, 1 * ms, 2 * ms, 2_000_400],
        [9 * ms, 1 * ms, 5_000_600, 250_000],
        [120 * ms, 1 * ms],
        [3 * ms, 3 * ms, 3 * ms, 3 * ms, 4 * ms, 60 * ms, 1 * ms],
    ]
    requests = [_record(i, i * 200 * ms, g) for i, g in enumerate(gaps)]
    (row,) = _rows([_v1(tmp_path, requests)])
    pooled = []
    for request in requests:
        chunks = request["chunks_ns"]
        offsets = [(t - chunks[0] + 500) // 1000 for t in chunks]
        pooled += [(b - a) / 1e3 for a, b in itertools.pairwise(offsets)]
    assert len(pooled) % 2 == 0
    for stat, value in _numpy(pooled).items():
        assert row[f"{stat}_itl_ms"] == pytest.approx(value, rel=1e-12), stat
    assert row["p90_itl_ms"] != row["p99_itl_ms"]


def test_a_v1_and_a_v2_cell_of_the_same_requests_give_the_same_figures(tmp_path: Path) -> None:
    requests = [
        _record(i, i * 100_000_000 + 333, [2_000_499 + 17 * i, 2_999_501, 1_000_000 * i + 1])
        for i in range(5)
    ]
    one, two = tmp_path / "one", tmp_path / "two"
    assert _rows([_v1(one, requests)]) == _rows([_v2(two, requests)])


def test_an_export_carries_the_gaps_and_one_without_them_has_no_itl(
    tmp_path: Path, two_arm_campaign: Path
) -> None:
    with build([two_arm_campaign], locked=False) as db:
        db.export_parquet(tmp_path / "export")
    rows = _rows([two_arm_campaign])
    assert _rows([tmp_path / "export"]) == rows
    # An export written before the gaps were: everything but ITL reads as it did.
    shutil.rmtree(tmp_path / "export" / "chunk_gaps")
    older = _rows([tmp_path / "export"])
    assert all(r["mean_itl_ms"] is None and r["p99_itl_ms"] is None for r in older)
    itl = {f"{stat}_itl_ms" for stat in STATS}
    assert [{k: v for k, v in r.items() if k not in itl} for r in older] == [
        {k: v for k, v in r.items() if k not in itl} for r in rows
    ]


def test_a_database_built_without_the_gaps_has_no_serving_metrics(two_arm_campaign: Path) -> None:
    query = "SELECT * FROM cells ORDER BY arm, stage, cell"
    with build([two_arm_campaign], gaps=False) as db:
        cells_without = db.query(query)
        with pytest.raises(DatabaseError, match="serving_metrics"):
            db.query("SELECT * FROM serving_metrics")
        with pytest.raises(DatabaseError, match="chunk_gaps"):
            db.query("SELECT * FROM chunk_gaps")
    with build([two_arm_campaign]) as db:
        assert db.query(query) == cells_without


def test_chunk_times_that_are_none_are_refused_by_name(tmp_path: Path) -> None:
    ms = 1_000_000
    requests = [_record(i, i * 100 * ms, [2 * ms, 3 * ms]) for i in range(3)]
    folder = _v2(tmp_path / "good", requests)
    assert _rows([folder])[0]["completed"] == 3
    path = folder / "linux" / "capacity" / "ctx1024-c1-nothink.json"
    part = f"{CAMPAIGN}/linux/capacity/ctx1024-c1-nothink.part-0001.jsonl"
    good = cells.load(path)
    for text, why in (("0V", "the last chunk time's number is cut short"),
                      ("0+1", "'\\+' is not a digit of chunk times"),
                      ("5", "a gap between chunks is negative")):  # fmt: skip
        document = json.loads(json.dumps(good))
        document["requests"][1]["chunks_us"] = text
        cells.save(path, document)
        with pytest.raises(DatabaseError, match=f"^{part}: line 2 at /chunks_us: not chunk "
                           f"times: {why}; ledger verify names every such record$"):  # fmt: skip
            build([folder])
    document = json.loads(json.dumps(good))
    document["requests"][2]["chunks_us"] = 5
    cells.save(path, document)
    with pytest.raises(DatabaseError, match=f"^{part}: line 3 at /chunks_us: 5 is not a string"):
        build([folder])
    # A warm-up's or a failure's chunk times are read by no figure: not refused.
    failure = {"class": "stall", "status": None, "message": "x"}
    for changes, failed in (({"warmup": True}, 0), ({"error": failure}, 1)):
        for chunks in (5, "0+1", "5"):
            document = json.loads(json.dumps(good))
            document["requests"][2] |= changes | {"chunks_us": chunks}
            cells.save(path, document)
            (row,) = _rows([folder])
            assert (row["completed"], row["failed"]) == (2, failed), (changes, chunks)
            assert row["median_itl_ms"] == pytest.approx(2.5), (changes, chunks)


def test_a_v1_record_s_chunks_out_of_order_are_refused(tmp_path: Path) -> None:
    requests = [_record(i, i * 100_000_000, [2_000_000, 3_000_000]) for i in range(2)]
    requests[1]["chunks_ns"][2] = requests[1]["chunks_ns"][1] - 1
    with pytest.raises(DatabaseError, match=r"ctx1024-c1-nothink\.json: a record's chunk times "
                       r"\(chunks_ns\) are out of order; ledger verify names every such record"):  # fmt: skip
        build([_v1(tmp_path, requests)])


def test_an_imported_gap_below_zero_is_refused(tmp_path: Path, cli: CliRun) -> None:
    _imported(cli, tmp_path, "sglang", SGLANG)
    path = tmp_path / "2026-12-03-sglang" / "sglang" / "imported" / "ctx494-c100.json"
    document = json.loads(path.read_text())
    document["requests"][7]["itl_ms"][3] = -0.5
    path.write_text(json.dumps(document))
    with pytest.raises(DatabaseError, match=r"ctx494-c100\.json#/requests/7/itl_ms: a gap below 0"):
        build([tmp_path / "2026-12-03-sglang"])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 5),
            st.lists(
                st.one_of(st.integers(0, 40_000), st.integers(0, 10**13)), min_size=1, max_size=40
            ),
        ),
        min_size=1,
        max_size=30,
    )
)
def test_the_batch_decoder_gives_the_exact_decoder_s_gaps(
    texts: list[tuple[int, list[int]]],
) -> None:
    """Groups of texts of any lengths, gaps up to ten billion us (a number of 9 digits)."""
    texts.sort(key=lambda t: t[0])
    encoded = []
    for _, gaps_us in texts:
        times = [0]
        for gap in gaps_us:
            times.append(times[-1] + gap * 1000)
        encoded.append(encode_chunks(0, times))
    groups = np.asarray([g for g, _ in texts], dtype=np.int64)
    found: collections.Counter[tuple[int, int]] = collections.Counter()
    for group, gap, n in zip(*(a.tolist() for a in gap_counts(encoded, groups)), strict=True):
        found[group, gap] += n
    wanted: collections.Counter[tuple[int, int]] = collections.Counter()
    for (group, _), text in zip(texts, encoded, strict=True):
        times = decode_chunks(text)
        wanted.update((group, b - a) for a, b in itertools.pairwise(times))
    assert found == wanted


def test_a_number_too_long_for_the_batch_decoder_is_read_exactly() -> None:
    """A gap of 31^12 us needs 13 digits: the batch is read again record by record."""
    con = duckdb.connect()
    decoder = ChunkGaps(con)
    long = encode_chunks(0, [0, 1_000, 31**12 * 1_000 * 2])
    with pytest.raises(ValueError, match="longer than this decoder reads"):
        gap_counts([long], np.zeros(1, dtype=np.int64))
    short = {"warmup": False, "chunks_us": encode_chunks(0, [0, 5_000, 9_000])}
    decoder.add("run.json", [short, {"warmup": False, "chunks_us": long}], "a/part")
    decoder.finish()
    found = con.execute("SELECT gap_us, n FROM chunk_gap_counts ORDER BY ALL").fetchall()
    assert found == [(1, 1), (4, 1), (5, 1), (31**12 * 2 - 1, 1)]


def _figures(folder: Path) -> tuple[Table, Table]:
    with build([folder]) as db:
        return (
            db.query("SELECT * FROM serving_metrics ORDER BY arm, stage, cell"),
            db.query("SELECT * FROM chunk_gaps ORDER BY ALL"),
        )


def test_gaps_decoded_batch_by_batch_are_those_of_one_batch(
    tmp_path: Path, two_arm_campaign: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch handed on once it holds BATCH_CHARACTERS, the one before counted first, and
    each cell run's gaps spread over several batches: the figures and gaps are those of one
    batch. Each cell run is split into four parts (the warm-up alone in a capacity cell's
    first), and a batch of one character is handed on at the end of each part."""
    folder = tmp_path / two_arm_campaign.name
    shutil.copytree(two_arm_campaign, folder)
    for path in sorted(folder.glob("*/*/*.json")):
        document = cells.load(path)
        assert document["schema"] == CELL_RUN_V2
        cells.save(path, document, split=[1, 1, (len(document["requests"]) - 2) // 2, 0])
    batches: list[list[int]] = []
    real = _chunk_gaps.gap_counts

    def counted(texts: Any, groups: Any) -> Any:
        batches.append(sorted(set(groups.tolist())))
        return real(texts, groups)

    monkeypatch.setattr(_chunk_gaps, "gap_counts", counted)
    one = _figures(folder)
    assert batches == [list(range(6))]
    rows = one[0].to_json()
    assert rows == _rows([two_arm_campaign])  # the parts split otherwise: the same figures
    assert len(rows) == 6 and all(r["p99_itl_ms"] is not None for r in rows)
    assert len(one[1].rows) > 6
    batches.clear()
    monkeypatch.setattr(_chunk_gaps, "BATCH_CHARACTERS", 1)
    assert _figures(folder) == one
    assert batches == [[0], [0], [0], [1], [1], [1], [2], [2], [2], [2], [3], [3], [3],
                       [4], [4], [4], [5], [5], [5], [5]]  # fmt: skip


@pytest.mark.parametrize("gap", [(1 << 63) - 1, 1 << 63])
def test_a_gap_past_64_bits_is_refused_by_name(tmp_path: Path, gap: int) -> None:
    """A gap of 2^63 us (13 digits: read record by record) is more than a BIGINT holds."""
    ms = 1_000_000
    folder = _v2(tmp_path, [_record(i, i * 100 * ms, [2 * ms, 3 * ms]) for i in range(3)])
    path = folder / "linux" / "capacity" / "ctx1024-c1-nothink.json"
    document = cells.load(path)
    document["requests"][1]["chunks_us"] = encode_chunks(0, [0, 0, gap * 1000])
    cells.save(path, document)
    if gap < 1 << 63:
        (row,) = _rows([folder])
        assert row["completed"] == 3
        with build([folder]) as db:
            assert db.query("SELECT max(gap_ms) FROM chunk_gaps").rows == ((gap / 1e3,),)
        return
    part = f"{CAMPAIGN}/linux/capacity/ctx1024-c1-nothink.part-0001.jsonl"
    with pytest.raises(DatabaseError, match=f"^{part}: line 2 at /chunks_us: a gap past 64 bits$"):
        build([folder])


def test_the_report_states_every_cell_s_figures_in_both_formats(
    tmp_path: Path, cli: CliRun, two_arm_campaign: Path
) -> None:
    folder = tmp_path / two_arm_campaign.name
    shutil.copytree(two_arm_campaign, folder)
    steps = (
        ("derive", str(folder), "--baseline", "windows", "--candidate", "linux", "--kind", "ab",
         "--differs", "os", "--differs", "simulated_profile"),
        ("decide", str(folder)),
        ("report", str(folder), "--format", "md", "--format", "html"),
    )  # fmt: skip
    for step in steps:
        status, _, err = cli(*step)
        assert status == 0, err
    rows = _rows([folder])
    text = (folder / "report.md").read_text()
    lines = text.splitlines()
    start = lines.index("### Serving metrics")

    def table(header: str) -> list[str]:
        """The rows under a header line of the section, up to the blank line."""
        at = lines.index(header, start) + 2
        return lines[at : lines.index("", at)]

    def shown(value: float) -> str:
        return f"{value:,.2f}"

    rates = table(
        "| Arm | Cell | Completed | Failed | Duration s | Requests/s | Output tok/s | Total tok/s |"
    )
    assert rates == [
        f"| {row['arm']} | {row['stage']}/{row['cell']} | {row['completed']} | "
        f"{row['failed']} | {shown(row['duration_s'])} | {shown(row['request_throughput'])} | "
        f"{shown(row['output_throughput'])} | {shown(row['total_token_throughput'])} |"
        for row in rows
    ]
    latencies = table("| Arm | Cell | Metric | Mean ms | Median ms | Std ms | P90 ms | P99 ms |")
    quantiles = {"median": 0.5, "p90": 0.9, "p99": 0.99}

    def stated(row: dict[str, Any], stat: str, metric: str) -> str:
        # A percentile the cell's completed requests cannot bound at 95 % is named.
        q = quantiles.get(stat)
        if q is not None and row["completed"] < {0.5: 6, 0.9: 29, 0.99: 299}[q]:
            return f"too few requests for p{round(q * 100)}"
        return shown(row[f"{stat}_{metric}_ms"])

    assert latencies == [
        f"| {row['arm']} | {row['stage']}/{row['cell']} | {name} | "
        + " | ".join(stated(row, stat, metric) for stat in STATS)
        + " |"
        for row in rows
        for metric, name in (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2el", "E2E"))
    ]
    assert len(rates) == 6 and len(latencies) == 24
    html = (folder / "report.html").read_text()
    assert "<h3>Serving metrics</h3>" in html
    assert "<th>Arm</th><th>Cell</th><th>Metric</th><th>Mean ms</th>" in html
    assert "<td>too few requests for p99</td>" in html
    # Both kinds are met: medians stated, p99s named.
    assert any(not line.split(" | ")[4].startswith("too few") for line in latencies)
    # The same campaign reports the same bytes.
    before = {name: (folder / name).read_bytes() for name in ("report.md", "report.html")}
    status, _, err = cli("report", str(folder), "--format", "md", "--format", "html", "--replace")
    assert status == 0, err
    assert {name: (folder / name).read_bytes() for name in before} == before


@pytest.mark.parametrize(
    ("start", "why"),
    [(-1.0, "-1.0"), (1e10, "10000000000.0")],
    ids=["before the clock's zero", "past 64 bits of ns"],
)
def test_a_vllm_start_no_64_bit_clock_holds_is_refused(
    tmp_path: Path, cli: CliRun, start: float, why: str
) -> None:
    document = json.loads(VLLM.read_text())
    document["start_times"][3] = start
    source = tmp_path / "vllm.json"
    source.write_text(json.dumps(document))
    status, _, err = cli(
        "import", "vllm", str(source), "--raw-dir", str(tmp_path / "raw"), "--campaign",
        "2026-12-03-vllm", "--arm", "vllm",
    )  # fmt: skip
    assert status == 2
    assert f"request 3: its start_times {why} and end to end are not nanoseconds a 64-bit" in err
    assert not (tmp_path / "raw").exists()
