"""A seeded, exact bootstrap of the median, without materialising resamples.

A bootstrap resample of n values is a multinomial count over the n sorted values. The
value of rank r in the resample is found by descending a binary split of the sorted
positions: the count falling in the left half of a range, given the count in the range,
is binomial. So a resample's median costs O(log n) binomial draws instead of n draws and
a sort: 2,000 resamples of each of a thousand 10,000-request cells take about a second.
For even n the median is the mean of ranks n/2 and n/2 + 1 of the same resample (as
DuckDB's ``median``); the second is found from the counts the descent leaves.

The positions drawn depend only on n, so one draw serves every metric of a cell (each
metric's own sorted values are then read at those positions: a valid resample for each
metric's marginal interval). Draws come from numpy's legacy ``RandomState``, whose streams
numpy keeps fixed across versions, so a published interval can be recomputed later.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from ledger.derivation._comparison_reads import Ordered

RESAMPLES = 2000
"""Bootstrap resamples per interval."""
MIN_SAMPLES = 10
"""Below this many values per arm an interval means nothing: the row is descriptive."""

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def seed_for(*parts: str) -> int:
    """A 32-bit seed from the names of what is compared (stable across runs and machines)."""
    digest = hashlib.sha256("\x00".join(parts).encode()).digest()
    return int.from_bytes(digest[:4], "little")


def median_positions(
    sizes: IntArray, *, seed: int, draws: int = RESAMPLES
) -> tuple[IntArray, IntArray]:
    """For groups of ``sizes`` sorted values: per group and resample, the two positions
    whose values average to the resample's median (equal for odd sizes). Shape
    (groups, draws)."""
    n = np.repeat(np.asarray(sizes, dtype=np.int64), draws)
    if n.size == 0:
        empty = np.zeros((0, draws), dtype=np.int64)
        return empty, empty
    if (n < 1).any():
        raise ValueError("every group needs at least one value")
    rng = np.random.RandomState(seed)
    rank = (n + 1) // 2
    lo = np.zeros_like(n)
    hi = n.copy()
    count = n.copy()
    wanted = rank.copy()
    while True:
        open_ = hi - lo > 1
        if not open_.any():
            break
        mid = (lo + hi) // 2
        p = np.where(open_, (mid - lo) / np.maximum(hi - lo, 1), 0.0)
        left = np.where(open_, rng.binomial(count, p), 0)
        go_left = wanted <= left
        hi = np.where(open_ & go_left, mid, hi)
        lo = np.where(open_ & ~go_left, mid, lo)
        wanted = np.where(open_ & ~go_left, wanted - left, wanted)
        count = np.where(open_, np.where(go_left, left, count - left), count)
    first = lo
    # Rank n/2 + 1 (even n) is at the same position when it holds more values; else at the
    # lowest occupied position above, the minimum of `above` values spread uniformly over
    # the positions above, sampled by inverting its distribution.
    above = n - (rank - wanted + count)
    room = n - 1 - first
    u = rng.random_sample(n.size)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        step = np.floor(room * (1.0 - u ** (1.0 / np.maximum(above, 1))))
    following = np.minimum(first + 1 + np.nan_to_num(step).astype(np.int64), n - 1)
    second = np.where((n % 2 == 1) | (wanted < count), first, following)
    shape = (len(sizes), draws)
    return first.reshape(shape), second.reshape(shape)


def medians_of(ordered: Ordered, first: IntArray, second: IntArray) -> FloatArray | None:
    """Resample medians of one group from its ordered window of values
    (:class:`ledger.derivation._comparison_reads.Ordered`); None where a position lies
    outside the window."""
    low, high = ordered.at(first), ordered.at(second)
    if low is None or high is None:
        return None
    medians: FloatArray = (low + high) / 2
    return medians


def percent_change_intervals(
    baseline: list[FloatArray], candidate: list[FloatArray]
) -> list[tuple[float, float] | None]:
    """Per pair of rows: the 95 % percentile interval of ``(candidate - baseline) /
    baseline * 100`` over paired resample medians; None where a baseline median is zero.
    All rows in one call: numpy interpolates each row of a 2-D percentile as it does one
    row alone, bit for bit."""
    if not baseline:
        return []
    base, cand = np.stack(baseline), np.stack(candidate)
    zero = (base == 0).any(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        change = (cand - base) / base * 100
    change[zero] = 0.0
    low, high = np.percentile(change, [2.5, 97.5], axis=1)
    return [
        None if z else (float(lo), float(hi))
        for z, lo, hi in zip(zero.tolist(), low.tolist(), high.tolist(), strict=True)
    ]
