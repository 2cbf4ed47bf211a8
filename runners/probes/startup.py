"""Starting a serving container and watching it become ready, or die: the startup stage's
attempt and a restoration's restart.

A managed container (the plan gives its image) is created here from the plan, as
``docker run`` would create it, and labelled as ledger's; a container of that name that
ledger did not create is never removed. While the container starts, its memory cgroup is
read (:mod:`runners.probes.cgroups`) for the peak and for the kernel's own OOM counters.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import Any

import docker
import docker.errors

from runners.plan_container import ContainerSpec
from runners.probes import cgroups
from runners.probes.containers import Observation, probe_ready, watch_startup

__all__ = [
    "KILLED",
    "MANAGED_LABEL",
    "StartRefused",
    "create_managed",
    "oom_evidence",
    "remove_managed",
    "start_and_watch",
    "stop",
    "unstarted",
    "with_oom",
]

MANAGED_LABEL = "io.anvil-ledger.managed"
"""The label on a container ledger created: its value is the campaign's id."""
KILLED = 137
"""The exit status of a process killed by SIGKILL, as the OOM killer kills."""


class StartRefused(Exception):
    """The container could not be created or started; the message says why."""


def _explain(e: docker.errors.APIError) -> str:
    return e.explanation if isinstance(e.explanation, str) else str(e)


def create_managed(
    client: docker.DockerClient, name: str, spec: ContainerSpec, campaign_id: str
) -> None:
    """Creates ``name`` from ``spec``, replacing a container of that name ledger created.

    Raises:
        StartRefused: a container of that name is not ledger's, a variable of
            ``environment_from`` is unset, or the engine refused (no such image, ...).
    """
    environment = dict(spec.environment)
    for key in spec.environment_from:
        value = os.environ.get(key)
        if value is None:
            raise StartRefused(f"environment variable {key} (environment_from) is not set")
        environment[key] = value
    try:
        existing = client.containers.get(name)
    except docker.errors.NotFound:
        existing = None
    if existing is not None:
        owner = (existing.labels or {}).get(MANAGED_LABEL)
        if owner is None:
            raise StartRefused(
                f"a container named {name!r} exists and ledger did not create it: "
                "remove it, or name another container in the plan"
            )
        if owner != campaign_id and existing.status == "running":
            # Another campaign's server, serving now: perhaps a run beside this one.
            raise StartRefused(
                f"a container named {name!r} runs for campaign {owner}: stop it, or name "
                "another container in the plan"
            )
        existing.remove(force=True)
    ports: dict[str, Any] = {}
    for port, host in spec.ports.items():
        address, _, number = host.rpartition(":")
        ports[port] = (address, int(number)) if address else int(number)
    _pull_if_absent(client, spec.image)
    try:
        client.containers.create(
            spec.image,
            list(spec.command) if spec.command is not None else None,
            name=name,
            environment=environment,
            ports=ports,
            # As strings, not the SDK's mapping keyed by source: one source may be mounted
            # at two places.
            volumes=list(spec.volumes),
            mem_limit=f"{spec.memory_limit_mib}m" if spec.memory_limit_mib is not None else None,
            labels={MANAGED_LABEL: campaign_id},
        )
    except docker.errors.APIError as e:
        raise StartRefused(f"the engine refused to create it: {_explain(e)}") from None


def _pull_if_absent(client: docker.DockerClient, image: str) -> None:
    """Pulls ``image`` when the engine does not have it, as ``docker run`` does.

    Raises:
        StartRefused: it could not be pulled (no registry reachable, no such image).
    """
    try:
        client.images.get(image)
        return
    except docker.errors.ImageNotFound:
        pass
    try:
        client.images.pull(image)
    except docker.errors.APIError as e:
        reason = " ".join(_explain(e).split())
        raise StartRefused(
            f"image {image!r} is not on the engine and could not be pulled: {reason}"
        ) from None


