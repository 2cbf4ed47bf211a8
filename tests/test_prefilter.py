"""The sanitizer's Hyperscan prefilter: the same hits as every detector over every text,
whatever the text; only where the detectors run changes."""

from __future__ import annotations

import json
import os
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.sanitizer import _prefilter as prefilter
from ledger.sanitizer._prefilter import Prefilter, merge
from ledger.sanitizer._regex_forms import SPECIAL, hyperscan_pattern, line_forms, lookahead_reach
from ledger.sanitizer._sanitizer import Sanitizer, _split, _starting, _within
from tests.conftest import DATA

CORPUS = DATA / "secrets-corpus"
LABELLED = [json.loads(line) for line in (CORPUS / "derived/labelled_strings.jsonl").open()]
TEXTS = [r["text"] for r in LABELLED] + [
    json.loads(line)["value"] for line in (CORPUS / "derived/public_id_lookalikes.jsonl").open()
]


def test_hyperscan_is_installed_where_it_has_wheels() -> None:
    # CI runs on x86_64 Linux: without the wheel every text would be scanned whole, and
    # the suite would still pass, only slowly.
    if os.environ.get("CI") == "true" or os.uname().machine in ("x86_64", "aarch64"):
        assert prefilter.hyperscan is not None


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        (r"(?P<secret>ab)c", "(ab)c"),
        (r"(?<![\w.])(?P<secret>[0-9]+)", r"(?:^|[^\w.])([0-9]+)"),
        (r"(?i)(?<![\w:.%\[\]])x", r"(?i)(?:^|[^\w:.%\[\]])x"),
        (r"a(?=b|c)d(?!e)f", "adf"),
        (r"a(?<=x)b(?<!\d\d)c", "abc"),
        (r"(?=(x))a", "a"),  # a group inside a lookahead goes with it
        (r"[(?=]a\(?=b", r"[(?=]a\(?=b"),  # in a class, or escaped: no lookaround
        (r"[]a](?=x)", "[]a]"),
        (r"[^]a](?=x)b", "[^]a]b"),
        (r"[](?=x)]", "[](?=x)]"),  # "]" first in a class is a member: the class goes on
    ],
)
def test_what_hyperscan_is_given(pattern: str, expected: str) -> None:
    assert hyperscan_pattern(pattern) == expected


@pytest.mark.parametrize(
    ("pattern", "reach"),
    [
        ("abc", 1),
        (r"a(?![\w-]|\.[\w-])", 3),
        (r"a(?=\.?(?:[/\s]|$))", 3),
        (r"a(?=x{5})", 6),
        (r"a(?=.*b)", None),
        (r"(?:a(?!b{2}))+", 3),
        (r"(?<=abcdef)a", 1),  # a lookbehind looks back, not ahead
    ],
)
def test_lookahead_reach(pattern: str, reach: int | None) -> None:
    assert lookahead_reach(re.compile(pattern)) == reach


def test_merge_joins_what_overlaps_or_touches() -> None:
    assert merge([(5, 9), (0, 2), (2, 4), (8, 12), (20, 21)]) == [(0, 4), (5, 12), (20, 21)]
    assert merge([(0, 10), (2, 4)]) == [(0, 10)]
    assert merge([]) == []


def test_what_cannot_be_prefiltered_is_scanned_whole() -> None:
    found = Prefilter([re.compile(r"hf_[A-Za-z0-9]{20,}")])
    token = "hf_" + "a" * 24
    assert found.windows(f"x {token} y") == {0: [(0, 31)]}
    assert found.windows("nothing here") == {}
    # Python's \s holds \x1c-\x1f, Hyperscan's does not.
    for separator in "\x1c\x1d\x1e\x1f":
        assert found.windows(f"x {token}{separator}") is None
    assert found.windows(f"x {token}\x1b") is not None
    # Outside ASCII, a character stands as one of its kind; but Python's regex, ignoring
    # case, reads these four as ASCII letters, so they stand for nothing else.
    assert found.windows(f"\u00e9 {token} \u2013") == {0: [(0, 31)]}
    for special in SPECIAL:
        assert found.windows(f"{special} {token}") is None
    # A detector that names a character outside ASCII: no stand-in can be one of its kind.
    named = Prefilter([re.compile(r"hf_[A-Za-z0-9]{20,}"), re.compile("caf\u00e9")])
    assert named.windows(f"x {token}") == {0: [(0, 29)]}
    assert named.windows(f"\u00e9 {token}") is None


