"""Verify's own check of a campaign's ``statement.sigstore.json``, with no trusted root:
the bundle must sign this very statement, under the certificate it carries.

The campaigns of ``evidence/`` are signed (``tests/sign_evidence.py``); each case edits a
copy of one as someone without the signing key can.
"""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ledger.evidence import manifest
from tests.conftest import ROOT, CliRun, forge_seal, verify_json

SEED = "2026-09-17-glm53-mixed35-startup"


@pytest.fixture
def campaign(tmp_path: Path) -> Path:
    folder = tmp_path / "evidence" / SEED
    shutil.copytree(ROOT / "evidence" / SEED, folder)
    return folder


def _errors(cli: CliRun, folder: Path) -> list[tuple[str, str, str]]:
    status, report = verify_json(cli, folder)
    errors = [
        (f["code"], f["path"].rsplit("/", 1)[-1], f["pointer"])
        for f in report["findings"]
        if f["severity"] == "error"
    ]
    assert (status == 1) == bool(errors)
    return errors


def _bundle(folder: Path) -> dict[str, Any]:
    return json.loads((folder / manifest.BUNDLE_NAME).read_bytes())


def _write_bundle(folder: Path, bundle: Any) -> None:
    """Writes the bundle and its line of SHA256SUMS, as a forger can (neither is signed)."""
    data = json.dumps(bundle).encode()
    (folder / manifest.BUNDLE_NAME).write_bytes(data)
    sums = folder / manifest.SUMS_NAME
    sums.write_bytes(manifest.sums_adding(sums.read_bytes(), {manifest.BUNDLE_NAME: data}))


def test_a_bundle_changed_without_its_sums_line(campaign: Path, cli: CliRun) -> None:
    bundle = campaign / manifest.BUNDLE_NAME
    bundle.write_bytes(bundle.read_bytes() + b"\n")
    status, report = verify_json(cli, campaign)
    assert status == 1
    errors = [f for f in report["findings"] if f["severity"] == "error"]
    assert {f["code"] for f in errors} == {"sha256sums-mismatch"}
    messages = sorted(f["message"] for f in errors)
    assert len(messages) == 2
    assert messages[0].startswith("'statement.sigstore.json': SHA256SUMS says ")
    assert messages[1].startswith("not the bytes seal writes: differs at byte ")


def _edit_summary_and_reseal(folder: Path) -> None:
    summary = folder / "summary.json"
    summary.write_bytes(summary.read_bytes().replace(b'"complete": false', b'"complete": true'))
    forge_seal(folder)


def test_the_signed_evidence_passes(campaign: Path, cli: CliRun) -> None:
    assert _errors(cli, campaign) == []
    sealed = json.loads((campaign / manifest.MANIFEST_NAME).read_bytes())
    assert sealed["seals"] == [manifest.STATEMENT_NAME, manifest.BUNDLE_NAME]


def test_a_reseal_after_signing_is_an_error(campaign: Path, cli: CliRun) -> None:
    _edit_summary_and_reseal(campaign)
    # Manifest, SHA256SUMS and the statement agree with the edit; the signature does not.
    assert _errors(cli, campaign) == [
        ("bundle-mismatch", manifest.BUNDLE_NAME, "/dsseEnvelope/payload"),
    ]


def test_a_bundle_rewritten_to_the_new_statement_is_an_error(campaign: Path, cli: CliRun) -> None:
    _edit_summary_and_reseal(campaign)
    bundle = _bundle(campaign)
    statement = (campaign / manifest.STATEMENT_NAME).read_bytes()
    bundle["dsseEnvelope"]["payload"] = base64.b64encode(statement).decode()
    _write_bundle(campaign, bundle)
    assert _errors(cli, campaign) == [
        ("bundle-mismatch", manifest.BUNDLE_NAME, "/dsseEnvelope/signatures/0/sig"),
        (
            "bundle-mismatch",
            manifest.BUNDLE_NAME,
            "/verificationMaterial/tlogEntries/0/canonicalizedBody",
        ),
    ]