def oom_evidence(
    engine_oom: bool, exit_code: int | None, watch: cgroups.MemoryWatch | None
) -> list[str]:
    """What shows the container was killed for want of memory (empty: nothing does).

    ``engine``: the engine's ``State.OOMKilled`` (Docker Engine sets it); ``cgroup-oom-kill``:
    the cgroup's own ``oom_kill`` counter; ``killed-at-limit``: exit status 137 after usage
    reached the limit (v1 ``failcnt``, v2 ``max`` events), for when the counter was not read
    before the cgroup went away.
    """
    sources = []
    if engine_oom:
        sources.append("engine")
    if watch is not None and watch.oom_killed:
        sources.append("cgroup-oom-kill")
    if watch is not None and exit_code == KILLED and watch.at_limit:
        sources.append("killed-at-limit")
    return sources


def with_oom(outcome: str, evidence: list[str]) -> str:
    """The outcome once the OOM evidence is counted: a server that exited, or hung without
    becoming ready (a worker killed, the server left waiting), is ``oom-killed`` when
    anything shows a kill for want of memory; a ready one stays ready."""
    return "oom-killed" if outcome in ("exited", "not-ready") and evidence else outcome


def _memory_watch(target: Any) -> tuple[cgroups.MemoryWatch | None, str | None]:
    """A watch on the started container's memory cgroup, or why there is none."""
    pid = int((target.attrs.get("State") or {}).get("Pid") or 0)
    try:
        version, folder = cgroups.locate(pid, target.id)
    except cgroups.CgroupUnreadable as e:
        return None, str(e)
    return cgroups.MemoryWatch(version, folder).start(), None


_ENGINE_GONE = (docker.errors.DockerException, OSError)
"""What the SDK raises when the engine stops answering: requests' connection errors are
OSErrors, not the SDK's own exceptions."""


def _engine_gone(error: BaseException, began: float) -> dict[str, Any]:
    return unstarted(
        "engine-unavailable",
        f"the engine stopped answering: {type(error).__name__}: {error}",
        round(time.monotonic() - began, 3),
    )


def _refused(detail: str, began: float) -> dict[str, Any]:
    return unstarted("start-failed", detail, round(time.monotonic() - began, 3))


def unstarted(
    outcome: str,
    detail: str,
    elapsed_s: float | None,
    unread: str = "the container did not start",
) -> dict[str, Any]:
    """An attempt that ended before a container ran: ``start-failed`` (refused, not
    created, a port already answering) or ``engine-unavailable``; ``unread`` says why no
    cgroup was read."""
    return {
        "outcome": outcome,
        "detail": detail,
        "probes": 0,
        "elapsed_s": elapsed_s,
        "time_to_ready_s": None,
        "last_probe": None,
        "exit_code": None,
        "oom_evidence": [],
        "memory": cgroups.unreadable(unread),
        "log_tail": [],
    }


