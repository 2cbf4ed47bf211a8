"""Where the sanitizer's detectors can match, found by Hyperscan before they run.

Every detector's regex is handed to Hyperscan as a pattern that matches wherever it can
match and possibly elsewhere: named groups lose their names, a negative lookbehind of one
character class becomes that class's complement (or the start of a line), and other
lookarounds are dropped. One pass tells which detectors may match a text; for each that
may, a second reports each match's end with its leftmost start, so a match of the exact
regex lies inside a reported span of the same detector. The spans are
merged into windows, and the exact regex (Python's ``re``, as before) runs only there: a
regex that fires nowhere is never run, and one that fires on three lines of a log is run on
those lines. The result is the exact regex's, not an approximation of it.

The two engines agree on what ``\\s``, ``\\w``, ``\\b`` and case mean only for ASCII text
without the separators ``\\x1c``-``\\x1f`` (which Python counts as white space); any other
text is scanned whole by every detector, as without a prefilter. Without the ``hyperscan``
package (a platform it has no wheel for) everything is scanned whole.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ledger._internal.sanitizer import Rules

try:
    import hyperscan
except ImportError:  # pragma: no cover - every platform CI runs on has a wheel
    hyperscan = None  # type: ignore[assignment]

_NAMED_GROUP = re.compile(r"\(\?P<[A-Za-z_][A-Za-z0-9_]*>")
_LOOKBEHIND_CLASS = re.compile(r"\(\?<!\[((?:\\.|[^\]\\])*)\]\)")
Window = tuple[int, int]


def _drop_lookarounds(pattern: str) -> str:
    """``pattern`` without its lookaround groups (each assertion removed is a constraint
    less: what matched before still matches)."""
    out: list[str] = []
    i = 0
    depth_skip = 0
    stack: list[bool] = []  # per open group: is it a lookaround being dropped
    in_class = False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            if not depth_skip:
                out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            if char == "]":
                in_class = False
            if not depth_skip:
                out.append(char)
            i += 1
            continue
        if char == "[":
            in_class = True
            if not depth_skip:
                out.append(char)
            # A "]" right after "[" or "[^" is a literal member.
            rest = pattern[i + 1 :]
            lead = 2 if rest.startswith("^]") else 1 if rest.startswith("]") else 0
            if lead and not depth_skip:
                out.append(rest[:lead])
            i += 1 + lead
            continue
        if char == "(":
            look = pattern.startswith(("(?=", "(?!", "(?<=", "(?<!"), i)
            stack.append(look)
            if look:
                depth_skip += 1
            elif not depth_skip:
                out.append(char)
            i += 1
            continue
        if char == ")":
            look = stack.pop() if stack else False
            if look:
                depth_skip -= 1
            elif not depth_skip:
                out.append(char)
            i += 1
            continue
        if not depth_skip:
            out.append(char)
        i += 1
    return "".join(out)


def hyperscan_pattern(pattern: str) -> str:
    """A pattern Hyperscan compiles that matches wherever ``pattern`` matches: the span it
    reports holds the exact match."""
    pattern = _NAMED_GROUP.sub("(", pattern)
    # "Not after one of these" is "at a line's start, or after anything else": the
    # assertion becomes a character consumed, and the span only grows to its left.
    pattern = _LOOKBEHIND_CLASS.sub(lambda m: f"(?:^|[^{m.group(1)}])", pattern)
    return _drop_lookarounds(pattern)


_UNBOUNDED = 1 << 16


def lookahead_reach(pattern: re.Pattern[str]) -> int | None:
    """How many characters past a position the regex may look at there (lookaheads,
    ``\\b``), or None when there is no bound."""
    parser = re._parser  # type: ignore[attr-defined]

    def reach(items: Any) -> int | None:
        found = 1  # \b and \B look at the next character
        for op, av in items:
            nested: list[Any] = []
            if op in (parser.ASSERT, parser.ASSERT_NOT):
                direction, sub = av
                if direction == 1:
                    width = sub.getwidth()[1]
                    if width >= _UNBOUNDED:
                        return None
                    found = max(found, width + 1)
                nested.append(sub)
            elif op is parser.SUBPATTERN:
                nested.append(av[-1])
            elif op is parser.BRANCH:
                nested.extend(av[1])
            elif op in (parser.MAX_REPEAT, parser.MIN_REPEAT, parser.POSSESSIVE_REPEAT):
                nested.append(av[2])
            elif op is parser.ATOMIC_GROUP:
                nested.append(av)
            for sub in nested:
                inner = reach(sub)
                if inner is None:
                    return None
                found = max(found, inner)
        return found

    return reach(parser.parse(pattern.pattern, pattern.flags))


_PREFILTERS: dict[str, Prefilter] = {}


def prefilter_for(rules: Rules) -> Prefilter:
    """The prefilter of a rule file's detectors, built once per process."""
    found = _PREFILTERS.get(rules.sha256)
    if found is None:
        found = _PREFILTERS[rules.sha256] = Prefilter([d.pattern for d in rules.detectors])
    return found


