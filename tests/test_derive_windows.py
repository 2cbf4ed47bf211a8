"""The bootstrap reads each cell's values only about its median, and the prompt checks
join request by request only where the arms' fingerprints differ: both are shortcuts
that must give what reading every value and joining every request gives, byte for byte,
including where a shortcut's guess fails and it falls back."""

from __future__ import annotations

import copy
import json
from typing import Any

import numpy as np
import pytest

from ledger.database import Database, build, insert_rows
from ledger.derivation import _bootstrap as bootstrap
from ledger.derivation import _comparison_reads as comparison_reads
from ledger.derivation import _derive as derive_module
from ledger.derivation._derive import derive
from ledger.formats.schema import document_bytes

CAMPAIGN = "2026-12-01-windows"
ARMS = ("base", "cand")
COMPARISON = (CAMPAIGN, ARMS)


def _row(arm: str, cell: str, index: int, ttft: float | None, **fields: Any) -> tuple[Any, ...]:
    ok = fields.get("ok", True)
    return (
        CAMPAIGN, arm, "capacity", "capacity", cell, 1024, 1, False, index,
        fields.get("warmup", False), ok, None if ok else "timeout", fields.get("prompt", 1000),
        fields.get("completion", 64), None, "length", True,
        fields.get("digest", f"{index:064x}"), index * 1_000_000, index * 1_000_000 + 5_000_000,
        ttft, ttft, 500.0 + index % 7, 90.0 + index % 11, 2e4, "anvil-ledger",
        f"{arm}/capacity/{cell}.json", None, None, None,
    )  # fmt: skip


def _database(cells: dict[str, dict[str, list[float | None]]]) -> Database:
    """One campaign: per cell, per arm, its requests' TTFTs (index = position)."""
    db = build([], locked=False)
    rows = [
        _row(arm, cell, i, ttft)
        for cell, arms in cells.items()
        for arm, values in arms.items()
        for i, ttft in enumerate(values)
    ]
    insert_rows(db.connection, "request_rows_loaded", rows)
    return db


def _document(db: Database) -> str:
    return document_bytes(derive(db, CAMPAIGN, *ARMS)).decode()


def _unwindowed(db: Database, monkeypatch: pytest.MonkeyPatch) -> str:
    """The same comparison with every cell read whole and every request joined."""
    with monkeypatch.context() as patch:
        patch.setattr(comparison_reads, "window_ranks", lambda size: None)
        patch.setattr(
            comparison_reads.Reads,
            "_fingerprints",
            lambda self: [(j, s, c, False) for j, s, c, _ in _real_fingerprints(self)],
        )
        return _document(db)


_real_fingerprints = comparison_reads.Reads._fingerprints


def _lognormal(seed: int, n: int, scale: float = 1.0) -> list[float | None]:
    rng = np.random.RandomState(seed)
    return [float(v) * scale for v in rng.lognormal(3.0, 0.5, n)]


def _spy(monkeypatch: pytest.MonkeyPatch, name: str) -> list[Any]:
    calls: list[Any] = []
    real = getattr(comparison_reads.Reads, name)

    def spy(self: Any, *args: Any) -> Any:
        found = real(self, *args)
        # As returned: a caller may update what it was given.
        calls.append((copy.deepcopy(args), copy.deepcopy(found)))
        return found

    monkeypatch.setattr(comparison_reads.Reads, name, spy)
    return calls


def test_windowed_values_give_the_intervals_of_every_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    db = _database(
        {
            "ctx1024-c1-nothink": {"base": _lognormal(1, 900), "cand": _lognormal(2, 901, 1.1)},
            "ctx1024-c2-nothink": {"base": _lognormal(3, 2000), "cand": _lognormal(4, 64)},
        }
    )
    reads = derive_module.reads_of(db, [COMPARISON])
    windows = reads.values(COMPARISON)[("ttft_ms", 0)]
    # The large cells are read about their medians only, or this shows nothing.
    assert windows[0].size == 900 and windows[0].offset > 0 and len(windows[0].window) < 900
    assert _document(db) == _unwindowed(db, monkeypatch)


