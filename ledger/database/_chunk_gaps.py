"""The gaps between successive token-bearing chunks of a cell's successful measured
requests (inter-token latency, as vLLM pools it), counted per cell and gap.

A ``cell-run/v2`` record keeps its chunk times compact (``chunks_us``,
:func:`ledger.formats.cell_records.encode_chunks`): each gap is predicted from the mean
of the eight before it, so decoding is sequential within a record. Decoded one record at
a time in Python it costs about 0.7 us a token (six minutes for a million 512-token
replies); here the records of a batch are decoded together with numpy, the digits of all
of them at once and the prediction one token position at a time across every record
still that long. What is kept is a histogram, one row per cell and distinct gap (whole
microseconds) with its count, so a campaign's gaps take the space of its distinct values,
not of its tokens, and the percentiles are exact.
"""

from __future__ import annotations

import collections
import concurrent.futures
import itertools
import json
from collections.abc import Sequence
from typing import Any

import attrs
import duckdb
import numpy as np
import numpy.typing as npt

from ledger.errors import InvalidArtifact
from ledger.formats import cell_records

Ints = npt.NDArray[np.int64]

_BASE = 31
_VALUE = np.full(256, 255, dtype=np.uint8)
"""A character's digit (0-30), 255 for a character that is none."""
_LAST = np.zeros(256, dtype=np.bool_)
"""Whether a character is a number's last digit."""
for _place, _character in enumerate(cell_records.DIGITS):
    _VALUE[ord(_character)] = _place % _BASE
    _LAST[ord(_character)] = _place < _BASE
_MOST_DIGITS = 12
"""The longest number read here: 31^12 (7.9e17) stays inside 64 bits with its offset. A
longer one (a change of more than ten thousand years) is left to the exact decoder."""
_OFFSETS = np.array(
    [sum(_BASE**j for j in range(1, length)) for length in range(_MOST_DIGITS + 1)],
    dtype=np.int64,
)
"""A number of each length is offset by the count of every shorter length's numbers."""
_OFFSETS32 = _OFFSETS[:4].astype(np.int32)

BATCH_CHARACTERS = 4 << 20
"""Chunk-time characters decoded at once (about 1.6 million gaps). Two batches are held, one
read while the other is decoded: a build of a million 128-token requests peaked 375 MiB
above one without the gaps (docs/method/performance.md)."""


def gap_counts(texts: Sequence[str], groups: Ints) -> tuple[Ints, Ints, Ints]:
    """How many times each gap (microseconds) occurs among the texts (``chunks_us``) of
    each group: (group, gap, count), by group in their order, each group's gaps rising.
    ``groups[i]`` is the group of ``texts[i]``; a group's texts are consecutive.

    Raises:
        ValueError: a text is not chunk times this way can read (a character that is not
            a digit, a number cut short or longer than 12 digits, a negative gap); the
            exact decoder, :func:`~ledger.formats.cell_records.decode_chunks`, tells
            which and why.
    """
    try:
        data = np.frombuffer("".join(texts).encode("ascii"), dtype=np.uint8)
    except UnicodeEncodeError:
        raise ValueError("a character that is not a digit") from None
    digit = _VALUE[data]
    if digit.size and digit.max() >= _BASE:
        raise ValueError("a character that is not a digit")
    last = _LAST[data]
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    ends = np.cumsum(lengths)
    # Each text ends on a number's last digit: one cut short would lend its digits to the
    # next text's first number.
    if not last[ends[lengths > 0] - 1].all():
        raise ValueError("a number cut short")
    stops = np.flatnonzero(last)
    before = np.searchsorted(stops, ends)
    changes = _changes(digit, last, stops)
    counts = np.diff(before, prepend=0)
    found: list[tuple[int, Ints, Ints]] = []
    cuts = np.flatnonzero(np.diff(groups)) + 1
    for first, end in zip(np.concatenate(([0], cuts)), np.append(cuts, len(texts)), strict=True):
        mine = counts[first:end]
        low = int(before[first] - mine[0])
        gaps = _gaps(changes[low : int(before[end - 1])], mine[mine > 0])
        values, n = _histogram(gaps)
        found.append((int(groups[first]), values, n))
    return (
        np.concatenate([np.full(v.size, g, dtype=np.int64) for g, v, _ in found]),
        np.concatenate([v for _, v, _ in found]),
        np.concatenate([n for _, _, n in found]),
    )


_DENSE = 1 << 20
"""Gaps below this many microseconds (about a second) are counted by ``bincount``; the
few above it by sorting."""


