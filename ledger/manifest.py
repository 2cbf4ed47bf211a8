"""Campaign manifests and ``SHA256SUMS``: sealing a folder, and reading what a seal says.

``manifest.json`` lists every file of a campaign folder with its digest, size and schema,
and the artifacts declared ``withheld`` (operator-private raw originals that the summary
rests on but that are not published). ``SHA256SUMS`` repeats the digests, the manifest's
own included, so that ``sha256sum -c SHA256SUMS`` works without the toolkit.

Sealing proves integrity from the moment of sealing, never correctness: verify's other
checks still apply to a re-sealed folder.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from ledger import gate
from ledger._internal import jsonio, scan, tree
from ledger._internal.findings import Issue
from ledger.errors import InvalidArtifact, SchemaError, VerificationError
from ledger.hashing import sha256_bytes
from ledger.models import (
    BenchmarkDecisionSummary,
    Manifest,
    ManifestEntry,
    OsComparison,
    WithheldEntry,
    read_artifact,
    unstructure,
)

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

DEFAULT_WITHHELD_REASON = "operator-private raw artifact; not published"

_SUMS_LINE = re.compile(r"(?P<digest>[0-9a-f]{64}) [ *](?P<path>[^\n]+)")


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


def parse_sums(data: bytes) -> tuple[dict[str, str], list[Issue]]:
    """Reads a ``SHA256SUMS`` file.

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
    for number, line in enumerate(text.splitlines(), start=1):
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


def seal(
    folder: str | Path,
    *,
    withhold: Iterable[str] = (),
    withhold_missing: bool = False,
    reason: str = DEFAULT_WITHHELD_REASON,
    jobs: int | None = None,
) -> Manifest:
    """Writes ``manifest.json`` and ``SHA256SUMS`` for a campaign folder from its files.

    Existing ``withheld`` declarations are kept (unless the file is now present).

    Args:
        folder: the campaign folder (raw or public).
        withhold: paths to declare withheld.
        withhold_missing: declare withheld every artifact the summary names that the folder
            does not hold.
        reason: the reason recorded for new withheld declarations.
        jobs: processes used for hashing.

    Raises:
        VerificationError: the folder holds something a seal must not vouch for (a symlink,
            a special file, an unreadable file) or a withheld path is unsafe.
    """
    root = Path(folder)
    if not root.is_dir():
        raise VerificationError(f"{root} is not a folder")
    listing = tree.list_campaign(root)
    if listing.issues:
        rel, problem = listing.issues[0]
        raise VerificationError(f"cannot seal {root}: {rel}: {problem.message}")
    entries = [e for e in listing.entries if e.rel not in SEAL_FILES]
    tasks = [scan.FileTask(e.path, e.rel, e.rel.endswith(".json"), e.identity) for e in entries]
    results = scan.process_files(tasks, jobs=jobs)
    artifacts = []
    for result in results:
        if result.sha256 is None or result.size is None:
            raise VerificationError(
                f"cannot seal {root}: {result.rel}: "
                f"{result.issues[0].message if result.issues else 'unread'}"
            )
        artifacts.append(ManifestEntry(result.rel, result.sha256, result.size, result.schema))
    present = {a.path for a in artifacts}

    withheld: dict[str, WithheldEntry] = {}
    previous = root / MANIFEST_NAME
    if previous.exists():
        try:
            for entry in read_manifest(previous).withheld:
                withheld[entry.path] = entry
        except (OSError, InvalidArtifact, SchemaError) as e:
            raise VerificationError(
                f"cannot keep the withheld declarations of {previous}: {e}"
            ) from None
    wanted = list(withhold)
    summary = _read_summary(root)
    if withhold_missing and summary is not None:
        wanted.extend(path for _, path in named_artifacts(summary))
    for path in wanted:
        issue = tree.check_relative_path(path)
        if issue is not None:
            raise VerificationError(f"cannot withhold {path!r}: {issue.message}")
        if path not in present and path not in withheld:
            withheld[path] = WithheldEntry(path, reason)
    campaign_id = summary.campaign_id if summary is not None else root.resolve().name
    manifest = Manifest(
        Manifest.SCHEMA,
        campaign_id,
        tuple(artifacts),
        tuple(withheld[p] for p in sorted(withheld) if p not in present),
    )
    manifest_bytes = jsonio.write_json(root / MANIFEST_NAME, unstructure(manifest))
    sums = [(a.path, a.sha256) for a in artifacts]
    sums.append((MANIFEST_NAME, sha256_bytes(manifest_bytes)))
    jsonio.write_atomic(root / SUMS_NAME, render_sums(sums))
    if (root / STATEMENT_NAME).exists():
        from ledger._internal import intoto

        # A signature over the old statement no longer matches; it must be signed again.
        intoto.rewrite(root, [(a.path, a.sha256) for a in artifacts] + [sums[-1]])
    return manifest
