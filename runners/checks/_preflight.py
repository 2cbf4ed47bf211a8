"""The preflight checks: text, JSON modes, retrieval, tool calling (twenty tools, a long
tool prompt, streamed deltas, continuation after a tool's result), the Responses API and
image input."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Awaitable, Callable
from typing import Any

import jsonschema_rs
import orjson

from runners.checks import _session as checks
from runners.client import RequestRecord
from runners.workload import Filler, textimage, toolset


async def _text(session: checks.Session) -> dict[str, Any]:
    word = "ANVIL-OK"
    body = session.body(checks.user(f"Reply with exactly this word and nothing else: {word}"))
    record = await session.send(body)
    answer = record.text.strip().strip(".").strip()
    problem = checks.failed_request(record) or (
        None if answer == word else f"answered {record.text[:60]!r}"
    )
    return checks.check(
        "text",
        body,
        checks.response_record(record),
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


async def _json_object(session: checks.Session) -> dict[str, Any]:
    expected = {"city": "Oslo", "count": 3}
    body = session.body(
        checks.user(
            'Return a JSON object with "city" set to "Oslo" and "count" set to 3, and no other keys.'
        ),
        response_format={"type": "json_object"},
    )
    record = await session.send(body)
    problem = checks.failed_request(record)
    if problem is None:
        parsed, problem = checks.json_content(record.text)
        if problem is None and parsed != expected:
            problem = f"parsed {orjson.dumps(parsed).decode()[:120]}, expected {expected}"
    return checks.check(
        "json-object",
        body,
        checks.response_record(record),
        f"response_format json_object: the answer parses as JSON and equals {expected}",
        "failed" if problem else "passed",
        problem or "valid JSON with the requested values",
    )


async def _json_schema(session: checks.Session) -> dict[str, Any]:
    expected = {"name": "anvil", "year": 2026}
    body = session.body(
        checks.user('Return a JSON object with "name" set to "anvil" and "year" set to 2026.'),
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "release", "strict": True, "schema": _JSON_SCHEMA},
        },
    )
    record = await session.send(body)
    problem = checks.failed_request(record)
    if problem is None:
        parsed, problem = checks.json_content(record.text)
        if problem is None:
            errors = list(jsonschema_rs.Draft202012Validator(_JSON_SCHEMA).iter_errors(parsed))
            if errors:
                problem = f"does not validate: {errors[0].message}"
            elif parsed != expected:
                problem = f"parsed {parsed}, expected {expected}"
    return checks.check(
        "json-schema",
        body,
        checks.response_record(record),
        f"response_format json_schema: the answer validates against the schema and equals {expected}",
        "failed" if problem else "passed",
        problem or "valid against the schema, with the requested values",
    )


async def _retrieval(session: checks.Session) -> dict[str, Any]:
    text = checks.placed(Filler(session.seed).text(400), "The vault code is 4417.", 0.5)
    body = session.body(
        checks.user(f"{text}\n\nWhat is the vault code? Answer with the number only.")
    )
    record = await session.send(body)
    problem = checks.failed_request(record) or (
        None if "4417" in record.text else "4417 not in the answer"
    )
    return checks.check(
        "retrieval",
        body,
        checks.response_record(record),
        "the answer holds the fact planted in the middle of the prompt (4417)",
        "failed" if problem else "passed",
        problem or "found",
    )


def _judge_tool(record: RequestRecord, tool: toolset.Tool) -> str | None:
    problem = checks.failed_request(record)
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


async def _tools(session: checks.Session) -> dict[str, Any]:
    count = int(session.stage.settings["tools"])
    chosen = toolset.TOOLS[:count]
    definitions = [t.definition() for t in chosen]
    results = []
    first_body: dict[str, Any] = {}
    for tool in chosen:
        body = session.body(checks.user(tool.request()), tools=definitions)
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
    return checks.check(
        "tools",
        first_body,
        {"calls": len(results)},
        f"each of {count} requests calls its tool with valid, exactly requested arguments",
        "passed" if passed == count else "failed",
        f"{passed}/{count} tools",
        results=results,
    )


async def _long_tools(session: checks.Session) -> dict[str, Any] | None:
    tokens = int(session.stage.settings["long_tool_tokens"])
    if tokens == 0:
        return None
    tool = toolset.TOOLS[11]
    filler = Filler(session.seed + 1).text(max(1, int(tokens * checks.WORDS_PER_TOKEN)))
    body = session.body(
        checks.user(f"{filler}\n\n{tool.request()}"),
        tools=[t.definition() for t in toolset.TOOLS],
    )
    record = await session.send(body)
    problem = _judge_tool(record, tool)
    prompt_tokens = (record.usage or {}).get("prompt_tokens")
    return checks.check(
        "long-tool-prompt",
        body,
        checks.response_record(record),
        f"with all tools and about {tokens} tokens of text before it, the request calls its tool",
        "failed" if problem else "passed",
        (problem or "right tool, right arguments") + f" ({prompt_tokens}-token prompt)",
    )


async def _streaming_tools(session: checks.Session) -> dict[str, Any]:
    tool = toolset.TOOLS[2]
    body = session.body(checks.user(tool.request()), tools=[t.definition() for t in toolset.TOOLS])
    record = await session.send(body)
    problem = _judge_tool(record, tool)
    deltas = record.chunk_channels.count("t")
    if problem is None and deltas < 2:
        problem = f"the arguments came in {deltas} delta; streaming needs at least two"
    return checks.check(
        "streaming-tool-deltas",
        body,
        checks.response_record(record),
        "tool-call argument deltas, streamed in pieces, assemble into the requested JSON",
        "failed" if problem else "passed",
        problem or f"{deltas} deltas assembled into valid arguments",
    )


async def _tool_continuation(session: checks.Session) -> dict[str, Any]:
    tool = toolset.TOOLS[0]
    question = f"{tool.request()} Then answer: What is the temperature in Oslo?"
    tools = [t.definition() for t in toolset.TOOLS]
    first = session.body(checks.user(question), tools=tools)
    record = await session.send(first)
    problem = _judge_tool(record, tool)
    body = first
    if problem is None:
        call = record.tool_calls[min(record.tool_calls)]
        call_id = call.get("id") or "call-1"
        body = session.body(
            [
                *checks.user(question),
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
        problem = checks.failed_request(record)
        if problem is None and record.tool_calls:
            problem = "called a tool again instead of answering"
        elif problem is None and "17" not in record.text:
            problem = f"the answer does not use the tool's result: {record.text[:80]!r}"
    else:
        problem = f"first turn: {problem}"
    return checks.check(
        "tool-result-continuation",
        body,
        checks.response_record(record),
        "after the tool's result (17 degrees), the second turn answers with it",
        "failed" if problem else "passed",
        problem or "the answer uses the tool's result",
    )


async def _responses(session: checks.Session) -> dict[str, Any]:
    word = "RESPONSES-OK"
    body = {
        "model": session.arm.model,
        "input": f"Reply with exactly this word and nothing else: {word}",
        "max_output_tokens": 32,
    }
    answer = await session.client.post_json("/responses", body)
    if isinstance(answer, str):
        return checks.check("responses-api", body, {"error": answer}, "", "failed", answer)
    status, document = answer
    if status in checks.NOT_APPLICABLE_STATUS:
        return checks.check(
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
    return checks.check(
        "responses-api",
        body,
        {"status": status, "excerpt": text[: checks.EXCERPT]},
        f"POST /v1/responses answers exactly {word!r}",
        "failed" if problem else "passed",
        problem or "exact answer",
    )


OCR_PHRASE = "ANVIL 7 OCR"


async def _image(session: checks.Session) -> dict[str, Any]:
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

    problem = checks.failed_request(record) or (
        None if norm(OCR_PHRASE) in norm(record.text) else f"read {record.text[:60]!r}"
    )
    return checks.check(
        "image-ocr",
        body,
        checks.response_record(record),
        f"the answer holds the text drawn in the image ({OCR_PHRASE!r}, a PNG the runner renders)",
        "failed" if problem else "passed",
        problem or "read the image's text",
        image_sha256=hashlib.sha256(png).hexdigest(),
    )


PREFLIGHT: tuple[tuple[str, Callable[[checks.Session], Awaitable[dict[str, Any] | None]]], ...] = (
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


async def run_preflight(session: checks.Session) -> list[dict[str, Any]]:
    skip = set(session.stage.settings.get("skip", ()))
    found = []
    for name, run in PREFLIGHT:
        if name in skip:
            continue
        result = await run(session)
        if result is not None:
            found.append(result)
    return found
