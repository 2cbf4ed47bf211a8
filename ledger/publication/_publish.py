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
from pathlib import Path
from typing import Any

import attrs

from ledger import signatures
from ledger.errors import InvalidArtifact, UsageError, VerificationError
from ledger.evidence import manifest, tree
from ledger.evidence.documents import find_references, may_reference
from ledger.formats import jsonio
from ledger.formats.models import Manifest, Review, ReviewedChange, WithheldEntry
from ledger.formats.outputs import Changes, OutputExists, inside, is_within, new_folder
from ledger.hashing import sha256_bytes
from ledger.sanitizer import JSON_LINES, KeyCollision, Sanitizer, load_rules

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
    left_out: tuple[str, ...] = ()
    """The raw campaign's report files, which a publication does not carry."""


def _order(references: dict[str, list[str]], paths: list[str]) -> list[str]:
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
        for ref in references.get(path, ()):
            if ref in known:
                visit(ref, (*chain, path))
        state[path] = 2
        done.append(path)

    for path in paths:
        visit(path, ())
    return done


def _rewrite_references(value: Any, digests: dict[str, tuple[str, int]]) -> Any:
    """``value`` with each reference's digest, and its size where it states one (a cell
    run's parts), the published file's."""
    if isinstance(value, dict):
        out = {k: _rewrite_references(v, digests) for k, v in value.items()}
        ref_path = out.get("path")
        if isinstance(ref_path, str) and isinstance(out.get("sha256"), str) and ref_path in digests:
            out["sha256"], size = digests[ref_path]
            if type(out.get("bytes")) is int:
                out["bytes"] = size
        return out
    if isinstance(value, list):
        return [_rewrite_references(v, digests) for v in value]
    return value


def publish(
    raw: str | Path,
    out: str | Path,
    *,
    digest_map: str | Path | None = None,
    reseal_after_review: bool = False,
) -> Published:
    """Publishes the raw campaign folder ``raw`` as ``out/<campaign_id>``.

    Raises:
        UsageError: ``raw`` is not a campaign folder, the target or the map exists, or an
            output would land inside the raw campaign (or the map inside the publication).
        SealBroken: the raw campaign no longer matches its seal.
        PublishError: a detector still fires after sanitizing, a file is not text or
            JSON, references form a cycle, or a private digest map is among the files.
    """
    source, target, map_path = _destinations(raw, out, digest_map)
    review = manifest.check_seal(source, "publish", reseal_after_review=reseal_after_review)
    listing = tree.list_campaign(source)
    if listing.issues:
        rel, issue = listing.issues[0]
        raise PublishError(f"{source}: {rel}: {issue.message}")
    rules = load_rules()
    sanitizer = Sanitizer(rules)
    # A report of the raw campaign names its raw digests (which confirm a guessed redacted
    # value) in its evidence index and charts: it stays behind; ``ledger report`` on the
    # publication writes one with the published digests.
    reports = sorted(e.rel for e in listing.entries if tree.is_report_file(e.rel))
    entries = {
        e.rel: e
        for e in listing.entries
        if e.rel not in manifest.SEAL_FILES and not tree.is_report_file(e.rel)
    }
    raw_seal = manifest.read_manifest(source / manifest.MANIFEST_NAME)
    # Every text published is reserved before any value is numbered (see _reserve).
    for withheld in raw_seal.withheld:
        sanitizer.reserve(f"{withheld.path}\n{withheld.reason}")
    for reviewed in _reviews(raw_seal, review):
        sanitizer.reserve("\n".join(change.path for change in reviewed.changes))
    # Two passes, one file at a time, so memory is that of the largest file, not of the
    # campaign: the first reads each file for its digest, its kind and its references;
    # the second, children before parents, sanitizes it and writes it out.
    read = _read_all(sanitizer, entries)
    digests: dict[str, tuple[str, int]] = {}
    map_file = Changes()
    mapped = False
    try:
        with new_folder(target) as work:
            for rel in _order(read.references, sorted(read.digests)):
                digests[rel] = _write_sanitized(sanitizer, work, entries[rel], read, digests)
            _seal_publication(work, target.name, sanitizer, raw_seal, review, digests)
            private_map = jsonio.dumps_deterministic(
                {
                    "campaign_id": target.name,
                    "public": str(target),
                    "sanitizer": {"version": rules.version, "sha256": rules.sha256},
                    "artifacts": [
                        {
                            "path": rel,
                            "raw_sha256": read.digests[rel],
                            "public_sha256": digests[rel][0],
                        }
                        for rel in sorted(digests)
                    ],
                }
            )
            map_file.put(map_path.parent, map_path.name, private_map, replace=False)
            # The private map first: a publication is never in place without it.
            map_file.commit()
            mapped = True
    except BaseException:
        if mapped:
            map_path.unlink(missing_ok=True)
        raise
    return Published(target, map_path, len(digests), sanitizer.redactions, tuple(reports))


