"""Builders for hostile sigstore bundles (``tests/test_hostile_bundles.py``).

A private RFC 3161 timestamp authority, DSSE bundles and timestamped bundles from the
private sigstore instance, and edits of real bundles. sigstore-python and rfc3161-client
verify timestamps but cannot issue them offline, so the timestamp response is encoded
here by hand: a few DER primitives are enough for the one shape a TSA returns.
"""

from __future__ import annotations

import base64
import copy
import datetime
import hashlib
import json
from collections.abc import Callable
from typing import Any

import rfc8785
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ledger.signatures import pae
from tests.private_sigstore import PrivateSigstore

_EPOCH = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
"""Where the private instance's validity periods start (its CA and logs: a day before)."""
SIGNED_AT = _EPOCH + datetime.timedelta(days=30)
"""When the bundles here are signed (certificates are valid for 10 minutes from it)."""
INTOTO = "application/vnd.in-toto+json"

# Object identifiers of RFC 3161 / RFC 5652 (CMS) / RFC 5035 (ESS).
_SIGNED_DATA = "1.2.840.113549.1.7.2"
_TST_INFO = "1.2.840.113549.1.9.16.1.4"
_CONTENT_TYPE = "1.2.840.113549.1.9.3"
_MESSAGE_DIGEST = "1.2.840.113549.1.9.4"
_SIGNING_CERTIFICATE_V2 = "1.2.840.113549.1.9.16.2.47"
_SHA256 = "2.16.840.1.101.3.4.2.1"
_ECDSA_SHA256 = "1.2.840.10045.4.3.2"
_POLICY = "1.3.6.1.4.1.57264.2"
_ISSUER_V1 = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.1")
_ISSUER_V2 = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.8")
_SCT_LIST = x509.ObjectIdentifier("1.3.6.1.4.1.11129.2.4.2")


def _tlv(tag: int, content: bytes) -> bytes:
    length = len(content)
    if length < 0x80:
        return bytes([tag, length]) + content
    size = length.to_bytes((length.bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(size)]) + size + content


def _seq(*items: bytes) -> bytes:
    return _tlv(0x30, b"".join(items))


def _set(*items: bytes) -> bytes:
    # DER orders the members of a SET OF by their encodings; the parsers check it.
    return _tlv(0x31, b"".join(sorted(items)))