def test_a_gap_at_the_median_misses_its_band_and_is_read_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two clusters far apart: the spread is wide, but no value lies near the median, so
    the band guessed from it holds none of the ranks needed."""
    split = [float(i % 2) * 1000 + (i % 13) for i in range(800)]
    db = _database({"ctx1024-c1-nothink": {"base": split, "cand": _lognormal(5, 800)}})
    fetches = _spy(monkeypatch, "_fetch")
    document = _document(db)
    (_, found), (second, _) = fetches
    assert found["ttft_ms"][0] is None  # the base arm's guess missed
    assert list(second[0]["ttft_ms"]) == [0]  # and only that cell was read again
    assert document == _unwindowed(db, monkeypatch)


def test_resamples_past_a_window_read_the_cell_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    db = _database(
        {"ctx1024-c1-nothink": {"base": _lognormal(6, 1000), "cand": _lognormal(7, 1000, 1.2)}}
    )
    expected = _unwindowed(db, monkeypatch)
    # A window of a fraction of a standard deviation: most resample medians fall outside.
    monkeypatch.setattr(comparison_reads, "WINDOW_SIGMAS", 0.2)
    wholes = _spy(monkeypatch, "whole")
    assert _document(db) == expected
    assert wholes and all(found.offset == 0 and found.size == 1000 for _, found in wholes)


def test_windows_skip_nan_as_every_value_did(monkeypatch: pytest.MonkeyPatch) -> None:
    values = _lognormal(8, 700)
    db = _database({"ctx1024-c1-nothink": {"base": values, "cand": _lognormal(9, 700)}})
    db.connection.execute(
        "UPDATE request_rows_loaded SET ttft_ms = 'NaN'::DOUBLE "
        "WHERE arm = 'base' AND request_index % 10 = 0"
    )
    window = derive_module.reads_of(db, [COMPARISON]).values(COMPARISON)[("ttft_ms", 0)][0]
    assert window.size == 630
    assert _document(db) == _unwindowed(db, monkeypatch)


@pytest.mark.parametrize("value", [float("inf"), 1e200])
def test_an_infinite_or_huge_value_reads_its_cell_whole(
    value: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An infinity makes the cell's sum infinite; 1e200 its sum of squares: no spread to
    size a band by, so the cell is read whole, as before windows."""
    values = _lognormal(10, 400)
    values[17] = value
    db = _database({"ctx1024-c1-nothink": {"base": values, "cand": _lognormal(11, 400)}})
    base, cand = (
        derive_module.reads_of(db, [COMPARISON]).values(COMPARISON)[("ttft_ms", role)][0]
        for role in (0, 1)
    )
    assert (base.offset, len(base.window), base.window[-1]) == (0, 400, value)
    assert cand.offset > 0  # the other cell still has its window
    assert _document(db) == _unwindowed(db, monkeypatch)


def test_a_band_holds_its_edges_and_counts_below_it() -> None:
    """Values 0 to 999 and the band [400, 600]: 400 is the window's first value and rank,
    600 its last; the 400 values below are counted, not read."""
    db = _database({"ctx1024-c1-nothink": {"base": [float(v) for v in range(1000)]}})
    reads = derive_module.reads_of(db, [(CAMPAIGN, ("base", "base"))])
    reads.values((CAMPAIGN, ("base", "base")))
    found = reads._fetch({"ttft_ms": {0: (400.0, 600.0, 1000, 450, 550)}})["ttft_ms"][0]
    assert found is not None
    assert (found.size, found.offset, found.window[0], found.window[-1]) == (1000, 400, 400, 600)
    assert len(found.window) == 201
    # The ranks it must hold reach past it: not this band.
    missed = reads._fetch({"ttft_ms": {0: (400.0, 600.0, 1000, 399, 550)}})["ttft_ms"][0]
    assert missed is None
    assert reads._fetch({"ttft_ms": {0: (400.0, 600.0, 1000, 450, 601)}})["ttft_ms"][0] is None


