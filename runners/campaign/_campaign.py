"""``ledger run``: a plan's arms x stages x cells, written as a raw campaign folder.

Layout of ``RAW_DIR/<campaign_id>/``::

    run-plan.json              the plan as run (anvil-serving.run-plan/v1)
    workload-manifest.json     prompt digests and actual prompt tokens per cell and arm
    <arm>/<stage>/<cell>.json  one cell's per-request records (anvil-serving.cell-run/v1)
    run-manifest.json          every cell's status and digest (anvil-serving.run-manifest/v1)
    manifest.json, SHA256SUMS  the seal, as ``ledger seal`` writes it

A cell's file is written, marked incomplete, before its first request, and replaced when it
ends; every write is atomic. A run stopped by SIGINT or SIGTERM rewrites the cell with the
requests it finished, still marked incomplete; one stopped by SIGKILL leaves the placeholder.
``--resume`` keeps every complete cell, moves an incomplete one aside as
``<cell>.interrupted-<n>.json`` (evidence is never deleted) and runs it again.
"""

from __future__ import annotations

import asyncio
import datetime
import itertools
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import attrs
import orjson

from ledger import __version__
from ledger.errors import InvalidArtifact, RunnerError, SchemaError
from ledger.evidence import manifest
from ledger.formats.outputs import OutputExists
from ledger.formats.schema import read_document, write_document
from ledger.hashing import sha256_file
from ledger.measures.arrivals import completed_rate, lateness
from runners import checks
from runners.campaign._stages import (
    CellRun,
    Prompt,
    new_origin,
    request_body,
    request_shape,
    run_cell,
)
from runners.campaign._stats import CellStats, cell_stats
from runners.campaign.progress import Progress, progress_for
from runners.client import EndpointClient
from runners.plan import (
    FUNCTIONAL_KINDS,
    MAX_CONTEXT_TARGET,
    Arm,
    Cell,
    EvidenceStage,
    Plan,
    Stage,
    check_context,
)
from runners.probes import evidence, gpu
from runners.simulate.serve import SimulatorProcess
from runners.workload import (
    TOLERANCE,
    Calibration,
    Filler,
    build_messages,
    calibrate,
    prompt_bytes,
    prompt_digest,
)

PLAN_NAME = "run-plan.json"
WORKLOAD_NAME = "workload-manifest.json"
RUN_MANIFEST_NAME = "run-manifest.json"
CELL_SCHEMA = "anvil-serving.cell-run/v1"
WORKLOAD_SCHEMA = "anvil-serving.workload-manifest/v1"
RUN_MANIFEST_SCHEMA = "anvil-serving.run-manifest/v1"
TRANSPORT = "httpx over aiohttp (httpx-aiohttp), raw-bytes SSE parsing"


@attrs.frozen
class CellOutcome:
    """One line of the end-of-run table."""

    arm: str
    stage: str
    cell: str
    status: str
    """``complete``, ``incomplete`` or ``skipped`` (complete from an earlier run)."""
    stats: CellStats | None


@attrs.frozen
class RunResult:
    """What ``ledger run`` did."""

    folder: Path
    complete: bool
    interrupted: str | None
    """The signal that stopped the run, if one did."""
    cells: tuple[CellOutcome, ...]


