"""Text of the evidence written into Markdown (reports, tickets) as text, never as markup.

An identity, a reason or a failure comes from a campaign's files, which anyone who runs a
server can fill: ``<img onerror=...>``, ``![](https://tracker/p.png)`` or a line that
starts with ``#`` must be shown as the characters it is, on the line it is given.
"""

from __future__ import annotations

import re

_ACTIVE = re.compile(r"[\\`*\[\]<>&]")
"""What makes text markup in Markdown: HTML (``<img onerror=...>``), links and images
(``![](https://...)``), entities, code spans and emphasis; each is escaped."""

_BLOCK_START = re.compile(r"(?P<marker>[#>+*=_~-]|[0-9]+[.)])")
"""What opens a block when a line starts with it: a heading, a quote, a list item, a rule."""


def inline(text: str) -> str:
    """``text`` as Markdown shows it literally inside a line: it loads no image and makes
    no link or markup, and its line breaks are spaces."""
    return _ACTIVE.sub(lambda m: "\\" + m.group(), " ".join(text.splitlines()))


def line(text: str) -> str:
    """:func:`inline` as a line of its own (a paragraph, a list item, a heading's text),
    which starts no block either: a heading, a list, a rule, code by indentation."""
    shown = inline(text).lstrip()
    start = _BLOCK_START.match(shown)
    if start is None:
        return shown
    end = len(start["marker"]) - 1
    return shown[:end] + "\\" + shown[end:]


def cell(text: str) -> str:
    """:func:`inline` inside a table's cell, where ``|`` would end it."""
    return inline(text).replace("|", "\\|")
