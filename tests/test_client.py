"""The streaming client against the simulated endpoint: every failure is a record."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from runners.client._client import (
    COMPLETIONS_PATH,
    Deadlines,
    EndpointClient,
    RequestRecord,
    _StreamState,
)
from runners.simulate.serve import SimulatorProcess

Start = Callable[..., SimulatorProcess]
BODY: dict[str, Any] = {
    "model": "anvil-sim",
    "messages": [{"role": "user", "content": "Summarize: the cache keeps prefixes warm."}],
    "max_tokens": 12,
}
FAST = Deadlines(connect_s=2, first_byte_s=2, idle_s=0.5, total_s=10)


async def _chat(url: str, body: dict[str, Any] = BODY, **options: Any) -> RequestRecord:
    deadlines = options.pop("deadlines", FAST)
    async with EndpointClient(url, concurrency=1, deadlines=deadlines, **options) as client:
        return await client.chat(body, origin_ns=time.perf_counter_ns())


def chat(url: str, body: dict[str, Any] = BODY, **options: Any) -> RequestRecord:
    return asyncio.run(_chat(url, body, **options))


def test_success_records_usage_channels_and_timestamps(simulator: Start) -> None:
    sim = simulator(decode_tok_s=500.0)
    body = {**BODY, "chat_template_kwargs": {"enable_thinking": True}, "max_tokens": 30}
    record = chat(sim.base_url, body)
    assert record.error is None
    # 24 reasoning tokens leave 6 of the 30 for content: the reply ends by length.
    assert record.finish_reason == "length"
    assert record.done_marker
    assert record.usage is not None
    assert record.usage["completion_tokens"] == record.chunk_tokens == 30
    assert record.usage["reasoning_tokens"] == 24
    # Reasoning first, then content: TTFT (visible) comes after the first token.
    assert "".join(record.chunk_channels) == "r" * 24 + "c" * 6
    assert record.first_token_ns is not None and record.first_content_ns is not None
    assert record.sent_ns < record.first_token_ns < record.first_content_ns
    assert record.chunks_ns == sorted(record.chunks_ns)
    # usage and the stream agree: the record leaves usage_mismatch out, at its default.
    assert "usage_mismatch" not in record.to_json()


def test_reasoning_field_named_reasoning_is_a_channel_too(simulator: Start) -> None:
    sim = simulator(reasoning_field="reasoning", reasoning_tokens=3, decode_tok_s=1000.0)
    body = {**BODY, "chat_template_kwargs": {"enable_thinking": True}, "max_tokens": 5}
    record = chat(sim.base_url, body)
    assert "".join(record.chunk_channels) == "rrrcc"


def test_tool_call_deltas_are_assembled(simulator: Start) -> None:
    sim = simulator(decode_tok_s=1000.0)
    tool = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
    record = chat(sim.base_url, {**BODY, "tools": [tool], "max_tokens": 200})
    assert record.error is None
    assert record.finish_reason == "tool_calls"
    assert set(record.chunk_channels) == {"t"}
    (call,) = record.to_json()["tool_calls"]
    assert call["name"] == "get_weather"
    assert call["id"].startswith("call-")
    assert list(httpx.Response(200, content=call["arguments"]).json()) == ["city"]


def test_controlled_output_runs_to_max_tokens(simulator: Start) -> None:
    sim = simulator(decode_tok_s=2000.0, natural_output_tokens=5)
    natural = chat(sim.base_url, {**BODY, "max_tokens": 40})
    controlled = chat(
        sim.base_url, {**BODY, "max_tokens": 40, "ignore_eos": True, "min_tokens": 40}
    )
    assert (natural.finish_reason, natural.chunk_tokens) == ("stop", 5)
    assert (controlled.finish_reason, controlled.chunk_tokens) == ("length", 40)


FAULTS = {
    "http-4xx": ({"faults": [{"kind": "status", "status": 429}]}, 429),
    "http-5xx": ({"faults": [{"kind": "status", "status": 503}]}, 503),
    "disconnect": ({"faults": [{"kind": "disconnect", "after_tokens": 3}]}, None),
    "stall": ({"faults": [{"kind": "stall", "after_tokens": 3, "seconds": 30.0}]}, None),
    "timeout-first-byte": (
        {"faults": [{"kind": "stall", "after_tokens": 0, "seconds": 30.0}]},
        None,
    ),
    "malformed-stream": ({"faults": [{"kind": "malformed", "after_tokens": 2}]}, None),
    "context-exceeded": ({"context_limit": 20}, 400),
}


@pytest.mark.parametrize("error_class", sorted(FAULTS))
def test_fault_becomes_its_error_class(simulator: Start, error_class: str) -> None:
    settings, status = FAULTS[error_class]
    sim = simulator(decode_tok_s=200.0, **settings)
    started = time.monotonic()
    record = chat(sim.base_url)
    elapsed = time.monotonic() - started
    assert record.error is not None, record
    assert record.error["class"] == error_class, record.error
    assert record.error["status"] == status
    assert record.end_ns is not None
    # Bounded by the deadlines (2 s first byte, 0.5 s idle), never by the 30 s stall.
    assert elapsed < 5


def test_connection_refused_is_connect() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    record = chat(f"http://127.0.0.1:{port}/v1")
    assert record.error is not None
    assert record.error["class"] == "connect"
    assert record.headers_ns is None
    # The address refused is in the evidence: `ledger run`'s failing line quotes it.
    assert f"127.0.0.1:{port}" in record.error["message"]


def test_silent_server_hits_the_first_byte_deadline() -> None:
    # Accepts and never answers: the request must end at its deadline, not hang.
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        url = f"http://127.0.0.1:{server.getsockname()[1]}/v1"
        started = time.monotonic()
        record = chat(url, deadlines=Deadlines(connect_s=1, first_byte_s=0.5, idle_s=0.5))
        assert time.monotonic() - started < 3
    assert record.error is not None
    assert record.error["class"] == "timeout-first-byte"


def test_total_deadline(simulator: Start) -> None:
    sim = simulator(decode_tok_s=20.0)
    record = chat(sim.base_url, deadlines=Deadlines(first_byte_s=5, idle_s=5, total_s=0.3))
    assert record.error is not None
    assert record.error["class"] == "timeout-total"


def test_server_closing_before_headers_is_disconnect() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        url = f"http://127.0.0.1:{server.getsockname()[1]}/v1"

        async def scenario() -> RequestRecord:
            loop = asyncio.get_running_loop()

            def accept_and_close() -> None:
                conn, _ = server.accept()
                conn.recv(65536)
                conn.close()

            closer = loop.run_in_executor(None, accept_and_close)
            record = await _chat(url)
            await closer
            return record

        record = asyncio.run(scenario())
    assert record.error is not None
    assert record.error["class"] == "disconnect"


def test_body_limit_is_http_413(simulator: Start) -> None:
    sim = simulator(body_limit_bytes=2000)
    body = {**BODY, "messages": [{"role": "user", "content": "x " * 5000}]}
    record = chat(sim.base_url, body)
    assert record.error is not None
    assert (record.error["class"], record.error["status"]) == ("http-4xx", 413)


def test_pool_keeps_connections_alive(simulator: Start) -> None:
    sim = simulator(decode_tok_s=2000.0)

    async def many() -> list[RequestRecord]:
        async with EndpointClient(sim.base_url, concurrency=4, deadlines=FAST) as client:
            origin = time.perf_counter_ns()
            return await asyncio.gather(*(client.chat(BODY, origin_ns=origin) for _ in range(24)))

    records = asyncio.run(many())
    assert all(r.error is None for r in records)
    log = httpx.get(sim.root_url + "/sim/requests", trust_env=False).json()["requests"]
    assert len(log) == 24
    ports = {entry["client_port"] for entry in log}
    assert 1 <= len(ports) <= 4, ports
    # The stream is parsed from raw bytes: it must be asked for uncompressed.
    assert {entry["accept_encoding"] for entry in log} == {"identity"}


def test_api_key_is_sent_and_never_recorded(simulator: Start) -> None:
    secret = "sk-test-5f1c9e0d7a"
    sim = simulator(faults=[{"kind": "status", "status": 401}])
    record = chat(sim.base_url, api_key=secret)
    log = httpx.get(sim.root_url + "/sim/requests", trust_env=False).json()["requests"]
    assert log[-1]["authorization"] is True
    assert record.error is not None and record.error["status"] == 401
    assert secret not in str(record.to_json())


def test_server_echoing_the_key_is_redacted(simulator: Start) -> None:
    secret = "sk-echoed-42"
    # The model name comes back in the 404 message: a stand-in for a server that echoes.
    record = chat(simulator().base_url, {**BODY, "model": secret}, api_key=secret)
    assert record.error is not None
    assert record.error["class"] == "http-4xx"
    assert secret not in record.error["message"]
    assert "[redacted]" in record.error["message"]


def test_server_timings_keep_only_the_known_non_negative_numbers() -> None:
    record = RequestRecord(sent_ns=0)
    state = _StreamState(record, 0)
    state.event({"choices": [], "timings": "soon"}, 1)
    assert record.server_timings is None
    timings = {
        "prompt_ms": 3.0,
        "prompt_n": 10,
        "predicted_n": True,
        "cache_n": -1,
        "predicted_ms": "12",
        "prompt_per_second": 3300.0,
    }
    state.event({"choices": [], "timings": timings}, 2)
    assert record.server_timings == {"prompt_ms": 3.0, "prompt_n": 10}
    assert record.to_json()["server_timings"] == {"prompt_ms": 3.0, "prompt_n": 10}


@pytest.mark.parametrize(
    ("usage", "said"),
    [
        ({"prompt_tokens": -3, "completion_tokens": 5}, "usage.prompt_tokens is -3"),
        ({"total_tokens": -1}, "usage.total_tokens is -1"),
        ({"completion_tokens": 2**64}, f"usage.completion_tokens is {2**64}"),
        ({"completion_tokens": 2**63}, f"usage.completion_tokens is {2**63}"),
        ({"completion_tokens_details": {"reasoning_tokens": -2}},
         "usage.completion_tokens_details.reasoning_tokens is -2"),
        ({"prompt_tokens": -(10**50)}, "usage.prompt_tokens is -1000000000000000000..."),
        ({"completion_tokens": "12"}, 'usage.completion_tokens is "12"'),
        ({"completion_tokens": True}, "usage.completion_tokens is true"),
        ({"completion_tokens": 1e300}, "usage.completion_tokens is 1e+300"),
        ({"completion_tokens": 12.0}, "usage.completion_tokens is 12.0"),
        ([1, 2], "usage is [1, 2]"),
        ({"prompt_tokens_details": {"cached_tokens": -7}},
         "usage.prompt_tokens_details.cached_tokens is -7"),
    ],
)  # fmt: skip
def test_a_usage_that_is_no_count_fails_the_request_not_the_run(usage: Any, said: str) -> None:
    record = RequestRecord(sent_ns=0)
    state = _StreamState(record, 0)
    state.event({"choices": [], "usage": usage}, 1)
    assert record.usage is None
    assert record.error is not None
    assert record.error["class"] == "malformed-stream"
    ending = "not an object of counts" if said.startswith("usage is") else "not a token count"
    assert record.error["message"] == f"the server's {said}: {ending}"


def test_a_usage_of_counts_is_recorded() -> None:
    record = RequestRecord(sent_ns=0)
    state = _StreamState(record, 0)
    state.event({"choices": [], "usage": None}, 1)  # usage: null before the last chunk
    usage = {"prompt_tokens": 0, "completion_tokens": 2**63 - 1, "total_tokens": None,
             "completion_tokens_details": {"reasoning_tokens": 7}}  # fmt: skip
    state.event({"choices": [], "usage": usage}, 2)
    assert record.error is None
    assert record.usage == {"prompt_tokens": 0, "completion_tokens": 2**63 - 1,
                            "reasoning_tokens": 7}  # fmt: skip


def test_a_completions_chunks_text_is_content() -> None:
    record = RequestRecord(sent_ns=0)
    state = _StreamState(record, 0)
    chunk = {"id": "cmpl-1", "object": "text_completion"}
    state.event({**chunk, "choices": [{"index": 0, "text": "Hello", "finish_reason": None}]}, 10)
    state.event({**chunk, "choices": [{"index": 0, "text": " world", "finish_reason": None}]}, 20)
    # The last chunk carries the finish reason and no text: not a token.
    state.event({**chunk, "choices": [{"index": 0, "text": "", "finish_reason": "length"}]}, 30)
    state.event({**chunk, "choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 2}}, 40)
    assert record.error is None and record.response_id == "cmpl-1"
    assert record.text == "Hello world" and record.chunk_channels == ["c", "c"]
    assert record.chunks_ns == [10, 20] and record.first_content_ns == 10
    assert record.last_token_ns == 20 and record.finish_reason == "length"
    assert record.usage == {"prompt_tokens": 4, "completion_tokens": 2}


def test_the_simulated_completions_api_streams_text(simulator: Start) -> None:
    sim = simulator(decode_tok_s=1000.0)
    body = {
        "model": "anvil-sim",
        "prompt": "Summarize: caches keep prefixes warm.",
        "max_tokens": 7,
    }

    async def run() -> RequestRecord:
        async with EndpointClient(sim.base_url, concurrency=1, deadlines=FAST) as client:
            request = client.chat_request(body, COMPLETIONS_PATH)
            return await client.chat(request, origin_ns=time.perf_counter_ns())

    record = asyncio.run(run())
    assert record.error is None and record.finish_reason == "length"
    assert record.usage is not None and record.usage["completion_tokens"] == 7
    assert "".join(record.chunk_channels) == "c" * 7 and record.text
