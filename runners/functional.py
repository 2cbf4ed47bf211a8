"""Functional and quality gates: preflight, thinking control, strict output, canaries, the
long-context quality sweep and coding quality (``runners/preflight.py``,
``runners/quality.py``; what checks share is in ``runners/checks.py``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from runners.checks import Session
from runners.preflight import PREFLIGHT, run_preflight
from runners.quality import (
    FAMILIES,
    run_canary,
    run_coding_quality,
    run_context_quality,
    run_strict_output,
    run_thinking_control,
)

RUNNERS: dict[str, Callable[[Session], Awaitable[list[dict[str, Any]]]]] = {
    "preflight": run_preflight,
    "thinking-control": run_thinking_control,
    "strict-output": run_strict_output,
    "canary": run_canary,
    "context-quality": run_context_quality,
    "coding-quality": run_coding_quality,
}

__all__ = ["FAMILIES", "PREFLIGHT", "RUNNERS", "Session"]
