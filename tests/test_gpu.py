"""GPU evidence through the real pynvml bindings, against the NVML shim (gcc-compiled)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger.measures.verdicts import reserve_failures
from runners.probes import gpu
from tests.components import SHIM_ENV, NvmlShim
from tests.conftest import DATA, CliRun, verify_json

pytestmark = pytest.mark.gpu

TWO_CARDS = """driver 550.54.15
card name=NVIDIA H200 uuid=GPU-0b5c3f1e-9a2d-4e6f-8a1b-2c3d4e5f6a7b total_mib=143771 used_mib=140699 temp_c=63 power_mw=612345 limit_mw=700000 sm_mhz=1755 reasons=0x4c
card name=NVIDIA H200 uuid=GPU-1c6d4a2f-0b3e-4f70-9b2c-3d4e5f6a7b8c total_mib=143771 used_mib=140700 temp_c=58 power_mw=598000 limit_mw=700000 sm_mhz=1980 reasons=0x0 unsupported=power
"""


@pytest.fixture
def two_cards(nvml_shim: NvmlShim, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    config = nvml_shim.configure(tmp_path / "nvml.conf", TWO_CARDS)
    monkeypatch.setenv(SHIM_ENV, str(config))
    return config


def test_snapshot_reads_every_field_of_every_card(two_cards: Path) -> None:
    reading = gpu.snapshot()
    assert reading["nvml"] == {"available": True, "error": None, "driver_version": "550.54.15"}
    first, second = reading["cards"]
    assert first == {
        "index": 0,
        "name": "NVIDIA H200",
        "uuid": "GPU-0b5c3f1e-9a2d-4e6f-8a1b-2c3d4e5f6a7b",
        "memory": {
            "total_mib": 143771,
            "used_mib": 140699,
            "free_mib": 3072,
            "reserved_mib": 0,
            "query": "v2",
        },
        "temperature_c": 63,
        "power_w": 612.345,
        "power_limit_w": 700.0,
        "sm_clock_mhz": 1755,
        "throttle": {
            "mask": 0x4C,
            "reasons": ["software-power-cap", "hardware-slowdown", "hardware-thermal-slowdown"],
            "software_power_cap": True,
            "hardware_slowdown": True,
            "thermal": True,
        },
        "unsupported": {},
    }
    # A query the card refuses leaves the field empty and names NVML's error.
    assert second["power_w"] is None and second["power_limit_w"] is None
    assert second["unsupported"] == {
        "power": "NVMLError_NotSupported: Not Supported",
        "power_limit": "NVMLError_NotSupported: Not Supported",
    }
    assert second["throttle"]["reasons"] == [] and second["memory"]["free_mib"] == 3071


PROBE = DATA / "realworld" / "nvml-h200" / "probe.json"


def _smi_memory(state: str) -> dict[str, int]:
    """nvidia-smi's memory figures at one moment of the real H200 reading."""
    probe = json.loads(PROBE.read_text())[state]
    names = probe["smi"]["q"].split(",")
    values = dict(zip(names, (v.strip() for v in probe["smi"]["out"].split(",")), strict=True))
    total, used, free = (int(values[f"memory.{k}"]) for k in ("total", "used", "free"))
    # nvidia-smi's query did not name memory.reserved: the driver's reserve is the rest.
    return {"total_mib": total, "used_mib": used, "free_mib": free, "reserved": total - used - free}


