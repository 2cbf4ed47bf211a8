"""Change points of one series: a penalised step fit with an absolute-deviation cost.

A series is a metric's value per campaign, in time order. Its steps are found on the log
of the values, so that a step is a ratio and the noise a coefficient of variation,
whatever the metric's unit. The fit is the partition into segments of at least
:data:`MIN_SEGMENT` points that minimises the sum, over segments, of the absolute
deviations from the segment's median divided by the noise scale, plus :data:`PENALTY`
times ln(n) per step (optimal partitioning, exact: the same optimum as PELT). The
absolute-deviation cost is the likelihood of Laplace noise: one outlying campaign costs in
proportion to its distance, not to its square, so it does not buy a segment of its own
the way it does under least squares.

The noise scale is estimated from the series itself, robustly: the median absolute
deviation of successive differences (a step moves one difference only), scaled to a
normal standard deviation, at least :data:`MIN_SCALE`; the Laplace scale is that over
the square root of 2.

Each step is stated with the segments either side: their medians, the change between
them in percent, and a 95 % percentile interval of that change from a bootstrap of the
two segments' medians (each segment resampled on its own, :data:`RESAMPLES` times),
seeded by the caller so that the same series gives the same interval.

The choice of this method over E-divisive, rolling Mann-Whitney tests and a
least-squares fit, and its constants, are measured by ``benchmarks/history_bench.py``
(``docs/guides/history.md``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import attrs
import numpy as np
import numpy.typing as npt

__all__ = [
    "MIN_SCALE",
    "MIN_SEGMENT",
    "PENALTY",
    "RESAMPLES",
    "Fit",
    "Step",
    "backtrack",
    "fit",
    "noise_scale",
    "step_of",
]

FloatArray = npt.NDArray[np.float64]

MIN_SEGMENT = 3
"""Fewest points a segment holds: a single outlying campaign, or two, is not a level."""
PENALTY = 3.0
"""The cost of one step, in units of ln(n) for a series of n points."""
MIN_SCALE = 0.005
"""The smallest noise scale (a coefficient of variation of 0.5 %): on a series steadier
than that (a simulated endpoint's), a step of a tenth of a percent would pass for one."""
RESAMPLES = 2000
"""Bootstrap resamples per step interval."""


@attrs.frozen
class Fit:
    """The segments of one series."""

    breaks: tuple[int, ...]
    """The index of the first point of each segment after the first, ascending."""
    scale: float
    """The noise scale used, as a coefficient of variation (log units)."""

    def bounds(self, n: int) -> list[tuple[int, int]]:
        """Each segment as (start, stop) over a series of ``n`` points."""
        edges = [0, *self.breaks, n]
        return list(itertools.pairwise(edges))


@attrs.frozen
class Step:
    """A step between two adjacent segments."""

    before: float
    """The median of the segment before."""
    after: float
    """The median of the segment after."""
    change_percent: float
    """(after - before) / before * 100."""
    interval: tuple[float, float]
    """95 % bootstrap percentile interval of the change, in percent."""


def _logs(values: Sequence[float]) -> FloatArray:
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"a series is one-dimensional, got shape {x.shape}")
    if not np.all(np.isfinite(x)) or np.any(x <= 0):
        raise ValueError("a series holds positive, finite values only")
    logs: FloatArray = np.log(x)
    return logs


def noise_scale(values: Sequence[float], *, min_scale: float = MIN_SCALE) -> float:
    """The series' noise as a coefficient of variation, from the median absolute deviation
    of its successive log differences, at least ``min_scale``.

    Raises:
        ValueError: a value that is not positive and finite.
    """
    x = _logs(values)
    if x.size < 3:
        return min_scale
    d = np.diff(x)
    mad = float(np.median(np.abs(d - np.median(d))))
    # 1.4826 makes a MAD a normal standard deviation; a difference holds two points' noise.
    return max(1.4826 * mad / math.sqrt(2), min_scale)


