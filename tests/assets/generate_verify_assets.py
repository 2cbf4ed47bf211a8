"""Generates tests/assets/verify/: one valid campaign and one folder per defect.

Each defect folder is an evidence root holding one campaign that differs from the valid one
by a single defect, named after it. ``DEFECTS`` maps the folder to the finding codes verify
must report for it (warnings of the valid campaign, ``withheld-artifact``, aside).

Run ``python tests/assets/generate_verify_assets.py`` to regenerate;
``tests/test_verify_assets.py`` checks that the checked-in files are what this script makes.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ledger.evidence.manifest import (
    MANIFEST_NAME,
    STATEMENT_NAME,
    SUMS_NAME,
    render_sums,
    seal,
    seal_files,
)
from ledger.formats.jsonio import dumps_deterministic
from ledger.hashing import sha256_bytes
from ledger.measures import arrivals

CAMPAIGN = "2026-11-01-asset-campaign"
TICKET = f"{CAMPAIGN[:10]}-asset-follow-up"
HERE = Path(__file__).resolve().parent / "verify"

LINUX_LOG = b"request 0 ok ttft_ms=128.3\nrequest 1 ok ttft_ms=127.9\nrequest 2 ok ttft_ms=129.0\n"
WINDOWS_LOG = (
    b"request 0 ok ttft_ms=177.5\nrequest 1 ok ttft_ms=176.1\nrequest 2 ok ttft_ms=178.2\n"
)


def _pair(windows: float, linux: float) -> dict[str, float]:
    return {"windows": windows, "linux": linux, "change_percent": (linux - windows) / windows * 100}


def comparison(with_sources: bool) -> dict[str, Any]:
    """The OS comparison used as headline and as a stand-alone derived artifact."""
    row: dict[str, Any] = {
        "context_target": 4096,
        "actual_prompt_tokens": 2969.0,
        "sample_count_per_os": 3,
        "metrics": {
            "decode_tok_s_p50": _pair(112.5, 149.25),
            "effective_prefill_tok_s_p50": _pair(16729.5, 23143.0),
            "ttft_p50_ms": _pair(177.5, 128.25),
            "e2e_p50_ms": _pair(500.5, 611.25),
            "throughput_tok_s": _pair(57.0, 106.75),
        },
        "windows_source": "capacity-windows-4k.json",
        "linux_source": "capacity-linux-4k.json",
        "limitations": ["n=3 per arm; descriptive medians only"],
        "median_output_tokens": {"windows": 36, "linux": 74},
    }
    if with_sources:
        row["sources"] = [
            {"path": "raw/linux.log", "sha256": sha256_bytes(LINUX_LOG)},
            {"path": "raw/windows.log", "sha256": sha256_bytes(WINDOWS_LOG)},
        ]
    return {
        "schema": "anvil-serving.os-comparison/v1",
        "rows": [row],
        "endurance": {
            "sample_count_per_os": 60,
            "windows_source": "capacity-windows-4k.json",
            "linux_source": "capacity-linux-4k.json",
            "decode_windows": 102.25,
            "decode_linux": 142.75,
            "decode_change_percent": (142.75 - 102.25) / 102.25 * 100,
        },
    }


def summary() -> dict[str, Any]:
    """A valid summary exercising every gate shape of the seeds."""
    return {
        "schema": "anvil-serving.benchmark-decision-summary/v1",
        "campaign_id": CAMPAIGN,
        "complete": True,
        "identity": {
            "schema": "anvil-serving.llm-qualification-configuration/v1",
            "model": "example-org/Example-8B",
            "revision": "0123456789abcdef0123456789abcdef01234567",
            "served_model": "example-8b",
            "promotion_authorized": False,
        },
        "measurement": {"path": "online direct", "sample_count": 6, "statistics": ["median"]},
        "gates": [
            {"artifact": "preflight.json", "passed": True, "checks_passed": 10, "checks": 10},
            {
                "artifact": "agentic.json",
                "completeness": "completed",
                "summary": {
                    "attempted": 10,
                    "passed": 7,
                    "pass_rate": 0.7,
                    "required_pass_rate": 0.7,
                },
            },
            {
                "artifact": "capacity-linux-4k.json",
                "requests": 3,
                "completed": 3,
                "failed": 0,
                "performance_eligible": True,
            },
            {
                "artifact": "scout.json",
                "requests": 3,
                "completed": 0,
                "failed": 3,
                "performance_eligible": False,
            },
            {"name": "post-workload reserve", "status": "passed", "detail": "4096 MiB free"},
        ],
        "headline_results": comparison(with_sources=False),
        "failures": ["scout population failed 3/3 and is excluded"],
        "limitations": ["asset campaign for tests"],
        "decision": {
            "evidence_labels": ["capacity"],
            "decision_labels": ["no-promotion"],
            "promotion_authorized": False,
            "next_gate": "controlled-output A/B",
        },
        "evidence": ["comparison.json", "capacity-windows-4k.json", "capacity-linux-4k.json"],
    }


def write_valid(folder: Path) -> None:
    """Writes and seals the valid campaign."""
    folder.mkdir(parents=True)
    (folder / "summary.json").write_bytes(dumps_deterministic(summary()))
    (folder / "comparison.json").write_bytes(dumps_deterministic(comparison(with_sources=True)))
    (folder / "raw").mkdir()
    (folder / "raw" / "linux.log").write_bytes(LINUX_LOG)
    (folder / "raw" / "windows.log").write_bytes(WINDOWS_LOG)
    (folder / "publication.md").write_bytes(b"# Asset campaign\n\nDecision: no-promotion.\n")
    # The decision has failures and a next gate: its follow-up ticket, linked both ways.
    follow_up = {
        "schema": "anvil-serving.follow-up/v1",
        "campaign_id": CAMPAIGN,
        "tickets": [{"id": TICKET}],
    }
    (folder / "follow-up.json").write_bytes(dumps_deterministic(follow_up))
    seal(folder, withhold_missing=True, jobs=1)


def write_ticket(tickets: Path) -> None:
    """The ticket every asset campaign links (``tickets/`` beside the asset roots)."""
    tickets.mkdir(parents=True)
    (tickets / f"{TICKET}.md").write_bytes(
        (
            f"---\nid: {TICKET}\ncampaign: {CAMPAIGN}\nstatus: open\ncreated: {CAMPAIGN[:10]}\n"
            'gates: ["scout.json"]\n---\n\n# Follow-up: the asset campaign\n'
        ).encode()
    )


# Helpers for defects -------------------------------------------------------------------


def _load(path: Path) -> Any:
    import json

    return json.loads(path.read_bytes())


def _edit_json(path: Path, edit: Callable[[Any], None]) -> None:
    document = _load(path)
    edit(document)
    path.write_bytes(dumps_deterministic(document))


def _reseal(folder: Path) -> None:
    # As someone editing evidence by hand: a new seal, no review recorded.
    seal(folder, check=False, jobs=1)


def _edit_manifest(folder: Path, edit: Callable[[Any], None]) -> None:
    """Edits manifest.json, then rewrites SHA256SUMS to agree with it (one defect only)."""
    _edit_json(folder / MANIFEST_NAME, edit)
    _rewrite_sums(folder)


def _rewrite_sums(folder: Path) -> None:
    manifest = _load(folder / MANIFEST_NAME)
    sums = [(a["path"], a["sha256"]) for a in manifest["artifacts"]]
    sums.append((MANIFEST_NAME, sha256_bytes((folder / MANIFEST_NAME).read_bytes())))
    (folder / SUMS_NAME).write_bytes(render_sums(sums))


def _summary_defect(edit: Callable[[Any], None]) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        _edit_json(folder / "summary.json", edit)
        _reseal(folder)

    return apply


def _raw_summary(data: bytes) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        (folder / "summary.json").write_bytes(data)
        _reseal(folder)

    return apply


def _set(path: list[Any], value: Any) -> Callable[[Any], None]:
    def edit(document: Any) -> None:
        target = document
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return edit


def _delete(path: list[Any]) -> Callable[[Any], None]:
    def edit(document: Any) -> None:
        target = document
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    return edit


def _all(*edits: Callable[[Any], None]) -> Callable[[Any], None]:
    def edit(document: Any) -> None:
        for one in edits:
            one(document)

    return edit


def _manifest_entry(path: str, field: str, value: Any) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        def edit(manifest: Any) -> None:
            for entry in manifest["artifacts"]:
                if entry["path"] == path:
                    entry[field] = value

        _edit_manifest(folder, edit)

    return apply


def _duplicate_entry(transform: Callable[[str], str]) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        def edit(manifest: Any) -> None:
            entry = copy.deepcopy(manifest["artifacts"][0])
            entry["path"] = transform(entry["path"])
            manifest["artifacts"].append(entry)

        _edit_manifest(folder, edit)

    return apply


def _comparison_defect(edit: Callable[[Any], None]) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        _edit_json(folder / "comparison.json", edit)
        _reseal(folder)

    return apply


def _tamper_publication(folder: Path) -> None:
    (folder / "publication.md").write_bytes(b"# Asset campaign\n\nDecision: promote.\n")


def _extra_file(folder: Path) -> None:
    (folder / "notes.txt").write_bytes(b"not sealed\n")


def _delete_listed(folder: Path) -> None:
    (folder / "publication.md").unlink()


def _remove(name: str) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        (folder / name).unlink()

    return apply


def _write(name: str, data: bytes) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        (folder / name).write_bytes(data)

    return apply


def _symlink(name: str, target: str) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        os.symlink(target, folder / name)

    return apply


def _add_json(name: str, data: bytes) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        (folder / name).write_bytes(data)
        _reseal(folder)

    return apply


def _record(index: int, sent: int) -> dict[str, Any]:
    chunks = [sent + 5_000_000 + i * 10_000_000 for i in range(4)]
    return {
        "index": index,
        "warmup": False,
        "prompt_sha256": "ab" * 32,
        "sent_ns": sent,
        "headers_ns": sent + 1_000_000,
        "first_token_ns": chunks[0],
        "first_content_ns": chunks[0],
        "last_token_ns": chunks[-1],
        "end_ns": chunks[-1] + 200_000,
        "chunks_ns": chunks,
        "chunk_channels": "cccc",
        "chunk_tokens": 4,
        "usage": {"prompt_tokens": 1000, "completion_tokens": 4, "total_tokens": 1004},
        "usage_mismatch": False,
        "finish_reason": "length",
        "done_marker": True,
        "response_id": f"chatcmpl-{index}",
        "error": None,
        "content_chars": 20,
        "content_sha256": "cd" * 32,
        "reasoning_chars": 0,
        "tool_calls": [],
        "output_as_requested": True,
    }


def cell_run(status: str = "complete") -> dict[str, Any]:
    """A two-request cell-run document, as ``ledger run`` writes one."""
    return {
        "schema": "anvil-serving.cell-run/v1",
        "campaign_id": CAMPAIGN,
        "arm": "linux",
        "stage": {"name": "capacity", "kind": "capacity"},
        "cell": {
            "id": "ctx1024-c1-nothink",
            "context_target": 1024,
            "concurrency": 1,
            "thinking": False,
            "requests": 2,
            "warmup": 0,
            "max_tokens": 4,
            "controlled_output": True,
            "temperature": 0.0,
            "seed": 0,
            "prefix": "shared",
        },
        "status": status,
        "reason": None if status == "complete" else "interrupted by SIGTERM",
        "started_at": "2026-11-29T12:00:00.000000Z",
        "endpoint": {"base_url": None, "model": "anvil-sim", "simulated": True},
        "identity": {"os": "linux"},
        "client": {
            "name": "anvil-ledger",
            "version": "0.1.0",
            "transport": "httpx over aiohttp",
            "deadlines": {
                "connect_s": 10.0,
                "first_byte_s": 600.0,
                "idle_s": 60.0,
                "total_s": 1800.0,
            },
        },
        "calibration": {"arm": "linux", "status": "ok", "filler_words": 900, "prompt_tokens": 1000},
        "metrics": None,
        "requests": [_record(0, 1_000_000), _record(1, 60_000_000)],
    }


def _cell_defect(edit: Callable[[Any], None], status: str = "complete") -> Callable[[Path], None]:
    document = cell_run(status)
    edit(document)
    return _add_json("cell-run.json", dumps_deterministic(document))


def load_cell_run() -> dict[str, Any]:
    """A three-request open-loop cell (a load stage's, Poisson at 20 requests/s), each
    request due where the schedule of its settings puts it and sent 0.1 to 0.3 ms late."""
    document = cell_run()
    settings = {"process": "poisson", "rate": 20.0, "seed": 0, "burstiness": 1.0,
                "requests": 3, "duration_s": None, "max_in_flight": None}  # fmt: skip
    cell_id = "ctx1024-r20-nothink"
    start = 2_000_000
    offsets = arrivals.offsets_ns(arrivals.Arrivals(**settings), cell_id)
    records = [
        _record(i, start + offset + 100_000 * (i + 1)) | {"scheduled_ns": start + offset}
        for i, offset in enumerate(offsets)
    ]
    document["stage"] = {"name": "load", "kind": "load"}
    document["cell"].update(id=cell_id, requests=3, concurrency=10_000)
    document["cell"]["arrival"] = {
        **settings,
        "start_ns": start,
        "lateness": arrivals.lateness(records),
    }
    document["requests"] = records
    return document


GOODPUT_SLO = {"ttft_ms": 10.0, "e2e_ms": 40.0, "percentile": 50.0}


def _goodput_defect(edit: Callable[[Any], None]) -> Callable[[Path], None]:
    """Two arms' load cells and their A/B comparison derived with an SLO, then ``edit``ed
    (the derivation itself is the ledger's own, so only the edit differs)."""

    def apply(folder: Path) -> None:
        from ledger.database import build
        from ledger.derivation._derive import derive

        for arm in ("linux", "windows"):
            document = load_cell_run()
            document["arm"] = arm
            (folder / arm).mkdir()
            (folder / arm / "load-cell-run.json").write_bytes(dumps_deterministic(document))
        db = build([folder])
        comparison = derive(db, CAMPAIGN, "linux", "windows", slo=GOODPUT_SLO)
        db.close()
        edit(comparison)
        (folder / "derived").mkdir()
        (folder / "derived/ab-comparison.json").write_bytes(dumps_deterministic(comparison))
        _reseal(folder)

    return apply


def _load_defect(edit: Callable[[Any], None]) -> Callable[[Path], None]:
    document = load_cell_run()
    edit(document)
    return _add_json("load-cell-run.json", dumps_deterministic(document))


def _statement(edit: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        from ledger.signatures import _intoto as intoto

        listed = json.loads((folder / MANIFEST_NAME).read_text())
        subjects = [(a["path"], a["sha256"]) for a in listed["artifacts"]]
        subjects.append((MANIFEST_NAME, sha256_bytes((folder / MANIFEST_NAME).read_bytes())))
        # The predicate publish writes: the campaign and its summary's decision.
        decision = json.loads((folder / "summary.json").read_text())["decision"]
        document = intoto.statement(subjects, {"campaign_id": CAMPAIGN, "decision": decision})
        edit(document)
        (folder / intoto.STATEMENT_NAME).write_bytes(dumps_deterministic(document))

    return apply


def _vertical_tab(folder: Path) -> None:
    sums = folder / SUMS_NAME
    sums.write_bytes(sums.read_bytes().replace(b"\n", b"\v", 1))


def _published_then(after: Callable[[Path], None]) -> Callable[[Path], None]:
    """A statement over the campaign, sealed (so the manifest declares it), then ``after``."""

    def apply(folder: Path) -> None:
        _statement(lambda d: None)(folder)
        _reseal(folder)
        after(folder)

    return apply


def _remove_statement(folder: Path) -> None:
    (folder / STATEMENT_NAME).unlink()


def _declared_signed(folder: Path) -> None:
    """The seal ``ledger sign`` writes before its bundle, and then no bundle."""
    _published_then(lambda f: None)(folder)
    _, files = seal_files(folder, signed=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)


def _json_defect(name: str, edit: Callable[[Any], None]) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        _edit_json(folder / name, edit)
        _reseal(folder)

    return apply


_DEEP = b"[" * 100_000 + b"]" * 100_000
_PROMOTE = _all(
    _set(["decision", "promotion_authorized"], True),
    _set(["identity", "promotion_authorized"], True),
    _set(["decision", "decision_labels"], ["verified"]),
)

_NO_EVIDENCE = {
    "promotion-incomplete",
    "promotion-without-ab",
    "promotion-without-reserve",
    "promotion-without-restoration",
    "promotion-without-approval",
}

DEFECTS: dict[str, tuple[set[str], Callable[[Path], None]]] = {
    # integrity
    "hash_mismatch_edited_publication": ({"hash-mismatch", "size-mismatch"}, _tamper_publication),
    "size_mismatch_manifest_bytes": (
        {"size-mismatch"},
        _manifest_entry("publication.md", "bytes", 1),
    ),
    "hash_mismatch_manifest_digest": (
        {"hash-mismatch"},
        _manifest_entry("publication.md", "sha256", "0" * 64),
    ),
    "unlisted_file": ({"unlisted-file"}, _extra_file),
    "missing_artifact_listed": ({"missing-artifact"}, _delete_listed),
    "missing_artifact_named_by_summary": (
        {"missing-artifact"},
        _summary_defect(_set(["evidence"], ["comparison.json", "never-published.json"])),
    ),
    "manifest_missing": ({"manifest-missing", "sha256sums-mismatch"}, _remove(MANIFEST_NAME)),
    "manifest_unparsable": (
        {"json-syntax", "sha256sums-mismatch"},
        _write(MANIFEST_NAME, b'{"schema": '),
    ),
    "manifest_schema_invalid": (
        {"schema-invalid"},
        lambda folder: _edit_manifest(folder, _delete(["withheld"])),
    ),
    "sha256sums_missing": ({"sha256sums-missing"}, _remove(SUMS_NAME)),
    "sha256sums_mismatch": (
        {"sha256sums-mismatch"},
        _write(SUMS_NAME, render_sums([("summary.json", "1" * 64)])),
    ),
    # sha256sum reads a \v as part of a line; a reader that split at it would disagree.
    "sha256sums_vertical_tab": ({"sha256sums-mismatch"}, _vertical_tab),
    "sha256sums_invalid_line": (
        {"sha256sums-invalid", "sha256sums-mismatch"},
        _write(SUMS_NAME, b"not a checksum line\n"),
    ),
    "schema_mismatch_in_manifest": (
        {"schema-mismatch"},
        _manifest_entry("comparison.json", "schema", "anvil-serving.manifest/v1"),
    ),
    "campaign_id_mismatch": (
        {"campaign-id-mismatch"},
        _summary_defect(_set(["campaign_id"], "2026-11-02-other")),
    ),
    # strict JSON
    "json_duplicate_key": (
        {"duplicate-key"},
        _add_json("extra.json", b'{"schema": "a", "schema": "b"}\n'),
    ),
    "json_nan": ({"json-nonfinite"}, _add_json("extra.json", b'{"value": NaN}\n')),
    "json_infinity_overflow": ({"json-nonfinite"}, _add_json("extra.json", b'{"value": 1e999}\n')),
    "json_bom": ({"json-bom"}, _add_json("extra.json", b'\xef\xbb\xbf{"schema": "x"}\n')),
    "json_not_utf8": ({"json-encoding"}, _add_json("extra.json", b'{"name": "caf\xe9"}\n')),
    "json_syntax": ({"json-syntax"}, _add_json("extra.json", b'{"a": 1,}\n')),
    "json_nested_100000_deep": ({"json-too-deep"}, _add_json("extra.json", _DEEP)),
    "json_binary_garbage": ({"json-encoding"}, _add_json("extra.json", bytes(range(256)) * 4)),
    # schemas
    "schema_missing_decision": ({"schema-invalid"}, _summary_defect(_delete(["decision"]))),
    "schema_wrong_type": ({"schema-invalid"}, _summary_defect(_set(["complete"], "yes"))),
    "schema_unknown_top_level_key": (
        {"schema-invalid"},
        _summary_defect(_set(["verdict"], "ship it")),
    ),
    "schema_unknown_kind": (
        {"schema-unknown"},
        _add_json("extra.json", b'{"schema": "anvil-serving.nope/v1"}\n'),
    ),
    "schema_unknown_version": (
        {"schema-unknown"},
        _add_json("extra.json", b'{"schema": "anvil-serving.manifest/v9"}\n'),
    ),
    "schema_undeclared": ({"schema-undeclared"}, _add_json("extra.json", b'{"a": 1}\n')),
    # path safety
    "path_absolute": (
        {"path-absolute", "unlisted-file", "sha256sums-mismatch"},
        _manifest_entry("publication.md", "path", "/etc/publication.md"),
    ),
    "path_dotdot": (
        {"path-escape", "unlisted-file", "sha256sums-mismatch"},
        _manifest_entry("publication.md", "path", "../publication.md"),
    ),
    "path_not_normalized": (
        {"path-invalid", "unlisted-file", "sha256sums-mismatch"},
        _manifest_entry("publication.md", "path", "./publication.md"),
    ),
    "path_duplicate": (
        {"path-duplicate", "sha256sums-invalid", "sha256sums-mismatch"},
        _duplicate_entry(lambda p: p),
    ),
    "path_case_conflict": (
        {"path-case-conflict", "missing-artifact"},
        _duplicate_entry(lambda p: p.upper()),
    ),
    "symlink_leaving_campaign": ({"path-escape"}, _symlink("escape.md", "/etc/hostname")),
    "symlink_inside_campaign": (
        {"symlink", "unlisted-file"},
        _symlink("alias.md", "publication.md"),
    ),
    "symlink_dangling": ({"file-unreadable"}, _symlink("dangling.md", "nothing-here.md")),
    # references and arithmetic
    "reference_unresolved": (
        {"reference-unresolved"},
        _comparison_defect(_set(["rows", 0, "sources", 0, "path"], "raw/missing.log")),
    ),
    "reference_digest_mismatch": (
        {"reference-mismatch"},
        _comparison_defect(_set(["rows", 0, "sources", 0, "sha256"], "a" * 64)),
    ),
    "reference_to_withheld": (
        {"reference-withheld"},
        _comparison_defect(_set(["rows", 0, "sources", 0, "path"], "capacity-linux-4k.json")),
    ),
    "reference_escaping": (
        {"path-escape"},
        _comparison_defect(_set(["rows", 0, "sources", 0, "path"], "../other/raw.log")),
    ),
    "derived_change_percent_wrong": (
        {"derived-mismatch"},
        _summary_defect(
            _set(
                ["headline_results", "rows", 0, "metrics", "decode_tok_s_p50", "change_percent"],
                33.0,
            )
        ),
    ),
    "derived_endurance_change_wrong": (
        {"derived-mismatch"},
        _summary_defect(_set(["headline_results", "endurance", "decode_change_percent"], 40.0)),
    ),
    "derived_comparison_artifact_wrong": (
        {"derived-mismatch"},
        _comparison_defect(_set(["rows", 0, "metrics", "ttft_p50_ms", "linux"], 130.0)),
    ),
    # gates
    "gate_passed_with_failed_check": (
        {"gate-inconsistent"},
        _summary_defect(_set(["gates", 0, "checks_passed"], 9)),
    ),
    "gate_failed_with_all_checks_passed": (
        {"gate-failed-all-passed"},
        _summary_defect(_set(["gates", 0, "passed"], False)),
    ),
    "gate_more_passed_than_checks": (
        {"gate-inconsistent"},
        _summary_defect(_set(["gates", 0, "checks_passed"], 11)),
    ),
    "gate_requests_do_not_add_up": (
        {"gate-count-mismatch"},
        _summary_defect(_set(["gates", 2, "completed"], 2)),
    ),
    "gate_pass_rate_wrong": (
        {"gate-rate-mismatch"},
        _summary_defect(_set(["gates", 1, "summary", "pass_rate"], 0.8)),
    ),
    "gate_status_contradicts_passed": (
        {"gate-inconsistent"},
        _summary_defect(_set(["gates", 4, "passed"], False)),
    ),
    "headline_from_ineligible_population": (
        {"ineligible-headline"},
        _summary_defect(_set(["headline_results", "rows", 0, "linux_source"], "scout.json")),
    ),
    # decisions
    "decision_identity_disagrees": (
        {"decision-inconsistent"},
        _summary_defect(_set(["identity", "promotion_authorized"], True)),
    ),
    # A promotion in a campaign with no evidence behind it: the policy (issue 6) names
    # every rule it misses, the run manifest that records completeness first.
    "promotion_on_incomplete_campaign": (
        {"promotion-incomplete", *_NO_EVIDENCE},
        _summary_defect(_all(_PROMOTE, _set(["complete"], False))),
    ),
    "promotion_with_no_promotion_label": (
        {"promotion-contradicts-label", *_NO_EVIDENCE},
        _summary_defect(_all(_PROMOTE, _set(["decision", "decision_labels"], ["no-promotion"]))),
    ),
    "promotion_without_ab_or_reserve": (
        _NO_EVIDENCE,
        _summary_defect(_PROMOTE),
    ),
    # publication
    "public_artifact_holds_a_token": (
        {"private-data"},
        _add_json("serve.log", b"INFO login with HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz012345\n"),
    ),
    "statement_subject_digest_wrong": (
        {"statement-mismatch"},
        _statement(lambda d: d["subject"][0]["digest"].update(sha256="0" * 64)),
    ),
    "statement_not_in_toto": ({"statement-invalid"}, _statement(lambda d: d.pop("_type"))),
    "seal_file_missing_statement_deleted": (
        {"seal-file-missing"},
        _published_then(_remove_statement),
    ),
    "seal_file_missing_bundle_never_written": ({"seal-file-missing"}, _declared_signed),
    "campaign_id_of_another_campaign": (
        {"campaign-id-mismatch"},
        _json_defect("follow-up.json", _set(["campaign_id"], "2026-11-02-other-campaign")),
    ),
    # raw runs
    "raw_cell_interrupted": ({"run-incomplete"}, _cell_defect(lambda d: None, "incomplete")),
    "raw_record_end_before_first_token": (
        {"record-inconsistent"},
        _cell_defect(_set(["requests", 1, "end_ns"], 60_000_000)),
    ),
    "raw_record_usage_flag_wrong": (
        {"record-inconsistent"},
        _cell_defect(_set(["requests", 0, "usage", "completion_tokens"], 8)),
    ),
    "raw_cell_missing_request": (
        {"record-inconsistent"},
        _cell_defect(_delete(["requests", 1])),
    ),
    # open loop
    "raw_load_schedule_not_its_seed": (
        {"schedule-mismatch"},
        _load_defect(_set(["cell", "arrival", "seed"], 1)),
    ),
    "derived_goodput_edited": (
        {"derived-mismatch"},
        _goodput_defect(_set(["load", "stages", 0, "candidate", "rows", 0, "goodput_rps"], 1000.0)),
    ),
    "raw_load_lateness_edited": (
        {"derived-mismatch"},
        _load_defect(_set(["cell", "arrival", "lateness", "p99_ms"], 0.05)),
    ),
}


def generate(out: Path) -> None:
    """Writes the valid campaign and every defect folder under ``out``."""
    if out.exists():
        shutil.rmtree(out)
    write_ticket(out / "tickets")
    write_valid(out / "valid" / CAMPAIGN)
    for name, (_, apply) in DEFECTS.items():
        folder = out / name / CAMPAIGN
        shutil.copytree(out / "valid" / CAMPAIGN, folder, symlinks=True)
        apply(folder)


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
