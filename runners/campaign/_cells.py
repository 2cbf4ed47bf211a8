"""The measured cells of a run: each cell's prompts calibrated against the endpoint, its
requests sent, and its artifact written before the first request, when a signal stops it,
and when it ends."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import socket
import time
import urllib.parse
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs

from ledger import __version__
from ledger.errors import RunnerError, printable
from ledger.formats.cell_records import CELL_RUN_V2, records
from ledger.formats.jsonio import read_json
from ledger.formats.schema import write_document
from ledger.measures.arrivals import lateness, schedule_ns
from runners.campaign._folder import WORKLOAD_NAME, CampaignFolder
from runners.campaign._records import CellParts
from runners.campaign._stages import (
    CellRun,
    Prompt,
    api_path,
    new_origin,
    request_body,
    request_shape,
    run_cell,
)
from runners.campaign._stats import CellStats, cell_stats
from runners.campaign._turns import Turns
from runners.client import EndpointClient
from runners.plan import DEFAULT_MIN_SUCCESS, MAX_CONTEXT_TARGET, Arm, Cell, Stage
from runners.probes import evidence
from runners.workload import (
    Calibration,
    Filler,
    Probe,
    build_messages,
    calibrate,
    prompt_bytes,
    prompt_digest,
)

CELL_SCHEMA = CELL_RUN_V2
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
    min_success: int = DEFAULT_MIN_SUCCESS
    """The successful measured requests its stage asks of each cell (``min_success``)."""
    first_error: str | None = None
    """Where the cell fell short of ``min_success``: its first measured request's error
    (``class: message``, as recorded, on one line); None otherwise."""


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
        self.confirmed: set[tuple[str, str]] = set()
        """(stage, cell) whose prompts this process built: their recorded digest holds."""
        """The signal that stopped the run, if one did."""

    async def run(
        self,
        arm: Arm,
        stage: Stage,
        cell: Cell,
        base_url: str,
        api_key: str | None,
        turns: Turns | None = None,
        counters_shared: bool = False,
    ) -> None:
        """Runs one arm's cell; with ``turns``, each request waits for the arm's turn.
        ``counters_shared``: the endpoint also serves another arm taking turns, so its
        counters are not this arm's alone."""
        async with EndpointClient(
            base_url,
            concurrency=cell.concurrency,
            deadlines=self.plan.deadlines,
            api_key=api_key,
        ) as client:
            await self._run_one(client, arm, stage, cell, turns, counters_shared)

    async def run_in_turns(
        self, arms: Sequence[tuple[Arm, str, str | None]], stage: Stage, cell: Cell
    ) -> None:
        """Runs one cell of every arm in ``arms`` (each with its base URL and API key), the
        arms taking turns one request at a time (:class:`Turns`)."""
        first, url, key = arms[0]
        # The cell's prompts are sized once, as the first arm of a plan run arm after arm
        # sizes them; the others find them in the workload.
        async with EndpointClient(
            url, concurrency=1, deadlines=self.plan.deadlines, api_key=key
        ) as client:
            await self._calibration(client, first, stage, cell)
        turns = Turns(arm.name for arm, _, _ in arms)
        endpoints = [endpoint_of(url) for _, url, _ in arms]
        first_outcome = len(self.outcomes)

        async def in_turn(index: int, arm: Arm, base_url: str, api_key: str | None) -> None:
            shared = any(
                one_endpoint(endpoints[index], other)
                for at, other in enumerate(endpoints)
                if at != index
            )
            try:
                await self.run(arm, stage, cell, base_url, api_key, turns, shared)
            finally:
                await turns.leave(arm.name)

        try:
            async with asyncio.TaskGroup() as group:
                for index, (arm, base_url, api_key) in enumerate(arms):
                    group.create_task(in_turn(index, arm, base_url, api_key))
        except BaseExceptionGroup as failed:
            if self.stopped_by() is not None:
                # A signal stopped the run: it ends as a signal does, whatever an arm
                # raised on its way out.
                raise asyncio.CancelledError from None
            # One arm's failure ended the others' cells (each kept as incomplete, to be
            # resumed); the run stops on the first failure as it would arm after arm.
            raise failed.exceptions[0] from None
        # The closing table lists the arms of a cell in the plan's order, not as they ended.
        order = {arm.name: index for index, (arm, _, _) in enumerate(arms)}
        self.outcomes[first_outcome:] = sorted(
            self.outcomes[first_outcome:], key=lambda outcome: order[outcome.arm]
        )

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
            request = client.chat_request(body, api_path(arm))
            outcome = await client.chat(request, origin_ns=origin)
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
        calibration = await self._calibrate(arm, stage, cell, probe, hint)
        prompts = self._prompts_digest(
            calibration, stage, cell, stage.warmup + stage.measured(cell)
        )
        prompts["warmup"] = stage.warmup
        entry = {
            "stage": stage.name,
            "cell": cell.id,
            "context_target": cell.context_target,
            "thinking": cell.thinking,
            "calibration": calibration.to_json(),
            "prompts": prompts,
            "prompt_tokens": {},
        }
        self.state.workload[key] = entry
        self.confirmed.add(key)
        self.state.write_workload()
        return entry

    async def _calibrate(
        self, arm: Arm, stage: Stage, cell: Cell, probe: Probe, hint: int | None
    ) -> Calibration:
        """The cell's filler size, found against the arm's token count; a dataset's prompts
        are sent as they are, unsized."""
        if stage.dataset is not None:
            return Calibration(arm.name, cell.context_target, 0, None, (), dataset=True)
        # Every filler word is at least one token, so the endpoint's context (or, when it
        # reports none, the plan's cap) bounds the prompt calibration may build.
        return await calibrate(
            arm.name,
            cell.context_target,
            probe,
            hint_words=hint,
            max_words=self.context_limits.get(arm.name, MAX_CONTEXT_TARGET),
        )

    def _prompts_digest(
        self, calibration: Calibration, stage: Stage, cell: Cell, count: int
    ) -> dict[str, Any]:
        """The ``prompts`` of a cell's workload entry: its prompts built one at a time and
        let go, so that a cell of a million requests is never in memory."""
        digest = hashlib.sha256()
        size = 0
        for index in range(count):
            messages = self._messages(calibration, stage, cell, index)
            digest.update(prompt_digest(messages).encode() + b"\n")
            size += len(prompt_bytes(messages))
        return {"count": count, "warmup": 0, "bytes": size, "sha256": digest.hexdigest()}

    def _messages(
        self, calibration: Calibration, stage: Stage, cell: Cell, index: int
    ) -> list[dict[str, str]]:
        if stage.dataset is not None:
            return [{"role": "user", "content": stage.dataset.prompts[index].text}]
        tokens, _ = stage.lengths(cell, index)
        return build_messages(
            self.filler,
            calibration.words_for(tokens),
            cell_id=cell.id,
            index=index,
            prefix=self.plan.prefix,
            seed=self.plan.seed,
        )

    async def _run_one(
        self,
        client: EndpointClient,
        arm: Arm,
        stage: Stage,
        cell: Cell,
        turns: Turns | None,
        counters_shared: bool,
    ) -> None:
        key = (arm.name, stage.name, cell.id)
        rel = self.state.cell_path(arm, stage, cell)
        path = self.state.folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        label = f"{arm.name} {stage.name} {cell.id}"
        entry = await self._calibration(client, arm, stage, cell)
        calibration = Calibration.from_json(entry["calibration"])
        total = entry["prompts"]["count"]
        # A cell's prompts are built once more, one at a time, only where an earlier run
        # recorded their digest: a million of them take seconds.
        if (stage.name, cell.id) not in self.confirmed:
            found = self._prompts_digest(calibration, stage, cell, total)["sha256"]
            if found != entry["prompts"]["sha256"]:
                raise RunnerError(
                    f"{WORKLOAD_NAME}: the prompts of {cell.id} no longer have their recorded "
                    "digest"
                )
            self.confirmed.add((stage.name, cell.id))

        def prompt(index: int) -> Prompt:
            messages = self._messages(calibration, stage, cell, index)
            _, max_tokens = stage.lengths(cell, index)
            return Prompt(
                index, index < stage.warmup, messages, prompt_digest(messages), max_tokens
            )

        earlier = self.state.resumable.get(key)
        run = CellRun(new_origin())
        resumed: list[dict[str, Any]] = []
        started_at = evidence.utc_now()
        if earlier is not None:
            started_at = earlier["started_at"]
            resumed = list(earlier.get("resumed", ()))
            run.resumed = True

        def document(status: str, reason: str | None) -> dict[str, Any]:
            header = self._cell_document(arm, stage, cell, run, entry, started_at, status, reason)
            header["parts"] = parts.listed
            header["records"] = parts.records
            if resumed:
                header["resumed"] = resumed
            return header

        parts = CellParts(
            self.state.folder, rel, lambda: write_document(path, document("incomplete", "running"))
        )
        done = bytearray(total)
        self.state.progress.start_cell(label, total)
        if earlier is not None:
            parts.reopen(earlier["parts"])
            resumed.append(self._take_up(parts, earlier, stage, cell, run, done, label))
        write_document(path, document("incomplete", "running"))
        self.state.cells[key] = "incomplete"

        def on_record(record: dict[str, Any]) -> None:
            parts.append(record)
            self.state.progress.request_done(label, record)

        todo = (index for index in range(total) if not done[index])
        turn = None if turns is None else functools.partial(turns.turn, arm.name)
        try:
            await run_cell(
                client, arm, stage, cell, prompt, todo, run, on_record, turn, counters_shared
            )
        except asyncio.CancelledError:
            self._note_clock(resumed, run)
            parts.close_part()
            stopped_by = self.stopped_by()
            if stopped_by is None and turns is not None:
                stopped_by = "the failure of an arm taking turns with it"
            header = document("incomplete", f"interrupted by {stopped_by}")
            self._finish(header, parts)
            write_document(path, header)
            stats = cell_stats(parts.on_disk(header))
            self.state.progress.end_cell(label, stats, "incomplete")
            self.outcomes.append(CellOutcome(arm.name, stage.name, cell.id, "incomplete", stats))
            raise
        except BaseException:
            parts.abandon()
            raise
        self._note_clock(resumed, run)
        parts.close_part()
        header = document("complete", None)
        self._finish(header, parts)
        write_document(path, header)
        self.state.cells[key] = "complete"
        stats = cell_stats(parts.on_disk(header))
        prompted, total = stats.prompt_counts
        entry["prompt_tokens"][arm.name] = {"requests": prompted, "total": total}
        self.state.write_workload()
        self.state.progress.end_cell(label, stats, "complete")
        # Read again only where the cell fell short: the line that says so names the error.
        short = stats.requests - stats.failed < stage.min_success
        first = _first_error(parts.on_disk(header)) if short else None
        self.outcomes.append(
            CellOutcome(arm.name, stage.name, cell.id, "complete", stats, stage.min_success, first)
        )

    def _take_up(
        self,
        parts: CellParts,
        earlier: dict[str, Any],
        stage: Stage,
        cell: Cell,
        run: CellRun,
        done: bytearray,
        label: str,
    ) -> dict[str, Any]:
        """What an interrupted run left of a cell: each request on disk marked done and
        counted, the clock set to go on after the last, and an open loop's schedule start
        found again from the due times recorded (the cell's file, written before the
        schedule started, says none if the run was killed before a part closed). Returns
        the cell's ``resumed`` entry.

        Raises:
            RunnerError: a record is of a request the cell does not have.
        """
        arrivals = stage.arrivals(cell)
        offsets = schedule_ns(arrivals, cell.id) if arrivals is not None else None
        last_end = count = 0
        for record in parts.on_disk(earlier):
            index = record["index"]
            if not 0 <= index < len(done):
                raise RunnerError(f"cannot resume {parts.cell_rel}: a record of request {index}")
            if done[index]:
                raise RunnerError(
                    f"cannot resume {parts.cell_rel}: request {index} is recorded twice"
                )
            done[index] = 1
            last_end = max(last_end, record["end_ns"] or record["sent_ns"])
            count += 1
            due = record.get("scheduled_ns")
            if offsets is not None and due is not None and not record["warmup"]:
                run.schedule_start_ns = due - offsets[index - stage.warmup]
            self.state.progress.counted(label, record)
        # The clock goes on from the last record; an open loop sets it again so that its
        # schedule still holds.
        run.origin_ns -= last_end
        run.clock_ns = last_end
        return {"at": evidence.utc_now(), "records": count, "clock_ns": last_end}

    @staticmethod
    def _note_clock(resumed: list[dict[str, Any]], run: CellRun) -> None:
        """A resumed open loop set its clock again: the entry says where it starts."""
        if resumed and run.clock_ns is not None:
            resumed[-1]["clock_ns"] = run.clock_ns

    @staticmethod
    def _finish(header: dict[str, Any], parts: CellParts) -> None:
        """What a cell's header states of all its records once they are on disk: an open
        loop's lateness."""
        arrival = header["cell"].get("arrival")
        if arrival is not None:
            arrival["lateness"] = lateness(parts.on_disk(header))

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
        }
        arrivals = stage.arrivals(cell)
        if arrivals is not None:
            document["cell"]["arrival"] = {
                **arrivals.to_json(),
                "start_ns": run.schedule_start_ns or 0,
                "lateness": lateness(()),
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


def endpoint_of(url: str) -> tuple[str, frozenset[str], int | None]:
    """Where a base URL's requests go: its scheme, the addresses its host resolves to (the
    name itself where it does not resolve) and its port, so that ``localhost`` and
    ``127.0.0.1`` on one port are one endpoint."""
    parts = urllib.parse.urlsplit(url)
    host = (parts.hostname or "").lower()
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    try:
        found = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
        addresses = frozenset(str(info[4][0]) for info in found)
    except (OSError, UnicodeError):
        addresses = frozenset((host,))
    return parts.scheme, addresses, port


def one_endpoint(
    first: tuple[str, frozenset[str], int | None], second: tuple[str, frozenset[str], int | None]
) -> bool:
    """Whether two :func:`endpoint_of` may be one server: one scheme and port, and an
    address in common."""
    return first[0] == second[0] and first[2] == second[2] and bool(first[1] & second[1])


def kept_outcome(folder: Path, rel: str, arm: str, stage: Stage, cell: Cell) -> CellOutcome:
    """A cell an earlier run completed, read back from its parts: a resumed run judges it
    against ``min_success`` as it judges the cells it measures, and shows its figures."""
    header = read_json(folder / rel)
    stats = cell_stats(records(folder, header))
    short = stats.requests - stats.failed < stage.min_success
    first = _first_error(records(folder, header)) if short else None
    return CellOutcome(arm, stage.name, cell.id, "skipped", stats, stage.min_success, first)


def _first_error(records: Iterable[dict[str, Any]]) -> str | None:
    """The first failed measured request's error, in the order the requests ended: what
    the server or the client said, on one line, control characters escaped."""
    for record in records:
        error = record.get("error")
        if error is not None and not record.get("warmup"):
            return printable(" ".join(f"{error['class']}: {error['message']}".split()))
    return None
