"""``ledger run``: a plan's arms x stages x cells, written as a raw campaign folder.

Layout of ``RAW_DIR/<campaign_id>/``::

    run-plan.json              the plan as run (anvil-serving.run-plan/v1)
    workload-manifest.json     per cell: calibration, one digest over its prompts' digests,
                               each arm's prompt tokens (anvil-serving.workload-manifest/v2)
    <arm>/<stage>/<cell>.json  one cell's settings and its parts (anvil-serving.cell-run/v2)
    <arm>/<stage>/<cell>.part-0001.jsonl, ...
                               its request records, a line each, as the requests ended
    run-manifest.json          every cell's status and digest (anvil-serving.run-manifest/v1)
    manifest.json, SHA256SUMS  the seal, as ``ledger seal`` writes it

A cell's file is written, marked incomplete, before its first request; its records go to
its parts as they end (``_records.py``), and the file is rewritten atomically as each part
closes and when the cell ends. A run stopped by SIGINT or SIGTERM closes the open part and
rewrites the cell, still marked incomplete; one stopped by SIGKILL leaves the records
written and the part it was writing. ``--resume`` keeps every complete cell and goes on
with an incomplete one from its records; one it cannot read (or a v1 one) is moved aside as
``<cell>.interrupted-<n>.json`` (evidence is never deleted) and runs again.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import shutil
import signal
import threading
from pathlib import Path

import attrs
import orjson

from ledger.errors import InvalidArtifact, RunnerError
from ledger.evidence import manifest
from ledger.exit_status import ExitStatus
from runners.campaign._cells import CellOutcome, CellRunner, kept_outcome
from runners.campaign._evidence_stages import EvidenceStages
from runners.campaign._folder import PLAN_NAME, WORKLOAD_NAME, CampaignFolder
from runners.campaign.progress import Progress, progress_for
from runners.client import EndpointClient
from runners.plan import FUNCTIONAL_KINDS, Arm, Cell, Plan, Stage, check_context
from runners.probes import evidence, gpu
from runners.probes.container_documents import ContainerWitness
from runners.simulate.serve import SimulatorProcess


@attrs.frozen
class RunResult:
    """What ``ledger run`` did."""

    folder: Path
    complete: bool
    interrupted: str | None
    """The signal that stopped the run, if one did."""
    cells: tuple[CellOutcome, ...]
    not_started: tuple[str, ...] = ()
    """An arm's startup that was not ready, one line each: the arm went no further."""

    @property
    def stopped_status(self) -> int:
        """The exit status of a run a signal stopped: 130 after SIGINT, 143 after SIGTERM,
        129 after SIGHUP."""
        stopped = {
            "SIGINT": ExitStatus.INTERRUPTED,
            "SIGTERM": ExitStatus.TERMINATED,
            "SIGHUP": ExitStatus.HANGUP,
        }
        return int(stopped.get(self.interrupted or "", ExitStatus.REFUSED))


