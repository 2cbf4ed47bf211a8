"""Publication: sanitized, re-hashed bottom-up, sealed with a statement; verify scans it."""

from __future__ import annotations

import copy
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from ledger.evidence import manifest
from ledger.formats.jsonio import read_json, write_json
from ledger.hashing import sha256_file
from ledger.promotion._decide import decide
from ledger.promotion.policy import load_policy
from ledger.publication import _publish as publish_module
from ledger.publication._publish import PublishError, publish
from ledger.sanitizer._sanitizer import Sanitizer, load_rules, rules_file
from ledger.signatures import _intoto as intoto
from tests import cells
from tests.conftest import CliRun, forge_seal, verify_json

SECRETS = {
    "hf": "hf_abcdefghijklmnopqrstuvwxyz012345",
    "openai": "sk-proj-AbCdEf0123456789AbCdEf0123456789",
    "gpu": "GPU-3f2a8c1e-9b7d-4e5f-a1b2-c3d4e5f6a7b8",
    "home": "/home/alice",
    "endpoint": "10.20.30.40",
    "internal": "gpu-box.internal",
}


@pytest.fixture
def raw(tmp_path: Path, two_arm_campaign: Path) -> Path:
    """The two-arm raw campaign with secrets in identity, flags, environment and a log."""
    folder = tmp_path / "raw" / two_arm_campaign.name
    shutil.copytree(two_arm_campaign, folder)
    for path in sorted(folder.glob("*/capacity/*.json")):
        document = read_json(path)
        document["identity"].update(
            {
                "gpu_uuids": [SECRETS["gpu"]],
                "declared_serve_flags": [
                    f"--api-key {SECRETS['openai']}",
                    "--host 0.0.0.0",
                    "--model-path /home/alice/models/glm",
                ],
                "environment": {"HF_TOKEN": SECRETS["hf"], "CUDA_VISIBLE_DEVICES": SECRETS["gpu"]},
                "endpoint": f"http://{SECRETS['endpoint']}:8001/v1",
            }
        )
        document["endpoint"]["base_url"] = f"http://{SECRETS['internal']}:8001/v1"
        write_json(path, document)
    (folder / "serve.log").write_text(
        f"INFO --api-key {SECRETS['openai']} listening on {SECRETS['endpoint']}:8001\n"
        f"INFO cache {SECRETS['home']}/.cache token={SECRETS['hf']}\n"
        f"GPU 0: NVIDIA H200 (UUID: {SECRETS['gpu']})\n"
    )
    # The run manifest references the cells: bring it up to date, then seal.
    manifest = read_json(folder / "run-manifest.json")
    for cell in manifest["cells"]:
        cell["artifact"]["sha256"] = sha256_file(folder / cell["artifact"]["path"])[0]
    write_json(folder / "run-manifest.json", manifest)
    forge_seal(folder)
    return folder


