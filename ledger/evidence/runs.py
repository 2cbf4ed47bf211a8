"""Checks of raw run documents (``cell-run/v1``, ``run-manifest/v1``) on their own.

A request record must agree with itself: times in order (sent, headers, first token,
last token, end), one channel letter per chunk time, counts that match, and flags that
say what the numbers say. A record that does not was edited or written by a broken
runner, and nothing derived from it can be trusted.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from typing import Any

import attrs

from ledger.findings import Issue
from ledger.measures import arrivals

__all__ = [
    "Owner",
    "SweepCell",
    "check_cell_run",
    "check_run_manifest",
    "check_sweeps",
    "entry_owner",
    "owner_mismatch",
    "owner_of",
    "run_manifest_issues",
    "sweep_cell",
    "unlisted_planned_cells",
]

_RATE_CELL = re.compile(r"-r[0-9]+(?:_[0-9]+)?-(?:think|nothink)$")
_ORDER = ("sent_ns", "headers_ns", "first_token_ns", "last_token_ns", "end_ns")


def _record_issues(record: dict[str, Any], base: str) -> list[Issue]:
    found = []

    def bad(field: str, message: str) -> None:
        found.append(Issue("record-inconsistent", f"{base}/{field}", message))

    times = [(name, record[name]) for name in _ORDER if record[name] is not None]
    for (earlier, a), (later, b) in itertools.pairwise(times):
        if b < a:
            bad(later, f"{later} {b} is before {earlier} {a}")
            break
    chunks = record["chunks_ns"]
    if len(record["chunk_channels"]) != len(chunks):
        bad("chunk_channels", f"{len(record['chunk_channels'])} channels for {len(chunks)} chunks")
    if record["chunk_tokens"] != len(chunks):
        bad("chunk_tokens", f"chunk_tokens {record['chunk_tokens']} but {len(chunks)} chunk times")
    if any(b < a for a, b in itertools.pairwise(chunks)):
        bad("chunks_ns", "chunk times are not in order")
    if chunks and (record["first_token_ns"], record["last_token_ns"]) != (chunks[0], chunks[-1]):
        bad("first_token_ns", "first/last token times differ from the first/last chunk times")
    content = record["first_content_ns"]
    if content is not None and content not in chunks:
        bad("first_content_ns", "first_content_ns is not the time of any chunk")
    usage = record["usage"] or {}
    completion = usage.get("completion_tokens")
    expected = None if completion is None else completion != len(chunks)
    if record["usage_mismatch"] != expected:
        bad(
            "usage_mismatch",
            f"usage_mismatch is {record['usage_mismatch']} but usage says {completion} "
            f"completion tokens and the stream had {len(chunks)}",
        )
    return found


def check_cell_run(document: dict[str, Any]) -> list[Issue]:
    """Self-consistency of a schema-valid cell-run document."""
    found: list[Issue] = []
    if document["status"] != "complete":
        found.append(
            Issue("run-incomplete", "/status", f"the cell is incomplete: {document['reason']}")
        )
    seen: set[tuple[bool, int]] = set()
    measured = 0
    for index, record in enumerate(document["requests"]):
        base = f"/requests/{index}"
        key = (record["warmup"], record["index"])
        if key in seen:
            found.append(
                Issue("record-inconsistent", f"{base}/index", f"request {key[1]} appears twice")
            )
        seen.add(key)
        measured += not record["warmup"]
        found.extend(_record_issues(record, base))
    wanted = document["cell"]["requests"]
    if document["status"] == "complete" and measured != wanted:
        found.append(
            Issue(
                "record-inconsistent",
                "/requests",
                f"a complete cell holds {measured} measured requests, cell.requests is {wanted}",
            )
        )
    found.extend(_open_loop_issues(document))
    return found


def _open_loop_issues(document: dict[str, Any]) -> list[Issue]:
    """Due times where they belong: on the measured requests of a load cell, each at or
    before its send; and a load cell's arrival settings in place."""
    cell = document["cell"]
    # A cell named for a rate (a load stage's, a sweep's) is open-loop; any other is not.
    load = _RATE_CELL.search(cell["id"]) is not None
    if load != ("arrival" in cell):
        return [
            Issue(
                "record-inconsistent",
                "/cell",
                "an open-loop cell without its arrival settings"
                if load
                else "arrival settings on a closed-loop cell",
            )
        ]
    found = []
    for position, record in enumerate(document["requests"]):
        due = record.get("scheduled_ns")
        if due is None:
            if load and not record["warmup"]:
                found.append(
                    Issue(
                        "record-inconsistent",
                        f"/requests/{position}",
                        "a measured request of an open-loop cell without its due time",
                    )
                )
        elif not load or record["warmup"]:
            found.append(
                Issue(
                    "record-inconsistent",
                    f"/requests/{position}/scheduled_ns",
                    "a due time on a request that was never due (a warm-up, or a closed loop)",
                )
            )
        elif record["sent_ns"] < due:
            found.append(
                Issue(
                    "record-inconsistent",
                    f"/requests/{position}/sent_ns",
                    f"sent at {record['sent_ns']}, before it was due at {due}",
                )
            )
    if load:
        found.extend(_schedule_issues(document))
    return found


