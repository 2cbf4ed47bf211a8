"""Evaluating a campaign against a promotion policy, from its artifacts.

The evaluation reads the evidence itself (run manifest, cell runs, GPU reserve,
restoration and startup artifacts, derived A/B comparisons, approval records) and
recomputes every verdict it rests on; nothing a summary says is taken as evidence. It
returns every unmet rule with its reason, not only the first, each with the finding code
``ledger verify`` reports for it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ledger.errors import InvalidArtifact, SchemaError
from ledger.evidence import manifest, runs, tree
from ledger.findings import Issue
from ledger.formats import cell_records, jsonio
from ledger.formats.schema import read_document
from ledger.imports import IMPORTED_SCHEMA
from ledger.measures import functional, verdicts
from ledger.promotion.policy import Policy
from ledger.signatures import MAX_BUNDLE_BYTES

RUN_MANIFEST = "run-manifest.json"
RUN_PLAN = "run-plan.json"
APPROVALS_FOLDER = "approvals"
BUNDLE_SUFFIX = manifest.BUNDLE_SUFFIX

RULE_CODES = {
    "complete": "promotion-incomplete",
    "candidate": "promotion-incomplete",
    "required-gates": "promotion-incomplete",
    "ab-present": "promotion-without-ab",
    "matched-ab": "promotion-unmatched-ab",
    "reserve": "promotion-without-reserve",
    "restoration": "promotion-without-restoration",
    "approval": "promotion-without-approval",
}
"""Each rule and the verify finding code of its failure."""

_KIND_OF_SCHEMA = {
    "anvil-serving.gpu-reserve/v1": "reserve",
    "anvil-serving.gpu-telemetry/v1": "telemetry",
    "anvil-serving.container-restoration/v1": "restoration",
    "anvil-serving.startup-attempt/v1": "startup",
}


@attrs.frozen
class Unmet:
    """A rule the campaign does not meet."""

    rule: str
    reason: str

    @property
    def code(self) -> str:
        """The verify finding code for it."""
        return RULE_CODES[self.rule]


@attrs.frozen
class GateResult:
    """One gate of one arm, computed from its stage's artifacts."""

    arm: str
    kind: str
    """The stage kind: capacity, endurance, reserve, restoration, startup."""
    stage: str
    passed: bool
    detail: str
    artifacts: tuple[str, ...]
    requests: int | None = None
    completed: int | None = None
    failed: int | None = None
    counts: dict[str, Any] = attrs.Factory(dict)
    """A functional gate's counts, in the seeds' field names."""
    measured: bool = True
    """False when the reading could not be taken (no NVML, no container engine): a
    failed gate then means missing evidence, not a failing configuration."""

    def to_json(self) -> dict[str, Any]:
        """The gate as a decision summary lists it."""
        gate: dict[str, Any] = {"name": f"{self.arm} {self.stage}"}
        if len(self.artifacts) == 1:
            gate["artifact"] = self.artifacts[0]
        gate.update(status="passed" if self.passed else "failed", passed=self.passed)
        gate["detail"] = self.detail
        if self.requests is not None:
            gate.update(requests=self.requests, completed=self.completed, failed=self.failed)
        gate.update(self.counts)
        return gate


