"""The sanitizer: redacts credentials, GPU identifiers, private endpoints and host paths.

Rules live in ``ledger/_rules/sanitizer-v<N>.json`` (their version and sha256 go into
every publication; a publication is verified against the version it names, so a shipped
version never changes). JSON is walked in sorted key order with each value's key path,
keys are scanned as well as values, and the categories run in a fixed order (credential,
gpu, endpoint, path): the first match wins. From version 2 on, a text file is also read by
its structure (:mod:`ledger.sanitizer._structure`) and in its decoded escapes
(:meth:`Sanitizer.file_hits`), an object's members stand under a secret-like parent's key
and a ``{name, value}`` pair's value under its name, and key names are read in full-width
letters and other languages. Every redacted value gets a placeholder stable
within one :class:`Sanitizer` (one campaign): the same value, the same placeholder.
Placeholders are never matched again, so sanitizing twice changes nothing.
"""

from __future__ import annotations

import bisect
import hashlib
import ipaddress
import itertools
import json
import re
import socket
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import orjson

from ledger.errors import InvalidArtifact
from ledger.formats import jsonio
from ledger.sanitizer import _structure as structure
from ledger.sanitizer import _textsearch as textsearch
from ledger.sanitizer._prefilter import Found, Replaced, Window, prefilter_for
from ledger.sanitizer._regex_forms import lookahead_reach

CATEGORIES = ("credential", "gpu", "endpoint", "path")
RULES_DIR = Path(__file__).resolve().parent.parent / "_rules"
CURRENT_VERSION = "2"
RULES_FILE = RULES_DIR / f"sanitizer-v{CURRENT_VERSION}.json"
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
_TOKEN_EDGE = re.compile(r"[^\s\"'<>,;()\[\]{}=]+")
_SHORT_NUMBER = re.compile(r"[0-9]{1,12}(?:\.[0-9]{1,12})?")
_HEX = re.compile(r"[0-9a-fA-F]")
_LITERALS = frozenset({"true", "false", "null", "none"})
_LONG_NUMBER = 10**12
"""A whole number this large or larger under a secret-like key is a credential (a numeric
key or account secret): shorter ones are counts, ports and timeouts, as in text."""
_SHORTEST = 3
"""No detector matches fewer characters (``::1``); a secret key's value is checked anyway."""
_PASSES = 4
"""Redactions of one text at most: each pass finds what the one before uncovered."""
_PLACEHOLDER_START = "<redacted:"
_LONGEST_NUMBER = 18
"""Digits of a placeholder's number counted past (int() of past 4,300 digits raises); a
longer one is only skipped, if counting reaches it."""
_MEMO_LIMIT = 200_000
_MEMO_LONGEST = 1024
"""Values repeat (finish reasons, flags); whole logs do not, and would only fill memory."""


@attrs.frozen
class Detector:
    """A pattern and the literals one of which must occur for it to be worth running."""

    pattern: re.Pattern[str]
    any: tuple[str, ...] = ()
    word_start: bool = False
    """The match must not follow an ASCII word character (:func:`_ascii_word`; a leading
    ``\\b`` in the pattern would stop the regex engine from searching for its literal
    prefix)."""
    non_global: bool = False
    """The match counts only as an IP address outside the public internet: a regex cannot
    tell ``fd00::1`` from ``2001:4860::8888``, nor either from a time of day."""
    underscore_joins: bool = False
    """With ``word_start``, a ``_`` before the match does not make it part of a longer name
    (``backup_ghp_...`` is a token; rules v2 write ``"word_start": "alnum"``)."""
    reach: int | None = attrs.field(init=False)

    @reach.default
    def _reach(self) -> int | None:
        return lookahead_reach(self.pattern)

    def finditer(
        self,
        text: str,
        lower: str | None,
        windows: list[Window] | None = None,
        starts: bool = False,
    ) -> Iterator[re.Match[str]]:
        """Matches in ``text`` (``lower`` is ``text.lower()``, computed once per text; None
        when the prefilter has found one of the literals in this very text), the same
        whether ``windows`` (where the prefilter says it may match, or with ``starts``,
        where its matches may start) are given or not."""
        if self.any and lower is not None and not any(literal in lower for literal in self.any):
            return iter(())
        matches = (
            self.pattern.finditer(text)
            if windows is None
            else _starting(self.pattern, text, windows)
            if starts
            else _within(self.pattern, text, windows, self.reach)
        )
        return self._word_started(text, matches)

    def within(self, text: str, start: int, end: int) -> Iterator[re.Match[str]]:
        """Matches that lie inside ``text[start:end]`` (the value of a match that was
        not taken), under the same word-start rule."""
        return self._word_started(text, self.pattern.finditer(text, start, end))

    def _word_started(self, text: str, matches: Iterator[re.Match[str]]) -> Iterator[re.Match[str]]:
        if not self.word_start:
            return matches
        if self.underscore_joins:
            return (m for m in matches if m.start() == 0 or not _ascii_alnum(text[m.start() - 1]))
        return (m for m in matches if m.start() == 0 or not _ascii_word(text[m.start() - 1]))


def _run_start(run_of: re.Pattern[str], text: str, start: int) -> int:
    """Where the run of characters ``run_of`` (a class, repeated) matches that ends at
    ``start`` starts: read backwards a stretch at a time, not a character a call."""
    left = start
    while left > 0:
        low = max(0, left - 64)
        run = run_of.match(text[low:left][::-1])
        taken = 0 if run is None else run.end()
        left -= taken
        if taken < 64:
            return left
    return left


def _ascii_alnum(char: str) -> bool:
    return char.isascii() and char.isalnum()


def _ascii_word(char: str) -> bool:
    """An ASCII letter, digit or ``_``: a token glued to one is part of a longer name
    (``myghp_...``). Not a letter outside ASCII: a CJK log writes its words without spaces,
    and a token right after one (``令牌ghp_...``) is a token."""
    return char.isascii() and (char.isalnum() or char == "_")


def _within(
    pattern: re.Pattern[str], text: str, windows: list[Window], reach: int | None
) -> Iterator[re.Match[str]]:
    """What ``pattern.finditer(text)`` finds, searching only the windows where every match
    lies (prefilter.py). Each window is searched as if the text ended ``reach`` characters
    after it, so that a window without a match costs its own length and not the rest of
    the text; a match found so is taken only as the match of the whole text at its start,
    which ``$`` or a lookahead near that false end cannot change."""
    position = 0
    for start, end in windows:
        position = max(position, start)
        limit = len(text) if reach is None else min(len(text), end + reach)
        while position < end:
            candidate = pattern.search(text, position, limit)
            if candidate is None or candidate.start() >= end:
                break
            match = pattern.match(text, candidate.start())
            if match is None:
                position = candidate.start() + 1
                continue
            yield match
            position = match.end() if match.end() > match.start() else match.end() + 1


