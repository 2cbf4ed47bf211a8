"""Functional and quality gates: preflight, thinking control, strict output, canaries,
the long-context quality sweep and coding quality.

Every check records the request it sent (long texts shortened, with the SHA-256 of the
whole body), an excerpt of the response, the assertion it made and its verdict:
``passed``, ``failed`` or ``not-applicable`` (the server lacks the feature; never a pass).
Requests go one at a time: these stages measure answers, not speed.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

import jsonschema_rs
import orjson

from runners import coding, textimage, toolset
from runners.client import EndpointClient, RequestRecord
from runners.plan import Arm, EvidenceStage
from runners.workload import Filler

_EXCERPT = 300
_SHORT = 400
WORDS_PER_TOKEN = 0.75
"""English words per token of common tokenizers: sizes nominal-depth filler."""
NOT_APPLICABLE_STATUS = frozenset({404, 405, 501})


def _shorten(value: Any) -> Any:
    if isinstance(value, str):
        if value.startswith("data:"):
            return f"{value[:30]}... [{len(value)} characters]"
        if len(value) > _SHORT:
            return f"{value[:200]} ... {value[-120:]} [{len(value)} characters]"
        return value
    if isinstance(value, list):
        if len(value) > 8:
            return [_shorten(v) for v in value[:3]] + [f"... [{len(value)} items]"]
        return [_shorten(v) for v in value]
    if isinstance(value, dict):
        return {k: _shorten(v) for k, v in value.items()}
    return value


def request_record(body: dict[str, Any]) -> dict[str, Any]:
    """The request as an artifact keeps it: shortened, with the digest of the whole."""
    return {
        "sha256": hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest(),
        "body": _shorten(body),
    }


def response_record(record: RequestRecord) -> dict[str, Any]:
    """An excerpt of a streamed response."""
    usage = record.usage or {}
    return {
        "excerpt": record.text[:_EXCERPT],
        "content_chars": len(record.text),
        "finish_reason": record.finish_reason,
        "reasoning_chars": record.reasoning_chars,
        "tool_calls": [
            {"name": c.get("name"), "arguments": str(c.get("arguments", ""))[:_EXCERPT]}
            for _, c in sorted(record.tool_calls.items())
        ],
        "tool_deltas": record.chunk_channels.count("t"),
        "prompt_tokens": usage.get("prompt_tokens"),
        "error": record.error,
    }


def check(
    name: str,
    body: dict[str, Any],
    response: dict[str, Any],
    assertion: str,
    verdict: str,
    detail: str,
    **extra: Any,
) -> dict[str, Any]:
    """One check as its artifact records it."""
    return {
        "name": name,
        "request": request_record(body),
        "response": response,
        "assertion": assertion,
        "verdict": verdict,
        "detail": detail,
        **extra,
    }


class Session:
    """What every check of a stage needs: the client, the arm and the stage's settings."""

    def __init__(self, client: EndpointClient, arm: Arm, stage: EvidenceStage, seed: int) -> None:
        self.client = client
        self.arm = arm
        self.stage = stage
        self.seed = seed
        self.origin = time.perf_counter_ns()

    def body(
        self,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int | None = None,
        thinking: bool | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        """A chat request; ``thinking`` None leaves the server's default."""
        body: dict[str, Any] = dict(self.arm.extra_body)
        if thinking is not None:
            body.update(self.arm.thinking_fields(thinking))
        body.update(
            model=self.arm.model,
            messages=messages,
            max_tokens=max_tokens or int(self.stage.settings["max_tokens"]),
            temperature=0.0,
            seed=self.seed,
            **fields,
        )
        return body

    async def send(self, body: dict[str, Any]) -> RequestRecord:
        return await self.client.chat(body, origin_ns=self.origin)


def _user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def _failed_request(record: RequestRecord) -> str | None:
    if record.error is not None:
        return f"request failed: {record.error['class']}: {record.error['message']}"
    return None


def _json_content(text: str) -> tuple[Any, str | None]:
    try:
        return orjson.loads(text.strip()), None
    except orjson.JSONDecodeError as e:
        return None, f"the answer is not JSON: {e}"


# -- preflight ------------------------------------------------------------------------


async def _text(session: Session) -> dict[str, Any]:
    word = "ANVIL-OK"
    body = session.body(_user(f"Reply with exactly this word and nothing else: {word}"))
    record = await session.send(body)
    answer = record.text.strip().strip(".").strip()
    problem = _failed_request(record) or (
        None if answer == word else f"answered {record.text[:60]!r}"
    )
    return check(
        "text",
        body,
        response_record(record),
        f"the visible answer is exactly {word!r}",
        "failed" if problem else "passed",
        problem or "exact answer",
    )


_JSON_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "year": {"type": "integer"}},
    "required": ["name", "year"],
    "additionalProperties": False,
}


