"""The points of a history: each verified campaign's cells, read from their raw request
rows, grouped into series by what they measured and put in time order.

A point is one cell of one arm of one campaign and one metric: the cell's median over its
successful measured requests (the ``cells`` view of :mod:`ledger.database`). Its series
key is what it measured: the named identity fields (:data:`NAMED`; ``model`` falls back to
the model the endpoint served), the workload shape (:data:`WORKLOAD`), every other field of
the arm's identity (nested ones dotted: ``simulated_profile.decode_tok_s``) and the metric,
so that two arms of an A/B are two series. A field left out of the key with ``across`` (a
dotted prefix leaves out all beneath it) is carried on the point instead, so that a step
can name what changed across it.
"""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import duckdb

from ledger.database import build
from ledger.errors import Error, UsageError
from ledger.evidence import tree
from ledger.findings import Finding
from ledger.verification import verify_paths

__all__ = [
    "METRICS",
    "NAMED",
    "WORKLOAD",
    "Excluded",
    "HistoryError",
    "Point",
    "Reading",
    "Series",
    "read_series",
]

NAMED = ("model", "revision", "engine", "engine_version", "gpu")
"""The identity fields of a series key, in its order; ``across`` may leave any out."""
WORKLOAD = ("stage", "context_target", "concurrency", "rate", "thinking", "max_tokens")
"""The workload shape of a series key: the stage's name, the cell's context target,
concurrency, open-loop rate (requests per second; none for closed loop), thinking mode and
output length (max_tokens)."""
METRICS: dict[str, tuple[str, str]] = {
    "decode_tok_s": ("tok/s", "higher"),
    "effective_prefill_tok_s": ("tok/s", "higher"),
    "throughput_tok_s": ("tok/s", "higher"),
    "ttft_ms": ("ms", "lower"),
    "e2e_ms": ("ms", "lower"),
}
"""metric -> (unit, which way is better): a step the wrong way is a regression."""

# The cells view names a median by its percentile; throughput is the cell's own.
_COLUMNS = {m: f"{m}_p50" if m != "throughput_tok_s" else m for m in METRICS}

_CELLS = f"""
SELECT c.campaign_id, c.arm, c.stage, c.cell, c.context_target, c.concurrency, c.thinking,
       c.n - c.failed AS successful, s.rate, s.max_tokens, s.identity, s.artifact,
       c.stage_kind, {", ".join(f"c.{column}" for column in _COLUMNS.values())}
FROM cells AS c
LEFT JOIN cell_settings AS s USING (campaign_id, arm, stage, cell)
ORDER BY c.campaign_id, c.arm, c.stage, c.cell
"""


class HistoryError(Error):
    """The campaigns that passed verification cannot be read (exit status 1)."""


@attrs.frozen
class Excluded:
    """A campaign left out of the history, and why."""

    campaign: str
    """Its folder's name (or, for findings outside any campaign, where they are)."""
    reason: str
    """One line: the first error finding of verify, or ``no raw request rows``."""


@attrs.frozen
class Point:
    """One metric of one cell of one campaign's arm."""

    campaign: str
    arm: str
    cell: str
    start: str | None
    """When the campaign started (its earliest cell, UTC, ISO 8601); None if unrecorded."""
    value: float
    """The cell's median over its successful measured requests."""
    successful: int
    """Its successful measured requests."""
    carried: Mapping[str, Any]
    """Identity fields that are not in the series key, nested objects flattened to dotted
    keys (``simulated_profile.decode_tok_s``)."""


@attrs.frozen
class Series:
    """The points of one key and metric, in time order."""

    key: Mapping[str, Any]
    """The key's fields, in :data:`NAMED` then :data:`WORKLOAD` order (None: not recorded)."""
    metric: str
    points: tuple[Point, ...]


@attrs.frozen
class Reading:
    """What a history is computed from."""

    series: tuple[Series, ...]
    campaigns: tuple[tuple[str, str | None], ...]
    """Every campaign read, in time order, with its start."""
    excluded: tuple[Excluded, ...]
    """Campaigns (and other places) that failed verification."""
    skipped: tuple[Excluded, ...]
    """Verified campaigns with no raw request rows (a summary alone)."""


