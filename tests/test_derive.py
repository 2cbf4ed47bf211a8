"""Derived comparisons: the seed's shape, recomputation in verify, matched checks."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ledger.database import build
from ledger.derivation import _bootstrap as bootstrap
from ledger.derivation._comparison_reads import Ordered
from ledger.derivation._derive import DeriveError, derive, derive_into, first_difference
from ledger.evidence.manifest import seal
from ledger.formats.jsonio import write_json
from ledger.formats.schema import read_document
from ledger.hashing import sha256_file
from tests import cells
from tests.conftest import SEEDS, CliRun, forge_seal, run_plan_text, verify_json

SEED_METRICS = {
    "decode_tok_s_p50",
    "effective_prefill_tok_s_p50",
    "ttft_p50_ms",
    "e2e_p50_ms",
    "throughput_tok_s",
}


@pytest.fixture
def campaign(tmp_path: Path, two_arm_campaign: Path) -> Path:
    copy = tmp_path / two_arm_campaign.name
    shutil.copytree(two_arm_campaign, copy)
    return copy


def _codes(report: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(f["code"], f["path"].rsplit("/", 1)[-1], f["pointer"]) for f in report["findings"]]


def test_os_comparison_has_the_seed_shape(campaign: Path, cli: CliRun) -> None:
    status, out, err = cli(
        "derive",
        str(campaign),
        "--baseline",
        "windows",
        "--candidate",
        "linux",
        "--kind",
        "os",
        "--differs",
        "os",
        "--differs",
        "simulated_profile",
    )
    assert status == 0, err
    path = campaign / "derived/os-comparison-windows-vs-linux.json"
    assert out.splitlines()[0] == f"derived {path}"
    derived = read_document(path)
    seed = json.loads((SEEDS / "2026-09-08-glm53-linux-wsl-comparison.summary.json").read_text())
    seed_row = seed["headline_results"]["rows"][0]
    assert [r["context_target"] for r in derived["rows"]] == [256, 1024]
    for row in derived["rows"]:
        assert set(seed_row) <= set(row)
        assert set(row["metrics"]) == SEED_METRICS
        assert row["sample_count_per_os"] == 12
        assert row["label"] == "estimate"
        for name in SEED_METRICS - {"throughput_tok_s"}:
            metric = row["metrics"][name]
            low, high = metric["change_ci95"]
            assert low <= metric["change_percent"] <= high
        assert [s["path"] for s in row["sources"]] == [row["windows_source"], row["linux_source"]]
    # 300 vs 400 tok/s per request: linux decodes faster. The size of the change is measured
    # (a loaded machine moves it), so only its sign and its arithmetic are asserted here.
    decode = derived["rows"][0]["metrics"]["decode_tok_s_p50"]
    assert decode["change_percent"] > 0
    assert decode["change_percent"] == pytest.approx(
        (decode["linux"] - decode["windows"]) / decode["windows"] * 100, rel=1e-9
    )
    endurance = derived["endurance"]
    assert set(seed["headline_results"]["endurance"]) <= set(endurance) | {"limitations"}
    assert endurance["sample_count_per_os"] == 4
    assert endurance["label"] == "descriptive" and endurance["decode_change_ci95"] is None
    assert derived["matched"] is True, derived["match_reasons"]
    assert any("prefix-cache hit rate" in line for line in derived["limitations"])
    assert any("4 successful requests" in line for line in derived["limitations"])
    status, report = verify_json(cli, campaign)
    assert status == 0 and report["summary"]["warnings"] == 0


def test_derive_is_deterministic(campaign: Path) -> None:
    first = derive_into(campaign, "windows", "linux", kind="ab").read_bytes()
    second = derive_into(campaign, "windows", "linux", kind="ab").read_bytes()
    assert first == second


@pytest.mark.parametrize(("factor", "caught"), [(1 + 1e-8, True), (1 + 1e-11, False)])
def test_recomputation_tolerance_is_one_in_a_billion(
    campaign: Path, cli: CliRun, factor: float, caught: bool
) -> None:
    path = derive_into(campaign, "windows", "linux", kind="ab", differs=["os", "simulated_profile"])
    document = json.loads(path.read_text())
    metric = document["rows"][1]["metrics"]["e2e_p50_ms"]
    metric["candidate"] *= factor  # just outside, or well inside, the 1e-9 relative tolerance
    # The row's own arithmetic kept consistent: only the recomputation from raw rows can tell.
    metric["change_percent"] = (metric["candidate"] - metric["baseline"]) / metric["baseline"] * 100
    write_json(path, document)
    forge_seal(campaign)
    status, report = verify_json(cli, campaign)
    codes = [(f["code"], f["pointer"]) for f in report["findings"]]
    if caught:
        assert status == 1
        assert codes == [("derived-mismatch", "/rows/1/metrics/e2e_p50_ms/candidate")]
    else:
        assert status == 0 and codes == []


@pytest.mark.parametrize("where", ["row", "endurance"])
def test_a_hand_edited_os_comparison_is_derived_again(
    campaign: Path, cli: CliRun, where: str
) -> None:
    """An OS comparison is derived again from the raw rows, as an A/B is: a Linux median
    edited with its row's change recomputed keeps every arithmetic check consistent."""
    path = derive_into(campaign, "windows", "linux", kind="os", differs=["os", "simulated_profile"])
    document = json.loads(path.read_text())
    if where == "row":
        metric = document["rows"][0]["metrics"]["decode_tok_s_p50"]
        metric["linux"] *= 1.25
        metric["change_percent"] = (metric["linux"] - metric["windows"]) / metric["windows"] * 100
        pointer = "/rows/0/metrics/decode_tok_s_p50/change_percent"  # the first key that differs
    else:
        endurance = document["endurance"]
        endurance["decode_linux"] *= 1.25
        endurance["decode_change_percent"] = (
            (endurance["decode_linux"] - endurance["decode_windows"])
            / endurance["decode_windows"] * 100
        )  # fmt: skip
        pointer = "/endurance/decode_change_percent"
    write_json(path, document)
    forge_seal(campaign)
    status, report = verify_json(cli, campaign)
    assert status == 1
    assert [(f["code"], f["pointer"]) for f in report["findings"]] == [
        ("derived-mismatch", pointer)
    ]


