"""Open-loop load: send schedules computed up front from a seed, each request recorded with
the time it was due, the sender's lateness, latency from the due time (coordinated omission
corrected), and verify recomputing all of it."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import re
import statistics
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ledger.database import build
from ledger.errors import InvalidArtifact
from ledger.formats.cell_records import completed
from ledger.hashing import sha256_file
from ledger.measures.arrivals import Arrivals, lateness, offsets_ns, sweep_rate
from runners.campaign._stages import CellRun, Prompt, new_origin, run_cell
from runners.client import EndpointClient
from runners.plan import parse_plan, rate_name
from runners.simulate.serve import SimulatorProcess
from tests import cells as cell_files
from tests.conftest import CliRun, forge_seal, run_plan_text, verify_json

Start = Callable[..., SimulatorProcess]


def _gaps(arrivals: Arrivals, cell: str = "ctx1024-r1-nothink") -> list[float]:
    offsets = offsets_ns(arrivals, cell)
    return [(b - a) / 1e9 for a, b in itertools.pairwise(offsets)]


def _cv(values: list[float]) -> float:
    return statistics.pstdev(values) / statistics.fmean(values)


# -- schedules -------------------------------------------------------------------------


def test_a_schedule_is_its_settings_alone_and_each_cell_has_its_own() -> None:
    poisson = Arrivals("poisson", 5.0, 1, requests=3)
    # Pinned: a published cell is checked against this schedule for as long as it exists.
    assert offsets_ns(poisson, "x") == [0, 51466893, 65329585]
    assert offsets_ns(poisson, "x") == offsets_ns(Arrivals("poisson", 5.0, 1, requests=3), "x")
    assert offsets_ns(poisson, "y") != offsets_ns(poisson, "x")
    assert offsets_ns(Arrivals("poisson", 5.0, 2, requests=3), "x") != offsets_ns(poisson, "x")


def test_poisson_gaps_have_the_rate_s_mean_and_an_exponential_spread() -> None:
    gaps = _gaps(Arrivals("poisson", 200.0, 3, requests=20_001))
    assert statistics.fmean(gaps) == pytest.approx(1 / 200, rel=0.02)
    assert _cv(gaps) == pytest.approx(1.0, rel=0.03)


@pytest.mark.parametrize("burstiness", [0.25, 4.0])
def test_gamma_burstiness_sets_the_spread_not_the_rate(burstiness: float) -> None:
    gaps = _gaps(Arrivals("gamma", 50.0, 3, burstiness=burstiness, requests=20_001))
    assert statistics.fmean(gaps) == pytest.approx(1 / 50, rel=0.03)
    # Gamma of shape k: coefficient of variation 1 / sqrt(k).
    assert _cv(gaps) == pytest.approx(1 / math.sqrt(burstiness), rel=0.05)


def test_constant_arrivals_are_exact_and_duration_keeps_what_falls_before_it() -> None:
    assert offsets_ns(Arrivals("constant", 4.0, 0, requests=4), "c") == [
        0, 250_000_000, 500_000_000, 750_000_000,
    ]  # fmt: skip
    timed = offsets_ns(Arrivals("constant", 4.0, 0, duration_s=1.0), "c")
    assert timed == [0, 250_000_000, 500_000_000, 750_000_000]
    for process, burstiness in (("poisson", 1.0), ("gamma", 0.1)):
        # Bursty gamma draws past a first batch of the mean count: the duration decides.
        arrivals = Arrivals(process, 100.0, 9, burstiness=burstiness, duration_s=3.0)
        offsets = offsets_ns(arrivals, "c")
        assert offsets[-1] < 3e9 and offsets == sorted(offsets)
        longer = offsets_ns(
            Arrivals(process, 100.0, 9, burstiness=burstiness, duration_s=30.0), "c"
        )
        assert longer[: len(offsets)] == offsets and longer[len(offsets)] >= 3e9
        assert len(longer) == pytest.approx(3000, rel=0.2 if burstiness < 1 else 0.06)


@pytest.mark.parametrize(
    ("arrivals", "message"),
    [
        (Arrivals("poisson", 0.0, 0, requests=3), "rate must be a positive"),
        (Arrivals("poisson", math.nan, 0, requests=3), "rate must be a positive"),
        (Arrivals("uniform", 1.0, 0, requests=3), "arrival must be one of"),
        (Arrivals("gamma", 1.0, 0, burstiness=0.0, requests=3), "burstiness must be positive"),
        (Arrivals("poisson", 1.0, 0), "either requests or duration_s"),
        (Arrivals("poisson", 1.0, 0, requests=3, duration_s=1.0), "either requests or"),
        (Arrivals("poisson", 1.0, 0, requests=2_000_000), "more than 1,000,000"),
        (Arrivals("constant", 1000.0, 0, duration_s=2000.0), "more than 1,000,000"),
    ],
)
def test_settings_no_schedule_follows_are_refused(arrivals: Arrivals, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        offsets_ns(arrivals, "c")


def test_lateness_counts_every_measured_request_that_was_due() -> None:
    records = [
        {"warmup": True, "sent_ns": 0, "scheduled_ns": None},
        *({"warmup": False, "sent_ns": 1000 + 10_000 * i, "scheduled_ns": 1000} for i in range(99)),
        {"warmup": False, "sent_ns": 5_000_000, "scheduled_ns": 1000},  # held back: 5 ms late
    ]
    found = lateness(records)
    assert found["max_ms"] == 4.999
    assert found["p50_ms"] == pytest.approx(0.495)
    # p99 of 100 values interpolates between the two largest: 0.98 and 4.999 ms.
    assert found["p99_ms"] == pytest.approx(0.98 + 0.01 * (4.999 - 0.98))
    assert found["limited_by_client"] is True
    assert lateness(records[:-1])["limited_by_client"] is False
    assert lateness(records[:1])["p99_ms"] is None


# -- plans -----------------------------------------------------------------------------

PLAN = """
campaign_id = "2026-12-01-load"
seed = 5
[[arms]]
name = "a"
{arm}
[[stages]]
kind = "{kind}"
context_target = 256
max_tokens = 4
{stage}
"""
SIMULATED = "[arms.simulated]\ndecode_tok_s = 4000.0\nprefill_tok_s = 400000.0"


def _plan(stage: str, arm: str = SIMULATED, kind: str = "load") -> Any:
    text = PLAN.format(arm=arm, stage=stage, kind=kind)
    return parse_plan(tomllib.loads(text), source="plan.toml")


def test_a_load_stage_has_a_cell_per_rate_and_records_its_arrivals() -> None:
    plan = _plan('rate = [0.5, 20, 2.5]\narrival = "gamma"\nburstiness = 0.5\nrequests = 7')
    stage = plan.stages[0]
    assert [c.id for c in stage.cells] == [
        "ctx256-r0_5-nothink", "ctx256-r20-nothink", "ctx256-r2_5-nothink",
    ]  # fmt: skip
    assert [stage.measured(c) for c in stage.cells] == [7, 7, 7]
    assert stage.to_json()["arrival"] == {
        "process": "gamma", "burstiness": 0.5, "duration_s": None, "requests": 7,
        "max_in_flight": None,
    }  # fmt: skip
    assert stage.to_json()["cells"][0]["rate"] == 0.5
    timed = _plan("rate = 10\nduration_s = 2\nmax_in_flight = 3").stages[0]
    assert timed.cells[0].concurrency == 3  # the cap is what the concurrency rule compares
    assert timed.measured(timed.cells[0]) == len(
        offsets_ns(timed.arrivals(timed.cells[0]), "ctx256-r10-nothink")
    )  # type: ignore[arg-type]
    assert rate_name(0.125) == "0_125" and rate_name(3.0) == "3"


@pytest.mark.parametrize(
    ("stage", "message"),
    [
        ("rate = 10", "stages[0].requests: a load stage sets requests or duration_s"),
        ("rate = 10\nrequests = 5\nduration_s = 1", "requests or duration_s, one of them"),
        ("rate = 0\nrequests = 5", "stages[0].rate: expected requests per second"),
        ("rate = [10, -1]\nrequests = 5", "stages[0].rate: expected requests per second"),
        ('rate = "fast"\nrequests = 5', "stages[0].rate: expected requests per second"),
        ("rate = 10\nrequests = 5\nburstiness = 2", "only a gamma arrival has a burstiness"),
        ('rate = 10\nrequests = 5\narrival = "bursty"', "expected one of poisson, constant"),
        ("rate = [2.5, 2.5000001]\nrequests = 5", "two rates spell the same cell name"),
        ("rate = [10, 10.0, 20]\nrequests = 5", "stages[0].rate: 10.0 is listed twice"),
        ("rate = 1e-7\nrequests = 5", "stages[0].rate: expected requests per second from"),
        ("rate = 10\nrequests = 5\nmax_in_flight = 0", "max_in_flight: must be 1 to"),
        ("rate = 1000\nduration_s = 2000", "more than 1,000,000 requests"),
        ("rate = 10\nrequests = 5\nconcurrency = 4", "stages[0].concurrency: unknown key"),
    ],
)
def test_a_load_stage_s_mistakes_are_named(stage: str, message: str) -> None:
    with pytest.raises(InvalidArtifact, match=re.escape(message)):
        _plan(stage)


# -- runs ------------------------------------------------------------------------------

TWO_ARMS = """
campaign_id = "2026-12-01-open-loop"
seed = 3
[[arms]]
name = "base"
[arms.simulated]
decode_tok_s = 4000.0
prefill_tok_s = 400000.0
[[arms]]
name = "cand"
[arms.simulated]
decode_tok_s = 5000.0
prefill_tok_s = 400000.0
[[stages]]
kind = "load"
context_target = 256
rate = [20, 40]
duration_s = 2
max_tokens = 4
controlled_output = true
warmup = 1
"""


def test_a_load_stage_runs_on_its_schedule_and_verifies(tmp_path: Path, cli: CliRun) -> None:
    _, folder = run_plan_text(TWO_ARMS, tmp_path)
    status, report = verify_json(cli, folder)
    assert status == 0, report["findings"]
    for path in sorted(folder.glob("*/load/*.json")):
        document = cell_files.load(path)
        cell, arrival = document["cell"], document["cell"]["arrival"]
        offsets = offsets_ns(Arrivals.from_json(arrival), cell["id"])
        # In the order they ended; due in the order of their indexes.
        measured = sorted(
            (r for r in document["requests"] if not r["warmup"]), key=lambda r: r["index"]
        )
        assert cell["requests"] == len(measured) == len(offsets) > 20
        assert [r["scheduled_ns"] for r in measured] == [arrival["start_ns"] + o for o in offsets]
        # Each request's task starts before it is due, and still waits for its time.
        assert all(r["sent_ns"] >= r["scheduled_ns"] for r in measured)
        # A warm-up goes before the schedule, one at a time: it was never due.
        assert ["scheduled_ns" in r for r in document["requests"] if r["warmup"]] == [False]
        assert arrival["lateness"] == lateness(document["requests"])
        assert all(r["error"] is None for r in document["requests"])
    db = build([folder])
    rows = db.query(
        "SELECT arm, cell, n, achieved_rate_rps, lateness_ms_p99, lateness_ms_max "
        "FROM cells ORDER BY arm, cell"
    ).to_json()
    assert [(r["arm"], r["cell"]) for r in rows] == [
        (arm, cell) for arm in ("base", "cand") for cell in ("ctx256-r20-nothink", "ctx256-r40-nothink")
    ]  # fmt: skip
    for row in rows:
        # The rate achieved is the sends' own (how close it comes to the schedule's is the
        # accuracy test's, run alone: here other tests share the cores).
        document = cell_files.load(folder / row["arm"] / "load" / f"{row['cell']}.json")
        sent = [r["sent_ns"] for r in document["requests"] if not r["warmup"]]
        achieved = (len(sent) - 1) / ((max(sent) - min(sent)) / 1e9)
        assert row["achieved_rate_rps"] == pytest.approx(achieved, rel=1e-12)
        stated = document["cell"]["arrival"]["lateness"]
        assert row["lateness_ms_p99"] == pytest.approx(stated["p99_ms"], abs=1e-6)
        assert row["lateness_ms_max"] == pytest.approx(stated["max_ms"], abs=1e-6)
    status, out, err = cli(
        "derive", str(folder), "--baseline", "base", "--candidate", "cand",
        "--differs", "simulated_profile",
    )  # fmt: skip
    assert status == 0, err
    assert out.splitlines()[1] == "matched"


def test_latency_from_the_due_time_shows_a_stall_that_the_send_time_hides(
    simulator: Start,
) -> None:
    """The server stalls for 2 s at its 20th request; the client may hold two requests in
    flight. Requests due during the stall wait in the client and go out late: from their
    send they are fast, from when they were due they waited out the stall, as a user would
    have. Only the two stuck at the server show it either way."""
    sim = simulator(decode_tok_s=4000.0, pause_at_request=20, pause_s=2.0)
    arm = f'base_url = "{sim.base_url}"\nmodel = "anvil-sim"'
    plan = _plan("rate = 20\nduration_s = 4\nmax_in_flight = 2", arm=arm)
    arm_, stage = plan.arms[0], plan.stages[0]
    cell = stage.cells[0]
    prompts = [
        Prompt(i, False, [{"role": "user", "content": f"hello {i}"}], "0" * 64)
        for i in range(stage.measured(cell))
    ]
    run = CellRun(new_origin())
    records: list[dict[str, Any]] = []

    async def go() -> None:
        async with EndpointClient(sim.base_url, concurrency=cell.concurrency) as client:
            await run_cell(
                client, arm_, stage, cell, prompts.__getitem__, range(len(prompts)), run,
                lambda record: records.append(completed(record)),
            )  # fmt: skip

    asyncio.run(go())
    records.sort(key=lambda r: r["index"])
    assert len(records) == len(prompts) and all(r["error"] is None for r in records)
    from_send = [(r["end_ns"] - r["sent_ns"]) / 1e9 for r in records]
    from_due = [(r["end_ns"] - r["scheduled_ns"]) / 1e9 for r in records]
    held = [(r["sent_ns"] - r["scheduled_ns"]) / 1e9 for r in records]
    # The two requests in flight when the stall began waited it out at the server.
    assert sum(s > 1.0 for s in from_send) <= 2
    # Twenty rate-seconds of requests were due during the stall: held back, never dropped.
    assert sum(h > 0.5 for h in held) >= 15
    assert sum(d > 1.0 for d in from_due) >= 15
    assert max(from_due) > 1.5
    # Held back requests leave in the order they were due, each when a slot frees.
    assert [r["sent_ns"] for r in records] == sorted(r["sent_ns"] for r in records)
    assert all(r["sent_ns"] >= r["scheduled_ns"] for r in records)
    assert lateness(records)["limited_by_client"] is True


def test_the_open_loop_holds_its_cap_its_order_and_its_lead(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The sender alone, with a fake request that takes 20 ms: requests due every 1 ms
    with at most two in flight. Each task starts SPIN_NS before its request is due (never
    earlier, never at the due time), no request goes out early, the cap holds on its own
    (the client's pool would hide a broken one), and held-back requests leave in order."""
    from runners.campaign import _stages as stages

    lead = 50_000_000  # wide enough that a busy machine cannot push a start past its due
    monkeypatch.setattr(stages, "SPIN_NS", lead)
    created: list[int] = []
    real_create_task = asyncio.create_task

    def create_task(coro: Any) -> asyncio.Task[Any]:
        created.append(stages.time.perf_counter_ns())
        return real_create_task(coro)

    monkeypatch.setattr(stages.asyncio, "create_task", create_task)
    prompts = [Prompt(i, False, [], "0" * 64) for i in range(12)]
    offsets = [i * 1_000_000 for i in range(12)]
    run = CellRun(new_origin())
    calls: list[tuple[int, int, int]] = []  # (index, due on the run clock, called at)
    in_flight = peak = 0

    async def one(prompt: Prompt, due: int) -> None:
        nonlocal in_flight, peak
        calls.append((prompt.index, due, stages.time.perf_counter_ns() - run.origin_ns))
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.02)
        in_flight -= 1

    asyncio.run(stages._open_loop(range(12), 0, offsets, 2, run, prompts.__getitem__, one))
    assert peak == 2
    assert [index for index, _, _ in calls] == list(range(12))
    assert all(called >= due for _, due, called in calls)
    assert run.schedule_start_ns is not None
    dues = [run.origin_ns + run.schedule_start_ns + o for o in offsets]
    assert len(created) == len(dues)
    for at, due in zip(created, dues, strict=True):
        assert due - lead - 1_000_000 <= at < due