def test_a_match_without_a_line_break_has_its_line() -> None:
    token = "hf_" + "a" * 24
    found = Prefilter([re.compile(r"hf_[A-Za-z0-9]{20,}")])
    text = f"first\nx {token} y\nlast {token}"
    assert found.windows(text) == {0: [(6, 37), (38, 70)]}
    assert text[6:37] == f"x {token} y"


def test_a_lookbehind_where_a_match_starts_narrows_the_lines() -> None:
    # Hyperscan is given "(?:^|[^a])b": "ab" is no match of it, "b" at a line's start is.
    pattern = re.compile(r"(?<![a])b")
    found = Prefilter([pattern])
    assert found.windows("ab\nb") == {0: [(3, 4)]}
    assert [m.span() for m in _within(pattern, "ab\nb", [(3, 4)], 1)] == [(3, 4)]


def test_a_lookbehind_elsewhere_is_dropped_not_turned_into_a_character() -> None:
    # "a(?:^|[^x])b" would not match "ab", which "a(?<![x])b" does.
    assert hyperscan_pattern(r"a(?<![x])b") == "ab"
    assert Prefilter([re.compile(r"a(?<![x])b")]).windows("ab") == {0: [(0, 2)]}


def test_a_match_across_lines_is_tried_where_it_may_start() -> None:
    pattern = re.compile(r"(?i)key\s*=\s*\S{4,}")
    found = Prefilter([pattern])
    assert found.starting == {0}
    text = "a Key =\n  abcd\nkey=\nx key = ab\n"
    # The backward form stops at "=": "key=" at 15 starts no match, but may.
    assert found.windows(text) == {0: [(2, 3), (15, 16), (22, 23)]}
    assert [m.span() for m in _starting(pattern, text, [(2, 3), (15, 16), (22, 23)])] == [
        m.span() for m in pattern.finditer(text)
    ]


def test_a_regex_that_cannot_be_written_backwards_has_its_spans_or_the_whole_text() -> None:
    # Outside ASCII: not written backwards, but Hyperscan gives its spans.
    spans = Prefilter([re.compile(r"é\s+x|a\s+b")])
    assert spans.starting == frozenset()
    assert spans.windows("x a\nb y") == {0: [(2, 5)]}
    # A back reference: neither, so the whole text.
    whole = Prefilter([re.compile(r"(a)\s\1b")])
    assert whole.windows("x a\nab y") == {0: [(0, 8)]}


def test_a_form_hyperscan_refuses_gives_way_to_the_next() -> None:
    # Hyperscan has no possessive repeat: the line form of the first does not compile,
    # and it is written backwards instead (as a plain repeat); the other keeps its lines.
    found = Prefilter([re.compile(r"x[a-z]*+y"), re.compile("hf_[a-z]{3,}")])
    assert found.starting == {0}
    assert found.windows("a xabcy b\nhf_abcd") == {0: [(2, 3)], 1: [(10, 17)]}


@pytest.mark.parametrize("starts", [[(0, 1), (3, 4), (6, 7), (9, 10)], [(0, 11)]])
def test_starts_are_tried_left_to_right_as_finditer_does(starts: list[tuple[int, int]]) -> None:
    # A start inside the last match is not tried: finditer would not try it either.
    pattern = re.compile(r"ab\s*ab")
    text = "ab ab ab ab"
    assert [m.span() for m in _starting(pattern, text, starts)] == [(0, 5), (6, 11)]
    assert [m.span() for m in pattern.finditer(text)] == [(0, 5), (6, 11)]


def test_a_placeholder_holding_a_separator_is_no_rescan() -> None:
    text = "x " * 600 + "Bearer abcdefghijk"
    found = Prefilter([re.compile(r"(?i)bearer\s+\S{8,}")])
    _, scanned = found.look(text)
    assert scanned is not None
    after = "<\x1f>" + text[1:]
    assert found.rescan(scanned, after, [(0, 1, 0, 3)]) is None
    assert found.rescan(scanned, "<a>" + text[1:], [(0, 1, 0, 3)]) is not None
    assert found.rescan(scanned, "[a]" + text[1:], [(0, 1, 0, 3)]) is None  # not "<...>"


