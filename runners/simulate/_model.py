"""The simulated server's model: token counting, the prefix cache and reply generation.

Nothing here is a language model. Tokens are words and punctuation marks of the rendered
chat template, replies are seeded word sequences, structured replies are valid JSON split
into short pieces. What matters is that every count and time is known exactly, so a
client's measurement can be checked against it.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import attrs
import orjson

from runners.simulate import _answers as answers
from runners.simulate.profile import Profile

_TOKEN = re.compile(r"\w+|[^\w\s]")
_WORDS = (
    "the model serves tokens while the scheduler batches requests and the cache keeps "
    "prefixes warm so that prefill stays short under load and decode holds its rate"
).split()
ASSISTANT_PRIMING_TOKENS = 5
"""Tokens of the ``<|assistant|>`` marker the template appends."""


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


def render_prompt(body: dict[str, Any], *, thinking: bool) -> str:
    """The chat template: one ``<|role|>`` marker per message, tools as a system block."""
    parts = []
    tools = body.get("tools")
    if tools:
        parts.append("<|tools|>" + orjson.dumps(tools).decode())
    for message in body.get("messages", []):
        if isinstance(message, dict):
            parts.append(f"<|{message.get('role', 'user')}|>{_text_of(message.get('content'))}")
    if thinking:
        parts.append("<think>")
    return "\n".join(parts)


def tokenize(text: str) -> list[str]:
    """Words and punctuation marks: the simulated tokenizer."""
    return _TOKEN.findall(text)


def tokens_digest(tokens: list[str]) -> bytes:
    """What a reply is drawn from: the prompt's tokens, NUL-joined and hashed, so the same
    prompt gets the same reply."""
    return hashlib.sha256("\x00".join(tokens).encode()).digest()


def count_prompt_tokens(tokens: list[str]) -> int:
    """Prompt tokens as the server reports them in ``usage``."""
    return len(tokens) + ASSISTANT_PRIMING_TOKENS


class PrefixCache:
    """Block-granular prefix cache with least-recently-used eviction.

    A block is reused only if every block before it was too, as in vLLM and SGLang: the
    hash of a block chains the hashes of the blocks before it.
    """

    def __init__(self, block_tokens: int, capacity_blocks: int) -> None:
        self._block = block_tokens
        self._capacity = capacity_blocks
        self._blocks: OrderedDict[bytes, None] = OrderedDict()

    def _hashes(self, tokens: list[str]) -> list[bytes]:
        hashes = []
        previous = b""
        block = self._block
        for start in range(0, len(tokens) - len(tokens) % block, block):
            previous = hashlib.blake2b(
                previous + "\x00".join(tokens[start : start + block]).encode(), digest_size=16
            ).digest()
            hashes.append(previous)
        return hashes

    def lookup_and_insert(self, tokens: list[str], prompt_tokens: int) -> int:
        """Returns the cached prompt tokens, then caches this prompt's blocks."""
        hashes = self._hashes(tokens)
        hit = 0
        for digest in hashes:
            if digest not in self._blocks:
                break
            hit += 1
        for digest in hashes:
            self._blocks[digest] = None
            self._blocks.move_to_end(digest)
        while len(self._blocks) > self._capacity:
            self._blocks.popitem(last=False)
        # The last prompt token is always computed: its logits start the reply.
        return min(hit * self._block, prompt_tokens - 1)


@attrs.frozen
class Piece:
    """One streamed token."""

    channel: str
    """``reasoning``, ``content`` or ``tool``."""
    text: str
    """Its text (for ``tool``, a fragment of the arguments)."""


@attrs.frozen
class Reply:
    """Everything a request will be answered with, decided before the first token.

    Word texts are drawn as tokens go out, not up front: the synchronous work a request
    does on arrival delays every request that arrives with it.
    """

    reasoning_tokens: int
    """Tokens of the reasoning channel, sent first."""
    answer_tokens: int
    """Tokens after the reasoning: content, or tool-call argument fragments."""
    finish_reason: str
    """``stop``, ``length`` or ``tool_calls``."""
    seed: bytes
    """Seeds the words drawn."""
    fragments: tuple[str, ...] = ()
    """Structured answer text (JSON or tool arguments), one fragment per token."""
    tool_name: str | None = None
    """The function called, for a tool reply."""

    @property
    def tokens(self) -> int:
        """Completion tokens."""
        return self.reasoning_tokens + self.answer_tokens

    def pieces(self) -> Iterator[Piece]:
        """The tokens in order."""
        rng = random.Random(self.seed)
        words = _WORDS
        for _ in range(self.reasoning_tokens):
            yield Piece("reasoning", " " + words[rng.randrange(len(words))])
        channel = "tool" if self.tool_name is not None else "content"
        fragments = self.fragments
        for index in range(self.answer_tokens):
            if index < len(fragments):
                text = fragments[index]
            elif fragments:
                # Past the end of a JSON reply that may not stop: whitespace keeps it valid.
                text = "\n"
            else:
                text = " " + words[rng.randrange(len(words))]
            yield Piece(channel, text)


