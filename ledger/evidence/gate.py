"""Gate and decision consistency: the floor every summary must stand on.

A gate's verdict must agree with its own counts, and a decision may authorize promotion only
on a complete campaign, without a no-promotion label, and with A/B comparison and GPU
reserve artifacts in its manifest. The full promotion policy builds on this floor; these
checks hold whatever policy is configured, however a summary was written.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from ledger.findings import Issue
from ledger.formats.models import BenchmarkDecisionSummary, Gate, OsComparison, Reference

__all__ = [
    "AB_COMPARISON_KIND",
    "BLOCKING_LABELS",
    "RATE_TOLERANCE",
    "RESERVE_KIND",
    "check_gate",
    "check_promotion_evidence",
    "check_summary",
    "headline_sources",
]

RATE_TOLERANCE = 1e-9
"""Relative tolerance when a stated rate is compared with its counts."""

BLOCKING_LABELS = frozenset({"no-promotion", "rejected"})
"""Decision labels that contradict ``promotion_authorized: true``."""

AB_COMPARISON_KIND = "ab-comparison"
"""Schema kind of the matched A/B comparison a promotion requires."""

RESERVE_KIND = "gpu-reserve"
"""Schema kind of the post-workload GPU reserve snapshot a promotion requires."""


def _rate_matches(numerator: int, denominator: int, stated: float) -> bool:
    if denominator == 0:
        return False
    return math.isclose(numerator / denominator, stated, rel_tol=RATE_TOLERANCE, abs_tol=1e-12)


def check_gate(gate: Gate, pointer: str) -> list[Issue]:
    """Checks one gate's verdict against its own counts.

    Args:
        gate: the gate.
        pointer: its JSON pointer in the summary (findings point inside it).
    """
    return [
        *_checks_issues(gate, pointer),
        *_tally_issues(gate, pointer),
        *_summary_issues(gate, pointer),
    ]


def _checks_issues(gate: Gate, pointer: str) -> list[Issue]:
    """The verdict against the checks that passed."""
    found: list[Issue] = []
    name = gate.label
    if gate.checks is not None and gate.checks_passed is not None:
        if gate.checks_passed > gate.checks:
            found.append(
                Issue(
                    "gate-inconsistent",
                    f"{pointer}/checks_passed",
                    f"gate {name!r}: {gate.checks_passed} of {gate.checks} checks passed",
                )
            )
        elif gate.passed is True and gate.checks_passed < gate.checks:
            found.append(
                Issue(
                    "gate-inconsistent",
                    f"{pointer}/passed",
                    f"gate {name!r} passed with {gate.checks_passed}/{gate.checks} checks",
                )
            )
        elif gate.passed is False and gate.checks_passed == gate.checks:
            found.append(
                Issue(
                    "gate-failed-all-passed",
                    f"{pointer}/passed",
                    f"gate {name!r} failed although {gate.checks_passed}/{gate.checks} "
                    "checks passed; its failure reason is not in its counts",
                )
            )
    return found


def _tally_issues(gate: Gate, pointer: str) -> list[Issue]:
    """Attempts, status and requests, each against its own counts."""
    found: list[Issue] = []
    name = gate.label
    if (
        gate.attempts is not None
        and gate.passed_attempts is not None
        and gate.passed_attempts > gate.attempts
    ):
        found.append(
            Issue(
                "gate-inconsistent",
                f"{pointer}/passed_attempts",
                f"gate {name!r}: {gate.passed_attempts} of {gate.attempts} attempts passed",
            )
        )
    if (
        gate.status is not None
        and gate.passed is not None
        and ((gate.status == "passed") != gate.passed)
    ):
        found.append(
            Issue(
                "gate-inconsistent",
                f"{pointer}/status",
                f"gate {name!r}: status {gate.status!r} but passed is {gate.passed}",
            )
        )
    if (
        gate.requests is not None
        and gate.completed is not None
        and gate.failed is not None
        and gate.completed + gate.failed != gate.requests
    ):
        found.append(
            Issue(
                "gate-count-mismatch",
                f"{pointer}/requests",
                f"gate {name!r}: completed {gate.completed} + failed {gate.failed} "
                f"!= requests {gate.requests}",
            )
        )
    return found


def _summary_issues(gate: Gate, pointer: str) -> list[Issue]:
    """A quality summary's rates against their numerators and denominators."""
    found: list[Issue] = []
    name = gate.label
    summary = gate.summary
    if summary is not None:
        pairs = (
            (
                "passed",
                summary.passed,
                "attempted",
                summary.attempted,
                "pass_rate",
                summary.pass_rate,
            ),
            (
                "resolved",
                summary.resolved,
                "graded",
                summary.graded,
                "resolve_rate",
                summary.resolve_rate,
            ),
        )
        for num_name, num, den_name, den, rate_name, rate in pairs:
            if num is None or den is None:
                continue
            if num > den:
                found.append(
                    Issue(
                        "gate-inconsistent",
                        f"{pointer}/summary/{num_name}",
                        f"gate {name!r}: {num_name} {num} > {den_name} {den}",
                    )
                )
            elif rate is not None and not _rate_matches(num, den, rate):
                found.append(
                    Issue(
                        "gate-rate-mismatch",
                        f"{pointer}/summary/{rate_name}",
                        f"gate {name!r}: {rate_name} {rate} != {num_name}/{den_name} = {num}/{den}",
                    )
                )
    return found


