"""``ledger gate --attest``: the gate's decision as an in-toto statement with SLSA's
verification summary predicate v1, signed by ``ledger sign`` against a private sigstore
instance served over HTTP, and checked by ``ledger audit`` with the identity and policy
digest it must name. Each refusal is made by breaking one thing alone.

A summary that passes needs a campaign every rule holds for (GPU reserve and container
restoration evidence): that one is in tests/test_promotion.py, beside the campaign it gates.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from ledger.promotion.policy import PROMOTION_LEVELS, load_policy
from ledger.signatures import GATE_FIELD, summary_problems, verification_summary
from tests.conftest import ROOT, CliRun
from tests.private_sigstore import OIDC_ISSUER, SigstoreService

PUBLISHED = "2026-11-29-simulated-example"
PUBLISHER = "publisher@example.org"
GATEKEEPER = "gatekeeper@example.org"
DEFAULT_POLICY = load_policy().sha256


@attrs.frozen
class Signed:
    folder: Path
    """A copy of the published campaign, signed by PUBLISHER."""
    summary: Path
    """Its gate's verification summary under the shipped policy, signed by GATEKEEPER."""
    root: Path
    """The private instance's trusted_root.json."""


@pytest.fixture(scope="module")
def service() -> Iterator[SigstoreService]:
    with SigstoreService() as running:
        yield running


def _sign(cli: CliRun, service: SigstoreService, config: Path, who: str, *paths: str) -> None:
    status, out, err = cli(
        "sign", *paths, "--identity-token", service.token(who), "--trust-config", str(config)
    )
    assert status == 0, err
    assert out.startswith("signed: ") and f"(by {who} ({OIDC_ISSUER}))" in out


@pytest.fixture
def signed(
    tmp_path: Path, service: SigstoreService, cli: CliRun, monkeypatch: pytest.MonkeyPatch
) -> Signed:
    config = service.write_trust_config(tmp_path / "trust-config.json")
    folder = tmp_path / PUBLISHED
    shutil.copytree(ROOT / "evidence" / PUBLISHED, folder)
    # The campaign is signed first: signing declares its bundle in manifest.json, and the
    # summary names the manifest as it then is.
    _sign(cli, service, config, PUBLISHER, str(folder), "--replace")
    summary = tmp_path / "gate.intoto.json"
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1796083200")
    status, out, _ = cli("gate", str(folder), "--attest", str(summary))
    assert status == 1 and "promotion NOT allowed" in out
    assert f"verification summary (FAILED, policy sha256 {DEFAULT_POLICY}): {summary}" in out
    _sign(cli, service, config, GATEKEEPER, str(summary))
    root = tmp_path / "trusted_root.json"
    root.write_text(json.dumps(service.instance.trusted_root()))
    return Signed(folder, summary, root)


def _audit(cli: CliRun, signed: Signed, *extra: str) -> tuple[int, str, str]:
    return cli(
        "audit",
        str(signed.folder),
        "--identity",
        PUBLISHER,
        "--issuer",
        OIDC_ISSUER,
        "--trusted-root",
        str(signed.root),
        "--verification-summary",
        str(signed.summary),
        "--summary-identity",
        GATEKEEPER,
        *extra,
    )


def _summary_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("verification summary ")]


