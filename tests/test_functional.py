"""Functional and quality gates against the simulated endpoint: every check passes in its
answering mode, and each fault fails exactly the checks it targets."""

from __future__ import annotations

import json
import os
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest

from ledger.promotion._decide import decide
from ledger.promotion.policy import load_policy
from runners.campaign import run_plan
from runners.campaign.progress import LogProgress
from runners.plan import parse_plan
from runners.workload import coding, textimage
from tests.conftest import CliRun, built_once, forge_seal, verify_json

FAST = {"decode_tok_s": 5000.0, "prefill_tok_s": 2000000.0, "overhead_ms": 0.0}

ALL_STAGES = """
[[stages]]
kind = "preflight"
long_tool_tokens = 1500
[[stages]]
kind = "thinking-control"
repetitions = 2
[[stages]]
kind = "strict-output"
requests = 3
[[stages]]
kind = "canary"
requests = 4
[[stages]]
kind = "context-quality"
depths = [256, 512, 1024]
positions = 3
repetitions = 2
[[stages]]
kind = "coding-quality"
repetitions = 2
[[stages]]
kind = "capacity"
context_targets = [256]
requests = 2
max_tokens = 8
"""


def _plan(profile: dict[str, Any], stages: str, *, thinking: str = "") -> str:
    lines = [
        'campaign_id = "2026-11-29-functional"',
        "seed = 4",
        "[[arms]]",
        'name = "sim"',
        "[arms.simulated]",
        *(
            f"{k} = {json.dumps(v)}"
            for k, v in {**FAST, **profile}.items()
            if k != "quality_faults"
        ),
    ]
    for fault in profile.get("quality_faults", ()):
        lines.append("[[arms.simulated.quality_faults]]")
        lines.extend(f"{k} = {json.dumps(v)}" for k, v in fault.items())
    if thinking:
        lines.append(thinking)
    return "\n".join(lines) + "\n" + stages


def _run(tmp_path: Path, plan_text: str) -> Path:
    plan = parse_plan(tomllib.loads(plan_text))
    with open(os.devnull, "w") as quiet:
        run_plan(plan, tmp_path / "raw", progress=LogProgress(quiet))
    return tmp_path / "raw" / plan.campaign_id


def _gate(campaign: Path, stage: str) -> dict[str, Any]:
    return json.loads((campaign / "sim" / f"{stage}.json").read_text())


def _failed(gate: dict[str, Any]) -> list[str]:
    return [r["name"] for r in gate["records"] if r["verdict"] == "failed"]


@pytest.fixture(scope="module")
def answered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built_once("answered", tmp_path_factory, lambda f: _run(f, _plan({}, ALL_STAGES)))


def test_answering_mode_passes_every_gate_with_its_counts(answered: Path, cli: CliRun) -> None:
    preflight = _gate(answered, "preflight")
    assert (preflight["checks_passed"], preflight["checks"], preflight["passed"]) == (10, 10, True)
    assert [r["name"] for r in preflight["records"]] == [
        "text",
        "json-object",
        "json-schema",
        "retrieval",
        "tools",
        "long-tool-prompt",
        "streaming-tool-deltas",
        "tool-result-continuation",
        "responses-api",
        "image-ocr",
    ]
    thinking = _gate(answered, "thinking-control")
    assert (thinking["checks_passed"], thinking["checks"]) == (4, 4)
    strict = _gate(answered, "strict-output")
    assert (strict["requests"], strict["completed"], strict["failed"]) == (3, 3, 0)
    assert strict["performance_eligible"] is True
    canary = _gate(answered, "canary")
    assert (canary["requests"], canary["completed"]) == (4, 4)
    context = _gate(answered, "context-quality")
    assert (context["attempts"], context["passed_attempts"]) == (3 * 3 * 3 * 2, 54)
    assert context["effective_context"] == 1024 and context["non_monotonic"] is False
    assert [d["depth"] for d in context["depths"]] == [256, 512, 1024]
    coding_gate = _gate(answered, "coding-quality")
    assert (coding_gate["attempts"], coding_gate["passed_attempts"]) == (10, 10)
    status, report = verify_json(cli, answered)
    assert status == 0, report


