"""Listing a campaign folder safely: symlinks are never followed out, specials never opened."""

from __future__ import annotations

import os
import posixpath
import re
import stat
from pathlib import Path
from typing import Literal

import attrs

from ledger.findings import Issue

__all__ = [
    "CAMPAIGN_MARKERS",
    "CAMPAIGN_NAME",
    "REPORT_FOLDER",
    "Entry",
    "EntryKind",
    "Listing",
    "campaign_folders",
    "campaigns_holding",
    "check_relative_path",
    "holds_campaigns",
    "identity",
    "is_campaign",
    "is_report_file",
    "list_campaign",
]

EntryKind = Literal["file", "symlink", "special"]
CAMPAIGN_NAME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}-[a-z0-9]+(-[a-z0-9]+)*")


@attrs.frozen
class Entry:
    """One file found under a campaign folder."""

    rel: str
    """POSIX path relative to the campaign folder."""
    path: str
    """Where to open it: the file itself, or a symlink's resolved target inside the folder."""
    kind: EntryKind
    """``symlink`` when reached through a link that stays inside the folder."""
    identity: tuple[int, int, int, int] | None
    """(device, inode, size, mtime_ns) of what will be opened."""


@attrs.frozen
class Listing:
    """A campaign folder's files, and what was wrong with listing them."""

    entries: tuple[Entry, ...]
    """Files, sorted by ``rel``."""
    issues: tuple[tuple[str, Issue], ...]
    """(rel, issue) for symlinks leading out, unreadable folders and special files."""


_UNLISTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
"""Characters a manifest or SHA256SUMS line cannot hold as a name, or a reader would take
for a line break: controls, line and paragraph separators, and the lone surrogates a name
that is not UTF-8 decodes to."""


def check_relative_path(path: str) -> Issue | None:
    """Checks that ``path`` is a normalized POSIX path inside the campaign folder.

    Returns:
        None when safe; else a ``path-absolute``, ``path-escape`` or ``path-invalid`` issue.
    """
    if path.startswith(("/", "\\")) or (len(path) > 1 and path[1] == ":"):
        return Issue("path-absolute", "", f"{path!r} is absolute; paths are campaign-relative")
    parts = path.split("/")
    if ".." in parts:
        return Issue("path-escape", "", f"{path!r} climbs out with '..'")
    if (
        not path
        or "\\" in path
        or _UNLISTABLE.search(path)
        or posixpath.normpath(path) != path
        or "." in parts
    ):
        return Issue("path-invalid", "", f"{path!r} is not a normalized relative POSIX path")
    return None


def _inside(root: str, target: str) -> bool:
    return target == root or target.startswith(root.rstrip(os.sep) + os.sep)


def identity(st: os.stat_result) -> tuple[int, int, int, int]:
    """The stat fields whose change means a file was replaced or modified."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def list_campaign(folder: Path) -> Listing:
    """Lists every file under ``folder`` without following a link out of it."""
    root = os.path.realpath(folder)
    entries: list[Entry] = []
    issues: list[tuple[str, Issue]] = []

    def walk(directory: str, prefix: str) -> None:
        try:
            with os.scandir(directory) as it:
                children = sorted(it, key=lambda e: e.name)
        except OSError as e:
            issues.append(
                (
                    prefix.rstrip("/") or ".",
                    Issue("file-unreadable", "", f"cannot list folder: {e.strerror}"),
                )
            )
            return
        for child in children:
            rel = prefix + child.name
            try:
                st = child.stat(follow_symlinks=False)
            except OSError as e:
                issues.append(
                    (rel, Issue("file-changed", "", f"vanished while listed: {e.strerror}"))
                )
                continue
            if stat.S_ISDIR(st.st_mode):
                walk(child.path, rel + "/")
            elif stat.S_ISREG(st.st_mode):
                entries.append(Entry(rel, child.path, "file", identity(st)))
            elif stat.S_ISLNK(st.st_mode):
                _add_link(child.path, rel)
            else:
                issues.append(
                    (rel, Issue("not-regular-file", "", "a FIFO, socket or device; not read"))
                )

    def _add_link(path: str, rel: str) -> None:
        target = os.path.realpath(path)
        if not _inside(root, target):
            issues.append(
                (
                    rel,
                    Issue(
                        "path-escape", "", "symlink leads out of the campaign folder; not followed"
                    ),
                )
            )
            return
        try:
            st = os.stat(target)
        except OSError:
            issues.append((rel, Issue("file-unreadable", "", "symlink points to nothing")))
            return
        if not stat.S_ISREG(st.st_mode):
            issues.append(
                (
                    rel,
                    Issue(
                        "not-regular-file",
                        "",
                        "symlink to something other than a file; not followed",
                    ),
                )
            )
            return
        issues.append((rel, Issue("symlink", "", "symlink inside the campaign folder")))
        entries.append(Entry(rel, target, "symlink", identity(st)))

    walk(str(folder), "")
    entries.sort(key=lambda e: e.rel)
    return Listing(tuple(entries), tuple(issues))


CAMPAIGN_MARKERS = ("manifest.json", "SHA256SUMS", "summary.json", "run-manifest.json")
"""Files whose presence makes a folder a campaign folder, whatever its name."""


REPORT_FOLDER = "report"
"""Where ``ledger report`` puts its charts and their graph data."""


def is_report_file(path: str) -> bool:
    """A file ``ledger report`` writes (never in its own evidence index, and never published
    from a raw campaign: it names the raw digests)."""
    return path in ("report.md", "report.html") or path.startswith(REPORT_FOLDER + "/")


def is_campaign(folder: Path) -> bool:
    """A folder named like a campaign id, or holding a seal, a summary or a run manifest."""
    if CAMPAIGN_NAME.fullmatch(folder.name):
        return True
    return any((folder / name).exists() for name in CAMPAIGN_MARKERS)


def campaign_folders(folder: Path) -> list[Path]:
    """``folder`` itself when it is a campaign, else its campaign subfolders, sorted."""
    if is_campaign(folder):
        return [folder]
    return sorted(
        child
        for child in folder.iterdir()
        if child.is_dir() and not child.is_symlink() and not child.name.startswith(".")
    )


def holds_campaigns(folder: Path) -> bool:
    """Whether a folder that is no campaign is itself an evidence root (``verify top`` of
    ``top/evidence/<campaign>``): its subfolders are campaigns, it is not one."""
    if is_campaign(folder):
        return False
    try:
        return any(c.is_dir() and not c.is_symlink() and is_campaign(c) for c in folder.iterdir())
    except OSError:
        return False


def campaigns_holding(paths: list[str]) -> list[str]:
    """The campaign folders that hold the given files, each once, in the order first
    named: for each file, the outermost folder above it that is a campaign (a campaign's
    own subfolders may look like one). Files in no campaign are left out."""
    found: dict[str, None] = {}
    for path in paths:
        above = Path(path).parents
        outermost = None
        for folder in above:
            if folder != Path(".") and folder.is_dir() and is_campaign(folder):
                outermost = folder
        if outermost is not None:
            found.setdefault(str(outermost), None)
    return list(found)
