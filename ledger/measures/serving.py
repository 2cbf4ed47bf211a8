"""The serving benchmark's standard figures, as vLLM's ``bench serve`` defines them: TTFT,
TPOT, ITL and end-to-end latency (mean, median, std and chosen percentiles, in ms), and
request, output-token and total-token throughput (``docs/concepts/metrics.md``).

From a cell's request records (warm-ups left out), one pass over them, in bounded memory:
per-request figures are kept eight bytes each, every inter-token gap in a histogram whose
bins are one part in 10^5 wide, so that a million requests of a thousand tokens each need
no more than a few megabytes for their gaps, and a percentile read from it is within one
part in 10^5 of the exact one.
"""

from __future__ import annotations

import itertools
import math
from array import array
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from ledger.formats.cell_records import decode_chunks

__all__ = [
    "DEFAULT_PERCENTILES",
    "METRICS",
    "Distribution",
    "ServingFigures",
    "ServingSummary",
    "chunk_gaps_ms",
    "parse_percentiles",
    "serving_summary",
]

METRICS = ("ttft", "tpot", "itl", "e2el")
"""vLLM's names, in its order: time to first token, time per output token after the first,
inter-token latency, end-to-end latency."""
DEFAULT_PERCENTILES = (50.0, 90.0, 99.0)
_BIN = math.log1p(1e-5)
"""Width of one ITL histogram bin on a log scale: a relative 10^-5."""


@attrs.frozen
class Distribution:
    """One metric over a cell's successful requests, in milliseconds."""

    count: int
    mean: float
    median: float
    std: float
    """The population standard deviation (numpy's ``std``), as vLLM states it."""
    percentiles: tuple[tuple[float, float], ...]
    """(percentile, value) pairs: linear between order statistics, numpy's default."""

    def percentile(self, p: float) -> float | None:
        return next((v for q, v in self.percentiles if q == p), None)


@attrs.frozen
class ServingSummary:
    """What vLLM's summary block states of one cell."""

    completed: int
    failed: int
    duration_s: float | None
    """First request sent to the last one's end, failures included: the wall time vLLM
    calls the benchmark duration."""
    total_input_tokens: int
    total_output_tokens: int
    request_throughput: float | None
    output_throughput: float | None
    total_token_throughput: float | None
    metrics: dict[str, Distribution | None]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            key: getattr(self, key)
            for key in (
                "completed",
                "failed",
                "duration_s",
                "total_input_tokens",
                "total_output_tokens",
                "request_throughput",
                "output_throughput",
                "total_token_throughput",
            )
        }
        for name, dist in self.metrics.items():
            out[name] = attrs.asdict(dist) if dist is not None else None
        return out


def parse_percentiles(text: str) -> tuple[float, ...]:
    """``"50,90,99"`` -> (50.0, 90.0, 99.0), as vLLM's ``--metric-percentiles`` takes them.

    Raises:
        ValueError: a value is not a number from 0 to 100.
    """
    values = []
    for item in text.split(","):
        try:
            value = float(item)
        except ValueError:
            raise ValueError(f"{item.strip()!r} is not a percentile") from None
        if not 0 <= value <= 100:
            raise ValueError(f"a percentile is 0 to 100, got {item.strip()}")
        values.append(value)
    return tuple(dict.fromkeys(values))