async def _json_object(session: Session) -> dict[str, Any]:
    expected = {"city": "Oslo", "count": 3}
    body = session.body(
        _user(
            'Return a JSON object with "city" set to "Oslo" and "count" set to 3, and no other keys.'
        ),
        response_format={"type": "json_object"},
    )
    record = await session.send(body)
    problem = _failed_request(record)
    if problem is None:
        parsed, problem = _json_content(record.text)
        if problem is None and parsed != expected:
            problem = f"parsed {orjson.dumps(parsed).decode()[:120]}, expected {expected}"
    return check(
        "json-object",
        body,
        response_record(record),
        f"response_format json_object: the answer parses as JSON and equals {expected}",
        "failed" if problem else "passed",
        problem or "valid JSON with the requested values",
    )


async def _json_schema(session: Session) -> dict[str, Any]:
    expected = {"name": "anvil", "year": 2026}
    body = session.body(
        _user('Return a JSON object with "name" set to "anvil" and "year" set to 2026.'),
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "release", "strict": True, "schema": _JSON_SCHEMA},
        },
    )
    record = await session.send(body)
    problem = _failed_request(record)
    if problem is None:
        parsed, problem = _json_content(record.text)
        if problem is None:
            errors = list(jsonschema_rs.Draft202012Validator(_JSON_SCHEMA).iter_errors(parsed))
            if errors:
                problem = f"does not validate: {errors[0].message}"
            elif parsed != expected:
                problem = f"parsed {parsed}, expected {expected}"
    return check(
        "json-schema",
        body,
        response_record(record),
        f"response_format json_schema: the answer validates against the schema and equals {expected}",
        "failed" if problem else "passed",
        problem or "valid against the schema, with the requested values",
    )


async def _retrieval(session: Session) -> dict[str, Any]:
    text = _placed(Filler(session.seed).text(400), "The vault code is 4417.", 0.5)
    body = session.body(_user(f"{text}\n\nWhat is the vault code? Answer with the number only."))
    record = await session.send(body)
    problem = _failed_request(record) or (
        None if "4417" in record.text else "4417 not in the answer"
    )
    return check(
        "retrieval",
        body,
        response_record(record),
        "the answer holds the fact planted in the middle of the prompt (4417)",
        "failed" if problem else "passed",
        problem or "found",
    )


def _judge_tool(record: RequestRecord, tool: toolset.Tool) -> str | None:
    problem = _failed_request(record)
    if problem:
        return problem
    calls = [record.tool_calls[i] for i in sorted(record.tool_calls)]
    if not calls:
        return f"no tool call (answered {record.text[:60]!r})"
    name = calls[0].get("name")
    if name != tool.name:
        return f"called {name!r}, expected {tool.name!r}"
    try:
        arguments = orjson.loads(calls[0].get("arguments") or "")
    except orjson.JSONDecodeError as e:
        return f"arguments are not JSON: {e}"
    parameters = tool.definition()["function"]["parameters"]
    errors = list(jsonschema_rs.Draft202012Validator(parameters).iter_errors(arguments))
    if errors:
        return f"arguments do not validate: {errors[0].message}"
    if arguments != tool.arguments:
        return f"arguments {arguments}, expected {tool.arguments}"
    return None


async def _tools(session: Session) -> dict[str, Any]:
    count = int(session.stage.settings["tools"])
    chosen = toolset.TOOLS[:count]
    definitions = [t.definition() for t in chosen]
    results = []
    first_body: dict[str, Any] = {}
    for tool in chosen:
        body = session.body(_user(tool.request()), tools=definitions)
        first_body = first_body or body
        record = await session.send(body)
        problem = _judge_tool(record, tool)
        results.append(
            {
                "tool": tool.name,
                "passed": problem is None,
                "detail": problem or "right tool, right arguments",
            }
        )
    passed = sum(1 for r in results if r["passed"])
    return check(
        "tools",
        first_body,
        {"calls": len(results)},
        f"each of {count} requests calls its tool with valid, exactly requested arguments",
        "passed" if passed == count else "failed",
        f"{passed}/{count} tools",
        results=results,
    )


