"""The sanitizer's detectors one rule at a time: endpoints that name a host, masked GPU
identifiers, credential key names, word starts, public tokens and values already redacted."""

from __future__ import annotations

import re
from typing import Any

import pytest

from ledger._internal import sanitizer
from ledger._internal.sanitizer import Sanitizer, _plausible_endpoint


@pytest.mark.parametrize(
    ("value", "plausible"),
    [
        ("10.0.0.7", True),
        ("10.0.0.7:8000", True),
        ("bob:pw@10.0.0.7:8000", True),
        ("bob:pw@10.0.0.256:8000", False),  # the host is what follows the credentials
        ("u@0.0.0.0:80", False),
        ("255.255.255.255", True),
        ("10.0.0.256", False),  # not an address
        ("1.2.3", True),  # not four numbers: a name, kept as found
        ("1.2.3.4.5", True),
        ("1.2.x.4", True),
        ("0.0.0.0", False),  # every interface names no host
        ("0.0.0.0:8000", False),
        ("[::]", False),
        ("[fd00::1]:8000", True),
        ("registry.internal.example", True),
    ],
)
def test_an_endpoint_must_name_a_host(value: str, plausible: bool) -> None:
    assert _plausible_endpoint(value) is plausible


@pytest.mark.parametrize(
    ("value", "masked"),
    [
        ("GPU-00000000-0000-0000-0000-000000000000", True),
        ("MIG-00000000-0000-0000-0000-000000000001", True),
        ("GPU-0b5c3f1e-9a2d-4e6f-8a1b-2c3d4e5f6a7b", False),
        ("00000000-0000-0000-0000-000000000000", True),
        ("GPU-10000000-0000-0000-0000-00000000000f", False),
        ("GPUX-0000", True),
        # Every group counts, the first one too, with or without a prefix.
        ("GPU-f0000000-0000-0000-0000-000000000000", False),
        ("f0000000-0000-0000-0000-000000000000", False),
    ],
)
def test_masked_gpu_identifiers(value: str, masked: bool) -> None:
    assert Sanitizer._masked_uuid(value) is masked


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        ("api_key", True),
        ("apiKey", True),
        ("password", True),
        ("token", True),
        ("token_name", False),  # names the credential, is not one
        ("model", False),
        ("", False),
        ("client_secret", True),
        ("access_key", True),  # neither word alone, the pair is
        ("signingKey", True),
        ("key", False),
        ("monkey_business", False),
    ],
)
def test_secret_key_names(key: str, secret: bool) -> None:
    assert Sanitizer().secret_key(key) is secret


def test_a_pattern_that_must_start_a_word() -> None:
    detector = sanitizer._detector({"pattern": "tok[0-9]+", "word_start": True})
    text = "tok1 xtok2 _tok3 -tok4"
    assert [m.group(0) for m in detector.finditer(text, text.lower())] == ["tok1", "tok4"]
    plain = sanitizer._detector("tok[0-9]+")
    assert [m.group(0) for m in plain.finditer(text, text.lower())] == [
        "tok1", "tok2", "tok3", "tok4"
    ]  # fmt: skip


def test_detection_is_the_same_on_short_and_long_texts() -> None:
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    for padding in (0, sanitizer._MEMO_LONGEST):
        text = "x" * padding + f" token {secret} "
        hits = Sanitizer().detect(text)
        assert [(h.category, text[h.start : h.end]) for h in hits] == [("credential", secret)]


def test_a_value_under_a_credential_key_is_redacted_whole() -> None:
    found = Sanitizer().detect("correct horse battery", key="password")
    assert [(h.category, h.start, h.end) for h in found] == [("credential", 0, 21)]
    assert Sanitizer().detect("12345", key="password") == []  # a short number is no secret
    assert Sanitizer().detect("null", key="password") == []


HEX = "ab" * 32


@pytest.mark.parametrize(
    ("text", "span", "allowed"),
    [
        # A hit on part of a digest: only the whole token around it is public.
        (f"sha256:{HEX} tail", (7, 40), True),  # the token reaches the start of the text
        (f"head sha256:{HEX}", (30, 76), True),  # and its end
        (f"head sha256:{HEX} tail", (20, 50), True),
        (f"head sha256:{HEX}z tail", (20, 50), False),  # the token is no digest
        (f"id:{HEX}-suffix", (3, 67), True),  # the token is not public, the hit alone is
        (f"token={'Z' * 30}", (6, 36), False),
        ("see api-key-ABCDEFGHIJKLMNOP here", (12, 28), False),
    ],
)
def test_a_public_token_around_a_hit_is_not_redacted(
    text: str, span: tuple[int, int], allowed: bool
) -> None:
    assert Sanitizer()._allowed(text, *span) is allowed


