"""The simulated endpoint as a bare ASGI application (served by uvicorn).

Times come from ``time.monotonic`` (CLOCK_MONOTONIC, read in nanoseconds), not the event
loop's clock: uvloop's is cached once per loop iteration at millisecond resolution, too
coarse to check a client to 2 ms. Every token has an absolute deadline
(``first + i / decode_tok_s``), so lateness of one wake-up does not accumulate. Each
request's schedule and actual send times are kept in a bounded log at ``/sim/requests``,
which is how the tests check a client's measurements against the server's own clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from runners.simulate._model import (
    PrefixCache,
    Reply,
    count_prompt_tokens,
    plan_reply,
    render_prompt,
    tokenize,
    tokens_digest,
)
from runners.simulate.profile import Fault, Profile

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

RECEIVED_KEY = "anvil_received_ns"
"""Key of ``scope["state"]`` holding the arrival time stamped by the server's protocol."""

LOG_LIMIT = 10000
"""Requests kept in the ``/sim/requests`` log."""


class InjectedDisconnectError(Exception):
    """Raised inside the app to make uvicorn drop a connection mid-stream."""


class _QuietInjected(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        info = record.exc_info
        return not (info and isinstance(info[1], InjectedDisconnectError))


logging.getLogger("uvicorn.error").addFilter(_QuietInjected())


def _error_body(message: str, status: int, kind: str) -> bytes:
    return orjson.dumps(
        {"object": "error", "message": message, "type": kind, "param": None, "code": status}
    )


class SimulatedEndpoint:
    """An OpenAI-compatible chat completions server with a timing model and faults."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self._cache = PrefixCache(profile.prefix_block_tokens, profile.prefix_cache_blocks)
        self._slots: asyncio.Semaphore | None = None
        self._requests = 0
        self._paused_until = 0.0
        self._running = 0
        self._waiting = 0
        self._counters = {
            "prompt_tokens": 0,
            "generation_tokens": 0,
            "request_success": 0,
            "prefix_cache_queries": 0,
            "prefix_cache_hits": 0,
        }
        self.log: deque[dict[str, Any]] = deque(maxlen=LOG_LIMIT)
        seed = profile.jitter_seed
        self._jitter = random.Random(seed if seed is not None else os.urandom(16))
        self.run_factor = _lognormal(self._jitter, profile.run_cv)
        """This start's speed: every request's service time is scaled by it."""

    def _service_factor(self) -> float:
        """The scale of one request's service time: this run's, times the request's own."""
        return self.run_factor * _lognormal(self._jitter, self.profile.jitter_cv)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path = scope["path"].rstrip("/")
        method = scope["method"]
        if path == "/v1/chat/completions" and method == "POST":
            await self._chat(scope, receive, send)
        elif path == "/v1/completions" and method == "POST":
            await self._chat(scope, receive, send, completions=True)
        elif path == "/v1/responses" and method == "POST" and self.profile.responses_api:
            await self._responses(scope, receive, send)
        elif path == "/v1/models" and method == "GET":
            await self._json(send, 200, self._models())
        elif path == "/metrics" and method == "GET":
            await self._respond(send, 200, self._metrics(), b"text/plain; version=0.0.4")
        elif path == "/sim/requests" and method == "GET":
            await self._json(send, 200, {"requests": list(self.log)})
        elif path == "/health" and method == "GET":
            await self._respond(send, 200, b"", b"text/plain")
        else:
            await self._error(send, 404, f"no route for {method} {scope['path']}", "NotFoundError")

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return

    def _models(self) -> dict[str, Any]:
        return {
            "object": "list",
            "data": [
                {
                    "id": self.profile.model,
                    "object": "model",
                    "created": 0,
                    "owned_by": "anvil-ledger-simulator",
                    "max_model_len": self.profile.context_limit,
                }
            ],
        }

    def _metrics(self) -> bytes:
        label = '{model_name="' + self.profile.model.replace('"', '\\"') + '"}'
        lines = []
        for name, value in self._counters.items():
            lines.append(f"# TYPE vllm:{name}_total counter")
            lines.append(f"vllm:{name}_total{label} {float(value)}")
        for name, value in (
            ("num_requests_running", self._running),
            ("num_requests_waiting", self._waiting),
        ):
            lines.append(f"# TYPE vllm:{name} gauge")
            lines.append(f"vllm:{name}{label} {float(value)}")
        return ("\n".join(lines) + "\n").encode()

    async def _respond(self, send: Send, status: int, body: bytes, content_type: bytes) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", content_type),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def _json(self, send: Send, status: int, document: Any) -> None:
        await self._respond(send, status, orjson.dumps(document), b"application/json")

    async def _error(self, send: Send, status: int, message: str, kind: str) -> None:
        await self._respond(send, status, _error_body(message, status, kind), b"application/json")

    async def _read_body(self, scope: Scope, receive: Receive) -> bytes | None:
        """The request body, or None when it exceeds the body limit."""
        limit = self.profile.body_limit_bytes
        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit() and int(value) > limit:
                return None
        chunks = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return b""
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    def _draw_fault(self, number: int) -> Fault | None:
        rng = random.Random(f"{self.profile.seed}:{number}")
        for fault in self.profile.faults:
            if rng.random() < fault.rate:
                return fault
        return None

    async def _chat(
        self, scope: Scope, receive: Receive, send: Send, *, completions: bool = False
    ) -> None:
        """A chat completion; or, ``completions``, a completion of a prompt given as it is
        (no chat template), streamed as ``text`` chunks."""
        state = scope.get("state") or {}
        received = state.get(RECEIVED_KEY) or time.monotonic_ns()
        body = await self._chat_body(scope, receive, send, completions=completions)
        if body is None:
            return
        entry, fault = self._admit(scope, received)
        if fault is not None and fault.kind == "status":
            await self._error(
                send, fault.status, f"injected status {fault.status}", "InjectedFault"
            )
            return
        kwargs = body.get("chat_template_kwargs")
        thinking = isinstance(kwargs, dict) and kwargs.get("enable_thinking") is True
        tokens = tokenize(body["prompt"] if completions else render_prompt(body, thinking=thinking))
        prompt_tokens = count_prompt_tokens(tokens)
        entry["prompt_tokens"] = prompt_tokens
        limit = self.profile.context_limit
        requested = body.get("max_completion_tokens", body.get("max_tokens"))
        max_tokens = requested if isinstance(requested, int) and requested > 0 else None
        if prompt_tokens + (max_tokens or 1) > limit:
            await self._error(
                send,
                400,
                f"This model's maximum context length is {limit} tokens. However, you "
                f"requested {prompt_tokens + (max_tokens or 0)} tokens ({prompt_tokens} in the "
                f"messages, {max_tokens or 0} in the completion). Please reduce the length of "
                "the messages or completion.",
                "BadRequestError",
            )
            return
        if max_tokens is None:
            max_tokens = limit - prompt_tokens
        reply = plan_reply(
            self.profile,
            body,
            prompt_digest=tokens_digest(tokens),
            max_tokens=max_tokens,
            thinking=thinking,
            prompt_tokens=prompt_tokens,
        )
        factor = self._service_factor()
        entry.update(
            completion_tokens=reply.tokens,
            decode_tok_s=self.profile.decode_tok_s / factor,
            service_factor=factor,
        )
        await self._in_slot(
            entry, reply, tokens, prompt_tokens, body, fault, receive, send, completions
        )

    async def _chat_body(
        self, scope: Scope, receive: Receive, send: Send, *, completions: bool = False
    ) -> dict[str, Any] | None:
        """The request's body, or None once the error that refuses it is sent. A
        completion's prompt stands as the user message its reply is planned from."""
        body_bytes = await self._read_body(scope, receive)
        if body_bytes is None:
            await self._error(
                send,
                413,
                f"request body exceeds the limit of {self.profile.body_limit_bytes} bytes",
                "RequestEntityTooLarge",
            )
            return None
        try:
            body = orjson.loads(body_bytes)
        except orjson.JSONDecodeError as e:
            await self._error(send, 400, f"request body is not JSON: {e}", "BadRequestError")
            return None
        if completions:
            if not isinstance(body, dict) or not isinstance(body.get("prompt"), str):
                await self._error(send, 400, "prompt must be a string", "BadRequestError")
                return None
            if body.get("stream") is not True:
                await self._error(send, 400, "this endpoint streams only", "BadRequestError")
                return None
            body = {**body, "messages": [{"role": "user", "content": body["prompt"]}]}
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            await self._error(send, 400, "messages must be a list", "BadRequestError")
            return None
        if body.get("model") != self.profile.model:
            await self._error(
                send, 404, f"The model `{body.get('model')}` does not exist.", "NotFoundError"
            )
            return None
        return body

    def _admit(self, scope: Scope, received: int) -> tuple[dict[str, Any], Fault | None]:
        """The request numbered and logged, with the fault drawn for it."""
        self._requests += 1
        number = self._requests
        if number == self.profile.pause_at_request:
            self._paused_until = time.monotonic() + self.profile.pause_s
        fault = self._draw_fault(number)
        entry: dict[str, Any] = {
            "id": f"chatcmpl-sim-{number}",
            "received_ns": received,
            "fault": fault.kind if fault else None,
            # The client's port tells connections apart: the tests check keep-alive with it.
            "client_port": (scope.get("client") or ("", 0))[1],
            "authorization": any(name == b"authorization" for name, _ in scope["headers"]),
            "accept_encoding": dict(scope["headers"]).get(b"accept-encoding", b"").decode(),
        }
        self.log.append(entry)
        return entry, fault

    async def _in_slot(
        self,
        entry: dict[str, Any],
        reply: Reply,
        tokens: list[str],
        prompt_tokens: int,
        body: dict[str, Any],
        fault: Fault | None,
        receive: Receive,
        send: Send,
        completions: bool = False,
    ) -> None:
        """Waits for a running slot, then answers: the first token after the prefill of
        what the prefix cache does not hold."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.profile.max_running_requests)
        self._waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self._waiting -= 1
        self._running += 1
        try:
            paused = self._paused_until - time.monotonic()
            if paused > 0:
                await asyncio.sleep(paused)
            started = time.monotonic()
            cached = (
                self._cache.lookup_and_insert(tokens, prompt_tokens)
                if self.profile.prefix_cache
                else 0
            )
            self._counters["prefix_cache_queries"] += prompt_tokens
            self._counters["prefix_cache_hits"] += cached
            self._counters["prompt_tokens"] += prompt_tokens
            first = started + entry["service_factor"] * (
                self.profile.overhead_ms / 1000
                + (prompt_tokens - cached) / self.profile.prefill_tok_s
            )
            entry.update(
                started_ns=int(started * 1e9),
                cached_tokens=cached,
                planned_first_token_ns=int(first * 1e9),
            )
            usage = {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": reply.tokens,
                "total_tokens": prompt_tokens + reply.tokens,
                "prompt_tokens_details": {"cached_tokens": cached},
                "completion_tokens_details": {"reasoning_tokens": reply.reasoning_tokens},
            }
            if body.get("stream") is True:
                stream = _Stream(self, entry, reply, usage, body, fault, completions=completions)
                await stream.run(receive, send, first)
            else:
                await self._complete(send, entry, reply, usage, first)
        finally:
            self._running -= 1
            self._slots.release()

    async def _responses(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A minimal, non-streaming ``POST /v1/responses``: one message in, one out.

        It shares the answering mode and the timing model's rates, not the scheduler:
        requests here neither queue for a slot nor touch the prefix cache or counters.
        """
        body_bytes = await self._read_body(scope, receive)
        try:
            body = orjson.loads(body_bytes or b"")
        except orjson.JSONDecodeError as e:
            await self._error(send, 400, f"request body is not JSON: {e}", "BadRequestError")
            return
        if not isinstance(body, dict) or body.get("model") != self.profile.model:
            model = body.get("model") if isinstance(body, dict) else None
            await self._error(send, 404, f"The model `{model}` does not exist.", "NotFoundError")
            return
        given = body.get("input")
        if isinstance(given, str):
            messages = [{"role": "user", "content": given}]
        elif isinstance(given, list):
            messages = [
                {"role": m.get("role", "user"), "content": _input_text(m.get("content"))}
                for m in given
                if isinstance(m, dict)
            ]
        else:
            await self._error(send, 400, "input must be a string or a list", "BadRequestError")
            return
        chat = {"model": self.profile.model, "messages": messages}
        tokens = tokenize(render_prompt(chat, thinking=False))
        prompt_tokens = count_prompt_tokens(tokens)
        requested = body.get("max_output_tokens")
        max_tokens = requested if isinstance(requested, int) and requested > 0 else 256
        reply = plan_reply(
            self.profile,
            chat,
            prompt_digest=tokens_digest(tokens),
            max_tokens=max_tokens,
            thinking=False,
            prompt_tokens=prompt_tokens,
        )
        self._requests += 1
        duration = self._service_factor() * (
            self.profile.overhead_ms / 1000
            + prompt_tokens / self.profile.prefill_tok_s
            + reply.tokens / self.profile.decode_tok_s
        )
        await asyncio.sleep(duration)
        text = "".join(p.text for p in reply.pieces() if p.channel == "content")
        await self._json(
            send,
            200,
            {
                "id": f"resp-sim-{self._requests}",
                "object": "response",
                "created_at": int(time.time()),
                "status": "completed" if reply.finish_reason == "stop" else "incomplete",
                "model": self.profile.model,
                "output": [
                    {
                        "type": "message",
                        "id": f"msg-sim-{self._requests}",
                        "role": "assistant",
                        "status": "completed",
                        "content": [{"type": "output_text", "text": text, "annotations": []}],
                    }
                ],
                "usage": {
                    "input_tokens": prompt_tokens,
                    "output_tokens": reply.tokens,
                    "total_tokens": prompt_tokens + reply.tokens,
                },
            },
        )

    async def _complete(
        self, send: Send, entry: dict[str, Any], reply: Reply, usage: dict[str, Any], first: float
    ) -> None:
        count = reply.tokens
        pieces = list(reply.pieces())
        end = first + max(count - 1, 0) / entry["decode_tok_s"]
        await asyncio.sleep(max(0.0, end - time.monotonic()))
        message: dict[str, Any] = {"role": "assistant", "content": None}
        reasoning = "".join(p.text for p in pieces if p.channel == "reasoning")
        content = "".join(p.text for p in pieces if p.channel == "content")
        arguments = "".join(p.text for p in pieces if p.channel == "tool")
        if reasoning:
            message[self.profile.reasoning_field] = reasoning
        if reply.tool_name is not None:
            message["tool_calls"] = [
                {
                    "id": f"call-{entry['id']}",
                    "type": "function",
                    "function": {"name": reply.tool_name, "arguments": arguments},
                }
            ]
        else:
            message["content"] = content
        self._counters["generation_tokens"] += count
        self._counters["request_success"] += 1
        entry["last_token_sent_ns"] = time.monotonic_ns()
        await self._json(
            send,
            200,
            {
                "id": entry["id"],
                "object": "chat.completion",
                "created": int(time.time()),
                "model": self.profile.model,
                "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
                "usage": usage,
            },
        )


def _input_text(content: Any) -> Any:
    """Responses API content parts (``input_text``) as chat content."""
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and "text" in p)
    return content


