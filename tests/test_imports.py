"""Imports from other benchmark tools: definitions mapped by meaning, aggregates reproduced."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ledger.database import build
from ledger.errors import InvalidArtifact
from ledger.formats.schema import read_document
from ledger.imports import import_files
from ledger.imports._importer import _slug
from ledger.publication._publish import publish
from tests.conftest import ASSETS, DATA, CliRun, verify_json

REAL = DATA / "realworld"
LLMPERF = REAL / "llmperf_groq_70b"
AIPERF = REAL / "aiperf_gpt-oss-20b_run1"


def _one(db_path: Path, sql: str) -> tuple[object, ...]:
    row = build([db_path]).query(sql).rows
    assert len(row) == 1
    return row[0]


def test_llmperf_reproduces_its_summary(tmp_path: Path) -> None:
    (out,) = import_files(
        "llmperf",
        [LLMPERF / "individual_groq_70b.json", LLMPERF / "summary_groq_70b.json"],
        raw_dir=tmp_path,
        campaign="2026-11-29-imports",
        arm="groq",
    ).paths
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
    (out,) = import_files(
        "sglang",
        [ASSETS / "imports/sglang_output_details.jsonl"],
        raw_dir=tmp_path,
        campaign="2026-11-29-imports",
        arm="sglang",
    ).paths
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


SGLANG_DETAILED = REAL / "sglang-bench-serving/sglang-0.5.9-qwen3-8b-c100-output-details.jsonl"
VLLM_DETAILED = REAL / "vllm-bench-serve/vllm-0.15.0-qwen3-8b-tp8-c50-detailed.json"


def test_a_file_of_the_other_detailed_tool_is_refused(tmp_path: Path, cli: CliRun) -> None:
    """Both write the same per-request arrays: a vLLM file imported as SGLang's was filed
    as "sglang", version null, and an SGLang line as vLLM's, its server flags as metadata."""
    finite = tmp_path / "sglang.jsonl"
    finite.write_bytes(
        SGLANG_DETAILED.read_bytes().splitlines()[0].replace(b"Infinity", b"10.0") + b"\n"
    )
    for tool, path, message in (
        (
            "sglang",
            VLLM_DETAILED,
            (
                f"error: {VLLM_DETAILED.name}: endpoint_type, mean_e2el_ms, median_e2el_ms are "
                "what vLLM's bench serve writes, not sglang's: import it as vllm\n"
            ),
        ),
        (
            "vllm",
            finite,
            (
                "error: sglang.jsonl line 1: accept_length, mean_e2e_latency_ms, "
                "median_e2e_latency_ms are what SGLang's bench_serving writes, not vllm's: "
                "import it as sglang\n"
            ),
        ),
    ):
        raw = tmp_path / f"raw-{tool}"
        status, _, err = cli(
            "import", tool, str(path), "--raw-dir", str(raw), "--campaign",
            "2026-11-29-imports", "--arm", "x",
        )  # fmt: skip
        assert (status, err) == (2, message)
        assert not raw.exists()
    # Each imports as its own tool.
    for tool, path in (("vllm", VLLM_DETAILED), ("sglang", finite)):
        import_files(tool, [path], raw_dir=tmp_path / "ok", campaign="2026-11-29-imports", arm=tool)


def _statement(path: Path) -> dict[str, object]:
    """The tool's own first line, read as Python writes it (bare Infinity and all)."""
    line = path.read_bytes().splitlines()[0]
    parsed: dict[str, object] = json.loads(line)
    return parsed