def _utc_now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _first_difference(a: Any, b: Any, pointer: str = "", named: str = "") -> str:
    """Where two plans first differ: the pointer into ``run-plan.json``, and what the plan
    file calls it (``stage 'capacity', requests``) with both values when they are short."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if a.get(key, ...) != b.get(key, ...):
                where = f"{named}, {key}" if named else key
                return _first_difference(
                    a.get(key, ...), b.get(key, ...), f"{pointer}/{key}", where
                )
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return _first_difference(x, y, f"{pointer}/{index}", _item(named, index, x))
    if isinstance(a, list) and isinstance(b, list):
        a, b = f"{len(a)} entries", f"{len(b)} entries"
    else:
        a, b = _short(a), _short(b)
    said = f"{named}: {a} in the run, {b} now" if named else "the plan"
    return f"{said} ({pointer or '/'} of run-plan.json)"


_PLURALS = {"stages": "stage", "arms": "arm", "evidence_stages": "evidence stage", "cells": "cell"}


def _item(named: str, index: int, item: Any) -> str:
    """A list item as the plan names it: ``arm 'candidate'``, else its position."""
    label = item.get("name", item.get("id")) if isinstance(item, dict) else None
    head, _, last = named.rpartition(", ")
    if isinstance(label, str) and last in _PLURALS:
        return f"{head}, " * bool(head) + f"{_PLURALS[last]} {label!r}"
    return f"{named}[{index}]"


def _short(value: Any) -> str:
    if value is ...:
        return "absent"
    shown = orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    return shown if len(shown) <= 40 else shown[:37] + "..."


class _Interrupted(Exception):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class CampaignRun:
    """One execution of a plan into a raw folder (fresh or resumed)."""

    def __init__(self, plan: Plan, raw_dir: Path, *, resume: bool, progress: Progress) -> None:
        self.plan = plan
        self.folder = raw_dir / plan.campaign_id
        self.resume = resume
        self.progress = progress
        self.filler = Filler(plan.seed)
        self.workload: dict[tuple[str, str], dict[str, Any]] = {}
        self.cells: dict[tuple[str, str, str], str] = {}
        self.sweeps: dict[str, dict[str, Any]] = {}
        self.interrupted_files: dict[tuple[str, str, str], list[str]] = {}
        self.outcomes: list[CellOutcome] = []
        self.signal_name: str | None = None
        self.keys: dict[str, str | None] = {}
        self.evidence: dict[tuple[str, str], str] = {}
        self.context_limits: dict[str, int] = {}
        """Each arm's context as its endpoint reports it."""
        """(arm, evidence stage) -> complete, incomplete or pending."""
        self.before: dict[str, tuple[dict[str, Any] | None, str | None]] = {}
        """arm -> its container's snapshot before the workload, and when it was taken."""

    # -- files ---------------------------------------------------------------------------

    def cells_of(self, stage: Stage) -> list[Cell]:
        """A stage's cells: a sweep's rate cells once its first arm has found its rates."""
        if stage.sweep_rates is None:
            return list(stage.cells)
        found = self.sweeps.get(stage.name)
        if found is None:
            found = self._sweep(stage)
        return [*stage.cells, *(cell for cell, _ in (found or {}).get("cells", ()))]

    def _sweep(self, stage: Stage) -> dict[str, Any] | None:
        """The rates of a sweep from its first arm's two probe cells, once both are complete
        (on disk: a resumed run finds the same rates)."""
        arm = self.plan.arms[0]
        measured = []
        for cell in stage.cells:
            path = self.folder / self.cell_path(arm, stage, cell)
            if not path.exists():
                return None
            try:
                document = read_document(path)
            except (OSError, InvalidArtifact, SchemaError):
                return None
            if document.get("status") != "complete":
                return None
            measured.append((cell.id, completed_rate(document["requests"])))
        (sync_id, synchronous), (burst_id, ceiling) = measured
        # No probe answered: there is no rate to sweep, only a failed measurement to keep.
        cells = stage.sweep_cells(synchronous, ceiling) if synchronous > 0 else []
        if not cells:
            self.progress.note(
                f"{arm.name} {stage.name}: no probe request succeeded; the sweep has no rates"
            )
        found: dict[str, Any] = {
            "synchronous_rps": synchronous,
            "ceiling_rps": ceiling,
            "from": {"arm": arm.name, "synchronous": sync_id, "ceiling": burst_id},
            "cells": cells,
        }
        self.sweeps[stage.name] = found
        for each in self.plan.arms:
            for cell, _ in cells:
                if (each.name, stage.name, cell.id) not in self.cells:
                    self._recover(each, stage, cell)
        return found

    def cell_path(self, arm: Arm, stage: Stage, cell: Cell) -> str:
        return f"{arm.name}/{stage.name}/{cell.id}.json"

    def prepare(self) -> None:
        """Checks the folder against the plan and loads what an earlier run left."""
        self.keys = {arm.name: self._api_key(arm) for arm in self.plan.arms}
        plan_path = self.folder / PLAN_NAME
        occupied = self.folder.exists() and any(self.folder.iterdir())
        if occupied and not plan_path.exists():
            # Not a run: --resume would seal whatever is there as this run's evidence.
            raise OutputExists(
                f"{self.folder} holds files but no run ({PLAN_NAME} is missing); choose "
                "another --raw-dir or empty the folder"
            )
        if occupied and not self.resume:
            raise OutputExists(
                f"{self.folder} already holds a run; pass --resume to finish it, or choose "
                "another --raw-dir"
            )
        sealed = (self.folder / manifest.MANIFEST_NAME).exists()
        if self.resume and sealed:
            self._check_seal()
        elif self.resume and plan_path.exists():
            # A run seals its folder as soon as it has written its plan: a plan without a
            # seal is a seal deleted since, and resuming would seal the cells as measured.
            raise manifest.SealBroken(
                f"{self.folder} has lost its seal: it holds {PLAN_NAME} but no "
                f"{manifest.MANIFEST_NAME}; a resumed run would keep and seal its cells as "
                "measured. Run 'ledger verify', review them, and re-seal with 'ledger seal "
                "--reseal-after-review' before resuming",
                [],
            )
        if self.resume and plan_path.exists():
            recorded = self._read(plan_path)
            wanted = self.plan.to_json()
            if recorded != wanted:
                raise RunnerError(
                    f"{plan_path}: the plan differs from the one this run started with: "
                    f"{_first_difference(recorded, wanted)}"
                )
        self.folder.mkdir(parents=True, exist_ok=True)
        # Temporary files of atomic writes that a SIGKILL interrupted: never a whole
        # artifact (a finished write is renamed), and the seal must not list them.
        for stale in self.folder.rglob(".*.tmp"):
            stale.unlink()
        write_document(plan_path, self.plan.to_json())
        if not sealed:
            # Sealed from the start: a seal deleted later is then told apart from a run
            # killed before its first cell ended (see manifest.lost_seal).
            manifest.seal(self.folder, check=False, jobs=1)
        workload_path = self.folder / WORKLOAD_NAME
        if workload_path.exists():
            for entry in self._read(workload_path)["cells"]:
                self.workload[(entry["stage"], entry["cell"])] = entry
        for arm in self.plan.arms:
            for stage in self.plan.stages:
                for cell in self.cells_of(stage):
                    self._recover(arm, stage, cell)
            for step in self.plan.evidence:
                self._recover_evidence(arm, step)

    def _check_seal(self) -> None:
        """A resumed run keeps the cells it finished, so they must be as it sealed them.

        Files a run killed after its last seal wrote are new (added) or its own bookkeeping
        (rewritten as it goes); anything else that differs was changed by someone else.
        """
        own = {PLAN_NAME, WORKLOAD_NAME, RUN_MANIFEST_NAME, manifest.SUMS_NAME}
        changed = [
            c
            for c in manifest.changes_since_seal(self.folder, jobs=1)
            if c.change != "added" and c.path not in own
        ]
        if changed:
            shown = ", ".join(f"{c.path} ({c.change})" for c in changed[:8])
            raise manifest.SealBroken(
                f"{self.folder} no longer matches its seal: {shown}. A resumed run would keep "
                "and seal them as measured; run 'ledger verify', review them, and re-seal with "
                "'ledger seal --reseal-after-review' before resuming",
                changed,
            )

    def _recover_evidence(self, arm: Arm, step: EvidenceStage) -> None:
        path = self.folder / evidence.artifact_path(arm, step)
        key = (arm.name, step.name)
        self.evidence[key] = "pending"
        if not path.exists():
            return
        try:
            document = read_document(path)
        except (OSError, InvalidArtifact, SchemaError):
            return  # written again
        if step.kind == "telemetry":
            during = next(s for s in self.plan.stages if s.name == step.settings["during"])
            if any(self.cells[(arm.name, during.name, c.id)] != "complete" for c in during.cells):
                self.evidence[key] = "incomplete"  # sampled again with the stage
                return
        if step.kind == "restoration" and document.get("after_at") is None:
            # The "before" snapshot of an interrupted run is the one that counts.
            self.before[arm.name] = (document.get("before"), document.get("before_at"))
            self.evidence[key] = "incomplete"
            return
        self.evidence[key] = "complete"

    def _read(self, path: Path) -> dict[str, Any]:
        try:
            return read_document(path)
        except (OSError, InvalidArtifact, SchemaError) as e:
            raise RunnerError(f"cannot resume: {e}") from None

    def _recover(self, arm: Arm, stage: Stage, cell: Cell) -> None:
        rel = self.cell_path(arm, stage, cell)
        key = (arm.name, stage.name, cell.id)
        path = self.folder / rel
        earlier = sorted(
            path.parent.glob(f"{cell.id}.interrupted-*.json"),
            key=lambda p: int(p.name.rsplit("-", 1)[1].split(".")[0]),
        )
        self.interrupted_files[key] = [str(p.relative_to(self.folder).as_posix()) for p in earlier]
        if not path.exists():
            self.cells[key] = "pending"
            return
        try:
            status = read_document(path).get("status")
        except (OSError, InvalidArtifact, SchemaError):
            status = "unreadable"
        if status == "complete":
            self.cells[key] = "complete"
            return
        # Kept as evidence of the interruption; the cell runs again.
        aside = path.with_name(f"{cell.id}.interrupted-{len(earlier) + 1}.json")
        os.replace(path, aside)
        self.interrupted_files[key].append(aside.relative_to(self.folder).as_posix())
        self.cells[key] = "pending"

    def write_workload(self) -> None:
        cells = []
        for stage in self.plan.stages:
            for cell in self.cells_of(stage):
                entry = self.workload.get((stage.name, cell.id))
                if entry is not None:
                    cells.append(entry)
        write_document(
            self.folder / WORKLOAD_NAME,
            {
                "schema": WORKLOAD_SCHEMA,
                "campaign_id": self.plan.campaign_id,
                "family": "short-summary",
                "seed": self.plan.seed,
                "prefix": self.plan.prefix,
                "prompt_digest": "sha256 of the messages array as compact JSON, sorted keys",
                "tolerance": TOLERANCE,
                "cells": cells,
            },
        )

    def _reference(self, rel: str) -> dict[str, str]:
        digest, _ = sha256_file(self.folder / rel)
        return {"path": rel, "sha256": digest}

    def write_run_manifest(self) -> bool:
        entries = []
        for arm in self.plan.arms:
            for stage in self.plan.stages:
                for cell in self.cells_of(stage):
                    key = (arm.name, stage.name, cell.id)
                    rel = self.cell_path(arm, stage, cell)
                    status = self.cells[key]
                    entries.append(
                        {
                            "arm": arm.name,
                            "stage": stage.name,
                            "cell": cell.id,
                            "status": status,
                            "artifact": self._reference(rel) if status != "pending" else None,
                            "interrupted": [
                                self._reference(p) for p in self.interrupted_files[key]
                            ],
                        }
                    )
        steps = [
            {
                "arm": arm.name,
                "stage": step.name,
                "kind": step.kind,
                "status": self.evidence[(arm.name, step.name)],
                "artifact": self._reference(evidence.artifact_path(arm, step))
                if self.evidence[(arm.name, step.name)] != "pending"
                else None,
            }
            for arm in self.plan.arms
            for step in self.plan.evidence
        ]
        complete = all(e["status"] == "complete" for e in entries + steps)
        write_document(
            self.folder / RUN_MANIFEST_NAME,
            {
                "schema": RUN_MANIFEST_SCHEMA,
                "campaign_id": self.plan.campaign_id,
                "complete": complete,
                "plan": self._reference(PLAN_NAME),
                "workload": self._reference(WORKLOAD_NAME)
                if (self.folder / WORKLOAD_NAME).exists()
                else None,
                "runner": {"name": "anvil-ledger", "version": __version__},
                "cells": entries,
                "evidence": steps,
            },
        )
        return complete

    # -- running -------------------------------------------------------------------------

    async def run(self) -> None:
        for arm in self.plan.arms:
            pending = [
                (stage, cell)
                for stage in self.plan.stages
                for cell in self.cells_of(stage)
                if self.cells[(arm.name, stage.name, cell.id)] != "complete"
            ]
            for stage in self.plan.stages:
                for cell in self.cells_of(stage):
                    if (stage, cell) not in pending:
                        label = f"{arm.name} {stage.name} {cell.id}"
                        self.progress.end_cell(label, None, "skipped")
                        self.outcomes.append(
                            CellOutcome(arm.name, stage.name, cell.id, "skipped", None)
                        )
            steps_left = any(
                self.evidence[(arm.name, e.name)] != "complete" for e in self.plan.evidence
            )
            if not pending and not steps_left:
                continue
            api_key = self.keys[arm.name]
            if arm.simulated is not None:
                with SimulatorProcess(arm.simulated) as simulator:
                    await self._run_arm(arm, simulator.base_url, api_key, pending)
            else:
                assert arm.base_url is not None
                await self._run_arm(arm, arm.base_url, api_key, pending)

    def _api_key(self, arm: Arm) -> str | None:
        if arm.api_key_env is None:
            return None
        value = os.environ.get(arm.api_key_env)
        if not value:
            raise RunnerError(
                f"arm {arm.name!r}: environment variable {arm.api_key_env} (api_key_env) is not set"
            )
        return value

    async def _run_arm(
        self, arm: Arm, base_url: str, api_key: str | None, pending: list[tuple[Stage, Cell]]
    ) -> None:
        witness = evidence.ContainerWitness(arm.container) if arm.container else None
        try:
            if not await self._startup(arm, base_url, witness):
                return
            limit = await self._context_limit(base_url, api_key)
            if limit is not None:
                self.context_limits[arm.name] = limit
                check_context(arm.name, self.plan.stages, limit, "max_model_len at /v1/models")
            restoration = self.plan.evidence_of("restoration")
            if restoration is not None and witness is not None:
                await self._restoration_before(arm, restoration, witness)
            for step in self.plan.evidence:
                if step.kind in FUNCTIONAL_KINDS:
                    await self._functional(arm, step, base_url, api_key)
            telemetry = self.plan.evidence_of("telemetry")
            during = None
            if telemetry is not None and self.evidence[(arm.name, telemetry.name)] != "complete":
                during = telemetry.settings["during"]
            for stage, group in itertools.groupby(pending, key=lambda pair: pair[0]):
                sampler = None
                if telemetry is not None and stage.name == during:
                    sampler = gpu.TelemetrySampler(telemetry.settings["interval_s"], arm.gpus)
                    started_at = evidence.utc_now()
                    await asyncio.to_thread(sampler.start)
                try:
                    for _, cell in group:
                        await self._run_in_client(arm, stage, cell, base_url, api_key)
                    if stage.sweep_rates is not None:
                        # On the first arm the rates are found only by the probes just run.
                        for cell in self.cells_of(stage):
                            if self.cells[(arm.name, stage.name, cell.id)] != "complete":
                                await self._run_in_client(arm, stage, cell, base_url, api_key)
                finally:
                    # Interrupted during the sampled stage, the samples taken still count.
                    if sampler is not None and telemetry is not None:
                        await self._finish_telemetry(arm, telemetry, sampler, started_at)
            reserve = self.plan.evidence_of("reserve")
            if reserve is not None and self.evidence[(arm.name, reserve.name)] != "complete":
                document = await asyncio.to_thread(
                    evidence.reserve_document, self.plan, arm, reserve
                )
                self._write_evidence(arm, reserve, document, "complete")
            if restoration is not None and witness is not None:
                await self._restoration_after(arm, restoration, witness)
        finally:
            if witness is not None:
                witness.close()

    async def _run_in_client(
        self, arm: Arm, stage: Stage, cell: Cell, base_url: str, api_key: str | None
    ) -> None:
        async with EndpointClient(
            base_url,
            concurrency=cell.concurrency,
            deadlines=self.plan.deadlines,
            api_key=api_key,
        ) as client:
            await self._run_one(client, arm, stage, cell)

    async def _context_limit(self, base_url: str, api_key: str | None) -> int | None:
        """The context the endpoint reports (``max_model_len`` of ``/v1/models``, as vLLM,
        SGLang and the simulator give it); None when it reports none."""
        async with EndpointClient(
            base_url, concurrency=1, deadlines=self.plan.deadlines, api_key=api_key
        ) as client:
            answer = await client.get(base_url.rstrip("/") + "/models", max_bytes=1 << 20)
        if isinstance(answer, str) or answer[0] != 200:
            return None
        try:
            models = orjson.loads(answer[1]).get("data") or []
        except (orjson.JSONDecodeError, AttributeError):
            return None
        limits: list[int] = [
            m["max_model_len"]
            for m in models
            if isinstance(m, dict) and type(m.get("max_model_len")) is int
        ]
        return min(limits) if limits and min(limits) > 0 else None

    async def _functional(
        self, arm: Arm, step: EvidenceStage, base_url: str, api_key: str | None
    ) -> None:
        """Runs one functional or quality gate; an interrupted one leaves no artifact."""
        if self.evidence[(arm.name, step.name)] == "complete":
            return
        started_at = evidence.utc_now()
        async with EndpointClient(
            base_url, concurrency=1, deadlines=self.plan.deadlines, api_key=api_key
        ) as client:
            session = checks.Session(client, arm, step, self.plan.seed)
            records = await checks.RUNNERS[step.kind](session)
        document = evidence.functional_document(self.plan, arm, step, records, started_at)
        self._write_evidence(arm, step, document, "complete")

    def _write_evidence(
        self, arm: Arm, step: EvidenceStage, document: dict[str, Any], status: str
    ) -> None:
        path = self.folder / evidence.artifact_path(arm, step)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_document(path, document)
        self.evidence[(arm.name, step.name)] = status
        self.progress.note(f"{arm.name} {step.name}: {_evidence_line(document)}")

    async def _startup(
        self, arm: Arm, base_url: str, witness: evidence.ContainerWitness | None
    ) -> bool:
        """Runs the startup stage once; whether the arm may go on (its container is ready)."""
        step = self.plan.evidence_of("startup")
        if step is None or witness is None:
            return True
        key = (arm.name, step.name)
        if self.evidence[key] == "complete":
            path = self.folder / evidence.artifact_path(arm, step)
            return bool(read_document(path).get("passed"))
        assert arm.container is not None
        ready_url = arm.container.ready_url or base_url.rstrip("/") + "/models"
        document = await asyncio.to_thread(
            evidence.startup_document, self.plan, arm, step, witness, ready_url
        )
        self._write_evidence(arm, step, document, "complete")
        return bool(document["passed"])

    async def _restoration_before(
        self, arm: Arm, step: EvidenceStage, witness: evidence.ContainerWitness
    ) -> None:
        if self.evidence[(arm.name, step.name)] == "complete":
            return
        if arm.name not in self.before:
            at = evidence.utc_now()
            self.before[arm.name] = (await asyncio.to_thread(witness.snapshot), at)
        before, before_at = self.before[arm.name]
        document = evidence.restoration_document(
            self.plan, arm, step, witness, before, before_at, None, None
        )
        self._write_evidence(arm, step, document, "incomplete")

    async def _restoration_after(
        self, arm: Arm, step: EvidenceStage, witness: evidence.ContainerWitness
    ) -> None:
        if self.evidence[(arm.name, step.name)] == "complete":
            return
        before, before_at = self.before[arm.name]
        at = evidence.utc_now()
        after = await asyncio.to_thread(witness.snapshot)
        document = evidence.restoration_document(
            self.plan, arm, step, witness, before, before_at, after, at
        )
        self._write_evidence(arm, step, document, "complete")

    async def _finish_telemetry(
        self, arm: Arm, step: EvidenceStage, sampler: gpu.TelemetrySampler, started_at: str
    ) -> None:
        await asyncio.to_thread(sampler.stop)
        status = "complete" if self.signal_name is None else "incomplete"
        document = evidence.telemetry_document(self.plan, arm, step, sampler, started_at)
        self._write_evidence(arm, step, document, status)

    async def _calibration(
        self, client: EndpointClient, arm: Arm, stage: Stage, cell: Cell
    ) -> dict[str, Any]:
        key = (stage.name, cell.id)
        entry = self.workload.get(key)
        if entry is not None:
            return entry
        origin = time.perf_counter_ns()

        async def probe(words: int) -> int | str:
            messages = build_messages(
                self.filler,
                words,
                cell_id=cell.id,
                index=-1,
                prefix=self.plan.prefix,
                seed=self.plan.seed,
            )
            body = request_body(arm, stage, cell, messages)
            body.update(max_tokens=1)
            body.pop("ignore_eos", None)
            body.pop("min_tokens", None)
            outcome = await client.chat(body, origin_ns=origin)
            if outcome.error is not None:
                return f"{outcome.error['class']}: {outcome.error['message']}"
            tokens = (outcome.usage or {}).get("prompt_tokens")
            return tokens if tokens is not None else "the server reported no usage.prompt_tokens"

        hint = next(
            (
                e["calibration"]["filler_words"]
                for e in self.workload.values()
                if e["context_target"] == cell.context_target and e["calibration"]["error"] is None
            ),
            None,
        )
        # Every filler word is at least one token, so the endpoint's context (or, when it
        # reports none, the plan's cap) bounds the prompt calibration may build.
        calibration = await calibrate(
            arm.name,
            cell.context_target,
            probe,
            hint_words=hint,
            max_words=self.context_limits.get(arm.name, MAX_CONTEXT_TARGET),
        )
        prompts = []
        for index in range(stage.warmup + stage.measured(cell)):
            messages = self._messages(calibration, cell, index)
            prompts.append(
                {
                    "index": index,
                    "warmup": index < stage.warmup,
                    "sha256": prompt_digest(messages),
                    "bytes": len(prompt_bytes(messages)),
                    "prompt_tokens": {},
                }
            )
        entry = {
            "stage": stage.name,
            "cell": cell.id,
            "context_target": cell.context_target,
            "thinking": cell.thinking,
            "calibration": calibration.to_json(),
            "prompts": prompts,
        }
        self.workload[key] = entry
        self.write_workload()
        return entry

    def _messages(self, calibration: Calibration, cell: Cell, index: int) -> list[dict[str, str]]:
        return build_messages(
            self.filler,
            calibration.filler_words,
            cell_id=cell.id,
            index=index,
            prefix=self.plan.prefix,
            seed=self.plan.seed,
        )

    async def _run_one(self, client: EndpointClient, arm: Arm, stage: Stage, cell: Cell) -> None:
        key = (arm.name, stage.name, cell.id)
        rel = self.cell_path(arm, stage, cell)
        path = self.folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        label = f"{arm.name} {stage.name} {cell.id}"
        started_at = _utc_now()
        run = CellRun(new_origin())
        entry = await self._calibration(client, arm, stage, cell)
        calibration = Calibration.from_json(entry["calibration"])
        prompts = []
        for spec in entry["prompts"]:
            messages = self._messages(calibration, cell, spec["index"])
            if prompt_digest(messages) != spec["sha256"]:
                raise RunnerError(
                    f"{WORKLOAD_NAME}: prompt {spec['index']} of {cell.id} no longer has its "
                    "recorded digest"
                )
            prompts.append(Prompt(spec["index"], spec["warmup"], messages, spec["sha256"]))

        def document(status: str, reason: str | None) -> dict[str, Any]:
            return self._cell_document(arm, stage, cell, run, entry, started_at, status, reason)

        write_document(path, document("incomplete", "running"))
        self.cells[key] = "incomplete"
        self.progress.start_cell(label, len(prompts))
        try:
            await run_cell(client, arm, stage, cell, prompts, run, self.progress.request_done)
        except asyncio.CancelledError:
            write_document(path, document("incomplete", f"interrupted by {self.signal_name}"))
            self.progress.end_cell(label, cell_stats(run.records), "incomplete")
            self.outcomes.append(
                CellOutcome(arm.name, stage.name, cell.id, "incomplete", cell_stats(run.records))
            )
            raise
        write_document(path, document("complete", None))
        self.cells[key] = "complete"
        for record in run.records:
            tokens = (record.get("usage") or {}).get("prompt_tokens")
            entry["prompts"][record["index"]]["prompt_tokens"][arm.name] = tokens
        self.write_workload()
        stats = cell_stats(run.records)
        self.progress.end_cell(label, stats, "complete")
        self.outcomes.append(CellOutcome(arm.name, stage.name, cell.id, "complete", stats))

    def _cell_document(
        self,
        arm: Arm,
        stage: Stage,
        cell: Cell,
        run: CellRun,
        entry: dict[str, Any],
        started_at: str,
        status: str,
        reason: str | None,
    ) -> dict[str, Any]:
        identity = dict(arm.identity)
        if arm.simulated is not None:
            identity["simulated_profile"] = arm.simulated.to_json()
        calibration = entry["calibration"]
        document: dict[str, Any] = {
            "schema": CELL_SCHEMA,
            "campaign_id": self.plan.campaign_id,
            "arm": arm.name,
            "stage": {"name": stage.name, "kind": stage.kind},
            "cell": {
                "id": cell.id,
                "context_target": cell.context_target,
                "concurrency": cell.concurrency,
                "thinking": cell.thinking,
                "requests": stage.measured(cell),
                "warmup": stage.warmup,
                "max_tokens": stage.max_tokens,
                "controlled_output": stage.controlled_output,
                "temperature": stage.temperature,
                "seed": stage.seed,
                "prefix": self.plan.prefix,
            },
            "status": status,
            "reason": reason,
            "started_at": started_at,
            "endpoint": {
                "base_url": arm.base_url,
                "model": arm.model,
                "simulated": arm.simulated is not None,
            },
            "identity": identity,
            "request": request_shape(arm, stage, cell),
            "client": {
                "name": "anvil-ledger",
                "version": __version__,
                "transport": TRANSPORT,
                "deadlines": attrs.asdict(self.plan.deadlines),
            },
            "calibration": {
                "arm": calibration["arm"],
                "status": calibration["status"],
                "filler_words": calibration["filler_words"],
                "prompt_tokens": calibration["prompt_tokens"],
            },
            "metrics": run.metrics or None,
            "requests": list(run.records),
        }
        arrivals = stage.arrivals(cell)
        if arrivals is not None:
            document["cell"]["arrival"] = {
                **arrivals.to_json(),
                "start_ns": run.schedule_start_ns or 0,
                "lateness": lateness(run.records),
            }
            sweep = self.sweeps.get(stage.name)
            if sweep is not None:
                position = next(p for c, p in sweep["cells"] if c.id == cell.id)
                document["cell"]["arrival"]["sweep"] = {
                    "synchronous_rps": sweep["synchronous_rps"],
                    "ceiling_rps": sweep["ceiling_rps"],
                    "from": sweep["from"],
                    "position": position,
                    "of": stage.sweep_rates,
                }
        return document


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
    if "samples" in document:
        return f"{len(document['samples'])} samples"
    failures = document.get("failures") or []
    if document.get("passed"):
        return "passed"
    if not failures:
        return "recorded"
    first = failures[0]
    return "failed: " + str(first["message"] if isinstance(first, dict) else first)


