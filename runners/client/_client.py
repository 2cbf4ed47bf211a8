"""The streaming chat-completions client: one connection pool, deadlines, request records.

Transport: httpx's API over the aiohttp transport (``httpx-aiohttp``), reading raw bytes
and parsing SSE in :mod:`runners.client._sse`. The README gives the measurements that chose it.
Every outcome, failures included, is a :class:`RequestRecord`; no httpx or aiohttp
exception leaves this module, and every wait is bounded by a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import json
import re
import time
import urllib.parse
from types import TracebackType
from typing import Any, Self

import aiohttp
import attrs
import httpx
import orjson
from httpx_aiohttp import AiohttpTransport

from ledger.formats.cell_records import DEFAULTS, encode_channels, encode_chunks
from runners.client._sse import SSEParser

ERROR_CLASSES = (
    "connect",
    "timeout-first-byte",
    "stall",
    "timeout-total",
    "http-4xx",
    "http-5xx",
    "disconnect",
    "malformed-stream",
    "context-exceeded",
    "stream-error",
    "client-error",
    "overlong-stream",
)
"""Every error class a request record can carry."""

_CONTEXT = re.compile(
    r"context length|context window|maximum context|too many tokens|prompt is too long",
    re.IGNORECASE,
)
_MAX_ERROR_BODY = 64 << 10
_MAX_MESSAGE = 300


def _positive(instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if not value > 0:
        raise ValueError(f"{attribute.name} must be > 0, got {value!r}")


def url_problem(url: str) -> str | None:
    """Why ``url`` is not a usable http(s) URL (a bad IPv6 literal, a port out of range, no
    host), or None when it is."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
        httpx.URL(url)
    except (ValueError, httpx.InvalidURL) as e:
        return f"not a valid URL: {e}"
    if parts.scheme not in ("http", "https"):
        return "must start with http:// or https://"
    if not parts.hostname:
        return "has no host"
    if parts.username is not None or parts.password is not None:
        # They would be recorded with the plan; an API key belongs in api_key_env.
        return "holds credentials (user:password@); put an API key in api_key_env"
    if port == 0:
        return "port 0 is not a port"
    return None


@attrs.frozen
class Deadlines:
    """How long a request may take, per phase, in seconds."""

    connect_s: float = attrs.field(default=10.0, validator=_positive)
    """Opening the TCP connection."""
    first_byte_s: float = attrs.field(default=600.0, validator=_positive)
    """Request sent to the first data event (covers queueing and prefill)."""
    idle_s: float = attrs.field(default=60.0, validator=_positive)
    """Longest gap between data events once the stream has started."""
    total_s: float = attrs.field(default=1800.0, validator=_positive)
    """Request sent to end of stream."""


DEFAULT_MAX_TOKENS = 32768
"""The reply length a stream is bounded by when its request sets no ``max_tokens``."""


@attrs.frozen
class StreamBound:
    """How much of one stream a request takes before it is cut as ``overlong-stream``: a
    server that streams past its ``max_tokens`` would otherwise fill memory and the cell's
    records for as long as the total deadline lasts."""

    chunks: int
    """Token-bearing chunks: twice ``max_tokens``, and 16 more (a correct server sends at
    most one per token)."""
    bytes: int
    """Bytes of the response body: 16 KiB per token of ``max_tokens`` and 64 more (a
    chunk with the top-20 log-probabilities of its token is about 5 KiB)."""

    @classmethod
    def for_max_tokens(cls, max_tokens: Any) -> StreamBound:
        tokens = max_tokens if type(max_tokens) is int and max_tokens > 0 else DEFAULT_MAX_TOKENS
        return cls(chunks=2 * tokens + 16, bytes=(tokens + 64) * (16 << 10))


_BOUND = "anvil_ledger.stream_bound"
"""Where a built request carries its stream's bound."""


