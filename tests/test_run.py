"""``ledger run`` end to end on the simulated endpoint: artifacts, signals and --resume."""

from __future__ import annotations

import copy
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ledger.formats.schema import read_document
from runners.campaign import run_plan
from runners.campaign._folder import _first_difference
from runners.campaign.progress import LogProgress
from runners.plan import load_plan
from tests.conftest import ROOT, CliRun, verify_json

SECRET = "sk-anvil-test-3141592653"

PLAN = """
campaign_id = "2026-11-29-run-test"
seed = 5
[deadlines]
first_byte_s = 20
idle_s = 5
[[arms]]
name = "{arm}"
api_key_env = "ANVIL_TEST_KEY"
[arms.simulated]
decode_tok_s = {decode}
prefill_tok_s = 200000.0
[arms.identity]
os = "linux"
[[stages]]
kind = "capacity"
context_targets = [256, 512]
concurrency = 2
requests = {requests}
max_tokens = 16
controlled_output = true
warmup = 1
[[stages]]
kind = "endurance"
context_target = 256
requests = 3
max_tokens = 8
"""


def _write_plan(
    folder: Path, *, arm: str = "linux", decode: float = 400.0, requests: int = 4
) -> Path:
    path = folder / "plan.toml"
    path.write_text(PLAN.format(arm=arm, decode=decode, requests=requests))
    return path


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("ANVIL_TEST_KEY", SECRET)
    return SECRET