def test_the_gate_writes_its_decision_as_a_verification_summary(signed: Signed) -> None:
    document = json.loads(signed.summary.read_bytes())
    manifest = signed.folder / "manifest.json"
    assert document["_type"] == "https://in-toto.io/Statement/v1"
    assert document["predicateType"] == "https://slsa.dev/verification_summary/v1"
    assert document["subject"] == [
        {
            "name": f"{PUBLISHED}/manifest.json",
            "digest": {"sha256": hashlib.sha256(manifest.read_bytes()).hexdigest()},
        }
    ]
    predicate = document["predicate"]
    assert predicate["verifier"]["id"] == "https://anvil-ledger.dev/gate/v1"
    assert predicate["timeVerified"] == "2026-12-01T00:00:00Z"  # SOURCE_DATE_EPOCH
    assert predicate["policy"]["digest"] == {"sha256": DEFAULT_POLICY}
    assert predicate["verificationResult"] == "FAILED"
    assert predicate["verifiedLevels"] == ["FAILED"]
    gate = predicate[GATE_FIELD]
    assert gate["candidate"] == "candidate"
    assert [u["rule"] for u in gate["rules_unmet"]] == ["reserve", "restoration", "approval"]
    assert gate["rules_met"] == [
        "evidence",
        "complete",
        "candidate",
        "required-gates",
        "ab-present",
        "matched-ab",
    ]
    assert gate["evidence"] == {"errors": 0, "warnings": 1}