@attrs.define
class Evidence:
    """What a campaign folder holds, read once."""

    folder: Path
    campaign_id: str
    run_manifest: dict[str, Any] | None = None
    plan: dict[str, Any] | None = None
    """run-plan.json: the cells every arm was to run."""
    cells: dict[str, list[tuple[str, dict[str, Any]]]] = attrs.Factory(dict)
    """arm -> (path, cell-run document) in run-manifest order."""
    stages: dict[tuple[str, str], tuple[str, dict[str, Any]]] = attrs.Factory(dict)
    """(arm, evidence kind) -> (path, document)."""
    comparisons: list[tuple[str, dict[str, Any]]] = attrs.Factory(list)
    """(path, ab-comparison document)."""
    approvals: list[tuple[str, bytes, dict[str, Any] | None]] = attrs.Factory(list)
    """(path, record bytes, record or None when unreadable)."""
    imported: dict[str, list[tuple[str, dict[str, Any]]]] = attrs.Factory(dict)
    """arm -> (path, imported-run document) by path: another tool's runs (``ledger
    import``), as the campaign's seal lists them."""
    problems: list[str] = attrs.Factory(list)
    """Artifacts that could not be read (their own findings come from verify)."""
    withheld: frozenset[str] = frozenset()
    """Paths the seal declares withheld: a comparison drawn from one cannot be derived
    again here."""
    documents: Mapping[str, dict[str, Any]] = attrs.field(factory=dict, repr=False, eq=False)
    """Documents already read and found to meet their schemas, by path (verify's, which
    parsed them from the bytes it hashed): read from here rather than again."""

    def comparison(self, path: str | None) -> dict[str, Any] | None:
        """The A/B comparison at ``path``, if the campaign holds one there."""
        return next((d for p, d in self.comparisons if p == path), None)

    @property
    def arms(self) -> list[str]:
        """Every arm the run manifest names, by its cells or by its evidence stages alone
        (a campaign of functional gates has no cells), then every arm imported."""
        manifest = self.run_manifest or {}
        entries = (*manifest.get("cells", ()), *manifest.get("evidence", ()))
        return list(dict.fromkeys([*(entry["arm"] for entry in entries), *self.imported]))


_SEAL = manifest.MANIFEST_NAME


def _read(evidence: Evidence, rel: str) -> dict[str, Any] | None:
    folder, problems = evidence.folder, evidence.problems
    issue = tree.check_relative_path(rel)
    known = evidence.documents.get(rel) if issue is None else None
    if known is not None:
        return known  # a file of the folder's own listing, read and validated
    path = folder / rel
    if issue is None and not path.resolve().is_relative_to(folder.resolve()):
        issue = Issue("path-escape", "", f"{rel!r} leads out of the campaign folder")
    if issue is not None:
        problems.append(f"{rel}: {issue.message}")
        return None
    try:
        return read_document(path)
    except (OSError, InvalidArtifact, SchemaError) as e:
        problems.append(f"{rel}: {e}")
        return None


def _owned(evidence: Evidence, entry: dict[str, Any]) -> dict[str, Any] | None:
    """A run manifest entry's artifact, when it is the entry's own arm, stage and cell:
    the run manifest is as easy to edit as anything, the artifact's own fields are what
    its digest holds."""
    rel = entry["artifact"]["path"]
    document = _read(evidence, rel)
    if document is None:
        return None
    mismatch = runs.owner_mismatch(entry, runs.owner_of(document))
    if mismatch is not None:
        evidence.problems.append(f"{rel}: {mismatch}")
        return None
    return document


