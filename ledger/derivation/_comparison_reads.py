"""What a derivation reads from the database, for any number of comparisons at once.

Each comparison needs its two arms' cells (statistics and settings), each cell's measured
values as far as the bootstrap's resamples reach (a window about the median, or the whole
cell where a window would not do) and the request-by-request evidence that the arms ran
the same prompts (per-arm hash sums, and a join of the requests of the cells where those
do not settle it). :class:`Reads` runs each of these queries once over every comparison
it is given, and answers each comparison from them: ``ledger derive`` gives it one
comparison, ``ledger verify`` every comparison of the tree it recomputes (one query per
comparison had cost a scan of every campaign's rows, each time).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ledger.database import Database, insert_rows, sql

Arms = tuple[str, str]
Group = tuple[str, str, str, str]
"""(campaign id, arm, stage, cell)"""
Band = tuple[float, float, int, int, int]
"""A guessed band of values (low, high), the cell's size and the ranks it must hold."""
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
    "s.artifact, s.sha256, s.status, s.request "
    "FROM ({cells}) AS c LEFT JOIN cell_settings AS s USING (campaign_id, arm, stage, cell) "
    "JOIN wanted_arms AS w USING (campaign_id, arm) "
    "ORDER BY c.campaign_id, c.arm, c.stage, c.context_target, c.concurrency, c.thinking, c.cell"
)
_EVIDENCE_COLUMNS = (
    "stage, cell, request_index, prompt_sha256, prompt_tokens, completion_tokens, ok"
)


_ROOT_TAU = math.sqrt(2 * math.pi)


class Ordered(NamedTuple):
    """One cell's values of one column, ordered about the median: ``window`` holds the
    sorted values of ranks ``offset`` to ``offset + len(window) - 1`` of ``size``."""

    size: int
    offset: int
    window: np.ndarray[Any, Any]

    def at(self, ranks: np.ndarray[Any, Any]) -> np.ndarray[Any, Any] | None:
        """The values of these ranks (0-based, in the whole sorted cell); None where one
        lies outside the window."""
        if ranks.size and (
            ranks.min() < self.offset or ranks.max() >= self.offset + len(self.window)
        ):
            return None
        return self.window[ranks - self.offset]  # type: ignore[no-any-return]


WINDOW_SIGMAS = 6.0
"""How far about the median's rank a window reaches, in standard deviations of a
resample median's rank (about sqrt(n)/2): one of 2,000 resamples passes 6 of them in
about 4 cells of a million, and such a cell is read whole."""


BAND_MARGIN = 2.5
"""A window's band of values against what a normal density of the cell's spread would
need: a uniform density needs 1.38 times, and sampling noise more. Skewed latencies need
less (their long tail widens the spread more than their median's neighbourhood)."""


