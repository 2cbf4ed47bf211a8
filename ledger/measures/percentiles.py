"""Which percentiles a cell's requests can support, and the rule that says so.

A percentile is stated only where the cell's values bound it: with n values, the order
statistics X(1) <= ... <= X(n) hold the population's q-quantile between X(1) and X(n)
with probability 1 - q^n - (1 - q)^n, whatever the distribution (the distribution-free
confidence interval of a quantile: H. A. David and H. N. Nagaraja, *Order Statistics*,
3rd ed., Wiley 2003, section 7.1; G. J. Hahn, W. Q. Meeker and L. A. Escobar,
*Statistical Intervals*, 2nd ed., Wiley 2017, chapter 5). Below the smallest n where that
probability reaches the stated confidence, no pair of order statistics is a confidence
interval for the quantile, so the sample cannot say where it lies: at 95 %, 299 values
for a p99, 59 for a p95, 29 for a p90 and 6 for a median.

MLPerf LoadGen asks for far more (270,336 queries for a p99 at 99 % confidence within a
margin of a twentieth of 1 - q): it bounds how far the percentile may be off, where this
rule only asks that it be bounded at all. A cell that meets this rule can still state a
wide interval; one that misses it states none.
"""

from __future__ import annotations

import functools

__all__ = ["CONFIDENCE", "min_samples", "name_of", "stated", "supported", "too_few"]

CONFIDENCE = 0.95
"""The confidence at which a percentile must be bounded to be stated."""


@functools.cache
def min_samples(q: float, confidence: float = CONFIDENCE) -> int:
    """The fewest values that bound the ``q``-quantile (0 < q < 1) at ``confidence``."""
    if not 0 < q < 1:
        raise ValueError(f"a quantile is between 0 and 1, got {q!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"a confidence is between 0 and 1, got {confidence!r}")
    n = 1
    while 1 - q**n - (1 - q) ** n < confidence:
        n += 1
    return n


def supported(q: float, count: int | None, confidence: float = CONFIDENCE) -> bool:
    """Whether ``count`` values are enough to state their ``q``-quantile."""
    return count is not None and count >= min_samples(q, confidence)


def name_of(q: float) -> str:
    """``p99`` for 0.99, ``p50`` for 0.5, ``p99.9`` for 0.999."""
    return f"p{round(q * 100, 6):g}"


def too_few(q: float) -> str:
    """What a report says in place of a percentile the cell cannot support."""
    return f"too few requests for {name_of(q)}"


def stated(q: float, count: int | None, shown: str) -> str:
    """``shown`` (a percentile as a reader sees it) where ``count`` values support the
    ``q``-quantile; :func:`too_few` where they do not."""
    return shown if supported(q, count) else too_few(q)
