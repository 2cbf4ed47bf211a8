"""``ledger bench`` on the simulated endpoint: the summary, the sealed campaign, the vLLM
result file read back by ``ledger import vllm``, an A/B of two runs, the refusals of its
flags and of a campaign it cannot join, and an interrupted run."""

from __future__ import annotations

import itertools
import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ledger.errors import UsageError
from ledger.formats import cell_records
from ledger.formats.jsonio import read_json
from runners.bench import BenchSettings, bench_plan
from runners.simulate.serve import SimulatorProcess
from tests.conftest import ROOT, CliRun, verify_json
from tests.llama_server import free_port

VLLM_FILE = (
    ROOT / "tests/data/realworld/vllm-bench-serve/vllm-0.15.0-qwen3-8b-tp8-c50-detailed.json"
)
CAMPAIGN = "2026-12-03-bench"


def _bench(cli: CliRun, url: str, raw: Path, *extra: str) -> tuple[int, str, str]:
    return cli(
        "bench", "--base-url", url, "--model", "anvil-sim", "--num-prompts", "24",
        "--max-concurrency", "6", "--random-input-len", "200", "--random-output-len", "24",
        "--ignore-eos", "--raw-dir", str(raw), "--campaign", CAMPAIGN, *extra,
    )  # fmt: skip


@pytest.fixture
def endpoint(simulator: Callable[..., SimulatorProcess]) -> str:
    sim = simulator(decode_tok_s=300.0, prefill_tok_s=200000.0)
    return sim.root_url


def _summary(out: str) -> dict[str, float]:
    lines = re.findall(r"^([A-Z][^:]+):\s+([0-9.]+)$", out, re.MULTILINE)
    return {label: float(value) for label, value in lines}


def _records(folder: Path, arm: str) -> list[dict[str, Any]]:
    (header_path,) = (folder / arm / "bench").glob("*-nothink.json")
    header = read_json(header_path)
    return [cell_records.completed(r) for r in cell_records.records(folder, header)]


def test_the_summary_states_the_records_figures(cli: CliRun, endpoint: str, tmp_path: Path) -> None:
    # 30 requests bound a p90 (29 needed at 95 %), not a p99 (299).
    status, out, err = _bench(
        cli, endpoint, tmp_path, "--percentile-metrics", "ttft,tpot,itl,e2el",
        "--metric-percentiles", "50,90,99", "--num-prompts", "30",
    )  # fmt: skip
    assert status == 0, err
    assert out.startswith("=" * 12 + " Serving Benchmark Result " + "=" * 12)
    figures = _summary(out)
    assert figures["Successful requests"] == 30 and figures["Failed requests"] == 0
    assert figures["Maximum request concurrency"] == 6
    folder = tmp_path / CAMPAIGN
    assert verify_json(cli, folder)[0] == 0
    records = _records(folder, "bench")
    # Recomputed here from the raw records with numpy, as vLLM computes them.
    ttft = np.array([(r["first_token_ns"] - r["sent_ns"]) / 1e6 for r in records])
    e2el = np.array([(r["end_ns"] - r["sent_ns"]) / 1e6 for r in records])
    outputs = np.array([r["usage"]["completion_tokens"] for r in records])
    tpot = (e2el - ttft) / (outputs - 1)
    gaps = [
        (b - a) / 1e3
        for r in records
        for a, b in itertools.pairwise(cell_records.decode_chunks(r["chunks_us"]))
    ]
    itl = np.array(gaps)
    for short, data in (("TTFT", ttft), ("TPOT", tpot), ("ITL", itl), ("E2EL", e2el)):
        assert figures[f"Mean {short} (ms)"] == pytest.approx(np.mean(data), abs=0.006)
        assert figures[f"Median {short} (ms)"] == pytest.approx(np.median(data), abs=0.006)
        for p in (50, 90):
            expected = np.percentile(data, p)
            assert figures[f"P{p} {short} (ms)"] == pytest.approx(expected, abs=0.006)
        assert (
            f"P99 {short} (ms):"
            + " " * (40 - len(f"P99 {short} (ms):"))
            + (" too few requests for p99\n")
            in out
        )
    duration = (max(r["end_ns"] for r in records) - min(r["sent_ns"] for r in records)) / 1e9
    assert figures["Benchmark duration (s)"] == pytest.approx(duration, abs=0.006)
    assert figures["Total generated tokens"] == outputs.sum() == 30 * 24
    assert figures["Request throughput (req/s)"] == pytest.approx(30 / duration, abs=0.006)


