"""The ledger database: DuckDB built from evidence files, which stay the source of truth.

``build`` reads raw or public campaign folders, evidence roots and Parquet exports into
tables (``request_rows``, ``cell_settings``, ``chunk_gaps``, ``artifacts``, ``gates``,
``decisions``) and the views ``requests``, ``cells`` and ``serving_metrics`` (column names
in ``docs/guides/database.md``). Request rows never pass
through Python: DuckDB reads the JSON artifacts (or the Parquet) itself.
"""

from __future__ import annotations

import collections
import csv
import datetime
import hashlib
import io
import json
import math
import os
import re
import shutil
import tempfile
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Self

import attrs
import duckdb
import orjson

from ledger.database import _record_bounds as record_bounds
from ledger.database import sql
from ledger.database._chunk_gaps import ChunkGaps
from ledger.errors import Error, InvalidArtifact, SchemaError, UsageError
from ledger.evidence import tree
from ledger.evidence.manifest import BUNDLE_SUFFIX
from ledger.formats import cell_records, columns, jsonio
from ledger.formats.outputs import OutputExists, new_file, new_folder
from ledger.hashing import sha256_file

EXPORT_TABLES = ("artifacts", "gates", "decisions")
"""The tables every export holds as one Parquet file each."""
PARTITIONED_TABLES = ("request_rows", "cell_settings", "chunk_gaps")
"""The tables an export holds partitioned by campaign and arm (``chunk_gaps`` since the
``serving_metrics`` view: an export written before it reads as having no gaps)."""
EXPORT_MARKER = "anvil-ledger-export.json"
"""Written at the top of a Parquet export; ``build`` recognises an export by it."""
_MAX_OBJECT_BYTES = 1 << 30
_SNIFF = {"schema": "VARCHAR", "campaign_id": "VARCHAR"}


_KIND_NAMES = {"LOAD": "INSTALL or LOAD"}


class DatabaseError(Error):
    """A path cannot be loaded, or a query failed."""


@attrs.frozen
class Table:
    """A query result."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]

    def to_json(self) -> list[dict[str, Any]]:
        """An array of objects keyed by column name, in JSON's own types only (see
        :func:`plain`), so that ``json.dumps(..., allow_nan=False)`` always succeeds. A name
        that repeats (``SELECT r.arm, c.arm``) is suffixed ``:2``, ``:3``, ... rather than
        losing a column."""
        keys: list[str] = []
        for column in self.columns:
            key, n = column, 1
            while key in keys:
                n += 1
                key = f"{column}:{n}"
            keys.append(key)
        return [
            {key: plain(value) for key, value in zip(keys, row, strict=True)} for row in self.rows
        ]

    def to_csv(self) -> str:
        """CSV with a header line: plain values; lists and structs as JSON text."""
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(self.columns)
        for row in self.rows:
            writer.writerow(_csv_value(plain(v)) for v in row)
        return out.getvalue()

    def to_text(self) -> str:
        """Aligned columns for people."""
        cells = [list(self.columns)] + [
            ["" if v is None else _show(v) for v in r] for r in self.rows
        ]
        widths = [max(len(row[i]) for row in cells) for i in range(len(self.columns))]
        lines = [
            "  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip()
            for row in cells
        ]
        return "\n".join(lines) + "\n"


def plain(value: Any) -> Any:
    """A DuckDB value in JSON's types: non-finite numbers as ``"NaN"``, ``"Infinity"`` and
    ``"-Infinity"``; decimals, UUIDs and times as text (ISO 8601); blobs as hex; intervals
    as ISO 8601 durations; lists and structs value by value."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, datetime.timedelta):
        return _duration(value)
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return str(value)  # Decimal, UUID: exact as text


def _duration(value: datetime.timedelta) -> str:
    micros = abs(value.days * 86_400_000_000 + value.seconds * 1_000_000 + value.microseconds)
    days, rest = divmod(micros, 86_400_000_000)
    seconds = f"{rest // 1_000_000}.{rest % 1_000_000:06d}".rstrip("0").rstrip(".")
    return f"{'-' if value < datetime.timedelta(0) else ''}P{days}DT{seconds}S"


def _csv_value(value: Any) -> Any:
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, allow_nan=False, sort_keys=True)
    return value