@pytest.mark.accuracy
def test_200_requests_per_second_for_10_s_keep_their_schedule(tmp_path: Path) -> None:
    """The issue's accuracy case: Poisson at 200 requests/s for 10 s against the simulator.
    The achieved rate is the schedule's within 2 %. (Sender lateness is measured, not
    asserted here: benchmarks/client_bench.py reports it against its 1 ms goal.)"""
    plan = TWO_ARMS.replace('name = "cand"', 'name = "unused"').split('[[arms]]\nname = "unused"')[
        0
    ]
    plan += '[[stages]]\nkind = "load"\ncontext_target = 256\nrate = 200\nduration_s = 10\nmax_tokens = 4\n'
    _, folder = run_plan_text(plan, tmp_path)
    document = cell_files.load(next(folder.glob("base/load/*.json")))
    measured = [r for r in document["requests"] if not r["warmup"]]
    assert all(r["error"] is None for r in measured)
    due = [r["scheduled_ns"] for r in measured]
    sent = sorted(r["sent_ns"] for r in measured)
    scheduled_rate = (len(due) - 1) / ((due[-1] - due[0]) / 1e9)
    achieved = (len(sent) - 1) / ((sent[-1] - sent[0]) / 1e9)
    assert scheduled_rate == pytest.approx(200, rel=0.05)
    assert achieved == pytest.approx(scheduled_rate, rel=0.02)