def _all_bytes(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


def test_run_writes_a_verifiable_raw_campaign(tmp_path: Path, key: str, cli: CliRun) -> None:
    plan_path = _write_plan(tmp_path)
    status, out, err = cli("run", str(plan_path), "--raw-dir", str(tmp_path / "raw"))
    assert status == 0, err
    folder = tmp_path / "raw" / "2026-11-29-run-test"
    names = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert names == [
        "SHA256SUMS",
        "linux/capacity/ctx256-c2-nothink.json",
        "linux/capacity/ctx512-c2-nothink.json",
        "linux/endurance/ctx256-c1-nothink.json",
        "manifest.json",
        "run-manifest.json",
        "run-plan.json",
        "workload-manifest.json",
    ]
    # The run table: a row per cell.
    assert out.splitlines()[0].split()[:4] == ["arm", "stage", "cell", "status"]
    assert "ctx512-c2-nothink  complete  4/4" in out
    assert key.encode() not in _all_bytes(folder)
    assert key not in out + err

    cell = read_document(folder / "linux/capacity/ctx512-c2-nothink.json")
    assert cell["status"] == "complete"
    assert [r["warmup"] for r in cell["requests"]] == [True, False, False, False, False]
    assert all(r["output_as_requested"] for r in cell["requests"])
    assert cell["identity"]["os"] == "linux"
    assert cell["identity"]["simulated_profile"]["decode_tok_s"] == 400.0
    assert cell["metrics"]["available"] is True
    prefix = cell["metrics"]["prefix_cache"]
    assert prefix["queries"] == sum(r["usage"]["prompt_tokens"] for r in cell["requests"][1:])
    assert prefix["hits"] > 0  # shared prefix: measured, not assumed

    workload = read_document(folder / "workload-manifest.json")
    entry = next(c for c in workload["cells"] if c["cell"] == "ctx512-c2-nothink")
    assert 0.98 * 512 <= entry["calibration"]["prompt_tokens"] <= 512
    for prompt, record in zip(entry["prompts"], cell["requests"], strict=True):
        assert prompt["sha256"] == record["prompt_sha256"]
        assert prompt["prompt_tokens"] == {"linux": record["usage"]["prompt_tokens"]}

    endurance = read_document(folder / "linux/endurance/ctx256-c1-nothink.json")
    assert all(r["output_as_requested"] is None for r in endurance["requests"])

    status, report = verify_json(cli, folder)
    assert status == 0
    assert report["summary"]["errors"] == 0 and report["summary"]["warnings"] == 0


def test_same_plan_gives_identical_plan_and_workload(tmp_path: Path, key: str) -> None:
    plan = load_plan(_write_plan(tmp_path))
    with open(os.devnull, "w") as quiet:
        for name in ("one", "two"):
            run_plan(plan, tmp_path / name, progress=LogProgress(quiet))
    for document in ("run-plan.json", "workload-manifest.json"):
        one = (tmp_path / "one" / plan.campaign_id / document).read_bytes()
        two = (tmp_path / "two" / plan.campaign_id / document).read_bytes()
        assert one == two, document


def test_folder_with_a_run_needs_resume(tmp_path: Path, key: str, cli: CliRun) -> None:
    plan_path = _write_plan(tmp_path)
    assert cli("run", str(plan_path), "--raw-dir", str(tmp_path))[0] == 0
    status, _, err = cli("run", str(plan_path), "--raw-dir", str(tmp_path))
    assert status == 2
    assert "pass --resume" in err
    # A resume of a finished run redoes nothing.
    before = _all_bytes(tmp_path / "2026-11-29-run-test" / "linux")
    status, out, _ = cli("run", str(plan_path), "--raw-dir", str(tmp_path), "--resume")
    assert status == 0
    assert out.count("skipped") == 3
    assert _all_bytes(tmp_path / "2026-11-29-run-test" / "linux") == before


def test_resume_refuses_a_changed_plan(tmp_path: Path, key: str, cli: CliRun) -> None:
    assert cli("run", str(_write_plan(tmp_path)), "--raw-dir", str(tmp_path))[0] == 0
    changed = _write_plan(tmp_path, requests=5)
    status, _, err = cli("run", str(changed), "--raw-dir", str(tmp_path), "--resume")
    assert status == 1
    assert "plan differs" in err and "/stages/0/requests" in err
    # Named as the plan file names it, with both values.
    assert "stage 'capacity', requests: 4 in the run, 5 now" in err


def test_missing_key_variable_is_one_line(
    tmp_path: Path, cli: CliRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANVIL_TEST_KEY", raising=False)
    status, _, err = cli("run", str(_write_plan(tmp_path)), "--raw-dir", str(tmp_path))
    assert status == 1
    assert "ANVIL_TEST_KEY" in err and "not set" in err
    assert "Traceback" not in err


def test_unreachable_endpoint_records_connect_errors(tmp_path: Path, cli: CliRun) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(
        'campaign_id = "2026-11-29-down"\n'
        "[deadlines]\nconnect_s = 1\n"
        '[[arms]]\nname = "gone"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'
        '[[stages]]\nkind = "endurance"\ncontext_target = 64\nrequests = 2\nmax_tokens = 4\n'
    )
    status, out, _ = cli("run", str(plan), "--raw-dir", str(tmp_path))
    assert status == 0  # failed requests are evidence, the run itself completed
    cell = read_document(tmp_path / "2026-11-29-down/gone/endurance/ctx64-c1-nothink.json")
    assert [r["error"]["class"] for r in cell["requests"]] == ["connect", "connect"]
    workload = read_document(tmp_path / "2026-11-29-down/workload-manifest.json")
    assert workload["cells"][0]["calibration"]["status"] == "failed"
    assert "0/2" in out


def _start(plan: Path, raw: Path, *extra: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "ANVIL_TEST_KEY": SECRET, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "ledger", "run", str(plan), "--raw-dir", str(raw), *extra],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _wait_for(path: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


@pytest.mark.parametrize(
    ("signum", "status", "reason"),
    [
        (signal.SIGINT, 130, "interrupted by SIGINT"),
        (signal.SIGTERM, 143, "interrupted by SIGTERM"),
        (signal.SIGKILL, -9, "running"),
    ],
    ids=["sigint", "sigterm", "sigkill"],
)
def test_interrupt_then_resume(
    tmp_path: Path, cli: CliRun, key: str, signum: int, status: int, reason: str
) -> None:
    # 16 tokens at 40 tok/s: each request takes 0.4 s, a cell of 5 at concurrency 2 ~1.2 s.
    plan = _write_plan(tmp_path, decode=40.0)
    raw = tmp_path / "raw"
    folder = raw / "2026-11-29-run-test"
    first = folder / "linux/capacity/ctx256-c2-nothink.json"
    second = folder / "linux/capacity/ctx512-c2-nothink.json"
    process = _start(plan, raw)
    _wait_for(second)
    time.sleep(0.9)
    process.send_signal(signum)
    _, err = process.communicate(timeout=60)
    assert process.returncode == status, err.decode()

    assert read_document(first)["status"] == "complete"
    first_bytes = first.read_bytes()
    interrupted = read_document(second)
    assert interrupted["status"] == "incomplete"
    assert interrupted["reason"] == reason
    if signum != signal.SIGKILL:
        # Finished requests are kept; the run manifest and the seal say where it stopped.
        assert 1 <= len(interrupted["requests"]) < 5
        run_manifest = read_document(folder / "run-manifest.json")
        assert run_manifest["complete"] is False
        assert [c["status"] for c in run_manifest["cells"]] == ["complete", "incomplete", "pending"]
        code, report = verify_json(cli, folder)
        assert code == 0
        assert {f["code"] for f in report["findings"]} == {"run-incomplete"}
        assert "--resume" in err.decode()

    # What a SIGKILL during an atomic write leaves: a temporary file, never an artifact.
    stale = second.parent / f".{second.name}.k1l2m3.tmp"
    stale.write_bytes(b'{"half": ')
    resumed = _start(plan, raw, "--resume")
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err.decode()
    assert first.read_bytes() == first_bytes  # not redone
    assert not stale.exists()
    assert read_document(second)["status"] == "complete"
    kept = folder / "linux/capacity/ctx512-c2-nothink.interrupted-1.json"
    assert read_document(kept)["reason"] == reason
    run_manifest = read_document(folder / "run-manifest.json")
    assert run_manifest["complete"] is True
    assert run_manifest["cells"][1]["interrupted"][0]["path"] == kept.relative_to(folder).as_posix()
    code, report = verify_json(cli, folder)
    assert code == 0
    # Only the kept attempt is incomplete.
    assert [(f["code"], f["path"].split("/")[-1]) for f in report["findings"]] == [
        ("run-incomplete", "ctx512-c2-nothink.interrupted-1.json")
    ]
    assert SECRET.encode() not in _all_bytes(folder)
    # The closing table: the cell finished before the signal is not run again.
    assert re.search(rb"linux +capacity +ctx256-c2-nothink +skipped", out), out.decode()
    assert re.search(rb"linux +capacity +ctx512-c2-nothink +complete +4/4", out), out.decode()
    assert re.search(rb"linux +endurance +ctx256-c1-nothink +complete +3/3", out), out.decode()


def test_progress_lines_when_not_a_terminal(tmp_path: Path, key: str) -> None:
    log = tmp_path / "progress.log"
    with open(log, "w") as stream:
        run_plan(load_plan(_write_plan(tmp_path)), tmp_path / "raw", progress=LogProgress(stream))
    lines = log.read_text().splitlines()
    assert lines[0] == "linux capacity ctx256-c2-nothink: 5 requests"
    assert any(
        line.startswith("linux capacity ctx256-c2-nothink: complete: 4/4 ok, TTFT ")
        for line in lines
    )
    # Plain text only: no terminal control sequences, no carriage returns.
    assert all(line.isprintable() for line in lines)


def test_two_arms_get_the_same_prompts(tmp_path: Path, cli: CliRun, simulator: Any) -> None:
    # The candidate is any OpenAI-compatible server reached by URL (here `ledger simulate`
    # started apart); the baseline is an embedded one. Unique prefixes: no cache reuse.
    external = simulator(decode_tok_s=300.0, reasoning_tokens=8)
    plan = tmp_path / "ab.toml"
    plan.write_text(
        'campaign_id = "2026-11-29-ab"\nprefix = "unique"\n'
        '[[arms]]\nname = "baseline"\n[arms.simulated]\ndecode_tok_s = 600.0\n'
        "reasoning_tokens = 8\n"
        f'[[arms]]\nname = "candidate"\nbase_url = "{external.base_url}"\nmodel = "anvil-sim"\n'
        '[arms.identity]\nvariable = "decode rate"\n'
        '[[stages]]\nkind = "capacity"\ncontext_targets = [300]\nthinking = [false, true]\n'
        "requests = 3\nmax_tokens = 12\ncontrolled_output = true\n"
    )
    status, _, err = cli("run", str(plan), "--raw-dir", str(tmp_path))
    assert status == 0, err
    folder = tmp_path / "2026-11-29-ab"
    for cell_id in ("ctx300-c1-nothink", "ctx300-c1-think"):
        cells = {
            arm: read_document(folder / arm / "capacity" / f"{cell_id}.json")
            for arm in ("baseline", "candidate")
        }
        digests = {arm: [r["prompt_sha256"] for r in c["requests"]] for arm, c in cells.items()}
        assert digests["baseline"] == digests["candidate"]
        assert len(set(digests["baseline"])) == 3
        for cell in cells.values():
            assert cell["metrics"]["prefix_cache"]["hits"] == 0
            assert all(r["output_as_requested"] for r in cell["requests"])
            channels = {r["chunk_channels"] for r in cell["requests"]}
            assert channels == ({"r" * 8 + "c" * 4} if cell_id.endswith("-think") else {"c" * 12})
        assert cells["candidate"]["endpoint"]["base_url"] == external.base_url
        assert "simulated_profile" not in cells["candidate"]["identity"]
        assert cells["candidate"]["identity"] == {"variable": "decode rate"}
    workload = read_document(folder / "workload-manifest.json")
    for entry in workload["cells"]:
        assert entry["calibration"]["arm"] == "baseline"
        for prompt in entry["prompts"]:
            assert set(prompt["prompt_tokens"]) == {"baseline", "candidate"}
            assert len(set(prompt["prompt_tokens"].values())) == 1
    assert verify_json(cli, folder)[0] == 0


def test_a_plan_of_a_preflight_alone_runs_and_verifies(tmp_path: Path, cli: CliRun) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(
        'campaign_id = "2026-11-30-preflight-only"\n'
        '[[arms]]\nname = "new-server"\n[arms.simulated]\ndecode_tok_s = 2000.0\n'
        '[[stages]]\nkind = "preflight"\nlong_tool_tokens = 2000\n'
    )
    status, out, err = cli("run", str(plan), "--raw-dir", str(tmp_path / "raw"))
    assert status == 0, err
    folder = tmp_path / "raw" / "2026-11-30-preflight-only"
    names = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert names == [
        "SHA256SUMS",
        "manifest.json",
        "new-server/preflight.json",
        "run-manifest.json",
        "run-plan.json",
    ]
    assert out == ""  # no cells, no cell table
    assert "new-server preflight: passed" in err
    assert read_document(folder / "run-plan.json")["stages"] == []
    # The arm is known by its gate alone: decide picks it and reads its preflight.
    status, _, err = cli("decide", str(folder))
    assert status == 0, err
    decision = read_document(folder / "summary.json")["decision"]
    assert decision["candidate"] == "new-server"
    unmet = {u["rule"]: u["reason"] for u in decision["unmet"]}
    assert "candidate" not in unmet
    assert "preflight" not in unmet.get("required-gates", "")
    status, report = verify_json(cli, folder)
    assert status == 0, report["findings"]


def test_the_closing_table_shows_the_servers_clock_only_where_it_was_read(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from runners._cli import _print_cells
    from runners.campaign import CellOutcome
    from runners.campaign._stats import CellStats

    plain = CellStats(10, 0, 12.0, 80.0, 150.0, 400.0)
    timed = CellStats(10, 1, 12.0, 80.0, 150.0, 400.0, server_gap_ms=3.25, server_decode_tok_s=85.5)
    _print_cells([CellOutcome("a", "capacity", "ctx512-c1-nothink", "complete", plain)])
    out = capsys.readouterr().out
    assert "server" not in out and "9/10" not in out and "10/10" in out
    _print_cells(
        [
            CellOutcome("a", "capacity", "ctx512-c1-nothink", "complete", plain),
            CellOutcome("b", "capacity", "ctx512-c1-nothink", "complete", timed),
        ]
    )
    header, first, second = capsys.readouterr().out.splitlines()
    assert header.endswith("first token - server prompt ms  server decode tok/s")
    assert first.split()[-2:] == ["-", "-"]
    assert second.split()[-2:] == ["3.2", "85.5"] and "9/10" in second


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda p: p["arms"][1].update(model="other"), "arm 'b', model: \"m\" in the run"),
        (
            lambda p: p["stages"][0]["cells"][1].update(concurrency=8),
            "stage 'capacity', cell 'ctx2', concurrency: 4 in the run, 8 now",
        ),
        (lambda p: p["stages"].append({"name": "x"}), "stages: 1 entries in the run, 2 entries"),
        (lambda p: p.pop("seed"), "seed: 7 in the run, absent now (/seed of run-plan.json)"),
        (
            lambda p: p["evidence_stages"][0].update(interval_s=2),
            "evidence stage 'telemetry', interval_s: 1 in the run, 2 now",
        ),
    ],
)
def test_a_changed_plan_is_described_as_the_plan_file_names_it(edit: Any, said: str) -> None:
    recorded = {
        "arms": [{"name": "a", "model": "m"}, {"name": "b", "model": "m"}],
        "seed": 7,
        "stages": [
            {
                "name": "capacity",
                "cells": [{"id": "ctx1", "concurrency": 4}, {"id": "ctx2", "concurrency": 4}],
            }
        ],
        "evidence_stages": [{"name": "telemetry", "interval_s": 1}],
    }
    wanted = copy.deepcopy(recorded)
    edit(wanted)
    assert said in _first_difference(recorded, wanted)


def test_a_folder_with_files_but_no_run_is_neither_a_run_nor_resumed(
    tmp_path: Path, key: str, cli: CliRun
) -> None:
    plan_path = _write_plan(tmp_path)
    folder = tmp_path / "raw" / "2026-11-29-run-test"
    folder.mkdir(parents=True)
    (folder / "junk").write_text("not evidence\n")
    for extra in ((), ("--resume",)):
        status, _, err = cli("run", str(plan_path), "--raw-dir", str(tmp_path / "raw"), *extra)
        assert status == 2
        assert "holds files but no run (run-plan.json is missing)" in err
    assert sorted(p.name for p in folder.iterdir()) == ["junk"]  # nothing sealed


def test_a_server_that_reports_negative_usage_fails_those_requests(
    tmp_path: Path, cli: CliRun
) -> None:
    """What a server says is evidence: a request it reports ``prompt_tokens: -3`` for is a
    failed request with its reason, and the run goes on (it exited 2 on the workload)."""
    plan = tmp_path / "plan.toml"
    plan.write_text(
        'campaign_id = "2026-11-29-bad-usage"\nseed = 5\n'
        '[[arms]]\nname = "a"\n[arms.simulated]\ndecode_tok_s = 2000.0\n'
        'faults = [{kind = "bad-usage", rate = 0.5}]\n'
        '[[stages]]\nkind = "capacity"\ncontext_targets = [256]\nconcurrency = 2\n'
        "requests = 8\nmax_tokens = 8\ncontrolled_output = true\n"
    )
    status, _, err = cli("run", str(plan), "--raw-dir", str(tmp_path / "raw"))
    assert status == 0, err
    folder = tmp_path / "raw" / "2026-11-29-bad-usage"
    cell = read_document(folder / "a" / "capacity" / "ctx256-c2-nothink.json")
    failed = [r for r in cell["requests"] if r["error"] is not None]
    assert failed and len(failed) < len(cell["requests"])
    for record in failed:
        assert record["error"]["class"] == "malformed-stream"
        assert record["error"]["message"] == (
            "the server's usage.prompt_tokens is -3: not a token count"
        )
        assert record["usage"] is None
    assert verify_json(cli, folder)[0] == 0
