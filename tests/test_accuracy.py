"""The client's clock against the server's: what the client adds to every TTFT within 1 ms,
the decode rate within 2 %.

The simulated endpoint logs, per request, when it received the request and when it sent
the first content token (its own monotonic clock), and it sends token ``i`` at
``first + i / decode_tok_s``. The client measures the same request from its side; the
difference is what the client adds or loses, plus loopback latency.

A stall of either process, or of the machine, only ever adds to a request's error, and by
how much depends on who else uses the cores; a fault of the client (a stamp in the wrong
place, work before it) adds to every request. So the bound that finds such a fault is on
the errors' 10th percentile, which a stall of some requests does not move; the 90th is held
only to a bound no working client nears on a busy machine (one CI machine measured 6 to 10
ms at concurrency 32 in three runs in a row, with its 10th percentile unknown).
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
from collections.abc import Callable

import httpx
import pytest

from runners.campaign._stats import request_metrics
from runners.client import Deadlines, EndpointClient, RequestRecord
from runners.simulate.serve import SimulatorProcess

# Timing-sensitive: `make test` runs these alone, after the parallel suite.
pytestmark = pytest.mark.accuracy

DECODE_TOK_S = 50.0
TOKENS = 65
STAGGER_S = 0.004
ATTEMPTS = 3
OWN_TTFT_MS = 1.0
"""Bound on the 10th percentile of the TTFT error: what the client adds to every request."""
SPREAD_TTFT_MS = 25.0
"""Bound on the 90th percentile: a stamp that waits on other streams' work, not a stall."""
DECODE_ERROR = 0.02


async def _run(url: str, concurrency: int, requests: int) -> list[RequestRecord]:
    body = {
        "model": "anvil-sim",
        "messages": [{"role": "user", "content": "Summarize the timing model in one line."}],
        "max_tokens": TOKENS,
        "ignore_eos": True,
    }
    async with EndpointClient(url, concurrency=concurrency, deadlines=Deadlines()) as client:
        # A warm-up round opens the pool's connections, as a stage's warm-up requests do.
        warm = {**body, "max_tokens": 2}
        await asyncio.gather(*(client.chat(warm, origin_ns=0) for _ in range(concurrency)))
        origin = time.perf_counter_ns()
        queue = list(range(requests))
        records: list[RequestRecord] = []

        async def worker(position: int) -> None:
            # Staggered starts: 32 requests arriving in the same instant keep the simulated
            # server (one Python process) busy for milliseconds before it can stamp the
            # last arrival, which would measure the simulator, not the client.
            await asyncio.sleep(position * STAGGER_S)
            while queue:
                queue.pop()
                records.append(await client.chat(body, origin_ns=origin))

        await asyncio.gather(*(worker(i) for i in range(concurrency)))
        return records


@pytest.mark.parametrize("concurrency", [1, 32])
def test_ttft_and_decode_match_the_servers_schedule(
    simulator: Callable[..., SimulatorProcess], concurrency: int
) -> None:
    sim = simulator(
        decode_tok_s=DECODE_TOK_S,
        prefill_tok_s=20000.0,
        overhead_ms=5.0,
        max_running_requests=64,
        prefix_cache=False,
    )
    # The best of three runs is the client's own error, and each run is printed.
    seen: list[tuple[float, float, float]] = []
    for _ in range(ATTEMPTS):
        seen.append(_measure(sim, concurrency))
        if _within(*seen[-1]):
            break
    assert any(_within(*errors) for errors in seen), seen


def _within(ttft_p10: float, ttft_p90: float, decode_p90: float) -> bool:
    return ttft_p10 < OWN_TTFT_MS and ttft_p90 < SPREAD_TTFT_MS and decode_p90 < DECODE_ERROR


def _measure(sim: SimulatorProcess, concurrency: int) -> tuple[float, float, float]:
    """One run's 10th and 90th percentiles of the TTFT error (ms) and the 90th of the decode
    rate error."""
    # Everything pytest collected (hundreds of test modules) stays in the heap; a full
    # collection of it inside the timed run would stall the client's stamps by milliseconds
    # and measure the test suite's size, not the client. Freezing moves it out of reach.
    gc.collect()
    gc.freeze()
    try:
        records = asyncio.run(_run(sim.base_url, concurrency, max(8, 2 * concurrency)))
    finally:
        gc.unfreeze()
    assert all(r.error is None for r in records)
    log = {
        e["id"]: e
        for e in httpx.get(sim.root_url + "/sim/requests", trust_env=False).json()["requests"]
    }
    ttft_errors = []
    decode_errors = []
    for record in records:
        server = log[record.response_id]
        server_ttft_ms = (server["first_content_sent_ns"] - server["received_ns"]) / 1e6
        measured = request_metrics(record.to_json() | {"usage": record.usage})
        assert measured["ttft_ms"] is not None and measured["decode_tok_s"] is not None
        ttft_errors.append(abs(measured["ttft_ms"] - server_ttft_ms))
        decode_errors.append(abs(measured["decode_tok_s"] - DECODE_TOK_S) / DECODE_TOK_S)
    ttft_p10, ttft_p90 = _rank(ttft_errors, 0.1), _rank(ttft_errors, 0.9)
    decode_p90 = _rank(decode_errors, 0.9)
    print(
        f"c={concurrency}: TTFT error p10 {ttft_p10:.3f} ms, median "
        f"{statistics.median(ttft_errors):.3f} ms, p90 {ttft_p90:.3f} ms, max "
        f"{max(ttft_errors):.3f} ms; decode error median "
        f"{statistics.median(decode_errors):.3%}, p90 {decode_p90:.3%}, "
        f"max {max(decode_errors):.3%}"
    )
    return ttft_p10, ttft_p90, decode_p90


def _rank(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[int(q * (len(ordered) - 1))]
