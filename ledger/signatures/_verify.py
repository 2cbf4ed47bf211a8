"""Checking sigstore signatures offline, against a pinned trusted root.

Never a cached root: sigstore-python's ``Verifier.production(offline=True)`` prefers a
root from the user's cache over its embedded one. The root is a file the caller gives, or
one of the copies pinned in this package (``ledger/_trust/``: the production and staging
roots embedded in sigstore 4.5.1; their sha256 are in ``tests/data/PROVENANCE.md``).

Two kinds of bundle: a message signature over a file's bytes, and a DSSE envelope holding
an in-toto statement. For the second, a valid signature is not enough: sigstore's
``verify_dsse`` checks only the signature, so the file's digest must also be one of the
statement's subjects (checked here).

A bundle is untrusted input, and sigstore-python reports a bad one with whatever its
parsers raise (pydantic, cryptography, rfc3161-client, binascii, datetime...), some of them
while the bundle is loaded and some only inside the ``Verifier``. Every bundle gets one of
two verdicts, in one line naming the exception's type, never a traceback:

- unusable (:class:`UnusableInputError`, exit status 2): sigstore cannot load it as a
  bundle at all: not JSON, not an object, an unknown or absent media type, a field that is
  not valid base64 or DER, an inclusion proof whose index is outside its tree, no
  certificate or log entry, a timestamp that is not an RFC 3161 response;
- not verified (``SignatureResult.ok`` false, exit status 1): it loads, and the verifier
  refuses it: a certificate from another authority, a broken inclusion proof, checkpoint
  or signed entry timestamp, a timestamp from a TSA the root does not trust or no longer
  trusts, a signature or log entry over other bytes, another identity or issuer.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.resources
import json
import logging
import re
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

from ledger.errors import InvalidArtifact, UsageError, VerificationError, printable
from ledger.formats import jsonio

MAX_ROOT_BYTES = 4 << 20
"""A trusted root or a bundle is tens of kilobytes."""
MAX_SIGNED_BYTES = 1 << 30
"""The largest file ``signature verify`` reads whole (sigstore verifies bytes, not a
stream)."""


MAX_REASON = 200
"""The longest exception message a verdict quotes: the start says what failed, the rest
is the parser quoting the bundle."""
_BYTES_REPR = re.compile(r"\w+=b['\"]")
"""Where a message starts quoting decoded bytes (``root_hash=b'...'``): cut there."""


class UnusableInputError(UsageError):
    """A file, bundle or trusted root cannot be read or parsed (exit status 2)."""


def _hostile_input_errors() -> tuple[type[BaseException], ...]:
    """What loading or verifying an untrusted bundle raises, besides sigstore's own errors.

    Named, not ``Exception``: anything else (an ImportError, a NameError, an
    AssertionError) is a defect of this toolkit or its environment and must not pass for
    a verdict about the bundle.
    """
    from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
    from cryptography.x509 import ExtensionNotFound, InvalidVersion
    from rfc3161_client import VerificationError as TimestampVerificationError
    from sigstore.errors import Error as SigstoreError

    return (
        SigstoreError,
        # pydantic's ValidationError, binascii.Error, UnicodeDecodeError, DER parse errors.
        ValueError,
        # Fields of the wrong type, or absent where sigstore assumes them (a dsse log entry
        # without payloadHash), reached through the models' optional attributes.
        TypeError,
        KeyError,
        IndexError,
        AttributeError,
        struct.error,
        # datetime.fromtimestamp() on a far-future integratedTime: OverflowError, or
        # OSError (EOVERFLOW) from the platform's time_t.
        ArithmeticError,
        OSError,
        # JSON nested deeper than the interpreter's stack.
        RecursionError,
        # A certificate inside an RFC 3161 token that does not parse, or lacks an extension.
        InvalidVersion,
        ExtensionNotFound,
        InvalidSignature,
        UnsupportedAlgorithm,
        TimestampVerificationError,
    )


def _describe(error: BaseException) -> str:
    """``error`` in one short line: its type and what failed, without the input a parser
    quotes (pydantic's ``input_value``, a decoded field's bytes)."""
    from pydantic import ValidationError

    message = str(error)
    cause = error if isinstance(error, ValidationError) else error.__context__
    if isinstance(cause, ValidationError):
        # sigstore wraps pydantic's report in its own message ("failed to load bundle:
        # 1 validation error ..."): keep its words before the report, then where and why.
        first = cause.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(part) for part in first["loc"]) or "the document"
        before = message.partition(str(cause).split("\n", 1)[0])[0] if cause is not error else ""
        more = cause.error_count() - 1
        message = f"{before}{where}: {first['msg']}" + (f" (and {more} more)" if more else "")
    message = _clip(_BYTES_REPR.split(message, maxsplit=1)[0])
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def _clip(text: str, limit: int = MAX_REASON) -> str:
    """``text`` on one line, its control characters escaped, at most ``limit`` long."""
    text = printable(" ".join(text.split()))
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


@contextlib.contextmanager
def _sigstore_warnings() -> Iterator[list[str]]:
    """The warnings sigstore logs while it loads a bundle (a root CA in a v0.1 or v0.2
    certificate chain), taken out of the log: the verdict stays one line and says them."""
    logger = logging.getLogger("sigstore.models")
    taken: list[str] = []

    def take(record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        taken.append(record.getMessage())
        return False

    logger.addFilter(take)
    try:
        yield taken
    finally:
        logger.removeFilter(take)


def _noted(reason: str, warnings: list[str]) -> str:
    if not warnings:
        return reason
    return f"{reason} (sigstore warns: {_clip('; '.join(warnings))})"


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


def _verifier(trusted_root: str | Path | None, staging: bool) -> Any:
    """A ``Verifier`` pinned to the root file given, or to the packaged one."""
    from sigstore.verify import Verifier

    root = _root(trusted_root, staging)
    try:
        return Verifier(trusted_root=root)
    except _hostile_input_errors() as e:
        # A root that parses but pins no transparency log: nothing could verify with it.
        where = trusted_root or ("staging" if staging else "production")
        raise UnusableInputError(f"trusted root {where}: {_describe(e)}") from None


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
        UnusableInputError: the bundle or trusted root cannot be parsed (see the module's
            docstring for where the line between this and a failed result lies).
    """
    from sigstore.models import Bundle

    hostile = _hostile_input_errors()
    with _sigstore_warnings() as warnings:
        try:
            raw = json.loads(bundle)
            # Loading checks more than the JSON: certificates and timestamps are decoded,
            # the media type and the one log entry with its inclusion proof are required.
            parsed = Bundle.from_json(bundle)
        except hostile as e:
            raise UnusableInputError(_noted(f"bundle: {_describe(e)}", warnings)) from None
    result = _verify_parsed(
        data,
        parsed,
        # pydantic reads an explicit null as an absent envelope: so does this.
        dsse=isinstance(raw, dict) and raw.get("dsseEnvelope") is not None,
        verifier=_verifier(trusted_root, staging),
        identity=identity,
        issuer=issuer,
        name=name,
        check_subject=check_subject,
    )
    return attrs.evolve(result, reason=_noted(result.reason, warnings))


