"""Opening a file a user named: only a regular file is read.

A named pipe blocks ``open()`` until a writer comes (forever, if none does), and a device
(``/dev/zero``) reads without end: each is refused before a byte is read, in one line,
whatever the command. The file is opened without blocking and checked on the open
descriptor, so a file swapped for a pipe after a check cannot slip past it.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import BinaryIO

__all__ = [
    "NotRegularFile",
    "kind_of",
    "open_regular",
    "read_regular",
]

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def kind_of(mode: int) -> str:
    """What a file of this mode is, in words (``a named pipe``)."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


class NotRegularFile(OSError):
    """A path that names something other than a regular file (``strerror`` says what)."""


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """The file at ``path`` opened for reading, refusing anything but a regular file.

    Raises:
        NotRegularFile: a folder, a named pipe, a device or a socket.
        OSError: it cannot be opened.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(
                errno.EINVAL, f"{kind_of(mode)}, not a regular file", os.fspath(path)
            )
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike[str]) -> bytes:
    """The whole of a regular file (see :func:`open_regular`)."""
    with open_regular(path) as stream:
        return stream.read()
