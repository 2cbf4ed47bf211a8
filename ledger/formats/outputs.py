"""Where commands write, and how: names checked before anything is created, every output
kept inside its root, and a command's outputs made visible together or not at all.

Every command that writes goes through here, so a command added later inherits the rules:

- :func:`check_name` holds campaign, arm, stage and cell names to the schemas' patterns,
  which admit no separator, so a name can never climb out of its folder;
- :class:`Changes` writes files into existing folders: each to a temporary sibling first,
  then every rename at the end; a failure or an interrupt puts back what was there;
- :func:`new_folder` builds a new folder (and any missing parents) in a temporary sibling
  and renames it into place at the end.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ledger.errors import UsageError
from ledger.formats.jsonio import sync_folder, write_temp

__all__ = [
    "NAME_PATTERNS",
    "PLACED",
    "RESERVED_ARMS",
    "Changes",
    "OutputExists",
    "check_name",
    "inside",
    "is_within",
    "new_file",
    "new_folder",
    "refuse_other_content",
]

NAME_PATTERNS = {
    "campaign": re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}-[a-z0-9]+(-[a-z0-9]+)*"),
    "arm": re.compile(r"[a-z0-9][a-z0-9_-]{0,63}"),
    "stage": re.compile(r"[a-z0-9][a-z0-9_-]{0,63}"),
    "cell": re.compile(r"[a-z0-9][a-z0-9_-]{0,127}"),
}
"""The schemas' patterns for names that become folder and file names."""


class OutputExists(UsageError):
    """An output would replace existing files (exit status 2)."""


RESERVED_ARMS = frozenset({"approvals", "derived", "report"})
"""Folders of a campaign that hold no arm."""


def check_name(kind: str, value: str) -> str:
    """Returns ``value`` when it is a valid ``kind`` name (campaign, arm, stage, cell).

    Raises:
        UsageError: it is not (an absolute path, ``..``, a separator, upper case, a
            campaign whose date is not a date, an arm named like a campaign's own folder).
    """
    if not NAME_PATTERNS[kind].fullmatch(value):
        allowed = (
            "YYYY-MM-DD, then lower-case words joined by '-'"
            if kind == "campaign"
            else "lower case, digits, '-' and '_'"
        )
        raise UsageError(
            f"{kind} name {value!r} is not valid: it must match "
            f"{NAME_PATTERNS[kind].pattern} ({allowed}; no path)"
        )
    if kind == "campaign":
        try:
            datetime.date.fromisoformat(value[:10])
        except ValueError:
            raise UsageError(f"campaign name {value!r} does not start with a real date") from None
    if kind == "arm" and value in RESERVED_ARMS:
        raise UsageError(f"arm name {value!r} is a campaign's own folder; choose another")
    return value


def inside(root: str | Path, path: str | Path) -> Path:
    """Returns ``path`` made absolute, after checking that it resolves inside ``root``.

    Raises:
        UsageError: it resolves outside (through ``..``, an absolute path or a symlink).
    """
    base = Path(root).resolve()
    target = Path(path) if Path(path).is_absolute() else Path(root) / path
    resolved = target.resolve()
    if resolved != base and base not in resolved.parents:
        raise UsageError(f"{path} is outside {root}; nothing was written")
    return target.absolute()


def is_within(path: str | Path, folder: str | Path) -> bool:
    """Whether ``path`` is ``folder`` or lies under it (both resolved)."""
    resolved, base = Path(path).resolve(), Path(folder).resolve()
    return resolved == base or base in resolved.parents