def _destinations(
    raw: str | Path, out: str | Path, digest_map: str | Path | None
) -> tuple[Path, Path, Path]:
    """The raw campaign, the publication's folder and the private map's path, each checked
    before anything is read or written."""
    source = Path(raw)
    if not source.is_dir():
        raise UsageError(f"{raw}: {'not a folder' if source.exists() else 'no such folder'}")
    campaign = source.resolve().name
    if not (source / manifest.MANIFEST_NAME).exists():
        raise UsageError(
            f"{raw}: not a sealed campaign folder (a campaign is named YYYY-MM-DD-words and "
            "holds manifest.json); publish one campaign at a time"
        )
    if not tree.CAMPAIGN_NAME.fullmatch(campaign):
        # Its name becomes the publication's folder and the statement's campaign id.
        raise UsageError(
            f"{raw}: {campaign!r} is no campaign id (YYYY-MM-DD, then lower-case words "
            "joined by '-'); rename the folder"
        )
    target = Path(out) / campaign
    # Beside the campaign as its absolute path places it: from inside it ("publish ."),
    # the parent of "." is "." itself.
    beside = Path(os.path.abspath(source)).parent
    map_path = Path(digest_map) if digest_map else beside / f"{campaign}.publish-map.json"
    for path, what in ((target, "the publication"), (map_path, "the private map")):
        if is_within(path, source):
            raise UsageError(f"{path}: {what} would be written inside the raw campaign {raw}")
    if is_within(map_path, out):
        raise UsageError(f"{map_path}: the private map would be written inside the public tree")
    holder = next(
        (
            folder
            for folder in Path(map_path).absolute().parents
            if any((folder / marker).exists() for marker in tree.CAMPAIGN_MARKERS)
        ),
        None,
    )
    if holder is not None:
        raise UsageError(f"{map_path}: the private map would be written inside campaign {holder}")
    for path in (target, map_path):
        if path.exists() or path.is_symlink():
            raise OutputExists(f"{path} exists; publish writes a new publication and map")
    return source, target, map_path


@attrs.frozen
class _Read:
    """What the first pass learnt of each file: its raw digest, its kind and the files it
    references."""

    digests: dict[str, str]
    kinds: dict[str, str]
    references: dict[str, list[str]]


def _read_all(sanitizer: Sanitizer, entries: dict[str, tree.Entry]) -> _Read:
    """The first pass: each file's digest, kind and references, its values reserved."""
    read = _Read({}, {}, {})
    for rel, entry in entries.items():
        named = name_hits(sanitizer, rel)
        if named:
            raise PublishError(
                f"{masked_path(sanitizer, rel)}: the name holds private data ({named[0]}); "
                "names are published as they are, so rename the file or folder"
            )
        data = Path(entry.path).read_bytes()
        read.digests[rel] = sha256_bytes(data)
        kind = read.kinds[rel] = _kind(rel, data)
        if kind == "json":
            document = _parse(sanitizer, rel, data)
            if may_reference(data):
                read.references[rel] = [ref.path for ref in find_references(document)]
            _reserve(sanitizer, rel, "json", data, document)
        elif kind == "text":
            _reserve(sanitizer, rel, "text", data, _decode(rel, data))
        else:  # a bundle, published as it is: what it holds is published too
            _reserve(sanitizer, rel, "json", data, jsonio.parse_strict(data))
    return read