def load_evidence(
    folder: str | Path, documents: Mapping[str, dict[str, Any]] | None = None
) -> Evidence:
    """Reads the evidence of a campaign folder (never raises for a bad artifact).

    Args:
        documents: its documents already read and found to meet their schemas, by path.
    """
    root = Path(folder)
    evidence = Evidence(root, root.resolve().name, documents=documents or {})
    problems = evidence.problems
    if (root / RUN_MANIFEST).exists():
        evidence.run_manifest = _read(evidence, RUN_MANIFEST)
    if (root / RUN_PLAN).exists():
        evidence.plan = _read(evidence, RUN_PLAN)
    manifest = evidence.run_manifest or {}
    planned = evidence.plan if evidence.run_manifest is not None else None
    for arm, stage, cell in runs.unlisted_planned_cells(manifest, planned):
        problems.append(
            f"{RUN_MANIFEST}: no entry for {arm}/{stage}/{cell}, which {RUN_PLAN} plans"
        )
    for entry in manifest.get("cells", ()):
        evidence.cells.setdefault(entry["arm"], [])
        artifact = entry.get("artifact")
        if artifact is None:
            continue
        document = _owned(evidence, entry)
        if document is not None:
            evidence.cells[entry["arm"]].append((artifact["path"], document))
    for entry in manifest.get("evidence", ()):
        artifact = entry.get("artifact")
        if artifact is None:
            continue
        document = _owned(evidence, entry)
        schema = str((document or {}).get("schema"))
        kind = _KIND_OF_SCHEMA.get(schema)
        if schema == functional.SCHEMA and document is not None:
            kind = str(document["kind"])
        if document is not None and kind is not None:
            evidence.stages[(entry["arm"], kind)] = (artifact["path"], document)
    _load_imported(evidence)
    evidence.withheld = frozenset(
        e["path"] for e in _seal_entries(root, "withheld", evidence.documents.get(_SEAL))
    )
    derived = root / "derived"
    for path in sorted(derived.glob("*.json")) if derived.is_dir() else ():
        rel = path.relative_to(root).as_posix()
        document = _read(evidence, rel)
        if document is not None and document.get("schema") == "anvil-serving.ab-comparison/v1":
            evidence.comparisons.append((rel, document))
    approvals = root / APPROVALS_FOLDER
    for path in sorted(approvals.glob("*.json")) if approvals.is_dir() else ():
        if path.name.endswith(BUNDLE_SUFFIX):
            continue
        rel = path.relative_to(root).as_posix()
        try:
            # Capped, and a regular file only: a named pipe there would block the read.
            data = jsonio.read_limited(path)
        except OSError as e:
            problems.append(f"{rel}: {e.strerror}")
            continue
        except InvalidArtifact as e:
            problems.append(f"{rel}: {e}")
            continue
        evidence.approvals.append((rel, data, _read(evidence, rel)))
    return evidence


def imported_runs(folder: Path, seal: dict[str, Any] | None = None) -> list[str]:
    """The paths a campaign's seal lists as runs imported from another tool. The seal names
    each artifact's schema: they are found without reading every file of the campaign (its
    cell runs may hold millions of requests). Empty when the seal cannot be read (its own
    finding says why). ``seal``: the manifest, when already read."""
    return [
        entry["path"]
        for entry in _seal_entries(folder, "artifacts", seal)
        if entry.get("schema") == IMPORTED_SCHEMA
    ]


def _seal_entries(folder: Path, field: str, seal: Any = None) -> list[dict[str, Any]]:
    """The seal's entries under ``field`` (``artifacts``, ``withheld``) that name a path;
    none when the seal cannot be read (its own finding says why)."""
    if seal is None:
        try:
            seal = jsonio.read_json(folder / _SEAL)
        except (OSError, InvalidArtifact):
            return []
    entries = seal.get(field) if isinstance(seal, dict) else None
    return [
        entry
        for entry in (entries if isinstance(entries, list) else ())
        if isinstance(entry, dict) and isinstance(entry.get("path"), str)
    ]


def _load_imported(evidence: Evidence) -> None:
    for path in imported_runs(evidence.folder, evidence.documents.get(_SEAL)):
        document = _read(evidence, path)
        if document is not None:
            evidence.imported.setdefault(document["arm"], []).append((path, document))