@attrs.define
class RequestRecord:
    """What one request did. Times are integer nanoseconds from the caller's origin."""

    sent_ns: int
    headers_ns: int | None = None
    first_token_ns: int | None = None
    first_content_ns: int | None = None
    last_token_ns: int | None = None
    end_ns: int | None = None
    chunks_ns: list[int] = attrs.Factory(list)
    chunk_channels: list[str] = attrs.Factory(list)
    usage: dict[str, int] | None = None
    finish_reason: str | None = None
    done_marker: bool = False
    response_id: str | None = None
    error: dict[str, Any] | None = None
    content: list[str] = attrs.Factory(list)
    reasoning_chars: int = 0
    tool_calls: dict[int, dict[str, str]] = attrs.Factory(dict)
    events: int = 0
    resent: str | None = None
    """Why the request went out a second time (its pooled connection was dead), or None."""
    server_timings: dict[str, float] | None = None
    """The server's own per-request timings, where it reports them (llama.cpp's ``timings``)."""

    @property
    def ok(self) -> bool:
        """True when the request finished without an error."""
        return self.error is None

    @property
    def chunk_tokens(self) -> int:
        """Token-bearing chunks counted on the stream."""
        return len(self.chunks_ns)

    @property
    def text(self) -> str:
        """The visible content."""
        return "".join(self.content)

    def fail(self, error_class: str, message: str, status: int | None = None) -> None:
        """Records the first failure; later ones are consequences of it."""
        if self.error is None:
            self.error = {"class": error_class, "status": status, "message": message[:_MAX_MESSAGE]}

    def to_json(self) -> dict[str, Any]:
        """The per-request record of a cell artifact (the caller adds index and prompt), as
        a part's line holds it: chunk times compact, fields at their defaults left out
        (:data:`ledger.formats.cell_records.DEFAULTS`)."""
        completion = self.usage.get("completion_tokens") if self.usage else None
        text = self.text
        record = {
            "sent_ns": self.sent_ns,
            "headers_ns": self.headers_ns,
            "first_token_ns": self.first_token_ns,
            "first_content_ns": self.first_content_ns,
            "last_token_ns": self.last_token_ns,
            "end_ns": self.end_ns,
            "chunks_us": encode_chunks(self.first_token_ns, self.chunks_ns),
            "channel_runs": encode_channels("".join(self.chunk_channels)),
            "usage": self.usage,
            "usage_mismatch": None if completion is None else completion != self.chunk_tokens,
            "finish_reason": self.finish_reason,
            "done_marker": self.done_marker,
            "response_id": self.response_id,
            "error": self.error,
            "content_chars": len(text),
            "content_sha256": hashlib.sha256(text.encode()).hexdigest(),
            "reasoning_chars": self.reasoning_chars,
            "tool_calls": [self.tool_calls[i] for i in sorted(self.tool_calls)],
            "resent": self.resent,
            "server_timings": self.server_timings,
        }
        return {k: v for k, v in record.items() if k not in DEFAULTS or v != DEFAULTS[k]}


CHAT_PATH = "/chat/completions"
"""Where a chat completion is asked for, under the endpoint's base URL."""
COMPLETIONS_PATH = "/completions"
"""The legacy completions API: a prompt without a chat template, text in each chunk."""
STREAMING: dict[str, Any] = {"stream": True, "stream_options": {"include_usage": True}}
"""The fields every streamed request carries beside its body."""
# identity: the stream is parsed from raw bytes, so it must not arrive compressed.
HEADERS = {
    "content-type": "application/json",
    "accept": "text/event-stream",
    "accept-encoding": "identity",
}
"""The headers of every request, the API key's aside (never recorded)."""

MAX_COUNT = 2**63 - 1
"""The largest count a record holds (a 64-bit integer, as the ledger database stores it)."""


def _usage(raw: Any) -> tuple[dict[str, int] | None, str | None]:
    """The token counts of a ``usage`` member, and why it cannot be recorded: a usage that
    is no object, or a count that is no whole number (a string, ``true``, ``1e300``), is
    negative or past 64 bits, is no count, and the request fails on it. (Dropped, it left
    a request counted as successful with no decode rate: out of the medians, unsaid.)
    ``null`` is no usage yet, as servers stream it before the last chunk."""
    if raw is None:
        return None, None
    if not isinstance(raw, dict):
        return None, f"the server's usage is {_shown(raw)}: not an object of counts"
    found: list[tuple[str, str, Any]] = [
        (key, key, raw.get(key)) for key in ("prompt_tokens", "completion_tokens", "total_tokens")
    ]
    for group, key, name in (
        ("prompt_tokens_details", "cached_tokens", "cached_tokens"),
        ("completion_tokens_details", "reasoning_tokens", "reasoning_tokens"),
    ):
        details = raw.get(group)
        value = details.get(key) if isinstance(details, dict) else None
        found.append((f"{group}.{key}", name, value))
    out: dict[str, int] = {}
    for where, name, value in found:
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
            return None, f"the server's usage.{where} is {_shown(value)}: not a token count"
        out[name] = value
    return out or None, None


