"""Running one cell of a capacity, endurance or load stage.

Warm-up requests go first, one at a time, and are recorded with ``warmup: true`` so that
statistics can leave them out. The measured requests then run closed-loop (capacity,
endurance: ``concurrency`` workers each send their next request as soon as the previous
one ends) or open-loop (load: each request is due at its time on a schedule computed up
front, sent then whatever the others are doing, and recorded with that due time, so a
late sender shows as lateness instead of hiding the queueing a user would have seen). The
server's counters are scraped just before the measured requests and just after them.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import httpx

from ledger.measures.arrivals import offsets_ns
from runners.campaign._metrics import prefix_cache_delta, scrape
from runners.client import CHAT_PATH, HEADERS, STREAMING, EndpointClient
from runners.plan import Arm, Cell, Stage


@attrs.frozen
class Prompt:
    """One request's prompt."""

    index: int
    warmup: bool
    messages: list[dict[str, str]]
    sha256: str


def request_body(
    arm: Arm, stage: Stage, cell: Cell, messages: list[dict[str, str]]
) -> dict[str, Any]:
    """The chat-completions request of a cell (without the streaming options)."""
    body: dict[str, Any] = dict(arm.extra_body)
    body.update(arm.thinking_fields(cell.thinking))
    body.update(
        model=arm.model,
        messages=messages,
        max_tokens=stage.max_tokens,
        temperature=stage.temperature,
        seed=stage.seed,
    )
    if stage.controlled_output:
        body.update(ignore_eos=True, min_tokens=stage.max_tokens)
    return body


def request_shape(arm: Arm, stage: Stage, cell: Cell) -> dict[str, Any]:
    """What every request of a cell sends but its prompt: the path, the headers (the API
    key aside) and the body less its messages. Recorded in the cell run, so that an A/B
    comparison can tell two arms asked for the same thing (``ledger derive``)."""
    body = {**request_body(arm, stage, cell, []), **STREAMING}
    del body["messages"]
    return {"path": CHAT_PATH, "headers": dict(HEADERS), "body": body}


def output_as_requested(record: dict[str, Any], stage: Stage) -> bool | None:
    """Whether a controlled request ended by length at exactly max_tokens."""
    if not stage.controlled_output:
        return None
    usage = record.get("usage") or {}
    return (
        record.get("error") is None
        and record.get("finish_reason") == "length"
        and usage.get("completion_tokens") == stage.max_tokens
    )


@attrs.define
class CellRun:
    """What a cell produced so far; read after a cancellation too."""

    origin_ns: int
    records: list[dict[str, Any]] = attrs.Factory(list)
    metrics: dict[str, Any] = attrs.Factory(dict)
    schedule_start_ns: int | None = None
    """Where an open-loop schedule's offset 0 lies on the cell clock."""


SPIN_NS = 2_000_000
"""How long before its due time an open-loop request's task starts: the loop's timers wake
up to a millisecond late, so the task yields to the loop until its time comes instead."""


async def run_cell(
    client: EndpointClient,
    arm: Arm,
    stage: Stage,
    cell: Cell,
    prompts: list[Prompt],
    run: CellRun,
    on_record: Callable[[dict[str, Any]], None],
) -> None:
    """Sends every prompt of the cell; appends a record per request to ``run.records``."""

    def prepared(prompt: Prompt) -> httpx.Request:
        return client.chat_request(request_body(arm, stage, cell, prompt.messages))

    async def one(prompt: Prompt, scheduled_ns: int | None = None) -> None:
        request = prepared(prompt) if scheduled_ns is None else prepared_requests.pop(prompt.index)
        outcome = await client.chat(request, origin_ns=run.origin_ns)
        record: dict[str, Any] = {
            "index": prompt.index,
            "warmup": prompt.warmup,
            "prompt_sha256": prompt.sha256,
            **outcome.to_json(),
        }
        if scheduled_ns is not None:
            record["scheduled_ns"] = scheduled_ns
        record["output_as_requested"] = output_as_requested(record, stage)
        run.records.append(record)
        on_record(record)

    for prompt in (p for p in prompts if p.warmup):
        await one(prompt)
    before = await scrape(client)
    queue = [p for p in prompts if not p.warmup]
    arrivals = stage.arrivals(cell)
    prepared_requests: dict[int, httpx.Request] = {}
    if arrivals is not None:

        def prepare(prompt: Prompt) -> None:
            prepared_requests[prompt.index] = prepared(prompt)

        offsets = offsets_ns(arrivals, cell.id)
        await _open_loop(queue, offsets, arrivals.max_in_flight, run, prepare, one)
    else:
        queue.reverse()

        async def worker() -> None:
            while queue:
                await one(queue.pop())

        await asyncio.gather(*(worker() for _ in range(min(cell.concurrency, len(queue)))))
    after = await scrape(client)
    run.metrics = metrics_record(before, after)
    run.records.sort(key=lambda r: (not r["warmup"], r["index"]))


async def _open_loop(
    prompts: list[Prompt],
    offsets: list[int],
    max_in_flight: int | None,
    run: CellRun,
    prepare: Callable[[Prompt], None],
    one: Callable[[Prompt, int], Awaitable[None]],
) -> None:
    """Sends each prompt at its due time, on its own task. A request due while
    ``max_in_flight`` are outstanding waits for a slot and is sent late, never dropped.

    Each task starts shortly before its request is due and sends it itself: a task started
    at the due time would first wait for everything else the event loop had to run. Each
    request is built before it is due, and the garbage collector is paused while the
    schedule runs: a collection of a busy client's objects stops the event loop for tens
    of milliseconds, and every request due meanwhile would go out late."""
    slots = asyncio.Semaphore(max_in_flight) if max_in_flight else None
    # The first request is due a little after now, so it is not late by construction.
    start = time.perf_counter_ns() + SPIN_NS
    run.schedule_start_ns = start - run.origin_ns
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

    collecting = gc.isenabled()
    gc.disable()
    try:
        before: asyncio.Event | None = None
        for prompt, offset in zip(prompts, offsets, strict=True):
            due = start + offset
            prepare(prompt)
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
        if collecting:
            gc.enable()


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
