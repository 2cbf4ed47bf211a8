"""Run progress: a rich progress bar per cell on a terminal, plain log lines otherwise."""

from __future__ import annotations

import heapq
import logging
import sys
from typing import Any, Protocol, TextIO

from runners.campaign._stats import CellStats

__all__ = [
    "LogProgress",
    "Progress",
    "RichProgress",
    "RunningMedian",
    "progress_for",
]

_logger = logging.getLogger("ledger.run")


class Progress(Protocol):
    """What the runner reports while a campaign runs."""

    def start_cell(self, label: str, total: int) -> None:
        """A cell begins: ``total`` requests, warm-up included."""

    def request_done(self, label: str, record: dict[str, Any]) -> None:
        """One request of the cell ``label`` finished (successful or not)."""

    def counted(self, label: str, record: dict[str, Any]) -> None:
        """A request an interrupted run finished, read back from disk: counted, not shown."""

    def end_cell(self, label: str, stats: CellStats | None, status: str) -> None:
        """The cell ended; ``stats`` is None when it was skipped."""

    def note(self, text: str) -> None:
        """An evidence stage recorded its artifact."""

    def close(self) -> None:
        """The run is over."""


class RunningMedian:
    """The median of the values added so far, at O(log n) a value: the progress line is
    updated in the event loop after every request, where sorting every TTFT so far (as
    ``statistics.median`` does) cost a long load stage its schedule."""

    def __init__(self) -> None:
        self._low: list[float] = []  # the lower half, negated: a max-heap
        self._high: list[float] = []  # the upper half

    def __len__(self) -> int:
        return len(self._low) + len(self._high)

    def add(self, value: float) -> None:
        if self._low and value > -self._low[0]:
            heapq.heappush(self._high, value)
        else:
            heapq.heappush(self._low, -value)
        if len(self._low) > len(self._high) + 1:
            heapq.heappush(self._high, -heapq.heappop(self._low))
        elif len(self._high) > len(self._low):
            heapq.heappush(self._low, -heapq.heappop(self._high))

    def median(self) -> float | None:
        """As ``statistics.median``: the middle value, or the mean of the two middle ones."""
        if not self._low:
            return None
        if len(self._low) > len(self._high):
            return -self._low[0]
        return (-self._low[0] + self._high[0]) / 2


class _Counts:
    def __init__(self) -> None:
        self.done = 0
        self.failed = 0
        self.ttft = RunningMedian()

    def add(self, record: dict[str, Any]) -> None:
        self.done += 1
        if record.get("error") is not None:
            self.failed += 1
        elif record.get("first_content_ns") is not None and not record.get("warmup"):
            self.ttft.add((record["first_content_ns"] - record["sent_ns"]) / 1e6)

    def ttft_text(self) -> str:
        median = self.ttft.median()
        return f"{median:.1f} ms" if median is not None else "-"


def _stats_text(stats: CellStats) -> str:
    def show(value: float | None, unit: str) -> str:
        return f"{value:.1f} {unit}" if value is not None else "-"

    return (
        f"{stats.requests - stats.failed}/{stats.requests} ok, TTFT {show(stats.ttft_ms, 'ms')}, "
        f"decode {show(stats.decode_tok_s, 'tok/s')}, E2E {show(stats.e2e_ms, 'ms')}"
    )


class LogProgress:
    """One line per cell start and end, and every tenth request: for logs and CI.

    Cells of interleaved arms run at once: each line names its cell."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream or sys.stderr
        self._cells: dict[str, tuple[_Counts, int]] = {}

    def _print(self, text: str) -> None:
        print(text, file=self._stream, flush=True)

    def start_cell(self, label: str, total: int) -> None:
        self._cells[label] = (_Counts(), total)
        self._print(f"{label}: {total} requests")

    def counted(self, label: str, record: dict[str, Any]) -> None:
        self._cells[label][0].add(record)

    def request_done(self, label: str, record: dict[str, Any]) -> None:
        counts, total = self._cells[label]
        counts.add(record)
        if counts.done % 10 == 0 and counts.done < total:
            self._print(
                f"{label}: {counts.done}/{total} done, {counts.failed} failed, "
                f"TTFT median {counts.ttft_text()}"
            )

    def end_cell(self, label: str, stats: CellStats | None, status: str) -> None:
        self._cells.pop(label, None)
        detail = _stats_text(stats) if stats is not None else "already complete"
        self._print(f"{label}: {status}: {detail}")

    def note(self, text: str) -> None:
        self._print(text)

    def close(self) -> None:
        pass


class RichProgress:
    """A live bar for the cell that runs: requests done and failed, running TTFT median; a
    line for each cell that ended.

    The bar is drawn by rich's own thread, which holds the interpreter while it renders
    (about 1.4 ms for four bars here, more with each bar): the event loop that times the
    requests waits meanwhile, so the display keeps one bar and redraws twice a second."""

    def __init__(self, stream: TextIO | None = None) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as Bar

        self._console = Console(file=stream or sys.stderr, force_terminal=True)
        self._bar = Bar(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(),
            console=self._console,
            refresh_per_second=2,
        )
        self._bar.start()
        self._cells: dict[str, tuple[Any, _Counts]] = {}
        """Each running cell's bar and counts: one, or one per interleaved arm."""

    def start_cell(self, label: str, total: int) -> None:
        self._cells[label] = (self._bar.add_task(label, total=total, detail=""), _Counts())

    def counted(self, label: str, record: dict[str, Any]) -> None:
        self._cells[label][1].add(record)

    def request_done(self, label: str, record: dict[str, Any]) -> None:
        task, counts = self._cells[label]
        counts.add(record)
        self._bar.update(
            task,
            completed=counts.done,
            detail=f"failed {counts.failed}  TTFT {counts.ttft_text()}",
        )

    def end_cell(self, label: str, stats: CellStats | None, status: str) -> None:
        running = self._cells.pop(label, None)
        if running is not None:
            self._bar.remove_task(running[0])
        detail = "already complete" if stats is None else f"{status}: {_stats_text(stats)}"
        self._line(f"{label}: {detail}")

    def note(self, text: str) -> None:
        self._line(text)

    def _line(self, text: str) -> None:
        # Plain text: a '[' in a label or a path is no markup, and numbers keep their bytes.
        self._console.print(text, markup=False, highlight=False)

    def close(self) -> None:
        self._bar.stop()


def progress_for(stream: TextIO | None = None) -> Progress:
    """Rich on a terminal, log lines otherwise."""
    target = stream or sys.stderr
    if target.isatty():
        return RichProgress(target)
    return LogProgress(target)