def _workload_gates(evidence: Evidence, arm: str) -> list[GateResult]:
    by_stage: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for path, document in evidence.cells.get(arm, ()):
        by_stage.setdefault(document["stage"]["name"], []).append((path, document))
    planned: dict[str, int] = {}
    kinds: dict[str, str] = {}
    for entry in (evidence.run_manifest or {}).get("cells", ()):
        if entry["arm"] == arm:
            planned[entry["stage"]] = planned.get(entry["stage"], 0) + 1
    # A planned cell the run manifest lacks is a cell not complete, not one fewer cell.
    run_manifest = evidence.run_manifest
    plan = evidence.plan if run_manifest is not None else None
    for missing_arm, stage, _ in runs.unlisted_planned_cells(run_manifest or {}, plan):
        if missing_arm == arm:
            planned[stage] = planned.get(stage, 0) + 1
    for _, document in evidence.cells.get(arm, ()):
        kinds[document["stage"]["name"]] = document["stage"]["kind"]
    gates = []
    for stage, count in planned.items():
        cells = by_stage.get(stage, [])
        requests = completed = 0
        incomplete = count - sum(1 for _, d in cells if d["status"] == "complete")
        unreadable = 0
        for _, document in cells:
            try:
                for record in cell_records.records(evidence.folder, document):
                    if not record["warmup"]:
                        requests += 1
                        completed += record["error"] is None
            except (InvalidArtifact, KeyError):
                # A part missing or broken: verify names it; its cell passes no gate.
                unreadable += 1
        failed = requests - completed
        passed = incomplete == 0 and unreadable == 0 and failed == 0 and requests > 0
        detail = (
            f"{count} cell{'s' if count != 1 else ''}, {completed}/{requests} requests completed"
        )
        if incomplete:
            detail += f", {incomplete} cell{'s' if incomplete != 1 else ''} not complete"
        if unreadable:
            detail += f", the records of {unreadable} unreadable"
        gates.append(
            GateResult(
                arm,
                kinds.get(stage, "workload"),
                stage,
                passed,
                detail,
                tuple(p for p, _ in cells),
                requests,
                completed,
                failed,
            )
        )
    return gates


def _reserve_detail(document: dict[str, Any], failures: list[str], threshold: int) -> str:
    if failures:
        return "; ".join(failures) + f"; threshold {threshold} MiB"
    free = [c["memory"]["free_mib"] for c in document["cards"]]
    each = (
        f"{free[0]} MiB free on each card"
        if len(set(free)) == 1
        else ("free per card " + ", ".join(f"{f} MiB" for f in free))
    )
    return f"{each}; threshold {threshold} MiB"


def _functional_gates(evidence: Evidence, arm: str, policy: Policy) -> list[GateResult]:
    gates = []
    for kind in functional.KINDS:
        found = evidence.stages.get((arm, kind))
        if found is None:
            continue
        path, document = found
        settings = dict(document["settings"])
        # The policy's bar, not the one the plan happened to set.
        settings.update(
            pass_fraction=policy.context_pass_fraction,
            required_pass_rate=policy.coding_pass_rate,
        )
        summary = functional.summarize(kind, document["records"], settings)
        gates.append(
            GateResult(
                arm,
                kind,
                document["stage"],
                bool(summary["passed"]),
                functional.gate_detail(kind, summary, document["records"]),
                (path,),
                counts=functional.gate_counts(kind, summary),
            )
        )
    return gates


def stage_gates(evidence: Evidence, arm: str, policy: Policy) -> list[GateResult]:
    """Every gate of an arm: functional and quality gates, workload stages, then startup,
    reserve and restoration.

    Reserve is judged against the policy's threshold, not the stage's own; each verdict
    is recomputed from the readings.
    """
    gates = _functional_gates(evidence, arm, policy) + _workload_gates(evidence, arm)
    startup = evidence.stages.get((arm, "startup"))
    if startup is not None:
        path, document = startup
        gates.insert(
            0,
            GateResult(
                arm,
                "startup",
                document["stage"],
                document["outcome"] == verdicts.STARTUP_PASSED,
                f"{document['outcome']}: {document['detail']}",
                (path,),
                measured=document["outcome"] != "engine-unavailable",
            ),
        )
    reserve = evidence.stages.get((arm, "reserve"))
    if reserve is not None:
        path, document = reserve
        threshold = policy.reserve_min_free_mib
        failures = verdicts.reserve_failures(document, threshold)
        gates.append(
            GateResult(
                arm,
                "reserve",
                document["stage"],
                not failures,
                _reserve_detail(document, failures, threshold),
                (path,),
                measured=bool(document["nvml"]["available"]),
            )
        )
    restoration = evidence.stages.get((arm, "restoration"))
    if restoration is not None:
        path, document = restoration
        differences = _restoration_failures(document)
        detail = (
            "; ".join(f"{f['code']}: {f['message']}" for f in differences)
            if differences
            else _restored(document)
        )
        engine = document.get("engine") or {}
        gates.append(
            GateResult(
                arm,
                "restoration",
                document["stage"],
                not differences,
                detail,
                (path,),
                measured=bool(engine.get("available", True)) and document.get("after") is not None,
            )
        )
    return gates


