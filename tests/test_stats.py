"""Per-request metrics and cell statistics follow the definitions of ledger/database/sql.py."""

from __future__ import annotations

from typing import Any

import pytest

from runners.campaign._stats import cell_stats, request_metrics


def _record(sent: int, *, warmup: bool = False, error: bool = False) -> dict[str, Any]:
    # First token (reasoning) 100 ms after sending, first content at 150 ms, 11 tokens
    # with the last 200 ms after the first, end of stream 5 ms later.
    return {
        "warmup": warmup,
        "sent_ns": sent,
        "first_token_ns": sent + 100_000_000,
        "first_content_ns": sent + 150_000_000,
        "last_token_ns": sent + 300_000_000,
        "end_ns": sent + 305_000_000,
        "usage": {"prompt_tokens": 4000, "completion_tokens": 11},
        "error": {"class": "stall"} if error else None,
    }


def test_request_metrics() -> None:
    metrics = request_metrics(_record(0))
    assert metrics == {
        "ttft_ms": 150.0,
        "first_token_ms": 100.0,
        "e2e_ms": 305.0,
        "effective_prefill_tok_s": pytest.approx(40000.0),
        "decode_tok_s": pytest.approx(50.0),
    }


def test_no_content_and_single_token() -> None:
    record = _record(0) | {"first_content_ns": None, "usage": {"completion_tokens": 1}}
    metrics = request_metrics(record)
    assert metrics["ttft_ms"] is None
    assert metrics["decode_tok_s"] is None
    assert metrics["effective_prefill_tok_s"] is None


def test_cell_stats_exclude_warmup_and_failures() -> None:
    records = [
        _record(0, warmup=True),
        _record(1_000_000_000),
        _record(1_100_000_000),
        _record(1_200_000_000, error=True),
    ]
    stats = cell_stats(records)
    assert (stats.requests, stats.failed) == (3, 1)
    assert stats.ttft_ms == 150.0
    # 22 tokens from the first measured start (1.0 s) to the last end (1.405 s).
    assert stats.throughput_tok_s == pytest.approx(22 / 0.405)


def test_cell_stats_set_the_servers_clock_beside_ours() -> None:
    timed = dict(
        _record(0),
        server_timings={
            "prompt_n": 4000,
            "prompt_ms": 90.0,
            "predicted_n": 11,
            "predicted_ms": 220.0,
        },
    )
    untimed = _record(1_000_000_000)
    stats = cell_stats([timed, untimed])
    # First token at 100 ms, the server's prompt took 90: 10 ms outside its clock.
    assert stats.server_gap_ms == pytest.approx(10.0)
    assert stats.server_decode_tok_s == pytest.approx(11 / 0.220)
    # A cell no server timed says so rather than zero.
    plain = cell_stats([untimed])
    assert plain.server_gap_ms is None and plain.server_decode_tok_s is None
