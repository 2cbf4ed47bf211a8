"""A seal cannot be laundered away: a folder a run, an import or derive sealed is not sealed
again as new once its seal is gone, and only a signed approval record arrives after it."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tomllib
from pathlib import Path

import pytest

from ledger.evidence import manifest
from tests import cells
from tests.conftest import TWO_ARMS_PLAN, CliRun, verify_json
from tests.private_sigstore import PrivateSigstore

APPROVER = "approver@example.com"
ISSUER = "https://issuer.example"


@pytest.fixture
def campaign(two_arm_campaign: Path, tmp_path: Path) -> Path:
    copy = tmp_path / two_arm_campaign.name
    shutil.copytree(two_arm_campaign, copy)
    return copy


def _launder(folder: Path) -> str:
    """The attack of the issue: a raw cell's numbers edited, its digest updated in the run
    manifest, the seal deleted. Returns the edited cell's path."""
    rel = "linux/capacity/ctx256-c1-nothink.json"
    cell = cells.load(folder / rel)
    for record in cell["requests"]:
        record["end_ns"] = record["end_ns"] // 2 + record["sent_ns"] // 2
    cells.save(folder / rel, cell)
    data = (folder / rel).read_bytes()
    run = json.loads((folder / "run-manifest.json").read_bytes())
    for entry in run["cells"]:
        if entry["artifact"]["path"] == rel:
            entry["artifact"]["sha256"] = hashlib.sha256(data).hexdigest()
    (folder / "run-manifest.json").write_text(json.dumps(run))
    (folder / manifest.MANIFEST_NAME).unlink()
    (folder / manifest.SUMS_NAME).unlink()
    return rel


@pytest.mark.parametrize(
    ("also_removed", "named"),
    [
        ((), "run-plan.json"),
        (("run-plan.json",), "run-manifest.json"),
        # The run's own files are as easy to delete: the cell runs say who wrote them.
        (("run-manifest.json", "run-plan.json", "workload-manifest.json"), "cell-run"),
    ],
)
def test_a_run_folder_without_its_seal_is_sealed_only_after_a_review(
    campaign: Path, cli: CliRun, also_removed: tuple[str, ...], named: str
) -> None:
    _launder(campaign)
    for name in also_removed:
        (campaign / name).unlink()
    status, out, err = cli("seal", str(campaign))
    assert (status, out) == (1, "")
    assert "has lost its seal" in err and named in err and "--reseal-after-review" in err
    assert not (campaign / manifest.MANIFEST_NAME).exists()
    # Neither does a command that extends the campaign seal it unasked.
    status, _, err = cli("derive", str(campaign), "--baseline", "windows", "--candidate", "linux")
    assert status == 1 and "has lost its seal" in err
    assert not (campaign / "derived").exists()

    status, _, err = cli("seal", str(campaign), "--reseal-after-review")
    assert status == 0, err
    sealed = json.loads((campaign / manifest.MANIFEST_NAME).read_bytes())
    assert sealed["reviews"] == [
        {"command": "seal", "changes": [{"path": "manifest.json", "change": "missing"}]}
    ]
    status, report = verify_json(cli, campaign)
    codes = {f["code"] for f in report["findings"]}
    assert "resealed-after-review" in codes  # the publication will say so


def test_a_derived_comparison_shows_a_seal_was_there(campaign: Path, cli: CliRun) -> None:
    status, _, err = cli("derive", str(campaign), "--baseline", "windows", "--candidate", "linux",
                         "--kind", "os")  # fmt: skip
    assert status == 0, err
    for name in ("manifest.json", "SHA256SUMS", "run-manifest.json", "run-plan.json"):
        (campaign / name).unlink()
    for cell in campaign.glob("*/*/*.json"):
        cell.unlink()  # no cell runs left to say so: the derived folder does
    status, _, err = cli("seal", str(campaign))
    assert status == 1 and "derived/" in err


def test_a_folder_never_sealed_is_sealed_as_it_is(tmp_path: Path, cli: CliRun) -> None:
    folder = tmp_path / "2026-11-29-hand-made"
    folder.mkdir()
    (folder / "notes.md").write_text("measured by hand\n")
    (folder / "derived").mkdir()  # empty: nothing was derived, so nothing was sealed
    status, _, err = cli("seal", str(folder))
    assert status == 0, err
    assert "reviews" not in json.loads((folder / manifest.MANIFEST_NAME).read_bytes())


