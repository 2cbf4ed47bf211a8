"""Signatures of published campaigns: the in-toto statement a publication makes over its
files, and the sigstore bundles that sign it (or any file), checked offline against a
pinned trusted root.

``_intoto`` writes and reads the statement; ``_bundles`` checks a bundle's own
consistency with no trusted root (what ``ledger verify`` can tell: the statement it signs,
its log entry, its certificate's signature); ``_verify`` verifies a bundle with
sigstore-python against a trusted root (what ``ledger signature verify`` and ``ledger
audit`` tell: who signed).
"""

from __future__ import annotations

from ledger.signatures._bundles import MAX_BUNDLE_BYTES, check_bundle, pae, signature_problem
from ledger.signatures._intoto import (
    BUNDLE_NAME,
    PREDICATE_TYPE,
    STATEMENT_NAME,
    STATEMENT_TYPE,
    predicate_mismatches,
    statement,
    subjects_of,
    with_subjects,
)
from ledger.signatures._summary import (
    GATE_FIELD,
    SUMMARY_PREDICATE_TYPE,
    VERIFIER_ID,
    is_sha256,
    summary_problems,
    time_verified,
    verification_summary,
)
from ledger.signatures._verify import (
    MAX_ROOT_BYTES,
    MAX_SIGNED_BYTES,
    SignatureResult,
    UnusableInputError,
    verify_bundle,
    verify_file,
    verify_statement,
)

__all__ = [
    "BUNDLE_NAME",
    "GATE_FIELD",
    "MAX_BUNDLE_BYTES",
    "MAX_ROOT_BYTES",
    "MAX_SIGNED_BYTES",
    "PREDICATE_TYPE",
    "STATEMENT_NAME",
    "STATEMENT_TYPE",
    "SUMMARY_PREDICATE_TYPE",
    "VERIFIER_ID",
    "SignatureResult",
    "UnusableInputError",
    "check_bundle",
    "is_sha256",
    "pae",
    "predicate_mismatches",
    "signature_problem",
    "statement",
    "subjects_of",
    "summary_problems",
    "time_verified",
    "verification_summary",
    "verify_bundle",
    "verify_file",
    "verify_statement",
    "with_subjects",
]