def _everything(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


def test_publish_removes_every_secret_and_keeps_digests_linked(
    raw: Path, tmp_path: Path, cli: CliRun
) -> None:
    status, out, err = cli("publish", str(raw), "--out", str(tmp_path / "public"))
    assert status == 0, err
    public = tmp_path / "public" / raw.name
    # run-plan, workload and run manifests, six cells and their six parts, the log.
    assert out.startswith(f"published {public}: 16 artifacts")
    blob = _everything(public)
    for secret in SECRETS.values():
        assert secret.encode() not in blob, secret
    log = (public / "serve.log").read_text()
    assert (
        "<redacted:credential:" in log
        and "<redacted:gpu:1>" in log
        and "<redacted:path:1>/.cache" in log
    )
    # References now carry the sanitized digests.
    run_manifest = read_json(public / "run-manifest.json")
    for cell in run_manifest["cells"]:
        assert cell["artifact"]["sha256"] == sha256_file(public / cell["artifact"]["path"])[0]
        # And each cell run's parts, hashed before the cell run that lists them.
        for part in read_json(public / cell["artifact"]["path"])["parts"]:
            assert part["sha256"] == sha256_file(public / part["path"])[0]
    statement = read_json(public / intoto.STATEMENT_NAME)
    subjects = intoto.subjects_of(statement)
    assert subjects is not None and set(subjects) >= {"serve.log", "manifest.json", "run-plan.json"}
    assert statement["predicate"]["sanitizer"]["version"] == "2"
    # The digest map is private: beside the raw campaign, never in the public tree.
    mapping = read_json(tmp_path / "raw" / f"{raw.name}.publish-map.json")
    raw_digests = {a["raw_sha256"] for a in mapping["artifacts"]}
    assert not any(
        d.encode() in blob for d in raw_digests - {a["public_sha256"] for a in mapping["artifacts"]}
    )
    status, report = verify_json(cli, public)
    assert status == 0, report
    assert report["summary"]["errors"] == 0


def test_publishing_is_deterministic(raw: Path, tmp_path: Path) -> None:
    one = publish(raw, tmp_path / "one", digest_map=tmp_path / "one.map.json")
    two = publish(raw, tmp_path / "two", digest_map=tmp_path / "two.map.json")
    files = sorted(p.relative_to(one.folder) for p in one.folder.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(two.folder) for p in two.folder.rglob("*") if p.is_file())
    for name in files:
        assert (one.folder / name).read_bytes() == (two.folder / name).read_bytes(), name


def test_a_secret_pasted_afterwards_is_caught(raw: Path, tmp_path: Path, cli: CliRun) -> None:
    public = publish(raw, tmp_path / "public").folder
    path = public / "linux/capacity/ctx256-c1-nothink.json"
    document = read_json(path)
    document["identity"]["note"] = (
        "reach it at http://192.168.7.7:30000 with hf_zyxwvutsrqponmlkjihgfedcba987654"
    )
    write_json(path, document)
    forge_seal(public)
    status, report = verify_json(cli, public)
    assert status == 1
    found = [(f["code"], f["pointer"], f["message"]) for f in report["findings"]]
    assert ("private-data", "/identity/note", "credential in a public artifact") in found
    assert all(
        "hf_zyx" not in f["message"] and "192.168" not in f["message"] for f in report["findings"]
    )
    # A secret in a key is named masked: the pointer is printed, and kept in CI logs.
    token = "ghp_" + "K" * 36
    document["identity"] = {f"{token} or {SECRETS['endpoint']}": "x"}
    write_json(path, document)
    forge_seal(public)
    status, report = verify_json(cli, public)
    keyed = [f for f in report["findings"] if f["pointer"].startswith("/identity/<")]
    assert [(f["pointer"], f["message"]) for f in keyed] == [
        (
            "/identity/<redacted:credential> or <redacted:endpoint>",
            "credential (in a key) in a public artifact",
        ),
        (
            "/identity/<redacted:credential> or <redacted:endpoint>",
            "endpoint (in a key) in a public artifact",
        ),
    ]
    assert token not in json.dumps(report) and SECRETS["endpoint"] not in json.dumps(report)
    (public / "notes.txt").write_text("ssh ops@gpu-1.lan\n")
    forge_seal(public)
    status, report = verify_json(cli, public)
    assert ("private-data", "", "line 1: endpoint in a public file") in [
        (f["code"], f["pointer"], f["message"]) for f in report["findings"]
    ]


def test_statement_must_match_the_files(raw: Path, tmp_path: Path, cli: CliRun) -> None:
    public = publish(raw, tmp_path / "public").folder
    statement = read_json(public / intoto.STATEMENT_NAME)
    statement["subject"][0]["digest"]["sha256"] = "0" * 64
    write_json(public / intoto.STATEMENT_NAME, statement)
    status, report = verify_json(cli, public)
    assert status == 1
    # SHA256SUMS gives the declared statement's digest too: sha256sum -c fails it as well.
    assert [f["code"] for f in report["findings"]] == [
        "sha256sums-mismatch",
        "sha256sums-mismatch",
        "statement-mismatch",
    ]
    sums = public / manifest.SUMS_NAME
    data = (public / intoto.STATEMENT_NAME).read_bytes()
    sums.write_bytes(manifest.sums_adding(sums.read_bytes(), {intoto.STATEMENT_NAME: data}))
    status, report = verify_json(cli, public)
    assert [f["code"] for f in report["findings"]] == ["statement-mismatch"]
    # Sealing again rewrites the statement's subjects.
    forge_seal(public)
    assert verify_json(cli, public)[0] == 0


def test_the_statement_states_the_published_decision_and_verify_holds_it_to_it(
    raw: Path, tmp_path: Path, cli: CliRun
) -> None:
    decide(raw, load_policy(), candidate="linux")
    public = publish(raw, tmp_path / "public").folder
    statement = read_json(public / intoto.STATEMENT_NAME)
    decision = read_json(public / manifest.SUMMARY_NAME)["decision"]
    assert statement["predicate"]["decision"] == decision
    assert decision["promotion_authorized"] is False
    # (Its follow-up ticket is not published beside it: verify says so, and nothing else.)
    _status, report = verify_json(cli, public)
    assert [f["code"] for f in report["findings"] if f["severity"] == "error"] == ["ticket-missing"]

    def forged(edit: Any) -> list[tuple[str, str, str]]:
        changed = copy.deepcopy(statement)
        edit(changed["predicate"])
        write_json(public / intoto.STATEMENT_NAME, changed)
        forge_seal(public)  # subjects, seal and SHA256SUMS all agree with the edit
        status, report = verify_json(cli, public)
        assert status == 1
        return [
            (f["code"], f["pointer"], f["message"])
            for f in report["findings"]
            if f["code"] != "ticket-missing"
        ]

    assert forged(lambda p: p["decision"].update(promotion_authorized=True, unmet=[])) == [
        (
            "statement-mismatch",
            "/predicate/decision",
            (
                "decision 'promotion_authorized' states true; summary.json's decision: false "
                "(and 1 more)"
            ),
        )
    ]
    assert forged(lambda p: p.update(campaign_id="2026-01-01-other")) == [
        (
            "statement-mismatch",
            "/predicate/campaign_id",
            f'names campaign "2026-01-01-other", the folder {public.name!r}',
        )
    ]
    assert forged(lambda p: p.pop("decision")) == [
        (
            "statement-mismatch",
            "/predicate/decision",
            "states null; summary.json's decision: " + _compact(decision)[:77] + "...",
        )
    ]


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def test_refusals_write_nothing(raw: Path, tmp_path: Path, cli: CliRun) -> None:
    (raw / "core.bin").write_bytes(b"\x00\xff\xfe binary")
    forge_seal(raw)
    status, _, err = cli("publish", str(raw), "--out", str(tmp_path / "public"))
    assert status == 1
    assert "core.bin: not UTF-8 text" in err
    assert not (tmp_path / "public" / raw.name).exists()
    assert not any((tmp_path / "public").glob(".*"))
    (raw / "core.bin").unlink()
    first = read_json(raw / "run-plan.json")
    write_json(raw / "a.json", {"schema": "x", "ref": {"path": "b.json", "sha256": "0" * 64}})
    write_json(raw / "b.json", {"schema": "x", "ref": {"path": "a.json", "sha256": "0" * 64}})
    forge_seal(raw)
    with pytest.raises(PublishError, match="reference cycle"):
        publish(raw, tmp_path / "public")
    assert read_json(raw / "run-plan.json") == first


def test_an_unwritable_map_is_one_line_and_publishes_nothing(
    raw: Path, tmp_path: Path, cli: CliRun
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    status, _, err = cli(
        "publish", str(raw), "--out", str(tmp_path / "public"), "--map", str(blocker / "map.json")
    )
    assert status == 2
    assert err.startswith("error: ") and err.count("\n") == 1
    assert "Traceback" not in err
    # The private map is written before the public tree is put in place.
    assert not (tmp_path / "public" / raw.name).exists()


def test_a_file_changed_between_its_two_reads_is_refused(
    raw: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Publish reads each file twice (its references first, then to sanitize it): a file
    that changes in between is refused, not published with the digest of other bytes."""
    from ledger.publication import _publish as module

    first_pass = module._kind
    cell = next(raw.glob("*/capacity/*.json"))
    rel = cell.relative_to(raw).as_posix()

    def kind_then_edit(name: str, data: bytes) -> str:
        if name == rel:
            # The same length: only the digest can tell.
            edited = data.replace(b'"complete"', b'"c0mplete"', 1)
            assert len(edited) == len(data) and edited != data
            cell.write_bytes(edited)
        return first_pass(name, data)

    monkeypatch.setattr(module, "_kind", kind_then_edit)
    with pytest.raises(PublishError, match=f"^{rel}: changed while it was being published$"):
        publish(raw, tmp_path / "public")
    assert not (tmp_path / "public").exists()
    assert not list(raw.parent.glob("*.publish-map.json"))


def _grown(raw: Path, folder: Path, copies: int) -> Path:
    """The raw campaign with ``copies`` copies of one capacity cell's file beside it, each
    about 400 KB, resealed."""
    target = folder / raw.name
    shutil.copytree(raw, target)
    cell = cells.load(next(raw.glob("*/capacity/*.json")))
    cell["requests"] = cell["requests"] * (1 + 400_000 // len(str(cell["requests"])))
    (target / "extra").mkdir()
    for i in range(copies):
        write_json(target / f"extra/copy-{i:03}.json", cell)
    forge_seal(target)
    return target


def test_publish_holds_one_file_at_a_time_not_the_campaign(raw: Path, tmp_path: Path) -> None:
    """Memory follows the largest file, not the campaign: eight times the files, the same
    peak of Python allocations (tracemalloc)."""
    import tracemalloc

    peaks = []
    for copies in (4, 32):
        grown = _grown(raw, tmp_path / f"raw{copies}", copies)
        tracemalloc.start()
        try:
            published = publish(grown, tmp_path / f"public{copies}")
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        assert published.artifacts == 16 + copies
    # Holding every parsed document, as publish did, the second peak was 1.7 times the
    # first (each parsed copy holds about 1.7 MB); one file at a time, they are equal.
    assert peaks[1] < 1.1 * peaks[0], peaks


def test_the_statement_carries_the_summary_s_decision(raw: Path, tmp_path: Path) -> None:
    decision = {"promotion_authorized": False, "labels": ["matched-ab-missing"]}
    write_json(raw / "summary.json", {"campaign_id": raw.name, "decision": decision})
    forge_seal(raw)
    published = publish(raw, tmp_path / "public")
    statement = read_json(published.folder / intoto.STATEMENT_NAME)
    assert statement["predicate"]["decision"] == decision


def test_a_refusal_never_quotes_the_secret(raw: Path, tmp_path: Path) -> None:
    """Names and parser messages are shown as the publication would show them."""
    token = SECRETS["hf"]
    folder = raw / token
    folder.mkdir()
    (folder / "a.log").write_text("hi\n")
    forge_seal(raw)
    with pytest.raises(PublishError) as refused:
        publish(raw, tmp_path / "public")
    assert token not in str(refused.value)
    assert str(refused.value).startswith(
        "<redacted:credential>/a.log: the name holds private data (credential)"
    )
    shutil.rmtree(folder)
    (raw / "keys.json").write_text(f'{{"{token}": 1, "{token}": 2}}')
    forge_seal(raw)
    with pytest.raises(PublishError, match=r"^keys\.json: .*duplicate key") as refused:
        publish(raw, tmp_path / "public")
    assert token not in str(refused.value)
    assert not (tmp_path / "public").exists()


def test_two_keys_that_are_one_once_redacted_are_refused(
    raw: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Publishing either would lose the other's value. A new value is numbered past the
    placeholders a campaign holds, so both keys are kept; a sanitizer that did not, would
    be refused rather than lose one."""
    write_json(raw / "notes.json", {"paths": {"/home/alice/a": 1, "<redacted:path:1>/a": 2}})
    forge_seal(raw)
    public = publish(raw, tmp_path / "kept", digest_map=tmp_path / "kept.map.json").folder
    assert read_json(public / "notes.json")["paths"] == {
        "<redacted:path:1>/a": 2,
        "<redacted:path:2>/a": 1,
    }
    monkeypatch.setattr(Sanitizer, "reserve", lambda self, text: None)
    with pytest.raises(PublishError) as refused:
        publish(raw, tmp_path / "public")
    assert str(refused.value) == (
        "notes.json#/paths/<redacted:path:1>~1a: two keys are the same once redacted"
    )
    assert not (tmp_path / "public").exists()


def test_references_anywhere_and_however_spelled_are_rewritten(raw: Path, tmp_path: Path) -> None:
    """A referencing document in a sub-folder, and one whose keys are spelled with \\u
    escapes (the cheap filter must not skip it), both get the public digests."""
    cell = next(raw.glob("*/capacity/*.json")).relative_to(raw).as_posix()
    digest = sha256_file(raw / cell)[0]
    (raw / "notes").mkdir()
    write_json(raw / "notes/plain.json", {"see": {"path": cell, "sha256": digest}})
    escaped = json.dumps({"see": {"path": cell, "sha256": digest}})
    escaped = escaped.replace('"path"', '"p\\u0061th"').replace('"sha256"', '"sha\\u0032\\u00356"')
    (raw / "notes/escaped.json").write_text(escaped)
    forge_seal(raw)
    published = publish(raw, tmp_path / "public")
    public_digest = sha256_file(published.folder / cell)[0]
    assert public_digest != digest  # the cell held secrets: its public bytes differ
    for name in ("plain", "escaped"):
        assert read_json(published.folder / f"notes/{name}.json")["see"] == {
            "path": cell,
            "sha256": public_digest,
        }


def test_a_report_of_the_raw_campaign_stays_behind(raw: Path, tmp_path: Path, cli: CliRun) -> None:
    """Its evidence index and charts name the raw digests, which confirm a guessed redacted
    value: the publication carries none of it, and a report of the publication names the
    published digests."""
    derived = (
        "derive",
        str(raw),
        "--baseline",
        "windows",
        "--candidate",
        "linux",
        "--differs",
        "os",
    )
    assert cli(*derived)[0] == 0
    assert cli("decide", str(raw))[0] == 0
    status, _, err = cli("report", str(raw), "--format", "md", "--format", "html")
    assert status == 0, err
    reports = sorted(
        p.relative_to(raw).as_posix()
        for p in raw.rglob("*")
        if p.is_file() and (p.name.startswith("report.") or p.parent.name == "report")
    )
    assert "report.md" in reports and "report.html" in reports and len(reports) > 2
    status, out, err = cli("publish", str(raw), "--out", str(tmp_path / "public"))
    assert status == 0, err
    public = tmp_path / "public" / raw.name
    assert out.splitlines()[1] == (
        f"  left out: the raw campaign's report ({len(reports)} files; it names raw digests); "
        f"run ledger report {public}"
    )
    assert not any((public / rel).exists() for rel in reports)
    mapping = read_json(tmp_path / "raw" / f"{raw.name}.publish-map.json")
    changed = {a["raw_sha256"] for a in mapping["artifacts"]} - {
        a["public_sha256"] for a in mapping["artifacts"]
    }
    assert changed and not any(d.encode() in _everything(public) for d in changed)
    status, _, err = cli("report", str(public))
    assert status == 0, err
    index = (public / "report.md").read_text()
    for artifact in mapping["artifacts"]:
        if artifact["raw_sha256"] != artifact["public_sha256"]:
            assert artifact["public_sha256"] in index and artifact["raw_sha256"] not in index


def test_a_sealed_folder_whose_name_is_no_campaign_id_is_named_as_such(
    raw: Path, tmp_path: Path, cli: CliRun
) -> None:
    renamed = raw.parent / raw.name.upper()
    raw.rename(renamed)
    status, _, err = cli("publish", str(renamed), "--out", str(tmp_path / "public"))
    assert status == 2
    assert err == (
        f"error: {renamed}: {renamed.name!r} is no campaign id (YYYY-MM-DD, then lower-case "
        "words joined by '-'); rename the folder\n"
    )
    assert not (tmp_path / "public").exists()


def test_a_numeric_secret_is_redacted_and_caught_if_pasted_afterwards(
    raw: Path, tmp_path: Path, cli: CliRun
) -> None:
    path = "linux/capacity/ctx256-c1-nothink.json"
    document = read_json(raw / path)
    document["identity"]["environment"]["ADMIN_API_KEY"] = 12345678901234
    write_json(raw / path, document)
    run_manifest = read_json(raw / "run-manifest.json")
    for cell in run_manifest["cells"]:
        cell["artifact"]["sha256"] = sha256_file(raw / cell["artifact"]["path"])[0]
    write_json(raw / "run-manifest.json", run_manifest)
    forge_seal(raw)
    public = publish(raw, tmp_path / "public").folder
    environment = read_json(public / path)["identity"]["environment"]
    assert environment["ADMIN_API_KEY"].startswith("<redacted:credential:")
    assert b"12345678901234" not in _everything(public)
    published = read_json(public / path)
    published["identity"]["environment"]["ADMIN_API_KEY"] = 98765432109876
    write_json(public / path, published)
    forge_seal(public)
    status, report = verify_json(cli, public)
    assert status == 1
    assert ("private-data", "/identity/environment/ADMIN_API_KEY") in [
        (f["code"], f["pointer"]) for f in report["findings"]
    ]


@pytest.mark.parametrize("name", ["requests.jsonl", "events.ndjson"])
def test_json_lines_are_published_without_the_secrets_their_escapes_hide(
    raw: Path, tmp_path: Path, cli: CliRun, name: str
) -> None:
    lines = '{"api\\u005fkey": "plainsecretvalue30"}\n{"base_url": "http://10\\u002e0.0.5:8001"}\n'
    (raw / name).write_text(lines)
    forge_seal(raw)
    public = publish(raw, tmp_path / "public").folder
    published = (public / name).read_text()
    assert "plainsecretvalue30" not in published and "u002e0.0.5" not in published
    assert json.loads(published.split("\n")[0])["api_key"].startswith("<redacted:credential:")
    assert cli("verify", str(public))[0] == 0
    # Pasted back afterwards, the escaped secret is caught by verify.
    (public / name).write_text(lines)
    forge_seal(public)
    status, report = verify_json(cli, public)
    assert status == 1
    assert [f["message"] for f in report["findings"] if f["code"] == "private-data"] == [
        "line 1 at /api_key: credential in a public file",
        "line 2 at /base_url: endpoint in a public file",
    ]


def test_verify_public_holds_a_publication_whose_statement_was_deleted(
    raw: Path, tmp_path: Path, cli: CliRun
) -> None:
    public = publish(raw, tmp_path / "public").folder
    whole = tmp_path / "whole" / public.name
    shutil.copytree(public, whole)
    # Deleted with its seal entry and re-sealed, the statement no longer says "published":
    # the folder reads as a raw run's, whose files plain verify does not scan.
    (public / "statement.intoto.json").unlink()
    seal = read_json(public / "manifest.json")
    seal.pop("seals")
    write_json(public / "manifest.json", seal)
    (public / "notes.md").write_text(f"ask {SECRETS['openai']} at {SECRETS['endpoint']}\n")
    (public / f"{SECRETS['hf']}.txt").write_text("named\n")
    forge_seal(public)
    status, report = verify_json(cli, public)
    codes = {f["code"] for f in report["findings"]}
    assert status == 0 and "private-data" not in codes
    status, report = verify_json(cli, "--public", public)
    assert status == 1
    assert {"not-published", "private-data"} <= {f["code"] for f in report["findings"]}
    assert [
        (f["path"], f["message"]) for f in report["findings"] if f["code"] == "private-data"
    ] == [
        (f"{public}/<redacted:credential>.txt", "credential in a public file name"),
        # The manifest lists the file by that name.
        (f"{public}/manifest.json", "credential in a public artifact"),
        (f"{public}/notes.md", "line 1: credential in a public file"),
        (f"{public}/notes.md", "line 1: endpoint in a public file"),
    ]
    # A publication left whole passes --public.
    assert cli("verify", "--public", str(whole))[0] == 0


def test_withheld_reasons_and_reviewed_paths_are_sanitized(raw: Path, tmp_path: Path) -> None:
    """The manifest a publication carries holds the operator's words and the raw files'
    names: a reason given to `seal --reason`, a withheld file's name, and the names a
    review of the raw folder recorded (a file since deleted cannot be renamed)."""
    token = "ghp_" + "R" * 36
    named = "ghp_" + "N" * 36
    (raw / f"{named}.log").write_text("added after the seal\n")
    manifest.seal(raw, reseal_after_review=True, jobs=1)
    (raw / f"{named}.log").unlink()
    (raw / "private.txt").write_text("kept back\n")
    manifest.seal(
        raw,
        withhold=["private.txt", f"{token}.json"],
        reason=f"operator box {SECRETS['endpoint']} password=hunter2x {token}",
        reseal_after_review=True,
        jobs=1,
    )
    public = publish(raw, tmp_path / "public").folder
    text = (public / manifest.MANIFEST_NAME).read_text()
    for value in (token, named, SECRETS["endpoint"], "hunter2x"):
        assert value not in text
    sealed = manifest.read_manifest(public / manifest.MANIFEST_NAME)
    placeholder = re.compile(r"<redacted:credential:[0-9]+>")
    withheld = sorted(w.path for w in sealed.withheld)
    assert withheld[1] == "private.txt" and placeholder.fullmatch(withheld[0][: -len(".json")])
    assert all(w.reason.startswith("operator box <redacted:endpoint:") for w in sealed.withheld)
    paths = [c.path for r in sealed.reviews for c in r.changes]
    assert any(placeholder.fullmatch(p[: -len(".log")]) for p in paths if p.endswith(".log"))


def test_verify_public_scans_the_manifest_and_statement(
    raw: Path, tmp_path: Path, cli: CliRun
) -> None:
    public = publish(raw, tmp_path / "public").folder
    status, report = verify_json(cli, "--public", public)
    assert status == 0, report["findings"]
    sealed = read_json(public / manifest.MANIFEST_NAME)
    sealed["withheld"] = [{"path": "x.json", "reason": f"see {SECRETS['hf']}"}]
    write_json(public / manifest.MANIFEST_NAME, sealed)
    statement = read_json(public / intoto.STATEMENT_NAME)
    statement["predicate"]["note"] = f"ask {SECRETS['endpoint']}"
    write_json(public / intoto.STATEMENT_NAME, statement)
    status, report = verify_json(cli, "--public", public)
    found = {
        (f["path"].rsplit("/", 1)[-1], f["pointer"], f["message"])
        for f in report["findings"]
        if f["code"] == "private-data"
    }
    # Private data in the manifest is a finding of its own: what the manifest declares is
    # still read and checked (the withheld file is reported).
    assert ("withheld-artifact", "manifest.json") in {
        (f["code"], f["path"].rsplit("/", 1)[-1]) for f in report["findings"]
    }
    assert status == 1
    # The statement is read as text, as signatures are: its finding is by line.
    line = next(m for path, _, m in found if path == intoto.STATEMENT_NAME)
    assert line.startswith("line ") and line.endswith(": endpoint in a public file")
    assert found == {
        ("manifest.json", "/withheld/0/reason", "credential in a public artifact"),
        (intoto.STATEMENT_NAME, "", line),
    }


def _numbers(text: str, category: str) -> list[int]:
    return [int(n) for n in re.findall(rf"<redacted:{category}:([0-9]+)>", text)]


@pytest.mark.parametrize(
    ("name", "earlier"),
    [
        # Sorted first, so published first; a placeholder a later file holds is reserved.
        ("zz-notes.md", "sanitized before: <redacted:credential:1>, <redacted:credential:4>\n"),
        ("zz-notes.json", '{"note": "sanitized before: <redacted:credential:4>"}'),
        # Written with an escape, a placeholder is one once decoded.
        ("zz-notes.json", '{"note": "\\u003credacted:credential:4>"}'),
        ("zz-notes.jsonl", '{"note": "\\u003credacted:credential:4>"}\n'),
    ],
)
def test_a_new_value_is_numbered_past_the_placeholders_a_campaign_holds(
    raw: Path, tmp_path: Path, name: str, earlier: str
) -> None:
    """A file sanitized before (re-published, or imported from a tool that redacts as we
    do) holds placeholders: a new value given one of their numbers would read as that
    value wherever both appear."""
    (raw / name).write_text(earlier)
    forge_seal(raw)
    public = publish(raw, tmp_path / "public").folder
    log = (public / "serve.log").read_text()
    assert _numbers(log, "credential") and min(_numbers(log, "credential")) == 5
    assert "credential:4>" in (public / name).read_text().replace("\\u003c", "<")


def test_placeholders_in_withheld_reasons_and_names_are_reserved(raw: Path, tmp_path: Path) -> None:
    # A review records the name of a file added, then deleted.
    (raw / "<redacted:credential:6>.log").write_text("added after the seal\n")
    manifest.seal(raw, reseal_after_review=True, jobs=1)
    (raw / "<redacted:credential:6>.log").unlink()
    (raw / "private.txt").write_text("kept back\n")
    manifest.seal(
        raw, withhold=["private.txt"], reason="see <redacted:gpu:7>", reseal_after_review=True
    )
    (raw / "<redacted:endpoint:9>.md").write_text("named by a placeholder\n")
    forge_seal(raw)
    public = publish(raw, tmp_path / "public").folder
    text = _everything(public).decode()
    # Each set as it is: new values from one past the old, none given an old one's number.
    assert set(_numbers(text, "credential")) == {6, 7, 8}
    assert set(_numbers(text, "gpu")) == {7, 8}
    assert set(_numbers(text, "endpoint")) == {9, 10, 11}
    # Untouched where they were.
    assert (public / "<redacted:endpoint:9>.md").exists()
    reasons = [w.reason for w in manifest.read_manifest(public / "manifest.json").withheld]
    assert reasons == ["see <redacted:gpu:7>"]


def _new_credentials(public: Path) -> list[int]:
    return _numbers((public / "serve.log").read_text(), "credential")


def test_a_withheld_file_s_name_is_reserved(raw: Path, tmp_path: Path) -> None:
    (raw / "<redacted:credential:6>.txt").write_text("kept back\n")
    manifest.seal(
        raw, withhold=["<redacted:credential:6>.txt"], reason="private", check=False, jobs=1
    )
    forge_seal(raw)
    assert min(_new_credentials(publish(raw, tmp_path / "public").folder)) == 7


def test_every_name_a_review_records_is_reserved_the_pending_one_too(
    raw: Path, tmp_path: Path
) -> None:
    # Recorded: two files added, the second then deleted.
    (raw / "a.log").write_text("added\n")
    (raw / "z<redacted:credential:6>.log").write_text("added\n")
    manifest.seal(raw, reseal_after_review=True, jobs=1)
    (raw / "z<redacted:credential:6>.log").unlink()
    forge_seal(raw)
    # Pending: a file deleted since the seal, reviewed by this publish.
    (raw / "<redacted:gpu:4>.log").write_text("added\n")
    forge_seal(raw)
    (raw / "<redacted:gpu:4>.log").unlink()
    public = publish(raw, tmp_path / "public", reseal_after_review=True).folder
    log = (public / "serve.log").read_text()
    assert min(_numbers(log, "credential")) == 7
    assert _numbers(log, "gpu") == [5]


def test_a_placeholder_beside_escapes_and_in_a_bundle_is_reserved(
    raw: Path, tmp_path: Path
) -> None:
    # An escape elsewhere in the text does not stop its placeholders being read as written.
    (raw / "zz-notes.md").write_text("C:\\users\\u1 sanitized before: <redacted:path:4>\n")
    (raw / "notes").mkdir()
    bundle = {
        "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
        "note": "<redacted:credential:6>",
    }
    (raw / "notes" / "x.sigstore.json").write_text(json.dumps(bundle))
    forge_seal(raw)
    public = publish(raw, tmp_path / "public").folder
    assert min(_new_credentials(public)) == 7
    assert "<redacted:path:5>/.cache" in (public / "serve.log").read_text()
    assert json.loads((public / "notes" / "x.sigstore.json").read_text()) == bundle


def test_json_lines_hiding_a_secret_in_escapes_are_refused_or_rewritten(
    raw: Path, tmp_path: Path, cli: CliRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A line that is a JSON string is rewritten as JSON; one that is not strict JSON
    (a NaN, as Python's json writes) is not rewritten as JSON, and the secret its escapes
    spell is redacted where its characters are (rules v1 refused it)."""
    (raw / "out.jsonl").write_text('"\\u0070assword=hunter2secret"\n')
    forge_seal(raw)
    public = publish(raw, tmp_path / "public").folder
    line = (public / "out.jsonl").read_text().split("\n")[0]
    assert "hunter2secret" not in json.loads(line)
    (raw / "out.jsonl").write_text('{"a": NaN, "k": "\\u0070assword=hunter2secret"}\n')
    forge_seal(raw)
    # Rules v2 read the escapes of any text: the secret they spell is redacted in place.
    again = publish(raw, tmp_path / "again", digest_map=tmp_path / "again.map.json").folder
    assert re.fullmatch(
        r'\{"a": NaN, "k": "\\u0070assword=<redacted:credential:[0-9]+>"\}\n',
        (again / "out.jsonl").read_text(),
    )
    # Rules v1 did not, and refused it rather than publish it.
    monkeypatch.setattr(publish_module, "load_rules", lambda: load_rules(rules_file("1")))
    (raw / "out.jsonl").write_text('{"a": NaN, "k": "\\u0070assword=hunter2secret"}\n')
    with pytest.raises(PublishError) as refused:
        publish(raw, tmp_path / "v1", digest_map=tmp_path / "v1.map.json")
    assert str(refused.value) == (
        "out.jsonl: line 1: credential written with JSON escapes still present after sanitizing"
    )
    assert not (tmp_path / "v1").exists()
    # Pasted into a publication, verify --public finds it: in the text, and in the JSON.
    (public / "out.jsonl").write_text('{"a": NaN, "k": "\\u0070assword=hunter2secret"}\n')
    forge_seal(public)
    status, report = verify_json(cli, "--public", public)
    assert status == 1
    assert [f["message"] for f in report["findings"] if f["code"] == "private-data"] == [
        "line 1: credential written with JSON escapes in a public file"
    ]


def test_publish_run_from_inside_the_campaign_places_the_map_beside_it(
    raw: Path, tmp_path: Path, cli: CliRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ledger publish .`` was refused: the map's default place was beside ".", inside."""
    monkeypatch.chdir(raw)
    status, out, err = cli("publish", ".", "--out", str(tmp_path / "public"))
    assert status == 0, err
    beside = raw.parent / f"{raw.name}.publish-map.json"
    assert beside.is_file() and f"private map {beside}" in out
    assert not (raw / f"{raw.name}.publish-map.json").exists()
    assert (tmp_path / "public" / raw.name / "statement.intoto.json").is_file()