def _schedule_issues(document: dict[str, Any]) -> list[Issue]:
    """An open-loop cell against the schedule its settings give, and its stated lateness
    against its records."""
    cell = document["cell"]
    stated = cell["arrival"]
    try:
        offsets = arrivals.offsets_ns(arrivals.Arrivals.from_json(stated), cell["id"])
    except ValueError as e:
        return [Issue("schedule-mismatch", "/cell/arrival", f"no schedule follows: {e}")]
    found = []
    if cell["requests"] != len(offsets):
        found.append(
            Issue(
                "schedule-mismatch",
                "/cell/requests",
                f"the schedule holds {len(offsets)} requests, cell.requests is {cell['requests']}",
            )
        )
    sweep = stated.get("sweep")
    if (sweep is not None) != (document["stage"]["kind"] == "sweep"):
        found.append(
            Issue(
                "schedule-mismatch",
                "/cell/arrival",
                "a sweep's rate cell without the record of how its rate was chosen"
                if sweep is None
                else "a record of a sweep on a cell that is not a sweep's",
            )
        )
    if sweep is not None:
        rate = arrivals.sweep_rate(
            sweep["synchronous_rps"], sweep["ceiling_rps"], sweep["position"], sweep["of"]
        )
        if stated["rate"] != rate or sweep["position"] > sweep["of"]:
            found.append(
                Issue(
                    "schedule-mismatch",
                    "/cell/arrival/rate",
                    f"rate {stated['rate']}, but position {sweep['position']} of {sweep['of']} "
                    f"between {sweep['synchronous_rps']} and {sweep['ceiling_rps']} req/s is "
                    f"{rate}",
                )
            )
    cap = stated["max_in_flight"] or arrivals.MAX_IN_FLIGHT
    if cell["concurrency"] != cap:
        found.append(
            Issue(
                "schedule-mismatch",
                "/cell/concurrency",
                f"concurrency {cell['concurrency']}, but at most {cap} were in flight",
            )
        )
    # Measured request i (after the warm-ups) was due at offset i: an interrupted cell
    # lacks the requests cancelled in flight, so the index decides, not the order.
    for position, record in enumerate(document["requests"]):
        if record["warmup"] or record.get("scheduled_ns") is None:
            continue
        order = record["index"] - cell["warmup"]
        expected = stated["start_ns"] + offsets[order] if 0 <= order < len(offsets) else None
        if record["scheduled_ns"] != expected:
            found.append(
                Issue(
                    "schedule-mismatch",
                    f"/requests/{position}/scheduled_ns",
                    f"due at {record['scheduled_ns']}, but the schedule of the cell's settings "
                    f"says {expected}",
                )
            )
            break
    # The threshold is the ledger's, not the document's: raising it would clear the flag.
    recomputed = arrivals.lateness(document["requests"])
    for key, value in recomputed.items():
        if stated["lateness"][key] != value:
            found.append(
                Issue(
                    "derived-mismatch",
                    f"/cell/arrival/lateness/{key}",
                    f"{key} is {stated['lateness'][key]}, the records give {value}",
                )
            )
    return found


