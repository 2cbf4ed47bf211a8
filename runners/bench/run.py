"""One ``ledger bench`` run: the plan, the campaign, the summary and the result file."""

from __future__ import annotations

import datetime
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from ledger.errors import RunnerError
from ledger.formats import cell_records
from ledger.formats.jsonio import read_json, write_json
from ledger.measures.serving import ServingFigures
from runners.bench.flags import STAGE, BenchSettings, bench_plan, joined_plan
from runners.bench.result import vllm_result
from runners.bench.summary import summary_block


def _records(folder: Path, header_path: Path) -> Iterator[dict[str, Any]]:
    """The cell's records, each with its defaults put in (:func:`cell_records.records`)."""
    yield from cell_records.records(folder, read_json(header_path))


def run_bench(
    settings: BenchSettings,
    raw_dir: Path,
    *,
    result_path: Path | None,
    started: datetime.datetime,
    out: TextIO,
) -> int:
    """Runs the bench; returns the command's exit status.

    Raises:
        UsageError: a setting this bench cannot measure, or a campaign it cannot join.
        RunnerError: as ``ledger run`` raises it.
    """
    from runners.campaign import run_plan, success_shortfall

    folder = raw_dir / settings.campaign
    joined = joined_plan(settings, folder) if folder.exists() else None
    if joined is not None:
        result = run_plan(joined, raw_dir, resume=True, adds_arm=True)
    else:
        result = run_plan(bench_plan(settings), raw_dir)
    print(f"raw campaign: {result.folder}", file=sys.stderr)
    if result.interrupted is not None:
        print(f"interrupted by {result.interrupted}", file=sys.stderr)
        return result.stopped_status
    cells = [c for c in result.cells if c.arm == settings.arm and c.stage == STAGE]
    if len(cells) != 1:
        raise RunnerError(f"{result.folder}: the bench cell of arm {settings.arm!r} is missing")
    header_path = result.folder / settings.arm / STAGE / f"{cells[0].cell}.json"
    figures = ServingFigures()
    for record in _records(result.folder, header_path):
        figures.add(record)
    summary = figures.summary(settings.metric_percentiles)
    out.write(
        summary_block(
            summary, concurrency=settings.max_concurrency, metrics=settings.percentile_metrics
        )
    )
    if result_path is not None:
        document = vllm_result(
            settings, summary, _records(result.folder, header_path), started=started
        )
        write_json(result_path, document)
        print(f"result: {result_path}", file=sys.stderr)
    shortfall = success_shortfall(cells)
    if shortfall is not None:
        print(f"ledger bench: {shortfall}", file=sys.stderr)
        return 1
    return 0 if result.complete else 1
