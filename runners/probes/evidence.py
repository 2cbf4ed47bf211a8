"""The evidence stages' artifacts: GPU reserve, GPU telemetry and the functional gates
(:mod:`runners.probes.container_documents` writes startup and restoration). Each function
takes its readings and returns the document to write; the verdict in it is computed by the
same ledger functions the policy recomputes it with.
"""

from __future__ import annotations

import datetime
from typing import Any

from ledger.measures import functional
from ledger.measures.verdicts import reserve_failures
from runners.plan import Arm, EvidenceStage, Plan
from runners.probes import gpu

__all__ = [
    "FUNCTIONAL_SCHEMA",
    "RESERVE_SCHEMA",
    "TELEMETRY_SCHEMA",
    "artifact_path",
    "functional_document",
    "head",
    "reserve_document",
    "telemetry_document",
    "utc_now",
]

FUNCTIONAL_SCHEMA = functional.SCHEMA
RESERVE_SCHEMA = "anvil-serving.gpu-reserve/v1"
TELEMETRY_SCHEMA = "anvil-serving.gpu-telemetry/v1"


def utc_now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def artifact_path(arm: Arm, stage: EvidenceStage) -> str:
    """``<arm>/<stage>.json``, beside the arm's workload stage folders."""
    return f"{arm.name}/{stage.name}.json"


def head(plan: Plan, arm: Arm, stage: EvidenceStage, schema: str) -> dict[str, Any]:
    return {"schema": schema, "campaign_id": plan.campaign_id, "arm": arm.name, "stage": stage.name}


def reserve_document(plan: Plan, arm: Arm, stage: EvidenceStage) -> dict[str, Any]:
    """Reads the arm's cards now and judges them against the stage's ``min_free_mib``."""
    taken_at = utc_now()
    reading = gpu.snapshot(arm.gpus)
    threshold = int(stage.settings["min_free_mib"])
    failures = reserve_failures(reading, threshold)
    return {
        **head(plan, arm, stage, RESERVE_SCHEMA),
        "taken_at": taken_at,
        "threshold_mib": threshold,
        **reading,
        "passed": not failures,
        "failures": failures,
    }


def telemetry_document(
    plan: Plan,
    arm: Arm,
    stage: EvidenceStage,
    sampler: gpu.TelemetrySampler,
    started_at: str,
) -> dict[str, Any]:
    """The samples a sampler took, with their per-card min/max summary."""
    return {
        **head(plan, arm, stage, TELEMETRY_SCHEMA),
        "during": stage.settings["during"],
        "interval_s": stage.settings["interval_s"],
        "started_at": started_at,
        "available": any(s["nvml"]["available"] for s in sampler.samples),
        "samples": sampler.samples,
        "summary": gpu.telemetry_summary(sampler.samples),
    }


def functional_document(
    plan: Plan, arm: Arm, stage: EvidenceStage, records: list[dict[str, Any]], started_at: str
) -> dict[str, Any]:
    """A functional or quality gate: its check records and the counts they give."""
    return {
        **head(plan, arm, stage, FUNCTIONAL_SCHEMA),
        "kind": stage.kind,
        "started_at": started_at,
        "settings": stage.settings,
        "records": records,
        **functional.summarize(stage.kind, records, stage.settings),
    }
