"""The floor under every summary: gates against their own counts, promotion against its
evidence. Each case breaks one relation and names the finding it must give."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from ledger.evidence import gate
from ledger.formats.models import BenchmarkDecisionSummary, Gate, GateSummary, structure
from tests.conftest import SEEDS

COMPARISON_SEED = SEEDS / "2026-09-08-glm53-linux-wsl-comparison.summary.json"

# (gate fields, the findings as (code, pointer below the gate))
GATES: list[tuple[dict[str, Any], list[tuple[str, str]]]] = [
    ({"checks": 3, "checks_passed": 3, "passed": True}, []),
    ({"checks": 3, "checks_passed": 4}, [("gate-inconsistent", "/checks_passed")]),
    ({"checks": 3, "checks_passed": 2, "passed": True}, [("gate-inconsistent", "/passed")]),
    ({"checks": 3, "checks_passed": 2, "passed": False}, []),
    ({"checks": 3, "checks_passed": 3, "passed": False}, [("gate-failed-all-passed", "/passed")]),
    ({"checks": 3, "passed": True}, []),  # one count alone is not compared
    ({"checks_passed": 3, "passed": False}, []),
    ({"attempts": 2, "passed_attempts": 3}, [("gate-inconsistent", "/passed_attempts")]),
    ({"attempts": 3, "passed_attempts": 3}, []),
    ({"passed_attempts": 3}, []),
    ({"attempts": 3}, []),
    ({"status": "passed", "passed": False}, [("gate-inconsistent", "/status")]),
    ({"status": "failed", "passed": True}, [("gate-inconsistent", "/status")]),
    ({"status": "failed", "passed": False}, []),
    ({"status": "passed"}, []),
    ({"requests": 5, "completed": 4, "failed": 1}, []),
    ({"requests": 5, "completed": 4, "failed": 0}, [("gate-count-mismatch", "/requests")]),
    ({"requests": 5, "completed": 4}, []),
    ({"summary": GateSummary(attempted=2, passed=3)}, [("gate-inconsistent", "/summary/passed")]),
    ({"summary": GateSummary(attempted=4, passed=2, pass_rate=0.5)}, []),
    ({"summary": GateSummary(attempted=4, passed=2)}, []),
    (
        {"summary": GateSummary(attempted=4, passed=2, pass_rate=0.5000001)},
        [("gate-rate-mismatch", "/summary/pass_rate")],
    ),
    (
        {"summary": GateSummary(attempted=0, passed=0, pass_rate=0.0)},
        [("gate-rate-mismatch", "/summary/pass_rate")],  # no rate out of nothing
    ),
    (
        {"summary": GateSummary(attempted=5, passed=0, pass_rate=1.5e-12)},
        [("gate-rate-mismatch", "/summary/pass_rate")],  # the absolute tolerance is 1e-12
    ),
    ({"summary": GateSummary(attempted=5, passed=0, pass_rate=0.5e-12)}, []),
    # The first pair is absent; the second is still checked.
    ({"summary": GateSummary(graded=2, resolved=3)}, [("gate-inconsistent", "/summary/resolved")]),
    (
        {"summary": GateSummary(graded=4, resolved=1, resolve_rate=0.5)},
        [("gate-rate-mismatch", "/summary/resolve_rate")],
    ),
]


@pytest.mark.parametrize(("fields", "expected"), GATES)
def test_each_gate_relation(fields: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    found = gate.check_gate(Gate(name="g", **fields), "/gates/4")
    assert [(i.code, i.pointer) for i in found] == [(c, "/gates/4" + p) for c, p in expected]


def _seed() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(COMPARISON_SEED.read_text())
    return document


def _summary(document: dict[str, Any]) -> BenchmarkDecisionSummary:
    return structure(document, BenchmarkDecisionSummary)


def _expected_sources(headline: dict[str, Any], base: str) -> list[tuple[str, str]]:
    """Every source named in the document, found by walking it as JSON."""
    found = []
    blocks = [(f"rows/{i}", row) for i, row in enumerate(headline["rows"])]
    if headline.get("endurance"):
        blocks.append(("endurance", headline["endurance"]))
    for where, block in blocks:
        for key in ("windows_source", "linux_source"):
            if block.get(key) is not None:
                value = block[key]
                found.append((f"{base}/{where}/{key}", value if isinstance(value, str)
                              else value["path"]))  # fmt: skip
        for j, ref in enumerate(block.get("sources") or ()):
            found.append((f"{base}/{where}/sources/{j}", ref["path"]))
    return found


def test_headline_sources_name_every_source() -> None:
    document = _seed()
    headline = document["headline_results"]
    # Give the first row and the endurance block a list of references as well.
    ref = {"path": "raw/extra.json", "sha256": "a" * 64}
    headline["rows"][0]["sources"] = [ref, {**ref, "path": "raw/other.json"}]
    headline["endurance"]["sources"] = [ref]
    summary = _summary(document)
    found = gate.headline_sources(summary.headline_results, "/headline_results")  # type: ignore[arg-type]
    assert found == _expected_sources(headline, "/headline_results")
    pointers = [p for p, _ in found]
    for suffix in ("windows_source", "linux_source", "sources/0", "sources/1"):
        assert f"/headline_results/rows/0/{suffix}" in pointers
    for suffix in ("windows_source", "linux_source", "sources/0"):
        assert f"/headline_results/endurance/{suffix}" in pointers


def test_headline_without_endurance_names_the_rows_only() -> None:
    document = _seed()
    del document["headline_results"]["endurance"]
    found = gate.headline_sources(_summary(document).headline_results, "")  # type: ignore[arg-type]
    assert found and all(p.startswith("/rows/") for p, _ in found)


def _authorized(**changes: Any) -> dict[str, Any]:
    document = copy.deepcopy(_seed())
    document["decision"]["promotion_authorized"] = True
    document["decision"]["decision_labels"] = ["verified"]
    document["identity"]["promotion_authorized"] = True
    document.update(changes)
    return document


# The seed's own findings (a gate that failed with all its checks passed), left as they are.
SEED_CODES = ["gate-failed-all-passed"]


def _codes(found: list[Any]) -> list[str]:
    return [i.code for i in found if i.code not in SEED_CODES]


def test_the_seed_has_only_its_known_findings() -> None:
    assert [i.code for i in gate.check_summary(_summary(_seed()))] == SEED_CODES
    assert _codes(gate.check_summary(_summary(_authorized()))) == []


def test_identity_and_decision_must_agree() -> None:
    document = _authorized()
    document["identity"]["promotion_authorized"] = False
    found = [i for i in gate.check_summary(_summary(document)) if i.code not in SEED_CODES]
    assert [(i.code, i.pointer) for i in found] == [
        ("decision-inconsistent", "/identity/promotion_authorized")
    ]


def test_promotion_of_an_incomplete_campaign() -> None:
    found = gate.check_summary(_summary(_authorized(complete=False)))
    found = [i for i in found if i.code not in SEED_CODES]
    assert [(i.code, i.pointer) for i in found] == [
        ("promotion-incomplete", "/decision/promotion_authorized")
    ]


def test_promotion_under_a_blocking_label() -> None:
    document = _authorized()
    document["decision"]["decision_labels"] = ["verified", "rejected", "no-promotion"]
    found = [i for i in gate.check_summary(_summary(document)) if i.code not in SEED_CODES]
    assert _codes(found) == ["promotion-contradicts-label"]
    assert found[0].message == "promotion authorized but labelled no-promotion, rejected"


@pytest.mark.parametrize(
    ("kinds", "codes"),
    [
        ((), ["promotion-without-ab", "promotion-without-reserve"]),
        (("ab-comparison",), ["promotion-without-reserve"]),
        (("gpu-reserve", "cell-run"), ["promotion-without-ab"]),
        (("gpu-reserve", "ab-comparison"), []),
    ],
)
def test_promotion_needs_ab_and_reserve_artifacts(kinds: tuple[str, ...], codes: list[str]) -> None:
    found = gate.check_promotion_evidence(_summary(_authorized()), iter(kinds))
    assert _codes(found) == codes
    assert all(i.pointer == "/decision/promotion_authorized" for i in found)


def test_no_promotion_needs_no_evidence() -> None:
    assert gate.check_promotion_evidence(_summary(_seed()), []) == []
