"""GPU state through NVML (nvidia-ml-py): snapshots, the reserve verdict and telemetry.

A snapshot never raises for want of a GPU: with no driver, no library or a failing
``nvmlInit`` it says ``available: false`` and carries NVML's own error. A query a card
does not support (power on some boards, for one) leaves that field null and names the
error under the card's ``unsupported``.

Memory is reported in whole MiB, rounded down: a free figure is never rounded up past a
threshold it did not reach. It comes from NVML's v2 memory query, as nvidia-smi's does: the
driver's own reserved memory (615 MiB on an idle H200) apart from ``used``. Drivers without
the v2 query answer the v1 one, which counts reserved memory as used; the reading says which
query answered and leaves ``reserved_mib`` null then.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

import pynvml

__all__ = [
    "MIB",
    "THROTTLE_REASONS",
    "TelemetrySampler",
    "decode_throttle",
    "snapshot",
    "telemetry_summary",
    "unavailable",
]

MIB = 1024 * 1024

THROTTLE_REASONS: tuple[tuple[int, str], ...] = (
    (0x1, "gpu-idle"),
    (0x2, "applications-clocks-setting"),
    (0x4, "software-power-cap"),
    (0x8, "hardware-slowdown"),
    (0x10, "sync-boost"),
    (0x20, "software-thermal-slowdown"),
    (0x40, "hardware-thermal-slowdown"),
    (0x80, "hardware-power-brake-slowdown"),
    (0x100, "display-clock-setting"),
)
"""NVML's clock event (throttle) reason bits, by name."""

_THERMAL = 0x20 | 0x40
_HARDWARE = 0x8 | 0x40 | 0x80


def decode_throttle(mask: int) -> dict[str, Any]:
    """The reason bits as names, and the three flags a reader asks about first."""
    return {
        "mask": mask,
        "reasons": [name for bit, name in THROTTLE_REASONS if mask & bit],
        "software_power_cap": bool(mask & 0x4),
        "hardware_slowdown": bool(mask & _HARDWARE),
        "thermal": bool(mask & _THERMAL),
    }


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _error(e: pynvml.NVMLError) -> str:
    return f"{type(e).__name__}: {e}"


def _card(index: int) -> dict[str, Any]:
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    unsupported: dict[str, str] = {}

    def query(name: str, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except pynvml.NVMLError as e:
            unsupported[name] = _error(e)
            return None

    memory = query("memory", lambda: _memory(handle))
    power_mw = query("power", lambda: pynvml.nvmlDeviceGetPowerUsage(handle))
    limit_mw = query("power_limit", lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(handle))
    mask = query("throttle", lambda: _throttle_mask(handle))
    return {
        "index": index,
        "name": query("name", lambda: _text(pynvml.nvmlDeviceGetName(handle))),
        "uuid": query("uuid", lambda: _text(pynvml.nvmlDeviceGetUUID(handle))),
        "memory": memory,
        "temperature_c": query(
            "temperature",
            lambda: pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU),
        ),
        "power_w": None if power_mw is None else power_mw / 1000,
        "power_limit_w": None if limit_mw is None else limit_mw / 1000,
        "sm_clock_mhz": query(
            "sm_clock", lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)
        ),
        "throttle": None if mask is None else decode_throttle(mask),
        "unsupported": unsupported,
    }


_NO_V2_QUERY = (
    pynvml.NVMLError_FunctionNotFound,
    pynvml.NVMLError_ArgumentVersionMismatch,
    pynvml.NVMLError_NotSupported,
)


def _memory(handle: Any) -> dict[str, Any]:
    try:
        info = pynvml.nvmlDeviceGetMemoryInfo(handle, version=pynvml.nvmlMemory_v2)
    except _NO_V2_QUERY:
        info = pynvml.nvmlDeviceGetMemoryInfo(handle)
        reserved, query = None, "v1"
    else:
        reserved, query = info.reserved // MIB, "v2"
    return {
        "total_mib": info.total // MIB,
        "used_mib": info.used // MIB,
        "free_mib": info.free // MIB,
        "reserved_mib": reserved,
        "query": query,
    }