def test_the_summary_and_the_databases_view_state_the_same_figures(
    cli: CliRun, endpoint: str, tmp_path: Path
) -> None:
    status, out, err = _bench(
        cli, endpoint, tmp_path, "--percentile-metrics", "ttft,tpot,itl,e2el",
        "--metric-percentiles", "90", "--num-prompts", "30",
    )  # fmt: skip
    assert status == 0, err
    figures = _summary(out)
    query = (
        "SELECT completed, request_throughput, output_throughput, mean_ttft_ms, "
        "median_tpot_ms, p90_itl_ms, mean_e2el_ms FROM serving_metrics"
    )
    status, rows, err = cli("sql", "--from", str(tmp_path / CAMPAIGN), "--format", "json", query)
    assert status == 0, err
    (row,) = json.loads(rows)
    assert row["completed"] == figures["Successful requests"]
    for column, label in (
        ("request_throughput", "Request throughput (req/s)"),
        ("output_throughput", "Output token throughput (tok/s)"),
        ("mean_ttft_ms", "Mean TTFT (ms)"),
        ("median_tpot_ms", "Median TPOT (ms)"),
        ("p90_itl_ms", "P90 ITL (ms)"),
        ("mean_e2el_ms", "Mean E2EL (ms)"),
    ):
        # The summary prints two decimals.
        assert row[column] == pytest.approx(figures[label], abs=0.006), column


def test_the_saved_result_reads_back_with_every_self_check_agreeing(
    cli: CliRun, endpoint: str, tmp_path: Path
) -> None:
    status, _, err = _bench(
        cli, endpoint, tmp_path / "raw", "--save-result", "--result-dir", str(tmp_path),
        "--result-filename", "result.json", "--percentile-metrics", "ttft,tpot,itl,e2el",
    )  # fmt: skip
    assert status == 0, err
    saved = json.loads((tmp_path / "result.json").read_text())
    real = json.loads(VLLM_FILE.read_text())
    # vLLM's own keys, each a figure or array of the same kind as vLLM writes it.
    for key, value in real.items():
        if key in ("generated_texts", "max_output_tokens_per_s", "max_concurrent_requests"):
            continue
        assert key in saved, key
        if isinstance(value, list):
            assert isinstance(saved[key], list) and len(saved[key]) == 24, key
    assert saved["request_rate"] == "inf" and saved["max_concurrency"] == 6
    status, out, err = cli(
        "import", "vllm", str(tmp_path / "result.json"), "--raw-dir", str(tmp_path / "imp"),
        "--campaign", "2026-12-03-imported", "--arm", "bench",
    )  # fmt: skip
    assert status == 0, err
    checks = re.findall(r"^\s+(\S+)\s+file \S+\s+recomputed \S+\s+(\S+)$", out, re.MULTILINE)
    fields = {field for field, _ in checks}
    assert {"p99_itl_ms", "p99_tpot_ms", "p99_ttft_ms", "mean_e2el_ms", "completed"} <= fields
    assert all(verdict == "agrees" for _, verdict in checks), out


def test_two_runs_into_one_campaign_derive_a_matched_ab(
    cli: CliRun, simulator: Callable[..., SimulatorProcess], tmp_path: Path
) -> None:
    # Two servers, as an A/B of two configurations has: on one, the second run's prompts
    # would be in the cache the first left, and derive refuses the match (cache-state).
    for arm, decode in (("before", 300.0), ("after", 360.0)):
        url = simulator(decode_tok_s=decode, prefill_tok_s=200000.0).root_url
        status, _, err = _bench(cli, url, tmp_path, "--arm", arm, "--metadata", f"image={arm}")
        assert status == 0, err
    folder = tmp_path / CAMPAIGN
    status, _, err = cli(
        "derive", str(folder), "--kind", "ab", "--baseline", "before", "--candidate", "after",
        "--differs", "image",
    )  # fmt: skip
    assert status == 0, err
    derived = read_json(folder / "derived/ab-comparison-before-vs-after.json")
    assert derived["matched"] is True, derived
    assert verify_json(cli, folder)[0] == 0


def test_an_open_loop_rate_is_a_load_stage(cli: CliRun, endpoint: str, tmp_path: Path) -> None:
    status, _, err = _bench(cli, endpoint, tmp_path, "--request-rate", "40", "--burstiness", "2")
    assert status == 0, err
    plan = read_json(tmp_path / CAMPAIGN / "run-plan.json")
    (stage,) = plan["stages"]
    assert stage["kind"] == "load" and stage["cells"][0]["rate"] == 40.0
    assert stage["arrival"]["process"] == "gamma" and stage["arrival"]["burstiness"] == 2.0
    assert stage["arrival"]["max_in_flight"] == 6 and stage["arrival"]["requests"] == 24


