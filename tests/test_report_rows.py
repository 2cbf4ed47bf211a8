"""How the report labels its performance rows: two rows never read alike."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from ledger.reporting._report import _row_order, _target, render_markdown
from tests.conftest import CliRun, forge_seal


def _row(stage: str, target: int, concurrency: int, thinking: bool = False) -> dict[str, Any]:
    return {
        "stage": stage,
        "context_target": target,
        "concurrency": concurrency,
        "thinking": thinking,
    }


def test_a_row_names_only_what_sets_it_apart_within_its_stage() -> None:
    rows = [
        _row("capacity", 512, 1),
        _row("capacity", 512, 2),
        _row("capacity", 1024, 1, thinking=True),
        _row("capacity", 1024, 2),
        _row("long", 4096, 1),
    ]
    assert [_target(r, rows) for r in rows] == [
        "capacity 512 c1 no thinking",
        "capacity 512 c2 no thinking",
        "capacity 1,024 c1 thinking",
        "capacity 1,024 c2 no thinking",
        "long 4,096",
    ]
    one = [_row("capacity", 512, 1), _row("capacity", 1024, 1)]
    assert [_target(r, one) for r in one] == ["capacity 512", "capacity 1,024"]


def _load(cell: str) -> dict[str, Any]:
    return {**_row("load", 1024, 1), "cell": cell}


def test_open_loop_rows_name_their_rate_and_sort_by_it_as_a_number() -> None:
    """Two rates read as two identical "load 1,024" rows, and r20 sorted before r5."""
    rows = sorted(
        [_load("ctx1024-r20-nothink"), _load("ctx1024-r5-nothink"), _load("ctx1024-r2_5-nothink")],
        key=_row_order,
    )
    assert [_target(r, rows) for r in rows] == [
        "load 1,024 2.5 req/s",
        "load 1,024 5 req/s",
        "load 1,024 20 req/s",
    ]
    closed = [_load("ctx1024-c1-nothink"), _load("ctx1024-r5-nothink")]
    assert [_target(r, closed) for r in sorted(closed, key=_row_order)] == [
        "load 1,024 closed loop",
        "load 1,024 5 req/s",
    ]


def _page(markdown: str) -> str:
    """The HTML a CommonMark renderer that passes raw HTML through makes of ``markdown``."""
    return str(MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown))


def _elements(page: str) -> list[str]:
    return re.findall(r"<([a-z][a-z0-9]*)[\s>]", page)


HOSTILE = (
    "<img src=x onerror=alert(1)> <iframe src=//evil.example></iframe> \\<img src=y> "
    "![](https://evil.example/p.png) [x](javascript:alert(1)) `code` &lt;\n# heading"
)


def test_text_of_the_evidence_is_shown_literally_in_markdown() -> None:
    blocks: list[Any] = [
        ("h2", HOSTILE),
        ("p", HOSTILE),
        ("list", [HOSTILE]),
        ("table", ["Setup", "Measured configuration"], [["Candidate", HOSTILE]]),
    ]
    text = render_markdown(blocks, [])
    page = _page(text)
    assert _elements(page) == ["h2", "p", "ul", "li", "table", "thead", "tr", "th", "th",
                               "tbody", "tr", "td", "td"]  # fmt: skip
    # Every character is shown as it was, nothing is markup.
    assert page.count("&lt;img src=x onerror=alert(1)&gt;") == 4
    assert page.count("\\&lt;img src=y&gt;") == 4  # a backslash of its own escapes nothing
    assert page.count("![](https://evil.example/p.png)") == 4
    assert page.count("&amp;lt;") == 4 and page.count("`code`") == 4


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("# heading", "# heading"),
        ("---", "---"),
        ("1. first", "1. first"),
        ("12) twelfth", "12) twelfth"),
        ("- item", "- item"),
        ("> quote", "&gt; quote"),
        ("    indented code", "indented code"),
        ("=== ", "==="),
    ],
)
def test_a_value_starting_like_a_block_stays_one_line_of_text(text: str, shown: str) -> None:
    """A paragraph or list item that starts with a block's marker would be a heading, a
    rule, a list, a quote or code: it stays the text it was."""
    page = _page(render_markdown([("p", text), ("list", [text])], []))
    assert _elements(page) == ["p", "ul", "li"], page
    assert page.count(shown) == 2, page


def test_the_report_of_a_campaign_with_hostile_identities_carries_no_markup(
    two_arm_campaign: Path, tmp_path: Path, cli: CliRun
) -> None:
    campaign = tmp_path / two_arm_campaign.name
    shutil.copytree(two_arm_campaign, campaign)
    for path in campaign.glob("*/*/*.json"):
        document = json.loads(path.read_bytes())
        document["identity"]["served"] = HOSTILE
        path.write_text(json.dumps(document))
    run = json.loads((campaign / "run-manifest.json").read_bytes())
    for entry in run["cells"]:
        data = (campaign / entry["artifact"]["path"]).read_bytes()
        entry["artifact"]["sha256"] = hashlib.sha256(data).hexdigest()
    (campaign / "run-manifest.json").write_text(json.dumps(run))
    forge_seal(campaign)
    for argv in (
        [
            "derive",
            str(campaign),
            "--baseline",
            "windows",
            "--candidate",
            "linux",
            "--differs",
            "os",
        ],
        ["decide", str(campaign), "--candidate", "linux"],
        ["report", str(campaign)],
    ):
        status, _, err = cli(*argv)
        assert status == 0, (argv, err)
    text = (campaign / "report.md").read_text()
    page = _page(text)
    assert "onerror=alert(1)&gt;" in page  # the value is shown...
    assert "iframe" not in _elements(page)  # ...never as markup
    # The only images and links are the report's own charts and their graph data.
    targets = re.findall(r'(?:src|href)="([^"]*)"', page)
    assert targets and all(t.startswith("report/") for t in targets), targets
    setup = [line for line in text.splitlines() if line.startswith(("| Candidate", "| Baseline"))]
    # Both arms read alike: "arm <name>; key: value; ..." from the comparison.
    assert [line.split(";")[0] for line in setup] == [
        "| Candidate | arm linux",
        "| Baseline | arm windows",
    ]


def test_an_identity_value_that_holds_a_separator_reads_as_one_value() -> None:
    """engine = "vllm; os: windows" read like the other arm's engine and os."""
    from ledger.reporting._report import _identity_text

    one = _identity_text({"engine": "vllm; os: windows"}, "base")
    two = _identity_text({"engine": "vllm", "os": "windows"}, "cand")
    assert one == 'arm base; engine: "vllm; os: windows"'
    assert two == "arm cand; engine: vllm; os: windows"
    assert _identity_text({"flags": {"kv": "a=b", "tp": 2}, " ": ""}) == (
        '" ": ""; flags: kv="a=b", tp=2'
    )