def _shown(value: Any) -> str:
    """A value a server sent, as JSON and cut short: it goes into a one-line message."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}..."


SERVER_TIMING_KEYS = ("prompt_n", "prompt_ms", "predicted_n", "predicted_ms", "cache_n")
"""The fields of llama.cpp's ``timings`` member that a record keeps."""


def _server_timings(raw: Any) -> dict[str, float] | None:
    if not isinstance(raw, dict):
        return None
    out: dict[str, float] = {}
    for key in SERVER_TIMING_KEYS:
        value = raw.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
            out[key] = value
    return out or None


def _classify_status(status: int, body: str) -> str:
    if status in (400, 413, 422) and _CONTEXT.search(body):
        return "context-exceeded"
    return "http-5xx" if status >= 500 else "http-4xx"


def _error_message(body: bytes) -> str:
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body.decode("utf-8", "replace").strip()
    if isinstance(document, dict):
        inner = document.get("error", document)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    return body.decode("utf-8", "replace").strip()


class _StreamState:
    """Applies parsed events to a record."""

    __slots__ = ("origin", "record")

    def __init__(self, record: RequestRecord, origin: int) -> None:
        self.record = record
        self.origin = origin

    def token(self, channel: str, now: int) -> None:
        record = self.record
        at = now - self.origin
        if record.first_token_ns is None:
            record.first_token_ns = at
        if channel == "c" and record.first_content_ns is None:
            record.first_content_ns = at
        record.last_token_ns = at
        record.chunks_ns.append(at)
        record.chunk_channels.append(channel)

    def event(self, event: Any, now: int) -> None:
        record = self.record
        if not isinstance(event, dict):
            record.fail("malformed-stream", f"event is not a JSON object: {event!r}")
            return
        if "error" in event:
            error = event["error"]
            message = str(error.get("message", error) if isinstance(error, dict) else error)
            code = error.get("code") if isinstance(error, dict) else None
            status = code if isinstance(code, int) and 100 <= code < 600 else None
            kind = "context-exceeded" if _CONTEXT.search(message) else "stream-error"
            record.fail(kind, message, status)
            return
        if record.response_id is None and isinstance(event.get("id"), str):
            record.response_id = event["id"]
        choices = event.get("choices")
        if choices and isinstance(choices, list) and isinstance(choices[0], dict):
            choice = choices[0]
            delta = choice.get("delta")
            text = choice.get("text")
            if isinstance(text, str) and text:
                # A completions chunk: its text is content.
                record.content.append(text)
                self.token("c", now)
            elif isinstance(delta, dict):
                reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                if isinstance(reasoning, str) and reasoning:
                    record.reasoning_chars += len(reasoning)
                    self.token("r", now)
                content = delta.get("content")
                if isinstance(content, str) and content:
                    record.content.append(content)
                    self.token("c", now)
                calls = delta.get("tool_calls")
                if isinstance(calls, list) and calls:
                    self._tool_calls(calls)
                    self.token("t", now)
            finish = choice.get("finish_reason")
            if isinstance(finish, str) and finish:
                record.finish_reason = finish
        usage, invalid = _usage(event.get("usage"))
        if invalid is not None:
            # What the server said is evidence: the request failed on it, the run goes on.
            record.fail("malformed-stream", invalid)
        elif usage is not None:
            record.usage = usage
        timings = _server_timings(event.get("timings"))
        if timings is not None:
            record.server_timings = timings

    def _tool_calls(self, calls: list[Any]) -> None:
        for position, call in enumerate(calls):
            if not isinstance(call, dict):
                continue
            index = call.get("index", position)
            slot = self.record.tool_calls.setdefault(
                index if isinstance(index, int) else position,
                {"id": "", "name": "", "arguments": ""},
            )
            if isinstance(call.get("id"), str):
                slot["id"] = call["id"]
            function = call.get("function")
            if isinstance(function, dict):
                if isinstance(function.get("name"), str):
                    slot["name"] = function["name"]
                if isinstance(function.get("arguments"), str):
                    slot["arguments"] += function["arguments"]