# -- verify's hold on a load cell ------------------------------------------------------


def _issues(document: dict[str, Any]) -> set[tuple[str, str]]:
    from ledger.evidence.runs import check_cell_run

    return {(i.code, i.pointer) for i in check_cell_run(document)}


def _load_cell(edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    from generate_verify_assets import load_cell_run

    document = load_cell_run()
    edit(document)
    return document


def _restate(document: dict[str, Any]) -> None:
    document["cell"]["arrival"]["lateness"] = lateness(document["requests"])


def _interrupted(document: dict[str, Any]) -> None:
    # The second request was cancelled in flight: the third keeps its own due time.
    del document["requests"][1]
    document.update(status="incomplete", reason="interrupted by SIGINT")
    _restate(document)


def _early(document: dict[str, Any]) -> None:
    # Every due time 50 ms later, lateness restated: sent before due, latency flattered.
    for record in document["requests"]:
        record["scheduled_ns"] += 50_000_000
    document["cell"]["arrival"]["start_ns"] += 50_000_000
    _restate(document)


def _warm_up_due(document: dict[str, Any]) -> None:
    document["requests"][0]["warmup"] = True
    document["cell"]["warmup"] = 1
    _restate(document)


def _no_due_time(document: dict[str, Any]) -> None:
    del document["requests"][2]["scheduled_ns"]
    _restate(document)


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda d: None, set()),
        (_interrupted, {("run-incomplete", "/status")}),
        (_early, {("record-inconsistent", f"/requests/{i}/sent_ns") for i in range(3)}),
        (
            lambda d: d["cell"]["arrival"]["lateness"].update(threshold_ms=1000.0),
            {("derived-mismatch", "/cell/arrival/lateness/threshold_ms")},
        ),
        (lambda d: d["cell"].pop("arrival"), {("record-inconsistent", "/cell")}),
        (_no_due_time, {("record-inconsistent", "/requests/2")}),
        (
            _warm_up_due,
            {
                ("record-inconsistent", "/requests/0/scheduled_ns"),
                ("record-inconsistent", "/requests"),  # two measured where three were planned
                ("schedule-mismatch", "/requests/1/scheduled_ns"),
            },
        ),
        (
            lambda d: d["cell"].update(concurrency=4),
            {("schedule-mismatch", "/cell/concurrency")},
        ),
        (
            lambda d: d["cell"]["arrival"].update(requests=2),
            {
                ("schedule-mismatch", "/cell/requests"),
                ("schedule-mismatch", "/requests/2/scheduled_ns"),
            },
        ),
    ],
    ids=[
        "valid",
        "interrupted",
        "sent-before-due",
        "threshold",
        "no-arrival",
        "no-due-time",
        "warm-up-due",
        "concurrency",
        "count",
    ],
)
def test_verify_holds_a_load_cell_to_its_settings(
    edit: Callable[[dict[str, Any]], None], expected: set[tuple[str, str]]
) -> None:
    assert _issues(_load_cell(edit)) == expected


