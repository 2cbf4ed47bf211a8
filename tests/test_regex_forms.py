"""The forms of a regex the prefilter gives Hyperscan: each must report every place the
regex matches (a form that misses one would let a secret through unredacted)."""

from __future__ import annotations

import json
import re
from typing import Any

import hyperscan
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.sanitizer._prefilter import Prefilter, prefilter_for
from ledger.sanitizer._regex_forms import (
    line_forms,
    line_local,
    lookaround_width,
    reversed_expression,
    shortest_forms,
    trimmed_form,
)
from ledger.sanitizer._sanitizer import load_rules
from tests.conftest import DATA

RULES = load_rules()
DETECTORS = RULES.detectors


@pytest.mark.parametrize(
    ("pattern", "local"),
    [
        (r"hf_\w+", True),
        (r"a.b", True),  # "." takes no line break without DOTALL
        (r"a(?=\n)b", True),  # a lookahead looks, takes nothing
        (r"(?<!\n)ab", True),
        (r"a\s+b", False),
        (r"a[^x]b", False),
        (r"a\Sb[\s\S]", False),
        (r"(?s)a.b", False),
        (r"a(?s:.)b", False),  # DOTALL of a group only
        (r"a\nb", False),
        (r"a(?:bc|\n)d", False),  # a later branch takes one
        (r"(\w)\1", False),  # a back reference: what it takes is not known here
        (r"x?", False),  # can match nothing
    ],
)
def test_line_local(pattern: str, local: bool) -> None:
    assert line_local(re.compile(pattern)) is local


@pytest.mark.parametrize(
    ("expression", "forms"),
    [
        ("hf_[A-Za-z0-9]{20,}", ["hf_[A-Za-z0-9]{20}", "hf_[A-Za-z0-9]{20,}"]),
        ("ab+", ["ab", "ab+"]),
        ("ab*c?", ["a", "ab*c?"]),
        (r"ab\b", ["ab", r"ab\b"]),
        ("a(b{2,5}x*)", ["a(b{2})", "a(b{2,5}x*)"]),
        ("a(?:bc)+?", ["a(?:bc)", "a(?:bc)+?"]),
        (
            r"eyJ[\w-]{4,}\.eyJ[\w-]{4,}(?:\.[\w-]*)?",
            [r"eyJ[\w-]{4,}\.eyJ[\w-]{4}", r"eyJ[\w-]{4,}\.eyJ[\w-]{4,}(?:\.[\w-]*)?"],
        ),
        ("[]x]{3,}", ["[]x]{3}", "[]x]{3,}"]),  # "]" first is a member of the class
        ("a[]x]*", ["a", "a[]x]*"]),
        (r"a\x41{2,}", [r"a\x41{2}", r"a\x41{2,}"]),
        ("a|b+", ["a|b", "a|b+"]),  # each branch cut
        ("x(?:ab+|c{2,})", ["x(?:ab|c{2})", "x(?:ab+|c{2,})"]),
        ("a|b*", []),  # could match nothing, cut or not
        ("(?i)[a-z]*", []),  # every form could match nothing
    ],
)
def test_shortest_forms(expression: str, forms: list[str]) -> None:
    assert shortest_forms(expression) == forms


def test_a_shortest_form_matches_a_prefix_of_every_match() -> None:
    expression = r"(?i)key[_.-]*\s*=\s*(\w{4,})x?"
    text = "KEY = abcdefgx key.=abcd"
    shortest = re.compile(shortest_forms(expression)[0])
    for match in re.finditer(expression, text):
        prefix = shortest.match(text, match.start())
        assert prefix is not None and prefix.end() <= match.end()


def _starts(expression: bytes, text: str) -> set[int]:
    database = hyperscan.Database()
    database.compile(expressions=[expression], ids=[0], elements=1, flags=[0])
    found: set[int] = set()
    database.scan(
        text[::-1].encode(), match_event_handler=lambda _, s, end, *r: found.add(len(text) - end)
    )
    return found


