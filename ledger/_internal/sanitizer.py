"""The sanitizer: redacts credentials, GPU identifiers, private endpoints and host paths.

Rules live in ``ledger/_rules/sanitizer-v<N>.json`` (their version and sha256 go into
every publication). JSON is walked in sorted key order with each value's key path, keys
are scanned as well as values, and the categories run in a fixed order (credential, gpu,
endpoint, path): the first match wins. Every redacted value gets a placeholder stable
within one :class:`Sanitizer` (one campaign): the same value, the same placeholder.
Placeholders are never matched again, so sanitizing twice changes nothing.
"""

from __future__ import annotations

import hashlib
import ipaddress
import itertools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

CATEGORIES = ("credential", "gpu", "endpoint", "path")
RULES_FILE = Path(__file__).resolve().parent.parent / "_rules" / "sanitizer-v1.json"
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
_TOKEN_EDGE = re.compile(r"[^\s\"'<>,;()\[\]{}=]+")
_SHORT_NUMBER = re.compile(r"[0-9]{1,12}")
_HEX = re.compile(r"[0-9a-fA-F]")
_LITERALS = frozenset({"true", "false", "null", "none"})
_SHORTEST = 3
"""No detector matches fewer characters (``::1``); a secret key's value is checked anyway."""
_MEMO_LIMIT = 200_000
_MEMO_LONGEST = 1024
"""Values repeat (finish reasons, flags); whole logs do not, and would only fill memory."""


@attrs.frozen
class Detector:
    """A pattern and the literals one of which must occur for it to be worth running."""

    pattern: re.Pattern[str]
    any: tuple[str, ...] = ()
    word_start: bool = False
    """The match must not follow a word character (a leading ``\\b`` in the pattern
    would stop the regex engine from searching for its literal prefix)."""
    non_global: bool = False
    """The match counts only as an IP address outside the public internet: a regex cannot
    tell ``fd00::1`` from ``2001:4860::8888``, nor either from a time of day."""

    def finditer(self, text: str, lower: str) -> Iterator[re.Match[str]]:
        """Matches in ``text`` (``lower`` is ``text.lower()``, computed once per text)."""
        if self.any and not any(literal in lower for literal in self.any):
            return iter(())
        matches = self.pattern.finditer(text)
        if not self.word_start:
            return matches
        return (
            m
            for m in matches
            if m.start() == 0 or not (text[m.start() - 1].isalnum() or text[m.start() - 1] == "_")
        )


def _detector(spec: str | dict[str, Any]) -> Detector:
    if isinstance(spec, str):
        return Detector(re.compile(spec))
    return Detector(
        re.compile(spec["pattern"]),
        tuple(spec.get("any", ())),
        bool(spec.get("word_start")),
        bool(spec.get("non_global")),
    )


@attrs.frozen
class Rules:
    """A loaded rule file."""

    version: str
    sha256: str
    placeholder: re.Pattern[str]
    patterns: dict[str, tuple[Detector, ...]]
    keyed: tuple[Detector, ...]
    secret_words: frozenset[str]
    secret_pairs: frozenset[tuple[str, str]]
    naming_words: frozenset[str]
    gpu_keys: frozenset[str]
    bare_uuid: re.Pattern[str]
    allowlist: tuple[re.Pattern[str], ...]


def load_rules(path: Path = RULES_FILE) -> Rules:
    """Reads a rule file."""
    data = path.read_bytes()
    rules = json.loads(data)
    return Rules(
        version=str(rules["version"]),
        sha256=hashlib.sha256(data).hexdigest(),
        placeholder=re.compile(rules["placeholder"]),
        patterns={c: tuple(_detector(p) for p in rules[c]["patterns"]) for c in CATEGORIES},
        keyed=tuple(_detector(p) for p in rules["credential"]["keyed_patterns"]),
        secret_words=frozenset(rules["credential"]["secret_words"]),
        secret_pairs=frozenset(tuple(p) for p in rules["credential"]["secret_pairs"]),
        naming_words=frozenset(rules["credential"]["naming_words"]),
        gpu_keys=frozenset(rules["gpu"]["uuid_keys"]),
        bare_uuid=re.compile(rules["gpu"]["bare_uuid"]),
        allowlist=tuple(re.compile(p) for p in rules["allowlist"]),
    )