class ServingFigures:
    """Gathers the figures of one cell, record by record."""

    def __init__(self) -> None:
        self.completed = self.failed = 0
        self.input_tokens = self.output_tokens = 0
        self.start: int | None = None
        self.end: int | None = None
        self.values = {name: array("d") for name in ("ttft", "tpot", "e2el")}
        self.gaps: dict[int, int] = {}
        """ITL histogram: bin -> count, a zero gap in bin ``-1``."""
        self.gap_count = 0
        self.gap_shift: float | None = None
        """The first gap: sums are taken of each gap less it, so that the variance of
        gaps much alike keeps its digits (the shifted-data algorithm)."""
        self.gap_sum = 0.0
        self.gap_squares = 0.0

    def add(self, record: dict[str, Any]) -> None:
        """One measured record (v1, or v2 with its defaults put in)."""
        if record.get("warmup"):
            return
        sent, end = record["sent_ns"], record.get("end_ns")
        self.start = sent if self.start is None else min(self.start, sent)
        if end is not None:
            self.end = end if self.end is None else max(self.end, end)
        first = record.get("first_token_ns")
        if record.get("error") is not None or first is None or end is None:
            self.failed += 1
            return
        self.completed += 1
        usage = record.get("usage") or {}
        self.input_tokens += usage.get("prompt_tokens") or 0
        # The server's count only, as the database's view takes it: without one, a request
        # adds no output tokens and has no TPOT.
        output = usage.get("completion_tokens") or 0
        self.output_tokens += output
        ttft = (first - sent) / 1e6
        e2el = (end - sent) / 1e6
        self.values["ttft"].append(ttft)
        self.values["e2el"].append(e2el)
        if output > 1:
            self.values["tpot"].append((e2el - ttft) / (output - 1))
        for gap in chunk_gaps_ms(record):
            self._add_gap(gap)

    def _add_gap(self, gap: float) -> None:
        key = -1 if gap <= 0 else round(math.log(gap) / _BIN)
        self.gaps[key] = self.gaps.get(key, 0) + 1
        if self.gap_shift is None:
            self.gap_shift = gap
        shifted = gap - self.gap_shift
        self.gap_count += 1
        self.gap_sum += shifted
        self.gap_squares += shifted * shifted

    def summary(self, percentiles: Sequence[float] = DEFAULT_PERCENTILES) -> ServingSummary:
        duration = None
        if self.start is not None and self.end is not None and self.end > self.start:
            duration = (self.end - self.start) / 1e9

        def rate(amount: int) -> float | None:
            return amount / duration if duration else None

        metrics: dict[str, Distribution | None] = {
            name: _exact(self.values[name], percentiles) if name in self.values else None
            for name in METRICS
        }
        metrics["itl"] = self._itl(percentiles)
        return ServingSummary(
            completed=self.completed,
            failed=self.failed,
            duration_s=duration,
            total_input_tokens=self.input_tokens,
            total_output_tokens=self.output_tokens,
            request_throughput=rate(self.completed),
            output_throughput=rate(self.output_tokens),
            total_token_throughput=rate(self.input_tokens + self.output_tokens),
            metrics=metrics,
        )

    def _itl(self, percentiles: Sequence[float]) -> Distribution | None:
        if not self.gap_count:
            return None
        n = self.gap_count
        shift = self.gap_shift or 0.0
        mean = shift + self.gap_sum / n
        variance = max((self.gap_squares - self.gap_sum * self.gap_sum / n) / n, 0.0)
        ordered = sorted(self.gaps.items())

        def at(position: float) -> float:
            # numpy's linear percentile: between the order statistics around the position.
            low = math.floor(position)
            fraction = position - low
            below = _order_statistic(ordered, low)
            if fraction == 0 or low + 1 >= n:
                return below
            return below + fraction * (_order_statistic(ordered, low + 1) - below)

        return Distribution(
            count=n,
            mean=mean,
            median=at(0.5 * (n - 1)),
            std=math.sqrt(variance),
            percentiles=tuple((p, at(p / 100 * (n - 1))) for p in percentiles),
        )


def _order_statistic(ordered: list[tuple[int, int]], k: int) -> float:
    seen = 0
    for key, count in ordered:
        seen += count
        if k < seen:
            return 0.0 if key == -1 else math.exp(key * _BIN)
    raise IndexError(k)


def _exact(values: array[float], percentiles: Sequence[float]) -> Distribution | None:
    import numpy as np

    if not values:
        return None
    data = np.frombuffer(values, dtype=float)
    found = np.percentile(data, [50.0, *percentiles])
    return Distribution(
        count=len(data),
        mean=float(np.mean(data)),
        median=float(found[0]),
        std=float(np.std(data)),
        percentiles=tuple((p, float(v)) for p, v in zip(percentiles, found[1:], strict=True)),
    )


def chunk_gaps_ms(record: dict[str, Any]) -> Iterable[float]:
    """The gaps between a record's token-bearing chunks, in ms: v2's ``chunks_us``, v1's
    ``chunks_ns``."""
    encoded = record.get("chunks_us")
    if isinstance(encoded, str):
        offsets = decode_chunks(encoded)
        return [(b - a) / 1e3 for a, b in itertools.pairwise(offsets)]
    times = record.get("chunks_ns") or []
    return [(b - a) / 1e6 for a, b in itertools.pairwise(times)]


def serving_summary(
    records: Iterable[dict[str, Any]], percentiles: Sequence[float] = DEFAULT_PERCENTILES
) -> ServingSummary:
    """The figures of one cell's records."""
    figures = ServingFigures()
    for record in records:
        figures.add(record)
    return figures.summary(percentiles)
