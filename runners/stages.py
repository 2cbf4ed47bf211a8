"""Running one cell of a capacity or endurance stage.

Warm-up requests go first, one at a time, and are recorded with ``warmup: true`` so that
statistics can leave them out. The measured requests then run closed-loop: ``concurrency``
workers each send their next request as soon as the previous one ends. The server's
counters are scraped just before the measured requests and just after them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import attrs

from runners.client import EndpointClient
from runners.metrics import prefix_cache_delta, scrape
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

    async def one(prompt: Prompt) -> None:
        body = request_body(arm, stage, cell, prompt.messages)
        outcome = await client.chat(body, origin_ns=run.origin_ns)
        record: dict[str, Any] = {
            "index": prompt.index,
            "warmup": prompt.warmup,
            "prompt_sha256": prompt.sha256,
            **outcome.to_json(),
        }
        record["output_as_requested"] = output_as_requested(record, stage)
        run.records.append(record)
        on_record(record)

    for prompt in (p for p in prompts if p.warmup):
        await one(prompt)
    before = await scrape(client)
    queue = [p for p in prompts if not p.warmup]
    queue.reverse()

    async def worker() -> None:
        while queue:
            await one(queue.pop())

    await asyncio.gather(*(worker() for _ in range(min(cell.concurrency, len(queue)))))
    after = await scrape(client)
    run.metrics = metrics_record(before, after)
    run.records.sort(key=lambda r: (not r["warmup"], r["index"]))


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
