"""The measured cells of a run: each cell's prompts calibrated against the endpoint, its
requests sent, and its artifact written before the first request, when a signal stops it,
and when it ends."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import attrs

from ledger import __version__
from ledger.errors import RunnerError
from ledger.formats.schema import write_document
from ledger.measures.arrivals import lateness
from runners.campaign._folder import WORKLOAD_NAME, CampaignFolder
from runners.campaign._stages import (
    CellRun,
    Prompt,
    new_origin,
    request_body,
    request_shape,
    run_cell,
)
from runners.campaign._stats import CellStats, cell_stats
from runners.client import EndpointClient
from runners.plan import MAX_CONTEXT_TARGET, Arm, Cell, Stage
from runners.probes import evidence
from runners.workload import (
    Calibration,
    Filler,
    build_messages,
    calibrate,
    prompt_bytes,
    prompt_digest,
)

CELL_SCHEMA = "anvil-serving.cell-run/v1"
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


class CellRunner:
    """Runs measured cells into a campaign folder, adding a line to the run's table for each."""

    def __init__(
        self,
        state: CampaignFolder,
        *,
        outcomes: list[CellOutcome],
        context_limits: dict[str, int],
        stopped_by: Callable[[], str | None],
    ) -> None:
        self.state = state
        self.plan = state.plan
        self.filler = Filler(state.plan.seed)
        self.outcomes = outcomes
        self.context_limits = context_limits
        """Each arm's context as its endpoint reports it."""
        self.stopped_by = stopped_by
        """The signal that stopped the run, if one did."""

    async def run(
        self, arm: Arm, stage: Stage, cell: Cell, base_url: str, api_key: str | None
    ) -> None:
        async with EndpointClient(
            base_url,
            concurrency=cell.concurrency,
            deadlines=self.plan.deadlines,
            api_key=api_key,
        ) as client:
            await self._run_one(client, arm, stage, cell)

    async def _calibration(
        self, client: EndpointClient, arm: Arm, stage: Stage, cell: Cell
    ) -> dict[str, Any]:
        key = (stage.name, cell.id)
        entry = self.state.workload.get(key)
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
                for e in self.state.workload.values()
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
        self.state.workload[key] = entry
        self.state.write_workload()
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
        rel = self.state.cell_path(arm, stage, cell)
        path = self.state.folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        label = f"{arm.name} {stage.name} {cell.id}"
        started_at = evidence.utc_now()
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
        self.state.cells[key] = "incomplete"
        self.state.progress.start_cell(label, len(prompts))
        try:
            await run_cell(client, arm, stage, cell, prompts, run, self.state.progress.request_done)
        except asyncio.CancelledError:
            write_document(path, document("incomplete", f"interrupted by {self.stopped_by()}"))
            self.state.progress.end_cell(label, cell_stats(run.records), "incomplete")
            self.outcomes.append(
                CellOutcome(arm.name, stage.name, cell.id, "incomplete", cell_stats(run.records))
            )
            raise
        write_document(path, document("complete", None))
        self.state.cells[key] = "complete"
        for record in run.records:
            tokens = (record.get("usage") or {}).get("prompt_tokens")
            entry["prompts"][record["index"]]["prompt_tokens"][arm.name] = tokens
        self.state.write_workload()
        stats = cell_stats(run.records)
        self.state.progress.end_cell(label, stats, "complete")
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
            sweep = self.state.sweeps.get(stage.name)
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