def _write_sanitized(
    sanitizer: Sanitizer,
    work: Path,
    entry: tree.Entry,
    read: _Read,
    digests: dict[str, tuple[str, int]],
) -> tuple[str, int]:
    """The second pass, for one file: sanitized, its references re-hashed to the published
    digests of the files it names (written before it), written; its published digest and
    size."""
    rel = entry.rel
    data = Path(entry.path).read_bytes()
    if sha256_bytes(data) != read.digests[rel]:
        raise PublishError(f"{rel}: changed while it was being published")
    linked = {path: digests[path] for path in read.references.get(rel, ()) if path in digests}
    public = _sanitized(sanitizer, rel, read.kinds[rel], data, linked)
    destination = inside(work, rel)
    destination.parent.mkdir(parents=True, exist_ok=True)
    jsonio.write_atomic(destination, public, replace=False)
    return sha256_bytes(public), len(public)


def _seal_publication(
    work: Path,
    campaign: str,
    sanitizer: Sanitizer,
    raw_seal: Manifest,
    review: Review | None,
    digests: dict[str, tuple[str, int]],
) -> None:
    """The in-toto statement and the seal of the publication, written together."""
    rules = sanitizer.rules
    # The decision as published: the summary's, sanitized (an approver's address
    # redacted there is redacted here too), so that verify can hold one to the other.
    predicate = {
        "campaign_id": campaign,
        "decision": _decision(jsonio.read_json(work / manifest.SUMMARY_NAME))
        if manifest.SUMMARY_NAME in digests
        else None,
        "sanitizer": {"version": rules.version, "sha256": rules.sha256},
    }
    statement = jsonio.dumps_deterministic(signatures.statement([], predicate))
    _, seal = manifest.seal_files(
        work,
        {signatures.STATEMENT_NAME: statement},
        carried=_public_withheld(sanitizer, raw_seal),
        reviews=_public_reviews(sanitizer, raw_seal, review),
        jobs=1,
    )
    changes = Changes()
    for rel, data in {signatures.STATEMENT_NAME: statement, **seal}.items():
        changes.put(work, rel, data)
    changes.commit()


def _reserve(sanitizer: Sanitizer, rel: str, kind: str, data: bytes, content: Any) -> None:
    """Numbers the publication's placeholders past those a file holds already (a value
    sanitized before, as a re-published or imported file holds): a new value numbered as
    an old one reads as the same value. ``content``: the document, or the text."""
    if b"\\u" in data:
        # Written with escapes (\u003c), a placeholder is one once decoded.
        if kind == "json":
            sanitizer.reserve_document(content)
        elif rel.endswith(JSON_LINES):
            sanitizer.reserve_lines(content)
    if b"<redacted:" in data:
        sanitizer.reserve(data.decode("utf-8", "replace"))
    if kind == "text":
        sanitizer.reserve_decoded(content)


def _kind(rel: str, data: bytes) -> str:
    """``bundle``, ``json`` or ``text``; refuses a private digest map."""
    if _is_digest_map(data):
        raise PublishError(
            f"{rel}: a private raw-to-public digest map; with the placeholders it "
            "would confirm guessed redacted values. Move it out of the campaign"
        )
    if _is_bundle(rel, data):
        return "bundle"
    return "json" if rel.endswith(".json") else "text"


def _parse(sanitizer: Sanitizer, rel: str, data: bytes) -> Any:
    try:
        return jsonio.parse_strict(data)
    except InvalidArtifact as e:
        # The parser quotes what it refused (a duplicate key): not a secret's way out.
        raise PublishError(f"{rel}: {sanitizer.text(str(e))}") from None


def _decode(rel: str, data: bytes) -> str:
    if len(data) > MAX_TEXT_BYTES:
        raise PublishError(f"{rel}: larger than {MAX_TEXT_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise PublishError(
            f"{rel}: not UTF-8 text; it cannot be sanitized, so it is not "
            "published (leave it out of the raw folder or declare it withheld)"
        ) from None


