"""Signing a publication (sigstore, keyless) and auditing one from a folder or over HTTP(S).

Both need what the core does not have: the network. Signing uses the ambient OIDC
credential of a CI job; an audit fetches a campaign with httpx (size caps, timeouts, no
redirect to another host), then checks it offline.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import attrs
import httpx

from ledger import signatures
from ledger.errors import InvalidArtifact, RunnerError, UsageError, printable
from ledger.evidence import manifest, tree
from ledger.formats import jsonio
from ledger.formats.outputs import Changes, OutputExists
from ledger.formats.regular import read_regular
from ledger.hashing import sha256_file
from ledger.promotion.policy import Policy
from ledger.signatures import verify_statement
from ledger.verification import Report, verify_paths
from runners.client import url_problem

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_TOTAL_BYTES",
    "AuditInputError",
    "AuditResult",
    "ExpectedSummary",
    "FetchLimits",
    "SigningSetup",
    "audit",
    "fetch",
    "sign",
    "sign_file",
    "sign_summary",
]

MAX_FILE_BYTES = 256 << 20
MAX_TOTAL_BYTES = 4 << 30


class AuditInputError(RunnerError):
    """The campaign cannot be fetched or read (exit status 2)."""


@attrs.frozen
class FetchLimits:
    """What an audit over HTTP accepts from a server it does not trust."""

    max_file_bytes: int = MAX_FILE_BYTES
    max_total_bytes: int = MAX_TOTAL_BYTES
    stall_s: float = 30.0
    """The longest wait for a connection or for the next bytes of a response."""
    deadline_s: float = 3600.0
    """The whole fetch: a server that trickles a byte at a time cannot hold an audit."""


@attrs.frozen
class AuditResult:
    """What an audit found."""

    ok: bool
    problems: tuple[str, ...]
    """One line each: signature, subjects, and every verify error."""
    report: Report | None


class _Fetcher:
    def __init__(self, client: httpx.Client, limits: FetchLimits) -> None:
        self.client = client
        self.limits = limits
        self.left = limits.max_total_bytes
        self.until = time.monotonic() + limits.deadline_s

    def get(self, url: str, *, missing_ok: bool = False) -> bytes | None:
        origin = urlsplit(url)
        for _ in range(5):
            with self.client.stream("GET", url) as response:
                if response.is_redirect:
                    target = urljoin(url, response.headers.get("location", ""))
                    moved = urlsplit(target)
                    if (moved.scheme, moved.netloc) != (origin.scheme, origin.netloc):
                        raise AuditInputError(
                            f"{url}: redirect to {moved.scheme}://{moved.netloc} refused "
                            "(only to the same scheme and host)"
                        )
                    url = target
                    continue
                if response.status_code == 404 and missing_ok:
                    return None
                if response.status_code != 200:
                    raise AuditInputError(f"{url}: HTTP {response.status_code}")
                return self._body(url, response)
        raise AuditInputError(f"{url}: too many redirects")

    def _body(self, url: str, response: httpx.Response) -> bytes:
        cap = min(self.limits.max_file_bytes, self.left)
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > cap:
            raise AuditInputError(f"{url}: {declared} bytes, over the cap of {cap}")
        body = bytearray()
        for chunk in response.iter_bytes():
            body += chunk
            if len(body) > cap:
                raise AuditInputError(f"{url}: more than the cap of {cap} bytes")
            if time.monotonic() > self.until:
                raise AuditInputError(
                    f"{url}: the fetch took longer than {self.limits.deadline_s:g} s"
                )
        self.left -= len(body)
        return bytes(body)


def fetch(url: str, into: Path, limits: FetchLimits | None = None) -> Path:
    """Downloads a published campaign (its manifest, seal, statement, bundle and every
    listed artifact) into ``into/<campaign_id>``.

    Raises:
        AuditInputError: unreachable, too large, too slow, redirected elsewhere, or a
            listed path that is not a safe campaign-relative path.
    """
    limits = limits or FetchLimits()
    base = url.rstrip("/") + "/"
    timeout = httpx.Timeout(limits.stall_s)
    with httpx.Client(timeout=timeout, follow_redirects=False, trust_env=False) as client:
        fetcher = _Fetcher(client, limits)
        try:
            manifest_bytes = fetcher.get(base + manifest.MANIFEST_NAME) or b""
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
            names: list[object] = [manifest.SUMS_NAME]
            names += [e.get("path") for e in listed.get("artifacts", []) if isinstance(e, dict)]
            declared = listed.get("seals")
            declared = declared if isinstance(declared, list) else []
            names += declared
            # What the manifest declares must be there; an older one declares nothing, and
            # a bundle added without re-sealing is still what the audit checks.
            optional = [
                n for n in (signatures.STATEMENT_NAME, signatures.BUNDLE_NAME) if n not in names
            ]
            for name in names + optional:
                if not isinstance(name, str) or tree.check_relative_path(name) is not None:
                    raise AuditInputError(f"manifest lists an unsafe path {printable(repr(name))}")
            _refuse_file_and_folder([n for n in names if isinstance(n, str)], base)
            for name in names + optional:
                assert isinstance(name, str)
                data = fetcher.get(base + name, missing_ok=name in optional)
                if data is not None:
                    target = folder / name
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(data)
        except httpx.TimeoutException as e:
            raise AuditInputError(
                f"{base}: no answer for {limits.stall_s:g} s ({type(e).__name__})"
            ) from None
        except httpx.HTTPError as e:
            raise AuditInputError(f"{base}: {type(e).__name__}: {printable(str(e))}") from None
        except OSError as e:
            # The copy lies in a temporary folder of ours: its path says nothing to the user.
            raise AuditInputError(
                f"{base}: the fetched copy cannot be written: {e.strerror}"
            ) from None
    return folder


def _refuse_file_and_folder(names: list[str], base: str) -> None:
    """A path listed both as a file and as a folder of another (``x`` and ``x/y``): no
    folder holds both, so no campaign published either as listed."""
    listed = set(names)
    for name in sorted(listed):
        parts = name.split("/")
        for end in range(1, len(parts)):
            folder = "/".join(parts[:end])
            if folder in listed:
                raise AuditInputError(
                    f"{base}{manifest.MANIFEST_NAME}: lists {printable(repr(folder))} as a file "
                    f"and as the folder of {printable(repr(name))}"
                )


def audit(
    source: str,
    *,
    identity: str,
    issuer: str,
    trusted_root: str | None = None,
    staging: bool = False,
    limits: FetchLimits | None = None,
    tickets: str | None = None,
    summary: ExpectedSummary | None = None,
    policy: Policy | None = None,
) -> AuditResult:
    """Checks a published campaign: the statement's signature (offline), every subject's
    digest against the files, then every verify check; and, when given, a gate's signed
    verification summary of it.

    Args:
        limits: what a fetch over HTTP accepts.
        tickets: where linked tickets that the campaign does not publish itself are.
        summary: the verification summary to check, and what it must say.
        policy: the promotion policy a summary claiming promotion must meet (default: the
            shipped one).

    Raises:
        AuditInputError: the campaign cannot be fetched or read.
        UnusableInputError: the bundle or trusted root cannot be parsed.
    """
    if source.startswith(("http://", "https://")):
        problem = url_problem(source)
        parts = urlsplit(source) if problem is None or "credentials" in problem else None
        if parts is not None and (parts.username is not None or parts.password is not None):
            # Never echoed: the URL holds what looks like a secret.
            raise AuditInputError(
                f"{parts.scheme}://<credentials>@{parts.hostname}/...: holds credentials "
                "(user:password@); a publication is fetched without them"
            )
        if problem is not None:
            raise AuditInputError(f"{source}: {problem}")
        with tempfile.TemporaryDirectory(prefix="ledger-audit-") as temp:
            folder = fetch(source, Path(temp), limits)
            shown = source.rstrip("/")
            return _audit(
                folder, identity, issuer, trusted_root, staging, tickets, shown, summary, policy
            )
    folder = Path(source)
    if not folder.is_dir():
        what = "not a folder" if folder.exists() else "no such folder"
        raise AuditInputError(f"{source}: {what}, and not an http(s) URL")
    return _audit(
        folder, identity, issuer, trusted_root, staging, tickets, str(folder), summary, policy
    )


def _audit(
    folder: Path,
    identity: str,
    issuer: str,
    trusted_root: str | None,
    staging: bool,
    tickets: str | None,
    shown: str,
    summary: ExpectedSummary | None = None,
    policy: Policy | None = None,
) -> AuditResult:
    problems: list[str] = []
    statement_path = folder / signatures.STATEMENT_NAME
    bundle_path = folder / signatures.BUNDLE_NAME
    if not statement_path.exists():
        raise AuditInputError(
            f"{shown}: no {signatures.STATEMENT_NAME}: not a published campaign (ledger publish)"
        )
    statement = statement_path.read_bytes()
    if not bundle_path.exists():
        problems.append(f"signature: no {signatures.BUNDLE_NAME}: the campaign is not signed")
    else:
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
    subjects = signatures.subjects_of(jsonio.parse_strict(statement)) or {}
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
    report = verify_paths([str(folder)], jobs=1, tickets=tickets, policy=policy)
    for f in report.findings:
        if f.severity == "error":
            # Named as the auditor gave it, never as the temporary copy of a fetch.
            where = shown + f.path.removeprefix(str(folder))
            problems.append(
                f"verify: {f.code} {where}{'#' + f.pointer if f.pointer else ''}: {f.message}"
            )
    if summary is not None:
        problems += [
            f"verification summary {summary.path}: {p}"
            for p in _summary_problems(folder, summary, trusted_root, staging)
        ]
    return AuditResult(not problems, tuple(problems), report)


@attrs.frozen
class ExpectedSummary:
    """A gate's verification summary of the audited campaign, and who and what it must
    name: the summary is trusted for its signer and its policy, never for its own word."""

    path: str
    """The statement ``ledger gate --attest`` wrote; its bundle is ``<path>.sigstore.json``."""
    policy_sha256: str
    """The digest of the policy the gate must have applied (``ledger gate`` prints it)."""
    identity: str
    issuer: str


def read_summary(expected: ExpectedSummary) -> tuple[bytes, bytes | None]:
    """The summary's bytes and its bundle's (None when it has none).

    Raises:
        AuditInputError: the summary cannot be read.
    """
    path = Path(expected.path)
    bundle = path.with_name(path.name + manifest.BUNDLE_SUFFIX)
    try:
        data = jsonio.read_limited(path, what="statements")
        signed = (
            jsonio.read_limited(bundle, signatures.MAX_BUNDLE_BYTES, what="bundles")
            if bundle.exists()
            else None
        )
    except OSError as e:
        raise AuditInputError(f"{e.filename or path}: {e.strerror or e}") from None
    except InvalidArtifact as e:
        raise AuditInputError(str(e)) from None
    return data, signed


def _summary_problems(
    folder: Path, expected: ExpectedSummary, trusted_root: str | None, staging: bool
) -> list[str]:
    data, bundle = read_summary(expected)
    problems = []
    if bundle is None:
        problems.append(f"no {Path(expected.path).name}{manifest.BUNDLE_SUFFIX}: it is not signed")
    else:
        result = verify_statement(
            data,
            bundle,
            identity=expected.identity,
            issuer=expected.issuer,
            trusted_root=trusted_root,
            staging=staging,
        )
        if not result.ok:
            problems.append(f"signature: {result.reason}")
    try:
        document = jsonio.parse_strict(data)
    except InvalidArtifact as e:
        return [*problems, f"does not parse: {e}"]
    digest, campaign_id = _manifest_of(folder)
    return problems + signatures.summary_problems(
        document,
        campaign_id=campaign_id,
        manifest_sha256=digest,
        policy_sha256=expected.policy_sha256,
    )


def _manifest_of(folder: Path) -> tuple[str, str]:
    """The sha256 of the campaign's ``manifest.json``, read once, and the campaign id it
    states (a fetched copy's folder is named so; else the folder's name)."""
    try:
        data = read_regular(folder / manifest.MANIFEST_NAME)
    except OSError:  # missing, or no regular file (a FIFO is refused, never read)
        return "(no manifest.json)", folder.resolve().name
    try:
        listed = jsonio.parse_strict(data)
    except InvalidArtifact:
        listed = None
    stated = listed.get("campaign_id") if isinstance(listed, dict) else None
    name = stated if isinstance(stated, str) else folder.resolve().name
    return hashlib.sha256(data).hexdigest(), name


@attrs.frozen
class SigningSetup:
    """Where and as whom to sign: sigstore's public instance by default."""

    identity_token: str | None = None
    """An OIDC identity token; None: the ambient credential of a CI job."""
    trust_config: str | None = None
    """A sigstore ClientTrustConfig file (a private instance's root and service URLs)."""
    staging: bool = False
    """sigstore's staging instance instead of production."""


