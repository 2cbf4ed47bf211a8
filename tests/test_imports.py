"""Imports from other benchmark tools: definitions mapped by meaning, aggregates reproduced."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger._internal.imports import import_files
from ledger.database import build
from ledger.errors import InvalidArtifact
from ledger.schema import read_document
from tests.conftest import ASSETS, DATA, CliRun, verify_json

REAL = DATA / "realworld"
LLMPERF = REAL / "llmperf_groq_70b"
AIPERF = REAL / "aiperf_gpt-oss-20b_run1"


def _one(db_path: Path, sql: str) -> tuple[object, ...]:
    row = build([db_path]).query(sql).rows
    assert len(row) == 1
    return row[0]


def test_llmperf_reproduces_its_summary(tmp_path: Path) -> None:
    out = import_files(
        "llmperf",
        [LLMPERF / "individual_groq_70b.json", LLMPERF / "summary_groq_70b.json"],
        raw_dir=tmp_path,
        campaign="2026-11-29-imports",
        arm="groq",
    )
    summary = json.loads((LLMPERF / "summary_groq_70b.json").read_text())
    p50, mean, std, n, first, decode = _one(
        tmp_path / "2026-11-29-imports",
        "SELECT median(ttft_ms) / 1000, avg(ttft_ms) / 1000, stddev_samp(ttft_ms) / 1000, "
        "count(*), max(first_token_ms), max(decode_tok_s) FROM requests WHERE ok",
    )
    assert n == summary["results_num_completed_requests"] == 150
    assert p50 == pytest.approx(summary["results_ttft_s_quantiles_p50"], rel=1e-12)
    assert mean == pytest.approx(summary["results_ttft_s_mean"], rel=1e-12)
    assert std == pytest.approx(summary["results_ttft_s_stddev"], rel=1e-12)
    # llmperf measures neither a first token of any channel nor a last-token time.
    assert first is None and decode is None
    document = read_document(out)
    assert document["source"]["tool"] == "llmperf"
    assert document["source"]["version"] == "2023-08-31"
    assert document["cell"] == {"id": "ctx550-c5", "context_target": 550, "concurrency": 5}
    assert "visible content" in document["source"]["definitions"]["ttft_ms"]


def test_aiperf_reproduces_its_aggregates(tmp_path: Path, cli: CliRun) -> None:
    status, out, err = cli(
        "import",
        "aiperf",
        str(AIPERF / "profile_export.jsonl"),
        str(AIPERF / "profile_export_aiperf.json"),
        "--raw-dir",
        str(tmp_path),
        "--campaign",
        "2026-11-29-imports",
        "--arm",
        "gpt-oss",
    )
    assert status == 0, err
    folder = tmp_path / "2026-11-29-imports"
    aggregate = json.loads((AIPERF / "profile_export_aiperf.json").read_text())["records"]
    ok, failed, ttft_p50, ttft_p90, itl_mean, visible = _one(
        folder,
        "SELECT count(*) FILTER (WHERE ok), count(*) FILTER (WHERE NOT ok), "
        "median(first_token_ms), quantile_cont(first_token_ms, 0.9), "
        "avg(1000 / decode_tok_s), max(ttft_ms) FROM requests",
    )
    assert (ok, failed) == (89, 11)
    assert ttft_p50 == pytest.approx(2369.317693, rel=1e-12)
    assert ttft_p50 == pytest.approx(aggregate["ttft"]["p50"], rel=1e-12)
    assert ttft_p90 == pytest.approx(aggregate["ttft"]["p90"], rel=1e-12)
    assert itl_mean == pytest.approx(27.763, abs=5e-4)
    assert itl_mean == pytest.approx(aggregate["inter_token_latency"]["avg"], rel=1e-9)
    # Its TTFT counts reasoning: our visible-content TTFT stays unknown, not copied.
    assert visible is None
    assert out.strip().startswith("imported ")
    status, report = verify_json(cli, folder)
    assert status == 0 and report["summary"]["errors"] == 0


def test_vllm_detailed_result(tmp_path: Path) -> None:
    import_files(
        "vllm",
        [ASSETS / "imports/vllm_save_detailed.json"],
        raw_dir=tmp_path,
        campaign="2026-11-29-imports",
        arm="vllm",
    )
    result = json.loads((ASSETS / "imports/vllm_save_detailed.json").read_text())
    n, failed, p50, mean, decode = _one(
        tmp_path / "2026-11-29-imports",
        "SELECT count(*) FILTER (WHERE ok), count(*) FILTER (WHERE NOT ok), "
        "median(first_token_ms), avg(first_token_ms), min(decode_tok_s) FROM requests",
    )
    assert (n, failed) == (result["completed"], 1)
    assert p50 == pytest.approx(result["median_ttft_ms"], rel=1e-12)
    assert mean == pytest.approx(result["mean_ttft_ms"], rel=1e-12)
    # 16 tokens, 15 gaps of 12 ms on the slowest request: 15 / 0.180 s.
    assert decode == pytest.approx(15 / 0.180)


def test_sglang_output_details(tmp_path: Path) -> None:
    out = import_files(
        "sglang",
        [ASSETS / "imports/sglang_output_details.jsonl"],
        raw_dir=tmp_path,
        campaign="2026-11-29-imports",
        arm="sglang",
    )
    p50, decode = _one(
        tmp_path / "2026-11-29-imports",
        "SELECT median(first_token_ms), median(decode_tok_s) FROM requests WHERE ok",
    )
    assert p50 == pytest.approx(90.0)
    assert decode == pytest.approx(7 / 0.098)
    assert read_document(out)["cell"]["concurrency"] == 8


def test_sglang_aggregate_only_lines_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidArtifact, match=r"no per-request arrays .* --output-details"):
        import_files(
            "sglang",
            [REAL / "sglang_bench_serving_h200/llama_3_3_70b_online_output.jsonl"],
            raw_dir=tmp_path,
            campaign="2026-11-29-imports",
            arm="sglang",
        )
    assert not (tmp_path / "2026-11-29-imports").exists()


def test_wrong_tool_for_the_file(tmp_path: Path, cli: CliRun) -> None:
    status, _, err = cli(
        "import",
        "llmperf",
        str(AIPERF / "profile_export.jsonl"),
        "--raw-dir",
        str(tmp_path),
        "--campaign",
        "2026-11-29-imports",
        "--arm",
        "x",
    )
    assert status == 2
    assert err.startswith(
        "error: profile_export.jsonl: a record without ttft_s is not from llmperf"
    )
    assert err.count("\n") == 1