@attrs.frozen
class Hit:
    """One detected value."""

    category: str
    start: int
    end: int


def key_words(key: str) -> list[str]:
    """``apiKey``, ``api_key``, ``API-KEY`` -> ``["api", "key"]``."""
    return [w.lower() for w in _WORD.findall(key)]


class Sanitizer:
    """Detects and redacts; one instance per campaign keeps placeholders stable."""

    def __init__(self, rules: Rules | None = None) -> None:
        self.rules = rules or load_rules()
        self._placeholders: dict[tuple[str, str], str] = {}
        self._counts: dict[str, int] = {}
        self._memo: dict[tuple[str, str | None], tuple[Hit, ...]] = {}

    # -- detection ----------------------------------------------------------------------

    def secret_key(self, key: str) -> bool:
        """Whether a key names a credential (its string value is one, whatever it is)."""
        words = key_words(key)
        if not words or words[-1] in self.rules.naming_words:
            return False
        joined = "".join(words)
        if joined in self.rules.secret_words:
            return True
        if any(w in self.rules.secret_words for w in words):
            return True
        return any(pair in self.rules.secret_pairs for pair in itertools.pairwise(words))

    def _gpu_key(self, key: str) -> bool:
        words = key_words(key)
        return bool(words) and (
            "_".join(words) in self.rules.gpu_keys or any(w in self.rules.gpu_keys for w in words)
        )

    def _allowed(self, text: str, start: int, end: int) -> bool:
        # The whole token around a hit: a public identifier is never redacted.
        left = start
        while left > 0 and _TOKEN_EDGE.fullmatch(text[left - 1]):
            left -= 1
        right = end
        while right < len(text) and _TOKEN_EDGE.fullmatch(text[right]):
            right += 1
        token = text[left:right]
        return any(p.fullmatch(token) for p in self.rules.allowlist) or any(
            p.fullmatch(text[start:end]) for p in self.rules.allowlist
        )

    @staticmethod
    def _masked_uuid(value: str) -> bool:
        # GPU-00000000-0000-0000-0000-000000000000 and the like: already masked.
        digits = set(
            _HEX.findall(value.split("-", 1)[-1] if value[:4] in ("GPU-", "MIG-") else value)
        )
        return digits <= {"0", "1"}

    def detect(self, text: str, key: str | None = None) -> list[Hit]:
        """Every redactable span of ``text`` (``key``: the JSON key it stands under)."""
        if len(text) > _MEMO_LONGEST:
            return list(self._detect(text, key))
        memo = (text, key)
        found = self._memo.get(memo)
        if found is None:
            found = self._detect(text, key)
            if len(self._memo) < _MEMO_LIMIT:
                self._memo[memo] = found
        return list(found)

    def _detect(self, text: str, key: str | None) -> tuple[Hit, ...]:
        rules = self.rules
        context = key is not None and (self.secret_key(key) or self._gpu_key(key))
        # Short strings and whole public identifiers (digests, request ids) hold nothing.
        if not context and (
            len(text) < _SHORTEST or any(p.fullmatch(text) for p in rules.allowlist)
        ):
            return ()
        if rules.placeholder.fullmatch(text):
            return ()
        taken: list[tuple[int, int]] = [m.span() for m in rules.placeholder.finditer(text)]
        hits: list[Hit] = []

        def free(start: int, end: int) -> bool:
            return all(end <= a or start >= b for a, b in taken)

        def add(category: str, start: int, end: int) -> None:
            if start < end and free(start, end):
                taken.append((start, end))
                hits.append(Hit(category, start, end))

        plain = _SHORT_NUMBER.fullmatch(text) or text.lower() in _LITERALS
        if key is not None and not taken and not plain and text.strip() and self.secret_key(key):
            add("credential", 0, len(text))
        lower = text.lower()
        for category in CATEGORIES:
            keyed = rules.keyed if category == "credential" else ()
            for detector in (*keyed, *rules.patterns[category]):
                for match in detector.finditer(text, lower):
                    group = "secret" if "secret" in detector.pattern.groupindex else 0
                    start, end = match.span(group)
                    if start < 0 or not free(start, end):
                        continue
                    value = text[start:end]
                    if category == "credential" and (
                        _SHORT_NUMBER.fullmatch(value)
                        or value.lower().rstrip(".") in _LITERALS
                        or rules.placeholder.search(value)
                    ):
                        continue
                    if category == "gpu" and self._masked_uuid(value):
                        continue
                    if category == "endpoint" and not _plausible_endpoint(value):
                        continue
                    if detector.non_global and not _non_global_address(value):
                        continue
                    # A secret-like name before it makes even a digest-shaped value secret.
                    if detector not in keyed and self._allowed(text, start, end):
                        continue
                    add(category, start, end)
            if category == "gpu" and key is not None and self._gpu_key(key):
                for match in rules.bare_uuid.finditer(text):
                    if not self._masked_uuid(match.group(0)):
                        add("gpu", *match.span())
        hits.sort(key=lambda h: h.start)
        return tuple(hits)

    # -- redaction ----------------------------------------------------------------------

    @property
    def redactions(self) -> int:
        """Distinct values redacted so far."""
        return len(self._placeholders)

    def placeholder(self, category: str, value: str) -> str:
        """The stable placeholder of a value."""
        found = self._placeholders.get((category, value))
        if found is None:
            number = self._counts.get(category, 0) + 1
            self._counts[category] = number
            found = f"<redacted:{category}:{number}>"
            self._placeholders[(category, value)] = found
        return found

    def text(self, text: str, key: str | None = None) -> str:
        """``text`` with every hit replaced by its placeholder."""
        hits = self.detect(text, key)
        if not hits:
            return text
        out = []
        last = 0
        for hit in hits:
            out.append(text[last : hit.start])
            out.append(self.placeholder(hit.category, text[hit.start : hit.end]))
            last = hit.end
        out.append(text[last:])
        return "".join(out)

    def document(self, value: Any, key: str | None = None) -> Any:
        """A sanitized copy of a JSON value; keys are sanitized too."""
        if isinstance(value, str):
            return self.text(value, key)
        if isinstance(value, dict):
            return {self.text(k): self.document(value[k], k) for k in sorted(value)}
        if isinstance(value, list):
            return [self.document(item, key) for item in value]
        return value

    def scan(
        self, value: Any, pointer: str = "", key: str | None = None
    ) -> Iterator[tuple[str, str]]:
        """(JSON pointer, category) of every remaining hit: the fail-closed check."""
        if isinstance(value, str):
            for hit in self.detect(value, key):
                yield pointer, hit.category
        elif isinstance(value, dict):
            for k in sorted(value):
                escaped = k.replace("~", "~0").replace("/", "~1")
                for hit in self.detect(k):
                    yield f"{pointer}/{escaped}", f"{hit.category} (in a key)"
                yield from self.scan(value[k], f"{pointer}/{escaped}", k)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                yield from self.scan(item, f"{pointer}/{index}", key)


def _plausible_endpoint(value: str) -> bool:
    host = value.rsplit("@", 1)[-1]
    host = host.split(":")[0] if not host.startswith("[") else host
    if host in ("0.0.0.0", "[::]"):
        # "Listen on every interface" names no host.
        return False
    parts = host.split(".")
    if len(parts) == 4 and all(p.isdigit() for p in parts):
        return all(int(p) <= 255 for p in parts)
    return True


def _non_global_address(value: str) -> bool:
    """Whether ``value`` (``addr``, ``addr%zone`` or ``[addr]:port``) is an IP address that
    names a host off the public internet."""
    if value.startswith("["):
        value = value[1 : value.find("]")]
    try:
        address = ipaddress.ip_address(value.split("%", 1)[0])
    except ValueError:
        return False
    # ::ffff:10.0.0.1 is 10.0.0.1; not every Python judges the mapped form by its IPv4 half.
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    # "::" (as in "::=" or a listen address) names no host, like 0.0.0.0.
    return not (address.is_global or address.is_unspecified)
