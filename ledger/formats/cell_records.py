"""A cell run's request records, wherever the cell keeps them.

A ``cell-run/v1`` document holds its records in ``requests``. A ``cell-run/v2`` document
is the cell's header; its records are JSON lines in parts beside it
(``<cell>.part-0001.jsonl``, ...), listed with their digests in ``parts``, each under
:data:`PART_MAX_BYTES`, so that a cell of millions of requests is never one document
in memory. A v2 record keeps its chunk times compactly (:func:`encode_chunks`): a
512-token reply costs about 700 bytes, where v1's list of nanoseconds cost 12 KB.

:func:`records` reads either version the same way, one record at a time.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ledger.errors import InvalidArtifact
from ledger.formats.regular import open_regular

__all__ = [
    "CELL_RUN_V1",
    "CELL_RUN_V2",
    "DEFAULTS",
    "DIGITS",
    "PART_MAX_BYTES",
    "PART_NAME",
    "channel_count",
    "checked",
    "completed",
    "decode_channels",
    "decode_chunks",
    "encode_channels",
    "encode_chunks",
    "is_part",
    "offset_us",
    "own_part",
    "parse_line",
    "part_lines",
    "part_rel",
    "read_record",
    "records",
]

CELL_RUN_V1 = "anvil-serving.cell-run/v1"
CELL_RUN_V2 = "anvil-serving.cell-run/v2"

DEFAULTS: dict[str, Any] = {
    "error": None,
    "resent": None,
    "server_timings": None,
    "tool_calls": [],
    "reasoning_chars": 0,
    "done_marker": True,
    "usage_mismatch": False,
}
"""The fields a v2 record leaves out at these values (most requests' own): 125 bytes of
about 760 a record."""

PART_MAX_BYTES = 8 << 20
"""A part is closed (and sealed in its header) once it holds this many bytes: an eighth
of verify's JSON cap, and what a reader holds of it at once."""

PART_NAME = re.compile(r"\.part-([0-9]{4,})\.jsonl$")
"""How a part's name ends: its number, from 1."""


def part_rel(cell_rel: str, number: int) -> str:
    """The path of a cell's ``number``-th part, from its header's path."""
    return f"{cell_rel.removesuffix('.json')}.part-{number:04d}.jsonl"


def own_part(cell_rel: str, number: int, rel: str) -> bool:
    """Whether ``rel`` is the ``number``-th part of the cell run at ``cell_rel`` (a cell
    run listing another's part would have its records counted twice)."""
    return rel == part_rel(cell_rel, number)


def is_part(rel: str) -> bool:
    """Whether a path names a cell run's part."""
    return PART_NAME.search(rel) is not None


def offset_us(first_token_ns: int, at_ns: int) -> int:
    """A time's microseconds after the first token, rounded half up the same way every
    time: a chunk and ``first_content_ns`` round alike."""
    return (at_ns - first_token_ns + 500) // 1000


DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
"""The characters of ``chunks_us``: letters and digits only. Base64's ``+`` and ``/`` (or
the URL alphabet's ``-`` and ``_``) let a random string read as a path or a token to the
sanitizer, which then redacts part of it: 49 of 6,000 such strings were changed."""
_LAST = DIGITS[:31]
"""A number's last digit (base 31)."""
_MORE = DIGITS[31:]
"""Any other digit of it (base 31): more follow."""
_VALUE = {c: i for i, c in enumerate(_LAST)} | {c: i for i, c in enumerate(_MORE)}


def _append_number(out: list[str], value: int) -> None:
    """A non-negative number in as few characters as any: 0-30 in one, 31-991 in two,
    992-30,782 in three (each length starts where the shorter ones end)."""
    digits = []
    length, span = 1, 31
    while value >= span:
        value -= span
        length += 1
        span *= 31
    for _ in range(length - 1):
        digits.append(_MORE[value % 31])
        value //= 31
    digits.append(_LAST[value])
    out.extend(digits)


WINDOW = 8
"""The gaps a gap is predicted from: their mean, floored."""


def _predicted(window: list[int]) -> int:
    return sum(window) // len(window) if window else 0


def encode_chunks(first_token_ns: int | None, chunks_ns: list[int]) -> str:
    """Chunk times after the first, as ``chunks_us``: each one's microseconds after
    ``first_token_ns``; the gaps between them; how each gap differs from the mean of the
    :data:`WINDOW` before it (a steady decode differs by its jitter, whatever its rate),
    zigzag-coded, each a number of base-31 digits in :data:`DIGITS`. A difference of at
    most 15 us takes one character, 495 us two, 15 ms three.

    Raises:
        ValueError: the chunk times are not in order.
    """
    if first_token_ns is None or len(chunks_ns) < 2:
        return ""
    out: list[str] = []
    previous = 0
    window: list[int] = []
    for at in chunks_ns[1:]:
        offset = offset_us(first_token_ns, at)
        if offset < previous:
            raise ValueError("chunk times are not in order")
        gap = offset - previous
        change = gap - _predicted(window)
        previous = offset
        window.append(gap)
        if len(window) > WINDOW:
            del window[0]
        _append_number(out, change * 2 if change >= 0 else -change * 2 - 1)
    return "".join(out)


def decode_chunks(chunks_us: str) -> list[int]:
    """Each chunk's microseconds after the first token, the first chunk's 0 included.

    Raises:
        ValueError: a character is not one of :data:`DIGITS`, the last number does not
            end, or a gap is negative (no encoder of ordered times writes one).
    """
    offsets = [0]
    value = span = at = 0
    scale = 1
    window: list[int] = []
    for character in chunks_us:
        digit = _VALUE.get(character)
        if digit is None:
            raise ValueError(f"{character!r} is not a digit of chunk times")
        value += digit * scale
        if character in _MORE:
            span += 31 * scale
            scale *= 31
            if scale > 31**13:
                raise ValueError("a chunk time's number is longer than 64 bits")
            continue
        value += span
        gap = _predicted(window) + (value >> 1 if not value & 1 else -((value + 1) >> 1))
        if gap < 0:
            raise ValueError("a gap between chunks is negative")
        window.append(gap)
        if len(window) > WINDOW:
            del window[0]
        at += gap
        offsets.append(at)
        value = span = 0
        scale = 1
    if scale > 1:
        raise ValueError("the last chunk time's number is cut short")
    return offsets


def encode_channels(letters: str) -> str:
    """``rrrcc`` -> ``r3c2``."""
    out = []
    for match in re.finditer(r"(.)\1*", letters):
        out.append(f"{match.group(1)}{len(match.group(0))}")
    return "".join(out)


def decode_channels(runs: str) -> str:
    """``r3c2`` -> ``rrrcc``."""
    return "".join(letter * int(count) for letter, count in re.findall(r"([rct])([0-9]+)", runs))


def channel_count(runs: str) -> int:
    """How many chunks a run-length channel text covers."""
    return sum(int(count) for count in re.findall(r"[0-9]+", runs))


def part_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """A part's lines, numbered from 1, each without its newline; a last line that does
    not end in one (what a killed writer leaves) is yielded too, for the caller to tell.

    Raises:
        OSError: it cannot be read, or is not a regular file (a named pipe would block).
    """
    with open_regular(path) as stream:
        yield from enumerate(stream, 1)


def completed(record: dict[str, Any]) -> dict[str, Any]:
    """A v2 record with the fields it leaves out at their defaults put in, and
    ``chunk_tokens`` (its channels' count), as a v1 record holds them."""
    for key, value in DEFAULTS.items():
        if key not in record:
            record[key] = list(value) if isinstance(value, list) else value
    record["chunk_tokens"] = channel_count(record.get("channel_runs", ""))
    return record


def checked(record: dict[str, Any], where: str) -> dict[str, Any]:
    """A record held to its schema (``$defs/record`` of ``cell-run/v2``), as written.

    Raises:
        InvalidArtifact: it breaks it; the message names the first place.
    """
    from ledger.formats.schema import SchemaId, subschema_validator

    validator = subschema_validator(SchemaId("cell-run", 2), "record")
    if validator.is_valid(record):
        return record
    error = min(validator.iter_errors(record), key=str)
    pointer = "".join(f"/{p}" for p in error.instance_path)
    raise InvalidArtifact(
        f"{where} at {pointer or '/'}: {error.message} (a record of {CELL_RUN_V2})",
        code="schema-invalid",
        pointer=pointer,
    )


def parse_line(line: bytes, where: str) -> dict[str, Any]:
    """One record from its line, as written (see :func:`completed`).

    Raises:
        InvalidArtifact: the line is not one JSON object ending in a newline.
    """
    if not line.endswith(b"\n"):
        raise InvalidArtifact(f"{where}: the line does not end (a write cut short)")
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError as e:
        raise InvalidArtifact(f"{where}: not JSON: {e}") from None
    if not isinstance(record, dict):
        raise InvalidArtifact(f"{where}: not a JSON object")
    return record


def read_record(line: bytes, where: str) -> dict[str, Any]:
    """A part's line as readers take it: parsed, held to its schema, its defaults put in.

    Raises:
        InvalidArtifact: the line is no record, or one that breaks its schema.
    """
    return completed(checked(parse_line(line, where), where))


def records(folder: Path, document: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A cell run's records in the order it holds them: v1's ``requests``; v2's parts
    (``folder`` is the campaign's), line by line, each :func:`completed`.

    Raises:
        InvalidArtifact: a part is missing or unreadable, or a line is no record.
    """
    if document.get("schema") != CELL_RUN_V2:
        yield from document.get("requests", ())
        return
    for part in document["parts"]:
        rel = part["path"]
        digest = hashlib.sha256()
        try:
            for number, line in part_lines(folder / rel):
                digest.update(line)
                yield read_record(line, f"{rel}:{number}")
        except OSError as e:
            raise InvalidArtifact(f"{rel}: cannot be read: {e.strerror or e}") from None
        if digest.hexdigest() != part["sha256"]:
            raise InvalidArtifact(f"{rel}: its digest is not the one its cell run lists")
