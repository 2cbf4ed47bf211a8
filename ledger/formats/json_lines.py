"""Where a JSON pointer's value starts in a document's text: the line a CI system shows.

Findings name a file and a JSON pointer; code scanning and annotations place a result on a
line. Parsers give values, not places, so the text is walked token by token (strings as
one token each) until the value the pointer names begins.
"""

from __future__ import annotations

import re

import orjson

__all__ = ["MAX_LOCATED_BYTES", "line_of", "pointer_tokens"]

MAX_LOCATED_BYTES = 16 << 20
"""Larger documents are not walked: a finding there is placed on the file alone."""

_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[{}\[\],:]|[^\s{}\[\],:"]+', re.DOTALL)


def pointer_tokens(pointer: str) -> list[str] | None:
    """The reference tokens of an RFC 6901 pointer; None when it is not one."""
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        return None
    return [part.replace("~1", "/").replace("~0", "~") for part in pointer[1:].split("/")]


def line_of(data: bytes, pointer: str) -> int | None:
    """The 1-based line where the value at ``pointer`` starts; None when the text does not
    hold it (no such member, not JSON, or over :data:`MAX_LOCATED_BYTES`)."""
    target = pointer_tokens(pointer)
    if target is None or len(data) > MAX_LOCATED_BYTES:
        return None
    if not target:
        return 1
    # Each open container: [is an object, the key or index of the value to come, a key is
    # awaited].
    stack: list[list[object]] = []
    for match in _TOKEN.finditer(data):
        token = match.group()
        top = stack[-1] if stack else None
        if top is not None and top[0] and top[2]:
            if token == b"}":
                stack.pop()
            elif token.startswith(b'"'):
                try:
                    top[1], top[2] = orjson.loads(token), False
                except orjson.JSONDecodeError:
                    return None
            elif token != b",":
                return None
            continue
        if token == b":":
            continue
        if token == b",":
            if top is not None and top[0]:
                top[2] = True
            elif top is not None:
                top[1] = str(int(str(top[1])) + 1)
            continue
        if token in (b"]", b"}"):
            if not stack:
                return None
            stack.pop()
            continue
        if [str(frame[1]) for frame in stack] == target:
            return data.count(b"\n", 0, match.start()) + 1
        if token == b"{":
            stack.append([True, "", True])
        elif token == b"[":
            stack.append([False, "0", False])
    return None
