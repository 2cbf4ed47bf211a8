"""Container evidence through the Docker Engine API (docker SDK): snapshots, and the
readiness watch a start goes through (:mod:`runners.probes.startup` starts containers).

A snapshot records what identifies a serving container and what would show it was
disturbed: id, name, image id and repo digests, command, a digest of its configuration,
labels, state, restart count, OOM kill, start time and exit code. Environment variables
enter the configuration digest by name only, and a digest of their values apart from it;
no value is ever written into an artifact.

Podman's Docker-compatible API serves the same calls, which is how the tests run them.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import attrs
import docker
import docker.errors
import httpx
import orjson

__all__ = [
    "EngineUnavailable",
    "Observation",
    "classify",
    "config_digest",
    "connect",
    "env_digest",
    "probe_ready",
    "snapshot",
    "snapshot_attrs",
    "watch_startup",
]

_CONFIG_KEYS = ("Image", "Entrypoint", "Cmd", "WorkingDir", "User", "Labels", "StopSignal")
_HOST_CONFIG_KEYS = (
    "Binds",
    "Mounts",
    "PortBindings",
    "NetworkMode",
    "IpcMode",
    "ShmSize",
    "Privileged",
    "Runtime",
    "DeviceRequests",
    "Memory",
    "CpusetCpus",
    "RestartPolicy",
)


class EngineUnavailable(Exception):
    """The container engine cannot be reached."""


def connect(docker_host: str | None = None) -> docker.DockerClient:
    """A client for ``docker_host``, or for ``DOCKER_HOST`` and its defaults.

    Raises:
        EngineUnavailable: no engine answers there.
    """
    try:
        if docker_host is not None:
            client = docker.DockerClient(base_url=docker_host, timeout=30)
        else:
            client = docker.from_env(timeout=30)
        client.ping()
    except (docker.errors.DockerException, OSError) as e:
        where = docker_host or os.environ.get("DOCKER_HOST") or "the default socket"
        raise EngineUnavailable(f"no container engine answers at {where}: {_cause(e)}") from None
    return client


def _cause(error: BaseException) -> str:
    """The innermost reason the SDK gives (a missing socket, a refused connection), not
    its wrappers' wording."""
    while error.__context__ is not None and error.__context__ is not error:
        error = error.__context__
    return f"{type(error).__name__}: {error}"


def _env_names(config: dict[str, Any]) -> list[str]:
    return sorted({entry.split("=", 1)[0] for entry in config.get("Env") or ()})


_ENGINE_SET = frozenset({"HOSTNAME"})
"""Variables the engine sets from the container's own id: a new container has a new one."""


def env_digest(config: dict[str, Any]) -> str:
    """sha256 of the container's environment, names and values, in name order.

    The values enter the digest, never an artifact: a restart with another value of any
    variable shows as another digest. ``HOSTNAME``, which the engine derives from the
    container's id, is left out.
    """
    entries = sorted(
        entry for entry in config.get("Env") or () if entry.split("=", 1)[0] not in _ENGINE_SET
    )
    return hashlib.sha256("\0".join(entries).encode()).hexdigest()


def config_digest(attrs_: dict[str, Any]) -> str:
    """sha256 of the parts of a container's configuration a restart would re-apply.

    Environment variables count by name only: a changed value does not show here, a
    variable added or removed does.
    """
    config = attrs_.get("Config") or {}
    host = attrs_.get("HostConfig") or {}
    projection = {
        "config": {key: config.get(key) for key in _CONFIG_KEYS},
        "env_names": _env_names(config),
        "exposed_ports": sorted(config.get("ExposedPorts") or {}),
        "host_config": {key: host.get(key) for key in _HOST_CONFIG_KEYS},
    }
    return hashlib.sha256(orjson.dumps(projection, option=orjson.OPT_SORT_KEYS)).hexdigest()


