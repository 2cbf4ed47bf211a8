"""Promotion: policies (:mod:`~ledger.promotion.policy`), a campaign evaluated against one
from its artifacts, and ``ledger decide``'s decision summary and approval records.
"""

from __future__ import annotations

from ledger.promotion import policy
from ledger.promotion._decide import (
    POLICY_NAME,
    Decided,
    DecideError,
    build_summary,
    decide,
    headlines_of,
    match_label,
    proposal,
    write_approval_record,
)
from ledger.promotion._evaluation import (
    RULE_CODES,
    RUN_MANIFEST,
    RUN_PLAN,
    Evaluation,
    Evidence,
    GateResult,
    Unmet,
    check_approvals,
    comparison_failures,
    evaluate,
    imported_runs,
    load_evidence,
    pick_candidate,
    restated_gates,
    stage_gates,
    withheld_sources,
)

__all__ = [
    "POLICY_NAME",
    "RULE_CODES",
    "RUN_MANIFEST",
    "RUN_PLAN",
    "DecideError",
    "Decided",
    "Evaluation",
    "Evidence",
    "GateResult",
    "Unmet",
    "build_summary",
    "check_approvals",
    "comparison_failures",
    "decide",
    "evaluate",
    "headlines_of",
    "imported_runs",
    "load_evidence",
    "match_label",
    "pick_candidate",
    "policy",
    "proposal",
    "restated_gates",
    "stage_gates",
    "withheld_sources",
    "write_approval_record",
]