def _restored(document: dict[str, Any]) -> str:
    """A passed restoration, as the gate states it."""
    detail = "same container id, image and configuration; no restart, no OOM kill"
    restart = document.get("restart")
    if restart is None:
        return detail
    ready_s = restart["attempt"].get("time_to_ready_s")
    return (
        f"{detail} during the workload; stopped and started again with the same image, "
        "command, environment and configuration, ready"
        + (f" in {ready_s:g} s" if ready_s is not None else "")
        + f", first request served in {restart['first_request']['e2e_ms']:g} ms"
    )


def _restoration_failures(document: dict[str, Any]) -> list[dict[str, str]]:
    if document.get("after_at") is None:
        return [{"code": "in-progress", "message": "no snapshot after the workload"}]
    failures = verdicts.restoration_failures(document.get("before"), document.get("after"))
    if document.get("restart") is not None:
        failures.extend(verdicts.restart_failures(document["restart"]))
    engine = document.get("engine") or {}
    if not engine.get("available", True):
        failures.insert(0, {"code": "engine-unavailable", "message": str(engine.get("error"))})
    return failures


def comparison_failures(document: dict[str, Any], policy: Policy) -> list[str]:
    """Why an A/B comparison does not count as matched under the policy (empty: it does)."""
    enforced = policy.matched_ab.enforced_rules()
    reasons: list[str] = []
    structured = document.get("match_failures")
    if structured is None:
        # Written before rules were named: every reason counts.
        reasons.extend(document.get("match_reasons", ()))
    else:
        reasons.extend(f["reason"] for f in structured if f["rule"] in enforced)
    # A rule the data could not check is no rule met.
    reasons.extend(
        f"{entry['reason']}; the policy enforces {entry['rule']}"
        for entry in document.get("unchecked", ())
        if entry["rule"] in enforced
    )
    if policy.matched_ab.sustainable_rate_no_worse:
        reasons.extend(_rate_reasons(document))
    effect = policy.matched_ab.minimum_detectable_effect_percent
    if effect is not None:
        reasons.extend(_detectable_reasons(document, effect))
    minimum = policy.matched_ab.min_samples_per_cell
    for row in document["rows"]:
        for side in ("baseline", "candidate"):
            ok = row["n"][side] - row["failed"][side]
            if ok < minimum:
                reasons.append(
                    f"{row['stage']}/{row['cell']}: {ok} successful requests on "
                    f"{document[side]['arm']}, the policy needs {minimum}"
                )
    return reasons


def _detectable_reasons(document: dict[str, Any], effect: float) -> list[str]:
    """Where the comparison cannot detect a change of ``effect`` percent: it has no usable
    A/A control, or a median's minimum detectable effect is larger."""
    needs = f"the policy needs a minimum detectable effect of {effect:g}%"
    calibration = document.get("calibration")
    if not isinstance(calibration, dict):
        arm = document["baseline"]["arm"]
        return [f"{needs}; the comparison has no A/A control (an arm with repeat_of = {arm})"]
    if not calibration["matched"]:
        why = "; ".join(calibration["match_reasons"])
        control = calibration["control"]
        return [f"{needs}; the A/A control {control} is not matched with the baseline ({why})"]
    reasons = []
    for row in document["rows"]:
        for metric, entry in sorted(row["metrics"].items()):
            if "verdict" not in entry:
                continue
            where = f"{row['stage']}/{row['cell']}: {metric}"
            mde = entry.get("mde_percent")
            if entry.get("noise_floor_percent") is None or mde is None:
                reasons.append(f"{where} has no noise floor; {needs}")
            elif mde > effect:
                reasons.append(f"{where} detects no change under {mde:.2f}%; {needs}")
    return reasons