def test_the_same_decision_at_the_same_time_gives_the_same_bytes(
    signed: Signed, cli: CliRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1796083200")
    again = tmp_path / "again.intoto.json"
    assert cli("gate", str(signed.folder), "--attest", str(again))[0] == 1
    assert again.read_bytes() == signed.summary.read_bytes()


def test_audit_checks_the_signed_summary_and_names_a_refused_gate(
    signed: Signed, cli: CliRun
) -> None:
    status, out, err = _audit(cli, signed, "--policy-digest", DEFAULT_POLICY)
    assert (status, err) == (1, "FAIL\n")
    # Signed by the gatekeeper, naming this manifest and this policy: its one problem is
    # its verdict.
    refused = "verificationResult 'FAILED' (unmet: reserve, restoration, approval)"
    assert _summary_lines(out) == [
        f"verification summary {signed.summary}: the gate did not pass the campaign: {refused}"
    ]
    assert out.splitlines() == _summary_lines(out)


def test_a_summary_of_another_policy_is_refused(signed: Signed, cli: CliRun) -> None:
    other = "ab" * 32
    status, out, _ = _audit(cli, signed, "--policy-digest", other)
    assert status == 1
    assert (
        f"verification summary {signed.summary}: policy digest '{DEFAULT_POLICY}', expected "
        f"{other}: another policy decided"
    ) in _summary_lines(out)


def test_a_summary_signed_by_someone_else_is_refused(signed: Signed, cli: CliRun) -> None:
    status, out, _ = _audit(
        cli, signed, "--policy-digest", DEFAULT_POLICY, "--summary-identity", PUBLISHER
    )
    assert status == 1
    lines = _summary_lines(out)
    assert any(
        line.startswith(f"verification summary {signed.summary}: signature:") for line in lines
    )
    assert GATEKEEPER in " ".join(lines)


def test_a_tampered_summary_is_refused(signed: Signed, cli: CliRun) -> None:
    document = json.loads(signed.summary.read_bytes())
    document["predicate"]["verificationResult"] = "PASSED"
    document["predicate"]["verifiedLevels"] = [PROMOTION_LEVELS[2]]
    document["predicate"][GATE_FIELD]["rules_unmet"] = []
    signed.summary.write_text(json.dumps(document))
    status, out, _ = _audit(cli, signed, "--policy-digest", DEFAULT_POLICY)
    assert status == 1
    # What it now says would pass; its signature no longer holds.
    assert [line.split(": ")[1] for line in _summary_lines(out)] == ["signature"]


def test_a_summary_of_other_evidence_is_refused(signed: Signed, cli: CliRun) -> None:
    # The campaign's seal changes after the gate (a ticket linked later, re-sealed): the
    # summary names a manifest that is no longer the campaign's.
    manifest = signed.folder / "manifest.json"
    listed = json.loads(manifest.read_bytes())
    before = hashlib.sha256(manifest.read_bytes()).hexdigest()
    manifest.write_text(json.dumps(listed, indent=1))
    after = hashlib.sha256(manifest.read_bytes()).hexdigest()
    status, out, _ = _audit(cli, signed, "--policy-digest", DEFAULT_POLICY)
    assert status == 1
    assert (
        f"verification summary {signed.summary}: its subject's sha256 is '{before}', the "
        f"campaign's manifest.json is {after}: it attests other evidence"
    ) in _summary_lines(out)


def test_an_unsigned_summary_is_refused(signed: Signed, cli: CliRun) -> None:
    Path(str(signed.summary) + ".sigstore.json").unlink()
    status, out, _ = _audit(cli, signed, "--policy-digest", DEFAULT_POLICY)
    assert status == 1
    assert (
        f"verification summary {signed.summary}: no gate.intoto.json.sigstore.json: it is not "
        "signed"
    ) in _summary_lines(out)


def test_sign_refuses_what_is_no_summary_and_a_bundle_that_exists(
    signed: Signed, cli: CliRun, service: SigstoreService, tmp_path: Path
) -> None:
    config = tmp_path / "trust-config.json"
    token = service.token(GATEKEEPER)
    other = tmp_path / "other.json"
    other.write_text('{"schema": "anvil-serving.benchmark-decision-summary/v1"}')
    status, out, err = cli(
        "sign", str(other), "--identity-token", token, "--trust-config", str(config)
    )
    assert (status, out) == (2, "")
    assert err == (
        f"error: {other}: not a verification summary (ledger gate --attest); a "
        "campaign is signed by its folder\n"
    )
    bundle = Path(str(signed.summary) + ".sigstore.json")
    before = bundle.read_bytes()
    status, _, err = cli(
        "sign", str(signed.summary), "--identity-token", token, "--trust-config", str(config)
    )
    assert status == 2 and "exists; --replace to sign again" in err
    assert bundle.read_bytes() == before
    _sign(cli, service, config, GATEKEEPER, str(signed.summary), "--replace")
    assert bundle.read_bytes() != before


def test_attest_refuses_a_file_it_would_replace_and_a_missing_folder(
    signed: Signed, cli: CliRun, tmp_path: Path
) -> None:
    before = signed.summary.read_bytes()
    status, out, err = cli("gate", str(signed.folder), "--attest", str(signed.summary))
    assert (status, out) == (2, "")
    assert err.startswith(f"ledger gate: error: --attest {signed.summary}: exists (--replace")
    assert signed.summary.read_bytes() == before
    status, out, err = cli("gate", str(signed.folder), "--attest", str(tmp_path / "no/x.json"))
    assert (status, out) == (2, "")
    assert (
        err
        == f"ledger gate: error: --attest {tmp_path / 'no/x.json'}: no such folder {tmp_path / 'no'}\n"
    )
    status, _, _ = cli("gate", str(signed.folder), "--attest", str(signed.summary), "--replace")
    assert status == 1


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--policy-digest", "ab" * 32], "--policy-digest is for --verification-summary"),
        (["--verification-summary", "SUMMARY"], "needs --policy or --policy-digest"),
        (
            ["--verification-summary", "SUMMARY", "--policy-digest", "AB" * 32],
            "not a lowercase hex sha256",
        ),
        (["--verification-summary", "nowhere.json", "--policy-digest", "ab" * 32], "no such file"),
        (["--verification-summary", ".", "--policy-digest", "ab" * 32], ": a folder, not a file"),
    ],
)
def test_audit_refuses_summary_arguments_that_cannot_be_checked(
    signed: Signed, cli: CliRun, extra: list[str], said: str
) -> None:
    extra = [str(signed.summary) if e == "SUMMARY" else e for e in extra]
    status, out, err = cli(
        "audit", str(signed.folder), "--identity", PUBLISHER, "--issuer", OIDC_ISSUER, *extra
    )
    assert (status, out) == (2, "")
    assert err.startswith("ledger audit: error: ") and said in err and err.count("\n") == 1


def _passed() -> dict[str, Any]:
    return verification_summary(
        campaign_id="2026-12-01-x",
        manifest_sha256="1" * 64,
        policy_name="p",
        policy_sha256="2" * 64,
        level=PROMOTION_LEVELS[2],
        candidate="candidate",
        errors=0,
        warnings=0,
        met=["evidence", "complete"],
        unmet=[],
        verified_at="2026-12-01T00:00:00Z",
    )