def _folders(root: Path) -> list[Path]:
    """The campaign folders verify reads under ``root``: ``root`` itself when it is one,
    else each folder in it (hidden ones and symlinks aside).

    Raises:
        UsageError: there is none.
    """
    if tree.is_campaign(root):
        return [root]
    try:
        folders = tree.campaign_folders(root)
    except OSError as e:
        raise UsageError(f"{root}: cannot be read: {e.strerror or e}") from None
    if not folders:
        raise UsageError(
            f"{root}: no campaign folder here (an evidence root holds campaign folders)"
        )
    return folders


def _first_errors(findings: Iterable[Finding]) -> dict[str, Finding]:
    """Per place (a campaign's folder name), its first error finding in verify's order."""
    first: dict[str, Finding] = {}
    for finding in findings:
        if finding.severity != "error":
            continue
        place = Path(finding.campaign).name if finding.campaign else finding.path
        first.setdefault(place, finding)
    return first


def _reason(finding: Finding) -> str:
    where = finding.path.removeprefix(finding.campaign + "/") if finding.campaign else finding.path
    where += f"#{finding.pointer}" if finding.pointer else ""
    return f"{finding.code} {where}: {finding.message}"


def _left_out(field: str, across: Sequence[str]) -> bool:
    """Whether ``across`` leaves ``field`` out of the key: named, or a dotted prefix of it."""
    return any(field == a or field.startswith(a + ".") for a in across)


def _flatten(value: Any, prefix: str, into: dict[str, Any]) -> None:
    if isinstance(value, dict) and value:
        for key in sorted(value):
            _flatten(value[key], f"{prefix}.{key}" if prefix else str(key), into)
    elif isinstance(value, list | dict):
        into[prefix] = json.dumps(value, sort_keys=True, ensure_ascii=False)
    else:
        into[prefix] = value


def _utc(text: Any) -> str | None:
    """An ISO 8601 time in UTC, to compare; None for anything else."""
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None  # a time without an offset cannot be placed against another
    # Microseconds always written: "00Z" would sort after "00.5Z".
    utc = moment.astimezone(datetime.UTC)
    return utc.isoformat(timespec="microseconds").replace("+00:00", "Z")


def _headers(files: Sequence[str]) -> dict[str, tuple[str | None, str | None]]:
    """file -> (started_at, the endpoint's model) of each cell run, read by DuckDB, which
    streams a large run rather than holding it (neither is in the database's tables)."""
    if not files:
        return {}
    connection = duckdb.connect(":memory:")
    try:
        rows = connection.execute(
            "SELECT filename, started_at, endpoint.model FROM read_json(?, columns={"
            "'started_at': 'VARCHAR', 'endpoint': 'STRUCT(model VARCHAR)'}, filename=true, "
            "format='auto', maximum_object_size=1073741824)",
            [list(files)],
        ).fetchall()
    except duckdb.Error as e:
        raise HistoryError(f"cell runs cannot be read: {' '.join(str(e).split())}") from None
    finally:
        connection.close()
    return {str(f): (s, m) for f, s, m in rows}


def _key_order(value: Any) -> tuple[int, Any]:
    if value is None:
        return (0, 0)
    if isinstance(value, bool | int | float):
        return (1, float(value))
    if isinstance(value, str):
        return (2, value)
    return (3, json.dumps(value, sort_keys=True))


