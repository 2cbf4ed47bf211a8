"""``ledger decide``: a campaign's decision summary, written from its evidence under a policy.

Gates come from the stage artifacts, headline results from the derived A/B comparison,
failures and limitations from the data, and the decision from the policy's evaluation:
``promotion_authorized`` is true only when every rule holds, an approval included.

An approval names the sha256 of the exact summary it approves, so the summary that would
authorize promotion is built first; when an allowed approver has signed its digest it is
written, otherwise the summary says promotion is not authorized and names that digest as
the one to approve. The same evidence and policy always give the same bytes.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import attrs

from ledger.errors import Error, UsageError
from ledger.evidence import manifest
from ledger.formats import jsonio
from ledger.formats.outputs import Changes
from ledger.formats.schema import document_bytes
from ledger.promotion._evaluation import (
    APPROVALS_FOLDER,
    Evaluation,
    Evidence,
    GateResult,
    Unmet,
    check_approvals,
    evaluate,
    load_evidence,
)
from ledger.promotion.policy import Policy

SUMMARY_SCHEMA = "anvil-serving.benchmark-decision-summary/v1"
POLICY_NAME = "policy.json"
_STATISTICS = [
    "per-request TTFT, decode rate, E2E and effective prefill; medians per cell",
    "change of each median with a seeded bootstrap 95% interval (ledger derive)",
    "failed requests counted and excluded from timing statistics",
]


class DecideError(Error):
    """The folder cannot be decided on."""


@attrs.frozen
class Decided:
    """What ``ledger decide`` wrote."""

    path: Path
    summary: dict[str, Any]
    evaluation: Evaluation
    proposal_sha256: str | None
    """Digest of the summary that would authorize promotion, when only approval is missing."""


def _number(value: float) -> str:
    return f"{value:.2f}"


def _headlines(comparison: dict[str, Any] | None) -> list[str]:
    if comparison is None:
        return ["No A/B comparison: no performance claim."]
    baseline = comparison["baseline"]["arm"]
    candidate = comparison["candidate"]["arm"]
    lines = []
    for row in comparison["rows"]:
        parts = []
        for name, metric in sorted(row["metrics"].items()):
            a, b = metric.get("baseline"), metric.get("candidate")
            change = metric.get("change_percent")
            if a is None or b is None or change is None:
                continue
            text = f"{name} {_number(a)} -> {_number(b)} ({change:+.1f}%"
            interval = metric.get("change_ci95")
            if interval is not None:
                text += f", 95% CI {interval[0]:+.1f}% to {interval[1]:+.1f}%"
            parts.append(text + ")")
        lines.append(
            f"{row['stage']}/{row['cell']} ({row['label']}), {candidate} vs {baseline}: "
            + "; ".join(parts)
        )
    return lines


def headlines_of(evidence: Evidence, path: str | None) -> list[str]:
    """The headline results a summary states for the comparison at ``path``."""
    return _headlines(evidence.comparison(path))


def _telemetry_notes(evidence: Evidence, arm: str) -> list[str]:
    found = evidence.stages.get((arm, "telemetry"))
    if found is None:
        return []
    _path, document = found
    if not document["available"]:
        error = next((s["nvml"]["error"] for s in document["samples"]), None)
        return [f"GPU telemetry unavailable during {document['during']}: {error}"]
    notes = []
    for card in document["summary"]:
        for reason, count in sorted(card["throttle_seen"].items()):
            if reason == "gpu-idle":
                continue
            notes.append(
                f"card {card['index']}: clocks limited by {reason} in {count} of "
                f"{card['samples']} telemetry samples during {document['during']}"
            )
    return notes


def match_label(evaluation: Evaluation) -> str:
    """The evidence label of a decision's A/B comparison: ``matched-ab`` where it counts
    as matched under the policy, else ``descriptive-only``."""
    matched = not any(u.rule == "matched-ab" for u in evaluation.unmet)
    return "matched-ab" if matched else "descriptive-only"


def _labels(
    evaluation: Evaluation, evidence: Evidence, arm: str, comparison: dict[str, Any] | None
) -> tuple[list[str], list[str]]:
    gates = evaluation.gates
    kinds = {g.kind for g in gates}
    evidence_labels = []
    if _simulated(evidence, arm):
        evidence_labels.append("simulated-endpoint")
    for kind in ("capacity", "endurance"):
        if kind in kinds:
            evidence_labels.append(f"local-{kind}")
    if comparison is not None:
        evidence_labels.append(match_label(evaluation))
    if any(g.kind == "startup" and g.measured for g in gates):
        evidence_labels.append("managed-startup")
        if kinds == {"startup"}:
            evidence_labels.append("compatibility-only")
    if any(g.kind == "reserve" and g.measured for g in gates):
        evidence_labels.append("gpu-reserve")
    if (arm, "telemetry") in evidence.stages:
        evidence_labels.append("gpu-telemetry")
    if any(g.kind == "restoration" and g.passed for g in gates):
        evidence_labels.append("exact-restoration")
    failed = any(not g.passed and g.measured for g in gates)
    complete = not any(u.rule == "complete" for u in evaluation.unmet)
    if evaluation.allowed:
        return evidence_labels, ["verified", "promoted"]
    decision_labels = []
    if failed:
        decision_labels.append("rejected")
    elif complete and gates and not evidence.problems:
        # An artifact that cannot be read (a truncated cell) is evidence nobody verified.
        decision_labels.extend(["verified", "challenger"])
    decision_labels.append("no-promotion")
    return evidence_labels, decision_labels


def _simulated(evidence: Evidence, arm: str) -> bool:
    return any(d["endpoint"]["simulated"] for _, d in evidence.cells.get(arm, ()))


def _failures(gates: tuple[GateResult, ...]) -> list[str]:
    return [f"{g.arm} {g.stage}: {g.detail}" for g in gates if not g.passed]


def _imported_failures(evidence: Evidence, arm: str) -> list[str]:
    # An import has no gates: its failed requests are its failures.
    out = []
    for _, document in evidence.imported.get(arm, ()):
        failed = sum(1 for r in document["requests"] if not r["ok"])
        if failed:
            out.append(
                f"{arm} {document['stage']}/{document['cell']['id']}: {failed} of "
                f"{len(document['requests'])} requests failed ({document['source']['tool']} "
                "recorded them)"
            )
    return out


def _limitations(
    evidence: Evidence, arm: str, comparison: dict[str, Any] | None, unmet: tuple[Unmet, ...]
) -> list[str]:
    found = []
    if _simulated(evidence, arm):
        found.append(
            "Measured on the embedded simulated endpoint: a timing model, not a serving "
            "engine on a GPU."
        )
    if comparison is not None:
        found.extend(comparison["limitations"])
        if any(u.rule == "matched-ab" for u in unmet):
            found.append("The A/B comparison is not matched under the policy: descriptive only.")
    source = _sources(evidence, arm)
    if source is not None and not evidence.cells.get(arm):
        found.append(
            f"Imported from {source} result files: ledger did not send these requests, and "
            "they carry no functional, quality, GPU or container evidence."
        )
    found.extend(_telemetry_notes(evidence, arm))
    return list(dict.fromkeys(found))


def _sources(evidence: Evidence, arm: str) -> str | None:
    """The tools an arm's imported runs come from ("vllm 0.15.0"); None for none."""
    names = []
    for _, document in evidence.imported.get(arm, ()):
        source = document["source"]
        names.append(" ".join(str(p) for p in (source["tool"], source.get("version")) if p))
    return ", ".join(dict.fromkeys(names)) or None