def _identity(setup: SigningSetup) -> Any:
    """The identity token, checked before anything goes over the network."""
    from sigstore.oidc import IdentityError, IdentityToken, detect_credential

    token = setup.identity_token
    if token is None:
        try:
            token = detect_credential()
        except Exception as e:  # noqa: BLE001 - sigstore's detectors raise several types
            raise RunnerError(f"no ambient OIDC credential: {_described(e)}") from None
    if token is None:
        raise RunnerError(
            "no identity token: give --identity-token (or SIGSTORE_IDENTITY_TOKEN), or run in "
            "a CI job with an ambient OIDC credential (GitHub Actions: 'id-token: write')"
        )
    try:
        return IdentityToken(token)
    except IdentityError as e:
        # A given token that is not a token is a bad argument (exit 2); an ambient one
        # that the CI job offers is its own failure.
        error = UsageError if setup.identity_token is not None else RunnerError
        raise error(f"the identity token is not usable: {_described(e)}") from None


def _signing_context(setup: SigningSetup) -> Any:
    from sigstore.models import ClientTrustConfig
    from sigstore.sign import SigningContext

    if setup.trust_config is not None:
        try:
            raw = jsonio.read_limited(setup.trust_config, 4 << 20, what="trust configs")
            return SigningContext.from_trust_config(ClientTrustConfig.from_json(raw.decode()))
        except OSError as e:
            raise UsageError(f"{setup.trust_config}: {e.strerror or e}") from None
        except Exception as e:  # noqa: BLE001 - the parser raises several types
            raise UsageError(
                f"{setup.trust_config}: not a sigstore client trust config ({type(e).__name__})"
            ) from None
    try:
        config = ClientTrustConfig.staging() if setup.staging else ClientTrustConfig.production()
        return SigningContext.from_trust_config(config)
    except Exception as e:  # noqa: BLE001 - TUF's network and metadata errors alike
        raise RunnerError(f"cannot fetch sigstore's trust config: {_described(e)}") from None