def test_sglang_s_own_dialect_imports_and_stays_strict(tmp_path: Path, cli: CliRun) -> None:
    """SGLang 0.5.9 writes "request_rate": Infinity, which is not JSON: read as SGLang's
    dialect, recorded as the string "inf", and the artifact is strict JSON."""
    assert b'"request_rate": Infinity' in SGLANG_DETAILED.read_bytes()
    (out,) = import_files(
        "sglang", [SGLANG_DETAILED], raw_dir=tmp_path, campaign="2026-11-29-imports", arm="sg"
    ).paths
    document = read_document(out)  # strict: it would refuse a bare Infinity
    assert document["source"]["settings"]["request_rate"] == "inf"
    assert document["source"]["definitions"]["non_finite"].endswith(
        f"every request sent at once): {SGLANG_DETAILED.name} /request_rate"
    )
    stated = _statement(SGLANG_DETAILED)
    n, p50, mean, e2e = _one(
        tmp_path / "2026-11-29-imports",
        "SELECT count(*), median(first_token_ms), avg(first_token_ms), avg(e2e_ms) "
        "FROM requests WHERE ok",
    )
    assert n == stated["completed"] == 100
    assert p50 == pytest.approx(stated["median_ttft_ms"], rel=1e-12)
    assert mean == pytest.approx(stated["mean_ttft_ms"], rel=1e-12)
    # SGLang measures its own end-to-end clock; ttft + sum(itls) agrees to 1e-4.
    assert e2e == pytest.approx(stated["mean_e2e_latency_ms"], rel=1e-4)
    assert verify_json(cli, tmp_path / "2026-11-29-imports")[0] == 0


def test_the_dialect_is_sglang_s_only(tmp_path: Path) -> None:
    line = SGLANG_DETAILED.read_bytes().splitlines()[0]
    other = tmp_path / "as-vllm.json"
    other.write_bytes(line)
    with pytest.raises(InvalidArtifact, match="non-finite number Infinity is not JSON") as raised:
        import_files("vllm", [other], raw_dir=tmp_path, campaign="2026-11-29-imports", arm="v")
    assert raised.value.code == "json-nonfinite"
    # A number beyond any float is no token of the dialect: refused from SGLang too.
    beyond = tmp_path / "beyond.jsonl"
    beyond.write_bytes(line.replace(b'"request_rate": Infinity', b'"request_rate": 1e999'))
    with pytest.raises(InvalidArtifact, match="a number beyond any float"):
        import_files("sglang", [beyond], raw_dir=tmp_path, campaign="2026-11-29-imports", arm="s")
    assert not (tmp_path / "2026-11-29-imports").exists()


def test_vllm_end_to_end_from_the_arrays(tmp_path: Path) -> None:
    """vLLM 0.15 stores no per-request latency: ttft + sum(itls) reproduces its E2EL."""
    (out,) = import_files(
        "vllm", [VLLM_DETAILED], raw_dir=tmp_path, campaign="2026-11-29-imports", arm="v"
    ).paths
    stated = json.loads(VLLM_DETAILED.read_bytes())
    assert "e2els" not in stated
    mean, p50, nulls = _one(
        tmp_path / "2026-11-29-imports",
        "SELECT avg(e2e_ms), median(e2e_ms), count(*) FILTER (WHERE e2e_ms IS NULL) FROM requests",
    )
    assert nulls == 0
    assert mean == pytest.approx(stated["mean_e2el_ms"], rel=1e-5)
    assert p50 == pytest.approx(stated["median_e2el_ms"], rel=1e-5)
    definition = read_document(out)["source"]["definitions"]["e2e_ms"]
    assert definition.startswith("vllm e2els where the file has them; else ttft + sum(itls)")


def test_e2els_are_taken_when_the_file_has_them(tmp_path: Path) -> None:
    stated = json.loads((ASSETS / "imports/vllm_save_detailed.json").read_bytes())
    stated["e2els"] = [0.5 + i / 100 for i in range(len(stated["ttfts"]))]
    source = tmp_path / "with-e2els.json"
    source.write_text(json.dumps(stated))
    (out,) = import_files(
        "vllm", [source], raw_dir=tmp_path, campaign="2026-11-29-imports", arm="v"
    ).paths
    document = read_document(out)
    assert document["source"]["definitions"]["e2e_ms"] == "vllm e2els"
    assert [r["e2e_ms"] for r in document["requests"] if r["ok"]] == [
        pytest.approx(e * 1000)
        for e, r in zip(stated["e2els"], document["requests"], strict=True)
        if r["ok"]
    ]


