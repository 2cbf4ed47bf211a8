"""The attacker's corpus: every way ``tests/test_attacker_corpus.py`` mutates a campaign.

For every file of a campaign: a bit flip, a truncation, its deletion and a byte appended;
for every folder of it, an unlisted file added; for every number of its JSON documents
(each distinct field, array positions folded together) and every line of its text files
that holds a number, an edit of that number, then the campaign re-sealed as someone
editing evidence by hand can (manifest, ``SHA256SUMS`` and the statement's subjects brought
up to date; nobody but the signer can sign again).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs

from ledger.evidence import manifest

_NUMBER = re.compile(rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_SPACE = re.compile(rb"[ \t\r\n]*")
_TEXT_NUMBER = re.compile(rb"(?<![0-9A-Za-z_.])[0-9]+(?:\.[0-9]+)?(?![0-9A-Za-z_])")
_SEAL = frozenset(
    {manifest.MANIFEST_NAME, manifest.SUMS_NAME, manifest.STATEMENT_NAME, manifest.BUNDLE_NAME}
)


@attrs.frozen
class Mutation:
    """One mutation of one campaign."""

    kind: str
    """bit-flip, truncation, deletion, byte-appended, unlisted-file or number-resealed."""
    rel: str
    """The file it changes (or adds)."""
    apply: Callable[[Path], None] = attrs.field(eq=False, repr=False)
    """Changes the campaign folder it is given."""
    where: str = ""
    """For a number: its JSON pointer (array positions as found) or line."""


def json_numbers(data: bytes) -> list[tuple[int, int, tuple[str | int, ...]]]:
    """(start, end, path) of every number token of a JSON document, in order."""
    found: list[tuple[int, int, tuple[str | int, ...]]] = []

    def skip(i: int) -> int:
        match = _SPACE.match(data, i)
        assert match is not None
        return match.end()

    def value(i: int, path: tuple[str | int, ...]) -> int:
        i = skip(i)
        head = data[i : i + 1]
        if head in (b"{", b"["):
            close = b"}" if head == b"{" else b"]"
            i, index = skip(i + 1), 0
            if data[i : i + 1] == close:
                return i + 1
            while True:
                key: str | int = index
                if head == b"{":
                    match = _STRING.match(data, skip(i))
                    assert match is not None
                    key, i = json.loads(match.group()), skip(match.end()) + 1
                i, index = skip(value(i, (*path, key))), index + 1
                if data[i : i + 1] == close:
                    return i + 1
                i += 1
        if head == b'"':
            match = _STRING.match(data, i)
            assert match is not None
            return match.end()
        for literal in (b"true", b"false", b"null"):
            if data.startswith(literal, i):
                return i + len(literal)
        match = _NUMBER.match(data, i)
        assert match is not None, (i, data[i : i + 20])
        found.append((match.start(), match.end(), path))
        return match.end()

    value(0, ())
    return found


def other_number(token: bytes) -> bytes:
    """A different number that JSON and text both still read as a number."""
    if re.fullmatch(rb"-?[0-9]+", token):
        return str(int(token) + 1).encode()
    value = float(token)
    changed = value * 2 + 1
    return repr(changed).encode() if changed != value else b"1" + token.lstrip(b"-")


def _replace(rel: str, start: int, end: int, new: bytes) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        path = folder / rel
        data = path.read_bytes()
        path.write_bytes(data[:start] + new + data[end:])

    return apply


def _resealed(change: Callable[[Path], None]) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        change(folder)
        manifest.seal(folder, check=False, jobs=1)

    return apply


def _numbers(rel: str, data: bytes) -> Iterator[Mutation]:
    sealed = rel in _SEAL
    kind = "number-edited" if sealed else "number-resealed"
    if rel.endswith(".json"):
        seen: set[tuple[str | int, ...]] = set()
        for start, end, path in json_numbers(data):
            folded = tuple("*" if isinstance(p, int) else p for p in path)
            if folded in seen:
                continue
            seen.add(folded)
            change = _replace(rel, start, end, other_number(data[start:end]))
            pointer = "/" + "/".join(map(str, path))
            # A seal file re-sealed is rewritten from the files: its edit would be undone.
            yield Mutation(kind, rel, change if sealed else _resealed(change), pointer)
        return
    offset = 0
    for number, line in enumerate(data.split(b"\n"), start=1):
        match = _TEXT_NUMBER.search(line)
        if match is not None:
            start, end = offset + match.start(), offset + match.end()
            change = _replace(rel, start, end, other_number(match.group()))
            yield Mutation(kind, rel, change if sealed else _resealed(change), f"line {number}")
        offset += len(line) + 1


def mutations(campaign: Path) -> list[Mutation]:
    """Every mutation of the campaign folder, in a stable order."""
    found: list[Mutation] = []
    files = sorted(p for p in campaign.rglob("*") if p.is_file())
    for path in files:
        rel = path.relative_to(campaign).as_posix()
        data = path.read_bytes()
        middle = len(data) // 2
        if not data:
            found.append(Mutation("deletion", rel, lambda folder, rel=rel: (folder / rel).unlink()))
            continue
        found += [
            Mutation("bit-flip", rel, _replace(rel, middle, middle + 1, bytes([data[middle] ^ 1]))),
            Mutation("truncation", rel, _replace(rel, middle, len(data), b"")),
            Mutation("deletion", rel, lambda folder, rel=rel: (folder / rel).unlink()),
            Mutation("byte-appended", rel, _replace(rel, len(data), len(data), b"\n")),
        ]
        if rel.endswith((".json", ".md", ".html", ".svg")) or rel == manifest.SUMS_NAME:
            found += _numbers(rel, data)
    folders = sorted({p.parent for p in files})
    for folder in folders:
        rel = (folder.relative_to(campaign) / "unlisted.txt").as_posix()
        found.append(
            Mutation(
                "unlisted-file",
                rel,
                lambda base, rel=rel: (base / rel).write_bytes(b"not in the manifest\n"),
            )
        )
    return found