def check_run_manifest(document: dict[str, Any]) -> list[Issue]:
    """A run manifest that says the run is incomplete, and cells that disagree with it."""
    found = []
    statuses = [cell["status"] for cell in document["cells"]]
    all_complete = all(s == "complete" for s in statuses)
    if document["complete"] != all_complete:
        found.append(
            Issue(
                "record-inconsistent",
                "/complete",
                f"complete is {document['complete']} but "
                f"{sum(s == 'complete' for s in statuses)} of {len(statuses)} cells are",
            )
        )
    elif not all_complete:
        pending = len(statuses) - sum(s == "complete" for s in statuses)
        found.append(
            Issue(
                "run-incomplete", "/complete", f"{pending} of {len(statuses)} cells did not finish"
            )
        )
    return found


@attrs.frozen
class SweepCell:
    """What the campaign-level check of a sweep needs from one of its cells."""

    arm: str
    stage: str
    cell: str
    completed_rps: float
    """Its successful requests per second (what a probe cell measured)."""
    chosen: tuple[float, float, str, str, str] | None
    """A rate cell's record of how its rate was chosen: the synchronous rate, the ceiling,
    and the arm and two probe cells they came from. None for a probe cell."""


def sweep_cell(document: dict[str, Any]) -> SweepCell | None:
    """A sweep stage's cell, as the campaign-level check reads it; None for any other."""
    if document["stage"]["kind"] != "sweep":
        return None
    record = (document["cell"].get("arrival") or {}).get("sweep")
    chosen = None
    if record is not None:
        came = record["from"]
        chosen = (
            record["synchronous_rps"], record["ceiling_rps"], came["arm"], came["synchronous"],
            came["ceiling"],
        )  # fmt: skip
    return SweepCell(
        document["arm"],
        document["stage"]["name"],
        document["cell"]["id"],
        arrivals.completed_rate(document["requests"]),
        chosen,
    )


def check_sweeps(cells: Sequence[tuple[str, SweepCell]]) -> list[tuple[str, Issue]]:
    """Each sweep's rate cells against the probe cells their rates came from: the two
    rates each records must be what those probes measured, and every rate cell of a stage
    must name the same probes (one measurement chose every arm's rates)."""
    probes = {(c.arm, c.stage, c.cell): c.completed_rps for _, c in cells if c.chosen is None}
    named: dict[str, set[tuple[str, str, str]]] = {}
    found: list[tuple[str, Issue]] = []
    for rel, cell in cells:
        if cell.chosen is None:
            continue
        synchronous, ceiling, arm, sync_cell, ceiling_cell = cell.chosen
        named.setdefault(cell.stage, set()).add((arm, sync_cell, ceiling_cell))
        for key, stated, probe in (
            ("synchronous_rps", synchronous, sync_cell),
            ("ceiling_rps", ceiling, ceiling_cell),
        ):
            measured = probes.get((arm, cell.stage, probe))
            if measured is None:
                message = f"its rate came from {arm}/{cell.stage}/{probe}, which is not here"
            elif measured != stated:
                message = f"{key} {stated}, but {arm}/{cell.stage}/{probe} measured {measured}"
            else:
                continue
            found.append((rel, Issue("schedule-mismatch", f"/cell/arrival/sweep/{key}", message)))
    for stage, sources in sorted(named.items()):
        if len(sources) > 1:
            shown = "; ".join(f"{a}: {s}, {c}" for a, s, c in sorted(sources))
            found.extend(
                (rel, Issue("schedule-mismatch", "/cell/arrival/sweep/from",
                            f"the rate cells of sweep {stage} came from different probes ({shown})"))
                for rel, cell in cells
                if cell.chosen is not None and cell.stage == stage
            )  # fmt: skip
    return found


