"""``ledger history``: the published campaigns of an evidence root, verified, grouped by
what they measured and ordered in time, with the change points of each metric.

Series are read by :mod:`~ledger.history._series`, fitted by
:mod:`~ledger.history._changepoints` and rendered as text, a ``history/v1`` JSON document
or an HTML page by :mod:`~ledger.history._render`.
"""

from __future__ import annotations

from ledger.history._history import ChangePoint, History, SeriesHistory, history
from ledger.history._render import SCHEMA, render_html, render_json, render_text, to_json
from ledger.history._series import METRICS, NAMED, WORKLOAD, Excluded, HistoryError, Point, Series

__all__ = [
    "METRICS",
    "NAMED",
    "SCHEMA",
    "WORKLOAD",
    "ChangePoint",
    "Excluded",
    "History",
    "HistoryError",
    "Point",
    "Series",
    "SeriesHistory",
    "history",
    "render_html",
    "render_json",
    "render_text",
    "to_json",
]
