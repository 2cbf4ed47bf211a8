"""Progress: a rich bar on a terminal, plain lines otherwise."""

from __future__ import annotations

import io
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runners.campaign._stats import cell_stats
from runners.campaign.progress import LogProgress, RichProgress, RunningMedian, progress_for


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _record(index: int, *, failed: bool = False) -> dict[str, object]:
    return {
        "index": index,
        "warmup": False,
        "sent_ns": 0,
        "first_token_ns": 10_000_000,
        "first_content_ns": 12_000_000,
        "last_token_ns": 110_000_000,
        "end_ns": 111_000_000,
        "usage": {"prompt_tokens": 100, "completion_tokens": 11},
        "error": {"class": "stall"} if failed else None,
    }


def test_terminal_gets_a_rich_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    terminal = _Terminal()
    progress = progress_for(terminal)
    assert isinstance(progress, RichProgress)
    progress.start_cell("linux capacity ctx4096-c1-nothink", 3)
    records = [_record(0), _record(1), _record(2, failed=True)]
    for record in records:
        progress.request_done("linux capacity ctx4096-c1-nothink", record)
    progress._bar.refresh()  # what its thread draws twice a second
    drawn = terminal.getvalue()
    assert "\x1b[" in drawn  # a live display, with terminal control sequences
    assert "linux capacity ctx4096-c1-nothink" in drawn
    assert "3/3" in drawn and "failed 1  TTFT 12.0 ms" in drawn
    progress.end_cell("linux capacity ctx4096-c1-nothink", cell_stats(records), "complete")
    # The ended cell is a line of its own; its bar is gone, so each redraw stays one bar.
    assert progress._bar.tasks == []
    progress.close()
    shown = terminal.getvalue()
    assert (
        "linux capacity ctx4096-c1-nothink: complete: 2/3 ok, TTFT 12.0 ms, decode 100.0 "
        "tok/s, E2E 111.0 ms"
    ) in shown


def test_pipe_gets_log_lines() -> None:
    pipe = io.StringIO()
    progress = progress_for(pipe)
    assert isinstance(progress, LogProgress)
    progress.start_cell("a s c", 2)
    records = [_record(0), _record(1)]
    for record in records:
        progress.request_done("a s c", record)
    progress.end_cell("a s c", cell_stats(records), "complete")
    assert pipe.getvalue().splitlines() == [
        "a s c: 2 requests",
        "a s c: complete: 2/2 ok, TTFT 12.0 ms, decode 100.0 tok/s, E2E 111.0 ms",
    ]


def test_cells_of_interleaved_arms_keep_their_own_counts() -> None:
    # Arms taking turns run their cells at once: each line counts its own cell's requests.
    pipe = io.StringIO()
    progress = LogProgress(pipe)
    progress.start_cell("a s c", 20)
    progress.start_cell("b s c", 20)
    for index in range(10):
        progress.request_done("a s c", _record(index))
        progress.request_done("b s c", _record(index, failed=index < 3))
    progress.end_cell("a s c", None, "skipped")
    assert pipe.getvalue().splitlines() == [
        "a s c: 20 requests",
        "b s c: 20 requests",
        "a s c: 10/20 done, 0 failed, TTFT median 12.0 ms",
        "b s c: 10/20 done, 3 failed, TTFT median 12.0 ms",
        "a s c: skipped: already complete",
    ]


def test_a_terminal_draws_a_bar_per_interleaved_arm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    progress = RichProgress(_Terminal())
    progress.start_cell("a s c", 2)
    progress.start_cell("b s c", 2)
    progress.request_done("b s c", _record(0))
    assert [(t.description, t.completed) for t in progress._bar.tasks] == [
        ("a s c", 0),
        ("b s c", 1),
    ]
    progress.end_cell("a s c", None, "skipped")
    assert [t.description for t in progress._bar.tasks] == ["b s c"]
    progress.close()


@given(st.lists(st.floats(min_value=-1e9, max_value=1e9, allow_nan=False), max_size=60))
def test_the_running_median_is_the_median_after_every_value(values: list[float]) -> None:
    """The progress line's TTFT median, kept in O(log n) a request instead of a sort of
    every TTFT so far (which the open loop paid in its event loop after each request)."""
    running = RunningMedian()
    assert running.median() is None
    for count, value in enumerate(values, 1):
        running.add(value)
        assert len(running) == count
        assert running.median() == statistics.median(values[:count])
