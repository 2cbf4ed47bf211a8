"""Strict reading and deterministic, atomic writing of JSON artifacts.

Reading untrusted evidence is layered: a size cap before any byte is parsed, a byte-order
mark and invalid UTF-8 rejected, NaN/Infinity rejected, nesting depth capped, duplicate keys
rejected. ``orjson`` does the parsing because it is about 5x faster than the standard
library; it silently keeps the last of duplicate keys, so a cheap, sound count (below)
decides whether the slower exact check has to run.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ledger.errors import InvalidArtifact
from ledger.formats.regular import open_regular

__all__ = [
    "MAX_DEPTH",
    "MAX_JSON_BYTES",
    "NON_FINITE",
    "default_file_mode",
    "dumps_deterministic",
    "dumps_parsed",
    "json_pointer",
    "parse_strict",
    "parse_with_nonfinite",
    "read_json",
    "read_limited",
    "refuse_bom",
    "sync_folder",
    "write_atomic",
    "write_json",
    "write_temp",
]

MAX_JSON_BYTES = 64 * 1024 * 1024
"""Largest JSON artifact read by default; larger ones are a ``json-too-large`` finding."""

MAX_DEPTH = 254
"""Deepest nesting accepted. The seeds nest 6 levels. The cap is orjson's serialisation
limit, which the duplicate-key check below meets anyway: re-serialising the parsed document
enforces it at C speed, where walking every document in Python would cost more than
parsing it. ``tests/test_jsonio.py`` pins the boundary."""

_BOMS = (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")


def json_pointer(parts: Iterator[str | int] | list[str | int] | tuple[str | int, ...]) -> str:
    """Builds an RFC 6901 JSON pointer from path components."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


class _DuplicateKeys(dict[str, Any]):
    """An object that held a key more than once (made only on the slow path)."""

    duplicate: str = ""


def _pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    seen: set[str] = set()
    marked = _DuplicateKeys(pairs)
    for key, _ in pairs:
        if key in seen:
            marked.duplicate = key
            break
        seen.add(key)
    return marked


def _find_duplicate(obj: Any, path: list[str | int]) -> tuple[list[str | int], str] | None:
    if isinstance(obj, _DuplicateKeys):
        return path, obj.duplicate
    if isinstance(obj, dict):
        items: Any = obj.items()
    elif isinstance(obj, list):
        items = enumerate(obj)
    else:
        return None
    for key, value in items:
        found = _find_duplicate(value, [*path, key])
        if found is not None:
            return found
    return None


def _classify_parse_error(data: bytes, error: orjson.JSONDecodeError) -> InvalidArtifact:
    message = str(error)
    if "depth limit" in message or "recursion" in message:
        return _too_deep()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return InvalidArtifact(f"not UTF-8: byte {e.start} is invalid", code="json-encoding")
    # Read again in the dialect that takes bare NaN and Infinity, to say which failure it
    # is and where: every member kept (a duplicate key can hide one), every number only
    # as finite or not.
    try:
        document = json.loads(
            text,
            parse_constant=_Token,
            parse_int=_finite_or_token,
            parse_float=_finite_or_token,
            object_pairs_hook=_Members,
        )
    except RecursionError:
        return _too_deep()
    except ValueError:
        return InvalidArtifact(f"not valid JSON: {message}", code="json-syntax")
    depth, found = _first_nonfinite(document)
    if depth > MAX_DEPTH:
        return _too_deep()
    if found is None:
        return InvalidArtifact(f"not valid JSON: {message}", code="json-syntax")
    pointer, token = found
    if _LONE_SURROGATE.search(pointer):
        # orjson refused the name on the way, as it refuses any lone surrogate.
        return InvalidArtifact(f"not valid JSON: {message}", code="json-syntax")
    if token in NON_FINITE:
        return InvalidArtifact(
            f"non-finite number {token} is not JSON", code="json-nonfinite", pointer=pointer
        )
    return InvalidArtifact(f"non-finite number: {message}", code="json-nonfinite", pointer=pointer)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _too_deep() -> InvalidArtifact:
    return InvalidArtifact(f"nested deeper than {MAX_DEPTH} levels", code="json-too-deep")


class _Members(list[tuple[str, Any]]):
    """An object's members as read, in order, duplicates kept."""


def _finite_or_token(number: str) -> Any:
    # Only whether it is finite matters here (and int() refuses past 4,300 digits).
    return 0 if math.isfinite(float(number)) else _Token(number)


