"""``ledger sign`` against a private sigstore instance, then ``ledger audit`` of the signed
campaign over real HTTP on 127.0.0.1 and from a folder.

The instance (``tests/private_sigstore.py``) is served over HTTP as Fulcio and Rekor v1;
sigstore-python's own signer talks to it, and its own verifier checks the bundle against
the instance's trusted root. Nothing is signed in-process.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from ledger.evidence import manifest
from tests.conftest import ROOT, CliRun, forge_seal
from tests.private_sigstore import OIDC_ISSUER, SigstoreService

PUBLISHED = "2026-11-29-simulated-example"
OTHER = "2026-09-17-glm53-mixed35-startup"
SIGNER = "publisher@example.org"


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two campaigns of evidence/ signed by SIGNER with `ledger sign`, and the root."""
    from ledger.cli._main import main

    base = tmp_path_factory.mktemp("signed")
    with SigstoreService() as service:
        config = service.write_trust_config(base / "trust-config.json")
        for name in (PUBLISHED, OTHER):
            shutil.copytree(ROOT / "evidence" / name, base / name)
            before = json.loads((base / name / manifest.MANIFEST_NAME).read_bytes())
            status = main(
                [
                    "sign",
                    str(base / name),
                    "--identity-token",
                    service.token(SIGNER),
                    "--trust-config",
                    str(config),
                    # evidence/ is signed already, by the repository's own instance.
                    "--replace",
                ]
            )
            assert status == 0
            after = json.loads((base / name / manifest.MANIFEST_NAME).read_bytes())
            assert after["seals"] == [manifest.STATEMENT_NAME, manifest.BUNDLE_NAME]
            assert after["artifacts"] == before["artifacts"]
        # Fulcio issued one certificate per signing, and Rekor logged one entry each.
        assert service.requests == ["/api/v2/signingCert", "/api/v1/log/entries"] * 2
        assert len(service.log.leaves) == 2
    root = base / "trusted_root.json"
    root.write_text(json.dumps(service.instance.trusted_root()))
    return base, root