def _rate_reasons(document: dict[str, Any]) -> list[str]:
    """Where the candidate sustains a lower rate at the SLO than the baseline."""
    load = document.get("load")
    if not isinstance(load, dict) or not load.get("stages"):
        missing = (
            "the policy compares sustainable rates at an SLO; the comparison has none "
            "(derive it with --slo from a campaign with a load stage)"
        )
        return [missing]
    reasons = []
    for stage in load["stages"]:
        base = stage["baseline"]["sustainable_rate_rps"]
        cand = stage["candidate"]["sustainable_rate_rps"]
        if (cand or 0.0) < (base or 0.0):
            where = stage["stage"] + (" (thinking)" if stage.get("thinking") else "")
            shown = "none of its rates" if cand is None else f"{cand:g} req/s"
            reasons.append(
                f"{where}: {document['candidate']['arm']} sustains {shown} at the SLO, "
                f"{document['baseline']['arm']} {base:g} req/s"
            )
    return reasons


@attrs.frozen
class Evaluation:
    """The outcome of a policy on a campaign."""

    policy: Policy
    candidate: str | None
    gates: tuple[GateResult, ...]
    unmet: tuple[Unmet, ...]
    comparison: str | None
    """Path of the A/B comparison that met the policy (or the closest one)."""
    approval: str | None
    """Path of the approval record that met the policy."""

    @property
    def allowed(self) -> bool:
        """Whether every rule holds."""
        return not self.unmet


def pick_candidate(evidence: Evidence, named: str | None) -> tuple[str | None, str | None]:
    """The arm under decision and, when none can be chosen, why."""
    if named is not None:
        if (evidence.run_manifest is not None or evidence.imported) and named not in evidence.arms:
            return None, f"the campaign has no arm {named!r}"
        return named, None
    candidates = sorted({d["candidate"]["arm"] for _, d in evidence.comparisons})
    if len(candidates) == 1:
        return candidates[0], None
    if len(evidence.arms) == 1:
        return evidence.arms[0], None
    if candidates:
        return None, f"A/B comparisons name several candidates ({', '.join(candidates)})"
    return None, "no candidate arm: name one, or derive an A/B comparison"


def evaluate(
    evidence: Evidence,
    policy: Policy,
    *,
    candidate: str | None = None,
    summary_bytes: bytes | None = None,
) -> Evaluation:
    """Every rule of ``policy`` on the campaign, for ``candidate``.

    Args:
        summary_bytes: the exact ``summary.json`` whose promotion an approval must
            name; None leaves the approval rule to the caller (``ledger decide`` checks
            it against the summary it is about to write).
    """
    unmet: list[Unmet] = []

    def fail(rule: str, reason: str) -> None:
        unmet.append(Unmet(rule, reason))

    run = evidence.run_manifest
    if run is None:
        fail(
            "complete", f"no readable {RUN_MANIFEST}: the campaign's completeness is not on record"
        )
    elif not run["complete"]:
        pending = [
            f"{e['arm']}/{e['stage']}/{e['cell']}"
            for e in run["cells"]
            if e["status"] != "complete"
        ] + [
            f"{e['arm']}/{e['stage']}" for e in run.get("evidence", ()) if e["status"] != "complete"
        ]
        fail("complete", f"the campaign is not complete ({', '.join(pending[:5])} not complete)")
    picked, why = pick_candidate(evidence, candidate)
    if picked is None:
        fail("candidate", str(why))
    # Without a candidate every rule is still judged (for no arm), so each unmet one shows.
    arm = picked or ""
    gates = stage_gates(evidence, arm, policy) if picked else []
    for kind in policy.required_gates:
        mine = [g for g in gates if g.kind == kind]
        if not mine:
            fail("required-gates", f"required gate {kind!r}: {_who(arm)} has no {kind} stage")
        for gate in mine:
            if not gate.passed:
                fail("required-gates", f"required gate {gate.stage!r} failed: {gate.detail}")
    comparison = _check_comparisons(evidence, policy, arm, fail)
    _check_reserve(evidence, policy, arm, fail)
    if policy.restoration_required:
        found = evidence.stages.get((arm, "restoration"))
        if found is None:
            fail("restoration", f"no container-restoration artifact for {_who(arm)}")
        else:
            for failure in _restoration_failures(found[1]):
                fail("restoration", f"{found[0]}: {failure['code']}: {failure['message']}")
    approval = None
    if policy.approval_required and summary_bytes is not None:
        approval, reasons = check_approvals(evidence, policy, arm, summary_bytes)
        for reason in reasons:
            fail("approval", reason)
    return Evaluation(policy, picked, tuple(gates), tuple(unmet), comparison, approval)