class Prefilter:
    """Hyperscan databases for a list of regexes: one that tells which of them may match
    a text at all, stopping at each one's first match, then one per regex that gives the
    spans where it may match, built the first time it is needed."""

    def __init__(self, patterns: Sequence[re.Pattern[str]]) -> None:
        self.count = len(patterns)
        self._expressions = [hyperscan_pattern(p.pattern).encode() for p in patterns]
        self._spans: dict[int, Any] = {}
        self._any: Any = None
        if hyperscan is None or not patterns:
            return
        # Python counts \x1c-\x1f as white space and Hyperscan does not: text holding one
        # is scanned whole.
        expressions = [*self._expressions, rb"[\x1c-\x1f]"]
        flags = hyperscan.HS_FLAG_PREFILTER | hyperscan.HS_FLAG_SINGLEMATCH
        self._any = _compiled(expressions, flags | hyperscan.HS_FLAG_MULTILINE)

    def build(self) -> None:
        """Builds every span database now rather than when first needed (about 2 ms each:
        worth it before a long run, not before a small one)."""
        for index in range(self.count if self._any is not None else 0):
            self._spans_of(index, b"")

    def _spans_of(self, index: int, data: bytes) -> list[Window]:
        database: Any = self._spans.get(index)
        if database is None:
            flags = hyperscan.HS_FLAG_SOM_LEFTMOST | hyperscan.HS_FLAG_MULTILINE
            try:
                database = _compiled([self._expressions[index]], flags)
            except hyperscan.error:
                database = False  # no start of match for this one: the whole text
            self._spans[index] = database
        if database is False:
            return [(0, len(data))]
        spans: list[Window] = []
        database.scan(
            data, match_event_handler=lambda _, start, end, *rest: spans.append((start, end))
        )
        return merge(spans)

    def windows(self, text: str) -> dict[int, list[Window]] | None:
        """Per pattern index, the merged spans of ``text`` where it may match (an index
        absent: it matches nowhere); None when the text must be scanned whole."""
        if self._any is None or not text.isascii():
            return None
        data = text.encode("ascii")
        fired = self.firing(data)
        if self.count in fired:
            return None
        return {index: self._spans_of(index, data) for index in sorted(fired)}

    def firing(self, data: bytes) -> set[int]:
        """The indexes of the patterns that may match ``data`` (``count`` itself: it holds
        a character the two engines read differently)."""
        fired: set[int] = set()
        self._any.scan(data, match_event_handler=lambda index, *rest: fired.add(index))
        return fired


def _compiled(expressions: list[bytes], flags: int) -> Any:
    database = hyperscan.Database()
    database.compile(
        expressions=expressions,
        ids=list(range(len(expressions))),
        elements=len(expressions),
        flags=[flags] * len(expressions),
    )
    return database


def merge(spans: list[Window]) -> list[Window]:
    """Sorted spans, those that overlap or touch joined."""
    spans.sort()
    merged: list[Window] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged
