"""Arms that take turns one request at a time (``interleave = true``): the turns themselves,
and whole runs against real simulated endpoints, one shared by every arm or one each."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from ledger.errors import RunnerError
from ledger.formats.cell_records import records
from ledger.formats.schema import read_document
from runners.campaign._cells import endpoint_of, one_endpoint
from runners.campaign._turns import Turns
from runners.simulate.serve import SimulatorProcess
from tests.conftest import CliRun, forge_seal, run_plan_text, verify_json


def _taken(names: list[str], rounds: dict[str, int], linger_s: float = 0.0) -> list[str]:
    """The order in which arms held their turns, each taking ``rounds[name]`` of them and
    leaving ``linger_s`` after its last (as an arm's cell ends: a scrape, its file written);
    asserts no two held one at once."""
    held: list[str] = []
    holding = 0

    async def arm(turns: Turns, name: str) -> None:
        nonlocal holding
        try:
            for _ in range(rounds[name]):
                async with turns.turn(name):
                    holding += 1
                    assert holding == 1, "two arms held a turn at once"
                    held.append(name)
                    await asyncio.sleep(0.001)
                    holding -= 1
            await asyncio.sleep(linger_s)
        finally:
            await turns.leave(name)

    async def main() -> None:
        turns = Turns(names)
        async with asyncio.TaskGroup() as group:
            for name in names:
                group.create_task(arm(turns, name))
        assert turns.order == ()

    # A turn handed to no one would wait for ever: a failure, not a hang.
    asyncio.run(asyncio.wait_for(main(), 30))
    return held


def test_each_round_starts_one_arm_further_along() -> None:
    held = _taken(["a", "b", "c"], {"a": 4, "b": 4, "c": 4})
    assert held == ["a", "b", "c", "b", "c", "a", "c", "a", "b", "a", "b", "c"]
    # Two arms: a, b; b, a; ... (the ABBA order that cancels a steady drift).
    assert _taken(["a", "b"], {"a": 4, "b": 4}) == ["a", "b", "b", "a"] * 2


@pytest.mark.parametrize(
    ("rounds", "expected"),
    [
        # The first, a middle and the last arm done early: the others finish the round,
        # then go on in rounds of their own, each starting one further along.
        ({"a": 1, "b": 3, "c": 3}, ["a", "b", "c", "c", "b", "b", "c"]),
        ({"a": 3, "b": 1, "c": 3}, ["a", "b", "c", "c", "a", "a", "c"]),
        ({"a": 3, "b": 3, "c": 1}, ["a", "b", "c", "b", "a", "a", "b"]),
        ({"a": 0, "b": 2, "c": 2}, ["b", "c", "c", "b"]),
        ({"a": 2, "b": 0, "c": 0}, ["a", "a"]),
    ],
)
def test_an_arm_done_early_leaves_the_others_their_turns(
    rounds: dict[str, int], expected: list[str]
) -> None:
    assert _taken(["a", "b", "c"], rounds) == expected


@pytest.mark.parametrize(
    ("rounds", "expected"),
    [
        # Done arms still hold their places while they linger: the others wait for them
        # to leave, then go on without them.
        ({"a": 1, "b": 3}, ["a", "b", "b", "b"]),
        ({"a": 2, "b": 5, "c": 1}, ["a", "b", "c", "b", "a", "b", "b", "b"]),
    ],
)
def test_arms_that_linger_after_their_last_turn_hold_no_one_up(
    rounds: dict[str, int], expected: list[str]
) -> None:
    assert _taken(sorted(rounds), rounds, linger_s=0.05) == expected


def test_a_turn_that_raises_still_passes_on() -> None:
    async def main() -> list[str]:
        turns = Turns(["a", "b"])
        held = []
        with pytest.raises(RuntimeError):
            async with turns.turn("a"):
                raise RuntimeError("the request failed")
        for name in ("b", "b", "a"):
            async with turns.turn(name):
                held.append(name)
        with pytest.raises(ValueError, match="'z' is not taking turns"):
            async with turns.turn("z"):
                pass
        return held

    assert asyncio.run(asyncio.wait_for(main(), 30)) == ["b", "b", "a"]


def _plan(urls: list[str], *, interleave: bool = True) -> str:
    arms = "".join(
        f'[[arms]]\nname = "{name}"\nbase_url = "{url}"\nmodel = "anvil-sim"\n'
        f"[arms.identity]\nserver = {index}\n"
        for index, (name, url) in enumerate(zip(("baseline", "candidate"), urls, strict=False))
    )
    return (
        f'campaign_id = "2026-12-04-turns"\nseed = 3\ninterleave = {str(interleave).lower()}\n'
        f'{arms}[[arms]]\nname = "baseline-again"\nrepeat_of = "baseline"\n'
        '[[stages]]\nkind = "capacity"\ncontext_targets = [128, 256]\nrequests = 5\n'
        "max_tokens = 4\ncontrolled_output = true\nwarmup = 1\n"
    )


def _served(sims: list[SimulatorProcess]) -> list[tuple[int, tuple[str, str], int]]:
    """Every chat request the endpoints received: (arrival on the host's monotonic clock,
    (the endpoint, the response id it gave the request), its last token's sending)."""
    seen = []
    for sim in sims:
        log = httpx.get(sim.root_url + "/sim/requests", trust_env=False).json()["requests"]
        seen += [
            (entry["received_ns"], (sim.base_url, entry["id"]), entry["last_token_sent_ns"])
            for entry in log
        ]
    return sorted(seen)


def _arm_of_each_response(campaign: Path) -> dict[tuple[str, str], tuple[str, str]]:
    """(endpoint, response id) -> (arm, cell), from the campaign's records."""
    found = {}
    for path in sorted(campaign.glob("*/capacity/*.json")):
        document = read_document(path)
        for record in records(campaign, document):
            key = (document["endpoint"]["base_url"], record["response_id"])
            found[key] = (document["arm"], document["cell"]["id"])
    return found


@pytest.mark.parametrize("endpoints", [1, 2])
def test_the_arms_requests_alternate_on_the_endpoints(
    endpoints: int, simulator: Callable[..., SimulatorProcess], tmp_path: Path, cli: CliRun
) -> None:
    # Each request lasts about 75 ms (three tokens after the first at 40 a second): long
    # beside an arm's own moments between its requests, even on a loaded host.
    sims = [simulator(decode_tok_s=40.0, prefill_tok_s=100000.0) for _ in range(endpoints)]
    urls = [sim.base_url for sim in sims] * (3 - endpoints)
    result, campaign = run_plan_text(_plan(urls[:2]), tmp_path / "raw")
    assert result.complete and all(c.stats.failed == 0 for c in result.cells)
    arms = _arm_of_each_response(campaign)
    measured = [(at, key, end) for at, key, end in _served(sims) if key in arms]
    served = [arms[key] for _, key, _ in measured]
    # One request at a time: each arrived after the one before it had ended.
    assert all(later[0] > earlier[2] for earlier, later in itertools.pairwise(measured))
    # Each cell's six requests (one warm-up) sent by the arms in rounds, cell after cell.
    rounds = [
        ("baseline", "candidate", "baseline-again"),
        ("candidate", "baseline-again", "baseline"),
        ("baseline-again", "baseline", "candidate"),
    ]
    expected = [
        (arm, cell)
        for cell in ("ctx128-c1-nothink", "ctx256-c1-nothink")
        for round_ in range(6)
        for arm in rounds[round_ % 3]
    ]
    assert served == expected
    # The closing table lists each cell's arms in the plan's order, whichever ended first.
    assert [(c.arm, c.cell) for c in result.cells] == expected[:3] + expected[18:21]
    # The first arm sized each cell's prompts before the turns began; no other arm did.
    workload = json.loads((campaign / "workload-manifest.json").read_text())
    probes = sum(len(cell["calibration"]["probes"]) for cell in workload["cells"])
    assert {cell["calibration"]["arm"] for cell in workload["cells"]} == {"baseline"}
    assert len(_served(sims)) == probes + len(measured)
    for path in campaign.glob("*/capacity/*.json"):
        # Each arm's clock stood still during the others' turns: its cell spans its own
        # requests and its own moments between them. Had it run on, it would span the
        # others' requests too (as the endpoints served them, between its first and last).
        document = read_document(path)
        timed = [r for r in records(campaign, document) if not r["warmup"]]
        base_url = document["endpoint"]["base_url"]
        own_keys = {(base_url, r["response_id"]) for r in timed}
        mine = [(at, end) for at, key, end in measured if key in own_keys]
        others = sum(
            end - at
            for at, key, end in measured
            if key not in own_keys and mine[0][0] < at and end < mine[-1][1]
        )
        span = max(r["end_ns"] for r in timed) - min(r["sent_ns"] for r in timed)
        own = sum(r["end_ns"] - r["sent_ns"] for r in timed)
        assert own <= span < own + others, (path.name, (span - own) / others)
    # An endpoint's counters count every arm's requests it served: none are one arm's alone
    # where arms share it (with two endpoints, the baseline and its repeat share the first).
    shared = "the arms took turns on one endpoint: its counters count every arm's requests"
    for arm in ("baseline", "candidate", "baseline-again"):
        cell = json.loads((campaign / arm / "capacity/ctx128-c1-nothink.json").read_text())
        alone = endpoints == 2 and arm == "candidate"
        assert cell["metrics"]["available"] is alone
        assert cell["metrics"]["reason"] == (None if alone else shared)
    assert json.loads((campaign / "run-plan.json").read_text())["interleave"] is True
    status, report = verify_json(cli, campaign)
    assert status == 0, report


def test_each_arm_reads_its_reserve_after_the_turns(
    simulator: Callable[..., SimulatorProcess], tmp_path: Path
) -> None:
    sim = simulator(decode_tok_s=2000.0, prefill_tok_s=100000.0)
    text = _plan([sim.base_url] * 2) + '[[stages]]\nkind = "reserve"\n'
    result, campaign = run_plan_text(text, tmp_path / "raw")
    assert result.complete
    for arm in ("baseline", "candidate", "baseline-again"):
        reserve = read_document(campaign / arm / "reserve.json")
        assert reserve["arm"] == arm


def test_without_interleave_each_arm_runs_all_its_cells_in_turn(
    simulator: Callable[..., SimulatorProcess], tmp_path: Path
) -> None:
    sim = simulator(decode_tok_s=2000.0, prefill_tok_s=100000.0)
    _, campaign = run_plan_text(_plan([sim.base_url] * 2, interleave=False), tmp_path / "raw")
    arms = _arm_of_each_response(campaign)
    served = [arms[key][0] for _, key, _ in _served([sim]) if key in arms]
    assert served == ["baseline"] * 12 + ["candidate"] * 12 + ["baseline-again"] * 12
    assert "interleave" not in json.loads((campaign / "run-plan.json").read_text())


def _interrupt(
    campaign: Path, arm: str, edit: Callable[[list[bytes]], list[bytes]] = lambda lines: lines
) -> None:
    """The arm's second cell as a killed run leaves it: marked incomplete, its part's record
    lines passed through ``edit``, its digest written to match."""
    cell = campaign / arm / "capacity/ctx256-c1-nothink.json"
    document: dict[str, Any] = json.loads(cell.read_text())
    listed = document["parts"][0]
    part = campaign / listed["path"]
    lines = edit(part.read_bytes().splitlines(keepends=True))
    data = b"".join(lines)
    part.write_bytes(data)
    listed.update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest(), requests=len(lines))
    document.update(status="incomplete", reason="interrupted by SIGTERM", records=len(lines))
    cell.write_text(json.dumps(document))


def test_an_interleaved_run_resumes_each_arm_where_it_stopped(
    simulator: Callable[..., SimulatorProcess], tmp_path: Path, cli: CliRun
) -> None:
    sim = simulator(decode_tok_s=2000.0, prefill_tok_s=100000.0)
    text = _plan([sim.base_url] * 2)
    _, campaign = run_plan_text(text, tmp_path / "raw")
    _interrupt(campaign, "candidate", lambda lines: lines[:2])
    _interrupt(campaign, "baseline-again", lambda lines: lines[:4])
    (campaign / "run-manifest.json").unlink()
    forge_seal(campaign)
    before = len(_served([sim]))
    result, _ = run_plan_text(text, tmp_path / "raw", resume=True)
    assert result.complete
    assert [c.status for c in result.cells].count("skipped") == 4
    # The two arms left take turns over their missing requests; the one with fewer left
    # leaves the rounds when it is done.
    arms = _arm_of_each_response(campaign)
    resumed = [arms[key] for _, key, _ in _served([sim])[before:]]
    assert [arm for arm, _ in resumed] == [
        "candidate", "baseline-again", "baseline-again", "candidate", "candidate", "candidate"
    ]  # fmt: skip
    status, report = verify_json(cli, campaign)
    assert status == 0, report


def test_one_arms_failure_stops_the_turns_with_its_own_error(
    simulator: Callable[..., SimulatorProcess], tmp_path: Path
) -> None:
    sim = simulator(decode_tok_s=2000.0, prefill_tok_s=100000.0)
    text = _plan([sim.base_url] * 2)
    _, campaign = run_plan_text(text, tmp_path / "raw")
    _interrupt(campaign, "baseline")
    _interrupt(campaign, "baseline-again")
    # A record of a request the cell does not have: the resume reads the part and refuses
    # the cell.
    _interrupt(
        campaign, "candidate", lambda lines: [lines[0].replace(b'"index":0,', b'"index":99,')]
    )
    (campaign / "run-manifest.json").unlink()
    forge_seal(campaign)
    with pytest.raises(RunnerError, match="cannot resume candidate/capacity/ctx256-c1-nothink"):
        run_plan_text(text, tmp_path / "raw", resume=True)
    # The arms that were taking turns with it stopped, their cells kept to be resumed.
    for arm in ("baseline", "baseline-again"):
        kept = json.loads((campaign / arm / "capacity/ctx256-c1-nothink.json").read_text())
        assert kept["status"] == "incomplete"
        assert kept["reason"] == "interrupted by the failure of an arm taking turns with it"


@pytest.mark.parametrize(
    ("first", "second", "one"),
    [
        ("http://localhost:8000/v1", "http://127.0.0.1:8000/v1", True),
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/other", True),
        ("https://127.0.0.1/v1", "https://127.0.0.1:443/v1", True),
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8001/v1", False),
        ("http://127.0.0.1:8000/v1", "https://127.0.0.1:8000/v1", False),
        ("http://no-such-host.invalid:8000/v1", "http://127.0.0.1:8000/v1", False),
    ],
)
def test_arms_share_an_endpoint_where_their_urls_reach_one(
    first: str, second: str, one: bool
) -> None:
    # Counters scraped from a shared endpoint count every arm's requests.
    assert one_endpoint(endpoint_of(first), endpoint_of(second)) is one