class _Attempt:
    """One send of a request: when its body went out, and whether its connection was pooled."""

    __slots__ = ("reused", "sent")

    def __init__(self) -> None:
        self.sent = time.perf_counter_ns()
        self.reused = False


_ATTEMPT: contextvars.ContextVar[_Attempt] = contextvars.ContextVar("anvil_ledger_attempt")


async def _stamp_sent(
    session: aiohttp.ClientSession, context: Any, params: aiohttp.TraceRequestChunkSentParams
) -> None:
    """aiohttp calls this as each piece of a request body goes out; the last one is 'sent'."""
    attempt = _ATTEMPT.get(None)
    if attempt is not None:
        attempt.sent = time.perf_counter_ns()


async def _mark_reused(
    session: aiohttp.ClientSession, context: Any, params: aiohttp.TraceConnectionReuseconnParams
) -> None:
    attempt = _ATTEMPT.get(None)
    if attempt is not None:
        attempt.reused = True


def _dead_connection(error: BaseException) -> bool:
    """Whether a send failed because its connection was gone before any response byte.

    httpx-aiohttp maps these aiohttp errors to httpx ones (a lost connection even to
    ``ConnectTimeout``), so the aiohttp cause decides. A refused connect or a timeout is
    not a dead connection.
    """
    cause = error.__cause__ or error
    if isinstance(cause, aiohttp.ClientConnectorError | aiohttp.ServerTimeoutError):
        return False
    if isinstance(cause, aiohttp.ServerDisconnectedError) and not isinstance(cause.message, str):
        # aiohttp hands over the part of a response it had parsed: one had started.
        return False
    return isinstance(
        cause,
        aiohttp.ServerDisconnectedError
        | aiohttp.ClientOSError
        | ConnectionResetError
        | BrokenPipeError,
    )