def snapshot_attrs(attrs_: dict[str, Any], repo_digests: list[str]) -> dict[str, Any]:
    """A snapshot from ``docker inspect`` output (no engine call)."""
    config = attrs_.get("Config") or {}
    state = attrs_.get("State") or {}
    started = state.get("StartedAt") or None
    if started is not None and started.startswith("0001-01-01"):
        started = None  # never started: the engine's zero time
    return {
        "id": attrs_["Id"],
        "name": str(attrs_.get("Name", "")).lstrip("/"),
        "image_id": attrs_.get("Image"),
        "image": config.get("Image"),
        "repo_digests": sorted(repo_digests),
        "command": [*(config.get("Entrypoint") or ()), *(config.get("Cmd") or ())],
        "config_sha256": config_digest(attrs_),
        "env_names": _env_names(config),
        "env_sha256": env_digest(config),
        "labels": dict(sorted((config.get("Labels") or {}).items())),
        "state": state.get("Status"),
        "restart_count": int(attrs_.get("RestartCount") or 0),
        "oom_killed": bool(state.get("OOMKilled")),
        "started_at": started,
        "exit_code": state.get("ExitCode"),
    }


def snapshot(client: docker.DockerClient, container: str) -> dict[str, Any]:
    """The container's snapshot now.

    Raises:
        LookupError: no such container.
        EngineUnavailable: the engine stopped answering.
    """
    try:
        found = client.containers.get(container)
        digests: list[str] = []
        with contextlib.suppress(docker.errors.ImageNotFound):
            digests = list(client.images.get(found.attrs["Image"]).attrs.get("RepoDigests") or ())
        return snapshot_attrs(found.attrs, digests)
    except docker.errors.NotFound:
        raise LookupError(f"no container {container!r}") from None
    except (docker.errors.DockerException, OSError) as e:
        # requests' connection errors (an engine that went away) are OSErrors.
        raise EngineUnavailable(f"{type(e).__name__}: {e}") from None


@attrs.frozen
class Observation:
    """One look at a starting container: its state and the readiness probe's answer."""

    state: str | None
    oom_killed: bool
    exit_code: int | None
    probe: str | None
    """``ready``, or why not (HTTP status or connection error); None when not probed."""


def classify(observation: Observation) -> str | None:
    """``oom-killed``, ``exited`` or ``ready`` when the observation settles the attempt."""
    if observation.oom_killed:
        return "oom-killed"
    if observation.state in ("exited", "dead"):
        return "exited"
    if observation.probe == "ready":
        return "ready"
    return None


def watch_startup(
    observe: Callable[[], Observation],
    *,
    deadline_s: float,
    poll_s: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    wait: Callable[[float], bool] | None = None,
) -> tuple[str, int, Observation]:
    """Polls until the container is ready, dies or the deadline passes.

    A readiness seen after the deadline does not count: the deadline bounds the start, and
    the last wait is cut short to end on it. ``wait(seconds)`` waits between observations
    and says whether to stop (a signal ended the run: ``threading.Event.wait`` of that
    event), which ends the watch as ``not-ready`` at once rather than at the deadline.

    Returns the outcome (``ready``, ``exited``, ``oom-killed``, ``not-ready``), how many
    observations were made and the last one.
    """
    wait = wait or threading.Event().wait
    start = clock()
    count = 0
    while True:
        last = observe()
        count += 1
        outcome = classify(last)
        spent = clock() - start
        if outcome is not None and not (outcome == "ready" and spent > deadline_s):
            return outcome, count, last
        if spent >= deadline_s or wait(min(poll_s, deadline_s - spent)):
            return "not-ready", count, last


def probe_ready(url: str, timeout_s: float = 5.0) -> str:
    """``ready`` when ``url`` answers 200, else the status or error that it gave."""
    try:
        response = httpx.get(url, timeout=timeout_s)
    except httpx.HTTPError as e:
        return f"{type(e).__name__}: {e}"
    return "ready" if response.status_code == 200 else f"HTTP {response.status_code}"