def _payload_type(bundle: dict[str, Any]) -> None:
    bundle["dsseEnvelope"]["payloadType"] = "application/json"


def _no_log_entry(bundle: dict[str, Any]) -> None:
    bundle["verificationMaterial"]["tlogEntries"] = []


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            _payload_type,
            [
                ("bundle-mismatch", "/dsseEnvelope/payloadType"),
                ("bundle-mismatch", "/dsseEnvelope/signatures/0/sig"),
            ],
        ),
        (_no_log_entry, [("bundle-mismatch", "/verificationMaterial")]),
    ],
    ids=["payload-type", "no-log-entry"],
)
def test_an_edited_bundle_is_a_mismatch(
    campaign: Path,
    cli: CliRun,
    edit: Callable[[dict[str, Any]], None],
    expected: list[tuple[str, str]],
) -> None:
    bundle = _bundle(campaign)
    edit(bundle)
    _write_bundle(campaign, bundle)
    assert [(c, p) for c, _, p in _errors(cli, campaign)] == expected


def _set(path: list[str], value: Any) -> Callable[[dict[str, Any]], Any]:
    def edit(bundle: dict[str, Any]) -> Any:
        target: Any = bundle
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        return bundle

    return edit


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda b: [b], "not a JSON object"),
        (lambda b: {k: v for k, v in b.items() if k != "dsseEnvelope"}, "no dsseEnvelope"),
        (_set(["dsseEnvelope", "payload"], "not base64!"), "the payload is not base64"),
        (_set(["dsseEnvelope", "signatures"], []), "not exactly one signature"),
        (
            _set(["verificationMaterial", "certificate", "rawBytes"], "AAAA"),
            "the certificate is not DER X.509",
        ),
        (
            lambda b: _set(
                ["verificationMaterial"], {"x509CertificateChain": {"certificates": []}}
            )(b),
            "an empty certificate chain",
        ),
    ],
    ids=["array", "message-signature", "bad-base64", "no-signature", "bad-cert", "empty-chain"],
)
def test_an_unreadable_bundle_is_invalid(
    campaign: Path, cli: CliRun, edit: Callable[[dict[str, Any]], Any], reason: str
) -> None:
    _write_bundle(campaign, edit(_bundle(campaign)))
    status, report = verify_json(cli, campaign)
    errors = [f for f in report["findings"] if f["severity"] == "error"]
    assert status == 1 and len(errors) == 1
    assert errors[0]["code"] == "bundle-invalid"
    assert errors[0]["message"] == f"not a DSSE bundle verify can read: {reason}"


def test_a_bundle_that_is_not_json(campaign: Path, cli: CliRun) -> None:
    _write_bundle(campaign, None)
    (campaign / manifest.BUNDLE_NAME).write_bytes(b"\x00garbage")
    sums = campaign / manifest.SUMS_NAME
    sums.write_bytes(
        manifest.sums_adding(sums.read_bytes(), {manifest.BUNDLE_NAME: b"\x00garbage"})
    )
    assert _errors(cli, campaign) == [("bundle-invalid", manifest.BUNDLE_NAME, "")]