def _broken(edit: str) -> dict[str, Any]:
    document = _passed()
    predicate = document["predicate"]
    if edit == "predicate-type":
        document["predicateType"] = "https://slsa.dev/verification_summary/v0.2"
    elif edit == "verifier":
        predicate["verifier"]["id"] = "https://example.org/another-verifier"
    elif edit == "subject-name":
        document["subject"][0]["name"] = "2026-12-01-y/manifest.json"
    elif edit == "subject-digest":
        document["subject"][0]["digest"]["sha256"] = "3" * 64
    elif edit == "two-subjects":
        document["subject"].append(document["subject"][0])
    elif edit == "policy":
        predicate["policy"]["digest"]["sha256"] = "4" * 64
    elif edit == "failed":
        predicate["verificationResult"] = "FAILED"
    elif edit == "failed-level":
        predicate["verifiedLevels"] = ["FAILED"]
    elif edit == "unmet":
        predicate[GATE_FIELD]["rules_unmet"] = [{"rule": "reserve", "reason": "x"}]
    return document


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        ("predicate-type", "not an in-toto Statement v1 with the SLSA verification summary"),
        ("verifier", "its verifier is not https://anvil-ledger.dev/gate/v1"),
        ("subject-name", "its subject is '2026-12-01-y/manifest.json'"),
        ("subject-digest", "its subject's sha256 is '3333"),
        ("two-subjects", "its subject is not the one manifest.json of a campaign"),
        ("policy", "policy digest '4444"),
        ("failed", "the gate did not pass the campaign: verificationResult 'FAILED'"),
        ("failed-level", "verificationResult PASSED with verifiedLevels ['FAILED']"),
        ("unmet", "verificationResult PASSED with rules unmet"),
    ],
)
def test_each_claim_of_a_summary_is_checked_alone(edit: str, said: str) -> None:
    expected = {"campaign_id": "2026-12-01-x", "manifest_sha256": "1" * 64}
    assert summary_problems(_passed(), policy_sha256="2" * 64, **expected) == []
    problems = summary_problems(_broken(edit), policy_sha256="2" * 64, **expected)
    assert len(problems) == 1 and problems[0].startswith(said), problems


def test_a_policy_s_level_is_what_it_demands() -> None:
    policy = load_policy()
    assert policy.level == "ANVIL_PROMOTION_LEVEL_3"
    assert attrs.evolve(policy, approval_required=False).level == "ANVIL_PROMOTION_LEVEL_2"
    assert attrs.evolve(policy, restoration_required=False).level == "ANVIL_PROMOTION_LEVEL_1"
    assert not any(level.startswith("SLSA_") for level in PROMOTION_LEVELS)


