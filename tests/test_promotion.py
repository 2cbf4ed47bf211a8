"""Promotion gating end to end: a two-arm simulated campaign with GPU reserve (NVML shim),
telemetry and restoration (podman) evidence, decided under a policy, approved with a real
sigstore bundle (a private instance's trusted root), gated and verified."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tomllib
from pathlib import Path
from typing import Any

import attrs
import pytest

from ledger.derivation._derive import derive_into
from ledger.evidence import manifest
from ledger.promotion import RULE_CODES, evaluate, load_evidence
from ledger.promotion._decide import decide, write_approval_record
from ledger.promotion.policy import Approver, load_policy
from runners.campaign import run_plan
from runners.campaign.progress import LogProgress
from runners.plan import parse_plan
from tests import cells
from tests.components import SHIM_ENV, NvmlShim, Podman
from tests.conftest import CONTAINERS_GROUP, CliRun, built_once, forge_seal, verify_json
from tests.private_sigstore import OIDC_ISSUER, PrivateSigstore, SigstoreService

# Its campaigns start podman through request.getfixturevalue, which the conftest's
# grouping by fixture cannot see.
pytestmark = [pytest.mark.gpu, pytest.mark.docker, CONTAINERS_GROUP]

APPROVER = "release-manager@example.com"
ISSUER = "https://accounts.example.com"
GPUS = """driver 550.54.15
card name=NVIDIA H200 uuid=GPU-0b5c3f1e-9a2d-4e6f-8a1b-2c3d4e5f6a7b total_mib=143771 used_mib=139771 temp_c=60 power_mw=500000 limit_mw=700000 sm_mhz=1980 reasons=0x0
card name=NVIDIA H200 uuid=GPU-1c6d4a2f-0b3e-4f70-9b2c-3d4e5f6a7b8c total_mib=143771 used_mib=139500 temp_c=61 power_mw=510000 limit_mw=700000 sm_mhz=1980 reasons=0x4
"""

PLAN = """
campaign_id = "2026-11-29-promotion"
seed = 5
[[arms]]
name = "baseline"
[arms.simulated]
decode_tok_s = 400.0
prefill_tok_s = 250000.0
[arms.identity]
engine = "simulated 400"
[arms.container]
name = "anvil-promo-baseline"
docker_host = "{socket}"
[[arms]]
name = "candidate"
[arms.simulated]
decode_tok_s = 500.0
prefill_tok_s = 250000.0
[arms.identity]
engine = "simulated 500"
[arms.container]
name = "anvil-promo-candidate"
docker_host = "{socket}"
[[stages]]
kind = "preflight"
long_tool_tokens = 1000
[[stages]]
kind = "thinking-control"
repetitions = 1
[[stages]]
kind = "capacity"
context_targets = [256]
requests = 10
max_tokens = 16
controlled_output = true
warmup = 1
[[stages]]
kind = "endurance"
context_target = 256
requests = 10
max_tokens = 16
controlled_output = true
[[stages]]
kind = "telemetry"
during = "endurance"
interval_s = 0.05
[[stages]]
kind = "reserve"
[[stages]]
kind = "restoration"
"""

POLICY = """
schema = "anvil-serving.promotion-policy/v1"
name = "test release policy"
required_gates = ["preflight", "thinking-control", "capacity", "endurance"]
reserve_min_free_mib = {reserve}
[matched_ab]
equal_prompts = true
equal_sampling = true
equal_concurrency = true
controlled_output = true
equal_cache_state = true
identity_within_declared = true
min_samples_per_cell = 10
[restoration]
required = true
[approval]
required = true
trusted_root = "root.json"
approvers = [{{ identity = "{approver}", issuer = "{issuer}" }}]
"""


def _quiet_run(plan_text: str, raw: Path, env: dict[str, str], *, resume: bool = False) -> Path:
    plan = parse_plan(tomllib.loads(plan_text))
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        with open(os.devnull, "w") as quiet:
            run_plan(plan, raw, resume=resume, progress=LogProgress(quiet))
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return raw / plan.campaign_id


@pytest.fixture(scope="module")
def sigstore() -> PrivateSigstore:
    return PrivateSigstore()


def _build_promotion(request: pytest.FixtureRequest, folder: Path) -> Path:
    nvml_shim: NvmlShim = request.getfixturevalue("nvml_shim")
    podman: Podman = request.getfixturevalue("podman")
    client = podman.client()
    try:
        for arm in ("baseline", "candidate"):
            podman.fresh_container(client, f"anvil-promo-{arm}")
        config = nvml_shim.configure(folder / "nvml.conf", GPUS)
        campaign = _quiet_run(
            PLAN.format(socket=podman.socket), folder / "raw", {SHIM_ENV: str(config)}
        )
    finally:
        client.close()
    derive_into(campaign, "baseline", "candidate", differs=["engine", "simulated_profile"])
    return campaign


@pytest.fixture(scope="module")
def promotion_campaign(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Path:
    """Raw campaign: both arms with reserve, telemetry and restoration evidence (built once)."""
    return built_once("promotion", tmp_path_factory, lambda f: _build_promotion(request, f))


@pytest.fixture
def campaign(tmp_path: Path, promotion_campaign: Path) -> Path:
    copy = tmp_path / "raw" / promotion_campaign.name
    shutil.copytree(promotion_campaign, copy)
    return copy


@pytest.fixture
def policy_file(tmp_path: Path, sigstore: PrivateSigstore) -> Path:
    sigstore.write_trusted_root(tmp_path / "root.json")
    path = tmp_path / "policy.toml"
    path.write_text(POLICY.format(reserve=3072, approver=APPROVER, issuer=ISSUER))
    return path


def _approve(campaign: Path, policy_file: Path, sigstore: PrivateSigstore, **who: str) -> Path:
    record, data = write_approval_record(campaign, load_policy(policy_file))
    bundle = sigstore.sign(
        data, identity=who.get("identity", APPROVER), issuer=who.get("issuer", ISSUER)
    )
    record.with_name(record.name + manifest.BUNDLE_SUFFIX).write_bytes(bundle)
    return record


def _codes(report: dict[str, Any]) -> list[str]:
    return sorted(f["code"] for f in report["findings"] if f["severity"] == "error")


def _forge(campaign: Path, rel: str, edit: Any) -> None:
    """Edits an artifact the way a careful forger would: the run manifest's reference to it
    gets the new digest, and the folder is re-sealed, so every digest agrees."""
    path = campaign / rel
    document = cells.load(path)
    edit(document)
    if document.get("schema") == cells.CELL_RUN_V2:
        cells.save(path, document)  # its parts too, as listed, each digest with it
    else:
        path.write_bytes((json.dumps(document, indent=2, sort_keys=True) + "\n").encode())
    data = path.read_bytes()
    run_path = campaign / "run-manifest.json"
    run = json.loads(run_path.read_text())
    for entry in [*run["evidence"], *run["cells"]]:
        if entry["artifact"] and entry["artifact"]["path"] == rel:
            entry["artifact"]["sha256"] = hashlib.sha256(data).hexdigest()
    run_path.write_text(json.dumps(run, indent=2, sort_keys=True) + "\n")
    forge_seal(campaign)


def _claim_promotion(campaign: Path) -> None:
    """What a hand-edit does: flip the decision, then re-seal so every digest agrees."""
    path = campaign / "summary.json"
    summary = json.loads(path.read_text())
    summary["decision"].update(
        promotion_authorized=True, decision_labels=["verified", "promoted"], unmet=[]
    )
    path.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    forge_seal(campaign)


def test_evidence_stages_wrote_their_artifacts(promotion_campaign: Path) -> None:
    run = json.loads((promotion_campaign / "run-manifest.json").read_text())
    assert run["complete"] is True
    assert {(e["arm"], e["kind"], e["status"]) for e in run["evidence"]} == {
        (arm, kind, "complete")
        for arm in ("baseline", "candidate")
        for kind in ("preflight", "thinking-control", "telemetry", "reserve", "restoration")
    }
    reserve = json.loads((promotion_campaign / "candidate/reserve.json").read_text())
    assert reserve["passed"] is True and reserve["threshold_mib"] == 3072
    assert [c["memory"]["free_mib"] for c in reserve["cards"]] == [4000, 4271]
    telemetry = json.loads((promotion_campaign / "candidate/telemetry.json").read_text())
    assert telemetry["during"] == "endurance" and len(telemetry["samples"]) >= 2
    assert telemetry["summary"][1]["throttle_seen"]["software-power-cap"] >= 2
    restoration = json.loads((promotion_campaign / "candidate/restoration.json").read_text())
    assert restoration["passed"] is True and restoration["failures"] == []
    assert restoration["before"]["id"] == restoration["after"]["id"]


def test_without_approval_no_promotion_and_the_digest_to_sign(
    campaign: Path, policy_file: Path, cli: CliRun
) -> None:
    status, out, _ = cli("decide", str(campaign), "--policy", str(policy_file))
    assert status == 0
    summary = json.loads((campaign / "summary.json").read_text())
    decision = summary["decision"]
    assert decision["promotion_authorized"] is False
    assert decision["decision_labels"] == ["verified", "challenger", "no-promotion"]
    assert [u["rule"] for u in decision["unmet"]] == ["approval"]
    assert "to approve: sign an approval of summary sha256" in out
    assert "matched-ab" in decision["evidence_labels"]
    assert "exact-restoration" in decision["evidence_labels"]
    status, out, _ = cli("gate", str(campaign), "--policy", str(policy_file))
    assert status == 1 and "FAIL approval" in out and "promotion NOT allowed" in out


def test_signed_approval_allows_promotion(
    campaign: Path, policy_file: Path, sigstore: PrivateSigstore, cli: CliRun
) -> None:
    policy = load_policy(policy_file)
    decide(campaign, policy)
    _approve(campaign, policy_file, sigstore)
    decided = decide(campaign, policy)
    assert decided.evaluation.allowed, decided.evaluation.unmet
    summary = decided.summary
    assert summary["decision"]["promotion_authorized"] is True
    assert summary["decision"]["decision_labels"] == ["verified", "promoted"]
    assert summary["decision"]["candidate"] == "candidate"
    assert hashlib.sha256((campaign / "summary.json").read_bytes()).hexdigest() == (
        decided.proposal_sha256
    )
    reserve_gate = next(g for g in summary["gates"] if g["name"] == "candidate reserve")
    assert reserve_gate == {
        "artifact": "candidate/reserve.json",
        "detail": reserve_gate["detail"],
        "name": "candidate reserve",
        "passed": True,
        "status": "passed",
    }
    assert reserve_gate["detail"].endswith("threshold 3072 MiB")
    status, out, _ = cli("gate", str(campaign), "--policy", str(policy_file))
    assert status == 0, out
    assert "promotion allowed" in out
    status, report = verify_json(cli, "--policy", str(policy_file), campaign)
    assert status == 0, report
    # Under the shipped policy (no approver named) the same promotion does not verify.
    status, report = verify_json(cli, campaign)
    assert status == 1
    assert _codes(report) == ["promotion-without-approval"]


def _approval_by_another_identity(campaign: Path, policy_file: Path, sigstore: Any) -> str:
    _approve(campaign, policy_file, sigstore, identity="intern@example.com")
    return "not signed by an allowed approver"


def _approval_of_another_summary(campaign: Path, policy_file: Path, sigstore: Any) -> str:
    record = _approve(campaign, policy_file, sigstore)
    assert decide(campaign, load_policy(policy_file)).evaluation.allowed  # sealed with it
    # A valid signature by the right approver, over a record naming another summary digest.
    data = json.loads(record.read_text())
    data["summary_sha256"] = "0" * 64
    record.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    record.with_name(record.name + manifest.BUNDLE_SUFFIX).write_bytes(
        sigstore.sign(record.read_bytes(), identity=APPROVER, issuer=ISSUER)
    )
    # The sealed record changed: decide refuses until someone has reviewed the change.
    with pytest.raises(manifest.SealBroken, match=r"approvals/candidate-.* \(changed\)"):
        decide(campaign, load_policy(policy_file))
    return "approves summary sha256 000000000000"


@pytest.mark.parametrize(
    "approval",
    [_approval_by_another_identity, _approval_of_another_summary],
    ids=["approval-by-another-identity", "approval-of-another-summary"],
)
def test_approval_by_someone_else_or_of_another_summary_does_not_count(
    campaign: Path, policy_file: Path, sigstore: PrivateSigstore, cli: CliRun, approval: Any
) -> None:
    policy = load_policy(policy_file)
    assert {u.rule for u in decide(campaign, policy).evaluation.unmet} == {"approval"}
    reason = approval(campaign, policy_file, sigstore)
    decided = decide(campaign, policy, reseal_after_review=True)
    assert not decided.evaluation.allowed
    (unmet,) = decided.evaluation.unmet
    assert unmet.rule == "approval" and reason in unmet.reason, unmet.reason
    status, out, _ = cli("gate", str(campaign), "--policy", str(policy_file))
    assert status == 1 and "FAIL approval" in out
    _claim_promotion(campaign)
    status, report = verify_json(cli, "--policy", str(policy_file), campaign)
    assert status == 1
    assert _codes(report) == ["promotion-without-approval"]


def test_a_tampered_approval_record_fails_its_signature(
    campaign: Path, policy_file: Path, sigstore: PrivateSigstore
) -> None:
    policy = load_policy(policy_file)
    record = _approve(campaign, policy_file, sigstore)
    record.write_text(record.read_text().replace('"promote"', '"promote" '))
    # Its bundle no longer signs it: it is no approval that may arrive after the seal.
    with pytest.raises(manifest.SealBroken, match=f"approvals/{record.name} \\(added\\)"):
        decide(campaign, policy)
    decided = decide(campaign, policy, reseal_after_review=True)
    (unmet,) = decided.evaluation.unmet
    assert unmet.rule == "approval" and "digest mismatch" in unmet.reason


def test_hand_edited_promotion_is_rejected_with_every_code(
    tmp_path: Path, two_arm_campaign: Path, cli: CliRun
) -> None:
    campaign = tmp_path / two_arm_campaign.name
    shutil.copytree(two_arm_campaign, campaign)
    # No A/B, no reserve, no restoration: decided without promotion, then hand-edited.
    decided = decide(campaign, load_policy(), candidate="linux")
    assert decided.summary["decision"]["promotion_authorized"] is False
    assert {u.rule for u in decided.evaluation.unmet} == {
        "required-gates",
        "ab-present",
        "reserve",
        "restoration",
    }
    _claim_promotion(campaign)
    status, report = verify_json(cli, campaign)
    assert status == 1
    assert _codes(report) == [
        "promotion-incomplete",
        "promotion-incomplete",
        "promotion-without-ab",
        "promotion-without-approval",
        "promotion-without-reserve",
        "promotion-without-restoration",
    ]
    reasons = {f["code"]: f["message"] for f in report["findings"]}
    assert "no gpu-reserve artifact for arm 'linux'" in reasons["promotion-without-reserve"]
    assert all(f["pointer"] == "/decision/promotion_authorized" for f in report["findings"])


def test_simulated_campaign_without_reserve_decides_no_promotion(
    tmp_path: Path, two_arm_campaign: Path, cli: CliRun
) -> None:
    campaign = tmp_path / two_arm_campaign.name
    shutil.copytree(two_arm_campaign, campaign)
    derive_into(campaign, "windows", "linux", differs=["os", "simulated_profile"])
    status, out, _ = cli("decide", str(campaign))
    assert status == 0
    decision = json.loads((campaign / "summary.json").read_text())["decision"]
    assert decision["promotion_authorized"] is False
    assert "no-promotion" in decision["decision_labels"]
    reserve = [u["reason"] for u in decision["unmet"] if u["rule"] == "reserve"]
    assert reserve == [
        (
            "no gpu-reserve artifact for arm 'linux': no post-workload GPU snapshot "
            "(add a reserve stage to the plan)"
        )
    ]
    assert "unmet reserve: no gpu-reserve artifact" in out
    status, report = verify_json(cli, campaign)
    assert status == 0, report


def test_verify_recomputes_reserve_and_restoration_verdicts(
    campaign: Path, policy_file: Path, sigstore: PrivateSigstore, cli: CliRun
) -> None:
    policy = load_policy(policy_file)
    decide(campaign, policy)
    _approve(campaign, policy_file, sigstore)
    assert decide(campaign, policy).evaluation.allowed
    # The readings are edited, the verdicts left saying "passed": the policy reads readings.
    _forge(
        campaign,
        "candidate/reserve.json",
        lambda d: d["cards"][1]["memory"].update(free_mib=2101),
    )
    _forge(
        campaign,
        "candidate/restoration.json",
        lambda d: d["after"].update(restart_count=1),
    )
    status, report = verify_json(cli, "--policy", str(policy_file), campaign)
    assert status == 1
    messages = {f["code"]: f["message"] for f in report["findings"]}
    # The summary's own gates, derived again, now fail where it says they passed.
    assert set(_codes(report)) == {
        "derived-mismatch",
        "promotion-without-reserve",
        "promotion-without-restoration",
    }
    restated = [(f["pointer"], f["message"]) for f in report["findings"]
                if f["code"] == "derived-mismatch"]  # fmt: skip
    assert any(
        p.endswith("/passed") and m.startswith("states true") and "candidate/reserve.json" in m
        for p, m in restated
    ), restated
    assert (
        "card 1: 2101 MiB free, below the 3072 MiB reserve" in messages["promotion-without-reserve"]
    )
    assert "restarted: restart count 0 became 1" in messages["promotion-without-restoration"]


def test_policy_threshold_applies_not_the_stage_threshold(
    campaign: Path, tmp_path: Path, sigstore: PrivateSigstore
) -> None:
    sigstore.write_trusted_root(tmp_path / "root.json")
    strict = tmp_path / "strict.toml"
    strict.write_text(POLICY.format(reserve=8192, approver=APPROVER, issuer=ISSUER))
    decided = decide(campaign, load_policy(strict))
    rules = [u.rule for u in decided.evaluation.unmet]
    assert (
        rules[0] == "reserve" and "below the 8192 MiB reserve" in decided.evaluation.unmet[0].reason
    )
    assert "rejected" in decided.summary["decision"]["decision_labels"]
    assert any("threshold 8192 MiB" in f for f in decided.summary["failures"])


def test_unmatched_ab_is_named_and_rejected_by_verify(
    campaign: Path, policy_file: Path, sigstore: PrivateSigstore, cli: CliRun
) -> None:
    # Derived without declaring the engine: the arms' identities differ undeclared.
    shutil.rmtree(campaign / "derived")
    forge_seal(campaign)
    derive_into(campaign, "baseline", "candidate", differs=["simulated_profile"])
    decided = decide(campaign, load_policy(policy_file))
    unmet = [u for u in decided.evaluation.unmet if u.rule == "matched-ab"]
    assert unmet and all("identities differ in undeclared engine" in u.reason for u in unmet)
    assert "descriptive-only" in decided.summary["decision"]["evidence_labels"]
    _claim_promotion(campaign)
    _status, report = verify_json(cli, "--policy", str(policy_file), campaign)
    assert "promotion-unmatched-ab" in _codes(report)


def test_a_policy_can_relax_only_what_it_names(campaign: Path, tmp_path: Path) -> None:
    relaxed = tmp_path / "relaxed.toml"
    text = POLICY.format(reserve=3072, approver=APPROVER, issuer=ISSUER)
    relaxed.write_text(
        text.replace("required = true\ntrusted_root", "required = false\ntrusted_root")
    )
    decided = decide(campaign, load_policy(relaxed))
    assert decided.evaluation.allowed
    assert decided.summary["decision"]["promotion_authorized"] is True


def test_every_unmet_rule_is_returned(campaign: Path, policy_file: Path) -> None:
    (campaign / "candidate/reserve.json").unlink()
    (campaign / "candidate/restoration.json").unlink()
    shutil.rmtree(campaign / "derived")
    run = json.loads((campaign / "run-manifest.json").read_text())
    run["complete"] = False
    (campaign / "run-manifest.json").write_text(json.dumps(run))
    evaluation = evaluate(load_evidence(campaign), load_policy(policy_file), candidate="candidate")
    assert [u.rule for u in evaluation.unmet] == [
        "complete",
        "ab-present",
        "reserve",
        "restoration",
    ]


def test_decide_is_deterministic(campaign: Path, policy_file: Path) -> None:
    policy = load_policy(policy_file)
    first = decide(campaign, policy).path.read_bytes()
    second = decide(campaign, policy).path.read_bytes()
    assert first == second


def _publish_promoted(
    campaign: Path, policy_file: Path, sigstore: PrivateSigstore, tmp_path: Path, cli: CliRun
) -> Path:
    """The campaign approved, decided with promotion allowed, and published: its folder."""
    policy = load_policy(policy_file)
    decide(campaign, policy)
    _approve(campaign, policy_file, sigstore)
    assert decide(campaign, policy).evaluation.allowed
    status, _, err = cli("publish", str(campaign), "--out", str(tmp_path / "public"))
    assert status == 0, err
    return tmp_path / "public" / campaign.name


def test_promoted_campaign_publishes_and_still_verifies(
    campaign: Path, policy_file: Path, sigstore: PrivateSigstore, tmp_path: Path, cli: CliRun
) -> None:
    public = _publish_promoted(campaign, policy_file, sigstore, tmp_path, cli)
    reserve = (public / "candidate/reserve.json").read_text()
    assert "GPU-0b5c3f1e" not in reserve  # GPU UUIDs are private
    status, report = verify_json(cli, "--policy", str(policy_file), public)
    assert status == 0, report
    status, out, _ = cli("gate", str(public), "--policy", str(policy_file))
    assert status == 0, out


def test_a_gate_that_passes_attests_it_and_the_audit_accepts_the_summary(
    campaign: Path, policy_file: Path, sigstore: PrivateSigstore, tmp_path: Path, cli: CliRun
) -> None:
    policy = load_policy(policy_file)
    public = _publish_promoted(campaign, policy_file, sigstore, tmp_path, cli)
    summary = tmp_path / "gate.intoto.json"
    with SigstoreService(sigstore) as service:
        config = service.write_trust_config(tmp_path / "trust-config.json")
        signing = ("--trust-config", str(config), "--identity-token")
        assert cli("sign", str(public), *signing, service.token(APPROVER))[0] == 0
        status, out, _ = cli(
            "gate", str(public), "--policy", str(policy_file), "--attest", str(summary)
        )
        assert status == 0, out
        assert f"verification summary (PASSED, policy sha256 {policy.sha256})" in out
        assert cli("sign", str(summary), *signing, service.token(APPROVER))[0] == 0
    predicate = json.loads(summary.read_bytes())["predicate"]
    assert predicate["verificationResult"] == "PASSED"
    assert predicate["verifiedLevels"] == ["ANVIL_PROMOTION_LEVEL_3"]
    gate = predicate["https://anvil-ledger.dev/verification_summary/gate/v1"]
    assert gate["rules_unmet"] == [] and gate["rules_met"] == [
        "evidence",
        *dict.fromkeys(RULE_CODES),
    ]
    audit = (
        "audit",
        str(public),
        "--identity",
        APPROVER,
        "--issuer",
        OIDC_ISSUER,
        "--trusted-root",
        str(tmp_path / "root.json"),
        "--verification-summary",
        str(summary),
    )
    # The policy names it: --policy gives both the checks and the digest expected.
    result = cli(*audit, "--policy", str(policy_file))
    assert result == (0, "", "OK\n"), result[1]
    assert cli(*audit, "--policy", str(policy_file), "--policy-digest", policy.sha256)[0] == 0
    # Another policy did not decide it: the same summary does not attest that one.
    status, out, _ = cli(
        *audit, "--policy", str(policy_file), "--policy-digest", load_policy().sha256
    )
    assert status == 1 and out == (
        f"verification summary {summary}: policy digest {policy.sha256!r}, expected "
        f"{load_policy().sha256}: another policy decided\n"
    )


def test_resume_keeps_the_before_snapshot_and_takes_missing_readings(
    request: pytest.FixtureRequest, nvml_shim: NvmlShim, podman: Podman, tmp_path: Path
) -> None:
    # Its own campaign: resuming needs the plan it started with, this session's socket.
    (tmp_path / "own").mkdir()
    campaign = _build_promotion(request, tmp_path / "own")
    # As a run stopped after its workload leaves them: restoration half-written, no reserve.
    path = campaign / "candidate/restoration.json"
    original = json.loads(path.read_text())
    half = dict(original, after=None, after_at=None, passed=False)
    half["failures"] = [{"code": "in-progress", "message": "the workload has not finished"}]
    path.write_text(json.dumps(half, indent=2, sort_keys=True) + "\n")
    (campaign / "candidate/reserve.json").unlink()
    forge_seal(campaign)  # as the stopped run sealed it
    cell = "candidate/capacity/ctx256-c1-nothink.json"
    cell_before = (campaign / cell).read_bytes()
    config = nvml_shim.configure(tmp_path / "nvml.conf", GPUS)
    _quiet_run(
        PLAN.format(socket=podman.socket), campaign.parent, {SHIM_ENV: str(config)}, resume=True
    )
    resumed = json.loads(path.read_text())
    assert resumed["before_at"] == original["before_at"]
    assert resumed["before"] == original["before"]
    assert resumed["after_at"] != original["after_at"] and resumed["passed"] is True
    assert json.loads((campaign / "candidate/reserve.json").read_text())["passed"] is True
    run = json.loads((campaign / "run-manifest.json").read_text())
    assert run["complete"] is True
    # The workload was not run again.
    assert (campaign / cell).read_bytes() == cell_before


STARTUP_PLAN = """
campaign_id = "2026-11-29-startup"
[[arms]]
name = "candidate"
[arms.simulated]
decode_tok_s = 500.0
[arms.container]
name = "anvil-startup-candidate"
docker_host = "{socket}"
[[stages]]
kind = "startup"
deadline_s = 5
poll_s = 0.1
[[stages]]
kind = "capacity"
context_targets = [256]
requests = 2
max_tokens = 8
"""


def test_a_failed_startup_stops_the_arm_and_rejects(
    tmp_path: Path, podman: Podman, cli: CliRun
) -> None:
    client = podman.client()
    podman.fresh_container(client, "anvil-startup-candidate")
    campaign = _quiet_run(STARTUP_PLAN.format(socket=podman.socket), tmp_path / "raw", {})
    client.close()
    attempt = json.loads((campaign / "candidate/startup.json").read_text())
    assert attempt["outcome"] == "start-failed" and attempt["passed"] is False
    assert attempt["before"]["state"] == "created"
    run = json.loads((campaign / "run-manifest.json").read_text())
    assert run["complete"] is False
    assert [c["status"] for c in run["cells"]] == ["pending"]
    decided = decide(campaign, load_policy())
    decision = decided.summary["decision"]
    assert decision["decision_labels"] == ["rejected", "no-promotion"]
    assert decided.summary["failures"][0].startswith("candidate startup: start-failed")
    # What the attempt itself says must hold first, not the first unmet rule.
    assert decision["next_gate"] == attempt["next_gate"]
    assert decision["next_gate"].startswith("a container the engine starts: ")
    assert decided.summary["complete"] is False
    status, report = verify_json(cli, campaign)
    assert status == 0, report


def test_approve_writes_the_record_an_approver_signs(
    campaign: Path, policy_file: Path, sigstore: PrivateSigstore, cli: CliRun
) -> None:
    status, out, err = cli(
        "approve",
        str(campaign),
        "--policy",
        str(policy_file),
        "--no-sign",
        "--note",
        "reviewed the A/B and reserve",
    )
    assert status == 0, err
    (record_path,) = (campaign / "approvals").glob("*.json")
    assert f"approval record: {record_path}" in out
    record = json.loads(record_path.read_text())
    assert record["decision"] == "promote" and record["candidate"] == "candidate"
    assert record["note"] == "reviewed the A/B and reserve"
    # The digest is that of the summary decide writes once the record is signed.
    record_path.with_name(record_path.name + manifest.BUNDLE_SUFFIX).write_bytes(
        sigstore.sign(record_path.read_bytes(), identity=APPROVER, issuer=ISSUER)
    )
    decided = decide(campaign, load_policy(policy_file))
    assert decided.evaluation.allowed
    assert hashlib.sha256(decided.path.read_bytes()).hexdigest() == record["summary_sha256"]
    # A campaign that fails another rule cannot be approved at all.
    (campaign / "candidate/reserve.json").unlink()
    forge_seal(campaign)
    status, _, err = cli("approve", str(campaign), "--policy", str(policy_file), "--no-sign")
    assert status == 1 and "not approvable: reserve:" in err


def test_decide_refuses_a_folder_without_a_run(tmp_path: Path, cli: CliRun) -> None:
    status, _, err = cli("decide", str(tmp_path))
    assert status == 1
    assert err.strip() == (
        f"error: {tmp_path}: not a campaign folder written by ledger run or ledger import "
        "(no readable run-manifest.json, no imported run)"
    )
    assert not (tmp_path / "summary.json").exists()


def test_private_bundles_fail_against_the_pinned_production_root(
    sigstore: PrivateSigstore, tmp_path: Path
) -> None:
    from ledger.signatures import verify_bundle

    data = b"an approval record\n"
    bundle = sigstore.sign(data, identity=APPROVER, issuer=ISSUER)
    root = sigstore.write_trusted_root(tmp_path / "root.json")
    ours = verify_bundle(data, bundle, identity=APPROVER, issuer=ISSUER, trusted_root=root)
    assert ours.ok, ours.reason
    pinned = verify_bundle(data, bundle, identity=APPROVER, issuer=ISSUER)
    assert not pinned.ok
    assert (
        verify_bundle(
            data, bundle, identity=APPROVER, issuer="https://elsewhere", trusted_root=root
        ).ok
        is False
    )


def _policy_with(policy_file: Path, old: str, new: str) -> Path:
    text = policy_file.read_text()
    assert old in text
    policy_file.write_text(text.replace(old, new))
    return policy_file


def _restarted(d: dict[str, Any]) -> None:
    d["after"]["started_at"] = "2026-11-29T23:59:59.000000000Z"


def _image_changed(d: dict[str, Any]) -> None:
    d["after"]["image_id"] = "sha256:" + "e" * 64


def _check_failed(d: dict[str, Any]) -> None:
    d["records"][0]["verdict"] = "failed"
    d["checks_passed"] -= 1
    d["passed"] = False


def _request_failed(d: dict[str, Any]) -> None:
    d["requests"][1].update(
        error={"class": "http-5xx", "status": 503, "message": "Service Unavailable"}
    )


@pytest.mark.parametrize(
    ("rule", "policy_edit", "forged", "reason"),
    [
        (
            "reserve",
            ("reserve_min_free_mib = 3072", "reserve_min_free_mib = 4100"),
            None,
            "card 0: 4000 MiB free, below the 4100 MiB reserve",
        ),
        (
            "matched-ab",
            ("min_samples_per_cell = 10", "min_samples_per_cell = 11"),
            None,
            "10 successful requests on baseline, the policy needs 11",
        ),
        ("restoration", None, ("candidate/restoration.json", _restarted), "restarted: started at"),
        (
            "restoration",
            None,
            ("candidate/restoration.json", _image_changed),
            "image-changed: image sha256:",
        ),
        (
            "required-gates",
            None,
            ("candidate/preflight.json", _check_failed),
            "required gate 'preflight' failed",
        ),
        (
            "required-gates",
            None,
            ("candidate/capacity/ctx256-c1-nothink.json", _request_failed),
            "required gate 'capacity' failed: 1 cell, 9/10 requests completed",
        ),
    ],
    ids=[
        "reserve-below-on-one-card-of-two",
        "too-few-samples",
        "restart",
        "changed-image",
        "required-gate-failed",
        "workload-gate-with-failed-requests",
    ],
)
def test_each_rule_refused_on_its_own(
    campaign: Path,
    policy_file: Path,
    sigstore: PrivateSigstore,
    cli: CliRun,
    rule: str,
    policy_edit: tuple[str, str] | None,
    forged: tuple[str, Any] | None,
    reason: str,
) -> None:
    # Every rule holds first: the campaign is approved and promotion allowed.
    policy = load_policy(policy_file)
    decide(campaign, policy)
    _approve(campaign, policy_file, sigstore)
    assert decide(campaign, policy).evaluation.allowed
    # Then exactly one rule is broken.
    if policy_edit is not None:
        policy = load_policy(_policy_with(policy_file, *policy_edit))
    if forged is not None:
        _forge(campaign, *forged)
    decided = decide(campaign, policy, reseal_after_review=True)
    assert {u.rule for u in decided.evaluation.unmet} == {rule}
    reasons = [u.reason for u in decided.evaluation.unmet]
    assert any(reason in r for r in reasons), reasons
    assert decided.summary["decision"]["promotion_authorized"] is False
    status, out, _ = cli("gate", str(campaign), "--policy", str(policy_file))
    assert status == 1
    assert f"FAIL {rule}" in out and "promotion NOT allowed" in out
    _claim_promotion(campaign)
    status, report = verify_json(cli, "--policy", str(policy_file), campaign)
    assert status == 1
    assert RULE_CODES[rule] in _codes(report)


CELL = "capacity/ctx256-c1-nothink.json"


def _first_measured(d: dict[str, Any]) -> dict[str, Any]:
    return next(r for r in d["requests"] if not r["warmup"])


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (
            lambda d, _: _first_measured(d).update(prompt_sha256="0" * 64),
            "capacity/ctx256-c1-nothink: prompt digests differ for 1 requests",
        ),
        (
            lambda d, _: _first_measured(d)["usage"].update(
                prompt_tokens=_first_measured(d)["usage"]["prompt_tokens"] + 7
            ),
            "capacity/ctx256-c1-nothink: actual prompt tokens differ for 1 requests",
        ),
        (
            lambda d, _: d["cell"].update(temperature=0.7),
            "capacity/ctx256-c1-nothink: temperature differs (0.0 vs 0.7)",
        ),
        (
            lambda d, _: d["cell"].update(concurrency=2),
            "capacity/ctx256-c1-nothink: concurrency differs (1 vs 2)",
        ),
        (
            lambda d, _: d["cell"].update(controlled_output=False),
            "capacity/ctx256-c1-nothink: output uncontrolled on candidate",
        ),
        (
            lambda d, base: d["metrics"]["prefix_cache"].update(
                hit_rate=0.0 if base["metrics"]["prefix_cache"]["hit_rate"] > 0.5 else 1.0
            ),
            "capacity/ctx256-c1-nothink: cache reuse differs",
        ),
    ],
    ids=["prompt-digests", "prompt-tokens", "sampling", "concurrency", "controlled-output",
         "cache-state"],
)  # fmt: skip
def test_unmatched_ab_refused_for_each_match_reason(
    campaign: Path, policy_file: Path, cli: CliRun, edit: Any, reason: str
) -> None:
    baseline = cells.load(campaign / "baseline" / CELL)
    _forge(campaign, f"candidate/{CELL}", lambda d: edit(d, baseline))
    derive_into(
        campaign, "baseline", "candidate", differs=["engine", "simulated_profile"], replace=True
    )
    decided = decide(campaign, load_policy(policy_file))
    unmet = [u for u in decided.evaluation.unmet if u.rule == "matched-ab"]
    assert any(reason in u.reason for u in unmet), [u.reason for u in unmet]
    assert {u.rule for u in decided.evaluation.unmet} == {"matched-ab"}
    assert cli("gate", str(campaign), "--policy", str(policy_file))[0] == 1
    _claim_promotion(campaign)
    _, report = verify_json(cli, "--policy", str(policy_file), campaign)
    assert "promotion-unmatched-ab" in _codes(report)


def _signed_record(campaign: Path, name: str, record: dict[str, Any], sigstore: Any,
                   identity: str = APPROVER) -> None:  # fmt: skip
    path = campaign / "approvals" / name
    path.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    path.with_name(name + manifest.BUNDLE_SUFFIX).write_bytes(
        sigstore.sign(path.read_bytes(), identity=identity, issuer=ISSUER)
    )


def test_each_approval_record_is_judged_and_a_later_good_one_counts(
    campaign: Path, policy_file: Path, sigstore: PrivateSigstore, tmp_path: Path
) -> None:
    from ledger import promotion
    from ledger.formats.jsonio import dumps_deterministic
    from ledger.promotion._decide import proposal

    policy = load_policy(policy_file)
    decide(campaign, policy)
    good = _approve(campaign, policy_file, sigstore)
    summary, digest = proposal(campaign, policy)
    summary_bytes = dumps_deterministic(summary)
    record = json.loads(good.read_text())
    _signed_record(campaign, "a-other-arm.json", {**record, "candidate": "baseline"}, sigstore)
    _signed_record(campaign, "a-stale.json", {**record, "summary_sha256": "0" * 64}, sigstore)
    (campaign / "approvals" / "a-unsigned.json").write_text(good.read_text())
    (campaign / "approvals" / "a-junk.json").write_text("{}")
    evidence = promotion.load_evidence(campaign)
    rel = f"approvals/{good.name}"
    assert promotion.check_approvals(evidence, policy, "candidate", summary_bytes) == (rel, [])
    # Without the good one's signature, each record says why it does not count.
    good.with_name(good.name + manifest.BUNDLE_SUFFIX).unlink()
    evidence = promotion.load_evidence(campaign)
    assert promotion.check_approvals(evidence, policy, "candidate", summary_bytes) == (
        None,
        [
            "approvals/a-other-arm.json: approves another campaign or arm",
            f"approvals/a-stale.json: approves summary sha256 000000000000…, not {digest[:12]}…",
            "approvals/a-unsigned.json: no signature (approvals/a-unsigned.json.sigstore.json)",
            f"{rel}: no signature ({rel}.sigstore.json)",
        ],
    )
    # Two approvers, neither of them the signer: the reason is the last one's check.
    _signed_record(campaign, good.name, record, sigstore, identity="someone@example.com")
    evidence = promotion.load_evidence(campaign)
    two = attrs.evolve(policy, approvers=(
        policy.approvers[0], attrs.evolve(policy.approvers[0], identity="second@example.com")))  # fmt: skip
    _, reasons = promotion.check_approvals(evidence, two, "candidate", summary_bytes)
    assert "second@example.com" in reasons[-1] and APPROVER not in reasons[-1], reasons[-1]
    # A trusted root that cannot be read is named, whichever approver is tried.
    broken = tmp_path / "broken-root.json"
    broken.write_text("{}")
    _, reasons = promotion.check_approvals(
        evidence, attrs.evolve(two, trusted_root=str(broken)), "candidate", summary_bytes
    )
    assert reasons[-1].startswith(f"{rel}: not signed by an allowed approver (trusted root ")
    assert reasons[-1].endswith(": not a sigstore trusted root (ValidationError))"), reasons[-1]


@pytest.mark.parametrize(("root", "staging"), [("production", False), ("staging", True)])
def test_the_pinned_root_the_policy_names_is_the_one_used(
    sigstore: PrivateSigstore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, root: str,
    staging: bool,
) -> None:  # fmt: skip
    from ledger import promotion
    from ledger.signatures import _verify as signatures

    asked: list[tuple[Any, bool]] = []
    real_root = signatures._root

    def recording(trusted_root: Any, staging: bool) -> Any:
        asked.append((trusted_root, staging))
        return real_root(trusted_root, staging)

    monkeypatch.setattr(signatures, "_root", recording)
    summary = b"{}\n"
    record = {"schema": "anvil-serving.approval/v1", "campaign_id": "x", "candidate": "c",
              "decision": "promote", "summary_sha256": hashlib.sha256(summary).hexdigest()}  # fmt: skip
    data = json.dumps(record).encode()
    (tmp_path / "approvals").mkdir()
    (tmp_path / "approvals" / "r.json.sigstore.json").write_bytes(
        sigstore.sign(data, identity=APPROVER, issuer=ISSUER)
    )
    evidence = promotion.Evidence(tmp_path, "x", approvals=[("approvals/r.json", data, record)])
    policy = attrs.evolve(load_policy(), trusted_root=root, approvers=(Approver(APPROVER, ISSUER),))
    approval, reasons = promotion.check_approvals(evidence, policy, "c", summary)
    assert approval is None and len(reasons) == 1  # a private bundle fails either pinned root
    assert "not signed by an allowed approver" in reasons[0]
    assert asked == [(None, staging)]


@pytest.mark.parametrize(
    "rel", ["approvals/copied-0123456789abcdef.json", "approvals/inner/record.json"]
)
def test_only_an_approval_record_may_arrive_after_the_seal(
    campaign: Path, policy_file: Path, cli: CliRun, sigstore: PrivateSigstore, rel: str
) -> None:
    """Approvals come after the seal by design; a cell run dropped into approvals/ (named
    like a record, or in a folder of its own) is a change like any other."""
    cell = next(campaign.glob("candidate/*/*.json"))
    target = campaign / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(cell, target)
    status, _, err = cli("decide", str(campaign), "--policy", str(policy_file))
    assert status == 1 and f"{rel} (added)" in err, err
    assert not (campaign / "summary.json").exists()
    # Nor is an approval record that is not signed yet; signed, it is no such change.
    target.unlink()
    status, _, err = cli("approve", str(campaign), "--policy", str(policy_file), "--no-sign")
    assert status == 0, err
    record = next(campaign.glob("approvals/*.json"))
    status, _, err = cli("decide", str(campaign), "--policy", str(policy_file))
    assert status == 1 and f"approvals/{record.name} (added)" in err, err
    signed = sigstore.sign(record.read_bytes(), identity=APPROVER, issuer=ISSUER)
    record.with_name(record.name + manifest.BUNDLE_SUFFIX).write_bytes(signed)
    status, _, err = cli("decide", str(campaign), "--policy", str(policy_file))
    assert status == 0, err


def test_an_approval_record_nested_or_unreadable_breaks_the_seal(
    campaign: Path, policy_file: Path, cli: CliRun
) -> None:
    """Only a record directly under approvals/ (or its bundle) comes after the seal."""
    assert cli("approve", str(campaign), "--policy", str(policy_file), "--no-sign")[0] == 0
    record = next(campaign.glob("approvals/*.json"))
    nested = campaign / "approvals" / "inner" / record.name
    nested.parent.mkdir()
    shutil.copyfile(record, nested)
    status, _, err = cli("decide", str(campaign), "--policy", str(policy_file))
    assert status == 1 and f"approvals/inner/{record.name} (added)" in err, err
    shutil.rmtree(nested.parent)
    for content in (b"not json", b'{"schema": ['):
        (campaign / "approvals" / "x.json").write_bytes(content)
        status, _, err = cli("decide", str(campaign), "--policy", str(policy_file))
        assert status == 1 and "approvals/x.json (added)" in err, err


def test_a_campaign_with_an_unreadable_artifact_is_not_labelled_verified(
    campaign: Path, policy_file: Path, cli: CliRun
) -> None:
    """A truncated baseline cell: verify reports it, and decide no longer calls the
    campaign verified (it did, as the candidate's own gates all passed)."""
    cell = next(campaign.glob("baseline/capacity/*.json"))
    cell.write_bytes(cell.read_bytes()[:100])
    status, _, err = cli(
        "decide", str(campaign), "--policy", str(policy_file), "--reseal-after-review"
    )
    assert status == 0, err
    decision = json.loads((campaign / "summary.json").read_text())["decision"]
    assert decision["decision_labels"] == ["no-promotion"]


def _point_at_baseline_reserve(campaign: Path) -> None:
    run_path = campaign / "run-manifest.json"
    run = json.loads(run_path.read_text())
    (entry,) = [e for e in run["evidence"] if (e["arm"], e["kind"]) == ("candidate", "reserve")]
    baseline = next(e for e in run["evidence"] if (e["arm"], e["kind"]) == ("baseline", "reserve"))
    entry["artifact"] = dict(baseline["artifact"])
    run_path.write_text(json.dumps(run, indent=2, sort_keys=True) + "\n")
    (campaign / "candidate" / "reserve.json").unlink()
    forge_seal(campaign)


def _drop_cell(campaign: Path) -> None:
    rel = f"candidate/{CELL}"
    run_path = campaign / "run-manifest.json"
    run = json.loads(run_path.read_text())
    run["cells"] = [e for e in run["cells"] if (e["artifact"] or {}).get("path") != rel]
    run_path.write_text(json.dumps(run, indent=2, sort_keys=True) + "\n")
    (campaign / rel).unlink()
    forge_seal(campaign)


def _strip_sources(campaign: Path) -> None:
    path = campaign / "derived" / "ab-comparison-baseline-vs-candidate.json"
    document = json.loads(path.read_text())
    for row in document["rows"]:
        row["sources"] = []
    path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    forge_seal(campaign)


def _withhold_a_source(campaign: Path) -> None:
    from ledger.evidence import manifest as seals

    (campaign / "baseline" / CELL).unlink()
    seals.seal(campaign, withhold=[f"baseline/{CELL}"], check=False, jobs=1)


@pytest.mark.parametrize(
    ("forge", "code", "rule", "reason"),
    [
        (
            _point_at_baseline_reserve,
            "run-manifest-mismatch",
            "reserve",
            (
                "listed for arm 'candidate', stage 'reserve', but the artifact says arm "
                "'baseline', stage 'reserve'"
            ),
        ),
        (
            _drop_cell,
            "run-manifest-mismatch",
            "required-gates",
            (
                "no entry for arm 'candidate', stage 'capacity', cell 'ctx256-c1-nothink', "
                "which run-plan.json plans"
            ),
        ),
        (_strip_sources, "derived-mismatch", None, "derived again from the raw rows"),
        (_withhold_a_source, None, "matched-ab", "it cannot be derived again"),
    ],
    ids=[
        "another-arms-reserve",
        "failing-cell-dropped-with-its-entry",
        "sources-stripped",
        "source-withheld",
    ],
)
def test_run_manifest_and_comparison_forgeries_are_refused(
    campaign: Path,
    policy_file: Path,
    sigstore: PrivateSigstore,
    cli: CliRun,
    forge: Any,
    code: str | None,
    rule: str | None,
    reason: str,
) -> None:
    policy = load_policy(policy_file)
    decide(campaign, policy)
    _approve(campaign, policy_file, sigstore)
    assert decide(campaign, policy).evaluation.allowed
    status, _, _ = cli("gate", str(campaign), "--policy", str(policy_file))
    assert status == 0
    forge(campaign)
    status, out, _ = cli("gate", str(campaign), "--policy", str(policy_file))
    assert status == 1 and "promotion NOT allowed" in out
    if rule is not None:
        assert f"FAIL {rule}" in out
    status, report = verify_json(cli, "--policy", str(policy_file), campaign)
    messages = [f["message"] for f in report["findings"] if f["code"] == code]
    if code is not None:
        assert status == 1 and any(reason in m for m in messages), report["findings"]
    else:
        assert reason in out


def _flip_reserve(summary: dict[str, Any]) -> None:
    gate = next(g for g in summary["gates"] if g["name"] == "candidate reserve")
    gate.update(passed=False, status="failed")


def _count_off(summary: dict[str, Any]) -> None:
    gate = next(g for g in summary["gates"] if g["name"] == "candidate capacity")
    gate.update(completed=gate["completed"] + 1, requests=gate["requests"] + 1)


def _headline_raised(summary: dict[str, Any]) -> None:
    line = summary["headline_results"][0]
    figure = re.search(r"\(([-+][0-9]+\.[0-9])%", line)
    assert figure is not None
    summary["headline_results"][0] = line.replace(figure.group(0), "(+99.9%", 1)


def _failed_count_off(summary: dict[str, Any]) -> None:
    gate = next(g for g in summary["gates"] if g["name"] == "candidate capacity")
    gate["failed"] += 1


def _headline_dropped(summary: dict[str, Any]) -> None:
    summary["headline_results"] = summary["headline_results"][1:]


def _checks_passed_off(summary: dict[str, Any]) -> None:
    gate = next(g for g in summary["gates"] if g["name"] == "candidate preflight")
    assert gate["checks_passed"] == gate["checks"]
    gate["checks"] += 1


def _unmatched_label(summary: dict[str, Any]) -> None:
    labels = summary["decision"]["evidence_labels"]
    assert "matched-ab" in labels
    labels[labels.index("matched-ab")] = "descriptive-only"


def _gate_dropped(summary: dict[str, Any]) -> None:
    summary["gates"] = [g for g in summary["gates"] if g["name"] != "candidate endurance"]


@pytest.mark.parametrize(
    ("edit", "pointer", "message"),
    [
        (_flip_reserve, "/gates/", "states false; derived again from candidate/reserve.json: true"),
        (_count_off, "/gates/", "derived again from"),
        (_headline_raised, "/headline_results/0", "states +99.9%; derived again from derived/"),
        (_gate_dropped, "/gates", "no gate 'candidate endurance'; derived again: passed"),
        (_failed_count_off, "/gates/", "states 1; derived again from"),
        (_headline_dropped, "/headline_results", "results; derived again from derived/"),
        (_checks_passed_off, "/gates/", "derived again from candidate/preflight.json"),
        (
            _unmatched_label,
            "/decision/evidence_labels",
            "states descriptive-only; derived again from derived/ab-comparison",
        ),
    ],
    ids=[
        "verdict",
        "count",
        "headline-figure",
        "gate-dropped",
        "failed-count",
        "headline-gone",
        "functional-count",
        "match-label",
    ],
)
def test_a_summary_s_figures_are_derived_again(
    campaign: Path, policy_file: Path, cli: CliRun, edit: Any, pointer: str, message: str
) -> None:
    decide(campaign, load_policy(policy_file))
    status, report = verify_json(cli, "--policy", str(policy_file), campaign)
    assert status == 0, report["findings"]
    path = campaign / "summary.json"
    summary = json.loads(path.read_text())
    edit(summary)
    path.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    forge_seal(campaign)
    status, report = verify_json(cli, "--policy", str(policy_file), campaign)
    assert status == 1
    found = [f for f in report["findings"] if f["code"] == "derived-mismatch"]
    assert any(f["pointer"].startswith(pointer) and message in f["message"] for f in found), found


def test_a_failed_gate_missing_from_the_failures_is_named(
    campaign: Path, tmp_path: Path, sigstore: PrivateSigstore, cli: CliRun
) -> None:
    sigstore.write_trusted_root(tmp_path / "root.json")
    strict = tmp_path / "strict.toml"
    strict.write_text(POLICY.format(reserve=8192, approver=APPROVER, issuer=ISSUER))
    decide(campaign, load_policy(strict))
    path = campaign / "summary.json"
    summary = json.loads(path.read_text())
    kept = [f for f in summary["failures"] if not f.startswith("candidate reserve:")]
    assert len(kept) == len(summary["failures"]) - 1
    summary["failures"] = kept
    path.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    forge_seal(campaign)
    status, report = verify_json(cli, "--policy", str(strict), campaign)
    assert status == 1
    found = [
        (f["pointer"], f["message"]) for f in report["findings"] if f["code"] == "derived-mismatch"
    ]
    assert found == [("/failures", "gate 'candidate reserve' failed but is not listed")]


def test_a_summary_whose_policy_file_was_changed_is_not_taken_on_trust(
    campaign: Path, policy_file: Path, cli: CliRun
) -> None:
    decide(campaign, load_policy(policy_file))
    path = campaign / "policy.json"
    recorded = json.loads(path.read_text())
    recorded["reserve_min_free_mib"] = 1
    path.write_text(json.dumps(recorded, indent=2, sort_keys=True) + "\n")
    forge_seal(campaign)
    status, report = verify_json(cli, "--policy", str(policy_file), campaign)
    assert status == 1
    assert [f["pointer"] for f in report["findings"] if f["code"] == "derived-mismatch"] == [
        "/decision/policy/sha256"
    ]


def test_a_raw_campaign_s_policy_is_not_excused_by_a_redacted_approver(
    campaign: Path, policy_file: Path, cli: CliRun
) -> None:
    # Publish redacts an approver's address, so a publication's policy digest cannot match;
    # a raw campaign has no such excuse, and its threshold is what the edit is after.
    decide(campaign, load_policy(policy_file))
    path = campaign / "policy.json"
    recorded = json.loads(path.read_text())
    (approver,) = recorded["approval"]["approvers"]
    approver["identity"] = "<redacted:email:1>"
    recorded["reserve_min_free_mib"] = 1
    path.write_text(json.dumps(recorded, indent=2, sort_keys=True) + "\n")
    forge_seal(campaign)
    status, report = verify_json(cli, "--policy", str(policy_file), campaign)
    assert status == 1
    assert [f["pointer"] for f in report["findings"] if f["code"] == "derived-mismatch"] == [
        "/decision/policy/sha256"
    ]


def test_a_gate_drawn_from_a_withheld_cell_is_not_derived_again(
    campaign: Path, policy_file: Path, cli: CliRun
) -> None:
    decide(campaign, load_policy(policy_file))
    (campaign / "candidate" / CELL).unlink()
    manifest.seal(campaign, withhold=[f"candidate/{CELL}"], check=False, jobs=1)
    status, report = verify_json(cli, "--policy", str(policy_file), campaign)
    assert status == 0, [f for f in report["findings"] if f["severity"] == "error"]
    assert "derived-mismatch" not in {f["code"] for f in report["findings"]}
