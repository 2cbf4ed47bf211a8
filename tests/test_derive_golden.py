"""Derived comparisons are pinned byte for byte: the medians and bootstrap intervals of a
generated campaign must stay what the derivation gave before its data path was rewritten
(the values moved out of DuckDB as per-cell lists instead of one sorted column).

The campaign is drawn from numpy's legacy ``RandomState`` (streams fixed across numpy
versions) and written straight into the ledger database's loaded tables. It holds what
moves an interval: odd and even cells, cells under ``MIN_SAMPLES``, tied values, failed
requests and warm-ups, an arm without one metric, and (in the second campaign) a cell with
no visible-content TTFT, which adds the first-token metric to every cell's draws.

``python -m tests.test_derive_golden`` writes the expected file (tests/assets/) again: only
when a change of the numbers is intended, and said in the commit. It was written by the
derivation as it stood before its values moved out of DuckDB as per-cell lists.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ledger.database import Database, build, insert_rows
from ledger.derivation import _derive as derive_module
from ledger.derivation._derive import derive
from ledger.formats.schema import document_bytes
from tests.conftest import ASSETS

EXPECTED = ASSETS / "derive-golden.json"
CAMPAIGN = "2026-12-01-golden"
ARMS = ("base", "cand")
SIZES = (3, 9, 10, 11, 12, 25, 40, 41, 200, 1001)


def _rows(rng: np.random.RandomState, arm: str, cell: str, size: int, **opts: Any) -> list[Any]:
    shift = 1.07 if arm == "cand" else 1.0
    rows = []
    for i in range(size + 2):
        warmup = i < 2
        ok = bool(rng.random_sample() > 0.05)
        ttft = float(rng.lognormal(3.0, 0.4)) * shift
        if opts.get("ties"):
            ttft = round(ttft / 5) * 5.0
        if opts.get("no_ttft") and arm == "cand":
            ttft = None  # type: ignore[assignment]
        first = float(rng.lognormal(2.9, 0.4)) * shift
        e2e = float(rng.normal(900.0, 120.0)) * shift
        decode = None if opts.get("no_decode") and arm == "base" else float(rng.gamma(9.0, 8.0))
        prefill = float(rng.uniform(1e4, 3e4))
        rows.append(
            (CAMPAIGN, arm, "capacity", "capacity", cell, 1024, 1, False, i, warmup, ok,
             None if ok else "timeout", 1000, 64, None, "length", True, f"{i:064x}",
             i * 1_000_000, i * 1_000_000 + int(e2e * 1e6), ttft, first, e2e, decode,
             prefill, "anvil-ledger", f"{arm}/capacity/{cell}.json", None, None, None)
        )  # fmt: skip
    return rows


def _settings(arm: str, cell: str, size: int) -> tuple[Any, ...]:
    """A row of ``cell_settings_loaded`` for a cell of ``size`` measured requests."""
    return (CAMPAIGN, arm, "capacity", "capacity", cell, 1024, 1, False, size + 2, 2, 64, True,
            0.0, 0, "unique", "complete", "{}", False, None, f"{arm}/capacity/{cell}.json",
            "0" * 64, None, None)  # fmt: skip


def _database(no_ttft: bool) -> Database:
    rng = np.random.RandomState(20261201)
    db = build([], locked=False)
    requests, settings = [], []
    for size in SIZES:
        for variant in ("", "-ties", "-nodecode"):
            cell = f"ctx1024-c{size}{variant}-nothink"
            for arm in ARMS:
                requests += _rows(
                    rng, arm, cell, size, ties=variant == "-ties",
                    no_decode=variant == "-nodecode", no_ttft=no_ttft and size == 41,
                )  # fmt: skip
                settings.append(_settings(arm, cell, size))
    insert_rows(db.connection, "request_rows_loaded", requests)
    insert_rows(db.connection, "cell_settings_loaded", settings)
    return db


def _documents() -> dict[str, Any]:
    out = {}
    for no_ttft in (False, True):
        db = _database(no_ttft)
        for kind in ("ab", "os"):
            # As derived before verdicts existed: what a published comparison without
            # ``inference`` is derived again as (tests/test_calibration.py has the rest).
            document = derive(
                db,
                CAMPAIGN,
                *ARMS,
                kind=kind,
                differs=["os"] if kind == "os" else [],
                inference=False,
            )
            out[f"{kind}{'-no-ttft' if no_ttft else ''}"] = json.loads(document_bytes(document))
        db.close()
    return out


def test_derived_medians_and_intervals_are_byte_identical_to_the_pinned_ones() -> None:
    expected = json.loads(EXPECTED.read_text())
    got = _documents()
    assert sorted(got) == sorted(expected)
    for name, document in got.items():
        # Byte for byte: every float as JSON writes it, so its last bit.
        assert json.dumps(document, sort_keys=True) == json.dumps(expected[name], sort_keys=True)
    # What the pinned file must exercise, or it pins less than it says.
    ab = expected["ab"]["rows"]
    cis = [m.get("change_ci95") for r in ab for m in r["metrics"].values()]
    assert any(ci is None for ci in cis) and any(ci is not None for ci in cis)
    assert "first_token_p50_ms" in json.dumps(expected["ab-no-ttft"])
    assert "first_token_p50_ms" not in json.dumps(expected["ab"])


if __name__ == "__main__":
    Path(EXPECTED).write_text(json.dumps(_documents(), indent=1, sort_keys=True) + "\n")
    sys.exit(0)


def test_verdicts_add_to_the_pinned_figures_and_change_none_of_them() -> None:
    db = _database(False)
    plain = derive(db, CAMPAIGN, *ARMS, inference=False)
    judged = derive(db, CAMPAIGN, *ARMS)
    db.close()
    added = {"verdict", "mde_percent"}
    for before, after in zip(plain["rows"], judged["rows"], strict=True):
        for metric, entry in after["metrics"].items():
            new = set(entry) - set(before["metrics"][metric])
            assert new == (added if "change_ci95" in entry else set())
            assert {k: v for k, v in entry.items() if k not in added} == before["metrics"][metric]
    assert judged["limitations"][: len(plain["limitations"])] == plain["limitations"]
    unmeasured = (
        "no A/A control: the noise between two runs of one configuration is not measured, "
        "and the verdicts rest on each run's own requests"
    )
    assert judged["limitations"][len(plain["limitations"]) :] == [unmeasured]
    assert judged["derivation"].pop("inference") == {
        "level": 0.95, "power": 0.8, "percentile_confidence": 0.95, "control": None
    }  # fmt: skip
    assert judged["derivation"] == plain["derivation"]
    # The pinned cells both read each verdict: a 7 % shift of TTFT is a regression where
    # its interval excludes zero, and no difference where it does not.
    verdicts = {r["metrics"]["ttft_p50_ms"]["verdict"] for r in judged["rows"]}
    assert {"regression", "no difference detected", "descriptive"} <= verdicts


def test_a_last_cell_without_successes() -> None:
    """The last (cell, arm) group may be empty (every request failed): it has no values
    and no interval; the other rows keep their medians and have intervals (theirs are
    drawn again: the draws are made per distinct cell size, and one size fewer moves
    them)."""
    db = _database(False)
    last = max(f"ctx1024-c{size}{v}-nothink" for size in SIZES for v in ("", "-ties", "-nodecode"))
    db.connection.execute(
        "UPDATE request_rows_loaded SET ok = false, error_class = 'timeout' "
        "WHERE arm = 'cand' AND cell = ?",
        [last],
    )
    narrow = derive(db, CAMPAIGN, *ARMS)
    row = next(r for r in narrow["rows"] if r["cell"] == last)
    assert row["failed"]["candidate"] == row["n"]["candidate"] > 0
    assert all(m.get("change_ci95") is None for m in row["metrics"].values())
    reads = derive_module.reads_of(db, [(CAMPAIGN, ARMS)])
    last_key = reads.keys((CAMPAIGN, ARMS)).index(("capacity", last))
    assert reads.values((CAMPAIGN, ARMS))[("e2e_ms", 1)][last_key].size == 0
    before = {r["cell"]: r for r in derive(_database(False), CAMPAIGN, *ARMS)["rows"]}
    others = [r for r in narrow["rows"] if r["cell"] != last]
    assert len(others) == len(before) - 1
    for row in others:
        for name, metric in row["metrics"].items():
            was = before[row["cell"]]["metrics"][name]
            assert (metric["baseline"], metric["candidate"]) == (was["baseline"], was["candidate"])
            assert (metric.get("change_ci95") is None) == (was.get("change_ci95") is None)


def test_more_groups_than_sixteen_bits_number() -> None:
    """33,000 cells on two arms are 66,000 (cell, arm) groups: each still gets its own
    values, never a neighbour's."""
    db = build([], locked=False)
    cells = [f"ctx1024-c{i + 1}-nothink" for i in range(33_000)]
    rows = [
        (CAMPAIGN, arm, "capacity", "capacity", cell, 1024, 1, False, 0, False, True, None,
         1000, 64, None, "length", True, None, 0, 1, float(i), float(i), float(i) + side, 1.0,
         1.0, "anvil-ledger", f"{arm}/{cell}.json", None, None, None)
        for i, cell in enumerate(cells)
        for side, arm in enumerate(ARMS)
    ]  # fmt: skip
    insert_rows(db.connection, "request_rows_loaded", rows)
    comparison = (CAMPAIGN, ARMS)
    reads = derive_module.reads_of(db, [comparison])
    keys = reads.keys(comparison)
    assert sorted(keys) == sorted(("capacity", cell) for cell in cells)
    number = {cell: i for i, cell in enumerate(cells)}
    values = reads.values(comparison)
    assert [list(v.window) for v in values[("e2e_ms", 0)]] == [[float(number[c])] for _, c in keys]
    assert [list(v.window) for v in values[("e2e_ms", 1)]] == [[number[c] + 1.0] for _, c in keys]