def run_plan(
    plan: Plan, raw_dir: str | Path, *, resume: bool = False, progress: Progress | None = None
) -> RunResult:
    """Runs a plan; returns when every cell is done or a signal stopped the run.

    Raises:
        RunnerError: the folder holds another run, the plan changed since, an API key's
            variable is unset, or a simulated endpoint did not start.
    """
    progress = progress or progress_for()
    campaign = CampaignRun(plan, Path(raw_dir), resume=resume, progress=progress)
    fresh = not campaign.folder.exists()
    campaign.prepare()
    complete = False
    try:
        asyncio.run(_main(campaign))
    except _Interrupted:
        pass
    except InvalidArtifact:
        # The plan, refused by what the endpoint says of itself (its context) before
        # anything was measured: the folder this run made goes, or it would hold the
        # refused plan and refuse the corrected one.
        if fresh and _bookkeeping_only(campaign.folder):
            shutil.rmtree(campaign.folder)
        raise
    finally:
        progress.close()
        if campaign.folder.exists():
            complete = campaign.write_run_manifest()
            manifest.seal(campaign.folder, check=False, jobs=1)
    return RunResult(campaign.folder, complete, campaign.signal_name, tuple(campaign.outcomes))


def _bookkeeping_only(folder: Path) -> bool:
    """Whether a run's folder holds nothing but its plan and workload bookkeeping (and the
    seal the run wrote over them)."""
    own = {PLAN_NAME, WORKLOAD_NAME, manifest.MANIFEST_NAME, manifest.SUMS_NAME}
    return all(p.is_file() and p.name in own for p in folder.iterdir())


async def _main(campaign: CampaignRun) -> None:
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None

    def stop(name: str) -> None:
        if campaign.signal_name is None:
            campaign.signal_name = name
            task.cancel()

    handled = []
    for number, name in ((signal.SIGINT, "SIGINT"), (signal.SIGTERM, "SIGTERM")):
        try:
            loop.add_signal_handler(number, stop, name)
            handled.append(number)
        except (ValueError, RuntimeError, NotImplementedError):
            # Not the main thread, or no signal support: the caller's handling applies.
            pass
    try:
        await campaign.run()
    except asyncio.CancelledError:
        if campaign.signal_name is None:
            raise
        raise _Interrupted(campaign.signal_name) from None
    finally:
        for number in handled:
            loop.remove_signal_handler(number)
