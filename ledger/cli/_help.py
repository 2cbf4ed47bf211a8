"""What ``ledger COMMAND --help`` ends with: the statuses that command exits with, one a
line, so that a script's author reads them where the options are."""

from __future__ import annotations

import argparse
import re
import textwrap

from ledger.exit_status import ExitStatus

EXIT_HEADING = "exit status:"

# A status line's continuation goes under its meaning, past the number.
_HANG = re.compile(r"\s*(?:\d+\s+)?")

_STOPPED_BY = {
    ExitStatus.HANGUP: "SIGHUP (a closed terminal)",
    ExitStatus.INTERRUPTED: "Ctrl-C (SIGINT)",
    ExitStatus.TERMINATED: "SIGTERM",
}


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, except that a description or an epilog keeps its line breaks:
    each line is wrapped on its own (argparse joins them all into one paragraph)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        lines = []
        for line in text.splitlines():
            match = _HANG.match(line)
            head = match.group() if match else ""
            lines.append(
                textwrap.fill(
                    " ".join(line[len(head) :].split()),
                    width,
                    initial_indent=indent + head,
                    subsequent_indent=indent + " " * len(head),
                )
            )
        return "\n".join(lines)


def exit_statuses(
    *,
    ok: str | None,
    refused: str | None,
    unusable: str,
    stopped: str = "nothing half-written",
    writes_stdout: bool = True,
) -> str:
    """The epilog of a command: its exit statuses, one a line.

    Every command runs under :func:`ledger.cli.main`, whose parser exits 2 on bad arguments
    and whose signal handling gives 129, 130 and 143; ``ok`` and ``refused`` are left out
    for a command that never exits 0 or 1 on purpose.

    Args:
        ok: what 0 means.
        refused: what 1 means.
        unusable: what 2 means besides bad arguments.
        stopped: what a stop by a signal leaves.
        writes_stdout: whether the command writes to standard output, so that a reader
            going away ends it with 141.
    """
    meanings: dict[ExitStatus, str] = {}
    if ok is not None:
        meanings[ExitStatus.OK] = ok
    if refused is not None:
        meanings[ExitStatus.REFUSED] = refused
    meanings[ExitStatus.UNUSABLE] = f"could not run: bad arguments, {unusable}"
    for status, signal_name in _STOPPED_BY.items():
        meanings[status] = f"stopped by {signal_name}; {stopped}"
    if writes_stdout:
        meanings[ExitStatus.READER_GONE] = (
            "the reader of standard output went away (ledger ... | head)"
        )
    lines = [f"  {int(status):<4} {meanings[status]}" for status in sorted(meanings)]
    return "\n".join([EXIT_HEADING, *lines])


def group_exit_statuses(program: str) -> str:
    """The epilog of ``program`` (``ledger``, ``ledger db``): a command that only holds
    others."""
    return (
        f"{EXIT_HEADING} that of the command run ({program} COMMAND --help lists them); 2 "
        "without one, or with bad arguments"
    )
