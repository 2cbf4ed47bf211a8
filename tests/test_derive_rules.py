"""derive's comparison of a stated artifact with the one derived again: what counts as the
same number, where the first difference is, and how a pointer reads its value."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ledger.derivation import _derive as derive


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        (1, 1, True),
        (1, 2, False),
        (1, 1.0, True),
        (1.0, 1, True),
        (1, 1.0 + 5e-9, False),  # an integer against a float still gets the tolerance only
        (1, 1.0 + 5e-10, True),
        (None, None, True),
        (None, 0.0, False),
        (0.0, None, False),
        (True, 1.0, False),  # a boolean is not the number one
        (1.0, True, False),
        (0.0, 1.5e-12, False),  # the absolute tolerance is 1e-12
        (0.0, 0.5e-12, True),
        ("a", "a", True),
        ("a", "b", False),
    ],
)
def test_close(a: Any, b: Any, same: bool) -> None:
    assert derive._close(a, b) is same


@pytest.mark.parametrize(
    ("expected", "actual", "pointer"),
    [
        ({"a": 1, "b": [1, 2]}, {"a": 1, "b": [1, 2]}, None),
        ({"a": 1, "b": [1, 2]}, {"a": 1, "b": [1, 3]}, "/b/1"),
        ({"a": 1}, {"a": 1, "z": 0}, "/z"),
        ({"a": 1, "y": 0}, {"a": 1}, "/y"),
        ({"a": [1]}, {"a": [1, 2]}, "/a"),
        ([1, 2], [1, 2, 3], "/"),
        ({"a": {"b": 1}}, {"a": [1]}, "/a"),  # a dict against a list
        ({"a": [1]}, {"a": {"0": 1}}, "/a"),
        ([{"x": 1.0}], [{"x": 1.0 + 1e-12}], None),
        (1, 2, "/"),
    ],
)
def test_first_difference(expected: Any, actual: Any, pointer: str | None) -> None:
    assert derive.first_difference(expected, actual) == pointer


def test_at_reads_what_a_pointer_names() -> None:
    document = {"rows": [{"n": 3}, {"n": 4}], "x": None}
    assert derive._at(document, "/rows/1/n") == 4
    assert derive._at(document, "/x") is None
    assert derive._at(document, "/") == document
    assert derive._at(document, "/rows/2") == "(absent)"
    assert derive._at(document, "/rows/1/m") == "(absent)"
    assert derive._at(document, "/missing") == "(absent)"
    assert derive._at(document, "/rows/n") == "(absent)"


@pytest.mark.parametrize(
    ("baseline", "candidate", "change"),
    [(200.0, 150.0, -25.0), (1.0, 2.0, 100.0), (0.0, 2.0, None), (None, 2.0, None),
     (2.0, None, None)],
)  # fmt: skip
def test_change(baseline: float | None, candidate: float | None, change: float | None) -> None:
    assert derive._change(baseline, candidate) == change


def test_mid() -> None:
    assert derive._mid(2.0, 4.0) == 3.0
    assert derive._mid(None, 4.0) == 4.0
    assert derive._mid(None, None) is None


def test_recompute_leaves_documents_without_a_derivation_alone(tmp_path: Any) -> None:
    assert derive.recompute(tmp_path, {"schema": "x"}) == []
    assert derive.recompute(tmp_path, {"derivation": "not an object"}) == []


ARMS = ("base", "cand")


def _row(**fields: Any) -> dict[str, Any]:
    row = {"stage": "capacity", "cell": "c1", "artifact": "a.json", "max_tokens": 16,
           "temperature": 0.0, "seed": 1, "concurrency": 1, "thinking": None, "prefix": None,
           "controlled_output": True, "lengths_not_as_requested": 0,
           "prefix_cache_hit_rate": None, "identity": None, "n": 10, "failed": 0}  # fmt: skip
    return {**row, **fields}


def _failures(
    a: dict[str, Any],
    b: dict[str, Any],
    evidence: tuple[int, int, int] = (0, 0, 0),
    declared: tuple[str, ...] = (),
) -> list[tuple[str, str]]:
    evidence_of = {("capacity", "c1"): evidence}
    found = derive._match_failures(evidence_of, ("base", "cand"), [(a, b)], declared)
    return [(f["rule"], f["reason"]) for f in found]


def test_a_matched_pair_has_no_failures() -> None:
    assert _failures(_row(), _row()) == []


@pytest.mark.parametrize(
    ("a", "b", "evidence", "expected"),
    [
        ({"stage_kind": "imported", "artifact": None}, {"stage_kind": "imported"}, (0, 0, 0),
         [("prompt-digests", "capacity/c1: no settings recorded for the run on base")]),
        ({}, {"stage_kind": "imported", "artifact": None}, (0, 0, 0),
         [("prompt-digests", "capacity/c1: no settings recorded for the run on cand")]),
        ({}, {}, (2, 3, 0), [("prompt-digests", "capacity/c1: prompt digests differ for 2 requests")]),
        ({}, {}, (0, 3, 0),
         [("prompt-tokens", "capacity/c1: actual prompt tokens differ for 3 requests")]),
        ({"concurrency": 2}, {}, (0, 0, 0),
         [("concurrency", "capacity/c1: concurrency differs (2 vs 1)")]),
        ({"seed": 2}, {}, (0, 0, 0), [("sampling", "capacity/c1: seed differs (2 vs 1)")]),
        ({}, {"controlled_output": False}, (0, 0, 0),
         [("controlled-output", "capacity/c1: output uncontrolled on cand")]),
        ({"lengths_not_as_requested": 2}, {}, (0, 0, 0),
         [("controlled-output", "capacity/c1: 2 output lengths not as requested on base")]),
        ({"prefix_cache_hit_rate": 0.5}, {"prefix_cache_hit_rate": 0.5}, (0, 0, 0), []),
        ({"prefix_cache_hit_rate": 0.9}, {"prefix_cache_hit_rate": 0.1}, (0, 0, 0),
         [("cache-state",
           "capacity/c1: cache reuse differs (prefix-cache hit rate 0.900 vs 0.100)")]),
        ({"identity": '{"engine": "x", "os": "linux"}'}, {"identity": '{"engine": "y"}'}, (0, 0, 0),
         [("identity", "capacity/c1: identities differ in undeclared engine, os")]),
        ({}, {"n": 4, "failed": 4}, (0, 0, 0),
         [("requests-succeeded", "capacity/c1: 0 of 4 requests succeeded on cand")]),
        ({"n": 10, "failed": 9}, {}, (0, 0, 0), []),  # one success is something to compare
    ],
)  # fmt: skip
def test_each_match_rule(
    a: dict[str, Any],
    b: dict[str, Any],
    evidence: tuple[int, int, int],
    expected: list[tuple[str, str]],
) -> None:
    assert _failures(_row(**a), _row(**b), evidence) == expected


def _imported(**settings: Any) -> dict[str, Any]:
    base = {"tool": "vllm", "model_id": "m", "num_prompts": 10, "max_concurrency": 1}
    identity = json.dumps({**base, **settings})
    return _row(stage_kind="imported", identity=identity, controlled_output=None,
                lengths_not_as_requested=10, max_tokens=None, seed=None)  # fmt: skip


@pytest.mark.parametrize(
    ("a", "b", "evidence", "expected"),
    [
        # Imports carry no digests: a null digest is no difference, lengths are.
        ({}, {}, (10, 0, 0), []),
        ({}, {}, (10, 3, 0), [("prompt-tokens", "capacity/c1: input lengths differ for 3 requests")]),
        ({}, {}, (0, 0, 2),
         [("controlled-output", "capacity/c1: output lengths differ for 2 requests")]),
        ({"seed": 1}, {}, (0, 0, 0),
         [("prompt-digests", "capacity/c1: dataset setting seed differs (1 vs null)")]),
        ({"random_input_len": 1024}, {"random_input_len": 2048}, (0, 0, 0),
         [("prompt-digests",
           "capacity/c1: dataset setting random_input_len differs (1024 vs 2048)")]),
        ({"request_rate": "inf"}, {"request_rate": 4.0}, (0, 0, 0),
         [("concurrency", 'capacity/c1: request_rate differs ("inf" vs 4.0)')]),
        ({"max_concurrency": 2}, {}, (0, 0, 0),
         [("concurrency", "capacity/c1: max_concurrency differs (2 vs 1)")]),
        ({"date": "1", "label": "a", "tag": "x", "summary": "s", "aggregate": "g"}, {},
         (0, 0, 0), []),
        ({"model_path": "/a"}, {"model_path": "/b"}, (0, 0, 0),
         [("identity", "capacity/c1: identities differ in undeclared model_path")]),
        ({"metadata": {"kv": "fp8", "same": 1}}, {"metadata": {"kv": "auto", "same": 1}},
         (0, 0, 0), [("identity", "capacity/c1: identities differ in undeclared metadata.kv")]),
        ({"metadata": "fp8"}, {}, (0, 0, 0),
         [("identity", "capacity/c1: identities differ in undeclared metadata")]),
        ({"tool": "sglang"}, {}, (0, 0, 0),
         [("identity", "capacity/c1: identities differ in undeclared tool")]),
    ],
)  # fmt: skip
def test_each_match_rule_of_imports(
    a: dict[str, Any],
    b: dict[str, Any],
    evidence: tuple[int, int, int],
    expected: list[tuple[str, str]],
) -> None:
    assert _failures(_imported(**a), _imported(**b), evidence) == expected


@pytest.mark.parametrize(
    "key",
    ["dataset_name", "num_prompts", "random_input_len", "random_output_len", "random_range_ratio",
     "random_prefix_len", "sharegpt_output_len", "seed"],
)  # fmt: skip
def test_every_dataset_setting_is_a_prompt_rule(key: str) -> None:
    assert _failures(_imported(**{key: 1}), _imported(**{key: 2})) == [
        ("prompt-digests", f"capacity/c1: dataset setting {key} differs (1 vs 2)")
    ]


def test_an_import_s_concurrency_is_compared() -> None:
    a, b = {**_imported(), "concurrency": 2}, _imported()
    assert _failures(a, b) == [("concurrency", "capacity/c1: concurrency differs (2 vs 1)")]


def test_an_import_beside_a_measured_arm_is_judged_as_an_import() -> None:
    # The measured arm's digests are not compared with the import's nulls; its settings are.
    assert _failures(_row(), _imported(), (10, 0, 0), ("model_id", "tool")) == [
        ("prompt-digests", "capacity/c1: dataset setting num_prompts differs (null vs 10)"),
        ("concurrency", "capacity/c1: max_concurrency differs (null vs 1)"),
    ]


def test_declared_metadata_is_no_failure() -> None:
    a, b = _imported(metadata={"kv": "fp8"}), _imported(metadata={"kv": "auto"})
    assert _failures(a, b, declared=("metadata.kv",)) == []


@pytest.mark.parametrize(
    ("a", "b", "prompts"),
    [
        ({}, {}, ("the input length of each request and on num_prompts (no dataset seed "
                  "was recorded)")),
        ({"seed": 3}, {}, "the input length of each request and on num_prompts, seed"),
        ({}, {"seed": 3, "random_input_len": 8},
         "the input length of each request and on num_prompts, random_input_len, seed"),
    ],
)  # fmt: skip
def test_what_an_import_leaves_unchecked(
    a: dict[str, Any], b: dict[str, Any], prompts: str
) -> None:
    assert derive._unchecked([(_imported(**a), _imported(**b))], ARMS) == [
        {"rule": "prompt-digests",
         "reason": "capacity/c1: prompt identity was not checked by digest (vllm records no "
                   f"prompts); the prompts were matched on {prompts}"},
        {"rule": "sampling",
         "reason": "capacity/c1: sampling parameters were not checked (vllm records no "
                   "temperature or max_tokens); the output length of each request was compared"},
        {"rule": "cache-state",
         "reason": "capacity/c1: cache reuse was not compared (no measured prefix-cache hit "
                   "rate on base and cand)"},
    ]  # fmt: skip


def test_an_import_that_records_no_dataset_setting_says_so() -> None:
    bare = _row(stage_kind="imported", identity='{"tool": "vllm"}')
    (prompts, _, _) = derive._unchecked([(bare, bare)], ARMS)
    assert prompts["reason"].endswith(
        "matched on the input length of each request (no dataset seed was recorded)"
    )


def test_unchecked_names_both_tools_and_leaves_measured_pairs_alone() -> None:
    measured = _row(prefix_cache_hit_rate=0.5)
    assert derive._unchecked([(measured, measured)], ARMS) == []
    mixed = derive._unchecked([(_row(), _imported(tool="sglang"))], ARMS)
    assert "(sglang records no prompts)" in mixed[0]["reason"]
    untold = derive._unchecked([(_imported(tool=None), _row())], ARMS)
    assert "(the import records no prompts)" in untold[0]["reason"]
    both = derive._unchecked([(_imported(), _imported(tool="sglang"))], ARMS)
    assert "(vllm and sglang record no prompts)" in both[0]["reason"]
    assert "(vllm and sglang record no temperature or max_tokens)" in both[1]["reason"]


def test_limitations_of_an_import() -> None:
    a, b = _imported(), _imported()
    assert derive._limitations([(a, b)], ("base", "cand")) == [
        "capacity/c1: cache reuse not measured on base (an imported result)",
        "capacity/c1: cache reuse not measured on cand (an imported result)",
        # Cache reuse unmeasured is said once, above, though it is unchecked too.
        *[e["reason"] for e in derive._unchecked([(a, b)], ARMS) if e["rule"] != "cache-state"],
    ]


@pytest.mark.parametrize(
    ("a", "b", "unmeasured"),
    [(None, 0.5, "base"), (0.5, None, "cand"), (None, None, "base and cand")],
)
def test_cache_reuse_unmeasured_on_an_arm_is_unchecked_not_matched(
    a: float | None, b: float | None, unmeasured: str
) -> None:
    """A server without /metrics: its cache reuse is unknown, not equal to the other's; a
    policy enforcing cache-state must refuse, not take it as matched."""
    pair = (_row(prefix_cache_hit_rate=a), _row(prefix_cache_hit_rate=b))
    assert derive._unchecked([pair], ARMS) == [
        {"rule": "cache-state",
         "reason": "capacity/c1: cache reuse was not compared (no measured prefix-cache hit "
                   f"rate on {unmeasured})"},
    ]  # fmt: skip
    assert _failures(*pair) == []  # no failure either: the data cannot show one


def test_a_cache_gap_of_exactly_the_limit_still_matches() -> None:
    assert derive.CACHE_REUSE_GAP == 0.05
    a, b = _row(prefix_cache_hit_rate=0.0), _row(prefix_cache_hit_rate=0.05)
    assert _failures(a, b) == []


def test_declared_differences_are_not_failures() -> None:
    a, b = _row(identity='{"engine": "x"}'), _row(identity='{"engine": "y"}')
    assert _failures(a, b, declared=("engine",)) == []


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ({}, []),
        ({"n": 12, "failed": 2},
         ["capacity/c1: 2 of 12 requests failed on base, excluded from timing statistics"]),
        ({"n": 5}, ["capacity/c1: 5 successful requests on base; descriptive medians only"]),
        ({"n": 10, "failed": 6}, [
            "capacity/c1: 6 of 10 requests failed on base, excluded from timing statistics",
            "capacity/c1: 4 successful requests on base; descriptive medians only"]),
        ({"controlled_output": False}, ["capacity/c1: output length not controlled on base"]),
        ({"controlled_output": None}, ["capacity/c1: output length not controlled on base"]),
        ({"prefix_cache_hit_rate": 0.25},
         ["capacity/c1: measured prefix-cache hit rate 0.250 on base"]),
        ({"metrics_available": False},
         ["capacity/c1: cache reuse not measured on base (no /metrics)"]),
        ({"metrics_available": True}, []),
    ],
)  # fmt: skip
def test_limitations(row: dict[str, Any], expected: list[str]) -> None:
    assert derive._limitations([(_row(**row), _row())], ("base", "cand")) == expected


def _pair_row(**fields: Any) -> dict[str, Any]:
    row = {"stage_kind": "capacity", "stage": "capacity", "cell": "c1", "context_target": 256,
           "concurrency": 1, "n": 12, "failed": 0, "artifact": None, "sha256": None,
           "controlled_output": True, "decode_tok_s_p50": 300.0, "ttft_ms_p50": 50.0,
           "throughput_tok_s": None}  # fmt: skip
    return {**row, **fields}


def test_the_os_document_row_by_row() -> None:
    endurance = {"stage_kind": "endurance", "stage": "endurance", "cell": "e1"}
    pairs = [
        (_pair_row(**endurance, n=4, failed=0, artifact="w/e.json", sha256="a" * 64),
         _pair_row(**endurance, n=4, failed=1, decode_tok_s_p50=400.0, artifact="l/e.json")),
        # A second endurance pair is not the endurance block: the first one is.
        (_pair_row(**{**endurance, "cell": "e2"}), _pair_row(**{**endurance, "cell": "e2"})),
        (_pair_row(failed=1, thinking="off", decode_tok_s_p50=None, median_output_tokens=16),
         _pair_row(n=13, failed=4, artifact="l/c1.json", sha256="b" * 64, ttft_ms_p50=40.0,
                   median_output_tokens=15)),
    ]  # fmt: skip
    intervals = {m: [(1.0, 2.0), None, None] for m in derive.MEDIANS}
    intervals["ttft_p50_ms"] = [None, None, (-25.0, -15.0)]
    document = derive._os_document(pairs, intervals, ("win", "lin"))
    assert (document["baseline_arm"], document["candidate_arm"]) == ("win", "lin")
    assert document["endurance"] == {
        "sample_count_per_os": 3,
        "windows_source": "w/e.json",
        "linux_source": "l/e.json",
        "sources": [{"path": "w/e.json", "sha256": "a" * 64}],  # the other has no digest
        "decode_windows": 300.0,
        "decode_linux": 400.0,
        "decode_change_percent": pytest.approx(100 / 3),
        "decode_change_ci95": [1.0, 2.0],
        "label": "descriptive",
    }
    # The requests that succeeded on the side with fewer, whichever side that is.
    failed_first = [(_pair_row(**endurance, n=4, failed=1), _pair_row(**endurance, n=4))]
    counted = derive._os_document(failed_first, {m: [None] for m in derive.MEDIANS}, ("w", "l"))
    assert counted["endurance"]["sample_count_per_os"] == 3
    (row,) = document["rows"]
    assert row["sample_count_per_os"] == 9
    assert (row["windows_source"], row["linux_source"]) == ("c1", "l/c1.json")
    assert row["thinking"] == "off"
    assert row["label"] == "descriptive"
    # A metric missing on one side is left out; the others keep their interval.
    assert row["metrics"] == {
        "ttft_p50_ms": {"windows": 50.0, "linux": 40.0, "change_percent": -20.0,
                        "change_ci95": [-25.0, -15.0]},
    }  # fmt: skip
    assert row["median_output_tokens"] == {"windows": 16, "linux": 15}
    with_thinking = derive._os_document(pairs[2:], {m: [None] for m in derive.MEDIANS}, ("w", "l"))
    assert "thinking" in with_thinking["rows"][0]
    pairs[2][0].pop("thinking")
    plain = derive._os_document(pairs[2:], {m: [None] for m in derive.MEDIANS}, ("w", "l"))
    assert "thinking" not in plain["rows"][0] and "endurance" not in plain


@pytest.mark.parametrize(
    ("a", "b", "label"),
    [((10, 0), (10, 0), "estimate"), ((12, 3), (10, 0), "descriptive"),
     ((10, 0), (12, 3), "descriptive"), ((9, 0), (20, 0), "descriptive")],
)  # fmt: skip
def test_label(a: tuple[int, int], b: tuple[int, int], label: str) -> None:
    assert derive._label({"n": a[0], "failed": a[1]}, {"n": b[0], "failed": b[1]}) == label


def test_every_pair_is_judged_and_a_cell_without_evidence_rows_passes() -> None:
    evidence = {("capacity", "c2"): (0, 4, 0)}
    pairs = [
        (_row(artifact=None, stage_kind="imported"), _row()),
        (_row(cell="c2"), _row(cell="c2")),
        (_row(cell="c3"), _row(cell="c3")),  # no evidence rows: nothing differs
    ]
    found = derive._match_failures(evidence, ("b", "c"), pairs, ())
    assert [(f["rule"], f["reason"].split(":")[0]) for f in found] == [
        ("prompt-digests", "capacity/c1"),
        ("prompt-tokens", "capacity/c2"),
    ]


def test_an_arm_where_nothing_succeeded_is_the_first_reason() -> None:
    # A refused port: every request failed on both arms, so their prompt tokens agree
    # (none) and the one other reason left, an uncontrolled output, says nothing of it.
    pairs = [
        (_row(), _row(controlled_output=False)),
        (_row(cell="c2", n=3, failed=3), _row(cell="c2", n=3, failed=3, controlled_output=False)),
    ]
    found = derive._match_failures({}, ("b", "c"), pairs, ())
    assert [(f["rule"], f["reason"]) for f in found] == [
        ("requests-succeeded", "capacity/c2: 0 of 3 requests succeeded on b"),
        ("requests-succeeded", "capacity/c2: 0 of 3 requests succeeded on c"),
        ("controlled-output", "capacity/c1: output uncontrolled on c"),
        ("controlled-output", "capacity/c2: output uncontrolled on c"),
    ]


def test_an_ab_document_of_one_pair_names_each_arm() -> None:
    a = _pair_row(identity='{"os": "windows"}', n=10)
    b = _pair_row(identity='{"os": "linux"}', n=11, failed=1)
    document = derive._ab_document([(a, b)], {m: [None] for m in derive.MEDIANS}, ("w", "l"))
    assert document["baseline"] == {"arm": "w", "identity": {"os": "windows"}}
    assert document["candidate"] == {"arm": "l", "identity": {"os": "linux"}}
    (row,) = document["rows"]
    assert (row["n"], row["failed"]) == ({"baseline": 10, "candidate": 11},
                                         {"baseline": 0, "candidate": 1})  # fmt: skip


def test_a_difference_of_lists_is_told_by_what_each_lacks() -> None:
    from ledger.derivation._derive import _difference

    stated = ["a", "b"]
    fresh = ["a", "c", "d" * 500]
    said = _difference(stated, fresh)
    assert said == (
        "states 2 entries; derived again from the raw rows: 3; not stated: 'c' (and 1 more); "
        "not derived: 'b'"
    )
    long = _difference("x" * 500, 1.5)
    assert len(long) < 260 and long.endswith("derived again from the raw rows: 1.5")


@pytest.mark.parametrize(
    ("count", "shown"),
    [
        (1, "s/c0"),
        (3, "s/c0, s/c1, s/c2"),
        (4, "s/c0, s/c1, s/c2 and 1 more"),
        (6, "s/c0, s/c1, s/c2 and 3 more"),
    ],
)
def test_a_refusal_names_three_cells_and_counts_the_rest(count: int, shown: str) -> None:
    assert derive._some_cells({("s", f"c{i}"): {} for i in range(count)}) == shown


def test_cells_one_arm_ran_are_named_with_their_arm() -> None:
    baseline = {("cap", "a"): {}, ("cap", "b"): {}, ("load", "x"): {}}
    candidate = {("cap", "a"): {}, ("cap", "c"): {}}
    assert derive._unpaired([baseline, candidate], ("base", "cand")) == [
        "cap/b: only on base, not compared",
        "load/x: only on base, not compared",
        "cap/c: only on cand, not compared",
    ]
    assert derive._unpaired([candidate, candidate], ("base", "cand")) == []


def test_a_comparison_that_cannot_be_derived_again_is_a_mismatch(tmp_path: Any) -> None:
    stated = {"campaign_id": "2026-01-01-x", "derivation": {"kind": "ab", "baseline": "a",
              "candidate": "b"}}  # fmt: skip
    (issue,) = derive.recompute(tmp_path, stated)
    assert (issue.code, issue.pointer) == ("derived-mismatch", "/derivation")
    assert issue.message.startswith("cannot be derived again: ")
