"""A container's memory as its own cgroup counts it, read from the host's ``/sys/fs/cgroup``.

Engines disagree on whether a container was killed for want of memory: Docker Engine sets
``State.OOMKilled``, podman on a cgroup v1 host leaves it false while the kernel kills the
process. The cgroup's own counters settle it: on cgroup v1 ``memory.oom_control`` counts
``oom_kill`` and ``memory.failcnt`` how often usage hit the limit; on cgroup v2
``memory.events`` counts ``oom_kill`` and ``max``. The folder is removed when the container
exits (by the runtime, or systemd for a systemd-managed cgroup), so the counters are read
while it runs, by a :class:`MemoryWatch` polling every 20 ms: the last reading before the
folder goes is usually one taken after the kill (on the test machines it stays 100 to 200
ms after it), and when it is not, the exit status and the limit's counter still tell.

The cgroup is found from the container's main process (``/proc/<pid>/cgroup``), so only an
engine on this host, in this PID namespace, can be read; its path must name the
container's id, which guards against a PID reused by another process.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import attrs

__all__ = ["CgroupUnreadable", "MemoryReading", "MemoryWatch", "locate", "read_memory"]

_MIB = 1 << 20
_UNLIMITED = 1 << 60
"""Above this a v1 ``memory.limit_in_bytes`` means no limit (the kernel's is 2^63 - 4096)."""


class CgroupUnreadable(Exception):
    """The container's cgroup cannot be read from this host."""


@attrs.frozen
class MemoryReading:
    """One reading of a memory cgroup's counters, in bytes and counts."""

    usage: int
    peak: int | None
    """The kernel's high-water mark (v1 ``max_usage_in_bytes``, v2 ``memory.peak``)."""
    limit: int | None
    """None: no limit."""
    failcnt: int | None
    """v1: times usage hit the limit; v2 has no such counter (``limit_hits`` reads ``max``)."""
    limit_hits: int
    """v1 ``failcnt``, v2 ``memory.events`` ``max``: how often usage reached the limit."""
    oom_kills: int | None
    """Processes the OOM killer took in this cgroup; None where the kernel does not count."""


def locate(pid: int, container_id: str, root: Path = Path("/sys/fs/cgroup")) -> tuple[str, Path]:
    """The cgroup version (``v1`` or ``v2``) and folder of process ``pid``'s memory.

    Raises:
        CgroupUnreadable: the process is not visible here, or its cgroup does not name
            ``container_id``.
    """
    if pid <= 0:
        raise CgroupUnreadable("the container has no running process")
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError as e:
        raise CgroupUnreadable(f"process {pid} is not visible on this host: {e.strerror}") from None
    v1 = v2 = None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            v1 = path
        elif controllers == "":
            v2 = path
    # A hybrid host mounts the memory controller as v1 and an empty unified hierarchy.
    if v1 is not None and (root / "memory").is_dir():
        version, folder = "v1", root / "memory" / v1.lstrip("/")
    elif v2 is not None and (root / "cgroup.controllers").is_file():
        version, folder = "v2", root / v2.lstrip("/")
    else:
        raise CgroupUnreadable(f"no memory cgroup for process {pid} under {root}")
    if container_id not in str(folder):
        raise CgroupUnreadable(f"process {pid}'s cgroup {folder} does not name the container")
    return version, folder


def _int(folder: Path, name: str) -> int | None:
    try:
        text = (folder / name).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _keyed(folder: Path, name: str) -> dict[str, int]:
    try:
        text = (folder / name).read_text()
    except OSError:
        return {}
    pairs = (line.split() for line in text.splitlines())
    return {p[0]: int(p[1]) for p in pairs if len(p) == 2 and p[1].isdigit()}


def read_memory(version: str, folder: Path) -> MemoryReading | None:
    """The counters now; None once the folder is gone (the container exited)."""
    if version == "v1":
        usage = _int(folder, "memory.usage_in_bytes")
        if usage is None:
            return None
        limit = _int(folder, "memory.limit_in_bytes")
        failcnt = _int(folder, "memory.failcnt")
        return MemoryReading(
            usage=usage,
            peak=_int(folder, "memory.max_usage_in_bytes"),
            limit=limit if limit is not None and limit < _UNLIMITED else None,
            failcnt=failcnt,
            limit_hits=failcnt or 0,
            oom_kills=_keyed(folder, "memory.oom_control").get("oom_kill"),
        )
    usage = _int(folder, "memory.current")
    if usage is None:
        return None
    events = _keyed(folder, "memory.events")
    return MemoryReading(
        usage=usage,
        peak=_int(folder, "memory.peak"),
        limit=_int(folder, "memory.max"),
        failcnt=None,
        limit_hits=events.get("max", 0),
        oom_kills=events.get("oom_kill"),
    )


def _mib(value: int | None) -> float | None:
    return None if value is None else round(value / _MIB, 1)


class MemoryWatch:
    """Reads a container's memory cgroup every ``interval_s`` on a thread, keeping the
    highest usage and counters seen, until stopped or the folder goes away."""

    def __init__(self, version: str, folder: Path, interval_s: float = 0.02) -> None:
        self.version = version
        self.folder = folder
        self.interval_s = interval_s
        self.readings = 0
        self.last: MemoryReading | None = None
        self._peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cgroup-memory", daemon=True)

    def start(self) -> MemoryWatch:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            reading = read_memory(self.version, self.folder)
            if reading is None:
                if not self.folder.is_dir():
                    return
                # Present but not readable as counters this once: the next reading may be.
                self._stop.wait(self.interval_s)
                continue
            self.readings += 1
            self.last = reading
            self._peak = max(self._peak, reading.usage, reading.peak or 0)
            self._stop.wait(self.interval_s)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def oom_killed(self) -> bool:
        """Whether the cgroup's own counter saw the OOM killer act."""
        return self.last is not None and (self.last.oom_kills or 0) > 0

    @property
    def at_limit(self) -> bool:
        """Whether usage ever reached the limit (v1 ``failcnt``, v2 ``max`` events)."""
        return self.last is not None and self.last.limit_hits > 0

    def to_json(self) -> dict[str, Any]:
        """What the watch saw, in MiB and counts, for an artifact."""
        last = self.last
        return {
            "cgroup": self.version,
            "readable": True,
            "error": None,
            "readings": self.readings,
            "limit_mib": _mib(last.limit) if last else None,
            "peak_mib": _mib(self._peak) if last else None,
            "limit_hits": last.limit_hits if last else None,
            "oom_kills": last.oom_kills if last else None,
        }


def unreadable(reason: str) -> dict[str, Any]:
    """The memory section of an artifact when no cgroup could be read."""
    return {
        "cgroup": None,
        "readable": False,
        "error": reason,
        "readings": 0,
        "limit_mib": None,
        "peak_mib": None,
        "limit_hits": None,
        "oom_kills": None,
    }