def _first_nonfinite(document: Any) -> tuple[int, tuple[str, str] | None]:
    """How deep a document read with :class:`_Members` and tokens nests, and the pointer
    and token of its first non-finite number in document order (None when none)."""
    deepest = 0
    first: tuple[str, str] | None = None
    # Depth first in document order, without recursion: a document may be deep.
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(document, ())]
    while stack:
        value, path = stack.pop()
        if isinstance(value, _Token):
            if first is None:
                first = (json_pointer(path), str(value))
        elif isinstance(value, _Members):
            deepest = max(deepest, len(path) + 1)
            stack.extend((v, (*path, k)) for k, v in reversed(value))
        elif isinstance(value, list):
            deepest = max(deepest, len(path) + 1)
            stack.extend((value[i], (*path, i)) for i in reversed(range(len(value))))
    return deepest, first


def refuse_bom(data: bytes) -> None:
    """Raises ``json-bom`` for bytes that start with a byte-order mark (of any UTF), which
    strict JSON does not.

    Raises:
        InvalidArtifact: ``json-bom``.
    """
    if data.startswith(_BOMS):
        raise InvalidArtifact(
            "starts with a byte-order mark; JSON must be plain UTF-8", code="json-bom"
        )


def parse_strict(data: bytes) -> Any:
    """Parses untrusted JSON bytes strictly.

    Args:
        data: the document as stored.

    Raises:
        InvalidArtifact: with ``code`` one of ``json-bom``, ``json-encoding``,
            ``json-syntax``, ``json-nonfinite``, ``json-too-deep``, ``duplicate-key``.
    """
    refuse_bom(data)
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise _classify_parse_error(data, e) from None
    try:
        compact = orjson.dumps(obj)
    except orjson.JSONEncodeError:
        # Parsed values are all JSON types, so the only failure left is orjson's depth limit.
        raise InvalidArtifact(
            f"nested deeper than {MAX_DEPTH} levels", code="json-too-deep"
        ) from None
    # Soundness of the fast duplicate check: without \u escapes, every colon of the text is
    # either a key separator or a literal colon inside a string token. orjson's compact
    # re-serialisation writes one colon per kept key plus the literal colons of the kept
    # strings, which are a subset of the text's. So if the text has no more colons than the
    # re-serialisation, no key was dropped. Otherwise the exact (slower) parse decides.
    if b"\\u" not in data and data.count(b":") <= compact.count(b":"):
        return obj
    _refuse_duplicates(json.loads(data.decode("utf-8"), object_pairs_hook=_pairs_hook))
    return obj


def _refuse_duplicates(exact: Any) -> None:
    """Raises ``duplicate-key`` for the first object of ``exact`` (parsed with
    :func:`_pairs_hook`) that held a key twice."""
    found = _find_duplicate(exact, [])
    if found is not None:
        path, key = found
        pointer = json_pointer([*path, key])
        raise InvalidArtifact(f"duplicate key {key!r}", code="duplicate-key", pointer=pointer)


NON_FINITE = {"Infinity": "inf", "-Infinity": "-inf", "NaN": "nan"}
"""The bare tokens Python's json module writes for non-finite floats (not JSON), and the
strings a strict artifact records in their place."""


def parse_with_nonfinite(data: bytes) -> tuple[Any, list[str]]:
    """Parses a tool's JSON dialect that writes bare ``Infinity`` and ``NaN`` (SGLang's
    ``json.dumps`` output): each becomes the string of :data:`NON_FINITE`, everything else
    as strict as :func:`parse_strict`.

    Returns:
        the document, and the JSON pointer of every value that was such a token.

    Raises:
        InvalidArtifact: as :func:`parse_strict`; a number too large for a float
            (``1e999``) is still ``json-nonfinite``: only the tokens are the dialect.
    """
    try:
        return parse_strict(data), []
    except InvalidArtifact as e:
        if e.code != "json-nonfinite":
            raise
    try:
        document = json.loads(
            data.decode("utf-8"),
            object_pairs_hook=_pairs_hook,
            parse_constant=lambda token: _Token(NON_FINITE[token]),
        )
    except (ValueError, RecursionError) as e:
        raise InvalidArtifact(f"not valid JSON: {e}", code="json-syntax") from None
    found: list[str] = []

    def plain(value: Any, path: list[str | int]) -> Any:
        if isinstance(value, _Token):
            found.append(json_pointer(path))
            return str(value)
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidArtifact(
                f"{json_pointer(path)}: a number beyond any float", code="json-nonfinite"
            )
        if isinstance(value, dict):
            return {k: plain(v, [*path, k]) for k, v in value.items()}
        if isinstance(value, list):
            return [plain(v, [*path, i]) for i, v in enumerate(value)]
        return value

    _refuse_duplicates(document)
    try:
        return plain(document, []), found
    except RecursionError:
        raise InvalidArtifact("nested too deep to read", code="json-too-deep") from None