@pytest.mark.parametrize(
    ("text", "hits"),
    [
        # A hit may touch a value already redacted, on either side.
        ("<redacted:credential:1>10.0.0.7:8000", [("endpoint", "10.0.0.7:8000")]),
        ("10.0.0.7:8000<redacted:credential:1>", [("endpoint", "10.0.0.7:8000")]),
        # A match skipped for a reason of its own does not stop the matches after it.
        ("https://bob:pw@10.0.0.5:80/ and 10.0.0.7:8000",
         [("credential", "bob:pw"), ("endpoint", "10.0.0.5:80"), ("endpoint", "10.0.0.7:8000")]),
        ("GPU-00000000-0000-0000-0000-000000000000 GPU-0b5c3f1e-9a2d-4e6f-8a1b-2c3d4e5f6a7b",
         [("gpu", "GPU-0b5c3f1e-9a2d-4e6f-8a1b-2c3d4e5f6a7b")]),
        ("listen 0.0.0.0:8000 then 10.0.0.7:8000", [("endpoint", "10.0.0.7:8000")]),
        ("password=12345 password=hunter2secret", [("credential", "hunter2secret")]),
        ("sha1 0123456789abcdef0123456789abcdef01234567 then ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
         [("credential", "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8")]),
        ("/home/alice/ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8/x and /home/bob/y",
         [("path", "/home/alice"), ("credential", "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"),
          ("path", "/home/bob")]),
        # Inside a hit already taken, then free.
        ("https://10.0.0.5:pw@x.example/ and 10.0.0.7",
         [("credential", "10.0.0.5:pw"), ("endpoint", "10.0.0.7")]),
        # Inside a public request id, then outside it.
        (f"req-sk-{'A' * 40} then sk-{'B' * 40}",
         [("credential", f"sk-{'B' * 40}")]),
    ],
)  # fmt: skip
def test_each_match_is_judged_on_its_own(text: str, hits: list[tuple[str, str]]) -> None:
    assert [(h.category, text[h.start : h.end]) for h in Sanitizer().detect(text)] == hits


@pytest.mark.parametrize("key", ["uuid", "gpu_uuid"])
def test_a_gpu_id_under_a_gpu_key_is_one_hit(key: str) -> None:
    text = "GPU-0b5c3f1e-9a2d-4e6f-8a1b-2c3d4e5f6a7b"
    assert [(h.category, h.start, h.end) for h in Sanitizer().detect(text, key=key)] == [
        ("gpu", 0, len(text))
    ]


def _min_width(pattern: str) -> int:
    """The fewest characters the rule's value (its ``secret`` group, or the whole match)
    can span, from Python's own regex parser."""
    import re._parser as parser  # type: ignore[import-not-found]

    compiled = re.compile(pattern)
    tree = parser.parse(pattern, compiled.flags)
    group = compiled.groupindex.get("secret")
    if group is None:
        return int(tree.getwidth()[0])

    def find(node: Any) -> int | None:
        # The parse tree nests SubPatterns in tuples and lists (branches, repeats, groups).
        if isinstance(node, parser.SubPattern):
            for op, av in node:
                if op is parser.SUBPATTERN and av[0] == group:
                    return int(av[3].getwidth()[0])
                found = find(av)
                if found is not None:
                    return found
        elif isinstance(node, list | tuple):
            for child in node:
                found = find(child)
                if found is not None:
                    return found
        return None

    width = find(tree)
    assert width is not None, pattern
    return width


def test_no_rule_can_redact_an_empty_value() -> None:
    rules = sanitizer.load_rules()
    detectors = [*rules.keyed, *(d for c in sanitizer.CATEGORIES for d in rules.patterns[c])]
    assert len(detectors) > 50
    widths = {d.pattern.pattern: _min_width(d.pattern.pattern) for d in detectors}
    assert all(w >= 1 for w in widths.values()), [p for p, w in widths.items() if w < 1]
    assert _min_width("(?P<secret>a*)b") == 0  # the check itself can fail
