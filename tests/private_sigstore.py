"""A private sigstore instance for tests: a certificate authority, a CT log and a
transparency log, each with its own key, and the trusted_root.json that pins them.

Public sigstore cannot sign offline, and the real bundles in ``tests/data/sigstore`` sign
files of their own; an approval record is a file the test writes. This module issues
what Fulcio, the CT log and Rekor would (a short-lived certificate for an email identity
with an embedded SCT, a hashedrekord entry with its inclusion promise, a one-leaf
inclusion proof and a signed checkpoint) so that the production verifier,
``sigstore.verify.Verifier`` with the pinned root, checks a real bundle end to end.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import struct
from pathlib import Path

import rfc8785
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from sigstore._internal.rekor import _hashedrekord_from_parts
from sigstore.hashes import HashAlgorithm, Hashed

_ISSUER_V1 = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.1")
_ISSUER_V2 = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.8")
_SCT_LIST = x509.ObjectIdentifier("1.3.6.1.4.1.11129.2.4.2")
_EPOCH = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
_ORIGIN = "anvil-test-rekor"


def _der_public(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _sign(key: ec.EllipticCurvePrivateKey, data: bytes) -> bytes:
    return key.sign(data, ec.ECDSA(hashes.SHA256()))


def _utf8_der(text: str) -> bytes:
    raw = text.encode()
    assert len(raw) < 128
    return bytes([0x0C, len(raw)]) + raw


class PrivateSigstore:
    """Keys for a CA, a CT log and a transparency log, and the root that trusts them."""

    def __init__(self) -> None:
        self.ca_key = ec.generate_private_key(ec.SECP256R1())
        self.ct_key = ec.generate_private_key(ec.SECP256R1())
        self.log_key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "anvil-test-fulcio")])
        ski = x509.SubjectKeyIdentifier.from_public_key(self.ca_key.public_key())
        self.ca_cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self.ca_key.public_key())
            .serial_number(1)
            .not_valid_before(_EPOCH - datetime.timedelta(days=1))
            .not_valid_after(_EPOCH + datetime.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=1), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=False,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(ski, critical=False)
            .sign(self.ca_key, hashes.SHA256())
        )
        self._entries = 0

    def trusted_root(self) -> dict[str, object]:
        """The ``trusted_root.json`` document pinning this instance."""
        start = {"start": (_EPOCH - datetime.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")}

        def log(key: ec.EllipticCurvePrivateKey, url: str) -> dict[str, object]:
            der = _der_public(key)
            return {
                "baseUrl": url,
                "hashAlgorithm": "SHA2_256",
                "publicKey": {
                    "rawBytes": base64.b64encode(der).decode(),
                    "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                    "validFor": start,
                },
                "logId": {"keyId": base64.b64encode(hashlib.sha256(der).digest()).decode()},
            }

        ca_der = self.ca_cert.public_bytes(serialization.Encoding.DER)
        return {
            "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
            "tlogs": [log(self.log_key, "https://rekor.test.invalid")],
            "certificateAuthorities": [
                {
                    "subject": {"organization": "anvil-test", "commonName": "anvil-test-fulcio"},
                    "uri": "https://fulcio.test.invalid",
                    "certChain": {
                        "certificates": [{"rawBytes": base64.b64encode(ca_der).decode()}]
                    },
                    "validFor": start,
                }
            ],
            "ctlogs": [log(self.ct_key, "https://ctfe.test.invalid")],
            "timestampAuthorities": [],
        }

    def write_trusted_root(self, path: Path) -> Path:
        path.write_text(json.dumps(self.trusted_root(), indent=2))
        return path

    def _certificate(
        self, key: ec.EllipticCurvePrivateKey, identity: str, issuer: str, issued: datetime.datetime
    ) -> x509.Certificate:
        def build(sct_list: bytes) -> x509.Certificate:
            builder = (
                x509.CertificateBuilder()
                .subject_name(x509.Name([]))
                .issuer_name(self.ca_cert.subject)
                .public_key(key.public_key())
                .serial_number(0x5EED + self._entries)
                .not_valid_before(issued)
                .not_valid_after(issued + datetime.timedelta(minutes=10))
                .add_extension(
                    x509.KeyUsage(
                        digital_signature=True,
                        content_commitment=False,
                        key_encipherment=False,
                        data_encipherment=False,
                        key_agreement=False,
                        key_cert_sign=False,
                        crl_sign=False,
                        encipher_only=False,
                        decipher_only=False,
                    ),
                    critical=True,
                )
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), False)
                .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
                .add_extension(
                    x509.AuthorityKeyIdentifier.from_issuer_public_key(self.ca_key.public_key()),
                    False,
                )
                .add_extension(x509.SubjectAlternativeName([x509.RFC822Name(identity)]), True)
                .add_extension(x509.UnrecognizedExtension(_ISSUER_V1, issuer.encode()), False)
                .add_extension(x509.UnrecognizedExtension(_ISSUER_V2, _utf8_der(issuer)), False)
                .add_extension(x509.UnrecognizedExtension(_SCT_LIST, sct_list), False)
            )
            return builder.sign(self.ca_key, hashes.SHA256())

        def octets(payload: bytes) -> bytes:
            # The extension's value is an OCTET STRING holding the TLS-encoded SCT list.
            length = len(payload)
            if length < 128:
                return bytes([0x04, length]) + payload
            return bytes([0x04, 0x82]) + struct.pack("!H", length) + payload

        # The SCT signs the precertificate: this certificate without its SCT extension.
        draft = build(octets(b"\x00\x00"))
        tbs = draft.tbs_precertificate_bytes
        issuer_key_hash = hashlib.sha256(_der_public(self.ca_key)).digest()
        millis = int(issued.timestamp() * 1000)
        signed = struct.pack(
            f"!BBQH32s3s{len(tbs)}sH",
            0,
            0,
            millis,
            1,
            issuer_key_hash,
            struct.pack("!I", len(tbs))[1:],
            tbs,
            0,
        )
        signature = _sign(self.ct_key, signed)
        log_id = hashlib.sha256(_der_public(self.ct_key)).digest()
        sct = (
            struct.pack("!B32sQH", 0, log_id, millis, 0)
            + struct.pack("!BBH", 4, 3, len(signature))  # sha256, ecdsa
            + signature
        )
        sct_list = struct.pack("!HH", len(sct) + 2, len(sct)) + sct
        return build(octets(sct_list))

    def sign(
        self,
        data: bytes,
        *,
        identity: str,
        issuer: str,
        at: datetime.datetime = _EPOCH + datetime.timedelta(days=30),
    ) -> bytes:
        """A sigstore bundle (v0.3, message signature) over ``data`` by ``identity``."""
        self._entries += 1
        key = ec.generate_private_key(ec.SECP256R1())
        cert = self._certificate(key, identity, issuer, at)
        signature = _sign(key, data)
        digest = hashlib.sha256(data).digest()
        body_model = _hashedrekord_from_parts(
            cert, signature, Hashed(algorithm=HashAlgorithm.SHA2_256, digest=digest)
        )
        body = rfc8785.dumps(body_model.model_dump(mode="json", by_alias=True, exclude_none=True))
        log_der = _der_public(self.log_key)
        log_id = hashlib.sha256(log_der).digest()
        integrated = int((at + datetime.timedelta(seconds=5)).timestamp())
        promise = rfc8785.dumps(
            {
                "body": base64.b64encode(body).decode(),
                "integratedTime": integrated,
                "logID": log_id.hex(),
                "logIndex": 0,
            }
        )
        root = hashlib.sha256(b"\x00" + body).digest()
        note = f"{_ORIGIN}\n1\n{base64.b64encode(root).decode()}\n"
        note_signature = log_id[:4] + _sign(self.log_key, note.encode())
        checkpoint = f"{note}\n\u2014 {_ORIGIN} {base64.b64encode(note_signature).decode()}\n"
        bundle = {
            "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
            "verificationMaterial": {
                "certificate": {
                    "rawBytes": base64.b64encode(
                        cert.public_bytes(serialization.Encoding.DER)
                    ).decode()
                },
                "tlogEntries": [
                    {
                        "logIndex": "0",
                        "logId": {"keyId": base64.b64encode(log_id).decode()},
                        "kindVersion": {"kind": "hashedrekord", "version": "0.0.1"},
                        "integratedTime": str(integrated),
                        "inclusionPromise": {
                            "signedEntryTimestamp": base64.b64encode(
                                _sign(self.log_key, promise)
                            ).decode()
                        },
                        "inclusionProof": {
                            "logIndex": "0",
                            "rootHash": base64.b64encode(root).decode(),
                            "treeSize": "1",
                            "hashes": [],
                            "checkpoint": {"envelope": checkpoint},
                        },
                        "canonicalizedBody": base64.b64encode(body).decode(),
                    }
                ],
            },
            "messageSignature": {
                "messageDigest": {
                    "algorithm": "SHA2_256",
                    "digest": base64.b64encode(digest).decode(),
                },
                "signature": base64.b64encode(signature).decode(),
            },
        }
        return json.dumps(bundle).encode()
