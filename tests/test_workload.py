"""Deterministic prompts, and calibration that lands within 2 % below the target."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from runners.client import EndpointClient
from runners.simulate.serve import SimulatorProcess
from runners.workload import (
    TOLERANCE,
    Filler,
    build_messages,
    calibrate,
    prompt_bytes,
    prompt_digest,
)


def test_prompts_are_deterministic_from_the_seed() -> None:
    one = build_messages(
        Filler(3), 500, cell_id="ctx1024-c1-nothink", index=4, prefix="shared", seed=3
    )
    two = build_messages(
        Filler(3), 500, cell_id="ctx1024-c1-nothink", index=4, prefix="shared", seed=3
    )
    other = build_messages(
        Filler(4), 500, cell_id="ctx1024-c1-nothink", index=4, prefix="shared", seed=4
    )
    assert prompt_bytes(one) == prompt_bytes(two)
    assert prompt_digest(one) != prompt_digest(other)


def test_filler_of_n_words_is_a_prefix_of_n_plus_one() -> None:
    filler = Filler(0)
    longer = filler.text(101)
    assert longer.startswith(filler.text(100))
    assert len(filler.text(100).split()) == 100


@pytest.mark.parametrize("prefix", ["shared", "unique"])
def test_prefix_modes(prefix: str) -> None:
    filler = Filler(1)
    prompts = [
        build_messages(filler, 200, cell_id="c", index=i, prefix=prefix, seed=1)[0]["content"]
        for i in range(3)
    ]
    assert len(set(prompts)) == 3
    starts = {p[:40] for p in prompts}
    # Shared: the same filler first; unique: a per-request session number first.
    assert len(starts) == (1 if prefix == "shared" else 3)
    assert len({len(p) for p in prompts}) == 1


def test_calibration_on_a_linear_tokenizer() -> None:
    probes: list[int] = []

    async def probe(words: int) -> int:
        probes.append(words)
        return 37 + int(words * 1.37)

    calibration = asyncio.run(calibrate("a", 100_000, probe, hint_words=None, max_words=1_000_000))
    assert calibration.ok
    assert calibration.prompt_tokens is not None
    assert 100_000 * (1 - TOLERANCE) <= calibration.prompt_tokens <= 100_000
    assert len(probes) <= 4


def test_calibration_failure_is_recorded_not_raised() -> None:
    async def refused(words: int) -> int | str:
        return "context-exceeded: too long" if words else 30

    calibration = asyncio.run(calibrate("a", 4096, refused, hint_words=None, max_words=1_000_000))
    assert not calibration.ok
    assert calibration.error is not None and "context-exceeded" in calibration.error
    assert calibration.filler_words > 0


@pytest.mark.parametrize("target", [1024, 4096, 30000])
def test_calibration_against_the_simulated_server(
    simulator: Callable[..., SimulatorProcess], target: int
) -> None:
    sim = simulator(decode_tok_s=5000.0, prefill_tok_s=1e7)
    filler = Filler(9)

    async def run() -> int | None:
        async with EndpointClient(sim.base_url, concurrency=1) as client:

            async def probe(words: int) -> int | str:
                messages = build_messages(
                    filler, words, cell_id="x", index=-1, prefix="shared", seed=9
                )
                body = {"model": "anvil-sim", "messages": messages, "max_tokens": 1}
                record = await client.chat(body, origin_ns=time.perf_counter_ns())
                assert record.usage is not None
                return record.usage["prompt_tokens"]

            calibration = await calibrate(
                "sim", target, probe, hint_words=None, max_words=1_000_000
            )
            assert calibration.ok, calibration
            return calibration.prompt_tokens

    tokens = asyncio.run(run())
    assert tokens is not None
    assert target * (1 - TOLERANCE) <= tokens <= target