def _source_path(source: str | Reference | None) -> str | None:
    if source is None:
        return None
    return source if isinstance(source, str) else source.path


def headline_sources(comparison: OsComparison, base: str) -> list[tuple[str, str]]:
    """Returns (pointer, path) of every artifact a comparison's values come from."""
    found: list[tuple[str, str]] = []

    def add(pointer: str, source: str | Reference | None) -> None:
        path = _source_path(source)
        if path is not None:
            found.append((pointer, path))

    for index, row in enumerate(comparison.rows):
        add(f"{base}/rows/{index}/windows_source", row.windows_source)
        add(f"{base}/rows/{index}/linux_source", row.linux_source)
        for j, ref in enumerate(row.sources or ()):
            add(f"{base}/rows/{index}/sources/{j}", ref)
    if comparison.endurance is not None:
        endurance = comparison.endurance
        add(f"{base}/endurance/windows_source", endurance.windows_source)
        add(f"{base}/endurance/linux_source", endurance.linux_source)
        for j, ref in enumerate(endurance.sources or ()):
            add(f"{base}/endurance/sources/{j}", ref)
    return found


def check_summary(summary: BenchmarkDecisionSummary) -> list[Issue]:
    """Checks a summary's gates and decision against themselves (no manifest needed)."""
    found: list[Issue] = []
    ineligible: set[str] = set()
    for index, gate in enumerate(summary.gates or ()):
        found.extend(check_gate(gate, f"/gates/{index}"))
        if gate.performance_eligible is False and gate.artifact is not None:
            ineligible.add(gate.artifact)
    if isinstance(summary.headline_results, OsComparison):
        for pointer, path in headline_sources(summary.headline_results, "/headline_results"):
            if path in ineligible:
                found.append(
                    Issue(
                        "ineligible-headline",
                        pointer,
                        f"headline value drawn from {path!r}, a population marked "
                        "performance_eligible: false",
                    )
                )
    decision = summary.decision
    identity_flag = summary.identity_promotion_authorized
    if identity_flag is not None and identity_flag != decision.promotion_authorized:
        found.append(
            Issue(
                "decision-inconsistent",
                "/identity/promotion_authorized",
                f"identity says promotion_authorized {identity_flag}, decision says "
                f"{decision.promotion_authorized}",
            )
        )
    if decision.promotion_authorized:
        if not summary.complete:
            found.append(
                Issue(
                    "promotion-incomplete",
                    "/decision/promotion_authorized",
                    "promotion authorized but the campaign is not complete",
                )
            )
        blocking = sorted(BLOCKING_LABELS.intersection(decision.decision_labels or ()))
        if blocking:
            found.append(
                Issue(
                    "promotion-contradicts-label",
                    "/decision/promotion_authorized",
                    f"promotion authorized but labelled {', '.join(blocking)}",
                )
            )
    return found


def check_promotion_evidence(
    summary: BenchmarkDecisionSummary, artifact_kinds: Iterable[str]
) -> list[Issue]:
    """Checks that a summary authorizing promotion has A/B and reserve artifacts.

    Args:
        summary: the summary.
        artifact_kinds: the schema kinds of the artifacts its manifest lists (empty when
            the summary stands alone).
    """
    if not summary.decision.promotion_authorized:
        return []
    kinds = set(artifact_kinds)
    found: list[Issue] = []
    if AB_COMPARISON_KIND not in kinds:
        found.append(
            Issue(
                "promotion-without-ab",
                "/decision/promotion_authorized",
                f"promotion authorized but the manifest lists no {AB_COMPARISON_KIND} "
                "artifact (a matched A/B comparison)",
            )
        )
    if RESERVE_KIND not in kinds:
        found.append(
            Issue(
                "promotion-without-reserve",
                "/decision/promotion_authorized",
                f"promotion authorized but the manifest lists no {RESERVE_KIND} "
                "artifact (post-workload free GPU memory)",
            )
        )
    return found