def _split(text: str, size: int = 4) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _structured_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    response_format = body.get("response_format")
    if not isinstance(response_format, dict):
        return None
    kind = response_format.get("type")
    if kind == "json_object":
        return {"type": "object", "properties": {"summary": {"type": "string"}}}
    if kind == "json_schema":
        spec = response_format.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
        return schema if isinstance(schema, dict) else {"type": "object"}
    return None


def _chosen_tool(body: dict[str, Any]) -> dict[str, Any] | None:
    tools = body.get("tools")
    choice = body.get("tool_choice", "auto")
    if not isinstance(tools, list) or not tools or choice == "none":
        return None
    functions = [t["function"] for t in tools if isinstance(t, dict) and "function" in t]
    if isinstance(choice, dict):
        wanted = (choice.get("function") or {}).get("name")
        functions = [f for f in functions if f.get("name") == wanted]
    return functions[0] if functions and isinstance(functions[0], dict) else None


_LEAK = ("<think>", " Let", " me", " think", " first", ".", "</think>", "\n")
"""Reasoning markup a ``leak-reasoning`` fault puts into the visible content."""


def _answered(
    answer: answers.Answer | None, leak: bool, room: int, reasoning: int, seed: bytes
) -> Reply | None:
    if answer is None and not leak:
        return None
    if answer is not None and answer.tool is not None:
        name, arguments = answer.tool
        fragments = _split(arguments)
        finish = "tool_calls" if len(fragments) <= room else "length"
        return Reply(
            reasoning, min(len(fragments), room), finish, seed, tuple(fragments[:room]), name
        )
    if answer is not None and answer.empty_at_length:
        return Reply(reasoning, room, "length", seed, ("\n",))
    text = answer.content if answer is not None and answer.content is not None else None
    if text is None:
        return None  # a leak with nothing recognised: filler words after the markup
    fragments = [*(_LEAK if leak else ()), *(re.findall(r"\s*\S+", text) or [""])]
    count = min(len(fragments), room)
    finish = "stop" if len(fragments) <= room else "length"
    return Reply(reasoning, count, finish, seed, tuple(fragments[:count]))


def plan_reply(
    profile: Profile,
    body: dict[str, Any],
    *,
    prompt_digest: bytes,
    max_tokens: int,
    thinking: bool,
    prompt_tokens: int = 0,
) -> Reply:
    """Decides the reply to a request: its tokens, channels and finish reason."""
    seed = prompt_digest + profile.seed.to_bytes(8, "little", signed=True)
    min_tokens = body.get("min_tokens")
    floor = min_tokens if isinstance(min_tokens, int) and min_tokens > 0 else 0
    ignore_eos = body.get("ignore_eos") is True
    reasoning = min(profile.reasoning_tokens, max_tokens) if thinking else 0
    room = max_tokens - reasoning
    answered = _answered(
        answers.answer(profile, body, prompt_tokens=prompt_tokens, seed=seed),
        answers.leaks_reasoning(profile, body, prompt_tokens=prompt_tokens),
        room,
        reasoning,
        seed,
    )
    if answered is not None:
        return answered
    tool = _chosen_tool(body)
    schema = _structured_schema(body)
    if tool is not None:
        rng = random.Random(seed + b"tool")
        arguments = orjson.dumps(answers.example_value(tool.get("parameters") or {}, rng)).decode()
        fragments = _split(arguments)
        finish = "tool_calls" if len(fragments) <= room else "length"
        return Reply(
            reasoning,
            min(len(fragments), room),
            finish,
            seed,
            tuple(fragments[:room]),
            str(tool.get("name", "tool")),
        )
    fragments = []
    natural = profile.natural_output_tokens
    if schema is not None:
        rng = random.Random(seed + b"json")
        fragments = _split(orjson.dumps(answers.example_value(schema, rng)).decode())
        natural = len(fragments)
    wanted = room if ignore_eos else max(natural, floor)
    count = min(wanted, room)
    finish = "length" if wanted >= room else "stop"
    return Reply(reasoning, count, finish, seed, tuple(fragments[:count]))
