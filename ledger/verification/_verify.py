"""``ledger verify``: every check of an evidence tree, a campaign folder or one document.

Files are read and checked in parallel (see :mod:`ledger.evidence.scan`); the checks that
need more than one file (manifest against files, SHA256SUMS, references, the summary's
named artifacts and promotion evidence) run afterwards in this process.
"""

from __future__ import annotations

import itertools
import os
import re
import stat
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import attrs

from ledger import promotion, signatures
from ledger.database.sql import SET_ASIDE
from ledger.errors import Error, InvalidArtifact, SchemaError, UsageError, printable
from ledger.evidence import gate, manifest, runs, scan, tree
from ledger.findings import CODES, Finding, Issue
from ledger.formats import cell_records, jsonio
from ledger.formats.models import Manifest
from ledger.formats.regular import kind_of
from ledger.formats.schema import SchemaId, read_document
from ledger.promotion.policy import Policy, load_policy
from ledger.reporting import tickets
from ledger.sanitizer import CURRENT_VERSION, load_rules, rules_file

if TYPE_CHECKING:
    from ledger.database import Known

_MAX_SUMS_BYTES = 16 << 20


class UnusablePathError(Error):
    """A path given to verify does not exist or cannot be read (exit status 2)."""


@attrs.frozen
class Report:
    """The outcome of a verification."""

    findings: tuple[Finding, ...]
    """Every finding, sorted by campaign, path, pointer and code."""
    campaign_names: tuple[str, ...]
    """Each campaign folder verified, as reached from the arguments (a finding's
    ``campaign``), in the order verified."""
    documents: tuple[str, ...]
    """Each lone JSON document verified."""
    artifacts: int
    """Files read, seal files excluded."""

    @property
    def campaigns(self) -> int:
        """Campaign folders verified."""
        return len(self.campaign_names)

    @property
    def errors(self) -> int:
        """Error findings."""
        return sum(1 for f in self.findings if f.severity == "error")

    @property
    def warnings(self) -> int:
        """Warning findings."""
        return sum(1 for f in self.findings if f.severity == "warning")

    @property
    def ok(self) -> bool:
        """True when there is no error finding."""
        return self.errors == 0

    def summary_line(self) -> str:
        """``N errors, M warnings in K campaigns, A artifacts``."""
        return (
            f"{self.errors} errors, {self.warnings} warnings in {self.campaigns} campaigns, "
            f"{self.artifacts} artifacts"
        )

    def to_json(self) -> dict[str, Any]:
        """The ``--format json`` document."""
        return {
            "findings": [f.to_json() for f in self.findings],
            "summary": {
                "errors": self.errors,
                "warnings": self.warnings,
                "campaigns": self.campaigns,
                "artifacts": self.artifacts,
                "ok": self.ok,
            },
        }

    def render_text(self) -> str:
        """Findings grouped by campaign, one line each, then the summary line."""
        lines: list[str] = []
        group: str | None = None
        for finding in self.findings:
            if finding.campaign != group:
                group = finding.campaign
                lines.append(printable(group or "(documents)"))
            shown = finding.path
            if finding.campaign and shown.startswith(finding.campaign + "/"):
                shown = shown[len(finding.campaign) + 1 :]
            where = f"{shown}#{finding.pointer}" if finding.pointer else shown
            lines.append(
                printable(f"  {finding.severity:<7} {finding.code:<26} {where}: {finding.message}")
            )
        lines.append(self.summary_line())
        return "\n".join(lines) + "\n"


@attrs.define
class _Campaign:
    display: str
    folder: Path
    listing: tree.Listing
    first_task: int = 0
    task_count: int = 0
    scanned: bool = False
    """Whether its files (and file names) are scanned for private data: a publication's."""


def _join(display: str, rel: str) -> str:
    return f"{display.rstrip('/')}/{rel}" if display else rel


def _targets(
    paths: Sequence[str],
) -> tuple[list[tuple[str, Path]], list[str], list[Finding], list[tuple[str, Path]]]:
    campaigns: list[tuple[str, Path]] = []
    roots: list[tuple[str, Path]] = []
    documents: list[str] = []
    findings: list[Finding] = []
    for raw in paths:
        display = raw.rstrip("/") or raw
        try:
            st = os.stat(raw)
        except OSError as e:
            raise UnusablePathError(f"{raw}: {e.strerror or e}") from None
        if stat.S_ISREG(st.st_mode):
            if not os.access(raw, os.R_OK):
                raise UnusablePathError(f"{raw}: permission denied")
            documents.append(display)
            continue
        if not stat.S_ISDIR(st.st_mode):
            raise UnusablePathError(f"{raw}: {kind_of(st.st_mode)}, not a file or a folder")
        folder = Path(raw)
        if tree.is_campaign(folder):
            campaigns.append((display, folder))
            continue
        try:
            children = sorted(
                p
                for p in folder.iterdir()
                if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")
            )
        except OSError as e:
            raise UnusablePathError(f"{raw}: {e.strerror or e}") from None
        if not children:
            findings.append(
                Finding(
                    display,
                    "",
                    "no-campaign",
                    "error",
                    "no campaign folder here (a campaign holds manifest.json, "
                    "SHA256SUMS or summary.json)",
                    display,
                )
            )
        for child in children:
            shown = _join(display, child.name)
            if tree.holds_campaigns(child):
                # One level too high: its campaigns would each read as files of one.
                findings.append(
                    Finding(
                        shown,
                        "",
                        "no-campaign",
                        "error",
                        f"a folder of campaigns, not a campaign; verify it as the evidence "
                        f"root: ledger verify {shown}",
                        shown,
                    )
                )
            else:
                campaigns.append((shown, child))
        roots.append((display, folder))
    # A campaign reached twice (``verify evidence evidence/x``) is verified once, under
    # the name it was first reached by: twice, each finding would be counted twice.
    return (
        _once(campaigns),
        [d for d, _ in _once([(d, Path(d)) for d in documents])],
        findings,
        _once(roots),
    )


def _once(targets: list[tuple[str, Path]]) -> list[tuple[str, Path]]:
    seen: set[Path] = set()
    out = []
    for display, path in targets:
        resolved = path.resolve()
        if resolved not in seen:
            seen.add(resolved)
            out.append((display, path))
    return out


_SIGNATURE_FILES = frozenset({manifest.STATEMENT_NAME, manifest.BUNDLE_NAME})


def _is_signature(rel: str) -> bool:
    """A sigstore bundle: not an anvil artifact (no schema field); scanned as text."""
    return rel in _SIGNATURE_FILES or rel.endswith(manifest.BUNDLE_SUFFIX)


