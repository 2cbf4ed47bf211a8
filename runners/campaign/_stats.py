"""Per-request metrics (``docs/concepts/metrics.md``) and the cell statistics of the run table.

These figures are for the operator watching a run. The published ones are derived again
from the raw records in DuckDB; both follow the same definitions.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any

import attrs


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


def _median(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
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


def cell_stats(records: list[dict[str, Any]]) -> CellStats:
    """Medians over the successful measured requests; failures counted, not timed."""
    measured = [r for r in records if not r.get("warmup")]
    ok = [r for r in measured if r.get("error") is None]
    metrics = [request_metrics(r) for r in ok]
    compared = [server_comparison(r, m["first_token_ms"]) for r, m in zip(ok, metrics, strict=True)]
    throughput = None
    if ok:
        start = min(r["sent_ns"] for r in ok)
        end = max(r["end_ns"] for r in ok)
        tokens = sum((r.get("usage") or {}).get("completion_tokens", 0) for r in ok)
        throughput = tokens / ((end - start) / 1e9) if end > start else None
    return CellStats(
        requests=len(measured),
        failed=len(measured) - len(ok),
        ttft_ms=_median(m["ttft_ms"] for m in metrics),
        e2e_ms=_median(m["e2e_ms"] for m in metrics),
        decode_tok_s=_median(m["decode_tok_s"] for m in metrics),
        throughput_tok_s=throughput,
        server_gap_ms=_median(gap for gap, _ in compared),
        server_decode_tok_s=_median(rate for _, rate in compared),
    )