def test_the_completions_api_streams_a_bare_prompt(
    cli: CliRun, endpoint: str, tmp_path: Path
) -> None:
    status, out, err = _bench(cli, endpoint, tmp_path, "--endpoint", "/v1/completions")
    assert status == 0, err
    assert _summary(out)["Successful requests"] == 24
    folder = tmp_path / CAMPAIGN
    (header_path,) = (folder / "bench" / "bench").glob("*-nothink.json")
    request = read_json(header_path)["request"]
    # No chat template, so no thinking switch: a chat body carries one.
    assert request["path"] == "/completions" and "chat_template_kwargs" not in request["body"]
    records = _records(folder, "bench")
    assert all(r["channel_runs"] == "c24" for r in records)
    assert read_json(folder / "run-plan.json")["arms"][0]["api"] == "completions"
    assert verify_json(cli, folder)[0] == 0


def test_a_range_ratio_spreads_each_requests_lengths_as_recorded(
    cli: CliRun, endpoint: str, tmp_path: Path
) -> None:
    status, _, err = _bench(cli, endpoint, tmp_path, "--random-range-ratio", "0.5")
    assert status == 0, err
    folder = tmp_path / CAMPAIGN
    assert read_json(folder / "run-plan.json")["stages"][0]["range_ratio"] == 0.5
    records = _records(folder, "bench")
    asked = [r["max_tokens"] for r in records]
    assert all(12 <= n <= 36 for n in asked) and len(set(asked)) > 5
    # Controlled output holds each request to its own length.
    assert all(r["usage"]["completion_tokens"] == r["max_tokens"] for r in records)
    assert all(r["output_as_requested"] for r in records)
    # Prompts are sized along the calibrated line, each within a few tokens of its draw
    # from 100 to 300.
    prompts = [r["usage"]["prompt_tokens"] for r in records]
    assert min(prompts) < 150 and max(prompts) > 250
    assert all(90 <= n <= 306 for n in prompts)
    assert verify_json(cli, folder)[0] == 0


def test_a_refused_connection_exits_1_naming_arm_stage_and_port(
    cli: CliRun, tmp_path: Path
) -> None:
    port = free_port()
    status, out, err = _bench(cli, f"http://127.0.0.1:{port}", tmp_path)
    assert status == 1
    line = err.strip().splitlines()[-1]
    assert line.startswith('ledger bench: arm "bench", stage "bench", cell "ctx200-c6-nothink": ')
    assert "0 of 24 requests succeeded; first error: connect: " in line
    assert f"127.0.0.1:{port}" in line
    assert "Successful requests:                     0" in out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--endpoint", "/v2/x"), "argument --endpoint: invalid choice: '/v2/x'"),
        (("--random-range-ratio", "1"), "--random-range-ratio 1: from 0"),
        (("--random-range-ratio", "nan"), "--random-range-ratio nan: from 0"),
        (("--metadata", "noequals"), "expected KEY=VALUE"),
        (("--percentile-metrics", "ttft,p99"), "--percentile-metrics 'ttft,p99'"),
        (("--metric-percentiles", "50,x"), "'x' is not a percentile"),
        (("--request-rate", "-1"), "must be above 0 or inf"),
        (("--num-prompts", "0"), "must be at least 1"),
        (("--campaign", "Bench"), "--campaign: must look like 2026-11-29-slug, got 'Bench'"),
        (("--request-rate", "0.0005"), "--request-rate 0.0005: at least 0.001 requests/s"),
        (("--max-concurrency", "10001"), "--max-concurrency: at most 10,000"),
        (("--metadata", "=x"), "--metadata '=x': expected KEY=VALUE"),
        (("--request-rate", "5", "--burstiness", "0"), "--burstiness: must be above 0"),
        (("--request-rate", "1e9"), "--request-rate: expected requests per second"),
        (("--arm", "A B"), "--arm: "),
        (("--metadata", "tool=x"), "'tool' is recorded by ledger bench itself"),
        (("--metadata", "k=a", "--metadata", "k=b"), "'k' is given twice"),
        (("--num-warmups", "-1"), "must be 0 or more, got -1"),
        (
            ("--save-result", "--result-filename", "sub/x.json"),
            "--result-filename sub/x.json: a file name, not a path",
        ),
        (("--save-result", "--result-dir", "/dev/null/x"), "--result-dir /dev/null/x: Not a"),
    ],
)
def test_unusable_flags_exit_2_in_one_line(
    cli: CliRun, tmp_path: Path, extra: tuple[str, ...], message: str
) -> None:
    args = ["bench", "--base-url", "http://127.0.0.1:9", "--model", "m", "--raw-dir"]
    status, _, err = cli(*args, str(tmp_path), *extra)
    assert status == 2
    assert len(err.strip().splitlines()) == 1 and message in err, err
    assert not any(tmp_path.iterdir())  # nothing written


