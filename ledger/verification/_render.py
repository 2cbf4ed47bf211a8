"""A verification report in each format ``ledger verify --format`` writes."""

from __future__ import annotations

import json

from ledger.verification._junit import to_junit
from ledger.verification._places import Places
from ledger.verification._sarif import to_sarif
from ledger.verification._verify import Report

__all__ = ["render"]


def render(report: Report, format: str, places: Places | None = None) -> bytes:
    """The report as ``text``, ``json``, ``sarif`` or ``junit``, in bytes (``places``: the
    findings' lines, read once for this report and its annotations)."""
    if format == "junit":
        return to_junit(report)
    if format == "text":
        return report.render_text().encode("utf-8", "backslashreplace")
    document = report.to_json() if format == "json" else to_sarif(report, places)
    return (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode(
        "utf-8", "backslashreplace"
    )
