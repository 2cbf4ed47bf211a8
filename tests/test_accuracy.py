"""The client's clock against the server's: TTFT within 2 ms, decode rate within 2 %.

The simulated endpoint logs, per request, when it received the request and when it sent
the first content token (its own monotonic clock), and it sends token ``i`` at
``first + i / decode_tok_s``. The client measures the same request from its side; the
difference is what the client adds or loses, plus loopback latency.
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
    # A stall of either process on a shared machine only ever adds to the errors, while a
    # fault of the client (a stamp in the wrong place, work before it) is in every run: the
    # best of three runs is the client's own error, and each run is printed.
    seen: list[tuple[float, float]] = []
    for _ in range(ATTEMPTS):
        ttft_p90, decode_p90 = _measure(sim, concurrency)
        seen.append((ttft_p90, decode_p90))
        if ttft_p90 < 2.0 and decode_p90 < 0.02:
            break
    assert any(ttft < 2.0 and decode < 0.02 for ttft, decode in seen), seen


def _measure(sim: SimulatorProcess, concurrency: int) -> tuple[float, float]:
    """One run's 90th percentiles of the TTFT error (ms) and the decode rate error."""
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
    ttft_p90, decode_p90 = _p90(ttft_errors), _p90(decode_errors)
    print(
        f"c={concurrency}: TTFT error median {statistics.median(ttft_errors):.3f} ms, "
        f"p90 {ttft_p90:.3f} ms, max {max(ttft_errors):.3f} ms; decode error median "
        f"{statistics.median(decode_errors):.3%}, p90 {decode_p90:.3%}, "
        f"max {max(decode_errors):.3%}"
    )
    # Nine requests in ten: a stall of a moment moves the maximum; a systematic error moves
    # the p90.
    return ttft_p90, decode_p90


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[int(0.9 * (len(ordered) - 1))]
