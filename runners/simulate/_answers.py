"""The simulated endpoint's answering mode: deterministic answers to the functional and
quality checks, and faults that make it fail chosen ones.

Nothing here understands language. Each rule recognises the plain-English phrasing the
checks use (phrasing any instruction-following model answers as well) and computes the
answer from what the prompt itself states: a word to repeat, values "set to" something,
"The <thing> is <value>." facts, a word limit, a canary, a function to write, the text of
an image drawn in the runner's own font. A prompt no rule recognises gets the endpoint's
usual filler words, so workload prompts keep their timing model.
"""

from __future__ import annotations

import random
import re
from typing import Any

import attrs
import orjson

from runners.simulate.profile import Profile, QualityFault
from runners.workload import coding, textimage

_EXACT = re.compile(r"Reply with exactly this word and nothing else: (\S+)")
_CANARY = re.compile(r"Begin your reply with the token (\S+?)[,.]?\s")
_WORD_LIMIT = re.compile(r"[Ii]n at most (\d+) words")
_FUNCTION = re.compile(r"Write a Python function `(\w+)\(")
_SET_TO = re.compile(r'"(\w+)" set to ("[^"]*"|-?\d+(?:\.\d+)?|true|false)')
_FACT = re.compile(r"\bThe ([\w\- ]+?) is ([^.\n]+?)\.(?:\s|$)")
_QUESTION = re.compile(r"What is the ([\w\- ]+?)\?")
_USE_TOOL = re.compile(r"Use the tool that ([^,.]+)")
_WORDS = "the model serves tokens while the scheduler batches requests".split()
_SENTENCE = (
    "A load balancer spreads incoming requests across several servers so that no single "
    "server is overwhelmed and the service stays available"
).split()
_CACHE_SENTENCE = "A cache keeps recent results close so that repeated work is fast."
_NOT_FOUND = "I could not find that in the text."


@attrs.frozen
class Answer:
    """What the answering mode decided."""

    content: str | None = None
    tool: tuple[str, str] | None = None
    """(function name, arguments JSON) of a tool call."""
    empty_at_length: bool = False
    """Only whitespace until max_tokens: an empty visible answer cut by length."""


def example_value(schema: Any, rng: random.Random) -> Any:
    """A value of the JSON Schema's type: what the simulator makes up when not told."""
    kind = schema.get("type") if isinstance(schema, dict) else None
    if kind == "object" or (isinstance(schema, dict) and "properties" in schema):
        properties = schema.get("properties") or {}
        return {name: example_value(sub, rng) for name, sub in sorted(properties.items())}
    if kind == "integer":
        return rng.randint(0, 100)
    if kind == "number":
        return rng.randint(0, 1000) / 10
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "array":
        return [example_value(schema.get("items") or {"type": "string"}, rng)]
    if isinstance(schema, dict) and isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    return " ".join(rng.choice(_WORDS) for _ in range(3))


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


def _images(content: Any) -> list[str]:
    if not isinstance(content, list):
        return []
    found = []
    for part in content:
        if isinstance(part, dict) and part.get("type") == "image_url":
            url = (part.get("image_url") or {}).get("url")
            if isinstance(url, str):
                found.append(url)
    return found


def _value(literal: str) -> Any:
    return orjson.loads(literal)


def _facts(messages: list[dict[str, Any]]) -> dict[str, str]:
    facts: dict[str, str] = {}
    for message in messages:
        for key, value in _FACT.findall(_text(message.get("content"))):
            facts[key.strip().lower()] = value.strip()
    return facts


def _fires(profile: Profile, kind: str, prompt_tokens: int) -> QualityFault | None:
    for fault in profile.quality_faults:
        if fault.kind != kind or prompt_tokens < fault.min_prompt_tokens:
            continue
        if fault.max_prompt_tokens is not None and prompt_tokens > fault.max_prompt_tokens:
            continue
        return fault
    return None


def _filled(
    properties: dict[str, Any], pairs: dict[str, str], rng: random.Random
) -> dict[str, Any]:
    """Stated values where the request states them, made-up ones elsewhere."""
    return {
        name: _value(pairs[name]) if name in pairs else example_value(spec, rng)
        for name, spec in sorted(properties.items())
    }


