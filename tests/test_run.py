"""``ledger run`` end to end on the simulated endpoint: artifacts, signals and --resume."""

from __future__ import annotations

import copy
import hashlib
import os
import re
import signal
import socket
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
from tests import cells
from tests import cells as cell_files
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
controlled_output = false
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
        "linux/capacity/ctx256-c2-nothink.part-0001.jsonl",
        "linux/capacity/ctx512-c2-nothink.json",
        "linux/capacity/ctx512-c2-nothink.part-0001.jsonl",
        "linux/endurance/ctx256-c1-nothink.json",
        "linux/endurance/ctx256-c1-nothink.part-0001.jsonl",
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

    cell = cells.load(folder / "linux/capacity/ctx512-c2-nothink.json")
    assert cell["status"] == "complete"
    assert cell["records"] == 5 and len(cell["parts"]) == 1
    # In the order they ended: the warm-up first, alone.
    assert [r["warmup"] for r in cell["requests"]] == [True, False, False, False, False]
    assert sorted(r["index"] for r in cell["requests"]) == [0, 1, 2, 3, 4]
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
    # One digest over the prompts' digests in index order: the records' own.
    ordered = sorted(cell["requests"], key=lambda r: r["index"])
    assert entry["prompts"] == {
        "count": 5,
        "warmup": 1,
        "bytes": entry["prompts"]["bytes"],  # held below
        "sha256": hashlib.sha256(
            b"".join(r["prompt_sha256"].encode() + b"\n" for r in ordered)
        ).hexdigest(),
    }
    # Each prompt holds the calibrated filler at least (a word is a byte or more).
    assert entry["prompts"]["bytes"] >= 5 * entry["calibration"]["filler_words"] > 0
    assert entry["prompt_tokens"] == {
        "linux": {"requests": 5, "total": sum(r["usage"]["prompt_tokens"] for r in ordered)}
    }

    endurance = cells.load(folder / "linux/endurance/ctx256-c1-nothink.json")
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


