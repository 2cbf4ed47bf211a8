"""A history as text for people, as a ``history/v1`` JSON document, and as a
self-contained HTML page with one SVG chart per series.

Every output depends only on the history: no clock, no host, no path but the campaigns'
names, numbers at fixed precision in the charts; the same evidence gives the same bytes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from ledger.errors import printable
from ledger.history import _changepoints as changepoints
from ledger.history._history import ChangePoint, History, SeriesHistory
from ledger.history._series import NAMED, WORKLOAD, Point

__all__ = ["SCHEMA", "render_html", "render_json", "render_text", "to_json"]

SCHEMA = "anvil-serving.history/v1"

_INTERVAL = (
    f"95 % percentile interval of the change between the segments' medians, each segment "
    f"resampled on its own ({changepoints.RESAMPLES} resamples, seeded by the series and "
    "the step)"
)


def _number(value: float) -> str:
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.1f}"
    return f"{value:.3g}"


def _shown(value: Any) -> str:
    if value is None:
        return "absent"
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def key_text(series: SeriesHistory) -> str:
    """The series key for people: each recorded field and its value."""
    return ", ".join(f"{k} {_shown(v)}" for k, v in series.series.key.items() if v is not None)


def _where(point: Point) -> str:
    return f"{point.campaign} ({point.arm})"


def _step_text(series: SeriesHistory, change: ChangePoint) -> str:
    step = change.step
    low, high = step.interval
    verdict = "regression" if change.regression else "improvement"
    return (
        f"step after point {change.index} of {len(series.series.points)}: "
        f"{_where(change.before)} -> {_where(change.after)}: "
        f"{_number(step.before)} -> {_number(step.after)} {series.unit}, "
        f"{step.change_percent:+.1f} % (95 % interval {low:+.1f} to {high:+.1f} %), {verdict}"
    )


def summary_line(history: History) -> str:
    """``N series, M points from K campaigns; C change points (R regressions); ...``."""
    return (
        f"{len(history.series)} series, {history.points} points from "
        f"{len(history.campaigns)} campaigns; {history.change_points} change points "
        f"({history.regressions} regressions); {len(history.excluded)} excluded (failed "
        f"verification), {len(history.skipped)} skipped (no raw request rows)"
    )


def render_text(history: History) -> str:
    """Each series with a change point, its steps and what differs across each; the
    campaigns left out; a summary line."""
    lines: list[str] = []
    for series in history.series:
        if not series.change_points:
            continue
        points = series.series.points
        lines.append(
            f"{series.series.metric} ({series.unit}, {series.better} is better): {key_text(series)}"
        )
        lines.append(f"  {len(points)} points, {points[0].campaign} to {points[-1].campaign}")
        for change in series.change_points:
            lines.append(f"  {_step_text(series, change)}")
            for field, before, after in change.differs:
                lines.append(f"    {field} differs: {_shown(before)} -> {_shown(after)}")
    for title, places in (
        ("excluded, failed verification", history.excluded),
        ("skipped", history.skipped),
    ):
        if places:
            lines.append(f"{title}:")
            lines.extend(f"  {p.campaign}: {p.reason}" for p in places)
    lines.append(summary_line(history))
    return "".join(printable(line) + "\n" for line in lines)


def _point(point: Point) -> dict[str, Any]:
    return {
        "campaign_id": point.campaign,
        "arm": point.arm,
        "cell": point.cell,
        "start": point.start,
        "value": point.value,
        "successful": point.successful,
        "identity": dict(point.carried),
    }


def _change(change: ChangePoint) -> dict[str, Any]:
    step = change.step
    return {
        "index": change.index,
        "before": {"campaign_id": change.before.campaign, "arm": change.before.arm},
        "after": {"campaign_id": change.after.campaign, "arm": change.after.arm},
        "level_before": step.before,
        "level_after": step.after,
        "change_percent": step.change_percent,
        "interval_percent": list(step.interval),
        "regression": change.regression,
        "differs": [{"field": f, "before": b, "after": a} for f, b, a in change.differs],
    }


def to_json(history: History) -> dict[str, Any]:
    """The ``history/v1`` document (``schemas/history/v1.schema.json``)."""
    return {
        "schema": SCHEMA,
        "method": {
            "fit": (
                "penalised step fit of the log values: absolute deviations from each "
                "segment's median over the noise scale, plus a penalty per step"
            ),
            "penalty_per_step": f"{changepoints.PENALTY:g} ln(n)",
            "min_segment": changepoints.MIN_SEGMENT,
            "min_scale": changepoints.MIN_SCALE,
            "interval": _INTERVAL,
        },
        "key": [f for f in NAMED if f not in history.across] + list(WORKLOAD),
        "across": list(history.across),
        "campaigns": [{"campaign_id": c, "start": s} for c, s in history.campaigns],
        "excluded": [{"campaign": e.campaign, "reason": e.reason} for e in history.excluded],
        "skipped": [{"campaign": e.campaign, "reason": e.reason} for e in history.skipped],
        "series": [
            {
                "key": dict(s.series.key),
                "metric": s.series.metric,
                "unit": s.unit,
                "better": s.better,
                "scale": s.fit.scale,
                "points": [_point(p) for p in s.series.points],
                "segments": [
                    {"start": start, "stop": stop, "median": level}
                    for start, stop, level in s.levels
                ],
                "change_points": [_change(c) for c in s.change_points],
            }
            for s in history.series
        ],
        "summary": {
            "campaigns": len(history.campaigns),
            "series": len(history.series),
            "points": history.points,
            "change_points": history.change_points,
            "regressions": history.regressions,
            "excluded": len(history.excluded),
            "skipped": len(history.skipped),
        },
    }


def render_json(history: History) -> str:
    """:func:`to_json` as indented text."""
    return json.dumps(to_json(history), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


_WIDTH, _HEIGHT = 720, 300
_LEFT, _RIGHT, _TOP, _BOTTOM = 72, 24, 40, 56
_FONT = 'font-family="DejaVu Sans, Helvetica, Arial, sans-serif"'
_POINT, _LEVEL = "#4c72b0", "#222222"
_WORSE, _BETTER = "#c44e52", "#55a868"


def _t(text: str) -> str:
    """Text from the evidence for a page: control characters and markup escaped."""
    return escape(printable(text))


def _n(value: float) -> str:
    text = f"{value:.1f}"
    return "0" if text in ("0.0", "-0.0") else text.removesuffix(".0")


def _ticks(low: float, high: float) -> list[tuple[float, str]]:
    """About five round values from ``low`` to ``high``, each with its label (as many
    decimals as the step between them has)."""
    raw = (high - low) / 4
    exponent = math.floor(math.log10(raw))
    step = next(s * 10**exponent for s in (1, 2, 2.5, 5, 10) if s * 10**exponent >= raw)
    decimals = max(0, -exponent + (1 if step / 10**exponent == 2.5 else 0))
    first = math.ceil(low / step) * step
    values = [first + i * step for i in range(int((high - first) / step + 1e-9) + 1)]
    return [(v, f"{v:,.{decimals}f}") for v in values]


def chart(series: SeriesHistory) -> str:
    """One series as an SVG chart: its points in time order, each segment's median as a
    line across it, each change point as a dashed line labelled with its change (red for
    a regression, green for an improvement). The value axis spans the values, not zero:
    a step of a few percent is what it shows."""
    points = series.series.points
    values = [p.value for p in points]
    low, high = min(values), max(values)
    pad = (high - low) * 0.08 or abs(high) * 0.05 or 1.0
    low, high = low - pad, high + pad
    plot_w = _WIDTH - _LEFT - _RIGHT
    plot_h = _HEIGHT - _TOP - _BOTTOM
    step = plot_w / len(points)

    def x(index: float) -> float:
        return _LEFT + step * (index + 0.5)

    def y(value: float) -> float:
        return _TOP + plot_h - plot_h * (value - low) / (high - low)

    title = f"{series.series.metric}: {key_text(series)}"
    out = [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_WIDTH} {_HEIGHT}" '
            f'width="{_WIDTH}" height="{_HEIGHT}" role="img" aria-label={quoteattr(printable(title))}>'
        ),
        f'<rect x="0" y="0" width="{_WIDTH}" height="{_HEIGHT}" fill="#ffffff"/>',
        (
            f'<text x="16" y="{_n(_TOP + plot_h / 2)}" font-size="12" {_FONT} '
            f'text-anchor="middle" transform="rotate(-90 16 {_n(_TOP + plot_h / 2)})">'
            f"{_t(series.unit)}</text>"
        ),
    ]
    for tick, label in _ticks(low, high):
        out.append(
            f'<line x1="{_LEFT}" y1="{_n(y(tick))}" x2="{_WIDTH - _RIGHT}" y2="{_n(y(tick))}" '
            'stroke="#dddddd" stroke-width="1"/>'
        )
        out.append(
            f'<text x="{_LEFT - 6}" y="{_n(y(tick) + 4)}" text-anchor="end" font-size="11" '
            f"{_FONT}>{label}</text>"
        )
    labelled = sorted({0, len(points) - 1, *(c.index for c in series.change_points)})
    for index in labelled:
        out.append(
            f'<text x="{_n(x(index))}" y="{_HEIGHT - _BOTTOM + 16}" text-anchor="middle" '
            f'font-size="11" {_FONT}>{_t(points[index].campaign[:10])}</text>'
        )
    for start, stop, level in series.levels:
        out.append(
            f'<line x1="{_n(x(start - 0.4))}" y1="{_n(y(level))}" x2="{_n(x(stop - 0.6))}" '
            f'y2="{_n(y(level))}" stroke="{_LEVEL}" stroke-width="2"><title>median '
            f"{_number(level)} {_t(series.unit)}, points {start} to {stop - 1}"
            "</title></line>"
        )
    for change in series.change_points:
        color = _WORSE if change.regression else _BETTER
        at = x(change.index - 0.5)
        out.append(
            f'<line x1="{_n(at)}" y1="{_TOP}" x2="{_n(at)}" y2="{_TOP + plot_h}" '
            f'stroke="{color}" stroke-width="1.5" stroke-dasharray="4 3"><title>'
            f"{_t(_step_text(series, change))}</title></line>"
        )
        out.append(
            f'<text x="{_n(at + 4)}" y="{_TOP - 6}" font-size="11" fill="{color}" {_FONT}>'
            f"{change.step.change_percent:+.1f} %</text>"
        )
    for index, point in enumerate(points):
        out.append(
            f'<circle cx="{_n(x(index))}" cy="{_n(y(point.value))}" r="3" fill="{_POINT}">'
            f"<title>{_t(_where(point))}, {_t(point.cell)}: "
            f"{_number(point.value)} {_t(series.unit)}</title></circle>"
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"


_STYLE = (
    "body{font-family:DejaVu Sans,Helvetica,Arial,sans-serif;max-width:760px;margin:2em auto;"
    "color:#222}h2{font-size:1.1em;margin-top:2em}li{margin:.2em 0}"
)


def _list(title: str, items: Sequence[str]) -> list[str]:
    if not items:
        return []
    return [f"<h2>{_t(title)}</h2>", "<ul>", *(f"<li>{_t(i)}</li>" for i in items), "</ul>"]


def render_html(history: History) -> str:
    """A self-contained page: the summary, every change point, the campaigns left out,
    then one chart per series (no script, no external reference)."""
    steps = [(series, change) for series in history.series for change in series.change_points]
    body = [
        "<h1>History</h1>",
        f"<p>{_t(summary_line(history))}</p>",
    ]
    listed = [
        f"{s.series.metric}, {key_text(s)}: {_step_text(s, c)}"
        + "".join(f"; {f} differs: {_shown(b)} -> {_shown(a)}" for f, b, a in c.differs)
        for s, c in steps
    ]
    body += _list("Change points", listed)
    body += _list(
        "Excluded: failed verification", [f"{e.campaign}: {e.reason}" for e in history.excluded]
    )
    body += _list("Skipped", [f"{e.campaign}: {e.reason}" for e in history.skipped])
    for series in history.series:
        body.append(
            f"<h2>{_t(series.series.metric)} ({_t(series.unit)}): {_t(key_text(series))}</h2>"
        )
        body.append(chart(series).rstrip("\n"))
    page = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        '<head><meta charset="utf-8"><title>History</title>',
        f"<style>{_STYLE}</style></head>",
        "<body>",
        *body,
        "</body>",
        "</html>",
    ]
    return "\n".join(page) + "\n"
