"""Checks of one JSON document on its own: schema, structure, arithmetic, gates, references."""

from __future__ import annotations

import math
from typing import Any

import attrs

from ledger import gate, schema
from ledger._internal.findings import Issue
from ledger._internal.jsonio import json_pointer
from ledger.errors import SchemaError
from ledger.hashing import is_hex_digest
from ledger.models import BenchmarkDecisionSummary, OsComparison, model_for, structure

CHANGE_TOLERANCE = 1e-9
"""Relative tolerance of a recomputed change_percent."""


@attrs.frozen
class FoundReference:
    """A ``{path, sha256}`` object met inside a document."""

    pointer: str
    """Where it stands in the document."""
    path: str
    """The path it names."""
    sha256: str
    """The digest it claims."""


@attrs.frozen
class DocumentResult:
    """What one document yields for the campaign-level checks."""

    schema: str | None
    """Its ``schema`` field, when that is a string (known or not)."""
    issues: tuple[Issue, ...]
    """Findings about the document alone."""
    references: tuple[FoundReference, ...] = ()
    """Every reference it holds (none for the manifest, whose entries are checked apart)."""
    summary: BenchmarkDecisionSummary | None = None
    """The structured summary, for the checks that need the manifest."""


def change_percent(baseline: float, candidate: float) -> float | None:
    """``(candidate - baseline) / baseline * 100``; None when the baseline is zero."""
    if baseline == 0:
        return None
    return (candidate - baseline) / baseline * 100


def _change_issue(
    pointer: str, baseline: float, candidate: float, stated: float | None
) -> Issue | None:
    expected = change_percent(baseline, candidate)
    if expected is None or stated is None:
        if expected is stated:
            return None
    elif math.isclose(stated, expected, rel_tol=CHANGE_TOLERANCE, abs_tol=1e-12):
        return None
    return Issue(
        "derived-mismatch",
        pointer,
        f"change_percent {stated} differs from (linux - windows) / windows * 100 = "
        f"{expected} (windows {baseline}, linux {candidate})",
    )


def check_comparison(comparison: OsComparison, base: str) -> list[Issue]:
    """Recomputes every change_percent of an OS comparison from its own row."""
    found: list[Issue] = []
    for index, row in enumerate(comparison.rows):
        for name in sorted(row.metrics):
            metric = row.metrics[name]
            issue = _change_issue(
                f"{base}/rows/{index}/metrics/{json_pointer([name])[1:]}/change_percent",
                metric.windows,
                metric.linux,
                metric.change_percent,
            )
            if issue is not None:
                found.append(issue)
    endurance = comparison.endurance
    if endurance is not None:
        issue = _change_issue(
            f"{base}/endurance/decode_change_percent",
            endurance.decode_windows,
            endurance.decode_linux,
            endurance.decode_change_percent,
        )
        if issue is not None:
            found.append(issue)
    return found


def find_references(document: Any) -> list[FoundReference]:
    """Returns every ``{path, sha256}`` object in a document, in document order."""
    found: list[FoundReference] = []

    def walk(value: Any, path: list[str | int]) -> None:
        if isinstance(value, dict):
            ref_path, digest = value.get("path"), value.get("sha256")
            if isinstance(ref_path, str) and is_hex_digest(digest):
                found.append(FoundReference(json_pointer(path), ref_path, str(digest)))
            for key, child in value.items():
                if isinstance(child, dict | list):
                    walk(child, [*path, key])
        elif isinstance(value, list):
            for index, child in enumerate(value):
                if isinstance(child, dict | list):
                    walk(child, [*path, index])

    walk(document, [])
    return found


def check_document(document: Any, *, may_reference: bool = True) -> DocumentResult:
    """Runs every single-document check.

    Args:
        document: the strictly parsed JSON.
        may_reference: whether the raw text mentioned ``"sha256"`` at all (a cheap filter
            that spares walking documents that cannot hold a reference).
    """
    try:
        schema_id = schema.schema_of(document)
        schema_issues = schema.issues(document, schema_id)
    except SchemaError as e:
        declared = document.get("schema") if isinstance(document, dict) else None
        declared = declared if isinstance(declared, str) else None
        return DocumentResult(declared, (Issue(e.code, e.pointer, str(e)),))
    name = str(schema_id)
    found = [Issue("schema-invalid", i.pointer, f"{i.message} ({name})") for i in schema_issues]
    summary: BenchmarkDecisionSummary | None = None
    model = model_for(name)
    if not found and model is not None:
        try:
            structured = structure(document, model)
        except SchemaError as e:
            found.append(Issue("schema-invalid", e.pointer, str(e)))
        else:
            if isinstance(structured, BenchmarkDecisionSummary):
                summary = structured
                found.extend(gate.check_summary(structured))
                if isinstance(structured.headline_results, OsComparison):
                    found.extend(check_comparison(structured.headline_results, "/headline_results"))
            elif isinstance(structured, OsComparison):
                found.extend(check_comparison(structured, ""))
    is_manifest = schema_id.kind == "manifest"
    references = () if is_manifest or not may_reference else tuple(find_references(document))
    return DocumentResult(name, tuple(found), references, summary)
