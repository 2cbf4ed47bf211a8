"""A campaign folder as a run finds it and leaves it: the plan it was started with, its
seal, what each cell and evidence stage has done, a sweep's rates, and the workload and run
manifests that say so."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

from ledger import __version__
from ledger.errors import InvalidArtifact, RunnerError, SchemaError
from ledger.evidence import manifest
from ledger.formats.cell_records import CELL_RUN_V2, records
from ledger.formats.models import ReviewedChange
from ledger.formats.outputs import OutputExists
from ledger.formats.schema import read_document, write_document
from ledger.hashing import sha256_file
from ledger.measures.arrivals import completed_rate
from runners.campaign.progress import Progress
from runners.plan import Arm, Cell, EvidenceStage, Plan, Stage
from runners.probes import evidence
from runners.workload import TOLERANCE

PLAN_NAME = "run-plan.json"
WORKLOAD_NAME = "workload-manifest.json"
RUN_MANIFEST_NAME = "run-manifest.json"
WORKLOAD_SCHEMA = "anvil-serving.workload-manifest/v2"
RUN_MANIFEST_SCHEMA = "anvil-serving.run-manifest/v1"


def _first_difference(a: Any, b: Any, pointer: str = "", named: str = "") -> str:
    """Where two plans first differ: the pointer into ``run-plan.json``, and what the plan
    file calls it (``stage 'capacity', requests``) with both values when they are short."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if a.get(key, ...) != b.get(key, ...):
                where = f"{named}, {key}" if named else key
                return _first_difference(
                    a.get(key, ...), b.get(key, ...), f"{pointer}/{key}", where
                )
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return _first_difference(x, y, f"{pointer}/{index}", _item(named, index, x))
    if isinstance(a, list) and isinstance(b, list):
        a, b = f"{len(a)} entries", f"{len(b)} entries"
    else:
        a, b = _short(a), _short(b)
    said = f"{named}: {a} in the run, {b} now" if named else "the plan"
    return f"{said} ({pointer or '/'} of run-plan.json)"


_PLURALS = {"stages": "stage", "arms": "arm", "evidence_stages": "evidence stage", "cells": "cell"}


def _item(named: str, index: int, item: Any) -> str:
    """A list item as the plan names it: ``arm 'candidate'``, else its position."""
    label = item.get("name", item.get("id")) if isinstance(item, dict) else None
    head, _, last = named.rpartition(", ")
    if isinstance(label, str) and last in _PLURALS:
        return f"{head}, " * bool(head) + f"{_PLURALS[last]} {label!r}"
    return f"{named}[{index}]"


def _short(value: Any) -> str:
    if value is ...:
        return "absent"
    shown = orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    return shown if len(shown) <= 40 else shown[:37] + "..."


