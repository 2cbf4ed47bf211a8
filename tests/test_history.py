"""``ledger history`` on published campaigns run against the simulated endpoint: eight
campaigns over a week, two arms each, where the decode rate of one arm drops from 240 to
200 tokens per second with a new image between the fourth and the fifth campaign (both
of one date: the fifth's id sorts first, its start later), and another arm's engine
version changes at the same point. The statistics of the method itself are tested on
synthetic series (tests/test_history_method.py)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from ledger.cli._history import _FIELDS
from ledger.history import NAMED, WORKLOAD
from tests.conftest import ROOT, CliRun, run_plan_text

CAMPAIGNS = (
    "2026-10-01-history",
    "2026-10-02-history",
    "2026-10-03-history",
    "2026-10-04-zz-before",
    "2026-10-04-aa-after",
    "2026-10-05-history",
    "2026-10-06-history",
    "2026-10-07-history",
)
STEP = 4
"""The first campaign of the new configuration, in time order."""

PLAN = """
campaign_id = "{campaign}"
seed = 11
[[arms]]
name = "main"
[arms.simulated]
decode_tok_s = {decode}
prefill_tok_s = 200000.0
run_cv = 0.01
[arms.identity]
engine = "sim"
engine_version = "1.0"
gpu = "sim-gpu-0"
image = "{image}"
[[arms]]
name = "other"
[arms.simulated]
decode_tok_s = {other_decode}
prefill_tok_s = 200000.0
run_cv = 0.01
[arms.identity]
engine = "sim"
engine_version = "{version}"
gpu = "sim-gpu-1"
[[stages]]
kind = "capacity"
context_targets = [256]
requests = 12
max_tokens = 16
controlled_output = true
warmup = 1
"""


def _build(base: Path) -> Path:
    from ledger.publication import publish

    raw, public = base / "raw", base / "public" / "evidence"
    raw.mkdir()
    for number, campaign in enumerate(CAMPAIGNS):
        after = number >= STEP
        plan = PLAN.format(
            campaign=campaign,
            decode=200.0 if after else 240.0,
            image="sim:b" if after else "sim:a",
            other_decode=260.0 if after else 300.0,
            version="1.1" if after else "1.0",
        )
        result, folder = run_plan_text(plan, raw)
        assert result.complete, result
        publish(folder, public)
    return public


@pytest.fixture(scope="module")
def evidence(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The published evidence root of the eight campaigns (built once per module)."""
    return _build(tmp_path_factory.mktemp("history"))


STEPPED = ("--across", "image", "--across", "simulated_profile")
"""What changed with the main arm's step: without them, before and after are two series."""


def _json(cli: CliRun, *argv: str) -> tuple[int, dict[str, Any], str]:
    status, out, err = cli("history", *argv, "--format", "json")
    return status, json.loads(out), err


def _series(document: dict[str, Any], metric: str, **key: Any) -> list[dict[str, Any]]:
    return [
        s
        for s in document["series"]
        if s["metric"] == metric and all(s["key"].get(k) == v for k, v in key.items())
    ]


def test_the_step_is_flagged_at_the_campaign_it_came_with(cli: CliRun, evidence: Path) -> None:
    status, document, err = _json(cli, str(evidence), *STEPPED)
    assert (status, err) == (0, "")
    (decode,) = _series(document, "decode_tok_s", gpu="sim-gpu-0")
    assert [p["campaign_id"] for p in decode["points"]] == list(CAMPAIGNS)
    (change,) = decode["change_points"]
    assert change["index"] == STEP
    assert change["before"] == {"campaign_id": CAMPAIGNS[STEP - 1], "arm": "main"}
    assert change["after"] == {"campaign_id": CAMPAIGNS[STEP], "arm": "main"}
    # 240 -> 200 tok/s configured: -16.7 %, as the client measures it (on a busy
    # machine, the simulator and the client both run late now and then).
    assert -25 < change["change_percent"] < -8
    low, high = change["interval_percent"]
    assert low <= change["change_percent"] <= high < 0
    assert change["regression"] is True
    differs = {d["field"]: (d["before"], d["after"]) for d in change["differs"]}
    assert differs["image"] == ("sim:a", "sim:b")
    assert differs["simulated_profile.decode_tok_s"] == (240.0, 200.0)
    assert "engine_version" not in differs and "gpu" not in differs
    # The same step slows every request down: a rise of latency, also a regression.
    (e2e,) = _series(document, "e2e_ms", gpu="sim-gpu-0")
    (rise,) = [c for c in e2e["change_points"] if c["index"] == STEP]
    assert rise["change_percent"] > 5 and rise["regression"] is True


