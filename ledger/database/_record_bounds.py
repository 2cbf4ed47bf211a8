"""The numeric bounds a run artifact's schema sets on the values the database loads.

Verify validates every artifact against its schema; the database loads run artifacts by
DuckDB's reader, which checks types but not bounds. Both read one definition of a valid
record, the schema: the bounds of every loaded number are read from it here, as SQL over
the loaded rows, so that ``sql`` and ``derive`` refuse what verify calls
``schema-invalid`` and compute from nothing it refuses.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs


@attrs.frozen
class Bound:
    """The bounds of one loaded number."""

    path: tuple[str, ...]
    """Its field names from the document's top (inside ``listed`` when that is set)."""
    listed: str | None
    """The top-level list the value is an item's field of (``requests``), or None."""
    minimum: float | None
    maximum: float | None
    exclusive_minimum: float | None
    exclusive_maximum: float | None

    def pointer(self, index: int | None) -> str:
        """Its JSON pointer in a document (``index``: the list item's)."""
        head = f"/{self.listed}/{index}" if self.listed is not None else ""
        return head + "".join(f"/{p}" for p in self.path)

    def broken(self, value: float) -> str | None:
        """How ``value`` breaks the bounds, in the validator's words; None if it does not."""
        if self.minimum is not None and value < self.minimum:
            return f"{_shown(value)} is less than the minimum of {_shown(self.minimum)}"
        if self.maximum is not None and value > self.maximum:
            return f"{_shown(value)} is greater than the maximum of {_shown(self.maximum)}"
        if self.exclusive_minimum is not None and value <= self.exclusive_minimum:
            limit = _shown(self.exclusive_minimum)
            return f"{_shown(value)} is less than or equal to the minimum of {limit}"
        if self.exclusive_maximum is not None and value >= self.exclusive_maximum:
            limit = _shown(self.exclusive_maximum)
            return f"{_shown(value)} is greater than or equal to the maximum of {limit}"
        return None


def _shown(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


_KEYS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def bounds(fields: dict[str, Any], schema: dict[str, Any]) -> list[Bound]:
    """Every loaded number (``fields``, as ``columns.CELL_RUN_FIELDS`` nests them) that its
    ``schema`` bounds, in the fields' order."""
    return list(_walk(fields, schema, (), None))


def _walk(spec: Any, node: Any, path: tuple[str, ...], listed: str | None) -> Iterator[Bound]:
    if not isinstance(node, dict):
        return
    if isinstance(spec, str):
        if spec in ("BIGINT", "DOUBLE") and any(k in node for k in _KEYS):
            yield Bound(path, listed, *(node.get(k) for k in _KEYS))
        return
    if isinstance(spec, list):
        # One level of lists: a run's requests, a top-level field of the document.
        if listed is None and len(path) == 1:
            yield from _walk(spec[0], node.get("items"), (), path[0])
        return
    properties = node.get("properties")
    if not isinstance(properties, dict):
        return
    for name, inner in spec.items():
        yield from _walk(inner, properties.get(name), (*path, name), listed)


def _column(table: str, path: tuple[str, ...]) -> str:
    return ".".join([table, *(f'"{p}"' for p in path)])


def _violated(bound: Bound, value: str) -> str:
    tests = []
    if bound.minimum is not None:
        tests.append(f"{value} < {bound.minimum!r}")
    if bound.maximum is not None:
        tests.append(f"{value} > {bound.maximum!r}")
    if bound.exclusive_minimum is not None:
        tests.append(f"{value} <= {bound.exclusive_minimum!r}")
    if bound.exclusive_maximum is not None:
        tests.append(f"{value} >= {bound.exclusive_maximum!r}")
    return " OR ".join(tests)


def first_violation_query(table: str, found: list[Bound]) -> list[tuple[str, list[Bound]]]:
    """Queries giving the first loaded row that breaks a bound: ``campaign_id``,
    ``artifact``, the list index (or NULL), then each bound's value, in ``found``'s order;
    one query for the document's own fields, one for each top-level list's items."""
    groups: dict[str | None, list[Bound]] = {}
    for bound in found:
        groups.setdefault(bound.listed, []).append(bound)
    queries = []
    for listed, group in groups.items():
        if listed is None:
            values = [_column("t", b.path) for b in group]
            source, index = f"{table} AS t", "NULL"
        else:
            values = [_column("u.r", b.path) for b in group]
            source = f'{table} AS t, unnest(t."{listed}") WITH ORDINALITY AS u(r, o)'
            index = "u.o - 1"
        where = " OR ".join(f"({_violated(b, v)})" for b, v in zip(group, values, strict=True))
        query = (
            f"SELECT t.campaign_id, t.artifact, {index}, {', '.join(values)} FROM {source} "
            f"WHERE {where} ORDER BY t.campaign_id, t.artifact, 3 LIMIT 1"
        )
        queries.append((query, group))
    return queries
