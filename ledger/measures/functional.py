"""The counts of a functional or quality gate, computed from its check records.

The runner writes them with these functions; verify recomputes them from the checks and
reports any count or verdict that disagrees (``gate-inconsistent``); the policy and
``ledger decide`` read gates through the same functions, so no stated count is trusted.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from ledger.findings import Issue

__all__ = [
    "CHECK_COUNTED",
    "DEFAULT_PASS_FRACTION",
    "KINDS",
    "REQUEST_COUNTED",
    "SCHEMA",
    "check_functional_gate",
    "gate_counts",
    "gate_detail",
    "summarize",
]

SCHEMA = "anvil-serving.functional-gate/v1"
CHECK_COUNTED = ("preflight", "thinking-control")
REQUEST_COUNTED = ("strict-output", "canary")
DEFAULT_PASS_FRACTION = 0.9


def _depths(checks: Sequence[dict[str, Any]], fraction: float) -> dict[str, Any]:
    by_depth: dict[int, dict[str, Any]] = {}
    for item in checks:
        depth = int(item["depth"])
        entry = by_depth.setdefault(
            depth,
            {
                "depth": depth,
                "attempts": 0,
                "passed": 0,
                "empty_length_terminated": 0,
                "incorrect_visible_answers": 0,
                "errors": 0,
                "prompt_tokens": [],
            },
        )
        entry["attempts"] += 1
        outcome = item.get("outcome")
        key = {
            "passed": "passed",
            "empty-at-length": "empty_length_terminated",
            "incorrect": "incorrect_visible_answers",
        }.get(str(outcome), "errors")
        entry[key] += 1
        tokens = (item.get("response") or {}).get("prompt_tokens")
        if isinstance(tokens, int):
            entry["prompt_tokens"].append(tokens)
    depths = []
    for depth in sorted(by_depth):
        entry = by_depth.pop(depth)
        tokens = sorted(entry.pop("prompt_tokens"))
        entry["prompt_tokens_median"] = tokens[len(tokens) // 2] if tokens else None
        entry["pass_fraction"] = entry["passed"] / entry["attempts"]
        depths.append(entry)
    effective = None
    for entry in depths:
        if entry["pass_fraction"] < fraction:
            break
        effective = entry["depth"]
    fractions = [e["pass_fraction"] for e in depths]
    non_monotonic = any(later > earlier for earlier, later in itertools.pairwise(fractions))
    return {
        "attempts": sum(e["attempts"] for e in depths),
        "passed_attempts": sum(e["passed"] for e in depths),
        "empty_length_terminated": sum(e["empty_length_terminated"] for e in depths),
        "incorrect_visible_answers": sum(e["incorrect_visible_answers"] for e in depths),
        "errors": sum(e["errors"] for e in depths),
        "depths": depths,
        "pass_fraction": fraction,
        "effective_context": effective,
        "non_monotonic": non_monotonic,
        "passed": bool(depths) and all(f >= fraction for f in fractions),
    }


def summarize(
    kind: str, checks: Sequence[dict[str, Any]], settings: dict[str, Any]
) -> dict[str, Any]:
    """The counts and verdict a gate artifact states, from its checks."""
    verdicts = [c["verdict"] for c in checks]
    passed = verdicts.count("passed")
    if kind in CHECK_COUNTED:
        applicable = len(verdicts) - verdicts.count("not-applicable")
        return {
            "checks": applicable,
            "checks_passed": passed,
            "not_applicable": [c["name"] for c in checks if c["verdict"] == "not-applicable"],
            "passed": applicable > 0 and passed == applicable,
        }
    if kind in REQUEST_COUNTED:
        failed = len(verdicts) - passed
        return {
            "requests": len(verdicts),
            "completed": passed,
            "failed": failed,
            "performance_eligible": failed == 0,
            "passed": bool(verdicts) and failed == 0,
        }
    if kind == "context-quality":
        return _depths(checks, float(settings.get("pass_fraction", DEFAULT_PASS_FRACTION)))
    if kind == "coding-quality":
        required = float(settings.get("required_pass_rate", 1.0))
        return {
            "attempts": len(verdicts),
            "passed_attempts": passed,
            "required_pass_rate": required,
            "passed": bool(verdicts) and passed / len(verdicts) >= required,
        }
    raise ValueError(f"unknown functional gate kind {kind!r}")


def check_functional_gate(document: dict[str, Any]) -> list[Issue]:
    """Each stated count and verdict against what the check records give."""
    expected = summarize(document["kind"], document["records"], document["settings"])
    found = []
    for key, value in expected.items():
        if key in document and document[key] != value:
            found.append(
                Issue(
                    "gate-inconsistent",
                    f"/{key}",
                    f"{document['kind']} gate states {key} {document[key]!r}; its checks give {value!r}",
                )
            )
        elif key not in document:
            found.append(
                Issue("gate-inconsistent", f"/{key}", f"{document['kind']} gate lacks {key}")
            )
    return found


KINDS = (
    "preflight",
    "thinking-control",
    "strict-output",
    "canary",
    "context-quality",
    "coding-quality",
)

_GATE_COUNTS = {
    "preflight": ("checks_passed", "checks"),
    "thinking-control": ("checks_passed", "checks"),
    "strict-output": ("requests", "completed", "failed", "performance_eligible"),
    "canary": ("requests", "completed", "failed", "performance_eligible"),
    "context-quality": (
        "attempts",
        "passed_attempts",
        "empty_length_terminated",
        "incorrect_visible_answers",
    ),
    "coding-quality": ("attempts", "passed_attempts"),
}


def gate_counts(kind: str, summary: dict[str, Any]) -> dict[str, Any]:
    """The counts a decision summary's gate carries, in the seeds' field names."""
    return {key: summary[key] for key in _GATE_COUNTS[kind]}


def gate_detail(kind: str, summary: dict[str, Any], records: Sequence[dict[str, Any]]) -> str:
    """One line for a person: the counts, and what the seeds' details say."""
    if kind in CHECK_COUNTED:
        parts = [f"{summary['checks_passed']}/{summary['checks']} checks"]
        for item in records:
            if (
                item["name"] in ("tools", "long-tool-prompt")
                and item["verdict"] != "not-applicable"
            ):
                parts.append(f"{item['name']}: {item['detail']}")
        failed = [r["name"] for r in records if r["verdict"] == "failed"]
        if failed:
            parts.append("failed: " + ", ".join(failed))
        if summary.get("not_applicable"):
            parts.append("not applicable: " + ", ".join(summary["not_applicable"]))
        return "; ".join(parts)
    if kind in REQUEST_COUNTED:
        eligible = "" if summary["performance_eligible"] else "; not performance-eligible"
        return f"{summary['completed']}/{summary['requests']} requests as asked{eligible}"
    if kind == "context-quality":
        curve = ", ".join(f"{d['depth']}: {d['passed']}/{d['attempts']}" for d in summary["depths"])
        shape = "; non-monotonic" if summary["non_monotonic"] else ""
        return (
            f"{summary['passed_attempts']}/{summary['attempts']} attempts; effective context "
            f"{summary['effective_context']} at pass fraction {summary['pass_fraction']}; "
            f"by depth {curve}{shape}"
        )
    return f"{summary['passed_attempts']}/{summary['attempts']} attempts"
