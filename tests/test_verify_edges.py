"""verify on the real evidence tree, on unusable input, and on file system states git cannot hold."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ledger.evidence import manifest, scan, tree
from ledger.verification._verify import verify_paths
from tests.conftest import ASSETS, ROOT, SEEDS, CliRun, seed_paths, verify_json

EVIDENCE = ROOT / "evidence"
VALID = ASSETS / "verify" / "valid" / "2026-11-01-asset-campaign"


def _copy_valid(tmp_path: Path) -> Path:
    target = tmp_path / "evidence" / VALID.name
    shutil.copytree(VALID, target)
    # The follow-up ticket it links lives beside the evidence root.
    shutil.copytree(ASSETS / "verify" / "tickets", tmp_path / "tickets", dirs_exist_ok=True)
    return target


def test_evidence_tree_verifies_with_withheld_and_gate_warnings(cli: CliRun) -> None:
    status, report = verify_json(cli, EVIDENCE)
    assert status == 0
    summary = report["summary"]
    assert summary["errors"] == 0
    assert summary["campaigns"] == 4
    codes = {f["code"] for f in report["findings"]}
    # The simulated example was published with rules v1: checked against them, a warning.
    assert codes == {"withheld-artifact", "gate-failed-all-passed", "sanitizer-outdated"}
    gate = [f for f in report["findings"] if f["code"] == "gate-failed-all-passed"]
    assert len(gate) == 1
    assert "routed-thinking-enabled.json" in gate[0]["message"]
    assert gate[0]["pointer"] == "/gates/3/passed"


def test_evidence_summaries_are_the_seeds_byte_for_byte() -> None:
    for seed in seed_paths():
        campaign = seed.name.removesuffix(".summary.json")
        assert (EVIDENCE / campaign / "summary.json").read_bytes() == seed.read_bytes()
    publication = SEEDS / "2026-09-08-glm53-linux-wsl-comparison.publication.md"
    assert (EVIDENCE / "2026-09-08-glm53-linux-wsl-comparison" / "publication.md").read_bytes() == (
        publication.read_bytes()
    )


def test_reseal_of_evidence_is_byte_identical(tmp_path: Path) -> None:
    for campaign in sorted(p for p in EVIDENCE.iterdir() if p.is_dir()):
        copy = tmp_path / campaign.name
        shutil.copytree(campaign, copy)
        manifest.seal(copy, jobs=1)
        for name in (manifest.MANIFEST_NAME, manifest.SUMS_NAME):
            assert (copy / name).read_bytes() == (campaign / name).read_bytes(), name


def test_sha256sum_checks_the_evidence_without_the_toolkit() -> None:
    for campaign in sorted(p for p in EVIDENCE.iterdir() if p.is_dir()):
        done = subprocess.run(
            ["sha256sum", "--check", "--strict", "SHA256SUMS"],
            cwd=campaign,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr


def test_seal_refuses_a_hand_edit_and_reseals_it_after_review(tmp_path: Path, cli: CliRun) -> None:
    campaign = _copy_valid(tmp_path)
    (campaign / "publication.md").write_text("# edited by hand\n")
    status, _ = verify_json(cli, campaign)
    assert status == 1
    before = (campaign / "manifest.json").read_bytes()
    status, _, err = cli("seal", str(campaign))
    assert status == 1
    assert "publication.md (changed)" in err and "--reseal-after-review" in err
    assert (campaign / "manifest.json").read_bytes() == before
    status, out, _ = cli("seal", str(campaign), "--reseal-after-review")
    assert status == 0
    assert "5 withheld" in out
    status, report = verify_json(cli, campaign)
    assert status == 0
    assert {f["code"] for f in report["findings"]} == {"withheld-artifact", "resealed-after-review"}
    (review,) = [f for f in report["findings"] if f["code"] == "resealed-after-review"]
    assert review["pointer"] == "/reviews/0"
    assert review["message"] == "'ledger seal' re-sealed over publication.md (changed)"


def test_seal_refuses_a_symlink_leaving_the_campaign(tmp_path: Path, cli: CliRun) -> None:
    campaign = _copy_valid(tmp_path)
    os.symlink("/etc/hostname", campaign / "host")
    before = (campaign / "manifest.json").read_bytes()
    status, _, err = cli("seal", str(campaign))
    assert status == 1
    assert "leads out of the campaign folder" in err
    assert (campaign / "manifest.json").read_bytes() == before


@pytest.mark.parametrize(
    "args",
    [
        ["verify", "/no/such/path"],
        ["verify"],
        ["verify", "--format", "xml", "."],
        ["nope"],
        ["seal", "/no/such/folder"],
    ],
    ids=["missing-path", "no-path", "bad-format", "bad-command", "seal-missing"],
)
def test_unusable_input_exits_2_in_one_line(cli: CliRun, args: list[str]) -> None:
    status, out, err = cli(*args)
    assert status == 2
    assert err.count("\n") == 1, err
    assert "Traceback" not in err
    assert out == ""


def test_unreadable_argument_exits_2(cli: CliRun, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    status, _, err = cli("verify", str(fifo))
    assert status == 2
    assert err.strip().splitlines()[0].startswith("ledger verify: error:")


def test_folder_without_campaign_is_a_finding(cli: CliRun, tmp_path: Path) -> None:
    status, report = verify_json(cli, str(tmp_path) + "/")
    assert status == 1
    assert [(f["code"], f["path"]) for f in report["findings"]] == [("no-campaign", str(tmp_path))]


def test_two_gigabyte_json_is_hashed_not_parsed(cli: CliRun, tmp_path: Path) -> None:
    campaign = _copy_valid(tmp_path)
    with open(campaign / "huge.json", "wb") as stream:
        stream.truncate(2 * 1024**3)
    status, report = verify_json(cli, campaign)
    assert status == 1
    codes = {(f["code"], f["path"].rsplit("/", 1)[-1]) for f in report["findings"]}
    assert ("json-too-large", "huge.json") in codes
    assert ("unlisted-file", "huge.json") in codes
    status, report = verify_json(cli, campaign / "huge.json")
    assert status == 1
    assert [f["code"] for f in report["findings"]] == ["json-too-large"]


def test_binary_garbage_document_is_a_finding(cli: CliRun, tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.json"
    garbage.write_bytes(bytes(range(256)) * 64)
    status, report = verify_json(cli, garbage)
    assert status == 1
    assert [f["code"] for f in report["findings"]] == ["json-encoding"]


def test_fifo_in_a_campaign_is_never_opened(cli: CliRun, tmp_path: Path) -> None:
    campaign = _copy_valid(tmp_path)
    os.mkfifo(campaign / "stream.json")
    status, report = verify_json(cli, campaign)
    assert status == 1
    assert {f["code"] for f in report["findings"]} - {"withheld-artifact"} == {"not-regular-file"}


def test_file_replaced_during_the_run(tmp_path: Path) -> None:
    campaign = _copy_valid(tmp_path)
    listing = tree.list_campaign(campaign)
    target = next(e for e in listing.entries if e.rel == "publication.md")
    replacement = campaign / "publication.new"
    replacement.write_bytes(b"# Asset campaign\n\nDecision: no-promotion.\n")
    os.replace(replacement, campaign / "publication.md")
    result = scan.process_file(scan.FileTask(target.path, target.rel, False, target.identity))
    assert [i.code for i in result.issues] == ["file-changed"]
    assert result.sha256 is None
    vanished = next(e for e in listing.entries if e.rel == "summary.json")
    os.unlink(vanished.path)
    result = scan.process_file(scan.FileTask(vanished.path, vanished.rel, True, vanished.identity))
    assert [i.code for i in result.issues] == ["file-changed"]


def test_parallel_and_serial_verification_agree(tmp_path: Path) -> None:
    root = tmp_path / "evidence"
    shutil.copytree(ASSETS / "verify" / "tickets", tmp_path / "tickets")
    for index in range(12):
        copy = root / f"2026-11-{index + 1:02d}-asset-campaign"
        shutil.copytree(VALID, copy)
        for extra in range(10):
            (copy / f"extra-{extra}.json").write_bytes(b'{"value": %d}\n' % extra)
    serial = verify_paths([str(root)], jobs=1)
    parallel = verify_paths([str(root)], jobs=2)
    assert serial == parallel
    assert serial.campaigns == 12
    assert serial.artifacts == 12 * 16


def test_a_campaign_reached_twice_is_verified_once(tmp_path: Path) -> None:
    campaign = _copy_valid(tmp_path)
    (campaign / "extra.json").write_bytes(b'{"value": 1}\n')  # a warning to count
    document = tmp_path / "loose.json"
    document.write_bytes(b'{"value": 2}\n')
    once = verify_paths([str(campaign.parent), str(document)])
    assert once.campaigns == 1 and once.findings
    for paths in (
        [str(campaign.parent), str(campaign.parent) + "/", str(document), str(document)],
        [str(campaign.parent), str(campaign), str(document), f"{tmp_path}/./loose.json"],
    ):
        twice = verify_paths(paths)
        assert (twice.campaigns, twice.artifacts) == (once.campaigns, once.artifacts)
        assert twice.findings == once.findings


def test_text_output_groups_by_campaign(cli: CliRun, tmp_path: Path) -> None:
    campaign = _copy_valid(tmp_path)
    (campaign / "notes.txt").write_text("unsealed\n")
    status, out, err = cli("verify", str(campaign))
    assert status == 1
    lines = out.splitlines()
    assert lines[0] == str(campaign)
    assert lines[1] == (
        "  warning withheld-artifact          manifest.json#/withheld/0: 'agentic.json' is "
        "withheld: operator-private raw artifact; not published"
    )
    assert lines[6] == (
        "  error   unlisted-file              notes.txt: present but not in manifest.json"
    )
    assert lines[-1] == "1 errors, 5 warnings in 1 campaigns, 7 artifacts"
    assert err.strip() == "FAIL"


def test_output_is_deterministic(cli: CliRun) -> None:
    first = cli("verify", "--format", "json", str(ASSETS / "verify"))
    second = cli("verify", "--format", "json", str(ASSETS / "verify"))
    assert first == second
    assert first[0] == 1


def test_seal_withhold_declares_and_refuses_unsafe_paths(tmp_path: Path, cli: CliRun) -> None:
    campaign = _copy_valid(tmp_path)
    status, out, _ = cli(
        "seal", str(campaign), "--withhold", "raw/gpu-state.json", "--reason", "holds GPU UUIDs"
    )
    assert status == 0
    assert "6 withheld" in out
    loaded = manifest.read_manifest(campaign / "manifest.json")
    held = {w.path: w.reason for w in loaded.withheld}
    assert held["raw/gpu-state.json"] == "holds GPU UUIDs"
    before = (campaign / "manifest.json").read_bytes()
    status, _, err = cli("seal", str(campaign), "--withhold", "../outside.json")
    assert status == 2
    assert "climbs out" in err
    assert (campaign / "manifest.json").read_bytes() == before


def test_a_reference_behind_unicode_escapes_is_still_checked(tmp_path: Path, cli: CliRun) -> None:
    # "sha\u0032\u0035\u0036" parses as "sha256": the cheap filter on the raw text must not
    # let a reference spelled that way go unchecked.
    asset = ASSETS / "verify" / "reference_digest_mismatch" / VALID.name
    campaign = tmp_path / "evidence" / VALID.name
    shutil.copytree(asset, campaign)
    shutil.copytree(ASSETS / "verify" / "tickets", tmp_path / "tickets")
    path = campaign / "comparison.json"
    path.write_text(path.read_text().replace('"sha256"', '"sha\\u0032\\u0035\\u0036"'))
    assert b'"sha256"' not in path.read_bytes()
    manifest.seal(campaign, check=False, jobs=1)
    status, report = verify_json(cli, campaign)
    assert status == 1
    errors = [(f["code"], f["pointer"]) for f in report["findings"] if f["severity"] == "error"]
    assert errors == [("reference-mismatch", "/rows/0/sources/0")]


@pytest.mark.parametrize("count", [8, 9, 10])
def test_a_review_names_eight_changes_and_counts_the_rest(
    tmp_path: Path, cli: CliRun, count: int
) -> None:
    campaign = _copy_valid(tmp_path)
    for i in range(count):
        (campaign / "raw" / f"added-{i:02}.log").write_text("x\n")
    manifest.seal(campaign, reseal_after_review=True, jobs=1)
    _, report = verify_json(cli, campaign)
    (review,) = [f for f in report["findings"] if f["code"] == "resealed-after-review"]
    shown = ", ".join(f"raw/added-{i:02}.log (added)" for i in range(8))
    assert shown in review["message"]
    more = f"and {count - 8} more, listed there"
    assert (more in review["message"]) is (count > 8)
    assert ("more, listed there" in review["message"]) is (count > 8)
    assert "raw/added-08.log" not in review["message"]


def test_a_manifest_sealed_under_another_name_is_named(tmp_path: Path, cli: CliRun) -> None:
    campaign = _copy_valid(tmp_path)
    renamed = campaign.with_name("2026-11-02-renamed")
    campaign.rename(renamed)
    status, report = verify_json(cli, renamed)
    assert status == 1
    found = {(f["code"], f["path"].split("/")[-1], f["pointer"]) for f in report["findings"]}
    assert ("campaign-id-mismatch", "manifest.json", "/campaign_id") in found


def test_a_root_verifies_its_campaign_folders_and_nothing_else(tmp_path: Path, cli: CliRun) -> None:
    root = tmp_path / "evidence"
    first = _copy_valid(tmp_path)
    # A raw campaign first (no ticket check), then the public one: both are read.
    raw = root / "2026-10-01-raw"
    shutil.copytree(first, raw)
    (raw / "run-manifest.json").write_text("{}")
    (root / ".git").mkdir()
    (root / ".git" / "junk.json").write_text("{")
    (tmp_path / "elsewhere").mkdir()
    (root / "linked").symlink_to(tmp_path / "elsewhere")
    (root / "README.md").write_text("not a campaign\n")
    shutil.rmtree(tmp_path / "tickets")  # the public campaign's ticket is now missing
    status, report = verify_json(cli, str(root) + "/")
    assert status == 1
    folders = {f["path"].split("/")[len(root.parts)] for f in report["findings"]}
    assert folders == {first.name, "2026-10-01-raw"}
    paths = [f["path"] for f in report["findings"]]
    assert all(p.startswith(f"{root}/") and "//" not in p for p in paths)
    tickets = [f for f in report["findings"] if f["code"] == "ticket-missing"]
    assert [f["path"].split("/")[len(root.parts)] for f in tickets] == [first.name]
    _, alone = verify_json(cli, first)
    assert report["summary"]["campaigns"] == 2
    # The raw copy holds the same artifacts and its run manifest.
    assert report["summary"]["artifacts"] == 2 * alone["summary"]["artifacts"] + 1


def test_an_unusable_path_is_named_with_its_reason(cli: CliRun, tmp_path: Path) -> None:
    status, _, err = cli("verify", str(tmp_path / "missing"))
    assert status == 2
    assert err.strip() == f"ledger verify: error: {tmp_path / 'missing'}: No such file or directory"


def test_a_second_summary_claiming_promotion_needs_its_evidence_too(
    tmp_path: Path, cli: CliRun
) -> None:
    campaign = _copy_valid(tmp_path)
    summary = json.loads((campaign / "summary.json").read_text())
    summary["decision"].update(promotion_authorized=True, decision_labels=["verified"])
    if isinstance(summary.get("identity"), dict):
        summary["identity"]["promotion_authorized"] = True
    (campaign / "raw" / "summary-draft.json").write_text(json.dumps(summary, indent=2) + "\n")
    manifest.seal(campaign, check=False, jobs=1)
    _, report = verify_json(cli, campaign)
    codes = {f["code"] for f in report["findings"] if f["path"].endswith("summary-draft.json")}
    assert {"promotion-without-ab", "promotion-without-reserve"} <= codes


def test_sums_too_large_to_read_are_a_finding(tmp_path: Path, cli: CliRun) -> None:
    campaign = _copy_valid(tmp_path)
    with open(campaign / "SHA256SUMS", "r+b") as stream:
        stream.truncate(17 << 20)  # past the 16 MiB cap on SHA256SUMS
    status, report = verify_json(cli, campaign)
    assert status == 1
    (finding,) = [f for f in report["findings"] if f["code"] == "sha256sums-invalid"]
    assert finding["message"].startswith("cannot read: ")


def test_a_lone_summary_and_a_campaign_in_one_call(tmp_path: Path, cli: CliRun) -> None:
    campaign = _copy_valid(tmp_path)
    _, alone = verify_json(cli, campaign)
    summary = json.loads((campaign / "summary.json").read_text())
    summary["decision"].update(promotion_authorized=True, decision_labels=["verified"])
    if isinstance(summary.get("identity"), dict):
        summary["identity"]["promotion_authorized"] = True
    lone = tmp_path / "lone-summary.json"
    lone.write_text(json.dumps(summary, indent=2) + "\n")
    status, report = verify_json(cli, lone, campaign)
    assert status == 1
    assert report["summary"]["artifacts"] == alone["summary"]["artifacts"] + 1
    mine = [f["code"] for f in report["findings"] if f["path"] == str(lone)]
    assert {"promotion-without-ab", "promotion-without-reserve"} <= set(mine)
    theirs = [f for f in report["findings"] if f["path"] != str(lone)]
    assert len(theirs) == len(alone["findings"])
    # One order whatever the order of the arguments: sorted by campaign, path and pointer.
    _, swapped = verify_json(cli, campaign, lone)
    assert swapped["findings"] == report["findings"]
    assert [f["path"] for f in report["findings"]][: len(mine)] == [str(lone)] * len(mine)


def test_text_output_shows_a_lone_document_by_its_whole_path(cli: CliRun, tmp_path: Path) -> None:
    lone = tmp_path / "lone.json"
    lone.write_text('{"schema": "anvil-serving.nothing/v1"}')
    status, out, _ = cli("verify", str(lone))
    assert status == 1
    (line,) = [line for line in out.splitlines() if "schema-" in line]
    assert f" {lone}#/schema: " in line or f" {lone}: " in line, line


def test_failures_alone_need_a_ticket_and_every_published_campaign_is_checked(
    tmp_path: Path, cli: CliRun
) -> None:
    first = _copy_valid(tmp_path)
    root = first.parent
    # An earlier published campaign whose summary cannot be read: its own findings say so,
    # and the campaigns after it are still checked for tickets.
    unreadable = root / "2026-10-01-unreadable"
    shutil.copytree(first, unreadable)
    (unreadable / "summary.json").write_text("{")
    manifest.seal(unreadable, check=False, jobs=1)
    summary = json.loads((first / "summary.json").read_text())
    assert summary["failures"]
    del summary["decision"]["next_gate"]  # failures alone
    (first / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (first / "follow-up.json").unlink()
    manifest.seal(first, check=False, jobs=1)
    _, report = verify_json(cli, root)
    missing = [f for f in report["findings"] if f["code"] == "ticket-missing"]
    assert [(f["path"].split("/")[-2], f["message"]) for f in missing] == [
        (first.name,
         "the campaign has failures or a next gate but links no ticket (ledger ticket new)"),
    ]  # fmt: skip


def test_a_public_file_of_json_lines_is_scanned_as_the_json_it_decodes_to(tmp_path: Path) -> None:
    from ledger.evidence import scan

    path = tmp_path / "requests.jsonl"
    path.write_text('{"ok": 1}\n{"api\\u005fkey": "plainsecretvalue30"}\n')
    found = scan.process_file(scan.FileTask(str(path), "logs/requests.jsonl", False, None, True))
    assert [i.message for i in found.issues] == ["line 2 at /api_key: credential in a public file"]
    # The same bytes under another name are text, whose escapes rules v2 decode too ...
    found = scan.process_file(scan.FileTask(str(path), "logs/requests.log", False, None, True))
    assert [i.message for i in found.issues] == ["line 2: credential in a public file"]
    # ... and v1 did not: the escape hid the key from its text rules.
    task = scan.FileTask(str(path), "logs/requests.log", False, None, True, "1")
    assert scan.process_file(task).issues == ()


def test_a_folder_above_the_evidence_root_is_named_as_such(tmp_path: Path, cli: CliRun) -> None:
    name = "2026-11-29-simulated-example"
    shutil.copytree(EVIDENCE / name, tmp_path / "top" / "evidence" / name)
    status, report = verify_json(cli, tmp_path / "top")
    assert status == 1
    assert [(f["code"], f["message"]) for f in report["findings"]] == [
        (
            "no-campaign",
            (
                "a folder of campaigns, not a campaign; verify it as the evidence root: "
                f"ledger verify {tmp_path / 'top' / 'evidence'}"
            ),
        )
    ]
    status, _, err = cli("sql", "--from", str(tmp_path / "top"), "SELECT 1")
    assert status == 2 and "a folder of campaigns, not a campaign" in err
    assert verify_json(cli, tmp_path / "top" / "evidence")[0] == 0


def test_a_public_text_is_scanned_whole_as_publish_sanitizes_it(tmp_path: Path) -> None:
    # A private key's block spans lines: read line by line, no detector saw it.
    from ledger.evidence import scan

    key = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA0Z3VS5JJcds3\n-----END RSA PRIVATE KEY-----"
    path = tmp_path / "server.log"
    path.write_text(f"starting\nready\n{key}\ndone\nalso at 10.1.2.3:8000\n")
    found = scan.process_file(scan.FileTask(str(path), "candidate/server.log", False, None, True))
    assert [i.message for i in found.issues] == [
        "line 3: credential in a public file",
        "line 7: endpoint in a public file",
    ]


def test_a_public_text_too_large_to_scan_is_an_error(tmp_path: Path) -> None:
    from ledger.evidence import scan
    from ledger.findings import CODES

    path = tmp_path / "server.log"
    path.write_text("token=supersecretvalue123 and 10.1.2.3:8000\n" * 100)
    task = scan.FileTask(str(path), "candidate/server.log", False, None, True)
    found = scan.process_file(task, max_json_bytes=1000)
    assert [i.code for i in found.issues] == ["too-large-to-scan"]
    assert CODES["too-large-to-scan"][0] == "error"
    # Under the limit it is scanned; outside a publication it is not scanned at all.
    assert {i.code for i in scan.process_file(task).issues} == {"private-data"}
    raw = scan.FileTask(str(path), "candidate/server.log", False, None, False)
    assert scan.process_file(raw, max_json_bytes=1000).issues == ()


def test_a_key_of_digits_outside_ascii_is_a_finding_not_a_crash(
    tmp_path: Path, cli: CliRun
) -> None:
    # "²" is a digit to str.isdigit(), and not to int(): the findings' order crashed on it.
    document = tmp_path / "doc.json"
    document.write_text(
        '{"schema": "anvil-serving.os-comparison/v1", "\\u00b2": 1, "\\u00b2": 2}\n'
    )
    status, report = verify_json(cli, document)
    assert status == 1
    assert ("duplicate-key", "/\u00b2") in {(f["code"], f["pointer"]) for f in report["findings"]}


def test_a_non_finite_number_is_named_by_its_pointer(tmp_path: Path, cli: CliRun) -> None:
    document = tmp_path / "doc.json"
    document.write_text('{"schema": "anvil-serving.os-comparison/v1", "rows": [{"x": NaN}]}\n')
    status, report = verify_json(cli, document)
    assert status == 1
    assert [(f["code"], f["pointer"]) for f in report["findings"]] == [
        ("json-nonfinite", "/rows/0/x")
    ]


def test_private_data_by_line_is_in_line_order_and_once_a_line() -> None:
    token = "ghp_" + "T" * 36
    lines = ["clean"] * 14
    lines[4] = f"{token} and ghp_{'U' * 36}"  # line 5: two of one kind, one finding
    lines[12] = token  # line 13
    found = scan._private_text("\n".join(lines).encode(), "notes.txt", scan.detector())
    assert [i.message for i in found] == [
        "line 5: credential in a public file",
        "line 13: credential in a public file",
    ]
    from ledger.findings import Finding
    from ledger.verification._verify import _finding_order

    findings = [Finding.of("notes.txt", i) for i in reversed(found)]
    assert [f.message for f in sorted(findings, key=_finding_order)] == [i.message for i in found]
