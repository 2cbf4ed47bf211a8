"""Running one cell of a capacity, endurance or load stage.

Warm-up requests go first, one at a time, and are recorded with ``warmup: true`` so that
statistics can leave them out. The measured requests then run closed-loop (capacity,
endurance: ``concurrency`` workers each send their next request as soon as the previous
one ends) or open-loop (load: each request is due at its time on a schedule computed up
front, sent then whatever the others are doing, and recorded with that due time, so a
late sender shows as lateness instead of hiding the queueing a user would have seen). The
server's counters are scraped just before the measured requests and just after them.
Where arms take turns (:mod:`runners.campaign._turns`), each request waits for its arm's,
and the cell's clock stands still while it waits.
Prompts are built as their requests go out, and records leave as they end: the runner
holds no more of a cell than its requests in flight.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import attrs
import httpx

from ledger.measures.arrivals import MAX_IN_FLIGHT, schedule_ns
from runners.campaign._metrics import prefix_cache_delta, scrape
from runners.client import CHAT_PATH, COMPLETIONS_PATH, HEADERS, STREAMING, EndpointClient
from runners.plan import Arm, Cell, Stage


@attrs.frozen
class Prompt:
    """One request's prompt."""

    index: int
    warmup: bool
    messages: list[dict[str, str]]
    sha256: str
    max_tokens: int | None = None
    """Its own max_tokens where the stage spreads them (``range_ratio``); None: the
    stage's."""


def request_body(
    arm: Arm,
    stage: Stage,
    cell: Cell,
    messages: list[dict[str, str]],
    max_tokens: int | None = None,
) -> dict[str, Any]:
    """The request of a cell (without the streaming options), for the arm's API: a chat
    completion, or a completion whose prompt is the user message's text (no chat template,
    so no thinking switch); ``max_tokens`` where the request has its own."""
    tokens = stage.max_tokens if max_tokens is None else max_tokens
    body: dict[str, Any] = dict(arm.extra_body)
    if arm.api == "completions":
        body.update(model=arm.model, prompt="".join(m["content"] for m in messages))
    else:
        body.update(arm.thinking_fields(cell.thinking))
        body.update(model=arm.model, messages=messages)
    body.update(max_tokens=tokens, temperature=stage.temperature, seed=stage.seed)
    if stage.controlled_output:
        body.update(ignore_eos=True, min_tokens=tokens)
    return body


def request_shape(arm: Arm, stage: Stage, cell: Cell) -> dict[str, Any]:
    """What every request of a cell sends but its prompt: the path, the headers (the API
    key aside) and the body less its messages. Recorded in the cell run, so that an A/B
    comparison can tell two arms asked for the same thing (``ledger derive``)."""
    body = {**request_body(arm, stage, cell, []), **STREAMING}
    body.pop("messages", None)
    body.pop("prompt", None)
    return {"path": api_path(arm), "headers": dict(HEADERS), "body": body}


def api_path(arm: Arm) -> str:
    """The path under the arm's base URL that its workload requests go to."""
    return COMPLETIONS_PATH if arm.api == "completions" else CHAT_PATH


def output_as_requested(record: dict[str, Any], stage: Stage) -> bool | None:
    """Whether a controlled request ended by length at exactly max_tokens."""
    if not stage.controlled_output:
        return None
    usage = record.get("usage") or {}
    return (
        record.get("error") is None
        and record.get("finish_reason") == "length"
        and usage.get("completion_tokens") == record.get("max_tokens", stage.max_tokens)
    )


@attrs.define
class CellRun:
    """What a cell's run knows while it runs; its records go to disk as they come."""

    origin_ns: int
    """The clock reading its record times are relative to."""
    metrics: dict[str, Any] = attrs.Factory(dict)
    schedule_start_ns: int | None = None
    """Where an open-loop schedule's offset 0 lies on the cell clock (found again from the
    due times recorded, when a run resumes the cell)."""
    clock_ns: int | None = None
    """Where a resumed run's clock starts on the cell clock, once it is set."""
    resumed: bool = False
    """Whether the run goes on with a cell an earlier run left (its server counters before
    the interruption are not this run's)."""


