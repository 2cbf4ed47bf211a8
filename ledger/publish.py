"""``ledger publish``: a raw campaign made public.

Every file is sanitized (JSON structurally, text as a whole, through the same rules);
references are rewritten to the sanitized digests in topological order (a child's new
digest goes into every parent before the parent is hashed); then the tree is scanned
again, and any remaining hit stops the publication (fail closed) naming the file and the
JSON pointer, never the value. The output is written to a temporary folder and renamed
into place only when complete, so a refused publication leaves nothing behind.

The raw-to-public digest map is written only on the private side: with the placeholders,
raw digests would let anyone confirm a guessed redacted value.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import attrs

from ledger import manifest
from ledger._internal import intoto, jsonio, tree
from ledger._internal.documents import find_references
from ledger._internal.sanitizer import Sanitizer, load_rules
from ledger.errors import InvalidArtifact, VerificationError
from ledger.hashing import sha256_bytes

MAX_TEXT_BYTES = 256 << 20


class PublishError(VerificationError):
    """The campaign cannot be published (a secret survived, a file cannot be sanitized)."""


@attrs.frozen
class Published:
    """What a publication wrote."""

    folder: Path
    """The public campaign folder."""
    digest_map: Path
    """The private raw -> public digest map."""
    artifacts: int
    redactions: int


def _order(documents: dict[str, Any], paths: list[str]) -> list[str]:
    """Children before parents; raises on a reference cycle."""
    done: list[str] = []
    state: dict[str, int] = {}
    known = set(paths)

    def visit(path: str, chain: tuple[str, ...]) -> None:
        mark = state.get(path)
        if mark == 2:
            return
        if mark == 1:
            raise PublishError(f"reference cycle: {' -> '.join((*chain, path))}")
        state[path] = 1
        document = documents.get(path)
        if document is not None:
            for ref in find_references(document):
                if ref.path in known:
                    visit(ref.path, (*chain, path))
        state[path] = 2
        done.append(path)

    for path in paths:
        visit(path, ())
    return done


def _rewrite_references(value: Any, digests: dict[str, str]) -> Any:
    if isinstance(value, dict):
        out = {k: _rewrite_references(v, digests) for k, v in value.items()}
        ref_path = out.get("path")
        if isinstance(ref_path, str) and isinstance(out.get("sha256"), str) and ref_path in digests:
            out["sha256"] = digests[ref_path]
        return out
    if isinstance(value, list):
        return [_rewrite_references(v, digests) for v in value]
    return value


def publish(
    raw: str | Path,
    out: str | Path,
    *,
    digest_map: str | Path | None = None,
    decision: dict[str, Any] | None = None,
) -> Published:
    """Publishes the raw campaign folder ``raw`` as ``out/<campaign_id>``.

    Raises:
        PublishError: a detector still fires after sanitizing, a file is not text or
            JSON, references form a cycle, or the target exists.
    """
    source = Path(raw)
    if not source.is_dir():
        raise PublishError(f"{raw}: not a campaign folder")
    campaign = source.resolve().name
    target = Path(out) / campaign
    if target.exists():
        raise PublishError(f"{target} exists; publish writes a new folder")
    listing = tree.list_campaign(source)
    if listing.issues:
        rel, issue = listing.issues[0]
        raise PublishError(f"{source}: {rel}: {issue.message}")
    rules = load_rules()
    sanitizer = Sanitizer(rules)
    entries = [e for e in listing.entries if e.rel not in manifest.SEAL_FILES]
    documents: dict[str, Any] = {}
    texts: dict[str, str] = {}
    bundles: dict[str, bytes] = {}
    raw_digests: dict[str, str] = {}
    for entry in entries:
        data = Path(entry.path).read_bytes()
        raw_digests[entry.rel] = sha256_bytes(data)
        if _is_bundle(entry.rel, data):
            bundles[entry.rel] = data
        elif entry.rel.endswith(".json"):
            try:
                documents[entry.rel] = jsonio.parse_strict(data)
            except InvalidArtifact as e:
                raise PublishError(f"{entry.rel}: {e}") from None
        else:
            if len(data) > MAX_TEXT_BYTES:
                raise PublishError(f"{entry.rel}: larger than {MAX_TEXT_BYTES} bytes")
            try:
                texts[entry.rel] = data.decode("utf-8")
            except UnicodeDecodeError:
                raise PublishError(
                    f"{entry.rel}: not UTF-8 text; it cannot be sanitized, so it is not "
                    "published (leave it out of the raw folder or declare it withheld)"
                ) from None
    public: dict[str, bytes] = {}
    digests: dict[str, str] = {}
    for rel in _order(documents, sorted(raw_digests)):
        if rel in bundles:
            # A signature is published as it is: its certificate and log entry are already
            # public in the transparency log, and a changed byte would break it. It is
            # still scanned, and refused if a detector fires.
            data = bundles[rel]
            hits = sanitizer.detect(data.decode("utf-8", "replace"))
            if hits:
                raise PublishError(f"{rel}: {hits[0].category} in a signature bundle")
        elif rel in documents:
            cleaned = sanitizer.document(documents[rel])
            cleaned = _rewrite_references(cleaned, digests)
            data = jsonio.dumps_deterministic(cleaned)
            leaks = list(sanitizer.scan(cleaned))
            if leaks:
                pointer, category = leaks[0]
                raise PublishError(f"{rel}#{pointer}: {category} still present after sanitizing")
        else:
            text = sanitizer.text(texts[rel])
            hits = sanitizer.detect(text)
            if hits:
                raise PublishError(f"{rel}: {hits[0].category} still present after sanitizing")
            data = text.encode()
        public[rel] = data
        digests[rel] = sha256_bytes(data)
    map_path = Path(digest_map) if digest_map else source.parent / f"{campaign}.publish-map.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{campaign}.", dir=target.parent))
    try:
        work = staging / campaign
        for rel, data in public.items():
            path = work / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            jsonio.write_atomic(path, data)
        predicate = {
            "campaign_id": campaign,
            "decision": decision if decision is not None else _decision(documents),
            "sanitizer": {"version": rules.version, "sha256": rules.sha256},
        }
        jsonio.write_json(work / intoto.STATEMENT_NAME, intoto.statement([], predicate))
        manifest.seal(work, jobs=1)
        # The private map first: a publication is never in place without it.
        map_path.parent.mkdir(parents=True, exist_ok=True)
        jsonio.write_json(
            map_path,
            {
                "campaign_id": campaign,
                "public": str(target),
                "sanitizer": {"version": rules.version, "sha256": rules.sha256},
                "artifacts": [
                    {"path": rel, "raw_sha256": raw_digests[rel], "public_sha256": digests[rel]}
                    for rel in sorted(digests)
                ],
            },
        )
        os.replace(work, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return Published(target, map_path, len(public), sanitizer.redactions)


def _is_bundle(rel: str, data: bytes) -> bool:
    if not rel.endswith(manifest.BUNDLE_SUFFIX):
        return False
    try:
        document = jsonio.parse_strict(data)
    except InvalidArtifact:
        return False
    media = document.get("mediaType") if isinstance(document, dict) else None
    return isinstance(media, str) and media.startswith("application/vnd.dev.sigstore.bundle")


def _decision(documents: dict[str, Any]) -> Any:
    summary = documents.get(manifest.SUMMARY_NAME)
    if isinstance(summary, dict) and isinstance(summary.get("decision"), dict):
        return summary["decision"]
    return None
