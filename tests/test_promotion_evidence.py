"""Promotion's reading of the evidence, rule by rule, on small campaigns built in memory or
on disk: artifacts it cannot read, arms it must not mix, counts and details it must state
exactly. Each case breaks one thing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import attrs
import pytest

from ledger.promotion import Evidence, comparison_failures, evaluate, load_evidence
from ledger.promotion import _evaluation as promotion
from ledger.promotion._decide import _next_gate
from ledger.promotion.policy import load_policy

POLICY = load_policy()


def _cell(stage: str, errors: list[str | None], *, warmup: int = 0) -> dict[str, Any]:
    requests = [{"warmup": True, "error": None} for _ in range(warmup)]
    requests += [{"warmup": False, "error": e and {"class": e}} for e in errors]
    return {"stage": {"name": stage, "kind": "capacity"}, "status": "complete",
            "requests": requests}  # fmt: skip


def _run(cells: list[tuple[str, str, str]], **extra: Any) -> dict[str, Any]:
    return {
        "complete": True,
        "cells": [{"arm": a, "stage": s, "cell": c, "status": "complete"} for a, s, c in cells],
        **extra,
    }


def _write(folder: Path, rel: str, document: Any) -> None:
    path = folder / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document) if not isinstance(document, str) else document)


# Workload gates


def test_workload_gates_count_only_their_own_arm() -> None:
    run = _run([("a", "capacity", "c1"), ("a", "capacity", "c2"), ("b", "capacity", "c1")])
    evidence = Evidence(Path("."), "x", run_manifest=run)
    evidence.cells = {"a": [("a1", _cell("capacity", [None]))] * 2,
                      "b": [("b1", _cell("capacity", [None, None]))]}  # fmt: skip
    (gate,) = promotion.stage_gates(evidence, "b", POLICY)
    assert (gate.detail, gate.requests, gate.completed, gate.passed) == (
        "1 cell, 2/2 requests completed",
        2,
        2,
        True,
    )
    assert gate.to_json() == {
        "name": "b capacity", "artifact": "b1", "status": "passed", "passed": True,
        "detail": "1 cell, 2/2 requests completed", "requests": 2, "completed": 2, "failed": 0,
    }  # fmt: skip


def test_a_workload_gate_of_warmups_alone_has_not_passed() -> None:
    evidence = Evidence(Path("."), "x", run_manifest=_run([("a", "capacity", "c1")]))
    evidence.cells = {"a": [("a1", _cell("capacity", [], warmup=3))]}
    (gate,) = promotion.stage_gates(evidence, "a", POLICY)
    assert (gate.passed, gate.requests, gate.detail) == (False, 0, "1 cell, 0/0 requests completed")


# Reserve, startup and restoration gates


def _reserve(free: list[int]) -> dict[str, Any]:
    return {
        "stage": "reserve",
        "nvml": {"available": True},
        "threshold_mib": 1,
        "cards": [{"index": i, "memory": {"free_mib": f}} for i, f in enumerate(free)],
    }


@pytest.mark.parametrize(
    ("free", "detail"),
    [
        ([4000, 4000], "4000 MiB free on each card; threshold 3072 MiB"),
        ([4000], "4000 MiB free on each card; threshold 3072 MiB"),
        ([4000, 4271], "free per card 4000 MiB, 4271 MiB; threshold 3072 MiB"),
    ],
)
def test_reserve_detail_names_each_card(free: list[int], detail: str) -> None:
    assert promotion._reserve_detail(_reserve(free), [], 3072) == detail
    assert promotion._reserve_detail(_reserve(free), ["card 1: low"], 3072) == (
        "card 1: low; threshold 3072 MiB"
    )


@pytest.mark.parametrize(
    ("outcome", "passed", "measured"),
    [("ready", True, True), ("exited", False, True), ("engine-unavailable", False, False)],
)
def test_startup_gate(outcome: str, passed: bool, measured: bool) -> None:
    evidence = Evidence(Path("."), "x")
    document = {"stage": "startup", "outcome": outcome, "detail": "d"}
    evidence.stages[("a", "startup")] = ("a/startup.json", document)
    (gate,) = promotion.stage_gates(evidence, "a", POLICY)
    assert (gate.kind, gate.passed, gate.measured, gate.detail) == (
        "startup",
        passed,
        measured,
        f"{outcome}: d",
    )


def test_a_failed_start_names_the_next_gate_itself() -> None:
    evidence = Evidence(Path("."), "x")
    gate = "managed host-memory containment and loader diagnosis before retry"
    document = {"stage": "startup", "outcome": "oom-killed", "detail": "d", "next_gate": gate}
    evidence.stages[("a", "startup")] = ("a/startup.json", document)
    evaluation = evaluate(evidence, POLICY, candidate="a")
    assert evaluation.unmet and _next_gate(evidence, evaluation) == gate
    # A ready start names none; a next gate written into one by hand is not taken.
    evidence.stages[("a", "startup")] = ("a/startup.json", {**document, "outcome": "ready"})
    evaluation = evaluate(evidence, POLICY, candidate="a")
    first = evaluation.unmet[0]
    assert _next_gate(evidence, evaluation) == f"{first.rule}: {first.reason}"


SNAPSHOT = {"id": "a" * 64, "image_id": "sha256:" + "b" * 64, "config_sha256": "c" * 64,
            "restart_count": 0, "started_at": "2026-11-29T10:00:00Z", "oom_killed": False,
            "state": "running"}  # fmt: skip


def _restoration(**changes: Any) -> dict[str, Any]:
    return {"stage": "restoration", "before": SNAPSHOT, "after": SNAPSHOT,
            "after_at": "2026-11-29T10:05:00Z", **changes}  # fmt: skip


@pytest.mark.parametrize(
    ("document", "codes", "measured"),
    [
        (_restoration(), [], True),
        (_restoration(engine=None), [], True),
        (_restoration(engine={}), [], True),  # no word on the engine: it answered
        (_restoration(engine={"available": True}), [], True),
        (
            _restoration(engine={"available": False, "error": "socket gone"}, after=None),
            ["engine-unavailable", "container-missing"],
            False,
        ),
        (_restoration(after=None, after_at=None), ["in-progress"], False),
        (_restoration(after={**SNAPSHOT, "restart_count": 1}), ["restarted"], True),
    ],
)
def test_restoration_gate(document: dict[str, Any], codes: list[str], measured: bool) -> None:
    evidence = Evidence(Path("."), "x")
    evidence.stages[("a", "restoration")] = ("a/restoration.json", document)
    (gate,) = promotion.stage_gates(evidence, "a", POLICY)
    assert (gate.passed, gate.measured) == (not codes, measured)
    if not codes:
        assert gate.detail == (
            "same container id, image and configuration; no restart, no OOM kill"
        )
    else:
        assert [part.split(":")[0] for part in gate.detail.split("; ")] == codes
    if "engine-unavailable" in codes:
        assert gate.detail.startswith("engine-unavailable: socket gone; ")
    if codes == ["in-progress"]:
        assert gate.detail == "in-progress: no snapshot after the workload"
    # The restoration rule names the artifact and each failure.
    unmet = [u.reason for u in evaluate(evidence, POLICY, candidate="a").unmet
             if u.rule == "restoration"]  # fmt: skip
    assert unmet == [f"a/restoration.json: {c}: {m}" for c, m in
                     (p.split(": ", 1) for p in gate.detail.split("; "))] if codes else not unmet  # fmt: skip


def _restart(**second: Any) -> dict[str, Any]:
    first = {**SNAPSHOT, "command": ["serve"], "env_sha256": "e" * 64}
    return {
        "first_start": first,
        "stopped_at": "2026-11-29T10:05:01Z",
        "stop_error": None,
        "attempt": {"outcome": "ready", "detail": "ready after 2 probes", "time_to_ready_s": 4.5},
        "second_start": {**first, "started_at": "2026-11-29T10:05:03Z", **second},
        "first_request": {"ok": True, "error": None, "e2e_ms": 31.25},
    }


def test_a_restart_is_judged_with_the_restoration() -> None:
    evidence = Evidence(Path("."), "x")
    evidence.stages[("a", "restoration")] = ("a/restoration.json", _restoration(restart=_restart()))
    (gate,) = promotion.stage_gates(evidence, "a", POLICY)
    assert gate.passed is True
    assert gate.detail == (
        "same container id, image and configuration; no restart, no OOM kill during the "
        "workload; stopped and started again with the same image, command, environment and "
        "configuration, ready in 4.5 s, first request served in 31.25 ms"
    )
    # What the schema allows, a ready start with no time recorded, is stated, not a crash.
    untimed = _restart()
    untimed["attempt"]["time_to_ready_s"] = None
    evidence.stages[("a", "restoration")] = ("a/restoration.json", _restoration(restart=untimed))
    (gate,) = promotion.stage_gates(evidence, "a", POLICY)
    assert gate.passed is True and ", ready, first request served in 31.25 ms" in gate.detail
    # Another image at the second start: refused, whatever the artifact says of itself.
    moved = _restoration(restart=_restart(image_id="sha256:" + "9" * 64), passed=True)
    evidence.stages[("a", "restoration")] = ("a/restoration.json", moved)
    (gate,) = promotion.stage_gates(evidence, "a", POLICY)
    assert gate.passed is False and gate.detail.startswith("restart-image-changed: ")
    unmet = evaluate(evidence, POLICY, candidate="a").unmet
    assert [u.rule for u in unmet if u.reason.startswith("a/restoration.json: restart-")] == [
        "restoration"
    ]


# Functional gates


def _coding(verdicts: list[str], required: float) -> dict[str, Any]:
    records = [{"name": f"task-{i}", "verdict": v} for i, v in enumerate(verdicts)]
    return {"stage": "coding-quality", "kind": "coding-quality", "records": records,
            "settings": {"required_pass_rate": required}}  # fmt: skip


def test_functional_gates_are_judged_by_the_policy_bar_not_the_plan() -> None:
    evidence = Evidence(Path("."), "x")
    # Only the last kind of the registry is present: the ones before it are skipped.
    evidence.stages[("a", "coding-quality")] = ("a/coding.json", _coding(["passed", "failed"], 0.5))
    (gate,) = promotion.stage_gates(evidence, "a", POLICY)
    assert (gate.kind, gate.passed) == ("coding-quality", False)  # the policy asks for 1.0
    lenient = attrs.evolve(POLICY, coding_pass_rate=0.5)
    (gate,) = promotion.stage_gates(evidence, "a", lenient)
    assert gate.passed is True


# Reading the folder


def test_unreadable_and_escaping_artifacts_are_problems_not_evidence(
    tmp_path: Path, two_arm_campaign: Path
) -> None:
    folder = tmp_path / two_arm_campaign.name
    shutil.copytree(two_arm_campaign, folder)
    run = json.loads((folder / "run-manifest.json").read_text())
    cells = [e for e in run["cells"] if e["arm"] == "linux"]
    windows = [e for e in run["cells"] if e["arm"] == "windows"]
    assert len(cells) == 3 and windows
    run["cells"] = cells + windows  # the broken entries first: the rest must still be read
    good = windows[0]["artifact"]["path"]
    outside = tmp_path / "outside.json"
    shutil.copy(folder / cells[1]["artifact"]["path"], outside)
    cells[0]["artifact"] = None  # a cell that never ran
    cells[1]["artifact"]["path"] = "../outside.json"
    link = folder / cells[2]["artifact"]["path"]
    link.unlink()
    link.symlink_to(outside)
    (folder / "linux" / "broken.json").write_text("{")
    (folder / "linux" / "cell-copy.json").write_bytes((folder / good).read_bytes())
    evidence_entries = run["evidence"] = [
        {"arm": "linux", "kind": "reserve", "stage": "reserve", "status": "pending",
         "artifact": None},
        {"arm": "linux", "kind": "telemetry", "stage": "x", "status": "complete",
         "artifact": {"path": "linux/cell-copy.json", "sha256": "0" * 64}},
        {"arm": "linux", "kind": "startup", "stage": "y", "status": "complete",
         "artifact": {"path": "linux/broken.json", "sha256": "0" * 64}},
    ]  # fmt: skip
    assert evidence_entries
    (folder / "run-manifest.json").write_text(json.dumps(run))
    (folder / "derived").mkdir()
    (folder / "derived" / "not-ab.json").write_bytes((folder / good).read_bytes())
    evidence = load_evidence(folder)
    assert evidence.run_manifest is not None, evidence.problems
    assert evidence.cells["linux"] == []
    assert [p for p, _ in evidence.cells["windows"]] == [e["artifact"]["path"] for e in windows]
    assert list(evidence.stages) == []  # a cell run is no evidence stage
    assert evidence.comparisons == []  # nor an A/B comparison
    problems = sorted(p.split(":")[0] for p in evidence.problems)
    # The cell run listed as a telemetry stage is another arm's artifact: a problem too.
    assert problems == sorted(["../outside.json", cells[2]["artifact"]["path"],
                               "linux/broken.json", "linux/cell-copy.json"])  # fmt: skip
    assert any("says arm 'windows', stage 'capacity'" in p for p in evidence.problems)
    assert sum("leads out of the campaign folder" in p for p in evidence.problems) == 1


def test_every_approval_record_is_read_and_an_unreadable_one_is_a_problem(tmp_path: Path) -> None:
    folder = tmp_path / "2026-11-29-x"
    approvals = folder / "approvals"
    approvals.mkdir(parents=True)
    (approvals / "a.json").write_text("{}")
    (approvals / "a.json.sigstore.json").write_text("{}")
    (approvals / "b.json").mkdir()  # cannot be read as a file
    (approvals / "c.json").write_text("{}")
    evidence = load_evidence(folder)
    # Read, and left for the rules to judge: records that are not approvals are skipped.
    assert [(rel, record) for rel, _, record in evidence.approvals] == [
        ("approvals/a.json", None),
        ("approvals/c.json", None),
    ]
    (unreadable,) = [p for p in evidence.problems if p.startswith("approvals/b.json")]
    assert unreadable == "approvals/b.json: a folder, not a regular file"


# Candidates, completeness and comparisons


def _ab(path: str, candidate: str, *, n: int = 10, failed: int = 0, **extra: Any) -> tuple:
    document = {
        "baseline": {"arm": "base"},
        "candidate": {"arm": candidate},
        "rows": [{"stage": "capacity", "cell": "c1", "n": {"baseline": n, "candidate": n},
                  "failed": {"baseline": 0, "candidate": failed}}],
        **extra,
    }  # fmt: skip
    return path, document


def test_pick_candidate() -> None:
    evidence = Evidence(Path("."), "x", run_manifest=_run([("base", "s", "c"), ("b", "s", "c")]))
    assert promotion.pick_candidate(evidence, "b") == ("b", None)
    assert promotion.pick_candidate(evidence, "z") == (None, "the campaign has no arm 'z'")
    assert promotion.pick_candidate(Evidence(Path("."), "x"), "z") == ("z", None)
    evidence.comparisons = [_ab("d/1.json", "b"), _ab("d/2.json", "c")]
    assert promotion.pick_candidate(evidence, None) == (
        None, "A/B comparisons name several candidates (b, c)"
    )  # fmt: skip
    unmet = evaluate(evidence, POLICY).unmet
    assert ("candidate", "A/B comparisons name several candidates (b, c)") in [
        (u.rule, u.reason) for u in unmet
    ]
    # Every rule is still judged without a candidate, and says so rather than naming an
    # arm '' (the empty name stood in for none).
    reasons = [u.reason for u in unmet]
    assert not any("''" in r for r in reasons), reasons
    assert (
        f"required gate {POLICY.required_gates[0]!r}: the candidate (none chosen) has no "
        f"{POLICY.required_gates[0]} stage"
    ) in reasons


def test_completeness_names_what_is_pending() -> None:
    evidence = Evidence(Path("."), "x")
    (reason,) = [u.reason for u in evaluate(evidence, POLICY, candidate="a").unmet
                 if u.rule == "complete"]  # fmt: skip
    assert reason == "no readable run-manifest.json: the campaign's completeness is not on record"
    run = _run([("a", "s", f"c{i}") for i in range(7)], complete=False)
    for entry in run["cells"][1:]:
        entry["status"] = "pending"
    run["evidence"] = [{"arm": "a", "stage": "reserve", "status": "pending"},
                       {"arm": "a", "stage": "telemetry", "status": "complete"}]  # fmt: skip
    evidence.run_manifest = run
    (reason,) = [u.reason for u in evaluate(evidence, POLICY, candidate="a").unmet
                 if u.rule == "complete"]  # fmt: skip
    assert reason == (
        "the campaign is not complete (a/s/c1, a/s/c2, a/s/c3, a/s/c4, a/s/c5 not complete)"
    )
    run["cells"] = run["cells"][:1]
    (reason,) = [u.reason for u in evaluate(evidence, POLICY, candidate="a").unmet
                 if u.rule == "complete"]  # fmt: skip
    assert reason == "the campaign is not complete (a/reserve not complete)"


def test_comparison_failures_count_successes_and_read_old_documents() -> None:
    _, document = _ab("d.json", "b", n=12, failed=3)
    assert comparison_failures(document, POLICY) == [
        "capacity/c1: 9 successful requests on b, the policy needs 10"
    ]
    _, legacy = _ab("d.json", "b", match_reasons=["sampling differs"])
    assert comparison_failures(legacy, POLICY) == ["sampling differs"]
    _, named = _ab("d.json", "b", match_reasons=["ignored"],
                   match_failures=[{"rule": "sampling", "reason": "sampling differs"}])  # fmt: skip
    assert comparison_failures(named, POLICY) == ["sampling differs"]


def test_the_closest_comparison_is_the_one_reported() -> None:
    evidence = Evidence(Path("."), "x", run_manifest=_run([("base", "s", "c"), ("b", "s", "c")]))
    evidence.comparisons = [
        _ab("derived/1.json", "b", match_reasons=["one", "two"]),
        _ab("derived/2.json", "b", match_reasons=["three"]),
    ]
    evaluation = evaluate(evidence, POLICY, candidate="b")
    assert evaluation.comparison == "derived/2.json"
    assert [u.reason for u in evaluation.unmet if u.rule == "matched-ab"] == [
        "derived/2.json: three"
    ]


def test_one_measured_request_is_enough_for_a_workload_gate() -> None:
    evidence = Evidence(Path("."), "x", run_manifest=_run([("a", "capacity", "c1")]))
    evidence.cells = {"a": [("a1", _cell("capacity", [None], warmup=1))]}
    (gate,) = promotion.stage_gates(evidence, "a", POLICY)
    assert (gate.passed, gate.requests) == (True, 1)


def test_between_equally_close_comparisons_the_first_path_is_reported() -> None:
    evidence = Evidence(Path("."), "x", run_manifest=_run([("base", "s", "c"), ("b", "s", "c")]))
    evidence.comparisons = [
        _ab("derived/2.json", "b", match_reasons=["aaa"]),
        _ab("derived/1.json", "b", match_reasons=["zzz"]),
    ]
    evaluation = evaluate(evidence, POLICY, candidate="b")
    assert evaluation.comparison == "derived/1.json"
    assert [u.reason for u in evaluation.unmet if u.rule == "matched-ab"] == ["derived/1.json: zzz"]


def test_a_comparison_of_no_cell_or_of_a_withheld_run_cannot_stand() -> None:
    evidence = Evidence(Path("."), "x", withheld=frozenset({"b/c1.json"}))
    row = {"sources": [{"path": "a/c1.json"}, {"path": "b/c1.json"}]}
    assert promotion._unchecked({"rows": []}, evidence) == ["it compares no cell"]
    assert promotion._unchecked({"rows": [row]}, evidence) == [
        "drawn from withheld b/c1.json: it cannot be derived again"
    ]
    assert promotion._unchecked({"rows": [row]}, Evidence(Path("."), "x")) == []
