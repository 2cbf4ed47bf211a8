"""The runners against llama.cpp's own server (``tests/llama_server.py``): a real server
that tokenizes, templates, schedules and streams as its authors wrote it.

What it showed on first contact, and these tests hold: it closes the connection after
every stream although its headers promise keep-alive (every request must still succeed),
it counts prompt tokens with a real tokenizer (calibration must land), it reports its own
timings (recorded beside ours), and its chat template has a thinking switch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ledger.formats.jsonio import read_json
from ledger.measures.arrivals import sweep_rate
from tests import cells
from tests.conftest import CliRun, run_plan_text, verify_json
from tests.llama_server import LlamaBuild, LlamaServer

pytestmark = pytest.mark.xdist_group("llama-server")

TARGETS = (512, 2048, 6000)
THINK_MARKUP = "<think>\n\n</think>\n\n"
"""What Qwen3's template adds to the prompt when thinking is switched off."""


@pytest.fixture(scope="module")
def server(llama_server: LlamaServer) -> LlamaServer:
    return llama_server


def _head(campaign_id: str, seed: int, *, prefix: str = "shared") -> str:
    return f"""
campaign_id = "{campaign_id}"
prefix = "{prefix}"
seed = {seed}
[deadlines]
first_byte_s = 120
idle_s = 30
"""


def _arm(name: str, server: LlamaServer, parallel: int) -> str:
    return f"""
[[arms]]
name = "{name}"
base_url = "{server.base_url}"
model = "anvil-tiny"
[arms.identity]
server = "llama.cpp llama-server"
model = "anvil-tiny-random"
parallel = {parallel}
"""


def _cells(campaign: Path) -> list[dict[str, Any]]:
    return [cells.load(p) for p in sorted(campaign.glob("*/*/ctx*.json"))]


def test_capacity_and_endurance_every_request_and_calibration_succeeds(
    server: LlamaServer, tmp_path: Path, cli: CliRun
) -> None:
    plan = f"""{_head("2026-11-30-llama-capacity", 5)}
{_arm("llama", server, 4)}
[[stages]]
kind = "capacity"
context_targets = {list(TARGETS)}
concurrency = [1, 4]
requests = 8
max_tokens = 16
controlled_output = true
warmup = 1
[[stages]]
kind = "endurance"
context_target = 512
requests = 8
max_tokens = 16
controlled_output = true
"""
    result, campaign = run_plan_text(plan, tmp_path)
    assert result.complete
    cells = _cells(campaign)
    assert len(cells) == 7
    resent = 0
    for cell in cells:
        where = f"{cell['stage']['name']}/{cell['cell']['id']}"
        target = cell["cell"]["context_target"]
        assert cell["status"] == "complete", where
        assert cell["calibration"]["status"] == "ok", where
        measured = [r for r in cell["requests"] if not r["warmup"]]
        assert len(measured) == 8, where
        assert [r["error"] for r in measured] == [None] * 8, where
        for record in cell["requests"]:
            prompt = record["usage"]["prompt_tokens"]
            # The server's own count, through its own tokenizer and template.
            assert 0.98 * target <= prompt <= target, (where, prompt)
            assert record["usage"]["completion_tokens"] == 16
            timings = record["server_timings"]
            assert timings["prompt_n"] + timings["cache_n"] == prompt
            assert timings["predicted_n"] == 16 and timings["predicted_ms"] > 0
            resent += record["resent"] is not None
        # /metrics was scraped: llama.cpp's counters, its prompt cache among them, and what
        # they say between the scrapes is what the measured requests' own timings add up to.
        assert cell["metrics"]["available"] is True, where
        cache = cell["metrics"]["prefix_cache"]
        timed = [r["server_timings"] for r in measured]
        assert cache["hits"] == sum(t["cache_n"] for t in timed), where
        assert cache["queries"] == sum(t["prompt_n"] + t["cache_n"] for t in timed), where
        assert (
            cell["metrics"]["prefix_cache"]["hits_family"] == "llamacpp:prompt_tokens_cached_total"
        )
    # llama-server closed the pooled connections under them (31 of 77 sends in one run):
    # resent on a fresh connection, they succeeded, where 31 of 72 once failed.
    assert resent > 0
    status, report = verify_json(cli, campaign)
    assert status == 0, report["findings"]

    # The server's clock beside ours, per cell.
    status, out, err = cli(
        "sql",
        "--from",
        str(campaign),
        "--format",
        "json",
        "SELECT cell, n, server_timed, server_gap_ms_p50, decode_vs_server_pct_p50 FROM cells",
    )
    assert status == 0, err
    rows = json.loads(out)
    assert len(rows) == 7
    for row in rows:
        assert row["server_timed"] == row["n"] == 8
        # The first token comes after the server's prompt time: what lies between is HTTP,
        # queueing, tokenizing and templating, never negative.
        assert row["server_gap_ms_p50"] > 0
        assert row["decode_vs_server_pct_p50"] is not None