def _histogram(gaps: Ints) -> tuple[Ints, Ints]:
    if gaps.size == 0:
        return gaps, gaps
    if gaps.max() < _DENSE:
        counts = np.bincount(gaps)
        values = np.flatnonzero(counts)
        return values.astype(np.int64), counts[values].astype(np.int64)
    small = gaps < _DENSE
    values, counts = _histogram(gaps[small])
    more, more_counts = np.unique(gaps[~small], return_counts=True)
    return np.concatenate((values, more)), np.concatenate((counts, more_counts))


def _changes(digit: npt.NDArray[np.uint8], last: npt.NDArray[np.bool_], stops: Ints) -> Ints:
    """Each number's change from its prediction (``stops``: where each number's last
    digit is): base-31 digits, least significant first, offset by length, zigzag-coded.

    Nearly every number is at most three characters (a change of up to 15 ms): those are
    read for every number at once, in 32 bits (the work is memory-bound), from views of
    the digits one and two places on; a longer one (a stall) is read again in 64 bits."""
    if not stops.size:
        return np.zeros(0, dtype=np.int64)
    starts = np.empty_like(stops)
    starts[0] = 0
    starts[1:] = stops[:-1] + 1
    length = stops - starts + 1
    if length.max() > _MOST_DIGITS:
        raise ValueError("a number longer than this decoder reads")
    # Padded so that the views one and two places on are as long as the digits.
    digits = np.concatenate((digit, np.zeros(2, dtype=np.uint8)))
    more = np.concatenate((~last, np.zeros(2, dtype=np.bool_)))
    second = more[starts]
    third = second & more[1:][starts]
    number = digits[starts].astype(np.int32)
    number += (digits[1:][starts] * second).astype(np.int32) * _BASE
    number += (digits[2:][starts] * third).astype(np.int32) * _BASE**2
    number += _OFFSETS32[np.minimum(length, 3)]
    longer = np.flatnonzero(length > 3)
    if not longer.size:
        return ((number >> 1) ^ -(number & 1)).astype(np.int64)
    wide = number.astype(np.int64)
    wide[longer] += _OFFSETS[length[longer]] - _OFFSETS[3]
    place = 3
    while longer.size:
        wide[longer] += digits[starts[longer] + place].astype(np.int64) * _BASE**place
        place += 1
        longer = longer[length[longer] > place]
    return (wide >> 1) ^ -(wide & 1)


def _gaps(changes: Ints, counts: Ints) -> Ints:
    """The gaps from their changes (``counts``: how many of them each text has, in
    order), each predicted by the floored mean of the (up to)
    :data:`~ledger.formats.cell_records.WINDOW` before it in its own text; in no
    particular order.

    The numbers are laid out by position: every text's first, then every second, ...;
    texts longest first, so the texts still that long at a position are a prefix of the
    order, and each position is a few numpy operations across all of them."""
    total = int(changes.size)
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    rank = np.empty(counts.size, dtype=np.int64)
    rank[np.argsort(-counts, kind="stable")] = np.arange(counts.size)
    longest = int(counts.max())
    # alive[k]: how many texts have more than k numbers; begin[k]: where position k starts.
    alive = counts.size - np.cumsum(np.bincount(counts, minlength=longest + 1))[:longest]
    begin = np.concatenate(([0], np.cumsum(alive)[:-1]))
    within = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    laid = np.empty(total, dtype=np.int64)
    laid[begin[within] + np.repeat(rank, counts)] = changes
    gaps = np.empty(total, dtype=np.int64)
    window = cell_records.WINDOW
    sums = np.zeros(int(alive[0]), dtype=np.int64)
    for k in range(longest):
        n, at = int(alive[k]), int(begin[k])
        step = laid[at : at + n]
        if k:
            step = sums[:n] // min(k, window) + step
        gaps[at : at + n] = step
        sums[:n] += step
        if k >= window:
            back = int(begin[k - window])
            sums[:n] -= gaps[back : back + n]
    if gaps.min() < 0:
        raise ValueError("a negative gap")
    return gaps


@attrs.frozen
class _Batch:
    texts: list[str]
    owners: list[int]
    places: list[tuple[int, str, list[int]]]
    """(first text of a part, where the part is, each text's line number in it)."""