def _verify_parsed(
    data: bytes,
    parsed: Any,
    *,
    dsse: bool,
    verifier: Any,
    identity: str,
    issuer: str,
    name: str | None,
    check_subject: bool,
) -> SignatureResult:
    from sigstore.verify.policy import Identity

    hostile = _hostile_input_errors()
    policy = Identity(identity=identity, issuer=issuer)
    try:
        if dsse:
            payload_type, payload = verifier.verify_dsse(parsed, policy)
        else:
            verifier.verify_artifact(data, parsed, policy)
            return SignatureResult(True, f"message signature by {identity} ({issuer})")
    except hostile as e:
        return SignatureResult(False, _describe(e))
    if payload_type != "application/vnd.in-toto+json":
        return SignatureResult(
            False, f"DSSE payload type {_clip(repr(payload_type), 80)} is not in-toto"
        )
    try:
        statement = json.loads(payload)
    except (ValueError, RecursionError):
        return SignatureResult(False, "DSSE payload is not JSON")
    if not isinstance(statement, dict):
        return SignatureResult(False, "DSSE payload is not an in-toto statement")
    if not check_subject:
        return SignatureResult(True, f"DSSE statement by {identity} ({issuer})", statement)
    digest = hashlib.sha256(data).hexdigest()
    listed = statement.get("subject")
    # The statement is signed, not trusted to be well-formed: skip what is not a subject.
    subjects = [
        (s.get("name"), s["digest"].get("sha256") if isinstance(s.get("digest"), dict) else None)
        for s in (listed if isinstance(listed, list) else [])
        if isinstance(s, dict)
    ]
    if not any(d == digest and (name is None or n == name) for n, d in subjects):
        if data == payload:
            # The file is the signed statement itself (statement.intoto.json): it is what
            # the signature covers, whatever it names.
            return SignatureResult(
                True, f"DSSE statement by {identity} ({issuer}) is the file", statement
            )
        named = [d for n, d in subjects if n == name] if name else [d for _, d in subjects]
        says = ", ".join(str(d) for d in named[:3]) + (", \u2026" if len(named) > 3 else "")
        return SignatureResult(
            False,
            _clip(
                f"the signature is valid but no subject matches the file (got sha256 "
                f"{digest}; the statement names "
                + (f"{name!r} with {says}" if name and named else f"{says or 'no such file'}")
                + ")",
                limit=400,
            ),
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
    # The bundle first: an unusable bundle is reported as such whatever the statement is.
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
    try:
        published = json.loads(statement)
    except (ValueError, RecursionError):
        return SignatureResult(False, "statement.intoto.json is not JSON")
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