def start_and_watch(
    client: docker.DockerClient,
    container: str,
    ready_url: str,
    *,
    deadline_s: float,
    poll_s: float = 1.0,
    spec: ContainerSpec | None = None,
    campaign_id: str = "",
    stop: threading.Event | None = None,
) -> dict[str, Any]:
    """Starts a container (created first from ``spec`` when given) and watches it become
    ready within ``deadline_s``.

    Returns the attempt: its outcome (``ready``, ``exited``, ``oom-killed``, ``not-ready``
    or ``start-failed``), a one-line detail, the probes made, time to ready, the exit code,
    what shows an OOM kill and the memory its cgroup counted. Setting ``stop`` (a signal
    ended the run) ends the watch at once.
    """
    began = time.monotonic()
    try:
        if spec is not None:
            create_managed(client, container, spec, campaign_id)
        target = client.containers.get(container)
        if probe_ready(ready_url) == "ready":
            raise StartRefused(
                f"{ready_url} answers before the container starts: another server holds "
                "its port, and its readiness would be taken for this one's"
            )
        starting = time.monotonic()
        target.start()
        target.reload()
    except StartRefused as e:
        return _refused(str(e), began)
    except docker.errors.NotFound:
        return _refused(f"no container {container!r}", began)
    except docker.errors.APIError as e:
        return _refused(f"the engine refused to start it: {_explain(e)}", began)
    except _ENGINE_GONE as e:
        return _engine_gone(e, began)
    watch, unreadable = _memory_watch(target)

    def observe() -> Observation:
        target.reload()
        state = target.attrs.get("State") or {}
        status = state.get("Status")
        return Observation(
            status,
            bool(state.get("OOMKilled")),
            state.get("ExitCode"),
            probe_ready(ready_url) if status == "running" else None,
        )

    try:
        outcome, probes, last = watch_startup(
            observe, deadline_s=deadline_s, poll_s=poll_s, wait=stop.wait if stop else None
        )
    except _ENGINE_GONE as e:
        return _engine_gone(e, began)
    finally:
        if watch is not None:
            watch.stop()
    settled = time.monotonic()
    exited = last.state in ("exited", "dead")
    evidence = oom_evidence(last.oom_killed, last.exit_code if exited else None, watch)
    outcome = with_oom(outcome, evidence)
    memory = watch.to_json() if watch is not None else cgroups.unreadable(str(unreadable))
    return {
        "outcome": outcome,
        "detail": _detail(outcome, probes, last, deadline_s, memory, evidence),
        "probes": probes,
        "elapsed_s": round(settled - began, 3),
        "time_to_ready_s": round(settled - starting, 3) if outcome == "ready" else None,
        "last_probe": last.probe,
        "exit_code": last.exit_code if exited else None,
        "oom_evidence": evidence,
        "memory": memory,
        "log_tail": _log_tail(target, spec) if outcome != "ready" else [],
    }


_LOG_LINES = 20
_LOG_LINE_CHARS = 300
_HIDDEN_MIN_CHARS = 4


def _log_tail(target: Any, spec: ContainerSpec | None) -> list[str]:
    """The last lines the container wrote (stdout and stderr), each cut to a bounded length:
    why a server did not become ready is usually in them. A value passed from ledger's
    environment (``environment_from``: a token, as a rule) is replaced by its name, for a
    server that prints its environment or arguments as it starts."""
    try:
        raw = target.logs(stdout=True, stderr=True, tail=_LOG_LINES)
    except _ENGINE_GONE:
        return []
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else str(raw)
    for name in spec.environment_from if spec is not None else ():
        value = os.environ.get(name, "")
        # A value this short says nothing secret and would blot out ordinary text.
        if len(value) >= _HIDDEN_MIN_CHARS:
            text = text.replace(value, f"<{name}>")
    return [line[:_LOG_LINE_CHARS] for line in text.splitlines()[-_LOG_LINES:]]


def _detail(
    outcome: str,
    probes: int,
    last: Observation,
    deadline_s: float,
    memory: dict[str, Any],
    evidence: list[str],
) -> str:
    if outcome == "oom-killed":
        peak, limit = memory["peak_mib"], memory["limit_mib"]
        where = f": peak {peak:g} MiB against a {limit:g} MiB limit" if peak and limit else ""
        return f"killed for want of memory before it was ready{where} ({', '.join(evidence)})"
    return {
        "ready": f"ready after {probes} probes",
        "exited": f"exited with code {last.exit_code} before it was ready",
        "not-ready": f"not ready within {deadline_s:g} s (last probe: {last.probe})",
    }[outcome]


def stop(client: docker.DockerClient, container: str, timeout_s: int = 30) -> str | None:
    """Stops the container (SIGTERM, then SIGKILL after ``timeout_s``); why not, or None."""
    try:
        client.containers.get(container).stop(timeout=timeout_s)
    except docker.errors.NotFound:
        return f"no container {container!r}"
    except docker.errors.APIError as e:
        return f"the engine refused to stop it: {_explain(e)}"
    except _ENGINE_GONE as e:
        return f"the engine stopped answering: {type(e).__name__}: {e}"
    return None


def remove_managed(client: docker.DockerClient, container: str) -> None:
    """Removes the container if ledger created it; one ledger did not create stays."""
    with contextlib.suppress(docker.errors.NotFound):
        found = client.containers.get(container)
        if MANAGED_LABEL in (found.labels or {}):
            found.remove(force=True)
