"""Progress: a rich bar on a terminal, plain lines otherwise."""

from __future__ import annotations

import io

import pytest

from runners.progress import LogProgress, RichProgress, progress_for
from runners.stats import cell_stats


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
        progress.request_done(record)
    progress.end_cell("linux capacity ctx4096-c1-nothink", cell_stats(records), "complete")
    progress.close()
    shown = terminal.getvalue()
    assert "\x1b[" in shown  # a live display, with terminal control sequences
    assert "linux capacity ctx4096-c1-nothink" in shown
    assert "3/3" in shown
    assert "complete: 2/3 ok, TTFT 12.0 ms, decode 100.0 tok/s, E2E 111.0 ms" in shown


def test_pipe_gets_log_lines() -> None:
    pipe = io.StringIO()
    progress = progress_for(pipe)
    assert isinstance(progress, LogProgress)
    progress.start_cell("a s c", 2)
    records = [_record(0), _record(1)]
    for record in records:
        progress.request_done(record)
    progress.end_cell("a s c", cell_stats(records), "complete")
    assert pipe.getvalue().splitlines() == [
        "a s c: 2 requests",
        "a s c: complete: 2/2 ok, TTFT 12.0 ms, decode 100.0 tok/s, E2E 111.0 ms",
    ]
