"""Chunks per second the streaming client sustains, beside an aiohttp reference client.

A fast local SSE server (a bare asyncio server in a child process, uvloop when present)
answers every request with --events chat-completion chunks, one socket write per chunk as
a serving engine streams tokens, then ``[DONE]``. Against it, in this process and in turns:

- reference: aiohttp as vLLM's and SGLang's benchmark clients use it (``async for line in
  response.content``, ``json.loads`` per event, a timestamp per chunk);
- anvil: ``runners.client.EndpointClient.chat``, the whole path ``ledger run`` uses
  (deadlines, channels, usage, per-chunk timestamps, a request record);
- four ablations: httpx on its own transport or on httpx-aiohttp's, reading lines
  (``aiter_lines``, ``json``) or raw bytes (``runners.client._sse``, ``orjson``), without records.

Each client runs --requests requests at concurrency 1 and 64; the figure is events per
second of wall time, best of --repeat rounds (clients interleaved in every round), and the
client's CPU microseconds per event. The ratio anvil / reference is the goal (>= 0.9x).

Then the open loop: a load cell (Poisson arrivals, ``runners.campaign._stages.run_cell`` as ``ledger
run`` sends one) of --open-seconds at each rate of a doubling ladder, against a server that
answers 16 chunks, and the sender's lateness against the schedule at each (p50, p99, max;
lateness is due time to request written). The row: the highest rate one process sustains
with lateness p99 at most 1 ms (the goal), and the rate it achieved there.

    python benchmarks/client_bench.py [--events 2000] [--requests 20] [--repeat 3]
        [--open-seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import subprocess
import sys
import time
import tomllib
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import httpx
import orjson
from httpx_aiohttp import AiohttpTransport

from ledger.measures.arrivals import lateness
from runners.campaign._stages import CellRun, Prompt, new_origin, run_cell
from runners.client import Deadlines, EndpointClient
from runners.client._sse import SSEParser
from runners.plan import parse_plan

SERVER = r"""
import asyncio, json, socket, sys
fd, events = int(sys.argv[1]), int(sys.argv[2])
def chunk(delta, finish=None):
    body = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0,
            "model": "bench", "choices": [{"index": 0, "delta": delta, "logprobs": None,
            "finish_reason": finish}]}
    data = b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"
    return b"%x\r\n" % len(data) + data + b"\r\n"
TOKEN = chunk({"content": " tok"})
usage = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0,
         "model": "bench", "choices": [], "usage": {"prompt_tokens": 8,
         "completion_tokens": events, "total_tokens": events + 8}}
tail = (b"data: " + json.dumps(usage, separators=(",", ":")).encode() + b"\n\n"
        + b"data: [DONE]\n\n")
TAIL = (chunk({}, "length") + b"%x\r\n" % len(tail) + tail + b"\r\n0\r\n\r\n")
HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        b"transfer-encoding: chunked\r\n\r\n")
async def handle(reader, writer):
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if length:
                await reader.readexactly(length)
            writer.write(HEAD)
            for index in range(events):
                writer.write(TOKEN)
                if index % 64 == 63:
                    await writer.drain()
            writer.write(TAIL)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    writer.close()
async def main():
    server = await asyncio.start_server(handle, sock=socket.socket(fileno=fd))
    async with server:
        await server.serve_forever()
try:
    import uvloop
    uvloop.run(main())
except ImportError:
    asyncio.run(main())
"""

BODY = {"model": "bench", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4096}


async def reference(url: str, concurrency: int, requests: int) -> int:
    """vLLM's benchmark client loop, reduced to what it does per chunk."""
    events = 0
    queue = list(range(requests))
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            nonlocal events
            while queue:
                queue.pop()
                payload = {**BODY, "stream": True, "stream_options": {"include_usage": True}}
                async with session.post(url + "/chat/completions", json=payload) as response:
                    timestamps = []
                    async for chunk_bytes in response.content:
                        chunk_bytes = chunk_bytes.strip()
                        if not chunk_bytes:
                            continue
                        chunk = chunk_bytes.decode("utf-8").removeprefix("data: ")
                        if chunk == "[DONE]":
                            continue
                        data = json.loads(chunk)
                        if data.get("choices") and data["choices"][0]["delta"].get("content"):
                            timestamps.append(time.perf_counter())
                            events += 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return events


async def anvil(url: str, concurrency: int, requests: int) -> int:
    """The runner's client, records included."""
    events = 0
    queue = list(range(requests))
    async with EndpointClient(url, concurrency=concurrency, deadlines=Deadlines()) as client:

        async def worker() -> None:
            nonlocal events
            while queue:
                queue.pop()
                record = await client.chat(BODY, origin_ns=time.perf_counter_ns())
                assert record.error is None, record.error
                record.to_json()
                events += record.chunk_tokens

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return events