OTHER = "2026-12-02-golden-other"


def _two_campaigns() -> Database:
    """The golden campaign and a second one whose values and one prompt differ."""
    db = _database(False)
    con = db.connection
    con.execute(
        "INSERT INTO request_rows_loaded SELECT * REPLACE (? AS campaign_id, "
        "e2e_ms * CASE WHEN arm = 'cand' THEN 1.5 ELSE 0.8 END AS e2e_ms, "
        "ttft_ms + 3 AS ttft_ms, CASE WHEN arm = 'cand' AND request_index = 5 "
        "AND cell = 'ctx1024-c40-nothink' THEN 'ff' || prompt_sha256 ELSE prompt_sha256 END "
        "AS prompt_sha256) FROM request_rows_loaded WHERE campaign_id = ?",
        [OTHER, CAMPAIGN],
    )
    con.execute(
        "INSERT INTO cell_settings_loaded SELECT * REPLACE (? AS campaign_id) "
        "FROM cell_settings_loaded WHERE campaign_id = ?",
        [OTHER, CAMPAIGN],
    )
    return db


def test_one_read_of_several_comparisons_answers_each_as_alone() -> None:
    """Verify reads every comparison at once: each must get its own cells, values and
    prompt evidence, never a neighbour's."""
    db = _two_campaigns()
    comparisons = [(CAMPAIGN, ARMS), (OTHER, ARMS), (CAMPAIGN, (ARMS[1], ARMS[0]))]
    shared = derive_module.reads_of(db, comparisons)
    for comparison in comparisons:
        alone = derive_module.reads_of(db, [comparison])
        assert shared.keys(comparison) == alone.keys(comparison)
        assert shared.columns(comparison) == alone.columns(comparison)
        assert shared.evidence(comparison) == alone.evidence(comparison)
        got, expected = shared.values(comparison), alone.values(comparison)
        assert sorted(got) == sorted(expected)
        for column in expected:
            assert [(v.size, v.offset, list(v.window)) for v in got[column]] == [
                (v.size, v.offset, list(v.window)) for v in expected[column]
            ]
        campaign, (baseline, candidate) = comparison
        assert derive(db, campaign, baseline, candidate, reads=shared) == derive(
            db, campaign, baseline, candidate
        )
    # The campaigns really differ, or a mix-up could not show.
    c40 = ("capacity", "ctx1024-c40-nothink")
    assert shared.evidence((OTHER, ARMS))[c40][0] == 1
    assert shared.evidence((CAMPAIGN, ARMS))[c40][0] == 0
    assert derive(db, OTHER, *ARMS)["rows"] != derive(db, CAMPAIGN, *ARMS)["rows"]