def test_a_due_time_on_a_closed_loop_cell_is_refused() -> None:
    from generate_verify_assets import cell_run

    document = cell_run()
    document["requests"][0]["scheduled_ns"] = 0
    assert _issues(document) == {("record-inconsistent", "/requests/0/scheduled_ns")}


def test_lateness_at_the_threshold_is_not_limited_and_warm_ups_never_count() -> None:
    records = [
        {"warmup": True, "sent_ns": 90_000_000, "scheduled_ns": 0},  # ignored
        *({"warmup": False, "sent_ns": 1_000_000 + i, "scheduled_ns": i} for i in range(10)),
    ]
    found = lateness(records)
    assert (found["p99_ms"], found["max_ms"], found["limited_by_client"]) == (1.0, 1.0, False)


def test_a_schedule_too_long_is_refused_before_it_is_drawn() -> None:
    with pytest.raises(ValueError, match="more than 1,000,000"):
        offsets_ns(Arrivals("poisson", 1.0, 0, duration_s=1e12), "c")
    with pytest.raises(ValueError, match="more than 1,000,000"):
        offsets_ns(Arrivals("poisson", 1000.0, 0, duration_s=1e6), "c")


# -- sweeps ----------------------------------------------------------------------------

SWEEP = """
campaign_id = "2026-12-01-sweep"
seed = 8
[[arms]]
name = "base"
[arms.simulated]
decode_tok_s = 4000.0
prefill_tok_s = 400000.0
max_running_requests = 4
[[arms]]
name = "cand"
[arms.simulated]
decode_tok_s = 3000.0
prefill_tok_s = 400000.0
max_running_requests = 4
[[stages]]
kind = "sweep"
context_target = 256
rates = 3
probe_requests = 8
duration_s = 1.5
max_tokens = 8
controlled_output = true
"""