def test_a_refused_port_fails_the_run_in_one_line(tmp_path: Path, cli: CliRun) -> None:
    """A wrong port: every request is recorded as refused, the campaign is written and
    sealed, and the run exits 1 with one line naming the arm, the stage and the port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    plan = tmp_path / "plan.toml"
    plan.write_text(
        'campaign_id = "2026-11-29-down"\n'
        "[deadlines]\nconnect_s = 1\n"
        f'[[arms]]\nname = "gone"\nbase_url = "http://127.0.0.1:{port}/v1"\nmodel = "m"\n'
        '[[stages]]\nkind = "endurance"\ncontext_target = 64\nrequests = 2\nmax_tokens = 4\n'
        '[[stages]]\nkind = "capacity"\ncontext_targets = [64, 128]\nrequests = 3\n'
        "max_tokens = 4\n"
    )
    status, out, err = cli("run", str(plan), "--raw-dir", str(tmp_path))
    assert status == 1
    said = [line for line in err.splitlines() if line.startswith("ledger run: ")]
    assert len(said) == 1, err
    head, _, first_error = said[0].partition("; first error: ")
    assert head == (
        'ledger run: arm "gone", stage "endurance", cell "ctx64-c1-nothink": 0 of 2 requests '
        "succeeded (2 more cells fell short)"
    )
    assert first_error.startswith("connect: ") and f"127.0.0.1:{port}" in first_error
    # Failed requests are evidence: every one recorded, the folder sealed and verified.
    folder = tmp_path / "2026-11-29-down"
    cell = cells.load(folder / "gone/endurance/ctx64-c1-nothink.json")
    assert cell["status"] == "complete"
    assert [r["error"]["class"] for r in cell["requests"]] == ["connect", "connect"]
    assert f"connect: {cell['requests'][0]['error']['message']}" in said[0]
    workload = read_document(folder / "workload-manifest.json")
    assert workload["cells"][0]["calibration"]["status"] == "failed"
    assert "0/2" in out and "0/3" in out
    assert read_document(folder / "run-manifest.json")["complete"] is True
    status, report = verify_json(cli, folder)
    assert status == 0, report["findings"]
    # A resume measures nothing new (every cell is complete) and says the same: the cells
    # it keeps are judged from their parts.
    status, out, err = cli("run", str(plan), "--raw-dir", str(tmp_path), "--resume")
    assert status == 1
    again = [line for line in err.splitlines() if line.startswith("ledger run: ")]
    assert again == said, err
    assert "skipped" in out and "0/2" in out and "0/3" in out


FAULTY_PLAN = """
campaign_id = "2026-11-29-faulty"
seed = 3
[[arms]]
name = "flaky"
[arms.simulated]
decode_tok_s = 2000.0
faults = [{{kind = "status", status = 503, rate = 0.5}}]
[[stages]]
kind = "endurance"
context_target = 64
requests = 8
max_tokens = 4
warmup = 1
min_success = {minimum}
"""


def test_a_cell_short_of_its_min_success_fails_the_run(tmp_path: Path, cli: CliRun) -> None:
    """Half the requests answered 503 (seeded, so every run draws the same): a stage that
    asks for all eight fails the run, one that asks for what succeeded does not."""

    def run(minimum: int) -> tuple[int, str, int]:
        plan = tmp_path / f"plan-{minimum}.toml"
        plan.write_text(FAULTY_PLAN.format(minimum=minimum))
        raw = tmp_path / f"raw-{minimum}"
        status, _, err = cli("run", str(plan), "--raw-dir", str(raw))
        cell = cells.load(raw / "2026-11-29-faulty/flaky/endurance/ctx64-c1-nothink.json")
        measured = [r for r in cell["requests"] if not r["warmup"]]
        assert len(measured) == 8
        return status, err, sum(r["error"] is None for r in measured)

    status, err, succeeded = run(8)
    assert 0 < succeeded < 8
    assert status == 1
    (said,) = [line for line in err.splitlines() if line.startswith("ledger run: ")]
    assert said == (
        f'ledger run: arm "flaky", stage "endurance", cell "ctx64-c1-nothink": {succeeded} of 8 '
        "requests succeeded, fewer than the stage's min_success of 8; first error: http-5xx: "
        "HTTP 503: injected status 503"
    )
    status, err, again = run(succeeded)
    assert again == succeeded
    assert status == 0, err
    assert "ledger run: " not in err


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
        # A closed terminal: the run stops as on SIGTERM, and says how to finish it.
        (signal.SIGHUP, 129, "interrupted by SIGHUP"),
        (signal.SIGKILL, -9, "running"),
    ],
    ids=["sigint", "sigterm", "sighup", "sigkill"],
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
    # Every request that ended before the signal is on disk: in the parts the cell lists,
    # or (after SIGKILL) in the one it was writing.
    part = folder / "linux/capacity/ctx512-c2-nothink.part-0001.jsonl"
    # Every whole line (a kill in the middle of one leaves it cut short, and it goes).
    before = [x for x in part.read_bytes().splitlines(keepends=True) if x.endswith(b"\n")]
    assert 1 <= len(before) < 5
    if signum != signal.SIGKILL:
        assert interrupted["records"] == len(before)
        assert [p["path"] for p in interrupted["parts"]] == [part.relative_to(folder).as_posix()]
        run_manifest = read_document(folder / "run-manifest.json")
        assert run_manifest["complete"] is False
        assert [c["status"] for c in run_manifest["cells"]] == ["complete", "incomplete", "pending"]
        code, report = verify_json(cli, folder)
        assert code == 0
        assert {f["code"] for f in report["findings"]} == {"run-incomplete"}
        assert (f"{second}", "/status") in {(f["path"], f["pointer"]) for f in report["findings"]}
        assert "--resume" in err.decode()
    else:
        # Killed: the part it was writing is not listed yet, and a line may be cut short.
        assert interrupted["parts"] == [] and interrupted["records"] == 0
        with open(part, "ab") as stream:
            stream.write(b'{"index": 4, "warmup": fal')

    # What a SIGKILL during an atomic write leaves: a temporary file, never an artifact.
    stale = second.parent / f".{second.name}.k1l2m3.tmp"
    stale.write_bytes(b'{"half": ')
    resumed = _start(plan, raw, "--resume")
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err.decode()
    assert first.read_bytes() == first_bytes  # not redone
    assert not stale.exists()
    finished = read_document(second)
    assert finished["status"] == "complete"
    # The cell went on from its records: those finished before are kept as they were, the
    # rest were sent once each, and a line cut short is gone.
    records = cells.load(second)["requests"]
    assert sorted(r["index"] for r in records) == [0, 1, 2, 3, 4]
    lines = b"".join((folder / p["path"]).read_bytes() for p in finished["parts"])
    assert lines.startswith(b"".join(before))
    (resumption,) = finished["resumed"]
    assert resumption["records"] == len(before)
    assert resumption["clock_ns"] == max(r["end_ns"] for r in records[: len(before)])
    # Requests of the resumed run are timed on the cell's clock after those before it.
    assert all(r["sent_ns"] >= resumption["clock_ns"] for r in records[len(before) :])
    assert finished["metrics"]["available"] is False
    assert "resumed" in finished["metrics"]["reason"]
    assert not list(folder.rglob("*.interrupted-*"))
    run_manifest = read_document(folder / "run-manifest.json")
    assert run_manifest["complete"] is True
    code, report = verify_json(cli, folder)
    assert (code, report["findings"]) == (0, [])
    assert SECRET.encode() not in _all_bytes(folder)
    # The closing table: the cell finished before the signal is not run again.
    assert re.search(rb"linux +capacity +ctx256-c2-nothink +skipped", out), out.decode()
    assert re.search(rb"linux +capacity +ctx512-c2-nothink +complete +4/4", out), out.decode()
    assert re.search(rb"linux +endurance +ctx256-c1-nothink +complete +3/3", out), out.decode()


def test_a_cell_taken_up_again_after_its_seal_and_what_is_refused(
    tmp_path: Path, cli: CliRun, key: str
) -> None:
    """A cell interrupted, sealed, then written again by a run killed before it sealed
    (its file rewritten, marked running): the next --resume goes on with it. Its file
    made to say complete instead, or a workload manifest of the earlier format, is
    refused."""
    import shutil

    from ledger.formats.jsonio import read_json, write_json

    plan = _write_plan(tmp_path, decode=40.0)
    raw = tmp_path / "raw"
    folder = raw / "2026-11-29-run-test"
    second = folder / "linux/capacity/ctx512-c2-nothink.json"
    process = _start(plan, raw)
    _wait_for(second)
    time.sleep(0.9)
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=60)
    assert read_document(second)["status"] == "incomplete"
    copies = {}
    for name in ("complete", "workload", "twice"):
        copies[name] = tmp_path / name / "raw"
        shutil.copytree(raw, copies[name])
    # What a second run killed before it sealed leaves: the cell's file rewritten.
    header = read_json(second)
    header["reason"] = "running"
    write_json(second, header)
    status, _, err = cli("run", str(plan), "--raw-dir", str(raw), "--resume")
    assert status == 0, err
    assert read_document(second)["status"] == "complete"
    assert verify_json(cli, folder)[1]["findings"] == []

    forged = copies["complete"] / folder.name / second.relative_to(folder)
    header = read_json(forged)
    header.update(status="complete", reason=None)
    write_json(forged, header)
    status, _, err = cli("run", str(plan), "--raw-dir", str(copies["complete"]), "--resume")
    assert status == 1
    assert "linux/capacity/ctx512-c2-nothink.json (changed)" in err

    # A record written twice into the part a run was writing (no digest holds it yet).
    twice = copies["twice"] / folder.name
    listed = read_json(twice / second.relative_to(folder))["parts"]
    first_line = (twice / listed[0]["path"]).read_bytes().splitlines(keepends=True)[0]
    (twice / listed[0]["path"].replace("part-0001", f"part-{len(listed) + 1:04d}")).write_bytes(
        first_line
    )
    status, _, err = cli("run", str(plan), "--raw-dir", str(copies["twice"]), "--resume")
    assert status == 1, err
    assert err.splitlines()[-1] == (
        "error: cannot resume linux/capacity/ctx512-c2-nothink.json: request 0 is recorded twice"
    )

    workload = copies["workload"] / folder.name / "workload-manifest.json"
    earlier = read_json(workload)
    earlier.update(schema="anvil-serving.workload-manifest/v1", cells=[])
    write_json(workload, earlier)
    status, _, err = cli("run", str(plan), "--raw-dir", str(copies["workload"]), "--resume")
    assert status == 1 and err.count("\n") == 1, err
    assert "is anvil-serving.workload-manifest/v1, written by an earlier anvil-ledger" in err


LOAD_PLAN = """
campaign_id = "2026-12-03-load-resume"
seed = 9
[[arms]]
name = "base"
[arms.simulated]
decode_tok_s = 400.0
[[stages]]
kind = "load"
context_target = 128
rate = 20
requests = 40
max_tokens = 8
controlled_output = true
warmup = 1
"""


def test_an_open_loop_cell_killed_and_resumed_keeps_its_schedule(
    tmp_path: Path, cli: CliRun
) -> None:
    """SIGKILL two seconds into a 2-second schedule of 40 requests: those that ended are
    kept, the rest go out at their own due times on the clock the resumed run sets, and
    the cell verifies whole: every due time the schedule's, its lateness its records'."""
    from ledger.measures.arrivals import Arrivals, lateness, offsets_ns

    plan = tmp_path / "load.toml"
    plan.write_text(LOAD_PLAN)
    raw = tmp_path / "raw"
    folder = raw / "2026-12-03-load-resume"
    header = folder / "base/load/ctx128-r20-nothink.json"
    part = header.with_name("ctx128-r20-nothink.part-0001.jsonl")
    process = _start(plan, raw)
    _wait_for(part)
    deadline = time.monotonic() + 30
    while len(part.read_bytes().splitlines()) < 12:
        assert time.monotonic() < deadline, "the cell never got going"
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=60)
    # Every whole line (a kill in the middle of one leaves it cut short, and it goes).
    before = [x for x in part.read_bytes().splitlines(keepends=True) if x.endswith(b"\n")]
    assert 12 <= len(before) < 41
    resumed = _start(plan, raw, "--resume")
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err.decode()
    # The closing table counts the requests of both runs, read back from the parts.
    assert re.search(rb"base +load +ctx128-r20-nothink +complete +40/40", out), out.decode()
    document = cells.load(header)
    records = document["requests"]
    assert sorted(r["index"] for r in records) == list(range(41))
    assert b"".join((folder / p["path"]).read_bytes() for p in document["parts"]).startswith(
        b"".join(before)
    )
    arrival = document["cell"]["arrival"]
    offsets = offsets_ns(Arrivals.from_json(arrival), document["cell"]["id"])
    for record in records:
        if not record["warmup"]:
            assert record["scheduled_ns"] == arrival["start_ns"] + offsets[record["index"] - 1]
            assert record["sent_ns"] >= record["scheduled_ns"]
    assert arrival["lateness"] == lateness(records)
    (resumption,) = document["resumed"]
    assert resumption["records"] == len(before)
    # The resumed run's clock: the first request not on disk was due as it started.
    first = min(r["index"] for r in records[len(before) :])
    assert resumption["clock_ns"] == arrival["start_ns"] + offsets[first - 1]
    code, report = verify_json(cli, folder)
    assert (code, report["findings"]) == (0, [])


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
        runs = {
            arm: cell_files.load(folder / arm / "capacity" / f"{cell_id}.json")
            for arm in ("baseline", "candidate")
        }
        digests = {
            arm: [r["prompt_sha256"] for r in sorted(c["requests"], key=lambda r: r["index"])]
            for arm, c in runs.items()
        }
        assert digests["baseline"] == digests["candidate"]
        assert len(set(digests["baseline"])) == 3
        for cell in runs.values():
            assert cell["metrics"]["prefix_cache"]["hits"] == 0
            assert all(r["output_as_requested"] for r in cell["requests"])
            channels = {r["channel_runs"] for r in cell["requests"]}
            assert channels == ({"r8c4"} if cell_id.endswith("-think") else {"c12"})
        assert runs["candidate"]["endpoint"]["base_url"] == external.base_url
        assert "simulated_profile" not in runs["candidate"]["identity"]
        assert runs["candidate"]["identity"] == {"variable": "decode rate"}
    workload = read_document(folder / "workload-manifest.json")
    for entry in workload["cells"]:
        assert entry["calibration"]["arm"] == "baseline"
        assert set(entry["prompt_tokens"]) == {"baseline", "candidate"}
        # Both servers counted the same prompt tokens, as they were sent the same prompts.
        assert len({(t["requests"], t["total"]) for t in entry["prompt_tokens"].values()}) == 1
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


def test_the_closing_table_shows_the_servers_clock_only_where_it_was_read() -> None:
    from runners.campaign import CellOutcome
    from runners.campaign._stats import CellStats
    from runners.campaign.closing import closing_table

    plain = CellStats(10, 0, 12.0, 80.0, 150.0, 400.0)
    timed = CellStats(10, 1, 12.0, 80.0, 150.0, 400.0, server_gap_ms=3.25, server_decode_tok_s=85.5)
    out = closing_table([CellOutcome("a", "capacity", "ctx512-c1-nothink", "complete", plain)])
    assert "server" not in out and "9/10" not in out and "10/10" in out
    out = closing_table(
        [
            CellOutcome("a", "capacity", "ctx512-c1-nothink", "complete", plain),
            CellOutcome("b", "capacity", "ctx512-c1-nothink", "complete", timed),
        ]
    )
    header, first, second = out.splitlines()
    assert header.endswith("first token - server prompt ms  server decode tok/s")
    assert first.split()[-2:] == ["-", "-"]
    assert second.split()[-2:] == ["3.2", "85.5"] and "9/10" in second


def test_the_closing_table_states_vllms_figures_of_each_cell() -> None:
    from runners.campaign import CellOutcome
    from runners.campaign._stats import cell_stats
    from runners.campaign.closing import closing_table

    def record(sent: int, ttft_ms: int, gaps_ms: list[int], tokens: int) -> dict[str, Any]:
        chunks = [sent + ttft_ms * 1_000_000]
        for gap in gaps_ms:
            chunks.append(chunks[-1] + gap * 1_000_000)
        return {
            "sent_ns": sent, "first_token_ns": chunks[0], "first_content_ns": chunks[0],
            "last_token_ns": chunks[-1], "end_ns": chunks[-1] + 1_000_000, "chunks_ns": chunks,
            "usage": {"prompt_tokens": 100, "completion_tokens": tokens}, "error": None,
        }  # fmt: skip

    records = [
        record(0, 10, [5, 5, 5], 4),
        record(0, 30, [10, 10, 10], 4),
        {"sent_ns": 0, "end_ns": 50_000_000, "error": {"class": "http-5xx"}, "usage": None},
        {**record(0, 99, [1], 2), "warmup": True},
    ]
    stats = cell_stats(records)
    lines = closing_table([CellOutcome("a", "capacity", "c", "complete", stats)]).splitlines()
    _, main, _, figures_header, *figures = lines
    assert "2/3" in main.split()
    # Two successful requests between the first sent and the last end, 0.061 s: 32.79 req/s.
    assert main.split()[-2] == "32.79"
    assert figures_header.split() == ["arm", "stage", "cell", "metric", "mean", "median",
                                      "p90", "p99", "std"]  # fmt: skip
    rows = {" ".join(line.split()[3:5]): " ".join(line.split()[5:]) for line in figures}
    # TTFT 10 and 30 ms: mean 20, std 10; two requests bound no percentile at 95 %.
    few = "too few requests for"
    assert rows["TTFT ms"] == f"20.00 {few} p50 {few} p90 {few} p99 10.00"
    # TPOT (e2e - ttft) / 3: (26 - 10) / 3 and (61 - 30) / 3.
    assert rows["TPOT ms"].startswith("7.83 ")
    # ITL pools every gap: three of 5 ms and three of 10 ms.
    assert rows["ITL ms"] == f"7.50 {few} p50 {few} p90 {few} p99 2.50"
    assert rows["E2E ms"].startswith("43.50 ")
    # 300 requests bound each of them: TTFT 1, 2, ... 300 ms.
    many = [record(0, ms, [5, 5, 5], 4) for ms in range(1, 301)]
    lines = closing_table([CellOutcome("a", "capacity", "c", "complete", cell_stats(many))])
    ttft = next(r.split()[5:] for r in lines.splitlines() if r.split()[3:5] == ["TTFT", "ms"])
    assert ttft == ["150.50", "150.50", "270.10", "297.01", "86.60"]


def test_success_shortfall_judges_every_complete_cell() -> None:
    from runners.campaign import CellOutcome, success_shortfall
    from runners.campaign._stats import CellStats

    def cell(name: str, ok: int, of: int, minimum: int = 1, status: str = "complete") -> Any:
        stats = CellStats(of, of - ok, None, None, None, None)
        error = "http-5xx: HTTP 503: busy" if ok < minimum else None
        return CellOutcome("a", "load", name, status, stats, minimum, error)

    assert success_shortfall([]) is None
    assert success_shortfall([cell("c1", 1, 4), cell("c2", 3, 4, minimum=3)]) is None
    # A stage may ask for nothing: a probe of failure, say.
    assert success_shortfall([cell("c1", 0, 4, minimum=0)]) is None
    # Interrupted: the interruption's to report.
    assert success_shortfall([cell("c1", 0, 4, status="incomplete")]) is None
    # Complete from an earlier run: judged as measured, from the figures read back.
    assert "0 of 4 requests succeeded" in str(
        success_shortfall([cell("c1", 0, 4, status="skipped")])
    )
    assert success_shortfall([cell("c1", 2, 4), cell("c2", 2, 4, minimum=3)]) == (
        'arm "a", stage "load", cell "c2": 2 of 4 requests succeeded, fewer than the '
        "stage's min_success of 3; first error: http-5xx: HTTP 503: busy"
    )
    short = [cell("c1", 0, 4), cell("c2", 0, 4), cell("c3", 1, 4, minimum=2)]
    assert success_shortfall(short[:2]) == (
        'arm "a", stage "load", cell "c1": 0 of 4 requests succeeded (1 more cell fell '
        "short); first error: http-5xx: HTTP 503: busy"
    )
    assert "(2 more cells fell short)" in str(success_shortfall(short))
    # A cell whose schedule held fewer requests than asked for has no error to name.
    bare = CellOutcome("a", "load", "c1", "complete", CellStats(2, 0, None, None, None, None), 3)
    assert success_shortfall([bare]) == (
        'arm "a", stage "load", cell "c1": 2 of 2 requests succeeded, fewer than the '
        "stage's min_success of 3"
    )


def test_the_first_error_is_a_measured_request_s_on_one_line() -> None:
    from runners.campaign._cells import _first_error

    def failed(message: str, *, warmup: bool = False) -> dict[str, Any]:
        return {"warmup": warmup, "error": {"class": "http-5xx", "message": message}}

    records = [
        failed("warm-up", warmup=True),
        {"warmup": False, "error": None},
        failed("HTTP 502: <html>\n  bad\tgateway\x1b[31m</html>"),
        failed("later"),
    ]
    # What a server wrote cannot start a line or drive the terminal.
    assert _first_error(records) == "http-5xx: HTTP 502: <html> bad gateway\\x1b[31m</html>"
    assert _first_error(records[:2]) is None


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
    cell = cells.load(folder / "a" / "capacity" / "ctx256-c2-nothink.json")
    failed = [r for r in cell["requests"] if r["error"] is not None]
    assert failed and len(failed) < len(cell["requests"])
    for record in failed:
        assert record["error"]["class"] == "malformed-stream"
        assert record["error"]["message"] == (
            "the server's usage.prompt_tokens is -3: not a token count"
        )
        assert record["usage"] is None
    assert verify_json(cli, folder)[0] == 0