def test_a_rescan_is_of_the_text_the_last_scan_was_of() -> None:
    # The last long text scanned whole was a log; the next redaction is of a long string
    # in a document: the log's scan must not stand for it.
    filler = "decode prefill batch\n" * 60
    fast, slow = Sanitizer(), Sanitizer(prefilter=False)
    log = filler + "Bearer abcdefghijklmnop " * 3
    assert fast.text(log) == slow.text(log)
    # A JWT whose redaction uncovers a secret after it (found on the second pass).
    line = (
        "python examples/cli.py eyJhbGciOiJIUzI1NiJ9.eyJJc3N1ZXIiOiJJc3N1ZXIiLCJVc2VybmFtZSI6"
        "IkJhZFNlY3JldHMiLCJleHAiOjE1OTMxMzM0ODMsImlhdCI6MTQ2NjkwMzA4M30.ovqRikAo_0kKJ0GVrAw"
        "QlezymxrLGjcEiW_s3UJMMCosecret_length = X25519.secret_lengthh1:cuNEagBQEHWN1FnbGEjC"
        "XL2szYEXqfJPbP2HNUaca9Y="
    )
    cleaned = fast.document({"log": filler + line})
    assert cleaned == slow.document({"log": filler + line})
    assert "cuNEag" not in cleaned["log"]


def test_a_regex_none_of_whose_literals_occurs_is_not_run() -> None:
    patterns = [re.compile(r"[a-z]+=[0-9]+")] * 4
    found = Prefilter(patterns, [("pass",), ("Pass",), (), ("", "zzz")])
    # "Pass" is looked for in lowered text: it is never there, as without a prefilter.
    assert set(found.windows("PASS x=1") or {}) == {0, 2, 3}
    assert set(found.windows("none x=1") or {}) == {2, 3}


def test_a_rescan_looks_for_the_literals_again() -> None:
    # The literal was in what the placeholder replaced: the regex is not run any more,
    # as a scan of the whole would decide; one whose literal a placeholder brings is.
    found = Prefilter(
        [re.compile(r"[a-z]+=[0-9]+"), re.compile(r"[a-z]+:[0-9]+")], [("pass",), ("redacted",)]
    )
    text = "x=1 pass y:2\nmore"
    windows, scanned = found.look(text)
    assert windows == {0: [(0, 12)]} and scanned is not None
    after = "x=1 <redacted:credential:1> y:2\nmore"
    rescanned = found.rescan(scanned, after, [(4, 8, 4, 27)])
    assert rescanned is not None
    assert rescanned[0] == found.windows(after) == {1: [(0, 31)]}


def test_a_match_near_a_window_s_false_end_is_taken_from_the_whole_text() -> None:
    # Searched as "ab\n", "ab$" matches at 0; in the whole text it does not.
    pattern = re.compile("ab$")
    text = "ab\nab"
    assert [m.span() for m in _within(pattern, text, [(0, 2), (3, 5)], 1)] == [(3, 5)]
    assert [m.span() for m in pattern.finditer(text)] == [(3, 5)]


@pytest.mark.parametrize(
    ("pattern", "text", "windows", "reach"),
    [
        ("a(?=bc)", "abc", [(0, 1)], 3),  # the lookahead sees past the window's end
        ("a", "aa", [(0, 2)], 1),  # matches side by side, none skipped
    ],
)
def test_a_window_finds_what_the_whole_text_finds(
    pattern: str, text: str, windows: list[tuple[int, int]], reach: int
) -> None:
    compiled = re.compile(pattern)
    assert [m.span() for m in _within(compiled, text, windows, reach)] == [
        m.span() for m in compiled.finditer(text)
    ]


def test_a_line_start_inside_a_text_is_a_start() -> None:
    assert Prefilter([re.compile(r"(?m)^ab")]).windows("x\nab") == {0: [(2, 4)]}