def test_a_sweep_s_rates_lie_evenly_between_its_synchronous_rate_and_its_ceiling() -> None:
    assert sweep_rate(10.0, 50.0, 1, 3) == 20.0
    assert sweep_rate(10.0, 50.0, 3, 3) == 40.0
    assert sweep_rate(3.333, 7.777, 1, 2) == 4.81  # to 0.01 request/s
    assert sweep_rate(10.0, 8.0, 2, 3) == 10.0  # a ceiling below: the synchronous rate
    assert sweep_rate(0.0, 0.0, 1, 1) == 0.001  # nothing answered: the lowest rate named
    stage = _plan("rates = 3\nprobe_requests = 6\nrequests = 5", kind="sweep").stages[0]
    assert [c.id for c in stage.cells] == ["ctx256-c1-nothink", "ctx256-c6-nothink"]
    assert stage.to_json()["rates"] == 3
    assert [(c.id, p) for c, p in stage.sweep_cells(10.0, 50.0)] == [
        ("ctx256-r20-nothink", 1), ("ctx256-r30-nothink", 2), ("ctx256-r40-nothink", 3),
    ]  # fmt: skip
    # A server no faster in parallel: one rate, not three cells of the same name.
    assert [(c.id, p) for c, p in stage.sweep_cells(10.0, 9.0)] == [("ctx256-r10-nothink", 1)]


