"""The ``ledger`` command line: parses arguments, calls library functions, renders results.

The runners add their commands through the ``anvil_ledger.commands`` entry points, with
the flags and checks the decision commands share, the epilog of exit statuses every
command ends its help with, and ``--jobs`` for a command that starts processes.
"""

from __future__ import annotations

from ledger.cli._decisions import REVIEW_HELP, is_folder
from ledger.cli._help import exit_statuses
from ledger.cli._jobs import add_jobs_option, jobs_of
from ledger.cli._main import main

__all__ = [
    "REVIEW_HELP",
    "add_jobs_option",
    "exit_statuses",
    "is_folder",
    "jobs_of",
    "main",
]