@pytest.mark.parametrize("source", [VLLM_DETAILED, SGLANG_DETAILED], ids=["vllm", "sglang"])
def test_every_stated_aggregate_agrees_with_the_records(
    tmp_path: Path, cli: CliRun, source: Path
) -> None:
    tool = "vllm" if source == VLLM_DETAILED else "sglang"
    status, out, err = cli(
        "import", tool, str(source), "--raw-dir", str(tmp_path),
        "--campaign", "2026-11-29-imports", "--arm", tool,
    )  # fmt: skip
    assert status == 0 and err == ""
    document = read_document(next((tmp_path / "2026-11-29-imports" / tool).rglob("*.json")))
    checks = document["source"]["self_check"]
    e2e = "e2el" if tool == "vllm" else "e2e_latency"
    expected = {"completed", "total_input_tokens", "total_output_tokens"} | {
        f"{stat}_{metric}_ms"
        for stat in ("mean", "median", "std", "p99")
        for metric in ("ttft", "tpot", "itl", e2e)
    }
    assert {c["field"] for c in checks} == expected
    assert all(c["agrees"] for c in checks)
    assert "warnings" not in document["source"]
    stated = _statement(source)
    by_field = {c["field"]: c for c in checks}
    # TTFT and ITL come straight from the arrays: equal to the last digits.
    for field in ("median_ttft_ms", "p99_ttft_ms", "std_ttft_ms", "mean_itl_ms"):
        assert by_field[field]["recomputed"] == pytest.approx(stated[field], rel=1e-12)
    assert out.count("agrees") == len(expected) and "DISAGREES" not in out


def test_an_edited_aggregate_is_a_warning_kept_in_the_artifact(tmp_path: Path, cli: CliRun) -> None:
    stated = json.loads(VLLM_DETAILED.read_bytes())
    stated["median_ttft_ms"] *= 1.01
    stated["total_output_tokens"] += 1
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(stated))
    status, out, err = cli(
        "import", "vllm", str(edited), "--raw-dir", str(tmp_path),
        "--campaign", "2026-11-29-imports", "--arm", "v",
    )  # fmt: skip
    assert status == 0
    recomputed = 690.6947699608281
    median = stated["median_ttft_ms"]
    assert err.splitlines() == [
        (
            f"warning: edited.json: median_ttft_ms: the file says {median!r}, its per-request "
            f"arrays give {recomputed!r}"
        ),
        (
            "warning: edited.json: total_output_tokens: the file says 64001, its per-request "
            "arrays give 64000.0"
        ),
    ]
    assert out.count("DISAGREES") == 2
    document = read_document(next((tmp_path / "2026-11-29-imports" / "v").rglob("*.json")))
    assert [line.removeprefix("warning: ") for line in err.splitlines()] == document["source"][
        "warnings"
    ]
    # Just inside the bound agrees; just outside does not.
    inside = dict(stated, median_ttft_ms=recomputed * (1 + 0.9e-4))
    outside = dict(stated, median_ttft_ms=recomputed * (1 + 1.1e-4))
    from ledger.imports._importer import _arrays, self_check

    for line, agrees in ((inside, True), (outside, False)):
        checks = {c["field"]: c for c in self_check(line, _arrays(line, "x", 1))}
        assert checks["median_ttft_ms"]["agrees"] is agrees


