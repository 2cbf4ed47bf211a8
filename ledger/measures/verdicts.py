"""Stage verdicts recomputed from their own measurements.

The runners record a verdict in each reserve, restoration and startup artifact; the policy
never takes that word for it. These functions recompute each verdict from the recorded
readings (cards, snapshots, outcome), so a hand-edited ``passed: true`` buys nothing.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "STARTUP_PASSED",
    "reserve_failures",
    "restart_failures",
    "restoration_failures",
]

STARTUP_PASSED = "ready"


def reserve_failures(document: dict[str, Any], threshold_mib: int) -> list[str]:
    """Why a GPU reading does not show ``threshold_mib`` free on every card (empty: it does)."""
    nvml = document.get("nvml") or {}
    if not nvml.get("available"):
        return [f"no GPU reading: {nvml.get('error') or 'NVML unavailable'}"]
    cards = document.get("cards") or []
    if not cards:
        return ["NVML reports no card"]
    failures = []
    for card in cards:
        memory = card.get("memory")
        if memory is None:
            failures.append(f"card {card['index']}: free memory not readable")
        elif memory["free_mib"] < threshold_mib:
            failures.append(
                f"card {card['index']}: {memory['free_mib']} MiB free, "
                f"below the {threshold_mib} MiB reserve"
            )
    return failures


def restoration_failures(
    before: dict[str, Any] | None, after: dict[str, Any] | None
) -> list[dict[str, str]]:
    """Every way ``after`` shows the container disturbed since ``before``, each named."""
    if before is None:
        return [{"code": "no-before-snapshot", "message": "no snapshot before the workload"}]
    if after is None:
        return [{"code": "container-missing", "message": "no snapshot of the container afterwards"}]
    failures = []

    def fail(code: str, message: str) -> None:
        failures.append({"code": code, "message": message})

    if after["id"] != before["id"]:
        fail("container-replaced", f"container id {before['id'][:12]} became {after['id'][:12]}")
    if after["image_id"] != before["image_id"]:
        fail("image-changed", f"image {before['image_id']} became {after['image_id']}")
    if after["config_sha256"] != before["config_sha256"]:
        fail("config-changed", "the configuration digest changed")
    if after["restart_count"] > before["restart_count"]:
        fail(
            "restarted",
            f"restart count {before['restart_count']} became {after['restart_count']}",
        )
    elif after["id"] == before["id"] and after["started_at"] != before["started_at"]:
        # A manual stop and start leaves the restart count alone; the start time moves.
        fail("restarted", f"started at {before['started_at']}, again at {after['started_at']}")
    if after["oom_killed"] and not before["oom_killed"]:
        fail("oom-killed", "the container was killed for want of memory")
    if after["state"] != before["state"]:
        fail("state-changed", f"state {before['state']} became {after['state']}")
    return failures


_RESTART_SAME = (
    ("image_id", "restart-image-changed", "image"),
    ("command", "restart-command-changed", "command"),
    ("env_sha256", "restart-environment-changed", "environment digest"),
    ("config_sha256", "restart-config-changed", "configuration digest"),
)
"""What a restart must start again unchanged: snapshot field, failure code, what it is."""


def restart_failures(restart: dict[str, Any]) -> list[dict[str, str]]:
    """Every way a restoration's restart does not show the same server restored and
    serving: stopped, started again from the same image digest, command, environment and
    configuration, ready, and answering a first request."""
    failures: list[dict[str, str]] = []

    def fail(code: str, message: str) -> None:
        failures.append({"code": code, "message": message})

    attempt = restart.get("attempt")
    if restart.get("stop_error") is not None:
        fail("restart-stop-failed", f"the container was not stopped: {restart['stop_error']}")
    elif attempt is None or attempt.get("outcome") != STARTUP_PASSED:
        outcome = attempt.get("outcome") if attempt else "not attempted"
        detail = f" ({attempt['detail']})" if attempt else ""
        fail("restart-not-ready", f"the second start was {outcome}{detail}")
    first, second = restart.get("first_start"), restart.get("second_start")
    if first is None or second is None:
        which = "first" if first is None else "second"
        fail("restart-missing-snapshot", f"no snapshot of the {which} start")
        return failures
    if first.get("started_at") == second.get("started_at") and first["id"] == second["id"]:
        fail("not-restarted", f"the container still runs from its start at {first['started_at']}")
    for field, code, what in _RESTART_SAME:
        if first.get(field) is None or first.get(field) != second.get(field):
            fail(
                code,
                f"the restart changed the {what}: {first.get(field)} became {second.get(field)}",
            )
    request = restart.get("first_request")
    if request is None:
        fail("restart-no-request", "no request was sent after the restart")
    elif not request.get("ok"):
        fail(
            "restart-request-failed",
            f"the first request after the restart failed: {request.get('error')}",
        )
    return failures