@pytest.mark.parametrize(
    ("stage", "message"),
    [
        ("rates = 0\nrequests = 5", "stages[0].rates: must be 1 to 32"),
        ("rates = 33\nrequests = 5", "stages[0].rates: must be 1 to 32"),
        ("probe_requests = 1\nrequests = 5", "stages[0].probe_requests: must be 2 to"),
        ("rate = 5\nrequests = 5", "stages[0].rate: unknown key"),
        ("thinking = [true, false]\nrequests = 5", "stages[0].thinking: expected true or false"),
    ],
)
def test_a_sweep_s_mistakes_are_named(stage: str, message: str) -> None:
    with pytest.raises(InvalidArtifact, match=re.escape(message)):
        _plan(stage, kind="sweep")


def test_a_sweep_runs_its_probes_then_the_same_rates_on_every_arm(
    tmp_path: Path, cli: CliRun
) -> None:
    result, folder = run_plan_text(SWEEP, tmp_path)
    assert result.complete
    cells = {
        arm: sorted(p.stem for p in (folder / arm / "sweep").glob("*.json"))
        for arm in ("base", "cand")
    }
    assert cells["base"] == cells["cand"]
    rate_cells = [c for c in cells["base"] if "-r" in c]
    assert len(rate_cells) == 3 and "ctx256-c1-nothink" in cells["base"]
    sweeps = []
    for arm in ("base", "cand"):
        for name in rate_cells:
            document = json.loads((folder / arm / "sweep" / f"{name}.json").read_text())
            sweeps.append(document["cell"]["arrival"]["sweep"])
            assert document["stage"] == {"name": "sweep", "kind": "sweep"}
    # One measurement of the first arm chose every arm's rates.
    assert {s["from"]["arm"] for s in sweeps} == {"base"}
    assert len({(s["synchronous_rps"], s["ceiling_rps"]) for s in sweeps}) == 1
    first = sweeps[0]
    probes = [
        cell_files.load(folder / "base/sweep" / f"{c}.json")
        for c in ("ctx256-c1-nothink", "ctx256-c8-nothink")
    ]
    for probe, rate in zip(probes, (first["synchronous_rps"], first["ceiling_rps"]), strict=True):
        done = [r for r in probe["requests"] if not r["warmup"] and r["error"] is None]
        span = (max(r["end_ns"] for r in done) - min(r["sent_ns"] for r in done)) / 1e9
        assert rate == pytest.approx(len(done) / span, rel=1e-6) and len(done) == 8
    assert first["ceiling_rps"] > first["synchronous_rps"] > 0
    status, report = verify_json(cli, folder)
    assert status == 0, report["findings"]
    status, _, err = cli(
        "derive", str(folder), "--baseline", "base", "--candidate", "cand",
        "--differs", "simulated_profile", "--slo", "e2e_ms=60000",
    )  # fmt: skip
    assert status == 0, err
    derived = json.loads((folder / "derived/ab-comparison-base-vs-cand.json").read_text())
    (stage,) = derived["load"]["stages"]
    assert [r["cell"] for r in stage["baseline"]["rows"]] == sorted(
        rate_cells, key=lambda c: float(c.split("-r")[1].split("-")[0].replace("_", "."))
    )
    # A second run of the plan with --resume finds the same rates on disk and runs nothing.
    again, _ = run_plan_text(SWEEP, tmp_path, resume=True)
    assert again.complete and {o.status for o in again.cells} == {"skipped"}
    # A probe edited after the rates were chosen from it: every rate cell says otherwise.
    probe = folder / "base/sweep/ctx256-c1-nothink.json"
    document = cell_files.load(probe)
    document["requests"][-1]["end_ns"] += 1_000_000_000
    cell_files.save(probe, document)
    manifest = json.loads((folder / "run-manifest.json").read_text())
    for entry in manifest["cells"]:
        if entry["artifact"] and entry["artifact"]["path"] == "base/sweep/ctx256-c1-nothink.json":
            entry["artifact"]["sha256"] = sha256_file(probe)[0]
    (folder / "run-manifest.json").write_text(json.dumps(manifest))
    forge_seal(folder)
    status, report = verify_json(cli, folder)
    assert status == 1
    swept = [f for f in report["findings"] if f["pointer"].startswith("/cell/arrival/sweep")]
    # Every rate cell of both arms (the comparison derived before names the old probe too).
    assert sorted(f["path"].split(f"{folder.name}/")[1] for f in swept) == sorted(
        f"{arm}/sweep/{name}.json" for arm in ("base", "cand") for name in rate_cells
    )
    assert {f["pointer"] for f in swept} == {"/cell/arrival/sweep/synchronous_rps"}