def test_each_run_of_an_sglang_jsonl_is_a_cell_and_a_line_without_records_is_refused(
    tmp_path: Path, cli: CliRun
) -> None:
    """SGLang appends one line per run. Here: the real detailed line; the same run at
    request rate 4 with a tag; the same line again; and a line of the aggregate-only file."""
    detailed = SGLANG_DETAILED.read_bytes().splitlines()[0]
    tagged = detailed.replace(b'"request_rate": Infinity', b'"request_rate": 4.5').replace(
        b'"tag": null', b'"tag": "Run B/warm"'
    )
    aggregate = REAL / "sglang-bench-serving/sglang-2024-12-llama33-70b-aggregate-7runs.jsonl"
    runs = tmp_path / "runs.jsonl"
    runs.write_bytes(
        b"\n".join([detailed, tagged, detailed, aggregate.read_bytes().splitlines()[0]])
    )
    status, out, err = cli(
        "import", "sglang", str(runs), "--raw-dir", str(tmp_path),
        "--campaign", "2026-11-29-imports", "--arm", "sg",
    )  # fmt: skip
    assert status == 0
    folder = tmp_path / "2026-11-29-imports" / "sg" / "imported"
    names = sorted(p.name for p in folder.iterdir())
    assert names == [
        "ctx494-c100-r4p5-run-b-warm.json",
        "ctx494-c100-run2.json",
        "ctx494-c100.json",
    ]
    assert [line for line in out.splitlines() if line.startswith("imported ")] == [
        f"imported {folder / name}"
        for name in (
            "ctx494-c100.json",
            "ctx494-c100-r4p5-run-b-warm.json",
            "ctx494-c100-run2.json",
        )
    ]
    assert err == (
        "warning: not imported: runs.jsonl: line 4 has no per-request arrays (ttfts, itls); "
        "run sglang.bench_serving with --output-details\n"
    )
    tagged_run = read_document(folder / "ctx494-c100-r4p5-run-b-warm.json")
    assert tagged_run["source"]["settings"]["request_rate"] == 4.5
    assert tagged_run["source"]["settings"]["tag"] == "Run B/warm"
    # A cell is its file's name: two runs of one name would be pooled as one cell.
    for name in names:
        assert read_document(folder / name)["cell"]["id"] == name.removesuffix(".json")
    assert verify_json(cli, tmp_path / "2026-11-29-imports")[0] == 0


def test_a_file_of_aggregate_lines_only_is_refused_in_one_line(tmp_path: Path, cli: CliRun) -> None:
    aggregate = REAL / "sglang-bench-serving/sglang-2024-12-llama33-70b-aggregate-7runs.jsonl"
    status, out, err = cli(
        "import", "sglang", str(aggregate), "--raw-dir", str(tmp_path),
        "--campaign", "2026-11-29-imports", "--arm", "sg",
    )  # fmt: skip
    assert (status, out) == (2, "")
    assert err == (
        f"error: {aggregate.name}: line 1 has no per-request arrays (ttfts, itls); run "
        "sglang.bench_serving with --output-details (and the 6 other lines alike)\n"
    )
    assert not (tmp_path / "2026-11-29-imports").exists()


def test_the_run_s_identity_comes_from_the_file_and_never_its_texts(tmp_path: Path) -> None:
    import hashlib

    (sglang,) = import_files(
        "sglang", [SGLANG_DETAILED], raw_dir=tmp_path, campaign="2026-11-29-imports", arm="s"
    ).paths
    (vllm,) = import_files(
        "vllm", [VLLM_DETAILED], raw_dir=tmp_path, campaign="2026-11-29-imports", arm="v"
    ).paths
    sg, vl = read_document(sglang), read_document(vllm)
    assert sg["source"]["version"] == "0.5.9"
    server = sg["source"]["settings"].pop("server_info")
    # The server's flags, as SGLang states them; not its runtime state, nor twice.
    stated = _statement(SGLANG_DETAILED)["server_info"]
    assert isinstance(stated, dict)
    assert server == {
        k: v for k, v in stated.items() if k not in ("model_path", "version", "internal_states")
    }
    assert len(server) == 330 and server["kv_cache_dtype"] == "auto" and server["tp_size"] == 4
    assert sg["source"]["settings"] == {
        "backend": "sglang",
        "request_rate": "inf",
        "max_concurrency": 100,
        "dataset_name": "random",
        "random_input_len": 1024,
        "random_output_len": 128,
        "random_range_ratio": 0.0,
        "model_path": "/workspace/qwen-3-8b",
    }
    assert vl["source"]["settings"] == {
        "backend": "openai",
        "endpoint_type": "openai",
        "model_id": "/root/models/Qwen3-8B",
        "tokenizer_id": "/root/models/Qwen3-8B",
        "date": "20260410-090820",
        "num_prompts": 500,
        "request_rate": "inf",
        "burstiness": 1.0,
        "max_concurrency": 50,
    }
    texts = json.loads(VLLM_DETAILED.read_bytes())["generated_texts"]
    digests = [r["tool_metrics"]["generated_text_sha256"] for r in vl["requests"]]
    assert digests == [hashlib.sha256(t.encode()).hexdigest() for t in texts]
    # The texts themselves are nowhere in the artifact.
    assert texts[0][:40].encode() not in vllm.read_bytes()


