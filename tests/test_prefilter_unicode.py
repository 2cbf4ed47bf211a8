"""Text outside ASCII through the prefilter: each character outside ASCII is scanned as an
ASCII stand-in of its kind, and the windows must still hold every match of every detector
(a window missing one would let a secret through unredacted)."""

from __future__ import annotations

import re
import sys
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ledger.sanitizer._prefilter import Prefilter, prefilter_for
from ledger.sanitizer._regex_forms import KINDS, SPECIAL, kind_of, stand_ins
from ledger.sanitizer._sanitizer import Sanitizer, load_rules
from tests.test_regex_forms import ALPHABET, windows_cover

RULES = load_rules()
PATTERNS = [d.pattern for d in RULES.detectors]

# Of every kind, from several scripts and planes; none of SPECIAL.
WIDE = [
    *"\u00e9\u00df\u0416\u03a9\u4e2d\u00b2\u00bd\u2167",  # letters and numbers: \w, not \d
    *"\u0663\u09ea\uff13\U0001d7ce",  # decimal digits outside ASCII
    *"\u00a0\u2028\u2029\u3000\x85\u200a",  # white space outside ASCII
    *"\u2013\u00b1\u20ac\u00a9\U0001f600\ufffd\u200b",  # neither
]


def _all_outside_ascii() -> str:
    return "".join(chr(c) for c in range(0x80, sys.maxunicode + 1) if not 0xD800 <= c < 0xE000)


def test_the_special_characters_are_every_one_read_as_ascii_ignoring_case() -> None:
    # Python's regex, ignoring case, takes these for ASCII letters, and lowering two of
    # them gives ASCII: no stand-in can stand for them. Every other character outside
    # ASCII matches no ASCII one.
    every = _all_outside_ascii()
    folded = set(re.findall(r"[\x00-\x7f]", every, re.IGNORECASE))
    lowered = {c for c in every if any(x.isascii() for x in c.lower())}
    assert folded == set(SPECIAL)
    assert lowered == {"\u0130", "\u212a"}


def test_every_character_outside_ascii_is_of_one_kind() -> None:
    # \d only where \w, and never \w and \s at once: four kinds, each keeping \w.
    every = _all_outside_ascii()
    words = set(re.findall(r"\w", every))
    assert set(re.findall(r"\d", every)) <= words
    assert not words & set(re.findall(r"\s", every))
    for kind, (sample, candidates) in KINDS.items():
        assert kind_of(sample) == kind
        assert all((re.match(r"\w", c) is not None) == (sample in words) for c in candidates)
        assert all(c.isascii() and c != "\n" and not "\x1c" <= c <= "\x1f" for c in candidates)


def _parts(pattern: re.Pattern[str]) -> list[tuple[Any, int]]:
    parser = re._parser  # type: ignore[attr-defined]
    found: list[tuple[Any, int]] = []

    def walk(items: Any, flags: int) -> None:
        for op, av in items:
            if op in (parser.LITERAL, parser.NOT_LITERAL, parser.ANY, parser.IN):
                found.append(((op, av), flags))
            elif op in (parser.ASSERT, parser.ASSERT_NOT):
                walk(av[1], flags)
            elif op is parser.SUBPATTERN:
                # Python's own reading of a group's flags, not the prefilter's.
                walk(av[3], re._compiler._combine_flags(flags, av[1], av[2]))  # type: ignore[attr-defined]
            elif op is parser.ATOMIC_GROUP:
                walk(av, flags)
            elif op is parser.BRANCH:
                for branch in av[1]:
                    walk(branch, flags)
            elif op in (parser.MAX_REPEAT, parser.MIN_REPEAT, parser.POSSESSIVE_REPEAT):
                walk(av[2], flags)

    walk(parser.parse(pattern.pattern, pattern.flags), pattern.flags)
    return found


def test_what_a_detector_s_part_takes_outside_ascii_depends_on_the_kind_alone() -> None:
    # The ground the stand-ins stand on: every part of every detector takes a character
    # outside ASCII exactly when it takes its kind's sample (every 7th character, and the
    # wide ones).
    parser = re._parser  # type: ignore[attr-defined]
    every = _all_outside_ascii()
    chars = [c for c in every[::7] + "".join(WIDE) if c not in SPECIAL]
    by_kind: dict[str, list[str]] = {kind: [] for kind in KINDS}
    for char in chars:
        by_kind[kind_of(char)].append(char)
    seen = set()
    for pattern in PATTERNS:
        for node, flags in _parts(pattern):
            if (repr(node), flags) in seen:
                continue
            seen.add((repr(node), flags))
            compiled = re._compiler.compile(  # type: ignore[attr-defined]
                parser.SubPattern(parser.State(), [node]), flags
            )
            for kind, (sample, _) in KINDS.items():
                wanted = compiled.fullmatch(sample) is not None
                differ = [c for c in by_kind[kind] if (compiled.fullmatch(c) is not None) != wanted]
                assert not differ, (pattern.pattern, node, kind, differ[:3])
    assert len(seen) > 100


def test_the_rules_have_a_stand_in_for_every_kind() -> None:
    # Not " " for a space: "/Volumes/Macintosh HD" holds one that a space outside ASCII
    # is not, in a lookahead the match must not meet.
    assert stand_ins(PATTERNS) == {"word": "_", "digit": "_", "space": "\t", "other": "\x7f"}