class _Interrupted(Exception):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class CampaignRun:
    """One execution of a plan into a raw folder (fresh or resumed): the arms in turn, each
    with its evidence stages around its measured cells."""

    def __init__(
        self,
        plan: Plan,
        raw_dir: Path,
        *,
        resume: bool,
        progress: Progress,
        adds_arm: bool = False,
    ) -> None:
        self.plan = plan
        self.state = CampaignFolder(
            plan, raw_dir, resume=resume, progress=progress, adds_arm=adds_arm
        )
        self.outcomes: list[CellOutcome] = []
        self.not_started: list[str] = []
        """Why each arm whose container was not ready went no further."""
        self.signal_name: str | None = None
        self.stopping = threading.Event()
        """Set with :attr:`signal_name`: work in threads (a container's start) ends at it."""
        self.keys: dict[str, str | None] = {}
        self.context_limits: dict[str, int] = {}
        """Each arm's context as its endpoint reports it."""
        self.stages = EvidenceStages(self.state, lambda: self.signal_name)
        self.cell_runner = CellRunner(
            self.state,
            outcomes=self.outcomes,
            context_limits=self.context_limits,
            stopped_by=lambda: self.signal_name,
        )

    @property
    def folder(self) -> Path:
        return self.state.folder

    def prepare(self) -> None:
        """Checks the variables the arms take from the environment (API keys, a managed
        container's ``environment_from``), then the folder against the plan, and loads what
        an earlier run left."""
        for arm in self.plan.arms:
            _check_passed_environment(arm)
        self.keys = {arm.name: self._api_key(arm) for arm in self.plan.arms}
        self.state.prepare()

    def write_run_manifest(self) -> bool:
        return self.state.write_run_manifest()

    def _pending(self, arm: Arm) -> list[tuple[Stage, Cell]] | None:
        """The arm's cells still to run, in plan order (each complete one reported as
        skipped); None where nothing of the arm is left, evidence steps included."""
        pending = [
            (stage, cell)
            for stage in self.plan.stages
            for cell in self.state.cells_of(stage)
            if self.state.cells[(arm.name, stage.name, cell.id)] != "complete"
        ]
        for stage in self.plan.stages:
            for cell in self.state.cells_of(stage):
                if (stage, cell) not in pending:
                    label = f"{arm.name} {stage.name} {cell.id}"
                    rel = self.state.cell_path(arm, stage, cell)
                    kept = kept_outcome(self.folder, rel, arm.name, stage, cell)
                    self.state.progress.end_cell(label, kept.stats, "skipped")
                    self.outcomes.append(kept)
        steps_left = any(
            self.state.evidence[(arm.name, e.name)] != "complete" for e in self.plan.evidence
        )
        return pending if pending or steps_left else None

    async def run(self) -> None:
        if self.plan.interleave:
            await self._run_interleaved()
            return
        for arm in self.plan.arms:
            pending = self._pending(arm)
            if pending is None:
                continue
            with contextlib.ExitStack() as stack:
                base_url = _endpoint(arm, stack)
                await self._run_arm(arm, base_url, self.keys[arm.name], pending)

    async def _run_interleaved(self) -> None:
        """Every arm's endpoint at once, each cell's requests sent by the arms in turn (the
        plan refuses what this cannot measure: ``runners.plan._check_interleave``)."""
        left = {arm.name: self._pending(arm) for arm in self.plan.arms}
        arms = [arm for arm in self.plan.arms if left[arm.name] is not None]
        with contextlib.ExitStack() as stack:
            urls = {arm.name: _endpoint(arm, stack) for arm in arms}
            # No container witness: the stages that look at a container (startup,
            # restoration) are refused with interleave.
            started = [arm for arm in arms if await self._open_arm(arm, urls[arm.name], None)]
            for stage in self.plan.stages:
                for cell in self.state.cells_of(stage):
                    taking = [
                        (arm, urls[arm.name], self.keys[arm.name])
                        for arm in started
                        if (stage, cell) in (left[arm.name] or ())
                    ]
                    if taking:
                        await self.cell_runner.run_in_turns(taking, stage, cell)
            for arm in started:
                await self._close_arm(arm, urls[arm.name], None)

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
        witness = ContainerWitness(arm.container, self.stopping) if arm.container else None
        try:
            if not await self._open_arm(arm, base_url, witness):
                return
            telemetry = self.plan.evidence_of("telemetry")
            during = None
            if (
                telemetry is not None
                and self.state.evidence[(arm.name, telemetry.name)] != "complete"
            ):
                during = telemetry.settings["during"]
            for stage, group in itertools.groupby(pending, key=lambda pair: pair[0]):
                sampler = None
                if telemetry is not None and stage.name == during:
                    sampler = gpu.TelemetrySampler(telemetry.settings["interval_s"], arm.gpus)
                    started_at = evidence.utc_now()
                    await asyncio.to_thread(sampler.start)
                try:
                    for _, cell in group:
                        await self.cell_runner.run(arm, stage, cell, base_url, api_key)
                    if stage.sweep_rates is not None:
                        # On the first arm the rates are found only by the probes just run.
                        for cell in self.state.cells_of(stage):
                            if self.state.cells[(arm.name, stage.name, cell.id)] != "complete":
                                await self.cell_runner.run(arm, stage, cell, base_url, api_key)
                finally:
                    # Interrupted during the sampled stage, the samples taken still count.
                    if sampler is not None and telemetry is not None:
                        await self.stages.finish_telemetry(arm, telemetry, sampler, started_at)
            await self._close_arm(arm, base_url, witness)
        finally:
            if witness is not None:
                witness.close()

    async def _open_arm(self, arm: Arm, base_url: str, witness: ContainerWitness | None) -> bool:
        """What an arm does before its cells: its startup, its endpoint's context, the
        restoration's first look and the functional gates. False where it did not start."""
        api_key = self.keys[arm.name]
        not_started = await self.stages.startup(arm, base_url, witness)
        if not_started is not None:
            self.not_started.append(not_started)
            return False
        limit = await self._context_limit(base_url, api_key)
        if limit is not None:
            self.context_limits[arm.name] = limit
            check_context(arm.name, self.plan.stages, limit, "max_model_len at /v1/models")
        restoration = self.plan.evidence_of("restoration")
        if restoration is not None and witness is not None:
            await self.stages.restoration_before(arm, restoration, witness)
        for step in self.plan.evidence:
            if step.kind in FUNCTIONAL_KINDS:
                await self.stages.functional(arm, step, base_url, api_key)
        return True

    async def _close_arm(self, arm: Arm, base_url: str, witness: ContainerWitness | None) -> None:
        """What an arm does after its cells: the GPU reserve and the restoration."""
        reserve = self.plan.evidence_of("reserve")
        if reserve is not None:
            await self.stages.reserve(arm, reserve)
        restoration = self.plan.evidence_of("restoration")
        if restoration is not None and witness is not None:
            await self.stages.restoration_after(
                arm, restoration, witness, base_url, self.keys[arm.name]
            )

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


