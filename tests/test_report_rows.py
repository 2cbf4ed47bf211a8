"""How the report labels its performance rows: two rows never read alike."""

from __future__ import annotations

from typing import Any

from ledger.report import _target


def _row(stage: str, target: int, concurrency: int, thinking: bool = False) -> dict[str, Any]:
    return {
        "stage": stage,
        "context_target": target,
        "concurrency": concurrency,
        "thinking": thinking,
    }


def test_a_row_names_only_what_sets_it_apart_within_its_stage() -> None:
    rows = [
        _row("capacity", 512, 1),
        _row("capacity", 512, 2),
        _row("capacity", 1024, 1, thinking=True),
        _row("capacity", 1024, 2),
        _row("long", 4096, 1),
    ]
    assert [_target(r, rows) for r in rows] == [
        "capacity 512 c1 no thinking",
        "capacity 512 c2 no thinking",
        "capacity 1,024 c1 thinking",
        "capacity 1,024 c2 no thinking",
        "long 4,096",
    ]
    one = [_row("capacity", 512, 1), _row("capacity", 1024, 1)]
    assert [_target(r, one) for r in one] == ["capacity 512", "capacity 1,024"]