def _tool_call(
    profile: Profile, body: dict[str, Any], request: str, prompt_tokens: int, rng: random.Random
) -> tuple[str, str] | None:
    tools = [t.get("function") for t in body.get("tools") or () if isinstance(t, dict)]
    functions = [f for f in tools if isinstance(f, dict) and isinstance(f.get("name"), str)]
    if not functions or body.get("tool_choice") == "none":
        return None
    wanted = _USE_TOOL.search(request)
    words = set(re.findall(r"\w+", (wanted.group(1) if wanted else request).lower()))

    def score(function: dict[str, Any]) -> int:
        described = f"{function['name'].replace('_', ' ')} {function.get('description', '')}"
        return len(words & set(re.findall(r"\w+", described.lower())))

    best = max(range(len(functions)), key=lambda i: (score(functions[i]), -i))
    if _fires(profile, "wrong-tool", prompt_tokens):
        best = (best + 1) % len(functions)
    function = functions[best]
    properties = (function.get("parameters") or {}).get("properties") or {}
    arguments = _filled(properties, dict(_SET_TO.findall(request)), rng)
    return function["name"], orjson.dumps(arguments).decode()


def _json_answer(body: dict[str, Any], request: str, rng: random.Random) -> str | None:
    response_format = body.get("response_format")
    pairs = dict(_SET_TO.findall(request))
    if not isinstance(response_format, dict) or not pairs:
        return None  # nothing stated: the endpoint's usual made-up JSON
    kind = response_format.get("type")
    if kind == "json_schema":
        spec = response_format.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
        properties = schema.get("properties") if isinstance(schema, dict) else None
        document = _filled(properties if isinstance(properties, dict) else {}, pairs, rng)
    elif kind == "json_object":
        document = {name: _value(literal) for name, literal in pairs.items()}
    else:
        return None
    return orjson.dumps(document).decode()


def answer(
    profile: Profile, body: dict[str, Any], *, prompt_tokens: int, seed: bytes = b""
) -> Answer | None:
    """The answering mode's reply to a request, or None when no rule recognises it."""
    rng = random.Random(seed + b"answer")
    messages = [m for m in body.get("messages") or () if isinstance(m, dict)]
    if not profile.answering or not messages:
        return None
    users = [m for m in messages if m.get("role") == "user"]
    request = _text(users[-1].get("content")) if users else ""
    last = messages[-1]
    if last.get("role") == "tool":
        # A tool's result has come back: answer the user's question from it.
        question = _QUESTION.search(request)
        facts = _facts(messages)
        if question:
            return Answer(facts.get(question.group(1).strip().lower(), _NOT_FOUND))
        return Answer(_text(last.get("content")))
    if last.get("role") != "user":
        return None
    if body.get("tools"):
        call = _tool_call(profile, body, request, prompt_tokens, rng)
        if call is not None:
            return Answer(tool=call)
    structured = _json_answer(body, request, rng)
    if structured is not None:
        if _fires(profile, "broken-json", prompt_tokens):
            structured = structured[:-1] + ","
        return Answer(structured)
    images = _images(last.get("content"))
    if images:
        if _fires(profile, "blind", prompt_tokens):
            return Answer("I cannot see an image in this conversation.")
        png = textimage.parse_data_uri(images[0])
        text = textimage.read_text(png) if png is not None else None
        return Answer(text if text is not None else "The image holds no text I can read.")
    exact = _EXACT.search(request)
    if exact:
        return Answer(exact.group(1))
    canary = _CANARY.search(request)
    if canary:
        if _fires(profile, "late-canary", prompt_tokens):
            return Answer(f"{_CACHE_SENTENCE} {canary.group(1)}")
        return Answer(f"{canary.group(1)} {_CACHE_SENTENCE}")
    limit = _WORD_LIMIT.search(request)
    if limit and not _fires(profile, "ignore-word-limit", prompt_tokens):
        words = max(1, int(limit.group(1)) - 2)
        return Answer(" ".join(_SENTENCE[:words]) + ".")
    function = _FUNCTION.search(request)
    if function:
        task = coding.task_named(function.group(1))
        if task is not None:
            wrong = _fires(profile, "wrong-code", prompt_tokens)
            return Answer(f"```python\n{task.buggy if wrong else task.reference}```")
    question = _QUESTION.search(request.strip().splitlines()[-1] if request.strip() else "")
    if question:
        fault = _fires(profile, "miss-needle", prompt_tokens)
        if fault is not None:
            return Answer(empty_at_length=True) if fault.answer == "empty" else Answer(_NOT_FOUND)
        facts = _facts(messages)
        return Answer(facts.get(question.group(1).strip().lower(), _NOT_FOUND))
    return None


def leaks_reasoning(profile: Profile, body: dict[str, Any], *, prompt_tokens: int) -> bool:
    """Whether this reply leaks reasoning markup into the content while thinking was
    explicitly switched off (the ``leak-reasoning`` fault)."""
    kwargs = body.get("chat_template_kwargs")
    disabled = isinstance(kwargs, dict) and kwargs.get("enable_thinking") is False
    return disabled and _fires(profile, "leak-reasoning", prompt_tokens) is not None