def _rules_named(folder: Path) -> tuple[str | None, Issue | None]:
    """The sanitizer rules version a publication's statement names, to scan it with (None:
    the current rules), and what to report of it: a version older than the current one,
    or the same version as another build made it (the rules it names are used), is a
    warning; one this ledger does not ship is an error (the current rules are used)."""
    try:
        statement = jsonio.read_json(folder / manifest.STATEMENT_NAME)
    except (OSError, InvalidArtifact):
        return None, None  # no statement, or one the statement check reports
    named = statement.get("predicate") if isinstance(statement, dict) else None
    named = named.get("sanitizer") if isinstance(named, dict) else None
    version = named.get("version") if isinstance(named, dict) else None
    digest = named.get("sha256") if isinstance(named, dict) else None
    if not isinstance(version, str):
        return None, None
    path = rules_file(version)
    if path is None:
        return None, Issue(
            "sanitizer-unknown",
            "/predicate/sanitizer/version",
            f"made with sanitizer rules v{printable(version)}, which this ledger does not "
            f"ship; scanned with the current rules v{CURRENT_VERSION}",
        )
    if version != CURRENT_VERSION:
        return version, Issue(
            "sanitizer-outdated",
            "/predicate/sanitizer/version",
            f"made with sanitizer rules v{version}, checked against them; the current "
            f"rules are v{CURRENT_VERSION}: publish the raw campaign again to apply them",
        )
    if digest != load_rules(path).sha256:
        return version, Issue(
            "sanitizer-outdated",
            "/predicate/sanitizer/sha256",
            f"made with another build of sanitizer rules v{version} (sha256 "
            f"{printable(str(digest))}); checked against this ledger's v{version}",
        )
    return version, None


def _is_public(folder: Path) -> bool:
    """A published campaign: it has a statement, or a decision summary and no raw run (a
    run's manifest, or a run imported from another tool: a summary decided on imports
    alone is no publication until ``ledger publish`` makes one, statement and all)."""
    if (folder / manifest.STATEMENT_NAME).exists():
        return True
    if not (folder / manifest.SUMMARY_NAME).exists() or (folder / "run-manifest.json").exists():
        return False
    return not promotion.imported_runs(folder)


def verify_paths(
    paths: Sequence[str],
    *,
    jobs: int | None = None,
    max_json_bytes: int = jsonio.MAX_JSON_BYTES,
    policy: Policy | None = None,
    tickets: str | Path | None = None,
    public: bool = False,
) -> Report:
    """Verifies evidence roots, campaign folders and single JSON documents.

    Args:
        policy: the promotion policy every summary claiming promotion must meet (default:
            the shipped one). Never the policy a campaign records: that file is as easy
            to edit and re-seal as the summary.
        tickets: where linked tickets that a campaign does not hold itself are (default:
            ``tickets/`` beside each evidence root).
        public: every campaign must be a publication: a raw one (a run's, or a summary of
            imports, without a statement) is an error, ``not-published``, and is scanned
            for private data as a publication is. Whether a folder is raw is read from its
            files, which a re-seal can change: deleting a publication's statement made it
            raw, and unscanned, to a plain verify.

    Raises:
        UnusablePathError: a path does not exist or cannot be read.
    """
    policy = policy or load_policy()
    tickets_folder = None if tickets is None else Path(tickets)
    campaign_targets, documents, findings, roots = _targets(paths)
    tasks: list[scan.FileTask] = []
    campaigns = [
        _campaign_tasks(display, folder, public, tasks, findings)
        for display, folder in campaign_targets
    ]
    document_start = len(tasks)
    tasks.extend(scan.FileTask(d, d, True, None) for d in documents)
    beside_start = len(tasks)
    beside = _published_beside(roots, tickets_folder) if public else []
    read_beside = [(b.task, b) for b in beside if b.task is not None]
    tasks.extend(task for task, _ in read_beside)
    groups = [
        scan.Group(c.first_task, c.task_count, str(c.folder), _restates(c.listing))
        for c in campaigns
    ]
    results, restated = scan.process_groups(
        tasks, groups, _after_reading, jobs=jobs, max_json_bytes=max_json_bytes
    )
    artifacts = 0
    recompute: list[tuple[_Campaign, scan.FileResult]] = []
    restate: list[_Campaign] = []
    for index, campaign in enumerate(campaigns):
        mine = results[campaign.first_task : campaign.first_task + campaign.task_count]
        findings.extend(
            _check_campaign(campaign, mine, policy, recompute, restate, restated.get(index))
        )
        artifacts += sum(1 for r in mine if r.rel not in manifest.SEAL_FILES)
    findings.extend(_derive_again(recompute, restate, results, jobs))
    findings.extend(_ticket_findings(campaigns, results, roots, tickets_folder))
    findings.extend(_beside_findings(results[beside_start:], read_beside, beside))
    documents_read = results[document_start:beside_start]
    artifacts += len(documents_read)
    findings.extend(_document_findings(documents_read))
    shown_masked = {c.display for c in campaigns if c.scanned} | {b.under for b in beside}
    findings = [_named_masked(f) if f.campaign in shown_masked else f for f in findings]
    findings.sort(key=_finding_order)
    return Report(
        tuple(findings),
        tuple(c.display for c in campaigns),
        tuple(r.rel for r in documents_read),
        artifacts,
    )


def _campaign_tasks(
    display: str, folder: Path, public: bool, tasks: list[scan.FileTask], findings: list[Finding]
) -> _Campaign:
    """A campaign folder listed and its files added to ``tasks``; what its listing alone
    shows (its rules, whether it is published) added to ``findings``."""
    listing = tree.list_campaign(folder)
    published = _is_public(folder)
    scanned = published or public
    campaign = _Campaign(display, folder, listing, len(tasks), len(listing.entries), scanned)
    rules, issue = _rules_named(folder) if published else (None, None)
    if issue is not None:
        # Its pointer is into the statement, which names the rules.
        findings.append(Finding.of(_join(display, manifest.STATEMENT_NAME), issue, display))
    if public and not published:
        findings.append(
            Finding.of(
                display,
                Issue(
                    "not-published",
                    "",
                    "a raw campaign (no statement.intoto.json) where every campaign must "
                    "be a publication; publish it with 'ledger publish'",
                ),
                display,
            )
        )
    tasks.extend(
        scan.FileTask(
            e.path,
            e.rel,
            e.rel.endswith(".json") and not _is_signature(e.rel),
            e.identity,
            # The manifest carries the operator's words (withheld reasons) and paths,
            # the statement the decision: both are published. The sums only name
            # files, and a bundle is the signer's certificate, public in the log.
            scanned and e.rel not in _UNSCANNED_SEAL_FILES,
            rules,
        )
        for e in listing.entries
    )
    return campaign


def _beside_findings(
    results: Sequence[scan.FileResult],
    read_beside: Sequence[tuple[scan.FileTask, _Beside]],
    beside: Sequence[_Beside],
) -> list[Finding]:
    """What an evidence repository publishes beside its campaigns: scanned, not counted."""
    from ledger.publication import name_hits

    findings: list[Finding] = []
    for result, (_, entry) in zip(results, read_beside, strict=True):
        findings.extend(Finding.of(result.rel, i, entry.under) for i in result.issues)
    for entry in beside:
        name = entry.rel[len(entry.under) + 1 :]
        issues = [
            Issue("private-data", "", f"{category} in a public file name")
            for category in dict.fromkeys(name_hits(scan.detector(), name))
        ]
        if entry.link is not None:
            issues += _symlink_issues(entry.link, entry.place)
        findings.extend(Finding.of(entry.rel, i, entry.under) for i in issues)
    return findings


