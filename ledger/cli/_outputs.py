"""The one file an option names for a command to write (``verify --output``, ``gate
--attest``): what makes it unusable, said before any work is done."""

from __future__ import annotations

import os

__all__ = ["output_file_problem"]


def output_file_problem(option: str, path: str, *, exists: str | None = None) -> str | None:
    """Why ``path`` cannot be written whole (the report's one line, after ``option``);
    None when it can. ``exists``: what to say of a file already there, which is then
    refused (None: it is replaced)."""
    folder = os.path.dirname(path) or "."
    problem = None
    if not os.path.isdir(folder):
        problem = f"no such folder {folder}"
    elif os.path.isdir(path):
        problem = "a folder, not a file"
    elif os.path.lexists(path) and (os.path.islink(path) or not os.path.isfile(path)):
        # A file is replaced whole: a device, a FIFO or a link would be replaced too.
        problem = "not a regular file (a device, pipe or link)"
    elif os.path.lexists(path) and exists is not None:
        problem = exists
    return None if problem is None else f"{option} {path}: {problem}"