@pytest.mark.parametrize("no_v2", [1, 2, 3], ids=["no-symbol", "version-mismatch", "unsupported"])
@pytest.mark.parametrize("state", ["idle", "loaded"])
def test_memory_reads_as_nvidia_smi_reads_it_on_the_h200(
    state: str, no_v2: int, nvml_shim: NvmlShim, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    smi = _smi_memory(state)
    card = (
        f"card name=NVIDIA H200 uuid=GPU-399e4bc3-0474-9d80-cb77-5a865f106605 "
        f"total_mib={smi['total_mib']} used_mib={smi['used_mib']} reserved_mib={smi['reserved']}"
    )
    monkeypatch.setenv(
        SHIM_ENV, str(nvml_shim.configure(tmp_path / "h200.conf", f"driver 580.159.04\n{card}\n"))
    )
    memory = gpu.snapshot()["cards"][0]["memory"]
    assert memory == {
        "total_mib": smi["total_mib"],
        "used_mib": smi["used_mib"],
        "free_mib": smi["free_mib"],
        "reserved_mib": smi["reserved"],
        "query": "v2",
    }
    assert smi["reserved"] in (614, 615)  # what the driver keeps on an H200, in whole MiB

    # A driver without the v2 query: v1 counts the reserve as used, as the first reading
    # did (615 MiB "used" on an idle card); free memory, and so the reserve verdict, agree.
    monkeypatch.setenv(
        SHIM_ENV,
        str(nvml_shim.configure(tmp_path / "old.conf", f"driver 470.1\n{card} no_v2={no_v2}\n")),
    )
    old = gpu.snapshot()["cards"][0]["memory"]
    assert old == {
        "total_mib": smi["total_mib"],
        "used_mib": smi["used_mib"] + smi["reserved"],
        "free_mib": smi["free_mib"],
        "reserved_mib": None,
        "query": "v1",
    }


def test_the_first_h200_reading_shows_what_v1_got_wrong() -> None:
    """The asset itself: our v1 artifact against nvidia-smi at the same moments."""
    probe = json.loads(PROBE.read_text())
    ours = probe["idle"]["ours"]["cards"][0]["memory"]
    smi = _smi_memory("idle")
    assert (ours["used_mib"], smi["used_mib"]) == (615, 0)
    loaded = probe["loaded"]["ours"]["cards"][0]["memory"]
    # Free agrees to 1 MiB (we round down, a reserve is never rounded up past its threshold).
    assert 0 <= _smi_memory("loaded")["free_mib"] - loaded["free_mib"] <= 1


def test_reserve_threshold_is_inclusive_and_names_each_card_below(two_cards: Path) -> None:
    reading = gpu.snapshot()
    assert reserve_failures(reading, 3071) == []
    assert reserve_failures(reading, 3072) == ["card 1: 3071 MiB free, below the 3072 MiB reserve"]
    # Only the arm's cards count.
    assert reserve_failures(gpu.snapshot([0]), 3072) == []


def test_free_memory_is_rounded_down_so_a_card_just_short_of_the_reserve_fails(
    nvml_shim: NvmlShim, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real card counts bytes: 3,071.7 MiB free is below a 3,072 MiB reserve, and must
    read as 3,071 (rounded to the nearest MiB, it would pass)."""
    card = (
        "card name=NVIDIA H200 uuid=GPU-399e4bc3-0474-9d80-cb77-5a865f106605 "
        "total_mib=143771 reserved_mib=615 used_mib=140084.3"
    )
    config = nvml_shim.configure(tmp_path / "short.conf", f"driver 580.159.04\n{card}\n")
    monkeypatch.setenv(SHIM_ENV, str(config))
    reading = gpu.snapshot()
    assert reading["cards"][0]["memory"]["free_mib"] == 3071
    assert reserve_failures(reading, 3072) == ["card 0: 3071 MiB free, below the 3072 MiB reserve"]
    assert reserve_failures(reading, 3071) == []


def test_a_card_outside_the_machine_is_an_unavailable_reading(two_cards: Path) -> None:
    reading = gpu.snapshot([0, 5])
    assert reading["nvml"]["available"] is False
    assert reading["nvml"]["error"] == "no card 5: NVML sees 2"
    assert reserve_failures(reading, 0) == ["no GPU reading: no card 5: NVML sees 2"]


def test_a_driver_that_does_not_load_is_recorded_not_raised(
    nvml_shim: NvmlShim, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = nvml_shim.configure(tmp_path / "nvml.conf", "init_error 9\n")
    monkeypatch.setenv(SHIM_ENV, str(config))
    reading = gpu.snapshot()
    assert reading == {
        "nvml": {
            "available": False,
            "error": "NVMLError_DriverNotLoaded: Driver Not Loaded",
            "driver_version": None,
        },
        "cards": [],
    }


def test_without_the_library_the_reading_says_unavailable(tmp_path: Path) -> None:
    # A fresh process (this one has the shim loaded) in which loading libnvidia-ml.so.1
    # fails as on a machine without a driver, whether or not this machine has one.
    script = (
        "import ctypes, json\n"
        "real = ctypes.CDLL\n"
        "def absent(name, *args, **kwargs):\n"
        "    if 'nvidia-ml' in str(name):\n"
        "        raise OSError(f'{name}: cannot open shared object file')\n"
        "    return real(name, *args, **kwargs)\n"
        "ctypes.CDLL = absent\n"
        "from runners.probes import gpu\n"
        "print(json.dumps(gpu.snapshot()))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
    )
    reading = json.loads(done.stdout)
    assert reading["nvml"]["available"] is False
    assert reading["nvml"]["error"].startswith("NVMLError_LibraryNotFound")


def test_telemetry_summarises_min_max_and_throttle_counts(
    nvml_shim: NvmlShim, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = nvml_shim.configure(
        tmp_path / "nvml.conf",
        "driver 1.0\ncard name=X uuid=GPU-x total_mib=1000 used_mib=100,700,400 temp_c=50 "
        "power_mw=1500 limit_mw=2000 sm_mhz=900 reasons=0x20\n",
    )
    monkeypatch.setenv(SHIM_ENV, str(config))
    sampler = gpu.TelemetrySampler(0.01)
    sampler.start()
    deadline = time.monotonic() + 10
    while len(sampler.samples) < 3 and time.monotonic() < deadline:
        time.sleep(0.005)
    sampler.stop()
    samples = sampler.samples
    assert len(samples) >= 4  # the first, at least two on the interval, the last
    assert [s["t_s"] for s in samples] == sorted(s["t_s"] for s in samples)
    used = [s["cards"][0]["memory"]["used_mib"] for s in samples]
    (summary,) = gpu.telemetry_summary(samples)
    assert summary["samples"] == len(samples)
    assert summary["used_mib"] == {"min": min(used), "max": max(used)}
    assert summary["free_mib"] == {"min": 1000 - max(used), "max": 1000 - min(used)}
    assert summary["power_w"] == {"min": 1.5, "max": 1.5}
    assert summary["throttle_seen"] == {"software-thermal-slowdown": len(samples)}
    # The shim cycles 100, 700, 400 per query: four samples see both ends.
    assert summary["used_mib"] == {"min": 100, "max": 700}


def test_throttle_decoding_covers_every_nvml_reason() -> None:
    everything = gpu.decode_throttle(0x1FF)
    assert len(everything["reasons"]) == 9
    assert gpu.decode_throttle(0x4) == {
        "mask": 4,
        "reasons": ["software-power-cap"],
        "software_power_cap": True,
        "hardware_slowdown": False,
        "thermal": False,
    }
    assert gpu.decode_throttle(0x80)["hardware_slowdown"] is True
    assert gpu.decode_throttle(0x20)["thermal"] is True


def test_the_h200_raw_campaign_verifies_and_publishes_without_its_gpu_id(
    tmp_path: Path, cli: CliRun
) -> None:
    """A whole raw campaign a real driver measured (reserve and telemetry on one H200,
    tests/data/realworld/nvml-h200/): it verifies, its reserve passed on real figures, and
    its publication carries no GPU UUID."""
    import tarfile

    with tarfile.open(PROBE.parent / "raw-campaign-2026-11-30-h200-reserve.tar.gz") as tar:
        tar.extractall(tmp_path / "raw", filter="data")
    campaign = tmp_path / "raw" / "2026-11-30-h200-reserve"
    reserve = json.loads((campaign / "candidate" / "reserve.json").read_text())
    assert reserve["passed"] is True
    card = reserve["cards"][0]
    assert card["name"] == "NVIDIA H200" and card["memory"]["free_mib"] == 3399
    assert reserve["threshold_mib"] == 3072
    uuid = card["uuid"]
    assert uuid.startswith("GPU-")
    assert verify_json(cli, campaign)[0] == 0
    status, _, err = cli("publish", str(campaign), "--out", str(tmp_path / "public"))
    assert status == 0, err
    public = tmp_path / "public"
    texts = [p.read_bytes() for p in public.rglob("*") if p.is_file()]
    assert texts and all(uuid.encode() not in t for t in texts)
    # Published, it verifies but for the follow-up ticket a published decision owes.
    _, report = verify_json(cli, public)
    assert {f["code"] for f in report["findings"]} == {"ticket-missing"}