def _document_findings(results: Sequence[scan.FileResult]) -> list[Finding]:
    """The findings of single documents named on the command line."""
    findings: list[Finding] = []
    for result in results:
        findings.extend(Finding.of(result.rel, i) for i in result.issues)
        findings.extend(Finding.of(rel, i) for rel, i in result.elsewhere)
        summary = result.summary
        if summary is not None:
            findings.extend(
                Finding.of(result.rel, i) for i in gate.check_promotion_evidence(summary, ())
            )
    return findings


class _Beside(NamedTuple):
    """A file an evidence repository publishes beside its campaigns."""

    task: scan.FileTask | None
    """How it is read (a symlink: where it leads); None for a symlink that leads to no file."""
    rel: str
    """Its name in findings."""
    under: str
    """The name of the folder it lies under (a root, the tickets folder)."""
    place: Path
    """That folder."""
    link: Path | None
    """The symlink it is, if it is one."""


def _published_beside(roots: Sequence[tuple[str, Path]], given: Path | None) -> list[_Beside]:
    """The files an evidence repository publishes beside its campaigns, to be scanned for
    private data: the files at the top of each evidence root (a README, notes) and in its
    hidden folders (``.github/``: no campaign is hidden), and every file of the tickets
    folder (a ticket opened on a raw campaign quotes its raw values)."""
    found: list[_Beside] = []
    seen: set[Path] = set()

    def add(place: Path, name: str, paths: Iterable[Path]) -> None:
        for path in sorted(paths):
            if path.is_dir() and not path.is_symlink():
                continue
            # A pipe or a device is opened without blocking and named not-regular-file; a
            # symlink is read where it leads (a copy that follows links publishes that).
            rel = _join(name, path.relative_to(place).as_posix())
            link = path if path.is_symlink() else None
            opened = path.resolve() if link is not None else path
            task = None
            if link is None or opened.is_file():
                task = scan.FileTask(str(opened), rel, False, None, True)
            found.append(_Beside(task, rel, name, place, link))

    for display, root in roots:
        folder, shown = _tickets_beside(display, root, given)
        if root.resolve() not in seen:
            seen.add(root.resolve())
            top = list(root.iterdir())
            hidden = [
                p for p in top if p.is_dir() and not p.is_symlink() and p.name.startswith(".")
            ]
            add(root, display, [*top, *(f for h in hidden for f in h.rglob("*"))])
        if folder.is_dir() and folder.resolve() not in seen:
            seen.add(folder.resolve())
            add(folder, shown, folder.rglob("*"))
    return found


def _tickets_beside(display: str, root: Path, given: Path | None) -> tuple[Path, str]:
    """The tickets folder of an evidence root (``given``, else ``tickets/`` beside it) and
    the name findings give it."""
    if given is not None:
        return given, str(given)
    shown = _join(os.path.dirname(display.rstrip("/")) or ".", tickets.TICKETS_FOLDER)
    return root.resolve().parent / tickets.TICKETS_FOLDER, shown


def _symlink_issues(path: Path, place: Path) -> list[Issue]:
    """What a symlink an evidence repository publishes beside its campaigns gives away: git
    publishes its target's text, and a copy that follows links (``rsync -L``, a pages
    upload) publishes the file it leads to, wherever that is."""
    from ledger.publication import name_hits

    target = os.readlink(path)
    found = [
        Issue("private-data", "", f"{category} in a public symlink's target")
        for category in dict.fromkeys(name_hits(scan.detector(), target))
    ]
    if not path.resolve().is_relative_to(place.resolve()):
        found.append(
            Issue("path-escape", "", "a symlink leading out of the folder it is published in")
        )
    return found


def _named_masked(finding: Finding) -> Finding:
    """A finding of a public campaign with what the detectors find in its file's names
    masked, and in its message: a finding is printed, and kept in CI logs, whatever its
    code (a ticket's parse error names its path)."""
    from ledger.publication import masked_path

    # A private-data finding's message is the detectors' own words, masked where it
    # quotes a key; read again, "api_key: credential" would mask its own category.
    if finding.code != "private-data":
        message = scan.detector().masked(finding.message)
        if message != finding.message:
            finding = attrs.evolve(finding, message=message)
    prefix = finding.campaign + "/"
    if not finding.path.startswith(prefix):
        return finding
    rel = finding.path[len(prefix) :]
    shown = masked_path(scan.detector(), rel)
    return finding if shown == rel else attrs.evolve(finding, path=prefix + shown)


def _ticket_findings(
    campaigns: Sequence[_Campaign],
    results: Sequence[scan.FileResult],
    roots: Sequence[tuple[str, Path]],
    given: Path | None,
) -> list[Finding]:
    """Published campaigns that need a follow-up link tickets; tickets name campaigns."""
    out = []
    for campaign in campaigns:
        if not _is_public(campaign.folder):
            continue
        mine = results[campaign.first_task : campaign.first_task + campaign.task_count]
        summary = next((r for r in mine if r.rel == manifest.SUMMARY_NAME), None)
        if summary is None or summary.summary is None:
            continue
        document = {
            # The folder is the campaign; a summary naming another id has its own finding.
            "campaign_id": campaign.folder.resolve().name,
            "failures": list(summary.summary.failures or ()),
            "decision": {"next_gate": summary.summary.decision.next_gate},
        }
        folder = given or tickets.tickets_folder_for(campaign.folder)
        for link in tickets.campaign_link_issues(campaign.folder, document, folder):
            out.append(
                Finding.of(
                    _join(campaign.display, link.rel),
                    Issue(link.code, "", link.message),
                    campaign.display,
                )
            )
    for display, root in roots:
        folder, shown = _tickets_beside(display, root, None)
        names = {c.folder.resolve().name for c in campaigns if c.folder.parent == root}
        if folder.is_dir():
            # A tickets folder serves every root beside it (raw/ and public/ share one):
            # a ticket of a neighbour's campaign is no unknown campaign of this root's.
            names |= tickets.campaigns_beside(folder)
        for link in tickets.folder_issues(folder, names):
            out.append(
                Finding.of(_join(shown, link.rel), Issue(link.code, "", link.message), shown)
            )
    return out


def _natural(parts: list[str]) -> tuple[tuple[int, int, str], ...]:
    """A sort key in which parts of ASCII digits compare as numbers: by their length
    without leading zeros, then digit by digit (int() refuses past 4,300 digits, and a
    pointer or a message may hold more)."""
    return tuple(
        (0, len(p.lstrip("0")), p.lstrip("0")) if p.isascii() and p.isdigit() else (1, 0, p)
        for p in parts
    )


def _finding_order(f: Finding) -> tuple[Any, ...]:
    # /withheld/2 before /withheld/10, and "line 5: ..." before "line 13: ...".
    return (
        f.campaign,
        f.path,
        _natural(f.pointer.split("/")),
        f.code,
        _natural(re.split(r"([0-9]+)", f.message)),
    )