@pytest.mark.parametrize(
    ("name", "pointer"), [(manifest.STATEMENT_NAME, "/seals/0"), (manifest.BUNDLE_NAME, "/seals/1")]
)
def test_deleting_a_declared_seal_file_is_an_error(
    campaign: Path, cli: CliRun, name: str, pointer: str
) -> None:
    (campaign / name).unlink()
    status, report = verify_json(cli, campaign)
    errors = [f for f in report["findings"] if f["severity"] == "error"]
    assert status == 1 and len(errors) == 1
    assert (errors[0]["code"], errors[0]["path"], errors[0]["pointer"]) == (
        "seal-file-missing",
        f"{campaign}/manifest.json",
        pointer,
    )
    assert errors[0]["message"] == f"declares {name}, which is missing" + (
        "; run 'ledger sign' again" if name == manifest.BUNDLE_NAME else ""
    )


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b'{"mediaType": "a", "mediaType": "b"}', "duplicate-key"),
        (b'{"x": NaN}', "json-nonfinite"),
        (b"\xef\xbb\xbf{}", "json-bom"),
    ],
)
def test_a_bundle_is_read_as_strictly_as_any_artifact(
    campaign: Path, cli: CliRun, raw: bytes, code: str
) -> None:
    (campaign / manifest.BUNDLE_NAME).write_bytes(raw)
    sums = campaign / manifest.SUMS_NAME
    sums.write_bytes(manifest.sums_adding(sums.read_bytes(), {manifest.BUNDLE_NAME: raw}))
    status, report = verify_json(cli, campaign)
    errors = [f for f in report["findings"] if f["severity"] == "error"]
    assert status == 1 and [f["code"] for f in errors] == ["bundle-invalid"]
    assert errors[0]["message"] == f"not a DSSE bundle verify can read: not strict JSON ({code})"


def _certificate_and_key(curve: Any) -> tuple[bytes, Any]:
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.x509.oid import NameOID

    key = curve
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "self-made")])
    now = datetime.datetime(2026, 11, 1, tzinfo=datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.DER), key


