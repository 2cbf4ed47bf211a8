"""Where the sanitizer's detectors can match, found by Hyperscan before they run.

Every detector's regex is handed to Hyperscan as a pattern that matches wherever it can
match and possibly elsewhere: named groups lose their names, a negative lookbehind of one
character class where a match starts becomes that class's complement (or the start of a
line), and other lookarounds are dropped. Then, by what its matches may hold:

- a regex whose matches never hold a line break (most credential formats) is looked for
  in its shortest form, its unbounded or optional tail cut to its least, and each line
  where one of those ends is a window that holds a whole match;
- any other (a key, ``=`` and a value with white space between) is written backwards
  up to its last part that ends with one of few characters, and looked for in the text
  read backwards: each end there is a place where a match may start, and only those
  places are tried;
- one that cannot be written so has the spans a database of its own gives (each match's
  end with its leftmost start), or else the whole text.

One scan of the text also tells which of each detector's literals occur. The exact regex
(Python's ``re``, as before) runs only in the windows: a regex that fires nowhere is never
run, and one that fires on three lines of a log is run on those lines. The result is the
exact regex's, not an approximation of it.

The two engines agree on what ``\\s``, ``\\w``, ``\\b`` and case mean only for ASCII text
without the separators ``\\x1c``-``\\x1f`` (which Python counts as white space); any other
text is scanned whole by every detector, as without a prefilter. Without the ``hyperscan``
package (a platform it has no wheel for) everything is scanned whole.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ledger._internal.regex_forms import (
    hyperscan_literal,
    hyperscan_pattern,
    line_local,
    reversed_expression,
    shortest_forms,
)

if TYPE_CHECKING:
    from ledger._internal.sanitizer import Rules

try:
    import hyperscan
except ImportError:  # pragma: no cover - every platform CI runs on has a wheel
    hyperscan = None  # type: ignore[assignment]

Window = tuple[int, int]


_PREFILTERS: dict[str, Prefilter] = {}


def prefilter_for(rules: Rules) -> Prefilter:
    """The prefilter of a rule file's detectors, built once per process."""
    found = _PREFILTERS.get(rules.sha256)
    if found is None:
        detectors = rules.detectors
        found = _PREFILTERS[rules.sha256] = Prefilter(
            [d.pattern for d in detectors], [d.any for d in detectors]
        )
    return found