IMPORTED = Path(__file__).parent / "assets" / "imports" / "vllm_save_detailed.json"


def test_an_import_that_lost_its_seal_says_so_by_its_runs(tmp_path: Path, cli: CliRun) -> None:
    argv = ["import", "vllm", str(IMPORTED), "--raw-dir", str(tmp_path / "raw"),
            "--campaign", "2026-11-30-imported", "--arm", "vllm"]  # fmt: skip
    assert cli(*argv)[0] == 0
    folder = tmp_path / "raw" / "2026-11-30-imported"
    (folder / manifest.MANIFEST_NAME).unlink()
    (folder / manifest.SUMS_NAME).unlink()
    status, _, err = cli("seal", str(folder))
    assert status == 1 and "has lost its seal" in err and "imported-run" in err


@pytest.mark.parametrize("kept", [manifest.STATEMENT_NAME, manifest.BUNDLE_NAME])
def test_a_publication_that_lost_its_seal_says_so_by_its_statement(
    tmp_path: Path, cli: CliRun, kept: str
) -> None:
    folder = tmp_path / "public" / "2026-09-08-glm53-linux-wsl-comparison"
    shutil.copytree(Path(__file__).parent.parent / "evidence" / folder.name, folder)
    for name in (manifest.MANIFEST_NAME, manifest.SUMS_NAME, manifest.STATEMENT_NAME,
                 manifest.BUNDLE_NAME):  # fmt: skip
        if name != kept:
            (folder / name).unlink()
    status, _, err = cli("seal", str(folder))
    assert status == 1 and f"it holds {kept}" in err


# Approvals arrive after the seal only when signed


def _record(campaign: Path) -> bytes:
    return json.dumps(
        {
            "schema": manifest.APPROVAL_SCHEMA,
            "campaign_id": campaign.name,
            "candidate": "linux",
            "decision": "promote",
            "summary_sha256": "0" * 64,
        }
    ).encode()


def _decide(cli: CliRun, campaign: Path, *extra: str) -> tuple[int, str]:
    status, _, err = cli("decide", str(campaign), "--candidate", "linux", *extra)
    return status, err


@pytest.mark.parametrize(
    "plant",
    [
        "unsigned",
        "garbage-bundle",
        "bundle-of-another-file",
        "not-an-approval",
        "bundle-alone",
        "signed-cell-run",
        "signed-record-in-a-subfolder",
    ],
)
def test_an_approval_that_is_not_a_signed_record_breaks_the_seal(
    campaign: Path, cli: CliRun, plant: str
) -> None:
    approvals = campaign / "approvals"
    approvals.mkdir()
    record = _record(campaign)
    sigstore = PrivateSigstore()
    if plant == "unsigned":
        (approvals / "x.json").write_bytes(record)
    elif plant == "garbage-bundle":
        (approvals / "x.json").write_bytes(record)
        (approvals / "x.json.sigstore.json").write_text('{"not": "a bundle"}')
    elif plant == "bundle-of-another-file":
        (approvals / "x.json").write_bytes(record)
        other = sigstore.sign(b"another file", identity=APPROVER, issuer=ISSUER)
        (approvals / "x.json.sigstore.json").write_bytes(other)
    elif plant == "not-an-approval":
        cell = {"schema": manifest.APPROVAL_SCHEMA, "campaign_id": campaign.name}
        data = json.dumps(cell).encode()
        (approvals / "x.json").write_bytes(data)
        signed = sigstore.sign(data, identity=APPROVER, issuer=ISSUER)
        (approvals / "x.json.sigstore.json").write_bytes(signed)
    elif plant == "signed-cell-run":
        # A cell run copied in and signed: the database would load it as a run.
        data = (campaign / "linux/capacity/ctx256-c1-nothink.json").read_bytes()
        (approvals / "x.json").write_bytes(data)
        signed = sigstore.sign(data, identity=APPROVER, issuer=ISSUER)
        (approvals / "x.json.sigstore.json").write_bytes(signed)
    elif plant == "signed-record-in-a-subfolder":
        (approvals / "x.json").mkdir()
        (approvals / "x.json" / "x.json").write_bytes(record)
        signed = sigstore.sign(record, identity=APPROVER, issuer=ISSUER)
        (approvals / "x.json" / "x.json.sigstore.json").write_bytes(signed)
    else:
        signed = sigstore.sign(record, identity=APPROVER, issuer=ISSUER)
        (approvals / "x.json.sigstore.json").write_bytes(signed)
    status, err = _decide(cli, campaign)
    assert status == 1 and "no longer matches its seal" in err and "approvals/x.json" in err
    assert not (campaign / "summary.json").exists()


