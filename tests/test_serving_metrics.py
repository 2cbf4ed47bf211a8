"""vLLM's standard figures (``ledger.measures.serving``) against what vLLM and SGLang state
in their own result files, recomputed from those files' per-request arrays."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from ledger.measures.serving import parse_percentiles, serving_summary
from tests.conftest import ROOT

REALWORLD = ROOT / "tests/data/realworld"
VLLM = REALWORLD / "vllm-bench-serve/vllm-0.15.0-qwen3-8b-tp8-c50-detailed.json"
SGLANG = REALWORLD / "sglang-bench-serving/sglang-0.5.9-qwen3-8b-c100-output-details.jsonl"


def _records(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool's arrays as raw records (nanoseconds from a common origin): the request
    sent, its first token, each later chunk after its ITL, its end at its last chunk, as
    vLLM ends a request."""
    starts = result.get("start_times") or [0.0] * len(result["ttfts"])
    records = []
    for i, ttft in enumerate(result["ttfts"]):
        sent = round(starts[i] * 1e9)
        chunks = [sent + round(ttft * 1e9)]
        for gap in result["itls"][i]:
            chunks.append(chunks[-1] + round(gap * 1e9))
        records.append(
            {
                "sent_ns": sent,
                "first_token_ns": chunks[0],
                "end_ns": chunks[-1],
                "chunks_ns": chunks,
                "usage": {
                    "prompt_tokens": result["input_lens"][i],
                    "completion_tokens": result["output_lens"][i],
                },
                "error": {"class": "x"} if result["errors"][i] else None,
            }
        )
    return records


@pytest.mark.parametrize("source", ["vllm", "sglang"])
def test_every_stated_figure_is_recomputed_from_the_records(source: str) -> None:
    if source == "vllm":
        result = json.loads(VLLM.read_text())
        names = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2el": "e2el"}
    else:
        result = json.loads(SGLANG.read_text().splitlines()[0])
        # SGLang ends a request after its last chunk and keeps no per-request end in its
        # file: its E2E and TPOT are not recomputable from it (ttft + sum(itls) is short
        # of its stated mean E2E by 0.01 ms, TPOT by 0.006 %).
        names = {"ttft": "ttft", "itl": "itl"}
    summary = serving_summary(_records(result), (90.0, 95.0, 99.0))
    assert summary.completed == result["completed"]
    assert summary.total_input_tokens == result["total_input_tokens"]
    assert summary.total_output_tokens == result["total_output_tokens"]
    checked = 0
    for metric, name in names.items():
        dist = summary.metrics[metric]
        assert dist is not None
        stated = {
            "mean": dist.mean,
            "median": dist.median,
            "std": dist.std,
            **{f"p{int(p)}": v for p, v in dist.percentiles},
        }
        for stat, value in stated.items():
            key = f"{stat}_{name}_ms"
            if key not in result:
                continue
            # Times are whole nanoseconds here and ITL percentiles come from bins of one
            # part in 10^5: the stated figure within 2 parts in 10^5.
            assert value == pytest.approx(float(result[key]), rel=2e-5, abs=1e-6), key
            checked += 1
    assert checked >= (16 if source == "vllm" else 9)
    if "start_times" not in result:
        return  # SGLang's file has no start times: its duration is not in its arrays
    # The throughputs divide by the wall time from the first request sent to the last end;
    # the tools' own duration also holds their set-up, so the rates agree within 0.1 %.
    assert summary.duration_s is not None and summary.duration_s <= result["duration"]
    assert summary.request_throughput == pytest.approx(result["request_throughput"], rel=1e-3)
    assert summary.output_throughput == pytest.approx(result["output_throughput"], rel=1e-3)


def test_the_itl_histogram_is_within_one_part_in_ten_to_the_five() -> None:
    rng = np.random.default_rng(7)
    gaps = rng.lognormal(mean=2.0, sigma=1.2, size=20_000)
    chunks = [0, *np.cumsum(np.round(gaps * 1e6)).astype(int).tolist()]
    record = {"sent_ns": 0, "first_token_ns": 0, "end_ns": chunks[-1], "chunks_ns": chunks}
    record["usage"] = {"prompt_tokens": 1, "completion_tokens": len(chunks)}
    exact = np.diff(chunks) / 1e6
    dist = serving_summary([record], (1.0, 50.0, 90.0, 99.0, 99.9)).metrics["itl"]
    assert dist is not None and dist.count == len(exact)
    for p, value in dist.percentiles:
        assert value == pytest.approx(np.percentile(exact, p), rel=1e-5), p
    assert dist.mean == pytest.approx(np.mean(exact), rel=1e-12)
    assert dist.std == pytest.approx(np.std(exact), rel=1e-9)


def test_failures_count_in_the_duration_not_the_figures() -> None:
    ok = {"sent_ns": 0, "first_token_ns": 10**7, "end_ns": 2 * 10**7, "chunks_ns": [10**7]}
    ok["usage"] = {"prompt_tokens": 5, "completion_tokens": 1}
    failed = {"sent_ns": 0, "end_ns": 10**9, "error": {"class": "http-5xx"}}
    warmup = {**ok, "sent_ns": -(10**9), "warmup": True}
    summary = serving_summary([ok, failed, warmup])
    assert (summary.completed, summary.failed) == (1, 1)
    assert summary.duration_s == 1.0 and summary.request_throughput == 1.0
    # One output token: no TPOT, no gap.
    assert summary.metrics["tpot"] is None and summary.metrics["itl"] is None
    ttft = summary.metrics["ttft"]
    assert ttft is not None and ttft.mean == 10.0 and ttft.std == 0.0


def test_without_the_servers_count_a_request_has_no_tpot_and_adds_no_tokens() -> None:
    record = {"sent_ns": 0, "first_token_ns": 10**6, "end_ns": 5 * 10**6}
    record["chunks_ns"] = [10**6, 2 * 10**6, 4 * 10**6]
    summary = serving_summary([record])
    assert summary.completed == 1 and summary.total_output_tokens == 0
    assert summary.metrics["tpot"] is None
    itl = summary.metrics["itl"]
    assert itl is not None and itl.count == 2 and itl.mean == pytest.approx(1.5)


def test_nothing_succeeded_gives_no_figure_and_no_rate() -> None:
    summary = serving_summary([{"sent_ns": 0, "end_ns": None, "error": {"class": "connect"}}])
    assert summary.completed == 0 and summary.failed == 1
    assert all(d is None for d in summary.metrics.values())
    assert summary.request_throughput is None and summary.duration_s is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [("99", (99.0,)), ("50,90,99.9", (50.0, 90.0, 99.9)), ("90,90", (90.0,))],
)
def test_percentiles_as_vllm_takes_them(text: str, expected: tuple[float, ...]) -> None:
    assert parse_percentiles(text) == expected


@pytest.mark.parametrize("text", ["", "x", "101", "-1", "50,,90", "nan"])
def test_a_percentile_that_is_not_one_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="percentile"):
        parse_percentiles(text)
