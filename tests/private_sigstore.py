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
import http.server
import json
import struct
import threading
import time
from pathlib import Path
from typing import Any, Self

import rfc8785
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from sigstore._internal.rekor import _hashedrekord_from_parts
from sigstore.hashes import HashAlgorithm, Hashed

from ledger.signatures import pae

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
        self, key: ec.EllipticCurvePublicKey, identity: str, issuer: str, issued: datetime.datetime
    ) -> x509.Certificate:
        def build(sct_list: bytes) -> x509.Certificate:
            builder = (
                x509.CertificateBuilder()
                .subject_name(x509.Name([]))
                .issuer_name(self.ca_cert.subject)
                .public_key(key)
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
                .add_extension(x509.SubjectKeyIdentifier.from_public_key(key), False)
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

    def checkpoint(self, root: bytes, size: int, origin: str = _ORIGIN) -> str:
        """A signed note by this log's key: a tree of ``size`` entries has root ``root``."""
        log_id = hashlib.sha256(_der_public(self.log_key)).digest()
        note = f"{origin}\n{size}\n{base64.b64encode(root).decode()}\n"
        signature = log_id[:4] + _sign(self.log_key, note.encode())
        return f"{note}\n\u2014 {origin} {base64.b64encode(signature).decode()}\n"

    def log_entry(self, body: bytes, kind: str, at: datetime.datetime) -> dict[str, Any]:
        """A one-leaf log's entry for a canonicalized ``body``, as a bundle carries it:
        its inclusion promise, proof and checkpoint."""
        log_id = hashlib.sha256(_der_public(self.log_key)).digest()
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
        return {
            "logIndex": "0",
            "logId": {"keyId": base64.b64encode(log_id).decode()},
            "kindVersion": {"kind": kind, "version": "0.0.1"},
            "integratedTime": str(integrated),
            "inclusionPromise": {
                "signedEntryTimestamp": base64.b64encode(_sign(self.log_key, promise)).decode()
            },
            "inclusionProof": {
                "logIndex": "0",
                "rootHash": base64.b64encode(root).decode(),
                "treeSize": "1",
                "hashes": [],
                "checkpoint": {"envelope": self.checkpoint(root, 1)},
            },
            "canonicalizedBody": base64.b64encode(body).decode(),
        }

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
        cert = self._certificate(key.public_key(), identity, issuer, at)
        signature = _sign(key, data)
        digest = hashlib.sha256(data).digest()
        body_model = _hashedrekord_from_parts(
            cert, signature, Hashed(algorithm=HashAlgorithm.SHA2_256, digest=digest)
        )
        body = rfc8785.dumps(body_model.model_dump(mode="json", by_alias=True, exclude_none=True))
        bundle = {
            "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
            "verificationMaterial": {
                "certificate": {
                    "rawBytes": base64.b64encode(
                        cert.public_bytes(serialization.Encoding.DER)
                    ).decode()
                },
                "tlogEntries": [self.log_entry(body, "hashedrekord", at)],
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


def _leaf_hash(body: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + body).digest()


def _node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(size: int) -> int:
    """The largest power of two below ``size`` (RFC 6962, section 2.1)."""
    k = 1
    while k * 2 < size:
        k *= 2
    return k


def merkle_root(leaves: list[bytes]) -> bytes:
    """The RFC 6962 tree head over leaf hashes."""
    if len(leaves) == 1:
        return leaves[0]
    k = _split(len(leaves))
    return _node_hash(merkle_root(leaves[:k]), merkle_root(leaves[k:]))


def inclusion_path(index: int, leaves: list[bytes]) -> list[bytes]:
    """The audit path of leaf ``index`` (RFC 6962, section 2.1.1), leaf to root."""
    if len(leaves) == 1:
        return []
    k = _split(len(leaves))
    if index < k:
        return [*inclusion_path(index, leaves[:k]), merkle_root(leaves[k:])]
    return [*inclusion_path(index - k, leaves[k:]), merkle_root(leaves[:k])]


class TransparencyLog:
    """Rekor v1's log: entries appended to an RFC 6962 tree, each answered with its
    inclusion proof, a signed checkpoint and a signed entry timestamp."""

    def __init__(self, key: ec.EllipticCurvePrivateKey) -> None:
        self.key = key
        self.leaves: list[bytes] = []
        self.log_id = hashlib.sha256(_der_public(key)).digest()

    def append(self, body: bytes, integrated: int) -> dict[str, object]:
        """Adds a canonicalized entry body; returns the entry as Rekor's API answers it."""
        index = len(self.leaves)
        self.leaves.append(_leaf_hash(body))
        size = len(self.leaves)
        root = merkle_root(self.leaves)
        note = f"{_ORIGIN}\n{size}\n{base64.b64encode(root).decode()}\n"
        note_signature = self.log_id[:4] + _sign(self.key, note.encode())
        checkpoint = f"{note}\n\u2014 {_ORIGIN} {base64.b64encode(note_signature).decode()}\n"
        encoded = base64.b64encode(body).decode()
        promise = rfc8785.dumps(
            {
                "body": encoded,
                "integratedTime": integrated,
                "logID": self.log_id.hex(),
                "logIndex": index,
            }
        )
        return {
            "body": encoded,
            "integratedTime": integrated,
            "logID": self.log_id.hex(),
            "logIndex": index,
            "verification": {
                "inclusionProof": {
                    "checkpoint": checkpoint,
                    "hashes": [h.hex() for h in inclusion_path(index, self.leaves)],
                    "logIndex": index,
                    "rootHash": root.hex(),
                    "treeSize": size,
                },
                "signedEntryTimestamp": base64.b64encode(_sign(self.key, promise)).decode(),
            },
        }


OIDC_ISSUER = "https://oidc.anvil-test.invalid"
"""The issuer of the tokens :class:`SigstoreService` mints and its Fulcio accepts."""


class SigstoreService:
    """The private instance over HTTP on 127.0.0.1, as sigstore-python's signer calls it:
    Fulcio's ``/api/v2/signingCert`` (an OIDC token in, a certificate with an embedded SCT
    out) and Rekor v1's ``/api/v1/log/entries``, with an OIDC issuer whose signed tokens
    Fulcio checks. ``ledger sign --trust-config`` then signs for real, not in-process.
    """

    def __init__(self, instance: PrivateSigstore | None = None) -> None:
        self.instance = instance or PrivateSigstore()
        self.oidc_key = ec.generate_private_key(ec.SECP256R1())
        self.log = TransparencyLog(self.instance.log_key)
        self.requests: list[str] = []
        self._lock = threading.Lock()
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def token(self, identity: str, *, lifetime: int = 600, audience: str = "sigstore") -> str:
        """An OIDC identity token for an email identity, signed by this issuer."""
        import jwt

        now = int(time.time())
        claims = {
            "iss": OIDC_ISSUER,
            "aud": audience,
            "sub": identity,
            "email": identity,
            "email_verified": True,
            "iat": now,
            "nbf": now,
            "exp": now + lifetime,
        }
        return jwt.encode(claims, self.oidc_key, algorithm="ES256")

    def trust_config(self) -> dict[str, object]:
        """A sigstore ``ClientTrustConfig``: the trusted root and where to sign."""
        start = {"start": (_EPOCH - datetime.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")}

        def service(url: str) -> dict[str, object]:
            return {"url": url, "majorApiVersion": 1, "validFor": start, "operator": "anvil-test"}

        return {
            "mediaType": "application/vnd.dev.sigstore.clienttrustconfig.v0.1+json",
            "trustedRoot": self.instance.trusted_root(),
            "signingConfig": {
                "mediaType": "application/vnd.dev.sigstore.signingconfig.v0.2+json",
                "caUrls": [service(self.url)],
                "oidcUrls": [service(OIDC_ISSUER)],
                "rekorTlogUrls": [service(self.url)],
                "tsaUrls": [],
                "rekorTlogConfig": {"selector": "ANY"},
                "tsaConfig": {"selector": "ANY"},
            },
        }

    def write_trust_config(self, path: Path) -> Path:
        path.write_text(json.dumps(self.trust_config(), indent=2))
        return path

    def _issue(self, body: dict[str, object], authorization: str) -> tuple[int, object]:
        import jwt

        token = authorization.removeprefix("Bearer ")
        try:
            claims = jwt.decode(
                token,
                self.oidc_key.public_key(),
                algorithms=["ES256"],
                audience="sigstore",
                issuer=OIDC_ISSUER,
            )
        except jwt.PyJWTError as e:
            return 401, {"code": 401, "message": f"error processing the identity token: {e}"}
        request = body.get("certificateSigningRequest")
        if not isinstance(request, str):
            return 400, {"code": 400, "message": "no certificateSigningRequest"}
        csr = x509.load_pem_x509_csr(base64.b64decode(request))
        if not csr.is_signature_valid:
            return 400, {"code": 400, "message": "the CSR's proof of possession is invalid"}
        public = csr.public_key()
        assert isinstance(public, ec.EllipticCurvePublicKey)
        with self._lock:
            self.instance._entries += 1
            issued = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=30)
            cert = self.instance._certificate(public, claims["email"], claims["iss"], issued)
        chain = [
            c.public_bytes(serialization.Encoding.PEM).decode()
            for c in (cert, self.instance.ca_cert)
        ]
        return 201, {"signedCertificateEmbeddedSct": {"chain": {"certificates": chain}}}

    def _enter(self, proposed: dict[str, object]) -> tuple[int, object]:
        from rekor_types import Dsse, Hashedrekord

        kind = proposed.get("kind")
        if kind == "hashedrekord":
            record = Hashedrekord.model_validate(proposed)
            spec = record.spec
            cert = x509.load_pem_x509_certificate(
                base64.b64decode(spec.signature.public_key.content)  # type: ignore[union-attr]
            )
            digest = bytes.fromhex(spec.data.hash.value)  # type: ignore[union-attr]
            signature = base64.b64decode(spec.signature.content)  # type: ignore[arg-type]
            message, algorithm = digest, ec.ECDSA(Prehashed(hashes.SHA256()))
            body = record.model_dump(mode="json", by_alias=True, exclude_none=True)
        elif kind == "dsse":
            record_in = Dsse.model_validate(proposed)
            content = record_in.spec.root.proposed_content  # type: ignore[union-attr]
            envelope = json.loads(content.envelope)
            pem = base64.b64decode(content.verifiers[0])
            cert = x509.load_pem_x509_certificate(pem)
            payload = base64.b64decode(envelope["payload"])
            signature = base64.b64decode(envelope["signatures"][0]["sig"])
            message = pae(envelope["payloadType"], payload)
            algorithm = ec.ECDSA(hashes.SHA256())
            body = {
                "apiVersion": "0.0.1",
                "kind": "dsse",
                "spec": {
                    "envelopeHash": {
                        "algorithm": "sha256",
                        "value": hashlib.sha256(content.envelope.encode()).hexdigest(),
                    },
                    "payloadHash": {
                        "algorithm": "sha256",
                        "value": hashlib.sha256(payload).hexdigest(),
                    },
                    "signatures": [
                        {
                            "signature": envelope["signatures"][0]["sig"],
                            "verifier": content.verifiers[0],
                        }
                    ],
                },
            }
        else:
            return 400, {"code": 400, "message": f"unsupported entry kind {kind!r}"}
        key = cert.public_key()
        assert isinstance(key, ec.EllipticCurvePublicKey)
        try:
            key.verify(signature, message, algorithm)
        except InvalidSignature:
            return 400, {"code": 400, "message": "the entry's signature does not verify"}
        canonical = rfc8785.dumps(body)
        with self._lock:
            entry = self.log.append(canonical, int(time.time()))
        return 201, {_leaf_hash(canonical).hex(): entry}

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        service = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                service.requests.append(self.path)
                if self.path == "/api/v2/signingCert":
                    status, answer = service._issue(body, self.headers.get("Authorization", ""))
                elif self.path == "/api/v1/log/entries":
                    status, answer = service._enter(body)
                else:
                    status, answer = 404, {"code": 404, "message": "not found"}
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_: object) -> None:
                pass

        return Handler