def test_text_names_the_step_and_what_changed(cli: CliRun, evidence: Path) -> None:
    status, out, err = cli("history", str(evidence), *STEPPED)
    assert (status, err) == (0, "")
    lines = out.splitlines()
    heading = next(
        i for i, line in enumerate(lines) if line.startswith("decode_tok_s") and "sim-gpu-0" in line
    )
    assert lines[heading].startswith(
        "decode_tok_s (tok/s, higher is better): model anvil-sim, engine sim, engine_version "
        "1.0, gpu sim-gpu-0, stage capacity, context_target 256, concurrency 1, thinking "
        "false, max_tokens 16"
    )
    assert lines[heading + 1] == f"  8 points, {CAMPAIGNS[0]} to {CAMPAIGNS[-1]}"
    step = lines[heading + 2]
    assert re.fullmatch(
        rf"  step after point {STEP} of 8: {CAMPAIGNS[STEP - 1]} \(main\) -> {CAMPAIGNS[STEP]} "
        r"\(main\): [0-9]+\.[0-9] -> [0-9]+\.[0-9] tok/s, -[0-9]+\.[0-9] % "
        r"\(95 % interval -[0-9.]+ to -[0-9.]+ %\), regression",
        step,
    ), step
    assert lines[heading + 3 : heading + 5] == [
        "    image differs: sim:a -> sim:b",
        "    simulated_profile.decode_tok_s differs: 240.0 -> 200.0",
    ]
    assert not lines[heading + 5].startswith("    ")
    # The series are those of two arms' cells, five metrics each; other steps (a latency
    # on a busy machine) may be flagged too, so their count is not fixed here.
    assert re.fullmatch(
        r"15 series, 80 points from 8 campaigns; [0-9]+ change points \([0-9]+ regressions\); "
        r"0 excluded \(failed verification\), 0 skipped \(no raw request rows\)",
        lines[-1],
    ), lines[-1]


def test_campaigns_of_one_date_are_ordered_by_their_start(cli: CliRun, evidence: Path) -> None:
    _, document, _ = _json(cli, str(evidence))
    order = [c["campaign_id"] for c in document["campaigns"]]
    # aa-after sorts before zz-before by id; it started later.
    assert order == list(CAMPAIGNS)
    starts = [c["start"] for c in document["campaigns"]]
    assert all(s is not None and s.endswith("Z") for s in starts)
    assert starts[STEP - 1] < starts[STEP]