def test_preflight_runs_every_check_and_fails_honestly_and_thinking_switches_the_template(
    server: LlamaServer, tmp_path: Path
) -> None:
    plan = f"""{_head("2026-11-30-llama-gates", 3)}
{_arm("llama", server, 4)}
[[stages]]
kind = "preflight"
long_tool_tokens = 2000
[[stages]]
kind = "thinking-control"
"""
    result, campaign = run_plan_text(plan, tmp_path)
    preflight = read_json(campaign / "llama" / "preflight.json")
    # Every check ran and was judged; random weights answer nothing right.
    assert preflight["checks"] == 10
    statuses = {c["name"]: c["verdict"] for c in preflight["records"]}
    assert len(statuses) == 10
    assert set(statuses.values()) <= {"passed", "failed", "not-applicable"}
    assert preflight["passed"] is False
    assert preflight["checks_passed"] < preflight["checks"]
    assert "failed" in statuses.values()

    thinking = read_json(campaign / "llama" / "thinking-control.json")
    records = {c["name"]: c for c in thinking["records"]}
    markup = len(server.tokenize(THINK_MARKUP))
    assert markup > 0
    repetitions = thinking["settings"]["repetitions"]
    assert len(records) == 2 * repetitions
    for repetition in range(1, repetitions + 1):
        off = records[f"thinking-disabled-{repetition}"]["response"]["prompt_tokens"]
        on = records[f"thinking-enabled-{repetition}"]["response"]["prompt_tokens"]
        # The switch reached Qwen3's template: thinking off adds the empty think block.
        assert off - on == markup, (off, on, markup)
    assert (campaign / "run-manifest.json").exists() and result.interrupted is None


