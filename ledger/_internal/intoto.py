"""The in-toto Statement v1 of a published campaign (``statement.intoto.json``).

Subjects are every published artifact and ``manifest.json``, each with its sha256; the
predicate names the campaign, its decision, and the sanitizer rules that made it public.
"""

from __future__ import annotations

from typing import Any

from ledger._internal import jsonio

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