Owner = tuple[str, str, str | None]
"""(arm, stage, cell) of a run's artifact; the cell is None for an evidence stage's."""


def owner_of(document: Any) -> Owner | None:
    """Whose artifact a cell run or evidence stage says it is; None when it names none."""
    if not isinstance(document, dict) or not isinstance(document.get("arm"), str):
        return None
    stage = document.get("stage")
    if isinstance(stage, dict):  # a cell run: its stage by name, and its cell
        cell = document.get("cell")
        name, cell_id = stage.get("name"), cell.get("id") if isinstance(cell, dict) else None
        if isinstance(name, str) and isinstance(cell_id, str):
            return document["arm"], name, cell_id
        return None
    return (document["arm"], stage, None) if isinstance(stage, str) else None


def entry_owner(entry: dict[str, Any]) -> Owner:
    """Whose artifact a run manifest's entry (under ``cells`` or ``evidence``) lists."""
    cell = entry.get("cell")
    return str(entry["arm"]), str(entry["stage"]), cell if isinstance(cell, str) else None


def owner_mismatch(entry: dict[str, Any], owner: Owner | None) -> str | None:
    """Why a listed artifact is not the entry's (another arm's reserve reading listed as the
    candidate's would pass its gate), or None when it is."""
    listed = entry_owner(entry)
    if owner == listed:
        return None
    said = "names no arm and stage" if owner is None else f"says {_owner_words(owner)}"
    return f"listed for {_owner_words(listed)}, but the artifact {said}"


def _owner_words(owner: Owner) -> str:
    arm, stage, cell = owner
    return f"arm {arm!r}, stage {stage!r}" + (f", cell {cell!r}" if cell is not None else "")


def unlisted_planned_cells(run_manifest: dict[str, Any], plan: Any) -> list[Owner]:
    """Cells the plan names for an arm that the run manifest does not list: a cell dropped
    from both the folder and the run manifest would leave its stage's gate passing. (A
    sweep's rate cells are found while it runs; its probe cells are planned.)"""
    if not isinstance(plan, dict):
        return []
    listed = {entry_owner(entry) for entry in run_manifest.get("cells", ())}
    missing: list[Owner] = []
    for arm in plan.get("arms") or ():
        for stage in plan.get("stages") or ():
            for cell in stage.get("cells") or ():
                owner = (str(arm.get("name")), str(stage.get("name")), str(cell.get("id")))
                if owner not in listed:
                    missing.append(owner)
    return missing


def run_manifest_issues(
    run_manifest: dict[str, Any], plan: Any, owners: dict[str, Owner | None]
) -> list[Issue]:
    """The run manifest against the plan and against the artifacts it lists (``owners``:
    path -> what the artifact says it is, for those that could be read)."""
    found = [
        Issue(
            "run-manifest-mismatch",
            "/cells",
            f"no entry for {_owner_words(owner)}, which run-plan.json plans",
        )
        for owner in unlisted_planned_cells(run_manifest, plan)
    ]
    for section in ("cells", "evidence"):
        for index, entry in enumerate(run_manifest.get(section, ())):
            artifact = entry.get("artifact")
            if not isinstance(artifact, dict) or artifact.get("path") not in owners:
                continue
            mismatch = owner_mismatch(entry, owners[artifact["path"]])
            if mismatch is not None:
                found.append(
                    Issue("run-manifest-mismatch", f"/{section}/{index}/artifact/path", mismatch)
                )
    return found
