"""Sigstore bundles verified offline against pinned roots; audits of published campaigns."""

from __future__ import annotations

import base64
import functools
import json
import shutil
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ledger.evidence import manifest
from ledger.formats.jsonio import write_json
from ledger.publication._publish import publish
from ledger.signatures import _intoto as intoto
from runners.publication import AuditInputError, audit
from tests.conftest import DATA, CliRun, forge_seal

SIGSTORE = DATA / "sigstore"
STAGING = SIGSTORE / "staging_trusted_root.embedded-4.5.1.json"
PRODUCTION = SIGSTORE / "production_trusted_root.embedded-4.5.1.json"
GITHUB = "https://github.com/login/oauth"
BEACON = (
    "https://github.com/sigstore-conformance/extremely-dangerous-public-oidc-beacon/"
    ".github/workflows/extremely-dangerous-oidc-beacon.yml@refs/heads/main"
)
ACTIONS = "https://token.actions.githubusercontent.com"


def _verify(
    cli: CliRun, file: Path, bundle: Path, identity: str, issuer: str, *root: str
) -> tuple[int, str]:
    status, out, err = cli(
        "signature",
        "verify",
        str(file),
        "--bundle",
        str(bundle),
        "--identity",
        identity,
        "--issuer",
        issuer,
        *root,
    )
    return status, out + err


def test_message_signature_bundles(cli: CliRun, tmp_path: Path) -> None:
    v3, v3_bundle = SIGSTORE / "bundle_v3.txt", SIGSTORE / "bundle_v3.txt.sigstore"
    status, out = _verify(
        cli, v3, v3_bundle, "william@yossarian.net", GITHUB, "--trusted-root", str(STAGING)
    )
    assert status == 0 and out.startswith("OK:")
    # The staging root pinned in the package is the same one.
    assert _verify(cli, v3, v3_bundle, "william@yossarian.net", GITHUB, "--staging")[0] == 0
    rekor2 = SIGSTORE / "staging-rekor-v2.txt"
    assert (
        _verify(
            cli,
            rekor2,
            SIGSTORE / "staging-rekor-v2.txt.sigstore.json",
            "jku@goto.fi",
            GITHUB,
            "--staging",
        )[0]
        == 0
    )
    status, out = _verify(cli, v3, v3_bundle, "mallory@example.com", GITHUB, "--staging")
    assert status == 1 and "SANs do not match" in out
    status, out = _verify(
        cli, v3, v3_bundle, "william@yossarian.net", "https://accounts.google.com", "--staging"
    )
    assert status == 1
    status, out = _verify(
        cli, v3, v3_bundle, "william@yossarian.net", GITHUB, "--trusted-root", str(PRODUCTION)
    )
    assert status == 1
    # The production root is the default; this staging bundle does not verify against it.
    assert _verify(cli, v3, v3_bundle, "william@yossarian.net", GITHUB)[0] == 1
    changed = tmp_path / "bundle_v3.txt"
    data = bytearray(v3.read_bytes())
    data[0] ^= 1
    changed.write_bytes(bytes(data))
    assert _verify(cli, changed, v3_bundle, "william@yossarian.net", GITHUB, "--staging")[0] == 1


def test_dsse_bundle_with_a_subject_that_does_not_match(cli: CliRun) -> None:
    status, out = _verify(
        cli,
        SIGSTORE / "a.txt",
        SIGSTORE / "a.dsse.staging-rekor-v2.txt.sigstore.json",
        BEACON,
        ACTIONS,
        "--staging",
    )
    assert status == 1
    assert "signature is valid but no subject matches the file" in out
    assert "e248a5db" in out and "a0cfc712" in out