def test_hand_edited_number_is_caught(campaign: Path, cli: CliRun) -> None:
    path = derive_into(campaign, "windows", "linux", kind="ab", differs=["os", "simulated_profile"])
    document = json.loads(path.read_text())
    metric = document["rows"][1]["metrics"]["e2e_p50_ms"]
    metric["candidate"] *= 0.9
    metric["change_percent"] = (metric["candidate"] - metric["baseline"]) / metric["baseline"] * 100
    write_json(path, document)
    forge_seal(campaign)
    status, report = verify_json(cli, campaign)
    assert status == 1
    (finding,) = report["findings"]
    assert finding["code"] == "derived-mismatch"
    assert finding["pointer"] == "/rows/1/metrics/e2e_p50_ms/candidate"
    assert "derived again from the raw rows" in finding["message"]


def test_withheld_sources_leave_only_the_arithmetic(campaign: Path, cli: CliRun) -> None:
    path = derive_into(campaign, "windows", "linux", kind="ab", differs=["os", "simulated_profile"])
    document = json.loads(path.read_text())
    source = document["rows"][0]["sources"][0]["path"]
    (campaign / source).unlink()
    seal(campaign, withhold=[source], check=False, jobs=1)
    status, report = verify_json(cli, campaign)
    assert status == 0
    assert {f["code"] for f in report["findings"]} == {"withheld-artifact", "reference-withheld"}
    metric = document["rows"][0]["metrics"]["ttft_p50_ms"]
    metric["change_percent"] += 1
    write_json(path, document)
    forge_seal(campaign)
    status, report = verify_json(cli, campaign)
    assert status == 1
    assert ("derived-mismatch", path.name, "/rows/0/metrics/ttft_p50_ms/change_percent") in _codes(
        report
    )


