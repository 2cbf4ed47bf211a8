"""``ledger verify``: every check of an evidence tree, a campaign folder or one document."""

from __future__ import annotations

from ledger.verification._verify import (
    Report,
    UnusablePathError,
    verify_paths,
)

__all__ = [
    "Report",
    "UnusablePathError",
    "verify_paths",
]