def _read_manifest(folder: Path, result: scan.FileResult | None) -> Manifest | None:
    # Private data in a publication's manifest is its own finding: the manifest still
    # holds, and what it declares (withheld files, reviews) is still checked.
    if (
        result is None
        or result.sha256 is None
        or any(CODES[i.code][0] == "error" and i.code != "private-data" for i in result.issues)
    ):
        return None
    try:
        return manifest.read_manifest(folder / manifest.MANIFEST_NAME)
    except (OSError, InvalidArtifact, SchemaError):
        # Changed since it was checked: the worker's findings stand for it.
        return None


_Add = Callable[[str, Issue], None]
"""Records a finding about a file of the campaign (its path relative to the campaign)."""


def _check_campaign(
    campaign: _Campaign,
    results: Sequence[scan.FileResult],
    policy: Policy,
    recompute: list[tuple[_Campaign, scan.FileResult]],
    restate: list[_Campaign],
    restated: list[Issue] | None = None,
) -> list[Finding]:
    """The campaign's findings; the derived comparisons to derive again are added to
    ``recompute`` (all of them are derived in one database, afterwards), and the campaign
    to ``restate`` when its summary is to be restated and its worker did not
    (``restated``: what the worker that read it found, :func:`_after_reading`).

    The checks run stage by stage: what reading each file found, the manifest, the
    SHA256SUMS, the seal files, the runs, then each file's references and summary."""
    display = campaign.display
    out: list[Finding] = []

    def add(rel: str, issue: Issue) -> None:
        out.append(Finding.of(_join(display, rel), issue, display))

    _check_files(campaign, results, add)
    by_rel = {r.rel: r for r in results}
    loaded = _read_manifest(campaign.folder, by_rel.get(manifest.MANIFEST_NAME))
    folder_name = campaign.folder.resolve().name
    listed, withheld = _check_listing(folder_name, loaded, by_rel, results, add)
    present = {r.rel: r.sha256 for r in results if r.sha256 is not None}
    known = listed if loaded is not None else present
    _check_seal(campaign, loaded, by_rel, known, listed, present, add)
    _check_runs(campaign, by_rel, results, withheld, add)
    _check_contents(
        campaign,
        folder_name,
        loaded,
        by_rel,
        results,
        _Listing(known, withheld, present),
        add,
        policy=policy,
        recompute=recompute,
        restate=restate,
        restated=restated,
    )
    return out


class _Listing(NamedTuple):
    """What a campaign's files are, by path: as listed (or present, without a readable
    manifest), as declared withheld, and as found."""

    known: dict[str, str]
    withheld: dict[str, str | None]
    present: dict[str, str]


def _check_files(campaign: _Campaign, results: Sequence[scan.FileResult], add: _Add) -> None:
    """What listing the folder and reading each file found, and, in a public campaign,
    private data in a file's name."""
    for rel, issue in campaign.listing.issues:
        add(rel, issue)
    if campaign.scanned:
        from ledger.publication import name_hits

        for result in results:
            for category in dict.fromkeys(name_hits(scan.detector(), result.rel)):
                # Its path is masked with every other finding's (_named_masked).
                add(result.rel, Issue("private-data", "", f"{category} in a public file name"))
    for result in results:
        for issue in result.issues:
            add(result.rel, issue)
        for rel, issue in result.elsewhere:
            add(rel, issue)


def _check_listing(
    folder_name: str,
    loaded: Manifest | None,
    by_rel: dict[str, scan.FileResult],
    results: Sequence[scan.FileResult],
    add: _Add,
) -> tuple[dict[str, str], dict[str, str | None]]:
    """The manifest against the folder; returns the paths it lists (with their digests)
    and those it declares withheld."""
    if manifest.MANIFEST_NAME not in by_rel:
        add(
            manifest.MANIFEST_NAME,
            Issue("manifest-missing", "", "no manifest.json; run 'ledger seal' on the folder"),
        )
    listed: dict[str, str] = {}
    withheld: dict[str, str | None] = {}
    if loaded is None:
        return listed, withheld
    if loaded.campaign_id != folder_name:
        add(
            manifest.MANIFEST_NAME,
            Issue(
                "campaign-id-mismatch",
                "/campaign_id",
                f"campaign_id {loaded.campaign_id!r} but the folder is {folder_name!r}",
            ),
        )
    for issue in _check_manifest_entries(loaded, by_rel, listed, withheld):
        add(manifest.MANIFEST_NAME, issue)
    for index, review in enumerate(loaded.reviews):
        changed = ", ".join(f"{c.path} ({c.change})" for c in review.changes[:8]) or (
            "a folder without a seal"
        )
        if len(review.changes) > 8:
            changed += f" and {len(review.changes) - 8} more, listed there"
        add(
            manifest.MANIFEST_NAME,
            Issue(
                "resealed-after-review",
                f"/reviews/{index}",
                f"'ledger {review.command}' re-sealed over {changed}",
            ),
        )
    for result in results:
        if result.rel not in manifest.SEAL_FILES and result.rel not in listed:
            add(result.rel, Issue("unlisted-file", "", "present but not in manifest.json"))
    return listed, withheld


def _check_seal(
    campaign: _Campaign,
    loaded: Manifest | None,
    by_rel: dict[str, scan.FileResult],
    known: dict[str, str],
    listed: dict[str, str],
    present: dict[str, str],
    add: _Add,
) -> None:
    """SHA256SUMS against the manifest and the seal files, the statement's subjects, the
    seal files the manifest declares, and the bundle's own consistency."""
    sums = by_rel.get(manifest.SUMS_NAME)
    if sums is None:
        add(
            manifest.SUMS_NAME,
            Issue(
                "sha256sums-missing", "", "no SHA256SUMS; 'sha256sum -c' cannot check this folder"
            ),
        )
    elif sums.sha256 is not None:
        expected = dict(known)
        expected.pop(manifest.SUMS_NAME, None)
        manifest_digest = present.get(manifest.MANIFEST_NAME)
        if manifest_digest is not None:
            expected[manifest.MANIFEST_NAME] = manifest_digest
        # A declared statement and bundle are in SHA256SUMS too; one that is missing has
        # its own finding (seal-file-missing), so its line is not compared.
        missing_seals = set()
        for name in loaded.seals if loaded is not None else ():
            if present.get(name) is not None:
                expected[name] = present[name]
            else:
                missing_seals.add(name)
        for issue in _check_sums(campaign.folder / manifest.SUMS_NAME, expected, missing_seals):
            add(manifest.SUMS_NAME, issue)

    if manifest.STATEMENT_NAME in by_rel and loaded is not None:
        manifest_digest = present.get(manifest.MANIFEST_NAME)
        for issue in _check_statement(campaign.folder, listed, manifest_digest):
            add(manifest.STATEMENT_NAME, issue)
    for index, name in enumerate(loaded.seals if loaded is not None else ()):
        if name not in by_rel:
            add(
                manifest.MANIFEST_NAME,
                Issue(
                    "seal-file-missing",
                    f"/seals/{index}",
                    f"declares {name}, which is missing"
                    + ("; run 'ledger sign' again" if name == manifest.BUNDLE_NAME else ""),
                ),
            )
    bundle = by_rel.get(manifest.BUNDLE_NAME)
    if bundle is not None and bundle.sha256 is not None and manifest.STATEMENT_NAME in by_rel:
        for issue in signatures.check_bundle(campaign.folder):
            add(manifest.BUNDLE_NAME, issue)