def test_a_private_model_path_is_sanitized_on_publication(tmp_path: Path) -> None:
    from ledger.publication._publish import publish

    (vllm,) = import_files(
        "vllm", [VLLM_DETAILED], raw_dir=tmp_path / "raw", campaign="2026-11-29-imports", arm="v"
    ).paths
    assert read_document(vllm)["source"]["settings"]["model_id"] == "/root/models/Qwen3-8B"
    public = publish(tmp_path / "raw" / "2026-11-29-imports", tmp_path / "public").folder
    settings = read_document(public / "v/imported/ctx4096-c50.json")["source"]["settings"]
    assert "/root/" not in json.dumps(settings)
    assert settings["model_id"].startswith("<redacted:path:")


def _v0_6(stated: dict[str, Any]) -> None:
    stated["request_goodput:"] = stated.pop("request_goodput")
    for key in ["failed", "start_times", "endpoint_type", "label"] + [
        k for k in stated if "e2el" in k
    ]:
        stated.pop(key)


def _v0_9(stated: dict[str, Any]) -> None:
    stated.pop("backend")
    stated.pop("start_times")
    stated.update({"team": "serving", "run": 7})  # --metadata team=serving run=7


def _v0_19(stated: dict[str, Any]) -> None:
    stated["rtfx"] = 812.5


@pytest.mark.parametrize(
    ("release", "edit", "warnings", "metadata"),
    [
        ("0.6", _v0_6, ["no 'failed' (vLLM before 0.7 did not write it)"], None),
        (
            "0.9",
            _v0_9,
            ["no 'backend' (vLLM 0.9 writes endpoint_type only)"],
            {"team": "serving", "run": 7},
        ),
        ("0.15", lambda s: None, [], None),
        ("0.19", _v0_19, [], None),
    ],
)
def test_every_vllm_release_seen_imports(
    tmp_path: Path,
    release: str,
    edit: Any,
    warnings: list[str],
    metadata: dict[str, Any] | None,
) -> None:
    """Each release's file, made from the real 0.15.0 one by the edits that release implies."""
    stated = json.loads(VLLM_DETAILED.read_bytes())
    edit(stated)
    source = tmp_path / f"vllm-{release}.json"
    source.write_text(json.dumps(stated))
    (out,) = import_files(
        "vllm", [source], raw_dir=tmp_path, campaign="2026-11-29-imports", arm="v"
    ).paths
    document = read_document(out)
    assert len(document["requests"]) == 500
    assert [
        w.removeprefix(f"{source.name}: ").split(":")[0]
        for w in document["source"].get("warnings", [])
    ] == [w.split(":")[0] for w in warnings]
    assert document["source"]["settings"].get("metadata") == metadata
    starts = [r["tool_metrics"]["start_time_monotonic_s"] for r in document["requests"]]
    if "start_times" in stated:
        assert starts == stated["start_times"]
    else:
        assert set(starts) == {None}
    # Whatever the release, the aggregates it does state agree with its records.
    assert all(c["agrees"] for c in document["source"]["self_check"])


def _sglang_line(tmp_path: Path, *edits: tuple[bytes, bytes]) -> Path:
    line = SGLANG_DETAILED.read_bytes().splitlines()[0]
    for old, new in edits:
        assert old in line
        line = line.replace(old, new)
    path = tmp_path / "edited.jsonl"
    path.write_bytes(line + b"\n")
    return path


