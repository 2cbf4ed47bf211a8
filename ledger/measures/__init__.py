"""The arithmetic the runners and the ledger share, so that a verdict recomputed by the
ledger is the runner's own: open-loop schedules (:mod:`~ledger.measures.arrivals`),
functional gate counts (:mod:`~ledger.measures.functional`), stage verdicts
(:mod:`~ledger.measures.verdicts`) and the serving benchmark's figures as vLLM defines them
(:mod:`~ledger.measures.serving`).
"""

from __future__ import annotations

from ledger.measures import arrivals, functional, serving, verdicts

__all__ = [
    "arrivals",
    "functional",
    "serving",
    "verdicts",
]
