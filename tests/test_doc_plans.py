"""Every plan the repository shows reaches a matched A/B against a real server.

The plans of ``examples/`` and every TOML block with ``[[arms]]`` in the README and
``docs/`` (a block without a ``campaign_id`` adds its arms' keys to the plan before it)
run against llama.cpp's ``llama-server`` (``tests/llama_server.py``), one server per arm:
two arms on one server would read the second arm's prompts from the first's prefix cache,
and derive refuses a cache-state mismatch. Each arm's ``base_url`` and ``model`` are
replaced (a simulated arm becomes a served one) and nothing else, but for the startup
stage, left out: it starts the serving container, and with none to start the arm's
workload never runs. The GPU and container stages that remain run as on any machine
without an NVIDIA driver or a reachable container engine: telemetry and reserve record
NVML's error, restoration the engine's (``DOCKER_HOST`` points at a socket that does not
exist). None of them is made up, so the promotion stays refused for them; what each
refusal needs is in docs/guides/endpoint-to-promotion.md, whose own plan runs in
``tests/test_guide_promotion.py``.

Then ``ledger derive --kind ab``, declaring the identity keys the two arms differ in, must
say matched, and ``ledger decide`` under the shipped policy must not refuse the
comparison (``ab-present``, ``matched-ab``: its sample counts included).
"""

from __future__ import annotations

import contextlib
import os
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger.formats.jsonio import read_json
from runners.campaign import run_plan
from runners.campaign.progress import LogProgress
from runners.plan import parse_plan
from tests import doc_blocks
from tests.conftest import ROOT, CliRun, verify_json
from tests.llama_server import LlamaBuild, LlamaServer

GUIDE = "docs/guides/endpoint-to-promotion.md"
SHOWN = (
    "README.md",
    *sorted(
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "docs").rglob("*.md")
        if not p.relative_to(ROOT / "docs").parts[0].startswith("_")
    ),
)
EXPECTED = [
    "docs/guides/endpoint-to-promotion.md#1",
    "docs/guides/runs.md#1",
    "examples/openai-compatible.toml",
    "examples/simulated.toml",
]
"""Every plan shown, so that one added is run, not passed over."""


def shown_plans() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for page in SHOWN:
        found.update(doc_blocks.plans((ROOT / page).read_text(), page))
    for path in sorted((ROOT / "examples").glob("*.toml")):
        found[path.relative_to(ROOT).as_posix()] = tomllib.loads(path.read_text())
    return found


PLANS = shown_plans()


def test_the_plans_shown_are_these() -> None:
    assert sorted(PLANS) == EXPECTED


def _largest_context(plan: dict[str, Any]) -> int:
    sizes = [0]
    for stage in plan["stages"]:
        sizes += stage.get("context_targets", []) + stage.get("depths", [])
        sizes.append(stage.get("context_target", 0))
    return max(sizes)


@contextlib.contextmanager
def _servers(built: LlamaBuild, count: int, parallel: int, logs: Path) -> Iterator[list[str]]:
    with contextlib.ExitStack() as stack:
        started = [
            stack.enter_context(LlamaServer(built, parallel=parallel, log=logs / f"{i}.log"))
            for i in range(count)
        ]
        yield [server.base_url for server in started]


def _differs(plan: dict[str, Any]) -> list[str]:
    first, second = (arm.get("identity", {}) for arm in plan["arms"] if "repeat_of" not in arm)
    return sorted(k for k in set(first) | set(second) if first.get(k) != second.get(k))


@pytest.mark.parametrize("where", [w for w in EXPECTED if not w.startswith(GUIDE)])
def test_a_plan_shown_runs_against_llama_server_to_a_matched_ab(
    where: str,
    llama_build: LlamaBuild,
    tmp_path: Path,
    cli: CliRun,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shown = PLANS[where]
    served = [arm for arm in shown["arms"] if "repeat_of" not in arm]
    assert len(served) == 2, f"{where}: an A/B plan has two arms (and repeats of them)"
    for arm in shown["arms"]:
        if "api_key_env" in arm:
            # llama-server takes any key when started without one; it is sent all the same.
            monkeypatch.setenv(arm["api_key_env"], "doc-plan-key")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-container-engine.sock")
    # One slot holds the largest prompt: llama-server splits its context between its slots.
    parallel = 4 if _largest_context(shown) <= 4096 else 1
    logs = tmp_path / "logs"
    logs.mkdir()
    with _servers(llama_build, 2, parallel, logs) as urls:
        plan = parse_plan(doc_blocks.against(shown, urls, "anvil-tiny"), source=where)
        with open(os.devnull, "w") as quiet:
            result = run_plan(plan, tmp_path / "raw", progress=LogProgress(quiet))
    campaign = tmp_path / "raw" / plan.campaign_id
    assert result.complete, where
    baseline, candidate = (arm["name"] for arm in served)
    differs = [a for key in _differs(shown) for a in ("--differs", key)]
    status, out, err = cli(
        "derive", str(campaign), "--baseline", baseline, "--candidate", candidate, "--kind",
        "ab", *differs,
    )  # fmt: skip
    assert status == 0, err
    assert "matched" in out.splitlines(), out
    document = read_json(campaign / "derived" / f"ab-comparison-{baseline}-vs-{candidate}.json")
    assert document["matched"] is True, document["match_reasons"]
    assert document["rows"], where
    status, _, err = cli("decide", str(campaign), "--candidate", candidate)
    assert status == 0, err
    unmet = read_json(campaign / "summary.json")["decision"]["unmet"]
    assert not [u for u in unmet if u["rule"] in ("ab-present", "matched-ab")], unmet
    status, report = verify_json(cli, campaign)
    assert status == 0, report["findings"]