@pytest.mark.parametrize(
    ("pattern", "expression"),
    [
        (r"(?i)ab+c", b"[Cc](?:[Bb]){1,}[Aa]"),
        (r"key=\S+", b"\\x3dyek"),  # up to "=": a run of \S would follow every character
        (r"a(?=b)c\bd", b"dca"),  # assertions dropped
        (r"a(?i:b)", b"(?:[Bb])a"),
        (r"a(?s:.)b;", b"\\x3bb(?:[\\x00-\\xff])a"),  # DOTALL of a group only
        (r"a.b;", b"\\x3bb[\\x00-\\x09\\x0b-\\x7f]a"),
        (r"a[^x]+;", b"\\x3b(?:[\\x00-wy-\\x7f]){1,}a"),
        (r"a[\w]+=;", b"\\x3b\\x3d(?:[0-9A-Z\\x5fa-z]){1,}a"),
        (r"a[\W]+=;", b"\\x3b\\x3d(?:[\\x00-\\x2f\\x3a-\\x40\\x5b-\\x5e\\x60\\x7b-\\x7f]){1,}a"),
        (r"a[\d]+;", b"\\x3b(?:[0-9]){1,}a"),
        (r"a[\D\n]+;", b"\\x3b(?:[\\x00-\\x2f\\x3a-\\x7f]){1,}a"),
        (r"a[\s]+;", b"\\x3b(?:[\\x09-\\x0d\\x1c-\\x20]){1,}a"),  # Python's white space
        (r"a[^b\-z]+;", b"\\x3b(?:[\\x00-\\x2c\\x2e-ac-y\\x7b-\\x7f]){1,}a"),
        (r"a[^\u0134x]+;", b"\\x3b(?:[\\x00-wy-\\x7f]){1,}a"),  # outside ASCII: no member
        (r"(?i)k[\u212a]=;", b"\\x3b\\x3d[Kk][Kk]"),  # the Kelvin sign folds to "k"
        (r"a[\u0134]+;", None),  # matches no ASCII character
        (r"(a)\1", b"(?:a)"),  # up to the group: where it starts, a match may
        (r"(a)\1b", None),  # a back reference
        (r"a?", None),
    ],
)
def test_reversed_expression(pattern: str, expression: bytes | None) -> None:
    assert reversed_expression(re.compile(pattern)) == expression


def test_case_is_kept_where_a_group_sets_it() -> None:
    text = "xxABCD abcd aBcd Ab ab aBCd"
    for pattern in (r"a(?i:bc)d", r"(?i)a(?-i:b)", r"(?i)ab"):
        written = reversed_expression(re.compile(pattern))
        assert written is not None
        assert _starts(written, text) == {m.start() for m in re.finditer(pattern, text)}


POSITIVES = [
    r["text"]
    for r in map(json.loads, (DATA / "secrets-corpus/derived/labelled_strings.jsonl").open())
    if r["label"] == "positive" and len(r["text"]) < 200
]
PIECES = ["key", "token", "://", "eyJ", "hf_", "10.0.0.1", "<redacted:credential:1>"]
ALPHABET = st.sampled_from([*"aZk9_-.:=@/ \n\t'\"<>[]%~|+", *PIECES]) | st.sampled_from(POSITIVES)


@settings(max_examples=300, deadline=None)
@given(st.lists(ALPHABET, max_size=12).map("".join))
def test_every_match_of_every_detector_is_in_its_windows(text: str) -> None:
    # Every place a detector matches, not only what finditer returns: a window missing
    # a match a shorter text would show is a window missing a secret.
    windows_cover(text)


def windows_cover(text: str) -> None:
    """``text`` has windows (it is not scanned whole), and they hold every match."""
    prefilter = prefilter_for(RULES)
    windows = prefilter.windows(text)
    assert windows is not None
    _covers(windows, text, prefilter)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(ALPHABET, max_size=12).map("".join),
    st.lists(st.tuples(st.integers(0, 400), st.integers(1, 40)), max_size=4),
    st.integers(1, 20000),
)
def test_every_match_after_a_redaction_is_in_the_windows_of_its_rescan(
    text: str, spans: list[tuple[int, int]], number: int
) -> None:
    # The spans replaced are anywhere (not where a detector hit): what is around a
    # placeholder, inside it and across its edges must be found as a whole scan would.
    prefilter = prefilter_for(RULES)
    _, found = prefilter.look(text)
    if found is None:
        return
    kept: list[tuple[int, int]] = []
    for start, size in sorted(spans):
        if start >= (kept[-1][1] if kept else 0) and start < len(text):
            kept.append((start, min(start + size, len(text))))
    after, replaced = _replaced(text, kept, number)
    rescanned = prefilter.rescan(found, after, replaced)
    if rescanned is None:
        assert found.backward is None  # it could not tell: only when nothing ran backwards
        return
    windows, again = rescanned
    assert again.text == after
    _covers(windows, after, prefilter, found, replaced)