def test_the_key_holds_the_named_fields_and_the_rest_is_carried(
    cli: CliRun, evidence: Path
) -> None:
    _, document, _ = _json(cli, str(evidence))
    assert document["key"] == [*NAMED, *WORKLOAD]
    # The arm's other identity fields are in the key too: its configuration before and
    # after the step (a new image and decode rate) are two series, as two arms of an A/B
    # that differ in one of them would be.
    before, after = _series(document, "decode_tok_s", gpu="sim-gpu-0")
    assert (before["key"]["image"], after["key"]["image"]) == ("sim:a", "sim:b")
    assert before["key"]["simulated_profile.decode_tok_s"] == 240.0
    assert after["key"]["simulated_profile.decode_tok_s"] == 200.0
    assert [len(s["points"]) for s in (before, after)] == [STEP, len(CAMPAIGNS) - STEP]
    assert before["change_points"] == [] and after["change_points"] == []
    assert before["points"][0]["identity"] == {}
    _, document, _ = _json(cli, str(evidence), *STEPPED)
    (decode,) = _series(document, "decode_tok_s", gpu="sim-gpu-0")
    # No identity names a model: the endpoint's served model stands for it.
    assert decode["key"] == {
        "model": "anvil-sim",
        "revision": None,
        "engine": "sim",
        "engine_version": "1.0",
        "gpu": "sim-gpu-0",
        "stage": "capacity",
        "context_target": 256,
        "concurrency": 1,
        "rate": None,
        "thinking": False,
        "max_tokens": 16,
    }
    carried = decode["points"][0]["identity"]
    assert carried["image"] == "sim:a"
    assert carried["simulated_profile.decode_tok_s"] == 240.0
    assert not set(carried) & set(NAMED)
    assert decode["points"][0]["successful"] == 12
    # Two engine versions of the other arm are two series without --across.
    other = _series(document, "decode_tok_s", gpu="sim-gpu-1")
    assert [s["key"]["engine_version"] for s in other] == ["1.0", "1.1"]
    assert [len(s["points"]) for s in other] == [4, 4]
    assert all(s["change_points"] == [] for s in other)


def test_across_follows_a_metric_over_engine_versions(cli: CliRun, evidence: Path) -> None:
    across = ("--across", "engine_version", "--across", "simulated_profile.decode_tok_s")
    status, document, _ = _json(cli, str(evidence), *across)
    assert status == 0
    assert document["across"] == ["engine_version", "simulated_profile.decode_tok_s"]
    assert "engine_version" not in document["key"]
    (other,) = _series(document, "decode_tok_s", gpu="sim-gpu-1")
    assert "engine_version" not in other["key"]
    assert [p["identity"]["engine_version"] for p in other["points"]] == ["1.0"] * 4 + ["1.1"] * 4
    (change,) = other["change_points"]
    assert change["index"] == STEP and change["regression"] is True
    assert {"field": "engine_version", "before": "1.0", "after": "1.1"} in change["differs"]
    # The rest of the profile stays in the key: the fields named are all that moved.
    assert other["key"]["simulated_profile.prefill_tok_s"] == 200000.0
    assert "simulated_profile.decode_tok_s" not in other["key"]
    status, out, _ = cli("history", str(evidence), *across)
    assert "    engine_version differs: 1.0 -> 1.1" in out.splitlines()
    # Without the decode rate in --across, the other arm's configuration changes too.
    _, split, _ = _json(cli, str(evidence), "--across", "engine_version")
    assert len(_series(split, "decode_tok_s", gpu="sim-gpu-1")) == 2


def test_across_takes_any_identity_field_and_refuses_one_none_has(
    cli: CliRun, evidence: Path
) -> None:
    status, out, err = cli("history", str(evidence), "--across", "imagery")
    assert (status, out) == (2, "")
    assert "--across imagery: no campaign's identity has it" in err and len(err.splitlines()) == 1


def test_a_campaign_that_fails_verification_is_excluded_and_the_rest_written(
    cli: CliRun, evidence: Path, tmp_path: Path
) -> None:
    root = tmp_path / "evidence"
    shutil.copytree(evidence, root)
    tampered = root / CAMPAIGNS[1] / "main" / "capacity" / "ctx256-c1-nothink.json"
    # A start moved by ten years, the bytes as many: only the digest tells.
    started = json.loads(tampered.read_text())["started_at"]
    tampered.write_text(tampered.read_text().replace(started, started.replace("2026", "2016")))
    status, out, err = cli("history", str(root))
    assert status == 1
    assert err == (
        f"FAIL: 1 excluded, failed verification (ledger verify {root} lists every finding)\n"
    )
    lines = out.splitlines()
    at = lines.index("excluded, failed verification:")
    assert lines[at + 1].startswith(
        f"  {CAMPAIGNS[1]}: hash-mismatch manifest.json#/artifacts/0/sha256: "
        "'main/capacity/ctx256-c1-nothink.json' has sha256 "
    )
    status, document, _ = _json(cli, str(root), *STEPPED)
    assert status == 1
    assert [e["campaign"] for e in document["excluded"]] == [CAMPAIGNS[1]]
    assert CAMPAIGNS[1] not in [c["campaign_id"] for c in document["campaigns"]]
    (decode,) = _series(document, "decode_tok_s", gpu="sim-gpu-0")
    assert [p["campaign_id"] for p in decode["points"]] == [
        c for c in CAMPAIGNS if c != CAMPAIGNS[1]
    ]
    (change,) = decode["change_points"]
    assert change["after"]["campaign_id"] == CAMPAIGNS[STEP]