def _show(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


class Database:
    """An open ledger database."""

    def __init__(self, connection: duckdb.DuckDBPyConnection) -> None:
        self.connection = connection
        self._spill: weakref.finalize[..., Database] | None = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def query(self, text: str, parameters: Sequence[Any] | None = None) -> Table:
        """Runs one statement; returns its result.

        Raises:
            DatabaseError: DuckDB refused it (the message is DuckDB's, on one line).
        """
        try:
            result = self.connection.execute(text, parameters or [])
            columns = tuple(d[0] for d in result.description or ())
            rows = tuple(tuple(row) for row in result.fetchall()) if columns else ()
        except duckdb.Error as e:
            raise DatabaseError(" ".join(str(e).split())) from None
        return Table(columns, rows)

    def lock(self, readable: Sequence[Path] = ()) -> None:
        """From now on the database reads and writes nothing outside itself.

        Files, the network and extensions are closed (``enable_external_access = false``)
        except the folders in ``readable`` (Parquet exports read in place), and then the
        configuration is locked, so no statement can open them again.
        """
        con = self.connection
        # DuckDB allows its spill folder even with external access off; by default that is
        # ./.tmp, which a symlink could point anywhere. A fresh private one instead.
        spill = tempfile.mkdtemp(prefix="ledger-duckdb-")
        # Removed by close(), or else when the database is collected or the interpreter
        # exits: a library caller that never closed it left a folder a database.
        self._spill = weakref.finalize(self, _remove_spill, spill, os.getpid())
        con.execute("SET temp_directory = ?", [spill])
        con.execute(
            "SET allowed_directories = ?", [[p.resolve().as_posix() + "/" for p in readable]]
        )
        for setting in (
            "autoinstall_known_extensions",
            "autoload_known_extensions",
            "allow_community_extensions",
            "enable_external_access",
        ):
            con.execute(f"SET {setting} = false")
        con.execute("SET lock_configuration = true")

    def user_query(self, text: str) -> Table:
        """Runs one statement a person wrote: a query (``SELECT``, ``WITH``, ``DESCRIBE``,
        ``SHOW``, ``SUMMARIZE``), over a locked database (:meth:`lock`). Not ``EXPLAIN``:
        ``EXPLAIN ANALYZE`` runs the statement it wraps, whatever that is.

        Raises:
            UsageError: no statement, more than one, one that would change anything
                (``COPY``, ``ATTACH``, ``INSTALL``, ``LOAD``, ``SET``, ``CREATE``, ...), or
                one DuckDB refuses (the message is DuckDB's, on one line).
        """
        try:
            statements = self.connection.extract_statements(text)
        except duckdb.Error as e:
            raise UsageError("SQL: " + " ".join(str(e).split())) from None
        if not statements:
            raise UsageError("SQL: no statement (only whitespace, ';' or comments)")
        if len(statements) > 1:
            raise UsageError(f"SQL: {len(statements)} statements; ledger sql runs one")
        kind = statements[0].type
        if kind != duckdb.StatementType.SELECT:
            named = _KIND_NAMES.get(kind.name, kind.name)
            # DuckDB files some statements under another kind (CHECKPOINT is a CALL).
            word = (statements[0].query.split(None, 1) or [""])[0].upper()
            if word.isalpha() and word != "WITH" and word not in named.split():
                named = f"{word} ({named})"
            raise UsageError(
                f"SQL: {named} is not allowed; ledger sql reads "
                "the evidence and changes nothing (queries only)"
            )
        try:
            return self.query(text)
        except DatabaseError as e:
            raise UsageError(f"SQL: {e}") from None

    def export_parquet(self, folder: str | Path) -> None:
        """Writes Hive-partitioned Parquet (``campaign_id=.../arm=...``) readable unchanged by
        DuckDB over object storage, Spark or Trino; ``build`` reads it back."""
        target = Path(folder)
        if target.exists() and not target.is_dir():
            raise OutputExists(f"{target} is a file; export writes a new folder")
        if target.exists() and any(target.iterdir()):
            raise OutputExists(f"{target} is not an empty folder; export writes a new one")
        empty = target.exists()
        if empty:
            target.rmdir()
        try:
            with new_folder(target) as out:
                self._export_into(out)
        except BaseException:
            if empty:
                target.mkdir(exist_ok=True)
            raise

    def _export_into(self, out: Path) -> None:
        con = self.connection
        held = {row[0] for row in con.execute("SELECT view_name FROM duckdb_views()").fetchall()}
        exported = [t for t in PARTITIONED_TABLES if t in held]
        for table in exported:
            target = (out / table).as_posix()
            order = "campaign_id, arm, stage, cell" + {
                "request_rows": ", request_index",
                "chunk_gaps": ", gap_ms, n",
            }.get(table, "")
            con.execute(
                f"COPY (SELECT * FROM {table} ORDER BY {order}) TO ? "
                "(FORMAT parquet, PARTITION_BY (campaign_id, arm), OVERWRITE_OR_IGNORE)",
                [target],
            )
        for table in ("artifacts", "gates", "decisions"):
            target = (out / f"{table}.parquet").as_posix()
            con.execute(
                f"COPY (SELECT * FROM {table} ORDER BY ALL) TO ? (FORMAT parquet)", [target]
            )
        jsonio.write_json(
            out / EXPORT_MARKER,
            {
                "format": "anvil-ledger parquet export",
                "version": 1,
                "tables": [*exported, *EXPORT_TABLES],
            },
        )

    def close(self) -> None:
        """Closes the connection."""
        self.connection.close()
        if self._spill is not None:
            self._spill()


def _remove_spill(folder: str, owner: int) -> None:
    # A forked worker holds a copy of the database, not the folder: the parent uses it on.
    if os.getpid() == owner:
        shutil.rmtree(folder, ignore_errors=True)


def _quote(path: str | Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def _columns(spec: dict[str, str]) -> str:
    return "{" + ", ".join(f"{_quote(k)}: {_quote(v)}" for k, v in spec.items()) + "}"


@attrs.define
class _Sources:
    cell_runs: list[tuple[str, str, str]] = attrs.Factory(list)  # (file, rel, sha256)
    fast: dict[str, str] = attrs.Factory(dict)
    """file -> sha256 of the runs DuckDB may read from their text."""
    imported: list[tuple[str, str, str]] = attrs.Factory(list)
    parts: list[tuple[str, str, str, str, str]] = attrs.Factory(list)
    """(part file, its cell run's file, campaign id, part path, listed sha256) of each
    ``cell-run/v2``'s parts, in their order."""
    artifacts: list[tuple[Any, ...]] = attrs.Factory(list)
    gates: list[tuple[Any, ...]] = attrs.Factory(list)
    decisions: list[tuple[Any, ...]] = attrs.Factory(list)
    exports: list[Path] = attrs.Factory(list)


_SNIFF_IN_PYTHON = 1 << 20
"""Files up to this size are sniffed by parsing them here: DuckDB's reader costs about a
third of a millisecond per file, six times the parse. Larger ones (raw runs of millions of
requests) are left to DuckDB, which does not hold them in memory whole."""


_TRANSFORM_BATCH = 4 << 20
"""Text handed to DuckDB's ``json_transform`` at once: memory stays bounded however many
runs a campaign holds (at 64 MiB, verify's workers on the published tree of the benchmark
peaked at 224 MiB, against 169 MiB at 4 MiB and 153 MiB reading each file with read_json;
the time was the same)."""


Known = Mapping[str, "tuple[str, Any, str, int, bool] | None"]
"""file -> (schema, campaign_id as it is, sha256, bytes, whether it loads as text) of a
JSON file already read strictly and found to be an artifact (None: one found not to be):
what reading it again here would learn (verify's, from the bytes it hashed)."""


def _schemas(
    con: duckdb.DuckDBPyConnection,
    files: list[str],
    fast: dict[str, str] | None = None,
    known: Known | None = None,
) -> dict[str, tuple[str, Any]]:
    """file -> (schema, campaign_id) of every JSON artifact with a schema field. Into
    ``fast``, file -> sha256 of each run artifact that DuckDB may read from its text
    (:mod:`ledger.formats.columns`). A file in ``known`` is not read.

    Raises:
        DatabaseError: a file is not strict JSON.
    """
    found: dict[str, tuple[str, Any]] = {}
    rest: list[str] = []
    for file in files:
        if known is not None and file in known:
            told = known[file]
            if told is not None:
                schema, campaign_id, digest, size, as_text = told
                found[file] = (schema, campaign_id)
                if fast is not None and as_text and size <= _SNIFF_IN_PYTHON:
                    fast[file] = digest
            continue
        sniffed = _sniff(file, fast)
        if sniffed is False:
            rest.append(file)
        elif sniffed is not None:
            found[file] = sniffed
    found.update(_duckdb_schemas(con, rest))
    return found


def _sniff(
    file: str, fast: dict[str, str] | None = None
) -> tuple[str, Any] | Literal[False] | None:
    """An artifact's (schema, campaign_id as it is); None when the file is not one (no
    schema, or not one JSON object: DuckDB's reader would take an array's items, or each
    line of a file of lines, as artifacts of their own and pool their rows); False when it
    is too large to parse here and starts as an object, for DuckDB to tell. A run artifact
    whose values convert exactly is noted in ``fast`` with its digest.

    Raises:
        DatabaseError: it cannot be read, or is not strict JSON.
    """
    try:
        with open(file, "rb") as stream:
            data = stream.read(_SNIFF_IN_PYTHON + 1)
    except OSError as e:
        raise DatabaseError(f"{file}: {e.strerror or e}") from None
    if len(data) > _SNIFF_IN_PYTHON:
        return _sniff_large(file, data)
    try:
        document = jsonio.parse_strict(data)
    except InvalidArtifact as e:
        raise DatabaseError(f"{file}: {e} (ledger verify lists every such file)") from None
    if not isinstance(document, dict) or not isinstance(document.get("schema"), str):
        return None
    if columns.loads_as_text(document):
        if fast is not None:
            fast[file] = hashlib.sha256(data).hexdigest()
    elif columns.kind_of_schema(document["schema"]) in columns.RUN_FIELDS:
        _refuse_mistyped(file, document)
    return document["schema"], document.get("campaign_id")


def _refuse_mistyped(file: str, document: dict[str, Any]) -> None:
    """Refuses a run a loaded number or boolean of which has another JSON type (``true`` or
    ``"253"`` as a token count, ``2.5`` as a timestamp): DuckDB's reader would take it for a
    number (1, 253, 2) where verify calls it ``schema-invalid``.

    Raises:
        DatabaseError: naming the first such value by JSON pointer.
    """
    fields = columns.RUN_FIELDS[columns.kind_of_schema(document["schema"])]
    found = columns.mistyped(document, fields)
    if found is not None:
        pointer, value, wanted = found
        shown = json.dumps(value)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        raise DatabaseError(
            f"{file}#{pointer}: {shown} is not {wanted} ({document['schema']}); ledger verify "
            "names every artifact that breaks its schema"
        )


_JSON_VALUE_STARTS = frozenset(b'["-0123456789tfn')
"""The bytes a JSON value other than an object starts with."""


def _sniff_large(file: str, data: bytes) -> Literal[False] | None:
    """:func:`_sniff` of a file too large to parse here, by how it starts: an object is
    DuckDB's to tell; another JSON value is no artifact; anything else (a byte-order mark,
    a NUL, UTF-16, text) is refused as a small file is, rather than left out unsaid.

    Raises:
        DatabaseError: it starts as no JSON value does.
    """
    try:
        jsonio.refuse_bom(data)
    except InvalidArtifact as e:
        raise DatabaseError(f"{file}: {e} (ledger verify lists every such file)") from None
    # JSON's own white space only: DuckDB's reader and bytes.lstrip take more.
    first = data.lstrip(b" \t\r\n")[:1]
    if first == b"{":
        return False
    if first and first[0] in _JSON_VALUE_STARTS:
        return None
    shown = repr(first) if first else "nothing but white space"
    raise DatabaseError(
        f"{file}: not valid JSON: it starts with {shown} (ledger verify lists every such file)"
    )


def _duckdb_schemas(con: duckdb.DuckDBPyConnection, files: list[str]) -> dict[str, tuple[str, Any]]:
    if not files:
        return {}
    rows = con.execute(
        f"SELECT filename, schema, campaign_id FROM read_json(?, columns={_columns(_SNIFF)}, "
        f"filename=true, ignore_errors=true, format='auto', "
        f"maximum_object_size={_MAX_OBJECT_BYTES})",
        [files],
    ).fetchall()
    # A large file of JSON lines starts as an object too: DuckDB's reader takes each line
    # as an artifact. Refused as a small one is (not strict JSON), not pooled.
    values = collections.Counter(str(f) for f, _, _ in rows)
    for file, count in values.items():
        if count > 1:
            raise DatabaseError(
                f"{file}: not valid JSON: {count} JSON values, where an artifact is one "
                "object (ledger verify lists every such file)"
            )
    return {str(f): (s, c) for f, s, c in rows if isinstance(s, str)}


def _read_small(path: Path) -> Any:
    try:
        return jsonio.read_json(path)
    except (OSError, InvalidArtifact):
        return None


def _campaign(
    folder: Path,
    files: dict[str, str],
    schemas: dict[str, tuple[str, Any]],
    sources: _Sources,
    parts: dict[str, str],
) -> None:
    """Loads one campaign's artifacts: ``files`` are its JSON files (path -> rel),
    ``schemas`` the sniffed schema of every file of the build, ``parts`` its cell runs'
    parts as its listing holds them (rel -> path)."""
    name = folder.resolve().name  # once: a resolve reads every part of the path
    for path in sorted(files):
        if path not in schemas:
            continue
        schema, campaign_id = schemas[path]
        rel = files[path]
        kind = columns.kind_of_schema(schema)
        if campaign_id is not None and not isinstance(campaign_id, str):
            raise UsageError(
                f"{folder / rel}: campaign_id is {json.dumps(campaign_id)}, not a string; "
                "run ledger verify"
            )
        if campaign_id is not None and campaign_id != name:
            # Rows are keyed by the artifacts' own id: a copy under another name would be
            # merged with the original.
            raise UsageError(
                f"{folder / rel}: campaign_id {campaign_id!r} but the folder is "
                f"{name!r} (a copied campaign?); run ledger verify"
            )
        if kind in columns.RUN_FIELDS:
            digest = sources.fast.get(path) or sha256_file(path)[0]
            target = sources.cell_runs if kind == "cell-run" else sources.imported
            target.append((path, rel, digest))
            if schema == cell_records.CELL_RUN_V2:
                _parts(parts, path, rel, name, sources)
        elif kind == "manifest":
            document = _read_small(Path(path))
            if isinstance(document, dict):
                for entry in document.get("artifacts", []):
                    sources.artifacts.append(
                        (
                            document.get("campaign_id"),
                            entry.get("path"),
                            entry.get("sha256"),
                            entry.get("bytes"),
                            entry.get("schema"),
                        )
                    )
        elif kind == "benchmark-decision-summary":
            _summary(_read_small(Path(path)), sources)


def _parts(
    parts: dict[str, str], path: str, cell_rel: str, campaign: str, sources: _Sources
) -> None:
    """A v2 cell run's parts, as it lists them, each read where the campaign's listing
    found it (never a path the cell run names outside its campaign).

    Raises:
        DatabaseError: it lists a part that is not a file of its campaign.
    """
    document = _read_small(Path(path))
    listed = document.get("parts") if isinstance(document, dict) else None
    for number, part in enumerate(listed if isinstance(listed, list) else (), 1):
        rel = part.get("path") if isinstance(part, dict) else None
        digest = part.get("sha256") if isinstance(part, dict) else None
        if (
            not isinstance(rel, str)
            or not isinstance(digest, str)
            or rel not in parts
            or not cell_records.own_part(cell_rel, number, rel)
        ):
            shown = json.dumps(rel)[:80] if isinstance(rel, str) else "a part without a path"
            raise DatabaseError(
                f"{path}: lists {shown}, which is not its part {number} in its campaign (a "
                "regular file beside it); run ledger verify"
            )
        sources.parts.append((parts[rel], path, campaign, rel, digest))


def _load_parts(
    con: duckdb.DuckDBPyConnection, parts: list[tuple[str, str, str, str, str]], gaps: bool
) -> None:
    """Each part of a v2 cell run as one row holding its records (``requests``), as a v1
    cell run holds them, keyed by its cell run's file. Read here a part at a time, checked
    against the digest its cell run lists and for values DuckDB would convert, and handed
    to ``json_transform`` in batches: memory is that of a batch, not of the cell. The
    chunk times of its successful measured records are decoded into gaps on the way
    (:class:`~ledger.database._chunk_gaps.ChunkGaps`).

    Raises:
        DatabaseError: a part is missing, is not the one listed, or holds a record that is
            no JSON object or a value of another type than its field's.
        InvalidArtifact: a record's chunk times are not chunk times.
    """
    fields = {"requests": _WITHOUT_CHUNK_TIMES["requests"]}
    names = columns.read_json_columns(fields)
    con.execute(
        f"CREATE TEMP TABLE cell_part_files (requests {names['requests']}, filename VARCHAR, "
        "artifact VARCHAR, campaign_id VARCHAR)"
    )
    check = columns.checker(fields)
    decoder = ChunkGaps(con) if gaps else None
    batch: list[tuple[str, str, str, str]] = []
    size = 0
    try:
        for file, header, campaign, rel, listed in parts:
            text, records = _read_part(file, f"{campaign}/{rel}", listed, check, fields)
            if decoder is not None:
                decoder.add(header, records, f"{campaign}/{rel}")
            batch.append((text.decode("utf-8"), header, rel, campaign))
            size += len(text)
            if size >= _TRANSFORM_BATCH:
                _transform(con, "cell_part_files", fields, batch)
                batch, size = [], 0
        _transform(con, "cell_part_files", fields, batch)
        if decoder is not None:
            decoder.finish()
    finally:
        if decoder is not None:
            decoder.close()


def _read_part(
    file: str, where: str, listed: str, check: columns.Check, fields: columns.Fields
) -> tuple[bytes, list[Any]]:
    """A part's records as one document's text (``{"requests": [...]}``), and parsed.

    Raises:
        DatabaseError: the part is missing, is not the one listed, or holds a line that is
            no JSON object or a value of another type than its field's.
    """
    try:
        with open(file, "rb") as stream:
            data = stream.read(jsonio.MAX_JSON_BYTES + 1)
    except OSError as e:
        raise DatabaseError(f"{file}: {e.strerror or e}; run ledger verify") from None
    if hashlib.sha256(data).hexdigest() != listed:
        raise DatabaseError(
            f"{where}: not the part its cell run lists (its digest differs); run ledger verify"
        )
    text = b'{"requests":[' + b",".join(data.splitlines()) + b"]}"
    try:
        document = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise DatabaseError(
            f"{where}: a line is not one JSON object; ledger verify names it"
        ) from None
    if not check(document):
        found = columns.mistyped(document, fields)
        why = (
            "a line is no record"
            if found is None
            else f"{_in_part(found[0])}: {json.dumps(found[1])[:40]} is not {found[2]}"
        )
        raise DatabaseError(
            f"{file}: {why} ({cell_records.CELL_RUN_V2}); ledger verify names every "
            "artifact that breaks its schema"
        )
    records: list[Any] = document["requests"]
    return text, records


def _in_part(pointer: str) -> str:
    """``/requests/4/usage/prompt_tokens`` of a part's records -> ``line 5 at
    /usage/prompt_tokens``."""
    _, _, index, *inner = pointer.split("/", 3)
    return f"line {int(index) + 1}" + (f" at /{inner[0]}" if inner else "")


def _summary(document: Any, sources: _Sources) -> None:
    if not isinstance(document, dict):
        return
    campaign = document.get("campaign_id")
    for position, gate in enumerate(document.get("gates") or []):
        if isinstance(gate, dict):
            name = gate.get("name") or gate.get("gate") or gate.get("artifact")
            passed = gate.get("passed")
            if not isinstance(passed, bool):
                # Seeds give some gates a status word instead of a passed flag.
                passed = {"passed": True, "failed": False}.get(str(gate.get("status")))
            sources.gates.append(
                (
                    campaign,
                    position,
                    name,
                    passed,
                    gate.get("artifact"),
                    json.dumps(gate, sort_keys=True),
                )
            )
    decision = document.get("decision") or {}
    if isinstance(decision, dict):
        sources.decisions.append(
            (
                campaign,
                document.get("complete"),
                decision.get("promotion_authorized"),
                decision.get("decision_labels"),
                decision.get("evidence_labels"),
                str(decision["next_gate"]) if decision.get("next_gate") is not None else None,
            )
        )


def insert_rows(con: duckdb.DuckDBPyConnection, table: str, rows: Sequence[Sequence[Any]]) -> None:
    """Rows into a table in one statement, a list per column: DuckDB's executemany runs a
    statement per row (3 s for the artifacts of 150 campaigns)."""
    if not rows:
        return
    types = [row[1] for row in con.execute(f"DESCRIBE {table}").fetchall()]
    select = ", ".join(f"unnest(?::{kind}[])" for kind in types)
    con.execute(f"INSERT INTO {table} SELECT {select}", [list(c) for c in zip(*rows, strict=True)])


def _load_runs(
    con: duckdb.DuckDBPyConnection,
    table: str,
    files: list[tuple[str, str, str]],
    fields: columns.Fields,
    fast: dict[str, str],
) -> None:
    """Runs into ``table``: those in ``fast`` from their text, read here in batches, the
    rest (large ones, or ones whose values DuckDB would convert otherwise) by DuckDB's
    reader, which names a file it cannot convert.

    Raises:
        DatabaseError: a file read here is no longer the one sniffed.
    """
    names = columns.read_json_columns(fields)
    declared = ", ".join(f"{_identifier(n)} {t}" for n, t in names.items())
    con.execute(
        f"CREATE TEMP TABLE {table} ({declared}, filename VARCHAR, artifact VARCHAR, "
        "sha256 VARCHAR)"
    )
    slow = [f for f in files if f[0] not in fast]
    batch: list[tuple[str, str, str, str]] = []
    size = 0
    for file, rel, digest in files:
        if file not in fast:
            continue
        try:
            with open(file, "rb") as stream:
                data = stream.read(_SNIFF_IN_PYTHON + 1)
        except OSError as e:
            raise DatabaseError(f"{file}: {e.strerror or e}") from None
        if hashlib.sha256(data).hexdigest() != fast[file]:
            raise DatabaseError(f"{file}: changed while the database was being built")
        batch.append((data.decode("utf-8"), file, rel, digest))
        size += len(data)
        if size >= _TRANSFORM_BATCH:
            _transform(con, table, fields, batch)
            batch, size = [], 0
    _transform(con, table, fields, batch)
    if not slow:
        return
    con.execute(
        f"CREATE TEMP TABLE {table}_paths (filename VARCHAR, artifact VARCHAR, sha256 VARCHAR)"
    )
    insert_rows(con, f"{table}_paths", slow)
    con.execute(
        f"INSERT INTO {table} SELECT j.*, p.artifact, p.sha256 FROM read_json("
        f"?, columns={_columns(names)}, filename=true, "
        f"format='auto', maximum_object_size={_MAX_OBJECT_BYTES}) AS j "
        f"JOIN {table}_paths AS p USING (filename)",
        [[f for f, _, _ in slow]],
    )


def _refuse_out_of_bounds(
    con: duckdb.DuckDBPyConnection, table: str, kind: str, *, version: int = 1
) -> None:
    """Refuses a loaded run with a number its schema's bounds exclude (a negative token
    count): verify calls it ``schema-invalid``, so nothing is computed from it here.

    Raises:
        DatabaseError: naming the first such artifact, value and JSON pointer.
    """
    from ledger.formats.schema import SchemaId, load_schema

    schema_id = SchemaId(kind, version)
    if version == 1:
        found = record_bounds.bounds(columns.RUN_FIELDS[kind], load_schema(schema_id))
    else:
        # A part is a list of v2 records: the bounds of the record's schema, as items.
        record = load_schema(schema_id)["$defs"]["record"]
        found = record_bounds.bounds(
            {"requests": columns.RUN_FIELDS[kind]["requests"]},
            {"properties": {"requests": {"items": record}}},
        )
    for query, group in record_bounds.first_violation_query(table, found):
        row = con.execute(query).fetchone()
        if row is None:
            continue
        campaign, artifact, index, *values = row
        for bound, value in zip(group, values, strict=True):
            why = None if value is None else bound.broken(value)
            if why is not None:
                where = (
                    f"#{bound.pointer(index)}"
                    if version == 1
                    else f": {_in_part(bound.pointer(index))}"
                )
                raise DatabaseError(
                    f"{campaign}/{artifact}{where}: {why} ({schema_id}); "
                    "ledger verify names every artifact that breaks its schema"
                )


def _transform(
    con: duckdb.DuckDBPyConnection,
    table: str,
    fields: columns.Fields,
    batch: list[tuple[str, str, str, str]],
) -> None:
    if not batch:
        return
    texts, files, rels, digests = (list(c) for c in zip(*batch, strict=True))
    con.execute(
        f"INSERT INTO {table} SELECT unnest(json_transform(u.text, ?)), u.file, u.rel, u.sha256 "
        "FROM (SELECT unnest(?::VARCHAR[]) AS text, unnest(?::VARCHAR[]) AS file, "
        "unnest(?::VARCHAR[]) AS rel, unnest(?::VARCHAR[]) AS sha256) AS u",
        [columns.structure(fields), texts, files, rels, digests],
    )


def _identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


_WITHOUT_CHUNK_TIMES = {
    **columns.CELL_RUN_FIELDS,
    "requests": [
        {k: v for k, v in columns.CELL_RUN_FIELDS["requests"][0].items() if k != "chunks_ns"}
    ],
}
"""A cell run's loaded fields but a v1 record's chunk times: loaded only for the gaps (a
v2 record's are decoded from its part's text). Their types are still checked."""


def _load_gaps(con: duckdb.DuckDBPyConnection, sources: _Sources) -> None:
    """The gaps between chunks (``chunk_gaps_loaded``): a v2 cell run's decoded with its
    parts, a v1's from its chunk times, an imported run's from the tool's own.

    Raises:
        DatabaseError: a v1 record's chunk times out of order, or an imported gap below 0
            (verify reports both), naming the artifact.
    """
    con.execute(sql.CHUNK_GAPS_DDL)
    if sources.cell_runs:
        con.execute(sql.INSERT_PART_GAPS)
        con.execute(sql.V1_GAPS)
        found = con.execute(
            "SELECT c.campaign_id, c.artifact FROM v1_gaps AS g JOIN cell_run_files AS c "
            "ON c.rowid = g.id WHERE g.gap_us < 0 ORDER BY ALL LIMIT 1"
        ).fetchone()
        if found is not None:
            raise DatabaseError(
                f"{found[0]}/{found[1]}: a record's chunk times (chunks_ns) are out of order; "
                "ledger verify names every such record"
            )
        con.execute(sql.INSERT_V1_GAPS)
    if sources.imported:
        found = con.execute(
            "SELECT c.campaign_id, c.artifact, o - 1 FROM imported_run_files AS c, "
            "unnest(c.requests) WITH ORDINALITY AS u(r, o) WHERE list_min(r.itl_ms) < 0 "
            "ORDER BY ALL LIMIT 1"
        ).fetchone()
        if found is not None:
            raise DatabaseError(
                f"{found[0]}/{found[1]}#/requests/{found[2]}/itl_ms: a gap below 0 "
                "(anvil-serving.imported-run/v1); ledger verify names every artifact that "
                "breaks its schema"
            )
        con.execute(sql.INSERT_IMPORTED_GAPS)


def build(
    paths: Sequence[str | Path],
    *,
    database: str | Path = ":memory:",
    locked: bool = True,
    known: Known | None = None,
    gaps: bool = True,
) -> Database:
    """Builds the ledger database from evidence roots, campaign folders and Parquet exports.

    Args:
        database: a file to create instead of an in-memory database; it appears whole when
            the build succeeds, and not at all when it fails.
        locked: :meth:`Database.lock` it once built (false only to export it).
        known: what its JSON files are, already read (:data:`Known`); the others are read.
        gaps: load the gaps between chunks (``chunk_gaps``, the ``serving_metrics`` view's
            inter-token latency); false leaves both out, and the cost of decoding every
            record's chunk times (derive and verify read neither).

    Raises:
        UsageError: a path is not a folder, the same campaign is given twice, or
            ``database`` exists.
        DatabaseError: its files cannot be loaded.
    """
    if str(database) == ":memory:":
        return _connect_and_build(":memory:", paths, locked, known, gaps)
    with new_file(database) as temp:
        db = _connect_and_build(str(temp), paths, locked, known, gaps)
        db.close()
    return Database(duckdb.connect(str(database), read_only=True))


_READER_ADVICE = re.compile(r"\s*Try setting 'auto_detect'.*$", re.DOTALL)
_IN_FILE = re.compile(r'JSON transform error in file "([^"]*)"')


def _reader_error(message: str) -> str:
    """DuckDB's JSON reader error as one line for a user of the ledger: DuckDB's advice on
    its reader's options is for its own users; a file that does not load is one verify
    names."""
    text = _READER_ADVICE.sub("", " ".join(message.split()))
    if _IN_FILE.search(text):
        text += " (ledger verify names every artifact that breaks its schema)"
    return text


def _connect_and_build(
    database: str, paths: Sequence[str | Path], locked: bool, known: Known | None, gaps: bool
) -> Database:
    try:
        con = duckdb.connect(database)
        con.execute("SET enable_progress_bar = false")
    except duckdb.Error as e:
        raise DatabaseError(f"{database}: {' '.join(str(e).split())}") from None
    try:
        exports = _build(con, paths, known, gaps)
    except duckdb.Error as e:
        con.close()
        raise DatabaseError(_reader_error(str(e))) from None
    except (OSError, InvalidArtifact, SchemaError) as e:
        con.close()
        raise DatabaseError(str(e)) from None
    except BaseException:
        con.close()
        raise
    db = Database(con)
    if locked:
        db.lock(exports)
    return db


def _load_once(loaded: dict[str, Path], campaign: str, source: Path) -> None:
    """Records where a campaign comes from; refuses a second source (the same folder or
    export twice, two folders of one name, a campaign and its own export)."""
    if campaign in loaded:
        same = "given twice" if loaded[campaign] == source else "in two places"
        raise UsageError(
            f"campaign {campaign} {same} ({loaded[campaign]} and {source}); each campaign is "
            "loaded once"
        )
    loaded[campaign] = source


def _export_campaigns(con: duckdb.DuckDBPyConnection, export: Path) -> list[str]:
    """The campaigns an export holds: those with request rows, and those with artifacts.

    Raises:
        UsageError: the folder has the export's marker but not its tables.
    """
    missing = [name for name in EXPORT_TABLES if not (export / f"{name}.parquet").is_file()]
    if missing:
        raise UsageError(
            f"{export}: holds {EXPORT_MARKER} but not {', '.join(f'{m}.parquet' for m in missing)}"
            " (not a whole ledger export)"
        )
    sources = [(export / "artifacts.parquet").as_posix()]
    rows = export / "request_rows"
    if any(rows.glob("*/*/*.parquet")):
        sources.append((rows / "**" / "*.parquet").as_posix())
    found = con.execute(
        "SELECT DISTINCT campaign_id FROM read_parquet(?, union_by_name = true) "
        "WHERE campaign_id IS NOT NULL ORDER BY 1",
        [sources],
    ).fetchall()
    return [str(r[0]) for r in found]


def _build(
    con: duckdb.DuckDBPyConnection,
    paths: Sequence[str | Path],
    known: Known | None = None,
    gaps: bool = True,
) -> list[Path]:
    """Loads every path; returns the exports, which stay where they are."""
    sources = _Sources()
    loaded: dict[str, Path] = {}
    campaigns: list[tuple[Path, dict[str, str], dict[str, str]]] = []
    for raw in paths:
        path = Path(raw)
        if not path.is_dir():
            reason = "not a folder" if os.path.lexists(path) else "no such folder"
            raise UsageError(f"{raw}: {reason} (an evidence root, a campaign or an export)")
        if (path / EXPORT_MARKER).exists():
            for name in _export_campaigns(con, path):
                _load_once(loaded, name, path.resolve())
            sources.exports.append(path.resolve())
            continue
        try:
            folders = tree.campaign_folders(path)
            for folder in folders:
                if tree.holds_campaigns(folder):
                    raise UsageError(
                        f"{folder}: a folder of campaigns, not a campaign; give it as the "
                        "evidence root"
                    )
            # A subfolder that is no campaign (tickets/, notes) holds no rows: it is left
            # out, and a path holding no campaign at all is refused, never read as empty.
            folders = [f for f in folders if tree.is_campaign(f)]
        except OSError as e:
            raise UsageError(f"{raw}: cannot be read: {e.strerror or e}") from None
        if not folders:
            # Verify calls it no-campaign; loading nothing would answer every query empty.
            raise UsageError(
                f"{raw}: no campaign folder here (a campaign holds manifest.json, SHA256SUMS, "
                "summary.json or run-manifest.json, or is named YYYY-MM-DD-words)"
            )
        for folder in folders:
            _load_once(loaded, folder.resolve().name, folder.resolve())
            listing = tree.list_campaign(folder)
            # A sigstore bundle is a signature, never an artifact (verify checks it).
            jsons = {
                e.path: e.rel
                for e in listing.entries
                if e.rel.endswith(".json") and not e.rel.endswith(BUNDLE_SUFFIX)
            }
            held = {e.rel: e.path for e in listing.entries if cell_records.is_part(e.rel)}
            campaigns.append((folder, jsons, held))
    # One sniff of every campaign's files: DuckDB's reader costs milliseconds per call.
    files = [p for _, jsons, _ in campaigns for p in jsons]
    schemas = _schemas(con, files, sources.fast, known)
    for folder, jsons, held in campaigns:
        _campaign(folder, jsons, schemas, sources, held)
    con.execute(sql.REQUEST_ROWS_DDL)
    con.execute(sql.TABLES_DDL)
    fields = columns.CELL_RUN_FIELDS if gaps else _WITHOUT_CHUNK_TIMES
    _load_runs(con, "cell_run_files", sources.cell_runs, fields, sources.fast)
    _load_runs(
        con, "imported_run_files", sources.imported, columns.IMPORTED_RUN_FIELDS, sources.fast
    )
    _load_parts(con, sources.parts, gaps)
    if sources.cell_runs:
        _refuse_out_of_bounds(con, "cell_run_files", "cell-run")
    if sources.parts:
        _refuse_out_of_bounds(con, "cell_part_files", "cell-run", version=2)
    if sources.imported:
        _refuse_out_of_bounds(con, "imported_run_files", "imported-run")
    if gaps:
        _load_gaps(con, sources)
    if sources.cell_runs:
        con.execute(sql.INSERT_CELL_RUN_ROWS)
        con.execute(sql.INSERT_CELL_PART_ROWS)
        con.execute(sql.CELL_SETTINGS)
    else:
        con.execute(sql.CELL_SETTINGS_EMPTY)
    if sources.imported:
        con.execute(sql.INSERT_IMPORTED_ROWS)
        con.execute(sql.IMPORTED_SETTINGS)
    # Exports are read in place, not copied: DuckDB scans Parquet about as fast as its
    # own tables, and a 10-million-row export then opens in milliseconds.
    for table in PARTITIONED_TABLES if gaps else PARTITIONED_TABLES[:2]:
        parts = [f"SELECT * FROM {table}_loaded"]
        names = [d[0] for d in con.execute(f"SELECT * FROM {table}_loaded LIMIT 0").description]
        for export in sources.exports:
            if not any((export / table).glob("*/*/*.parquet")):
                continue  # an export written before the table existed
            pattern = (export.resolve() / table / "**" / "*.parquet").as_posix()
            # The partition values are names: left to DuckDB's type guess, an arm named
            # "2026-1-1" would read back as the date 2026-01-01.
            scan = (
                f"read_parquet({_quote(pattern)}, hive_partitioning=true, "
                "hive_types={'campaign_id': VARCHAR, 'arm': VARCHAR})"
            )
            present = {d[0] for d in con.execute(f"SELECT * FROM {scan} LIMIT 0").description}
            # An export written before a column existed reads it as NULL.
            selected = [n if n in present else f"NULL AS {n}" for n in names]
            parts.append(f"SELECT {', '.join(selected)} FROM {scan}")
        con.execute(f"CREATE VIEW {table} AS " + " UNION ALL ".join(parts))
    for export in sources.exports:
        for table in EXPORT_TABLES:
            source = _quote(export.resolve() / (table + ".parquet"))
            con.execute(f"INSERT INTO {table} SELECT * FROM read_parquet({source})")
    for table, rows in (
        ("artifacts", sources.artifacts),
        ("gates", sources.gates),
        ("decisions", sources.decisions),
    ):
        insert_rows(con, table, rows)
    con.execute(sql.REQUESTS_VIEW)
    con.execute(sql.CELLS_VIEW)
    if gaps:
        con.execute(sql.SERVING_METRICS_VIEW)
    return sources.exports