def test_reads_refuse_a_comparison_they_were_not_made_for() -> None:
    """Unread, a comparison would have no prompt evidence: a check passed for want of rows."""
    db = _two_campaigns()
    reads = derive_module.reads_of(db, [(CAMPAIGN, ARMS)])
    for ask in (reads.cells, reads.values, reads.evidence):
        # Another campaign, and the same campaign's arms the other way round.
        for unread in ((OTHER, ARMS), (CAMPAIGN, (ARMS[1], ARMS[0]))):
            with pytest.raises(ValueError, match="not one of the comparisons"):
                ask(unread)
    with pytest.raises(ValueError, match="not one of the comparisons"):
        derive(db, OTHER, *ARMS, reads=reads)


def test_warm_up_prompts_are_no_evidence() -> None:
    db = _database(False)
    db.connection.execute(
        "UPDATE request_rows_loaded SET prompt_sha256 = 'ff' || prompt_sha256, "
        "prompt_tokens = prompt_tokens + 1 WHERE arm = 'cand' AND warmup"
    )
    evidence = derive_module.reads_of(db, [(CAMPAIGN, ARMS)]).evidence((CAMPAIGN, ARMS))
    assert evidence and set(evidence.values()) == {(0, 0, 0)}


def test_the_first_token_metric_is_read_only_where_a_cell_lacks_ttft() -> None:
    db = _database(False)
    comparison = (CAMPAIGN, ARMS)
    assert derive_module.reads_of(db, [comparison]).columns(comparison) == tuple(
        derive_module.MEDIANS.values()
    )
    with_ttft = _database(True)
    assert derive_module.reads_of(with_ttft, [comparison]).columns(comparison)[-1] == (
        "first_token_ms"
    )