def _who(arm: str) -> str:
    return f"arm {arm!r}" if arm else "the candidate (none chosen)"


def _check_comparisons(evidence: Evidence, policy: Policy, arm: str, fail: Any) -> str | None:
    mine = [(p, d) for p, d in evidence.comparisons if d["candidate"]["arm"] == arm]
    if not mine:
        fail(
            "ab-present",
            f"no A/B comparison with {_who(arm)} as the candidate (ledger derive --kind ab)",
        )
        return None
    judged = [(p, [*comparison_failures(d, policy), *_unchecked(d, evidence)]) for p, d in mine]
    for path, reasons in judged:
        if not reasons:
            return path
    path, reasons = min(judged, key=lambda item: (len(item[1]), item[0]))
    for reason in reasons:
        fail("matched-ab", f"{path}: {reason}")
    return path


def withheld_sources(comparison: dict[str, Any], evidence: Evidence) -> list[str]:
    """The withheld cell runs a comparison is drawn from, sorted."""
    return sorted(
        {s["path"] for row in comparison["rows"] for s in row.get("sources") or ()}
        & evidence.withheld
    )


def _unchecked(comparison: dict[str, Any], evidence: Evidence) -> list[str]:
    """Why a comparison cannot stand for a promotion however it reads: it compares no
    cell, or it is drawn from a withheld cell run, so no one can derive it again."""
    if not comparison["rows"]:
        return ["it compares no cell"]
    sources = withheld_sources(comparison, evidence)
    if sources:
        return [f"drawn from withheld {', '.join(sources)}: it cannot be derived again"]
    return []


def _check_reserve(evidence: Evidence, policy: Policy, arm: str, fail: Any) -> None:
    found = evidence.stages.get((arm, "reserve"))
    if found is None:
        fail(
            "reserve",
            f"no gpu-reserve artifact for {_who(arm)}: no post-workload GPU snapshot "
            "(add a reserve stage to the plan)",
        )
        return
    path, document = found
    for reason in verdicts.reserve_failures(document, policy.reserve_min_free_mib):
        fail("reserve", f"{path}: {reason}")


