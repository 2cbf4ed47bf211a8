"""The ``ledger`` command line: parses arguments, calls library functions, renders results.

The runners add their commands through the ``anvil_ledger.commands`` entry points, with
the flags and checks the decision commands share.
"""

from __future__ import annotations

from ledger.cli._decisions import REVIEW_HELP, is_folder
from ledger.cli._main import main

__all__ = [
    "REVIEW_HELP",
    "is_folder",
    "main",
]
