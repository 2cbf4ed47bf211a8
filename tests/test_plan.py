"""Plans: the example plans parse; every mistake is one line naming the key."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import attrs
import pytest

from ledger.errors import InvalidArtifact
from ledger.formats.schema import validate
from runners.plan import load_plan, parse_plan
from tests.conftest import ROOT

EXAMPLES = sorted((ROOT / "examples").glob("*.toml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_examples_parse_and_record_valid_plans(path: Path) -> None:
    plan = load_plan(path)
    assert str(validate(plan.to_json())) == "anvil-serving.run-plan/v1"


@pytest.mark.parametrize(
    "stages",
    [
        [{"kind": "thinking-control"}],
        [{"kind": "reserve"}, {"kind": "preflight"}],
        [{"kind": "canary"}, {"kind": "strict-output"}],
    ],
    ids=["thinking-control", "reserve-and-preflight", "canary-and-strict-output"],
)
def test_plans_of_functional_gates_only_are_plans(stages: list[dict[str, Any]]) -> None:
    plan = parse_plan(_plan(stages=stages))
    assert plan.stages == ()
    assert [s.kind for s in plan.evidence] == [s["kind"] for s in stages]


def test_cells_are_the_cross_product() -> None:
    plan = parse_plan(
        _plan(
            stages=[
                {
                    "kind": "capacity",
                    "context_targets": [1024, 4096],
                    "concurrency": [1, 8],
                    "thinking": [False, True],
                    "requests": 3,
                    "max_tokens": 16,
                }
            ]
        )
    )
    ids = [c.id for c in plan.stages[0].cells]
    assert len(ids) == 8
    assert ids[0] == "ctx1024-c1-nothink"
    assert "ctx4096-c8-think" in ids


def test_plan_records_the_key_variable_never_a_key() -> None:
    plan = parse_plan(
        _plan(
            arms=[
                {
                    "name": "a",
                    "base_url": "http://h/v1",
                    "model": "m",
                    "api_key_env": "SECRET_KEY_VAR",
                }
            ]
        )
    )
    assert plan.to_json()["arms"][0]["api_key_env"] == "SECRET_KEY_VAR"


def _plan(**overrides: Any) -> dict[str, Any]:
    plan: dict[str, Any] = {
        "campaign_id": "2026-11-29-test",
        "arms": [{"name": "a", "base_url": "http://127.0.0.1:1/v1", "model": "m"}],
        "stages": [{"kind": "endurance", "context_target": 1024, "requests": 2, "max_tokens": 8}],
    }
    plan.update(overrides)
    return plan


_LOAD = {"kind": "load", "context_target": 64, "rate": 2, "max_tokens": 4}
_SWEEP = {"kind": "sweep", "context_target": 64, "max_tokens": 4}

BAD = {
    "campaign_id": (_plan(campaign_id="Nov 29"), "campaign_id: must look like"),
    # Refused before anything runs: the seal refused it only after every cell was measured.
    "campaign_month_13": (
        _plan(campaign_id="2026-13-45-tiny"),
        "campaign_id: '2026-13-45-tiny' does not start with a real date",
    ),
    "campaign_february_30": (
        _plan(campaign_id="2026-02-30-tiny"),
        "campaign_id: '2026-02-30-tiny' does not start with a real date",
    ),
    **{
        f"arm_named_{folder}": (
            _plan(arms=[{"name": folder, "base_url": "http://127.0.0.1:1/v1", "model": "m"}]),
            rf"arms\[0\].name: '{folder}' is a campaign's own folder",
        )
        for folder in ("approvals", "derived", "report")
    },
    "second_arm_named_derived": (
        _plan(
            arms=[
                {"name": "a", "base_url": "http://127.0.0.1:1/v1", "model": "m"},
                {"name": "derived", "base_url": "http://127.0.0.1:1/v1", "model": "m"},
            ]
        ),
        r"arms\[1\].name: 'derived' is a campaign's own folder",
    ),
    "no_arms": (_plan(arms=[]), "arms: at least one arm"),
    "unknown_top_key": (_plan(colour="red"), "colour: unknown key"),
    "arm_without_url": (
        _plan(arms=[{"name": "a", "model": "m"}]),
        r"arms\[0\].base_url: is required",
    ),
    "arm_bad_url": (
        _plan(arms=[{"name": "a", "base_url": "ftp://x", "model": "m"}]),
        "must start with http",
    ),
    "arm_bad_name": (
        _plan(arms=[{"name": "A B", "base_url": "http://x", "model": "m"}]),
        r"arms\[0\].name",
    ),
    "arm_twice": (
        _plan(arms=[{"name": "a", "base_url": "http://x", "model": "m"}] * 2),
        "name 'a' is used twice",
    ),
    "arm_key_literal": (
        _plan(
            arms=[{"name": "a", "base_url": "http://x", "model": "m", "api_key_env": "sk-123 456"}]
        ),
        "not an environment variable name",
    ),
    "arm_api_unknown": (
        _plan(arms=[{"name": "a", "base_url": "http://x", "model": "m", "api": "responses"}]),
        r"arms\[0\].api: expected chat or completions, got 'responses'",
    ),
    "arm_api_not_text": (
        _plan(arms=[{"name": "a", "base_url": "http://x", "model": "m", "api": 1}]),
        r"arms\[0\].api: expected chat or completions",
    ),
    "arm_extra_body_text": (
        _plan(arms=[{"name": "a", "base_url": "http://x", "model": "m", "extra_body": "x"}]),
        r"arms\[0\].extra_body: expected a table, got 'x'",
    ),
    "arm_both": (
        _plan(arms=[{"name": "a", "base_url": "http://x", "model": "m", "simulated": {}}]),
        "base_url or simulated, not both",
    ),
    "simulated_bad_profile": (
        _plan(arms=[{"name": "a", "simulated": {"decode_tok_s": -1}}]),
        "decode_tok_s must be > 0",
    ),
    "stage_kind": (
        _plan(stages=[{"kind": "soak", "requests": 1, "max_tokens": 1}]),
        r"stages\[0\].kind: expected one of capacity, endurance",
    ),
    "stage_requests_zero": (
        _plan(stages=[{"kind": "endurance", "context_target": 8, "requests": 0, "max_tokens": 1}]),
        r"stages\[0\].requests: must be at least 1",
    ),
    "stage_targets_text": (
        _plan(
            stages=[{"kind": "capacity", "context_targets": ["4K"], "requests": 1, "max_tokens": 1}]
        ),
        "context_targets: expected positive whole numbers",
    ),
    "stage_unknown_key": (
        _plan(
            stages=[
                {"kind": "endurance", "context_target": 8, "requests": 1, "max_tokens": 1, "rps": 2}
            ]
        ),
        r"stages\[0\].rps: unknown key",
    ),
    "deadline_negative": (_plan(deadlines={"idle_s": -1}), "deadlines.idle_s: must be > 0"),
    "only_evidence_stages": (
        _plan(stages=[{"kind": "reserve"}]),
        "stages: at least one capacity, endurance, functional or startup stage",
    ),
    "no_stage": (_plan(stages=[]), "stages: at least one stage is required"),
    "telemetry_during_nothing": (
        _plan(stages=[*_plan()["stages"], {"kind": "telemetry", "during": "capacity"}]),
        r"stages\[1\].during: names no capacity or endurance stage: 'capacity'",
    ),
    "restoration_without_container": (
        _plan(stages=[*_plan()["stages"], {"kind": "restoration"}]),
        r"stages\[1\]: restoration needs an \[arms.container\] table on arm 'a'",
    ),
    "two_reserve_stages": (
        _plan(
            stages=[
                *_plan()["stages"],
                {"kind": "reserve"},
                {"kind": "reserve", "name": "reserve-again"},
            ]
        ),
        r"stages\[2\]: a plan has at most one reserve stage",
    ),
    "reserve_negative": (
        _plan(stages=[*_plan()["stages"], {"kind": "reserve", "min_free_mib": -1}]),
        r"stages\[1\].min_free_mib: must be >= 0",
    ),
    "startup_deadline_zero": (
        _plan(stages=[*_plan()["stages"], {"kind": "startup", "deadline_s": 0}]),
        r"stages\[1\].deadline_s: must be > 0",
    ),
    "gpus_repeated": (
        _plan(arms=[{"name": "a", "base_url": "http://x", "model": "m", "gpus": [0, 0]}]),
        r"arms\[0\].gpus: expected distinct card indices",
    ),
    "container_ready_url": (
        _plan(
            arms=[
                {
                    "name": "a",
                    "base_url": "http://x",
                    "model": "m",
                    "container": {"name": "c", "ready_url": "localhost:8001"},
                }
            ]
        ),
        r"arms\[0\].container.ready_url: must start with http",
    ),
    "preflight_unknown_skip": (
        _plan(stages=[*_plan()["stages"], {"kind": "preflight", "skip": ["vision"]}]),
        r"stages\[1\].skip: unknown check 'vision'",
    ),
    "preflight_too_many_tools": (
        _plan(stages=[*_plan()["stages"], {"kind": "preflight", "tools": 21}]),
        r"stages\[1\].tools: must be between 1 and 20, got 21",
    ),
    "context_without_depths": (
        _plan(stages=[*_plan()["stages"], {"kind": "context-quality"}]),
        r"stages\[1\].depths: is required",
    ),
    "context_bad_family": (
        _plan(
            stages=[
                *_plan()["stages"],
                {"kind": "context-quality", "depths": [1024], "families": ["date"]},
            ]
        ),
        r"stages\[1\].families: expected some of number, phrase, key-value",
    ),
    "context_fraction": (
        _plan(
            stages=[
                *_plan()["stages"],
                {"kind": "context-quality", "depths": [1024], "pass_fraction": 1.5},
            ]
        ),
        r"stages\[1\].pass_fraction: must be between 0 and 1",
    ),
    "coding_tasks": (
        _plan(stages=[*_plan()["stages"], {"kind": "coding-quality", "tasks": 9}]),
        r"stages\[1\].tasks: must be between 1 and 5, got 9",
    ),
    "thinking_switch_partial": (
        _plan(
            arms=[
                {
                    "name": "a",
                    "base_url": "http://x",
                    "model": "m",
                    "thinking": {"enabled": {"reasoning_effort": "high"}},
                }
            ]
        ),
        r"arms\[0\].thinking.disabled: is required",
    ),
    "min_success_negative": (
        _plan(stages=[{**_plan()["stages"][0], "min_success": -1}]),
        r"stages\[0\].min_success: must be 0 or more, got -1$",
    ),
    "min_success_fraction": (
        _plan(stages=[{**_plan()["stages"][0], "min_success": 0.5}]),
        r"stages\[0\].min_success: expected a whole number of requests, got 0.5$",
    ),
    "min_success_true": (
        _plan(stages=[{**_plan()["stages"][0], "min_success": True}]),
        r"stages\[0\].min_success: expected a whole number of requests, got True$",
    ),
    "min_success_beyond_requests": (
        _plan(stages=[{**_plan()["stages"][0], "min_success": 3}]),
        (
            r"stages\[0\].min_success: 3 is more than the 2 measured requests of cell "
            r"ctx1024-c1-nothink; it could never be met$"
        ),
    ),
    "min_success_beyond_a_load_cell": (
        _plan(stages=[{**_LOAD, "rate": [5, 10], "requests": 4, "min_success": 5}]),
        r"stages\[0\].min_success: 5 is more than the 4 measured requests of cell ctx64-r5-",
    ),
    "min_success_beyond_a_sweep_rate_cell": (
        _plan(stages=[{**_SWEEP, "requests": 4, "probe_requests": 8, "min_success": 5}]),
        r"stages\[0\].min_success: 5 is more than the 4 measured requests of each rate cell",
    ),
    "min_success_on_an_evidence_stage": (
        _plan(stages=[*_plan()["stages"], {"kind": "reserve", "min_success": 1}]),
        r"stages\[1\].min_success: unknown key",
    ),
    "container_unknown_key": (
        _plan(arms=[{"name": "a", "base_url": "http://x", "model": "m", "container": {"id": "c"}}]),
        r"arms\[0\].container.name: is required",
    ),
}


def test_evidence_stages_are_recorded_with_their_settings() -> None:
    arm = {
        "name": "a",
        "base_url": "http://127.0.0.1:1/v1",
        "model": "m",
        "gpus": [1, 0],
        "container": {"name": "sglang", "docker_host": "unix:///run/podman.sock"},
    }
    plan = parse_plan(
        _plan(
            arms=[arm],
            stages=[
                {"kind": "startup"},
                *_plan()["stages"],
                {"kind": "telemetry", "during": "endurance", "interval_s": 2},
                {"kind": "reserve", "name": "post-workload", "min_free_mib": 4096},
                {"kind": "restoration"},
            ],
        )
    )
    recorded = plan.to_json()
    validate(recorded)
    assert [s["name"] for s in recorded["stages"]] == ["endurance"]
    assert recorded["evidence_stages"] == [
        {"name": "startup", "kind": "startup", "deadline_s": 900.0, "poll_s": 1.0},
        {"name": "telemetry", "kind": "telemetry", "during": "endurance", "interval_s": 2.0},
        {"name": "post-workload", "kind": "reserve", "min_free_mib": 4096},
        {"name": "restoration", "kind": "restoration"},
    ]
    assert recorded["arms"][0]["gpus"] == [1, 0]
    assert recorded["arms"][0]["container"] == {
        "name": "sglang",
        "docker_host": "unix:///run/podman.sock",
        "ready_url": None,
    }
    assert plan.evidence_of("reserve") is not None and plan.evidence_of("nothing") is None


def test_min_success_is_recorded_only_where_a_plan_sets_it() -> None:
    endurance = _plan()["stages"][0]
    stages = [
        {**endurance, "name": "unset"},
        {**endurance, "name": "all", "min_success": 2},
        {**endurance, "name": "none", "min_success": 0},
        {**endurance, "name": "one", "min_success": 1},
        {"kind": "load", "context_target": 64, "rate": 2, "duration_s": 3, "max_tokens": 4,
         "min_success": 2},
    ]  # fmt: skip
    plan = parse_plan(_plan(stages=stages))
    assert [s.min_success for s in plan.stages] == [1, 2, 0, 1, 2]
    recorded = plan.to_json()
    validate(recorded)
    # Left out at its default, as plans written before it record themselves.
    assert [s.get("min_success") for s in recorded["stages"]] == [None, 2, 0, None, 2]


def test_an_arms_api_is_recorded_only_when_it_is_not_chat() -> None:
    arms = [
        {"name": "a", "base_url": "http://x/v1", "model": "m"},
        {"name": "b", "base_url": "http://y/v1", "model": "m", "api": "completions"},
    ]
    plan = parse_plan(_plan(arms=arms))
    assert [a.api for a in plan.arms] == ["chat", "completions"]
    recorded = plan.to_json()
    validate(recorded)
    # A plan written before the key records itself as it did: its run can be resumed.
    assert [a.get("api") for a in recorded["arms"]] == [None, "completions"]


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_plans(name: str) -> None:
    data, message = BAD[name]
    with pytest.raises(InvalidArtifact, match=message) as raised:
        parse_plan(data, source="plan.toml")
    assert str(raised.value).startswith("plan.toml: ")
    assert "\n" not in str(raised.value)


def test_unreadable_and_invalid_toml(tmp_path: Path) -> None:
    with pytest.raises(InvalidArtifact, match="No such file"):
        load_plan(tmp_path / "missing.toml")
    broken = tmp_path / "broken.toml"
    broken.write_text("campaign_id = \n")
    with pytest.raises(InvalidArtifact, match="not valid TOML"):
        load_plan(broken)


def test_a_url_with_credentials_is_refused_without_repeating_them() -> None:
    url = "http://admin:hunter2hunter2@10.0.0.7:8000/v1"
    with pytest.raises(InvalidArtifact, match="holds credentials") as raised:
        parse_plan(_plan(arms=[{"name": "a", "base_url": url, "model": "m"}]), source="p.toml")
    assert "hunter2hunter2" not in str(raised.value) and "admin" not in str(raised.value)


def test_output_is_controlled_unless_a_stage_says_false() -> None:
    """A matched A/B needs every request to end by length at max_tokens, so a workload
    stage that leaves the key out asks for it; only ``false`` turns it off."""
    stages = [
        {"kind": "endurance", "context_target": 64, "requests": 2, "max_tokens": 8},
        {"kind": "capacity", "context_targets": [64], "requests": 2, "max_tokens": 8},
        {**_LOAD, "duration_s": 2, "name": "load"},
        {**_SWEEP, "duration_s": 2, "name": "sweep"},
        {"kind": "endurance", "name": "natural", "context_target": 64, "requests": 2,
         "max_tokens": 8, "controlled_output": False},
    ]  # fmt: skip
    plan = parse_plan(_plan(stages=stages))
    controlled = {s.name: s.controlled_output for s in plan.stages}
    assert controlled == {
        "endurance": True, "capacity": True, "load": True, "sweep": True, "natural": False,
    }  # fmt: skip
    recorded = {s["name"]: s["controlled_output"] for s in plan.to_json()["stages"]}
    assert recorded == controlled


_ARM_A = {"name": "a", "base_url": "http://127.0.0.1:1/v1", "model": "m", "identity": {"x": 1}}


def test_a_repeat_runs_the_arm_again_under_its_own_name() -> None:
    plan = parse_plan(_plan(arms=[_ARM_A, {"name": "a-again", "repeat_of": "a"}]))
    first, again = plan.arms
    assert again.name == "a-again" and again.repeat_of == "a" and first.repeat_of is None
    assert attrs.evolve(again, name="a", repeat_of=None) == first
    recorded = plan.to_json()
    assert recorded["arms"][1]["repeat_of"] == "a" and "repeat_of" not in recorded["arms"][0]
    assert str(validate(recorded)) == "anvil-serving.run-plan/v1"
    # Named before the arm it repeats, it is the same copy.
    before = parse_plan(_plan(arms=[{"name": "a-again", "repeat_of": "a"}, _ARM_A]))
    assert [a.name for a in before.arms] == ["a-again", "a"]
    assert attrs.evolve(before.arms[0], name="a", repeat_of=None) == before.arms[1]


@pytest.mark.parametrize(
    ("repeat", "message"),
    [
        ({"name": "b", "repeat_of": "a", "model": "m"}, "arms[1].model: an arm with repeat_of"),
        ({"name": "b", "repeat_of": "a", "base_url": "x"}, "arms[1].base_url: an arm with"),
        ({"name": "b", "repeat_of": "z"}, "arms[1].repeat_of: names no arm with its own settings"),
        ({"name": "b", "repeat_of": 3}, "arms[1].repeat_of: expected the name of another arm"),
        ({"name": "a", "repeat_of": "a"}, "arms: name 'a' is used twice"),
        ({"repeat_of": "a"}, "arms[1].name: is required"),
    ],
)
def test_a_repeat_takes_nothing_of_its_own(repeat: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArtifact, match=re.escape(message)):
        parse_plan(_plan(arms=[_ARM_A, repeat]))


def test_a_repeat_of_a_repeat_is_refused() -> None:
    arms = [_ARM_A, {"name": "b", "repeat_of": "a"}, {"name": "c", "repeat_of": "b"}]
    with pytest.raises(InvalidArtifact, match=r"arms\[2\].repeat_of: names no arm with its own"):
        parse_plan(_plan(arms=arms))


def test_a_managed_container_is_not_repeated() -> None:
    managed = {**_ARM_A, "container": {"name": "serve", "image": "busybox"}}
    with pytest.raises(InvalidArtifact, match="arm 'a' manages its container"):
        parse_plan(_plan(arms=[managed, {"name": "b", "repeat_of": "a"}]))
    named = {**_ARM_A, "container": {"name": "serve"}}
    plan = parse_plan(_plan(arms=[named, {"name": "b", "repeat_of": "a"}]))
    assert plan.arms[1].container == plan.arms[0].container


_INTERLEAVED_ARMS = [_ARM_A, {"name": "a-again", "repeat_of": "a"}]


def test_interleave_is_recorded_only_where_a_plan_sets_it() -> None:
    plan = parse_plan(_plan(arms=_INTERLEAVED_ARMS, interleave=True))
    assert plan.interleave is True
    recorded = plan.to_json()
    validate(recorded)
    assert recorded["interleave"] is True
    # A plan written before the key records itself as it did: its run can be resumed.
    assert "interleave" not in parse_plan(_plan(arms=_INTERLEAVED_ARMS)).to_json()
    assert "interleave" not in parse_plan(_plan(arms=_INTERLEAVED_ARMS, interleave=False)).to_json()


_MANAGED = {**_ARM_A, "name": "m", "container": {"name": "serve", "image": "busybox"}}
_WITNESSED = {**_ARM_A, "name": "w", "container": {"name": "serve"}}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"interleave": "yes"}, "interleave: expected true or false"),
        ({"arms": [_ARM_A]}, "interleave: arms take turns: the plan has one arm"),
        ({"arms": [_ARM_A, _MANAGED]}, "arm 'm' manages its container"),
        (
            {"stages": [{"kind": "startup"}], "arms": [_WITNESSED, {**_WITNESSED, "name": "x"}]},
            "interleave: a startup stage measures one arm's server on its own",
        ),
        (
            {"stages": [{"kind": "endurance", "context_target": 64, "requests": 2, "max_tokens": 4},
                        {"kind": "telemetry", "during": "endurance"}]},
            "interleave: a telemetry stage measures one arm's server",
        ),
        (
            {"stages": [{"kind": "endurance", "context_target": 64, "requests": 2, "max_tokens": 4},
                        {"kind": "restoration"}],
             "arms": [_WITNESSED, {**_WITNESSED, "name": "x"}]},
            "interleave: a restoration stage measures one arm's server on its own",
        ),
        ({"stages": [{**_LOAD, "requests": 4}]}, r"interleave: stage 'load' sends on a schedule \(load\)"),
        ({"stages": [{**_SWEEP, "requests": 4}]}, r"interleave: stage 'sweep' sends on a schedule \(sweep\)"),
        (
            {"stages": [{"kind": "capacity", "context_targets": [64], "concurrency": [1, 4],
                         "requests": 8, "max_tokens": 4}]},
            "interleave: stage 'capacity' cell ctx64-c4-nothink: concurrency 4; interleaved arms",
        ),
    ],
)  # fmt: skip
def test_interleave_refuses_what_turns_cannot_measure(
    overrides: dict[str, Any], message: str
) -> None:
    data = _plan(arms=_INTERLEAVED_ARMS, interleave=True) | overrides
    with pytest.raises(InvalidArtifact, match=message):
        parse_plan(data, source="plan.toml")


def test_interleave_takes_witnessed_containers_and_a_reserve() -> None:
    # A container only looked at runs already, and a reserve is read after the cells.
    arms = [_WITNESSED, {**_WITNESSED, "name": "x", "container": {"name": "other"}}]
    stages = [
        {"kind": "capacity", "context_targets": [64], "concurrency": [1], "requests": 4,
         "max_tokens": 4},
        {"kind": "reserve"},
    ]  # fmt: skip
    plan = parse_plan(_plan(arms=arms, stages=stages, interleave=True))
    assert plan.interleave and [e.kind for e in plan.evidence] == ["reserve"]
