"""A server that streams past its request's max_tokens is cut: the request fails as
``overlong-stream`` with the chunks up to the bound, and the run goes on."""

from __future__ import annotations

import asyncio
import socket
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from runners.client._client import Deadlines, EndpointClient, RequestRecord, StreamBound
from tests import cells
from tests.conftest import CliRun, verify_json
from tests.raw_server import RawServer, read_head

TOKEN = b'data: {"id":"x","choices":[{"index":0,"delta":{"content":"a"}}]}\n\n'


class HostileServer(RawServer):
    """An endpoint that answers every chat request with a stream that never ends: tiny
    token chunks (``chunks``), or one event that never closes (``bytes``). Anything else
    is a 404."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.sent = 0
        """Chunks or bytes written, over every connection."""
        super().__init__()

    def handle(self, conn: socket.socket, index: int) -> None:
        with conn:
            data = read_head(conn)
            if data is None:
                return
            if not data.startswith(b"POST") or b"/chat/completions" not in data.split(b"\r\n")[0]:
                conn.sendall(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                return
            conn.sendall(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
            )
            if self.mode.startswith("exact-"):
                # A server that keeps its word: max_tokens chunks at most, then it ends.
                count = int(self.mode.removeprefix("exact-"))
                finish = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}\n\n'
                conn.sendall(TOKEN * count + finish + b"data: [DONE]\n\n")
                return
            if self.mode == "reasoning-then-content":
                # 23 reasoning tokens, then one event with a reasoning and a content token:
                # the 25th chunk, content, is the first past the bound of max_tokens 4.
                think = b'data: {"choices":[{"index":0,"delta":{"reasoning_content":"r"}}]}\n\n'
                both = (
                    b'data: {"choices":[{"index":0,"delta":'
                    b'{"reasoning_content":"r","content":"c"}}]}\n\n'
                )
                conn.sendall(think * 23 + both + TOKEN * 100)
                return
            if self.mode == "bytes":
                conn.sendall(b'data: {"c": "')
            block = TOKEN * 64 if self.mode == "chunks" else b"x" * 65536
            try:
                while not self.stopping:
                    conn.sendall(block)
                    self.sent += 64 if self.mode == "chunks" else len(block)
            except OSError:
                return  # the client cut it


@pytest.fixture
def hostile(request: pytest.FixtureRequest) -> Any:
    server = HostileServer(request.param)
    yield server
    server.close()


def _chat(url: str, max_tokens: int) -> RequestRecord:
    async def go() -> RequestRecord:
        deadlines = Deadlines(connect_s=2, first_byte_s=5, idle_s=5, total_s=60)
        async with EndpointClient(url, concurrency=1, deadlines=deadlines) as client:
            body = {"model": "m", "messages": [], "max_tokens": max_tokens}
            return await client.chat(body, origin_ns=time.perf_counter_ns())

    return asyncio.run(go())


@pytest.mark.parametrize("hostile", ["chunks"], indirect=True)
def test_a_stream_past_its_chunk_bound_is_cut_with_the_chunks_up_to_it(
    hostile: HostileServer,
) -> None:
    bound = StreamBound.for_max_tokens(4)
    assert bound.chunks == 2 * 4 + 16
    started = time.monotonic()
    record = _chat(hostile.base_url, 4)
    assert time.monotonic() - started < 10  # cut, not left to the 60 s deadline
    assert record.error is not None and record.error["class"] == "overlong-stream"
    assert "more than 24 token-bearing chunks" in record.error["message"]
    assert record.chunk_tokens == len(record.chunk_channels) == bound.chunks
    assert record.last_token_ns == record.chunks_ns[-1]
    out = record.to_json()
    assert out["channel_runs"] == "c24" and out["error"]["class"] == "overlong-stream"


@pytest.mark.parametrize("hostile", ["bytes"], indirect=True)
def test_an_event_that_never_ends_is_cut_at_the_byte_bound(hostile: HostileServer) -> None:
    bound = StreamBound.for_max_tokens(4)
    tracemalloc.start()
    try:
        record = _chat(hostile.base_url, 4)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert record.error is not None and record.error["class"] == "overlong-stream"
    assert f"passed {bound.bytes} bytes" in record.error["message"]
    assert record.chunk_tokens == 0
    # What it held is bounded by the bound (the event buffered whole), not by the stream.
    assert peak < 4 * bound.bytes
    assert hostile.sent < bound.bytes + (16 << 20)


def test_the_bound_follows_max_tokens_and_has_a_default() -> None:
    assert StreamBound.for_max_tokens(512) == StreamBound(1040, (512 + 64) * 16384)
    for absent in (None, 0, -3, "512", True):
        assert StreamBound.for_max_tokens(absent) == StreamBound.for_max_tokens(32768)

    async def bounds() -> list[StreamBound]:
        async with EndpointClient("http://127.0.0.1:9/v1", concurrency=1) as client:
            return [
                client.chat_request(body).extensions["anvil_ledger.stream_bound"]
                for body in ({"max_tokens": 7}, {"max_completion_tokens": 5}, {})
            ]

    # OpenAI's newer name counts too; a request that names neither gets the default.
    assert asyncio.run(bounds()) == [
        StreamBound.for_max_tokens(7),
        StreamBound.for_max_tokens(5),
        StreamBound.for_max_tokens(None),
    ]


@pytest.mark.parametrize("hostile", ["exact-24"], indirect=True)
def test_a_stream_of_exactly_its_bound_is_not_cut(hostile: HostileServer) -> None:
    """24 token chunks for max_tokens 4 is the bound itself: kept whole, no error (one
    more is the first that is cut)."""
    record = _chat(hostile.base_url, 4)
    assert record.error is None, record.error
    assert record.chunk_tokens == 24 and record.finish_reason == "length"


@pytest.mark.parametrize("hostile", ["chunks"], indirect=True)
def test_a_run_against_it_records_the_class_and_verifies(
    hostile: HostileServer, tmp_path: Path, cli: CliRun
) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(
        'campaign_id = "2026-12-03-hostile"\n[deadlines]\ntotal_s = 25\n'
        f'[[arms]]\nname = "a"\nbase_url = "{hostile.base_url}"\nmodel = "m"\n'
        '[[stages]]\nkind = "endurance"\ncontext_target = 64\nrequests = 3\nmax_tokens = 4\n'
    )
    started = time.monotonic()
    status, out, err = cli("run", str(plan), "--raw-dir", str(tmp_path))
    # Recorded, sealed and verifiable; the run fails, as nothing it measured succeeded.
    assert status == 1, err
    assert (
        'ledger run: arm "a", stage "endurance", cell "ctx64-c1-nothink": 0 of 3 requests '
        "succeeded; first error: overlong-stream: more than 24 token-bearing chunks"
    ) in err
    assert time.monotonic() - started < 25
    folder = tmp_path / "2026-12-03-hostile"
    cell = cells.load(folder / "a/endurance/ctx64-c1-nothink.json")
    assert [r["error"]["class"] for r in cell["requests"]] == ["overlong-stream"] * 3
    assert all(r["chunk_tokens"] == 24 for r in cell["requests"])
    assert sum(p["bytes"] for p in cell["parts"]) < 3 * 2048
    status, report = verify_json(cli, folder)
    assert status == 0, report["findings"]
    assert "0/3" in out


@pytest.mark.parametrize("hostile", ["reasoning-then-content"], indirect=True)
def test_content_past_the_bound_is_not_the_record_s_first_content(
    hostile: HostileServer,
) -> None:
    """The cut keeps 24 reasoning chunks: no content was kept, so the record has no time
    to first content (TTFT), though content came in the same event as the last one kept."""
    record = _chat(hostile.base_url, 4)
    assert record.error is not None and record.error["class"] == "overlong-stream"
    assert "".join(record.chunk_channels) == "r" * 24
    assert record.first_token_ns is not None and record.first_content_ns is None
