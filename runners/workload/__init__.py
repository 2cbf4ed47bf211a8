"""What requests ask: deterministic prompts and their calibration, the coding tasks
(:mod:`~runners.workload.coding`), the OCR image (:mod:`~runners.workload.textimage`),
ShareGPT prompts (:mod:`~runners.workload.sharegpt`) and the twenty tools
(:mod:`~runners.workload.toolset`).
"""

from __future__ import annotations

from runners.workload import coding, sharegpt, textimage, toolset
from runners.workload._prompts import (
    PREFIX_MODES,
    TOLERANCE,
    Calibration,
    Filler,
    Probe,
    build_messages,
    calibrate,
    prompt_bytes,
    prompt_digest,
    session_number,
)

__all__ = [
    "PREFIX_MODES",
    "TOLERANCE",
    "Calibration",
    "Filler",
    "Probe",
    "build_messages",
    "calibrate",
    "coding",
    "prompt_bytes",
    "prompt_digest",
    "session_number",
    "sharegpt",
    "textimage",
    "toolset",
]
