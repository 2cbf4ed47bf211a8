"""Where a finding is in its file, as CI systems place results: a URI and a line."""

from __future__ import annotations

import os
import posixpath
import stat
from urllib.parse import quote

from ledger.errors import printable
from ledger.evidence import manifest
from ledger.findings import Finding
from ledger.formats.json_lines import MAX_LOCATED_BYTES, line_of

__all__ = ["Places", "plain", "uri"]


def plain(text: str) -> str:
    """``text`` safe for any report format: control characters escaped, and the lone
    surrogates that an undecodable file name leaves written as escapes, never dropped."""
    return printable(text).encode("utf-8", "backslashreplace").decode("utf-8")


class Places:
    """Lines of findings, each file read at most once."""

    def __init__(self) -> None:
        self._texts: dict[str, bytes | None] = {}

    def line(self, finding: Finding) -> int:
        """The line the finding's pointer names; 1 (the file's start) where the pointer is
        empty, is not in the file, or the file cannot be read now."""
        data = self._text(finding.path)
        if data is None or not finding.pointer:
            return 1
        if posixpath.basename(finding.path) == manifest.SUMS_NAME:
            # SHA256SUMS findings point at a line: /<number>.
            number = finding.pointer[1:]
            return int(number) if number.isdigit() and int(number) > 0 else 1
        return line_of(data, finding.pointer) or 1

    def _text(self, path: str) -> bytes | None:
        if path not in self._texts:
            self._texts[path] = _read_small(path)
        return self._texts[path]


def _read_small(path: str) -> bytes | None:
    try:
        # O_NONBLOCK: a FIFO where a file should be (a finding of its own) never blocks.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_LOCATED_BYTES:
            return None
        with os.fdopen(fd, "rb", closefd=False) as file:
            return file.read(MAX_LOCATED_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)


def uri(path: str) -> str:
    """A finding's path as a SARIF artifact URI: relative paths stay relative (code
    scanning resolves them against the checkout), absolute ones become ``file://``."""
    if os.path.isabs(path):
        return "file://" + quote(path.replace(os.sep, "/"), safe="/", errors="surrogateescape")
    relative = posixpath.normpath(path.replace(os.sep, "/"))
    # An undecodable file name's bytes, percent-encoded as they are on disk.
    return quote(relative, safe="/", errors="surrogateescape")
