"""Reading, hashing and checking files, on every core.

Each file is opened once: small files are read whole, hashed from the same bytes and
parsed; large ones are hashed through a fixed buffer, so memory does not grow with artifact
size. Work is spread over processes, because parsing holds the GIL.
"""

from __future__ import annotations

import concurrent.futures
import errno
import functools
import hashlib
import multiprocessing
import os
import stat
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from ledger.errors import InvalidArtifact
from ledger.evidence.documents import FoundReference, check_document, may_reference
from ledger.evidence.runs import Owner, PartsCheck, SweepCell, check_cell_parts, sweep_cell
from ledger.evidence.tree import identity
from ledger.findings import Issue
from ledger.formats import columns
from ledger.formats.cell_records import CELL_RUN_V2
from ledger.formats.jsonio import MAX_JSON_BYTES, parse_strict
from ledger.formats.models import BenchmarkDecisionSummary
from ledger.hashing import CHUNK_SIZE, sha256_stream
from ledger.sanitizer import JSON_LINES, Sanitizer, load_rules, rules_file

__all__ = [
    "After",
    "FileResult",
    "FileTask",
    "Group",
    "default_jobs",
    "detector",
    "map_processes",
    "process_file",
    "process_files",
    "process_groups",
]

_BATCH_FILES = 256
_BATCH_BYTES = 64 << 20
_IN_PROCESS_FILES = 64
_IN_PROCESS_BYTES = 64 << 20


class FileTask(NamedTuple):
    """One file to read."""

    path: str
    """Where to open it (a symlink already resolved by the caller)."""
    rel: str
    """Its name in findings."""
    is_json: bool
    """Whether to parse and check it as a JSON document."""
    identity: tuple[int, int, int, int] | None = None
    """(device, inode, size, mtime_ns) when listed; a difference at open means it changed."""
    scan_private: bool = False
    """Whether it is public, so the sanitizer's detectors must find nothing in it."""
    rules: str | None = None
    """The sanitizer rules version to scan it with (the one its publication names); None:
    the current rules."""


class FileResult(NamedTuple):
    """What reading one file gave (a tuple: thousands cross the process boundary)."""

    rel: str
    """Its name in findings."""
    sha256: str | None
    """Digest of the bytes read; None when it could not be read whole."""
    size: int | None
    """Bytes read."""
    issues: tuple[Issue, ...] = ()
    """Findings about reading it (and, for JSON, about the document)."""
    parsed: bool = False
    """Whether it was parsed as strict JSON."""
    schema: str | None = None
    """The document's ``schema`` field, when a string."""
    references: tuple[FoundReference, ...] = ()
    """The ``{path, sha256}`` references the document holds."""
    summary: BenchmarkDecisionSummary | None = None
    """The structured summary, when the document is one."""
    campaign_id: str | None = None
    """The campaign the document says it belongs to."""
    sweep: SweepCell | None = None
    """A sweep stage's cell, for the check of its rates against its probes."""
    owner: Owner | None = None
    """The arm, stage and cell a cell run or evidence stage says it is."""
    derived: bool = False
    """Whether the document states a ``derivation`` (a comparison verify derives again):
    told here, where it is parsed anyway, so that verify reads again only those."""
    artifact: tuple[Any, bool] | None = None
    """For a document with a string ``schema``: its ``campaign_id`` as it is, and whether
    the ledger database may load it from its text (:mod:`ledger.formats.columns`), so
    that a database built of it need not read it again."""
    elsewhere: tuple[tuple[str, Issue], ...] = ()
    """Findings about other files, by their names: a v2 cell run's about its parts."""


