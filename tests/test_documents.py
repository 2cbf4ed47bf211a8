"""The single-document checks: every stated change recomputed from its own row."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from ledger.evidence import documents
from tests.conftest import ASSETS, built_once, run_plan_text

PREFLIGHT_PLAN = """
campaign_id = "2026-11-29-documents"
seed = 4
[[arms]]
name = "sim"
[arms.simulated]
decode_tok_s = 5000.0
prefill_tok_s = 2000000.0
overhead_ms = 0.0
[[stages]]
kind = "preflight"
long_tool_tokens = 600
"""


@pytest.fixture(scope="module")
def answered_preflight(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    campaign = built_once(
        "preflight", tmp_path_factory, lambda folder: run_plan_text(PREFLIGHT_PLAN, folder)[1]
    )
    gate: dict[str, Any] = json.loads((campaign / "sim" / "preflight.json").read_text())
    return gate


def _os(windows: float, linux: float, stated: float | None) -> dict[str, Any]:
    metric = {"windows": windows, "linux": linux, "change_percent": stated}
    return {"rows": [{"metrics": {"decode": metric}}]}


def _ab(baseline: float, candidate: float, stated: float | None) -> dict[str, Any]:
    metric = {"baseline": baseline, "candidate": candidate, "change_percent": stated}
    return {"rows": [{"metrics": {"decode": metric}}]}


# (baseline, candidate, stated, agrees): the stated change against the recomputed one.
CASES = [
    (1.0, 1.5, 50.0, True),  # a baseline of one is a baseline like any other
    (200.0, 150.0, -25.0, True),
    (200.0, 150.0, 25.0, False),  # the sign matters
    (200.0, 150.0, -25.0 * (1 + 5e-9), False),  # just outside one in a billion
    (200.0, 150.0, -25.0 * (1 + 5e-10), True),
    (0.0, 5.0, None, True),  # no change from zero: None, and None is stated
    (0.0, 5.0, 5.0, False),  # a change stated from a zero baseline
    (4.0, 5.0, None, False),  # a change left out
    (7.0, 7.0, 0.0, True),
    (7.0, 7.0, 1.5e-12, False),  # the absolute tolerance is 1e-12, not more
    (7.0, 7.0, 0.5e-12, True),
]


@pytest.mark.parametrize(("baseline", "candidate", "stated", "agrees"), CASES)
def test_os_change_recomputed(
    baseline: float, candidate: float, stated: float | None, agrees: bool
) -> None:
    issues = documents.check_comparison(_os(baseline, candidate, stated), "/headline_results")
    if agrees:
        assert issues == []
    else:
        (issue,) = issues
        assert issue.code == "derived-mismatch"
        assert issue.pointer == "/headline_results/rows/0/metrics/decode/change_percent"
        assert f"(windows {baseline}, linux {candidate})" in issue.message


@pytest.mark.parametrize(("baseline", "candidate", "stated", "agrees"), CASES)
def test_ab_change_recomputed(
    baseline: float, candidate: float, stated: float | None, agrees: bool
) -> None:
    comparison = _ab(baseline, candidate, stated)
    # A second metric after it: one mismatch does not stop the check of the rest.
    comparison["rows"][0]["metrics"]["ttft"] = {"baseline": 2.0, "candidate": 1.0,
                                                "change_percent": 40.0}  # fmt: skip
    issues = documents.check_ab_comparison(comparison)
    pointers = [i.pointer for i in issues]
    wrong_ttft = "/rows/0/metrics/ttft/change_percent"
    assert pointers == ([] if agrees else ["/rows/0/metrics/decode/change_percent"]) + [wrong_ttft]
    assert all(i.code == "derived-mismatch" for i in issues)


@pytest.mark.parametrize(("baseline", "candidate", "stated", "agrees"), CASES)
def test_endurance_change_recomputed(
    baseline: float, candidate: float, stated: float | None, agrees: bool
) -> None:
    comparison = {
        "rows": [],
        "endurance": {
            "decode_windows": baseline,
            "decode_linux": candidate,
            "decode_change_percent": stated,
        },
    }
    issues = documents.check_comparison(comparison, "")
    assert [i.pointer for i in issues] == ([] if agrees else ["/endurance/decode_change_percent"])


def test_change_percent_of_a_baseline_of_one() -> None:
    assert documents.change_percent(1.0, 3.0) == 200.0
    assert documents.change_percent(0.0, 3.0) is None


def test_a_run_manifest_is_checked_against_its_cells(two_arm_campaign: Path) -> None:
    run = json.loads((two_arm_campaign / "run-manifest.json").read_text())
    assert documents.check_document(run).issues == ()
    run["complete"] = False
    (issue,) = documents.check_document(run).issues
    assert (issue.code, issue.pointer) == ("record-inconsistent", "/complete")
    run["cells"][0]["status"] = "incomplete"
    (issue,) = documents.check_document(run).issues
    assert (issue.code, issue.pointer) == ("run-incomplete", "/complete")


def test_a_functional_gate_is_checked_against_its_records(answered_preflight: Any) -> None:
    gate = copy.deepcopy(answered_preflight)
    assert documents.check_document(gate).issues == ()
    gate["checks_passed"] -= 1
    (issue,) = documents.check_document(gate).issues
    assert (issue.code, issue.pointer) == ("gate-inconsistent", "/checks_passed")


def test_references_are_found_unless_the_text_cannot_hold_one() -> None:
    document = json.loads((ASSETS / "verify/valid/2026-11-01-asset-campaign/summary.json")
                          .read_text())  # fmt: skip
    document["evidence"] = [{"path": "raw/linux.log", "sha256": "a" * 64}]
    (found,) = documents.check_document(document).references
    assert (found.pointer, found.path) == ("/evidence/0", "raw/linux.log")
    assert documents.check_document(document, may_reference=False).references == ()