def check_approvals(
    evidence: Evidence, policy: Policy, arm: str, summary_bytes: bytes
) -> tuple[str | None, list[str]]:
    """The approval record that approves exactly these summary bytes, or why none does."""
    from ledger import signatures

    digest = hashlib.sha256(summary_bytes).hexdigest()
    if not policy.approvers:
        return None, ["the policy names no approver; no promotion can be approved under it"]
    reasons = []
    for rel, data, record in evidence.approvals:
        if record is None or record.get("schema") != manifest.APPROVAL_SCHEMA:
            continue
        if record["campaign_id"] != evidence.campaign_id or record["candidate"] != arm:
            reasons.append(f"{rel}: approves another campaign or arm")
            continue
        if record["summary_sha256"] != digest:
            reasons.append(
                f"{rel}: approves summary sha256 {record['summary_sha256'][:12]}…, not {digest[:12]}…"
            )
            continue
        bundle_path = evidence.folder / (rel + BUNDLE_SUFFIX)
        try:
            bundle = jsonio.read_limited(bundle_path, MAX_BUNDLE_BYTES, what="sigstore bundles")
        except OSError:
            reasons.append(f"{rel}: no signature ({rel}{BUNDLE_SUFFIX})")
            continue
        except InvalidArtifact as e:
            reasons.append(f"{rel}{BUNDLE_SUFFIX}: {e}")
            continue
        outcomes = []
        for approver in policy.approvers:
            try:
                result = signatures.verify_bundle(
                    data,
                    bundle,
                    identity=approver.identity,
                    issuer=approver.issuer,
                    trusted_root=None
                    if policy.trusted_root in ("production", "staging")
                    else policy.trusted_root,
                    staging=policy.trusted_root == "staging",
                    name=Path(rel).name,
                )
            except signatures.UnusableInputError as e:
                outcomes.append(str(e))
                break
            if result.ok:
                return rel, []
            outcomes.append(result.reason)
        reasons.append(
            f"{rel}: not signed by an allowed approver ({outcomes[-1] if outcomes else 'no check'})"
        )
    if not reasons:
        reasons.append(
            f"no approval record for summary sha256 {digest} (ledger approve, signed by one of "
            + ", ".join(a.identity for a in policy.approvers)
            + ")"
        )
    return None, reasons


def restated_gates(
    evidence: Evidence, summary: dict[str, Any], gates: Sequence[GateResult]
) -> list[Issue]:
    """What a summary states of its candidate's gates against ``gates``, derived again
    from the evidence under the policy it was decided by: each verdict and count, every
    gate listed, and every failed one among the failures. (Their details are prose, worded
    by the ledger version that decided; the verdicts and counts are what a reader acts on.)"""
    # A gate drawn from a withheld artifact cannot be derived again here: the summary's
    # account of it stands, as the withheld artifact's own finding says.
    run = evidence.run_manifest or {}
    unseen = {
        f"{entry['arm']} {entry['stage']}"
        for entry in (*run.get("cells", ()), *run.get("evidence", ()))
        if (entry.get("artifact") or {}).get("path") in evidence.withheld
    }
    derived = {f"{g.arm} {g.stage}": g for g in gates if f"{g.arm} {g.stage}" not in unseen}
    issues = []
    stated = set()
    for index, gate in enumerate(summary.get("gates") or ()):
        found = derived.get(str(gate.get("name"))) if isinstance(gate, dict) else None
        if found is None:
            continue
        stated.add(gate["name"])
        wanted = found.to_json()
        for field in ("passed", "requests", "completed", "failed", *found.counts):
            if field in wanted and gate.get(field, ...) != wanted[field]:
                issues.append(
                    Issue(
                        "derived-mismatch",
                        f"/gates/{index}/{field}",
                        f"states {_said(gate.get(field, ...))}; derived again from "
                        f"{', '.join(found.artifacts) or 'the evidence'}: {_said(wanted[field])}",
                    )
                )
    failures = [f for f in summary.get("failures") or () if isinstance(f, str)]
    for name, found in derived.items():
        verdict = "passed" if found.passed else "failed"
        if name not in stated:
            issues.append(
                Issue("derived-mismatch", "/gates", f"no gate {name!r}; derived again: {verdict}")
            )
        elif not found.passed and not any(f.startswith(f"{name}:") for f in failures):
            issues.append(
                Issue("derived-mismatch", "/failures", f"gate {name!r} failed but is not listed")
            )
    return issues


def _said(value: Any) -> str:
    return "nothing" if value is ... else jsonio.dumps_deterministic(value).decode().strip()
