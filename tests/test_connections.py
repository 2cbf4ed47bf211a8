"""Connections as real servers use them: a request whose pooled connection the server has
already closed goes out once more on a fresh one, and only then.

The servers are real: the simulator closing after each response (as llama.cpp's server
does), and a plain uvicorn app that closes connections idle for a second. llama.cpp's own
server is in test_llama_server.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import aiohttp
import httpx
import orjson
import pytest
import uvicorn

from runners.campaign._metrics import scrape
from runners.client import _client as client_module
from runners.client._client import EndpointClient, RequestRecord, _dead_connection
from runners.simulate.serve import SimulatorProcess
from tests.raw_server import RawServer, read_head

Start = Callable[..., SimulatorProcess]
BODY = {"model": "anvil-sim", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


async def _chats(client: EndpointClient, count: int, *, gap_s: float = 0.0) -> list[RequestRecord]:
    records = []
    for _ in range(count):
        records.append(await client.chat(BODY, origin_ns=time.perf_counter_ns()))
        await asyncio.sleep(gap_s)
    return records


def _server_log(sim: SimulatorProcess) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = httpx.get(
        sim.root_url + "/sim/requests", trust_env=False
    ).json()["requests"]
    return entries


def test_a_dead_pooled_connection_is_resent_once_on_a_fresh_one(simulator: Start) -> None:
    sim = simulator(decode_tok_s=2000.0, close_after_response=True)

    async def run() -> list[RequestRecord]:
        async with EndpointClient(sim.base_url, concurrency=1) as client:
            return await _chats(client, 6)

    records = asyncio.run(run())
    assert [r.error for r in records] == [None] * 6
    # The first request opens a pooled connection; the second meets it closed and goes out
    # again on a fresh connection of its own, which is never pooled; so the third opens a
    # new pooled connection, and so on.
    assert [r.resent is not None for r in records] == [False, True] * 3
    assert all(r.resent.startswith("ServerDisconnectedError") for r in records[1::2])
    # The server answered each request once: nothing was measured twice.
    assert len(_server_log(sim)) == 6


def test_without_the_resend_the_same_server_fails_requests(simulator: Start) -> None:
    """The fault is real: a client that reuses the connection blindly meets it."""
    sim = simulator(decode_tok_s=2000.0, close_after_response=True)

    async def run() -> list[str | None]:
        outcomes: list[str | None] = []
        async with httpx.AsyncClient(trust_env=False) as client:
            for _ in range(3):
                try:
                    response = await client.post(sim.base_url + "/chat/completions", json=BODY)
                    outcomes.append(str(response.status_code))
                except httpx.TransportError as e:
                    outcomes.append(type(e).__name__)
        return outcomes

    outcomes = asyncio.run(run())
    assert outcomes[0] == "200"
    assert any(o != "200" for o in outcomes[1:])


def test_resent_requests_time_from_the_second_send(
    simulator: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    sim = simulator(decode_tok_s=2000.0, close_after_response=True)
    attempts: list[Any] = []

    class Recorded(client_module._Attempt):
        def __init__(self) -> None:
            super().__init__()
            attempts.append(self)

    monkeypatch.setattr(client_module, "_Attempt", Recorded)

    async def run() -> tuple[int, RequestRecord]:
        async with EndpointClient(sim.base_url, concurrency=1) as client:
            origin = time.perf_counter_ns()
            await client.chat(BODY, origin_ns=origin)
            return origin, await client.chat(BODY, origin_ns=origin)

    origin, second = asyncio.run(run())
    assert second.resent is not None and second.error is None
    # Three sends: the first request's, the second's on the dead connection, its resend.
    assert len(attempts) == 3
    assert attempts[1].reused and not attempts[2].reused
    assert second.sent_ns == attempts[2].sent - origin
    assert attempts[2].sent > attempts[1].sent


def test_scrapes_and_checks_get_the_same_handling(simulator: Start) -> None:
    """Each call follows a chat that left a closed connection in the pool. (aiohttp retries
    an idempotent GET on a reused connection by itself; the POSTs need ours.)"""
    sim = simulator(decode_tok_s=2000.0, close_after_response=True)

    async def run() -> tuple[Any, Any, Any]:
        async with EndpointClient(sim.base_url, concurrency=1) as client:
            await client.chat(BODY, origin_ns=time.perf_counter_ns())
            counters = await scrape(client)
            posted = await client.post_json("/chat/completions", BODY)
            listed = await client.get(sim.base_url + "/models")
            return counters, posted, listed

    counters, posted, listed = asyncio.run(run())
    assert isinstance(counters, dict) and counters
    assert isinstance(posted, tuple) and posted[0] == 200
    assert isinstance(listed, tuple) and listed[0] == 200


def test_nothing_is_resent_once_a_response_has_started(simulator: Start) -> None:
    faults = [{"kind": "disconnect", "after_tokens": 2}]
    sim = simulator(decode_tok_s=2000.0, natural_output_tokens=8, faults=faults)

    async def run() -> list[RequestRecord]:
        async with EndpointClient(sim.base_url, concurrency=1) as client:
            return await _chats(client, 3)

    records = asyncio.run(run())
    assert [r.error["class"] if r.error else None for r in records] == ["disconnect"] * 3
    assert [r.resent for r in records] == [None] * 3
    assert len(_server_log(sim)) == 3


def test_a_refused_connection_is_not_resent() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    async def run() -> RequestRecord:
        async with EndpointClient(f"http://127.0.0.1:{port}/v1", concurrency=1) as client:
            return await client.chat(BODY, origin_ns=time.perf_counter_ns())

    record = asyncio.run(run())
    assert record.error is not None and record.error["class"] == "connect"
    assert record.resent is None


# -- a plain uvicorn app -----------------------------------------------------------------


async def _stream_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Streams a four-token chat completion; says ``Connection: close`` when asked to by
    the request's path (``/close/v1/...``)."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    headers = [(b"content-type", b"text/event-stream")]
    if scope["path"].startswith("/close/"):
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    for index in range(4):
        delta: dict[str, Any] = {"choices": [{"index": 0, "delta": {"content": f"t{index} "}}]}
        await send(
            {
                "type": "http.response.body",
                "body": b"data: " + orjson.dumps(delta) + b"\n\n",
                "more_body": True,
            }
        )
    tail = {
        "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
    }
    body = b"data: " + orjson.dumps(tail) + b"\n\ndata: [DONE]\n\n"
    await send({"type": "http.response.body", "body": body, "more_body": False})


@contextlib.contextmanager
def _uvicorn(keep_alive_s: int) -> Iterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        _stream_app, log_level="warning", timeout_keep_alive=keep_alive_s, lifespan="off"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def test_uvicorn_closing_idle_connections_between_cells() -> None:
    """uvicorn closes a connection idle for timeout_keep_alive; a pool left idle for 2 s
    between two cells held only closed connections. aiohttp sees those closes while idle and
    drops them from the pool: nothing needs a resend, and every request succeeds."""
    with _uvicorn(keep_alive_s=1) as root:

        async def run() -> list[RequestRecord]:
            async with EndpointClient(root + "/v1", concurrency=4) as client:
                first = await asyncio.gather(*(_chats(client, 3) for _ in range(4)))
                await asyncio.sleep(2.0)
                second = await asyncio.gather(*(_chats(client, 3) for _ in range(4)))
            return [r for group in (*first, *second) for r in group]

        records = asyncio.run(run())
    assert len(records) == 24
    assert [r.error for r in records] == [None] * 24
    assert [r.resent for r in records] == [None] * 24
    assert all(
        r.usage == {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7} for r in records
    )


def test_connection_close_is_honoured_without_a_resend() -> None:
    with _uvicorn(keep_alive_s=5) as root:

        async def run() -> list[RequestRecord]:
            async with EndpointClient(root + "/close/v1", concurrency=1) as client:
                return await _chats(client, 4)

        records = asyncio.run(run())
    assert [r.error for r in records] == [None] * 4
    # The server said it would close: the client never offered that connection again.
    assert [r.resent for r in records] == [None] * 4


# -- a raw server whose every connection follows a script -------------------------------

_SSE = (
    b'data: {"choices": [{"index": 0, "delta": {"content": "ok"}}]}\n\n'
    b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], '
    b'"usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}\n\n'
    b"data: [DONE]\n\n"
)
_ANSWER = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: keep-alive\r\n"
    b"content-length: " + str(len(_SSE)).encode() + b"\r\n\r\n" + _SSE
)


class _ScriptedServer(RawServer):
    """Connection ``i`` answers its requests as ``script(i)`` lists them: ``answer``, ``drop``
    (read the request, close without a byte) or ``partial`` (a status line, then close)."""

    def __init__(self, script: Callable[[int], list[str]]) -> None:
        self.script = script
        self.requests = 0
        super().__init__()

    def handle(self, conn: socket.socket, index: int) -> None:
        with conn:
            for step in self.script(index):
                data = read_head(conn)
                if data is None:
                    return
                head, _, body = data.partition(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.lower().split(b"\r\n")
                    if line.startswith(b"content-length:")
                )
                while len(body) < length:
                    body += conn.recv(65536)
                self.requests += 1
                if step == "answer":
                    conn.sendall(_ANSWER)
                elif step == "partial":
                    conn.sendall(b"HTTP/1.1 200 OK\r\n")
                    return
                else:
                    return


def _two_chats(script: Callable[[int], list[str]]) -> tuple[_ScriptedServer, list[RequestRecord]]:
    server = _ScriptedServer(script)

    async def run() -> list[RequestRecord]:
        async with EndpointClient(server.base_url, concurrency=1) as client:
            return await _chats(client, 2)

    try:
        return server, asyncio.run(run())
    finally:
        server.close()


def test_a_fresh_connection_that_dies_is_not_resent() -> None:
    server, records = _two_chats(lambda i: ["drop"])
    assert [r.error["class"] if r.error else None for r in records] == ["disconnect"] * 2
    assert [r.resent for r in records] == [None, None]
    assert (server.connections, server.requests) == (2, 2)


def test_a_resend_is_made_once_and_its_reason_kept_when_it_fails() -> None:
    server, records = _two_chats(lambda i: ["answer", "drop"] if i == 0 else ["drop"])
    first, second = records
    assert first.error is None and first.resent is None
    assert second.error is not None and second.error["class"] == "disconnect"
    assert second.resent is not None and second.resent.startswith("ServerDisconnectedError")
    # The pooled connection, then one fresh one: never a third send.
    assert (server.connections, server.requests) == (2, 3)


def test_a_response_cut_after_its_status_line_is_not_resent() -> None:
    server, records = _two_chats(lambda i: ["answer", "partial"] if i == 0 else ["answer"])
    first, second = records
    assert first.error is None
    assert second.error is not None and second.resent is None
    assert (server.connections, server.requests) == (1, 2)


def _raised_from(cause: BaseException) -> httpx.HTTPError:
    try:
        raise httpx.ConnectTimeout("mapped") from cause
    except httpx.HTTPError as e:
        return e


@pytest.mark.parametrize(
    ("cause", "dead"),
    [
        (aiohttp.ServerDisconnectedError(), True),
        (aiohttp.ClientOSError(32, "Can not write request body"), True),
        (ConnectionResetError(104, "reset"), True),
        (BrokenPipeError(32, "broken pipe"), True),
        (aiohttp.ServerTimeoutError("slow"), False),
        (aiohttp.ServerDisconnectedError(message=object()), False),  # type: ignore[arg-type]
        (ValueError("other"), False),
    ],
    ids=["disconnected", "write-failed", "reset", "broken-pipe", "timeout", "partial", "other"],
)
def test_which_failures_mean_a_dead_connection(cause: BaseException, dead: bool) -> None:
    assert _dead_connection(_raised_from(cause)) is dead