def test_nothing_redacted_is_the_value_itself_and_is_remembered() -> None:
    sanitizer = Sanitizer()
    document = {"a": ["x", 1], "b": "plain words"}
    assert sanitizer.document(document) is document
    assert ("plain words", "b") in sanitizer._memo


def test_windows_of_joined_texts_go_to_each_text() -> None:
    texts = ["abc", "", "defgh", "ij"]  # joined: "abc\n\ndefgh\nij"
    windows = {0: [(1, 3)], 1: [(2, 7)], 2: [(11, 13)], 3: [(3, 4)]}
    assert _split(windows, texts) == {
        0: {0: [(1, 3)], 1: [(2, 3)]},
        2: {1: [(0, 2)]},
        3: {2: [(0, 2)]},
    }


def _embeddings(value: str) -> list[Any]:
    return [
        value,
        {"identity": {"declared_serve_flags": ["--tp-size 2", value], "api_key": value}},
        {"environment": {"EXTRA": value, "CUDA_VISIBLE_DEVICES": value, value[:40]: 1}},
        {"logs": [f"2026-11-29T12:00:00Z INFO worker 3: {value} (continuing)"] * 2},
        {"numbers": [1, 2.5, None, True], "nested": [[value], {"gpu_uuid": value}]},
    ]


def _same(text_or_document: Any, pair: tuple[Sanitizer, Sanitizer] | None = None) -> None:
    fast, slow = pair or (Sanitizer(), Sanitizer(prefilter=False))
    if isinstance(text_or_document, str):
        assert fast.detect(text_or_document) == slow.detect(text_or_document)
        assert fast.text(text_or_document) == slow.text(text_or_document)
    else:
        cleaned = fast.document(text_or_document)
        assert cleaned == slow.document(text_or_document)
        assert list(fast.scan(text_or_document)) == list(slow.scan(text_or_document))
        assert list(fast.scan(cleaned)) == list(slow.scan(cleaned)) == []


def test_the_corpus_gives_the_same_hits_with_and_without_the_prefilter() -> None:
    # One pair for all: their placeholders are numbered alike as long as their hits are.
    pair = (Sanitizer(), Sanitizer(prefilter=False))
    for text in TEXTS:
        for embedded in _embeddings(text):
            _same(embedded, pair)


def test_a_log_of_every_corpus_string_gives_the_same_redaction() -> None:
    log = "\n".join(f"2026-11-29T12:00:{i % 60:02d}Z INFO {t}" for i, t in enumerate(TEXTS))
    fast, slow = Sanitizer(), Sanitizer(prefilter=False)
    assert fast.text(log) == slow.text(log)
    assert fast.detect(log) == slow.detect(log)
    assert fast.redactions > 300


PIECES = [t for t in TEXTS if len(t) < 400] + [
    "\n", " ", "\t", '"', "'", "=", ":", "@", "/", ".", "-", "--token ", "Bearer ",
    "api_key=", "https://", "10.0.0.", "[fd00::1]", "/home/", "\x1c", "é", "K", "GPU-",
    "<redacted:credential:1>", "-----BEGIN PRIVATE KEY-----", "-----END PRIVATE KEY-----",
]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES) | st.text(max_size=6), max_size=12))
def test_any_text_gives_the_same_hits(parts: list[str]) -> None:
    _same("".join(parts))


def test_a_match_a_redaction_uncovers_is_found_in_a_long_text() -> None:
    # The address is part of the token's match until the token is a placeholder: found
    # by the rescan of that line, in a text long enough to be rescanned only there.
    line = "glimt-my-tokens_are-correctAB38_280[fd00::1]"
    padding = [f"2026-11-29T12:00:{i % 60:02d}Z INFO [fd00::2 decode" for i in range(60)]
    # A regex that may match across lines is looked for too: the text is rescanned.
    pair = 'config "api_key", "abcdefghij" set'
    text = "\n".join([*padding[:30], line, *padding[30:], pair])
    fast, slow = Sanitizer(), Sanitizer(prefilter=False)
    assert fast.text(text) == slow.text(text)
    assert "\n<redacted:credential:1><redacted:endpoint:1>\n" in slow.text(text)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.sampled_from(PIECES), max_size=6).map("".join), max_size=40))
