"""The summary block ``ledger bench`` prints: the lines of vLLM's ``bench serve``, in its
order and with its labels, so that a reader compares the two by eye."""

from __future__ import annotations

from collections.abc import Sequence

from ledger.measures import percentiles
from ledger.measures.serving import ServingSummary

_TITLES = {
    "ttft": ("Time to First Token", "TTFT"),
    "tpot": ("Time per Output Token (excl. 1st token)", "TPOT"),
    "itl": ("Inter-token Latency", "ITL"),
    "e2el": ("End-to-end Latency", "E2EL"),
}
_WIDTH = 50


def percentile_name(p: float) -> str:
    """99 -> ``99``, 99.9 -> ``99.9``: how vLLM names a percentile in labels and keys."""
    return str(int(p)) if p == int(p) else str(p)


def _line(label: str, value: str) -> str:
    return f"{label:<40} {value}"


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def summary_block(
    summary: ServingSummary, *, concurrency: int | None, metrics: Sequence[str]
) -> str:
    """The block, ending in a newline."""
    lines = [
        f"{' Serving Benchmark Result ':=^{_WIDTH}}",
        _line("Successful requests:", str(summary.completed)),
        _line("Failed requests:", str(summary.failed)),
    ]
    if concurrency is not None:
        lines.append(_line("Maximum request concurrency:", str(concurrency)))
    lines += [
        _line("Benchmark duration (s):", _number(summary.duration_s)),
        _line("Total input tokens:", str(summary.total_input_tokens)),
        _line("Total generated tokens:", str(summary.total_output_tokens)),
        _line("Request throughput (req/s):", _number(summary.request_throughput)),
        _line("Output token throughput (tok/s):", _number(summary.output_throughput)),
        _line("Total token throughput (tok/s):", _number(summary.total_token_throughput)),
    ]
    for name in metrics:
        title, short = _TITLES[name]
        lines.append(f"{title:-^{_WIDTH}}")
        dist = summary.metrics[name]
        lines.append(_line(f"Mean {short} (ms):", _number(dist.mean if dist else None)))
        lines.append(_line(f"Median {short} (ms):", _number(dist.median if dist else None)))
        for p, value in dist.percentiles if dist else ():
            # vLLM prints every percentile asked for; one the requests cannot support is
            # named, not stated (the saved result keeps vLLM's number for its readers).
            shown = percentiles.stated(p / 100, summary.completed, _number(value))
            lines.append(_line(f"P{percentile_name(p)} {short} (ms):", shown))
    lines.append("=" * _WIDTH)
    return "\n".join(lines) + "\n"