@pytest.mark.parametrize(
    ("tag", "category"),
    [
        (b'"gpu01.corp.acme.com"', "endpoint"),
        (b'"/home/alice/runs/b"', "path"),
        (b'"hf_abcdefghijklmnopqrstuvwxyz012345"', "credential"),
    ],
)
def test_a_tag_holding_a_private_value_stays_out_of_the_cell_name(
    tmp_path: Path, cli: CliRun, tag: bytes, category: str
) -> None:
    """Publication redacts the tag, but publishes names as they are, and a tag's slug
    (gpu01-corp-acme-com) no longer reads as what the sanitizer looks for."""
    source = _sglang_line(tmp_path, (b"Infinity", b"10.0"), (b'"tag": null', b'"tag": ' + tag))
    status, out, err = cli(
        "import", "sglang", str(source), "--raw-dir", str(tmp_path / "raw"), "--campaign",
        "2026-11-29-imports", "--arm", "x",
    )  # fmt: skip
    assert status == 0, err
    (path,) = (tmp_path / "raw" / "2026-11-29-imports" / "x").glob("*/*.json")
    assert path.name == "ctx494-c100-r10.json"
    assert out.splitlines()[0] == f"imported {path}"
    assert err == (
        f"warning: edited.jsonl: the tag holds a {category}: it is left out of the cell name, "
        "which is published as it is\n"
    )
    assert read_document(path)["source"]["settings"]["tag"] == json.loads(tag)
    published = publish(tmp_path / "raw" / "2026-11-29-imports", tmp_path / "public")
    tag_text = json.loads(tag)
    for file in published.folder.rglob("*"):
        assert _slug(tag_text) not in file.name
        if file.is_file():
            assert tag_text.encode() not in file.read_bytes()


@pytest.mark.parametrize(
    ("rate", "tag", "name"),
    [
        (b"1e300", b"null", "ctx494-c100-r1e300.json"),
        (b"1e-300", b"null", "ctx494-c100-r1em300.json"),
        (b"-1", b"null", "ctx494-c100.json"),
        (b"Infinity", b'"!!!"', "ctx494-c100.json"),
        (b"Infinity", b"42", "ctx494-c100.json"),
        (b"Infinity", b'"Warm B"', "ctx494-c100-warm-b.json"),
    ],
)
def test_a_cell_name_never_reads_as_another_rate(
    tmp_path: Path, rate: bytes, tag: bytes, name: str
) -> None:
    source = _sglang_line(
        tmp_path,
        (b'"request_rate": Infinity', b'"request_rate": ' + rate),
        (b'"tag": null', b'"tag": ' + tag),
    )
    (out,) = import_files(
        "sglang", [source], raw_dir=tmp_path, campaign="2026-11-29-imports", arm="s"
    ).paths
    assert out.name == name


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ((b'"completed": 100', b'"completed": 1' + b"0" * 400), None),
        ((b'"ttfts": [', b'"ttfts": [1e308, '), "are beyond any time"),
    ],
    ids=["count-beyond-float", "ttft-beyond-time"],
)
def test_numbers_beyond_any_float_are_no_internal_error(
    tmp_path: Path, cli: CliRun, edit: tuple[bytes, bytes], message: str | None
) -> None:
    source = _sglang_line(tmp_path, edit)
    if message is not None:
        # One more ttft than requests otherwise: drop the first real one.
        data = source.read_bytes()
        start = data.index(b'"ttfts": [1e308, ') + len(b'"ttfts": [1e308, ')
        end = data.index(b",", start)
        source.write_bytes(data[:start] + data[end + 2 :])
    status, _, err = cli(
        "import", "sglang", str(source), "--raw-dir", str(tmp_path),
        "--campaign", "2026-11-29-imports", "--arm", "s",
    )  # fmt: skip
    assert "internal error" not in err and "Warning" not in err
    if message is None:
        # A count no float can hold is not compared, and the rest imports.
        assert status == 0
    else:
        assert status == 2 and message in err


def test_a_file_without_records_is_refused_beside_others_too(tmp_path: Path) -> None:
    aggregate = REAL / "sglang-bench-serving/sglang-2024-12-llama33-70b-aggregate-7runs.jsonl"
    with pytest.raises(InvalidArtifact, match="line 1 has no per-request arrays"):
        import_files(
            "sglang",
            [SGLANG_DETAILED, aggregate],
            raw_dir=tmp_path,
            campaign="2026-11-29-imports",
            arm="s",
        )
    assert not (tmp_path / "2026-11-29-imports").exists()