async def _long_tools(session: Session) -> dict[str, Any] | None:
    tokens = int(session.stage.settings["long_tool_tokens"])
    if tokens == 0:
        return None
    tool = toolset.TOOLS[11]
    filler = Filler(session.seed + 1).text(max(1, int(tokens * WORDS_PER_TOKEN)))
    body = session.body(
        _user(f"{filler}\n\n{tool.request()}"),
        tools=[t.definition() for t in toolset.TOOLS],
    )
    record = await session.send(body)
    problem = _judge_tool(record, tool)
    prompt_tokens = (record.usage or {}).get("prompt_tokens")
    return check(
        "long-tool-prompt",
        body,
        response_record(record),
        f"with all tools and about {tokens} tokens of text before it, the request calls its tool",
        "failed" if problem else "passed",
        (problem or "right tool, right arguments") + f" ({prompt_tokens}-token prompt)",
    )


async def _streaming_tools(session: Session) -> dict[str, Any]:
    tool = toolset.TOOLS[2]
    body = session.body(_user(tool.request()), tools=[t.definition() for t in toolset.TOOLS])
    record = await session.send(body)
    problem = _judge_tool(record, tool)
    deltas = record.chunk_channels.count("t")
    if problem is None and deltas < 2:
        problem = f"the arguments came in {deltas} delta; streaming needs at least two"
    return check(
        "streaming-tool-deltas",
        body,
        response_record(record),
        "tool-call argument deltas, streamed in pieces, assemble into the requested JSON",
        "failed" if problem else "passed",
        problem or f"{deltas} deltas assembled into valid arguments",
    )


async def _tool_continuation(session: Session) -> dict[str, Any]:
    tool = toolset.TOOLS[0]
    question = f"{tool.request()} Then answer: What is the temperature in Oslo?"
    tools = [t.definition() for t in toolset.TOOLS]
    first = session.body(_user(question), tools=tools)
    record = await session.send(first)
    problem = _judge_tool(record, tool)
    body = first
    if problem is None:
        call = record.tool_calls[min(record.tool_calls)]
        call_id = call.get("id") or "call-1"
        body = session.body(
            [
                *_user(question),
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {
                                "name": call.get("name"),
                                "arguments": call.get("arguments"),
                            },
                        }
                    ],
                },
                {
                    "role": "tool",
                    "tool_call_id": call_id,
                    "content": "The temperature in Oslo is 17 degrees Celsius.",
                },
            ],
            tools=tools,
        )
        record = await session.send(body)
        problem = _failed_request(record)
        if problem is None and record.tool_calls:
            problem = "called a tool again instead of answering"
        elif problem is None and "17" not in record.text:
            problem = f"the answer does not use the tool's result: {record.text[:80]!r}"
    else:
        problem = f"first turn: {problem}"
    return check(
        "tool-result-continuation",
        body,
        response_record(record),
        "after the tool's result (17 degrees), the second turn answers with it",
        "failed" if problem else "passed",
        problem or "the answer uses the tool's result",
    )


async def _responses(session: Session) -> dict[str, Any]:
    word = "RESPONSES-OK"
    body = {
        "model": session.arm.model,
        "input": f"Reply with exactly this word and nothing else: {word}",
        "max_output_tokens": 32,
    }
    answer = await session.client.post_json("/responses", body)
    if isinstance(answer, str):
        return check("responses-api", body, {"error": answer}, "", "failed", answer)
    status, document = answer
    if status in NOT_APPLICABLE_STATUS:
        return check(
            "responses-api",
            body,
            {"status": status},
            "POST /v1/responses answers with the word",
            "not-applicable",
            f"the server has no /v1/responses (HTTP {status})",
        )
    text = ""
    if isinstance(document, dict):
        for item in document.get("output") or ():
            for part in (item or {}).get("content") or ():
                if isinstance(part, dict) and part.get("type") == "output_text":
                    text += str(part.get("text", ""))
    problem = (
        None
        if status == 200 and text.strip().strip(".") == word
        else (f"HTTP {status}: {text[:60]!r}")
    )
    return check(
        "responses-api",
        body,
        {"status": status, "excerpt": text[:_EXCERPT]},
        f"POST /v1/responses answers exactly {word!r}",
        "failed" if problem else "passed",
        problem or "exact answer",
    )


OCR_PHRASE = "ANVIL 7 OCR"