def _read_all(fd: int, limit: int) -> bytes:
    chunks = []
    total = 0
    while total <= limit:
        chunk = os.read(fd, min(CHUNK_SIZE, limit + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def _hash_fd(fd: int) -> tuple[str, int]:
    with os.fdopen(fd, "rb", buffering=0, closefd=False) as stream:
        return sha256_stream(stream)


def _changed(task: FileTask, why: str) -> FileResult:
    return FileResult(task.rel, None, None, (Issue("file-changed", "", why),))


def process_file(
    task: FileTask, max_json_bytes: int = MAX_JSON_BYTES, documents: dict[str, Any] | None = None
) -> FileResult:
    """Reads, hashes and (for JSON) checks one file; never raises for bad input. Into
    ``documents``, by its name, the document it holds when that meets its schema: what
    :func:`ledger.formats.schema.read_document` would give, from the very bytes hashed."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(task.path, flags)
    except FileNotFoundError:
        return _changed(task, "vanished while being verified")
    except OSError as e:
        if e.errno == errno.ELOOP:
            return _changed(task, "was replaced by a symlink while being verified")
        return FileResult(
            task.rel, None, None, (Issue("file-unreadable", "", f"cannot open: {e.strerror}"),)
        )
    try:
        return _process_open(task, fd, max_json_bytes, documents)
    except OSError as e:
        return FileResult(
            task.rel, None, None, (Issue("file-unreadable", "", f"cannot read: {e.strerror}"),)
        )
    finally:
        os.close(fd)


def _process_open(
    task: FileTask, fd: int, max_json_bytes: int, documents: dict[str, Any] | None
) -> FileResult:
    before = os.fstat(fd)
    if not stat.S_ISREG(before.st_mode):
        return FileResult(
            task.rel, None, None, (Issue("not-regular-file", "", "not a regular file"),)
        )
    if task.identity is not None and identity(before) != task.identity:
        return _changed(task, "was modified or replaced after it was listed")
    issues: list[Issue] = []
    data: bytes | None = None
    if (task.is_json or task.scan_private) and before.st_size <= max_json_bytes:
        data = _read_all(fd, max_json_bytes)
        digest, size = hashlib.sha256(data).hexdigest(), len(data)
    else:
        digest, size = _hash_fd(fd)
        if task.is_json:
            issues.append(
                Issue(
                    "json-too-large",
                    "",
                    f"{size} bytes is over the {max_json_bytes}-byte limit; hashed but not parsed",
                )
            )
        elif task.scan_private:
            # A public file nobody looked into is not one that holds nothing private.
            issues.append(
                Issue(
                    "too-large-to-scan",
                    "",
                    f"{size} bytes is over the {max_json_bytes}-byte limit; hashed but not "
                    "scanned for private data (--max-json-bytes raises the limit)",
                )
            )
    after = os.fstat(fd)
    if size != before.st_size or identity(after) != identity(before):
        return _changed(task, "changed while being read")
    if data is not None and size > max_json_bytes:
        issues.append(Issue("json-too-large", "", f"over the {max_json_bytes}-byte limit"))
    elif data is not None and not task.is_json:
        issues.extend(_private_text(data, task.rel, detector(task.rules)))
    elif data is not None:
        try:
            parsed = parse_strict(data)
        except InvalidArtifact as e:
            issues.append(Issue(e.code, e.pointer, str(e)))
        else:
            document = check_document(parsed, may_reference=may_reference(data))
            issues.extend(document.issues)
            sweep = document.sweep
            elsewhere: tuple[tuple[str, Issue], ...] = ()
            if document.valid and document.schema == CELL_RUN_V2:
                checked = _check_parts(task, parsed, max_json_bytes)
                issues.extend(checked.issues)
                elsewhere = tuple(checked.elsewhere)
                sweep = sweep_cell(parsed, checked.completed_rps)
            if documents is not None and document.valid and size <= MAX_JSON_BYTES:
                documents[task.rel] = parsed
            if task.scan_private:
                issues.extend(
                    Issue("private-data", pointer, f"{category} in a public artifact")
                    for pointer, category in detector(task.rules).scan(parsed)
                )
            return FileResult(
                task.rel,
                digest,
                size,
                tuple(issues),
                True,
                document.schema,
                document.references,
                document.summary,
                document.campaign_id,
                sweep,
                document.owner,
                isinstance(parsed, dict) and "derivation" in parsed,
                _artifact(parsed),
                elsewhere,
            )
    return FileResult(task.rel, digest, size, tuple(issues))


def _check_parts(task: FileTask, document: dict[str, Any], max_bytes: int) -> PartsCheck:
    """A v2 cell run's parts, from the campaign folder its own path lies in
    (``<arm>/<stage>/<cell>.json``), whichever name it was given."""
    root = Path(task.path).parent.parent.parent
    rel = f"{document['arm']}/{document['stage']['name']}/{Path(task.path).name}"
    return check_cell_parts(document, root, rel, max_bytes)


def _artifact(document: Any) -> tuple[Any, bool] | None:
    if not isinstance(document, dict) or not isinstance(document.get("schema"), str):
        return None
    return document.get("campaign_id"), columns.loads_as_text(document)


@functools.cache
def detector(version: str | None = None) -> Sanitizer:
    """The sanitizer of a rules version this ledger ships (None, or one it does not ship:
    the current rules; verify reports a version it does not ship)."""
    path = rules_file(version) if version is not None else None
    return Sanitizer(load_rules(path) if path is not None else None)


_UTF16 = (("utf-16-le", " (read as UTF-16)"), ("utf-16-be", " (read as UTF-16, big-endian)"))
"""How a file holding NUL bytes is read again: an editor or a forge shows a UTF-16 file
as the text it encodes, which UTF-8 reading interleaves with NULs past any detector."""


def _private_text(data: bytes, rel: str, sanitizer: Sanitizer) -> list[Issue]:
    """Detector hits in a public text file named ``rel``, by line (never the value), as
    :meth:`Sanitizer.file_hits` finds them; in a file of JSON lines, in the JSON each line
    decodes to as well; in a file with NUL bytes, in the text it holds read as UTF-16
    too."""
    readings = [(data.decode("utf-8", "replace"), "")]
    if b"\x00" in data:
        readings += [(data.decode(codec, "replace"), said) for codec, said in _UTF16]
    # The whole text, as publish sanitizes it: line by line, a private key's block (or a
    # key and its value on two lines) was never seen. Each hit is named by its first line.
    found = []
    text = readings[0][0]
    # In a file of JSON lines, a line whose JSON holds it is named with its pointer there.
    pointed = (
        [
            (number, f"line {number}{pointer and ' at ' + pointer}: {category}")
            for number, pointer, category in sanitizer.scan_lines(text)
        ]
        if rel.endswith(JSON_LINES)
        else []
    )
    shown = {number for number, _ in pointed}
    for reading, said in readings:
        line, last = 1, 0
        for hit in sanitizer.file_hits(reading, rel):  # in the order they start
            line += reading.count("\n", last, hit.start)
            last = hit.start
            if said or line not in shown:
                found.append(
                    Issue("private-data", "", f"line {line}: {hit.category} in a public file{said}")
                )
    found.extend(Issue("private-data", "", f"{said} in a public file") for _, said in pointed)
    # Two secrets of one kind on a line are one finding: the line is what it names.
    return list(dict.fromkeys(found))


class Group(NamedTuple):
    """Consecutive tasks (a campaign's files) read by one worker when they fit in one
    batch, whose results and documents it then hands to the ``after`` of
    :func:`process_groups` (where they do not fit, they are read as any tasks are)."""

    first: int
    """Its first task."""
    length: int
    """How many tasks it holds."""
    context: Any
    """What ``after`` is given of it (it crosses the process boundary)."""
    keep: bool = False
    """Whether ``after`` needs the documents its files hold."""


After = Callable[[Any, list[FileResult], dict[str, Any] | None], Any]
_Segment = tuple[list[FileTask], tuple[int, Group] | None]
"""Tasks read in a row, and the group they are, whole, if they are one."""


def _process_batch(
    batch: list[_Segment], max_json_bytes: int, after: After | None
) -> tuple[list[tuple[Any, ...]], list[tuple[int, Any]]]:
    # Plain tuples pickle several times faster than objects on the way back.
    out: list[tuple[Any, ...]] = []
    extras: list[tuple[int, Any]] = []
    for tasks, whole in batch:
        documents: dict[str, Any] | None = {} if whole is not None and whole[1].keep else None
        found = [process_file(task, max_json_bytes, documents) for task in tasks]
        out.extend(map(tuple, found))
        if whole is not None and after is not None:
            extras.append((whole[0], after(whole[1].context, found, documents)))
    return out, extras


def _batches(
    tasks: Sequence[FileTask], sizes: Sequence[int], groups: Sequence[Group]
) -> Iterator[list[_Segment]]:
    """Batches of at most ``_BATCH_FILES`` files and ``_BATCH_BYTES`` (or one file), in
    task order: a group that fits is kept whole, any other is read file by file."""
    units: list[tuple[int, int, tuple[int, Group] | None]] = []  # task range, whole group
    done = 0
    for index, group in enumerate(groups):
        units.extend((i, i + 1, None) for i in range(done, group.first))
        done = group.first + group.length
        if group.length <= _BATCH_FILES and sum(sizes[group.first : done]) <= _BATCH_BYTES:
            units.append((group.first, done, (index, group)))
        else:
            units.extend((i, i + 1, None) for i in range(group.first, done))
    units.extend((i, i + 1, None) for i in range(done, len(tasks)))
    batch: list[_Segment] = []
    files = weight = 0
    for start, end, whole in units:
        size = sum(sizes[start:end])
        if batch and (files + end - start > _BATCH_FILES or weight + size > _BATCH_BYTES):
            yield batch
            batch, files, weight = [], 0, 0
        batch.append((list(tasks[start:end]), whole))
        files += end - start
        weight += size
    if batch:
        yield batch


def default_jobs() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def process_files(
    tasks: Sequence[FileTask], *, jobs: int | None = None, max_json_bytes: int = MAX_JSON_BYTES
) -> list[FileResult]:
    """Processes every task, in parallel when it pays; results come back in task order."""
    return process_groups(tasks, (), None, jobs=jobs, max_json_bytes=max_json_bytes)[0]


def process_groups(
    tasks: Sequence[FileTask],
    groups: Sequence[Group],
    after: After | None,
    *,
    jobs: int | None = None,
    max_json_bytes: int = MAX_JSON_BYTES,
) -> tuple[list[FileResult], dict[int, Any]]:
    """:func:`process_files`, and for each group read whole (by its index),
    ``after(context, results, documents)`` in the process that read it: work on a whole
    campaign that reads its documents again, from those already parsed (``documents``, for
    a group that keeps them: each one that meets its schema, by its name).

    ``groups`` are in task order and do not overlap; ``after`` must be a module-level
    function (it crosses the process boundary)."""
    sizes = [t.identity[2] if t.identity else 0 for t in tasks]
    workers = min(jobs or default_jobs(), len(tasks))
    batches = list(_batches(tasks, sizes, groups))
    if workers <= 1 or (len(tasks) <= _IN_PROCESS_FILES and sum(sizes) <= _IN_PROCESS_BYTES):
        done = [_process_batch(batch, max_json_bytes, after) for batch in batches]
    else:
        if any(task.scan_private for task in tasks):
            detector()  # built once here, before the workers are forked, not once in each
        # fork starts workers in milliseconds and shares the already-built schema validators.
        method = "fork" if sys.platform == "linux" else None
        context = multiprocessing.get_context(method)
        n = len(batches)
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
            done = list(pool.map(_process_batch, batches, [max_json_bytes] * n, [after] * n))
    results: list[FileResult] = []
    extras: dict[int, Any] = {}
    for found, more in done:
        results.extend(map(FileResult._make, found))
        extras.update(more)
    return results, extras


_T = TypeVar("_T")
_R = TypeVar("_R")


def map_processes(
    function: Callable[[_T], _R],
    items: Sequence[_T],
    *,
    jobs: int | None = None,
    chunksize: int | None = None,
) -> list[_R]:
    """``function`` of each item, in order, over the cores when there are several items:
    for work of whole campaigns, each of which holds the interpreter for milliseconds.
    ``chunksize``: how many items a worker takes at once (default: a quarter of its share;
    1 for items that are batches already)."""
    workers = min(jobs or default_jobs(), len(items))
    if workers <= 1:
        return [function(item) for item in items]
    method = "fork" if sys.platform == "linux" else None
    context = multiprocessing.get_context(method)
    if chunksize is None:
        chunksize = max(1, len(items) // (workers * 4))
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
        return list(pool.map(function, items, chunksize=chunksize))
