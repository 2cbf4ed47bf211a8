"""The closing table of ``ledger run``: a row per cell, then vLLM's standard figures of each
cell (TTFT, TPOT, ITL and E2E latency: mean, median, p90, p99 and std), each percentile
only where the cell's completed requests support it (``ledger/measures/percentiles.py``)."""

from __future__ import annotations

from collections.abc import Sequence

from ledger.measures import percentiles
from runners.campaign._cells import CellOutcome
from runners.campaign._stats import SERVING_PERCENTILES

_METRICS = (("ttft", "TTFT ms"), ("tpot", "TPOT ms"), ("itl", "ITL ms"), ("e2el", "E2E ms"))


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _aligned(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def closing_table(cells: Sequence[CellOutcome]) -> str:
    """Both tables, each line ending in a newline; empty without cells. The server's own
    clock stands beside ours where any cell has it."""
    if not cells:
        return ""
    server = any(c.stats is not None and c.stats.server_decode_tok_s is not None for c in cells)
    header = ["arm", "stage", "cell", "status", "ok/n", "TTFT ms", "decode tok/s", "E2E ms"]
    header += ["req/s", "tok/s"]
    header += ("first token - server prompt ms", "server decode tok/s") * server
    rows = [header]
    for outcome in cells:
        stats = outcome.stats
        row = [outcome.arm, outcome.stage, outcome.cell, outcome.status]
        if stats is None:
            row += ["-"] * (len(header) - len(row))
        else:
            row.append(f"{stats.requests - stats.failed}/{stats.requests}")
            row += map(_fmt, (stats.ttft_ms, stats.decode_tok_s, stats.e2e_ms))
            serving = stats.serving
            row.append(_fmt(serving.request_throughput if serving else None, 2))
            row.append(_fmt(stats.throughput_tok_s))
            if server:
                row += map(_fmt, (stats.server_gap_ms, stats.server_decode_tok_s))
        rows.append(row)
    lines = _aligned(rows)
    figures = _figures(cells)
    if len(figures) > 1:
        lines += ["", *_aligned(figures)]
    return "".join(line + "\n" for line in lines)


def _figures(cells: Sequence[CellOutcome]) -> list[list[str]]:
    """vLLM's figures, a row per cell and metric."""
    names = [f"p{int(p)}" for p in SERVING_PERCENTILES]
    rows = [["arm", "stage", "cell", "metric", "mean", "median", *names, "std"]]
    for outcome in cells:
        serving = outcome.stats.serving if outcome.stats is not None else None
        if serving is None:
            continue
        for name, label in _METRICS:
            dist = serving.metrics[name]
            if dist is None:
                continue
            ok = serving.completed
            values = [
                _fmt(dist.mean, 2),
                percentiles.stated(0.5, ok, _fmt(dist.median, 2)),
                *(percentiles.stated(p / 100, ok, _fmt(v, 2)) for p, v in dist.percentiles),
                _fmt(dist.std, 2),
            ]
            rows.append([outcome.arm, outcome.stage, outcome.cell, label, *values])
    return rows
