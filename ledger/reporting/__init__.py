"""``ledger report`` and ``ledger ticket``: a campaign's publication in Markdown or
self-contained HTML, and its follow-up tickets (:mod:`~ledger.reporting.tickets`).
"""

from __future__ import annotations

from ledger.reporting import tickets
from ledger.reporting._report import (
    Chart,
    ReportError,
    render_html,
    render_markdown,
    write_report,
)

__all__ = [
    "Chart",
    "ReportError",
    "render_html",
    "render_markdown",
    "tickets",
    "write_report",
]
