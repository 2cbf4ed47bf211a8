"""Functional and quality gates: preflight, thinking control, strict output, canaries, the
long-context quality sweep and coding quality (``runners/checks/_preflight.py``,
``runners/checks/_quality.py``; what checks share is in ``runners/checks/_session.py``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from runners.checks._preflight import PREFLIGHT, run_preflight
from runners.checks._quality import (
    FAMILIES,
    run_canary,
    run_coding_quality,
    run_context_quality,
    run_strict_output,
    run_thinking_control,
)
from runners.checks._session import Session

RUNNERS: dict[str, Callable[[Session], Awaitable[list[dict[str, Any]]]]] = {
    "preflight": run_preflight,
    "thinking-control": run_thinking_control,
    "strict-output": run_strict_output,
    "canary": run_canary,
    "context-quality": run_context_quality,
    "coding-quality": run_coding_quality,
}

__all__ = ["FAMILIES", "PREFLIGHT", "RUNNERS", "Session"]
