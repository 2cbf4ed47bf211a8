"""Verdicts against the noise of the setup: the A/A control, noise floors, minimum
detectable effects, and the policy rule that requires one (ledger/derivation/calibration.py).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ledger.derivation import calibration
from ledger.formats.jsonio import dumps_deterministic
from ledger.formats.schema import read_document
from ledger.promotion._evaluation import comparison_failures
from ledger.promotion.policy import load_policy
from tests.conftest import CliRun, built_once, forge_seal, run_plan_text, verify_json

PLAN = """
campaign_id = "2026-12-03-calibrated"
seed = 5
prefix = "unique"

[[arms]]
name = "baseline"
[arms.simulated]
decode_tok_s = 400.0
prefill_tok_s = 40000.0
overhead_ms = 10.0
prefix_cache = false
jitter_cv = 0.03
max_running_requests = 16

[[arms]]
name = "candidate"
[arms.simulated]
decode_tok_s = 320.0
prefill_tok_s = 40000.0
overhead_ms = 10.0
prefix_cache = false
jitter_cv = 0.03
max_running_requests = 16

[[arms]]
name = "baseline-again"
repeat_of = "baseline"

[[arms]]
name = "other"
[arms.simulated]
decode_tok_s = 400.0
prefill_tok_s = 40000.0
overhead_ms = 10.0
prefix_cache = false
jitter_cv = 0.03
max_running_requests = 12