class _Token(str):
    """A bare non-finite token as read (a str, so no float arithmetic takes it for one)."""


def read_limited(
    path: str | os.PathLike[str], max_bytes: int = MAX_JSON_BYTES, *, what: str = "JSON artifacts"
) -> bytes:
    """Reads a whole file, refusing one larger than ``max_bytes`` before reading it (or, for
    a device or a file that grows, as soon as it passes the cap).

    Raises:
        InvalidArtifact: ``json-too-large`` when over the cap.
        OSError: the file cannot be opened or read, or is no regular file (a named pipe,
            a device: ``NotRegularFile``).
    """
    with open_regular(path) as stream:
        size = os.fstat(stream.fileno()).st_size
        if size > max_bytes:
            raise InvalidArtifact(
                f"{size} bytes is over the {max_bytes}-byte limit for {what}",
                code="json-too-large",
            )
        # Read one byte past the cap: a file growing after the fstat cannot slip through.
        data = stream.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise InvalidArtifact(
            f"grew past the {max_bytes}-byte limit for {what} while being read",
            code="json-too-large",
        )
    return data


def read_json(path: str | Path, *, max_bytes: int = MAX_JSON_BYTES) -> Any:
    """Reads and strictly parses the JSON file at ``path``.

    Raises:
        InvalidArtifact: the file is too large or not strict JSON.
        OSError: the file cannot be read.
    """
    return parse_strict(read_limited(path, max_bytes))


def _check_finite(obj: Any, path: list[str | int]) -> None:
    if isinstance(obj, float) and not math.isfinite(obj):
        raise ValueError(f"non-finite number {obj} at {json_pointer(path) or '/'}")
    if isinstance(obj, dict):
        for key, value in obj.items():
            _check_finite(value, [*path, key])
    elif isinstance(obj, list | tuple):
        for index, value in enumerate(obj):
            _check_finite(value, [*path, index])


def dumps_deterministic(obj: Any) -> bytes:
    """Serialises ``obj`` the one way the toolkit writes JSON artifacts.

    Sorted keys, two-space indentation, UTF-8 without escapes, shortest round-trip floats
    and a trailing newline: the same content gives the same bytes on every machine.

    Raises:
        ValueError: ``obj`` holds NaN or Infinity (orjson would write them as null).
        TypeError: ``obj`` holds a value JSON cannot represent.
    """
    _check_finite(obj, [])
    return dumps_parsed(obj)


def dumps_parsed(obj: Any) -> bytes:
    """:func:`dumps_deterministic` of a document from :func:`parse_strict` whose numbers
    are unchanged: the parser refuses NaN and Infinity, so the walk that looks for them
    (a third of publishing a large artifact) is skipped.

    Raises:
        TypeError: ``obj`` holds a value JSON cannot represent.
    """
    try:
        body = orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError as e:
        raise TypeError(f"cannot serialise as JSON: {e}") from None
    return body + b"\n"


def default_file_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_temp(path: Path, data: bytes) -> str:
    """Writes ``data``, fsynced, to a new temporary file beside ``path``; returns its name
    (the caller renames it into place or removes it)."""
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temp, stat.S_IMODE(default_file_mode()))
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return temp


def sync_folder(folder: Path) -> None:
    """fsyncs a folder, so that a rename into it survives a crash (where the platform can)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(path: str | Path, data: bytes, *, replace: bool = True) -> None:
    """Writes ``data`` to ``path`` so that readers see the old file or the new one, whole.

    The bytes go to a temporary file in the same folder, are fsynced, then renamed over the
    target; the folder is fsynced so the rename itself survives a crash.

    Raises:
        FileExistsError: ``path`` exists and ``replace`` is false.
        OSError: the folder is not writable.
    """
    target = Path(path)
    if not replace and target.exists():
        raise FileExistsError(f"{target} exists and replace=False")
    temp = write_temp(target, data)
    try:
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    sync_folder(target.parent)


def write_json(path: str | Path, obj: Any, *, replace: bool = True) -> bytes:
    """Writes ``obj`` deterministically and atomically; returns the bytes written."""
    data = dumps_deterministic(obj)
    write_atomic(path, data, replace=replace)
    return data
