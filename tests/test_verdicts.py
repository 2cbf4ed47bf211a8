"""The reserve and restoration verdicts, recomputed from readings: pure functions, so they
are tested here without a container engine or a GPU, one failure at a time."""

from __future__ import annotations

from typing import Any

import pytest

from ledger.measures.verdicts import reserve_failures, restoration_failures

BEFORE = {
    "id": "a" * 64,
    "image_id": "sha256:" + "b" * 64,
    "config_sha256": "c" * 64,
    "restart_count": 0,
    "started_at": "2026-11-29T10:00:00.000000000Z",
    "oom_killed": False,
    "state": "running",
}


@pytest.mark.parametrize(
    ("change", "code", "message"),
    [
        ({"id": "d" * 64}, "container-replaced", "container id aaaaaaaaaaaa became dddddddddddd"),
        (
            {"image_id": "sha256:" + "e" * 64},
            "image-changed",
            f"image sha256:{'b' * 64} became sha256:{'e' * 64}",
        ),
        ({"config_sha256": "f" * 64}, "config-changed", "the configuration digest changed"),
        ({"restart_count": 1}, "restarted", "restart count 0 became 1"),
        (
            {"started_at": "2026-11-29T11:00:00.000000000Z"},
            "restarted",
            "started at 2026-11-29T10:00:00.000000000Z, again at 2026-11-29T11:00:00.000000000Z",
        ),
        ({"oom_killed": True}, "oom-killed", "the container was killed for want of memory"),
        ({"state": "exited"}, "state-changed", "state running became exited"),
    ],
)
def test_each_disturbance_is_named_alone(change: dict[str, Any], code: str, message: str) -> None:
    failures = restoration_failures(BEFORE, {**BEFORE, **change})
    assert [f["code"] for f in failures] == [code]
    assert failures[0]["message"] == message


def test_an_undisturbed_container_restores() -> None:
    assert restoration_failures(BEFORE, dict(BEFORE)) == []
    # A replaced container also has a new start time: named once, as replaced.
    replaced = {**BEFORE, "id": "d" * 64, "started_at": "2026-11-29T11:00:00.000000000Z"}
    assert [f["code"] for f in restoration_failures(BEFORE, replaced)] == ["container-replaced"]
    # An OOM kill already recorded before the workload is not the workload's.
    assert (
        restoration_failures({**BEFORE, "oom_killed": True}, {**BEFORE, "oom_killed": True}) == []
    )


def test_missing_snapshots() -> None:
    assert [f["code"] for f in restoration_failures(None, BEFORE)] == ["no-before-snapshot"]
    assert [f["code"] for f in restoration_failures(BEFORE, None)] == ["container-missing"]


def _reading(*free: int | None) -> dict[str, Any]:
    return {
        "nvml": {"available": True, "error": None},
        "cards": [
            {"index": i, "memory": None if f is None else {"free_mib": f}}
            for i, f in enumerate(free)
        ],
    }


@pytest.mark.parametrize(
    ("reading", "failures"),
    [
        (_reading(4000, 4271), []),
        (_reading(3072), []),  # exactly the reserve is enough
        (_reading(3071, 9000), ["card 0: 3071 MiB free, below the 3072 MiB reserve"]),
        (_reading(9000, None), ["card 1: free memory not readable"]),
        (_reading(), ["NVML reports no card"]),
        (
            {"nvml": {"available": False, "error": "NVMLError_LibraryNotFound"}, "cards": []},
            ["no GPU reading: NVMLError_LibraryNotFound"],
        ),
    ],
    ids=["enough", "exactly", "one-card-of-two-below", "unreadable", "no-card", "no-nvml"],
)
def test_reserve_verdict_from_the_reading(reading: dict[str, Any], failures: list[str]) -> None:
    assert reserve_failures(reading, 3072) == failures