def _identity(evidence: Evidence, arm: str) -> dict[str, Any]:
    cells = evidence.cells.get(arm)
    if not cells:
        source = _sources(evidence, arm)
        return {"arm": arm} if source is None else {"arm": arm, "imported_from": source}
    document = cells[0][1]
    identity = {k: v for k, v in document["identity"].items() if k != "schema"}
    return {"arm": arm, "served_model": document["endpoint"]["model"], **identity}


def _measurement(evidence: Evidence, arm: str, measured: int) -> dict[str, Any]:
    source = _sources(evidence, arm)
    if source is not None and not evidence.cells.get(arm):
        requests = sum(len(d["requests"]) for _, d in evidence.imported[arm])
        return {
            "path": f"imported from {source}",
            "warm_cold_state": "as the source tool ran it (ledger did not send these requests)",
            "sample_count": requests,
            "statistics": _STATISTICS,
        }
    return {
        "path": "simulated endpoint" if _simulated(evidence, arm) else "online-direct",
        "warm_cold_state": "warm server; warm-up requests recorded and excluded",
        "sample_count": measured,
        "statistics": _STATISTICS,
    }


def _evidence_paths(evidence: Evidence, arm: str, evaluation: Evaluation) -> list[str]:
    paths = [p for g in evaluation.gates for p in g.artifacts]
    telemetry = evidence.stages.get((arm, "telemetry"))
    if telemetry is not None:
        paths.append(telemetry[0])
    paths.extend(p for p, _ in evidence.imported.get(arm, ()))
    if evaluation.comparison is not None:
        paths.append(evaluation.comparison)
    return list(dict.fromkeys(paths))