def _finite(value: Any) -> float | None:
    """A statistic as a float; None where it is none or not finite (the rows come as JSON
    values, so an infinity or NaN is a string)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _spread(n: int, total: Any, squares: Any) -> float | None:
    """The population standard deviation from a count, sum and sum of squares; None where
    an infinite value or rounding left it meaningless (only a guess of a window's band
    hangs on it: such a cell is read whole)."""
    total, squares = _finite(total), _finite(squares)
    if not n or total is None or squares is None:
        return None
    mean = total / n
    variance = squares / n - mean * mean
    if not math.isfinite(variance) or variance < -1e-9 * max(abs(squares / n), 1.0):
        return None
    return math.sqrt(max(variance, 0.0))


def window_ranks(size: int) -> tuple[int, int, int] | None:
    """(size, lowest rank, highest rank) a window of a cell of ``size`` values holds;
    None where it would hold most of the cell (read whole)."""
    if size < 64:
        return None
    reach = int(WINDOW_SIGMAS * math.sqrt(size) / 2) + 2
    low, high = (size - 1) // 2 - reach, size // 2 + reach
    if high - low + 1 > size // 2:
        return None
    return size, low, high


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
        self._values: dict[Comparison, dict[tuple[str, int], list[Ordered]]] = {}
        self._spans: dict[Comparison, tuple[int, int]] = {}
        self._groups: dict[int, Group] = {}
        self._evidence: dict[Comparison, dict[CellKey, tuple[int, int, int]]] | None = None
        self._known = set(self._comparisons)

    def holds(self, comparison: Comparison) -> bool:
        """Whether ``comparison`` is one these reads were made for."""
        return comparison in self._known

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
            self._read_fallback()
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
        pairs = {(campaign, arm) for campaign, arms in self._comparisons for arm in arms}
        self._want_arms(pairs)
        rows = self._db.query(
            _CELLS.format(
                medians=self._statistics(self._columns), cells=self._cells_of(self._columns)
            )
        ).to_json()
        out: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for key, group in itertools.groupby(rows, lambda r: (r["campaign_id"], r["arm"])):
            out[key] = list(group)
        return out

    def _read_fallback(self) -> None:
        """The fallback column's statistics, into the cells of the arms of each comparison
        that bootstraps it (:meth:`columns`), and only there: a median and spread of a
        column no comparison uses cost a fifth of the cells' read."""
        _missing, extra = self._fallback
        arms: set[tuple[str, str]] = set()
        for comparison in self._comparisons:
            try:
                if extra not in self.columns(comparison):
                    continue
            except DuplicateCell:
                continue  # never derived
            campaign, pair = comparison
            arms.update((campaign, arm) for arm in pair)
        if not arms:
            return
        self._want_arms(arms)
        found = self._db.query(
            f"SELECT c.campaign_id, c.arm, c.stage, c.cell, {self._statistics((extra,))} "
            f"FROM ({self._cells_of((extra,))}) AS c JOIN wanted_arms AS w USING (campaign_id, arm)"
        ).to_json()
        by_cell = {
            (r.pop("campaign_id"), r.pop("arm"), r.pop("stage"), r.pop("cell")): r for r in found
        }
        assert self._cells is not None, "read with the cells"
        for (campaign, arm), rows in self._cells.items():
            for row in rows:
                statistics = by_cell.get((campaign, arm, row["stage"], row["cell"]))
                if statistics is not None:
                    row.update(statistics)

    def _want_arms(self, pairs: set[tuple[str, str]]) -> None:
        con = self._db.connection
        con.execute("CREATE OR REPLACE TEMP TABLE wanted_arms (campaign_id VARCHAR, arm VARCHAR)")
        insert_rows(con, "wanted_arms", sorted(pairs))

    @staticmethod
    def _statistics(columns: Sequence[str]) -> str:
        """Each column's median, and the count, sum and sum of squares of its values, of
        the query's cells ``c``: what sizes the windows (:meth:`_windows`), from the scan
        that takes the medians."""
        return ", ".join(
            f"c.{c}_{name}" for c in columns for name in ("p50", "values", "sum", "squares")
        )

    @staticmethod
    def _cells_of(columns: Sequence[str]) -> str:
        """The ``cells`` query with the spread of ``columns`` (DuckDB computes only the
        aggregates a query selects). A NaN or an infinity among a column's values makes
        its sum not finite, and the cell is then read whole: the count need not leave
        them out (a NULLIF on each value cost a tenth of the query)."""
        return sql.cells_select(
            [
                (f"{c}_{name}", aggregate.format(value=c))
                for c in columns
                for name, aggregate in (
                    ("values", "count({value})"),
                    ("sum", "sum({value})"),
                    ("squares", "sum({value} * {value})"),
                )
            ]
        )

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

    def values(self, comparison: Comparison) -> dict[tuple[str, int], list[Ordered]]:
        """Per (column of :meth:`columns`, arm role): each common cell's successful
        measured values, ordered as far as a median's resamples reach, in :meth:`keys`
        order."""
        self._read_for(comparison)
        if comparison not in self._values:
            self._read_values()
        return self._values[comparison]

    def whole(self, comparison: Comparison, column: str, role: int, index: int) -> Ordered:
        """Every value of one cell of :meth:`values`, ordered: for resamples that reach
        past its window (a chance of about 4 in a million per cell)."""
        self.values(comparison)  # numbers its groups
        first, _count = self._spans[comparison]
        group = first + 2 * index + role
        found = self._fetch({column: {group: None}})[column][group]
        assert found is not None, "a cell read whole holds every rank"
        return found

    def _read_values(self) -> None:
        # Every comparison's (cell, arm) groups numbered in turn: one scan of the rows.
        wanted: dict[str, dict[int, dict[str, Any]]] = {}
        needed: dict[Comparison, tuple[str, ...]] = {}
        for comparison in self._comparisons:
            campaign, arms = comparison
            keys = self.keys(comparison)
            needed[comparison] = self.columns(comparison) if keys else self._columns
            first = len(self._groups)
            found = self.cells(comparison) if keys else []
            for position, key in enumerate(keys):
                for role, arm in enumerate(arms):
                    group = first + 2 * position + role
                    self._groups[group] = (campaign, arm, *key)
                    for column in needed[comparison]:
                        wanted.setdefault(column, {})[group] = found[role][key]
            self._spans[comparison] = (first, len(keys))
        by_column = self._windows(wanted) if wanted else {}
        for comparison, (first, count) in self._spans.items():
            out: dict[tuple[str, int], list[Ordered]] = {}
            for column in needed[comparison]:
                for role in (0, 1):
                    out[(column, role)] = [
                        by_column[column][first + 2 * i + role] for i in range(count)
                    ]
            self._values[comparison] = out

    def _windows(
        self, wanted: dict[str, dict[int, dict[str, Any]]]
    ) -> dict[str, dict[int, Ordered]]:
        """Per column, each group's values about its median (``wanted``: per column, the
        cell row of each group that needs it). A band of values is
        guessed from the cell's median and spread, and kept where it holds every rank the
        resamples may reach; the others are read whole. Exact either way: a window is the
        sorted values of its ranks, placed by the count of values below it."""
        asked: dict[str, dict[int, Band | None]] = {}
        for column, cells in wanted.items():
            mine = asked[column] = {}
            for group, row in cells.items():
                n, median = int(row[f"{column}_values"] or 0), _finite(row[f"{column}_p50"])
                ranks = window_ranks(n)
                sd = _spread(n, row[f"{column}_sum"], row[f"{column}_squares"])
                if ranks is None or sd is None or median is None:
                    mine[group] = None
                    continue
                # Near its median a normal density of this spread puts a value
                # sd * sqrt(2 pi) / n above the one before: the band is BAND_MARGIN times
                # what the ranks need at that density, a guess a gapped distribution can miss.
                need = max(ranks[2] - n // 2, n // 2 - ranks[1]) + 2
                half = BAND_MARGIN * need * sd * _ROOT_TAU / n
                mine[group] = (median - half, median + half, *ranks)
        got = self._fetch(asked)
        missed: dict[str, dict[int, Band | None]] = {
            c: {g: None for g, o in found.items() if o is None} for c, found in got.items()
        }
        if any(missed.values()):
            # Read whole: a band of None holds every value, so these come back.
            again = self._fetch({c: m for c, m in missed.items() if m})
            for column, found in again.items():
                got[column].update(found)
        out: dict[str, dict[int, Ordered]] = {}
        for column, found in got.items():
            out[column] = {}
            for group, ordered in found.items():
                assert ordered is not None, "a cell read whole holds every rank"
                out[column][group] = ordered
        return out

    def _fetch(
        self, asked: dict[str, dict[int, Band | None]]
    ) -> dict[str, dict[int, Ordered | None]]:
        """Per column and group, the sorted values inside its band (every value where it
        has none); None where they do not hold the ranks the band names. One scan for
        every column: a group's band of one column selects its rows of that column only.
        The groups are named in the statement's own table, so that another read on the
        same connection cannot renumber them."""
        con = self._db.connection
        columns = list(asked)
        groups = sorted({g for mine in asked.values() for g in mine})
        bounds = ", ".join(f"lo_{i} DOUBLE, hi_{i} DOUBLE" for i in range(len(columns)))
        con.execute(
            "CREATE OR REPLACE TEMP TABLE bands (grp BIGINT, campaign_id VARCHAR, "
            f"arm VARCHAR, stage VARCHAR, cell VARCHAR, {bounds})"
        )
        # A column this group is not asked for selects nothing (an empty band).
        unasked = (math.inf, -math.inf)
        infinite = (-math.inf, math.inf)
        rows = []
        for g in groups:
            row: list[Any] = [g, *self._groups[g]]
            for column in columns:
                if g not in asked[column]:
                    row += unasked
                else:
                    band = asked[column][g]
                    row += (band or infinite)[:2]
            rows.append(row)
        insert_rows(con, "bands", rows)
        # Per group, each column's count below its band and the values inside it, as a
        # list: one scan, and no sort of every row by group. count_if, not a FILTER on
        # count(*): each FILTER is a selection of its own over every row (a quarter of
        # this scan's time for four columns).
        parts = ", ".join(
            f"coalesce(count_if(r.{c} < b.lo_{i}), 0) AS below_{i}, "
            f"coalesce(list(r.{c}) FILTER (WHERE r.{c} BETWEEN b.lo_{i} AND b.hi_{i} "
            f"AND NOT isnan(r.{c})), []) AS inside_{i}"
            for i, c in enumerate(columns)
        )
        result = con.execute(
            f"SELECT b.grp, {parts} FROM request_rows AS r JOIN bands AS b "
            "USING (campaign_id, arm, stage, cell) WHERE r.ok AND NOT r.warmup GROUP BY b.grp"
        ).fetchnumpy()
        position = {int(g): k for k, g in enumerate(result["grp"])}
        out: dict[str, dict[int, Ordered | None]] = {}
        empty = np.zeros(0)
        for i, column in enumerate(columns):
            below, inside = result[f"below_{i}"], result[f"inside_{i}"]
            mine = out[column] = {}
            for g, band in asked[column].items():
                k = position.get(g)
                found = empty if k is None else inside[k]
                window = np.sort(np.asarray(found, dtype=np.float64))
                offset = 0 if k is None else int(below[k])
                if band is None:
                    mine[g] = Ordered(len(window), offset, window)
                    continue
                _lo, _hi, size, low, high = band
                holds = offset <= low and high < offset + len(window)
                mine[g] = Ordered(size, offset, window) if holds else None
        return out

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
        out: dict[Comparison, dict[CellKey, tuple[int, int, int]]] = {}
        unsure: list[tuple[int, str, str]] = []
        for job, stage, cell, same in self._fingerprints():
            if same:
                out.setdefault(self._comparisons[job], {})[(stage, cell)] = (0, 0, 0)
            else:
                unsure.append((job, stage, cell))
        if not unsure:
            return out
        con.execute(
            "CREATE OR REPLACE TEMP TABLE unsure_cells (job BIGINT, stage VARCHAR, cell VARCHAR)"
        )
        insert_rows(con, "unsure_cells", unsure)
        side = (
            "SELECT p.job, {columns} FROM request_rows AS r JOIN wanted_pairs AS p "
            "ON r.campaign_id = p.campaign_id AND r.arm = p.{arm} "
            "SEMI JOIN unsure_cells AS u ON u.job = p.job AND u.stage = r.stage "
            "AND u.cell = r.cell WHERE NOT r.warmup"
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
        for job, stage, cell, *counts in rows:
            out.setdefault(self._comparisons[job], {})[(stage, cell)] = (
                counts[0],
                counts[1],
                counts[2],
            )
        return out

    def _fingerprints(self) -> list[tuple[int, str, str, bool]]:
        """Per comparison and (stage, cell) either arm measured: whether the arms' measured
        requests are the same, request by request, in prompt digest, prompt tokens and
        completion tokens, told by sums of hashes per arm; the FULL JOIN of every request
        then runs only for cells where they are not (or may not be).

        Same needs, on both arms: as many requests, each with a digest, their indexes one
        contiguous run from the same first index, each index once (the sum of the
        indexes' hashes is that of the run), and equal sums of the hash of each request's
        (index, digest, prompt tokens, completion tokens). Indexes each once, equal sums
        mean the same values at every index but for a collision of 64-bit sums (about
        2**-64 for data not made to collide; data made to collide could as well state the
        baseline's digests, which nothing can check). DuckDB's hash of several values
        mixes each into the one before, so values swapped between the columns differ.

        One row per arm and cell, whichever comparisons name the arm: reading the digests
        is most of the query's time."""
        self._want_arms({(c, arm) for c, arms in self._comparisons for arm in arms})
        # The run's own hash sum, over a range only as long as the arm's requests.
        rows = self._db.query(
            "WITH s AS (SELECT r.campaign_id, r.arm, r.stage, r.cell, count(*) AS n, "
            "count(r.prompt_sha256) AS digests, min(r.request_index) AS first, "
            "max(r.request_index) AS last, sum(hash(r.request_index)) AS indexes, "
            "sum(hash(r.request_index, r.prompt_sha256, r.prompt_tokens, "
            "r.completion_tokens)) AS requests "
            "FROM request_rows AS r JOIN wanted_arms USING (campaign_id, arm) "
            "WHERE NOT r.warmup GROUP BY ALL) "
            "SELECT s.*, (SELECT sum(hash(i)) FROM range(s.first, CASE WHEN "
            "s.last - s.first + 1 = s.n THEN s.last + 1 ELSE s.first END) AS t(i)) AS run "
            "FROM s"
        ).to_json()
        by_arm: dict[tuple[str, str], dict[CellKey, dict[str, Any]]] = {}
        for row in rows:
            by_arm.setdefault((row["campaign_id"], row["arm"]), {})[(row["stage"], row["cell"])] = (
                row
            )
        out = []
        for job, (campaign, arms) in enumerate(self._comparisons):
            a, b = (by_arm.get((campaign, arm), {}) for arm in arms)
            for key in dict.fromkeys([*a, *b]):
                sides = [side[key] for side in (a, b) if key in side]
                same = len(sides) == 2 and all(
                    r["digests"] == r["n"]
                    and r["last"] - r["first"] + 1 == r["n"]
                    and r["indexes"] == r["run"]
                    for r in sides
                )
                if same:
                    same = all(sides[0][k] == sides[1][k] for k in ("n", "first", "requests"))
                out.append((job, *key, same))
        return out
