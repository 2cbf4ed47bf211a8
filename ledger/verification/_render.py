"""A verification report in each format ``ledger verify --format`` writes."""

from __future__ import annotations

import json
from pathlib import Path

from ledger.evidence import tree
from ledger.verification._junit import to_junit
from ledger.verification._sarif import to_sarif
from ledger.verification._verify import Report

__all__ = ["campaigns_holding", "render"]


def render(report: Report, format: str) -> bytes:
    """The report as ``text``, ``json``, ``sarif`` or ``junit``, in bytes."""
    if format == "junit":
        return to_junit(report)
    if format == "text":
        return report.render_text().encode("utf-8", "backslashreplace")
    document = report.to_json() if format == "json" else to_sarif(report)
    return (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode(
        "utf-8", "backslashreplace"
    )


def campaigns_holding(paths: list[str]) -> list[str]:
    """The campaign folders that hold the given files, each once, in the order first
    named: for each file, the outermost folder above it that is a campaign (a campaign's
    own subfolders may look like one). Files in no campaign are left out."""
    found: dict[str, None] = {}
    for path in paths:
        above = Path(path).parents
        outermost = None
        for folder in above:
            if folder != Path(".") and folder.is_dir() and tree.is_campaign(folder):
                outermost = folder
        if outermost is not None:
            found.setdefault(str(outermost), None)
    return list(found)