def test_a_campaign_without_raw_rows_is_skipped_and_named(
    cli: CliRun, evidence: Path, tmp_path: Path
) -> None:
    root = tmp_path / "evidence"
    shutil.copytree(evidence, root)
    summary_only = "2026-09-02-glm53-sglang-sm120-qualification"
    shutil.copytree(ROOT / "evidence" / summary_only, root / summary_only)
    status, document, err = _json(cli, str(root))
    assert (status, err) == (0, "")
    assert document["skipped"] == [{"campaign": summary_only, "reason": "no raw request rows"}]
    assert summary_only not in [c["campaign_id"] for c in document["campaigns"]]
    status, out, _ = cli("history", str(root))
    assert f"  {summary_only}: no raw request rows" in out.splitlines()


def test_json_is_a_valid_history_document(cli: CliRun, evidence: Path) -> None:
    schema = json.loads((ROOT / "schemas" / "history" / "v1.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(_json(cli, str(evidence), *STEPPED)[1])
    _, document, _ = _json(cli, str(evidence))
    jsonschema.Draft202012Validator(schema).validate(document)
    assert document["schema"] == "anvil-serving.history/v1"
    summary = document["summary"]
    assert summary["series"] == len(document["series"])
    assert summary["points"] == sum(len(s["points"]) for s in document["series"])
    assert summary["campaigns"] == len(CAMPAIGNS)
    # The schema refuses what the document must not hold.
    broken = {**document, "root": "/home/someone/evidence"}
    with pytest.raises(jsonschema.ValidationError, match="'root' was unexpected"):
        jsonschema.Draft202012Validator(schema).validate(broken)


def test_every_output_is_the_same_bytes_for_the_same_evidence(
    cli: CliRun, evidence: Path, tmp_path: Path
) -> None:
    outputs = []
    for run in ("first", "second"):
        page = tmp_path / f"{run}.html"
        _, text, _ = cli("history", str(evidence), "--html", str(page))
        _, as_json, _ = cli("history", str(evidence), "--format", "json")
        outputs.append((text, as_json, page.read_bytes()))
    assert outputs[0] == outputs[1]


def test_the_page_has_one_chart_per_series(cli: CliRun, evidence: Path, tmp_path: Path) -> None:
    page = tmp_path / "history.html"
    status, _, err = cli("history", str(evidence), *STEPPED, "--html", str(page))
    assert (status, err) == (0, "")
    _, document, _ = _json(cli, str(evidence), *STEPPED)
    html = page.read_text()
    assert html.count("<svg ") == len(document["series"]) > 0
    assert "<script" not in html and "src=" not in html and "href=" not in html
    steps = sum(len(s["change_points"]) for s in document["series"])
    assert html.count('stroke-dasharray="4 3"') == steps > 0
    assert f"{CAMPAIGNS[STEP - 1]} (main) -&gt; {CAMPAIGNS[STEP]} (main)" in html


def test_an_html_page_with_other_content_is_replaced_only_when_asked(
    cli: CliRun, evidence: Path, tmp_path: Path
) -> None:
    page = tmp_path / "history.html"
    page.write_text("mine\n")
    status, out, err = cli("history", str(evidence), "--html", str(page))
    assert (status, out) == (2, "")
    assert err == (
        f"error: {page} exists with other content; nothing was written (--replace replaces it)\n"
    )
    assert page.read_text() == "mine\n"
    assert cli("history", str(evidence), "--html", str(page), "--replace")[0] == 0
    written = page.read_bytes()
    assert written.startswith(b"<!DOCTYPE html>")
    # The same page again is no change: no --replace needed.
    assert cli("history", str(evidence), "--html", str(page))[0] == 0
    assert page.read_bytes() == written
    # --replace alone replaces nothing: a forgotten --html is said, not passed over.
    status, out, err = cli("history", str(evidence), "--replace")
    assert (status, out) == (2, "")
    assert err == "ledger history: error: --replace is given without --html FILE\n"


@pytest.mark.parametrize(
    ("where", "said"),
    [
        ("CAMPAIGN/history.html", "inside the campaign"),
        ("MISSING/history.html", "no such folder"),
        ("FOLDER", "not a regular file"),
    ],
)
def test_an_html_page_that_cannot_be_written_there_is_refused(
    cli: CliRun, evidence: Path, tmp_path: Path, where: str, said: str
) -> None:
    root = tmp_path / "evidence"
    shutil.copytree(evidence, root)
    (tmp_path / "folder").mkdir()
    place = (
        where.replace("CAMPAIGN", str(root / CAMPAIGNS[0]))
        .replace("MISSING", str(tmp_path / "missing"))
        .replace("FOLDER", str(tmp_path / "folder"))
    )
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    status, out, err = cli("history", str(root), "--html", place)
    assert (status, out) == (2, "")
    assert err.startswith(f"ledger history: error: --html {place}: ") and said in err
    assert len(err.splitlines()) == 1
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda p: None, "no such folder"),
        (lambda p: p.write_text("{}"), "not a folder"),
        (lambda p: p.mkdir(), "no campaign folder here"),
    ],
    ids=["missing", "file", "empty"],
)
def test_a_root_that_is_not_usable_is_one_line_and_exit_2(
    cli: CliRun, tmp_path: Path, make: Any, said: str
) -> None:
    root = tmp_path / "root"
    make(root)
    status, out, err = cli("history", str(root))
    assert (status, out) == (2, "")
    assert said in err and str(root) in err and len(err.splitlines()) == 1
    assert "Traceback" not in err


