"""The evidence stages' artifacts: GPU reserve, GPU telemetry, container restoration and
startup. Each function takes its readings and returns the document to write; the verdict
in it is computed by the same ledger functions the policy recomputes it with.
"""

from __future__ import annotations

import datetime
from typing import Any

from ledger.measures import functional
from ledger.measures.verdicts import STARTUP_PASSED, reserve_failures, restoration_failures
from runners.plan import Arm, Container, EvidenceStage, Plan
from runners.probes import containers, gpu

__all__ = [
    "FUNCTIONAL_SCHEMA",
    "RESERVE_SCHEMA",
    "RESTORATION_SCHEMA",
    "STARTUP_SCHEMA",
    "TELEMETRY_SCHEMA",
    "ContainerWitness",
    "artifact_path",
    "functional_document",
    "reserve_document",
    "restoration_document",
    "startup_document",
    "telemetry_document",
    "utc_now",
]

FUNCTIONAL_SCHEMA = functional.SCHEMA
RESERVE_SCHEMA = "anvil-serving.gpu-reserve/v1"
TELEMETRY_SCHEMA = "anvil-serving.gpu-telemetry/v1"
RESTORATION_SCHEMA = "anvil-serving.container-restoration/v1"
STARTUP_SCHEMA = "anvil-serving.startup-attempt/v1"


def utc_now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def artifact_path(arm: Arm, stage: EvidenceStage) -> str:
    """``<arm>/<stage>.json``, beside the arm's workload stage folders."""
    return f"{arm.name}/{stage.name}.json"


def _head(plan: Plan, arm: Arm, stage: EvidenceStage, schema: str) -> dict[str, Any]:
    return {"schema": schema, "campaign_id": plan.campaign_id, "arm": arm.name, "stage": stage.name}


def reserve_document(plan: Plan, arm: Arm, stage: EvidenceStage) -> dict[str, Any]:
    """Reads the arm's cards now and judges them against the stage's ``min_free_mib``."""
    taken_at = utc_now()
    reading = gpu.snapshot(arm.gpus)
    threshold = int(stage.settings["min_free_mib"])
    failures = reserve_failures(reading, threshold)
    return {
        **_head(plan, arm, stage, RESERVE_SCHEMA),
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
        **_head(plan, arm, stage, TELEMETRY_SCHEMA),
        "during": stage.settings["during"],
        "interval_s": stage.settings["interval_s"],
        "started_at": started_at,
        "available": any(s["nvml"]["available"] for s in sampler.samples),
        "samples": sampler.samples,
        "summary": gpu.telemetry_summary(sampler.samples),
    }


class ContainerWitness:
    """Snapshots of one arm's container; remembers why the engine could not be reached."""

    def __init__(self, container: Container) -> None:
        self.container = container
        self.error: str | None = None
        self._client: Any = None

    def engine(self) -> dict[str, Any]:
        return {
            "available": self.error is None,
            "error": self.error,
            "host": self.container.docker_host,
        }

    def client(self) -> Any:
        if self._client is None:
            try:
                self._client = containers.connect(self.container.docker_host)
                self.error = None
            except containers.EngineUnavailable as e:
                self.error = str(e)
        return self._client

    def snapshot(self) -> dict[str, Any] | None:
        """The container now, or None (gone, or no engine: :attr:`error` says which)."""
        client = self.client()
        if client is None:
            return None
        try:
            return containers.snapshot(client, self.container.name)
        except (LookupError, containers.EngineUnavailable) as e:
            self.error = str(e) if isinstance(e, containers.EngineUnavailable) else None
            return None

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def restoration_document(
    plan: Plan,
    arm: Arm,
    stage: EvidenceStage,
    witness: ContainerWitness,
    before: dict[str, Any] | None,
    before_at: str | None,
    after: dict[str, Any] | None,
    after_at: str | None,
) -> dict[str, Any]:
    """Before/after snapshots and every named difference; ``after_at`` None: still running."""
    failures = restoration_failures(before, after)
    if after_at is None:
        failures = [{"code": "in-progress", "message": "the workload has not finished"}]
    if not witness.engine()["available"]:
        failures.insert(0, {"code": "engine-unavailable", "message": str(witness.error)})
    return {
        **_head(plan, arm, stage, RESTORATION_SCHEMA),
        "container": witness.container.name,
        "engine": witness.engine(),
        "before": before,
        "before_at": before_at,
        "after": after,
        "after_at": after_at,
        "passed": not failures,
        "failures": failures,
    }


def startup_document(
    plan: Plan, arm: Arm, stage: EvidenceStage, witness: ContainerWitness, ready_url: str
) -> dict[str, Any]:
    """Starts the arm's container and watches it; the attempt, classified."""
    started_at = utc_now()
    deadline = float(stage.settings["deadline_s"])
    before = witness.snapshot()
    client = witness.client()
    if client is None:
        attempt: dict[str, Any] = {
            "outcome": "engine-unavailable",
            "detail": str(witness.error),
            "probes": 0,
        }
    else:
        attempt = containers.start_and_watch(
            client,
            witness.container.name,
            ready_url,
            deadline_s=deadline,
            poll_s=float(stage.settings["poll_s"]),
        )
    after = witness.snapshot() if client is not None else None
    return {
        **_head(plan, arm, stage, STARTUP_SCHEMA),
        "container": witness.container.name,
        "engine": witness.engine(),
        "ready_url": ready_url,
        "deadline_s": deadline,
        "started_at": started_at,
        "outcome": attempt["outcome"],
        "passed": attempt["outcome"] == STARTUP_PASSED,
        "detail": attempt["detail"],
        "probes": attempt["probes"],
        "elapsed_s": attempt.get("elapsed_s"),
        "last_probe": attempt.get("last_probe"),
        "before": before,
        "after": after,
    }


def functional_document(
    plan: Plan, arm: Arm, stage: EvidenceStage, records: list[dict[str, Any]], started_at: str
) -> dict[str, Any]:
    """A functional or quality gate: its check records and the counts they give."""
    return {
        **_head(plan, arm, stage, FUNCTIONAL_SCHEMA),
        "kind": stage.kind,
        "started_at": started_at,
        "settings": stage.settings,
        "records": records,
        **functional.summarize(stage.kind, records, stage.settings),
    }
