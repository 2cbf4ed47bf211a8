"""The main job end to end (``ledger demo``), and the report it renders, opened in
headless Chromium. The demo runs once per session, in one worker (xdist group ``demo``)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.database import build
from ledger.evidence import manifest
from ledger.formats.schema import read_document
from ledger.reporting._report import write_report
from runners.campaign.progress import LogProgress
from runners.demo import DemoResult, plan_text, print_result, run_demo
from tests.components import missing
from tests.conftest import ROOT, CliRun, verify_json

pytestmark = pytest.mark.xdist_group("demo")

SCREENSHOTS = ROOT / "test-output"


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoResult:
    out = tmp_path_factory.mktemp("demo") / "out"
    with open(os.devnull, "w") as quiet:
        return run_demo(out, progress=LogProgress(quiet))


def test_examples_plan_is_the_demo_plan() -> None:
    assert (ROOT / "examples/simulated.toml").read_text() == plan_text()


def test_demo_decides_with_reasons_and_verifies(
    demo: DemoResult, capsys: pytest.CaptureFixture[str]
) -> None:
    assert demo.verified.ok and demo.verified.errors == 0
    decision = demo.summary["decision"]
    assert isinstance(decision, dict)
    assert decision["promotion_authorized"] is False
    assert decision["decision_labels"] == ["verified", "challenger", "no-promotion"]
    # The reserve verdict is whatever this machine's NVML reading implies: none here, or a
    # GPU (a real driver, or the test shim already loaded into this process).
    reserve = read_document(demo.public / "candidate" / "reserve.json")
    reading = reserve["nvml"]["available"]
    enough = reading and all(
        card["memory"]["free_mib"] >= reserve["threshold_mib"] for card in reserve["cards"]
    )
    expected = {"restoration"} | (set() if enough else {"reserve"})
    assert {u["rule"] for u in decision["unmet"]} == expected
    print_result(demo, sys.stdout)
    printed = capsys.readouterr().out
    assert "decision: verified, challenger, no-promotion; promotion NOT authorized" in printed
    if not reading:
        assert "because reserve: candidate/reserve.json: no GPU reading" in printed
        assert "this machine has no NVIDIA GPU" in printed
    else:
        assert "this machine has no NVIDIA GPU" not in printed
    assert f"report: {demo.report}" in printed
    gates = {g["name"]: g for g in demo.summary["gates"]}  # type: ignore[union-attr]
    for name in ("preflight", "thinking-control", "capacity", "endurance", "context-quality"):
        assert gates[f"candidate {name}"]["passed"] is True, name
    assert gates["candidate reserve"]["passed"] is bool(enough)


def test_demo_publication_holds_report_ticket_and_links(demo: DemoResult, cli: CliRun) -> None:
    listed = {a.path for a in manifest.read_manifest(demo.public / "manifest.json").artifacts}
    for name in ("report.md", "report.html", "report/decode.svg", "report/endurance.json"):
        assert name in listed
    assert demo.ticket is not None and demo.ticket.exists()
    link = read_document(demo.public / "follow-up.json")
    assert link["tickets"] == [{"id": demo.ticket.stem}]
    assert f"campaign: {demo.public.name}" in demo.ticket.read_text()
    status, report = verify_json(cli, demo.public.parent)
    assert status == 0, report


def test_report_is_deterministic_and_traceable(demo: DemoResult, tmp_path: Path) -> None:
    copy = tmp_path / demo.public.name
    shutil.copytree(demo.public, copy)
    before = {
        p: (copy / p).read_bytes() for p in ("report.md", "report.html", "report/decode.json")
    }
    write_report(copy, ("md", "html"))
    assert {p: (copy / p).read_bytes() for p in before} == before
    text = (copy / "report.md").read_text()
    # The simulator reports no timings of its own: no section claims the server's clock.
    assert "The server's clock" not in text
    for heading in (
        "## Result card",
        "## Setup",
        "## Headline results",
        "## Performance",
        "### Endurance",
        "## Gates: functional, quality, workload and system",
        "### Context quality, candidate",
        "## Failures",
        "## Limitations",
        "## Durable follow-up",
        "## Evidence index",
    ):
        assert heading in text, heading
    assert "| capacity 16,384 |" in text
    # The policy counts the demo's comparison as matched (its gate says ok matched-ab).
    assert "The A/B comparison is matched. Promotion is not authorized." in text
    digests = {a.path: a.sha256 for a in manifest.read_manifest(copy / "manifest.json").artifacts}
    for chart in ("decode", "prefill", "ttft", "e2e", "endurance"):
        data = read_document(copy / "report" / f"{chart}.json")
        assert data["sources"], chart
        for source in data["sources"]:
            assert digests[source["path"]] == source["sha256"]
        assert f"report/{chart}.svg" in text
    endurance = read_document(copy / "report/endurance.json")
    assert [len(s["values"]) for s in endurance["series"]] == [20, 20]
    # Twenty requests an arm: the table's median is the mean of the middle two, as DuckDB's.
    medians = (
        build([copy])
        .query(
            "SELECT arm, median(decode_tok_s) FROM requests WHERE stage = 'endurance' "
            "AND NOT warmup AND ok AND decode_tok_s IS NOT NULL GROUP BY arm"
        )
        .rows
    )
    assert len(medians) == 2
    for arm, median in medians:
        (row,) = [line for line in text.splitlines() if line.startswith(f"| {arm} | 20 | ")]
        assert row.split(" | ")[3] == f"{median:,.2f}", row
    html = (copy / "report.html").read_text()
    assert "<script" not in html.lower()
    assert not re.search(r"(?:src|href)=\"https?:", html)
    assert html.count("<svg") == 5


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    missing("Chromium is not installed (Debian's chromium package)")
    raise AssertionError


def test_html_report_renders_in_chromium(demo: DemoResult, tmp_path: Path) -> None:
    browser = _chromium()
    SCREENSHOTS.mkdir(exist_ok=True)
    shot = SCREENSHOTS / "demo-report.png"
    base = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--enable-logging=stderr",
        "--v=0",
    ]
    url = demo.html.resolve().as_uri()
    dom = subprocess.run(
        [*base, "--dump-dom", url], capture_output=True, text=True, timeout=120, check=True
    )
    assert dom.stdout.count("<svg") == 5
    assert 'id="chart-decode"' in dom.stdout and "Graph data and hashes" in dom.stdout
    consoles = [line for line in dom.stderr.splitlines() if "CONSOLE" in line]
    assert consoles == []
    shot.unlink(missing_ok=True)
    rendered = subprocess.run(
        [*base, f"--screenshot={shot}", "--window-size=1200,3000", url],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert [line for line in rendered.stderr.splitlines() if "CONSOLE" in line] == []
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20000
    print(f"screenshot: {shot}")


def test_demo_refuses_a_used_folder(tmp_path: Path, cli: CliRun) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    status, _, err = cli("demo", "--out", str(tmp_path))
    assert status == 2
    assert "is not empty" in err and (tmp_path / "keep.txt").read_text() == "mine"


def test_demo_graph_data_is_valid_json(demo: DemoResult) -> None:
    for path in sorted((demo.public / "report").glob("*.json")):
        document = json.loads(path.read_text())
        assert document["schema"] == "anvil-serving.graph-data/v1"


def test_report_of_a_seed_draws_its_os_comparison(tmp_path: Path) -> None:
    # The seed publication's own figures: 4K decode 112.07 versus 149.02 tok/s, +33.0%.
    campaign = tmp_path / "evidence" / "2026-09-08-glm53-linux-wsl-comparison"
    shutil.copytree(ROOT / "evidence" / campaign.name, campaign)
    write_report(campaign, ("md",))
    text = (campaign / "report.md").read_text()
    assert "| 4,096 | 2,969 | decode_tok_s_p50 | 112.07 | 149.02 | +33.0% |" in text
    assert "Endurance decode p50: 102.19 (Windows) and 142.64 (Linux) tok/s, +39.6%" in text
    assert "- Strict output0/3; unique natural first-position canary1/10" in text
    assert "## Performance\n\nNo A/B comparison: no performance tables." in text