def test_the_two_arms_draw_their_resamples_independently() -> None:
    """Two arms of identical values: a change that is zero in every resample would mean one
    stream of draws served both (each pair of medians drawn at the same ranks). Drawn
    apart, the interval of no change spans zero with room on either side."""
    rng = np.random.RandomState(20261202)
    db = build([], locked=False)
    requests, settings = [], []
    for size in (12, 40):
        cell = f"ctx1024-c{size}-nothink"
        base = _rows(rng, "base", cell, size)
        for arm in ARMS:
            requests += [
                (*r[:1], arm, *r[2:26], f"{arm}/capacity/{cell}.json", *r[27:]) for r in base
            ]
            settings.append(_settings(arm, cell, size))
    insert_rows(db.connection, "request_rows_loaded", requests)
    insert_rows(db.connection, "cell_settings_loaded", settings)
    document = derive(db, CAMPAIGN, *ARMS)
    db.close()
    intervals = [
        metric["change_ci95"]
        for row in document["rows"]
        for metric in row["metrics"].values()
        if metric.get("change_ci95") is not None
    ]
    assert len(intervals) >= 8
    for low, high in intervals:
        assert low < -0.1 and high > 0.1, (low, high)
    assert all(
        metric["change_percent"] == 0.0
        for row in document["rows"]
        for metric in row["metrics"].values()
        if metric.get("change_percent") is not None
    )