def test_a_sweep_rate_edited_is_caught() -> None:
    def edit(document: dict[str, Any]) -> None:
        document["cell"]["arrival"]["sweep"] = {
            "synchronous_rps": 10.0, "ceiling_rps": 50.0, "from": {"arm": "a",
            "synchronous": "ctx1024-c1-nothink", "ceiling": "ctx1024-c8-nothink"},
            "position": 1, "of": 3,
        }  # fmt: skip

    def swept(document: dict[str, Any]) -> None:
        document["stage"] = {"name": "sweep", "kind": "sweep"}
        edit(document)

    # Position 1 of 3 between 10 and 50 is 20 req/s; the cell ran at 20: consistent.
    assert _issues(_load_cell(swept)) == set()
    for change in ({"position": 2}, {"position": 4, "of": 3}, {"synchronous_rps": 11.0}):
        moved = _load_cell(lambda d, c=change: (swept(d), d["cell"]["arrival"]["sweep"].update(c)))
        assert _issues(moved) == {("schedule-mismatch", "/cell/arrival/rate")}, change
    # A sweep's rate cell must say how its rate was chosen; a load cell must not claim it.
    unexplained = _load_cell(lambda d: d.update(stage={"name": "sweep", "kind": "sweep"}))
    assert _issues(unexplained) == {("schedule-mismatch", "/cell/arrival")}
    assert _issues(_load_cell(edit)) == {("schedule-mismatch", "/cell/arrival")}


def test_a_sweep_whose_probes_all_fail_schedules_no_rate(tmp_path: Path, cli: CliRun) -> None:
    """Nothing answered, so there is no rate to sweep: the probes are kept, no rate cell is
    invented (a rate of 0.001 req/s would have run for hours)."""
    plan = SWEEP.replace(
        "max_running_requests = 4\n[[arms]]",
        'max_running_requests = 4\nfaults = [{kind = "status", status = 503, rate = 1.0}]\n[[arms]]',
        1,
    )
    _, folder = run_plan_text(plan, tmp_path)
    assert sorted(p.stem for p in (folder / "base/sweep").glob("*.json")) == [
        "ctx256-c1-nothink", "ctx256-c8-nothink",
    ]  # fmt: skip
    assert sorted(p.stem for p in (folder / "cand/sweep").glob("*.json")) == [
        "ctx256-c1-nothink", "ctx256-c8-nothink",
    ]  # fmt: skip
    assert verify_json(cli, folder)[0] == 0