def test_unusable_inputs_exit_2(cli: CliRun, tmp_path: Path) -> None:
    broken = tmp_path / "broken.sigstore.json"
    broken.write_text("{not json")
    v3 = SIGSTORE / "bundle_v3.txt"
    assert _verify(cli, v3, broken, "a", "b", "--staging")[0] == 2
    assert (
        _verify(cli, tmp_path / "missing.txt", SIGSTORE / "bundle_v3.txt.sigstore", "a", "b")[0]
        == 2
    )
    bad_root = tmp_path / "root.json"
    bad_root.write_text("{}")
    assert (
        _verify(
            cli, v3, SIGSTORE / "bundle_v3.txt.sigstore", "a", "b", "--trusted-root", str(bad_root)
        )[0]
        == 2
    )


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def served(tmp_path: Path, two_arm_campaign: Path) -> Iterator[tuple[Path, str]]:
    """A published campaign carrying the real DSSE statement and bundle, over HTTP."""
    raw = tmp_path / "raw" / two_arm_campaign.name
    shutil.copytree(two_arm_campaign, raw)
    shutil.copy(SIGSTORE / "a.txt", raw / "a.txt")
    forge_seal(raw)
    public = publish(raw, tmp_path / "public").folder
    bundle = SIGSTORE / "a.dsse.staging-rekor-v2.txt.sigstore.json"
    # The bundle's signed payload is its statement: publish that statement with it.
    envelope = json.loads(bundle.read_text())["dsseEnvelope"]
    write_json(public / intoto.STATEMENT_NAME, json.loads(base64.b64decode(envelope["payload"])))
    shutil.copy(bundle, public / intoto.BUNDLE_NAME)
    # Its line of SHA256SUMS too, so that the statement's subjects are what differs.
    sums = public / manifest.SUMS_NAME
    data = (public / intoto.STATEMENT_NAME).read_bytes()
    sums.write_bytes(manifest.sums_adding(sums.read_bytes(), {intoto.STATEMENT_NAME: data}))
    handler = functools.partial(_Quiet, directory=str(public))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield public, f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()


def test_audit_over_http_rejects_the_mismatched_subject(served: tuple[Path, str]) -> None:
    _, url = served
    result = audit(url, identity=BEACON, issuer=ACTIONS, staging=True)
    assert not result.ok
    # The signature is genuine and carries exactly the published statement...
    assert not any(p.startswith("signature:") for p in result.problems)
    # ...but its one subject's digest is not the file's: rejected, as sigstore alone would not.
    assert (
        "subject 'a.txt': sha256 e248a5db4933dba6578200238c91a57f5e65b925b73050ae786933468b7ac101, "
        "the statement says a0cfc71271d6e278e57cd332ff957c3f7043fdda354c4cbb190a30d56efa01bf"
    ) in result.problems
    assert result.report is not None
    # Everything except the statement passes every verify check.
    errors = {f.code for f in result.report.findings if f.severity == "error"}
    assert errors == {"statement-mismatch"}


def test_audit_rejects_a_wrong_identity(served: tuple[Path, str], cli: CliRun) -> None:
    _, url = served
    status, out, err = cli(
        "audit", url, "--identity", "someone@example.com", "--issuer", ACTIONS, "--staging"
    )
    assert status == 1
    assert out.splitlines()[0].startswith("signature: ")
    assert err.strip() == "FAIL"


def test_audit_rejects_a_tampered_file(served: tuple[Path, str]) -> None:
    public, url = served
    path = public / "run-plan.json"
    path.write_bytes(path.read_bytes().replace(b'"seed": 11', b'"seed": 12'))
    result = audit(url, identity=BEACON, issuer=ACTIONS, staging=True)
    assert any(
        p.startswith("verify: hash-mismatch") and "run-plan.json" in p for p in result.problems
    )


def test_audit_of_a_folder_and_unusable_sources(
    served: tuple[Path, str], cli: CliRun, tmp_path: Path
) -> None:
    public, _ = served
    result = audit(str(public), identity=BEACON, issuer=ACTIONS, staging=True)
    assert any(p.startswith("subject 'a.txt'") for p in result.problems)
    status, _, err = cli("audit", str(tmp_path / "nothing"), "--identity", "a", "--issuer", "b")
    assert status == 2
    assert f"{tmp_path / 'nothing'}: no such folder, and not an http(s) URL" in err
    status, _, err = cli("audit", "http://127.0.0.1:9/x", "--identity", "a", "--issuer", "b")
    assert status == 2


def test_audit_refuses_a_redirect_to_another_host(tmp_path: Path) -> None:
    class Redirect(SimpleHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(302)
            self.send_header(
                "Location", f"http://localhost:{self.server.server_address[1]}/manifest.json"
            )
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(AuditInputError, match=r"redirect to http://localhost:.* refused"):
            audit(f"http://127.0.0.1:{server.server_address[1]}/", identity="a", issuer="b")
    finally:
        server.shutdown()