def test_a_second_run_of_another_workload_or_the_same_arm_is_refused(
    cli: CliRun, endpoint: str, tmp_path: Path
) -> None:
    assert _bench(cli, endpoint, tmp_path, "--arm", "a")[0] == 0
    folder = tmp_path / CAMPAIGN
    before = sorted(p.name for p in folder.rglob("*"))
    for flags, named in (
        (("--seed", "7"), "--seed differs"),
        (("--num-prompts", "30"), "--num-prompts differs"),
        (("--random-output-len", "30"), "--random-output-len differs"),
        (("--num-warmups", "1"), "--num-warmups differs"),
        (("--endpoint", "/v1/completions"), "--endpoint differs"),
    ):
        status, _, err = _bench(cli, endpoint, tmp_path, "--arm", "b", *flags)
        assert status == 2 and f"measured another workload ({named}" in err, err
    status, _, err = _bench(cli, endpoint, tmp_path, "--arm", "a")
    assert status == 2 and "arm 'a' is measured already" in err
    assert "choose another --arm, or another --campaign" in err
    assert sorted(p.name for p in folder.rglob("*")) == before
    assert verify_json(cli, folder)[0] == 0


def test_an_endpoint_it_does_not_stream_is_refused_before_anything_runs() -> None:
    settings = BenchSettings(base_url="http://127.0.0.1:9", model="m", endpoint="/v1/embeddings")
    with pytest.raises(UsageError, match="--endpoint /v1/embeddings: expected"):
        bench_plan(settings)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda plan: "[1, 2]", "not a run plan; choose another --campaign"),
        (lambda plan: {**plan, "schema": "x"}, "not a run plan; choose another --campaign"),
        (
            lambda plan: {**plan, "arms": [{"name": "a"}]},
            "its arms are not as a run records them",
        ),
        (
            lambda plan: {**plan, "arms": [{**plan["arms"][0], "simulated": {"seed": 1}}]},
            "arm 'a' is not an endpoint that a bench run measured",
        ),
    ],
)
def test_a_campaign_whose_plan_a_bench_cannot_join_is_refused(
    cli: CliRun, endpoint: str, tmp_path: Path, edit: Any, message: str
) -> None:
    assert _bench(cli, endpoint, tmp_path, "--arm", "a")[0] == 0
    plan_path = tmp_path / CAMPAIGN / "run-plan.json"
    edited = edit(json.loads(plan_path.read_text()))
    plan_path.write_text(edited if isinstance(edited, str) else json.dumps(edited))
    status, _, err = _bench(cli, endpoint, tmp_path, "--arm", "b")
    assert status == 2 and message in err, err
    assert not (tmp_path / CAMPAIGN / "b").exists()


def test_an_interrupted_bench_seals_its_campaign_and_exits_130(
    cli: CliRun, simulator: Callable[..., SimulatorProcess], tmp_path: Path
) -> None:
    url = simulator(decode_tok_s=20.0, prefill_tok_s=200000.0).root_url
    command = [
        sys.executable, "-m", "ledger", "bench", "--base-url", url, "--model", "anvil-sim",
        "--num-prompts", "400", "--max-concurrency", "2", "--random-input-len", "100",
        "--random-output-len", "64", "--raw-dir", str(tmp_path), "--campaign", CAMPAIGN,
    ]  # fmt: skip
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        folder = tmp_path / CAMPAIGN / "bench" / "bench"
        deadline = time.monotonic() + 60
        while not list(folder.glob("*.part-0001.jsonl")) and time.monotonic() < deadline:
            time.sleep(0.1)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert b"interrupted by SIGINT" in err
    (header,) = folder.glob("*-nothink.json")
    assert read_json(header)["status"] == "incomplete"
    assert verify_json(cli, tmp_path / CAMPAIGN)[0] == 0


def test_a_result_file_that_exists_is_never_replaced(
    cli: CliRun, endpoint: str, tmp_path: Path
) -> None:
    result = tmp_path / "result.json"
    result.write_text("{}")
    status, _, err = _bench(
        cli, endpoint, tmp_path / "raw", "--save-result", "--result-dir", str(tmp_path),
        "--result-filename", "result.json",
    )  # fmt: skip
    assert status == 2 and f"{result} exists" in err
    assert result.read_text() == "{}" and not (tmp_path / "raw").exists()
    # A folder that is not there yet is made, as --raw-dir is.
    status, _, err = _bench(
        cli, endpoint, tmp_path / "raw", "--save-result", "--result-dir", str(tmp_path / "new"),
    )  # fmt: skip
    assert status == 0, err
    assert (tmp_path / "new" / f"ledger-bench-bench-{CAMPAIGN}.json").is_file()
