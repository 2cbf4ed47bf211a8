"""The in-toto Statement v1 of a published campaign (``statement.intoto.json``).

Subjects are every published artifact and ``manifest.json``, each with its sha256; the
predicate names the campaign, its decision, and the sanitizer rules that made it public.
"""

from __future__ import annotations

from typing import Any

import orjson

from ledger.formats import jsonio

STATEMENT_NAME = "statement.intoto.json"
BUNDLE_NAME = "statement.sigstore.json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://anvil-ledger.dev/publication/v1"


def statement(subjects: list[tuple[str, str]], predicate: dict[str, Any]) -> dict[str, Any]:
    """A Statement over (name, sha256) subjects, sorted by name."""
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": n, "digest": {"sha256": d}} for n, d in sorted(subjects)],
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    }


def subjects_of(document: Any) -> dict[str, str] | None:
    """name -> sha256 of a statement's subjects; None when it is not a Statement v1."""
    if not isinstance(document, dict) or document.get("_type") != STATEMENT_TYPE:
        return None
    found: dict[str, str] = {}
    for subject in document.get("subject") or []:
        if not isinstance(subject, dict):
            return None
        name, digest = subject.get("name"), (subject.get("digest") or {}).get("sha256")
        if not isinstance(name, str) or not isinstance(digest, str):
            return None
        found[name] = digest
    return found


def with_subjects(document: Any, subjects: list[tuple[str, str]]) -> bytes:
    """A statement's bytes with new subjects, keeping its predicate."""
    predicate = document.get("predicate", {}) if isinstance(document, dict) else {}
    return jsonio.dumps_deterministic(statement(subjects, predicate))


def predicate_mismatches(document: Any, campaign_id: str, summary: Any) -> list[tuple[str, str]]:
    """(JSON pointer, why) where a statement's predicate says other than its campaign: the
    campaign id, and the decision its ``summary.json`` states (``summary``: that document,
    or None when there is none). The statement is what is signed and what an auditor reads
    first: a decision changed in it alone would be signed as the campaign's."""
    predicate = document.get("predicate") if isinstance(document, dict) else None
    if not isinstance(predicate, dict):
        return [("/predicate", "no predicate naming the campaign and its decision")]
    found = []
    if predicate.get("campaign_id") != campaign_id:
        found.append(
            (
                "/predicate/campaign_id",
                f"names campaign {_said(predicate.get('campaign_id'))}, the folder {campaign_id!r}",
            )
        )
    decision = summary.get("decision") if isinstance(summary, dict) else None
    decision = decision if isinstance(decision, dict) else None  # as publish states it
    stated = predicate.get("decision")
    if stated != decision:
        found.append(("/predicate/decision", _decision_difference(stated, decision)))
    return found


def _decision_difference(stated: Any, decision: Any) -> str:
    if not isinstance(stated, dict) or not isinstance(decision, dict):
        return f"states {_said(stated)}; summary.json's decision: {_said(decision)}"
    differ = {k for k in set(stated) | set(decision) if stated.get(k, ...) != decision.get(k, ...)}
    # The claim a reader acts on first, when it is among them.
    keys = sorted(differ, key=lambda k: (k != "promotion_authorized", k))
    key = keys[0]
    more = f" (and {len(keys) - 1} more)" if len(keys) > 1 else ""
    return (
        f"decision {key!r} states {_said(stated.get(key, ...))}; summary.json's decision: "
        f"{_said(decision.get(key, ...))}{more}"
    )


def _said(value: Any) -> str:
    if value is ...:
        return "nothing"
    shown = orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    return shown if len(shown) <= 80 else shown[:77] + "..."
