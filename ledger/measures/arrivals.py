"""Open-loop send schedules: when each request of a cell is due, computed up front.

A schedule is a function of its settings alone, so the runner that sends by it and verify
that checks it compute the same one: inter-arrival gaps drawn from numpy's legacy
``RandomState`` (streams fixed across numpy versions), seeded by the stage seed and the
cell, summed in float64 seconds and rounded to integer nanoseconds.

- ``constant``: one request every ``1 / rate`` seconds;
- ``poisson``: exponential gaps of mean ``1 / rate``;
- ``gamma``: gamma gaps of shape ``burstiness`` and mean ``1 / rate`` (vLLM's
  ``--burstiness``: below 1 burstier than Poisson, above 1 more regular; 1 is Poisson).

The first request is due at offset 0. With ``duration_s``, the schedule holds every
arrival before that many seconds; with ``requests``, exactly that many.
"""

from __future__ import annotations

import hashlib
import math
from array import array
from collections.abc import Iterable, Sequence
from typing import Any

import attrs
import numpy as np

__all__ = [
    "LATE_THRESHOLD_MS",
    "MAX_IN_FLIGHT",
    "MAX_SCHEDULED",
    "MIN_RATE",
    "PROCESSES",
    "Arrivals",
    "cell_seed",
    "completed_rate",
    "lateness",
    "lateness_of",
    "offsets_ns",
    "percentile",
    "schedule_ns",
    "sweep_rate",
]

PROCESSES = ("poisson", "constant", "gamma")
MAX_SCHEDULED = 1_000_000
"""The most requests one open-loop cell may schedule."""
LATE_THRESHOLD_MS = 1.0
"""Sender lateness p99 above this marks a cell ``limited-by-client``."""
MIN_RATE = 0.001
"""The lowest rate a cell name spells (``r0_001``): one request in about 17 minutes."""
MAX_IN_FLIGHT = 10_000
"""The client's own ceiling on requests in flight, when a load stage sets none."""


@attrs.frozen
class Arrivals:
    """How an open-loop cell's requests arrive."""

    process: str
    rate: float
    """Requests per second."""
    seed: int
    burstiness: float = 1.0
    requests: int | None = None
    duration_s: float | None = None
    max_in_flight: int | None = None
    """Requests held back while this many are in flight (sent late, never dropped)."""

    @classmethod
    def from_json(cls, arrival: dict[str, Any]) -> Arrivals:
        """The settings a cell artifact's ``arrival`` records (its other fields ignored)."""
        return cls(**{field.name: arrival[field.name] for field in attrs.fields(cls)})

    def to_json(self) -> dict[str, Any]:
        """As recorded in the cell artifact's ``arrival``."""
        return {
            "process": self.process,
            "rate": self.rate,
            "seed": self.seed,
            "burstiness": self.burstiness,
            "requests": self.requests,
            "duration_s": self.duration_s,
            "max_in_flight": self.max_in_flight,
        }


def cell_seed(stage_seed: int, cell_id: str) -> int:
    """The 32-bit seed of one cell's gaps: each cell of a stage gets its own stream."""
    digest = hashlib.sha256(f"anvil-ledger arrivals\x00{stage_seed}\x00{cell_id}".encode())
    return int.from_bytes(digest.digest()[:4], "little")


def offsets_ns(arrivals: Arrivals, cell_id: str) -> list[int]:
    """Each request's due time, in nanoseconds after the first (:func:`schedule_ns` as a
    list).

    Raises:
        ValueError: as :func:`schedule_ns`.
    """
    return list(schedule_ns(arrivals, cell_id))