def test_import_can_reseal_after_review(tmp_path: Path, cli: CliRun) -> None:
    args = ["--raw-dir", str(tmp_path), "--campaign", "2026-11-29-imports", "--arm", "v"]
    assert cli("import", "vllm", str(VLLM_DETAILED), *args)[0] == 0
    cell = tmp_path / "2026-11-29-imports" / "v" / "imported" / "ctx4096-c50.json"
    cell.write_bytes(cell.read_bytes() + b" ")
    status, _, err = cli("import", "vllm", str(VLLM_DETAILED), *args, "--stage", "again")
    assert status == 1 and "--reseal-after-review" in err
    status, _, _ = cli(
        "import", "vllm", str(VLLM_DETAILED), *args, "--stage", "again", "--reseal-after-review"
    )
    assert status == 0
    sealed = json.loads((tmp_path / "2026-11-29-imports" / "manifest.json").read_bytes())
    assert sealed["reviews"][-1]["command"] == "import"


def test_a_missing_e2el_of_a_successful_request_is_left_out(tmp_path: Path) -> None:
    """The records and the self-check read a request's end to end the same way: a null
    e2el is null in the record and no value in the recomputed aggregates."""
    stated = json.loads((ASSETS / "imports/vllm_save_detailed.json").read_bytes())
    stated["e2els"] = [0.5] * len(stated["ttfts"])
    stated["e2els"][0] = None
    stated["mean_e2el_ms"] = 500.0
    source = tmp_path / "e2el-null.json"
    source.write_text(json.dumps(stated))
    imported = import_files(
        "vllm", [source], raw_dir=tmp_path, campaign="2026-11-29-imports", arm="v"
    )
    (cell,) = imported.cells
    document = read_document(cell.path)
    assert document["requests"][0]["ok"] and document["requests"][0]["e2e_ms"] is None
    assert {c["field"]: c["recomputed"] for c in cell.self_check}["mean_e2el_ms"] == 500.0
    assert list(cell.self_check) == document["source"]["self_check"]


@pytest.mark.parametrize("tool", ["sglang", "vllm"])
def test_an_empty_json_file_is_refused_by_either_reader(tmp_path: Path, tool: str) -> None:
    blank = tmp_path / "blank.json"
    blank.write_text("   \n")
    with pytest.raises(InvalidArtifact, match="not valid JSON"):
        import_files(tool, [blank], raw_dir=tmp_path, campaign="2026-11-29-imports", arm="a")


@pytest.mark.parametrize("tool", ["aiperf", "sglang"])
def test_a_broken_line_of_a_jsonl_file_is_named_by_its_line(
    tmp_path: Path, cli: CliRun, tool: str
) -> None:
    """The parser counts within the one line it is given: it said 'line 1' of any line."""
    source = (
        AIPERF / "profile_export.jsonl"
        if tool == "aiperf"
        else REAL / "sglang-bench-serving/sglang-2024-12-llama33-70b-aggregate-7runs.jsonl"
    )
    lines = source.read_bytes().splitlines()[:3]
    assert len(lines) == 3
    truncated = tmp_path / "truncated.jsonl"
    truncated.write_bytes(b"\n".join([*lines[:-1], lines[-1][:50]]) + b"\n")
    status, _, err = cli(
        "import", tool, str(truncated), "--raw-dir", str(tmp_path / "raw"), "--campaign",
        "2026-11-29-imports", "--arm", "x",
    )  # fmt: skip
    assert status == 2
    assert err.startswith(f"error: {truncated}: line {len(lines)} of the file: not valid JSON"), err
    assert not (tmp_path / "raw").exists()


@pytest.mark.parametrize("tool", ["vllm", "sglang"])
@pytest.mark.parametrize(
    ("source", "owner"),
    [
        (AIPERF / "profile_export.jsonl", "aiperf"),
        (REAL / "llmperf_groq_70b/individual_groq_70b.json", "llmperf"),
    ],
)
def test_another_tool_s_requests_are_named_as_its_own(
    tmp_path: Path, cli: CliRun, tool: str, source: Path, owner: str
) -> None:
    """They have no per-request arrays either, but rerunning vLLM or SGLang with other
    flags, as that refusal advises, is the wrong way to go."""
    status, _, err = cli(
        "import", tool, str(source), "--raw-dir", str(tmp_path / "raw"), "--campaign",
        "2026-11-29-imports", "--arm", "x",
    )  # fmt: skip
    assert status == 2
    assert err == (
        f"error: {source.name}: line 1 is one request of {owner}'s, not a {tool} result: "
        f"import it as {owner}\n"
    )
