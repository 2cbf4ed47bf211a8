"""Hostile sigstore bundles: each gets its verdict in one line, never a traceback.

``ledger signature verify`` exits 2 for a bundle sigstore cannot load (not JSON, an
unknown media type, bad base64 or DER, a missing part, a timestamp that is not an RFC 3161
response) and 1 for one that loads and does not verify (see ``ledger/signatures.py``).
Each case is built from the real bundles in ``tests/data/sigstore`` or by the private
instances of ``tests/bundle_cases.py``, and says which words its verdict must contain, so
that a case cannot pass by failing earlier than it means to.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import random
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.serialization import Encoding

from ledger.signatures import SignatureResult, UnusableInputError, verify_bundle, verify_statement
from tests.bundle_cases import (
    DELETE,
    SIGNED_AT,
    CaseSigstore,
    PrivateTSA,
    corrupt_embedded_certificate,
    edited,
    reencoded,
    statement,
)
from tests.conftest import DATA, CliRun

SIGSTORE = DATA / "sigstore"
STAGING_ROOT = json.loads((SIGSTORE / "staging_trusted_root.embedded-4.5.1.json").read_text())
V3 = (SIGSTORE / "bundle_v3.txt").read_bytes()
V3_BUNDLE = (SIGSTORE / "bundle_v3.txt.sigstore").read_bytes()
REKOR2 = (SIGSTORE / "staging-rekor-v2.txt").read_bytes()
REKOR2_BUNDLE = (SIGSTORE / "staging-rekor-v2.txt.sigstore.json").read_bytes()
A_TXT = (SIGSTORE / "a.txt").read_bytes()
DSSE_BUNDLE = (SIGSTORE / "a.dsse.staging-rekor-v2.txt.sigstore.json").read_bytes()
GITHUB = "https://github.com/login/oauth"
WILLIAM = "william@yossarian.net"
JKU = "jku@goto.fi"
BEACON = (
    "https://github.com/sigstore-conformance/extremely-dangerous-public-oidc-beacon/"
    ".github/workflows/extremely-dangerous-oidc-beacon.yml@refs/heads/main"
)
ACTIONS = "https://token.actions.githubusercontent.com"
APPROVER = "approver@anvil.test"
ISSUER = "https://oidc.anvil.test"
APPROVAL = b'{"approved": true, "summary_sha256": "00"}\n'
"""What the private instance signs: JSON, so that it is also a statement to verify."""
ENTRY = "verificationMaterial/tlogEntries/0"
PROOF = f"{ENTRY}/inclusionProof"
TIMESTAMP = "verificationMaterial/timestampVerificationData/rfc3161Timestamps/0/signedTimestamp"


@dataclass(frozen=True)
class Built:
    """One verification to run: the file, its bundle, the policy and the root."""

    data: bytes
    bundle: bytes
    identity: str
    issuer: str
    root: dict[str, Any] | None = None
    """A trusted root to pass with ``--trusted-root``; None: the packaged staging root."""
    name: str = "artifact.txt"


class World:
    """The private instances the cases share: made once, as keys take a while."""

    def __init__(self) -> None:
        self.sigstore = CaseSigstore()
        self.other = CaseSigstore()
        self.tsa = PrivateTSA()
        self.other_tsa = PrivateTSA("anvil-other-tsa")

    @functools.cached_property
    def good(self) -> bytes:
        return self.sigstore.sign(APPROVAL, identity=APPROVER, issuer=ISSUER)

    def root(self, *tsas: dict[str, Any]) -> dict[str, Any]:
        return self.sigstore.root_with(timestampAuthorities=list(tsas))


@functools.cache
def _world() -> World:
    return World()


@dataclass(frozen=True)
class Case:
    id: str
    status: int
    """The exit status ``ledger signature verify`` must give: 0, 1 or 2."""
    says: str
    """Words the verdict line must contain."""
    build: Callable[[World], Built]


Edit = tuple[str, Any]


def _raw(bundle: bytes) -> Callable[[World], Built]:
    return lambda _: Built(V3, bundle, WILLIAM, GITHUB)


def _v3(*edits: Edit) -> Callable[[World], Built]:
    return lambda _: Built(V3, edited(V3_BUNDLE, *edits), WILLIAM, GITHUB)


def _rekor2(
    *edits: Edit, root: Callable[[World], dict[str, Any]] | None = None
) -> Callable[[World], Built]:
    return lambda w: Built(
        REKOR2, edited(REKOR2_BUNDLE, *edits), JKU, GITHUB, root(w) if root else None
    )


def _dsse(*edits: Edit) -> Callable[[World], Built]:
    return lambda _: Built(A_TXT, edited(DSSE_BUNDLE, *edits), BEACON, ACTIONS, name="a.txt")


def _private(
    *edits: Edit, identity: str = APPROVER, issuer: str = ISSUER, data: bytes = APPROVAL
) -> Callable[[World], Built]:
    return lambda w: Built(
        data, edited(w.good, *edits), identity, issuer, w.sigstore.trusted_root()
    )


def _private_dsse(
    payload: Callable[[bytes], bytes] = lambda subject: statement(
        [{"name": "artifact.txt", "digest": {"sha256": hashlib.sha256(subject).hexdigest()}}]
    ),
    **options: Any,
) -> Callable[[World], Built]:
    def build(w: World) -> Built:
        bundle = w.sigstore.sign_dsse(
            payload(APPROVAL), identity=APPROVER, issuer=ISSUER, **options
        )
        return Built(APPROVAL, bundle, APPROVER, ISSUER, w.sigstore.trusted_root())

    return build


def _staging_root(
    tsas: Callable[[World], list[dict[str, Any]]] | None = None, **valid_for: str
) -> Callable[[World], dict[str, Any]]:
    """The staging root with other timestamp authorities, or its own valid otherwise."""

    def root(w: World) -> dict[str, Any]:
        document: dict[str, Any] = json.loads(json.dumps(STAGING_ROOT))
        if tsas is not None:
            document["timestampAuthorities"] = tsas(w)
        for authority in document["timestampAuthorities"]:
            authority["validFor"].update(valid_for)
        return document

    return root


def _flip(index: int) -> Callable[[bytes], bytes]:
    """Flips the low bit of byte ``index`` (negative: from the end)."""

    def flip(raw: bytes) -> bytes:
        at = index % len(raw)
        return raw[:at] + bytes([raw[at] ^ 1]) + raw[at + 1 :]

    return flip


def _chain(*, leaf_first: bool) -> Callable[[World], Built]:
    """The private bundle as v0.2 has it: a chain of the leaf and the root CA."""

    def build(w: World) -> Built:
        ca = base64.b64encode(w.sigstore.ca_cert.public_bytes(Encoding.DER)).decode()
        leaf = json.loads(w.good)["verificationMaterial"]["certificate"]
        chain = [leaf, {"rawBytes": ca}] if leaf_first else [{"rawBytes": ca}, leaf]
        bundle = edited(
            w.good,
            ("mediaType", V2_MEDIA),
            ("verificationMaterial/certificate", DELETE),
            ("verificationMaterial/x509CertificateChain", {"certificates": chain}),
        )
        return Built(APPROVAL, bundle, APPROVER, ISSUER, w.sigstore.trusted_root())

    return build


def _checkpoint_over(root_hash: bytes) -> Callable[[World], Built]:
    """The private bundle, its checkpoint genuinely signed by the log over another root."""

    def build(w: World) -> Built:
        forged = w.sigstore.checkpoint(root_hash, 1)
        bundle = edited(w.good, (f"{PROOF}/checkpoint/envelope", forged))
        return Built(APPROVAL, bundle, APPROVER, ISSUER, w.sigstore.trusted_root())

    return build


def _entry_of_other_artifact(w: World) -> Built:
    """The private bundle with the (genuine, logged) entry of a signature over other bytes."""
    other = json.loads(w.sigstore.sign(b"another artifact\n", identity=APPROVER, issuer=ISSUER))
    bundle = edited(
        w.good, ("verificationMaterial/tlogEntries", other["verificationMaterial"]["tlogEntries"])
    )
    return Built(APPROVAL, bundle, APPROVER, ISSUER, w.sigstore.trusted_root())


def _other_instance(w: World) -> Built:
    bundle = w.other.sign(APPROVAL, identity=APPROVER, issuer=ISSUER)
    return Built(APPROVAL, bundle, APPROVER, ISSUER, w.sigstore.trusted_root())


def _timestamped(
    root: Callable[[World], dict[str, Any]], *, by_other_tsa: bool = False
) -> Callable[[World], Built]:
    """The private bundle timed only by a TSA (``w.tsa`` or ``w.other_tsa``)."""

    def build(w: World) -> Built:
        tsa = w.other_tsa if by_other_tsa else w.tsa
        bundle = w.sigstore.sign_timestamped(APPROVAL, tsa, identity=APPROVER, issuer=ISSUER)
        return Built(APPROVAL, bundle, APPROVER, ISSUER, root(w))

    return build


def _dsse_timestamp() -> str:
    material = json.loads(DSSE_BUNDLE)["verificationMaterial"]
    token: str = material["timestampVerificationData"]["rfc3161Timestamps"][0]["signedTimestamp"]
    return token


def _without_payload_hash(body: dict[str, Any]) -> dict[str, Any]:
    # Rekor's schema also admits an entry that carries only the proposed content.
    return {**body, "spec": {"proposedContent": {"envelope": "{}", "verifiers": ["eA=="]}}}


def _payload_hash_of_other_bytes(body: dict[str, Any]) -> dict[str, Any]:
    body["spec"]["payloadHash"]["value"] = hashlib.sha256(b"other payload").hexdigest()
    return body


BAD_BASE64 = "not base64!"
"""pydantic skips characters outside the alphabet: what is left must have a bad length."""
NO_TIME = "not enough sources of verified time"
V2_MEDIA = "application/vnd.dev.sigstore.bundle+json;version=0.2"

CASES = [
    # Controls: the same machinery accepts the genuine bundles.
    Case("control-staging-v3", 0, "OK: ", _v3()),
    Case("control-staging-rekor-v2-timestamped", 0, "OK: ", _rekor2()),
    Case("control-private", 0, "OK: ", _private()),
    Case(
        "control-private-timestamped", 0, "OK: ", _timestamped(lambda w: w.root(w.tsa.authority()))
    ),
    Case("control-private-dsse", 0, "names the file", _private_dsse()),
    # sigstore only logs this one: the warning joins the verdict's line.
    Case(
        "certificate-chain-with-root-ca",
        0,
        "(sigstore warns: this bundle contains a root CA",
        _chain(leaf_first=True),
    ),
    # Not a bundle at all: 2.
    Case("json-malformed", 2, "JSONDecodeError", _raw(b'{"mediaType": ')),
    Case("json-empty", 2, "JSONDecodeError", _raw(b"")),
    Case("json-not-an-object", 2, "Input should be an object", _raw(b'["a bundle"]')),
    Case("json-nested-too-deep", 2, "RecursionError", _raw(b"[" * 100_000 + b"]" * 100_000)),
    Case(
        "media-type-unknown",
        2,
        "mediaType: Input should be",
        _v3(("mediaType", "application/vnd.dev.sigstore.bundle.v0.9+json")),
    ),
    Case("media-type-absent", 2, "mediaType: Field required", _v3(("mediaType", DELETE))),
    Case(
        "media-type-v0.1-on-v0.3-material",
        2,
        "expected certificate chain",
        _v3(("mediaType", V2_MEDIA.replace("0.2", "0.1"))),
    ),
    Case(
        "media-type-v0.2-on-v0.3-material",
        2,
        "expected certificate chain",
        _v3(("mediaType", V2_MEDIA)),
    ),
    Case(
        "certificate-bad-base64",
        2,
        "certificate.rawBytes",
        _v3(("verificationMaterial/certificate/rawBytes", BAD_BASE64)),
    ),
    Case(
        "certificate-not-der",
        2,
        "ValueError: error parsing asn1",
        _v3(
            (
                "verificationMaterial/certificate/rawBytes",
                base64.b64encode(b"not a certificate").decode(),
            )
        ),
    ),
    Case(
        "certificate-absent",
        2,
        "Exactly one of publicKey, x509CertificateChain, or certificate",
        _v3(("verificationMaterial/certificate", DELETE)),
    ),
    Case(
        "certificate-chain-empty",
        2,
        "expected non-empty certificate chain",
        _v3(
            ("mediaType", V2_MEDIA),
            ("verificationMaterial/certificate", DELETE),
            ("verificationMaterial/x509CertificateChain", {"certificates": []}),
        ),
    ),
    Case(
        "certificate-chain-root-first",
        2,
        "invalid leaf or non-leaf certificate in the leaf position",
        _chain(leaf_first=False),
    ),
    Case(
        "verification-material-absent",
        2,
        "verificationMaterial: Field required",
        _v3(("verificationMaterial", DELETE)),
    ),
    Case(
        "signature-bad-base64",
        2,
        "messageSignature.signature",
        _v3(("messageSignature/signature", BAD_BASE64)),
    ),
    Case(
        "digest-bad-base64",
        2,
        "messageDigest.digest",
        _v3(("messageSignature/messageDigest/digest", BAD_BASE64)),
    ),
    Case(
        "canonicalized-body-bad-base64",
        2,
        "canonicalizedBody",
        _v3((f"{ENTRY}/canonicalizedBody", BAD_BASE64)),
    ),
    Case(
        "tlog-entries-empty",
        2,
        "expected exactly one log entry",
        _v3(("verificationMaterial/tlogEntries", [])),
    ),
    Case("inclusion-proof-absent", 2, "inclusionProof: Field required", _v3((PROOF, DELETE))),
    Case(
        "inclusion-proof-index-out-of-range",
        2,
        "must be less than tree",
        _v3((f"{PROOF}/logIndex", "25901138")),
    ),
    Case(
        "signature-and-envelope",
        2,
        "Exactly one of messageSignature or dsseEnvelope",
        _dsse(("messageSignature", json.loads(V3_BUNDLE)["messageSignature"])),
    ),
    Case(
        "timestamp-not-rfc3161",
        2,
        "Invalid Timestamp Response",
        _rekor2((TIMESTAMP, base64.b64encode(b"not a timestamp response").decode())),
    ),
    Case(
        "timestamp-bad-base64",
        2,
        "signedTimestamp: Value error, Invalid base64",
        _rekor2((TIMESTAMP, BAD_BASE64)),
    ),
    # Loads, and does not verify: 1.
    Case("identity-wrong", 1, "SANs do not match", _private(identity="mallory@anvil.test")),
    Case("issuer-wrong", 1, "OIDCIssuer does not match", _private(issuer="https://elsewhere.test")),
    Case(
        "certificate-other-instance",
        1,
        "failed to build timestamp certificate chain",
        _other_instance,
    ),
    Case(
        "file-changed",
        1,
        "Bundle message digest mismatch",
        _private(data=APPROVAL.replace(b"true", b"false")),
    ),
    Case(
        "signature-other-bytes",
        1,
        "Signature is invalid for input",
        _v3(("messageSignature/signature", reencoded(_flip(-1)))),
    ),
    Case(
        "log-entry-of-other-artifact",
        1,
        "transparency log entry is inconsistent",
        _entry_of_other_artifact,
    ),
    Case(
        "log-entry-kind-dsse",
        1,
        "Expected entry type hashedrekord, got dsse",
        _v3((f"{ENTRY}/kindVersion/kind", "dsse")),
    ),
    Case(
        "inclusion-proof-root-hash",
        1,
        "inclusion proof contains invalid root hash",
        _v3((f"{PROOF}/rootHash", reencoded(_flip(0)))),
    ),
    Case(
        "inclusion-proof-tree-size",
        1,
        "inclusion proof has wrong size",
        _v3((f"{PROOF}/treeSize", "99999999")),
    ),
    Case(
        "inclusion-proof-hash",
        1,
        "inclusion proof contains invalid root hash",
        _v3((f"{PROOF}/hashes/3", reencoded(_flip(5)))),
    ),
    Case(
        "inclusion-proof-hash-missing",
        1,
        "inclusion proof has wrong size",
        _v3((f"{PROOF}/hashes", lambda h: h[:-1])),
    ),
    Case(
        "checkpoint-signature",
        1,
        "checkpoint: invalid signature",
        _v3((f"{PROOF}/checkpoint/envelope", lambda e: e.replace("0y8wozBF", "0y8wozBG"))),
    ),
    Case(
        "checkpoint-origin",
        1,
        "checkpoint: invalid signature",
        _v3(
            (
                f"{PROOF}/checkpoint/envelope",
                lambda e: e.replace("rekor.sigstage.dev - ", "rekor.example.com - ", 1),
            )
        ),
    ),
    Case(
        "checkpoint-garbage",
        1,
        "note must contain one blank line",
        _v3((f"{PROOF}/checkpoint/envelope", "garbage")),
    ),
    Case(
        "checkpoint-over-other-root",
        1,
        "Inclusion proof contains invalid root hash signature",
        _checkpoint_over(b"\x42" * 32),
    ),
    Case(
        "inclusion-promise-signature",
        1,
        "SET: invalid inclusion promise",
        _v3((f"{ENTRY}/inclusionPromise/signedEntryTimestamp", reencoded(_flip(-1)))),
    ),
    Case(
        "inclusion-promise-other-time",
        1,
        "SET: invalid inclusion promise",
        _v3((f"{ENTRY}/integratedTime", "1712085550")),
    ),
    Case(
        "integrated-time-far-future",
        1,
        "OSError",
        _v3((f"{ENTRY}/integratedTime", "99999999999999999")),
    ),
    Case(
        "timestamp-tsa-not-in-root",
        1,
        NO_TIME,
        _rekor2(root=_staging_root(lambda w: [w.tsa.authority()])),
    ),
    Case(
        "timestamp-tsa-expired", 1, NO_TIME, _rekor2(root=_staging_root(end="2025-05-01T00:00:00Z"))
    ),
    Case("timestamp-over-other-signature", 1, NO_TIME, _rekor2((TIMESTAMP, _dsse_timestamp()))),
    Case(
        "timestamp-embedded-certificate-corrupt",
        1,
        "InvalidVersion",
        _rekor2((TIMESTAMP, reencoded(corrupt_embedded_certificate))),
    ),
    Case(
        "timestamp-private-untrusted-tsa",
        1,
        NO_TIME,
        _timestamped(lambda w: w.root(w.tsa.authority()), by_other_tsa=True),
    ),
    Case(
        "timestamp-private-expired-tsa",
        1,
        NO_TIME,
        _timestamped(lambda w: w.root(w.tsa.authority(end=SIGNED_AT))),
    ),
    Case(
        "timestamp-private-root-without-tsa",
        1,
        "no Timestamp Authorities have been provided",
        _timestamped(lambda w: w.root()),
    ),
    Case(
        "dsse-payload-changed",
        1,
        "DSSE: invalid signature",
        _dsse(("dsseEnvelope/payload", reencoded(lambda p: p.replace(b"a.txt", b"b.txt")))),
    ),
    Case(
        "dsse-signature-changed",
        1,
        NO_TIME,
        _dsse(
            (
                "dsseEnvelope/signatures/0/sig",
                json.loads(V3_BUNDLE)["messageSignature"]["signature"],
            )
        ),
    ),
    Case(
        "dsse-no-signature",
        1,
        "envelope must contain exactly one signature",
        _dsse(("dsseEnvelope/signatures", [])),
    ),
    Case("dsse-subject-mismatch", 1, "no subject matches the file", _dsse()),
    Case(
        "dsse-payload-other-than-logged",
        1,
        "log entry payload hash does not match",
        _private_dsse(body=_payload_hash_of_other_bytes),
    ),
    Case(
        "dsse-log-entry-without-payload-hash",
        1,
        "AttributeError",
        _private_dsse(body=_without_payload_hash),
    ),
    Case(
        "dsse-payload-type-not-in-toto",
        1,
        "is not in-toto",
        _private_dsse(payload_type="text/plain"),
    ),
    Case(
        "dsse-subject-not-a-list",
        1,
        "the statement names no such file",
        _private_dsse(payload=lambda _: statement("artifact.txt")),
    ),
    Case(
        "dsse-payload-not-json",
        1,
        "DSSE payload is not JSON",
        _private_dsse(payload=lambda _: b"\xff not json"),
    ),
]


def _run(cli: CliRun, built: Built, folder: Path) -> tuple[int, str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    file = folder / built.name
    file.write_bytes(built.data)
    bundle = folder / "bundle.sigstore.json"
    bundle.write_bytes(built.bundle)
    root = ["--staging"]
    if built.root is not None:
        (folder / "trusted_root.json").write_text(json.dumps(built.root))
        root = ["--trusted-root", str(folder / "trusted_root.json")]
    return cli(
        "signature", "verify", str(file), "--bundle", str(bundle),
        "--identity", built.identity, "--issuer", built.issuer, *root,
    )  # fmt: skip


VERDICT = {0: "OK: ", 1: "FAIL: ", 2: "ledger signature verify: error: "}
"""How ``_signature_verify`` starts its one line: on stdout for 0 and 1, stderr for 2."""


def _problems(case: Case, status: int, out: str, err: str) -> list[str]:
    """What is wrong with one run's outcome; empty when it is the expected verdict."""
    problems = []
    if status != case.status:
        problems.append(f"exit {status}, expected {case.status}")
    both = out + err
    for word in ("Traceback", "internal error", "input_value"):
        if word in both:
            problems.append(f"{word!r} in the output")
    lines = both.splitlines()
    if len(lines) != 1:
        problems.append(f"{len(lines)} lines of output, expected one")
    stream = err if case.status == 2 else out
    if not stream.startswith(VERDICT[case.status]):
        problems.append(f"the verdict does not start with {VERDICT[case.status]!r}")
    if case.says not in both:
        problems.append(f"{case.says!r} is not in the verdict")
    return [f"{case.id}: {p}: {both!r}" for p in problems]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_hostile_bundle_gets_its_verdict(case: Case, cli: CliRun, tmp_path: Path) -> None:
    status, out, err = _run(cli, case.build(_world()), tmp_path)
    assert not _problems(case, status, out, err)


