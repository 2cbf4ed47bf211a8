from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger.cli._main import main
from runners.simulate.profile import Profile
from runners.simulate.serve import SimulatorProcess
from tests.components import nvml_shim, podman  # noqa: F401 - fixtures
from tests.container_host import container_host  # noqa: F401 - fixtures
from tests.llama_server import llama_build, llama_server  # noqa: F401 - fixtures

ROOT = Path(__file__).resolve().parent.parent
ASSETS = Path(__file__).resolve().parent / "assets"
DATA = Path(__file__).resolve().parent / "data"
SEEDS = DATA / "seeds"

sys.path.insert(0, str(ASSETS))


CONTAINERS_GROUP = pytest.mark.xdist_group("containers")
"""Every test that starts podman runs on one xdist worker. Two podman instances on one
host share netavark's bridge and firewall chains but allocate addresses each on their own:
both hand out 10.88.x.y, one's teardown removes the other's rules, and a port-forwarding
rule left behind sends a later server's port on 127.0.0.1 to a container that is gone
(a test server then answers "connection refused")."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # First, so that xdist's worker, which turns the marks into groups, sees this one.
    for item in items:
        if "podman" in getattr(item, "fixturenames", ()) and not item.get_closest_marker(
            "xdist_group"
        ):
            item.add_marker(CONTAINERS_GROUP)


_UNGROUPED = pytest.StashKey[bool]()


class _GroupsHold:
    """A worker of ``--dist loadgroup`` names a grouped test "<id>@<group>", which is how
    its group reaches the scheduler. Where it does not (pytest-xdist issue 1386), the groups
    are silently ignored: each grouped test then fails, saying why, rather than run beside
    the others of its group."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        if not config.getoption("loadgroup", default=False):
            return
        for item in items:
            if item.get_closest_marker("xdist_group") and "@" not in item.nodeid.rpartition("]")[2]:
                item.stash[_UNGROUPED] = True

    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if item.stash.get(_UNGROUPED, False):
            pytest.fail(
                "--dist loadgroup did not group this test: this pytest-xdist does not work "
                "with this pytest (pyproject.toml pins pytest below the version that broke it)",
                pytrace=False,
            )


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_GroupsHold(), "anvil-groups-hold")


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


def parser_commands() -> list[str]:
    """Every command the parser knows, nested ones as "ticket new": from the parser itself,
    so a test over "every command" cannot fall behind a new one."""
    from ledger.cli._main import _parser

    names = []
    for action in _parser()._subparsers._group_actions:  # type: ignore[union-attr]
        for name, sub in action.choices.items():
            nested = [a for a in sub._actions if a.__class__.__name__ == "_SubParsersAction"]
            if nested:
                names.extend(f"{name} {child}" for child in nested[0].choices)
            else:
                names.append(name)
    return sorted(names)


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


def forge_seal(folder: Path) -> None:
    """Seals an edited campaign as someone editing evidence by hand can: a new seal written
    over the old one without checking it, so no review is recorded. Verify's deeper checks
    (references, recomputation, policy) must still catch the edit."""
    from ledger.evidence import manifest

    manifest.seal(folder, check=False, jobs=1)


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


TWO_ARMS_PLAN = """
campaign_id = "2026-11-29-two-arms"
seed = 11
[[arms]]
name = "windows"
[arms.simulated]
decode_tok_s = 300.0
prefill_tok_s = 200000.0
[arms.identity]
os = "windows"
[[arms]]
name = "linux"
[arms.simulated]
decode_tok_s = 400.0
prefill_tok_s = 250000.0
[arms.identity]
os = "linux"
[[stages]]
kind = "capacity"
context_targets = [256, 1024]
requests = 12
max_tokens = 16
controlled_output = true
warmup = 1
[[stages]]
kind = "endurance"
context_target = 256
requests = 4
max_tokens = 16
controlled_output = true
"""


def run_plan_text(plan_text: str, raw: Path, *, resume: bool = False) -> tuple[Any, Path]:
    """Runs a plan given as TOML text, quietly: (the run's result, its campaign folder)."""
    import os
    import tomllib

    from runners.campaign import run_plan
    from runners.campaign.progress import LogProgress
    from runners.plan import parse_plan

    plan = parse_plan(tomllib.loads(plan_text))
    with open(os.devnull, "w") as quiet:
        result = run_plan(plan, raw, progress=LogProgress(quiet), resume=resume)
    return result, raw / plan.campaign_id


FIXTURE_CACHE = "ANVIL_TEST_FIXTURE_CACHE"
"""Set by benchmarks/mutation_score.py: campaigns that fixtures build are built once, by the
unmutated code, and copied into each of the thousand pytest sessions that follow."""


def built_once(
    name: str, tmp_path_factory: pytest.TempPathFactory, build: Callable[[Path], Path]
) -> Path:
    """``build(folder)`` makes a campaign folder; with FIXTURE_CACHE set, a copy of the one
    built first (the copy lies in this session's own temporary folder either way)."""
    import os
    import shutil

    cache = os.environ.get(FIXTURE_CACHE)
    if not cache:
        return build(tmp_path_factory.mktemp(name))
    stored = Path(cache) / name
    if not stored.exists():
        built = build(tmp_path_factory.mktemp(name))
        # Two sessions may build at once: the first rename wins, the other is dropped.
        staging = Path(cache) / f".{name}.{os.getpid()}"
        shutil.copytree(built, staging / built.name, symlinks=True)
        try:
            staging.rename(stored)
        except OSError:
            shutil.rmtree(staging)
    (campaign,) = stored.iterdir()
    copy = tmp_path_factory.mktemp(name) / campaign.name
    shutil.copytree(campaign, copy, symlinks=True)
    return copy


@pytest.fixture(scope="session")
def two_arm_campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A raw campaign with arms windows and linux on simulated endpoints (built once)."""
    return built_once(
        "two-arms", tmp_path_factory, lambda folder: run_plan_text(TWO_ARMS_PLAN, folder)[1]
    )