def _replaced(text: str, spans: list[tuple[int, int]], first: int) -> tuple[str, list[Any]]:
    """``text`` with each span replaced by a placeholder, and the spans as rescan takes them."""
    pieces, replaced, last, length = [], [], 0, 0
    for number, (start, end) in enumerate(spans, first):
        placeholder = f"<redacted:credential:{number}>"
        pieces.append(text[last:start])
        length += start - last
        replaced.append((start, end, length, length + len(placeholder)))
        pieces.append(placeholder)
        length += len(placeholder)
        last = end
    pieces.append(text[last:])
    return "".join(pieces), replaced


def _covers(
    windows: dict[int, list[Any]],
    text: str,
    prefilter: Any,
    before: Any = None,
    replaced: list[Any] | None = None,
) -> None:
    """Every match of every detector, at every position of ``text``, lies in its windows
    (starts in one, for a regex whose windows are where matches start). After a rescan
    (``before``: what the scan before the ``replaced`` spans became placeholders found),
    a line-local regex that was run then need not have windows on a line no placeholder
    of this redaction is on: that line is as it was, and its ends there are kept for the
    next rescan."""
    met_before = None if before is None else prefilter._met(before.fired)
    for index, detector in enumerate(DETECTORS):
        for match in (detector.pattern.match(text, s) for s in range(len(text) + 1)):
            if match is None:
                continue
            if met_before is not None and prefilter._narrowed(index, met_before):
                line_start = text.rfind("\n", 0, match.start()) + 1
                line_end = text.find("\n", match.end())
                line_end = len(text) if line_end < 0 else line_end
                if not any(a <= line_end and line_start < b for _, _, a, b in replaced or ()):
                    continue
            mine = windows.get(index, [])
            if index in prefilter.starting:
                assert any(a <= match.start() < b for a, b in mine), (index, text)
            else:
                assert any(a <= match.start() and match.end() <= b for a, b in mine), (index, text)


@pytest.mark.parametrize(
    ("text", "rounds"),
    [
        # Two rescans in a row: the second works from what the first found, moved.
        ("a b --token abcdefghijk", [[(0, 1)], [(24, 25)]]),
        # A short match at a line's start after a placeholder longer than what it replaced.
        ("a\n10.0.0.1 x\n--token abcdefghijk", [[(0, 1)]]),
        # A key, "=" and a quoted value that is now a placeholder: scanned backwards again.
        ('A_KEY = "x y" --token abcdefghijk', [[(9, 12)]]),
        (
            "sourcegraph_host: " + "0123456789abcdef" * 2 + "01234567 --token abcdefghijk",
            [[(0, 1)]],
        ),
    ],
)
def test_a_rescan_covers_what_a_whole_scan_would(
    text: str, rounds: list[list[tuple[int, int]]]
) -> None:
    prefilter = prefilter_for(RULES)
    _, found = prefilter.look(text)
    assert found is not None and found.backward is not None
    first = 1
    for spans in rounds:
        text, replaced = _replaced(text, spans, first)
        first += len(spans)
        rescanned = prefilter.rescan(found, text, replaced)
        assert rescanned is not None
        windows, rescanned_found = rescanned
        _covers(windows, text, prefilter, found, replaced)
        found = rescanned_found
        whole = prefilter.windows(text)
        assert whole is not None
        for index, mine in whole.items():
            for start, end in mine:
                if index in prefilter.starting:
                    assert all(
                        any(a <= s < b for a, b in windows[index]) for s in range(start, end)
                    )


def test_a_line_s_ends_are_kept_whatever_its_literals() -> None:
    # The second regex's literal is nowhere before the redaction, and in the placeholder
    # after it: the rescan must still know where that regex ended on the first line.
    found = Prefilter(
        [re.compile(r"[a-z]+=[0-9]+"), re.compile(r"[a-z]+:[0-9]+")], [("pass",), ("redacted",)]
    )
    windows, scanned = found.look("y:2\nx=1 pass")
    assert windows == {0: [(4, 12)]} and scanned is not None
    after, replaced = _replaced("y:2\nx=1 pass", [(8, 12)], 1)
    rescanned = found.rescan(scanned, after, replaced)
    assert rescanned is not None
    assert rescanned[0] == found.windows(after) == {1: [(0, 3), (4, 31)]}


