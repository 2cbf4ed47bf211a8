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

from ledger import manifest
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
    assert errors[0]["message"].startswith(f"declares {name}, which is missing")


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