@contextlib.contextmanager
def _signer_context(setup: SigningSetup) -> Iterator[tuple[Any, str]]:
    """A sigstore signer, and who it signs as (``identity (issuer)``)."""
    # A private instance's config is read first (an unusable one is a usage error); sigstore's
    # own is fetched only once the token is known to be usable.
    context = _signing_context(setup) if setup.trust_config is not None else None
    identity = _identity(setup)
    # urllib3 logs each retry of an unreachable host; the one line of the error says it.
    quiet = logging.getLogger("urllib3")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        context = context or _signing_context(setup)
        with context.signer(identity) as signer:
            yield signer, f"{identity.identity} ({identity.issuer})"
    finally:
        quiet.setLevel(level)


def _signed(setup: SigningSetup | None, sign: Callable[[Any], Any]) -> tuple[bytes, str]:
    """The bundle ``sign(signer)`` makes, as JSON bytes, and who signed it (``identity
    (issuer)``); a failure of the network, Fulcio or Rekor is one RunnerError."""
    try:
        with _signer_context(setup or SigningSetup()) as (signer, who):
            bundle = sign(signer)
    except (RunnerError, UsageError):
        raise
    except Exception as e:  # noqa: BLE001 - network, Fulcio and Rekor errors alike
        raise RunnerError(f"signing failed: {_described(e)}") from None
    return bundle.to_json().encode(), who


