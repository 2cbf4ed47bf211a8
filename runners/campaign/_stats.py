"""Per-request metrics (``docs/concepts/metrics.md``) and the cell statistics of the run table.

These figures are for the operator watching a run. The published ones are derived again
from the raw records in DuckDB; both follow the same definitions.
"""

from __future__ import annotations

import statistics
from array import array
from collections.abc import Iterable
from typing import Any

import attrs

from ledger.measures.serving import ServingFigures, ServingSummary


def request_metrics(record: dict[str, Any]) -> dict[str, float | None]:
    """ttft_ms, first_token_ms, e2e_ms, effective_prefill_tok_s, decode_tok_s of a record."""
    sent = record["sent_ns"]
    usage = record.get("usage") or {}
    first = record.get("first_token_ns")
    content = record.get("first_content_ns")
    last = record.get("last_token_ns")
    end = record.get("end_ns")
    completion = usage.get("completion_tokens")
    prompt = usage.get("prompt_tokens")
    decode = None
    if completion is not None and completion > 1 and first is not None and last is not None:
        span = (last - first) / 1e9
        decode = (completion - 1) / span if span > 0 else None
    prefill = None
    if prompt is not None and first is not None and first > sent:
        prefill = prompt / ((first - sent) / 1e9)
    return {
        "ttft_ms": (content - sent) / 1e6 if content is not None else None,
        "first_token_ms": (first - sent) / 1e6 if first is not None else None,
        "e2e_ms": (end - sent) / 1e6 if end is not None else None,
        "effective_prefill_tok_s": prefill,
        "decode_tok_s": decode,
    }


def server_comparison(
    record: dict[str, Any], first: float | None
) -> tuple[float | None, float | None]:
    """(first token ms - the server's prompt ms, the server's decode tok/s) of a record
    whose server reported its own timings, given its ``first_token_ms``; (None, None)
    otherwise."""
    timings = record.get("server_timings") or {}
    prompt_ms = timings.get("prompt_ms")
    gap = first - prompt_ms if first is not None and prompt_ms is not None else None
    predicted_ms = timings.get("predicted_ms")
    predicted_n = timings.get("predicted_n")
    rate = predicted_n / (predicted_ms / 1e3) if predicted_n is not None and predicted_ms else None
    return gap, rate


SERVING_PERCENTILES = (90.0, 99.0)
"""The percentiles the closing table shows beside each metric's mean, median and std."""


def _median(values: Iterable[float | None]) -> float | None:
    present = array("d", (v for v in values if v is not None))
    return statistics.median(present) if present else None


@attrs.frozen
class CellStats:
    """What the run table shows for one cell (warm-up requests excluded)."""

    requests: int
    failed: int
    ttft_ms: float | None
    e2e_ms: float | None
    decode_tok_s: float | None
    throughput_tok_s: float | None
    server_gap_ms: float | None = None
    """Median of first token - the server's own prompt time, where the server reports it."""
    server_decode_tok_s: float | None = None
    """Median of the server's own decode rate, where it reports one."""
    serving: ServingSummary | None = None
    """vLLM's figures of the cell: TTFT, TPOT, ITL and E2E latency, throughputs."""
    prompt_counts: tuple[int, int] = (0, 0)
    """The requests whose server reported ``usage.prompt_tokens``, warm-ups and failures
    included, and their sum: the arm's prompt tokens in the workload manifest."""


def cell_stats(records: Iterable[dict[str, Any]]) -> CellStats:
    """Medians over the successful measured requests; failures counted, not timed; and the
    prompt tokens every request's server reported. One pass, keeping five numbers of each
    request: a cell is read back from its parts."""
    requests = 0
    # Eight bytes a value (a list of floats takes 32): a cell of a million requests is
    # read back to give these.
    ttft, e2e, decode, gaps, rates = (array("d") for _ in range(5))
    start = end = None
    tokens = ok = prompted = prompt_tokens = 0

    def add(values: array[float], value: float | None) -> None:
        if value is not None:
            values.append(value)

    serving = ServingFigures()
    for record in records:
        counted = (record.get("usage") or {}).get("prompt_tokens")
        if counted is not None:
            prompted += 1
            prompt_tokens += counted
        if record.get("warmup"):
            continue
        serving.add(record)
        requests += 1
        if record.get("error") is not None:
            continue
        ok += 1
        metrics = request_metrics(record)
        add(ttft, metrics["ttft_ms"])
        add(e2e, metrics["e2e_ms"])
        add(decode, metrics["decode_tok_s"])
        gap, rate = server_comparison(record, metrics["first_token_ms"])
        add(gaps, gap)
        add(rates, rate)
        start = record["sent_ns"] if start is None else min(start, record["sent_ns"])
        end = record["end_ns"] if end is None else max(end, record["end_ns"])
        tokens += (record.get("usage") or {}).get("completion_tokens", 0)
    throughput = None
    if start is not None and end is not None and end > start:
        throughput = tokens / ((end - start) / 1e9)
    return CellStats(
        requests=requests,
        failed=requests - ok,
        ttft_ms=_median(ttft),
        e2e_ms=_median(e2e),
        decode_tok_s=_median(decode),
        throughput_tok_s=throughput,
        server_gap_ms=_median(gaps),
        server_decode_tok_s=_median(rates),
        serving=serving.summary(SERVING_PERCENTILES),
        prompt_counts=(prompted, prompt_tokens),
    )