def _segment_costs(x: FloatArray, m: int) -> FloatArray:
    """cost[s, t]: the sum of absolute deviations from the median of x[s:t] (inf where
    the segment is shorter than ``m``). For sorted values, that sum is the upper half's
    sum less the lower half's, whatever the median between them; each start's prefixes
    are sorted at once, the rest padded with +inf."""
    n = x.size
    cost = np.full((n + 1, n + 1), np.inf)
    for s in range(n - m + 1):
        tail = x[s:]
        size = tail.size
        lower = np.tri(size, dtype=bool)  # row k holds the prefix of k + 1 values
        ordered = np.sort(np.where(lower, tail[None, :], np.inf), axis=1)
        sums = np.zeros((size, size + 1))
        np.cumsum(np.where(lower, ordered, 0.0), axis=1, out=sums[:, 1:])
        count = np.arange(1, size + 1)
        rows = np.arange(size)
        half = count // 2
        upper = sums[rows, count] - sums[rows, count - half]
        below = sums[rows, half]
        cost[s, s + 1 :] = upper - below
        cost[s, s + 1 : s + m] = np.inf
    return cost


def fit(
    values: Sequence[float],
    *,
    penalty: float = PENALTY,
    min_segment: int = MIN_SEGMENT,
    min_scale: float = MIN_SCALE,
) -> Fit:
    """The penalised step fit of a series (see the module's docstring).

    Args:
        penalty: the cost of one step in units of ln(n).
        min_segment: fewest points a segment holds.
        min_scale: the smallest noise scale.

    Raises:
        ValueError: a value that is not positive and finite, ``min_segment`` < 1 or
            ``min_scale`` <= 0.
    """
    if min_segment < 1:
        raise ValueError(f"min_segment must be >= 1, got {min_segment}")
    if not min_scale > 0:
        raise ValueError(f"min_scale must be > 0, got {min_scale}")
    x = _logs(values)
    n = x.size
    scale = noise_scale(values, min_scale=min_scale)
    if n < 2 * min_segment:
        return Fit((), scale)
    cost = _segment_costs(x, min_segment) / (scale / math.sqrt(2))
    beta = penalty * math.log(n)
    best = np.full(n + 1, np.inf)
    best[0] = -beta
    previous = np.zeros(n + 1, dtype=np.int64)
    for t in range(min_segment, n + 1):
        # A segment ending at t starts at 0 or after a segment of its own.
        starts = np.array([0, *range(min_segment, t - min_segment + 1)], dtype=np.int64)
        totals = best[starts] + cost[starts, t]
        pick = int(np.argmin(totals))
        best[t] = totals[pick] + beta
        previous[t] = starts[pick]
    return Fit(tuple(backtrack(previous, n)), scale)


def backtrack(previous: npt.NDArray[np.int64], n: int) -> list[int]:
    """The breaks of an optimal partition of ``n`` points, from each end's best start."""
    breaks = []
    t = n
    while t > 0:
        t = int(previous[t])
        if t > 0:
            breaks.append(t)
    return sorted(breaks)


def step_of(
    before: Sequence[float], after: Sequence[float], *, seed: int, resamples: int = RESAMPLES
) -> Step:
    """The step between two segments: their medians, the change in percent and its 95 %
    bootstrap percentile interval (each segment resampled with replacement on its own;
    numpy's legacy ``RandomState``, whose streams numpy keeps fixed, seeded by ``seed``).

    Raises:
        ValueError: an empty segment, or a segment median of zero.
    """
    a = np.asarray(before, dtype=np.float64)
    b = np.asarray(after, dtype=np.float64)
    if a.size == 0 or b.size == 0:
        raise ValueError("a step needs a value on either side")
    level_a, level_b = float(np.median(a)), float(np.median(b))
    if level_a == 0:
        raise ValueError("the level before a step is zero: no change in percent")
    rng = np.random.RandomState(seed)
    draws_a = np.median(a[rng.randint(0, a.size, (resamples, a.size))], axis=1)
    draws_b = np.median(b[rng.randint(0, b.size, (resamples, b.size))], axis=1)
    change = (draws_b - draws_a) / draws_a * 100
    low, high = np.percentile(change, [2.5, 97.5])
    return Step(
        level_a,
        level_b,
        (level_b - level_a) / level_a * 100,
        (float(low), float(high)),
    )
