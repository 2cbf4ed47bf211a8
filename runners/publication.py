"""Signing a publication (sigstore, keyless) and auditing one from a folder or over HTTP(S).

Both need what the core does not have: the network. Signing uses the ambient OIDC
credential of a CI job; an audit fetches a campaign with httpx (size caps, timeouts, no
redirect to another host), then checks it offline.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import attrs
import httpx

from ledger import manifest
from ledger._internal import intoto, jsonio, tree
from ledger.errors import InvalidArtifact, RunnerError
from ledger.hashing import sha256_file
from ledger.signatures import verify_statement
from ledger.verify import Report, verify_paths
from runners.client import url_problem

MAX_FILE_BYTES = 256 << 20
MAX_TOTAL_BYTES = 4 << 30
TIMEOUT = httpx.Timeout(30.0, connect=10.0)


class AuditInputError(RunnerError):
    """The campaign cannot be fetched or read (exit status 2)."""


@attrs.frozen
class AuditResult:
    """What an audit found."""

    ok: bool
    problems: tuple[str, ...]
    """One line each: signature, subjects, and every verify error."""
    report: Report | None


def _get(client: httpx.Client, url: str, budget: list[int]) -> bytes:
    origin = urlsplit(url)
    for _ in range(5):
        with client.stream("GET", url) as response:
            if response.is_redirect:
                target = urljoin(url, response.headers.get("location", ""))
                moved = urlsplit(target)
                if (moved.scheme, moved.netloc) != (origin.scheme, origin.netloc):
                    raise AuditInputError(
                        f"{url}: redirect to another host ({moved.netloc}) refused"
                    )
                url = target
                continue
            if response.status_code != 200:
                raise AuditInputError(f"{url}: HTTP {response.status_code}")
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > MAX_FILE_BYTES:
                    raise AuditInputError(f"{url}: larger than {MAX_FILE_BYTES} bytes")
            budget[0] -= len(body)
            if budget[0] < 0:
                raise AuditInputError(f"campaign larger than {MAX_TOTAL_BYTES} bytes")
            return bytes(body)
    raise AuditInputError(f"{url}: too many redirects")


def fetch(url: str, into: Path) -> Path:
    """Downloads a published campaign (its manifest, seal, statement, bundle and every
    listed artifact) into ``into/<campaign_id>``.

    Raises:
        AuditInputError: unreachable, too large, redirected elsewhere, or a listed path
            that is not a safe campaign-relative path.
    """
    base = url.rstrip("/") + "/"
    budget = [MAX_TOTAL_BYTES]
    with httpx.Client(timeout=TIMEOUT, follow_redirects=False, trust_env=False) as client:
        try:
            manifest_bytes = _get(client, base + manifest.MANIFEST_NAME, budget)
            try:
                listed = jsonio.parse_strict(manifest_bytes)
            except InvalidArtifact as e:
                raise AuditInputError(f"{base}{manifest.MANIFEST_NAME}: {e}") from None
            campaign = listed.get("campaign_id") if isinstance(listed, dict) else None
            if not isinstance(campaign, str) or not tree.CAMPAIGN_NAME.fullmatch(campaign):
                raise AuditInputError(f"{base}{manifest.MANIFEST_NAME}: no valid campaign_id")
            folder = into / campaign
            folder.mkdir(parents=True)
            (folder / manifest.MANIFEST_NAME).write_bytes(manifest_bytes)
            names: list[object] = [manifest.SUMS_NAME, intoto.STATEMENT_NAME, intoto.BUNDLE_NAME]
            names += [e.get("path") for e in listed.get("artifacts", []) if isinstance(e, dict)]
            for name in names:
                if not isinstance(name, str) or tree.check_relative_path(name) is not None:
                    raise AuditInputError(f"manifest lists an unsafe path {name!r}")
                target = folder / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(_get(client, base + name, budget))
        except httpx.HTTPError as e:
            raise AuditInputError(f"{base}: {type(e).__name__}: {e}") from None
    return folder


def audit(
    source: str,
    *,
    identity: str,
    issuer: str,
    trusted_root: str | None = None,
    staging: bool = False,
) -> AuditResult:
    """Checks a published campaign: the statement's signature (offline), every subject's
    digest against the files, then every verify check.

    Raises:
        AuditInputError: the campaign cannot be fetched or read.
        UnusableInputError: the bundle or trusted root cannot be parsed.
    """
    if source.startswith(("http://", "https://")):
        problem = url_problem(source)
        if problem is not None:
            raise AuditInputError(f"{source}: {problem}")
        with tempfile.TemporaryDirectory(prefix="ledger-audit-") as temp:
            return _audit(fetch(source, Path(temp)), identity, issuer, trusted_root, staging)
    folder = Path(source)
    if not folder.is_dir():
        raise AuditInputError(f"{source}: not a folder or an http(s) URL")
    return _audit(folder, identity, issuer, trusted_root, staging)


def _audit(
    folder: Path, identity: str, issuer: str, trusted_root: str | None, staging: bool
) -> AuditResult:
    problems: list[str] = []
    statement_path = folder / intoto.STATEMENT_NAME
    bundle_path = folder / intoto.BUNDLE_NAME
    if not statement_path.exists() or not bundle_path.exists():
        raise AuditInputError(f"{folder}: no {intoto.STATEMENT_NAME} and {intoto.BUNDLE_NAME}")
    statement = statement_path.read_bytes()
    result = verify_statement(
        statement,
        bundle_path.read_bytes(),
        identity=identity,
        issuer=issuer,
        trusted_root=trusted_root,
        staging=staging,
    )
    if not result.ok:
        problems.append(f"signature: {result.reason}")
    subjects = intoto.subjects_of(jsonio.parse_strict(statement)) or {}
    if not subjects:
        problems.append("statement: no subjects")
    # sigstore's verify_dsse checks the signature only: every subject is checked here.
    for name, digest in sorted(subjects.items()):
        path = folder / name
        if tree.check_relative_path(name) is not None or not path.is_file():
            problems.append(f"subject {name!r}: no such file")
            continue
        actual, _ = sha256_file(path)
        if actual != digest:
            problems.append(f"subject {name!r}: sha256 {actual}, the statement says {digest}")
    report = verify_paths([str(folder)], jobs=1)
    problems.extend(
        f"verify: {f.code} {f.path}{'#' + f.pointer if f.pointer else ''}: {f.message}"
        for f in report.findings
        if f.severity == "error"
    )
    return AuditResult(not problems, tuple(problems), report)


def _signer_context() -> Any:
    from sigstore.models import ClientTrustConfig
    from sigstore.oidc import IdentityToken, detect_credential
    from sigstore.sign import SigningContext

    try:
        token = detect_credential()
    except Exception as e:  # noqa: BLE001 - sigstore's detectors raise several types
        raise RunnerError(f"no ambient OIDC credential: {e}") from None
    if token is None:
        raise RunnerError("no ambient OIDC credential (in GitHub Actions, grant 'id-token: write')")
    context = SigningContext.from_trust_config(ClientTrustConfig.production())
    return context.signer(IdentityToken(token))


def sign(folder: str | Path) -> Path:
    """Signs a campaign's statement with sigstore (keyless, ambient OIDC credential).

    Raises:
        RunnerError: no statement, no ambient credential, or sigstore failed.
        SealBroken: the campaign's files differ from its seal.
    """
    from sigstore.dsse import Statement

    root = Path(folder)
    statement_path = root / intoto.STATEMENT_NAME
    if not statement_path.exists():
        raise RunnerError(f"{root}: no {intoto.STATEMENT_NAME}; publish the campaign first")
    # A signature vouches for the statement's subjects: never over files that differ.
    manifest.check_seal(root, "sign")
    try:
        with _signer_context() as signer:
            bundle = signer.sign_dsse(Statement(statement_path.read_bytes()))
    except RunnerError:
        raise
    except Exception as e:  # noqa: BLE001 - network, Fulcio and Rekor errors alike
        raise RunnerError(f"signing failed: {type(e).__name__}: {e}") from None
    target = root / intoto.BUNDLE_NAME
    jsonio.write_atomic(target, bundle.to_json().encode())
    return target


def sign_file(path: str | Path) -> Path:
    """Signs a file's bytes (message signature, keyless); the bundle goes beside it as
    ``<file>.sigstore.json``, the name sigstore's own command line uses.

    Raises:
        RunnerError: no ambient credential, or sigstore failed.
    """
    source = Path(path)
    try:
        with _signer_context() as signer:
            bundle = signer.sign_artifact(source.read_bytes())
    except RunnerError:
        raise
    except Exception as e:  # noqa: BLE001 - network, Fulcio and Rekor errors alike
        raise RunnerError(f"signing failed: {type(e).__name__}: {e}") from None
    target = source.with_name(source.name + manifest.BUNDLE_SUFFIX)
    jsonio.write_atomic(target, bundle.to_json().encode())
    return target