def _described(error: Exception) -> str:
    # sigstore's errors often carry the reason only in their cause (an expired token, the
    # HTTP status Fulcio answered).
    parts = [str(error), str(error.__cause__ or "")]
    detail = ": ".join(p for p in dict.fromkeys(parts) if p) or "no detail"
    return f"{type(error).__name__}: {printable(' '.join(detail.split()))}"


def _statement_for(root: Path) -> dict[str, bytes]:
    """Nothing when the campaign has a statement; for a public campaign published before
    statements existed, one whose predicate names its decision and no sanitizer (its files
    were not made public by ``ledger publish``)."""
    if (root / signatures.STATEMENT_NAME).exists():
        return {}
    if not (root / manifest.SUMMARY_NAME).exists() or (root / "run-manifest.json").exists():
        raise RunnerError(f"{root}: no {signatures.STATEMENT_NAME}; publish the campaign first")
    try:
        summary = jsonio.read_json(root / manifest.SUMMARY_NAME)
    except (OSError, InvalidArtifact) as e:
        raise RunnerError(f"{root / manifest.SUMMARY_NAME}: {e}") from None
    decision = summary.get("decision") if isinstance(summary, dict) else None
    predicate = {"campaign_id": root.resolve().name, "decision": decision}
    return {
        signatures.STATEMENT_NAME: jsonio.dumps_deterministic(signatures.statement([], predicate))
    }