def _httpx(*, aiohttp_transport: bool, raw: bool) -> Callable[[str, int, int], Awaitable[int]]:
    """httpx with its own transport or httpx-aiohttp's, reading lines or raw bytes."""

    async def run(url: str, concurrency: int, requests: int) -> int:
        events = 0
        queue = list(range(requests))
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        transport = AiohttpTransport(limits=limits) if aiohttp_transport else None
        async with httpx.AsyncClient(
            limits=limits, timeout=None, trust_env=False, transport=transport
        ) as client:

            async def worker() -> None:
                nonlocal events
                while queue:
                    queue.pop()
                    payload = {**BODY, "stream": True}
                    async with client.stream("POST", url + "/chat/completions", json=payload) as r:
                        if raw:
                            parser = SSEParser()
                            async for data in r.aiter_raw():
                                for event in parser.feed(data):
                                    if event != b"[DONE]":
                                        document = orjson.loads(event)
                                        if document["choices"] and document["choices"][0][
                                            "delta"
                                        ].get("content"):
                                            events += 1
                            continue
                        async for line in r.aiter_lines():
                            if line.startswith("data: ") and line != "data: [DONE]":
                                document = json.loads(line[6:])
                                choices = document.get("choices")
                                if choices and choices[0]["delta"].get("content"):
                                    events += 1

            await asyncio.gather(*(worker() for _ in range(concurrency)))
        return events

    return run


Client = Callable[[str, int, int], Awaitable[int]]
CLIENTS: dict[str, Client] = {
    "reference": reference,
    "anvil": anvil,
    # The ablation behind the choice of transport (docs/method/client-overhead.md).
    "httpx-lines": _httpx(aiohttp_transport=False, raw=False),
    "httpx-raw": _httpx(aiohttp_transport=False, raw=True),
    "aiohttp-lines": _httpx(aiohttp_transport=True, raw=False),
    "aiohttp-raw": _httpx(aiohttp_transport=True, raw=True),
}


def measure(client: Client, url: str, concurrency: int, requests: int) -> tuple[float, float]:
    """(events per second of wall time, client CPU microseconds per event)."""
    wall, cpu = time.perf_counter(), time.process_time()
    events = asyncio.run(client(url, concurrency, requests))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return events / wall, cpu / events * 1e6


OPEN_LOOP_PLAN = """
campaign_id = "2026-12-01-client-bench"
[[arms]]
name = "bench"
base_url = "{url}"
model = "bench"
[[stages]]
kind = "load"
context_target = 16
rate = {rate}
duration_s = {seconds}
max_tokens = 16
"""


def open_loop(url: str, rate: float, seconds: float) -> tuple[float, dict[str, float]]:
    """(achieved requests per second, lateness) of one load cell at ``rate``."""
    plan = parse_plan(tomllib.loads(OPEN_LOOP_PLAN.format(url=url, rate=rate, seconds=seconds)))
    arm, stage = plan.arms[0], plan.stages[0]
    cell = stage.cells[0]
    prompts = [
        Prompt(i, False, [{"role": "user", "content": "hi"}], "0" * 64)
        for i in range(stage.measured(cell))
    ]
    run = CellRun(new_origin())
    records: list[dict[str, Any]] = []

    async def go() -> None:
        async with EndpointClient(url, concurrency=cell.concurrency) as client:
            await run_cell(
                client, arm, stage, cell, prompts.__getitem__, range(len(prompts)), run,
                records.append,
            )  # fmt: skip

    asyncio.run(go())
    sent = sorted(r["sent_ns"] for r in records)
    return (len(sent) - 1) / ((sent[-1] - sent[0]) / 1e9), lateness(records)


def _server(events: int) -> tuple[subprocess.Popen[bytes], str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    process = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(sock.fileno()), str(events)],
        pass_fds=(sock.fileno(),),
    )
    return process, f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


def main_open_loop(seconds: float) -> None:
    server, url = _server(16)
    try:
        time.sleep(0.5)
        print(f"open loop, Poisson, {seconds:g} s per rate, 16 chunks per response:")
        sustained = None
        for rate in (25, 50, 100, 200, 400, 800, 1600):
            achieved, late = open_loop(url, float(rate), seconds)
            ok = late["p99_ms"] <= 1.0
            print(
                f"  {rate:>5} req/s: achieved {achieved:7.1f} req/s, lateness p50 "
                f"{late['p50_ms']:.3f} ms, p99 {late['p99_ms']:.3f} ms, max "
                f"{late['max_ms']:.3f} ms{'' if ok else '  (p99 over 1 ms)'}"
            )
            if ok:
                sustained = (rate, achieved)
        if sustained is None:
            print("open loop: no rate of the ladder kept lateness p99 at 1 ms or less (goal)")
        else:
            print(
                f"open loop: {sustained[0]} req/s sustained with lateness p99 <= 1 ms "
                f"(achieved {sustained[1]:.1f} req/s)"
            )
    finally:
        server.terminate()
        server.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2000, help="chunks per response")
    parser.add_argument("--requests", type=int, default=20, help="requests at concurrency 1")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--open-seconds", type=float, default=5.0)
    args = parser.parse_args()
    server, url = _server(args.events)
    try:
        time.sleep(0.5)
        print(f"{args.events} events per response, one write each; best of {args.repeat}")
        for concurrency, requests in ((1, args.requests), (64, 64 * max(1, args.requests // 10))):
            best: dict[str, tuple[float, float]] = {}
            for _ in range(args.repeat):
                for name, client in CLIENTS.items():
                    rate, cpu = measure(client, url, concurrency, requests)
                    if name not in best or rate > best[name][0]:
                        best[name] = (rate, cpu)
            reference_rate = best["reference"][0]
            for name, (rate, cpu) in best.items():
                print(
                    f"c={concurrency:<3} {name:<14} {rate:>9.0f} events/s  {cpu:5.1f} us CPU/event"
                    f"  {rate / reference_rate:5.2f}x reference"
                )
    finally:
        server.terminate()
        server.wait()
    main_open_loop(args.open_seconds)


if __name__ == "__main__":
    main()
