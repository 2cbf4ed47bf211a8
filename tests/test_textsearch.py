"""The sanitizer's fast paths give what the plain Python they stand for gives: substring
search by first character, placeholders found where their prefix stands, a token's
start read backwards, and the places a regex may start inside a placeholder."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.sanitizer import _textsearch as textsearch
from ledger.sanitizer._prefilter import Prefilter, _points, merge
from ledger.sanitizer._sanitizer import _NAME_RUN, _TOKEN_EDGE, _rules, _run_start

TEXTS = st.text(alphabet='ab<{~"` \n:redact', max_size=200)


@settings(max_examples=400)
@given(TEXTS, st.sampled_from(["<redacted:", '{"', "~~~", "ab", "a", "```"]), st.data())
def test_find_is_str_find(text: str, needle: str, data: st.DataObject) -> None:
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.one_of(st.none(), st.integers(start, len(text))))
    assert textsearch.find(text, needle, start, end) == text.find(needle, start, end)
    assert textsearch.holds(text, needle) == (needle in text)


def test_find_past_many_first_characters() -> None:
    # More first characters than are tried one by one: the plain search takes over.
    text = "<" * 100 + "<redacted:" + "<" * 5
    assert textsearch.find(text, "<redacted:") == 100
    assert textsearch.find("<" * 100, "<redacted:") == -1


PLACEHOLDER = re.compile(r"<redacted:[a-z-]+:[0-9]+>")


@settings(max_examples=300)
@given(
    st.lists(
        st.sampled_from(
            ["<redacted:credential:12>", "<redacted:", "<", "x", "<redacted:gpu:7>", ">", " "]
        ),
        max_size=30,
    )
)
def test_matches_is_finditer(pieces: list[str]) -> None:
    text = "".join(pieces)
    found = [m.span() for m in textsearch.matches(PLACEHOLDER, text, "<redacted:")]
    assert found == [m.span() for m in PLACEHOLDER.finditer(text)]


@settings(max_examples=400)
@given(text=st.text(alphabet='ab =<"\n;x.-_', max_size=300), data=st.data())
@pytest.mark.parametrize("run_of", [_TOKEN_EDGE, _NAME_RUN])
def test_run_start_reads_back_as_char_by_char(
    run_of: re.Pattern[str], text: str, data: st.DataObject
) -> None:
    start = data.draw(st.integers(0, len(text)))
    left = start
    while left > 0 and run_of.fullmatch(text[left - 1]):
        left -= 1
    assert _run_start(run_of, text, start) == left


def test_run_start_across_long_runs() -> None:
    text = "= " + "a" * 500
    assert _run_start(_TOKEN_EDGE, text, len(text)) == 2
    assert _run_start(_TOKEN_EDGE, "a" * 130, 130) == 0


@given(st.lists(st.integers(0, 80), max_size=40))
def test_points_are_merged_windows(starts: list[int]) -> None:
    assert _points(starts) == merge([(s, s + 1) for s in starts])


def test_a_rule_file_whose_placeholders_start_otherwise_is_refused() -> None:
    data = b'{"placeholder": "[redacted:[a-z]+]"}'
    with pytest.raises(ValueError, match="placeholder must start with"):
        _rules(data, "0" * 64)


@pytest.mark.parametrize(("number", "starts_at_digit"), [("35", True), ("12", False)])
def test_starts_inside_a_placeholder_follow_its_digits(number: str, starts_at_digit: bool) -> None:
    # A regex that may start with some digits only: placeholders of one shape ("00")
    # differ in where it may start, so what one of them gave is not reused for another.
    pattern = re.compile(r"[3-7]>ab\s+cd")
    prefilter = Prefilter([pattern])
    if prefilter._any is None:
        pytest.fail("Hyperscan is missing: the prefilter cannot be tested")
    old = "a secret here 7>ab\ncd"
    found = prefilter.look(old)[1]
    assert found is not None
    # The other placeholder of the same shape first: its offsets must not be reused.
    other = "12" if number == "35" else "35"
    for digits in (other, number):
        placeholder = f"<redacted:credential:{digits}>"
        text = old.replace("secret", placeholder)
        rescanned = prefilter.rescan(found, text, [(2, 8, 2, 2 + len(placeholder))])
    assert rescanned is not None
    windows = rescanned[0].get(0, [])
    digit = 2 + len(placeholder) - 2  # the number's last digit
    inside = any(low <= digit < high for low, high in windows)
    assert inside == starts_at_digit
    # Every real match starts in a window.
    for match in pattern.finditer(text):
        assert any(low <= match.start() < high for low, high in windows)