def test_match_reasons_from_the_data(campaign: Path) -> None:
    db = build([campaign])
    document = derive(db, campaign.name, "windows", "linux", kind="ab")
    assert document["matched"] is False
    assert "unchecked" not in document  # every rule checked: measured arms, not imports
    assert document["match_reasons"][0].endswith(
        "identities differ in undeclared os, simulated_profile"
    )
    # Make the arms' prompts differ in one cell: digests are compared per request.
    db.connection.execute(
        "UPDATE request_rows_loaded SET prompt_sha256 = repeat('0', 64) "
        "WHERE arm = 'linux' AND cell = 'ctx1024-c1-nothink' AND request_index = 3"
    )
    db.connection.execute(
        "UPDATE request_rows_loaded SET output_as_requested = false "
        "WHERE arm = 'windows' AND cell = 'ctx256-c1-nothink' AND request_index = 5"
    )
    db.connection.execute(
        "UPDATE cell_settings_loaded SET prefix_cache_hit_rate = 0.1 "
        "WHERE arm = 'linux' AND cell = 'ctx256-c1-nothink' AND stage = 'capacity'"
    )
    reasons = derive(
        db, campaign.name, "windows", "linux", kind="ab", differs=["os", "simulated_profile"]
    )["match_reasons"]
    assert "capacity/ctx1024-c1-nothink: prompt digests differ for 1 requests" in reasons
    assert "capacity/ctx256-c1-nothink: 1 output lengths not as requested on windows" in reasons
    assert any(r.startswith("capacity/ctx256-c1-nothink: cache reuse differs") for r in reasons)


def test_unknown_arms_and_kinds(campaign: Path, cli: CliRun) -> None:
    db = build([campaign])
    with pytest.raises(DeriveError, match="no cells of arm 'macos'"):
        derive(db, campaign.name, "windows", "macos")
    with pytest.raises(DeriveError, match="same arm"):
        derive(db, campaign.name, "linux", "linux")
    status, _, err = cli("derive", str(campaign), "--baseline", "x", "--candidate", "linux")
    assert status == 2  # a mistyped argument, not a refusal about the evidence
    assert err.startswith("error: campaign '2026-11-29-two-arms' has no cells of arm 'x'")


def test_first_difference() -> None:
    assert first_difference({"a": [1.0, {"b": 2.0}]}, {"a": [1.0, {"b": 2.0 + 1e-12}]}) is None
    assert first_difference({"a": [1.0, {"b": 2.0}]}, {"a": [1.0, {"b": 2.1}]}) == "/a/1/b"
    assert first_difference({"a": 1}, {"a": 1, "c": 2}) == "/c"
    assert first_difference([1, 2], [1]) == "/"


@pytest.mark.parametrize("n", [10, 11, 40, 41])
def test_exact_bootstrap_matches_resampling(n: int) -> None:
    rng = random.Random(n)
    values = np.array([rng.lognormvariate(3, 0.5) for _ in range(n)])
    first, second = bootstrap.median_positions(np.array([n]), seed=5, draws=40000)
    fast = bootstrap.medians_of(Ordered(n, 0, np.sort(values)), first[0], second[0])
    assert fast is not None
    draws = np.random.default_rng(n).integers(0, n, (40000, n))
    brute = np.median(values[draws], axis=1)
    for q in (2.5, 25, 50, 75, 97.5):
        # Both are samples of one discrete distribution over a few order statistics.
        assert np.percentile(fast, q) == pytest.approx(np.percentile(brute, q), rel=0.02)
    assert fast.mean() == pytest.approx(brute.mean(), rel=0.005)


def test_a_derived_artifact_with_an_error_is_not_derived_again(campaign: Path, cli: CliRun) -> None:
    path = derive_into(campaign, "windows", "linux", kind="ab", differs=["os", "simulated_profile"])
    document = json.loads(path.read_text())
    document["rows"][1]["metrics"]["e2e_p50_ms"]["candidate"] *= 0.9
    document["unexpected"] = True  # schema-invalid: its own finding is the root cause
    write_json(path, document)
    forge_seal(campaign)
    status, report = verify_json(cli, campaign)
    assert status == 1
    assert [f["code"] for f in report["findings"]] == ["schema-invalid"]


def test_each_arm_keeps_its_own_identity_in_an_ab_comparison(campaign: Path) -> None:
    path = derive_into(campaign, "windows", "linux", kind="ab", differs=["os", "simulated_profile"])
    document = json.loads(path.read_text())
    assert document["baseline"]["arm"] == "windows"
    assert document["baseline"]["identity"]["os"] == "windows"
    assert document["candidate"]["identity"]["os"] == "linux"


