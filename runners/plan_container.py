"""An arm's serving container in the plan (``[arms.container]``): which container the
evidence stages watch, and, when the plan gives an ``image``, how ledger creates it.

A container with an image is *managed*: the startup stage creates it from the plan
(image, command, environment, ports, volumes, host-memory limit), starts it and waits for
it to be ready; a restoration stage with ``restart = true`` creates it again the same way.
Without an image the container must already exist; ledger starts and snapshots it only.
"""

from __future__ import annotations

import ipaddress
from typing import Any

import attrs

from runners.client import url_problem
from runners.plan_reader import ENV_NAME, TableReader

__all__ = ["Container", "ContainerSpec", "parse_container"]

_MODES = ("ro", "rw")
_ENGINE_SCHEMES = ("unix://", "tcp://", "ssh://", "npipe://", "http://", "https://")
"""What the docker SDK connects through (http and https are tcp by another name)."""


@attrs.frozen
class ContainerSpec:
    """How ledger creates a managed container, as ``docker run`` would be told."""

    image: str
    command: tuple[str, ...] | None
    """None: the image's own entrypoint and command."""
    environment: dict[str, str]
    """Variables set to the plan's values (recorded in ``run-plan.json``: no secrets here)."""
    environment_from: tuple[str, ...]
    """Variables passed from ledger's own environment: names recorded, values never."""
    ports: dict[str, str]
    """Container port (``8000/tcp``) to the host's ``IP:PORT`` or ``PORT`` (every address)."""
    volumes: tuple[str, ...]
    """``SOURCE:TARGET[:ro|rw]``: a host path or a named volume, mounted in the container."""
    memory_limit_mib: int | None
    """The host-memory limit of the container's cgroup; None: no limit."""

    def to_json(self) -> dict[str, Any]:
        return {
            "image": self.image,
            "command": list(self.command) if self.command is not None else None,
            "environment": dict(self.environment),
            "environment_from": list(self.environment_from),
            "ports": dict(self.ports),
            "volumes": list(self.volumes),
            "memory_limit_mib": self.memory_limit_mib,
        }


@attrs.frozen
class Container:
    """The serving container of an arm, reached through the Docker Engine API."""

    name: str
    docker_host: str | None
    """None: ``DOCKER_HOST`` and the SDK's defaults."""
    ready_url: str | None
    """None: the arm's ``base_url`` + ``/models``."""
    spec: ContainerSpec | None = None
    """None: the container exists already and ledger does not create it."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "docker_host": self.docker_host,
            "ready_url": self.ready_url,
        }
        if self.spec is not None:
            out["spec"] = self.spec.to_json()
        return out


def parse_container(source: str, index: int, table: Any) -> Container | None:
    """The ``[arms.container]`` table of arm ``index``, checked; None when it has none."""
    if table is None:
        return None
    reader = TableReader(source, f"arms[{index}].container", table)
    name = reader.get("name", (str,), what="a container name or id")
    if not name:
        raise reader.error("name", "must not be empty")
    host = reader.get("docker_host", (str,), None, "unix:///path or tcp://host:port")
    if host is not None and not host.startswith(_ENGINE_SCHEMES):
        raise reader.error(
            "docker_host", f"expected unix://, tcp://, ssh:// or npipe://, got {host!r}"
        )
    ready_url = reader.get("ready_url", (str,), None, "a URL")
    if ready_url is not None and (problem := url_problem(ready_url)) is not None:
        raise reader.error("ready_url", f"{problem}, got {ready_url!r}")
    spec = _spec(reader) if "image" in reader.table else None
    if spec is None:
        for key in _SPEC_KEYS:
            if key in reader.table:
                raise reader.error(key, "needs an image: only a container ledger creates has one")
    reader.finish()
    return Container(name, host, ready_url, spec)


_SPEC_KEYS = (
    "command",
    "environment",
    "environment_from",
    "ports",
    "volumes",
    "memory_limit_mib",
)


def _spec(reader: TableReader) -> ContainerSpec:
    image = reader.get("image", (str,), what="an image reference")
    if not image.strip():
        raise reader.error("image", "must not be empty")
    command = reader.get("command", (list,), None, "a list of strings")
    if command is not None and (not command or not all(isinstance(c, str) for c in command)):
        raise reader.error("command", f"expected a non-empty list of strings, got {command!r}")
    environment = reader.get("environment", (dict,), {}, "a table of strings")
    for key, value in environment.items():
        if not ENV_NAME.fullmatch(key):
            raise reader.error(f"environment.{key}", "not a variable name")
        if not isinstance(value, str):
            raise reader.error(f"environment.{key}", f"expected a string, got {value!r}")
    passed = reader.get("environment_from", (list,), [], "a list of variable names")
    for key in passed:
        if not isinstance(key, str) or not ENV_NAME.fullmatch(key):
            raise reader.error("environment_from", f"not a variable name: {key!r}")
        if key in environment:
            raise reader.error("environment_from", f"{key} is also set in environment")
    limit = reader.get("memory_limit_mib", (int,), None, "MiB")
    if limit is not None and limit < 6:
        # Docker Engine refuses a limit under 6 MiB; say so before anything starts.
        raise reader.error("memory_limit_mib", f"must be at least 6, got {limit}")
    return ContainerSpec(
        image=image,
        command=tuple(command) if command is not None else None,
        environment=dict(sorted(environment.items())),
        environment_from=tuple(dict.fromkeys(passed)),
        ports=_ports(reader),
        volumes=_volumes(reader),
        memory_limit_mib=limit,
    )


def _port_number(text: str) -> bool:
    return text.isdigit() and 1 <= int(text) <= 65535


def _ports(reader: TableReader) -> dict[str, str]:
    table = reader.get("ports", (dict,), {}, "a table of container port = host port")
    ports: dict[str, str] = {}
    for key, value in table.items():
        number, _, protocol = key.partition("/")
        if not _port_number(number) or protocol not in ("", "tcp", "udp"):
            raise reader.error(f"ports.{key}", 'expected a container port such as "8000"')
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str):
            raise reader.error(f"ports.{key}", f'expected a host port or "IP:PORT", got {value!r}')
        address, _, port = value.rpartition(":")
        if not _port_number(port) or (":" in value and not _ip(address)):
            raise reader.error(f"ports.{key}", f'expected a host port or "IP:PORT", got {value!r}')
        ports[f"{number}/{protocol or 'tcp'}"] = value
    return dict(sorted(ports.items()))


def _ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return False
    return True


def _volumes(reader: TableReader) -> tuple[str, ...]:
    volumes = reader.get("volumes", (list,), [], 'a list of "SOURCE:TARGET[:ro|rw]"')
    targets: set[str] = set()
    for volume in volumes:
        parts = volume.split(":") if isinstance(volume, str) else []
        if (
            len(parts) not in (2, 3)
            or not parts[0]
            or not parts[1].startswith("/")
            or (len(parts) == 3 and parts[2] not in _MODES)
        ):
            raise reader.error("volumes", f'expected "SOURCE:TARGET[:ro|rw]", got {volume!r}')
        if parts[1] in targets:
            raise reader.error("volumes", f"{parts[1]} is mounted twice")
        targets.add(parts[1])
    return tuple(volumes)