def test_every_case_has_a_stable_id_and_the_table_covers_both_verdicts() -> None:
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))
    statuses = [c.status for c in CASES]
    assert statuses.count(1) >= 25 and statuses.count(2) >= 15 and statuses.count(0) >= 3


def test_summary_of_all_hostile_bundles(
    cli: CliRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    problems = []
    for case in CASES:
        status, out, err = _run(cli, case.build(_world()), tmp_path / case.id)
        problems += _problems(case, status, out, err)
    expected = len(CASES) - len({p.split(":", 1)[0] for p in problems})
    line = f"hostile bundles: {len(CASES)} cases, {expected} gave the expected verdict"
    with capsys.disabled():
        print(f"\n{line}")
    assert not problems, "\n".join(problems)
    assert expected == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_verify_statement_raises_nothing_but_unusable_input(case: Case, tmp_path: Path) -> None:
    """``ledger audit`` verifies a published statement with this: the same verdicts."""
    built = case.build(_world())
    root = None
    if built.root is not None:
        root = tmp_path / "trusted_root.json"
        root.write_text(json.dumps(built.root))
    check = functools.partial(
        verify_statement,
        built.data,
        built.bundle,
        identity=built.identity,
        issuer=built.issuer,
        trusted_root=root,
        staging=root is None,
    )
    if case.status == 2:
        with pytest.raises(UnusableInputError) as raised:
            check()
        assert len(raised.value.diagnostics().splitlines()) == 1
        return
    result = check()
    assert isinstance(result, SignatureResult)
    assert len(result.reason.splitlines()) == 1
    if case.status == 1:
        # The statement is the signed file here: a bundle that does not verify over it
        # fails as a statement too.
        assert not result.ok


def test_the_reported_traceback_in_a_real_process(tmp_path: Path) -> None:
    """The bug reported: a timestamp sigstore could not read escaped while the bundle was
    loaded. A real process, as a user runs it: one line, no traceback."""
    for case_id in ("timestamp-not-rfc3161", "timestamp-private-untrusted-tsa"):
        case = next(c for c in CASES if c.id == case_id)
        built = case.build(_world())
        folder = tmp_path / case_id
        folder.mkdir()
        (folder / built.name).write_bytes(built.data)
        (folder / "bundle.json").write_bytes(built.bundle)
        root = ["--staging"]
        if built.root is not None:
            (folder / "root.json").write_text(json.dumps(built.root))
            root = ["--trusted-root", str(folder / "root.json")]
        done = subprocess.run(
            [sys.executable, "-m", "ledger", "signature", "verify", str(folder / built.name),
             "--bundle", str(folder / "bundle.json"), "--identity", built.identity,
             "--issuer", built.issuer, *root],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == case.status, done.stderr
        assert not _problems(case, done.returncode, done.stdout, done.stderr)


def _strings(node: Any, path: str = "") -> list[str]:
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in _strings(v, f"{path}/{k}".lstrip("/"))]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in _strings(v, f"{path}/{i}")]
    return [path] if isinstance(node, str) else []