class _Site(BaseHTTPRequestHandler):
    """``/<mode>/<campaign>/<file>`` from the site folder; the mode says how to misbehave."""

    site: Path

    def do_GET(self) -> None:
        # The audit hangs up on a misbehaving answer, as it should.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._answer()

    def _answer(self) -> None:
        _, mode, rest = self.path.split("/", 2)
        path = self.site / rest
        port = self.server.server_address[1]
        moved = {
            "redirect": f"http://localhost:{port}/plain/{rest}",
            "redirect-scheme": f"https://127.0.0.1:{port}/plain/{rest}",
            "redirect-same-host": f"/plain/{rest}",
        }
        if mode in moved:
            self.send_response(302)
            self.send_header("Location", moved[mode])
            self.end_headers()
            return
        if mode == "no-bundle" and path.name == manifest.BUNDLE_NAME:
            self.send_error(404)
            return
        if not path.is_file():
            self.send_error(404)
            return
        data = path.read_bytes()
        edits = ("unsafe-path", "bad-id", "file-and-folder")
        if mode in edits and path.name == manifest.MANIFEST_NAME:
            listed = json.loads(data)
            if mode == "bad-id":
                listed["campaign_id"] = "../../escaped"
            elif mode == "file-and-folder":
                first = listed["artifacts"][0]
                listed["artifacts"] += [{**first, "path": "x"}, {**first, "path": "x/y/z"}]
            else:
                listed["artifacts"][0]["path"] = "../escape.txt"
            self._send(json.dumps(listed).encode())
        elif mode in ("plain", "no-bundle", *edits) or path.name == manifest.MANIFEST_NAME:
            self._send(data)
        elif mode == "declared-huge":
            self.send_response(200)
            self.send_header("Content-Length", str(1 << 40))
            self.end_headers()
        elif mode == "endless":
            # No length: the body ends when the connection does, which is never.
            self.send_response(200)
            self.end_headers()
            chunk = b"0" * (1 << 16)
            # Bounded all the same: were the cap lost, the test fails rather than hangs.
            until = time.monotonic() + 20
            while time.monotonic() < until:
                self.wfile.write(chunk)
        elif mode == "stall":
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[:10])
            self.wfile.flush()
            time.sleep(30)
        elif mode == "trickle":
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            for byte in data[:400]:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(0.05)

    def _send(self, data: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def site(tmp_path: Path, signed: tuple[Path, Path]) -> Iterator[tuple[Path, str]]:
    """A copy of the signed campaigns served over HTTP: (folder, base URL)."""
    base, _ = signed
    folder = tmp_path / "site"
    for name in (PUBLISHED, OTHER):
        shutil.copytree(base / name, folder / name)
    handler = type("Site", (_Site,), {"site": folder})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield folder, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _source(site: tuple[Path, str], how: str, name: str = PUBLISHED) -> str:
    folder, url = site
    return f"{url}/plain/{name}/" if how == "url" else str(folder / name)


def _audit(cli: CliRun, source: str, root: Path, *extra: str, **who: str) -> tuple[int, str, str]:
    return cli(
        "audit",
        source,
        "--identity",
        who.get("identity", SIGNER),
        "--issuer",
        who.get("issuer", OIDC_ISSUER),
        "--trusted-root",
        str(root),
        *extra,
    )


HOW = pytest.mark.parametrize("how", ["url", "dir"])


@HOW
def test_a_signed_campaign_passes_its_audit(
    site: tuple[Path, str], signed: tuple[Path, Path], cli: CliRun, how: str
) -> None:
    status, out, err = _audit(cli, _source(site, how), signed[1])
    assert (status, out, err) == (0, "", "OK\n")


@HOW
def test_one_changed_file_fails_the_audit_and_is_named(
    site: tuple[Path, str], signed: tuple[Path, Path], cli: CliRun, how: str
) -> None:
    report = site[0] / PUBLISHED / "report.md"
    report.write_bytes(report.read_bytes().replace(b"candidate", b"candidatf", 1))
    status, out, err = _audit(cli, _source(site, how), signed[1])
    assert status == 1 and err == "FAIL\n"
    lines = out.splitlines()
    # The signature still holds over the statement; the file is what differs from it.
    assert not any(line.startswith("signature:") for line in lines)
    assert any(line.startswith("subject 'report.md': sha256 ") for line in lines)
    assert any(line.startswith("verify: hash-mismatch") and "report.md" in line for line in lines)
    assert all("report.md" in line for line in lines)


@HOW
@pytest.mark.parametrize(
    "who",
    [{"identity": "someone-else@example.org"}, {"issuer": "https://token.actions.example"}],
    ids=["identity", "issuer"],
)
def test_a_wrong_signer_fails_the_audit(
    site: tuple[Path, str], signed: tuple[Path, Path], cli: CliRun, how: str, who: dict[str, str]
) -> None:
    status, out, err = _audit(cli, _source(site, how), signed[1], **who)
    assert status == 1 and err == "FAIL\n"
    assert out.splitlines()[0].startswith("signature: ")
    assert len(out.splitlines()) == 1


@HOW
def test_a_statement_swapped_for_another_signed_one_fails(
    site: tuple[Path, str], signed: tuple[Path, Path], cli: CliRun, how: str
) -> None:
    folder = site[0]
    for name in (manifest.STATEMENT_NAME, manifest.BUNDLE_NAME):
        shutil.copy(folder / OTHER / name, folder / PUBLISHED / name)
    # The other campaign's own audit passes: the swapped files are genuinely signed.
    assert _audit(cli, _source(site, how, OTHER), signed[1])[0] == 0
    status, out, err = _audit(cli, _source(site, how), signed[1])
    assert status == 1 and err == "FAIL\n"
    lines = out.splitlines()
    assert not any(line.startswith("signature:") for line in lines)
    assert "subject 'summary.json': sha256 " in out
    assert "verify: statement-mismatch" in out


def test_the_wrong_trusted_root_fails(site: tuple[Path, str], cli: CliRun, tmp_path: Path) -> None:
    other = SigstoreService().instance.write_trusted_root(tmp_path / "other-root.json")
    status, out, _ = _audit(cli, _source(site, "url"), other)
    assert status == 1
    assert out.startswith("signature: ")


@pytest.mark.parametrize(
    ("mode", "options", "reason"),
    [
        ("redirect", (), "redirect to http://localhost:"),
        ("redirect-scheme", (), "redirect to https://127.0.0.1:"),
        ("unsafe-path", (), "manifest lists an unsafe path '../escape.txt'"),
        ("bad-id", (), "manifest.json: no valid campaign_id"),
        # No folder holds both: it said "/tmp/ledger-audit-.../x: File exists".
        ("file-and-folder", (), "manifest.json: lists 'x' as a file and as the folder of 'x/y/z'"),
        ("no-bundle", (), "statement.sigstore.json: HTTP 404"),
        ("declared-huge", ("--max-file-mib", "1"), f"{1 << 40} bytes, over the cap of 1048576"),
        ("endless", ("--max-file-mib", "1"), "more than the cap of 1048576 bytes"),
        ("stall", ("--timeout", "0.5"), "no answer for 0.5 s (ReadTimeout)"),
        ("trickle", ("--deadline", "1"), "the fetch took longer than 1 s"),
    ],
)
def test_a_hostile_server_is_refused_in_one_line(
    site: tuple[Path, str],
    signed: tuple[Path, Path],
    cli: CliRun,
    mode: str,
    options: tuple[str, ...],
    reason: str,
) -> None:
    url = f"{site[1]}/{mode}/{PUBLISHED}/"
    started = time.monotonic()
    status, out, err = _audit(cli, url, signed[1], *options)
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("ledger audit: error: ")
    assert reason in err
    # Refused on the limit, not after the server gave up.
    assert time.monotonic() - started < 20


def test_audit_fetches_the_ticket_the_campaign_publishes(
    site: tuple[Path, str], signed: tuple[Path, Path], cli: CliRun
) -> None:
    """The campaign links a follow-up ticket: the copy it publishes is fetched with it,
    so the audit needs no tickets/ folder; without it, --tickets says where one is."""
    folder = site[0] / PUBLISHED
    ticket = next((folder / "tickets").glob("*.md"))
    assert _audit(cli, _source(site, "url"), signed[1])[0] == 0
    elsewhere = site[0].parent / "kept-tickets"
    elsewhere.mkdir()
    shutil.move(ticket, elsewhere / ticket.name)
    status, out, _ = _audit(cli, str(folder), signed[1])
    assert status == 1
    assert "ticket-missing" in out and f"tickets/{ticket.name}" in out
    status, out, _ = _audit(cli, str(folder), signed[1], "--tickets", str(elsewhere))
    # Found beside it now; the copy the statement names is still missing.
    assert "ticket-missing" not in out
    assert f"subject 'tickets/{ticket.name}': no such file" in out


def _tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize(
    ("token", "expected", "exit_status"),
    [
        # A token given that is no usable token is a bad argument (exit 2)...
        (lambda s: s.token(SIGNER, lifetime=-60), "the identity token is not usable: ", 2),
        (lambda s: s.token(SIGNER, audience="other"), "the identity token is not usable: ", 2),
        # ...one well formed but signed by another issuer's key is Fulcio's refusal (1).
        (lambda s: SigstoreService().token(SIGNER), "signing failed: FulcioClientError: ", 1),
    ],
    ids=["expired", "wrong-audience", "forged"],
)
def test_sign_refuses_a_bad_identity_and_writes_nothing(
    tmp_path: Path, cli: CliRun, token: Any, expected: str, exit_status: int
) -> None:
    folder = tmp_path / OTHER
    shutil.copytree(ROOT / "evidence" / OTHER, folder)
    before = _tree(folder)
    with SigstoreService() as service:
        config = service.write_trust_config(tmp_path / "trust-config.json")
        status, out, err = cli(
            "sign",
            str(folder),
            "--identity-token",
            token(service),
            "--trust-config",
            str(config),
            "--replace",
        )
        assert service.log.leaves == []
    assert status == exit_status and out == ""
    assert err.startswith(f"error: {expected}") and err.count("\n") == 1
    assert _tree(folder) == before


def test_sign_refuses_an_unusable_trust_config(tmp_path: Path, cli: CliRun) -> None:
    folder = tmp_path / OTHER
    shutil.copytree(ROOT / "evidence" / OTHER, folder)
    config = tmp_path / "trust-config.json"
    config.write_text('{"mediaType": "nothing"}')
    status, _, err = cli(
        "sign", str(folder), "--identity-token", "x", "--trust-config", str(config), "--replace"
    )
    assert status == 2
    assert err == f"error: {config}: not a sigstore client trust config (ValidationError)\n"
    status, _, err = cli(
        "sign", str(folder), "--trust-config", str(tmp_path / "none.json"), "--replace"
    )
    assert status == 2 and "No such file or directory" in err


def test_sign_refuses_to_replace_a_good_signature_and_renews_a_missing_one(
    tmp_path: Path, cli: CliRun
) -> None:
    folder = tmp_path / OTHER
    shutil.copytree(ROOT / "evidence" / OTHER, folder)
    before = _tree(folder)
    with SigstoreService() as service:
        config = str(service.write_trust_config(tmp_path / "trust-config.json"))
        token = service.token(SIGNER)
        status, out, err = cli(
            "sign", str(folder), "--identity-token", token, "--trust-config", config
        )
        assert status == 2 and out == ""
        assert err == (
            f"error: {folder}/statement.sigstore.json already signs this statement; --replace "
            "to sign it again (the old signature is then lost)\n"
        )
        assert _tree(folder) == before and service.log.leaves == []
        # A deleted bundle is what signing again mends: no review, no --replace.
        (folder / manifest.BUNDLE_NAME).unlink()
        status, out, _ = cli(
            "sign", str(folder), "--identity-token", token, "--trust-config", config
        )
        assert status == 0
        assert out == f"signed: {folder}/statement.sigstore.json (by {SIGNER} ({OIDC_ISSUER}))\n"
        # Any other change still breaks the seal, and a review is recorded when accepted.
        (folder / "summary.json").write_bytes(before["summary.json"] + b" ")
        status, _, err = cli(
            "sign", str(folder), "--identity-token", token, "--trust-config", config
        )
        assert status == 1 and "summary.json (changed)" in err and "--reseal-after-review" in err
        status, _, _ = cli(
            "sign",
            str(folder),
            "--identity-token",
            token,
            "--trust-config",
            config,
            "--reseal-after-review",
        )
        assert status == 0
    sealed = json.loads((folder / manifest.MANIFEST_NAME).read_bytes())
    assert sealed["reviews"][-1]["command"] == "sign"
    assert [c["path"] for c in sealed["reviews"][-1]["changes"]] == ["summary.json"]
    root = tmp_path / "root.json"
    service.instance.write_trusted_root(root)
    assert _audit(cli, str(folder), root)[0] == 0


def test_sign_refuses_a_statement_whose_decision_is_not_the_summary_s(
    tmp_path: Path, cli: CliRun
) -> None:
    folder = tmp_path / OTHER
    shutil.copytree(ROOT / "evidence" / OTHER, folder)
    statement = json.loads((folder / manifest.STATEMENT_NAME).read_bytes())
    assert statement["predicate"]["decision"]["promotion_authorized"] is False
    statement["predicate"]["decision"]["promotion_authorized"] = True
    (folder / manifest.STATEMENT_NAME).write_text(json.dumps(statement))
    forge_seal(folder)
    before = _tree(folder)
    with SigstoreService() as service:
        config = str(service.write_trust_config(tmp_path / "trust-config.json"))
        status, out, err = cli(
            "sign", str(folder), "--identity-token", service.token(SIGNER),
            "--trust-config", config, "--replace",
        )  # fmt: skip
        assert service.log.leaves == []
    assert status == 1 and out == ""
    assert err == (
        f"error: {folder}/statement.intoto.json#/predicate/decision: decision "
        "'promotion_authorized' states true; summary.json's decision: false; the statement is "
        "not signed (publish the campaign again rather than edit its statement)\n"
    )
    assert _tree(folder) == before


def test_a_campaign_without_a_bundle_fails_and_one_without_a_statement_is_refused(
    site: tuple[Path, str], signed: tuple[Path, Path], cli: CliRun, tmp_path: Path
) -> None:
    folder = site[0] / PUBLISHED
    (folder / manifest.BUNDLE_NAME).unlink()
    status, out, _ = _audit(cli, str(folder), signed[1])
    assert status == 1
    lines = out.splitlines()
    assert lines[0] == "signature: no statement.sigstore.json: the campaign is not signed"
    assert any("seal-file-missing" in line for line in lines)
    raw = tmp_path / "2026-01-01-raw"
    raw.mkdir()
    status, out, err = _audit(cli, str(raw), signed[1])
    assert (status, out) == (2, "")
    assert err == (
        f"ledger audit: error: {raw}: no statement.intoto.json: not a published campaign "
        "(ledger publish)\n"
    )


def test_audit_names_the_url_and_never_echoes_credentials(
    site: tuple[Path, str], signed: tuple[Path, Path], cli: CliRun
) -> None:
    report = site[0] / PUBLISHED / "report.md"
    report.write_bytes(report.read_bytes() + b"\n")
    url = _source(site, "url")
    status, out, _ = _audit(cli, url, signed[1])
    assert status == 1
    verify_lines = [line for line in out.splitlines() if line.startswith("verify: ")]
    assert verify_lines and all(line.split(" ", 2)[2].startswith(url) for line in verify_lines)
    assert any(f"{url}manifest.json#/artifacts/" in line for line in verify_lines)
    assert "ledger-audit-" not in out
    secret = url.replace("http://", "http://bob:hunter2@")
    status, out, err = _audit(cli, secret, signed[1])
    assert (status, out) == (2, "")
    assert "hunter2" not in err and "bob" not in err
    assert err.startswith("ledger audit: error: http://<credentials>@127.0.0.1/...: holds")


@pytest.mark.parametrize("option", ["--timeout", "--deadline", "--max-file-mib"])
@pytest.mark.parametrize("value", ["0", "-1", "inf", "nan", "1e10", "soon"])
def test_audit_limits_out_of_range_are_usage_errors(
    site: tuple[Path, str], signed: tuple[Path, Path], cli: CliRun, option: str, value: str
) -> None:
    status, out, err = _audit(cli, _source(site, "url"), signed[1], option, value)
    assert (status, out) == (2, "")
    assert f"argument {option}: " in err and err.count("\n") == 1


def test_signature_verify_of_the_statement_itself(cli: CliRun) -> None:
    """The statement is what the bundle signs: it verifies as the file, whatever it names."""
    from tests.sign_evidence import IDENTITY, TRUST

    def verify(file: Path, campaign: str) -> tuple[int, str]:
        status, out, _ = cli(
            "signature", "verify", str(file),
            "--bundle", str(ROOT / "evidence" / campaign / manifest.BUNDLE_NAME),
            "--identity", IDENTITY, "--issuer", OIDC_ISSUER,
            "--trusted-root", str(TRUST / "trusted_root.json"),
        )  # fmt: skip
        return status, out

    folder = ROOT / "evidence" / OTHER
    status, out = verify(folder / manifest.STATEMENT_NAME, OTHER)
    assert status == 0 and "is the file" in out
    status, out = verify(folder / "follow-up.json", OTHER)
    assert status == 0 and "names the file" in out
    status, out = verify(folder / manifest.MANIFEST_NAME, PUBLISHED)
    assert status == 1 and "the statement names 'manifest.json' with " in out


def test_a_redirect_within_the_host_is_followed(
    site: tuple[Path, str], signed: tuple[Path, Path], cli: CliRun
) -> None:
    status, out, err = _audit(cli, f"{site[1]}/redirect-same-host/{PUBLISHED}/", signed[1])
    assert (status, out, err) == (0, "", "OK\n")


def test_the_whole_campaign_is_capped_too(site: tuple[Path, str], tmp_path: Path) -> None:
    from runners.publication import AuditInputError, FetchLimits, fetch

    folder = site[0] / PUBLISHED
    sizes = [p.stat().st_size for p in folder.rglob("*") if p.is_file()]
    # Every file fits under the cap; all of them together do not.
    limits = FetchLimits(max_file_bytes=max(sizes), max_total_bytes=sum(sizes) - 1)
    with pytest.raises(AuditInputError, match="over the cap of"):
        fetch(_source(site, "url"), tmp_path / "a", limits)
    fetched = fetch(_source(site, "url"), tmp_path / "b", FetchLimits(max_total_bytes=sum(sizes)))
    assert sorted(p.name for p in fetched.rglob("*") if p.is_file()) == sorted(
        p.name for p in folder.rglob("*") if p.is_file()
    )


def test_an_audit_writes_nothing_outside_its_temporary_folder(
    site: tuple[Path, str],
    signed: tuple[Path, Path],
    cli: CliRun,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import tempfile

    # A temporary root of its own: the shared one also holds what other workers' tests
    # are writing at the same moment.
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    for mode in ("unsafe-path", "bad-id"):
        assert _audit(cli, f"{site[1]}/{mode}/{PUBLISHED}/", signed[1])[0] == 2
    assert list(root.iterdir()) == []


def test_sign_writes_a_statement_for_a_campaign_published_before_statements(
    tmp_path: Path, cli: CliRun, two_arm_campaign: Path
) -> None:
    folder = tmp_path / OTHER
    shutil.copytree(ROOT / "evidence" / OTHER, folder)
    for name in (manifest.STATEMENT_NAME, manifest.BUNDLE_NAME):
        (folder / name).unlink()
    manifest.seal(folder, check=False, jobs=1)
    assert "seals" not in json.loads((folder / manifest.MANIFEST_NAME).read_bytes())
    raw = tmp_path / two_arm_campaign.name
    shutil.copytree(two_arm_campaign, raw)
    before = _tree(raw)
    with SigstoreService() as service:
        config = str(service.write_trust_config(tmp_path / "trust-config.json"))
        token = service.token(SIGNER)
        status, _, err = cli("sign", str(raw), "--identity-token", token, "--trust-config", config)
        assert status == 1
        assert err == f"error: {raw}: no statement.intoto.json; publish the campaign first\n"
        assert _tree(raw) == before
        status, _, _ = cli("sign", str(folder), "--identity-token", token, "--trust-config", config)
        assert status == 0
    statement = json.loads((folder / manifest.STATEMENT_NAME).read_bytes())
    summary = json.loads((folder / "summary.json").read_bytes())
    assert statement["predicate"] == {"campaign_id": OTHER, "decision": summary["decision"]}
    sealed = json.loads((folder / manifest.MANIFEST_NAME).read_bytes())
    assert sealed["seals"] == [manifest.STATEMENT_NAME, manifest.BUNDLE_NAME]
    root = tmp_path / "root.json"
    service.instance.write_trusted_root(root)
    assert _audit(cli, str(folder), root) == (0, "", "OK\n")


def test_a_statement_with_no_subjects_fails_the_audit(
    site: tuple[Path, str], signed: tuple[Path, Path], cli: CliRun
) -> None:
    folder = site[0] / PUBLISHED
    statement = json.loads((folder / manifest.STATEMENT_NAME).read_bytes())
    statement["subject"] = []
    data = json.dumps(statement).encode()
    (folder / manifest.STATEMENT_NAME).write_bytes(data)
    sums = folder / manifest.SUMS_NAME
    sums.write_bytes(manifest.sums_adding(sums.read_bytes(), {manifest.STATEMENT_NAME: data}))
    status, out, _ = _audit(cli, str(folder), signed[1])
    assert status == 1
    assert "statement: no subjects" in out.splitlines()


def test_audit_refuses_a_tickets_folder_that_is_not_one(
    site: tuple[Path, str], signed: tuple[Path, Path], cli: CliRun
) -> None:
    nowhere = site[0] / "nowhere"
    status, out, err = _audit(cli, _source(site, "dir"), signed[1], "--tickets", str(nowhere))
    assert (status, out) == (2, "")
    assert err == f"ledger audit: error: --tickets {nowhere}: not a folder\n"