@pytest.mark.parametrize(
    ("pattern", "width"),
    [
        (r"abc", 0),
        (r"(?<![0-9])[0-9]+(?=[/\s]|$)", 1),
        (r"[0-9]+(?![0-9A-Za-z]|\.[0-9])", 2),
        (r"tok_[a-z]{8}(?=\n<)", 2),
        (r"(?:x(?=abc))+", 3),
    ],
)
def test_lookaround_width(pattern: str, width: int) -> None:
    assert lookaround_width(re.compile(pattern)) == width


@pytest.mark.parametrize(
    ("expression", "trimmed"),
    [
        # What may repeat without bound before the first literal is dropped.
        (r"(?i)(?:^|[^\w./@:-])([a-z_][a-z0-9_.-]*@[a-z0-9])", "(?i)@[a-z0-9]"),
        (r"[a-z]+\x40b", r"\x40b"),
        (r"(?:[a-z]+)\.x{2}", r"\.x{2}"),  # a group of one branch opens
        (r"[a-z]*(ab)c", "abc"),
        # Nothing to gain: no unbounded repeat before the literal, or no literal.
        (r"(?:^|[^\w])~[a-z]", None),
        (r"[a-z]{1,5}@b", None),
        (r"[0-9]+[a-z]+", None),
        (r"[a-z]+@?b", "b"),  # an optional literal is not one to look for: the next is
        (r"(?:[a-z]+)+@b", "@b"),  # a quantified group stays whole, and repeats
        (r"[a-z]+x|y@", None),  # branches at the top
        (r"(?:a|[a-z]+)@b", None),  # only what may repeat counts, not a group's branches
        (r"(?s)(?i)[a-z]+@b", "(?s)(?i)@b"),  # every leading flag group is kept
        # An escape of several characters is not cut apart: no trimmed form.
        (r"[a-z]+\101b", None),
        (r"[a-z]+\u0040b", None),
        (r"[a-z]+\N{COMMERCIAL AT}b", None),
        (r"[a-z]+\\1@b", r"\\1@b"),  # an escaped backslash, then a digit
    ],
)
def test_trimmed_form(expression: str, trimmed: str | None) -> None:
    assert trimmed_form(expression) == trimmed


def test_a_trimmed_form_ends_where_every_match_ends() -> None:
    expression = r"(?i)(?:^|[^\w./@:-])([a-z_][a-z0-9_.-]*@[a-z0-9])"
    forms = line_forms(expression)
    assert forms[0] == "(?i)@[a-z0-9]" and forms[1:] == shortest_forms(expression)
    text = "to: bob.smith@example.org, X_Y@z, nobody@, @@a"
    ends = {m.end() for m in re.finditer(forms[0], text)}
    assert {m.end() for m in re.finditer(expression, text)} <= ends
    assert line_forms("ab+") == shortest_forms("ab+")


_PIECES = [
    "a",
    "b",
    "@",
    r"\.",
    r"\x40",
    "[a-z]",
    "[a-z]+",
    "[a-z]*",
    "[0-9]{1,3}",
    "(?:ab)+",
    "(?:a|b)",
    "(a[0-9]*)",
    "x?",
    r"\\",
    "(?i:b)",
    "[@.]",
]


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(["", "(?i)", "(?s)(?i)"]),
    st.lists(st.sampled_from(_PIECES), min_size=1, max_size=6),
    st.text(alphabet="abAB@.09\\\n x", max_size=40),
)
def test_every_match_ends_where_a_match_of_its_trimmed_form_ends(
    flags: str, pieces: list[str], text: str
) -> None:
    expression = flags + "".join(pieces)
    trimmed = trimmed_form(expression)
    if trimmed is None:
        return
    ends = {e for start in range(len(text) + 1) for e in _ends_from(trimmed, text, start)}
    assert {m.end() for m in re.finditer(expression, text)} <= ends


def _ends_from(expression: str, text: str, start: int) -> set[int]:
    """Every end of a match of ``expression`` starting at ``start`` (not only the one
    ``re`` prefers): each end position tried as the text's end."""
    pattern = re.compile(expression)
    return {end for end in range(start, len(text) + 1) if pattern.fullmatch(text, start, end)}