def test_the_command_offers_the_named_fields_as_across() -> None:
    # The parser names them without importing the library (every command's start-up).
    assert _FIELDS == NAMED


def test_starts_compare_as_times_whatever_their_offset_or_precision() -> None:
    from ledger.history._series import _time_order, _utc

    assert _utc("2026-10-01T14:00:00+02:00") == _utc("2026-10-01T12:00:00Z")
    assert _utc("2026-10-01T12:00:00Z") < _utc("2026-10-01T12:00:00.5Z")  # type: ignore[operator]
    assert _utc("2026-10-01T12:00:00") is None  # no offset: not comparable
    assert _utc("yesterday") is None and _utc(None) is None
    # A campaign whose start is unrecorded comes first on its date, then by id.
    order = sorted(
        [("2026-10-02-b", None), ("2026-10-02-a", "2026-10-02T01:00:00.000000Z"),
         ("2026-10-01-z", "2026-10-01T23:00:00.000000Z"), ("2026-10-02-c", None)],
        key=lambda c: _time_order(*c),
    )  # fmt: skip
    assert [c for c, _ in order] == ["2026-10-01-z", "2026-10-02-b", "2026-10-02-c", "2026-10-02-a"]


def test_a_campaign_starts_with_its_earliest_cell() -> None:
    from ledger.history._series import _starts

    cells = [
        {"campaign_id": "c", "started_at": "2026-10-01T12:00:05Z"},
        {"campaign_id": "c", "started_at": "2026-10-01T12:00:01Z"},
        {"campaign_id": "c", "started_at": None},
        {"campaign_id": "c", "started_at": "2026-10-01T12:00:09Z"},
        {"campaign_id": "d", "started_at": None},
    ]
    starts = _starts(cells)
    assert starts["d"] is None
    assert starts["c"] is not None and starts["c"].startswith("2026-10-01T12:00:01")
