"""The container evidence stages' artifacts: a startup attempt, and a restoration (the
container before and after the workload, and with ``restart = true`` a stop, a second
start of the same configuration and the first request it served).

Each verdict is computed by the ledger functions the promotion policy recomputes it with.
"""

from __future__ import annotations

import threading
from typing import Any

from ledger.measures.verdicts import STARTUP_PASSED, restart_failures, restoration_failures
from runners.plan import Arm, Container, EvidenceStage, Plan
from runners.probes import containers, startup
from runners.probes.evidence import head, utc_now

__all__ = [
    "RESTORATION_SCHEMA",
    "STARTUP_SCHEMA",
    "ContainerWitness",
    "next_gate",
    "restart",
    "restoration_document",
    "startup_document",
]

RESTORATION_SCHEMA = "anvil-serving.container-restoration/v1"
STARTUP_SCHEMA = "anvil-serving.startup-attempt/v1"


class ContainerWitness:
    """Snapshots of one arm's container; remembers why the engine could not be reached."""

    def __init__(self, container: Container, stopping: threading.Event | None = None) -> None:
        self.container = container
        self.stopping = stopping
        """Set when a signal ends the run: a start being watched ends at once."""
        self.error: str | None = None
        self._client: Any = None

    def engine(self) -> dict[str, Any]:
        return {
            "available": self.error is None,
            "error": self.error,
            "host": self.container.docker_host,
        }

    def client(self) -> Any:
        if self._client is None:
            try:
                self._client = containers.connect(self.container.docker_host)
                self.error = None
            except containers.EngineUnavailable as e:
                self.error = str(e)
        return self._client

    def snapshot(self) -> dict[str, Any] | None:
        """The container now, or None (gone, or no engine: :attr:`error` says which)."""
        client = self.client()
        if client is None:
            return None
        try:
            return containers.snapshot(client, self.container.name)
        except (LookupError, containers.EngineUnavailable) as e:
            self.error = str(e) if isinstance(e, containers.EngineUnavailable) else None
            return None

    def start(self, ready_url: str, timing: dict[str, Any], campaign_id: str) -> dict[str, Any]:
        """Starts the container (creating it first when ledger manages it) and watches it
        become ready; the attempt, as :func:`runners.probes.startup.start_and_watch` says."""
        client = self.client()
        if client is None:
            return startup.unstarted(
                "engine-unavailable", str(self.error), None, "no container engine"
            )
        return startup.start_and_watch(
            client,
            self.container.name,
            ready_url,
            deadline_s=float(timing["deadline_s"]),
            poll_s=float(timing["poll_s"]),
            spec=self.container.spec,
            campaign_id=campaign_id,
            stop=self.stopping,
        )

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def next_gate(attempt: dict[str, Any], deadline_s: float) -> str | None:
    """What has to hold before another attempt at a start that was not ready."""
    outcome = attempt["outcome"]
    if outcome == STARTUP_PASSED:
        return None
    if outcome == "oom-killed":
        memory = attempt["memory"]
        reached = (
            f": it reached its {memory['limit_mib']:g} MiB limit (peak {memory['peak_mib']:g} MiB)"
            if memory["limit_mib"] and memory["peak_mib"]
            else ""
        )
        return f"managed host-memory containment and loader diagnosis before retry{reached}"
    if outcome == "exited":
        return f"the server's exit with code {attempt['exit_code']} explained before retry"
    if outcome == "not-ready":
        return f"readiness within {deadline_s:g} s (last probe: {attempt['last_probe']})"
    if outcome == "start-failed":
        return f"a container the engine starts: {attempt['detail']}"
    return f"a reachable container engine: {attempt['detail']}"


def startup_document(
    plan: Plan, arm: Arm, stage: EvidenceStage, witness: ContainerWitness, ready_url: str
) -> dict[str, Any]:
    """Starts the arm's container and watches it; the attempt, classified."""
    started_at = utc_now()
    deadline = float(stage.settings["deadline_s"])
    before = witness.snapshot()
    attempt = witness.start(ready_url, stage.settings, plan.campaign_id)
    after = witness.snapshot() if witness.client() is not None else None
    spec = witness.container.spec
    return {
        **head(plan, arm, stage, STARTUP_SCHEMA),
        "container": witness.container.name,
        "engine": witness.engine(),
        "ready_url": ready_url,
        "deadline_s": deadline,
        "started_at": started_at,
        "passed": attempt["outcome"] == STARTUP_PASSED,
        **attempt,
        "memory_limit_mib": spec.memory_limit_mib if spec is not None else None,
        "next_gate": next_gate(attempt, deadline),
        "before": before,
        "after": after,
    }


def restart(
    witness: ContainerWitness,
    ready_url: str,
    stage: EvidenceStage,
    campaign_id: str,
    first: dict[str, Any] | None,
) -> dict[str, Any]:
    """Stops the container and starts it again; the restart section without its first
    request (the caller sends it once the attempt is ready). ``first`` is the snapshot
    of the running container just taken (the restoration's *after*)."""
    stopped_at = utc_now()
    client = witness.client()
    stop_error = (
        startup.stop(client, witness.container.name) if client is not None else witness.error
    )
    attempt = None
    if stop_error is None:
        attempt = witness.start(ready_url, stage.settings, campaign_id)
    return {
        "first_start": first,
        "stopped_at": stopped_at,
        "stop_error": stop_error,
        "attempt": attempt,
        "second_start": witness.snapshot() if attempt is not None else None,
        "first_request": None,
    }


def restoration_document(
    plan: Plan,
    arm: Arm,
    stage: EvidenceStage,
    witness: ContainerWitness,
    before: tuple[dict[str, Any] | None, str | None],
    after: tuple[dict[str, Any] | None, str | None],
    restarted: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Before/after snapshots, the restart when there was one, and every named difference;
    ``after`` taken at None: the workload is still running."""
    (before_snapshot, before_at), (after_snapshot, after_at) = before, after
    failures = restoration_failures(before_snapshot, after_snapshot)
    if after_at is None:
        failures = [{"code": "in-progress", "message": "the workload has not finished"}]
    elif restarted is not None:
        failures.extend(restart_failures(restarted))
    if not witness.engine()["available"]:
        failures.insert(0, {"code": "engine-unavailable", "message": str(witness.error)})
    document = {
        **head(plan, arm, stage, RESTORATION_SCHEMA),
        "container": witness.container.name,
        "engine": witness.engine(),
        "before": before_snapshot,
        "before_at": before_at,
        "after": after_snapshot,
        "after_at": after_at,
        "passed": not failures,
        "failures": failures,
    }
    if restarted is not None:
        document["restart"] = restarted
    return document