def schedule_ns(arrivals: Arrivals, cell_id: str) -> array[int]:
    """Each request's due time, in nanoseconds after the first, eight bytes each: an
    hour-long cell's schedule held while it runs.

    Raises:
        ValueError: settings no schedule can follow (a rate or burstiness that is not
            positive, neither or both of ``requests`` and ``duration_s``, or more than
            :data:`MAX_SCHEDULED` requests).
    """
    if arrivals.process not in PROCESSES:
        raise ValueError(f"arrival must be one of {', '.join(PROCESSES)}, not {arrivals.process!r}")
    if not (math.isfinite(arrivals.rate) and arrivals.rate > 0):
        raise ValueError(
            f"rate must be a positive number of requests per second, not {arrivals.rate}"
        )
    if not (math.isfinite(arrivals.burstiness) and arrivals.burstiness > 0):
        raise ValueError(f"burstiness must be positive, not {arrivals.burstiness}")
    if (arrivals.requests is None) == (arrivals.duration_s is None):
        raise ValueError("an open-loop cell needs either requests or duration_s, not both")
    mean = 1.0 / arrivals.rate
    rng = np.random.RandomState(cell_seed(arrivals.seed, cell_id))

    def gaps(count: int) -> Any:
        if arrivals.process == "constant":
            return np.full(count, mean)
        if arrivals.process == "poisson":
            return rng.exponential(mean, count)
        return rng.gamma(arrivals.burstiness, mean / arrivals.burstiness, count)

    if arrivals.requests is not None:
        if arrivals.requests > MAX_SCHEDULED:
            raise ValueError(f"more than {MAX_SCHEDULED:,} requests in one cell")
        drawn = gaps(max(arrivals.requests - 1, 0))
    else:
        # Drawn in batches of the mean count until the duration is passed: the stream,
        # and so the schedule, depends only on the settings.
        expected = (arrivals.duration_s or 0) * arrivals.rate
        if expected > 2 * MAX_SCHEDULED:
            raise ValueError(f"more than {MAX_SCHEDULED:,} requests in one cell")
        batch = max(16, min(math.ceil(expected), MAX_SCHEDULED + 1))
        drawn = gaps(batch)
        while drawn.sum() < (arrivals.duration_s or 0):
            if len(drawn) > MAX_SCHEDULED:
                raise ValueError(f"more than {MAX_SCHEDULED:,} requests in one cell")
            drawn = np.concatenate((drawn, gaps(batch)))
    # The first request is due at once; gap i separates requests i and i + 1.
    seconds = np.concatenate(([0.0], np.cumsum(drawn)))
    if arrivals.duration_s is not None:
        seconds = seconds[seconds < arrivals.duration_s]
        if len(seconds) > MAX_SCHEDULED:
            raise ValueError(f"more than {MAX_SCHEDULED:,} requests in one cell")
    else:
        seconds = seconds[: arrivals.requests]
    return array("q", (round(float(s) * 1e9) for s in seconds))


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default, DuckDB's ``quantile_cont``)."""
    return _interpolated(sorted(values), q)


def _interpolated(ordered: Sequence[float] | np.ndarray[Any, Any], q: float) -> float:
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = math.ceil(position)
    below, above = float(ordered[low]), float(ordered[high])
    return below + (above - below) * (position - low)


def lateness(
    records: Iterable[dict[str, Any]], threshold_ms: float = LATE_THRESHOLD_MS
) -> dict[str, Any]:
    """The sender's lateness against the schedule over the measured requests that have a
    due time: p50, p99 and max in milliseconds, and whether p99 passes ``threshold_ms``
    (the client, not the server, limited the cell)."""
    late = array(
        "d",
        (
            (r["sent_ns"] - r["scheduled_ns"]) / 1e6
            for r in records
            if not r.get("warmup") and r.get("scheduled_ns") is not None
        ),
    )
    return lateness_of(late, threshold_ms)


def lateness_of(late: Sequence[float], threshold_ms: float = LATE_THRESHOLD_MS) -> dict[str, Any]:
    """:func:`lateness` of the measured requests' lateness in milliseconds, in any order."""
    if not late:
        return {"p50_ms": None, "p99_ms": None, "max_ms": None, "threshold_ms": threshold_ms,
                "limited_by_client": False}  # fmt: skip
    # Sorted by numpy, eight bytes a value: the same order, so the same figures, as
    # sorted() gives, without a Python float per request.
    ordered = np.sort(np.asarray(late, dtype=np.float64))
    p99 = _interpolated(ordered, 0.99)
    return {
        "p50_ms": round(_interpolated(ordered, 0.5), 6),
        "p99_ms": round(p99, 6),
        "max_ms": round(float(ordered[-1]), 6),
        "threshold_ms": threshold_ms,
        "limited_by_client": p99 > threshold_ms,
    }


def sweep_rate(synchronous_rps: float, ceiling_rps: float, position: int, count: int) -> float:
    """Rate ``position`` of ``count`` strictly between the synchronous rate and the ceiling
    (the synchronous rate throughout when the ceiling is no higher), rounded to 0.01."""
    top = max(ceiling_rps, synchronous_rps)
    rate = synchronous_rps + (top - synchronous_rps) * position / (count + 1)
    return max(round(rate, 2), MIN_RATE)


def completed_rate(records: Iterable[dict[str, Any]]) -> float:
    """Successful measured requests per second, from the first sent to the last ended: a
    sweep's synchronous rate (one at a time) and its ceiling (all at once)."""
    done = 0
    first = last = 0
    for r in records:
        if r["warmup"] or r["error"] is not None:
            continue
        first = r["sent_ns"] if not done else min(first, r["sent_ns"])
        last = r["end_ns"] if not done else max(last, r["end_ns"])
        done += 1
    if not done:
        return 0.0
    span = (last - first) / 1e9
    return round(done / span, 6) if span > 0 else 0.0
