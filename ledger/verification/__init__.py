"""``ledger verify``: every check of an evidence tree, a campaign folder or one document."""

from __future__ import annotations

from ledger.verification._annotations import workflow_commands
from ledger.verification._junit import to_junit
from ledger.verification._places import Places
from ledger.verification._render import render
from ledger.verification._sarif import SARIF_VERSION, to_sarif
from ledger.verification._verify import (
    Report,
    UnusablePathError,
    verify_paths,
)

__all__ = [
    "SARIF_VERSION",
    "Places",
    "Report",
    "UnusablePathError",
    "render",
    "to_junit",
    "to_sarif",
    "verify_paths",
    "workflow_commands",
]
