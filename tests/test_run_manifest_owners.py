"""A run manifest's entries against what their artifacts say they are (runs.py)."""

from __future__ import annotations

from typing import Any

from ledger.evidence import runs

PLAN = {
    "arms": [{"name": "candidate"}],
    "stages": [{"name": "capacity", "cells": [{"id": "ctx256-c1"}, {"id": "ctx256-c4"}]}],
}


def _entry(stage: str, path: str, cell: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"arm": "candidate", "stage": stage, "artifact": {"path": path}}
    if cell is not None:
        entry["cell"] = cell
    return entry


def _manifest() -> dict[str, Any]:
    return {
        "cells": [
            _entry("capacity", "candidate/capacity/ctx256-c1.json", "ctx256-c1"),
            _entry("capacity", "candidate/capacity/ctx256-c4.json", "ctx256-c4"),
        ],
        "evidence": [_entry("reserve", "candidate/reserve.json")],
    }


OWNERS: dict[str, runs.Owner | None] = {
    "candidate/capacity/ctx256-c1.json": ("candidate", "capacity", "ctx256-c1"),
    "candidate/capacity/ctx256-c4.json": ("candidate", "capacity", "ctx256-c4"),
    "candidate/reserve.json": ("candidate", "reserve", None),
}


def _issues(manifest: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [
        (i.code, i.pointer, i.message) for i in runs.run_manifest_issues(manifest, PLAN, OWNERS)
    ]


def test_entries_that_are_their_artifacts_own_pass() -> None:
    assert _issues(_manifest()) == []


def test_a_cell_entry_pointing_at_its_sibling_cell_is_named() -> None:
    # The failing cell's entry pointed at the passing one: its gate would count it twice.
    manifest = _manifest()
    manifest["cells"][0]["artifact"] = {"path": "candidate/capacity/ctx256-c4.json"}
    assert _issues(manifest) == [
        (
            "run-manifest-mismatch",
            "/cells/0/artifact/path",
            (
                "listed for arm 'candidate', stage 'capacity', cell 'ctx256-c1', but the "
                "artifact says arm 'candidate', stage 'capacity', cell 'ctx256-c4'"
            ),
        )
    ]


def test_an_evidence_entry_pointing_at_another_stage_is_named() -> None:
    manifest = _manifest()
    manifest["evidence"][0]["artifact"] = {"path": "candidate/capacity/ctx256-c1.json"}
    assert _issues(manifest) == [
        (
            "run-manifest-mismatch",
            "/evidence/0/artifact/path",
            (
                "listed for arm 'candidate', stage 'reserve', but the artifact says arm "
                "'candidate', stage 'capacity', cell 'ctx256-c1'"
            ),
        )
    ]


def test_an_artifact_that_names_no_owner_is_not_anyones() -> None:
    owners = {**OWNERS, "candidate/reserve.json": None}
    (issue,) = runs.run_manifest_issues(_manifest(), PLAN, owners)
    assert issue.pointer == "/evidence/0/artifact/path"
    assert issue.message.endswith("but the artifact names no arm and stage")


def test_a_planned_cell_without_an_entry_is_named_once() -> None:
    manifest = _manifest()
    del manifest["cells"][1]
    assert _issues(manifest) == [
        (
            "run-manifest-mismatch",
            "/cells",
            (
                "no entry for arm 'candidate', stage 'capacity', cell 'ctx256-c4', which "
                "run-plan.json plans"
            ),
        )
    ]


def test_an_unread_artifact_is_left_to_its_own_finding() -> None:
    owners = {k: v for k, v in OWNERS.items() if k != "candidate/reserve.json"}
    manifest = _manifest()
    manifest["evidence"][0]["arm"] = "baseline"
    assert runs.run_manifest_issues(manifest, PLAN, owners) == []


def test_owner_of_reads_cell_runs_and_evidence_stages() -> None:
    cell_run = {"arm": "a", "stage": {"name": "capacity"}, "cell": {"id": "c1"}}
    assert runs.owner_of(cell_run) == ("a", "capacity", "c1")
    assert runs.owner_of({"arm": "a", "stage": "reserve"}) == ("a", "reserve", None)
    assert runs.owner_of({"arm": "a", "stage": {"name": "capacity"}, "cell": {}}) is None
    assert runs.owner_of({"stage": "reserve"}) is None
    assert runs.owner_of(["a"]) is None
