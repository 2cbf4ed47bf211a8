"""The exit statuses of the ``ledger`` command line, an interface scripts and CI jobs
match on: a status keeps its meaning, and a new one is added, never renumbered.

The command line returns only these (``tests/test_exit_codes.py`` reads every status its
modules return); the documentation's table is generated from :data:`MEANINGS`.
"""

from __future__ import annotations

import enum

__all__ = ["MEANINGS", "ExitStatus"]


class ExitStatus(enum.IntEnum):
    """What a ``ledger`` command's exit status says."""

    OK = 0
    REFUSED = 1
    UNUSABLE = 2
    HANGUP = 128 + 1
    INTERRUPTED = 128 + 2
    READER_GONE = 128 + 13
    TERMINATED = 128 + 15


MEANINGS: dict[ExitStatus, str] = {
    ExitStatus.OK: (
        "success: no error finding (warnings allowed), the promotion is authorized, the "
        "command did what it was asked"
    ),
    ExitStatus.REFUSED: (
        "at least one error finding, or a refusal about the evidence (a promotion not "
        "authorized, a signature that does not verify, a run that did not complete)"
    ),
    ExitStatus.UNUSABLE: (
        "the command could not run: bad arguments, a missing or unreadable path, a "
        "malformed file given as an argument, an output that already exists"
    ),
    ExitStatus.HANGUP: "stopped by SIGHUP (a closed terminal), nothing half-written",
    ExitStatus.INTERRUPTED: "stopped by Ctrl-C (SIGINT), nothing half-written",
    ExitStatus.READER_GONE: (
        "the reader of standard output went away (`ledger sql ... | head`), as the shell "
        "reports any program SIGPIPE ends"
    ),
    ExitStatus.TERMINATED: "stopped by SIGTERM, nothing half-written",
}