def _check_runs(
    campaign: _Campaign,
    by_rel: dict[str, scan.FileResult],
    results: Sequence[scan.FileResult],
    withheld: Mapping[str, str | None],
    add: _Add,
) -> None:
    """The runs: each cell run listed by the run manifest, the run manifest against the
    plan, the sweeps' schedules, and each approval's signature."""
    for rel in _unlisted_runs(by_rel, results):
        add(
            rel,
            Issue(
                "run-unlisted",
                "",
                f"a cell run that {promotion.RUN_MANIFEST} does not list: the database would "
                "pool its requests with the listed cell's",
            ),
        )
    for rel in _unlisted_parts(results, withheld):
        add(
            rel,
            Issue(
                "run-unlisted",
                "",
                "a part of a cell run that no cell run lists (one a killed run was writing, "
                "or a stray): its records are read by nothing",
            ),
        )
    for issue in _run_manifest_issues(campaign.folder, by_rel):
        add(promotion.RUN_MANIFEST, issue)
    # A cell a resumed run set aside is not the cell: its rerun is.
    sweeps = [
        (r.rel, r.sweep) for r in results if r.sweep is not None and not _SET_ASIDE.search(r.rel)
    ]
    for rel, issue in runs.check_sweeps(sweeps):
        add(rel, issue)
    for result in results:
        if result.rel.startswith(manifest.APPROVALS_PREFIX):
            # Sealed or not, an approval is only what its signature makes it.
            why = manifest.approval_problem(campaign.folder, result.rel)
            if why is not None:
                add(result.rel, Issue("approval-unsigned", "", why))


def _check_contents(
    campaign: _Campaign,
    folder_name: str,
    loaded: Manifest | None,
    by_rel: dict[str, scan.FileResult],
    results: Sequence[scan.FileResult],
    listing: _Listing,
    add: _Add,
    *,
    policy: Policy,
    recompute: list[tuple[_Campaign, scan.FileResult]],
    restate: list[_Campaign],
    restated: list[Issue] | None,
) -> None:
    """Each file's references and campaign id, and a summary's named artifacts,
    restatement and policy; the derived comparisons whose references all resolve are
    added to ``recompute``."""
    known, withheld, present = listing
    for result in results:
        resolved = True
        for ref in result.references:
            problem = _check_reference(
                ref.pointer,
                ref.path,
                ref.sha256,
                known,
                withheld,
                present,
                listing=loaded is not None,
            )
            if problem is not None:
                resolved = False
                add(result.rel, problem)
        if resolved and result.derived and result.schema in _DERIVED_SCHEMAS:
            recompute.append((campaign, result))
        summary = result.summary
        if (
            summary is None
            and result.campaign_id is not None
            and result.campaign_id != folder_name
            and result.rel != manifest.MANIFEST_NAME
        ):
            # Copied in from another campaign (or a copied campaign): its rows would be
            # counted under the other campaign's id.
            add(
                result.rel,
                Issue(
                    "campaign-id-mismatch",
                    "/campaign_id",
                    f"campaign_id {result.campaign_id!r} but the folder is {folder_name!r}",
                ),
            )
        if summary is None:
            continue
        if summary.campaign_id != folder_name:
            add(
                result.rel,
                Issue(
                    "campaign-id-mismatch",
                    "/campaign_id",
                    f"campaign_id {summary.campaign_id!r} but the folder is {folder_name!r}",
                ),
            )
        # Without a readable manifest the withheld declarations are unknown: the
        # manifest's own finding is the root cause, not each named artifact.
        for pointer, path in manifest.named_artifacts(summary) if loaded is not None else ():
            problem = _check_named(pointer, path, known, withheld)
            if problem is not None:
                add(result.rel, problem)
        if result.rel == manifest.SUMMARY_NAME and _is_run_summary(by_rel):
            if restated is None:
                restate.append(campaign)
            for issue in restated or ():
                add(result.rel, issue)
        if summary.decision.promotion_authorized and result.rel == manifest.SUMMARY_NAME:
            for issue in _check_policy(campaign.folder, summary, policy):
                add(result.rel, issue)
        elif summary.decision.promotion_authorized:
            for issue in gate.check_promotion_evidence(summary, _listed_kinds(loaded)):
                add(result.rel, issue)


def _unlisted_runs(
    by_rel: dict[str, scan.FileResult], results: Sequence[scan.FileResult]
) -> list[str]:
    """Cell runs of a run's campaign that its run manifest does not name (a set-aside
    interrupted cell is named by none and read by nothing)."""
    run = by_rel.get(promotion.RUN_MANIFEST)
    if run is None or not run.parsed or not _is_kind(run.schema, "run-manifest"):
        return []
    named = {ref.path for ref in run.references}
    return [
        r.rel
        for r in results
        if _is_kind(r.schema, "cell-run") and r.rel not in named and not _SET_ASIDE.search(r.rel)
    ]


def _unlisted_parts(
    results: Sequence[scan.FileResult], withheld: Mapping[str, str | None]
) -> list[str]:
    """Parts of cell runs that no cell run lists; the parts of a cell run declared
    withheld are its own, listed by it where it is."""
    listed = {ref.path for r in results if _is_kind(r.schema, "cell-run") for ref in r.references}
    return [
        r.rel
        for r in results
        if cell_records.is_part(r.rel)
        and r.rel not in listed
        and cell_records.PART_NAME.sub(".json", r.rel) not in withheld
    ]


def _run_manifest_issues(folder: Path, by_rel: dict[str, scan.FileResult]) -> list[Issue]:
    """A run manifest against the plan and the artifacts it lists (what decide and gate
    read it for: which arm, stage and cell each artifact is)."""
    run = by_rel.get(promotion.RUN_MANIFEST)
    if run is None or not _intact(run) or not _is_kind(run.schema, "run-manifest"):
        return []
    # Read and validated again: changed since its worker checked it, it is not trusted.
    try:
        document = read_document(folder / promotion.RUN_MANIFEST)
    except (OSError, InvalidArtifact, SchemaError):
        return []  # its worker's findings stand
    plan_result = by_rel.get(promotion.RUN_PLAN)
    plan = None
    if plan_result is not None and _intact(plan_result):
        try:
            plan = read_document(folder / promotion.RUN_PLAN)
        except (OSError, InvalidArtifact, SchemaError):
            plan = None
    owners = {r.rel: r.owner for r in by_rel.values() if _intact(r)}
    return runs.run_manifest_issues(document, plan, owners)


def _intact(result: scan.FileResult) -> bool:
    return result.parsed and not any(
        CODES[i.code][0] == "error" for i in (*result.issues, *(i for _, i in result.elsewhere))
    )


