"""Checks of one JSON document on its own: schema, structure, arithmetic, gates, references."""

from __future__ import annotations

import math
from typing import Any

import attrs

from ledger.errors import SchemaError
from ledger.evidence import gate, runs
from ledger.findings import Issue
from ledger.formats import schema
from ledger.formats.jsonio import json_pointer
from ledger.formats.models import BenchmarkDecisionSummary, structure
from ledger.hashing import is_hex_digest
from ledger.measures import arrivals, functional

__all__ = [
    "CHANGE_TOLERANCE",
    "DocumentResult",
    "FoundReference",
    "change_percent",
    "check_ab_comparison",
    "check_comparison",
    "check_document",
    "find_references",
    "may_reference",
]

_OWNED = frozenset(
    {
        "cell-run",
        "gpu-reserve",
        "gpu-telemetry",
        "container-restoration",
        "startup-attempt",
        "functional-gate",
    }
)
"""The kinds a run manifest lists under an arm and stage."""

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
    campaign_id: str | None = None
    """Its ``campaign_id`` field, when that is a string: the campaign it says it belongs to."""
    sweep: runs.SweepCell | None = None
    """A sweep stage's cell, for the check of its rates against its probes."""
    owner: runs.Owner | None = None
    """The arm, stage and cell a cell run or evidence stage says it is."""
    valid: bool = False
    """Whether it meets the schema it declares (what :func:`ledger.formats.schema.read_document`
    asks of a document)."""


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


def check_comparison(comparison: dict[str, Any], base: str) -> list[Issue]:
    """Recomputes every change_percent of a schema-valid OS comparison from its own row.

    Works on the validated document rather than the model: verify runs it on every
    comparison artifact, and structuring thousands of rows costs more than the check.
    """
    found: list[Issue] = []
    isclose = math.isclose
    for index, row in enumerate(comparison["rows"]):
        for name, metric in row["metrics"].items():
            windows, linux, stated = metric["windows"], metric["linux"], metric["change_percent"]
            # Inline fast path: this loop runs for every metric of every comparison verified.
            if (
                windows != 0
                and stated is not None
                and isclose(
                    stated,
                    (linux - windows) / windows * 100,
                    rel_tol=CHANGE_TOLERANCE,
                    abs_tol=1e-12,
                )
            ):
                continue
            issue = _change_issue(
                f"{base}/rows/{index}/metrics{json_pointer([name])}/change_percent",
                windows,
                linux,
                stated,
            )
            if issue is not None:
                found.append(issue)
    endurance = comparison.get("endurance")
    if endurance is not None:
        issue = _change_issue(
            f"{base}/endurance/decode_change_percent",
            endurance["decode_windows"],
            endurance["decode_linux"],
            endurance["decode_change_percent"],
        )
        if issue is not None:
            found.append(issue)
    return found


def check_ab_comparison(comparison: dict[str, Any]) -> list[Issue]:
    """Recomputes every change_percent of a schema-valid A/B comparison from its own row."""
    found: list[Issue] = []
    for index, row in enumerate(comparison["rows"]):
        for name, metric in row["metrics"].items():
            baseline, candidate = metric["baseline"], metric["candidate"]
            expected = change_percent(baseline, candidate)
            stated = metric["change_percent"]
            if expected is None or stated is None:
                if expected is stated:
                    continue
            elif math.isclose(stated, expected, rel_tol=CHANGE_TOLERANCE, abs_tol=1e-12):
                continue
            found.append(
                Issue(
                    "derived-mismatch",
                    f"/rows/{index}/metrics{json_pointer([name])}/change_percent",
                    f"change_percent {stated} differs from (candidate - baseline) / baseline "
                    f"* 100 = {expected} (baseline {baseline}, candidate {candidate})",
                )
            )
    return found


def may_reference(data: bytes) -> bool:
    """Whether a JSON text can hold a ``{path, sha256}`` object: only if it spells the key
    ``"sha256"``, or escapes a character (and could spell it another way). A cheap filter
    that spares walking documents that cannot hold a reference."""
    return b'"sha256"' in data or b"\\u" in data


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
    sweep: runs.SweepCell | None = None
    if not found and schema_id.kind == "os-comparison":
        found.extend(check_comparison(document, ""))
    elif not found and schema_id.kind == "benchmark-decision-summary":
        try:
            summary = structure(document, BenchmarkDecisionSummary)
        except SchemaError as e:
            found.append(Issue("schema-invalid", e.pointer, str(e)))
        else:
            found.extend(gate.check_summary(summary))
            headline = document.get("headline_results")
            if isinstance(headline, dict):
                found.extend(check_comparison(headline, "/headline_results"))
    elif not found and schema_id.kind == "ab-comparison":
        found.extend(check_ab_comparison(document))
    elif not found and schema_id.kind == "cell-run" and schema_id.version == 1:
        # A v2 cell run's records are in its parts: read where its folder is known.
        found.extend(runs.check_cell_run(document))
        if document["stage"]["kind"] == "sweep":
            sweep = runs.sweep_cell(document, arrivals.completed_rate(document["requests"]))
    elif not found and schema_id.kind == "run-manifest":
        found.extend(runs.check_run_manifest(document))
    elif not found and schema_id.kind == "functional-gate":
        found.extend(functional.check_functional_gate(document))
    is_manifest = schema_id.kind == "manifest"
    references = () if is_manifest or not may_reference else tuple(find_references(document))
    campaign = document.get("campaign_id") if isinstance(document, dict) else None
    return DocumentResult(
        name,
        tuple(found),
        references,
        summary,
        campaign if isinstance(campaign, str) else None,
        sweep,
        runs.owner_of(document) if schema_id.kind in _OWNED else None,
        not schema_issues,
    )
