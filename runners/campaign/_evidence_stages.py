"""The evidence stages of an arm, beside its measured cells: startup, the container's
restoration before and after, functional and quality gates, GPU telemetry during a stage
and the GPU reserve after it. Each writes its artifact and status into the folder."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from ledger.formats.schema import read_document, write_document
from runners import checks
from runners.campaign._folder import CampaignFolder
from runners.client import EndpointClient
from runners.plan import Arm, EvidenceStage
from runners.probes import container_documents, evidence, gpu
from runners.probes.container_documents import ContainerWitness


class EvidenceStages:
    """Runs an arm's evidence stages into a campaign folder."""

    def __init__(self, state: CampaignFolder, stopped_by: Callable[[], str | None]) -> None:
        self.state = state
        self.plan = state.plan
        self.stopped_by = stopped_by
        """The signal that stopped the run, if one did."""

    async def functional(
        self, arm: Arm, step: EvidenceStage, base_url: str, api_key: str | None
    ) -> None:
        """Runs one functional or quality gate; an interrupted one leaves no artifact."""
        if self.state.evidence[(arm.name, step.name)] == "complete":
            return
        started_at = evidence.utc_now()
        async with EndpointClient(
            base_url, concurrency=1, deadlines=self.plan.deadlines, api_key=api_key
        ) as client:
            session = checks.Session(client, arm, step, self.plan.seed)
            records = await checks.RUNNERS[step.kind](session)
        document = evidence.functional_document(self.plan, arm, step, records, started_at)
        self.write(arm, step, document, "complete")

    def write(self, arm: Arm, step: EvidenceStage, document: dict[str, Any], status: str) -> None:
        path = self.state.folder / evidence.artifact_path(arm, step)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_document(path, document)
        self.state.evidence[(arm.name, step.name)] = status
        self.state.progress.note(f"{arm.name} {step.name}: {_evidence_line(document)}")

    async def startup(
        self, arm: Arm, base_url: str, witness: ContainerWitness | None
    ) -> str | None:
        """Runs the startup stage once; why the arm may not go on (its container was not
        ready), or None."""
        step = self.plan.evidence_of("startup")
        if step is None or witness is None:
            return None
        key = (arm.name, step.name)
        if self.state.evidence[key] == "complete":
            document = read_document(self.state.folder / evidence.artifact_path(arm, step))
        else:
            document = await asyncio.to_thread(
                container_documents.startup_document,
                self.plan,
                arm,
                step,
                witness,
                _ready_url(arm, base_url),
            )
            self.write(arm, step, document, "complete")
        if document.get("passed"):
            return None
        return f"arm {arm.name!r} {step.name}: {document['outcome']} ({document['detail']})"

    async def restoration_before(
        self, arm: Arm, step: EvidenceStage, witness: ContainerWitness
    ) -> None:
        if self.state.evidence[(arm.name, step.name)] == "complete":
            return
        if arm.name not in self.state.before:
            at = evidence.utc_now()
            self.state.before[arm.name] = (await asyncio.to_thread(witness.snapshot), at)
        document = container_documents.restoration_document(
            self.plan, arm, step, witness, self.state.before[arm.name], (None, None)
        )
        self.write(arm, step, document, "incomplete")

    async def restoration_after(
        self,
        arm: Arm,
        step: EvidenceStage,
        witness: ContainerWitness,
        base_url: str,
        api_key: str | None,
    ) -> None:
        """The snapshot after the workload; with ``restart``, then a stop, a second start
        and the first request it serves."""
        if self.state.evidence[(arm.name, step.name)] == "complete":
            return
        at = evidence.utc_now()
        after = (await asyncio.to_thread(witness.snapshot), at)
        restarted = None
        if step.settings.get("restart"):
            restarted = await asyncio.to_thread(
                container_documents.restart,
                witness,
                _ready_url(arm, base_url),
                step,
                self.plan.campaign_id,
                after[0],
            )
            if (restarted["attempt"] or {}).get("outcome") == "ready":
                restarted["first_request"] = await self._first_request(arm, base_url, api_key)
        document = container_documents.restoration_document(
            self.plan, arm, step, witness, self.state.before[arm.name], after, restarted
        )
        self.write(arm, step, document, "complete")

    async def _first_request(self, arm: Arm, base_url: str, api_key: str | None) -> dict[str, Any]:
        """One short chat request to the restarted server, as a client would send first."""
        sent_at = evidence.utc_now()
        async with EndpointClient(
            base_url, concurrency=1, deadlines=self.plan.deadlines, api_key=api_key
        ) as client:
            body = {
                "model": arm.model,
                "messages": [{"role": "user", "content": "Reply with one word: ready?"}],
                "max_tokens": 16,
                **arm.thinking_fields(False),
                **arm.extra_body,
            }
            record = await client.chat(body, origin_ns=time.perf_counter_ns())
        ttft = record.chunks_ns[0] - record.sent_ns if record.chunks_ns else None
        return {
            "sent_at": sent_at,
            "ok": record.ok,
            # A stream is read only from a 200; a failure records the status it had.
            "status": 200 if record.ok else (record.error or {}).get("status"),
            "error": (record.error or {}).get("class"),
            "ttft_ms": round(ttft / 1e6, 3) if ttft is not None else None,
            "e2e_ms": round(((record.end_ns or record.sent_ns) - record.sent_ns) / 1e6, 3),
            "completion_tokens": (record.usage or {}).get("completion_tokens"),
        }

    async def finish_telemetry(
        self, arm: Arm, step: EvidenceStage, sampler: gpu.TelemetrySampler, started_at: str
    ) -> None:
        await asyncio.to_thread(sampler.stop)
        status = "complete" if self.stopped_by() is None else "incomplete"
        document = evidence.telemetry_document(self.plan, arm, step, sampler, started_at)
        self.write(arm, step, document, status)

    async def reserve(self, arm: Arm, step: EvidenceStage) -> None:
        """Reads the GPU reserve after the workload, once."""
        if self.state.evidence[(arm.name, step.name)] == "complete":
            return
        document = await asyncio.to_thread(evidence.reserve_document, self.plan, arm, step)
        self.write(arm, step, document, "complete")


def _ready_url(arm: Arm, base_url: str) -> str:
    """Where the arm's server says it is ready: its ``ready_url``, else ``/models``."""
    assert arm.container is not None
    return arm.container.ready_url or base_url.rstrip("/") + "/models"


def _evidence_line(document: dict[str, Any]) -> str:
    if "records" in document:
        counts = ", ".join(
            f"{key} {document[key]}"
            for key in (
                "checks_passed",
                "checks",
                "completed",
                "requests",
                "passed_attempts",
                "attempts",
                "effective_context",
            )
            if key in document
        )
        return f"{'passed' if document['passed'] else 'failed'} ({counts})"
    if "outcome" in document:
        return f"{document['outcome']} ({document['detail']})"
    first = (document.get("failures") or [None])[0]
    if isinstance(first, dict) and first.get("code") == "in-progress":
        return "snapshot taken before the workload"
    if "samples" in document:
        return f"{len(document['samples'])} samples"
    failures = document.get("failures") or []
    if document.get("passed"):
        return "passed"
    if not failures:
        return "recorded"
    first = failures[0]
    return "failed: " + str(first["message"] if isinstance(first, dict) else first)