async def _image(session: Session) -> dict[str, Any]:
    png = textimage.render_png(OCR_PHRASE)
    body = session.body(
        [
            {
                "role": "user",
                "content": [
                    {
                        "type": "text",
                        "text": "What text is written in this image? Answer with the text only.",
                    },
                    {"type": "image_url", "image_url": {"url": textimage.data_uri(png)}},
                ],
            }
        ]
    )
    record = await session.send(body)

    def norm(text: str) -> str:
        return " ".join(re.findall(r"[A-Z0-9]+", text.upper()))

    problem = _failed_request(record) or (
        None if norm(OCR_PHRASE) in norm(record.text) else f"read {record.text[:60]!r}"
    )
    return check(
        "image-ocr",
        body,
        response_record(record),
        f"the answer holds the text drawn in the image ({OCR_PHRASE!r}, a PNG the runner renders)",
        "failed" if problem else "passed",
        problem or "read the image's text",
        image_sha256=hashlib.sha256(png).hexdigest(),
    )


PREFLIGHT: tuple[tuple[str, Callable[[Session], Awaitable[dict[str, Any] | None]]], ...] = (
    ("text", _text),
    ("json-object", _json_object),
    ("json-schema", _json_schema),
    ("retrieval", _retrieval),
    ("tools", _tools),
    ("long-tool-prompt", _long_tools),
    ("streaming-tool-deltas", _streaming_tools),
    ("tool-result-continuation", _tool_continuation),
    ("responses-api", _responses),
    ("image-ocr", _image),
)
"""Every preflight check, in the order they run."""


async def run_preflight(session: Session) -> list[dict[str, Any]]:
    skip = set(session.stage.settings.get("skip", ()))
    found = []
    for name, run in PREFLIGHT:
        if name in skip:
            continue
        result = await run(session)
        if result is not None:
            found.append(result)
    return found


# -- thinking control -----------------------------------------------------------------

_MARKUP = re.compile(r"</?think>|<\|?reasoning\|?>", re.IGNORECASE)


async def run_thinking_control(session: Session) -> list[dict[str, Any]]:
    found = []
    for repetition in range(int(session.stage.settings["repetitions"])):
        for enabled in (False, True):
            word = f"THINK-{'ON' if enabled else 'OFF'}-{repetition + 1}"
            body = session.body(
                _user(f"Reply with exactly this word and nothing else: {word}"), thinking=enabled
            )
            record = await session.send(body)
            problem = _failed_request(record)
            if problem is None and enabled and record.reasoning_chars == 0:
                problem = "no reasoning channel with thinking enabled"
            if problem is None and not enabled:
                if record.reasoning_chars:
                    problem = (
                        f"{record.reasoning_chars} reasoning characters with thinking disabled"
                    )
                elif _MARKUP.search(record.text):
                    problem = "reasoning markup in the visible content with thinking disabled"
            found.append(
                check(
                    f"thinking-{'enabled' if enabled else 'disabled'}-{repetition + 1}",
                    body,
                    response_record(record),
                    "enabled: a dedicated reasoning channel"
                    if enabled
                    else "disabled: no reasoning channel and no reasoning markup in the content",
                    "failed" if problem else "passed",
                    problem or "as switched",
                )
            )
    return found


# -- strict output and canaries ------------------------------------------------------

_TOPICS = (
    "what a load balancer does",
    "why a prefix cache speeds up prefill",
    "what tensor parallelism splits",
    "why decode is memory-bound",
    "what a KV cache stores",
)


async def run_strict_output(session: Session) -> list[dict[str, Any]]:
    limit = int(session.stage.settings["word_limit"])
    found = []
    for index in range(int(session.stage.settings["requests"])):
        topic = _TOPICS[index % len(_TOPICS)]
        body = session.body(_user(f"In at most {limit} words, explain {topic}."))
        record = await session.send(body)
        words = len(record.text.split())
        problem = _failed_request(record)
        if problem is None and record.finish_reason != "stop":
            problem = f"ended by {record.finish_reason} after {words} words, not by itself"
        elif problem is None and not 0 < words <= limit:
            problem = f"{words} words, limit {limit}"
        found.append(
            check(
                f"strict-output-{index + 1}",
                body,
                response_record(record),
                f"a non-empty answer of at most {limit} words that ends before max_tokens",
                "failed" if problem else "passed",
                problem or f"{words} words",
            )
        )
    return found


async def run_canary(session: Session) -> list[dict[str, Any]]:
    rng = random.Random(f"anvil-ledger canary {session.seed}")
    found = []
    for index in range(int(session.stage.settings["requests"])):
        token = f"CANARY-{rng.getrandbits(24):06X}"
        body = session.body(
            _user(
                f"Begin your reply with the token {token}, then explain in one sentence what a cache is."
            )
        )
        record = await session.send(body)
        problem = _failed_request(record)
        if problem is None and not record.text.lstrip().startswith(token):
            problem = f"the reply starts {record.text.strip()[:40]!r}"
        found.append(
            check(
                f"canary-{index + 1}",
                body,
                response_record(record),
                f"the visible reply begins with the unique token {token}",
                "failed" if problem else "passed",
                problem or "first position",
            )
        )
    return found


