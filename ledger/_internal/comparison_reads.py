"""What a derivation reads from the database, for any number of comparisons at once.

Each comparison needs its two arms' cells (statistics and settings), every cell's measured
values (for the bootstrap) and the request-by-request evidence that the arms ran the same
prompts. :class:`Reads` runs one query for each of the three over every comparison it is
given, and answers each comparison from those: ``ledger derive`` gives it one comparison,
``ledger verify`` every comparison of the tree it recomputes (one query per comparison
had cost a scan of every campaign's rows, each time).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from ledger.database import Database, insert_rows

RADIX_GROUPS = int(np.iinfo(np.uint16).max)
"""The most (cell, arm) groups whose numbers fit the 16 bits of a radix sort."""

Arms = tuple[str, str]
Comparison = tuple[str, Arms]
"""A campaign id and its (baseline, candidate) arms."""
CellKey = tuple[str, str]
"""(stage, cell)"""

_CELLS = (
    "SELECT c.campaign_id, c.arm, c.stage, c.cell, c.stage_kind, c.context_target, "
    "c.concurrency, c.thinking, c.n, c.failed, {medians}, c.throughput_tok_s, "
    "c.median_output_tokens, c.actual_prompt_tokens, c.lengths_not_as_requested, "
    "s.controlled_output, s.max_tokens, s.temperature, s.seed, s.prefix, "
    "s.warmup AS warmup_requests, s.identity, s.metrics_available, s.prefix_cache_hit_rate, "
    "s.artifact, s.sha256, s.status "
    "FROM cells AS c LEFT JOIN cell_settings AS s USING (campaign_id, arm, stage, cell) "
    "JOIN wanted_arms AS w USING (campaign_id, arm) "
    "ORDER BY c.campaign_id, c.arm, c.stage, c.context_target, c.concurrency, c.thinking, c.cell"
)
_EVIDENCE_COLUMNS = (
    "stage, cell, request_index, prompt_sha256, prompt_tokens, completion_tokens, ok"
)


class DuplicateCell(ValueError):
    """Two artifacts hold one cell of one arm: their requests would be pooled as one cell's."""