def _throttle_mask(handle: Any) -> int:
    try:
        return int(pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle))
    except pynvml.NVMLError_FunctionNotFound:
        # Drivers before 535 know only the older name of the same call.
        return int(pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle))


@contextmanager
def _nvml() -> Iterator[None]:
    pynvml.nvmlInit()
    try:
        yield
    finally:
        with suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


def unavailable(error: str) -> dict[str, Any]:
    """The ``nvml`` member of an artifact taken where NVML could not start."""
    return {"available": False, "error": error, "driver_version": None}


def snapshot(cards: Sequence[int] | None = None) -> dict[str, Any]:
    """One reading of every card (or of ``cards``, by NVML index).

    Returns ``{"nvml": {...}, "cards": [...]}``; never raises for a missing GPU.
    """
    try:
        with _nvml():
            driver = _text(pynvml.nvmlSystemGetDriverVersion())
            count = pynvml.nvmlDeviceGetCount()
            wanted = range(count) if cards is None else cards
            missing = sorted(set(wanted) - set(range(count)))
            if missing:
                return {
                    "nvml": unavailable(f"no card {missing[0]}: NVML sees {count}"),
                    "cards": [],
                }
            found = [_card(i) for i in wanted]
    except pynvml.NVMLError as e:
        return {"nvml": unavailable(_error(e)), "cards": []}
    return {"nvml": {"available": True, "error": None, "driver_version": driver}, "cards": found}


class TelemetrySampler:
    """Snapshots at an interval on a background thread, between :meth:`start` and :meth:`stop`.

    NVML calls block for microseconds to milliseconds; a thread keeps them off the event
    loop that times the requests.
    """

    def __init__(self, interval_s: float, cards: Sequence[int] | None = None) -> None:
        self.interval_s = interval_s
        self.cards = cards
        self.samples: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._origin = 0.0

    def _take(self) -> None:
        reading = snapshot(self.cards)
        self.samples.append(
            {"t_s": round(time.monotonic() - self._origin, 3), **reading},
        )

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._take()

    def start(self) -> None:
        self._origin = time.monotonic()
        self._take()
        self._thread = threading.Thread(target=self._loop, name="gpu-telemetry", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._take()


_SUMMARY_FIELDS: tuple[tuple[str, Callable[[dict[str, Any]], Any]], ...] = (
    ("free_mib", lambda c: (c["memory"] or {}).get("free_mib")),
    ("used_mib", lambda c: (c["memory"] or {}).get("used_mib")),
    ("temperature_c", lambda c: c["temperature_c"]),
    ("power_w", lambda c: c["power_w"]),
    ("sm_clock_mhz", lambda c: c["sm_clock_mhz"]),
)


def telemetry_summary(samples: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per card: min and max of each field over the samples, and every throttle reason seen."""
    cards: dict[int, dict[str, Any]] = {}
    for sample in samples:
        for card in sample["cards"]:
            entry = cards.setdefault(
                card["index"],
                {
                    "index": card["index"],
                    "name": card["name"],
                    "uuid": card["uuid"],
                    "samples": 0,
                    **{name: {"min": None, "max": None} for name, _ in _SUMMARY_FIELDS},
                    "throttle_seen": {},
                },
            )
            entry["samples"] += 1
            for name, get in _SUMMARY_FIELDS:
                value = get(card)
                if value is None:
                    continue
                bounds = entry[name]
                bounds["min"] = value if bounds["min"] is None else min(bounds["min"], value)
                bounds["max"] = value if bounds["max"] is None else max(bounds["max"], value)
            for reason in (card["throttle"] or {}).get("reasons", ()):
                entry["throttle_seen"][reason] = entry["throttle_seen"].get(reason, 0) + 1
    return [cards[i] for i in sorted(cards)]