def test_derive_and_recompute_close_a_database_built_without_gaps(
    campaign: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A comparison reads no gap between chunks: its database decodes none."""
    from ledger.derivation import _derive as derive

    closed: list[bool] = []
    built: list[dict[str, Any]] = []
    real_build = derive.build

    def tracking(folders: Any, **options: Any) -> Any:
        built.append(options)
        db = real_build(folders, **options)
        real_close = db.close

        def close() -> None:
            closed.append(True)
            real_close()

        db.close = close
        return db

    monkeypatch.setattr(derive, "build", tracking)
    path = derive_into(campaign, "windows", "linux", kind="ab", differs=["os", "simulated_profile"])
    assert (built, closed) == ([{"gaps": False}], [True])
    assert derive.recompute(campaign, json.loads(path.read_text())) == []
    assert (built, closed) == ([{"gaps": False}] * 2, [True] * 2)


@pytest.mark.parametrize("short_arm", ["windows", "linux"])
def test_only_cells_both_arms_ran_are_compared(campaign: Path, short_arm: str) -> None:
    run_path = campaign / "run-manifest.json"
    run = json.loads(run_path.read_text())
    dropped = next(
        e for e in run["cells"] if e["arm"] == short_arm and e["cell"].startswith("ctx1024")
    )
    run["cells"].remove(dropped)
    (campaign / dropped["artifact"]["path"]).unlink()
    write_json(run_path, run)
    forge_seal(campaign)
    path = derive_into(campaign, "windows", "linux", kind="ab", differs=["os", "simulated_profile"])
    cells = [row["cell"] for row in json.loads(path.read_text())["rows"]]
    assert cells and not any(c.startswith("ctx1024") for c in cells)


def _identities(db: Any, identity: str, where: str = "true") -> None:
    db.connection.execute(f"UPDATE cell_settings_loaded SET identity = '{identity}' WHERE {where}")


def test_a_declared_difference_must_differ(campaign: Path, cli: CliRun) -> None:
    """`--kind os` of two arms on one OS, or `--differs KEY` of a key both arms share,
    would label a comparison by what it does not compare: refused where it is derived
    (not where verify derives a stated one again, which says what it declared)."""
    db = build([campaign], locked=False)
    args = (db, campaign.name, "windows", "linux")
    _identities(db, '{"os": "linux"}')
    for kind, differs, flag in (("os", (), "--kind os"), ("ab", ("os",), "--differs")):
        with pytest.raises(DeriveError) as refused:
            derive(*args, kind=kind, differs=differs, check_declared=True)
        assert str(refused.value) == (
            f"{flag} 'os': both arms have os \"linux\" in every cell they both ran, so the "
            "comparison is not of what it declares (the keys that differ: none)"
        )
        # Derived again as stated (verify's), it is not refused.
        derive(*args, kind=kind, differs=differs)
    # One declared key that differs is enough: the others may be declared to be safe, and
    # a key only one arm names differs.
    _identities(db, '{"os": "linux", "gpu": "h200"}', "arm = 'linux'")
    derive(*args, differs=("os", "gpu"), check_declared=True)
    derive(*args, differs=("gpu",), check_declared=True)
    # Not for an os-comparison, which compares operating systems whatever else differs.
    for differs in ((), ("gpu",)):
        with pytest.raises(DeriveError, match=r"^--kind os 'os': both arms have os \"linux\""):
            derive(*args, kind="os", differs=differs, check_declared=True)
    # Every declared key must be one an arm names.
    with pytest.raises(
        DeriveError, match=r"^--differs 'nonexistent': neither arm's identity nor request"
    ):
        derive(*args, differs=("gpu", "nonexistent"), check_declared=True)
    # The OS of one cell differing is a comparison of operating systems, and os is
    # declared beside what --differs names.
    _identities(db, '{"os": "linux", "gpu": "b200"}', "arm = 'windows'")
    _identities(
        db,
        '{"os": "windows", "gpu": "b200"}',
        "arm = 'windows' AND stage = 'capacity' AND cell = 'ctx1024-c1-nothink'",
    )
    stated = derive(*args, kind="os", differs=("gpu",), check_declared=True)
    assert stated["derivation"]["declared_differences"] == ["os", "gpu"]
    # Neither arm names the OS: the key is unknown, and what differs is named.
    _identities(db, '{"platform": "a"}')
    with pytest.raises(
        DeriveError, match=r"^--kind os 'os': neither arm's identity nor request has"
    ):
        derive(*args, kind="os", check_declared=True)
    # The arms as run differ in os: derived and written.
    status, out, _ = cli(
        "derive", str(campaign), "--baseline", "windows", "--candidate", "linux", "--kind", "os"
    )
    assert status == 0 and "os-comparison-windows-vs-linux.json" in out


def test_a_reference_made_to_follow_an_unsealed_edit_names_both_digests(
    campaign: Path, cli: CliRun
) -> None:
    """A cell edited and a reference to it updated, the seal left as it was: the message
    says which digest is the manifest's and which the file's (it had them the other way)."""
    path = derive_into(campaign, "windows", "linux", kind="ab", differs=["os", "simulated_profile"])
    rel = "linux/capacity/ctx256-c1-nothink.json"
    sealed = sha256_file(campaign / rel)[0]
    cell = cells.load(campaign / rel)
    sealed_part = sha256_file(campaign / cells.where(campaign / rel, cell, 0)[0])[0]
    cell["requests"][0]["end_ns"] += 1
    cells.save(campaign / rel, cell)
    edited = sha256_file(campaign / rel)[0]
    document = json.loads(path.read_text())
    for row in document["rows"]:
        for source in row["sources"]:
            if source["path"] == rel:
                source["sha256"] = edited
    write_json(path, document)
    status, report = verify_json(cli, campaign)
    assert status == 1
    mismatches = [f["message"] for f in report["findings"] if f["code"] == "reference-mismatch"]
    # The cell run's own reference to its edited part was made to follow the edit too.
    part = cells.where(campaign / rel, cell, 0)[0]
    ours = [m for m in mismatches if m.startswith(f"reference to {rel!r}")]
    assert ours and all(
        m == f"reference to {rel!r} says sha256 {edited}, the manifest lists {sealed} "
        f"(and the file has {edited})"
        for m in ours
    ), mismatches
    now = sha256_file(campaign / part)[0]
    said = f"reference to {part!r} says sha256 {now}, the manifest lists {sealed_part}"
    assert [m for m in mismatches if m not in ours] == [f"{said} (and the file has {now})"]


NOTHING_PLAN = """
campaign_id = "2026-11-29-nothing"
[[arms]]
name = "baseline"
[arms.simulated]
decode_tok_s = 2000.0
[[arms]]
name = "candidate"
[arms.simulated]
decode_tok_s = 2000.0
faults = [{kind = "status", status = 503, rate = 1.0}]
[[stages]]
kind = "endurance"
context_target = 64
requests = 3
max_tokens = 4
controlled_output = false
"""


def test_an_arm_where_nothing_succeeded_is_the_first_reason_derive_gives(
    tmp_path: Path, cli: CliRun
) -> None:
    """Every request of the candidate was refused: the comparison is not matched, and the
    first reason says that nothing succeeded, before what follows from it (no prompt
    tokens counted) or what is true anyway (output uncontrolled)."""
    _, folder = run_plan_text(NOTHING_PLAN, tmp_path / "raw")
    status, out, err = cli(
        "derive", str(folder), "--baseline", "baseline", "--candidate", "candidate",
        "--differs", "simulated_profile",
    )  # fmt: skip
    assert status == 0, err
    lines = out.splitlines()
    assert lines[1].startswith("not matched (")
    assert lines[2] == "  endurance/ctx64-c1-nothink: 0 of 3 requests succeeded on candidate"
    assert "  endurance/ctx64-c1-nothink: output uncontrolled on candidate" in lines[3:]
    derived = read_document(folder / "derived/ab-comparison-baseline-vs-candidate.json")
    assert derived["matched"] is False
    assert derived["match_failures"][0] == {
        "rule": "requests-succeeded",
        "reason": "endurance/ctx64-c1-nothink: 0 of 3 requests succeeded on candidate",
    }
    # Verify derives it again to the same reasons.
    status, report = verify_json(cli, folder)
    assert status == 0, report["findings"]