BACKLOG = 1024
"""Requests made and waiting for a slot at most, beyond those in flight: a sender behind
its schedule held every request due meanwhile, built, in memory (600 MiB after a minute
behind at 1,000 requests per second)."""

SPIN_NS = 2_000_000
"""How long before its due time an open-loop request's task starts: the loop's timers wake
up to a millisecond late, so the task yields to the loop until its time comes instead."""


async def run_cell(
    client: EndpointClient,
    arm: Arm,
    stage: Stage,
    cell: Cell,
    prompts: Callable[[int], Prompt],
    todo: Iterable[int],
    run: CellRun,
    on_record: Callable[[dict[str, Any]], None],
    turn: Callable[[], AbstractAsyncContextManager[None]] | None = None,
    counters_shared: bool = False,
) -> None:
    """Sends the prompts of the indexes ``todo`` (ascending: warm-ups first), handing each
    request's record to ``on_record`` as it ends. With ``turn``, each request is sent in
    the arm's turn (:class:`~runners.campaign._turns.Turns`); ``counters_shared``: the
    endpoint's counters also count another arm's requests, so none are recorded."""

    def prepared(prompt: Prompt) -> httpx.Request:
        return client.chat_request(
            request_body(arm, stage, cell, prompt.messages, prompt.max_tokens), api_path(arm)
        )

    async def one(prompt: Prompt, scheduled_ns: int | None = None) -> None:
        request = prepared(prompt) if scheduled_ns is None else prepared_requests.pop(prompt.index)
        if turn is None:
            outcome = await client.chat(request, origin_ns=run.origin_ns)
        else:
            asked = time.perf_counter_ns()
            async with turn():
                # The arm's clock stands still while the others take their turns: its
                # record times, and every rate over its span, are its own time with the
                # endpoint, as if it had run alone (docs/guides/runs.md).
                run.origin_ns += time.perf_counter_ns() - asked
                outcome = await client.chat(request, origin_ns=run.origin_ns)
        record: dict[str, Any] = {
            "index": prompt.index,
            "warmup": prompt.warmup,
            "prompt_sha256": prompt.sha256,
            **outcome.to_json(),
        }
        if scheduled_ns is not None:
            record["scheduled_ns"] = scheduled_ns
        if stage.range_ratio or stage.dataset is not None:
            record["max_tokens"] = prompt.max_tokens
        record["output_as_requested"] = output_as_requested(record, stage)
        on_record(record)

    indexes = iter(todo)
    queue: Iterator[int] = indexes
    for index in indexes:
        if index >= stage.warmup:
            queue = itertools.chain((index,), indexes)
            break
        await one(prompts(index))
    before = await scrape(client)
    arrivals = stage.arrivals(cell)
    prepared_requests: dict[int, httpx.Request] = {}
    if arrivals is not None:

        def prepare(index: int) -> Prompt:
            prompt = prompts(index)
            prepared_requests[index] = prepared(prompt)
            return prompt

        offsets = schedule_ns(arrivals, cell.id)
        await _open_loop(queue, stage.warmup, offsets, arrivals.max_in_flight, run, prepare, one)
    else:

        async def worker() -> None:
            for index in queue:
                await one(prompts(index))

        await asyncio.gather(*(worker() for _ in range(cell.concurrency)))
    after = await scrape(client)
    if counters_shared:
        run.metrics = metrics_record(
            "the arms took turns on one endpoint: its counters count every arm's requests",
            after,
        )
    elif run.resumed:
        run.metrics = metrics_record(
            "the cell was resumed: the server's counters before the interruption are not "
            "this run's",
            after,
        )
    else:
        run.metrics = metrics_record(before, after)