def test_check_records_carry_request_response_assertion_and_verdict(answered: Path) -> None:
    records = {r["name"]: r for r in _gate(answered, "preflight")["records"]}
    tools = records["tools"]
    assert tools["detail"] == "20/20 tools"
    assert all(r["passed"] for r in tools["results"]) and len(tools["results"]) == 20
    long_prompt = records["long-tool-prompt"]
    assert long_prompt["response"]["prompt_tokens"] > 1500
    # Long texts are shortened in the artifact; the digest is of the whole request.
    content = long_prompt["request"]["body"]["messages"][0]["content"]
    assert content.endswith("characters]") and len(long_prompt["request"]["sha256"]) == 64
    assert records["image-ocr"]["request"]["body"]["messages"][0]["content"][1]["image_url"][
        "url"
    ].startswith("data:image/png;base64,")
    assert records["image-ocr"]["response"]["excerpt"] == "ANVIL 7 OCR"
    assert records["streaming-tool-deltas"]["response"]["tool_deltas"] >= 2
    for record in records.values():
        assert record["assertion"] and record["verdict"] == "passed" and record["detail"]


FAULTS: dict[str, tuple[dict[str, Any], str, str, list[str]]] = {
    # name: (profile, stages, stage to read, exactly the failed checks)
    "leak-reasoning": (
        {"quality_faults": [{"kind": "leak-reasoning"}]},
        '[[stages]]\nkind = "thinking-control"\nrepetitions = 2\n',
        "thinking-control",
        ["thinking-disabled-1", "thinking-disabled-2"],
    ),
    "wrong-tool": (
        {"quality_faults": [{"kind": "wrong-tool"}]},
        '[[stages]]\nkind = "preflight"\nlong_tool_tokens = 500\n',
        "preflight",
        ["tools", "long-tool-prompt", "streaming-tool-deltas", "tool-result-continuation"],
    ),
    "broken-json": (
        {"quality_faults": [{"kind": "broken-json"}]},
        '[[stages]]\nkind = "preflight"\nlong_tool_tokens = 500\n',
        "preflight",
        ["json-object", "json-schema"],
    ),
    "blind": (
        {"quality_faults": [{"kind": "blind"}]},
        '[[stages]]\nkind = "preflight"\nlong_tool_tokens = 0\n',
        "preflight",
        ["image-ocr"],
    ),
    "ignore-word-limit": (
        {"quality_faults": [{"kind": "ignore-word-limit"}]},
        '[[stages]]\nkind = "strict-output"\nrequests = 3\n',
        "strict-output",
        ["strict-output-1", "strict-output-2", "strict-output-3"],
    ),
    "late-canary": (
        {"quality_faults": [{"kind": "late-canary"}]},
        '[[stages]]\nkind = "canary"\nrequests = 2\n',
        "canary",
        ["canary-1", "canary-2"],
    ),
    "wrong-code": (
        {"quality_faults": [{"kind": "wrong-code"}]},
        '[[stages]]\nkind = "coding-quality"\ntasks = 2\nrepetitions = 1\n',
        "coding-quality",
        ["is_palindrome-r1", "fizzbuzz-r1"],
    ),
}


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_each_fault_fails_exactly_its_checks(name: str, tmp_path: Path, cli: CliRun) -> None:
    profile, stages, stage, expected = FAULTS[name]
    stages += '[[stages]]\nkind = "endurance"\ncontext_target = 64\nrequests = 1\nmax_tokens = 4\n'
    campaign = _run(tmp_path, _plan(profile, stages))
    gate = _gate(campaign, stage)
    assert _failed(gate) == expected
    assert gate["passed"] is False
    if stage in ("strict-output", "canary"):
        assert gate["performance_eligible"] is False
        assert (gate["completed"], gate["failed"]) == (0, len(expected))
    status, report = verify_json(cli, campaign)
    assert status == 0, report


