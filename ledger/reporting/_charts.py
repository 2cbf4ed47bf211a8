"""Self-contained SVG charts: grouped bars by category, a strip plot of distributions, and
lines across ordered categories (latency against rate) with a threshold and marks.

No scripts, no web fonts, no external references: a generic font family and inline
attributes only, so a chart renders the same offline and its bytes depend only on its data.
Numbers are written with fixed precision, so the same data gives the same file.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from xml.sax.saxutils import escape

WIDTH = 720
HEIGHT = 360
_LEFT, _RIGHT, _TOP, _BOTTOM = 72, 24, 48, 64
_COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52")
_FONT = 'font-family="DejaVu Sans, Helvetica, Arial, sans-serif"'


def _n(value: float) -> str:
    text = f"{value:.1f}"
    return "0" if text in ("0.0", "-0.0") else text.removesuffix(".0")


def _nice_max(value: float) -> float:
    if value <= 0:
        return 1.0
    exponent = math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        top = step * 10**exponent
        if top >= value:
            return float(top)
    return float(10 ** (exponent + 1))


def _label(value: float) -> str:
    if value >= 10000:
        return f"{value / 1000:,.0f}k"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _frame(title: str, unit: str, top: float, parts: list[str]) -> list[str]:
    plot_h = HEIGHT - _TOP - _BOTTOM
    out = [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
            f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{escape(title)}">'
        ),
        f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>',
        (
            f'<text x="{WIDTH / 2:g}" y="24" text-anchor="middle" font-size="15" {_FONT}>'
            f"{escape(title)}</text>"
        ),
        (
            f'<text x="16" y="{_TOP + plot_h / 2:g}" font-size="12" {_FONT} text-anchor="middle" '
            f'transform="rotate(-90 16 {_TOP + plot_h / 2:g})">{escape(unit)}</text>'
        ),
    ]
    for i in range(5):
        value = top * i / 4
        y = _TOP + plot_h - plot_h * i / 4
        out.append(
            f'<line x1="{_LEFT}" y1="{_n(y)}" x2="{WIDTH - _RIGHT}" y2="{_n(y)}" '
            'stroke="#dddddd" stroke-width="1"/>'
        )
        out.append(
            f'<text x="{_LEFT - 6}" y="{_n(y + 4)}" text-anchor="end" font-size="11" {_FONT}>'
            f"{_label(value)}</text>"
        )
    out.extend(parts)
    return out


def _legend(names: Sequence[str]) -> list[str]:
    out = []
    for i, name in enumerate(names):
        x = _LEFT + i * 160
        y = HEIGHT - 18
        out.append(f'<rect x="{x}" y="{y - 10}" width="12" height="12" fill="{_COLORS[i % 4]}"/>')
        out.append(f'<text x="{x + 18}" y="{y}" font-size="12" {_FONT}>{escape(name)}</text>')
    return out


def bars(
    title: str,
    unit: str,
    categories: Sequence[str],
    series: Sequence[tuple[str, Sequence[float | None]]],
) -> str:
    """Grouped bars: one group per category (equally spaced), one bar per series."""
    values = [v for _, vs in series for v in vs if v is not None]
    top = _nice_max(max(values, default=0.0))
    plot_w = WIDTH - _LEFT - _RIGHT
    plot_h = HEIGHT - _TOP - _BOTTOM
    group = plot_w / max(1, len(categories))
    bar = group * 0.7 / max(1, len(series))
    parts = []
    for c, category in enumerate(categories):
        left = _LEFT + c * group + group * 0.15
        for s, (_, vs) in enumerate(series):
            value = vs[c]
            if value is None:
                continue
            h = plot_h * value / top
            x = left + s * bar
            parts.append(
                f'<rect x="{_n(x)}" y="{_n(_TOP + plot_h - h)}" width="{_n(bar - 2)}" '
                f'height="{_n(h)}" fill="{_COLORS[s % 4]}"><title>{escape(series[s][0])}, '
                f"{escape(category)}: {_label(value)} {escape(unit)}</title></rect>"
            )
        parts.append(
            f'<text x="{_n(_LEFT + c * group + group / 2)}" y="{HEIGHT - _BOTTOM + 16}" '
            f'text-anchor="middle" font-size="12" {_FONT}>{escape(category)}</text>'
        )
    out = _frame(title, unit, top, parts) + _legend([name for name, _ in series])
    return "\n".join([*out, "</svg>"]) + "\n"


def strips(title: str, unit: str, series: Sequence[tuple[str, Sequence[float]]]) -> str:
    """Every value of each series as a dot in its own column, with the median marked."""
    values = [v for _, vs in series for v in vs]
    top = _nice_max(max(values, default=0.0))
    plot_w = WIDTH - _LEFT - _RIGHT
    plot_h = HEIGHT - _TOP - _BOTTOM
    column = plot_w / max(1, len(series))
    parts = []
    for s, (name, vs) in enumerate(series):
        center = _LEFT + column * (s + 0.5)
        ordered = sorted(vs)
        for i, value in enumerate(ordered):
            # A deterministic spread across the column, so equal values stay visible.
            x = center + (((i * 7) % 11) - 5) * column * 0.05
            y = _TOP + plot_h - plot_h * value / top
            parts.append(
                f'<circle cx="{_n(x)}" cy="{_n(y)}" r="3" fill="{_COLORS[s % 4]}" '
                'fill-opacity="0.7"/>'
            )
        if ordered:
            middle = (
                ordered[len(ordered) // 2]
                if len(ordered) % 2
                else (ordered[len(ordered) // 2 - 1] + ordered[len(ordered) // 2]) / 2
            )
            y = _TOP + plot_h - plot_h * middle / top
            parts.append(
                f'<line x1="{_n(center - column * 0.35)}" y1="{_n(y)}" '
                f'x2="{_n(center + column * 0.35)}" y2="{_n(y)}" stroke="#222222" '
                f'stroke-width="2"><title>{escape(name)} median {_label(middle)} '
                f"{escape(unit)}</title></line>"
            )
        parts.append(
            f'<text x="{_n(center)}" y="{HEIGHT - _BOTTOM + 16}" text-anchor="middle" '
            f'font-size="12" {_FONT}>{escape(name)} (n={len(vs)})</text>'
        )
    return "\n".join([*_frame(title, unit, top, parts), "</svg>"]) + "\n"


def lines(
    title: str,
    unit: str,
    categories: Sequence[str],
    series: Sequence[tuple[str, Sequence[float | None]]],
    *,
    threshold: tuple[str, float] | None = None,
    marks: Sequence[tuple[int, str]] = (),
) -> str:
    """A line per series across equally spaced categories (dashed for every second one:
    a p99 beside its p50), a dashed red ``threshold`` line across, and each mark (category
    index, label) as a dotted vertical line labelled at the top."""
    values = [v for _, vs in series for v in vs if v is not None]
    if threshold is not None:
        values.append(threshold[1])
    top = _nice_max(max(values, default=0.0))
    plot_w = WIDTH - _LEFT - _RIGHT
    plot_h = HEIGHT - _TOP - _BOTTOM
    step = plot_w / max(1, len(categories))

    def x(index: int) -> float:
        return _LEFT + step * (index + 0.5)

    def y(value: float) -> float:
        return _TOP + plot_h - plot_h * value / top

    parts = []
    for c, category in enumerate(categories):
        parts.append(
            f'<text x="{_n(x(c))}" y="{HEIGHT - _BOTTOM + 16}" text-anchor="middle" '
            f'font-size="12" {_FONT}>{escape(category)}</text>'
        )
    for s, (name, vs) in enumerate(series):
        color = _COLORS[(s // 2) % 4]
        dash = ' stroke-dasharray="6 4"' if s % 2 else ""
        points = [(c, v) for c, v in enumerate(vs) if v is not None]
        if len(points) > 1:
            path = " ".join(f"{_n(x(c))},{_n(y(v))}" for c, v in points)
            parts.append(
                f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"{dash}/>'
            )
        for c, v in points:
            parts.append(
                f'<circle cx="{_n(x(c))}" cy="{_n(y(v))}" r="3" fill="{color}"><title>'
                f"{escape(name)}, {escape(categories[c])}: {_label(v)} {escape(unit)}"
                "</title></circle>"
            )
    if threshold is not None:
        label, value = threshold
        parts.append(
            f'<line x1="{_LEFT}" y1="{_n(y(value))}" x2="{WIDTH - _RIGHT}" y2="{_n(y(value))}" '
            'stroke="#c44e52" stroke-width="1.5" stroke-dasharray="4 3"/>'
        )
        parts.append(
            f'<text x="{WIDTH - _RIGHT - 4}" y="{_n(y(value) - 4)}" text-anchor="end" '
            f'font-size="11" fill="#c44e52" {_FONT}>{escape(label)}</text>'
        )
    for index, (marked, label) in enumerate(marks):
        parts.append(
            f'<line x1="{_n(x(marked))}" y1="{_TOP}" x2="{_n(x(marked))}" '
            f'y2="{HEIGHT - _BOTTOM}" stroke="#555555" stroke-width="1" stroke-dasharray="2 3"/>'
        )
        parts.append(
            f'<text x="{_n(x(marked) + 4)}" y="{_TOP + 12 + 13 * index}" font-size="11" '
            f"{_FONT}>{escape(label)}</text>"
        )
    # One colour per pair of series: the legend names it by what the pair shares.
    names = [name.rsplit(" ", 1)[0] for name, _ in series[::2]]
    out = _frame(title, unit, top, parts) + _legend(names)
    return "\n".join([*out, "</svg>"]) + "\n"
