"""Where the sanitizer's detectors can match, found by Hyperscan before they run.

Every detector's regex is handed to Hyperscan as a pattern that matches wherever it can
match and possibly elsewhere: named groups lose their names, a negative lookbehind of one
character class where a match starts becomes that class's complement (or the start of a
line), and other lookarounds are dropped. Then, by what its matches may hold:

- a regex whose matches never hold a line break (most credential formats) is looked for
  in its shortest form, its unbounded or optional tail cut to its least (and its head cut
  to its first literal where what comes before may repeat without bound: an e-mail
  address is looked for by its "@"), and each line where one of those ends is a window
  that holds a whole match;
- any other (a key, ``=`` and a value with white space between) is written backwards
  up to its last part that ends with one of few characters, and looked for in the text
  read backwards: each end there is a place where a match may start, and only those
  places are tried;
- one that cannot be written so has the spans a database of its own gives (each match's
  end with its leftmost start), or else the whole text.

One scan of the text also tells which of each detector's literals occur (a literal of one
character is searched for in the bytes, many times faster than Hyperscan's check at each
place it occurs). A line form found by a character that structured text holds on most
lines (":") has a database of its own, scanned after the first: in one database it slows
the scan of every other form (``benchmarks/sanitize_bench.py``). The exact regex
(Python's ``re``, as before) runs only in the windows: a regex that fires nowhere is never
run, and one that fires on three lines of a log is run on those lines. The result is the
exact regex's, not an approximation of it.

The two engines agree on what ``\\s``, ``\\w``, ``\\b`` and case mean only for ASCII text
without the separators ``\\x1c``-``\\x1f`` (which Python counts as white space). A text
outside ASCII is scanned as ASCII: each character outside it replaced by an ASCII
character of its kind (a letter's by ``_``, a space's by a space) that every part of every
detector takes wherever it takes the one it stands for
(:func:`ledger.sanitizer._regex_forms.stand_ins`), so the windows hold at least every match;
the exact regexes then run in them over the text itself. A text holding a separator, or
one of the four characters Python's regex reads as ASCII letters when ignoring case, is
scanned whole by every detector, as without a prefilter. Without the ``hyperscan`` package
(a platform it has no wheel for) everything is scanned whole.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, Protocol

import attrs
import numpy

from ledger.sanitizer._regex_forms import (
    SPECIAL,
    can_take,
    first_characters,
    hyperscan_literal,
    hyperscan_pattern,
    kind_of,
    line_forms,
    line_local,
    lookaround_width,
    reversed_expression,
    stand_ins,
)

try:
    import hyperscan
except ImportError:  # pragma: no cover - every platform CI runs on has a wheel
    hyperscan = None  # type: ignore[assignment]

Window = tuple[int, int]
_EVERYWHERE = frozenset(":")


_PREFILTERS: dict[str, Prefilter] = {}


class _Detector(Protocol):
    @property
    def pattern(self) -> re.Pattern[str]: ...
    @property
    def any(self) -> Sequence[str]: ...


class _Rules(Protocol):
    """What the prefilter reads of a rule file (the sanitizer's ``Rules``)."""

    @property
    def sha256(self) -> str: ...
    @property
    def detectors(self) -> Sequence[_Detector]: ...


def prefilter_for(rules: _Rules) -> Prefilter:
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
    its shortest form (:func:`shortest_forms`): each exact match lies in a line where one
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
        self._across: Any = None
        self._literals: Any = None
        self._dense: Any = None
        self._chars: list[tuple[int, bytes, bytes]] = []
        self._outside: frozenset[int] = frozenset()
        self._spanned: frozenset[int] = frozenset()
        self._line_local: frozenset[int] = frozenset()
        self._narrow: frozenset[int] = frozenset()
        self.starting: frozenset[int] = frozenset()
        """The regexes whose windows hold where their matches start (not whole matches)."""
        self._needs: list[frozenset[int] | None] = [None] * self.count
        self._stand_ins = _StandIns({})
        if hyperscan is None or not patterns:
            return
        # A literal outside ASCII may be in a text outside ASCII, where a stand-in is not.
        if all(word.isascii() for words in literals or () for word in words):
            self._stand_ins = _StandIns(stand_ins(list(patterns)))
        # Each regex's forms, best first: its shortest forms if it is line-local, then
        # written backwards; Hyperscan's own spans (or the whole text) when none compiles.
        forms: list[list[tuple[str, bytes]]] = []
        for index, pattern in enumerate(patterns):
            mine = [
                ("line", form.encode())
                for form in (
                    line_forms(self._expressions[index].decode()) if line_local(pattern) else ()
                )
            ]
            backwards = reversed_expression(pattern)
            if backwards is not None:
                mine.append(("start", backwards))
            forms.append(mine)
        try:
            self._build(patterns, literals, {i: mine[0] for i, mine in enumerate(forms) if mine})
        except hyperscan.error:
            # Some form does not compile: each is tried on its own (some tens of
            # milliseconds each), and the first of each regex's that does is kept.
            self._build(patterns, literals, _compilable(forms))

    def _build(
        self,
        patterns: Sequence[re.Pattern[str]],
        literals: Sequence[Sequence[str]] | None,
        chosen: dict[int, tuple[str, bytes]],
    ) -> None:
        # Nothing of an attempt that failed is kept.
        self._backward = self._across = self._literals = self._dense = None
        self._line_local = frozenset(i for i, (kind, _) in chosen.items() if kind == "line")
        # What such a regex finds on a line depends on that line alone (and the line
        # breaks around it) when its lookarounds look at one character at most.
        self._narrow = frozenset(i for i in self._line_local if lookaround_width(patterns[i]) <= 1)
        self.starting = frozenset(i for i, (kind, _) in chosen.items() if kind == "start")
        # (expression, flags, id): the regexes' forms, then the literals.
        forward: list[tuple[bytes, int, int]] = []
        dense: list[tuple[bytes, int, int]] = []
        backward = [(chosen[i][1], i) for i in sorted(self.starting)]
        for index in range(self.count):
            if index in self._line_local:
                entry = (chosen[index][1], hyperscan.HS_FLAG_MULTILINE, index)
                words = literals[index] if literals else ()
                # A form found by a character structured text holds on most lines (":"
                # in JSON and YAML) is checked at each of them: in a database of its own,
                # it does not slow the scan of every other form.
                (dense if words and set(words) <= _EVERYWHERE else forward).append(entry)
            else:
                # Only whether it may match at all: one written backwards starts there,
                # any other has its own spans.
                forward.append(
                    (
                        self._expressions[index],
                        hyperscan.HS_FLAG_PREFILTER
                        | hyperscan.HS_FLAG_SINGLEMATCH
                        | hyperscan.HS_FLAG_MULTILINE,
                        index,
                    )
                )
        # Python counts \x1c-\x1f as white space and Hyperscan does not: text holding one
        # is scanned whole.
        forward.append((rb"[\x1c-\x1f]", hyperscan.HS_FLAG_SINGLEMATCH, self.count))
        ids: dict[str, int] = {}
        self._chars = []
        words_forward: list[tuple[bytes, int, int]] = []
        for index, words in enumerate(literals or ()):
            if not words or "" in words:
                continue  # no condition, or one that always holds
            needs: set[int] = set()
            for word in words:
                # A literal is looked for in the lowered text: one with a capital (or
                # outside ASCII, in ASCII text) is never there.
                if word.isascii() and word == word.lower():
                    if word not in ids:
                        ids[word] = self.count + 1 + len(ids)
                        if len(word) == 1:
                            # One character: a search of the bytes (memchr) is many
                            # times faster than Hyperscan's check at each occurrence.
                            self._chars.append((ids[word], word.encode(), word.upper().encode()))
                        else:
                            written = "".join(hyperscan_literal(ord(c)) for c in word).encode()
                            words_forward.append(
                                (
                                    written,
                                    hyperscan.HS_FLAG_CASELESS | hyperscan.HS_FLAG_SINGLEMATCH,
                                    ids[word],
                                )
                            )
                    needs.add(ids[word])
            self._needs[index] = frozenset(needs)
        self._any = _compiled_entries(forward + words_forward)
        self._dense = _compiled_entries(dense) if dense else None
        # The literals alone, for a rescan: their ids are the same as in _any.
        self._literals = _compiled_entries(words_forward) if words_forward else None
        if backward:
            self._backward = _compiled_backward(backward)
        # What may hold a placeholder's "<" is scanned backwards again after a
        # redaction; any other starts where it started before, or inside a placeholder.
        self._outside = frozenset(
            i for i in self.starting if not can_take(patterns[i], "<", written=True)
        )
        self._firsts = {i: first_characters(patterns[i]) for i in self._outside}
        self._inside: dict[str, list[tuple[int, tuple[int, ...] | None]]] = {}
        across = [(e, i) for e, i in backward if i not in self._outside]
        if across:
            self._across = _compiled_backward(across)
        self._spanned = frozenset(range(self.count)) - self._line_local - self.starting

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
        """Per line-local regex the ends found (whatever its literals), and the indexes
        that fired (regexes and literals); None when the text must be scanned whole."""
        events: list[tuple[int, int]] = []

        def found(index: int, start: int, end: int, *rest: Any) -> None:
            events.append((index, end))

        self._any.scan(data, match_event_handler=found)
        if self._dense is not None:
            self._dense.scan(data, match_event_handler=found)
        fired = {index for index, _ in events}
        fired.update(self._chars_in(data))
        if self.count in fired:
            return None
        ends: dict[int, list[int]] = {}
        for index, end in events:
            if index in self._line_local:
                ends.setdefault(index, []).append(end)
        return ends, fired

    def _starts(self, database: Any, backward: bytes) -> dict[int, list[int]]:
        """Per regex of a backward database, where its matches may start in the text
        ``backward`` is (read backwards)."""
        starts: dict[int, list[int]] = {}
        size = len(backward)
        database.scan(
            backward,
            match_event_handler=lambda index, start, end, *rest: starts.setdefault(
                index, []
            ).append(size - end),
        )
        return starts

    def windows(self, text: str) -> dict[int, list[Window]] | None:
        """Per pattern index, the merged spans of ``text`` where it may match, or for one
        of :attr:`starting`, where its matches may start (an index absent: it matches
        nowhere, or none of its literals occurs); None when the text must be scanned
        whole."""
        return self.look(text)[0]

    def look(self, text: str) -> tuple[dict[int, list[Window]] | None, Found | None]:
        """:meth:`windows`, and what the scans found, for :meth:`rescan`."""
        if self._any is None:
            return None, None
        data = self._stand_ins.ascii(text)
        if data is None:
            return None, None
        scanned = self._scan(data)
        if scanned is None:
            return None, None
        ends, fired = scanned
        met = self._met(fired)
        out = {index: _lines(text, found) for index, found in ends.items() if met(index)}
        may = {i for i in fired if i < self.count and i not in self._line_local and met(i)}
        backward = _reversed(data) if may & self.starting else None
        starts = None if backward is None else self._starts(self._backward, backward)
        for index in may:
            if index not in self.starting:
                out[index] = self._spans_of(index, data)
            elif starts is not None and index in starts:
                # Not written backwards: it matches nowhere, whatever the guess.
                out[index] = _points(starts[index])
        return dict(sorted(out.items())), Found(text, ends, starts, backward, frozenset(fired))

    def _chars_in(self, data: bytes) -> list[int]:
        """The ids of the one-character literals ``data`` holds, case aside."""
        return [index for index, low, high in self._chars if low in data or high in data]

    def _met(self, fired: AbstractSet[int]) -> Callable[[int], bool]:
        """Whether a regex's literal condition holds, given what fired in a scan."""
        needs = self._needs

        def met(index: int) -> bool:
            wanted = needs[index]
            return wanted is None or not wanted.isdisjoint(fired)

        return met

    def rescan(
        self, found: Found, text: str, replaced: Sequence[Replaced]
    ) -> tuple[dict[int, list[Window]], Found] | None:
        """The windows of ``text``, which is ``found.text`` with spans replaced by
        placeholders (each ``<...>``, one line), scanned only where that changed (the
        literals are looked for again in the whole). None when this cannot tell: the text
        must be looked at whole (:meth:`look`).

        The spans replaced must be every hit found in ``found.text``: a line-local regex
        that was run there, and whose lookarounds look at one character at most, then
        has windows only on the lines that hold a placeholder. Any other line is as it
        was, and nothing was found there (a hit would be a placeholder now); what it may
        match there is kept in the :class:`Found` returned, for the next rescan. One
        whose literals occur only now (in a placeholder) was not run there, and one that
        looks further may see a changed line next to its own: each has every line where
        it may match."""
        if (found.backward is None and self.starting) or self._spanned or not text.isascii():
            return None
        for _, _, start, end in replaced:
            placeholder = text[start:end]
            if placeholder[:1] != "<" or placeholder[-1:] != ">" or _SEPARATORS.search(placeholder):
                return None
        old = found.text
        moved = _Moved(replaced)
        ends: dict[int, list[int]] = {}
        for index, previous in found.ends.items():
            # A match whose line no redaction touched is where it was, moved.
            kept = [moved.position(e) for e in previous if not moved.touches(*_line_of(old, e))]
            if kept:
                ends[index] = kept
        near: dict[int, list[int]] = {}
        for index, end in self._ends_near(text, replaced):
            ends.setdefault(index, []).append(end)
            near.setdefault(index, []).append(end)
        starts: dict[int, list[int]] = {}
        previous_starts = found.starts or {}
        # One that cannot hold a placeholder's "<" has each match between two placeholders
        # (where the text is as it was: it starts where it did) or starting inside one.
        for index in self._outside:
            starts[index] = [
                moved.position(s) for s in previous_starts.get(index, ()) if not moved.inside(s)
            ]
        for _, _, start, end in replaced:
            placeholder = text[start:end]
            for index, offsets in self._starts_inside(placeholder):
                starts[index].extend(map(start.__add__, offsets))
        backward = None if found.backward is None else _spliced(found.backward, text, replaced)
        if self._across is not None and backward is not None:
            starts.update(self._starts(self._across, backward))
        data = text.encode("ascii")
        fired = set(self._chars_in(data))
        if self._literals is not None:
            self._literals.scan(data, match_event_handler=lambda index, *rest: fired.add(index))
        met, met_before = self._met(fired), self._met(found.fired)
        # A narrowed regex has windows only on the lines that hold a placeholder; any
        # other (not run before, or looking past its line) on every line it may match.
        out: dict[int, list[Window]] = {}
        for index, mine in ends.items():
            if not met(index):
                continue
            if self._narrowed(index, met_before):
                if index not in near:
                    continue
                mine = near[index]
            out[index] = _lines(text, mine)
        out.update(
            (index, _points(found)) for index, found in starts.items() if found and met(index)
        )
        return dict(sorted(out.items())), Found(text, ends, starts, backward, frozenset(fired))

    def _narrowed(self, index: int, met_before: Callable[[int], bool]) -> bool:
        """Whether a line-local regex is looked for again, after a redaction, only on the
        lines that hold a placeholder: it was run before (its literal condition held)
        and looks at no other line."""
        return index in self._narrow and met_before(index)

    def _starts_inside(self, placeholder: str) -> list[tuple[int, tuple[int, ...]]]:
        """Per regex that cannot hold a placeholder's "<", where in ``placeholder`` (after
        its "<") a match of it may start: where it holds a character such a match may
        start with. Kept per shape (each digit as "0"): placeholders differ in their
        numbers, and what a regex may start with takes every digit or none, mostly."""
        shape = placeholder.translate(_DIGIT_SHAPE)
        known = self._inside.get(shape)
        if known is None:
            known = self._inside[shape] = [
                (index, self._offsets(index, placeholder) if self._by_shape(index) else None)
                for index in sorted(self._outside)
            ]
        return [
            (index, offsets if offsets is not None else self._offsets(index, placeholder))
            for index, offsets in known
        ]

    def _by_shape(self, index: int) -> bool:
        """Whether a regex may start at each digit of a placeholder, or at none."""
        firsts = self._firsts[index]
        return firsts is None or _DIGITS.isdisjoint(firsts) or firsts >= _DIGITS

    def _offsets(self, index: int, placeholder: str) -> tuple[int, ...]:
        firsts = self._firsts[index]
        return tuple(
            offset
            for offset in range(1, len(placeholder))
            if firsts is None or ord(placeholder[offset]) in firsts
        )

    def _ends_near(self, text: str, replaced: Sequence[Replaced]) -> list[tuple[int, int]]:
        """The line-local regexes' ends in the lines that hold a placeholder, scanned as
        one text. (A match on any other line is on a line as it was, between the same
        line breaks: only a lookbehind's character is past its line, and that is a line
        break.)"""
        blocks = [
            (_line_of(text, start + 1)[0], _line_of(text, end)[1]) for _, _, start, end in replaced
        ]
        blocks = merge(blocks)
        joined = "\n".join(text[low:high] for low, high in blocks)
        offsets = list(itertools.accumulate((high - low + 1 for low, high in blocks), initial=0))
        scanned = self._scan(joined.encode("ascii"))
        if scanned is None:  # pragma: no cover - checked above: no separator is there
            raise AssertionError("a separator appeared in a rescan")
        out = []
        for index, found in scanned[0].items():
            for end in found:
                block = bisect.bisect_right(offsets, end - 1) - 1
                out.append((index, end - offsets[block] + blocks[block][0]))
        return out

    def firing(self, data: bytes) -> set[int]:
        """The indexes of the patterns that may match ``data`` (``count`` itself: it holds
        a character the two engines read differently)."""
        found = self.windows(data.decode("latin-1"))
        return {self.count} if found is None else set(found)


_DIGIT_SHAPE = str.maketrans("123456789", "000000000")
_DIGITS = frozenset(range(ord("0"), ord("9") + 1))


class _Whole(Exception):
    """A character no stand-in stands for: the text is scanned whole."""


_OUTSIDE_ASCII = re.compile(r"[^\x00-\x7f]+")


class _StandIns(dict[str, str]):
    """Each character outside ASCII met so far, and the ASCII character it is scanned
    as (:func:`ledger.sanitizer._regex_forms.stand_ins`), given by kind."""

    def __init__(self, by_kind: dict[str, str]) -> None:
        super().__init__()
        self.by_kind = by_kind

    def __missing__(self, char: str) -> str:
        found = None if char in SPECIAL else self.by_kind.get(kind_of(char))
        if found is None:
            raise _Whole
        self[char] = found
        return found

    def ascii(self, text: str) -> bytes | None:
        """``text`` as ASCII, a character for a character; None where it cannot be."""
        if text.isascii():
            return text.encode("ascii")
        if not self.by_kind:
            return None
        try:
            return _OUTSIDE_ASCII.sub(
                lambda run: "".join(map(self.__getitem__, run.group())), text
            ).encode("ascii")
        except _Whole:
            return None


Replaced = tuple[int, int, int, int]
"""A span of a text (start, end) and the placeholder's span (start, end) in what replaced
it."""
_SEPARATORS = re.compile(r"[\x1c-\x1f]")


@attrs.frozen
class Found:
    """What the scans found in a text, kept so that what a redaction leaves of it is
    scanned again only where it changed (:meth:`Prefilter.rescan`)."""

    text: str
    ends: dict[int, list[int]]
    """Per line-local regex, the ends of its shortest form, whatever its literals."""
    starts: dict[int, list[int]] | None
    """Per regex written backwards, where its matches may start; None when the text was
    not scanned backwards (nothing of the kind could fire)."""
    backward: bytes | None
    """The text read backwards, when it was scanned so."""
    fired: frozenset[int] = frozenset()
    """The literals (and regexes) the scans found: whose literal conditions held."""


def _reversed(data: bytes) -> bytes:
    # numpy's copy against a negative stride is about twice bytes' own [::-1].
    return numpy.frombuffer(data, numpy.uint8)[::-1].tobytes()


def _spliced(backward: bytes, text: str, replaced: Sequence[Replaced]) -> bytes:
    """``text`` read backwards, made of ``backward`` (what it was before the spans were
    replaced, read backwards) and the placeholders: copies, not a reversal."""
    size = len(backward)
    pieces: list[bytes] = []
    last = size
    for start, end, new_start, new_end in reversed(replaced):
        pieces.append(backward[size - last : size - end])
        pieces.append(text[new_start:new_end][::-1].encode("ascii"))
        last = start
    pieces.append(backward[size - last :])
    return b"".join(pieces)


class _Moved:
    """Where a position of a text is once spans of it are replaced."""

    def __init__(self, replaced: Sequence[Replaced]) -> None:
        self._starts = [r[0] for r in replaced]
        self._ends = [r[1] for r in replaced]
        self._shifts = list(
            itertools.accumulate(
                ((b - a) - (end - start) for start, end, a, b in replaced), initial=0
            )
        )

    def position(self, position: int) -> int:
        """Where ``position`` (outside every replaced span) is now."""
        return position + self._shifts[bisect.bisect_right(self._ends, position)]

    def inside(self, position: int) -> bool:
        index = bisect.bisect_right(self._starts, position) - 1
        return index >= 0 and position < self._ends[index]

    def touches(self, start: int, end: int) -> bool:
        """Whether a replaced span overlaps [start, end)."""
        index = bisect.bisect_right(self._ends, start)
        return index < len(self._starts) and self._starts[index] < end


def _line_of(text: str, end: int) -> Window:
    """The line a match ending at ``end`` is on (with the line before when it ends on the
    line break before that line: the character a lookbehind took)."""
    start = text.rfind("\n", 0, end - 1) + 1
    stop = text.find("\n", end)
    return start, len(text) if stop < 0 else stop


def _points(starts: list[int]) -> list[Window]:
    """The places in ``starts`` as windows, each run of neighbours one window."""
    windows: list[Window] = []
    low = high = -1
    for place in sorted(starts):
        if place > high:
            if high >= 0:
                windows.append((low, high))
            low = place
        high = max(high, place + 1)
    if high >= 0:
        windows.append((low, high))
    return windows


def _lines(text: str, ends: list[int]) -> list[Window]:
    """The lines where matches end (each with the line before when a match ends on the
    line break before it: the character a lookbehind took), merged."""
    windows: list[Window] = []
    for end in sorted(ends):
        if windows and end <= windows[-1][1]:
            continue
        windows.append(_line_of(text, end))
    return merge(windows)


def _compilable(forms: list[list[tuple[str, bytes]]]) -> dict[int, tuple[str, bytes]]:
    """Per regex, the first of its forms Hyperscan compiles on its own (the regexes
    without one absent)."""
    chosen = {}
    for index, mine in enumerate(forms):
        for kind, form in mine:
            try:
                _compiled([form], [hyperscan.HS_FLAG_MULTILINE])
            except hyperscan.error:
                continue
            chosen[index] = (kind, form)
            break
    return chosen


def _compiled_entries(entries: list[tuple[bytes, int, int]]) -> Any:
    """A database of (expression, flags, id) entries."""
    return _compiled(
        [e for e, _, _ in entries], [f for _, f, _ in entries], [i for *_, i in entries]
    )


def _compiled_backward(written: list[tuple[bytes, int]]) -> Any:
    """A database of backward forms, each under its regex's index."""
    return _compiled_entries([(e, hyperscan.HS_FLAG_MULTILINE, i) for e, i in written])


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
