"""Checking sigstore signatures offline, against a pinned trusted root.

Never a cached root: sigstore-python's ``Verifier.production(offline=True)`` prefers a
root from the user's cache over its embedded one. The root is a file the caller gives, or
one of the copies pinned in this package (``ledger/_trust/``: the production and staging
roots embedded in sigstore 4.5.1; their sha256 are in the README).

Two kinds of bundle: a message signature over a file's bytes, and a DSSE envelope holding
an in-toto statement. For the second, a valid signature is not enough: sigstore's
``verify_dsse`` checks only the signature, so the file's digest must also be one of the
statement's subjects (checked here).
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
from pathlib import Path
from typing import Any

import attrs

from ledger._internal import jsonio
from ledger.errors import InvalidArtifact, UsageError, VerificationError

MAX_ROOT_BYTES = 4 << 20
"""A trusted root or a bundle is tens of kilobytes."""
MAX_SIGNED_BYTES = 1 << 30
"""The largest file ``signature verify`` reads whole (sigstore verifies bytes, not a
stream)."""


class UnusableInputError(UsageError):
    """A file, bundle or trusted root cannot be read or parsed (exit status 2)."""


def _read_capped(path: str | Path, cap: int, what: str) -> bytes:
    try:
        return jsonio.read_limited(path, cap, what=what)
    except OSError as e:
        raise UnusableInputError(f"{path}: {e.strerror or e}") from None
    except InvalidArtifact as e:
        raise UnusableInputError(f"{path}: {e}") from None


@attrs.frozen
class SignatureResult:
    """The outcome of a verification."""

    ok: bool
    reason: str
    """Why it failed, or what was verified."""
    statement: dict[str, Any] | None = None
    """The signed in-toto statement, for DSSE bundles."""


def _root(trusted_root: str | Path | None, staging: bool) -> Any:
    from sigstore.models import TrustedRoot

    if trusted_root is not None:
        path = str(trusted_root)
        _read_capped(path, MAX_ROOT_BYTES, "trusted roots")
    else:
        name = "staging" if staging else "production"
        path = str(importlib.resources.files("ledger") / "_trust" / f"{name}_trusted_root.json")
    try:
        return TrustedRoot.from_file(path)
    except Exception as e:  # noqa: BLE001 - sigstore raises several types for a bad root
        # The type only: the parser's message quotes the file, which may be anything.
        raise UnusableInputError(
            f"trusted root {path}: not a sigstore trusted root ({type(e).__name__})"
        ) from None


def verify_bundle(
    data: bytes,
    bundle: bytes,
    *,
    identity: str,
    issuer: str,
    trusted_root: str | Path | None = None,
    staging: bool = False,
    name: str | None = None,
    check_subject: bool = True,
) -> SignatureResult:
    """Verifies ``bundle`` over the file bytes ``data`` offline.

    Args:
        name: the file's name, to find it among a DSSE statement's subjects (its digest
            must match); without it any subject with the file's digest is accepted.

    Raises:
        UnusableInputError: the bundle or trusted root cannot be parsed.
    """
    from sigstore.errors import Error as SigstoreError
    from sigstore.models import Bundle, InvalidBundle
    from sigstore.verify import Verifier
    from sigstore.verify.policy import Identity

    try:
        raw = json.loads(bundle)
        parsed = Bundle.from_json(bundle)
    except (ValueError, InvalidBundle) as e:
        raise UnusableInputError(f"bundle: {e}") from None
    verifier = Verifier(trusted_root=_root(trusted_root, staging))
    policy = Identity(identity=identity, issuer=issuer)
    try:
        if isinstance(raw, dict) and "dsseEnvelope" in raw:
            payload_type, payload = verifier.verify_dsse(parsed, policy)
        else:
            verifier.verify_artifact(data, parsed, policy)
            return SignatureResult(True, f"message signature by {identity} ({issuer})")
    except (SigstoreError, ValueError) as e:
        return SignatureResult(False, f"{type(e).__name__}: {e}")
    if payload_type != "application/vnd.in-toto+json":
        return SignatureResult(False, f"DSSE payload type {payload_type!r} is not in-toto")
    try:
        statement = json.loads(payload)
    except ValueError:
        return SignatureResult(False, "DSSE payload is not JSON")
    if not isinstance(statement, dict):
        return SignatureResult(False, "DSSE payload is not an in-toto statement")
    if not check_subject:
        return SignatureResult(True, f"DSSE statement by {identity} ({issuer})", statement)
    digest = hashlib.sha256(data).hexdigest()
    subjects = [
        (s.get("name"), (s.get("digest") or {}).get("sha256"))
        for s in statement.get("subject", [])
        if isinstance(s, dict)
    ]
    if not any(d == digest and (name is None or n == name) for n, d in subjects):
        named = [d for n, d in subjects if n == name] if name else [d for _, d in subjects]
        return SignatureResult(
            False,
            f"the signature is valid but no subject matches the file (got sha256 {digest}, "
            f"the statement says {', '.join(str(d) for d in named) or 'nothing'})",
            statement,
        )
    return SignatureResult(
        True, f"DSSE statement by {identity} ({issuer}) names the file", statement
    )


def verify_file(
    path: str | Path,
    bundle: str | Path,
    *,
    identity: str,
    issuer: str,
    trusted_root: str | Path | None = None,
    staging: bool = False,
) -> SignatureResult:
    """:func:`verify_bundle` over files.

    Raises:
        UnusableInputError: a file cannot be read, or the bundle or root parsed.
    """
    bundle_data = _read_capped(bundle, MAX_ROOT_BYTES, "sigstore bundles")
    data = _read_capped(path, MAX_SIGNED_BYTES, "files signature verify reads")
    return verify_bundle(
        data,
        bundle_data,
        identity=identity,
        issuer=issuer,
        trusted_root=trusted_root,
        staging=staging,
        name=Path(path).name,
    )


def verify_statement(
    statement: bytes,
    bundle: bytes,
    *,
    identity: str,
    issuer: str,
    trusted_root: str | Path | None = None,
    staging: bool = False,
) -> SignatureResult:
    """Verifies the bundle of a published ``statement.intoto.json``.

    A DSSE bundle must carry exactly this statement (compared as JSON); a message
    signature must be over these bytes. The subjects are the caller's to check.

    Raises:
        UnusableInputError: the bundle or trusted root cannot be parsed.
    """
    try:
        published = json.loads(statement)
    except ValueError:
        return SignatureResult(False, "statement.intoto.json is not JSON")
    # The statement does not name itself; its subjects are checked against the files.
    result = verify_bundle(
        statement,
        bundle,
        identity=identity,
        issuer=issuer,
        trusted_root=trusted_root,
        staging=staging,
        check_subject=False,
    )
    if not result.ok:
        return result
    if result.statement is not None and result.statement != published:
        return SignatureResult(False, "the signed statement differs from statement.intoto.json")
    return SignatureResult(True, f"statement signed by {identity} ({issuer})", published)


__all__ = [
    "SignatureResult",
    "UnusableInputError",
    "VerificationError",
    "verify_bundle",
    "verify_file",
    "verify_statement",
]