async def _open_loop(
    queue: Iterable[int],
    warmup: int,
    offsets: Sequence[int],
    max_in_flight: int | None,
    run: CellRun,
    prepare: Callable[[int], Prompt],
    one: Callable[[Prompt, int], Awaitable[None]],
) -> None:
    """Sends each request at its due time, on its own task. A request due while
    ``max_in_flight`` are outstanding waits for a slot and is sent late, never dropped.

    Each task starts shortly before its request is due and sends it itself: a task started
    at the due time would first wait for everything else the event loop had to run. Each
    request is built before it is due, and the objects alive when the schedule starts are
    frozen out of the garbage collector's walks: a collection of a busy client's objects
    stopped the event loop for tens of milliseconds, and every request due meanwhile went
    out late. (Pausing the collector instead held every response's reference cycles until
    the cell ended: 20 KB a request, gigabytes in an hour-long cell.)

    A resumed cell keeps its schedule: the run's clock is set so that the first request
    still to send is due now, and the rest follow at their offsets."""
    slots = asyncio.Semaphore(max_in_flight) if max_in_flight else None
    outstanding = (max_in_flight or MAX_IN_FLIGHT) + BACKLOG
    pending = iter(queue)
    first = next(pending, None)
    if first is None:
        return
    pending = itertools.chain((first,), pending)
    # Everything alive now (the client, the schedule) is moved out of the collector's
    # reach: a collection then walks only what the requests made since, which streaming
    # their records keeps small, instead of stopping the loop for tens of milliseconds.
    gc.collect()
    gc.freeze()
    # The first request is due a little after now, so it is not late by construction.
    now = time.perf_counter_ns() + SPIN_NS
    if run.schedule_start_ns is None:
        run.schedule_start_ns = now - run.origin_ns
    else:
        run.origin_ns = now - (run.schedule_start_ns + offsets[first - warmup])
        run.clock_ns = now - run.origin_ns
    start = run.origin_ns + run.schedule_start_ns
    tasks: set[asyncio.Task[None]] = set()

    async def send(
        prompt: Prompt, due: int, before: asyncio.Event | None, mine: asyncio.Event
    ) -> None:
        while time.perf_counter_ns() < due:
            await asyncio.sleep(0)
        # A stall of the loop can let a later task see its due time pass first: each
        # waits until the one due before it is queued for a slot, so they queue in order.
        if before is not None and not before.is_set():
            await before.wait()
        mine.set()
        if slots is not None:
            await slots.acquire()
        try:
            await one(prompt, due - run.origin_ns)
        finally:
            if slots is not None:
                slots.release()

    try:
        before: asyncio.Event | None = None
        for index in pending:
            while len(tasks) >= outstanding:
                # Behind its schedule: the requests already late wait for a slot in order
                # whatever is made next, so the next is made once one of them is done.
                await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            due = start + offsets[index - warmup]
            prompt = prepare(index)
            wait = due - SPIN_NS - time.perf_counter_ns()
            if wait > 0:
                await asyncio.sleep(wait / 1e9)
            mine = asyncio.Event()
            task = asyncio.create_task(send(prompt, due, before, mine))
            before = mine
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        raise
    finally:
        gc.unfreeze()


def metrics_record(before: dict[str, float] | str, after: dict[str, float] | str) -> dict[str, Any]:
    """The cell's ``metrics`` member: both scrapes and the prefix-cache difference."""
    if isinstance(before, str) or isinstance(after, str):
        reason = before if isinstance(before, str) else after
        return {
            "available": False,
            "reason": reason,
            "before": None,
            "after": None,
            "prefix_cache": None,
        }
    return {
        "available": True,
        "reason": None,
        "before": before,
        "after": after,
        "prefix_cache": prefix_cache_delta(before, after),
    }


def new_origin() -> int:
    """The clock reading a cell's record times are relative to."""
    return time.perf_counter_ns()
