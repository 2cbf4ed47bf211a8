"""A campaign folder read as evidence: listed safely (:mod:`~ledger.evidence.tree`), each
file read, hashed and checked on every core (:mod:`~ledger.evidence.scan`,
:mod:`~ledger.evidence.documents`, :mod:`~ledger.evidence.runs`), decision summaries
held to their gates (:mod:`~ledger.evidence.gate`), and sealed with a manifest and
``SHA256SUMS`` (:mod:`~ledger.evidence.manifest`).
"""

from __future__ import annotations

from ledger.evidence import documents, gate, manifest, runs, scan, tree

__all__ = [
    "documents",
    "gate",
    "manifest",
    "runs",
    "scan",
    "tree",
]
