"""The verification summary a gate attests: an in-toto Statement v1 with SLSA's
verification summary predicate v1 (https://slsa.dev/verification_summary/v1).

Its subject is the campaign's ``manifest.json`` (which names every artifact by digest),
its policy the promotion policy's canonical digest, and its result the gate's decision:
``PASSED`` with the policy's level, or ``FAILED``. The rules met and unmet go in an
extension field named by a URI, as the predicate's parsing rules allow.
"""

from __future__ import annotations

import datetime
import os
import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from ledger import __version__
from ledger.errors import UsageError
from ledger.signatures._intoto import STATEMENT_TYPE

__all__ = [
    "GATE_FIELD",
    "SUMMARY_PREDICATE_TYPE",
    "VERIFIER_ID",
    "is_sha256",
    "summary_problems",
    "time_verified",
    "verification_summary",
]

SUMMARY_PREDICATE_TYPE = "https://slsa.dev/verification_summary/v1"
VERIFIER_ID = "https://anvil-ledger.dev/gate/v1"
"""``ledger gate``: the verifier a consumer pairs with the identity that signs."""
GATE_FIELD = "https://anvil-ledger.dev/verification_summary/gate/v1"
"""The extension field holding the campaign, candidate, evidence counts and each rule."""
_HEX64 = re.compile(r"[0-9a-f]{64}")


def time_verified() -> str:
    """Now, in UTC to the second; ``SOURCE_DATE_EPOCH`` when set, so that a rebuild of the
    same decision gives the same bytes."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch is None:
        return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    try:
        if not epoch.isdigit():
            raise ValueError
        moment = datetime.datetime.fromtimestamp(int(epoch), datetime.UTC)
    except (ValueError, OverflowError, OSError):
        raise UsageError(
            f"SOURCE_DATE_EPOCH={epoch!r}: not a count of seconds since 1970 in years 1-9999"
        ) from None
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def verification_summary(
    *,
    campaign_id: str,
    manifest_sha256: str,
    policy_name: str,
    policy_sha256: str,
    level: str,
    candidate: str | None,
    errors: int,
    warnings: int,
    met: Sequence[str],
    unmet: Sequence[tuple[str, str]],
    verified_at: str,
) -> dict[str, Any]:
    """The statement of one gate decision: passed when no error finding and no rule unmet."""
    passed = errors == 0 and not unmet
    return {
        "_type": STATEMENT_TYPE,
        "subject": [
            {"name": f"{campaign_id}/manifest.json", "digest": {"sha256": manifest_sha256}}
        ],
        "predicateType": SUMMARY_PREDICATE_TYPE,
        "predicate": {
            "verifier": {"id": VERIFIER_ID, "version": {"anvil-ledger": __version__}},
            "timeVerified": verified_at,
            "resourceUri": f"urn:anvil-ledger:campaign:{campaign_id}",
            "policy": {
                "uri": f"urn:anvil-ledger:promotion-policy:{quote(policy_name, safe='')}",
                "digest": {"sha256": policy_sha256},
            },
            "verificationResult": "PASSED" if passed else "FAILED",
            "verifiedLevels": [level] if passed else ["FAILED"],
            "slsaVersion": "1.0",
            GATE_FIELD: {
                "campaign_id": campaign_id,
                "candidate": candidate,
                "policy_name": policy_name,
                "evidence": {"errors": errors, "warnings": warnings},
                "rules_met": list(met),
                "rules_unmet": [{"rule": rule, "reason": why} for rule, why in unmet],
            },
        },
    }


def summary_problems(
    document: Any, *, campaign_id: str, manifest_sha256: str, policy_sha256: str
) -> list[str]:
    """Why a verification summary does not attest that ``policy_sha256`` passed this
    campaign, one line each; empty when it does."""
    if (
        not isinstance(document, dict)
        or document.get("_type") != STATEMENT_TYPE
        or document.get("predicateType") != SUMMARY_PREDICATE_TYPE
        or not isinstance(document.get("predicate"), dict)
    ):
        kind = f"the SLSA verification summary predicate v1 ({SUMMARY_PREDICATE_TYPE})"
        return [f"not an in-toto Statement v1 with {kind}"]
    predicate = document["predicate"]
    problems = []
    verifier = predicate.get("verifier")
    if not isinstance(verifier, dict) or verifier.get("id") != VERIFIER_ID:
        problems.append(f"its verifier is not {VERIFIER_ID} (ledger gate)")
    problems += _subject_problems(document.get("subject"), campaign_id, manifest_sha256)
    policy = predicate.get("policy")
    digest = policy.get("digest") if isinstance(policy, dict) else None
    stated = digest.get("sha256") if isinstance(digest, dict) else None
    if stated != policy_sha256:
        problems.append(
            f"policy digest {_said(stated)}, expected {policy_sha256}: another policy decided"
        )
    problems += _result_problems(predicate)
    return problems


def _subject_problems(subjects: Any, campaign_id: str, manifest_sha256: str) -> list[str]:
    if not isinstance(subjects, list) or len(subjects) != 1 or not isinstance(subjects[0], dict):
        return ["its subject is not the one manifest.json of a campaign"]
    subject = subjects[0]
    digest = subject.get("digest")
    stated = digest.get("sha256") if isinstance(digest, dict) else None
    problems = []
    if subject.get("name") != f"{campaign_id}/manifest.json":
        problems.append(
            f"its subject is {_said(subject.get('name'))}, not {campaign_id}/manifest.json"
        )
    if stated != manifest_sha256:
        problems.append(
            f"its subject's sha256 is {_said(stated)}, the campaign's manifest.json is "
            f"{manifest_sha256}: it attests other evidence"
        )
    return problems


def _result_problems(predicate: dict[str, Any]) -> list[str]:
    result = predicate.get("verificationResult")
    levels = predicate.get("verifiedLevels")
    gate = predicate.get(GATE_FIELD)
    unmet = gate.get("rules_unmet") if isinstance(gate, dict) else None
    if result != "PASSED":
        rules = [u.get("rule") for u in unmet or [] if isinstance(u, dict)]
        named = f" (unmet: {', '.join(str(r) for r in rules)})" if rules else ""
        return [f"the gate did not pass the campaign: verificationResult {_said(result)}{named}"]
    if not isinstance(levels, list) or not levels or "FAILED" in levels:
        return [f"verificationResult PASSED with verifiedLevels {_said(levels)}"]
    if unmet:
        return ["verificationResult PASSED with rules unmet"]
    return []


def _said(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def is_sha256(text: str) -> bool:
    """Whether ``text`` is a lowercase hex SHA-256 digest."""
    return _HEX64.fullmatch(text) is not None
