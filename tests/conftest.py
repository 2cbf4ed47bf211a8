from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger._cli import main
from runners.simulate.profile import Profile
from runners.simulate.serve import SimulatorProcess

ROOT = Path(__file__).resolve().parent.parent
ASSETS = Path(__file__).resolve().parent / "assets"
SHARED = ROOT.parent / "shared"
SEEDS = SHARED / "seeds"

sys.path.insert(0, str(ASSETS))


@pytest.fixture
def asset() -> Callable[[str], Path]:
    def find(name: str) -> Path:
        path = ASSETS / name
        assert path.exists(), f"missing test asset {name}"
        return path

    return find


def seed_paths() -> list[Path]:
    paths = sorted(SEEDS.glob("*.summary.json"))
    assert len(paths) == 3, f"expected the three seed summaries in {SEEDS}"
    return paths


CliRun = Callable[..., tuple[int, str, str]]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> CliRun:
    """Runs ``ledger`` in-process; returns (exit status, stdout, stderr)."""

    def run(*args: str) -> tuple[int, str, str]:
        try:
            status = main(list(args))
        except SystemExit as e:
            status = int(e.code or 0)
        captured = capsys.readouterr()
        return status, captured.out, captured.err

    return run


def verify_json(cli: CliRun, *paths: str | Path) -> tuple[int, dict[str, Any]]:
    status, out, _ = cli("verify", "--format", "json", *map(str, paths))
    return status, json.loads(out)


@pytest.fixture
def simulator() -> Iterator[Callable[..., SimulatorProcess]]:
    """Starts simulated endpoints (real uvicorn servers on 127.0.0.1) for one test."""
    started: list[SimulatorProcess] = []

    def start(**settings: Any) -> SimulatorProcess:
        process = SimulatorProcess(Profile.from_mapping(settings))
        process.start()
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()
