"""What verify can tell about a campaign's ``statement.sigstore.json`` without a trusted root.

Who signed is ``ledger audit``'s question: it needs an expected identity and a trusted
root. Verify answers the question it can answer offline and alone: does the bundle sign
this very statement, and does its signature hold under the certificate it carries? A
statement re-written after signing (the subjects of a re-sealed campaign) or a bundle whose
payload was edited is then an error in CI, before anyone audits.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from pathlib import Path
from typing import Any

from ledger.errors import InvalidArtifact
from ledger.findings import Issue
from ledger.formats import jsonio
from ledger.signatures._intoto import BUNDLE_NAME, STATEMENT_NAME

MAX_BUNDLE_BYTES = 4 << 20
IN_TOTO = "application/vnd.in-toto+json"


class _Unreadable(Exception):
    pass


def _field(document: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(document, dict) or key not in document:
            raise _Unreadable(f"no {'.'.join(keys)}")
        document = document[key]
    return document


def _b64(value: Any, what: str) -> bytes:
    if not isinstance(value, str):
        raise _Unreadable(f"{what} is not a base64 string")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise _Unreadable(f"{what} is not base64") from None


def _certificate(bundle: dict[str, Any]) -> bytes:
    material = _field(bundle, "verificationMaterial")
    if isinstance(material, dict) and "certificate" in material:
        return _b64(_field(material, "certificate", "rawBytes"), "the certificate")
    chain = _field(material, "x509CertificateChain", "certificates")
    if not isinstance(chain, list) or not chain:
        raise _Unreadable("an empty certificate chain")
    return _b64(_field(chain[0], "rawBytes"), "the certificate")


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding: the bytes a DSSE signature signs."""
    kind = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def _signature_holds(certificate: bytes, signature: bytes, message: bytes) -> bool:
    from cryptography import x509
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    try:
        key = x509.load_der_x509_certificate(certificate).public_key()
    except ValueError:
        raise _Unreadable("the certificate is not DER X.509") from None
    if not isinstance(key, ec.EllipticCurvePublicKey):
        raise _Unreadable(f"a {type(key).__name__} certificate (sigstore signs with ECDSA)")
    digest = hashes.SHA384() if key.curve.key_size >= 384 else hashes.SHA256()
    try:
        key.verify(signature, message, ec.ECDSA(digest))
    except InvalidSignature:
        return False
    return True


def check_bundle(folder: Path) -> list[Issue]:
    """``bundle-invalid`` or ``bundle-mismatch`` issues of the campaign's bundle."""
    try:
        statement = jsonio.read_json(folder / STATEMENT_NAME)
    except (OSError, InvalidArtifact):
        return []  # the statement's own finding says what is wrong with it
    try:
        raw = jsonio.read_limited(folder / BUNDLE_NAME, MAX_BUNDLE_BYTES)
    except (OSError, InvalidArtifact) as e:
        return [Issue("bundle-invalid", "", str(e))]
    try:
        return _check(statement, raw)
    except _Unreadable as e:
        return [Issue("bundle-invalid", "", f"not a DSSE bundle verify can read: {e}")]


def _check(statement: Any, raw: bytes) -> list[Issue]:
    try:
        # As strict as any artifact: a reader that took the other of two duplicate keys
        # would verify another bundle than this one.
        bundle = jsonio.parse_strict(raw)
    except InvalidArtifact as e:
        raise _Unreadable(f"not strict JSON ({e.code})") from None
    if not isinstance(bundle, dict):
        raise _Unreadable("not a JSON object")
    envelope = _field(bundle, "dsseEnvelope")
    payload = _b64(_field(envelope, "payload"), "the payload")
    payload_type = _field(envelope, "payloadType")
    signatures = _field(envelope, "signatures")
    if not isinstance(payload_type, str):
        raise _Unreadable("payloadType is not a string")
    if not isinstance(signatures, list) or len(signatures) != 1:
        raise _Unreadable("not exactly one signature")
    signature = _b64(_field(signatures[0], "sig"), "the signature")
    certificate = _certificate(bundle)
    issues = []
    if payload_type != IN_TOTO:
        issues.append(Issue("bundle-mismatch", "/dsseEnvelope/payloadType", "not in-toto"))
    try:
        signed = json.loads(payload)
    except (ValueError, RecursionError):
        signed = None
    if signed != statement:
        issues.append(
            Issue(
                "bundle-mismatch",
                "/dsseEnvelope/payload",
                "the bundle signs another statement than statement.intoto.json "
                "(re-sealed or edited after signing); sign it again with 'ledger sign'",
            )
        )
    if not _signature_holds(certificate, signature, pae(payload_type, payload)):
        issues.append(
            Issue(
                "bundle-mismatch",
                "/dsseEnvelope/signatures/0/sig",
                "the signature does not hold under the bundle's own certificate",
            )
        )
    issues.extend(_log_entry_issues(bundle, payload))
    return issues