def test_a_signed_approval_record_arrives_after_the_seal(campaign: Path, cli: CliRun) -> None:
    approvals = campaign / "approvals"
    approvals.mkdir()
    record = _record(campaign)
    (approvals / "x.json").write_bytes(record)
    signed = PrivateSigstore().sign(record, identity=APPROVER, issuer=ISSUER)
    (approvals / "x.json.sigstore.json").write_bytes(signed)
    assert manifest.approval_problem(campaign, "approvals/x.json") is None
    assert manifest.approval_problem(campaign, "approvals/x.json.sigstore.json") is None
    status, err = _decide(cli, campaign)
    assert status == 0, err


def test_a_bundle_reviewed_into_a_campaign_is_no_artifact_of_the_database(
    campaign: Path, cli: CliRun
) -> None:
    """Sealed after review, a bundle that is not JSON is the bundle's own problem: the
    database reads artifacts, and a bundle is none (sql said "verify lists every such file",
    and verify listed none)."""
    approvals = campaign / "approvals"
    approvals.mkdir()
    (approvals / "x.json").write_bytes(_record(campaign))
    (approvals / "x.json.sigstore.json").write_text("garbage")
    status, err = _decide(cli, campaign, "--reseal-after-review")
    assert status == 0, err
    status, _, err = cli("sql", "--from", str(campaign), "SELECT count(*) AS n FROM cells")
    assert status == 0, err
    status, report = verify_json(cli, campaign)
    errors = [(f["code"], f["path"]) for f in report["findings"] if f["severity"] == "error"]
    # Verify lists what is wrong, and it is the approval, not a derived number.
    assert sorted(errors) == [
        ("approval-unsigned", f"{campaign}/approvals/x.json"),
        ("approval-unsigned", f"{campaign}/approvals/x.json.sigstore.json"),
    ]


def test_a_campaign_decided_on_imports_alone_is_not_a_publication(
    tmp_path: Path, cli: CliRun
) -> None:
    """A summary with no run beside it reads as published; one decided on imported runs
    is still raw (its imports hold what publish removes) until publish makes it public."""
    argv = ["import", "vllm", str(IMPORTED), "--raw-dir", str(tmp_path / "raw"),
            "--campaign", "2026-11-30-imported", "--arm", "vllm"]  # fmt: skip
    assert cli(*argv)[0] == 0
    folder = tmp_path / "raw" / "2026-11-30-imported"
    status, _, err = cli("decide", str(folder))
    assert status == 0, err
    status, report = verify_json(cli, "--public", tmp_path / "raw")
    assert status == 1
    assert [(f["code"], f["path"]) for f in report["findings"] if f["severity"] == "error"] == [
        ("not-published", str(folder))
    ]


def test_a_run_whose_seal_was_deleted_is_not_resumed(
    campaign: Path, tmp_path: Path, cli: CliRun
) -> None:
    """A resumed run keeps the cells it finds: with the seal deleted after an edit (and the
    run's own manifest with it), it would have sealed the edit as measured."""
    rel = _launder(campaign)
    (campaign / "run-manifest.json").unlink()
    edited = (campaign / rel).read_bytes()
    plan = tmp_path / "plan.toml"
    plan.write_text(TWO_ARMS_PLAN)
    status, _, err = cli("run", str(plan), "--raw-dir", str(campaign.parent), "--resume")
    assert status == 1, err
    assert "has lost its seal" in err and "run-plan.json" in err
    assert not (campaign / manifest.MANIFEST_NAME).exists()
    assert (campaign / rel).read_bytes() == edited


def test_a_run_is_sealed_from_its_first_file(tmp_path: Path) -> None:
    """A run killed before its first cell ended still leaves a seal (over its plan), so a
    seal deleted later can be told apart from a run that never sealed."""
    from runners.campaign import CampaignRun
    from runners.campaign.progress import LogProgress
    from runners.plan import parse_plan

    plan = parse_plan(tomllib.loads(TWO_ARMS_PLAN))
    with open(os.devnull, "w") as quiet:
        run = CampaignRun(plan, tmp_path / "raw", resume=False, progress=LogProgress(quiet))
        run.prepare()
    sealed = json.loads((run.folder / manifest.MANIFEST_NAME).read_bytes())
    assert [a["path"] for a in sealed["artifacts"]] == ["run-plan.json"]