def _next_gate(evidence: Evidence, evaluation: Evaluation) -> str:
    startup = evidence.stages.get((evaluation.candidate or "", "startup"))
    if startup is not None and startup[1]["outcome"] != "ready" and startup[1].get("next_gate"):
        # A server that never became ready: what its own attempt says must come first.
        return str(startup[1]["next_gate"])
    first = evaluation.unmet[0]
    return f"{first.rule}: {first.reason}"


def build_summary(
    evidence: Evidence, evaluation: Evaluation, *, authorized: bool
) -> dict[str, Any]:
    """The summary for an evaluation (``authorized`` only when every rule holds)."""
    arm = evaluation.candidate or "unknown"
    comparison = evidence.comparison(evaluation.comparison)
    run = evidence.run_manifest or {}
    evidence_labels, decision_labels = _labels(evaluation, evidence, arm, comparison)
    measured = sum(g.requests or 0 for g in evaluation.gates)
    policy = evaluation.policy
    decision: dict[str, Any] = {
        "evidence_labels": evidence_labels,
        "decision_labels": decision_labels,
        "promotion_authorized": authorized,
        "candidate": arm,
        "policy": {"name": policy.name, "sha256": policy.sha256},
        "unmet": [{"rule": u.rule, "reason": u.reason} for u in evaluation.unmet],
    }
    if not evaluation.allowed:
        # A promotion leaves nothing to follow up; anything else names what comes next.
        decision["next_gate"] = _next_gate(evidence, evaluation)
    workload: dict[str, Any] = (
        {"plan": "run-plan.json", "manifest": "workload-manifest.json"}
        if evidence.run_manifest is not None
        else {}
    )
    if evidence.imported:
        workload["imported"] = sorted(p for runs in evidence.imported.values() for p, _ in runs)
    if comparison is not None:
        workload.update(
            baseline=comparison["baseline"]["arm"], candidate=comparison["candidate"]["arm"]
        )
    return {
        "schema": SUMMARY_SCHEMA,
        "campaign_id": evidence.campaign_id,
        "complete": bool(run.get("complete")),
        "identity": _identity(evidence, arm),
        "workload": workload,
        "measurement": _measurement(evidence, arm, measured),
        "gates": [g.to_json() for g in evaluation.gates],
        "headline_results": headlines_of(evidence, evaluation.comparison),
        "failures": _failures(evaluation.gates) + _imported_failures(evidence, arm),
        "limitations": _limitations(evidence, arm, comparison, evaluation.unmet),
        "decision": decision,
        "evidence": _evidence_paths(evidence, arm, evaluation),
    }