def _int(value: int) -> bytes:
    return _tlv(0x02, value.to_bytes(value.bit_length() // 8 + 1, "big"))


def _oid(dotted: str) -> bytes:
    first, second, *rest = (int(arc) for arc in dotted.split("."))
    out = bytearray([40 * first + second])
    for arc in rest:
        chunk = [arc & 0x7F]
        while arc > 0x7F:
            arc >>= 7
            chunk.append(0x80 | (arc & 0x7F))
        out += bytes(reversed(chunk))
    return _tlv(0x06, bytes(out))


def _octets(value: bytes) -> bytes:
    return _tlv(0x04, value)


def _explicit(number: int, content: bytes) -> bytes:
    return _tlv(0xA0 + number, content)


def _algorithm(dotted: str) -> bytes:
    return _seq(_oid(dotted))


def _attribute(dotted: str, value: bytes) -> bytes:
    return _seq(_oid(dotted), _set(value))


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


class PrivateTSA:
    """A timestamp authority: a root CA and a leaf that signs RFC 3161 responses."""

    def __init__(self, name: str = "anvil-test-tsa") -> None:
        self.root_key = ec.generate_private_key(ec.SECP256R1())
        self.key = ec.generate_private_key(ec.SECP256R1())
        start = _EPOCH - datetime.timedelta(days=1)
        end = _EPOCH + datetime.timedelta(days=3650)
        self.root = (
            x509.CertificateBuilder()
            .subject_name(_name(f"{name}-root"))
            .issuer_name(_name(f"{name}-root"))
            .public_key(self.root_key.public_key())
            .serial_number(1)
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(self.root_key.public_key()), False
            )
            .sign(self.root_key, hashes.SHA256())
        )
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(_name(name))
            .issuer_name(self.root.subject)
            .public_key(self.key.public_key())
            .serial_number(2)
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            # RFC 3161 2.3: the one purpose, in a critical extension.
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.TIME_STAMPING]), True)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.root_key.public_key()),
                False,
            )
            .sign(self.root_key, hashes.SHA256())
        )
        self._serial = 0

    def authority(
        self, *, start: datetime.datetime | None = None, end: datetime.datetime | None = None
    ) -> dict[str, Any]:
        """This TSA as a ``timestampAuthorities`` entry of a trusted root."""
        valid_for = {"start": _rfc3339(start or _EPOCH - datetime.timedelta(days=1))}
        if end is not None:
            valid_for["end"] = _rfc3339(end)
        return {
            "subject": {"organization": "anvil-test", "commonName": "anvil-test-tsa"},
            "uri": "https://tsa.test.invalid",
            "certChain": {
                "certificates": [
                    {"rawBytes": base64.b64encode(_der(c)).decode()} for c in (self.cert, self.root)
                ]
            },
            "validFor": valid_for,
        }

    def timestamp(self, message: bytes, at: datetime.datetime) -> bytes:
        """A granted ``TimeStampResp`` (DER) over sha256(``message``) at ``at``."""
        self._serial += 1
        tst_info = _seq(
            _int(1),
            _oid(_POLICY),
            _seq(_algorithm(_SHA256), _octets(hashlib.sha256(message).digest())),
            _int(self._serial),
            _tlv(0x18, at.astimezone(datetime.UTC).strftime("%Y%m%d%H%M%SZ").encode()),
        )
        cert_der = _der(self.cert)
        issuer_serial = _seq(self.cert.issuer.public_bytes(), _int(self.cert.serial_number))
        # ESSCertIDv2 with the default hash (sha256) names the signing certificate.
        ess = _seq(_seq(_seq(_octets(hashlib.sha256(cert_der).digest()))))
        attributes = [
            _attribute(_CONTENT_TYPE, _oid(_TST_INFO)),
            _attribute(_MESSAGE_DIGEST, _octets(hashlib.sha256(tst_info).digest())),
            _attribute(_SIGNING_CERTIFICATE_V2, ess),
        ]
        # The signature covers the attributes encoded as a SET, stored as [0] IMPLICIT.
        signed_attributes = _set(*attributes)
        signature = self.key.sign(signed_attributes, ec.ECDSA(hashes.SHA256()))
        signer_info = _seq(
            _int(1),
            issuer_serial,
            _algorithm(_SHA256),
            b"\xa0" + signed_attributes[1:],
            _algorithm(_ECDSA_SHA256),
            _octets(signature),
        )
        signed_data = _seq(
            _int(3),
            _set(_algorithm(_SHA256)),
            _seq(_oid(_TST_INFO), _explicit(0, _octets(tst_info))),
            _explicit(0, cert_der),
            _set(signer_info),
        )
        token = _seq(_oid(_SIGNED_DATA), _explicit(0, signed_data))
        return _seq(_seq(_int(0)), token)


def _spki(key: ec.EllipticCurvePublicKey) -> bytes:
    return key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _der(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.DER)