def _log_entry_issues(bundle: dict[str, Any], payload: bytes) -> list[Issue]:
    material = _field(bundle, "verificationMaterial")
    entries = material.get("tlogEntries") if isinstance(material, dict) else None
    if not isinstance(entries, list) or not entries:
        return [Issue("bundle-mismatch", "/verificationMaterial", "no transparency log entry")]
    body = _b64(_field(entries[0], "canonicalizedBody"), "the log entry's body")
    try:
        entry = json.loads(body)
    except (ValueError, RecursionError):
        raise _Unreadable("the log entry's body is not JSON") from None
    if not isinstance(entry, dict) or entry.get("kind") != "dsse":
        # Rekor v2 records DSSE as a hashedrekord over the envelope; audit checks those.
        return []
    recorded = _field(entry, "spec", "payloadHash", "value")
    if recorded != hashlib.sha256(payload).hexdigest():
        return [
            Issue(
                "bundle-mismatch",
                "/verificationMaterial/tlogEntries/0/canonicalizedBody",
                "the transparency log entry is for another payload",
            )
        ]
    return []


def signature_problem(raw: bytes, data: bytes) -> str | None:
    """Why the bundle ``raw`` does not sign ``data`` under the certificate it carries (a
    message signature over its digest, or a DSSE statement naming its digest), or None when
    it does. Who signed is the policy's question; this one is whether anything was signed.
    """
    try:
        bundle = jsonio.parse_strict(raw)
        if not isinstance(bundle, dict):
            return "not a JSON object"
        certificate = _certificate(bundle)
        if "messageSignature" in bundle:
            signed = _field(bundle, "messageSignature")
            digest = _b64(_field(signed, "messageDigest", "digest"), "the message digest")
            if digest != hashlib.sha256(data).digest():
                return "it signs another file's digest"
            signature = _b64(_field(signed, "signature"), "the signature")
            message = data
        else:
            envelope = _field(bundle, "dsseEnvelope")
            payload = _b64(_field(envelope, "payload"), "the payload")
            payload_type = _field(envelope, "payloadType")
            signatures = _field(envelope, "signatures")
            if not isinstance(payload_type, str):
                return "payloadType is not a string"
            if not isinstance(signatures, list) or len(signatures) != 1:
                return "not exactly one signature"
            signature = _b64(_field(signatures[0], "sig"), "the signature")
            message = pae(payload_type, payload)
            if not _names_digest(payload, hashlib.sha256(data).hexdigest()):
                return "its statement names no subject with the file's digest"
        if not _signature_holds(certificate, signature, message):
            return "the signature does not hold under the bundle's own certificate"
    except InvalidArtifact as e:
        return f"not strict JSON ({e.code})"
    except _Unreadable as e:
        return f"not a sigstore bundle: {e}"
    return None


def _names_digest(payload: bytes, digest: str) -> bool:
    try:
        statement = json.loads(payload)
    except (ValueError, RecursionError):
        return False
    subjects = statement.get("subject") if isinstance(statement, dict) else None
    return any(
        isinstance(s, dict)
        and isinstance(s.get("digest"), dict)
        and s["digest"].get("sha256") == digest
        for s in (subjects if isinstance(subjects, list) else ())
    )
