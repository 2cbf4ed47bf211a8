"""The forms of a regex the prefilter gives Hyperscan: each must report every place the
regex matches (a form that misses one would let a secret through unredacted)."""

from __future__ import annotations

import json
import re

import hyperscan
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger._internal.prefilter import prefilter_for
from ledger._internal.regex_forms import (
    line_local,
    reversed_expression,
    shortest_forms,
)
from ledger._internal.sanitizer import load_rules
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
        (r"(?i)ab+c", b"(?i)c(?:b){1,}a"),
        (r"key=\S+", b"\\x3dyek"),  # up to "=": a run of \S would follow every character
        (r"a(?=b)c\bd", b"dca"),  # assertions dropped
        (r"a(?i:b)", b"(?i:b)a"),
        (r"[^\s'x-z]", b"[^\\t\\n\\x0b\\x0c\\r \\x1c-\\x1f\\x27x-z]"),
        (r"é", None),  # outside ASCII
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
    prefilter = prefilter_for(RULES)
    windows = prefilter.windows(text)
    assert windows is not None
    for index, detector in enumerate(DETECTORS):
        mine = windows.get(index, [])
        for start in range(len(text) + 1):
            match = detector.pattern.match(text, start)
            if match is None:
                continue
            if index in prefilter.starting:
                assert any(a <= match.start() < b for a, b in mine), (index, text)
            else:
                assert any(a <= match.start() and match.end() <= b for a, b in mine), (
                    index,
                    text,
                )


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
    replaced = []
    pieces = []
    last = length = 0
    for start, size in sorted(spans):
        if start < last or start >= len(text):
            continue
        end = min(start + size, len(text))
        placeholder = f"<redacted:credential:{number + len(replaced)}>"
        pieces.append(text[last:start])
        length += start - last
        replaced.append((start, end, length, length + len(placeholder)))
        pieces.append(placeholder)
        length += len(placeholder)
        last = end
    pieces.append(text[last:])
    after = "".join(pieces)
    rescanned = prefilter.rescan(found, after, replaced)
    if rescanned is None:
        assert found.backward is None  # it could not tell: only when nothing ran backwards
        return
    windows, again = rescanned
    assert again.text == after
    for index, detector in enumerate(DETECTORS):
        mine = windows.get(index, [])
        for start in range(len(after) + 1):
            match = detector.pattern.match(after, start)
            if match is None:
                continue
            if index in prefilter.starting:
                assert any(a <= match.start() < b for a, b in mine), (index, after)
            else:
                assert any(a <= match.start() and match.end() <= b for a, b in mine), (
                    index,
                    after,
                )