def _refuse_a_changed_predicate(root: Path, made: dict[str, bytes]) -> None:
    """A statement whose predicate says other than the campaign is not signed: the
    signature would vouch for a decision the summary does not hold."""
    if made:
        return  # made from the summary just now
    try:
        document = jsonio.read_json(root / signatures.STATEMENT_NAME)
        summary = (
            jsonio.read_json(root / manifest.SUMMARY_NAME)
            if (root / manifest.SUMMARY_NAME).exists()
            else None
        )
    except (OSError, InvalidArtifact) as e:
        raise RunnerError(f"{root}: {e}") from None
    found = signatures.predicate_mismatches(document, root.resolve().name, summary)
    if found:
        pointer, why = found[0]
        raise RunnerError(
            f"{root / signatures.STATEMENT_NAME}#{pointer}: {why}; the statement is not signed "
            "(publish the campaign again rather than edit its statement)"
        )


def sign(
    folder: str | Path,
    setup: SigningSetup | None = None,
    *,
    replace: bool = False,
    reseal_after_review: bool = False,
) -> tuple[Path, str]:
    """Signs a campaign's statement with sigstore (keyless) into ``statement.sigstore.json``.

    The manifest first declares the bundle (``seals``), so that deleting it later is an
    error; the statement over that manifest is what is signed, and the manifest, the
    statement, ``SHA256SUMS`` and the bundle are written together or not at all. A public
    campaign without a statement (published before statements existed) gets one.

    Raises:
        RunnerError: no statement, no usable identity token, or sigstore failed.
        UsageError: the trust config cannot be read.
        OutputExists: the bundle already signs this statement and ``replace`` is false.
        SealBroken: the campaign's files differ from its seal.
    """
    from sigstore.dsse import Statement

    root = Path(folder)
    # A signature vouches for the statement's subjects: never over files that differ. The
    # bundle is what this command writes anew, so a missing or stale one is no obstacle.
    review = manifest.check_seal(
        root, "sign", reseal_after_review=reseal_after_review, renewing=[signatures.BUNDLE_NAME]
    )
    made = _statement_for(root)
    _refuse_a_changed_predicate(root, made)
    _, files = manifest.seal_files(root, made, signed=True, reviews=[review] if review else [])
    if not replace and _still_signed(root, files[signatures.STATEMENT_NAME]):
        raise OutputExists(
            f"{root / signatures.BUNDLE_NAME} already signs this statement; --replace to sign it "
            "again (the old signature is then lost)"
        )
    statement = files[signatures.STATEMENT_NAME]
    files[signatures.BUNDLE_NAME], who = _signed(
        setup, lambda signer: signer.sign_dsse(Statement(statement))
    )
    files[manifest.SUMS_NAME] = manifest.sums_adding(
        files[manifest.SUMS_NAME], {signatures.BUNDLE_NAME: files[signatures.BUNDLE_NAME]}
    )
    changes = Changes()
    for rel, data in files.items():
        changes.put(root, rel, data)
    changes.commit()
    return root / signatures.BUNDLE_NAME, who


