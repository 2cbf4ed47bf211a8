"""Campaign manifests and ``SHA256SUMS``: sealing a folder, and reading what a seal says.

``manifest.json`` lists every file of a campaign folder with its digest, size and schema,
and the artifacts declared ``withheld`` (operator-private raw originals that the summary
rests on but that are not published). ``SHA256SUMS`` repeats the digests, the manifest's
own included, so that ``sha256sum -c SHA256SUMS`` works without the toolkit.

Sealing proves integrity from the moment of sealing, never correctness: verify's other
checks still apply to a re-sealed folder.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from ledger.errors import InvalidArtifact, SchemaError, UsageError, VerificationError
from ledger.evidence import gate, scan, tree
from ledger.evidence.documents import check_document
from ledger.findings import Issue
from ledger.formats import jsonio
from ledger.formats.models import (
    BenchmarkDecisionSummary,
    Manifest,
    ManifestEntry,
    OsComparison,
    Review,
    ReviewedChange,
    WithheldEntry,
    read_artifact,
    unstructure,
)
from ledger.formats.outputs import Changes, OutputExists, check_name
from ledger.hashing import sha256_bytes, sha256_file

__all__ = [
    "APPROVALS_PREFIX",
    "APPROVAL_SCHEMA",
    "BUNDLE_NAME",
    "BUNDLE_SUFFIX",
    "DEFAULT_WITHHELD_REASON",
    "MANIFEST_NAME",
    "SEALED_FOLDERS",
    "SEALED_MARKERS",
    "SEALED_SCHEMAS",
    "SEAL_FILES",
    "STATEMENT_NAME",
    "SUMMARY_NAME",
    "SUMS_NAME",
    "SealBroken",
    "approval_problem",
    "changes_since_seal",
    "check_seal",
    "first_byte_difference",
    "lost_seal",
    "named_artifacts",
    "parse_sums",
    "read_manifest",
    "render_sums",
    "seal",
    "seal_files",
    "sums_adding",
    "withheld_folder",
    "write_sealed",
]

MANIFEST_NAME = "manifest.json"
SUMS_NAME = "SHA256SUMS"
SUMMARY_NAME = "summary.json"
STATEMENT_NAME = "statement.intoto.json"
BUNDLE_NAME = "statement.sigstore.json"
BUNDLE_SUFFIX = ".sigstore.json"
"""A sigstore bundle beside the file it signs (``approvals/<name>.json.sigstore.json``)."""
SEAL_FILES = frozenset({MANIFEST_NAME, SUMS_NAME, STATEMENT_NAME, BUNDLE_NAME})
"""Files that vouch for a campaign rather than being part of it: never manifest entries."""
"""Files a seal writes; they are not listed as artifacts."""

APPROVALS_PREFIX = "approvals/"
"""Where signed approval records go (see ``ledger approve``)."""

DEFAULT_WITHHELD_REASON = "operator-private raw artifact; not published"

_SUMS_LINE = re.compile(r"(?P<digest>[0-9a-f]{64}) [ *](?P<path>[^\n]+)")
_SEAL_ORDER = (STATEMENT_NAME, BUNDLE_NAME)


def named_artifacts(summary: BenchmarkDecisionSummary) -> list[tuple[str, str]]:
    """Returns (pointer, path) of every artifact a summary names as its evidence.

    That is its ``evidence`` list, the artifact of each gate and the sources of its
    headline comparison.
    """
    found = [(f"/evidence/{i}", path) for i, path in enumerate(summary.evidence or ())]
    for index, item in enumerate(summary.gates or ()):
        if item.artifact is not None:
            found.append((f"/gates/{index}/artifact", item.artifact))
    if isinstance(summary.headline_results, OsComparison):
        found.extend(gate.headline_sources(summary.headline_results, "/headline_results"))
    return found


def render_sums(digests: Iterable[tuple[str, str]]) -> bytes:
    """Renders ``SHA256SUMS`` in the format ``sha256sum -c`` reads, sorted by path."""
    return "".join(f"{digest}  {path}\n" for path, digest in sorted(digests)).encode()


def first_byte_difference(data: bytes, expected: bytes) -> str | None:
    """Where ``data`` first differs from ``expected``, in words (line, column and both
    lines, shortened); None when they are the same bytes."""
    if data == expected:
        return None
    at = next(
        (i for i, (a, b) in enumerate(zip(data, expected, strict=False)) if a != b),
        min(len(data), len(expected)),
    )
    line = data.count(b"\n", 0, at) + 1
    column = at - (data.rfind(b"\n", 0, at) + 1) + 1

    def around(text: bytes) -> str:
        start = text.rfind(b"\n", 0, at) + 1
        end = text.find(b"\n", at)
        shown = text[start : len(text) if end < 0 else end]
        return repr(shown[:100] + (b"..." if len(shown) > 100 else b""))[1:]

    if at >= len(data):
        return f"ends at byte {at} (line {line}); expected more: {around(expected)}"
    if at >= len(expected):
        return f"has more than expected from byte {at} (line {line}): {around(data)}"
    return (
        f"differs at byte {at} (line {line}, column {column}): has {around(data)}, "
        f"expected {around(expected)}"
    )


def parse_sums(data: bytes) -> tuple[dict[str, str], list[Issue]]:
    """Reads a ``SHA256SUMS`` file as ``sha256sum -c`` does: lines end at ``\\n`` only
    (a vertical tab or form feed is part of a line, as it is for coreutils).

    Returns:
        path to digest, and a ``sha256sums-invalid`` issue per line that does not parse
        (the pointer is ``/<line number>``).
    """
    digests: dict[str, str] = {}
    issues: list[Issue] = []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return {}, [Issue("sha256sums-invalid", "", "not UTF-8")]
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    for number, line in enumerate(lines, start=1):
        match = _SUMS_LINE.fullmatch(line)
        if match is None:
            issues.append(
                Issue(
                    "sha256sums-invalid", f"/{number}", f"line {number} is not '<64 hex>  <path>'"
                )
            )
        elif match["path"] in digests:
            issues.append(
                Issue(
                    "sha256sums-invalid",
                    f"/{number}",
                    f"line {number} lists {match['path']!r} again",
                )
            )
        else:
            digests[match["path"]] = match["digest"]
    return digests, issues


def read_manifest(path: Path) -> Manifest:
    """Reads and validates a manifest.

    Raises:
        InvalidArtifact: not strict JSON or too large.
        SchemaError: not a valid manifest/v1.
        OSError: cannot be read.
    """
    return read_artifact(path, Manifest)


def _read_summary(folder: Path) -> BenchmarkDecisionSummary | None:
    try:
        return read_artifact(folder / SUMMARY_NAME, BenchmarkDecisionSummary)
    except (OSError, InvalidArtifact, SchemaError):
        return None


class SealBroken(VerificationError):
    """A campaign's files differ from its seal, so a command refuses to extend it (exit 1).

    Attributes:
        changes: what differs, one file each.
    """

    def __init__(self, message: str, changes: Sequence[ReviewedChange]) -> None:
        super().__init__(message)
        self.changes = tuple(changes)


def _current_digests(
    root: Path, pending: Mapping[str, bytes], jobs: int | None, *, schemas: bool = True
) -> list[ManifestEntry]:
    """Every file of the folder as it will be once ``pending`` is written, seal files
    excluded; with ``schemas`` false, digests only (no JSON is parsed)."""
    listing = tree.list_campaign(root)
    if listing.issues:
        rel, problem = listing.issues[0]
        raise VerificationError(f"cannot seal {root}: {rel}: {problem.message}")
    entries = [e for e in listing.entries if e.rel not in SEAL_FILES and e.rel not in pending]
    # A name the manifest and SHA256SUMS cannot hold as it is (a line break, a backslash)
    # would be sealed into a folder that verify refuses.
    for invalid in filter(None, (tree.check_relative_path(e.rel) for e in entries)):
        raise VerificationError(f"cannot seal {root}: {invalid.message}; rename the file")
    tasks = [
        scan.FileTask(e.path, e.rel, schemas and e.rel.endswith(".json"), e.identity)
        for e in entries
    ]
    found = []
    for result in scan.process_files(tasks, jobs=jobs):
        if result.sha256 is None or result.size is None:
            raise VerificationError(
                f"cannot seal {root}: {result.rel}: "
                f"{result.issues[0].message if result.issues else 'unread'}"
            )
        found.append(ManifestEntry(result.rel, result.sha256, result.size, result.schema))
    for rel, data in pending.items():
        if rel in SEAL_FILES:
            continue
        schema = None
        if rel.endswith(".json"):
            schema = check_document(jsonio.parse_strict(data), may_reference=False).schema
        found.append(ManifestEntry(rel, sha256_bytes(data), len(data), schema))
    folded: dict[str, str] = {}
    for entry in found:
        other = folded.setdefault(entry.path.casefold(), entry.path)
        if other != entry.path:
            # One of them would be lost on a case-insensitive file system (macOS, Windows).
            raise VerificationError(
                f"cannot seal {root}: {other!r} and {entry.path!r} differ only by case"
            )
    return sorted(found, key=lambda e: e.path)


def _previous(root: Path) -> Manifest | None:
    previous = root / MANIFEST_NAME
    if not previous.exists():
        return None
    try:
        return read_manifest(previous)
    except (OSError, InvalidArtifact, SchemaError) as e:
        raise VerificationError(f"cannot read the seal {previous}: {e}") from None


def changes_since_seal(folder: str | Path, *, jobs: int | None = None) -> list[ReviewedChange]:
    """What differs between a campaign folder and its seal: every file changed, added or
    missing since ``manifest.json`` was written, and a ``SHA256SUMS`` or statement that no
    longer repeats it. A folder never sealed has no changes (see :func:`check_seal`).

    Raises:
        VerificationError: the folder cannot be listed or read.
    """
    root = Path(folder)
    changes: list[ReviewedChange] = []
    try:
        sealed = _previous(root)
    except VerificationError:
        sealed = None
        changes.append(ReviewedChange(MANIFEST_NAME, "changed"))
    if sealed is None and not changes:
        if (root / SUMS_NAME).exists():
            changes.append(ReviewedChange(MANIFEST_NAME, "missing"))
        return changes
    current = {e.path: e.sha256 for e in _current_digests(root, {}, jobs, schemas=False)}
    listed = {e.path: e.sha256 for e in sealed.artifacts} if sealed else {}
    for path in sorted(set(current) | set(listed)):
        if path not in listed:
            changes.append(ReviewedChange(path, "added", None, current[path]))
        elif path not in current:
            changes.append(ReviewedChange(path, "missing", listed[path], None))
        elif current[path] != listed[path]:
            changes.append(ReviewedChange(path, "changed", listed[path], current[path]))
    if sealed is None:
        return changes
    subjects_expected = dict(listed)
    subjects_expected[MANIFEST_NAME] = sha256_bytes((root / MANIFEST_NAME).read_bytes())
    expected = dict(subjects_expected)
    try:
        sums: bytes | None = (root / SUMS_NAME).read_bytes()
    except FileNotFoundError:
        sums = None
        changes.append(ReviewedChange(SUMS_NAME, "missing"))
    recorded = parse_sums(sums)[0] if sums is not None else {}
    seal_changes = []
    for name in sealed.seals:
        # SHA256SUMS holds the seal files' digests: a changed one is named as itself.
        digest = recorded.get(name)
        if not (root / name).exists():
            seal_changes.append(ReviewedChange(name, "missing", digest, None))
        elif (now := sha256_file(root / name)[0]) != digest:
            seal_changes.append(ReviewedChange(name, "changed", digest, now))
        if digest is not None:
            expected[name] = digest
    # Byte for byte: a file sha256sum reads differently from us is not our seal.
    if sums is not None and sums != render_sums(expected.items()):
        changes.append(ReviewedChange(SUMS_NAME, "changed"))
    changes.extend(seal_changes)
    statement = root / STATEMENT_NAME
    named = {c.path for c in changes}
    if statement.exists() and STATEMENT_NAME not in named:
        from ledger import signatures

        try:
            subjects = signatures.subjects_of(jsonio.read_json(statement))
        except InvalidArtifact:
            subjects = None
        if subjects != subjects_expected:
            changes.append(ReviewedChange(STATEMENT_NAME, "changed"))
    return changes


APPROVAL_SCHEMA = "anvil-serving.approval/v1"


def _approval_file(root: Path, rel: str) -> bool:
    """Whether ``rel`` is a signed approval record or its bundle. Approvals arrive after
    the seal by design, each signed, which decide and verify check against the policy's
    approvers; anything else added under ``approvals/`` (a cell run copied there, a record
    with no signature, a bundle that signs nothing there) breaks the seal like any file."""
    return approval_problem(root, rel) is None


def approval_problem(root: Path, rel: str) -> str | None:
    """Why ``rel`` is not a signed approval record or its bundle (None when it is): the
    record must be a valid ``approval/v1`` and its bundle must sign its bytes under the
    certificate it carries."""
    from ledger import signatures

    name = rel.removeprefix(APPROVALS_PREFIX)
    if name == rel or "/" in name:
        return "not directly under approvals/"
    record = rel.removesuffix(BUNDLE_SUFFIX)
    if not record.endswith(".json") or record.endswith(BUNDLE_SUFFIX):
        return "neither an approval record (.json) nor its bundle (.json.sigstore.json)"
    try:
        data = jsonio.read_limited(root / record)
        problem = check_document(jsonio.parse_strict(data), may_reference=False)
    except OSError as e:
        return f"{record}: {e.strerror or e}"
    except (InvalidArtifact, SchemaError) as e:
        return f"{record}: {e}"
    if problem.schema != APPROVAL_SCHEMA or problem.issues:
        return f"{record}: not a valid {APPROVAL_SCHEMA} record"
    try:
        bundle = jsonio.read_limited(root / (record + BUNDLE_SUFFIX), signatures.MAX_BUNDLE_BYTES)
    except OSError:
        return f"{record}: no signature ({record}{BUNDLE_SUFFIX})"
    except InvalidArtifact as e:
        return f"{record}{BUNDLE_SUFFIX}: {e}"
    why = signatures.signature_problem(bundle, data)
    return None if why is None else f"{record}{BUNDLE_SUFFIX}: {why}"


SEALED_MARKERS = ("run-plan.json", "run-manifest.json", STATEMENT_NAME, BUNDLE_NAME)
"""Files only a sealed campaign holds: a run seals its folder once its plan is written and
again with its run manifest, and publish writes its statement into the seal it writes."""
SEALED_FOLDERS = ("derived",)
"""Folders only a sealed campaign holds: derive refuses a folder without a seal."""


SEALED_SCHEMAS = frozenset(
    {
        "anvil-serving.cell-run/v1",
        "anvil-serving.cell-run/v2",
        "anvil-serving.imported-run/v1",
        "anvil-serving.ab-comparison/v1",
    }
)
"""Artifacts only a command that seals writes (``run``, ``import``, ``derive``)."""


def lost_seal(root: Path, jobs: int | None = None) -> str | None:
    """What shows that a folder without ``manifest.json`` was sealed once (a run's
    manifest, a statement, a cell run, an import, a derived comparison), or None for a
    folder never sealed.

    Raises:
        VerificationError: the folder cannot be listed or read.
    """
    for name in SEALED_MARKERS:
        if (root / name).exists():
            return name
    for name in SEALED_FOLDERS:
        folder = root / name
        if folder.is_dir() and any(folder.iterdir()):
            return f"{name}/"
    # A run's manifest and its derived folder are as easy to delete as the seal: the
    # artifacts themselves say which command wrote them.
    for entry in _current_digests(root, {}, jobs):
        if entry.schema in SEALED_SCHEMAS:
            return f"{entry.path} ({entry.schema})"
    return None


def check_seal(
    folder: str | Path,
    command: str,
    *,
    reseal_after_review: bool = False,
    require_seal: bool = True,
    jobs: int | None = None,
    renewing: Iterable[str] = (),
) -> Review | None:
    """Checks a campaign's seal before ``command`` extends it.

    Args:
        renewing: seal files the command writes anew (``ledger sign``'s bundle): a
            change of theirs does not break the seal.

    Returns:
        None when the seal holds; a :class:`Review` to record when it does not and
        ``reseal_after_review`` accepts that.

    Raises:
        SealBroken: files differ from the seal, or there is no seal and ``require_seal``.
    """
    root = Path(folder)
    renewed = set(renewing)
    changes = [
        c
        for c in changes_since_seal(root, jobs=jobs)
        if not (c.change == "added" and _approval_file(root, c.path)) and c.path not in renewed
    ]
    unsealed = not (root / MANIFEST_NAME).exists() and not changes
    lost = lost_seal(root, jobs) if unsealed else None
    if lost is not None:
        # Sealing it as new would launder whatever was edited since the seal went.
        changes = [ReviewedChange(MANIFEST_NAME, "missing")]
        if reseal_after_review:
            return Review(command, tuple(changes))
        raise SealBroken(
            f"{root} has lost its seal: it holds {lost}, which only a sealed campaign does, "
            f"but no manifest.json; nothing vouches for its files since, so 'ledger {command}' "
            "will not seal them as they are. Review them, then run it again with "
            "--reseal-after-review (recorded in manifest.json)",
            changes,
        )
    if unsealed and not require_seal:
        return None
    if not changes and not unsealed:
        return None
    if reseal_after_review:
        return Review(command, tuple(changes))
    if unsealed:
        raise SealBroken(
            f"{root} has no seal (manifest.json); nothing vouches for its files, so "
            f"'ledger {command}' will not seal them. Review them, then run it again with "
            "--reseal-after-review",
            [],
        )
    shown = ", ".join(f"{c.path} ({c.change})" for c in changes[:8])
    more = f" and {len(changes) - 8} more" if len(changes) > 8 else ""
    raise SealBroken(
        f"{root} no longer matches its seal: {shown}{more}. 'ledger {command}' would seal "
        "the changes as if they were evidence; run 'ledger verify', review them, then run "
        "it again with --reseal-after-review (recorded in manifest.json)",
        changes,
    )


def seal_files(
    folder: str | Path,
    pending: Mapping[str, bytes] | None = None,
    *,
    withhold: Iterable[str] = (),
    withhold_missing: bool = False,
    reason: str = DEFAULT_WITHHELD_REASON,
    disclosed: Mapping[str, str] | None = None,
    carried: Sequence[WithheldEntry] = (),
    reviews: Sequence[Review] = (),
    jobs: int | None = None,
    signed: bool = False,
) -> tuple[Manifest, dict[str, bytes]]:
    """The seal of a campaign folder as it will be once ``pending`` (relative path to
    bytes) is written: ``manifest.json``, ``SHA256SUMS`` and, when the folder has one, the
    statement with its subjects brought up to date.

    The manifest declares the statement and its bundle when the folder has them, or when
    ``signed`` (the bundle ``ledger sign`` is about to write over this very statement).

    Existing ``withheld`` declarations and reviews are kept (a withheld path now present
    is listed instead); ``carried`` adds declarations from elsewhere (a publication carries
    its raw campaign's).

    Raises:
        VerificationError: the folder holds something a seal must not vouch for (a symlink,
            a special file, an unreadable file) or a withheld path is unsafe.
    """
    root = Path(folder)
    if not root.is_dir():
        raise VerificationError(f"{root} is not a folder")
    pending = pending or {}
    disclosed = disclosed or {}
    artifacts = _current_digests(root, pending, jobs)
    present = {a.path for a in artifacts}
    try:
        previous = _previous(root)
    except VerificationError:
        if not reviews:
            raise
        # A reviewed re-seal over an unreadable manifest: its declarations are lost with
        # it, and the review records that it changed.
        previous = None
    withheld = {e.path: e for e in [*carried, *(previous.withheld if previous else ())]}
    reviews = [*(previous.reviews if previous else ()), *reviews]
    wanted = list(withhold)
    summary = _read_summary(root)
    if withhold_missing and summary is not None:
        wanted.extend(path for _, path in named_artifacts(summary))
    for path in wanted:
        issue = tree.check_relative_path(path)
        if issue is not None:
            raise VerificationError(f"cannot withhold {path!r}: {issue.message}")
        if path not in withheld:
            withheld[path] = WithheldEntry(path, reason, disclosed.get(path))
    campaign_id = check_name("campaign", root.resolve().name)
    has = {name for name in _SEAL_ORDER if name in pending or (root / name).exists()}
    if signed:
        has.add(BUNDLE_NAME)
    manifest = Manifest(
        Manifest.SCHEMA,
        campaign_id,
        tuple(artifacts),
        tuple(withheld[p] for p in sorted(withheld) if p not in present),
        tuple(reviews),
        tuple(name for name in _SEAL_ORDER if name in has),
    )
    manifest_bytes = jsonio.dumps_deterministic(unstructure(manifest))
    sums = [(a.path, a.sha256) for a in artifacts]
    sums.append((MANIFEST_NAME, sha256_bytes(manifest_bytes)))
    files = {MANIFEST_NAME: manifest_bytes}
    if STATEMENT_NAME in has:
        from ledger import signatures

        # A signature over the old statement no longer matches; it must be signed again.
        old = pending.get(STATEMENT_NAME) or jsonio.read_limited(root / STATEMENT_NAME)
        files[STATEMENT_NAME] = signatures.with_subjects(jsonio.parse_strict(old), sums)
    # SHA256SUMS also gives the digests of the declared statement and bundle (they cannot
    # be in the manifest, which the statement covers): sha256sum -c checks them too.
    sealed = {STATEMENT_NAME: files.get(STATEMENT_NAME), BUNDLE_NAME: pending.get(BUNDLE_NAME)}
    for name in manifest.seals:
        data = sealed[name]
        if data is not None:
            sums.append((name, sha256_bytes(data)))
        elif (root / name).exists():
            sums.append((name, sha256_file(root / name)[0]))
    files[SUMS_NAME] = render_sums(sums)
    return manifest, files


def sums_adding(sums: bytes, files: Mapping[str, bytes]) -> bytes:
    """``SHA256SUMS`` as :func:`render_sums` writes it, with ``files`` added (the bundle
    ``ledger sign`` writes after the statement it signs)."""
    digests, _ = parse_sums(sums)
    digests.update((name, sha256_bytes(data)) for name, data in files.items())
    return render_sums(digests.items())


def write_sealed(
    folder: str | Path,
    files: Mapping[str, bytes],
    *,
    command: str,
    reseal_after_review: bool = False,
    checked: tuple[Review | None] | None = None,
    also: Changes | None = None,
    replace: bool = True,
) -> Manifest:
    """Checks the campaign's seal, then writes ``files`` into it and re-seals it, all at
    once or not at all.

    Args:
        checked: what :func:`check_seal` returned, when the caller checked the seal
            before doing its work (so a large campaign is not hashed twice).
        also: the command's writes outside the campaign (a ticket), committed together.

    Raises:
        SealBroken: the seal does not hold (see :func:`check_seal`).
        OutputExists: a file exists and ``replace`` is false.
    """
    root = Path(folder)
    if checked is None:
        review = check_seal(root, command, reseal_after_review=reseal_after_review)
    else:
        (review,) = checked
    changes = also or Changes()
    for rel, data in files.items():
        changes.put(root, rel, data, replace=replace)
    sealed, seal = seal_files(root, files, reviews=[review] if review else [], jobs=1)
    for rel, data in seal.items():
        changes.put(root, rel, data)
    changes.commit()
    return sealed


def seal(
    folder: str | Path,
    *,
    withhold: Iterable[str] = (),
    withhold_missing: bool = False,
    reason: str = DEFAULT_WITHHELD_REASON,
    reseal_after_review: bool = False,
    check: bool = True,
    jobs: int | None = None,
) -> Manifest:
    """Writes ``manifest.json`` and ``SHA256SUMS`` for a campaign folder from its files.

    A folder sealed before must still match its seal (else :class:`SealBroken`, unless
    ``reseal_after_review``, which is recorded); a folder never sealed is sealed as it is.
    Existing ``withheld`` declarations are kept (unless the file is now present).

    Args:
        folder: the campaign folder (raw or public).
        withhold: paths to declare withheld: absent from the folder, or present and
            removed from it by this seal (the raw original stays with the operator).
        withhold_missing: declare withheld every artifact the summary names that the folder
            does not hold.
        reason: the reason recorded for new withheld declarations.
        check: whether to check the previous seal (false only for a folder this process
            has just written, as ``ledger run`` does).
        jobs: processes used for hashing.

    Raises:
        SealBroken: the previous seal does not hold.
        VerificationError: the folder holds something a seal must not vouch for (a symlink,
            a special file, an unreadable file) or a withheld path is unsafe.
    """
    root = Path(folder)
    if not root.is_dir():
        raise VerificationError(f"{root} is not a folder")
    # Before the seal is checked: an evidence root given as a campaign is a mistake, and
    # reading its every campaign for a lost seal would only say so later.
    check_name("campaign", root.resolve().name)
    review = None
    if check:
        review = check_seal(
            root, "seal", reseal_after_review=reseal_after_review, require_seal=False, jobs=jobs
        )
    held = list(dict.fromkeys(withhold))
    for path in held:
        issue = tree.check_relative_path(path)
        if issue is not None:
            raise UsageError(f"cannot withhold {path!r}: {issue.message}")
        if path in SEAL_FILES:
            raise UsageError(f"cannot withhold {path!r}: a seal file, not an artifact")
        if (root / path).is_dir():
            raise UsageError(f"cannot withhold {path!r}: a folder; withhold its files")
    # A present file declared withheld moves beside the campaign, where the operator keeps
    # it; its digest is disclosed so that references to it stay checkable.
    aside = withheld_folder(root)
    present = [p for p in held if (root / p).is_file() and not (root / p).is_symlink()]
    for path in present:
        if (aside / path).exists():
            raise OutputExists(f"{aside / path} exists; nothing was moved or sealed")
    disclosed = {p: sha256_file(root / p)[0] for p in present}
    moved: list[str] = []
    try:
        for path in present:
            (aside / path).parent.mkdir(parents=True, exist_ok=True)
            os.replace(root / path, aside / path)
            moved.append(path)
        manifest, files = seal_files(
            root,
            withhold=held,
            withhold_missing=withhold_missing,
            reason=reason,
            disclosed=disclosed,
            reviews=[review] if review else [],
            jobs=jobs,
        )
        changes = Changes()
        for rel, data in files.items():
            changes.put(root, rel, data)
        changes.commit()
    except BaseException:
        for path in reversed(moved):
            os.replace(aside / path, root / path)
        raise
    return manifest


def withheld_folder(campaign: str | Path) -> Path:
    """Where ``seal --withhold`` keeps the present files it withholds: beside the campaign,
    never inside a tree that is published."""
    root = Path(campaign).absolute()
    return root.parent / f"{root.name}.withheld"
