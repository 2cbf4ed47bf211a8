"""Goodput under SLOs and the sustainable rate: derived from open-loop request records,
recomputed by verify, and a promotion rule."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ledger.derivation.goodput import parse_slo, sustainable, sustainable_interval
from ledger.errors import InvalidArtifact
from ledger.hashing import sha256_file
from ledger.promotion import comparison_failures
from ledger.promotion.policy import load_policy
from tests import cells
from tests.conftest import CliRun, forge_seal, run_plan_text, verify_json

# The candidate decodes ten times slower: its 8 tokens alone take 20 ms, over the SLO's
# 12 ms end to end, while the baseline's take 2 ms.
PLAN = """
campaign_id = "2026-12-01-goodput"
seed = 4
[[arms]]
name = "base"
[arms.simulated]
decode_tok_s = 4000.0
prefill_tok_s = 400000.0
[[arms]]
name = "cand"
[arms.simulated]
decode_tok_s = 400.0
prefill_tok_s = 400000.0
[[stages]]
kind = "load"
context_target = 256
rate = [10, 30]
duration_s = 2
max_tokens = 8
controlled_output = true
"""
SLO = "e2e_ms=12,ttft_ms=500,percentile=50"


def test_an_slo_is_read_with_a_default_percentile_and_its_mistakes_named() -> None:
    assert parse_slo("ttft_ms=500, e2e_ms=5000") == {
        "ttft_ms": 500.0, "e2e_ms": 5000.0, "percentile": 99.0,
    }  # fmt: skip
    assert parse_slo("tpot_ms=50,percentile=90") == {"tpot_ms": 50.0, "percentile": 90.0}
    for text, message in (
        ("percentile=99", "needs at least one of"),
        ("ttft=5", "expected KEY=NUMBER"),
        ("ttft_ms=fast", "is not a number"),
        ("ttft_ms=-1", "must be a positive, finite number"),
        ("ttft_ms=inf", "must be a positive, finite number"),
        ("ttft_ms=5,percentile=120", "at most 100"),
        ("percentile=150", "percentile: must be at most 100, got 150.0"),
    ):
        with pytest.raises(ValueError, match=message):
            parse_slo(text)


def test_the_sustainable_rate_stops_at_the_first_rate_that_misses() -> None:
    rates = [40.0, 10.0, 20.0]
    assert sustainable(rates, [0.999, 0.995, 0.95], 0.99) == 10.0  # 40 passes after 20 misses
    assert sustainable(rates, [0.999, 0.995, 0.991], 0.99) == 40.0
    assert sustainable(rates, [0.999, 0.98, 0.999], 0.99) is None
    assert sustainable(rates, [0.999, 0.99, 0.99], 0.99) == 40.0  # at the target is enough


def test_the_interval_is_seeded_lies_on_rates_run_and_widens_at_the_edge() -> None:
    rates, sizes = [10.0, 20.0, 40.0], [200, 200, 200]
    clear = sustainable_interval(rates, sizes, [200, 200, 120], 0.9, seed=1)
    assert clear == [20.0, 20.0]  # far from the target either way: no doubt
    edge = sustainable_interval(rates, sizes, [200, 180, 120], 0.9, seed=1)
    assert edge == sustainable_interval(rates, sizes, [200, 180, 120], 0.9, seed=1)
    assert edge is not None and edge[0] == 10.0 and edge[1] == 20.0  # 180/200 is the target
    assert set(edge) <= {0.0, *rates}
    assert sustainable_interval(rates, [200, 0, 200], [200, 0, 200], 0.9, seed=1) is None


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _, folder = run_plan_text(PLAN, tmp_path_factory.mktemp("goodput"))
    return folder


def _good(document: dict[str, Any], e2e_ms: float, ttft_ms: float) -> int:
    """Good requests of a cell, from its records: latency from the due time."""
    return sum(
        1
        for r in document["requests"]
        if not r["warmup"]
        and r["error"] is None
        and (r["end_ns"] - r["scheduled_ns"]) / 1e6 <= e2e_ms
        and (r["first_content_ns"] - r["scheduled_ns"]) / 1e6 <= ttft_ms
    )


def test_goodput_and_the_sustainable_rate_are_derived_from_the_records(
    campaign: Path, tmp_path: Path, cli: CliRun
) -> None:
    status, out, err = cli(
        "derive", str(campaign), "--baseline", "base", "--candidate", "cand",
        "--differs", "simulated_profile", "--slo", SLO,
    )  # fmt: skip
    assert status == 0, err
    document = json.loads((campaign / "derived/ab-comparison-base-vs-cand.json").read_text())
    assert document["derivation"]["slo"] == document["load"]["slo"] == parse_slo(SLO)
    (stage,) = document["load"]["stages"]
    assert stage["stage"] == "load"
    for role, arm in (("baseline", "base"), ("candidate", "cand")):
        rows = stage[role]["rows"]
        assert [r["rate"] for r in rows] == [10.0, 30.0]
        for row in rows:
            cell = cells.load(campaign / arm / "load" / f"{row['cell']}.json")
            measured = [r for r in cell["requests"] if not r["warmup"]]
            assert row["requests"] == len(measured)
            assert row["good"] == _good(cell, 12, 500)
            assert row["good_fraction"] == row["good"] / row["requests"]
            sent = [r["sent_ns"] for r in measured]
            achieved = (len(sent) - 1) / ((max(sent) - min(sent)) / 1e9)
            assert row["achieved_rate_rps"] == pytest.approx(achieved, rel=1e-12)
            # The good share of the rate achieved: never more than it.
            assert row["goodput_rps"] == pytest.approx(achieved * row["good_fraction"])
    assert stage["baseline"]["sustainable_rate_rps"] == 30.0
    assert stage["candidate"]["sustainable_rate_rps"] is None
    assert [r["good"] for r in stage["candidate"]["rows"]] == [0, 0]
    assert stage["candidate"]["sustainable_rate_ci95"] == [0.0, 0.0]
    assert out.splitlines()[-2:] == [
        f"  load: base sustains at least 30 req/s, the highest rate it ran (95 % interval {stage['baseline']['sustainable_rate_ci95'][0]:g} to 30) at the SLO",
        "  load: cand sustains none of its rates (95 % interval 0 to 0) at the SLO",
    ]  # fmt: skip
    status, report = verify_json(cli, campaign)
    assert status == 0, report["findings"]

    # The promotion rule: the candidate sustains less, so the comparison does not count.
    policy_file = tmp_path / "policy.toml"
    default = (Path(__file__).parent.parent / "ledger/_policy/default.toml").read_text()
    policy_file.write_text(
        default.replace("min_samples_per_cell = 10", "min_samples_per_cell = 1\n"
                        "sustainable_rate_no_worse = true")
    )  # fmt: skip
    strict = load_policy(policy_file)
    reasons = comparison_failures(document, strict)
    assert [r for r in reasons if "sustain" in r] == [
        "load: cand sustains none of its rates at the SLO, base 30 req/s"
    ]
    lenient = load_policy(policy_file.write_text(default) and policy_file)
    assert not any("sustain" in r for r in comparison_failures(document, lenient))
    without = {k: v for k, v in document.items() if k != "load"}
    missing = (
        "the policy compares sustainable rates at an SLO; the comparison has none (derive it "
        "with --slo from a campaign with a load stage)"
    )
    assert [r for r in comparison_failures(without, strict) if "sustainable" in r] == [missing]


def test_an_edited_goodput_or_slo_is_caught(campaign: Path, tmp_path: Path, cli: CliRun) -> None:
    import shutil

    folder = tmp_path / campaign.name
    shutil.copytree(campaign, folder)
    assert cli(
        "derive", str(folder), "--baseline", "base", "--candidate", "cand",
        "--differs", "simulated_profile", "--slo", SLO, "--replace",
    )[0] == 0  # fmt: skip
    path = folder / "derived/ab-comparison-base-vs-cand.json"
    document = json.loads(path.read_text())
    document["load"]["stages"][0]["candidate"]["sustainable_rate_rps"] = 30.0
    path.write_text(json.dumps(document))
    forge_seal(folder)
    status, report = verify_json(cli, folder)
    assert status == 1
    assert [(f["code"], f["pointer"]) for f in report["findings"] if f["severity"] == "error"] == [
        ("derived-mismatch", "/load/stages/0/candidate/sustainable_rate_rps")
    ]


def test_an_slo_needs_a_load_stage_and_a_well_formed_value(
    campaign: Path, two_arm_campaign: Path, cli: CliRun
) -> None:
    args = ["--baseline", "base", "--candidate", "cand", "--differs", "simulated_profile"]
    status, _, err = cli("derive", str(campaign), *args, "--slo", "e2e=5")
    assert status == 2 and err.startswith("error: --slo: 'e2e=5': expected KEY=NUMBER")
    status, _, err = cli(
        "derive", str(two_arm_campaign), "--baseline", "windows", "--candidate", "linux",
        "--kind", "os", "--slo", "e2e_ms=5",
    )  # fmt: skip
    assert status != 0 and "--kind ab" in err
    status, _, err = cli(
        "derive", str(two_arm_campaign), "--baseline", "windows", "--candidate", "linux",
        "--differs", "os", "--slo", "e2e_ms=5",
    )  # fmt: skip
    assert status != 0 and "no load stage" in err and len(err.strip().splitlines()) == 1


def test_slo_given_twice_holds_both_objectives(campaign: Path, tmp_path: Path, cli: CliRun) -> None:
    """Repeated, --slo adds objectives; the last alone would drop the first unseen."""
    import shutil

    folder = tmp_path / campaign.name
    shutil.copytree(campaign, folder)
    args = ["--baseline", "base", "--candidate", "cand", "--differs", "simulated_profile"]
    status, out, err = cli(
        "derive", str(folder), *args, "--slo", "e2e_ms=12", "--slo", "ttft_ms=500,percentile=50",
        "--replace",
    )  # fmt: skip
    assert status == 0, err
    document = json.loads((folder / "derived/ab-comparison-base-vs-cand.json").read_text())
    assert document["derivation"]["slo"] == parse_slo(SLO)
    assert "  SLO (--slo): e2e_ms 12, percentile 50, ttft_ms 500" in out.splitlines()
    status, _, err = cli(
        "derive", str(folder), *args, "--slo", "e2e_ms=12", "--slo", "e2e_ms=5", "--replace"
    )
    assert status == 2 and err == "error: --slo: e2e_ms is given twice\n", err


def _asset_campaign(tmp_path: Path, edit: Any = None) -> Path:
    """Two arms' three-request load cells (the verify asset's), each also in thinking mode;
    ``edit(arm, document)`` changes one before it is written."""
    from generate_verify_assets import load_cell_run

    from ledger.formats.jsonio import write_json

    folder = tmp_path / "2026-11-01-asset-campaign"
    for arm in ("a", "b"):
        for thinking in (False, True):
            document = load_cell_run()
            document["arm"] = arm
            if thinking:
                # Its schedule is the other cell's (a derivation does not check it; verify does).
                document["cell"].update(thinking=True, id="ctx1024-r20-think")
            if edit is not None:
                edit(arm, document)
            (folder / arm).mkdir(parents=True, exist_ok=True)
            write_json(folder / arm / f"{document['cell']['id']}.json", document)
    return folder


def _held_back_and_failed(arm: str, document: dict[str, Any]) -> None:
    """On arm b: request 2 waited 40 ms in the client (every time of it 40 ms later, its
    due time kept), request 1 failed."""
    from generate_verify_assets import _record

    if arm != "b":
        return
    late = document["requests"][2]
    document["requests"][2] = _record(2, late["sent_ns"] + 40_000_000) | {
        "scheduled_ns": late["scheduled_ns"]
    }
    document["requests"][1]["error"] = {"class": "http-5xx", "status": 503, "message": "busy"}


def _derived(folder: Path, slo: str) -> dict[str, Any]:
    from ledger.database import build
    from ledger.derivation._derive import derive
    from ledger.derivation.goodput import parse_slo

    db = build([folder])
    try:
        return derive(db, folder.name, "a", "b", slo=parse_slo(slo))
    finally:
        db.close()


def test_a_request_is_good_by_its_latency_from_when_it_was_due(tmp_path: Path) -> None:
    """From its send, the held-back request took 35 ms, inside a 50 ms SLO; from when it was
    due, 75 ms: not good. The failed one is never good. Thinking modes are runs apart."""
    folder = _asset_campaign(tmp_path, _held_back_and_failed)
    document = _derived(folder, "e2e_ms=50,percentile=50")
    assert [(s["stage"], s["thinking"]) for s in document["load"]["stages"]] == [
        ("load", False),
        ("load", True),
    ]
    for stage in document["load"]["stages"]:
        (base,) = stage["baseline"]["rows"]
        (cand,) = stage["candidate"]["rows"]
        assert (base["good"], cand["good"]) == (3, 1)
        # Percentiles stand on the successful requests: the failed one is not counted.
        assert cand["succeeded"] == cand["requests"] - 1
        assert stage["baseline"]["sustainable_rate_rps"] == 20.0
        assert stage["candidate"]["sustainable_rate_rps"] is None  # 1/3 < 50 %
    # Time per output token is the decode gap: 10 ms between the chunks here.
    assert _derived(folder, "tpot_ms=5")["load"]["stages"][0]["baseline"]["rows"][0]["good"] == 0
    assert _derived(folder, "tpot_ms=20")["load"]["stages"][0]["baseline"]["rows"][0]["good"] == 3


def test_equal_sustainable_rates_meet_the_policy(tmp_path: Path) -> None:
    from ledger.promotion._evaluation import _rate_reasons

    document = _derived(_asset_campaign(tmp_path), "e2e_ms=50")
    assert _rate_reasons(document) == []  # both arms sustain 20 req/s
    for stage in document["load"]["stages"]:
        for role in ("baseline", "candidate"):
            stage[role]["sustainable_rate_rps"] = None
    assert _rate_reasons(document) == []  # neither sustains any: not worse
    document["load"]["stages"][1]["baseline"]["sustainable_rate_rps"] = 20.0
    assert _rate_reasons(document) == [
        "load (thinking): b sustains none of its rates at the SLO, a 20 req/s"
    ]


def test_the_report_charts_latency_against_rate_with_the_slo_and_the_sustainable_rate(
    campaign: Path, tmp_path: Path, cli: CliRun
) -> None:
    import shutil

    folder = tmp_path / campaign.name
    shutil.copytree(campaign, folder)
    args = ["--baseline", "base", "--candidate", "cand", "--differs", "simulated_profile"]
    assert cli("derive", str(folder), *args, "--slo", SLO, "--replace")[0] == 0
    assert cli("decide", str(folder), "--candidate", "cand")[0] in (0, 1)
    status, _, err = cli("report", str(folder))
    assert status == 0, err
    report = (folder / "report.md").read_text()
    section = report.split("## Load and goodput", 1)[1].split("\n## ", 1)[0]
    assert (
        "load: base sustains at least 30.00 req/s, the highest rate it ran (95 % interval"
        in section
    )
    assert "load: cand sustains none of its rates" in section
    comparison = json.loads((folder / "derived/ab-comparison-base-vs-cand.json").read_text())
    rows = [
        r
        for side in ("baseline", "candidate")
        for r in comparison["load"]["stages"][0][side]["rows"]
    ]
    limited = [r for r in rows if r["limited_by_client"]]
    assert ("The client, not the server, set the pace of" in section) == bool(limited)
    assert section.count("| base |") == 2 and section.count("| cand |") == 2
    data = json.loads((folder / "report/load-1.json").read_text())
    assert data["threshold"] == {"label": "SLO E2E", "value": 12.0}
    assert [d["path"] for d in data["sources"]] == ["derived/ab-comparison-base-vs-cand.json"]
    assert data["marks"] == [{"category": "30.00 req/s", "label": "base sustains 30.00 req/s"}]
    assert [s["arm"] for s in data["series"]] == ["base p50", "base p99", "cand p50", "cand p99"]
    stage = comparison["load"]["stages"][0]
    assert [s["values"] for s in data["series"]] == [
        [r[f"e2e_{q}_ms"] for r in stage[role]["rows"]]
        for role in ("baseline", "candidate")
        for q in ("p50", "p99")
    ]
    # A cell of fewer than 299 successful requests states no p99: its line is not drawn,
    # and the table names it.
    assert all(r["succeeded"] < 299 and r["e2e_p99_ms"] is None for r in rows)
    assert all(r["e2e_p50_ms"] is not None for r in rows)
    assert section.count("too few requests for p99") == 4 * len(rows)
    svg = (folder / "report/load-1.svg").read_text()
    assert svg.count("<polyline") == 2 and "SLO E2E 12.00 ms" in svg
    assert verify_json(cli, folder)[0] == 0


def test_the_plan_s_slo_is_used_unless_one_is_given(
    campaign: Path, tmp_path: Path, cli: CliRun
) -> None:
    import shutil
    import tomllib

    from runners.plan import parse_plan

    plan = parse_plan(tomllib.loads(PLAN + "[slo]\ne2e_ms = 12\nttft_ms = 500\npercentile = 50\n"))
    assert plan.to_json()["slo"] == parse_slo(SLO)
    assert "slo" not in parse_plan(tomllib.loads(PLAN)).to_json()
    for text, message in (
        ('[slo]\ne2e_ms = "12"', "plan: slo.e2e_ms: expected a number, got '12'"),
        ("[slo]\ne2e = 12", "plan: slo.e2e: unknown key"),
        ("[slo]\npercentile = 90", "plan: slo: an SLO needs at least one of"),
    ):
        with pytest.raises(InvalidArtifact, match=re.escape(message)):
            parse_plan(tomllib.loads(PLAN + text))
    folder = tmp_path / campaign.name
    shutil.copytree(campaign, folder)
    stated = json.loads((folder / "run-plan.json").read_text())
    stated["slo"] = parse_slo("e2e_ms=12,percentile=50")
    (folder / "run-plan.json").write_text(json.dumps(stated))
    # As a plan with [slo] would have been recorded: its run manifest names its digest.
    run_manifest = json.loads((folder / "run-manifest.json").read_text())
    run_manifest["plan"]["sha256"] = sha256_file(folder / "run-plan.json")[0]
    (folder / "run-manifest.json").write_text(json.dumps(run_manifest))
    forge_seal(folder)
    args = ["--baseline", "base", "--candidate", "cand", "--differs", "simulated_profile"]
    assert cli("derive", str(folder), *args, "--replace")[0] == 0
    document = json.loads((folder / "derived/ab-comparison-base-vs-cand.json").read_text())
    assert document["derivation"]["slo"] == {"e2e_ms": 12.0, "percentile": 50.0}
    assert cli("derive", str(folder), *args, "--replace", "--slo", "e2e_ms=60000")[0] == 0
    document = json.loads((folder / "derived/ab-comparison-base-vs-cand.json").read_text())
    assert document["derivation"]["slo"] == {"e2e_ms": 60000.0, "percentile": 99.0}
    assert verify_json(cli, folder)[0] == 0


def test_an_slo_is_checked_key_by_key_in_the_plan_and_where_derive_reads_it(
    campaign: Path, tmp_path: Path
) -> None:
    import shutil
    import tomllib

    from runners.plan import parse_plan

    for text, message in (
        ("[slo]\nfoo_ms = 3", "plan: slo.foo_ms: unknown key"),
        ('[slo]\n"e2e_ms=300,ttft_ms" = 5', "plan: slo.e2e_ms=300,ttft_ms: unknown key"),
        ("[slo]\ne2e_ms = -1", "plan: slo.e2e_ms: must be a positive, finite number"),
        ("[slo]\ne2e_ms = true", "plan: slo.e2e_ms: expected a number, got True"),
        ("[slo]\ne2e_ms = 5\npercentile = 101", "plan: slo.percentile: must be at most 100"),
    ):
        with pytest.raises(InvalidArtifact, match=re.escape(message)):
            parse_plan(tomllib.loads(PLAN + text))
    folder = tmp_path / campaign.name
    shutil.copytree(campaign, folder)
    stated = json.loads((folder / "run-plan.json").read_text())
    stated["slo"] = {"percentile": 50}  # no threshold: every request would be good
    (folder / "run-plan.json").write_text(json.dumps(stated))
    from ledger.derivation._derive import DeriveError, derive_into

    with pytest.raises(DeriveError, match=r"run-plan\.json: .*slo"):
        derive_into(folder, "base", "cand", differs=["simulated_profile"], replace=True,
                    reseal_after_review=True)  # fmt: skip


def test_a_report_of_arms_without_a_visible_token_shows_no_ttft(
    campaign: Path, tmp_path: Path, cli: CliRun
) -> None:
    """An arm that answered only in its reasoning channel has no TTFT: the comparison's
    rows lack the metric, and the report shows a dash where it would be (it failed)."""
    import shutil

    folder = tmp_path / campaign.name
    shutil.copytree(campaign, folder)
    args = ["--baseline", "base", "--candidate", "cand", "--differs", "simulated_profile"]
    assert cli("derive", str(folder), *args, "--replace")[0] == 0
    path = folder / "derived/ab-comparison-base-vs-cand.json"
    document = json.loads(path.read_text())
    for row in document["rows"]:
        del row["metrics"]["ttft_p50_ms"]
    path.write_text(json.dumps(document))
    forge_seal(folder)
    assert cli("decide", str(folder), "--candidate", "cand")[0] in (0, 1)
    status, _, err = cli("report", str(folder))
    assert status == 0, err
    report = (folder / "report.md").read_text()
    # One row per rate, each named by its rate (two rates read as two "load 256" rows).
    assert "| load 256 10 req/s | - / - | - |" in report
    assert "| load 256 30 req/s | - / - | - |" in report
    assert not (folder / "report/ttft.svg").exists() and (folder / "report/e2e.svg").exists()


def test_a_sustained_rate_that_is_the_highest_tried_is_a_lower_bound() -> None:
    """Nothing above the highest rate was tried: it is sustained "at least"."""
    from ledger.derivation.goodput import sustained_text

    rows = [{"rate": 10.0}, {"rate": 20.0}, {"rate": 40.0}]

    def side(rate: float | None, ci: list[float] | None) -> dict[str, Any]:
        return {"rows": rows, "sustainable_rate_rps": rate, "sustainable_rate_ci95": ci}

    number = "{:g}".format
    assert sustained_text(side(20.0, [10.0, 40.0]), number) == ("20 req/s (95 % interval 10 to 40)")
    assert sustained_text(side(40.0, [20.0, 40.0]), number) == (
        "at least 40 req/s, the highest rate it ran (95 % interval 20 to 40)"
    )
    assert sustained_text(side(None, None), number) == "none of its rates"


def test_a_plan_s_slo_without_a_load_stage_leaves_the_comparison_without_goodput(
    two_arm_campaign: Path, tmp_path: Path, cli: CliRun
) -> None:
    import shutil

    folder = tmp_path / two_arm_campaign.name
    shutil.copytree(two_arm_campaign, folder)
    plan = json.loads((folder / "run-plan.json").read_text())
    plan["slo"] = {"e2e_ms": 5000.0, "percentile": 99.0}
    (folder / "run-plan.json").write_text(json.dumps(plan))
    run = json.loads((folder / "run-manifest.json").read_text())
    run["plan"]["sha256"] = sha256_file(folder / "run-plan.json")[0]
    (folder / "run-manifest.json").write_text(json.dumps(run))
    forge_seal(folder)
    args = ["--baseline", "windows", "--candidate", "linux", "--differs", "os"]
    status, _, err = cli("derive", str(folder), *args)
    assert status == 0, err  # the plan's SLO had nothing to apply to: no refusal
    (derived,) = (folder / "derived").glob("*.json")
    document = json.loads(derived.read_text())
    assert "load" not in document and "slo" not in document["derivation"]
    status, report = verify_json(cli, folder)
    assert status == 0, [f for f in report["findings"] if f["severity"] == "error"]
    # Given on the command line, it is asked for: refused as before.
    status, _, err = cli("derive", str(folder), *args, "--slo", "e2e_ms=5", "--replace")
    assert status != 0 and "no load stage" in err