def test_any_long_text_gives_the_same_redaction_after_its_rescans(lines: list[str]) -> None:
    # Long enough to be rescanned only where a redaction changed it (each pass after the
    # first); a line left as it was is not detected again.
    padding = [f"2026-11-29T12:00:{i % 60:02d}Z INFO decode batch tokens" for i in range(40)]
    mixed = zip(padding, lines + [""] * (40 - len(lines)), strict=True)
    text = "\n".join(line for pair in mixed for line in pair)
    # A regex that may match across lines is looked for too: the text is rescanned.
    text += '\nconfig "api_key", "abcdefghij" set'
    assert len(text) > 1024
    fast, slow = Sanitizer(), Sanitizer(prefilter=False)
    assert fast.text(text) == slow.text(text)
    assert fast.file_text(text, "notes/F") == slow.file_text(text, "notes/F")


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["api_key", "gpu_uuid", "note", "flags", "AUTH_TOKEN", "x"]),
            st.lists(st.sampled_from(PIECES), max_size=5).map("".join),
        ),
        max_size=8,
    )
)
def test_any_document_gives_the_same_redaction(entries: list[tuple[str, str]]) -> None:
    document = {f"{key}{i}": [value, {key: value}] for i, (key, value) in enumerate(entries)}
    _same(document)


def test_a_long_text_s_last_detection_answers_only_for_that_text_and_key() -> None:
    # A log's rescan asks about the text its last redaction left; anything else is
    # detected afresh, even text of the same length.
    sanitizer = Sanitizer()
    filler = "decode prefill batch " * 100
    clean = filler + "nothing here at all"
    leaky = filler + "password=hunter2xyz"
    assert len(clean) == len(leaky)
    assert sanitizer.detect(clean) == []
    assert [h.category for h in sanitizer.detect(leaky)] == ["credential"]
    assert sanitizer.detect(clean) == []
    assert [h.category for h in sanitizer.detect(clean, "api_key")] == ["credential"]
    assert sanitizer.detect(clean) == []
    published = sanitizer.text(leaky)
    assert "hunter2xyz" not in published
    assert sanitizer.detect(published) == []


def test_a_long_text_is_detected_once_for_its_rescan(monkeypatch: pytest.MonkeyPatch) -> None:
    sanitizer = Sanitizer()
    calls: list[str] = []
    original = sanitizer._prefiltered

    def counted(text: str, key: str | None) -> Any:
        calls.append(text[-12:])
        return original(text, key)

    monkeypatch.setattr(sanitizer, "_prefiltered", counted)
    filler = "decode prefill batch " * 100
    a, b = filler + "first text", filler + "second text"
    sanitizer.detect(a), sanitizer.detect(b), sanitizer.detect(b)
    assert calls == [a[-12:], b[-12:]]
    calls.clear()
    rescans: list[str] = []
    prefilter = sanitizer._prefilter
    assert prefilter is not None
    rescan = prefilter.rescan

    def counted_rescan(found: Any, text: str, replaced: Any) -> Any:
        rescans.append(text[-12:])
        return rescan(found, text, replaced)

    monkeypatch.setattr(prefilter, "rescan", counted_rescan)
    published = sanitizer.text(filler + "password=hunter2xyz")
    # The text scanned whole, what its redaction left only where that changed, and the
    # fail-closed rescan answered from that.
    assert len(calls) == 1 and rescans == [published[-12:]]
    assert sanitizer.detect(published) == [] and len(calls) == 1 and len(rescans) == 1


def test_a_regex_that_looks_past_its_line_is_looked_for_again_beside_a_redaction() -> None:
    # The first regex's lookahead reads the next line: once that line holds a
    # placeholder, it matches on a line no redaction touched.
    looks_ahead = re.compile(r"tok_[a-z]{8}(?=\n<)")
    found = Prefilter([looks_ahead, re.compile(r"sk-[a-z]{12}"), re.compile(r"zz\s+yy")])
    if found._any is None:
        pytest.fail("Hyperscan is missing: the prefilter cannot be tested")
    before = "tok_abcdefgh\nsk-abcdefghijkl\nzz yy"
    _, scanned = found.look(before)
    assert scanned is not None and scanned.backward is not None
    placeholder = "<redacted:credential:1>"
    after = before.replace("sk-abcdefghijkl", placeholder)
    rescanned = found.rescan(scanned, after, [(13, 28, 13, 13 + len(placeholder))])
    assert rescanned is not None
    match = looks_ahead.search(after)
    assert match is not None
    assert any(a <= match.start() and match.end() <= b for a, b in rescanned[0].get(0, []))