def test_a_manifest_changed_while_gated_is_not_attested(
    signed: Signed, cli: CliRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ledger.verification

    verify = ledger.verification.verify_paths
    manifest = signed.folder / "manifest.json"

    def verify_then_swap(*args: Any, **kwargs: Any) -> Any:
        report = verify(*args, **kwargs)
        manifest.write_bytes(manifest.read_bytes() + b" ")  # after it was verified
        return report

    monkeypatch.setattr(ledger.verification, "verify_paths", verify_then_swap)
    summary = tmp_path / "late.intoto.json"
    status, _, err = cli("gate", str(signed.folder), "--attest", str(summary))
    assert status == 1
    assert err == (
        f"ledger gate: {signed.folder}: manifest.json changed while it was gated; nothing "
        "attested\n"
    )
    assert not summary.exists()


def test_a_campaign_without_a_manifest_has_nothing_to_attest(cli: CliRun, tmp_path: Path) -> None:
    folder = tmp_path / PUBLISHED
    shutil.copytree(ROOT / "evidence" / PUBLISHED, folder)
    (folder / "manifest.json").unlink()
    summary = tmp_path / "none.intoto.json"
    status, out, err = cli("gate", str(folder), "--attest", str(summary))
    assert status == 1 and "promotion NOT allowed" in out
    assert err == (
        f"ledger gate: {folder}: no readable manifest.json: the decision has no evidence to "
        "attest (run ledger seal)\n"
    )
    assert not summary.exists()


@pytest.mark.parametrize("epoch", ["abc", "-5", "", "253402300800"])
def test_a_source_date_epoch_that_is_no_time_is_refused(
    epoch: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ledger.errors import UsageError
    from ledger.signatures import time_verified

    monkeypatch.setenv("SOURCE_DATE_EPOCH", epoch)
    with pytest.raises(UsageError, match="SOURCE_DATE_EPOCH"):
        time_verified()


def test_attest_never_replaces_a_device(signed: Signed, cli: CliRun) -> None:
    status, out, err = cli("gate", str(signed.folder), "--attest", "/dev/null", "--replace")
    assert (status, out) == (2, "")
    assert (
        err
        == "ledger gate: error: --attest /dev/null: not a regular file (a device, pipe or link)\n"
    )
    assert Path("/dev/null").is_char_device()


def test_replace_without_attest_is_refused(signed: Signed, cli: CliRun) -> None:
    status, out, err = cli("gate", str(signed.folder), "--replace")
    assert (status, out) == (2, "")
    assert err == "ledger gate: error: --replace is given without --attest FILE\n"


def test_a_campaign_with_error_findings_is_attested_with_the_evidence_rule_unmet(
    signed: Signed, cli: CliRun, tmp_path: Path
) -> None:
    report = signed.folder / "report.md"
    report.write_bytes(report.read_bytes() + b"\n")
    summary = tmp_path / "broken.intoto.json"
    status, _, _ = cli("gate", str(signed.folder), "--attest", str(summary))
    gate = json.loads(summary.read_bytes())["predicate"][GATE_FIELD]
    assert status == 1 and gate["evidence"]["errors"] >= 1
    assert gate["rules_unmet"][0] == {
        "rule": "evidence",
        "reason": f"{gate['evidence']['errors']} error findings",
    }
    assert "evidence" not in gate["rules_met"]


def test_attest_refuses_a_folder(signed: Signed, cli: CliRun, tmp_path: Path) -> None:
    status, out, err = cli("gate", str(signed.folder), "--attest", str(tmp_path))
    assert (status, out) == (2, "")
    assert err == f"ledger gate: error: --attest {tmp_path}: a folder, not a file\n"


def test_a_summary_from_another_issuer_is_refused(signed: Signed, cli: CliRun) -> None:
    other = "https://issuer.example.net"
    status, out, _ = _audit(
        cli, signed, "--policy-digest", DEFAULT_POLICY, "--summary-issuer", other
    )
    lines = _summary_lines(out)
    assert status == 1
    assert any(
        line.startswith(f"verification summary {signed.summary}: signature:") for line in lines
    )
    assert other in " ".join(lines)


@pytest.mark.parametrize(
    "edit",
    [
        {"predicateType": "https://slsa.dev/provenance/v1"},
        {"_type": "https://in-toto.io/Statement/v0.1"},
    ],
    ids=["other-predicate", "other-statement-type"],
)
def test_sign_refuses_a_statement_that_is_no_verification_summary(
    signed: Signed, cli: CliRun, service: SigstoreService, tmp_path: Path, edit: dict[str, str]
) -> None:
    other = tmp_path / "other.intoto.json"
    other.write_text(json.dumps(json.loads(signed.summary.read_bytes()) | edit))
    status, out, err = cli(
        "sign",
        str(other),
        "--identity-token",
        service.token(GATEKEEPER),
        "--trust-config",
        str(tmp_path / "trust-config.json"),
    )
    assert (status, out) == (2, "")
    assert err.startswith(f"error: {other}: not a verification summary")
    assert not Path(str(other) + ".sigstore.json").exists()
