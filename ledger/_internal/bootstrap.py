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

import numpy as np
import numpy.typing as npt

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


def medians_at(values: FloatArray, first: IntArray, second: IntArray) -> FloatArray:
    """Resample medians of one group of (unsorted) ``values`` at the sorted positions from
    :func:`median_positions`. Only the window of ranks the draws reach is ordered, by a
    partition around it: O(n) instead of a sort."""
    low, high = int(first.min()), int(second.max())
    ordered = np.array(values, dtype=np.float64)
    ordered.partition([low, high] if high > low else [low])
    window = np.sort(ordered[low : high + 1])
    medians: FloatArray = (window[first - low] + window[second - low]) / 2
    return medians


def percent_change_interval(
    baseline: FloatArray, candidate: FloatArray
) -> tuple[float, float] | None:
    """95 % percentile interval of ``(candidate - baseline) / baseline * 100`` over paired
    resample medians; None where a baseline median is zero."""
    if (baseline == 0).any():
        return None
    change = (candidate - baseline) / baseline * 100
    low, high = np.percentile(change, [2.5, 97.5])
    return float(low), float(high)