@pytest.mark.parametrize(
    ("patterns", "expected"),
    [
        # A letter outside ASCII is no [0-9A-Za-z.]: turned into its complement, the
        # lookbehind must take the stand-in, and no ASCII letter or digit will do.
        ([r"(?<![0-9A-Za-z.])[0-9]+"], {"word": "_", "digit": "_"}),
        # [^_] takes every letter outside ASCII, so the stand-in cannot be "_".
        ([r"[^_]x"], {"word": "Z", "digit": "0"}),
        # \d takes a digit outside ASCII, "_" does not.
        ([r"\dx"], {"word": "_", "digit": "0"}),
        # No stand-in at all for the digits: both ways are closed.
        ([r"\dx", r"(?<![0-9])y"], {"word": "_", "digit": None}),
        # "_" is refused by the second, and every letter and digit by the lookbehind (read
        # one way only, the first "Z" would do, and miss "\u00e910" turned into "Z10").
        ([r"(?<![0-9A-Za-z.])[0-9]+", r"[^_]x"], {"word": None, "space": " "}),
        # Flags a group sets are the group's: ASCII \w takes no letter outside ASCII, so
        # no word character can stand for one in a lookbehind; ignoring case, [a-z] in one
        # takes every ASCII letter, so only a digit can.
        ([r"(?<!(?a:\w))x"], {"word": None, "digit": None, "space": " "}),
        ([r"[^_]x", r"(?<!(?i:[a-z]))y"], {"word": "0", "digit": "0"}),
        # An atomic group's parts count as any others do.
        ([r"(?>[^_])x"], {"word": "Z", "digit": "0"}),
        # White space: a class without a space; other characters: one without DEL.
        ([r"a[^ ]b"], {"space": "\t", "other": "\x7f"}),
        ([r"a[^\x7f]b"], {"space": " ", "other": "!"}),
    ],
)
def test_a_stand_in_is_what_every_part_takes(patterns: list[str], expected: dict[str, str]) -> None:
    found = stand_ins([re.compile(p) for p in patterns])
    assert {kind: found.get(kind) for kind in expected} == expected


def test_a_kind_without_a_stand_in_is_scanned_whole() -> None:
    found = Prefilter([re.compile(r"\dx"), re.compile(r"(?<![0-9])y")])
    assert found.windows("\u00e9 2x") == {0: [(0, 4)]}
    assert found.windows("\u0663x 2x") is None


def test_a_part_naming_a_character_outside_ascii_gives_no_stand_in() -> None:
    assert stand_ins([re.compile(r"x"), re.compile(r"[a-\u00ff]")]) == {}
    # Nor one the stand-ins do not read: a conditional group.
    assert stand_ins([re.compile(r"(a)?(?(1)b|[^_])")]) == {}
    assert stand_ins([re.compile(r"(a)\1\b")]) != {}  # a back reference, an assertion
    assert stand_ins([re.compile(r"[^\u2013]")]) == {}
    # A literal outside ASCII may be in such a text, where its stand-in is not.
    found = Prefilter([re.compile("x+")], [("caf\u00e9",)])
    assert found.windows("xx caf\u00e9") is None
    assert Prefilter([re.compile("x+")], [("cafe",)]).windows("xx cafe \u00e9") == {0: [(0, 9)]}


@pytest.mark.parametrize(
    "text",
    [
        "\u00e910.0.0.1 and \u066310.0.0.2",  # a lookbehind's complement after a letter
        "token\u00a0=\u00a0abcdefghijkl",  # a key, white space outside ASCII, a value
        "\u4e2d hf_abcdefghijklmnopqrstuvwx\u2013",  # \b next to a character outside ASCII
        "https://user:p\u00e4ss@10.0.0.1/x",  # a password outside ASCII
        "host.internal\u3000/home/\u00e9mile/x",  # a home path of a name outside ASCII
        "-----BEGIN PRIVATE KEY-----\n\u00e9\u2028x\n-----END PRIVATE KEY-----",
    ],
)
def test_a_secret_beside_characters_outside_ascii_is_in_its_windows(text: str) -> None:
    windows_cover(text)
    fast, slow = Sanitizer(), Sanitizer(prefilter=False)
    assert fast.detect(text) == slow.detect(text) != []


WIDE_ALPHABET = ALPHABET | st.sampled_from(WIDE)


@settings(max_examples=400, deadline=None)
@given(st.lists(WIDE_ALPHABET, max_size=14).map("".join))
@example("\u00a0::")  # white space standing as a letter would hide an IPv6 address
@example("\u0663::1")
def test_every_match_in_a_text_outside_ascii_is_in_its_windows(text: str) -> None:
    windows_cover(text)


@settings(max_examples=200, deadline=None)
@given(st.lists(WIDE_ALPHABET | st.text(max_size=4), max_size=14).map("".join))
def test_a_text_outside_ascii_gives_the_hits_it_gives_without_the_prefilter(text: str) -> None:
    fast, slow = Sanitizer(), Sanitizer(prefilter=False)
    assert fast.detect(text) == slow.detect(text)
    assert fast.text(text) == slow.text(text)


def test_the_stand_ins_are_scanned_at_their_own_positions() -> None:
    # One character for one: the windows are offsets into the text itself.
    # A character past U+FFFF is one character of a str, and one byte scanned: the line
    # after sixty of them is where it is.
    prefilter = prefilter_for(RULES)
    token = "ghp_" + "a" * 36
    text = "\U0001f600" * 60 + "\n" + "\u00e9" * 5 + f" {token}\n\u2013"
    windows = prefilter.windows(text)
    assert windows is not None
    (index,) = [i for i, d in enumerate(RULES.detectors) if d.pattern.pattern.startswith("(?:ghp")]
    assert windows[index] == [(61, 107)]
    assert text[61:107] == "\u00e9" * 5 + f" {token}"