def _lognormal(rng: random.Random, cv: float) -> float:
    """A lognormal draw of mean 1 and coefficient of variation ``cv`` (1.0 when 0)."""
    if cv == 0:
        return 1.0
    sigma = math.sqrt(math.log1p(cv * cv))
    return rng.lognormvariate(-sigma * sigma / 2, sigma)


class _Stream:
    """One streamed reply: chunks sent on their deadlines, faults applied on the way."""

    def __init__(
        self,
        endpoint: SimulatedEndpoint,
        entry: dict[str, Any],
        reply: Reply,
        usage: dict[str, Any],
        body: dict[str, Any],
        fault: Fault | None,
        *,
        completions: bool = False,
    ) -> None:
        self.endpoint = endpoint
        self.entry = entry
        self.completions = completions
        self.object = "text_completion" if completions else "chat.completion.chunk"
        self.reply = reply
        self.usage = usage
        self.fault = fault
        options = body.get("stream_options")
        self.include_usage = isinstance(options, dict) and options.get("include_usage") is True
        self.disconnected = asyncio.Event()
        self.created = int(time.time())

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice: dict[str, Any] = {"index": 0, "delta": delta}
        if self.completions:
            # A completion has no roles or channels: every piece is text.
            text = "".join(v for v in delta.values() if isinstance(v, str))
            choice = {"index": 0, "text": text}
        document = {
            "id": self.entry["id"],
            "object": self.object,
            "created": self.created,
            "model": self.endpoint.profile.model,
            "choices": [choice | {"logprobs": None, "finish_reason": finish}],
        }
        return b"data: " + orjson.dumps(document) + b"\n\n"

    async def _watch(self, receive: Receive) -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                self.disconnected.set()
                return

    async def run(self, receive: Receive, send: Send, first: float) -> None:
        watcher = asyncio.ensure_future(self._watch(receive))
        try:
            await self._send_all(send, first)
        finally:
            watcher.cancel()

    async def _send_all(self, send: Send, first: float) -> None:
        profile = self.endpoint.profile
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/event-stream"),
                    (b"cache-control", b"no-cache"),
                ],
            }
        )

        async def emit(data: bytes) -> None:
            await send({"type": "http.response.body", "body": data, "more_body": True})

        # Like vLLM and SGLang, the role chunk goes out with the first token, not before.
        opening = b"" if self.completions else self._chunk({"role": "assistant", "content": ""})
        fault = self.fault
        rate = self.entry["decode_tok_s"]
        sent_tool_header = False
        for index, piece in enumerate(self.reply.pieces()):
            if fault is not None and index == fault.after_tokens:
                if fault.kind == "disconnect":
                    raise InjectedDisconnectError(self.entry["id"])
                if fault.kind == "malformed":
                    await emit(
                        b'data: {"id": "' + self.entry["id"].encode() + b'", "choices": [\n\n'
                    )
                    fault = None
                    if index == 0:
                        opening = b""
                elif fault.kind == "stall":
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self.disconnected.wait(), fault.seconds)
                    fault = None
            if self.disconnected.is_set():
                return
            deadline = first + index / rate
            delay = deadline - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            if piece.channel == "reasoning":
                delta: dict[str, Any] = {profile.reasoning_field: piece.text}
            elif piece.channel == "content":
                delta = {"content": piece.text}
            else:
                call: dict[str, Any] = {"index": 0, "function": {"arguments": piece.text}}
                if not sent_tool_header:
                    call.update(id=f"call-{self.entry['id']}", type="function")
                    call["function"]["name"] = self.reply.tool_name
                    sent_tool_header = True
                delta = {"tool_calls": [call]}
            data = opening + self._chunk(delta) if index == 0 else self._chunk(delta)
            now_ns = time.monotonic_ns()
            if index == 0:
                self.entry["first_token_sent_ns"] = now_ns
            if piece.channel == "content" and "first_content_sent_ns" not in self.entry:
                self.entry["first_content_sent_ns"] = now_ns
            self.entry["last_token_sent_ns"] = now_ns
            await emit(data)
            self.endpoint._counters["generation_tokens"] += 1
        if fault is not None and fault.kind == "disconnect":
            raise InjectedDisconnectError(self.entry["id"])
        tail = self._chunk({}, self.reply.finish_reason)
        if not self.reply.tokens:
            tail = opening + tail
        if self.include_usage:
            usage = self.usage
            if self.fault is not None and self.fault.kind == "bad-usage":
                usage = {**usage, "prompt_tokens": -3, "total_tokens": -1}
            usage_chunk = {
                "id": self.entry["id"],
                "object": self.object,
                "created": self.created,
                "model": profile.model,
                "choices": [],
                "usage": usage,
            }
            tail += b"data: " + orjson.dumps(usage_chunk) + b"\n\n"
        tail += b"data: [DONE]\n\n"
        self.endpoint._counters["request_success"] += 1
        await send({"type": "http.response.body", "body": tail, "more_body": False})
