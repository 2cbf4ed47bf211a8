"""Functional and quality gates: preflight, thinking control, strict output, canaries, the
long-context quality sweep and coding quality, each a family of checks run in one session.
"""

from __future__ import annotations

from runners.checks._families import (
    FAMILIES,
    PREFLIGHT,
    RUNNERS,
    Session,
)

__all__ = [
    "FAMILIES",
    "PREFLIGHT",
    "RUNNERS",
    "Session",
]