def test_verify_takes_any_certificate_whose_key_signed_it(campaign: Path, cli: CliRun) -> None:
    """Trust is the audit's: a self-made P-384 certificate that did sign this statement
    passes verify's own check (and only the audit, with an identity, refuses it)."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    from ledger.signatures import pae

    der, key = _certificate_and_key(ec.generate_private_key(ec.SECP384R1()))
    bundle = _bundle(campaign)
    envelope = bundle["dsseEnvelope"]
    message = pae(envelope["payloadType"], base64.b64decode(envelope["payload"]))
    signature = key.sign(message, ec.ECDSA(hashes.SHA384()))
    envelope["signatures"][0]["sig"] = base64.b64encode(signature).decode()
    bundle["verificationMaterial"]["certificate"]["rawBytes"] = base64.b64encode(der).decode()
    _write_bundle(campaign, bundle)
    assert _errors(cli, campaign) == []
    # Signed with SHA-256 instead, as a P-384 key does not in sigstore, it does not hold.
    envelope["signatures"][0]["sig"] = base64.b64encode(
        key.sign(message, ec.ECDSA(hashes.SHA256()))
    ).decode()
    _write_bundle(campaign, bundle)
    assert _errors(cli, campaign) == [
        ("bundle-mismatch", manifest.BUNDLE_NAME, "/dsseEnvelope/signatures/0/sig")
    ]


def test_a_certificate_that_is_not_ecdsa_is_invalid(campaign: Path, cli: CliRun) -> None:
    from cryptography.hazmat.primitives.asymmetric import rsa

    der, _ = _certificate_and_key(rsa.generate_private_key(public_exponent=65537, key_size=2048))
    bundle = _bundle(campaign)
    bundle["verificationMaterial"]["certificate"]["rawBytes"] = base64.b64encode(der).decode()
    _write_bundle(campaign, bundle)
    status, report = verify_json(cli, campaign)
    assert status == 1
    (error,) = [f for f in report["findings"] if f["severity"] == "error"]
    assert error["message"].endswith("certificate (sigstore signs with ECDSA)")


def test_a_v0_2_certificate_chain_is_read(campaign: Path, cli: CliRun) -> None:
    bundle = _bundle(campaign)
    material = bundle["verificationMaterial"]
    leaf = material.pop("certificate")
    material["x509CertificateChain"] = {"certificates": [leaf]}
    _write_bundle(campaign, bundle)
    assert _errors(cli, campaign) == []
    material["x509CertificateChain"] = {"certificates": {"0": leaf}}
    _write_bundle(campaign, bundle)
    status, report = verify_json(cli, campaign)
    assert status == 1
    assert [f["message"] for f in report["findings"] if f["severity"] == "error"] == [
        "not a DSSE bundle verify can read: an empty certificate chain"
    ]


def test_base64_is_read_strictly(campaign: Path, cli: CliRun) -> None:
    """A lenient decoder drops what is not base64 and reads the same payload: strict."""
    bundle = _bundle(campaign)
    payload = bundle["dsseEnvelope"]["payload"]
    bundle["dsseEnvelope"]["payload"] = payload[:8] + "!" + payload[8:]
    _write_bundle(campaign, bundle)
    status, report = verify_json(cli, campaign)
    assert status == 1
    assert [f["message"] for f in report["findings"] if f["severity"] == "error"] == [
        "not a DSSE bundle verify can read: the payload is not base64"
    ]


def test_a_log_entry_of_another_kind_is_left_to_the_audit(campaign: Path, cli: CliRun) -> None:
    bundle = _bundle(campaign)
    entry = bundle["verificationMaterial"]["tlogEntries"][0]
    # As Rekor v2 records a DSSE envelope: a hashedrekord over it, with no payload hash.
    body = {
        "apiVersion": "0.0.2",
        "kind": "hashedrekord",
        "spec": {"hashedRekordV002": {"data": {"algorithm": "SHA2_256", "digest": "AAAA"}}},
    }
    entry["canonicalizedBody"] = base64.b64encode(json.dumps(body).encode()).decode()
    _write_bundle(campaign, bundle)
    assert _errors(cli, campaign) == []


def test_an_unreadable_statement_is_its_own_finding(campaign: Path, cli: CliRun) -> None:
    statement = campaign / manifest.STATEMENT_NAME
    statement.write_bytes(b"{not json")
    sums = campaign / manifest.SUMS_NAME
    sums.write_bytes(
        manifest.sums_adding(sums.read_bytes(), {manifest.STATEMENT_NAME: b"{not json"})
    )
    codes = {code for code, _, _ in _errors(cli, campaign)}
    assert codes == {"statement-invalid"}


def test_a_bundle_too_large_to_read(campaign: Path, cli: CliRun) -> None:
    data = b" " * (5 << 20)
    (campaign / manifest.BUNDLE_NAME).write_bytes(data)
    sums = campaign / manifest.SUMS_NAME
    sums.write_bytes(manifest.sums_adding(sums.read_bytes(), {manifest.BUNDLE_NAME: data}))
    status, report = verify_json(cli, campaign)
    assert status == 1
    (error,) = [f for f in report["findings"] if f["severity"] == "error"]
    assert error["code"] == "bundle-invalid" and "4194304" in error["message"]


def test_two_signatures_are_not_one(campaign: Path, cli: CliRun) -> None:
    bundle = _bundle(campaign)
    signatures = bundle["dsseEnvelope"]["signatures"]
    signatures.append(dict(signatures[0]))
    _write_bundle(campaign, bundle)
    status, report = verify_json(cli, campaign)
    assert status == 1
    assert [f["message"] for f in report["findings"] if f["severity"] == "error"] == [
        "not a DSSE bundle verify can read: not exactly one signature"
    ]


@pytest.mark.parametrize(
    "edit",
    [
        lambda lines: list(reversed(lines)),
        lambda lines: [line.replace("  ", " *", 1) for line in lines],
    ],
    ids=["reordered", "binary-marker"],
)
def test_sums_that_parse_the_same_are_still_not_the_seal(
    campaign: Path, cli: CliRun, edit: Callable[[list[str]], list[str]]
) -> None:
    """sha256sum -c accepts both; the digests are the same; the bytes are not seal's."""
    sums = campaign / manifest.SUMS_NAME
    lines = sums.read_text().splitlines()
    sums.write_text("\n".join(edit(lines)) + "\n")
    assert (
        manifest.parse_sums(sums.read_bytes())[0]
        == manifest.parse_sums("\n".join(lines).encode())[0]
    )
    status, report = verify_json(cli, campaign)
    errors = [f for f in report["findings"] if f["severity"] == "error"]
    assert status == 1 and len(errors) == 1
    assert errors[0]["message"].startswith("not the bytes seal writes: differs at byte ")
