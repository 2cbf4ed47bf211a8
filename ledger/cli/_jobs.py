"""``--jobs`` and ``LEDGER_JOBS``: the processes of the commands that start them (verify,
seal, gate), and the option on those commands alone."""

from __future__ import annotations

import argparse
import os

from ledger.errors import UsageError

MAX_JOBS = 1024
"""More processes than this is a typo, not a machine: each is a fork of the interpreter."""


def positive_int(text: str) -> int:
    """A whole number of at least 1, in ASCII digits."""
    # ASCII digits only: int() also takes "1_0", " 2 ", "+2" and digits of other scripts.
    if not text.isascii() or not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text[:40]!r}")
    if len(text.lstrip("0")) > 18:
        # Past 4,300 digits int() itself refuses, with an error of its own.
        raise argparse.ArgumentTypeError(
            f"must be below 10**18, got {text[:20]}... ({len(text)} digits)"
        )
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _jobs(text: str) -> int:
    value = positive_int(text)
    if value > MAX_JOBS:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_JOBS}, got {value}")
    return value


def add_jobs_option(parser: argparse.ArgumentParser) -> None:
    """``--jobs``, for a command that reads it with :func:`jobs_of`."""
    parser.add_argument(
        "--jobs",
        type=_jobs,
        default=None,
        metavar="N",
        help=f"processes for hashing and parsing, 1 to {MAX_JOBS} (default: $LEDGER_JOBS, "
        "else every core)",
    )


def jobs_of(args: argparse.Namespace) -> int | None:
    """``--jobs``, else ``LEDGER_JOBS``, else None (every core); read only by the commands
    that use it, so that a bad variable stops neither ``--help`` nor any other command."""
    if args.jobs is not None:
        return int(args.jobs)
    value = os.environ.get("LEDGER_JOBS", "")
    if not value:
        return None
    try:
        return _jobs(value)
    except argparse.ArgumentTypeError as e:
        # Left unused, a typo would run on every core while saying nothing of it.
        raise UsageError(f"LEDGER_JOBS: {e}") from None