class EndpointClient:
    """Talks to one OpenAI-compatible endpoint with a pool sized to the concurrency.

    Use as ``async with EndpointClient(...) as client:``; every request of a cell shares
    the pool, so connections are kept alive between requests.
    """

    def __init__(
        self,
        base_url: str,
        *,
        concurrency: int,
        deadlines: Deadlines | None = None,
        api_key: str | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        self.base_url = base_url.rstrip("/")
        self.deadlines = deadlines or Deadlines()
        self._secret = api_key or None
        headers = dict(HEADERS)
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        self._concurrency = concurrency
        self._client = self._http(pooled=True, headers=headers)
        # Resends go out on connections of their own, never taken from the pool: the pool
        # may hold more connections that the server has closed.
        self._fresh = self._http(pooled=False, headers=headers)

    def _http(self, *, pooled: bool, headers: dict[str, str]) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            transport=AiohttpTransport(client=lambda: self._session(pooled=pooled)),
            headers=headers,
            timeout=httpx.Timeout(self.deadlines.total_s, connect=self.deadlines.connect_s),
        )

    def _session(self, *, pooled: bool) -> aiohttp.ClientSession:
        # Made on first use, inside the event loop, as aiohttp requires.
        trace = aiohttp.TraceConfig()
        trace.on_request_chunk_sent.append(_stamp_sent)
        trace.on_connection_reuseconn.append(_mark_reused)
        connector = aiohttp.TCPConnector(
            limit=self._concurrency,
            limit_per_host=self._concurrency,
            keepalive_timeout=60 if pooled else None,
            force_close=not pooled,
        )
        return aiohttp.ClientSession(connector=connector, trace_configs=[trace])

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Closes the pool."""
        for client in (self._client, self._fresh):
            with contextlib.suppress(httpx.HTTPError, aiohttp.ClientError, OSError):
                await client.aclose()

    @property
    def root_url(self) -> str:
        """The server root: the base URL without a trailing ``/v1``."""
        return self.base_url.removesuffix("/v1")

    def _redact(self, text: str) -> str:
        return text.replace(self._secret, "[redacted]") if self._secret else text

    async def _send(
        self, request: httpx.Request, resent: list[str] | None = None
    ) -> tuple[httpx.Response, _Attempt]:
        """Sends ``request``, once more on a fresh connection if its pooled one was dead.

        Servers close kept-alive connections the client still holds: llama.cpp's after each
        streamed response (whatever its ``Keep-Alive`` header said), uvicorn after 5 idle
        seconds. A request that met such a connection before any byte of a response came
        back never reached the server, so sending it again measures nothing twice. Once a
        response has started, nothing is sent again.

        Returns the response and the attempt that produced it; appends to ``resent`` why the
        request went out again, before the resend, so the reason survives a resend that fails.
        """
        attempt = _Attempt()
        _ATTEMPT.set(attempt)
        try:
            return await self._client.send(request, stream=True), attempt
        except httpx.TransportError as e:
            if not (attempt.reused and _dead_connection(e)):
                raise
            cause = e.__cause__ or e
            if resent is not None:
                resent.append(self._redact(f"{type(cause).__name__}: {cause}"))
        attempt = _Attempt()
        _ATTEMPT.set(attempt)
        return await self._fresh.send(request, stream=True), attempt

    async def _read_body(
        self, url: str, request: httpx.Request, max_bytes: int
    ) -> tuple[int, bytes] | str:
        response, _ = await self._send(request)
        try:
            body = bytearray()
            async for chunk in response.aiter_raw():
                body += chunk
                if len(body) > max_bytes:
                    return f"{url}: body larger than {max_bytes} bytes"
            return response.status_code, bytes(body)
        finally:
            await response.aclose()

    async def get(self, url: str, *, max_bytes: int = 4 << 20) -> tuple[int, bytes] | str:
        """A bounded GET: ``(status, body)``, or a one-line reason it failed."""
        try:
            async with asyncio.timeout(self.deadlines.connect_s + self.deadlines.idle_s):
                return await self._read_body(url, self._client.build_request("GET", url), max_bytes)
        except TimeoutError:
            return f"{url}: no answer in time"
        except (httpx.HTTPError, aiohttp.ClientError, OSError) as e:
            return self._redact(f"{url}: {type(e).__name__}: {e}")

    async def post_json(
        self, path: str, body: dict[str, Any], *, max_bytes: int = 4 << 20
    ) -> tuple[int, Any] | str:
        """A bounded, non-streaming POST under the base URL: ``(status, parsed JSON or
        None)``, or a one-line reason it failed."""
        url = self.base_url + path
        try:
            request = self._client.build_request(
                "POST", url, content=orjson.dumps(body), headers={"accept": "application/json"}
            )
            async with asyncio.timeout(self.deadlines.first_byte_s + self.deadlines.idle_s):
                result = await self._read_body(url, request, max_bytes)
        except TimeoutError:
            return f"{url}: no answer in time"
        except (httpx.HTTPError, aiohttp.ClientError, OSError) as e:
            return self._redact(f"{url}: {type(e).__name__}: {e}")
        if isinstance(result, str):
            return result
        status, data = result
        try:
            parsed = orjson.loads(data) if data else None
        except orjson.JSONDecodeError:
            parsed = None
        return status, parsed

    def chat_request(self, body: dict[str, Any], path: str = CHAT_PATH) -> httpx.Request:
        """The streaming request of :meth:`chat`, built ahead (an open-loop sender builds
        it before the request is due, so serialising it is not part of its lateness);
        ``path`` :data:`COMPLETIONS_PATH` for a completions body (``prompt``, not
        ``messages``)."""
        payload = orjson.dumps({**body, **STREAMING})
        request = self._client.build_request("POST", self.base_url + path, content=payload)
        limit = body.get("max_tokens", body.get("max_completion_tokens"))
        request.extensions[_BOUND] = StreamBound.for_max_tokens(limit)
        return request

    async def chat(self, body: dict[str, Any] | httpx.Request, *, origin_ns: int) -> RequestRecord:
        """Streams one chat completion; never raises for anything the server does.

        Args:
            body: the request, without ``stream``/``stream_options`` (set here), or one
                built by :meth:`chat_request`.
            origin_ns: ``time.perf_counter_ns()`` that record times are relative to.
        """
        request = body if isinstance(body, httpx.Request) else self.chat_request(body)
        deadlines = self.deadlines
        loop = asyncio.get_running_loop()
        started = loop.time()
        total_at = started + deadlines.total_s
        record = RequestRecord(sent_ns=time.perf_counter_ns() - origin_ns)
        resent: list[str] = []
        try:
            async with asyncio.timeout_at(min(total_at, started + deadlines.first_byte_s)) as timer:
                response, attempt = await self._send(request, resent)
                try:
                    # TTFT starts when the request has been written, not when it was queued:
                    # aiohttp reports each body write (a trace signal, in this task's context).
                    record.sent_ns = attempt.sent - origin_ns
                    record.headers_ns = time.perf_counter_ns() - origin_ns
                    if response.status_code >= 400:
                        await self._http_error(response, record)
                    else:
                        bound = request.extensions.get(_BOUND) or StreamBound.for_max_tokens(None)
                        await self._consume(response, record, origin_ns, timer, total_at, bound)
                finally:
                    await response.aclose()
        except TimeoutError:
            if loop.time() >= total_at - 0.001:
                record.fail("timeout-total", f"no end of stream within {deadlines.total_s} s")
            elif record.events == 0:
                record.fail("timeout-first-byte", f"no data within {deadlines.first_byte_s} s")
            else:
                record.fail("stall", f"no data for {deadlines.idle_s} s")
        except httpx.HTTPError as e:
            record.fail(*self._transport_error(e, before_headers=record.headers_ns is None))
        except (aiohttp.ClientError, OSError) as e:
            record.fail("disconnect", self._redact(f"{type(e).__name__}: {e}"))
        except Exception as e:  # noqa: BLE001 - a record, never an exception that ends a run
            record.fail("client-error", self._redact(f"{type(e).__name__}: {e}"))
        record.resent = resent[0] if resent else None
        record.end_ns = time.perf_counter_ns() - origin_ns
        return record

    def _transport_error(self, e: httpx.HTTPError, *, before_headers: bool) -> tuple[str, str]:
        cause = e.__cause__
        message = self._redact(f"{type(cause or e).__name__}: {cause or e}")
        # httpx-aiohttp maps a server closing before the headers to ConnectTimeout too.
        refused = isinstance(e, httpx.ConnectError | httpx.ConnectTimeout)
        if before_headers and refused and not isinstance(cause, aiohttp.ServerDisconnectedError):
            return "connect", message
        return "disconnect", message

    async def _http_error(self, response: httpx.Response, record: RequestRecord) -> None:
        body = bytearray()
        async for chunk in response.aiter_raw():
            body += chunk
            if len(body) >= _MAX_ERROR_BODY:
                break
        message = self._redact(_error_message(bytes(body[:_MAX_ERROR_BODY])))
        status = response.status_code
        record.fail(_classify_status(status, message), f"HTTP {status}: {message}", status)

    async def _consume(
        self,
        response: httpx.Response,
        record: RequestRecord,
        origin_ns: int,
        timer: asyncio.Timeout,
        total_at: float,
        bound: StreamBound,
    ) -> None:
        loop = asyncio.get_running_loop()
        idle_s = self.deadlines.idle_s
        parser = SSEParser()
        state = _StreamState(record, origin_ns)
        loads = orjson.loads
        clock = time.perf_counter_ns
        received = 0
        async for raw in response.aiter_raw():
            now = clock()
            received += len(raw)
            if received > bound.bytes:
                record.fail(
                    "overlong-stream",
                    f"the response passed {bound.bytes} bytes, the bound of its max_tokens; cut",
                )
                return
            payloads = parser.feed(raw)
            if not payloads:
                continue
            record.events += len(payloads)
            for payload in payloads:
                if payload == b"[DONE]":
                    record.done_marker = True
                    continue
                try:
                    event = loads(payload)
                except orjson.JSONDecodeError:
                    record.fail("malformed-stream", f"event is not JSON: {payload[:80]!r}")
                    return
                state.event(event, now)
                if record.error is not None:
                    return
                if len(record.chunks_ns) > bound.chunks:
                    # The chunks up to the bound are kept: how the stream went, not all of it.
                    del record.chunks_ns[bound.chunks :], record.chunk_channels[bound.chunks :]
                    record.last_token_ns = record.chunks_ns[-1]
                    if "c" not in record.chunk_channels:
                        record.first_content_ns = None  # its content came past the bound
                    record.fail(
                        "overlong-stream",
                        f"more than {bound.chunks} token-bearing chunks, the bound of its "
                        "max_tokens; cut",
                    )
                    return
            timer.reschedule(min(total_at, loop.time() + idle_s))
        if record.finish_reason is None:
            record.fail("disconnect", "the stream ended before a finish_reason")
        elif parser.pending.strip():
            record.fail("malformed-stream", f"unterminated event at end: {parser.pending[:80]!r}")