class Changes:
    """Files written into existing folders, made visible together at :meth:`commit`.

    Seal files should be added last: a crash between two renames then leaves a seal that
    no longer matches, which verify reports, rather than a seal vouching for half a write.
    """

    def __init__(self) -> None:
        self._files: dict[Path, tuple[bytes, bool]] = {}

    def put(self, root: str | Path, rel: str, data: bytes, *, replace: bool = True) -> Path:
        """Adds ``root/rel``, which must resolve inside ``root``; returns its path.

        Args:
            replace: whether an existing file may be replaced.
        """
        target = inside(root, rel)
        self._files[target] = (data, replace)
        return target

    def commit(self) -> None:
        """Writes every file, or none.

        Raises:
            OutputExists: a file that may not be replaced exists, or a folder is in the
                way; nothing was written.
            OSError: a write failed; what was there before is back.
        """
        for path, (_, replace) in self._files.items():
            if path.is_symlink() or (path.exists() and not path.is_file()):
                raise OutputExists(f"{path} is in the way (not a regular file); nothing written")
            if path.exists() and not replace:
                raise OutputExists(f"{path} exists; nothing was written")
        created: list[Path] = []
        temps: dict[Path, str] = {}
        backups: dict[Path, str] = {}
        done: list[Path] = []
        try:
            for path, (data, _) in self._files.items():
                created.extend(_make_parents(path.parent))
                temps[path] = write_temp(path, data)
            for path in self._files:
                if path.exists():
                    backup = _reserve(path, ".bak")
                    os.replace(path, backup)
                    backups[path] = backup
                os.replace(temps[path], path)
                del temps[path]
                done.append(path)
        except BaseException:
            # Best effort, each step on its own: one that fails must not stop the others.
            for path in reversed(done):
                with contextlib.suppress(OSError):
                    if path in backups:
                        os.replace(backups.pop(path), path)
                    else:
                        path.unlink(missing_ok=True)
            for path, backup in list(backups.items()):
                # Moved aside when the failure came, before its replacement arrived.
                with contextlib.suppress(OSError):
                    os.replace(backup, path)
                    del backups[path]
            for temp in temps.values():
                Path(temp).unlink(missing_ok=True)
            for folder in reversed(created):
                with contextlib.suppress(OSError):
                    folder.rmdir()
            # A backup whose restore failed stays where it is: the old file, kept.
            raise
        for backup in backups.values():
            Path(backup).unlink(missing_ok=True)
        for folder in sorted({p.parent for p in self._files}):
            sync_folder(folder)


def refuse_other_content(root: str | Path, files: dict[str, bytes], flag: str) -> None:
    """Refuses to replace a file with other content (the same bytes again are no change).

    Raises:
        OutputExists: a file exists with other content; ``flag`` is the option that allows
            replacing it.
    """
    for rel, data in files.items():
        path = Path(root) / rel
        if path.is_file() and path.read_bytes() != data:
            raise OutputExists(
                f"{path} exists with other content; nothing was written ({flag} replaces it)"
            )


def _make_parents(folder: Path) -> list[Path]:
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for path in reversed(missing):
        path.mkdir()
    return list(reversed(missing))


def _reserve(path: Path, suffix: str) -> str:
    try:
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    except OSError as e:
        # The temporary name means nothing to the user: the output's own does.
        raise UsageError(f"{path}: cannot be written there: {e.strerror or e}") from None
    os.close(fd)
    return name


PLACED: list[Path] = []
"""Outputs this command has put in place by a rename: from then on an interrupt comes too
late to leave what was there before, so the command finishes instead (the CLI reads this)."""


def _place(source: Path | str, final: Path) -> None:
    PLACED.append(final)  # before the rename: an interrupt between the two would be late
    try:
        os.replace(source, final)
    except OSError:
        PLACED.pop()
        raise


@contextlib.contextmanager
def new_folder(target: str | Path) -> Iterator[Path]:
    """Yields a work folder that becomes ``target`` when the block ends without error.

    Missing parents are built in the same temporary sibling, so a failure leaves no empty
    folder behind either.

    Raises:
        OutputExists: ``target`` exists.
    """
    final = Path(target).absolute()
    if final.exists() or final.is_symlink():
        raise OutputExists(f"{target} exists; this command writes a new folder")
    missing: list[str] = []
    anchor = final
    while not anchor.exists():
        missing.append(anchor.name)
        anchor = anchor.parent
    if not anchor.is_dir():
        raise OutputExists(f"{anchor} is not a folder; cannot write {target}")
    top = missing[-1]
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{top}.", suffix=".tmp", dir=anchor))
    except OSError as e:
        raise UsageError(f"{target}: cannot be written there: {e.strerror or e}") from None
    try:
        work = staging.joinpath(*reversed(missing))
        work.mkdir(parents=True)
        yield work
        _place(staging / top, anchor / top)
        sync_folder(anchor)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


@contextlib.contextmanager
def new_file(target: str | Path) -> Iterator[Path]:
    """Yields a temporary path in ``target``'s folder that becomes ``target`` when the block
    ends without error, and is removed otherwise (a database being built, for instance).

    Raises:
        OutputExists: ``target`` exists.
        UsageError: its folder does not exist.
    """
    final = Path(target).absolute()
    if final.exists() or final.is_symlink():
        raise OutputExists(f"{target} exists; this command writes a new file")
    if not final.parent.is_dir():
        raise UsageError(f"{final.parent}: no such folder")
    temp = Path(_reserve(final, ".tmp"))
    temp.unlink()
    try:
        yield temp
        _place(temp, final)
    finally:
        temp.unlink(missing_ok=True)
