"""An A/B from two imported result files: matched on what imports carry (dataset settings,
each request's input and output lengths), and saying what could not be checked."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest

from ledger.database import build
from ledger.derivation._derive import DeriveError, derive_into
from ledger.formats.jsonio import write_json
from ledger.formats.schema import read_document
from ledger.imports import import_files
from ledger.promotion import comparison_failures, evaluate, load_evidence
from ledger.promotion._decide import decide
from ledger.promotion.policy import load_policy
from tests.conftest import DATA, CliRun, forge_seal, verify_json

REAL = DATA / "realworld"
VLLM = REAL / "vllm-bench-serve/vllm-0.15.0-qwen3-8b-tp8-c50-detailed.json"
SGLANG = REAL / "sglang-bench-serving/sglang-0.5.9-qwen3-8b-c100-output-details.jsonl"
CAMPAIGN = "2026-12-01-imported-ab"
VLLM_CELL = "imported/ctx4096-c50"
SGLANG_CELL = "imported/ctx494-c100"


def _vllm_copy(folder: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    """The real vLLM file as another run would write it: ``edit`` changes the run."""
    document = json.loads(VLLM.read_text())
    edit(document)
    path = folder / "candidate.json"
    path.write_text(json.dumps(document))
    return path


def _faster_with_fp8(document: dict[str, Any]) -> None:
    """The same prompts served 10 % faster, with the flag changed recorded by --metadata."""
    document["ttfts"] = [t * 0.9 for t in document["ttfts"]]
    document["itls"] = [[gap * 0.9 for gap in gaps] for gaps in document["itls"]]
    document["kv_cache_dtype"] = "fp8"  # vLLM writes --metadata values as top-level keys
    document["date"] = "20260411-101500"
    # A rerun states its own aggregates; the copy's would disagree with its records.
    for key in [k for k in document if k.endswith("_ms")]:
        del document[key]


def _campaign(tmp_path: Path, tool: str, baseline: Path, candidate: Path) -> Path:
    for arm, source in (("base", baseline), ("cand", candidate)):
        import_files(tool, [source], raw_dir=tmp_path / "raw", campaign=CAMPAIGN, arm=arm)
    return tmp_path / "raw" / CAMPAIGN


def _derived(folder: Path, *differs: str) -> dict[str, Any]:
    path = derive_into(folder, "base", "cand", differs=differs, replace=True)
    return read_document(path)


def _failures(document: dict[str, Any]) -> list[tuple[str, str]]:
    return [(f["rule"], f["reason"]) for f in document["match_failures"]]


def test_two_vllm_runs_with_one_changed_flag_are_a_matched_ab(tmp_path: Path, cli: CliRun) -> None:
    folder = _campaign(tmp_path, "vllm", VLLM, _vllm_copy(tmp_path, _faster_with_fp8))
    status, out, err = cli(
        "derive", str(folder), "--baseline", "base", "--candidate", "cand",
        "--differs", "metadata.kv_cache_dtype",
    )  # fmt: skip
    assert status == 0, err
    lines = out.splitlines()
    document = read_document(folder / "derived/ab-comparison-base-vs-cand.json")
    # The copy is 10 % faster in every request: each median's interval excludes zero.
    verdicts = (
        f"  {VLLM_CELL}: decode_tok_s_p50 improvement +11.1%, e2e_p50_ms improvement -10.0%, "
        "first_token_p50_ms improvement -10.0%"
    )
    unchecked = [f"  not checked, {u['rule']}: {u['reason']}" for u in document["unchecked"]]
    assert lines[1:] == ["matched", *unchecked, verdicts]
    assert document["unchecked"][1]["reason"] == (
        f"{VLLM_CELL}: sampling parameters were not checked (vllm records no temperature or "
        "max_tokens); the output length of each request was compared"
    )
    assert document["matched"] is True and document["match_failures"] == []
    assert [u["rule"] for u in document["unchecked"]] == [
        "prompt-digests",
        "sampling",
        "cache-state",
    ]
    assert document["unchecked"][2]["reason"] == (
        f"{VLLM_CELL}: cache reuse was not compared (no measured prefix-cache hit rate on base "
        "and cand)"
    )
    assert (
        f"{VLLM_CELL}: prompt identity was not checked by digest (vllm records no prompts); "
        "the prompts were matched on the input length of each request and on num_prompts (no "
        "dataset seed was recorded)"
    ) in document["limitations"]
    assert (
        f"{VLLM_CELL}: cache reuse not measured on cand (an imported result)"
        in (document["limitations"])
    )
    assert document["candidate"]["identity"]["metadata"] == {"kv_cache_dtype": "fp8"}
    (row,) = document["rows"]
    assert row["n"] == {"baseline": 500, "candidate": 500}
    e2e = row["metrics"]["e2e_p50_ms"]
    # The baseline's median end to end, from ttft + sum(itls), is the file's own median E2EL.
    assert e2e["baseline"] == pytest.approx(json.loads(VLLM.read_text())["median_e2el_ms"], 1e-4)
    assert e2e["change_percent"] == pytest.approx(-10.0, rel=1e-9)
    low, high = e2e["change_ci95"]
    assert low < -10.0 < high
    decode = row["metrics"]["decode_tok_s_p50"]["change_percent"]
    assert decode == pytest.approx(100 / 0.9 - 100, rel=1e-9)
    # The tools time the first chunk of any channel: compared as such, never as TTFT. vLLM
    # 0.15 records each request's start, so throughput is compared too: output tokens over
    # the first start to the last end.
    assert set(row["metrics"]) == {
        "decode_tok_s_p50",
        "e2e_p50_ms",
        "first_token_p50_ms",
        "throughput_tok_s",
    }
    stated = json.loads(VLLM.read_text())
    starts, ttfts, itls = stated["start_times"], stated["ttfts"], stated["itls"]
    ends = [s + t + sum(g) for s, t, g in zip(starts, ttfts, itls, strict=True)]
    span = max(ends) - min(starts)
    throughput = row["metrics"]["throughput_tok_s"]
    assert throughput["baseline"] == pytest.approx(stated["total_output_tokens"] / span, 1e-9)
    first = row["metrics"]["first_token_p50_ms"]
    assert first["baseline"] == pytest.approx(json.loads(VLLM.read_text())["median_ttft_ms"])
    assert first["change_percent"] == pytest.approx(-10.0, rel=1e-9)
    assert first["change_ci95"] is not None
    sources = {s["path"] for s in row["sources"]}
    assert sources == {"base/imported/ctx4096-c50.json", "cand/imported/ctx4096-c50.json"}
    status, report = verify_json(cli, folder)
    assert status == 0, report


def test_the_changed_flag_must_be_declared(tmp_path: Path, cli: CliRun) -> None:
    folder = _campaign(tmp_path, "vllm", VLLM, _vllm_copy(tmp_path, _faster_with_fp8))
    status, out, _ = cli("derive", str(folder), "--baseline", "base", "--candidate", "cand")
    assert status == 0
    reason = f"{VLLM_CELL}: identities differ in undeclared metadata.kv_cache_dtype"
    assert out.splitlines()[1:3] == ["not matched (1):", f"  {reason}"]
    document = read_document(folder / "derived/ab-comparison-base-vs-cand.json")
    assert document["matched"] is False
    assert _failures(document) == [("identity", reason)]


def _lengths(name: str, positions: tuple[int, ...]) -> Callable[[dict[str, Any]], None]:
    def edit(document: dict[str, Any]) -> None:
        for i in positions:
            document[name][i] += 1

    return edit


def _set(**values: Any) -> Callable[[dict[str, Any]], None]:
    return lambda document: document.update(values)


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (_lengths("input_lens", (0, 7, 499)),
         [("prompt-tokens", f"{VLLM_CELL}: input lengths differ for 3 requests")]),
        (_lengths("output_lens", (3, 4)),
         [("controlled-output", f"{VLLM_CELL}: output lengths differ for 2 requests")]),
        (_set(num_prompts=499),
         [("prompt-digests", f"{VLLM_CELL}: dataset setting num_prompts differs (500 vs 499)")]),
        (_set(burstiness=0.5),
         [("concurrency", f"{VLLM_CELL}: burstiness differs (1.0 vs 0.5)")]),
        (_set(model_id="/root/models/Qwen3-8B-AWQ"),
         [("identity", f"{VLLM_CELL}: identities differ in undeclared model_id")]),
        (_set(backend="vllm"),
         [("identity", f"{VLLM_CELL}: identities differ in undeclared backend")]),
        # What only names a run is never compared.
        (_set(date="20270101-000000", label="candidate"), []),
    ],
)  # fmt: skip
def test_each_rule_alone_breaks_the_match(
    tmp_path: Path, edit: Callable[[dict[str, Any]], None], expected: list[tuple[str, str]]
) -> None:
    folder = _campaign(tmp_path, "vllm", VLLM, _vllm_copy(tmp_path, edit))
    document = _derived(folder)
    assert _failures(document) == expected
    assert document["matched"] is (not expected)
    assert [u["rule"] for u in document["unchecked"]] == [
        "prompt-digests",
        "sampling",
        "cache-state",
    ]


def test_a_request_on_one_side_only_is_a_length_difference(tmp_path: Path) -> None:
    def drop_last(document: dict[str, Any]) -> None:
        for key in ("input_lens", "output_lens", "ttfts", "itls", "start_times",
                    "generated_texts", "errors"):  # fmt: skip
            document[key].pop()
        document["completed"] -= 1

    folder = _campaign(tmp_path, "vllm", VLLM, _vllm_copy(tmp_path, drop_last))
    assert _failures(_derived(folder)) == [
        ("prompt-tokens", f"{VLLM_CELL}: input lengths differ for 1 request"),
        ("controlled-output", f"{VLLM_CELL}: output lengths differ for 1 request"),
    ]


def test_cells_of_other_tags_do_not_pair(tmp_path: Path, cli: CliRun) -> None:
    folder = _campaign(tmp_path, "vllm", VLLM, _vllm_copy(tmp_path, _set(tag="rerun")))
    status, _, err = cli("derive", str(folder), "--baseline", "base", "--candidate", "cand")
    assert status == 1
    assert err == (
        f"error: no cell of 'base' ({VLLM_CELL}) matches a cell of 'cand' "
        f"({VLLM_CELL}-rerun): cells pair by stage and cell name\n"
    )


def test_a_refusal_names_three_cells_of_an_arm_and_counts_the_rest(tmp_path: Path) -> None:
    line = SGLANG.read_bytes().splitlines()[0]
    four = tmp_path / "four.jsonl"
    four.write_bytes(
        b"\n".join(line.replace(b'"tag": null', f'"tag": "t{i}"'.encode()) for i in range(4))
    )
    folder = _campaign(tmp_path, "sglang", four, _sglang_copy(tmp_path, "one.jsonl"))
    with pytest.raises(DeriveError) as refused:
        derive_into(folder, "base", "cand")
    assert str(refused.value) == (
        f"no cell of 'base' ({SGLANG_CELL}-t0, {SGLANG_CELL}-t1, {SGLANG_CELL}-t2 and 1 more) "
        f"matches a cell of 'cand' ({SGLANG_CELL}): cells pair by stage and cell name"
    )


def test_the_imported_settings_are_cell_settings(tmp_path: Path) -> None:
    folder = _campaign(tmp_path, "vllm", VLLM, _vllm_copy(tmp_path, _faster_with_fp8))
    db = build([folder])
    rows = db.query(
        "SELECT arm, stage, stage_kind, cell, context_target, concurrency, planned_requests, "
        "warmup, artifact, identity FROM cell_settings ORDER BY arm"
    ).rows
    assert [row[:9] for row in rows] == [
        (arm, "imported", "imported", "ctx4096-c50", 4096, 50, 500, 0,
         f"{arm}/imported/ctx4096-c50.json")
        for arm in ("base", "cand")
    ]  # fmt: skip
    identity = json.loads(rows[1][9])
    assert (identity["tool"], identity["metadata"]) == ("vllm", {"kv_cache_dtype": "fp8"})


def _sglang_copy(folder: Path, name: str, *edits: tuple[str, str]) -> Path:
    """The first run of the real SGLang file (bare Infinity and all), edited as text."""
    line = SGLANG.read_bytes().splitlines()[0].decode()
    for old, new in edits:
        assert old in line
        line = line.replace(old, new, 1)
    path = folder / name
    path.write_text(line + "\n")
    return path


def test_two_sglang_runs_compare_their_dataset_settings_and_seed(tmp_path: Path) -> None:
    seeded = ('{"tag": null,', '{"tag": null, "seed": 1,')
    base = _sglang_copy(tmp_path, "base.jsonl", seeded)
    same = _sglang_copy(tmp_path, "same.jsonl", seeded)
    folder = _campaign(tmp_path, "sglang", base, same)
    document = _derived(folder)
    assert document["matched"] is True
    assert document["unchecked"][0]["reason"] == (
        f"{SGLANG_CELL}: prompt identity was not checked by digest (sglang records no "
        "prompts); the prompts were matched on the input length of each request and on "
        "dataset_name, random_input_len, random_output_len, random_range_ratio, seed"
    )
    assert document["unchecked"][1] == {
        "rule": "sampling",
        "reason": f"{SGLANG_CELL}: sampling parameters were not checked (sglang records no "
        "temperature or max_tokens); the output length of each request was compared",
    }
    assert document["baseline"]["identity"]["version"] == "0.5.9"
    assert document["baseline"]["identity"]["model_path"] == "/workspace/qwen-3-8b"

    other = tmp_path / "other"
    other.mkdir()
    reseeded = _sglang_copy(other, "seed.jsonl", ('{"tag": null,', '{"tag": null, "seed": 2,'))
    folder = _campaign(other, "sglang", base, reseeded)
    assert _failures(_derived(folder)) == [
        ("prompt-digests", f"{SGLANG_CELL}: dataset setting seed differs (1 vs 2)")
    ]

    ratio = tmp_path / "ratio"
    ratio.mkdir()
    wider = _sglang_copy(
        ratio, "ratio.jsonl", seeded, ('"random_range_ratio": 0.0', '"random_range_ratio": 0.5')
    )
    folder = _campaign(ratio, "sglang", base, wider)
    assert _failures(_derived(folder)) == [
        (
            "prompt-digests",
            f"{SGLANG_CELL}: dataset setting random_range_ratio differs (0.0 vs 0.5)",
        )
    ]


def test_the_tool_is_part_of_the_identity(tmp_path: Path) -> None:
    # The same requests told by vLLM's file, and by SGLang's writing the same arrays.
    document = json.loads(VLLM.read_text())
    # Less what only vLLM writes (an SGLang file holding it is refused as vLLM's).
    only_vllm = ("date", "model_id", "tokenizer_id", "endpoint_type", "start_times")
    line = {
        k: v
        for k, v in document.items()
        if k not in only_vllm and not k.endswith("_e2el_ms") and not k.startswith("request_goodput")
    }
    line["backend"] = "openai"
    sglang = tmp_path / "sglang.jsonl"
    sglang.write_text(json.dumps(line) + "\n")
    plain = tmp_path / "vllm.json"
    plain.write_text(json.dumps(line))
    import_files("vllm", [plain], raw_dir=tmp_path / "raw", campaign=CAMPAIGN, arm="base")
    import_files("sglang", [sglang], raw_dir=tmp_path / "raw", campaign=CAMPAIGN, arm="cand")
    document = _derived(tmp_path / "raw" / CAMPAIGN)
    assert _failures(document) == [
        ("identity", f"{VLLM_CELL}: identities differ in undeclared tool")
    ]
    assert document["unchecked"][0]["reason"].startswith(
        f"{VLLM_CELL}: prompt identity was not checked by digest (vllm and sglang record"
    )


@pytest.mark.parametrize(
    ("edit", "pointer"),
    [
        (lambda d: d.pop("unchecked"), "/unchecked"),
        (lambda d: d["unchecked"].pop(), "/unchecked"),
        (lambda d: d["limitations"].pop(), "/limitations"),
    ],
)
def test_verify_derives_the_imported_ab_again(
    tmp_path: Path, cli: CliRun, edit: Callable[[dict[str, Any]], None], pointer: str
) -> None:
    folder = _campaign(tmp_path, "vllm", VLLM, _vllm_copy(tmp_path, _faster_with_fp8))
    path = derive_into(folder, "base", "cand", differs=["metadata.kv_cache_dtype"])
    document = json.loads(path.read_text())
    edit(document)
    write_json(path, document)
    forge_seal(folder)
    status, report = verify_json(cli, folder)
    assert status == 1
    assert [(f["code"], f["pointer"]) for f in report["findings"]] == [
        ("derived-mismatch", pointer)
    ]


def test_an_import_s_unchecked_rules_refuse_a_policy_that_enforces_them(tmp_path: Path) -> None:
    folder = _campaign(tmp_path, "vllm", VLLM, _vllm_copy(tmp_path, _faster_with_fp8))
    document = _derived(folder, "metadata.kv_cache_dtype")
    policy = load_policy()
    reasons = comparison_failures(document, policy)
    assert reasons == [
        f"{document['unchecked'][0]['reason']}; the policy enforces prompt-digests",
        f"{document['unchecked'][1]['reason']}; the policy enforces sampling",
        f"{document['unchecked'][2]['reason']}; the policy enforces cache-state",
    ]
    lenient = attrs.evolve(policy, matched_ab=attrs.evolve(policy.matched_ab, equal_prompts=False))
    assert [r.rsplit("; ", 1)[1] for r in comparison_failures(document, lenient)] == [
        "the policy enforces sampling",
        "the policy enforces cache-state",
    ]
    neither = attrs.evolve(
        lenient,
        matched_ab=attrs.evolve(lenient.matched_ab, equal_sampling=False, equal_cache_state=False),
    )
    assert comparison_failures(document, neither) == []


def test_failed_requests_are_failures_not_other_output_lengths(tmp_path: Path) -> None:
    def fail_two(document: dict[str, Any]) -> None:
        for i in (5, 17):
            document["errors"][i] = "Bad Request"
            document["ttfts"][i], document["itls"][i], document["output_lens"][i] = 0.0, [], 0
        document["completed"], document["failed"] = 498, 2

    folder = _campaign(tmp_path, "vllm", VLLM, _vllm_copy(tmp_path, fail_two))
    document = _derived(folder)
    assert _failures(document) == []
    assert (
        f"{VLLM_CELL}: 2 of 500 requests failed on cand, excluded from timing statistics"
        in document["limitations"]
    )
    # An import has no gates: its failed requests are the summary's failures (the report
    # said "None recorded").
    summary = decide(folder, load_policy()).summary
    assert summary["failures"] == [
        f"cand {VLLM_CELL}: 2 of 500 requests failed (vllm recorded them)"
    ]


def test_sglang_server_flags_are_its_identity(tmp_path: Path) -> None:
    base = _sglang_copy(tmp_path, "base.jsonl")
    fp8 = _sglang_copy(
        tmp_path,
        "fp8.jsonl",
        ('"kv_cache_dtype": "auto"', '"kv_cache_dtype": "fp8_e5m2"'),
        ('"port": 30000', '"port": 30001'),  # where it listened: never compared
        ('"last_gen_throughput": ', '"last_gen_throughput": 1'),  # its runtime state: not kept
    )
    folder = _campaign(tmp_path, "sglang", base, fp8)
    reason = f"{SGLANG_CELL}: identities differ in undeclared server_info.kv_cache_dtype"
    assert _failures(_derived(folder)) == [("identity", reason)]
    declared = _derived(folder, "server_info.kv_cache_dtype")
    assert declared["matched"] is True
    assert declared["candidate"]["identity"]["server_info"]["kv_cache_dtype"] == "fp8_e5m2"


def test_cells_on_one_arm_only_are_named(tmp_path: Path) -> None:
    line = SGLANG.read_bytes().splitlines()[0]
    tagged = line.replace(b'"tag": null', b'"tag": "warm"')
    two = tmp_path / "two.jsonl"
    two.write_bytes(line + b"\n" + tagged + b"\n")
    folder = _campaign(tmp_path, "sglang", two, _sglang_copy(tmp_path, "one.jsonl"))
    document = _derived(folder)
    assert [row["cell"] for row in document["rows"]] == ["ctx494-c100"]
    assert f"{SGLANG_CELL}-warm: only on base, not compared" in document["limitations"]


def test_a_cell_held_by_two_artifacts_is_refused(tmp_path: Path) -> None:
    folder = _campaign(tmp_path, "vllm", VLLM, _vllm_copy(tmp_path, _faster_with_fp8))
    copy = folder / "cand/imported/copy.json"
    copy.write_bytes((folder / "cand/imported/ctx4096-c50.json").read_bytes())
    forge_seal(folder)
    with pytest.raises(DeriveError) as refused:
        derive_into(folder, "base", "cand", replace=True)
    assert str(refused.value) == (
        "two artifacts hold cell imported/ctx4096-c50 of arm 'cand' (cand/imported/copy.json, "
        "cand/imported/ctx4096-c50.json); a cell is one artifact"
    )


def test_a_declared_difference_must_name_an_identity_key(tmp_path: Path, cli: CliRun) -> None:
    folder = _campaign(tmp_path, "vllm", VLLM, _vllm_copy(tmp_path, _faster_with_fp8))
    for key in ("", "num_prompts", "metadata", "nonexistent.key"):
        status, _, err = cli(
            "derive", str(folder), "--baseline", "base", "--candidate", "cand", "--differs", key
        )
        assert status == 2
        assert err == (
            f"error: --differs {key!r}: neither arm's identity nor request has this key (the keys that "
            "differ: metadata.kv_cache_dtype)\n"
        )
    assert not (folder / "derived").exists()
    document = _derived(folder, "metadata.kv_cache_dtype", "model_id", "metadata.kv_cache_dtype")
    assert document["derivation"]["declared_differences"] == [
        "metadata.kv_cache_dtype",
        "model_id",
    ]


def test_a_dataset_setting_in_a_vllm_file_is_compared_once(tmp_path: Path) -> None:
    # vLLM writes --metadata as top-level keys: a seed there is the dataset's, not metadata.
    def seeded(seed: int) -> Callable[[dict[str, Any]], None]:
        return _set(seed=seed, dataset_name="random")

    base = tmp_path / "base"
    base.mkdir()
    folder = _campaign(
        tmp_path, "vllm", _vllm_copy(base, seeded(1)), _vllm_copy(tmp_path, seeded(2))
    )
    assert _failures(_derived(folder)) == [
        ("prompt-digests", f"{VLLM_CELL}: dataset setting seed differs (1 vs 2)")
    ]


def test_an_imported_ab_is_decided_reported_and_verified_as_a_raw_campaign(
    tmp_path: Path, cli: CliRun
) -> None:
    """Import, derive, decide, report: no dead end. The summary never authorizes promotion
    (ledger sent none of the requests) and says where its numbers come from."""
    folder = _campaign(tmp_path, "vllm", VLLM, _vllm_copy(tmp_path, _faster_with_fp8))
    derive_into(folder, "base", "cand", differs=["metadata.kv_cache_dtype"])
    status, out, err = cli("decide", str(folder))
    assert status == 0, err
    assert "no-promotion; promotion_authorized false" in out.splitlines()[0]
    summary = read_document(folder / "summary.json")
    decision = summary["decision"]
    assert decision["promotion_authorized"] is False and decision["candidate"] == "cand"
    unmet = {u["rule"] for u in decision["unmet"]}
    assert {"complete", "required-gates", "reserve", "restoration"} <= unmet
    assert summary["measurement"]["path"] == "imported from vllm"
    assert summary["measurement"]["sample_count"] == 500
    assert summary["identity"] == {"arm": "cand", "imported_from": "vllm"}
    runs = ["base/imported/ctx4096-c50.json", "cand/imported/ctx4096-c50.json"]
    assert summary["workload"] == {"imported": runs, "baseline": "base", "candidate": "cand"}
    assert summary["evidence"] == [runs[1], "derived/ab-comparison-base-vs-cand.json"]
    assert any(
        line.startswith("Imported from vllm result files") for line in summary["limitations"]
    )
    assert summary["failures"] == []
    # A summary beside imported runs is a raw campaign's: their settings hold model paths,
    # which a publication would redact, and no follow-up ticket is due before publishing.
    status, report = verify_json(cli, folder)
    assert status == 0, report["findings"]
    status, _, err = cli("report", str(folder))
    assert status == 0, err
    text = (folder / "report.md").read_text()
    assert "| Measurement path | imported from vllm |" in text
    # Derive matched the arms; the policy enforces the checks an import cannot make.
    assert (
        "The A/B comparison is matched as derived, but not under the policy: descriptive only."
        in text
    )
    metric = read_document(folder / "derived/ab-comparison-base-vs-cand.json")["rows"][0][
        "metrics"
    ]["first_token_p50_ms"]
    assert metric["baseline"] == pytest.approx(json.loads(VLLM.read_text())["median_ttft_ms"])
    row = next(line for line in text.splitlines() if "(first token, any channel)" in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == (
        f"{metric['baseline']:,.2f} / {metric['candidate']:,.2f} (first token, any channel)"
    )
    assert cells[2].startswith(f"{metric['change_percent']:+.1f}%")
    assert "![First token (any channel) p50 by context target](report/first-token.svg)" in text
    # Effective prefill is unknown to an import: a dash, not a crash.
    assert "| imported 4,096 | 4,096 / 4,096 |" in text
    assert " | - | - | - |" in text


def test_a_folder_of_neither_a_run_nor_an_import_is_not_decided(
    tmp_path: Path, cli: CliRun
) -> None:
    folder = _campaign(tmp_path, "vllm", VLLM, _vllm_copy(tmp_path, _faster_with_fp8))
    for path in folder.glob("*/imported/*.json"):
        path.unlink()
    forge_seal(folder)
    status, _, err = cli("decide", str(folder))
    assert status == 1
    assert err.endswith("(no readable run-manifest.json, no imported run)\n"), err


def test_every_imported_run_of_an_arm_counts_and_any_arm_may_be_decided(
    tmp_path: Path, cli: CliRun
) -> None:
    def versioned(document: dict[str, Any]) -> None:
        _faster_with_fp8(document)
        document["version"] = "0.15.0"

    raw = tmp_path / "raw"
    import_files("vllm", [VLLM], raw_dir=raw, campaign=CAMPAIGN, arm="base")
    one = _vllm_copy(tmp_path, versioned)
    two = tmp_path / "second" / "candidate.json"
    two.parent.mkdir()
    two.write_bytes(one.read_bytes())
    import_files("vllm", [one, two], raw_dir=raw, campaign=CAMPAIGN, arm="cand")
    folder = raw / CAMPAIGN
    status, _, err = cli("decide", str(folder), "--candidate", "cand")
    assert status == 0, err
    assert cli("report", str(folder), "--format", "md", "--format", "html")[0] == 0
    assert f"{CAMPAIGN}: cand" in (folder / "report.html").read_text()
    summary = read_document(folder / "summary.json")
    assert summary["identity"] == {"arm": "cand", "imported_from": "vllm 0.15.0"}
    assert summary["measurement"]["sample_count"] == 1000
    assert len(summary["workload"]["imported"]) == 3
    evaluation = evaluate(load_evidence(folder), load_policy(), candidate="nope")
    assert evaluation.candidate is None
    assert ("candidate", "the campaign has no arm 'nope'") in [
        (u.rule, u.reason) for u in evaluation.unmet
    ]
    status, _, err = cli("decide", str(folder), "--candidate", "base")
    assert status == 0, err
    assert read_document(folder / "summary.json")["decision"]["candidate"] == "base"
    # Rendered again as markdown alone, the HTML of the earlier decision is rendered too:
    # left as it was, two reports of two decisions would be sealed side by side.
    status, out, err = cli("report", str(folder), "--format", "md", "--replace")
    assert status == 0, err
    assert f"report: {folder / 'report.html'}" in out.splitlines()
    for name in ("report.md", "report.html"):
        text = (folder / name).read_text()
        assert f"{CAMPAIGN}: base" in text and f"{CAMPAIGN}: cand" not in text, name
    # The gate takes a name the campaign lacks for a mistyped argument: one line, exit 2,
    # not every rule listed as unmet for a candidate of none.
    status, out, err = cli("gate", str(folder), "--candidate", "nope")
    assert (status, out) == (2, "")
    assert (
        err == f"ledger gate: error: {folder}: the campaign has no arm 'nope' (arms: base, cand)\n"
    )