def test_a_server_without_responses_api_is_not_applicable(tmp_path: Path) -> None:
    stages = '[[stages]]\nkind = "preflight"\nlong_tool_tokens = 0\n'
    stages += '[[stages]]\nkind = "endurance"\ncontext_target = 64\nrequests = 1\nmax_tokens = 4\n'
    campaign = _run(tmp_path, _plan({"responses_api": False}, stages))
    gate = _gate(campaign, "preflight")
    records = {r["name"]: r for r in gate["records"]}
    assert records["responses-api"]["verdict"] == "not-applicable"
    assert records["responses-api"]["detail"] == "the server has no /v1/responses (HTTP 404)"
    assert (gate["checks_passed"], gate["checks"], gate["passed"]) == (8, 8, True)
    assert gate["not_applicable"] == ["responses-api"]


def _context(tmp_path: Path, faults: list[dict[str, Any]]) -> dict[str, Any]:
    stages = (
        '[[stages]]\nkind = "context-quality"\ndepths = [256, 1024, 2048]\npositions = 2\n'
        'repetitions = 1\n[[stages]]\nkind = "endurance"\ncontext_target = 64\nrequests = 1\n'
        "max_tokens = 4\n"
    )
    return _gate(_run(tmp_path, _plan({"quality_faults": faults}, stages)), "context-quality")


def test_needles_missed_in_the_middle_make_a_non_monotonic_curve(tmp_path: Path) -> None:
    # Empty answers cut by length, only for prompts between 600 and 1200 tokens.
    gate = _context(
        tmp_path,
        [
            {
                "kind": "miss-needle",
                "min_prompt_tokens": 600,
                "max_prompt_tokens": 1200,
                "answer": "empty",
            }
        ],
    )
    by_depth = {d["depth"]: d for d in gate["depths"]}
    assert by_depth[256]["passed"] == by_depth[2048]["passed"] == 6
    assert (by_depth[1024]["passed"], by_depth[1024]["empty_length_terminated"]) == (0, 6)
    assert gate["non_monotonic"] is True
    assert gate["effective_context"] == 256
    assert (gate["empty_length_terminated"], gate["incorrect_visible_answers"]) == (6, 0)
    assert gate["passed"] is False


def test_needles_missed_at_depth_bound_the_effective_context(tmp_path: Path) -> None:
    gate = _context(tmp_path, [{"kind": "miss-needle", "min_prompt_tokens": 1300}])
    assert [d["passed"] for d in gate["depths"]] == [6, 6, 0]
    assert gate["incorrect_visible_answers"] == 6
    assert gate["effective_context"] == 1024 and gate["non_monotonic"] is False


def test_thinking_switch_is_per_arm(tmp_path: Path) -> None:
    # A switch that never enables thinking: the enabled checks find no reasoning channel.
    stages = '[[stages]]\nkind = "thinking-control"\nrepetitions = 1\n'
    stages += '[[stages]]\nkind = "endurance"\ncontext_target = 64\nrequests = 1\nmax_tokens = 4\n'
    broken = "[arms.thinking]\nenabled = {}\ndisabled = {}\n"
    gate = _gate(_run(tmp_path, _plan({}, stages, thinking=broken)), "thinking-control")
    assert _failed(gate) == ["thinking-enabled-1"]
    assert gate["records"][1]["detail"] == "no reasoning channel with thinking enabled"