def _rfc3339(when: datetime.datetime) -> str:
    return when.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class CaseSigstore(PrivateSigstore):
    """The private instance, also issuing DSSE bundles and bundles timed by a TSA."""

    def root_with(self, **changes: Any) -> dict[str, Any]:
        """The trusted root document with some top-level fields replaced."""
        root = dict(self.trusted_root())
        root.update(changes)
        return root

    def leaf_certificate(
        self, key: ec.EllipticCurvePublicKey, identity: str, issuer: str, at: datetime.datetime
    ) -> x509.Certificate:
        """What Fulcio issues for ``identity``: a 10-minute code-signing certificate with
        the CT log's SCT embedded."""
        self._entries += 1
        return self._certificate(key, identity, issuer, at)

    def sign_dsse(
        self,
        payload: bytes,
        *,
        identity: str,
        issuer: str,
        payload_type: str = INTOTO,
        body: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        at: datetime.datetime = SIGNED_AT,
    ) -> bytes:
        """A v0.3 DSSE bundle over ``payload``, logged as a Rekor v1 ``dsse`` entry.

        Args:
            body: edits the log entry's body before it is logged (a log that accepted a
                malformed entry signs whatever it was given).
        """
        key = ec.generate_private_key(ec.SECP256R1())
        cert = self.leaf_certificate(key.public_key(), identity, issuer, at)
        signature = key.sign(pae(payload_type, payload), ec.ECDSA(hashes.SHA256()))
        envelope = {
            "payload": base64.b64encode(payload).decode(),
            "payloadType": payload_type,
            "signatures": [{"sig": base64.b64encode(signature).decode()}],
        }
        pem = cert.public_bytes(serialization.Encoding.PEM)
        spec = {
            "envelopeHash": {
                "algorithm": "sha256",
                "value": hashlib.sha256(json.dumps(envelope).encode()).hexdigest(),
            },
            "payloadHash": {"algorithm": "sha256", "value": hashlib.sha256(payload).hexdigest()},
            "signatures": [
                {
                    "signature": base64.b64encode(signature).decode(),
                    "verifier": base64.b64encode(pem).decode(),
                }
            ],
        }
        document: dict[str, Any] = {"apiVersion": "0.0.1", "kind": "dsse", "spec": spec}
        if body is not None:
            document = body(document)
        return json.dumps(
            {
                "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
                "verificationMaterial": {
                    "certificate": {"rawBytes": base64.b64encode(_der(cert)).decode()},
                    "tlogEntries": [self.log_entry(rfc8785.dumps(document), "dsse", at)],
                },
                "dsseEnvelope": envelope,
            }
        ).encode()

    def sign_timestamped(
        self, data: bytes, tsa: PrivateTSA, *, identity: str, issuer: str
    ) -> bytes:
        """A message-signature bundle whose only time is ``tsa``'s timestamp.

        Without the log's inclusion promise (as from Rekor v2), the timestamp is the one
        source of time, so a timestamp that does not verify leaves none.
        """
        bundle = json.loads(self.sign(data, identity=identity, issuer=issuer, at=SIGNED_AT))
        entry = bundle["verificationMaterial"]["tlogEntries"][0]
        del entry["inclusionPromise"], entry["integratedTime"]
        signature = base64.b64decode(bundle["messageSignature"]["signature"])
        token = tsa.timestamp(signature, SIGNED_AT + datetime.timedelta(seconds=10))
        bundle["verificationMaterial"]["timestampVerificationData"] = {
            "rfc3161Timestamps": [{"signedTimestamp": base64.b64encode(token).decode()}]
        }
        return json.dumps(bundle).encode()


def corrupt_embedded_certificate(response: bytes) -> bytes:
    """A timestamp response whose embedded TSA certificate claims X.509 version 4.

    The certificates a CMS SignedData carries are outside its signature: the token still
    verifies against the root's TSA chain, and the certificate breaks only once parsed.
    """
    from rfc3161_client import decode_timestamp_response

    (cert,) = decode_timestamp_response(response).signed_data.certificates
    # Certificate, TBSCertificate (both with two-byte lengths), then [0] { INTEGER v }.
    version = response.index(cert) + 12
    assert response[version - 4 : version] == bytes.fromhex("a0030201")
    return response[:version] + b"\x03" + response[version + 1 :]


def statement(subjects: Any) -> bytes:
    """An in-toto Statement v1 naming ``subjects`` (any JSON, to build bad ones too)."""
    return json.dumps(
        {
            "_type": "https://in-toto.io/Statement/v1",
            "subject": subjects,
            "predicateType": "https://anvil.test/approval/v1",
            "predicate": {},
        }
    ).encode()


def edited(bundle: bytes, *edits: tuple[str, Any]) -> bytes:
    """``bundle`` with values replaced: each edit is (a ``/``-separated path, a value, or
    :data:`DELETE`, or a function of the old value)."""
    document = json.loads(bundle)
    for path, value in edits:
        *parents, last = (int(p) if p.isdigit() else p for p in path.split("/"))
        node = document
        for part in parents:
            node = node[part]
        if value is DELETE:
            del node[last]
        elif callable(value):
            node[last] = value(copy.deepcopy(node[last]))
        else:
            node[last] = value
    return json.dumps(document).encode()


DELETE = object()
"""Marks an edit that removes the key."""


def reencoded(edit: Callable[[bytes], bytes]) -> Callable[[str], str]:
    """An edit of a base64 field's decoded bytes."""
    return lambda text: base64.b64encode(edit(base64.b64decode(text))).decode()
