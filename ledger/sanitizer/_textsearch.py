"""Substring search that reads a long text at memory speed where its needle is rare.

CPython 3.11's ``str.find`` for a needle of several characters reads about 1.5 GB/s (a
270 KB log: 100-200 µs for ``"<redacted:"`` or ``'{"'``), while one character is looked
for with ``memchr``, some hundred times faster. The sanitizer asks such questions of
every text file several times (does it hold a placeholder, a fence, a JSON object), and
the answer is mostly no, or found at once. The benchmark that measures it:
``benchmarks/sanitize_bench.py``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

_TRIES = 16
"""First characters tried one by one before the whole needle is searched for: a text
that holds the first character often (``{`` in JSON) gets the plain search."""


def find(text: str, needle: str, start: int = 0, end: int | None = None) -> int:
    """``text.find(needle, start, end)``, reading the text for the needle's first
    character first."""
    if not needle:
        return text.find(needle, start, end)
    first = needle[0]
    position = text.find(first, start, end)
    for _ in range(_TRIES):
        if position < 0 or text.startswith(needle, position, end):
            return position
        position = text.find(first, position + 1, end)
    return -1 if position < 0 else text.find(needle, position, end)


def holds(text: str, needle: str) -> bool:
    """``needle in text``, as :func:`find` reads it."""
    return find(text, needle) >= 0


def matches(pattern: re.Pattern[str], text: str, prefix: str) -> Iterator[re.Match[str]]:
    """``pattern.finditer(text)`` for a pattern each match of which starts with
    ``prefix``: each place the prefix stands is tried, left to right."""
    position = find(text, prefix)
    while position >= 0:
        match = pattern.match(text, position)
        if match is not None:
            yield match
            position = find(text, prefix, max(match.end(), position + 1))
        else:
            position = find(text, prefix, position + 1)