def test_an_escape_a_redaction_uncovers_is_decoded_again() -> None:
    # Decoded, the line's token and address are one match until the token is a
    # placeholder; the address (written with an escape) is found on the second pass.
    text = "hello\nx \\u0067limt-my-tokens_are-correctAB38_280\\u005bfd00::1]\nbye"
    cleaned = Sanitizer().file_text(text, "notes/F")
    assert cleaned == "hello\nx <redacted:credential:1><redacted:endpoint:1>\nbye"


def test_a_one_character_literal_is_looked_for_case_aside() -> None:
    # One-character literals are searched for in the bytes, not by Hyperscan: in either
    # case, and a regex none of whose literals occurs is not run.
    found = Prefilter([re.compile(r"[0-9]+x[0-9]+")], [["q"]])
    if found._any is None:
        pytest.fail("Hyperscan is missing: the prefilter cannot be tested")
    assert found.windows("1x2\n") == {}
    assert found.windows("1x2 Q\n") == {0: [(0, 5)]}
    assert found.windows("1x2 q\n") == {0: [(0, 5)]}


def test_a_rescan_looks_for_one_character_literals_again() -> None:
    # ":" occurs only once a placeholder brings it in: the second regex, not run
    # before, runs then.
    found = Prefilter([re.compile(r"sk-z{12}"), re.compile(r"ed:[a-z]+:")], [["sk-"], [":"]])
    if found._any is None:
        pytest.fail("Hyperscan is missing: the prefilter cannot be tested")
    before = "sk-zzzzzzzzzzzz\n"
    _, scanned = found.look(before)
    assert scanned is not None
    after = "<redacted:credential:1>\n"
    rescanned = found.rescan(scanned, after, [(0, 15, 0, 23)])
    assert rescanned is not None and rescanned[0] == {1: [(0, 23)]}


def test_a_form_found_by_a_character_on_every_line_is_looked_for_on_its_own() -> None:
    # A regex whose literal is ":" is looked for in a database of its own, and its
    # windows are found as every other's, first and in a rescan.
    colon = re.compile(r"(?<![\w:])(?P<secret>[0-9a-f]{1,4}::[0-9a-f]{1,4})(?![\w:])")
    found = Prefilter([colon, re.compile(r"sk-[a-z]{12}")], [[":"], ["sk-"]])
    if found._any is None:
        pytest.fail("Hyperscan is missing: the prefilter cannot be tested")
    assert found._dense is not None
    text = '{"a": 1}\nhost fe80::1 up\n{"b": 2}\n'
    assert found.windows(text) == {0: [(9, 24)]}
    before = "sk-abcdefghijkl fe80::2\n"
    _, scanned = found.look(before)
    assert scanned is not None and set(scanned.ends) == {0, 1}
    after = before.replace("sk-abcdefghijkl", "<redacted:credential:1>")
    rescanned = found.rescan(scanned, after, [(0, 15, 0, 23)])
    assert rescanned is not None and rescanned[0] == {0: [(0, len(after) - 1)]}


def test_a_trimmed_form_finds_the_line_of_every_match() -> None:
    # An e-mail address is looked for by its "@": a line without one has no window, a
    # line with one has its window whatever comes before the "@".
    mail = re.compile(r"(?i)(?<![\w./@:-])(?P<secret>[a-z_][a-z0-9_.-]*@[a-z0-9][a-z0-9-]*)")
    found = Prefilter([mail], [["@"]])
    if found._any is None:
        pytest.fail("Hyperscan is missing: the prefilter cannot be tested")
    assert line_forms(hyperscan_pattern(mail.pattern))[0] == "(?i)@[a-z0-9]"
    text = "one line\nmail alice.smith_long_name@example here\nx@ no\nto x@EXAMPLE\n"
    assert found.windows(text) == {0: [(9, 48), (55, 67)]}