def _sanitized(
    sanitizer: Sanitizer, rel: str, kind: str, data: bytes, digests: dict[str, tuple[str, int]]
) -> bytes:
    """The public bytes of one file, rescanned (fail closed); ``digests`` holds the public
    digests of the files it references (written before it), put in place of their raw
    ones."""
    if kind == "bundle":
        # A signature is published as it is: its certificate and log entry are already
        # public in the transparency log, and a changed byte would break it. It is still
        # scanned, and refused if a detector fires.
        hits = sanitizer.detect(data.decode("utf-8", "replace"))
        if hits:
            raise PublishError(f"{rel}: {hits[0].category} in a signature bundle")
        return data
    if kind == "json":
        try:
            cleaned = sanitizer.document(_parse(sanitizer, rel, data))
        except KeyCollision as e:
            raise PublishError(f"{rel}#{e.pointer}: {e}") from None
        if digests:
            cleaned = _rewrite_references(cleaned, digests)
        leaks = list(sanitizer.scan(cleaned))
        if leaks:
            pointer, category = leaks[0]
            raise PublishError(f"{rel}#{pointer}: {category} still present after sanitizing")
        # Parsed strictly and changed only in its strings: no NaN or Infinity to look for.
        return jsonio.dumps_parsed(cleaned)
    if rel.endswith(JSON_LINES):
        text = sanitizer.lines(_decode(rel, data), rel)
        for number, pointer, category in sanitizer.scan_lines(text):
            raise PublishError(
                f"{rel}: line {number}{pointer and ' at ' + pointer}: {category} still "
                "present after sanitizing"
            )
    else:
        text = sanitizer.file_text(_decode(rel, data), rel)
    hits = sanitizer.file_hits(text, rel)
    if hits:
        raise PublishError(f"{rel}: {hits[0].category} still present after sanitizing")
    if b"\x00" in data:
        # Valid UTF-8 with NULs may be UTF-16 text, which an editor shows and verify reads
        # (scan.py): what it holds cannot be redacted in place, so it is not published.
        for codec in ("utf-16-le", "utf-16-be"):
            found = sanitizer.file_hits(data.decode(codec, "replace"), rel)
            if found:
                raise PublishError(
                    f"{rel}: {found[0].category} in the text it holds read as UTF-16, which "
                    "cannot be redacted in place; convert it to UTF-8 or leave it out"
                )
    return text.encode()


def _reviews(sealed: Manifest, review: Review | None) -> list[Review]:
    """The raw campaign's reviews: those its seal records, and this publish's own."""
    return [*sealed.reviews, *([review] if review is not None else [])]


def _public_reviews(sanitizer: Sanitizer, sealed: Manifest, review: Review | None) -> list[Review]:
    """The raw campaign's reviews, as the publication records them: paths only, since raw
    digests would let anyone confirm a guessed redacted value, and sanitized (a file a
    review names may be gone, so it cannot be renamed as a published one is)."""
    return [
        Review(
            r.command,
            tuple(ReviewedChange(sanitizer.text(c.path), c.change) for c in r.changes),
        )
        for r in _reviews(sealed, review)
    ]


def _public_withheld(sanitizer: Sanitizer, sealed: Manifest) -> list[WithheldEntry]:
    """The raw campaign's withheld declarations, their paths and reasons sanitized as the
    files are: a reason is the operator's own words (``--reason``), and a path is redacted
    as the same value is in a document that names it."""
    return [
        attrs.evolve(w, path=sanitizer.text(w.path), reason=sanitizer.text(w.reason))
        for w in sealed.withheld
    ]


def _is_digest_map(data: bytes) -> bool:
    if b'"raw_sha256"' not in data:
        return False
    try:
        document = jsonio.parse_strict(data)
    except InvalidArtifact:
        return False
    return isinstance(document, dict) and "artifacts" in document and "public" in document


def name_hits(sanitizer: Sanitizer, rel: str) -> list[str]:
    """The categories the detectors find in a path's names (a credential, a private
    endpoint, a host path), one name at a time."""
    return [hit.category for part in rel.split("/") for hit in sanitizer.detect(part)]


def masked_path(sanitizer: Sanitizer, rel: str) -> str:
    """The path with what the detectors find in its names masked (a message names the
    file without showing the secret its name holds)."""
    return "/".join(sanitizer.masked(part) for part in rel.split("/"))


def _is_bundle(rel: str, data: bytes) -> bool:
    if not rel.endswith(manifest.BUNDLE_SUFFIX):
        return False
    try:
        document = jsonio.parse_strict(data)
    except InvalidArtifact:
        return False
    media = document.get("mediaType") if isinstance(document, dict) else None
    return isinstance(media, str) and media.startswith("application/vnd.dev.sigstore.bundle")


def _decision(summary: Any) -> Any:
    """The decision a campaign's summary states, for the statement's predicate."""
    if isinstance(summary, dict) and isinstance(summary.get("decision"), dict):
        return summary["decision"]
    return None