def _exactly(batch: _Batch) -> tuple[Ints, Ints, Ints]:
    """:func:`gap_counts` of a batch decoded one record at a time, as verify decodes it:
    what the batch decoder could not read is either named or, a number too long for it,
    read.

    Raises:
        InvalidArtifact: the first record whose chunk times are not chunk times.
    """
    found: collections.Counter[tuple[int, int]] = collections.Counter()
    for first, where, lines in batch.places:
        for offset, number in enumerate(lines):
            index = first + offset
            try:
                times = cell_records.decode_chunks(batch.texts[index])
            except ValueError as e:
                raise InvalidArtifact(
                    f"{where}: line {number} at /chunks_us: not chunk times: {e}; ledger "
                    "verify names every such record"
                ) from None
            for a, b in itertools.pairwise(times):
                if b - a >= 1 << 63:
                    raise InvalidArtifact(
                        f"{where}: line {number} at /chunks_us: a gap past 64 bits"
                    )
                found[batch.owners[index], b - a] += 1
    keys = sorted(found)
    return (
        np.asarray([run for run, _ in keys], dtype=np.int64),
        np.asarray([gap for _, gap in keys], dtype=np.int64),
        np.asarray([found[k] for k in keys], dtype=np.int64),
    )


class ChunkGaps:
    """The gaps of v2 cell runs' records, decoded in batches into the temporary tables
    ``chunk_gap_counts`` (run, gap_us, n) and ``chunk_gap_runs`` (run, filename: the cell
    run's file), which :data:`ledger.database.sql.INSERT_PART_GAPS` joins with the
    cell runs. A batch is decoded in a thread while the parts of the next are read (numpy
    lets the interpreter go for most of it); only this object's caller touches DuckDB."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        con.execute("CREATE TEMP TABLE chunk_gap_counts (run INTEGER, gap_us BIGINT, n BIGINT)")
        con.execute("CREATE TEMP TABLE chunk_gap_runs (run INTEGER, filename VARCHAR)")
        self.runs: dict[str, int] = {}
        self.texts: list[str] = []
        self.owners: list[int] = []
        self.places: list[tuple[int, str, list[int]]] = []
        """(first text of a part, where the part is, each text's line number in it)."""
        self.characters = 0
        self.pool: concurrent.futures.ThreadPoolExecutor | None = None
        self.pending: tuple[concurrent.futures.Future[tuple[Ints, Ints, Ints]], _Batch] | None
        self.pending = None

    def add(self, filename: str, records: list[Any], where: str) -> None:
        """The chunk times of a part's successful measured records (``where`` names the
        part in a refusal).

        Raises:
            InvalidArtifact: a record's chunk times are not a string.
        """
        run = self.runs.setdefault(filename, len(self.runs))
        lines = []
        for number, record in enumerate(records, 1):
            if type(record) is not dict or record.get("error") is not None:
                continue  # a null line is no request (a row of nulls, never successful)
            if record.get("warmup") is not False:
                continue
            text = record.get("chunks_us")
            if type(text) is not str:
                raise InvalidArtifact(
                    f"{where}: line {number} at /chunks_us: {json.dumps(text)[:40]} is not a string "
                    f"({cell_records.CELL_RUN_V2}); ledger verify names every artifact that "
                    "breaks its schema"
                )
            if text:
                lines.append(number)
                self.texts.append(text)
                self.characters += len(text)
        if lines:
            self.places.append((len(self.owners), where, lines))
            self.owners.extend([run] * len(lines))
        if self.characters >= BATCH_CHARACTERS:
            self.flush()

    def flush(self) -> None:
        """Hands the batch held to be decoded, once the one before is counted.

        Raises:
            InvalidArtifact: a record's chunk times are not chunk times, naming it.
        """
        if not self.texts:
            return
        batch = _Batch(self.texts, self.owners, self.places)
        self.texts, self.owners, self.places, self.characters = [], [], [], 0
        self._count()
        if self.pool is None:
            self.pool = concurrent.futures.ThreadPoolExecutor(1, "ledger-chunk-gaps")
        owners = np.asarray(batch.owners, dtype=np.int64)
        self.pending = (self.pool.submit(gap_counts, batch.texts, owners), batch)

    def _count(self) -> None:
        """Counts the batch being decoded, if any."""
        if self.pending is None:
            return
        future, batch = self.pending
        self.pending = None
        try:
            runs, gaps, counts = future.result()
        except ValueError:
            runs, gaps, counts = _exactly(batch)
        self.con.register("chunk_gap_batch", {"run": runs, "gap_us": gaps, "n": counts})
        try:
            self.con.execute("INSERT INTO chunk_gap_counts SELECT * FROM chunk_gap_batch")
        finally:
            self.con.unregister("chunk_gap_batch")

    def close(self) -> None:
        """Lets the decoding thread go (a batch it is decoding is dropped)."""
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.pool = None

    def finish(self) -> None:
        """Decodes what is held and names each run's file."""
        self.flush()
        self._count()
        self.close()
        rows = sorted((run, filename) for filename, run in self.runs.items())
        self.con.execute(
            "INSERT INTO chunk_gap_runs SELECT unnest(?::INTEGER[]), unnest(?::VARCHAR[])",
            [[r for r, _ in rows], [f for _, f in rows]],
        )