def test_a_window_answers_only_the_ranks_it_holds() -> None:
    ordered = comparison_reads.Ordered(10, 5, np.array([5.0, 6.0, 7.0]))
    held = ordered.at(np.array([5, 7]))
    assert held is not None and list(held) == [5.0, 7.0]
    assert ordered.at(np.array([4, 6])) is None  # below: no wrap-around to the end
    assert ordered.at(np.array([6, 8])) is None  # above


def test_a_zero_baseline_median_in_any_resample_has_no_interval() -> None:
    base = [np.array([1.0, 2.0, 3.0, 4.0]), np.array([2.0, 0.0, 2.0, 2.0])]
    cand = [np.array([1.1, 2.2, 3.3, 4.4]), np.array([1.0, 1.0, 1.0, 1.0])]
    first, second = bootstrap.percent_change_intervals(base, cand)
    assert second is None
    assert first == pytest.approx((10.0, 10.0))
    assert bootstrap.percent_change_intervals([], []) == []


def _evidence(db: Database) -> dict[tuple[str, str], tuple[int, int, int]]:
    return derive_module.reads_of(db, [COMPARISON]).evidence(COMPARISON)


def _forced(db: Database, monkeypatch: pytest.MonkeyPatch) -> Any:
    with monkeypatch.context() as patch:
        patch.setattr(
            comparison_reads.Reads,
            "_fingerprints",
            lambda self: [(j, s, c, False) for j, s, c, _ in _real_fingerprints(self)],
        )
        return _evidence(db)


def _requests(db: Database, rows: list[tuple[Any, ...]]) -> None:
    insert_rows(db.connection, "request_rows_loaded", rows)