class Prefilter:
    """Hyperscan databases for a list of regexes, each with the literals one of which
    must occur for it to run (if any), that tell where each may match in a text.

    A regex whose matches never hold a line break (:func:`line_local`) is looked for in
    its shortest form (:func:`shortest_form`): each exact match lies in a line where one
    of those ends, and such lines are its windows. Any other regex is looked for written
    backwards (:func:`reversed_expression`) in the text read backwards: its ends there are
    every place an exact match may start, and those places are its windows
    (:attr:`starting`). One that cannot be written so has the spans a database of its own
    reports, each match's end with its leftmost start, or else the whole text.

    One scan also tells which of the literals occur, case aside (a regex none of whose
    literals occurs is not run, as :class:`Detector` decides without a prefilter), and
    whether the text holds a character the two engines read differently.
    """

    def __init__(
        self,
        patterns: Sequence[re.Pattern[str]],
        literals: Sequence[Sequence[str]] | None = None,
    ) -> None:
        self.count = len(patterns)
        self._expressions = [hyperscan_pattern(p.pattern).encode() for p in patterns]
        self._spans: dict[int, Any] = {}
        self._any: Any = None
        self._backward: Any = None
        self._line_local: frozenset[int] = frozenset()
        self.starting: frozenset[int] = frozenset()
        """The regexes whose windows hold where their matches start (not whole matches)."""
        self._needs: list[frozenset[int] | None] = [None] * self.count
        if hyperscan is None or not patterns:
            return
        forward: list[tuple[bytes, int]] = []
        backward: list[tuple[bytes, int]] = []
        lines: set[int] = set()
        starting: set[int] = set()
        for index, pattern in enumerate(patterns):
            shortest = (
                next(
                    (
                        compiled
                        for form in shortest_forms(self._expressions[index].decode())
                        if (compiled := _compiling(form.encode())) is not None
                    ),
                    None,
                )
                if line_local(pattern)
                else None
            )
            backwards = None if shortest is not None else _compiling(reversed_expression(pattern))
            if shortest is not None:
                lines.add(index)
                forward.append((shortest, hyperscan.HS_FLAG_MULTILINE))
                continue
            if backwards is not None:
                starting.add(index)
                backward.append((backwards, index))
            # Only whether it may match at all: one that can be written backwards starts
            # there, any other has its own spans.
            forward.append(
                (
                    self._expressions[index],
                    hyperscan.HS_FLAG_PREFILTER
                    | hyperscan.HS_FLAG_SINGLEMATCH
                    | hyperscan.HS_FLAG_MULTILINE,
                )
            )
        self._line_local = frozenset(lines)
        self.starting = frozenset(starting)
        # Python counts \x1c-\x1f as white space and Hyperscan does not: text holding one
        # is scanned whole.
        forward.append((rb"[\x1c-\x1f]", hyperscan.HS_FLAG_SINGLEMATCH))
        ids: dict[str, int] = {}
        for index, words in enumerate(literals or ()):
            if not words or "" in words:
                continue  # no condition, or one that always holds
            needs: set[int] = set()
            for word in words:
                # A literal is looked for in the lowered text: one with a capital (or
                # outside ASCII, in ASCII text) is never there.
                if word.isascii() and word == word.lower():
                    if word not in ids:
                        ids[word] = len(forward)
                        written = "".join(hyperscan_literal(ord(c)) for c in word).encode()
                        forward.append(
                            (written, hyperscan.HS_FLAG_CASELESS | hyperscan.HS_FLAG_SINGLEMATCH)
                        )
                    needs.add(ids[word])
            self._needs[index] = frozenset(needs)
        self._any = _compiled([e for e, _ in forward], [f for _, f in forward])
        if backward:
            self._backward = _compiled(
                [e for e, _ in backward],
                [hyperscan.HS_FLAG_MULTILINE] * len(backward),
                [i for _, i in backward],
            )

    def build(self) -> None:
        """Builds every span database now rather than when first needed (about 2 ms each:
        worth it before a long run, not before a small one)."""
        for index in range(self.count if self._any is not None else 0):
            if index not in self._line_local and index not in self.starting:
                self._spans_of(index, b"")

    def _spans_of(self, index: int, data: bytes) -> list[Window]:
        database: Any = self._spans.get(index)
        if database is None:
            flags = hyperscan.HS_FLAG_SOM_LEFTMOST | hyperscan.HS_FLAG_MULTILINE
            try:
                database = _compiled([self._expressions[index]], [flags])
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

    def _scan(self, data: bytes) -> tuple[dict[int, list[int]], set[int]] | None:
        """Per line-local regex the ends found, and the other regexes that may match,
        each with its literal condition met; None when the text must be scanned whole."""
        events: list[tuple[int, int]] = []
        self._any.scan(
            data, match_event_handler=lambda index, start, end, *rest: events.append((index, end))
        )
        fired = {index for index, _ in events}
        if self.count in fired:
            return None
        ends: dict[int, list[int]] = {}
        for index, end in events:
            if index in self._line_local:
                ends.setdefault(index, []).append(end)
        needs = self._needs

        def met(index: int) -> bool:
            wanted = needs[index]
            return wanted is None or not wanted.isdisjoint(fired)

        may = {i for i in fired if i < self.count and i not in self._line_local and met(i)}
        return {i: found for i, found in ends.items() if met(i)}, may

    def windows(self, text: str) -> dict[int, list[Window]] | None:
        """Per pattern index, the merged spans of ``text`` where it may match, or for one
        of :attr:`starting`, where its matches may start (an index absent: it matches
        nowhere, or none of its literals occurs); None when the text must be scanned
        whole."""
        if self._any is None or not text.isascii():
            return None
        data = text.encode("ascii")
        scanned = self._scan(data)
        if scanned is None:
            return None
        ends, may = scanned
        out = {index: _lines(text, found) for index, found in ends.items()}
        starts: dict[int, list[int]] = {}
        if may & self.starting:
            size = len(data)
            self._backward.scan(
                data[::-1],
                match_event_handler=lambda index, start, end, *rest: starts.setdefault(
                    index, []
                ).append(size - end),
            )
        for index in may:
            if index in self.starting:
                # Written backwards it matches nowhere: so does the prefilter's guess.
                if index in starts:
                    out[index] = merge([(s, s + 1) for s in starts[index]])
            else:
                out[index] = self._spans_of(index, data)
        return dict(sorted(out.items()))

    def firing(self, data: bytes) -> set[int]:
        """The indexes of the patterns that may match ``data`` (``count`` itself: it holds
        a character the two engines read differently)."""
        found = self.windows(data.decode("latin-1"))
        return {self.count} if found is None else set(found)


def _lines(text: str, ends: list[int]) -> list[Window]:
    """The lines where matches end (each with the line before when a match ends on the
    line break before it: the character a lookbehind took), merged."""
    windows: list[Window] = []
    for end in sorted(ends):
        if windows and end <= windows[-1][1]:
            continue
        start = text.rfind("\n", 0, end - 1) + 1
        stop = text.find("\n", end)
        windows.append((start, len(text) if stop < 0 else stop))
    return merge(windows)


def _compiling(expression: bytes | None) -> bytes | None:
    """``expression`` if Hyperscan compiles it as it is (it matches something), else None."""
    if expression is None:
        return None
    try:
        _compiled([expression], [hyperscan.HS_FLAG_MULTILINE])
    except hyperscan.error:
        return None
    return expression


def _compiled(expressions: list[bytes], flags: list[int], ids: list[int] | None = None) -> Any:
    database = hyperscan.Database()
    database.compile(
        expressions=expressions,
        ids=list(range(len(expressions))) if ids is None else ids,
        elements=len(expressions),
        flags=flags,
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