def test_two_llama_server_arms_differing_in_one_setting(
    llama_build: LlamaBuild, tmp_path: Path, cli: CliRun
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    with (
        LlamaServer(llama_build, parallel=1, log=logs / "np1.log") as one,
        LlamaServer(llama_build, parallel=4, log=logs / "np4.log") as four,
    ):
        plan = f"""{_head("2026-11-30-llama-parallel", 9, prefix="unique")}
{_arm("np1", one, 1)}
{_arm("np4", four, 4)}
[[stages]]
kind = "capacity"
context_targets = [1024]
concurrency = 4
requests = 12
max_tokens = 16
controlled_output = true
warmup = 1
"""
        result, campaign = run_plan_text(plan, tmp_path / "raw")
    assert result.complete
    status, _, err = cli(
        "derive",
        str(campaign),
        "--baseline",
        "np1",
        "--candidate",
        "np4",
        "--kind",
        "ab",
        "--differs",
        "parallel",
    )
    assert status == 0, err
    comparison = read_json(next((campaign / "derived").glob("ab-comparison-*.json")))
    # Same prompts, same token counts, controlled output, identities apart only in -np.
    assert comparison["matched"] is True, comparison["match_reasons"]
    status, _, err = cli("decide", str(campaign), "--candidate", "np4")
    assert status in (0, 1), err
    summary = read_json(campaign / "summary.json")
    decision = summary["decision"]
    assert decision["promotion_authorized"] is False
    unmet = {u["rule"] for u in decision["unmet"]}
    # Refused for what the campaign lacks (no GPU reserve, no container, no approver), never
    # for its comparison: the A/B rules hold.
    assert "reserve" in unmet and not unmet & {"ab-present", "matched-ab"}, decision["unmet"]
    status, _, err = cli("report", str(campaign))
    assert status == 0, err
    report = (campaign / "report.md").read_text()
    section = report.split("### The server's clock beside ours", 1)[1].split("\n#", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| np")]
    assert [row.split(" | ")[0] for row in rows] == ["| np1", "| np4"]
    assert all(" | 12 | " in row for row in rows)  # every measured request timed by both
    status, found = verify_json(cli, campaign)
    assert status == 0, found["findings"]


def test_an_open_loop_load_stage_with_goodput_at_an_slo(
    server: LlamaServer, tmp_path: Path, cli: CliRun
) -> None:
    """Poisson arrivals at 2 and 6 requests/s for 3 s on two arms of the same server, and a
    sweep (one request at a time, four at once, two rates between): every request sent on
    its schedule and answered, verify recomputing the schedules and the lateness, and
    goodput at a generous SLO that both arms sustain at the higher rate."""
    arms = "".join(
        _arm(name, server, 4).replace("parallel = 4", f'parallel = 4\nrun = "{name}"')
        for name in ("a", "b")
    )
    plan = f"""{_head("2026-12-01-llama-load", 6)}
{arms}
[[stages]]
kind = "load"
context_target = 512
rate = [2, 6]
duration_s = 3
max_tokens = 8
controlled_output = true
warmup = 1
[[stages]]
kind = "sweep"
context_target = 512
rates = 2
probe_requests = 4
duration_s = 2
max_tokens = 8
controlled_output = true
"""
    result, campaign = run_plan_text(plan, tmp_path)
    assert result.complete
    for cell in _cells(campaign):
        measured = [r for r in cell["requests"] if not r["warmup"]]
        assert [r["error"] for r in measured] == [None] * len(measured)
        assert len(measured) == cell["cell"]["requests"] >= 3
        if "arrival" in cell["cell"]:  # the sweep's two probes are closed loops
            assert all(r["scheduled_ns"] <= r["sent_ns"] for r in measured)
    status, report = verify_json(cli, campaign)
    assert status == 0, report["findings"]
    status, _, err = cli(
        "derive", str(campaign), "--baseline", "a", "--candidate", "b", "--differs", "run",
        "--slo", "e2e_ms=20000,percentile=90",
    )  # fmt: skip
    assert status == 0, err
    document = json.loads((campaign / "derived/ab-comparison-a-vs-b.json").read_text())
    load, sweep = document["load"]["stages"]
    for role in ("baseline", "candidate"):
        assert load[role]["sustainable_rate_rps"] == 6.0
        assert [r["good_fraction"] for r in load[role]["rows"]] == [1.0, 1.0]
        # The sweep's rates lie between what one request at a time and four at once gave.
        assert len(sweep[role]["rows"]) == 2
    cells = {c["cell"]["id"]: c["cell"] for c in _cells(campaign) if c["stage"]["name"] == "sweep"}
    probe = next(c["arrival"]["sweep"] for c in cells.values() if "arrival" in c)
    assert 0 < probe["synchronous_rps"] < probe["ceiling_rps"]
    assert sorted(c["arrival"]["rate"] for c in cells.values() if "arrival" in c) == [
        sweep_rate(probe["synchronous_rps"], probe["ceiling_rps"], i, 2) for i in (1, 2)
    ]
    assert verify_json(cli, campaign)[0] == 0
