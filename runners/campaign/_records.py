"""A cell's request records on disk: each appended to the open part as its request ends,
the part closed (synced, hashed, listed in the cell's header) once it holds
:data:`~ledger.formats.cell_records.PART_MAX_BYTES`. The runner holds no record after it
is written, so its memory does not grow with the cell; a run killed mid-cell leaves every
finished record but a line it was writing, which a resumed run cuts off."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from ledger.errors import InvalidArtifact, RunnerError
from ledger.formats.cell_records import (
    PART_MAX_BYTES,
    PART_NAME,
    parse_line,
    part_lines,
    part_rel,
    read_record,
    records,
)


class CellParts:
    """The parts of one cell: those closed (``listed``, as the header names them) and the
    one records go to now."""

    def __init__(
        self,
        folder: Path,
        cell_rel: str,
        on_close: Callable[[], object],
        *,
        max_bytes: int = PART_MAX_BYTES,
    ) -> None:
        self.folder = folder
        self.cell_rel = cell_rel
        self.on_close = on_close
        """Called once a part is closed: the header is written again, listing it."""
        self.max_bytes = max_bytes
        self.listed: list[dict[str, Any]] = []
        self._stream: IO[bytes] | None = None
        self._hash = hashlib.sha256()
        self._bytes = 0
        self._count = 0

    @property
    def records(self) -> int:
        """Records in the listed parts."""
        return sum(p["requests"] for p in self.listed)

    def _open_rel(self) -> str:
        return part_rel(self.cell_rel, len(self.listed) + 1)

    def append(self, record: dict[str, Any]) -> None:
        """Writes one record as a line of the open part (opened on the first), and closes
        the part once it is full."""
        line = orjson.dumps(record, option=orjson.OPT_SORT_KEYS) + b"\n"
        if self._stream is None:
            self._stream = open(self.folder / self._open_rel(), "ab")  # noqa: SIM115
        # Written through to the kernel at once: a SIGKILL then loses only requests in
        # flight, never a record the run had finished.
        self._stream.write(line)
        self._stream.flush()
        self._hash.update(line)
        self._bytes += len(line)
        self._count += 1
        if self._bytes >= self.max_bytes:
            self.close_part()

    def close_part(self) -> None:
        """Syncs the open part and lists it in the header; nothing when none is open."""
        stream = self._stream
        if stream is None:
            return
        os.fsync(stream.fileno())
        stream.close()
        self._stream = None
        self.listed.append(
            {
                "path": self._open_rel(),
                "sha256": self._hash.hexdigest(),
                "bytes": self._bytes,
                "requests": self._count,
            }
        )
        self._hash, self._bytes, self._count = hashlib.sha256(), 0, 0
        self.on_close()

    def abandon(self) -> None:
        """Closes the open part's file without listing it (the run is failing anyway)."""
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def reopen(self, listed: list[dict[str, Any]]) -> None:
        """Takes up the parts an interrupted run left: the listed ones must be as it sealed
        them; the one it was writing keeps every whole line, and a line a kill cut short is
        cut off (its request runs again).

        Raises:
            RunnerError: a listed part is missing or changed, or files the run did not
                write lie among the parts.
        """
        for number, part in enumerate(listed, 1):
            if part["path"] != part_rel(self.cell_rel, number):
                raise RunnerError(
                    f"cannot resume: {self.cell_rel} lists {part['path']} as its part {number}"
                )
            path = self.folder / part["path"]
            digest = hashlib.sha256()
            try:
                with open(path, "rb") as stream:
                    while block := stream.read(1 << 20):
                        digest.update(block)
            except OSError as e:
                raise RunnerError(f"cannot resume: {part['path']}: {e.strerror or e}") from None
            if digest.hexdigest() != part["sha256"]:
                raise RunnerError(
                    f"cannot resume: {part['path']} is not the part its cell run sealed (its "
                    f"digest differs from the one {self.cell_rel} lists); move the cell's files "
                    "aside to run it again"
                )
        self.listed = [dict(p) for p in listed]
        header = Path(self.cell_rel).name.removesuffix(".json")
        numbers = sorted(
            int(m.group(1))
            for p in (self.folder / self.cell_rel).parent.glob(f"{header}.part-*.jsonl")
            if (m := PART_NAME.search(p.name)) is not None and p.name.startswith(header + ".")
        )
        unlisted = [n for n in numbers if n > len(listed)]
        if unlisted and unlisted != [len(listed) + 1]:
            raise RunnerError(
                f"cannot resume: {self.cell_rel}: parts {unlisted} are not the one part a "
                "run writes past those its header lists"
            )
        if unlisted:
            self._take_up(self.folder / self._open_rel())

    def _take_up(self, path: Path) -> None:
        """The part a run was writing: every whole line kept, a last one without its
        newline (the write a kill cut short) cut off.

        Raises:
            RunnerError: a line before the last is no record (not what a kill leaves).
        """
        kept = 0
        count = 0
        digest = hashlib.sha256()
        for number, line in part_lines(path):
            try:
                parse_line(line, f"{path.name}:{number}")
            except InvalidArtifact as e:
                if line.endswith(b"\n"):
                    raise RunnerError(f"cannot resume: {e}") from None
                break
            kept += len(line)
            count += 1
            digest.update(line)
        with open(path, "r+b") as stream:
            stream.truncate(kept)
        self._stream = open(path, "ab")  # noqa: SIM115
        self._hash, self._bytes, self._count = digest, kept, count

    def on_disk(self, header: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """Every record written so far, each held to its schema: the listed parts', then
        the open one's (which no digest holds yet).

        Raises:
            RunnerError: a record breaks its schema.
        """
        try:
            yield from records(self.folder, {**header, "parts": self.listed})
            if self._stream is not None:
                self._stream.flush()
                rel = self._open_rel()
                for number, line in part_lines(self.folder / rel):
                    yield read_record(line, f"{rel}:{number}")
        except InvalidArtifact as e:
            raise RunnerError(f"cannot go on with {self.cell_rel}: {e}") from None