class CampaignFolder:
    """``RAW_DIR/<campaign_id>/`` of one plan: checked against the plan, resumed from what
    an earlier run left, and its manifests written."""

    def __init__(
        self, plan: Plan, raw_dir: Path, *, resume: bool, progress: Progress, adds_arm: bool = False
    ) -> None:
        self.plan = plan
        self.folder = raw_dir / plan.campaign_id
        self.resume = resume
        self.adds_arm = adds_arm
        """The plan is the recorded one with one more arm (``ledger bench`` into a campaign
        another bench run made): the recorded arms' cells stay as they are."""
        self.progress = progress
        self.workload: dict[tuple[str, str], dict[str, Any]] = {}
        """(stage, cell) -> its entry of ``workload-manifest.json``."""
        self.cells: dict[tuple[str, str, str], str] = {}
        """(arm, stage, cell) -> complete, incomplete or pending."""
        self.sweeps: dict[str, dict[str, Any]] = {}
        self.interrupted_files: dict[tuple[str, str, str], list[str]] = {}
        self.resumable: dict[tuple[str, str, str], dict[str, Any]] = {}
        """(arm, stage, cell) -> the header of a cell an interrupted run left, to go on with."""
        self.evidence: dict[tuple[str, str], str] = {}
        """(arm, evidence stage) -> complete, incomplete or pending."""
        self.before: dict[str, tuple[dict[str, Any] | None, str | None]] = {}
        """arm -> its container's snapshot before the workload, and when it was taken."""

    def cells_of(self, stage: Stage) -> list[Cell]:
        """A stage's cells: a sweep's rate cells once its first arm has found its rates."""
        if stage.sweep_rates is None:
            return list(stage.cells)
        found = self.sweeps.get(stage.name)
        if found is None:
            found = self._sweep(stage)
        return [*stage.cells, *(cell for cell, _ in (found or {}).get("cells", ()))]

    def _sweep(self, stage: Stage) -> dict[str, Any] | None:
        """The rates of a sweep from its first arm's two probe cells, once both are complete
        (on disk: a resumed run finds the same rates)."""
        arm = self.plan.arms[0]
        measured = []
        for cell in stage.cells:
            path = self.folder / self.cell_path(arm, stage, cell)
            if not path.exists():
                return None
            try:
                document = read_document(path)
            except (OSError, InvalidArtifact, SchemaError):
                return None
            if document.get("status") != "complete":
                return None
            try:
                rate = completed_rate(records(self.folder, document))
            except InvalidArtifact:
                return None
            measured.append((cell.id, rate))
        (sync_id, synchronous), (burst_id, ceiling) = measured
        # No probe answered: there is no rate to sweep, only a failed measurement to keep.
        cells = stage.sweep_cells(synchronous, ceiling) if synchronous > 0 else []
        if not cells:
            self.progress.note(
                f"{arm.name} {stage.name}: no probe request succeeded; the sweep has no rates"
            )
        found: dict[str, Any] = {
            "synchronous_rps": synchronous,
            "ceiling_rps": ceiling,
            "from": {"arm": arm.name, "synchronous": sync_id, "ceiling": burst_id},
            "cells": cells,
        }
        self.sweeps[stage.name] = found
        for each in self.plan.arms:
            for cell, _ in cells:
                if (each.name, stage.name, cell.id) not in self.cells:
                    self._recover(each, stage, cell)
        return found

    def cell_path(self, arm: Arm, stage: Stage, cell: Cell) -> str:
        """Where a cell's artifact is, relative to the folder."""
        return f"{arm.name}/{stage.name}/{cell.id}.json"

    def prepare(self) -> None:
        """Checks the folder against the plan and loads what an earlier run left."""
        plan_path = self.folder / PLAN_NAME
        occupied = self.folder.exists() and any(self.folder.iterdir())
        if occupied and not plan_path.exists():
            # Not a run: --resume would seal whatever is there as this run's evidence.
            raise OutputExists(
                f"{self.folder} holds files but no run ({PLAN_NAME} is missing); choose "
                "another --raw-dir or empty the folder"
            )
        if occupied and not self.resume:
            raise OutputExists(
                f"{self.folder} already holds a run; pass --resume to finish it, or choose "
                "another --raw-dir"
            )
        sealed = (self.folder / manifest.MANIFEST_NAME).exists()
        if self.resume and sealed:
            self._check_seal()
        elif self.resume and plan_path.exists():
            # A run seals its folder as soon as it has written its plan: a plan without a
            # seal is a seal deleted since, and resuming would seal the cells as measured.
            raise manifest.SealBroken(
                f"{self.folder} has lost its seal: it holds {PLAN_NAME} but no "
                f"{manifest.MANIFEST_NAME}; a resumed run would keep and seal its cells as "
                "measured. Run 'ledger verify', review them, and re-seal with 'ledger seal "
                "--reseal-after-review' before resuming",
                [],
            )
        if self.resume and plan_path.exists():
            recorded = self._read(plan_path)
            wanted = self.plan.to_json()
            if self.adds_arm:
                wanted["arms"] = wanted["arms"][:-1]
            if recorded != wanted:
                raise RunnerError(
                    f"{plan_path}: the plan differs from the one this run started with: "
                    f"{_first_difference(recorded, wanted)}"
                )
        self.folder.mkdir(parents=True, exist_ok=True)
        # Temporary files of atomic writes that a SIGKILL interrupted: never a whole
        # artifact (a finished write is renamed), and the seal must not list them.
        for stale in self.folder.rglob(".*.tmp"):
            stale.unlink()
        write_document(plan_path, self.plan.to_json())
        if not sealed:
            # Sealed from the start: a seal deleted later is then told apart from a run
            # killed before its first cell ended (see manifest.lost_seal).
            manifest.seal(self.folder, check=False, jobs=1)
        workload_path = self.folder / WORKLOAD_NAME
        if workload_path.exists():
            workload = self._read(workload_path)
            if workload["schema"] != WORKLOAD_SCHEMA:
                raise RunnerError(
                    f"cannot resume: {workload_path} is {workload['schema']}, written by an "
                    "earlier anvil-ledger; its cells stay as they are, evidence of their own. "
                    "Start the plan again in another --raw-dir"
                )
            for entry in workload["cells"]:
                self.workload[(entry["stage"], entry["cell"])] = entry
        for arm in self.plan.arms:
            for stage in self.plan.stages:
                for cell in self.cells_of(stage):
                    self._recover(arm, stage, cell)
            for step in self.plan.evidence:
                self._recover_evidence(arm, step)

    def _check_seal(self) -> None:
        """A resumed run keeps the cells it finished, so they must be as it sealed them.

        Files a run killed after its last seal wrote are new (added) or its own bookkeeping
        (rewritten as it goes); anything else that differs was changed by someone else.
        """
        own = {PLAN_NAME, WORKLOAD_NAME, RUN_MANIFEST_NAME, manifest.SUMS_NAME}
        changed = [
            c
            for c in manifest.changes_since_seal(self.folder, jobs=1)
            if c.change != "added" and c.path not in own and not self._resumable_header(c)
        ]
        if changed:
            shown = ", ".join(f"{c.path} ({c.change})" for c in changed[:8])
            raise manifest.SealBroken(
                f"{self.folder} no longer matches its seal: {shown}. A resumed run would keep "
                "and seal them as measured; run 'ledger verify', review them, and re-seal with "
                "'ledger seal --reseal-after-review' before resuming",
                changed,
            )

    def _resumable_header(self, change: ReviewedChange) -> bool:
        """Whether a file changed since the seal is the header of a cell that a run was
        writing: a run rewrites it from the plan and from its parts, each of which must
        still be as it was sealed (checked when the cell is taken up again)."""
        if change.change != "changed" or not change.path.endswith(".json"):
            return False
        try:
            document = read_document(self.folder / change.path)
        except (OSError, InvalidArtifact, SchemaError):
            return False
        return document.get("schema") == CELL_RUN_V2 and document.get("status") != "complete"

    def _recover_evidence(self, arm: Arm, step: EvidenceStage) -> None:
        path = self.folder / evidence.artifact_path(arm, step)
        key = (arm.name, step.name)
        self.evidence[key] = "pending"
        if not path.exists():
            return
        try:
            document = read_document(path)
        except (OSError, InvalidArtifact, SchemaError):
            return  # written again
        if step.kind == "telemetry":
            during = next(s for s in self.plan.stages if s.name == step.settings["during"])
            if any(self.cells[(arm.name, during.name, c.id)] != "complete" for c in during.cells):
                self.evidence[key] = "incomplete"  # sampled again with the stage
                return
        if step.kind == "restoration" and document.get("after_at") is None:
            # The "before" snapshot of an interrupted run is the one that counts.
            self.before[arm.name] = (document.get("before"), document.get("before_at"))
            self.evidence[key] = "incomplete"
            return
        self.evidence[key] = "complete"

    def _read(self, path: Path) -> dict[str, Any]:
        try:
            return read_document(path)
        except (OSError, InvalidArtifact, SchemaError) as e:
            raise RunnerError(f"cannot resume: {e}") from None

    def _recover(self, arm: Arm, stage: Stage, cell: Cell) -> None:
        rel = self.cell_path(arm, stage, cell)
        key = (arm.name, stage.name, cell.id)
        path = self.folder / rel
        earlier = sorted(
            path.parent.glob(f"{cell.id}.interrupted-*.json"),
            key=lambda p: int(p.name.rsplit("-", 1)[1].split(".")[0]),
        )
        self.interrupted_files[key] = [str(p.relative_to(self.folder).as_posix()) for p in earlier]
        if not path.exists():
            self.cells[key] = "pending"
            return
        try:
            document: dict[str, Any] | None = read_document(path)
        except (OSError, InvalidArtifact, SchemaError):
            document = None
        if document is not None and document.get("status") == "complete":
            self.cells[key] = "complete"
            return
        if document is not None and document.get("schema") == CELL_RUN_V2:
            # Its finished records stay where they are; the run goes on from them.
            self.resumable[key] = document
            self.cells[key] = "pending"
            return
        # Kept as evidence of the interruption; the cell runs again.
        number = len(earlier) + 1
        aside = path.with_name(f"{cell.id}.interrupted-{number}.json")
        os.replace(path, aside)
        self.interrupted_files[key].append(aside.relative_to(self.folder).as_posix())
        for part in sorted(path.parent.glob(f"{cell.id}.part-*.jsonl")):
            os.replace(
                part, part.with_name(part.name.replace(".part-", f".interrupted-{number}.part-"))
            )
        self.cells[key] = "pending"

    def write_workload(self) -> None:
        """Writes ``workload-manifest.json``: each cell's calibration and prompt digests."""
        cells = []
        for stage in self.plan.stages:
            for cell in self.cells_of(stage):
                entry = self.workload.get((stage.name, cell.id))
                if entry is not None:
                    cells.append(entry)
        write_document(
            self.folder / WORKLOAD_NAME,
            {
                "schema": WORKLOAD_SCHEMA,
                "campaign_id": self.plan.campaign_id,
                "family": "short-summary",
                "seed": self.plan.seed,
                "prefix": self.plan.prefix,
                "prompt_digest": "sha256 of the messages array as compact JSON, sorted keys",
                "tolerance": TOLERANCE,
                "cells": cells,
            },
        )

    def _reference(self, rel: str) -> dict[str, str]:
        digest, _ = sha256_file(self.folder / rel)
        return {"path": rel, "sha256": digest}

    def write_run_manifest(self) -> bool:
        """Writes ``run-manifest.json``: each cell's and evidence stage's status and
        digest; whether every one is complete."""
        entries = []
        for arm in self.plan.arms:
            for stage in self.plan.stages:
                for cell in self.cells_of(stage):
                    key = (arm.name, stage.name, cell.id)
                    rel = self.cell_path(arm, stage, cell)
                    status = self.cells[key]
                    entries.append(
                        {
                            "arm": arm.name,
                            "stage": stage.name,
                            "cell": cell.id,
                            "status": status,
                            "artifact": self._reference(rel) if status != "pending" else None,
                            "interrupted": [
                                self._reference(p) for p in self.interrupted_files[key]
                            ],
                        }
                    )
        steps = [
            {
                "arm": arm.name,
                "stage": step.name,
                "kind": step.kind,
                "status": self.evidence[(arm.name, step.name)],
                "artifact": self._reference(evidence.artifact_path(arm, step))
                if self.evidence[(arm.name, step.name)] != "pending"
                else None,
            }
            for arm in self.plan.arms
            for step in self.plan.evidence
        ]
        complete = all(e["status"] == "complete" for e in entries + steps)
        write_document(
            self.folder / RUN_MANIFEST_NAME,
            {
                "schema": RUN_MANIFEST_SCHEMA,
                "campaign_id": self.plan.campaign_id,
                "complete": complete,
                "plan": self._reference(PLAN_NAME),
                "workload": self._reference(WORKLOAD_NAME)
                if (self.folder / WORKLOAD_NAME).exists()
                else None,
                "runner": {"name": "anvil-ledger", "version": __version__},
                "cells": entries,
                "evidence": steps,
            },
        )
        return complete