def decide(
    folder: str | Path,
    policy: Policy,
    *,
    candidate: str | None = None,
    reseal_after_review: bool = False,
) -> Decided:
    """Evaluates ``policy`` on a campaign folder, writes ``summary.json`` and ``policy.json``,
    and re-seals the folder, all at once or not at all.

    Raises:
        DecideError: not a raw campaign.
        UsageError: ``candidate`` is not one of its arms.
        SealBroken: the folder no longer matches its seal.
        SchemaError: the summary would not be valid (nothing is written).
    """
    root = Path(folder)
    evidence = load_evidence(root)
    if evidence.run_manifest is None and not evidence.imported:
        raise DecideError(
            f"{root}: not a campaign folder written by ledger run or ledger import (no "
            "readable run-manifest.json, no imported run)"
        )
    if candidate is not None and candidate not in evidence.arms:
        # A mistyped argument (exit 2), as gate says of it.
        raise UsageError(
            f"{root}: no arm named {candidate!r} (arms: {', '.join(sorted(evidence.arms))})"
        )
    review = manifest.check_seal(root, "decide", reseal_after_review=reseal_after_review)
    evaluation = evaluate(evidence, policy, candidate=candidate)
    proposal_digest = None
    if evaluation.allowed and policy.approval_required:
        proposal = build_summary(evidence, evaluation, authorized=True)
        proposal_bytes = jsonio.dumps_deterministic(proposal)
        proposal_digest = hashlib.sha256(proposal_bytes).hexdigest()
        assert evaluation.candidate is not None
        approval, reasons = check_approvals(evidence, policy, evaluation.candidate, proposal_bytes)
        if approval is None:
            evaluation = attrs.evolve(
                evaluation, unmet=tuple(Unmet("approval", r) for r in reasons)
            )
        else:
            evaluation = attrs.evolve(evaluation, approval=approval)
    summary = build_summary(evidence, evaluation, authorized=evaluation.allowed)
    # Both validated before either is written: a summary that breaks its schema leaves the
    # campaign as it was.
    files = {
        POLICY_NAME: document_bytes(policy.to_json()),
        manifest.SUMMARY_NAME: document_bytes(summary),
    }
    manifest.write_sealed(root, files, command="decide", checked=(review,))
    return Decided(root / manifest.SUMMARY_NAME, summary, evaluation, proposal_digest)


def proposal(
    folder: str | Path, policy: Policy, *, candidate: str | None = None
) -> tuple[dict[str, Any], str]:
    """The summary that would authorize promotion and its sha256, for an approver to sign.

    Raises:
        ValueError: a rule other than approval is unmet (with every such reason).
        UsageError: ``candidate`` is not one of its arms.
    """
    evidence = load_evidence(folder)
    if candidate is not None and candidate not in evidence.arms:
        # A mistyped argument (exit 2), as decide and gate say of it.
        raise UsageError(
            f"{folder}: no arm named {candidate!r} (arms: {', '.join(sorted(evidence.arms))})"
        )
    evaluation = evaluate(evidence, policy, candidate=candidate)
    if not evaluation.allowed:
        raise ValueError("; ".join(f"{u.rule}: {u.reason}" for u in evaluation.unmet))
    summary = build_summary(evidence, evaluation, authorized=True)
    return summary, hashlib.sha256(jsonio.dumps_deterministic(summary)).hexdigest()


APPROVAL_SCHEMA = manifest.APPROVAL_SCHEMA


def write_approval_record(
    folder: str | Path,
    policy: Policy,
    *,
    candidate: str | None = None,
    note: str | None = None,
    reseal_after_review: bool = False,
) -> tuple[Path, bytes]:
    """Writes ``approvals/<arm>-<digest>.json``: consent to promote the summary that
    :func:`proposal` gives. It approves nothing until an allowed approver signs it
    (a sigstore bundle beside it, ``<record>.sigstore.json``).

    The record is not part of the seal until ``ledger decide`` re-seals the campaign; the
    campaign's seal must hold before it is written.

    Raises:
        ValueError: a rule other than approval is unmet.
        SealBroken: the folder no longer matches its seal.
        OutputExists: the same record exists.
    """
    root = Path(folder)
    manifest.check_seal(root, "approve", reseal_after_review=reseal_after_review)
    summary, digest = proposal(root, policy, candidate=candidate)
    arm = summary["decision"]["candidate"]
    record: dict[str, Any] = {
        "schema": APPROVAL_SCHEMA,
        "campaign_id": summary["campaign_id"],
        "summary_sha256": digest,
        "decision": "promote",
        "candidate": arm,
    }
    if note:
        record["note"] = note
    rel = f"{APPROVALS_FOLDER}/{arm}-{digest[:16]}.json"
    data = document_bytes(record)
    changes = Changes()
    target = changes.put(root, rel, data, replace=False)
    changes.commit()
    return target, data