def _endpoint(arm: Arm, stack: contextlib.ExitStack) -> str:
    """The arm's base URL: its simulated endpoint's, started and left to ``stack`` to stop,
    or the one its plan names."""
    if arm.simulated is not None:
        return stack.enter_context(SimulatorProcess(arm.simulated)).base_url
    assert arm.base_url is not None
    return arm.base_url


def _check_passed_environment(arm: Arm) -> None:
    """Refuses, before anything runs, a variable a managed container takes from ledger's
    environment that is not set there."""
    spec = arm.container.spec if arm.container is not None else None
    for name in spec.environment_from if spec is not None else ():
        if name not in os.environ:
            raise RunnerError(
                f"arm {arm.name!r}: environment variable {name} "
                "(container environment_from) is not set"
            )


def run_plan(
    plan: Plan,
    raw_dir: str | Path,
    *,
    resume: bool = False,
    progress: Progress | None = None,
    adds_arm: bool = False,
) -> RunResult:
    """Runs a plan; returns when every cell is done or a signal stopped the run.
    ``adds_arm``: the campaign's recorded plan is ``plan`` less its last arm, whose cells
    this run measures (with ``resume``).

    Raises:
        RunnerError: the folder holds another run, the plan changed since, an API key's
            variable is unset, or a simulated endpoint did not start.
    """
    progress = progress or progress_for()
    campaign = CampaignRun(plan, Path(raw_dir), resume=resume, progress=progress, adds_arm=adds_arm)
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
    return RunResult(
        campaign.folder,
        complete,
        campaign.signal_name,
        tuple(campaign.outcomes),
        tuple(campaign.not_started),
    )


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
            campaign.stopping.set()
            task.cancel()

    handled = []
    signals = [(signal.SIGINT, "SIGINT"), (signal.SIGTERM, "SIGTERM")]
    if hasattr(signal, "SIGHUP"):
        signals.append((signal.SIGHUP, "SIGHUP"))
    for number, name in signals:
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