# -- context quality ------------------------------------------------------------------

FAMILIES = ("number", "phrase", "key-value")
_PHRASE_WORDS = "silver lantern harbor quiet meadow copper falcon amber river cedar".split()


def _needle(family: str, rng: random.Random) -> tuple[str, str, str]:
    """(needle text, question, expected answer) of one family."""
    if family == "number":
        value = str(rng.randint(10000, 99999))
        return (
            f"The secret number is {value}.",
            "What is the secret number? Answer with the number only.",
            value,
        )
    if family == "phrase":
        value = " ".join(rng.sample(_PHRASE_WORDS, 3))
        return (
            f"The secret phrase is {value}.",
            "What is the secret phrase? Answer with the phrase only.",
            value,
        )
    keys = [f"K-{rng.randint(1000, 9999)}" for _ in range(5)]
    values = [str(rng.randint(10, 999)) for _ in keys]
    block = " ".join(f"The value for key {k} is {v}." for k, v in zip(keys, values, strict=True))
    pick = rng.randrange(len(keys))
    return (
        block,
        f"What is the value for key {keys[pick]}? Answer with the value only.",
        values[pick],
    )


def _placed(filler: str, needle: str, fraction: float) -> str:
    """The filler with the needle inserted, as whole sentences, at ``fraction`` of it."""
    sentences = re.split(r"(?<=\.)\s+", filler.strip())
    at = round(fraction * len(sentences))
    return " ".join([*sentences[:at], needle, *sentences[at:]])


async def run_context_quality(session: Session) -> list[dict[str, Any]]:
    settings = session.stage.settings
    positions = int(settings["positions"])
    found = []
    for depth in settings["depths"]:
        filler = Filler(session.seed).text(max(12, int(depth * WORDS_PER_TOKEN)))
        for family in settings["families"]:
            for position in range(positions):
                fraction = position / (positions - 1) if positions > 1 else 0.5
                for repetition in range(int(settings["repetitions"])):
                    rng = random.Random(f"{session.seed}:{depth}:{family}:{position}:{repetition}")
                    needle, question, expected = _needle(family, rng)
                    body = session.body(_user(f"{_placed(filler, needle, fraction)}\n\n{question}"))
                    record = await session.send(body)
                    visible = record.text.strip()
                    if record.error is not None:
                        verdict, outcome = "failed", "error"
                    elif expected.lower() in visible.lower():
                        verdict, outcome = "passed", "passed"
                    elif not visible and record.finish_reason == "length":
                        verdict, outcome = "failed", "empty-at-length"
                    else:
                        verdict, outcome = "failed", "incorrect"
                    found.append(
                        check(
                            f"{family}-d{depth}-p{position}-r{repetition + 1}",
                            body,
                            response_record(record),
                            f"the visible answer holds {expected!r}",
                            verdict,
                            outcome if outcome != "error" else str(_failed_request(record)),
                            depth=depth,
                            family=family,
                            position=round(fraction, 4),
                            outcome=outcome,
                        )
                    )
    return found


# -- coding quality -------------------------------------------------------------------


async def run_coding_quality(session: Session) -> list[dict[str, Any]]:
    settings = session.stage.settings
    tasks = coding.TASKS[: int(settings["tasks"])]
    found = []
    for repetition in range(int(settings["repetitions"])):
        for task in tasks:
            body = session.body(_user(task.prompt))
            record = await session.send(body)
            problem = _failed_request(record)
            if problem is None:
                code = coding.extract_code(record.text)
                ok, detail = await asyncio.to_thread(
                    coding.run_hidden_tests, code, task, timeout_s=float(settings["timeout_s"])
                )
                problem = None if ok else detail
                code_sha256 = hashlib.sha256(code.encode()).hexdigest()
            else:
                code_sha256 = None
            found.append(
                check(
                    f"{task.name}-r{repetition + 1}",
                    body,
                    response_record(record),
                    f"the answer's code passes the hidden tests of {task.name}",
                    "failed" if problem else "passed",
                    problem or "all hidden tests passed",
                    task=task.name,
                    code_sha256=code_sha256,
                )
            )
    return found


RUNNERS: dict[str, Callable[[Session], Awaitable[list[dict[str, Any]]]]] = {
    "preflight": run_preflight,
    "thinking-control": run_thinking_control,
    "strict-output": run_strict_output,
    "canary": run_canary,
    "context-quality": run_context_quality,
    "coding-quality": run_coding_quality,
}