def test_a_sweep_s_rates_are_held_to_the_probes_they_came_from() -> None:
    from ledger.evidence.runs import SweepCell, check_sweeps

    probes = [
        ("a/s/ctx1-c1-nothink.json", SweepCell("a", "s", "ctx1-c1-nothink", 10.0, None)),
        ("a/s/ctx1-c8-nothink.json", SweepCell("a", "s", "ctx1-c8-nothink", 50.0, None)),
    ]
    chosen = (10.0, 50.0, "a", "ctx1-c1-nothink", "ctx1-c8-nothink")
    rates = [
        (f"{arm}/s/ctx1-r20-nothink.json", SweepCell(arm, "s", "ctx1-r20-nothink", 19.0, chosen))
        for arm in ("a", "b")
    ]
    assert check_sweeps([*probes, *rates]) == []

    def issues(cells: list[tuple[str, SweepCell]]) -> list[tuple[str, str, str]]:
        return [(rel, i.pointer, i.message) for rel, i in check_sweeps(cells)]

    # The probe measured another ceiling than the rate cells say.
    moved = [probes[0], (probes[1][0], SweepCell("a", "s", "ctx1-c8-nothink", 51.0, None))]
    assert issues([*moved, *rates]) == [
        (rel, "/cell/arrival/sweep/ceiling_rps",
         "ceiling_rps 50.0, but a/s/ctx1-c8-nothink measured 51.0")
        for rel, _ in rates
    ]  # fmt: skip
    # The probe is not in the campaign.
    assert issues([probes[0], *rates])[0][2] == (
        "its rate came from a/s/ctx1-c8-nothink, which is not here"
    )
    # One arm's rates said to come from its own probes: the arms did not run one ladder.
    own = (10.0, 50.0, "b", "ctx1-c1-nothink", "ctx1-c8-nothink")
    b_probes = [(rel.replace("a/", "b/"), SweepCell("b", "s", c.cell, c.completed_rps, None))
                for rel, c in probes]  # fmt: skip
    mixed = [rates[0], (rates[1][0], SweepCell("b", "s", "ctx1-r20-nothink", 19.0, own))]
    found = issues([*probes, *b_probes, *mixed])
    assert [(rel, pointer) for rel, pointer, _ in found] == [
        (rel, "/cell/arrival/sweep/from") for rel, _ in mixed
    ]


def test_a_stall_does_not_let_a_later_request_out_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop stalls while every task spins towards its due time: the clock jumps past
    all of them just as the task of request 4 looks at it, before those of 2 and 3 do. The
    requests still queue for a slot, and go out, in the order they are due."""
    from runners.campaign import _stages as stages

    monkeypatch.setattr(stages, "SPIN_NS", 50_000_000)
    real = time.perf_counter_ns
    jump = [0]

    def clock() -> int:
        try:
            task = asyncio.current_task()
        except RuntimeError:  # outside the loop
            task = None
        frame = getattr(task.get_coro(), "cr_frame", None) if task is not None else None
        prompt = frame.f_locals.get("prompt") if frame is not None else None
        if not jump[0] and getattr(prompt, "index", None) == 4 and len(asyncio.all_tasks()) > 12:
            jump[0] = 1_000_000_000  # every request is due now
        return real() + jump[0]

    monkeypatch.setattr(stages.time, "perf_counter_ns", clock)
    prompts = [Prompt(i, False, [], "0" * 64) for i in range(12)]
    offsets = [i * 1_000_000 for i in range(12)]
    run = CellRun(new_origin())
    order: list[int] = []

    async def one(prompt: Prompt, due: int) -> None:
        order.append(prompt.index)
        await asyncio.sleep(0.005)

    asyncio.run(stages._open_loop(range(12), 0, offsets, 2, run, prompts.__getitem__, one))
    assert jump[0]  # the stall happened where it was meant to
    assert order == list(range(12))


def test_a_sender_behind_its_schedule_holds_a_bounded_backlog(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Requests due every 1 ms, two in flight, each held until the schedule is long past:
    the sender makes at most two plus the backlog's requests ahead, never one per request
    due, and every request still goes out, in order, none before it was due."""
    from runners.campaign import _stages as stages

    monkeypatch.setattr(stages, "BACKLOG", 3)
    prompts = [Prompt(i, False, [], "0" * 64) for i in range(40)]
    offsets = [i * 1_000_000 for i in range(40)]
    run = CellRun(new_origin())
    made: list[int] = []
    sent: list[tuple[int, int, int]] = []
    most = 0

    def prepare(index: int) -> Prompt:
        made.append(index)
        return prompts[index]

    async def one(prompt: Prompt, due: int) -> None:
        nonlocal most
        most = max(most, len(made) - len(sent))
        sent.append((prompt.index, due, stages.time.perf_counter_ns() - run.origin_ns))
        await asyncio.sleep(0.01)  # ten times the gap: the sender falls behind

    asyncio.run(stages._open_loop(range(40), 0, offsets, 2, run, prepare, one))
    assert [index for index, _, _ in sent] == list(range(40))
    assert all(at >= due for _, due, at in sent)
    # At most the two in flight and the three waiting were ever made ahead of a send.
    assert most <= 2 + 3