def _starting(
    pattern: re.Pattern[str], text: str, windows: list[Window]
) -> Iterator[re.Match[str]]:
    """What ``pattern.finditer(text)`` finds, trying only the places in ``windows``, where
    every match starts (prefilter.py): from each, left to right, as finditer does."""
    position = 0
    for start, end in windows:
        for place in range(max(position, start), end):
            if place < position:
                continue
            match = pattern.match(text, place)
            if match is not None:
                yield match
                position = match.end() if match.end() > match.start() else match.end() + 1


def _detector(spec: str | dict[str, Any]) -> Detector:
    if isinstance(spec, str):
        return Detector(re.compile(spec))
    word_start = spec.get("word_start")
    return Detector(
        re.compile(spec["pattern"]),
        tuple(spec.get("any", ())),
        bool(word_start),
        bool(spec.get("non_global")),
        word_start == "alnum",
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
    not_secret_pairs: frozenset[tuple[str, ...]] = frozenset()
    """The last two words of a key that name no secret though one is secret-like
    (``bos_token``: a tokenizer's special token)."""
    foreign_words: tuple[str, ...] = ()
    """Secret-like key names outside ASCII (``密码``, ``пароль``), found inside a key."""
    foreign_keyed: re.Pattern[str] | None = None
    """Such a name, ``=`` or ``:`` and a value, in text outside ASCII."""

    @property
    def generation(self) -> int:
        """The rules' version as a number: what the code does beyond the rule file's
        patterns (the structure walk, decoded views) starts at version 2."""
        return int(self.version) if self.version.isdigit() else 0

    @property
    def detectors(self) -> tuple[Detector, ...]:
        """Every detector, in the order :meth:`Sanitizer.detect` runs them."""
        return (*self.keyed, *(d for c in CATEGORIES for d in self.patterns[c]))


_LOADED: dict[str, Rules] = {}
"""Rules by the sha256 of their file: compiling them (the regexes and how far each looks
ahead) takes longer than sanitizing a small campaign."""


def rules_file(version: str) -> Path | None:
    """The shipped rule file of a version, or None when this ledger has none."""
    path = RULES_DIR / f"sanitizer-v{version}.json"
    return path if version.isdigit() and path.is_file() else None


def load_rules(path: Path = RULES_FILE) -> Rules:
    """Reads a rule file (the same bytes read before give the same rules)."""
    data = path.read_bytes()
    sha256 = hashlib.sha256(data).hexdigest()
    found = _LOADED.get(sha256)
    if found is None:
        found = _LOADED[sha256] = _rules(data, sha256)
    return found


def _rules(data: bytes, sha256: str) -> Rules:
    rules = json.loads(data)
    if not rules["placeholder"].startswith(_PLACEHOLDER_START):
        # Placeholders are looked for where this prefix stands (textsearch.matches).
        raise ValueError(f"a rule file's placeholder must start with {_PLACEHOLDER_START!r}")
    foreign = [w.lower() for w in rules["credential"].get("foreign_secret_words", ())]
    return Rules(
        version=str(rules["version"]),
        sha256=sha256,
        placeholder=re.compile(rules["placeholder"]),
        patterns={c: tuple(_detector(p) for p in rules[c]["patterns"]) for c in CATEGORIES},
        keyed=tuple(_detector(p) for p in rules["credential"]["keyed_patterns"]),
        secret_words=frozenset(rules["credential"]["secret_words"]),
        secret_pairs=frozenset(tuple(p) for p in rules["credential"]["secret_pairs"]),
        not_secret_pairs=frozenset(
            tuple(p) for p in rules["credential"].get("not_secret_pairs", ())
        ),
        naming_words=frozenset(rules["credential"]["naming_words"]),
        gpu_keys=frozenset(rules["gpu"]["uuid_keys"]),
        bare_uuid=re.compile(rules["gpu"]["bare_uuid"]),
        allowlist=tuple(re.compile(p) for p in rules["allowlist"]),
        foreign_words=tuple(foreign),
        foreign_keyed=_foreign_keyed(foreign) if foreign else None,
    )


_Entry = tuple[int, Detector, bool, str | int]
_TABLES: dict[str, tuple[tuple[str, int, tuple[_Entry, ...]], ...]] = {}


def _table(rules: Rules) -> tuple[tuple[str, int, tuple[_Entry, ...]], ...]:
    """Per category, in order: the index of its first detector (the prefilter's
    numbering), and each detector with its index, whether it is keyed, and the group that
    holds its value."""
    found = _TABLES.get(rules.sha256)
    if found is None:
        out = []
        index = 0
        for category in CATEGORIES:
            keyed = rules.keyed if category == "credential" else ()
            entries = []
            for position, detector in enumerate((*keyed, *rules.patterns[category])):
                group = "secret" if "secret" in detector.pattern.groupindex else 0
                entries.append((index + position, detector, position < len(keyed), group))
            out.append((category, index, tuple(entries)))
            index += len(entries)
        found = _TABLES[rules.sha256] = tuple(out)
    return found


def _foreign_keyed(words: list[str]) -> re.Pattern[str]:
    # Outside the prefilter (which scans text as ASCII stand-ins): run only on text that
    # is not ASCII, with full-width signs already folded to ASCII ones.
    names = "|".join(map(re.escape, sorted(words, key=len, reverse=True)))
    return re.compile(
        rf"(?i)(?:{names})[^\s=:]{{0,16}}?[ \t]*[:=][ \t]*[\"'「『]?"
        rf"(?P<secret>[^\s\"',;<>{{}}\[\]()「」『』]{{1,}})"
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


class KeyCollision(ValueError):
    """Two keys of one object are the same once redacted: publishing either would lose
    the other's value."""

    def __init__(self, pointer: str, message: str) -> None:
        super().__init__(message)
        self.pointer = pointer
        """Where, with keys as they are published."""


class _Hits:
    """The hits of one text, none overlapping another or a placeholder."""

    def __init__(self, free: Callable[[int, int], bool]) -> None:
        self._free = free
        self._taken = Taken()
        self._hits: dict[int, Hit] = {}

    def add(self, category: str, start: int, end: int) -> None:
        if start >= end or not self._free(start, end):
            return
        taken, hits = self._taken, self._hits
        # A credential over others (credentials: their category is detected first)
        # is one redaction of them all: the keyed value of `password=x-----BEGIN
        # PRIVATE KEY-----` takes the key's first dashes, and kept apart, the key's
        # body would be left for want of its start. Any other match over a span is
        # dropped (user@host keeps its user, as rules v1 always did).
        spans = taken.overlapping(start, end)
        if spans and category != "credential":
            return
        if spans:
            for low, high in spans:
                taken.remove(low, high)
                del hits[low]
            start = min(start, *(low for low, _ in spans))
            end = max(end, *(high for _, high in spans))
        taken.add(start, end)
        hits[start] = Hit(category, start, end)

    def in_order(self) -> tuple[Hit, ...]:
        return tuple(self._hits[start] for start in sorted(self._hits))


class Sanitizer:
    """Detects and redacts; one instance per campaign keeps placeholders stable."""

    def __init__(self, rules: Rules | None = None, *, prefilter: bool = True) -> None:
        """``prefilter``: find where detectors may match with Hyperscan first (the hits
        are the same without it, only slower)."""
        self.rules = rules or load_rules()
        self._placeholders: dict[tuple[str, str], str] = {}
        self._counts: dict[str, int] = {}
        self._reserved: set[str] = set()
        """Placeholders met in the texts (a number too long to count past is skipped)."""
        self._memo: dict[tuple[str, str | None], tuple[Hit, ...]] = {}
        self._last_long: tuple[str, str | None, tuple[Hit, ...]] | None = None
        self._keys: dict[str, bool] = {}
        self._secret_keys: dict[str, bool] = {}
        self._flags: dict[str, bool] = {}
        self._prefilter = prefilter_for(self.rules) if prefilter else None
        self._v2 = self.rules.generation >= 2
        self._last_file: tuple[str, str, tuple[Hit, ...]] | None = None
        self._naming: dict[str, bool] = {}
        self._structure = structure.KeyNames(self._secret_cached, self._naming_cached)
        self._last_found: Found | None = None
        """What the prefilter found in the last long text it scanned whole."""

    # -- detection ----------------------------------------------------------------------

    def _key_words(self, key: str) -> list[str]:
        # A key redacted to a placeholder names nothing: "<redacted:credential:1>" must not
        # make the value under it a credential (sanitizing twice would change it).
        key = self.rules.placeholder.sub(" ", key)
        if self._v2 and not key.isascii():
            # Full-width letters are the ASCII ones (API_KEY written full width is API_KEY).
            key = unicodedata.normalize("NFKC", key)
        return key_words(key)

    def secret_key(self, key: str) -> bool:
        """Whether a key names a credential (its string value is one, whatever it is)."""
        words = self._key_words(key)
        if self._v2 and not key.isascii() and self._foreign_key(key, words):
            return True
        if self._v2 and len(words) >= 2:
            last = (words[-2], words[-1])
            # A tokenizer's special token (bos_token) names no secret; a plural pair
            # (auth_tokens) names secrets though its last word names counts elsewhere.
            if last in self.rules.not_secret_pairs:
                return False
            if last in self.rules.secret_pairs:
                return True
        if not words or words[-1] in self.rules.naming_words:
            return False
        joined = "".join(words)
        if joined in self.rules.secret_words:
            return True
        if any(w in self.rules.secret_words for w in words):
            return True
        return any(pair in self.rules.secret_pairs for pair in itertools.pairwise(words))

    def _foreign_key(self, key: str, words: list[str]) -> bool:
        lowered = unicodedata.normalize("NFKC", key).lower()
        found = any(word in lowered for word in self.rules.foreign_words)
        return found and not (words and words[-1] in self.rules.naming_words)

    def naming_key(self, key: str) -> bool:
        """Whether a key names a thing (``token_file``, ``auth_type``): its value is not a
        credential, even under a secret-like key."""
        words = self._key_words(key)
        return bool(words) and words[-1] in self.rules.naming_words

    def _gpu_key(self, key: str) -> bool:
        words = self._key_words(key)
        return bool(words) and (
            "_".join(words) in self.rules.gpu_keys or any(w in self.rules.gpu_keys for w in words)
        )

    def _names_a_thing(self, text: str, start: int) -> bool:
        """Whether the name a keyed match starts in ends in a naming word (``_env``,
        ``_mode``, ``_tokens``; not ``id``): the whole name, from where it starts."""
        found = _KEY_NAME.match(text, _run_start(_NAME_RUN, text, start))
        if found is None:
            return False
        words = self._key_words(found.group(1))
        # An id is the secret these patterns name (accessId, ClientID), not a name of one.
        return bool(words) and words[-1] in self.rules.naming_words - {"id", "ids"}

    def _allowed(self, text: str, start: int, end: int) -> bool:
        # The whole token around a hit: a public identifier is never redacted.
        after = _TOKEN_EDGE.match(text, end)
        token = text[_run_start(_TOKEN_EDGE, text, start) : end if after is None else after.end()]
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
            # A log is detected once more after its last redaction, then rescanned: the
            # rescan asks what that last detection answered, about the same text.
            last = self._last_long
            if last is not None and last[1] == key and last[0] == text:
                return list(last[2])
            hits = self._prefiltered(text, key)
            self._last_long = (text, key, hits)
            return list(hits)
        memo = (text, key)
        found = self._memo.get(memo)
        if found is None:
            found = self._prefiltered(text, key)
            if len(self._memo) < _MEMO_LIMIT:
                self._memo[memo] = found
        return list(found)

    def _prefiltered(self, text: str, key: str | None) -> tuple[Hit, ...]:
        self.reserve(text)  # finds nothing, at memory speed, where no placeholder is
        if self._prefilter is None:
            return self._detect(text, key)
        windows, found = self._prefilter.look(text)
        if len(text) > _MEMO_LONGEST:
            self._last_found = found
        # The windows are this text's own: a detector among them has a literal here.
        return self._detect(text, key, windows, literals_found=windows is not None)

    def _detect_again(
        self, before: str, text: str, replaced: list[Replaced], key: str | None
    ) -> list[Hit]:
        """:meth:`detect` of what a redaction of ``before`` left, a long text rescanned
        by the prefilter only where the redaction changed it."""
        found = self._last_found
        rescanned = None
        # Only a rescan of the text the last whole scan was of (the same object compares
        # at once).
        long = len(text) > _MEMO_LONGEST
        if self._prefilter is not None and long and found is not None and found.text == before:
            rescanned = self._prefilter.rescan(found, text, replaced)
        if rescanned is None:
            return self.detect(text, key)
        windows, self._last_found = rescanned
        hits = self._detect(text, key, windows, literals_found=True)
        self._last_long = (text, key, hits)
        return list(hits)

    def _keyed(self, key: str | None) -> bool:
        """Whether the key alone can make a value redactable (a secret's or a GPU's)."""
        if key is None:
            return False
        found = self._keys.get(key)
        if found is None:
            found = self._keys[key] = self.secret_key(key) or self._gpu_key(key)
        return found

    def _long_secret(self, value: int, key: str | None) -> bool:
        """Whether a whole number is one a secret-like key makes a credential."""
        if key is None or -_LONG_NUMBER < value < _LONG_NUMBER:
            return False
        found = self._secret_keys.get(key)
        if found is None:
            found = self._secret_keys[key] = self.secret_key(key)
        return found

    def _numbers(self) -> _Keys:
        members = self._members if self._v2 else None
        return _Keys(self._secret_keys, self._long_secret, self._item_keys, members)

    def _naming_cached(self, key: str) -> bool:
        found = self._naming.get(key)
        if found is None:
            found = self._naming[key] = self.naming_key(key)
        return found

    def _secret_cached(self, key: str) -> bool:
        found = self._secret_keys.get(key)
        if found is None:
            found = self._secret_keys[key] = self.secret_key(key)
        return found

    def _members(self, value: dict[str, Any], key: str | None) -> dict[str, str] | None:
        """The key each member of an object stands under where it is not its own (rules
        v2): under a secret-like key, every member whose key names nothing of its own
        stands under that key (``{"token": {"value": ...}}``); in a ``{name, value}``
        pair whose name is secret-like, the value stands under the name."""
        inherit = key is not None and self._secret_cached(key) and not structure.reference(value)
        name = None
        if not structure.VALUE_KEYS.isdisjoint(value):
            for candidate in structure.NAME_KEYS:
                found = value.get(candidate)
                if type(found) is str and self._secret_cached(found):
                    name = found
                    break
        if not inherit and name is None:
            return None
        out: dict[str, str] = {}
        for k in value:
            if name is not None and k in structure.VALUE_KEYS:
                out[k] = name
            elif (
                inherit
                and key is not None
                and not self._secret_cached(k)
                and not self._naming_cached(k)
            ):
                out[k] = key
        return out or None

    def _item_keys(self, items: list[Any], key: str | None) -> list[str | None]:
        """The key each item of a list stands under: the list's, except a value right
        after a flag that names a credential, which stands under the flag (an argv as
        ``docker inspect`` records it: ``["--api-key", "..."]``)."""
        keys = [key] * len(items)
        for index, flag in enumerate(items[:-1]):
            if type(flag) is not str or not flag.startswith("-") or "=" in flag:
                continue
            value = items[index + 1]
            if type(value) is str and not value.startswith("-") and self._secret_flag(flag):
                keys[index + 1] = flag
        return keys

    def _secret_flag(self, flag: str) -> bool:
        found = self._flags.get(flag)
        if found is None:
            found = self._flags[flag] = self.secret_key(flag.lstrip("-"))
        return found

    def detect_all(self, items: list[tuple[str, str | None]]) -> list[tuple[Hit, ...]]:
        """:meth:`detect` of each (text, key), the texts scanned by the prefilter as one."""
        # Most are known (keys, finish reasons, a rescan's strings): looked up in one go.
        results: list[tuple[Hit, ...] | None] = list(map(self._memo.get, items))
        batch = [i for i, found in enumerate(results) if found is None]
        if batch:
            texts = [items[i][0] for i in batch]
            # One newline between texts: each then starts a line, as it starts a string.
            joined = "\n".join(texts)
            self.reserve(joined)  # before any of them is numbered
            windows = self._prefilter.windows(joined) if self._prefilter else None
            if windows is None:
                for i in batch:
                    results[i] = tuple(self.detect(*items[i]))
            else:
                local = _split(windows, texts)
                for position, i in enumerate(batch):
                    text, key = items[i]
                    mine = local.get(position)
                    # Outside ASCII, rules v2 fold full-width letters and read key names
                    # in other languages: what the prefilter's stand-ins do not see.
                    wanted = mine or self._keyed(key) or (self._v2 and not text.isascii())
                    found = self._detect(text, key, mine or {}) if wanted else ()
                    if len(text) <= _MEMO_LONGEST and len(self._memo) < _MEMO_LIMIT:
                        self._memo[(text, key)] = found
                    results[i] = found
        return [r if r is not None else () for r in results]

    def _detect(
        self,
        text: str,
        key: str | None,
        windows: dict[int, list[Window]] | None = None,
        literals_found: bool = False,
    ) -> tuple[Hit, ...]:
        rules = self.rules
        if self._v2 and not text.isascii():
            folded = text.translate(_FULL_WIDTH)
            if folded != text:
                # One character for one: the hits' places are the text's own. The
                # prefilter's windows were found in the text as it was.
                text, windows, literals_found = folded, None, False
        context = self._keyed(key)
        # Short strings and whole public identifiers (digests, request ids) hold nothing.
        if not context and (
            len(text) < _SHORTEST or any(p.fullmatch(text) for p in rules.allowlist)
        ):
            return ()
        if rules.placeholder.fullmatch(text):
            return ()
        placeholders = Taken(
            m.span() for m in textsearch.matches(rules.placeholder, text, _PLACEHOLDER_START)
        )
        free = placeholders.free
        hits = _Hits(free)
        add = hits.add

        plain = _SHORT_NUMBER.fullmatch(text) or (len(text) <= 5 and text.lower() in _LITERALS)
        if key is not None and not plain and text.strip() and self._secret_cached(key):
            if not placeholders:
                add("credential", 0, len(text))
            elif self._v2:
                # A placeholder and more: what the placeholder left is a secret too.
                for low, high in structure.value_pieces(text, 0, len(text)):
                    add("credential", low, high)
        lower = None if literals_found else text.lower()
        starting = self._prefilter.starting if self._prefilter is not None else frozenset()
        # Only the detectors the prefilter found a place for are looked at (a value under
        # a secret-like key often has none).
        chosen = None if windows is None else sorted(windows)
        for category, first, entries in _table(rules):
            if chosen is not None:
                low = bisect.bisect_left(chosen, first)
                high = bisect.bisect_left(chosen, first + len(entries))
                entries = tuple(entries[i - first] for i in chosen[low:high])
            for index, detector, is_keyed, group in entries:
                where = None if windows is None else windows[index]
                found = [detector.finditer(text, lower, where, index in starting)]
                while found:
                    match = next(found[-1], None)
                    if match is None:
                        found.pop()
                        continue
                    start, end = match.span(group)
                    if start < 0 or not free(start, end):
                        continue  # a placeholder is redacted already
                    value = text[start:end]
                    if category == "credential" and (
                        _SHORT_NUMBER.fullmatch(value)
                        or value.lower().rstrip(".") in _LITERALS
                        or rules.placeholder.search(value)
                        or (self._v2 and structure.REFERENCE.fullmatch(value))
                    ):
                        continue
                    if category == "gpu" and self._masked_uuid(value):
                        continue
                    if category == "endpoint" and not _plausible_endpoint(value):
                        continue
                    if detector.non_global and not _non_global_address(value):
                        continue
                    # A secret-like name before it makes even a digest-shaped value secret.
                    if not is_keyed and self._allowed(text, start, end):
                        continue
                    # ... but not the name of such a thing (api_key_env, auth_mode), as
                    # under a JSON key: a report's "key: value" lines read as JSON does.
                    if is_keyed and (
                        value.startswith("--") or self._names_a_thing(text, match.start())
                    ):
                        # The next flag of an argv, or the name of a thing; what it took
                        # as its value may hold a keyed value of its own (`auth_mode=basic
                        # password=x`: a scheme word and a space are part of a value).
                        found.append(detector.within(text, start, end))
                        continue
                    add(category, start, end)
            if category in ("credential", "gpu"):
                self._unlisted(category, text, key, context, add)
        return hits.in_order()

    def _unlisted(
        self,
        category: str,
        text: str,
        key: str | None,
        context: bool,
        add: Callable[[str, int, int], None],
    ) -> None:
        """What no detector's table holds: a keyed value in a foreign script, and under a
        GPU key, a bare UUID."""
        rules = self.rules
        if category == "credential" and rules.foreign_keyed is not None and not text.isascii():
            for match in rules.foreign_keyed.finditer(text):
                start, end = match.span("secret")
                value = text[start:end]
                if not (
                    _SHORT_NUMBER.fullmatch(value)
                    or value.lower() in _LITERALS
                    or rules.placeholder.search(value)
                ):
                    add("credential", start, end)
        if category == "gpu" and context and key is not None and self._gpu_key(key):
            for match in rules.bare_uuid.finditer(text):
                if not self._masked_uuid(match.group(0)):
                    add("gpu", *match.span())

    # -- redaction ----------------------------------------------------------------------

    @property
    def redactions(self) -> int:
        """Distinct values redacted so far."""
        return len(self._placeholders)

    def reserve(self, text: str) -> None:
        """Numbers new placeholders past those ``text`` holds already (a value sanitized
        before): two values under one placeholder would read as one value. A text is
        reserved when it is detected; whoever numbers values across texts (publish, a
        campaign's files) reserves every text first."""
        counts = self._counts
        for match in textsearch.matches(self.rules.placeholder, text, _PLACEHOLDER_START):
            self._reserved.add(match.group(0))
            category, _, number = match.group(0)[len(_PLACEHOLDER_START) : -1].rpartition(":")
            if len(number) <= _LONGEST_NUMBER:
                counts[category] = max(counts.get(category, 0), int(number))

    def reserve_document(self, value: Any) -> None:
        """:meth:`reserve` of every string of a JSON value, keys too."""
        strings: set[tuple[str, str | None]] = set()
        keys: set[str] = set()
        _distinct_strings(value, None, strings, keys, self._numbers())
        self.reserve("\n".join([*keys, *(text for text, _ in strings)]))

    def reserve_decoded(self, text: str) -> None:
        """:meth:`reserve` of what a text file's JSON escapes and URL encoding spell
        (rules v2 detect there: a placeholder written so is one)."""
        if not self._v2:
            return
        if "\\u" in text:
            self.reserve(_unescaped(text))
        if "%3c" in text or "%3C" in text:
            self.reserve(_URL_ESCAPE.sub(_unpercent, text))

    def reserve_lines(self, text: str) -> None:
        """:meth:`reserve` of a file of JSON lines: its text, and the JSON each line
        decodes to."""
        self.reserve(text)
        for line in text.split("\n") if "\\u" in text else ():
            # Only an escape can spell a placeholder the text does not show.
            if "\\u" not in line:
                continue
            value = _json_line(line)
            if value is not _NOT_JSON:
                self.reserve_document(value)
            else:
                self.reserve(_unescaped(line))

    def placeholder(self, category: str, value: str) -> str:
        """The stable placeholder of a value."""
        found = self._placeholders.get((category, value))
        if found is None:
            number = self._counts.get(category, 0) + 1
            found = f"{_PLACEHOLDER_START}{category}:{number}>"
            while found in self._reserved:  # past one too long to count from
                number += 1
                found = f"{_PLACEHOLDER_START}{category}:{number}>"
            self._counts[category] = number
            self._placeholders[(category, value)] = found
        return found

    def masked(self, text: str, key: str | None = None) -> str:
        """``text`` with each hit replaced by ``<redacted:category>``, unnumbered: for a
        message that names where private data is (a key, a file name) without showing
        it, and without counting it among the values a publication redacted."""
        out: list[str] = []
        last = 0
        for hit in self.detect(text, key):
            out += (text[last : hit.start], f"<redacted:{hit.category}>")
            last = hit.end
        return "".join(out) + text[last:]

    def text(self, text: str, key: str | None = None) -> str:
        """``text`` with every hit replaced by its placeholder."""
        return self._clean(text, self.detect(text, key), key)

    def file_hits(self, text: str, name: str) -> list[Hit]:
        """Every redactable span of a text file named ``name``, in order and apart: what
        the detectors find, and from rules v2 on, the values its structure makes
        credentials (:mod:`ledger.sanitizer._structure`) and what its JSON escapes and URL
        encoding spell once decoded (the encoded characters are the span)."""
        if not self._v2:
            return self.detect(text)
        last = self._last_file
        if last is not None and last[0] == name and last[1] == text:
            return list(last[2])  # publish's rescan of what file_text left
        spans = structure.secret_spans(text, name, self._structure)
        return self._with_spans(text, name, spans)

    def _with_spans(
        self,
        text: str,
        name: str,
        spans: list[tuple[int, int]],
        lines: list[tuple[int, int]] | None = None,
    ) -> list[Hit]:
        """The detectors' hits of a text file, the structure's ``spans`` (credentials) and
        what its decoded escapes hold (in ``lines``, runs of whole lines, where given:
        the others are as they were), joined; kept for a rescan of the same text."""
        hits = self.detect(text)
        extra = [Hit("credential", start, end) for start, end in spans]
        runs = [(0, len(text))] if lines is None else lines
        if "\\" in text:
            extra += self._decoded_hits(text, _JSON_ESCAPE, _unescape, runs)
        if "%" in text:
            extra += self._decoded_hits(text, _URL_ESCAPE, _unpercent, runs)
        found = _joined(hits, extra) if extra else hits
        self._last_file = (name, text, tuple(found))
        return found

    def file_text(self, text: str, name: str) -> str:
        """A text file named ``name`` with every hit of :meth:`file_hits` replaced by its
        placeholder, until none is left (or the fail-closed rescan refuses what is)."""
        if not self._v2:
            return self.text(text)
        hits = self.file_hits(text, name)
        # A text read by no whole-file format changes only where hits became
        # placeholders, and what its lines hold is read line by line: its lines are read
        # again only there (what a line form found is one placeholder now, whatever
        # section it stood in).
        for _ in range(_PASSES):
            if not hits:
                break
            text = self._clean(text, hits, None)
            if not structure.whole_readings(text, name):
                hits = self._changed_lines_hits(text, name)
            else:
                hits = self.file_hits(text, name)
        return text

    def _changed_lines_hits(self, text: str, name: str) -> list[Hit]:
        """:meth:`file_hits` of a text read by no whole-file format, after a redaction:
        its line forms, JSON objects and escapes read again on the lines that hold a
        placeholder (with the line before each, which a ``value:`` line belongs with);
        every other line is as it was when they were read, and held nothing (what was
        found is a placeholder now)."""
        windows: list[tuple[int, int]] = []
        position = textsearch.find(text, _PLACEHOLDER_START)
        while position >= 0:
            line = text.rfind("\n", 0, position)  # the break before its line, or -1
            start = text.rfind("\n", 0, line) + 1 if line > 0 else 0
            end = text.find("\n", position)
            end = len(text) if end < 0 else end
            if windows and start <= windows[-1][1]:
                windows[-1] = (windows[-1][0], end)
            else:
                windows.append((start, end))
            position = textsearch.find(text, _PLACEHOLDER_START, end)
        spans = structure.line_spans(text, windows, self._structure)
        return self._with_spans(text, name, spans, windows)

    def _decoded_hits(
        self,
        text: str,
        escape: re.Pattern[str],
        decode: Callable[[re.Match[str]], str],
        lines: list[tuple[int, int]],
    ) -> list[Hit]:
        """Hits in each line (of the runs of whole ``lines``) that holds an escape,
        detected in the line decoded and placed back on the characters that encode
        them."""
        out: list[Hit] = []
        for low, high in lines:
            out += self._decoded_run(text, escape, decode, low, high)
        return out

    def _decoded_run(
        self,
        text: str,
        escape: re.Pattern[str],
        decode: Callable[[re.Match[str]], str],
        position: int,
        limit: int,
    ) -> list[Hit]:
        out: list[Hit] = []
        while True:
            found = escape.search(text, position, limit)
            if found is None:
                return out
            start = text.rfind("\n", 0, found.start()) + 1
            end = text.find("\n", found.end())
            end = len(text) if end < 0 else end
            decoded, origins = _decoded(text, start, end, escape, decode)
            if escape is _URL_ESCAPE and _URL_ESCAPE.search(decoded):
                # Encoded twice (%252F): decoded again, each place traced back.
                again, through = _decoded(decoded, 0, len(decoded), escape, decode)
                decoded, origins = again, [origins[i] for i in through]
            hits = list(self.detect(decoded))
            hits += [
                Hit("credential", low, high)
                for low, high in structure.json_spans(decoded, self._structure)
            ]
            for hit in hits:
                out.append(Hit(hit.category, origins[hit.start], origins[hit.end]))
            position = end + 1

    def _clean(self, text: str, hits: Sequence[Hit], key: str | None) -> str:
        # A match dropped for overlapping another's span (an endpoint over a credential;
        # credentials join, see _detect) may be found once the other is a placeholder:
        # redacted until none is left, or the fail-closed rescan refuses what is.
        for _ in range(_PASSES):
            if not hits:
                break
            redacted, replaced = self._redact(text, hits)
            hits = self._detect_again(text, redacted, replaced, key)
            text = redacted
        return text

    def _redact(self, text: str, hits: Sequence[Hit]) -> tuple[str, list[Replaced]]:
        """``text`` with each hit replaced by its placeholder, and where each was and is."""
        out: list[str] = []
        replaced: list[Replaced] = []
        last = 0
        length = 0
        for hit in hits:
            before = text[last : hit.start]
            placeholder = self.placeholder(hit.category, text[hit.start : hit.end])
            length += len(before)
            replaced.append((hit.start, hit.end, length, length + len(placeholder)))
            length += len(placeholder)
            out += (before, placeholder)
            last = hit.end
        out.append(text[last:])
        return "".join(out), replaced

    def document(self, value: Any, key: str | None = None) -> Any:
        """The JSON value sanitized, keys too (``value`` itself when nothing is redacted).
        Every string is detected first, all of them scanned by the prefilter as one."""
        items: list[tuple[str, str | None]] = []
        spans: dict[int, tuple[int, int]] = {}
        _strings(value, key, items, self._numbers(), spans)
        found = self.detect_all(items)
        if not any(found):
            return value
        return self._rebuild(value, key, _Cursor(found, spans))

    def _rebuild(self, value: Any, key: str | None, cursor: _Cursor, pointer: str = "") -> Any:
        # The order of _strings: a key before its value, placeholders numbered as they come.
        if isinstance(value, str):
            return self._clean(value, cursor.next(), key)
        if isinstance(value, dict):
            if cursor.skips(value):
                return value  # nothing redacted in it: itself, not a copy
            out: dict[str, Any] = {}
            members = self._members(value, key) if self._v2 else None
            for k in sorted(value):
                cleaned = self._clean(k, cursor.next(), None)
                # The pointer names keys as published: a raw one may be the secret.
                where = f"{pointer}/{cleaned.replace('~', '~0').replace('/', '~1')}"
                if cleaned in out:
                    # One value would silently replace the other.
                    raise KeyCollision(where, "two keys are the same once redacted")
                mine = k if members is None else members.get(k, k)
                out[cleaned] = self._rebuild(value[k], mine, cursor, where)
            return out
        if isinstance(value, list) and _walks(value, key, self._long_secret):
            if cursor.skips(value):
                return value
            return [
                self._rebuild(item, under, cursor, f"{pointer}/{index}")
                for index, (item, under) in enumerate(
                    zip(value, self._item_keys(value, key), strict=True)
                )
            ]
        if (
            type(value) is int
            and (value >= _LONG_NUMBER or value <= -_LONG_NUMBER)
            and self._long_secret(value, key)
        ):
            hits = cursor.next()
            # Published as its placeholder, a string: the number itself is the secret.
            return self._clean(str(value), hits, key) if hits else value
        return value

    def lines(self, text: str, name: str = "") -> str:
        """A file of JSON lines (named ``name``) sanitized: each line that holds JSON as a
        document first (what a JSON reader decodes, escapes included: ``api\\u005fkey``
        is ``api_key``), written again only where something was redacted, then the whole
        as a text file (:meth:`file_text`)."""
        self.reserve_lines(text)  # before any line is numbered
        out = []
        for line in text.split("\n"):
            value = _json_line(line)
            if value is not _NOT_JSON:
                cleaned = self.document(value)
                if cleaned is not value:
                    line = orjson.dumps(cleaned).decode()
            out.append(line)
        return self.file_text("\n".join(out), name)

    def scan_lines(self, text: str) -> Iterator[tuple[int, str, str]]:
        """(line number, JSON pointer, category) of every hit left in the JSON a file of
        JSON lines holds, as decoded (its text is scanned as any text is)."""
        for number, line in enumerate(text.split("\n"), 1):
            value = _json_line(line)
            if value is not _NOT_JSON:
                for pointer, category in self.scan(value):
                    yield number, pointer, category
            elif "\\" in line:
                # Not strict JSON (a NaN, a duplicate key), so not rewritten as JSON; a
                # JSON reader still decodes its escapes: "\u0070assword=..." is a secret.
                found = self.detect(_unescaped(line))
                for category in dict.fromkeys(hit.category for hit in found):
                    yield number, "", f"{category} written with JSON escapes"

    def scan(
        self, value: Any, pointer: str = "", key: str | None = None
    ) -> Iterator[tuple[str, str]]:
        """(JSON pointer, category) of every remaining hit: the fail-closed check."""
        # Whether anything is found needs each (text, key) once, in no order: a set, and
        # keys gathered a whole object at a time (the walk in order, twice as slow, is
        # for documents that hold something, to say where).
        strings: set[tuple[str, str | None]] = set()
        keys: set[str] = set()
        _distinct_strings(value, key, strings, keys, self._numbers())
        strings.update((k, None) for k in keys)
        if not any(self.detect_all(list(strings))):
            return iter(())
        return self._scan(value, pointer, key)

    def _scan(self, value: Any, pointer: str, key: str | None) -> Iterator[tuple[str, str]]:
        if isinstance(value, str):
            for hit in self.detect(value, key):
                yield pointer, hit.category
        elif type(value) is int and self._long_secret(value, key):
            for hit in self.detect(str(value), key):
                yield pointer, hit.category
        elif isinstance(value, dict):
            members = self._members(value, key) if self._v2 else None
            for k in sorted(value):
                hits = self.detect(k)
                # A key that holds private data is named masked: the pointer is printed.
                shown = self.masked(k) if hits else k
                escaped = shown.replace("~", "~0").replace("/", "~1")
                for hit in hits:
                    yield f"{pointer}/{escaped}", f"{hit.category} (in a key)"
                mine = k if members is None else members.get(k, k)
                yield from self._scan(value[k], f"{pointer}/{escaped}", mine)
        elif isinstance(value, list):
            for index, (item, under) in enumerate(
                zip(value, self._item_keys(value, key), strict=True)
            ):
                yield from self._scan(item, f"{pointer}/{index}", under)


class Taken:
    """The spans of a text already taken (placeholders, then hits), which never overlap:
    kept sorted, so whether a span is free is one look at the last that starts before
    its end (against every span, a log with a hit on each of 40,000 lines took 84 s)."""

    def __init__(self, spans: Iterable[tuple[int, int]] = ()) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []
        for start, end in spans:
            self.add(start, end)

    def __bool__(self) -> bool:
        return bool(self._starts)

    def free(self, start: int, end: int) -> bool:
        """Whether [start, end) overlaps no taken span."""
        before = bisect.bisect_left(self._starts, end)
        return before == 0 or self._ends[before - 1] <= start

    def add(self, start: int, end: int) -> None:
        """Takes [start, end), which must be free."""
        at = bisect.bisect_left(self._starts, start)
        self._starts.insert(at, start)
        self._ends.insert(at, end)

    def overlapping(self, start: int, end: int) -> list[tuple[int, int]]:
        """The taken spans that overlap [start, end), in order (sorted and apart, their
        ends are sorted too)."""
        first = bisect.bisect_right(self._ends, start)
        last = bisect.bisect_left(self._starts, end)
        return list(zip(self._starts[first:last], self._ends[first:last], strict=True))

    def remove(self, start: int, end: int) -> None:
        """Gives back [start, end), which must be taken."""
        at = bisect.bisect_left(self._starts, start)
        del self._starts[at], self._ends[at]


_NAME_RUN = re.compile(r"[A-Za-z0-9_.-]+")
_KEY_NAME = re.compile(r"[\"']?([A-Za-z0-9_.-]+)")

JSON_LINES = (".jsonl", ".ndjson")
"""Names of files of JSON lines: sanitized and scanned line by line as JSON, then as text."""

_NOT_JSON = object()
_JSON_ESCAPE = re.compile(r'\\(?:u([0-9a-fA-F]{4})|(["\\/bfnrt]))')
_ESCAPED = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


_URL_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
_FULL_WIDTH = {code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)} | {0x3000: 0x20}
"""Full-width forms of ASCII (and the ideographic space), one character for one."""


def _unpercent(match: re.Match[str]) -> str:
    code = int(match.group()[1:], 16)
    # A byte of a character outside ASCII stays encoded: what detectors read is ASCII.
    return chr(code) if code < 0x80 else match.group()


def _decoded(
    text: str,
    start: int,
    end: int,
    escape: re.Pattern[str],
    decode: Callable[[re.Match[str]], str],
) -> tuple[str, list[int]]:
    """``text[start:end]`` with its escapes decoded, and where in ``text`` each decoded
    character starts (one more entry: ``end``)."""
    pieces: list[str] = []
    origins: list[int] = []
    last = start
    for match in escape.finditer(text, start, end):
        pieces.append(text[last : match.start()])
        origins.extend(range(last, match.start()))
        value = decode(match)
        pieces.append(value)
        origins.extend([match.start()] * len(value))
        last = match.end()
    pieces.append(text[last:end])
    origins.extend(range(last, end))
    origins.append(end)
    return "".join(pieces), origins


def _joined(hits: Sequence[Hit], extra: Sequence[Hit]) -> list[Hit]:
    """Two lists of hits as one, in order and apart: where they overlap, a credential
    takes the union (as :meth:`Sanitizer._detect` joins credentials), and otherwise the
    first found stays."""
    out: list[Hit] = []
    for hit in sorted([*hits, *extra], key=lambda h: (h.start, -h.end)):
        if out and hit.start < out[-1].end:
            last = out[-1]
            if "credential" in (hit.category, last.category):
                out[-1] = Hit("credential", last.start, max(last.end, hit.end))
            continue
        out.append(hit)
    return out


def _unescaped(line: str) -> str:
    """A line's JSON escapes decoded, as a JSON reader would its strings (a line that is
    not strict JSON, so not read as JSON)."""
    return _JSON_ESCAPE.sub(_unescape, line)


def _unescape(match: re.Match[str]) -> str:
    code, char = match.groups()
    return chr(int(code, 16)) if code is not None else _ESCAPED[char]


def _json_line(line: str) -> Any:
    """The JSON value a line holds (an object, a list or a string: what can hold escapes),
    or ``_NOT_JSON``."""
    if line.lstrip()[:1] not in ("{", "[", '"'):
        return _NOT_JSON
    try:
        return jsonio.parse_strict(line.encode())
    except InvalidArtifact:
        return _NOT_JSON


_SCALARS = frozenset({int, float, bool, type(None)})


def _plain(value: list[Any]) -> bool:
    """Whether a list holds no string, object or list (its exact types: a subclass of str
    is walked like any string). Number arrays are most of a raw artifact."""
    return _SCALARS.issuperset(map(type, value))


def _walks(
    value: list[Any], key: str | None, long_secret: Callable[[int, str | None], bool]
) -> bool:
    """Whether a list's items are walked: it holds a string, an object or a list, or a
    long whole number that the key it stands under makes a credential."""
    if not _plain(value):
        return True
    return (
        key is not None
        and long_secret(_LONG_NUMBER, key)
        and any(type(v) is int and (v >= _LONG_NUMBER or v <= -_LONG_NUMBER) for v in value)
    )


@attrs.frozen
class _Keys:
    """What the walk needs of the keys: which make a long whole number a credential (those
    decided so far, and how to decide another: one dictionary lookup a number, not a
    call), and the key each item of a list stands under."""

    known: dict[str, bool]
    decide: Callable[[int, str | None], bool]
    items: Callable[[list[Any], str | None], list[str | None]]
    members: Callable[[dict[str, Any], str | None], dict[str, str] | None] | None = None
    """The keys an object's members stand under where not their own (rules v2)."""


def _strings(
    value: Any,
    key: str | None,
    out: list[tuple[str, str | None]],
    numbers: _Keys,
    spans: dict[int, tuple[int, int]] | None = None,
) -> None:
    """Every string of a JSON value with the key it stands under, keys themselves too
    (under no key), and each long whole number a secret-like key makes a credential, as
    text, in the order :meth:`Sanitizer.document` rebuilds it. ``spans``: where each
    object's and list's strings are in ``out``, by its id (for one met twice, where they
    are the last time)."""
    if isinstance(value, str):
        out.append((value, key))
    elif type(value) is int:
        _number(value, key, out.append, numbers)
    elif isinstance(value, dict):
        start = len(out)
        append = out.append
        members = None if numbers.members is None else numbers.members(value, key)
        for k in sorted(value):
            append((k, None))
            # A member that is a plain string or number is most of them: no call for it.
            item = value[k]
            kind = type(item)
            mine = k if members is None else members.get(k, k)
            if kind is str:
                append((item, mine))
            elif kind is int:
                _number(item, mine, append, numbers)
            elif kind is not float and kind is not bool and item is not None:
                _strings(item, mine, out, numbers, spans)
        if spans is not None:
            spans[id(value)] = (start, len(out))
    elif isinstance(value, list) and _walks(value, key, numbers.decide):
        start = len(out)
        for item, under in zip(value, numbers.items(value, key), strict=True):
            _strings(item, under, out, numbers, spans)
        if spans is not None:
            spans[id(value)] = (start, len(out))


def _distinct_strings(
    value: Any,
    key: str | None,
    strings: set[tuple[str, str | None]],
    keys: set[str],
    numbers: _Keys,
) -> None:
    """:func:`_strings` as sets, in no order: every (string, key) and long secret number
    of a JSON value into ``strings``, the keys into ``keys``."""
    if isinstance(value, str):
        strings.add((value, key))
    elif type(value) is int:
        _number(value, key, strings.add, numbers)
    elif isinstance(value, dict):
        keys.update(value)
        add = strings.add
        members = None if numbers.members is None else numbers.members(value, key)
        for k, item in value.items():
            kind = type(item)
            mine = k if members is None else members.get(k, k)
            if kind is str:
                add((item, mine))
            elif kind is int:
                if item >= _LONG_NUMBER or item <= -_LONG_NUMBER:  # no call for most
                    _number(item, mine, add, numbers)
            elif kind is not float and kind is not bool and item is not None:
                _distinct_strings(item, mine, strings, keys, numbers)
    elif isinstance(value, list) and _walks(value, key, numbers.decide):
        for item, under in zip(value, numbers.items(value, key), strict=True):
            _distinct_strings(item, under, strings, keys, numbers)


def _number(
    value: int, key: str | None, add: Callable[[tuple[str, str | None]], None], numbers: _Keys
) -> None:
    # Most numbers are small: the key is looked at only for a long one.
    if value >= _LONG_NUMBER or value <= -_LONG_NUMBER:
        secret = numbers.known.get(key) if key is not None else False
        if secret is None:
            secret = numbers.decide(value, key)
        if secret:
            add((str(value), key))


class _Cursor:
    """Where :meth:`Sanitizer._rebuild` is in the hits of a document's strings, and which
    of its objects and lists hold none (those are kept as they are, not copied)."""

    def __init__(self, found: list[tuple[Hit, ...]], spans: dict[int, tuple[int, int]]) -> None:
        self.found = found
        self.position = 0
        self.spans = spans
        self.before = list(itertools.accumulate((bool(f) for f in found), initial=0))
        """How many strings before each position have hits."""

    def next(self) -> tuple[Hit, ...]:
        found = self.found[self.position]
        self.position += 1
        return found

    def skips(self, value: dict[str, Any] | list[Any]) -> bool:
        """Whether ``value`` has no hit in its strings (the cursor then moves past them)."""
        span = self.spans.get(id(value))
        # Its strings start here, or the span is another place the same object stands.
        if span is None or span[0] != self.position:
            return False
        start, end = span
        if self.before[end] != self.before[start]:
            return False
        self.position = end
        return True


def _split(
    windows: dict[int, list[Window]], texts: list[str]
) -> dict[int, dict[int, list[Window]]]:
    """Windows found in the texts joined by newlines, per text (by position), each in its
    own offsets; a window across texts is a window in each."""
    starts = list(itertools.accumulate((len(t) + 1 for t in texts[:-1]), initial=0))
    out: dict[int, dict[int, list[Window]]] = {}
    for index, spans in windows.items():
        for start, end in spans:
            position = bisect.bisect_right(starts, start) - 1
            while position < len(texts) and starts[position] < end:
                offset = starts[position]
                low = max(start - offset, 0)
                high = min(end - offset, len(texts[position]))
                if low < high:
                    out.setdefault(position, {}).setdefault(index, []).append((low, high))
                position += 1
    return out


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


_SHORT_ADDRESS = re.compile(r"([0-9]{1,10}(?:\.[0-9]{1,10}){1,2})(?::[0-9]{1,5})?")


def _non_global_address(value: str) -> bool:
    """Whether ``value`` (``addr``, ``addr%zone`` or ``[addr]:port``) is an IP address that
    names a host off the public internet."""
    if value.startswith("["):
        value = value[1 : value.find("]")]
    short = _SHORT_ADDRESS.fullmatch(value)
    if short is not None:
        # "10.1" is 10.0.0.1 to every resolver (inet_aton's shortened forms).
        try:
            value = socket.inet_ntoa(socket.inet_aton(short.group(1)))
        except OSError:
            return False
    try:
        address = ipaddress.ip_address(value.split("%", 1)[0])
    except ValueError:
        return False
    # ::ffff:10.0.0.1 is 10.0.0.1; not every Python judges the mapped form by its IPv4 half.
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    # "::" (as in "::=" or a listen address) names no host, like 0.0.0.0.
    return not (address.is_global or address.is_unspecified)