def _is_kind(schema: str | None, kind: str) -> bool:
    try:
        return schema is not None and SchemaId.parse(schema).kind == kind
    except SchemaError:
        return False


def _derive_again(
    recompute: Sequence[tuple[_Campaign, scan.FileResult]],
    restate: Sequence[_Campaign],
    results: Sequence[scan.FileResult],
    jobs: int | None,
) -> list[Finding]:
    """Every comparison derived again (:func:`_recomputed`) and every summary restated
    (:func:`_restated`), over the cores: the comparisons in one batch per core (each in one
    database of its campaigns), then the summaries, a share of them at a time."""
    derivable = [(c, r) for c, r in recompute if _derivable(r)]
    workers = max(1, min(jobs or scan.default_jobs(), len(derivable) + len(restate)))
    # A campaign's comparisons stay in one batch: its rows are loaded once.
    folders = list(dict.fromkeys(str(c.folder) for c, _ in derivable))
    batches: list[list[tuple[str, str]]] = [[] for _ in range(min(workers, len(folders)))]
    batch_of = {folder: index % max(1, len(batches)) for index, folder in enumerate(folders)}
    for campaign, result in derivable:
        batches[batch_of[str(campaign.folder)]].append((str(campaign.folder), result.rel))
    by_folder = {str(c.folder): c for c, _ in derivable}
    shares = [str(c.folder) for c in restate]
    size = max(1, len(shares) // (workers * 4))
    tasks: list[tuple[str, Any]] = []
    for batch in batches:
        # Told what its files are, its database need not read them again to learn it.
        mine = [by_folder[folder] for folder in dict.fromkeys(f for f, _ in batch)]
        tasks.append(("derive", (batch, _known(mine, results))))
    tasks.extend(("restate", shares[i : i + size]) for i in range(0, len(shares), size))
    done = scan.map_processes(_derivation_task, tasks, jobs=workers, chunksize=1)
    derived, restated = done[: len(batches)], done[len(batches) :]
    by_file = {
        item: issues
        for batch, found in zip(batches, derived, strict=True)
        for item, issues in zip(batch, found, strict=True)
    }
    findings = [
        Finding.of(_join(campaign.display, result.rel), issue, campaign.display)
        for campaign, result in derivable
        for issue in by_file[(str(campaign.folder), result.rel)]
    ]
    findings.extend(
        Finding.of(_join(c.display, manifest.SUMMARY_NAME), issue, c.display)
        for c, found in zip(restate, itertools.chain.from_iterable(restated), strict=True)
        for issue in found
    )
    return findings


def _derivation_task(task: tuple[str, Any]) -> list[list[Issue]]:
    """One task of :func:`_derive_again`: a batch of (folder, comparison) to derive again
    (with what its files are, read), or folders whose summaries to restate; the issues of
    each item."""
    kind, items = task
    if kind == "derive":
        batch, known = items
        return _recomputed(batch, known)
    return [_restated(folder) for folder in items]


def _known(campaigns: Sequence[_Campaign], results: Sequence[scan.FileResult]) -> Known:
    """What a database of these campaigns would learn of their JSON files by reading them
    again, told by the workers that read them (strictly parsed: a file that was not is
    read again)."""
    out: dict[str, tuple[str, Any, str, int, bool] | None] = {}
    for campaign in campaigns:
        mine = results[campaign.first_task : campaign.first_task + campaign.task_count]
        paths = {e.rel: e.path for e in campaign.listing.entries}
        for result in mine:
            if not result.parsed or result.sha256 is None or result.size is None:
                continue
            told = result.artifact
            if told is None or result.schema is None:
                out[paths[result.rel]] = None
            else:
                out[paths[result.rel]] = (
                    result.schema,
                    told[0],
                    result.sha256,
                    result.size,
                    told[1],
                )
    return out


def _restates(listing: tree.Listing) -> bool:
    """Whether a campaign may have its summary restated: it holds a summary and a run
    manifest (whether they are what they say is told once they are read)."""
    names = {e.rel for e in listing.entries}
    return manifest.SUMMARY_NAME in names and promotion.RUN_MANIFEST in names


def _is_run_summary(by_rel: dict[str, scan.FileResult]) -> bool:
    """Whether a campaign's summary is restated: it is a decision summary, beside a run
    manifest."""
    summary = by_rel.get(manifest.SUMMARY_NAME)
    return summary is not None and summary.summary is not None and promotion.RUN_MANIFEST in by_rel


def _after_reading(
    folder: str, results: list[scan.FileResult], documents: dict[str, Any] | None
) -> list[Issue] | None:
    """In the worker that read a whole campaign: its summary restated
    (:func:`_restated`) from the documents it parsed, when it is a run's summary; None
    otherwise."""
    if not _is_run_summary({r.rel: r for r in results}):
        return None
    return _restated(folder, documents)


def _restated(folder_name: str, documents: dict[str, Any] | None = None) -> list[Issue]:
    """A run's summary against its gates and headline figures derived again from the
    evidence, under the policy the summary says decided it (a reserve threshold, a pass
    fraction): the campaign's ``policy.json``, which must be that policy. ``documents``:
    those of the campaign already read and found to meet their schemas, by path."""
    from ledger.promotion import POLICY_NAME
    from ledger.promotion.policy import parse_policy

    folder = Path(folder_name)
    known = documents or {}
    try:
        document = known.get(manifest.SUMMARY_NAME) or read_document(folder / manifest.SUMMARY_NAME)
    except (OSError, InvalidArtifact, SchemaError):
        return []  # changed since it was checked: its worker's findings stand
    try:
        recorded = known.get(POLICY_NAME) or jsonio.read_json(folder / POLICY_NAME)
        used = parse_policy(recorded, source=POLICY_NAME, base=folder)
    except (OSError, InvalidArtifact):
        used = None
    decision = document.get("decision")
    policy = decision.get("policy") if isinstance(decision, dict) else None
    claimed = policy.get("sha256") if isinstance(policy, dict) else None
    if used is None or (used.sha256 != claimed and not _sanitized(folder, used)):
        found = "cannot be read" if used is None else f"has sha256 {used.sha256}"
        return [
            Issue(
                "derived-mismatch",
                "/decision/policy/sha256",
                f"the summary was decided under policy {claimed}, but {POLICY_NAME} {found}: "
                "its gates cannot be derived again",
            )
        ]
    evidence = promotion.load_evidence(folder, documents)
    candidate = decision.get("candidate") if isinstance(decision, dict) else None
    if candidate not in evidence.arms:
        return []
    # Evaluated once: its gates and the comparison it draws on are both restated.
    evaluation = promotion.evaluate(evidence, used, candidate=candidate)
    return [
        *promotion.restated_gates(evidence, document, evaluation.gates),
        *_restated_headlines(evidence, document, evaluation),
        *_restated_match(evidence, document, evaluation),
    ]


_MATCH_LABELS = ("matched-ab", "descriptive-only")


def _restated_match(
    evidence: promotion.Evidence, summary: dict[str, Any], evaluation: promotion.Evaluation
) -> list[Issue]:
    """The evidence label a summary gives its A/B comparison against whether that
    comparison, derived again, is matched under the policy: a comparison derived again
    unmatched after the decision (``derive --replace``) left ``matched-ab`` standing.
    A comparison drawn from a withheld cell run is left to the summary's account, as a
    gate drawn from a withheld artifact is: it cannot be derived again here."""
    from ledger.promotion import match_label

    decision = summary.get("decision")
    labels = decision.get("evidence_labels") if isinstance(decision, dict) else None
    comparison = evidence.comparison(evaluation.comparison)
    if comparison is None or not isinstance(labels, list):
        return []
    if promotion.withheld_sources(comparison, evidence):
        return []
    wanted = match_label(evaluation)
    stated = [label for label in labels if label in _MATCH_LABELS]
    if stated == [wanted]:
        return []
    return [
        Issue(
            "derived-mismatch",
            "/decision/evidence_labels",
            f"states {' and '.join(stated) or 'neither matched-ab nor descriptive-only'}; "
            f"derived again from {evaluation.comparison}: {wanted} (decide again after "
            "deriving)",
        )
    ]


def _sanitized(folder: Path, policy: Policy) -> bool:
    """Whether a publication's policy differs from the one decided under by what publish
    redacted: an approver's address (its digest then cannot match; its rules are intact)."""
    return _is_public(folder) and any(
        "<redacted:" in approver.identity or "<redacted:" in approver.issuer
        for approver in policy.approvers
    )


_NUMBER = re.compile(r"[-+]?[0-9]+(?:\.[0-9]+)?%?")


def _restated_headlines(
    evidence: promotion.Evidence, summary: dict[str, Any], evaluation: promotion.Evaluation
) -> list[Issue]:
    """The figures of a run's headline results against those of the comparison its
    decision drew on (which is itself derived again from the raw rows): the prose around
    them is the deciding version's, the numbers are the claim."""
    from ledger.promotion import headlines_of

    stated = summary.get("headline_results")
    if not isinstance(stated, list):
        return []
    derived = headlines_of(evidence, evaluation.comparison)
    if len(stated) != len(derived):
        return [
            Issue(
                "derived-mismatch",
                "/headline_results",
                f"states {len(stated)} results; derived again from "
                f"{evaluation.comparison or 'no comparison'}: {len(derived)}",
            )
        ]
    issues = []
    for index, (line, again) in enumerate(zip(stated, derived, strict=True)):
        said, wanted = _NUMBER.findall(str(line)), _NUMBER.findall(again)
        if said == wanted:
            continue
        if len(said) == len(wanted):
            # The figures that differ, not the line's forty.
            pairs = [(a, b) for a, b in zip(said, wanted, strict=True) if a != b]
            said, wanted = [a for a, _ in pairs], [b for _, b in pairs]
        issues.append(
            Issue(
                "derived-mismatch",
                f"/headline_results/{index}",
                f"states {', '.join(said[:4]) or 'no figure'}; derived again from "
                f"{evaluation.comparison}: {', '.join(wanted[:4]) or 'no figure'}",
            )
        )
    return issues


def _check_policy(folder: Path, summary: Any, policy: Policy) -> list[Issue]:
    """The policy on a summary that claims promotion, from the campaign's own evidence."""
    try:
        summary_bytes = (folder / manifest.SUMMARY_NAME).read_bytes()
    except OSError:
        return []  # its own finding says why
    evaluation = promotion.evaluate(
        promotion.load_evidence(folder),
        policy,
        candidate=summary.decision.candidate,
        summary_bytes=summary_bytes,
    )
    return [
        Issue(u.code, "/decision/promotion_authorized", f"{u.rule}: {u.reason}")
        for u in evaluation.unmet
    ]


def _check_statement(
    folder: Path, listed: dict[str, str], manifest_digest: str | None
) -> list[Issue]:

    try:
        document = jsonio.read_json(folder / manifest.STATEMENT_NAME)
    except (OSError, InvalidArtifact) as e:
        return [Issue("statement-invalid", "", f"cannot read: {e}")]
    subjects = signatures.subjects_of(document)
    if subjects is None:
        return [Issue("statement-invalid", "", "not an in-toto Statement v1 with subjects")]
    expected = dict(listed)
    if manifest_digest is not None:
        expected[manifest.MANIFEST_NAME] = manifest_digest
    issues = []
    for name in sorted(set(subjects) | set(expected)):
        if name not in subjects:
            issues.append(
                Issue("statement-mismatch", "/subject", f"{name!r} is published but not a subject")
            )
        elif name not in expected:
            issues.append(
                Issue("statement-mismatch", "/subject", f"subject {name!r} is not published")
            )
        elif subjects[name] != expected[name]:
            issues.append(
                Issue(
                    "statement-mismatch",
                    "/subject",
                    f"subject {name!r} has sha256 {subjects[name]}, the file {expected[name]}",
                )
            )
    summary: Any = None
    if (folder / manifest.SUMMARY_NAME).exists():
        try:
            summary = jsonio.read_json(folder / manifest.SUMMARY_NAME)
        except (OSError, InvalidArtifact):
            return issues  # the summary's own finding says why; nothing to hold it against
    campaign_id = folder.resolve().name
    for pointer, why in signatures.predicate_mismatches(document, campaign_id, summary):
        issues.append(Issue("statement-mismatch", pointer, why))
    return issues


_SET_ASIDE = re.compile(SET_ASIDE)
_UNSCANNED_SEAL_FILES = frozenset({manifest.SUMS_NAME, manifest.BUNDLE_NAME})
_DERIVED_SCHEMAS = frozenset({"anvil-serving.os-comparison/v1", "anvil-serving.ab-comparison/v1"})


def _derivable(result: scan.FileResult) -> bool:
    """Whether a comparison is derived again: every source it names is present and intact
    (with a source withheld only its internal arithmetic, checked per file, applies)."""
    return not any(CODES[i.code][0] == "error" for i in result.issues)


def _derived_document(path: Path) -> dict[str, Any] | None:
    try:
        document = jsonio.read_json(path)
    except (OSError, InvalidArtifact):
        return None
    if not isinstance(document, dict) or "derivation" not in document:
        return None
    return document


def _recomputed(batch: Sequence[tuple[str, str]], known: Known | None = None) -> list[list[Issue]]:
    """Derives each (folder, comparison) again, from one database of all their campaigns
    when it builds (``known``: what their JSON files are, already read); otherwise (a
    campaign that cannot be loaded) each from its own, as alone. The issues of each."""
    documents = [_derived_document(Path(folder) / rel) for folder, rel in batch]
    jobs = [
        (Path(folder), document)
        for (folder, _), document in zip(batch, documents, strict=True)
        if document is not None
    ]
    if not jobs:
        return [[] for _ in batch]
    # Imported here: DuckDB and numpy load only when a derived artifact needs them.
    from ledger import derivation
    from ledger.database import Database, DatabaseError, build

    folders = list(dict.fromkeys(folder for folder, _ in jobs))
    shared: Database | None = None
    if len(folders) > 1:
        try:
            shared = build(folders, known=known, gaps=False)
        except (DatabaseError, UsageError):
            shared = None
    out: list[list[Issue]] = []
    try:
        # The shared database holds each campaign under its folder's name: build refuses
        # an artifact whose campaign_id is another's, so a comparison naming another
        # campaign never finds that one's rows in it (it is derived alone, and fails).
        reads = None
        if shared is not None:
            reads = derivation.reads_of(
                shared, [pair for _, d in jobs for pair in derivation.comparisons_of(d)]
            )
        for (folder, _), document in zip(batch, documents, strict=True):
            found = (
                None
                if document is None
                else derivation.recompute(Path(folder), document, shared, reads)
            )
            out.append(found or [])
    finally:
        if shared is not None:
            shared.close()
    return out


def _listed_kinds(loaded: Manifest | None) -> list[str]:
    kinds = []
    for entry in loaded.artifacts if loaded is not None else ():
        try:
            kinds.append(SchemaId.parse(entry.schema).kind)
        except SchemaError:
            continue
    return kinds


def _path_issue(pointer: str, path: str) -> Issue | None:
    issue = tree.check_relative_path(path)
    return None if issue is None else attrs.evolve(issue, pointer=pointer)


def _check_manifest_entries(
    loaded: Manifest,
    by_rel: dict[str, scan.FileResult],
    listed: dict[str, str],
    withheld: dict[str, str | None],
) -> Iterable[Issue]:
    folded: dict[str, str] = {}
    for index, entry in enumerate(loaded.artifacts):
        pointer = f"/artifacts/{index}"
        issue = _path_issue(f"{pointer}/path", entry.path)
        if issue is not None:
            yield issue
            continue
        if entry.path in listed:
            yield Issue("path-duplicate", f"{pointer}/path", f"{entry.path!r} is listed twice")
            continue
        other = folded.get(entry.path.casefold())
        if other is not None:
            yield Issue(
                "path-case-conflict",
                f"{pointer}/path",
                f"{entry.path!r} and {other!r} differ only by case",
            )
        folded[entry.path.casefold()] = entry.path
        if entry.path in manifest.SEAL_FILES:
            yield Issue(
                "path-invalid",
                f"{pointer}/path",
                f"{entry.path!r} is a seal file and cannot be an artifact",
            )
            continue
        listed[entry.path] = entry.sha256
        result = by_rel.get(entry.path)
        if result is None:
            yield Issue("missing-artifact", pointer, f"{entry.path!r} is listed but not present")
            continue
        if result.sha256 is None:
            continue
        if result.sha256 != entry.sha256:
            yield Issue(
                "hash-mismatch",
                f"{pointer}/sha256",
                f"{entry.path!r} has sha256 {result.sha256}, manifest says {entry.sha256}",
            )
        if result.size != entry.bytes:
            yield Issue(
                "size-mismatch",
                f"{pointer}/bytes",
                f"{entry.path!r} has {result.size} bytes, manifest says {entry.bytes}",
            )
        if entry.path.endswith(".json") and not result.parsed:
            continue
        declared = result.schema
        if declared != entry.schema:
            yield Issue(
                "schema-mismatch",
                f"{pointer}/schema",
                f"{entry.path!r} declares schema {declared!r}, manifest says {entry.schema!r}",
            )
    for index, held in enumerate(loaded.withheld):
        pointer = f"/withheld/{index}"
        issue = _path_issue(f"{pointer}/path", held.path)
        if issue is not None:
            yield issue
            continue
        if held.path in listed or held.path in withheld:
            yield Issue(
                "path-duplicate",
                f"{pointer}/path",
                f"{held.path!r} is declared withheld and listed again",
            )
            continue
        withheld[held.path] = held.sha256
        yield Issue("withheld-artifact", pointer, f"{held.path!r} is withheld: {held.reason}")


def _check_sums(path: Path, expected: dict[str, str], unknown: set[str]) -> list[Issue]:
    try:
        data = jsonio.read_limited(path, _MAX_SUMS_BYTES)
    except (OSError, InvalidArtifact) as e:
        return [Issue("sha256sums-invalid", "", f"cannot read: {e}")]
    digests, issues = manifest.parse_sums(data)
    expected = dict(expected)
    expected.update((name, digests[name]) for name in unknown if name in digests)
    difference = manifest.first_byte_difference(data, manifest.render_sums(expected.items()))
    if difference is None:
        return []
    # The one reading that counts is the bytes seal writes: a file that parses to the
    # same digests here but not for sha256sum (a \v for a \n) is still not the seal.
    issues.insert(0, Issue("sha256sums-mismatch", "", f"not the bytes seal writes: {difference}"))
    for rel in sorted(set(digests) | set(expected)):
        if rel not in digests:
            issues.append(Issue("sha256sums-mismatch", "", f"{rel!r} is missing from SHA256SUMS"))
        elif rel not in expected:
            issues.append(
                Issue(
                    "sha256sums-mismatch", "", f"{rel!r} is in SHA256SUMS but not in the manifest"
                )
            )
        elif digests[rel] != expected[rel]:
            issues.append(
                Issue(
                    "sha256sums-mismatch",
                    "",
                    f"{rel!r}: SHA256SUMS says {digests[rel]}, expected {expected[rel]}",
                )
            )
    return issues


def _check_reference(
    pointer: str,
    path: str,
    digest: str,
    known: dict[str, str],
    withheld: dict[str, str | None],
    present: dict[str, str],
    *,
    listing: bool,
) -> Issue | None:
    """A reference against the digest the seal vouches for (``known``: the manifest's,
    when it is read; ``listing`` says so), naming the file's own digest where that
    differs (an edit the seal does not hold, found by hash-mismatch too)."""
    issue = _path_issue(pointer, path)
    if issue is not None:
        return issue
    if path in known:
        if known[path] == digest:
            return None
        if not listing:
            said = f"the file has {known[path]}"
        else:
            said = f"the manifest lists {known[path]}"
            actual = present.get(path)
            if actual is not None and actual != known[path]:
                said += f" (and the file has {actual})"
        return Issue(
            "reference-mismatch", pointer, f"reference to {path!r} says sha256 {digest}, {said}"
        )
    if path in withheld:
        disclosed = withheld[path]
        if disclosed is not None and disclosed != digest:
            return Issue(
                "reference-mismatch",
                pointer,
                f"reference to withheld {path!r} says sha256 {digest}, the manifest "
                f"discloses {disclosed}",
            )
        return Issue(
            "reference-withheld", pointer, f"reference to withheld {path!r} cannot be checked here"
        )
    return Issue("reference-unresolved", pointer, f"reference to {path!r} names no artifact")


def _check_named(
    pointer: str, path: str, known: dict[str, str], withheld: dict[str, str | None]
) -> Issue | None:
    issue = _path_issue(pointer, path)
    if issue is not None:
        return issue
    if path in known or path in withheld:
        return None
    return Issue(
        "missing-artifact",
        pointer,
        f"the summary names {path!r}, which is neither published nor declared withheld",
    )