[[stages]]
kind = "capacity"
context_targets = [512]
concurrency = 4
requests = 40
max_tokens = 24
controlled_output = true
warmup = 1
"""
DIFFERS = ("--differs", "simulated_profile")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built_once("calibrated", tmp_path_factory, lambda folder: run_plan_text(PLAN, folder)[1])


@pytest.fixture
def campaign(built: Path, tmp_path: Path) -> Path:
    folder = tmp_path / built.name
    shutil.copytree(built, folder)
    return folder


def _derive(cli: CliRun, folder: Path, *extra: str) -> tuple[int, str, str, dict[str, Any]]:
    status, out, err = cli(
        "derive", str(folder), "--baseline", "baseline", "--candidate", "candidate", *DIFFERS,
        *extra,
    )  # fmt: skip
    path = folder / "derived/ab-comparison-baseline-vs-candidate.json"
    return status, out, err, json.loads(path.read_text()) if status == 0 else {}


# -- the rules, on numbers ------------------------------------------------------------


def test_the_noise_floor_is_the_a_a_interval_s_farthest_edge() -> None:
    assert calibration.noise_floor([-1.25, 3.5]) == 3.5
    assert calibration.noise_floor([-4.0, 0.5]) == 4.0
    assert calibration.noise_floor(None) is None


def test_the_mde_adds_0_84_standard_errors_to_the_threshold() -> None:
    # An interval 4 wide is 1.96 standard errors either side: one error is 4 / 3.92.
    error = 4 / (2 * 1.959963984540054)
    assert calibration.detectable([1.0, 5.0], None) == pytest.approx((1.96 + 0.8416) * error, 1e-4)
    assert calibration.detectable([1.0, 5.0], 3.0) == pytest.approx(3.0 + 0.8416 * error, 1e-4)
    assert calibration.detectable(None, 3.0) is None


@pytest.mark.parametrize(
    ("metric", "change", "interval", "floor", "expected"),
    [
        ("decode_tok_s_p50", 4.0, [1.0, 7.0], None, "improvement"),
        ("decode_tok_s_p50", -4.0, [-7.0, -1.0], None, "regression"),
        ("ttft_p50_ms", 4.0, [1.0, 7.0], None, "regression"),
        ("e2e_p50_ms", -4.0, [-7.0, -1.0], None, "improvement"),
        ("effective_prefill_tok_s_p50", 4.0, [1.0, 7.0], None, "improvement"),
        # An interval across zero is no difference, however large the change.
        ("decode_tok_s_p50", 9.0, [-0.5, 18.0], None, "no difference detected"),
        # Inside the noise floor: no difference, never a win.
        ("decode_tok_s_p50", 4.0, [1.0, 7.0], 4.0, "no difference detected"),
        ("ttft_p50_ms", -4.0, [-7.0, -1.0], 4.5, "no difference detected"),
        # Just beyond it: detected.
        ("decode_tok_s_p50", 4.01, [1.0, 7.0], 4.0, "improvement"),
        # An interval that touches zero does not exclude it.
        ("decode_tok_s_p50", 2.0, [0.0, 4.0], None, "no difference detected"),
        ("ttft_p50_ms", -2.0, [-4.0, 0.0], None, "no difference detected"),
        ("decode_tok_s_p50", 4.0, None, None, "descriptive"),
        ("decode_tok_s_p50", None, [1.0, 7.0], None, "descriptive"),
    ],
)
def test_each_verdict_rule(
    metric: str, change: float | None, interval: list[float] | None, floor: float | None,
    expected: str,
) -> None:  # fmt: skip
    assert calibration.verdict(metric, change, interval, floor) == expected


# -- on a real campaign ----------------------------------------------------------------


def test_the_plan_s_repeat_is_the_control_and_sets_each_noise_floor(
    campaign: Path, cli: CliRun
) -> None:
    status, out, err, document = _derive(cli, campaign)
    assert status == 0, err
    assert document["calibration"] == {
        "control": "baseline-again",
        "matched": True,
        "match_reasons": [],
    }
    assert document["derivation"]["inference"]["control"] == "baseline-again"
    # The A/A comparison, derived on its own, is what the floors were read from.
    status, _, err = cli(
        "derive", str(campaign), "--baseline", "baseline", "--candidate", "baseline-again"
    )
    assert status == 0, err
    aa = read_document(campaign / "derived/ab-comparison-baseline-vs-baseline-again.json")
    (row,) = document["rows"]
    (aa_row,) = aa["rows"]
    for metric, entry in row["metrics"].items():
        if metric == "throughput_tok_s":
            assert "verdict" not in entry
            continue
        stated = aa_row["metrics"][metric]
        assert entry["aa_change_percent"] == stated["change_percent"]
        assert entry["aa_change_ci95"] == stated["change_ci95"]
        assert entry["noise_floor_percent"] == max(abs(v) for v in stated["change_ci95"])
        low, high = entry["change_ci95"]
        error = (high - low) / (2 * 1.959963984540054)
        assert entry["mde_percent"] == pytest.approx(
            entry["noise_floor_percent"] + 0.8416212335729143 * error
        )
    # 400 against 320 tok/s: a 20 % slower decode, far beyond any floor.
    decode = row["metrics"]["decode_tok_s_p50"]
    assert decode["verdict"] == "regression" and decode["change_percent"] < -15
    assert "  A/A control: baseline-again (matched)" in out.splitlines()
    floor = decode["noise_floor_percent"]
    assert (
        f"decode_tok_s_p50 regression {decode['change_percent']:+.1f}% (noise floor {floor:.1f}%)"
        in out
    )
    assert verify_json(cli, campaign)[0] == 0


def test_a_control_that_differs_gives_no_noise_floor(campaign: Path, cli: CliRun) -> None:
    status, out, err, document = _derive(cli, campaign, "--control", "other")
    assert status == 0, err
    calibrated = document["calibration"]
    assert calibrated["control"] == "other" and calibrated["matched"] is False
    assert any("simulated_profile" in r for r in calibrated["match_reasons"])
    (row,) = document["rows"]
    assert all(m["noise_floor_percent"] is None for m in row["metrics"].values() if "verdict" in m)
    assert any(
        line.startswith("the A/A control other is not matched with the baseline")
        for line in document["limitations"]
    )
    assert "  A/A control: other (not matched: no noise floor)" in out.splitlines()
    assert "noise floor" not in out.replace("no noise floor", "")
    assert verify_json(cli, campaign)[0] == 0


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--control", "candidate"), "the A/A control 'candidate' is one of the compared arms"),
        (("--control", "nobody"), "the A/A control 'nobody': campaign"),
        (("--control", "baseline-again", "--kind", "os"), "--control: an A/A control"),
        (("--control", "Bad Name"), "arm name 'Bad Name' is not valid"),
    ],
)
def test_a_control_that_cannot_be_one_is_refused(
    campaign: Path, cli: CliRun, extra: tuple[str, ...], message: str
) -> None:
    status, out, err, _ = _derive(cli, campaign, *extra)
    assert status == 2, (out, err)
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert not (campaign / "derived").exists()


def test_without_a_control_the_verdicts_rest_on_the_run_alone(campaign: Path, cli: CliRun) -> None:
    plan = json.loads((campaign / "run-plan.json").read_text())
    plan["arms"] = [a for a in plan["arms"] if "repeat_of" not in a]
    (campaign / "run-plan.json").write_bytes(dumps_deterministic(plan))
    forge_seal(campaign)
    status, _, err, document = _derive(cli, campaign)
    assert status == 0, err
    assert "calibration" not in document
    assert document["derivation"]["inference"]["control"] is None
    (row,) = document["rows"]
    decode = row["metrics"]["decode_tok_s_p50"]
    assert "noise_floor_percent" not in decode and decode["verdict"] == "regression"
    assert any(line.startswith("no A/A control") for line in document["limitations"])


@pytest.mark.parametrize(
    ("edit", "pointer"),
    [
        (lambda m: m.update(verdict="improvement"), "/verdict"),
        (lambda m: m.update(noise_floor_percent=0.1), "/noise_floor_percent"),
        (lambda m: m.update(mde_percent=1.0), "/mde_percent"),
    ],
)
def test_verify_derives_each_verdict_again(
    campaign: Path, cli: CliRun, edit: Any, pointer: str
) -> None:
    assert _derive(cli, campaign)[0] == 0
    path = campaign / "derived/ab-comparison-baseline-vs-candidate.json"
    document = json.loads(path.read_text())
    edit(document["rows"][0]["metrics"]["decode_tok_s_p50"])
    path.write_bytes(dumps_deterministic(document))
    forge_seal(campaign)
    status, report = verify_json(cli, campaign)
    assert status == 1
    found = [f for f in report["findings"] if f["code"] == "derived-mismatch"]
    assert found and found[0]["pointer"].endswith("/decode_tok_s_p50" + pointer), found


def test_a_dropped_control_is_derived_again_with_the_control(campaign: Path, cli: CliRun) -> None:
    assert _derive(cli, campaign)[0] == 0
    path = campaign / "derived/ab-comparison-baseline-vs-candidate.json"
    document = json.loads(path.read_text())
    document["derivation"]["inference"]["control"] = None
    path.write_bytes(dumps_deterministic(document))
    forge_seal(campaign)
    status, report = verify_json(cli, campaign)
    assert status == 1
    assert any(f["code"] == "derived-mismatch" for f in report["findings"])


def test_a_comparison_derived_before_verdicts_still_verifies(campaign: Path, cli: CliRun) -> None:
    from ledger.database import build
    from ledger.derivation import derive

    db = build([campaign], gaps=False)
    try:
        old = derive(
            db, campaign.name, "baseline", "candidate", differs=["simulated_profile"],
            inference=False,
        )  # fmt: skip
    finally:
        db.close()
    assert "inference" not in old["derivation"]
    assert "verdict" not in old["rows"][0]["metrics"]["decode_tok_s_p50"]
    (campaign / "derived").mkdir()
    path = campaign / "derived/ab-comparison-baseline-vs-candidate.json"
    path.write_bytes(dumps_deterministic(old))
    forge_seal(campaign)
    assert verify_json(cli, campaign)[0] == 0


# -- the policy's minimum detectable effect ---------------------------------------------


def _policy(tmp_path: Path, effect: float | None) -> Any:
    text = (Path(__file__).parent.parent / "ledger/_policy/default.toml").read_text()
    if effect is not None:
        text = text.replace(
            "min_samples_per_cell = 10",
            f"min_samples_per_cell = 10\nminimum_detectable_effect_percent = {effect}",
        )
    path = tmp_path / "policy.toml"
    path.write_text(text)
    return load_policy(path)


def test_the_policy_requires_a_detectable_effect_only_when_it_states_one(
    campaign: Path, cli: CliRun, tmp_path: Path
) -> None:
    document = _derive(cli, campaign)[3]
    mdes = [
        m["mde_percent"] for r in document["rows"] for m in r["metrics"].values() if "verdict" in m
    ]
    assert comparison_failures(document, _policy(tmp_path, None)) == []
    loose = _policy(tmp_path, max(mdes) + 0.01)
    assert comparison_failures(document, loose) == []
    # An MDE equal to the policy's is enough.
    assert comparison_failures(document, _policy(tmp_path, max(mdes))) == []
    # Stated without the rule, a policy keeps its bytes: its digest does not move.
    assert (
        "minimum_detectable_effect_percent" not in _policy(tmp_path, None).to_json()["matched_ab"]
    )
    assert loose.to_json()["matched_ab"]["minimum_detectable_effect_percent"] == max(mdes) + 0.01
    strict = _policy(tmp_path, min(mdes) - 0.01)
    reasons = comparison_failures(document, strict)
    assert reasons and all("the policy needs a minimum detectable effect of" in r for r in reasons)
    assert any("detects no change under" in r for r in reasons)


def test_the_rule_refuses_a_comparison_without_a_usable_control(
    campaign: Path, cli: CliRun, tmp_path: Path
) -> None:
    policy = _policy(tmp_path, 50.0)
    document = _derive(cli, campaign)[3]
    assert comparison_failures(document, policy) == []
    unmatched = _derive(cli, campaign, "--control", "other", "--replace")[3]
    (reason,) = comparison_failures(unmatched, policy)
    assert "the A/A control other is not matched with the baseline" in reason
    del document["calibration"]
    (reason,) = comparison_failures(document, policy)
    assert "the comparison has no A/A control (an arm with repeat_of = baseline)" in reason
    floorless = _derive(cli, campaign, "--replace")[3]
    floorless["rows"][0]["metrics"]["ttft_p50_ms"]["noise_floor_percent"] = None
    (reason,) = comparison_failures(floorless, policy)
    assert "ttft_p50_ms has no noise floor" in reason


@pytest.mark.parametrize("value", [0, -1, "5", True])
def test_a_bad_minimum_detectable_effect_is_refused(tmp_path: Path, value: Any) -> None:
    from ledger.errors import InvalidArtifact

    text = (Path(__file__).parent.parent / "ledger/_policy/default.toml").read_text()
    shown = json.dumps(value) if not isinstance(value, bool) else "true"
    text = text.replace(
        "min_samples_per_cell = 10",
        f"min_samples_per_cell = 10\nminimum_detectable_effect_percent = {shown}",
    )
    (tmp_path / "policy.toml").write_text(text)
    with pytest.raises(InvalidArtifact, match="minimum_detectable_effect_percent"):
        load_policy(tmp_path / "policy.toml")


def test_a_repeat_the_run_never_reached_leaves_the_comparison_uncalibrated(
    campaign: Path, cli: CliRun
) -> None:
    # A run stopped before the plan's repeat ran: the comparison is derived without it,
    # while a control named on the command line must have run.
    shutil.rmtree(campaign / "baseline-again")
    manifest = json.loads((campaign / "run-manifest.json").read_text())
    manifest["cells"] = [c for c in manifest["cells"] if c["arm"] != "baseline-again"]
    (campaign / "run-manifest.json").write_bytes(dumps_deterministic(manifest))
    forge_seal(campaign)
    status, _, err, document = _derive(cli, campaign)
    assert status == 0, err
    assert "calibration" not in document
    assert document["derivation"]["inference"]["control"] is None
    status, _, err, _ = _derive(cli, campaign, "--control", "baseline-again", "--replace")
    assert status == 2 and "the A/A control 'baseline-again'" in err, err


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ((), "(regression in 1, against the noise floor of the A/A control baseline-again)"),
        (
            ("--control", "other"),
            (
                "(regression in 1, the A/A control other is not matched with the baseline: "
                "the noise between runs is not measured)"
            ),
        ),
    ],
)
def test_the_report_states_each_verdict_and_the_noise_it_stands_against(
    campaign: Path, cli: CliRun, extra: tuple[str, ...], said: str
) -> None:
    assert _derive(cli, campaign, *extra)[0] == 0
    assert cli("decide", str(campaign), "--candidate", "candidate")[0] in (0, 1)
    status, _, err = cli("report", str(campaign))
    assert status == 0, err
    report = (campaign / "report.md").read_text()
    card = report.split("## Result card", 1)[1].split("\n## ", 1)[0]
    assert said in " ".join(card.split())
    # Beside each change: its verdict, and with a matched control its noise floor.
    performance = report.split("## Performance", 1)[1]
    assert ", regression" in performance
    assert ("(noise floor " in performance) == (not extra)