CELL = ("capacity", "ctx1024-c1-nothink")


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        # The same requests: the fingerprints agree, no join.
        ("same", (0, 0, 0)),
        # One index twice on each arm, with two digests: the same multiset of (index,
        # digest) on both arms, but the join pairs each with the other.
        ("twice", (2, 0, 0)),
        # Indexes with a hole: no contiguous run, so joined; still the same requests.
        ("hole", (0, 0, 0)),
        # A hole and an index twice: as many requests as the run is long, but not each
        # index once (the indexes' hash sum is not the run's).
        ("twice-and-hole", (2, 0, 0)),
        # No digest on either arm, at one index: a difference, though both arms agree.
        ("no-digest-both", (1, 0, 0)),
        # A baseline request without a digest is a difference wherever it is.
        ("no-digest", (1, 0, 0)),
        # The candidate's output differs only where a request failed: not counted.
        ("failed-output", (0, 0, 0)),
        # A request only one arm measured.
        ("one-sided", (1, 1, 1)),
        ("prompt-tokens", (0, 1, 0)),
        ("digest", (1, 0, 0)),
        # A successful request's output length.
        ("output", (0, 0, 1)),
        # Prompt and output lengths swapped at one index: the same values, in the other
        # columns (a hash that did not tell the columns apart would call these the same).
        ("swapped-lengths", (0, 1, 1)),
        # Two requests' digests swapped between their indexes: the same digests, at other
        # indexes (a hash that left the index out would call these the same).
        ("swapped-digests", (2, 0, 0)),
    ],
)
def test_prompt_fingerprints_agree_with_the_join(
    case: str, expected: tuple[int, int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = build([], locked=False)
    cell = CELL[1]
    indexes = [i for i in range(2, 40) if not (case in ("hole", "twice-and-hole") and i == 9)]
    for arm in ARMS:
        rows = [_row(arm, cell, i, 10.0 + i) for i in indexes]
        rows.append(_row(arm, cell, 0, 1.0, warmup=True, digest=f"warm-{arm}"))
        if case in ("twice", "twice-and-hole"):
            rows += [_row(arm, cell, 5, 1.0, digest="x" * 64)]
        if case == "no-digest-both" or (case == "no-digest" and arm == "base"):
            rows[3] = _row(arm, cell, indexes[3], 1.0, digest=None)
        if case == "failed-output" and arm == "cand":
            rows[4] = _row(arm, cell, indexes[4], 1.0, ok=False, completion=7)
        if case == "one-sided" and arm == "cand":
            rows.append(_row(arm, cell, 99, 1.0))
        if case == "prompt-tokens" and arm == "cand":
            rows[6] = _row(arm, cell, indexes[6], 1.0, prompt=999)
        if case == "digest" and arm == "cand":
            rows[7] = _row(arm, cell, indexes[7], 1.0, digest="f" * 64)
        if case == "output" and arm == "cand":
            rows[8] = _row(arm, cell, indexes[8], 1.0, completion=65)
        if case == "swapped-digests" and arm == "cand":
            rows[10] = _row(arm, cell, indexes[10], 1.0, digest=f"{indexes[11]:064x}")
            rows[11] = _row(arm, cell, indexes[11], 1.0, digest=f"{indexes[10]:064x}")
        if case == "swapped-lengths":
            lengths = (1000, 64) if arm == "base" else (64, 1000)
            rows[9] = _row(arm, cell, indexes[9], 1.0, prompt=lengths[0], completion=lengths[1])
        _requests(db, rows)
    fingerprints = _spy(monkeypatch, "_fingerprints")
    got = _evidence(db)
    assert got == {CELL: expected}
    assert got == _forced(db, monkeypatch)
    ((_, found),) = fingerprints
    assert [same for *_, same in found] == [case == "same"]


def test_fingerprints_keep_comparisons_and_cells_apart() -> None:
    """Two cells and the arms both ways round: a fingerprint is compared with its own
    cell's other arm, never a neighbour's."""
    db = build([], locked=False)
    c1, c2 = "ctx1024-c1-nothink", "ctx1024-c2-nothink"
    for arm in ARMS:
        _requests(db, [_row(arm, c1, i, 1.0, digest=f"{i:064x}") for i in range(20)])
        # The candidate's c2 holds the baseline's c1 digests: the sums of c1's baseline.
        shift = 100 if arm == "base" else 0
        _requests(db, [_row(arm, c2, i, 1.0, digest=f"{i + shift:064x}") for i in range(20)])
    swapped = (CAMPAIGN, (ARMS[1], ARMS[0]))
    reads = derive_module.reads_of(db, [COMPARISON, swapped])
    for comparison in (COMPARISON, swapped):
        assert reads.evidence(comparison) == {
            ("capacity", c1): (0, 0, 0),
            ("capacity", c2): (20, 0, 0),
        }


def test_a_cell_with_no_success_counts_nothing_as_no_rows_do() -> None:
    """The cells view joins the successful requests' statistics to every cell: a cell
    without one still counts zero of what it counts, as a count over no rows does."""
    db = build([], locked=False)
    _requests(db, [_row("base", CELL[1], i, 1.0, ok=False) for i in range(5)])
    (cell,) = db.query("SELECT * FROM cells").to_json()
    assert (cell["n"], cell["failed"]) == (5, 5)
    assert cell["lengths_not_as_requested"] == 0 and cell["server_timed"] == 0
    assert cell["ttft_ms_p50"] is None and cell["throughput_tok_s"] is None
    assert json.dumps(cell)  # every value plain


def test_the_fallback_column_is_read_only_for_the_arms_that_need_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One read for two comparisons, one of whose arms timed no visible content: only
    that comparison's arms get the first-token statistics, and each comparison derives as
    it does read alone (where a comparison with TTFT everywhere never compares them)."""
    db = build([], locked=False)
    cell = CELL[1]
    for arm, seed in (("base", 1), ("cand", 2), ("old", 3), ("new", 4)):
        _requests(db, [_row(arm, cell, i, v) for i, v in enumerate(_lognormal(seed, 300))])
    db.connection.execute("UPDATE request_rows_loaded SET ttft_ms = NULL WHERE arm = 'new'")
    lacking = (CAMPAIGN, ("old", "new"))
    reads = derive_module.reads_of(db, [COMPARISON, lacking])
    with_ttft, without = reads.cells(COMPARISON), reads.cells(lacking)
    # The fallback's query was the last to name the arms it reads.
    assert list(db.query("SELECT arm FROM wanted_arms ORDER BY arm").rows) == [("new",), ("old",)]
    assert all("first_token_ms_p50" not in row for side in with_ttft for row in side.values())
    assert all(row["first_token_ms_p50"] > 0 for side in without for row in side.values())
    assert reads.columns(lacking) == (*derive_module.MEDIANS.values(), "first_token_ms")
    for comparison in (COMPARISON, lacking):
        campaign, arms = comparison
        alone = derive(db, campaign, *arms)
        shared = derive(db, campaign, *arms, reads=reads)
        assert document_bytes(shared) == document_bytes(alone)
    assert "first_token_p50_ms" in derive(db, CAMPAIGN, "old", "new")["rows"][0]["metrics"]
    assert "first_token_p50_ms" not in derive(db, CAMPAIGN, *ARMS)["rows"][0]["metrics"]


def test_the_fallback_is_read_where_the_baseline_lacks_ttft_too() -> None:
    db = build([], locked=False)
    for arm, seed in (("base", 1), ("cand", 2)):
        _requests(db, [_row(arm, CELL[1], i, v) for i, v in enumerate(_lognormal(seed, 300))])
    db.connection.execute("UPDATE request_rows_loaded SET ttft_ms = NULL WHERE arm = 'base'")
    assert "first_token_p50_ms" in derive(db, CAMPAIGN, *ARMS)["rows"][0]["metrics"]


def test_a_cell_only_one_arm_ran_does_not_read_the_fallback() -> None:
    db = build([], locked=False)
    for arm, seed in (("base", 1), ("cand", 2)):
        _requests(db, [_row(arm, CELL[1], i, v) for i, v in enumerate(_lognormal(seed, 100))])
    _requests(db, [_row("base", "ctx1024-c2-nothink", i, None) for i in range(10)])
    cells = derive_module.reads_of(db, [COMPARISON]).cells(COMPARISON)
    assert all("first_token_ms_p50" not in row for side in cells for row in side.values())


def test_the_fallback_statistics_stay_in_their_stage() -> None:
    """Two stages hold one cell name (capacity and endurance do in a plan): each row gets
    its own stage's first-token median."""
    db = build([], locked=False)
    for arm, seed in (("base", 1), ("cand", 2)):
        for stage, scale in (("capacity", 1.0), ("soak", 5.0)):
            rows = [list(_row(arm, CELL[1], i, v)) for i, v in enumerate(_lognormal(seed, 100))]
            for row in rows:
                row[2] = stage
                row[20] = row[21] = row[20] * scale  # ttft_ms, first_token_ms
                row[26] = f"{arm}/{stage}/{CELL[1]}.json"
            _requests(db, [tuple(r) for r in rows])
    db.connection.execute("UPDATE request_rows_loaded SET ttft_ms = NULL")
    for side in derive_module.reads_of(db, [COMPARISON]).cells(COMPARISON):
        capacity, soak = side[("capacity", CELL[1])], side[("soak", CELL[1])]
        assert soak["first_token_ms_p50"] == pytest.approx(5 * capacity["first_token_ms_p50"])


def test_a_cell_with_null_values_is_windowed_by_the_values_it_has(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The count that sizes a window is of the values, not the rows: a wrong one misses
    its band, and the cell is read whole (the same intervals, at the cost of the read)."""
    values = _lognormal(8, 700)
    for i in range(0, 700, 4):
        values[i] = None
    db = _database({CELL[1]: {"base": values, "cand": _lognormal(9, 700)}})
    window = derive_module.reads_of(db, [COMPARISON]).values(COMPARISON)[("ttft_ms", 0)][0]
    assert window.size == 525 and window.offset > 0
    assert _document(db) == _unwindowed(db, monkeypatch)
