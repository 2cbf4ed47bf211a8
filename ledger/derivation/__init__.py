"""``ledger derive``: comparison artifacts computed in DuckDB from raw request rows, their
bootstrap intervals, and goodput under latency objectives (:mod:`~ledger.derivation.goodput`).
"""

from __future__ import annotations

from ledger.derivation import calibration, goodput
from ledger.derivation._derive import (
    ArgumentError,
    DeriveError,
    comparison_of,
    comparisons_of,
    derive,
    derive_into,
    first_difference,
    output_name,
    plan_slo,
    reads_of,
    recompute,
)

__all__ = [
    "ArgumentError",
    "DeriveError",
    "calibration",
    "comparison_of",
    "comparisons_of",
    "derive",
    "derive_into",
    "first_difference",
    "goodput",
    "output_name",
    "plan_slo",
    "reads_of",
    "recompute",
]