def test_verify_recomputes_gate_counts(answered: Path, tmp_path: Path, cli: CliRun) -> None:
    campaign = tmp_path / answered.name
    shutil.copytree(answered, campaign)
    path = campaign / "sim/preflight.json"
    gate = json.loads(path.read_text())
    gate["records"][0]["verdict"] = "failed"  # a check edited, its counts left
    path.write_text(json.dumps(gate, indent=2, sort_keys=True) + "\n")
    run_path = campaign / "run-manifest.json"
    run = json.loads(run_path.read_text())
    for entry in run["evidence"]:
        if entry["artifact"]["path"] == "sim/preflight.json":
            entry["artifact"]["sha256"] = (
                __import__("hashlib").sha256(path.read_bytes()).hexdigest()
            )
    run_path.write_text(json.dumps(run, indent=2, sort_keys=True) + "\n")
    forge_seal(campaign)
    status, report = verify_json(cli, campaign)
    assert status == 1
    found = {(f["code"], f["pointer"]) for f in report["findings"]}
    assert found == {("gate-inconsistent", "/checks_passed"), ("gate-inconsistent", "/passed")}


def test_decide_reads_the_gates(answered: Path, tmp_path: Path) -> None:
    campaign = tmp_path / answered.name
    shutil.copytree(answered, campaign)
    decided = decide(campaign, load_policy())
    gates = {g["name"]: g for g in decided.summary["gates"]}
    assert gates["sim preflight"]["checks_passed"] == gates["sim preflight"]["checks"] == 10
    assert gates["sim preflight"]["detail"].startswith("10/10 checks; tools: 20/20 tools")
    assert gates["sim strict-output"]["performance_eligible"] is True
    assert (
        gates["sim context-quality"]["attempts"],
        gates["sim context-quality"]["passed_attempts"],
    ) == (54, 54)
    assert gates["sim coding-quality"] == {
        "name": "sim coding-quality",
        "artifact": "sim/coding-quality.json",
        "status": "passed",
        "passed": True,
        "detail": "10/10 attempts",
        "attempts": 10,
        "passed_attempts": 10,
    }
    # The default policy requires preflight and thinking control; both passed here.
    assert not [
        u
        for u in decided.evaluation.unmet
        if u.rule == "required-gates" and "preflight" in u.reason
    ]


def test_coding_tasks_hidden_tests_bite() -> None:
    for task in coding.TASKS:
        assert coding.run_hidden_tests(task.reference, task) == (True, "all hidden tests passed")
        passed, detail = coding.run_hidden_tests(task.buggy, task)
        assert not passed and detail == "AssertionError", task.name


def test_coding_answers_are_contained() -> None:
    task = coding.TASKS[0]
    assert coding.run_hidden_tests("while True:\n    pass\n", task, timeout_s=1) == (
        False,
        "timed out after 1 s",
    )
    passed, detail = coding.run_hidden_tests(
        "import socket\nsocket.create_connection(('127.0.0.1', 9))\n", task
    )
    assert not passed and "network access is disabled" in detail
    passed, detail = coding.run_hidden_tests("blob = bytearray(3 << 30)\n", task)
    assert not passed and detail == "MemoryError"
    assert coding.extract_code("Here:\n```python\nx = 1\n```\nDone") == "x = 1\n"
    assert coding.extract_code("x = 2") == "x = 2"


def test_text_image_round_trip() -> None:
    every = "ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789-"
    assert textimage.read_text(textimage.render_png(every, scale=2)) == every
    assert textimage.read_text(b"GIF89a") is None
    assert textimage.parse_data_uri(textimage.data_uri(b"\x89PNG")) == b"\x89PNG"
    assert textimage.parse_data_uri("data:image/jpeg;base64,AAAA") is None
    with pytest.raises(ValueError, match="no glyph"):
        textimage.render_png("lower case")


def test_the_plan_knows_every_check_task_and_kind() -> None:
    from ledger.measures import functional as gate_counts
    from runners import plan
    from runners.checks import _families as functional

    assert tuple(name for name, _ in functional.PREFLIGHT) == plan.PREFLIGHT_CHECKS
    assert len(coding.TASKS) == plan.CODING_TASKS
    assert plan.FUNCTIONAL_KINDS == gate_counts.KINDS == tuple(functional.RUNNERS)
    assert plan.CONTEXT_FAMILIES == functional.FAMILIES
