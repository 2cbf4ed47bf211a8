"""Checks of raw run documents (``cell-run/v1`` and ``v2``, ``run-manifest/v1``) on their
own; a v2 cell run with the parts that hold its records.

A request record must agree with itself: times in order (sent, headers, first token,
last token, end), one channel letter per chunk time, counts that match, and flags that
say what the numbers say. A record that does not was edited or written by a broken
runner, and nothing derived from it can be trusted.
"""

from __future__ import annotations

import functools
import itertools
import re
import stat
from array import array
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from ledger.errors import InvalidArtifact
from ledger.findings import Issue
from ledger.formats import cell_records, jsonio, schema
from ledger.measures import arrivals

__all__ = [
    "Owner",
    "PartsCheck",
    "SweepCell",
    "check_cell_parts",
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


def _times_issue(record: dict[str, Any], base: str) -> Issue | None:
    """The first of a record's times (sent, headers, first token, last token, end) that
    comes before the one it follows."""
    times = [(name, record[name]) for name in _ORDER if record[name] is not None]
    for (earlier, a), (later, b) in itertools.pairwise(times):
        if b < a:
            return Issue(
                "record-inconsistent", f"{base}/{later}", f"{later} {b} is before {earlier} {a}"
            )
    return None


def _usage_issue(record: dict[str, Any], chunks: int, base: str) -> Issue | None:
    """A usage_mismatch flag that does not say what usage and the chunk count say."""
    usage = record["usage"] or {}
    completion = usage.get("completion_tokens")
    expected = None if completion is None else completion != chunks
    if record["usage_mismatch"] == expected:
        return None
    return Issue(
        "record-inconsistent",
        f"{base}/usage_mismatch",
        f"usage_mismatch is {record['usage_mismatch']} but usage says {completion} "
        f"completion tokens and the stream had {chunks}",
    )


def _record_issues(record: dict[str, Any], base: str) -> list[Issue]:
    found = [i for i in (_times_issue(record, base),) if i is not None]

    def bad(field: str, message: str) -> None:
        found.append(Issue("record-inconsistent", f"{base}/{field}", message))

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
    usage = _usage_issue(record, len(chunks), base)
    return found if usage is None else [*found, usage]


def _record_issues_v2(record: dict[str, Any], base: str) -> list[Issue]:
    """:func:`_record_issues` of a v2 record, whose chunk times are compact."""
    found = [i for i in (_times_issue(record, base),) if i is not None]

    def bad(field: str, message: str) -> None:
        found.append(Issue("record-inconsistent", f"{base}/{field}", message))

    first = record["first_token_ns"]
    try:
        offsets = cell_records.decode_chunks(record["chunks_us"])
    except ValueError as e:
        bad("chunks_us", f"not chunk times: {e}")
        return found
    if first is None:
        if record["chunks_us"] or record["channel_runs"]:
            bad("chunks_us", "chunk times without a first token time")
            return found
        offsets = []
    channels = cell_records.channel_count(record["channel_runs"])
    if channels != len(offsets):
        bad("channel_runs", f"{channels} channels for {len(offsets)} chunk times")
    last = record["last_token_ns"]
    if offsets and (last is None or cell_records.offset_us(first, last) != offsets[-1]):
        bad("last_token_ns", "first/last token times differ from the first/last chunk times")
    content = record["first_content_ns"]
    if content is not None and (
        first is None or cell_records.offset_us(first, content) not in set(offsets)
    ):
        bad("first_content_ns", "first_content_ns is not the time of any chunk")
    usage = _usage_issue(record, len(offsets), base)
    return found if usage is None else [*found, usage]


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


def _arrival_issue(cell: dict[str, Any]) -> tuple[bool, Issue | None]:
    """Whether a cell is open-loop, and the issue when its arrival settings say otherwise."""
    # A cell named for a rate (a load stage's, a sweep's) is open-loop; any other is not.
    load = _RATE_CELL.search(cell["id"]) is not None
    if load == ("arrival" in cell):
        return load, None
    return load, Issue(
        "record-inconsistent",
        "/cell",
        "an open-loop cell without its arrival settings"
        if load
        else "arrival settings on a closed-loop cell",
    )


def _due_issue(record: dict[str, Any], load: bool, base: str) -> Issue | None:
    """A due time where it does not belong, or missing, or after its request was sent."""
    due = record.get("scheduled_ns")
    if due is None:
        if load and not record["warmup"]:
            return Issue(
                "record-inconsistent",
                base,
                "a measured request of an open-loop cell without its due time",
            )
    elif not load or record["warmup"]:
        return Issue(
            "record-inconsistent",
            f"{base}/scheduled_ns",
            "a due time on a request that was never due (a warm-up, or a closed loop)",
        )
    elif record["sent_ns"] < due:
        return Issue(
            "record-inconsistent",
            f"{base}/sent_ns",
            f"sent at {record['sent_ns']}, before it was due at {due}",
        )
    return None


def _open_loop_issues(document: dict[str, Any]) -> list[Issue]:
    """Due times where they belong: on the measured requests of a load cell, each at or
    before its send; and a load cell's arrival settings in place."""
    load, issue = _arrival_issue(document["cell"])
    if issue is not None:
        return [issue]
    found = []
    for position, record in enumerate(document["requests"]):
        due_issue = _due_issue(record, load, f"/requests/{position}")
        if due_issue is not None:
            found.append(due_issue)
    if load:
        found.extend(_schedule_issues(document))
    return found


def _schedule(document: dict[str, Any]) -> tuple[Sequence[int] | None, list[Issue]]:
    """An open-loop cell's schedule as its settings give it (None when none follows), and
    how the settings disagree with themselves."""
    cell = document["cell"]
    stated = cell["arrival"]
    try:
        offsets = arrivals.schedule_ns(arrivals.Arrivals.from_json(stated), cell["id"])
    except ValueError as e:
        return None, [Issue("schedule-mismatch", "/cell/arrival", f"no schedule follows: {e}")]
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
    return offsets, found


def _off_schedule(
    record: dict[str, Any], cell: dict[str, Any], offsets: Sequence[int], base: str
) -> Issue | None:
    """A measured request's due time against the schedule: measured request i (after the
    warm-ups) was due at offset i. An interrupted cell lacks the requests cancelled in
    flight, so the index decides, not the order."""
    if record["warmup"] or record.get("scheduled_ns") is None:
        return None
    order = record["index"] - cell["warmup"]
    start = cell["arrival"]["start_ns"]
    expected = start + offsets[order] if 0 <= order < len(offsets) else None
    if record["scheduled_ns"] == expected:
        return None
    return Issue(
        "schedule-mismatch",
        f"{base}/scheduled_ns",
        f"due at {record['scheduled_ns']}, but the schedule of the cell's settings says {expected}",
    )


def _lateness_issues(cell: dict[str, Any], recomputed: dict[str, Any]) -> list[Issue]:
    # The threshold is the ledger's, not the document's: raising it would clear the flag.
    stated = cell["arrival"]["lateness"]
    return [
        Issue(
            "derived-mismatch",
            f"/cell/arrival/lateness/{key}",
            f"{key} is {stated[key]}, the records give {value}",
        )
        for key, value in recomputed.items()
        if stated[key] != value
    ]


def _schedule_issues(document: dict[str, Any]) -> list[Issue]:
    """An open-loop cell against the schedule its settings give, and its stated lateness
    against its records."""
    offsets, found = _schedule(document)
    if offsets is None:
        return found
    for position, record in enumerate(document["requests"]):
        issue = _off_schedule(record, document["cell"], offsets, f"/requests/{position}")
        if issue is not None:
            found.append(issue)
            break
    found.extend(_lateness_issues(document["cell"], arrivals.lateness(document["requests"])))
    return found


@attrs.frozen
class PartsCheck:
    """What reading a v2 cell run's parts found."""

    issues: tuple[Issue, ...]
    """About the cell run itself."""
    elsewhere: tuple[tuple[str, Issue], ...]
    """About its parts, by path: a record's pointer is into its line."""
    completed_rps: float
    """Its successful measured requests per second (a sweep's probes are checked on it)."""


@functools.cache
def _record_validator() -> Any:
    return schema.subschema_validator(schema.SchemaId("cell-run", 2), "record")


def check_cell_parts(document: dict[str, Any], root: Path, rel: str, max_bytes: int) -> PartsCheck:
    """A schema-valid ``cell-run/v2`` document at ``rel`` with its parts (``root``: the
    campaign folder), read one line at a time: each part its own and of the size listed,
    each record against its schema and itself, the cell's counts, due times and lateness
    against its records."""
    return _PartsReading(document, root, rel, max_bytes).check()


class _PartsReading:
    """One pass over a v2 cell run's parts, keeping a few bytes a record: which indexes
    were seen, each measured request's lateness, the successful ones' span."""

    def __init__(self, document: dict[str, Any], root: Path, rel: str, max_bytes: int) -> None:
        self.document = document
        self.rel = rel
        self.cell = document["cell"]
        self.root = root
        self.max_bytes = max_bytes
        self.found: list[Issue] = []
        self.elsewhere: list[tuple[str, Issue]] = []
        self.load, self.arrival_issue = _arrival_issue(self.cell)
        self.offsets: Sequence[int] | None = None
        self.seen = bytearray(self.cell["warmup"] + self.cell["requests"])
        self.late = array("d")
        self.records = self.measured = self.done = 0
        self.first_sent = self.last_end = 0
        self.off_schedule = False

    def check(self) -> PartsCheck:
        if self.document["status"] != "complete":
            reason = self.document["reason"]
            self.found.append(
                Issue("run-incomplete", "/status", f"the cell is incomplete: {reason}")
            )
        if self.arrival_issue is not None:
            self.found.append(self.arrival_issue)
        elif self.load:
            self.offsets, schedule_issues = _schedule(self.document)
            self.found.extend(schedule_issues)
        for number, part in enumerate(self.document["parts"]):
            self._part(number, part)
        self._totals()
        span = (self.last_end - self.first_sent) / 1e9
        rate = round(self.done / span, 6) if self.done and span > 0 else 0.0
        return PartsCheck(tuple(self.found), tuple(self.elsewhere), rate)

    def _part(self, number: int, part: dict[str, Any]) -> None:
        rel = part["path"]
        if not cell_records.own_part(self.rel, number + 1, rel):
            wanted = cell_records.part_rel(self.rel, number + 1)
            self.found.append(
                Issue(
                    "record-inconsistent",
                    f"/parts/{number}/path",
                    f"{rel} is not this cell run's part {number + 1} ({wanted})",
                )
            )
            return
        try:
            size = (self.root / rel).stat().st_size
        except OSError:
            size = None  # a missing part is its reference's finding
        if size is not None and size != part["bytes"]:
            self.found.append(
                Issue(
                    "record-inconsistent",
                    f"/parts/{number}/bytes",
                    f"the part lists {part['bytes']} bytes, {rel} holds {size}",
                )
            )
        lines = 0
        for line, record in _part_records(self.root, rel, self.max_bytes, self.elsewhere):
            lines += 1
            found = [record] if isinstance(record, Issue) else self._record(record)
            self.elsewhere.extend(
                (rel, attrs.evolve(issue, message=f"line {line}: {issue.message}"))
                for issue in found
            )
        if lines != part["requests"]:
            self.found.append(
                Issue(
                    "record-inconsistent",
                    f"/parts/{number}/requests",
                    f"the part lists {part['requests']} records, {rel} holds {lines}",
                )
            )

    def _record(self, record: dict[str, Any]) -> list[Issue]:
        """The issues of one record (pointers into its line), its figures kept."""
        self.records += 1
        validator = _record_validator()
        if not validator.is_valid(record):
            # Counted as what it says it is, so that one bad record is one finding.
            self.measured += record.get("warmup") is not True
            errors = sorted(validator.iter_errors(record), key=lambda e: str(e))[:3]
            return [
                Issue(
                    "schema-invalid",
                    jsonio.json_pointer(list(error.instance_path)),
                    f"{error.message} (record of cell-run/v2)",
                )
                for error in errors
            ]
        cell_records.completed(record)
        found = [*self._index_issues(record["index"]), *_record_issues_v2(record, "")]
        due_issue = _due_issue(record, self.load, "")
        if due_issue is not None and self.arrival_issue is None:
            found.append(due_issue)
        if not record["warmup"]:
            found.extend(self._measured(record))
        return found

    def _index_issues(self, index: int) -> list[Issue]:
        if index >= len(self.seen):
            said = f"request {index}, but the cell has {len(self.seen)} with its warm-ups"
            return [Issue("record-inconsistent", "/index", said)]
        if self.seen[index]:
            return [Issue("record-inconsistent", "/index", f"request {index} appears twice")]
        self.seen[index] = 1
        return []

    def _measured(self, record: dict[str, Any]) -> list[Issue]:
        self.measured += 1
        found = []
        if self.offsets is not None and not self.off_schedule:
            issue = _off_schedule(record, self.cell, self.offsets, "")
            if issue is not None:
                found.append(issue)
                self.off_schedule = True
        if record.get("scheduled_ns") is not None:
            self.late.append((record["sent_ns"] - record["scheduled_ns"]) / 1e6)
        if record["error"] is None:
            sent, end = record["sent_ns"], record["end_ns"]
            self.first_sent = sent if not self.done else min(self.first_sent, sent)
            self.last_end = end if not self.done else max(self.last_end, end)
            self.done += 1
        return found

    def _totals(self) -> None:
        document, cell = self.document, self.cell
        if self.records != document["records"]:
            self.found.append(
                Issue(
                    "record-inconsistent",
                    "/records",
                    f"records is {document['records']}, the parts hold {self.records}",
                )
            )
        if document["status"] == "complete" and self.measured != cell["requests"]:
            self.found.append(
                Issue(
                    "record-inconsistent",
                    "/parts",
                    f"a complete cell holds {self.measured} measured requests, cell.requests "
                    f"is {cell['requests']}",
                )
            )
        # A header a run was writing when it was killed states no lateness yet.
        if self.offsets is not None and document["reason"] != "running":
            self.found.extend(_lateness_issues(cell, arrivals.lateness_of(self.late)))


def _part_records(
    root: Path, rel: str, max_bytes: int, elsewhere: list[tuple[str, Issue]]
) -> Iterator[tuple[int, dict[str, Any] | Issue]]:
    """A part's records by line, or the issue of a line that holds none. A part that
    cannot be read, or is too large to, is left to its own findings (its reference)."""
    path = root / rel
    try:
        status = path.lstat()
    except OSError:
        return  # a missing part is its reference's finding
    if not stat.S_ISREG(status.st_mode):
        return  # a link, a pipe: the listing's finding, never opened here
    size = status.st_size
    if size > max_bytes:
        elsewhere.append(
            (rel, Issue("json-too-large", "", f"{size} bytes is over the {max_bytes}-byte limit; "
                        "its records were not read"))
        )  # fmt: skip
        return
    try:
        for line, text in cell_records.part_lines(path):
            if not text.endswith(b"\n"):
                yield line, Issue("json-syntax", "", "the line does not end (a write cut short)")
                continue
            try:
                record = jsonio.parse_strict(text)
            except InvalidArtifact as e:
                yield line, Issue(e.code, e.pointer, str(e))
                continue
            if not isinstance(record, dict):
                yield (
                    line,
                    Issue("schema-invalid", "", "not a JSON object (a record of cell-run/v2)"),
                )
                continue
            yield line, record
    except OSError as e:
        elsewhere.append((rel, Issue("file-unreadable", "", f"cannot read: {e.strerror}")))


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


def sweep_cell(document: dict[str, Any], completed_rps: float) -> SweepCell | None:
    """A sweep stage's cell, as the campaign-level check reads it, given its successful
    requests per second; None for any other."""
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
        completed_rps,
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