def _still_signed(root: Path, statement: bytes) -> bool:
    """Whether the campaign's bundle already signs ``statement``, the one it would sign."""

    present = root / signatures.STATEMENT_NAME
    if not (root / signatures.BUNDLE_NAME).exists() or not present.exists():
        return False
    return present.read_bytes() == statement and not signatures.check_bundle(root)


def sign_summary(
    path: str | Path, setup: SigningSetup | None = None, *, replace: bool = False
) -> tuple[Path, str]:
    """Signs a verification summary that ``ledger gate --attest`` wrote: its statement,
    as it is, in a DSSE bundle beside it (``<file>.sigstore.json``).

    Raises:
        UsageError: the file is not a verification summary.
        OutputExists: the bundle exists and ``replace`` is false.
        RunnerError: no usable identity, or sigstore failed.
    """
    from sigstore.dsse import Statement

    source = Path(path)
    try:
        data = jsonio.read_limited(source, what="statements")
        document = jsonio.parse_strict(data)
    except OSError as e:
        raise UsageError(f"{source}: {e.strerror or e}") from None
    except InvalidArtifact as e:
        raise UsageError(f"{source}: {e}") from None
    if (
        not isinstance(document, dict)
        or document.get("predicateType") != signatures.SUMMARY_PREDICATE_TYPE
        or document.get("_type") != signatures.STATEMENT_TYPE
    ):
        raise UsageError(
            f"{source}: not a verification summary (ledger gate --attest); a campaign is "
            "signed by its folder"
        )
    target = source.with_name(source.name + manifest.BUNDLE_SUFFIX)
    if target.exists() and not replace:
        raise OutputExists(
            f"{target} exists; --replace to sign again (the old signature is then lost)"
        )
    bundle, who = _signed(setup, lambda signer: signer.sign_dsse(Statement(data)))
    jsonio.write_atomic(target, bundle)
    return target, who


def sign_file(path: str | Path, setup: SigningSetup | None = None) -> Path:
    """Signs a file's bytes (message signature, keyless); the bundle goes beside it as
    ``<file>.sigstore.json``, the name sigstore's own command line uses.

    Raises:
        RunnerError: no ambient credential, or sigstore failed.
    """
    source = Path(path)
    bundle, _ = _signed(setup, lambda signer: signer.sign_artifact(source.read_bytes()))
    target = source.with_name(source.name + manifest.BUNDLE_SUFFIX)
    jsonio.write_atomic(target, bundle)
    return target