def _mutate(rng: random.Random, raw: bytes) -> bytes:
    at = rng.randrange(len(raw)) if raw else 0
    match rng.randrange(4):
        case 0:
            return raw[:at] + bytes([raw[at] ^ (1 << rng.randrange(8))]) + raw[at + 1 :]
        case 1:
            return raw[:at]
        case 2:
            return raw + rng.randbytes(rng.randrange(1, 8))
        case _:
            return raw[:at] + rng.choice([b"\x00", b"\xff", b"\x30\x80", b"\x02\x01"]) + raw[at:]


def test_mutated_bundles_never_raise_anything_else(tmp_path: Path) -> None:
    """Beyond the table: bytes changed at random (seeded) in every string of the real
    bundles and a private one, decoded first where the field is base64, so that the DER
    parsers see them. Each must verify, fail or be unusable, in one line."""
    world = _world()
    rng = random.Random(14)
    bundles = [
        (V3, V3_BUNDLE, WILLIAM, GITHUB, None),
        (REKOR2, REKOR2_BUNDLE, JKU, GITHUB, None),
        (A_TXT, DSSE_BUNDLE, BEACON, ACTIONS, None),
        (
            APPROVAL,
            world.sigstore.sign_timestamped(APPROVAL, world.tsa, identity=APPROVER, issuer=ISSUER),
            APPROVER,
            ISSUER,
            world.root(world.tsa.authority()),
        ),
    ]
    verdicts: dict[str, int] = {}
    for data, bundle, identity, issuer, root_document in bundles:
        root = None
        if root_document is not None:
            root = tmp_path / "root.json"
            root.write_text(json.dumps(root_document))
        for path in _strings(json.loads(bundle)):
            for _ in range(6):

                def change(text: str) -> str:
                    try:
                        raw = base64.b64decode(text, validate=True)
                    except ValueError:
                        return _mutate(rng, text.encode()).decode("utf-8", "replace")
                    return base64.b64encode(_mutate(rng, raw)).decode()

                try:
                    result = verify_bundle(
                        data,
                        edited(bundle, (path, change)),
                        identity=identity,
                        issuer=issuer,
                        trusted_root=root,
                        staging=root is None,
                    )
                except UnusableInputError as e:
                    verdict, line = "unusable", e.diagnostics()
                else:
                    verdict, line = ("verified" if result.ok else "failed"), result.reason
                assert len(line.splitlines()) == 1, (path, line)
                verdicts[verdict] = verdicts.get(verdict, 0) + 1
    assert verdicts["unusable"] and verdicts["failed"]


def test_a_root_that_pins_no_transparency_log_is_unusable(cli: CliRun, tmp_path: Path) -> None:
    """Not a bundle, but met on the same path: sigstore refused it while building the
    verifier, outside the guarded calls."""
    world = _world()
    built = Built(APPROVAL, world.good, APPROVER, ISSUER, world.sigstore.root_with(tlogs=[]))
    status, out, err = _run(cli, built, tmp_path)
    assert (status, out) == (2, "")
    assert err.startswith("ledger signature verify: error: trusted root ")
    assert "trusted root contains no transparency log instances" in err
    assert len(err.splitlines()) == 1
