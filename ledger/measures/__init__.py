"""The arithmetic the runners and the ledger share, so that a verdict recomputed by the
ledger is the runner's own: open-loop schedules (:mod:`~ledger.measures.arrivals`),
functional gate counts (:mod:`~ledger.measures.functional`) and stage verdicts
(:mod:`~ledger.measures.verdicts`).
"""

from __future__ import annotations

from ledger.measures import arrivals, functional, verdicts

__all__ = [
    "arrivals",
    "functional",
    "verdicts",
]