class Reads:
    """The cells, values and prompt evidence of ``comparisons``, read on first use."""

    def __init__(
        self,
        db: Database,
        comparisons: Sequence[Comparison],
        columns: Sequence[str],
        fallback: tuple[str, str],
    ) -> None:
        """``columns``: the request columns whose values every comparison bootstraps;
        ``fallback``: (a column of those, another) the other is bootstrapped too where a
        common cell has no median of the first. Each column's median (``_p50``) is read
        with the cells."""
        self._db = db
        self._comparisons = list(dict.fromkeys(comparisons))
        self._columns = tuple(columns)
        self._fallback = fallback
        self._cells: dict[tuple[str, str], list[dict[str, Any]]] | None = None
        self._split: dict[Comparison, list[dict[CellKey, dict[str, Any]]] | DuplicateCell] = {}
        self._values: dict[Comparison, dict[tuple[str, int], list[np.ndarray[Any, Any]]]] = {}
        self._evidence: dict[Comparison, dict[CellKey, tuple[int, int, int]]] | None = None
        self._known = set(self._comparisons)

    def _read_for(self, comparison: Comparison) -> None:
        # A comparison never read would answer as one without cells, values or evidence:
        # a prompt check that passes for want of rows.
        if comparison not in self._known:
            raise ValueError(f"{comparison!r} is not one of the comparisons these reads hold")

    def cells(self, comparison: Comparison) -> list[dict[CellKey, dict[str, Any]]]:
        """Per arm, its cells by (stage, cell), in stage, context, concurrency, thinking
        and cell order.

        Raises:
            DuplicateCell: two artifacts hold one cell of an arm.
            ValueError: ``comparison`` is not one these reads were made for (so are the
                other readers').
        """
        self._read_for(comparison)
        split = self._split.get(comparison)
        if split is None:
            split = self._split[comparison] = self._split_cells(comparison)
        if isinstance(split, DuplicateCell):
            raise split
        return split

    def _split_cells(
        self, comparison: Comparison
    ) -> list[dict[CellKey, dict[str, Any]]] | DuplicateCell:
        if self._cells is None:
            self._cells = self._read_cells()
        campaign, arms = comparison
        found: list[dict[CellKey, dict[str, Any]]] = []
        for arm in arms:
            mine: dict[CellKey, dict[str, Any]] = {}
            for row in self._cells.get((campaign, arm), ()):
                key = (row["stage"], row["cell"])
                same = mine.get(key)
                if same is not None:
                    # Either file named its source; pooled, neither would be one cell.
                    return DuplicateCell(
                        f"two artifacts hold cell {key[0]}/{key[1]} of arm {arm!r} "
                        f"({', '.join(sorted(str(r['artifact']) for r in (same, row)))}); a "
                        "cell is one artifact"
                    )
                mine[key] = row
            found.append(mine)
        return found

    def _read_cells(self) -> dict[tuple[str, str], list[dict[str, Any]]]:
        con = self._db.connection
        con.execute("CREATE OR REPLACE TEMP TABLE wanted_arms (campaign_id VARCHAR, arm VARCHAR)")
        pairs = {(campaign, arm) for campaign, arms in self._comparisons for arm in arms}
        insert_rows(con, "wanted_arms", sorted(pairs))
        # Only the columns a comparison uses: DuckDB then skips the view's other aggregates.
        medians = ", ".join(f"c.{c}_p50" for c in (*self._columns, self._fallback[1]))
        rows = self._db.query(_CELLS.format(medians=medians)).to_json()
        out: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for key, group in itertools.groupby(rows, lambda r: (r["campaign_id"], r["arm"])):
            out[key] = list(group)
        return out

    def keys(self, comparison: Comparison) -> list[CellKey]:
        """The cells both arms ran, in the baseline's order (none when cells conflict)."""
        try:
            baseline, candidate = self.cells(comparison)
        except DuplicateCell:
            return []
        return [k for k in baseline if k in candidate]

    def columns(self, comparison: Comparison) -> tuple[str, ...]:
        """The columns this comparison bootstraps."""
        missing, extra = self._fallback
        baseline, candidate = self.cells(comparison)
        rows = [row for key in self.keys(comparison) for row in (baseline[key], candidate[key])]
        if any(row.get(f"{missing}_p50") is None for row in rows):
            # Only then: the draws serve every column, so one more would move every interval.
            return (*self._columns, extra)
        return self._columns

    def values(self, comparison: Comparison) -> dict[tuple[str, int], list[np.ndarray[Any, Any]]]:
        """Per (column of :meth:`columns`, arm role): each common cell's successful
        measured values (unsorted), in :meth:`keys` order."""
        self._read_for(comparison)
        if comparison not in self._values:
            self._read_values()
        return self._values[comparison]

    def _read_values(self) -> None:
        # Every comparison's (cell, arm) groups numbered in turn: one scan of the rows.
        wanted: list[tuple[int, str, str, str, str]] = []
        spans: dict[Comparison, tuple[int, int]] = {}
        needed: dict[Comparison, tuple[str, ...]] = {}
        for comparison in self._comparisons:
            campaign, arms = comparison
            keys = self.keys(comparison)
            needed[comparison] = self.columns(comparison) if keys else self._columns
            first = len(wanted)
            for position, (stage, cell) in enumerate(keys):
                for role, arm in enumerate(arms):
                    wanted.append((first + 2 * position + role, campaign, arm, stage, cell))
            spans[comparison] = (first, len(keys))
        con = self._db.connection
        con.execute(
            "CREATE OR REPLACE TEMP TABLE wanted (grp BIGINT, campaign_id VARCHAR, "
            "arm VARCHAR, stage VARCHAR, cell VARCHAR)"
        )
        insert_rows(con, "wanted", wanted)
        # NULL as NaN: plain float arrays come back instead of masked ones, much cheaper.
        read = list(dict.fromkeys(c for found in needed.values() for c in found))
        columns = ", ".join(f"coalesce(r.{c}, 'NaN'::DOUBLE) AS {c}" for c in read)
        # numpy's stable sort of 16-bit integers is a radix sort: O(n), where a comparison
        # sort of 10 million group numbers took a second.
        kind = "USMALLINT" if len(wanted) <= RADIX_GROUPS else "BIGINT"
        result = con.execute(
            f"SELECT w.grp::{kind} AS grp, {columns} FROM request_rows AS r "
            "JOIN wanted AS w USING (campaign_id, arm, stage, cell) "
            "WHERE r.ok AND NOT r.warmup"
        ).fetchnumpy()
        group = np.asarray(result["grp"])
        order = np.argsort(group, kind="stable")
        bounds = np.concatenate(([0], np.cumsum(np.bincount(group, minlength=len(wanted)))))
        by_group = {c: np.asarray(result[c], dtype=np.float64)[order] for c in read}
        for comparison, (first, count) in spans.items():
            out: dict[tuple[str, int], list[np.ndarray[Any, Any]]] = {}
            for column in needed[comparison]:
                values = by_group[column]
                for role in (0, 1):
                    cells = []
                    for i in range(count):
                        index = first + 2 * i + role
                        part = values[bounds[index] : bounds[index + 1]]
                        cells.append(part[~np.isnan(part)])
                    out[(column, role)] = cells
            self._values[comparison] = out

    def evidence(self, comparison: Comparison) -> dict[CellKey, tuple[int, int, int]]:
        """Per (stage, cell): measured requests whose prompt digest, whose actual prompt
        token count, and whose completion token count differ between the arms (or exist on
        one side only). Imported results have no digests: their lengths are what can be
        compared, the output's only where the request succeeded on both arms (a failure
        writes none)."""
        self._read_for(comparison)
        if self._evidence is None:
            self._evidence = self._read_evidence()
        return self._evidence.get(comparison, {})

    def _read_evidence(self) -> dict[Comparison, dict[CellKey, tuple[int, int, int]]]:
        con = self._db.connection
        con.execute(
            "CREATE OR REPLACE TEMP TABLE wanted_pairs (job BIGINT, campaign_id VARCHAR, "
            "baseline VARCHAR, candidate VARCHAR)"
        )
        insert_rows(
            con,
            "wanted_pairs",
            [(job, c, a, b) for job, (c, (a, b)) in enumerate(self._comparisons)],
        )
        side = (
            "SELECT p.job, {columns} FROM request_rows AS r JOIN wanted_pairs AS p "
            "ON r.campaign_id = p.campaign_id AND r.arm = p.{arm} WHERE NOT r.warmup"
        )
        rows = self._db.query(
            f"WITH a AS ({side.format(columns=_EVIDENCE_COLUMNS, arm='baseline')}), "
            f"b AS ({side.format(columns=_EVIDENCE_COLUMNS, arm='candidate')}) "
            "SELECT coalesce(a.job, b.job), coalesce(a.stage, b.stage), "
            "coalesce(a.cell, b.cell), "
            "count(*) FILTER (WHERE a.prompt_sha256 IS DISTINCT FROM b.prompt_sha256 "
            "OR a.prompt_sha256 IS NULL), "
            "count(*) FILTER (WHERE a.prompt_tokens IS DISTINCT FROM b.prompt_tokens), "
            "count(*) FILTER (WHERE coalesce(a.ok AND b.ok, true) "
            "AND a.completion_tokens IS DISTINCT FROM b.completion_tokens) "
            "FROM a FULL JOIN b USING (job, stage, cell, request_index) GROUP BY ALL"
        ).rows
        out: dict[Comparison, dict[CellKey, tuple[int, int, int]]] = {}
        for job, stage, cell, *counts in rows:
            out.setdefault(self._comparisons[job], {})[(stage, cell)] = (
                counts[0],
                counts[1],
                counts[2],
            )
        return out