def read_series(root: str | Path, *, across: Sequence[str] = ()) -> Reading:
    """Verifies ``root`` and reads the series of every campaign that passed.

    Args:
        root: an evidence root (a folder of campaign folders) or one campaign folder.
        across: identity fields to leave out of the key: named (:data:`NAMED`) or any
            other, dotted where nested (a prefix leaves out every field beneath it).

    Raises:
        UsageError: ``root`` is not a folder, holds no campaign, or ``across`` names a
            field that is neither named nor in any campaign's identity.
        HistoryError: a campaign that passed verification cannot be read.
    """
    path = Path(root)
    if not path.is_dir():
        reason = "not a folder" if path.exists() or path.is_symlink() else "no such folder"
        raise UsageError(f"{root}: {reason}")
    folders = _folders(path)
    report = verify_paths([str(root)])
    failed = _first_errors(report.findings)
    excluded = [Excluded(place, _reason(f)) for place, f in sorted(failed.items())]
    passed = {f.name: f for f in folders if f.name not in failed and tree.is_campaign(f)}
    cells = _cells(list(passed.values()))
    headers = _headers(
        sorted(
            str(passed[c["campaign_id"]] / c["artifact"])
            for c in cells
            if c["artifact"] and c["stage_kind"] != "imported"
        )
    )
    for cell in cells:
        file = str(passed[cell["campaign_id"]] / cell["artifact"]) if cell["artifact"] else ""
        cell["started_at"], cell["served"] = headers.get(file, (None, None))
    starts = _starts(cells)
    skipped = [Excluded(name, "no raw request rows") for name in passed if name not in starts]
    named = [f for f in NAMED if f not in across]
    fields: dict[str, Any] = {}
    grouped: dict[tuple[str, str], list[tuple[tuple[Any, ...], Point]]] = {}
    keys: dict[tuple[str, str], dict[str, Any]] = {}
    for cell in cells:
        identity = json.loads(cell["identity"]) if cell["identity"] else {}
        if not isinstance(identity, dict):
            identity = {}
        if identity.get("model") is None and cell["served"] is not None:
            identity = {**identity, "model": cell["served"]}
        rest: dict[str, Any] = {}
        _flatten({k: v for k, v in identity.items() if k not in NAMED}, "", rest)
        fields.update(rest)
        key = {f: identity.get(f) for f in named} | {f: cell[f] for f in WORKLOAD}
        key |= {f: v for f, v in rest.items() if not _left_out(f, across)}
        carried = {f: identity.get(f) for f in NAMED if f in across}
        carried |= {f: v for f, v in rest.items() if _left_out(f, across)}
        text = json.dumps(key, sort_keys=True, ensure_ascii=False)
        campaign, start = cell["campaign_id"], starts.get(cell["campaign_id"])
        order = (*_time_order(campaign, start), cell["arm"], cell["cell"])
        for metric, column in _COLUMNS.items():
            value = cell[column]
            if value is None or not 0 < value < math.inf:
                continue  # no successful request, or no time to divide by
            point = Point(
                campaign,
                cell["arm"],
                cell["cell"],
                start,
                float(value),
                cell["successful"],
                carried,
            )
            grouped.setdefault((text, metric), []).append((order, point))
            keys[(text, metric)] = key
    unknown = [a for a in across if a not in NAMED and not any(_left_out(f, [a]) for f in fields)]
    if unknown and cells:
        raise UsageError(
            f"--across {unknown[0]}: no campaign's identity has it (named fields: "
            f"{', '.join(NAMED)}; or any identity field, dotted where nested)"
        )
    series = [
        Series(keys[k], k[1], tuple(p for _, p in sorted(points, key=lambda o: o[0])))
        for k, points in grouped.items()
    ]
    metrics = list(METRICS)
    series.sort(key=lambda s: ([_key_order(v) for v in s.key.values()], metrics.index(s.metric)))
    read = sorted(starts.items(), key=lambda c: _time_order(*c))
    return Reading(tuple(series), tuple(read), tuple(excluded), tuple(skipped))


def _cells(folders: Sequence[Path]) -> list[dict[str, Any]]:
    """Every cell of the campaigns in ``folders``, with its settings and medians.

    Raises:
        HistoryError: the database cannot be built from them.
    """
    if not folders:
        return []
    try:
        database = build(folders, gaps=False)
    except Error as e:
        raise HistoryError(e.diagnostics()) from None
    try:
        table = database.query(_CELLS)
    finally:
        database.close()
    return [dict(zip(table.columns, row, strict=True)) for row in table.rows]


def _starts(cells: Iterable[Mapping[str, Any]]) -> dict[str, str | None]:
    """Per campaign with cells, its earliest cell's start (None if none records one)."""
    starts: dict[str, str | None] = {}
    for cell in cells:
        campaign, moment = cell["campaign_id"], _utc(cell["started_at"])
        known = starts.get(campaign)
        if moment is not None and (known is None or moment < known):
            starts[campaign] = moment
        else:
            starts.setdefault(campaign, None)
    return starts


def _time_order(campaign: str, start: str | None) -> tuple[str, bool, str, str]:
    """The campaign's date (from its id), then its start, then its id: a campaign whose
    start is unrecorded comes first on its date."""
    return (campaign[:10], start is not None, start or "", campaign)
