"""The reader of the documentation's plans and commands (``tests/doc_blocks.py``): each of
its rules, and the refusal when a page breaks it."""

from __future__ import annotations

import tomllib

import pytest

from tests import doc_blocks
from tests.doc_blocks import BadBlock, Command

PAGE = """# A page

```toml
# plan.toml: a plan
campaign_id = "2026-12-01-page"
[[arms]]
name = "a"
base_url = "http://127.0.0.1:8001/v1"
model = "served"
[arms.identity]
model = "kept"
[[arms]]
name = "b"
[arms.simulated]
decode_tok_s = 100.0
[[stages]]
kind = "startup"
[[stages]]
kind = "capacity"
```

Some text.

```toml
[[arms]]
name = "b"
[arms.container]
name = "serve-b"
```

```console
$ ledger run plan.toml --raw-dir raw
...
raw campaign: raw/2026-12-01-page
$ ledger derive raw/2026-12-01-page --baseline a \\
    --candidate b  # exit 1
not matched (1):
$ ledger sign public/x  # needs: an OIDC identity
signed: ...
```
"""


def test_commands_their_status_what_they_need_and_their_output() -> None:
    assert doc_blocks.commands(PAGE, "page.md") == [
        Command(
            "ledger run plan.toml --raw-dir raw",
            "page.md:32",
            output=("...", "raw campaign: raw/2026-12-01-page"),
        ),
        Command(
            "ledger derive raw/2026-12-01-page --baseline a --candidate b",
            "page.md:35",
            status=1,
            output=("not matched (1):",),
        ),
        Command(
            "ledger sign public/x",
            "page.md:38",
            needs="an OIDC identity",
            output=("signed: ...",),
        ),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("```console\n$ ledger gate x  # exit one\n```\n", "page.md:2: a command's comment is"),
        ("```console\n$ ledger gate x  # note\n```\n", "page.md:2: a command's comment is"),
        ("```console\nledger gate x\n```\n", "page.md:1: a console block starts with"),
        ("text\n```console\n$ ledger gate x\n", "page.md:2: a fenced block that never closes"),
    ],
    ids=["exit-not-a-number", "another-comment", "no-prompt", "unclosed"],
)
def test_a_command_the_reader_cannot_take_as_meant_is_refused(text: str, message: str) -> None:
    with pytest.raises(BadBlock, match=message):
        doc_blocks.commands(text, "page.md")


@pytest.mark.parametrize(
    ("shown", "actual", "matches"),
    [
        (["a", "b"], "a\nb\n", True),
        (["a", "b"], "a  \nb", True),  # trailing blanks are not output
        (["a", "b"], "a\nb\nc\n", False),  # a line not shown
        (["a", "b"], "b\na\n", False),  # out of order
        (["a", "c"], "a\nb\n", False),  # another line
        (["a ... z"], "a then z\n", True),
        (["a ... z"], "a then\nz\n", False),  # ... within a line stays within it
        (["a ...", "..."], "a 1\n2\n3\n", True),
        (["...", "z"], "z\n", True),  # a line of ... may stand for none
        (["...", "z"], "y\nz\n", True),
        (["...", "z"], "z\ny\n", False),
        (["a.b"], "axb\n", False),  # only ... is special
        ([], "", True),
        ([], "anything\n", False),
    ],
)
def test_output_is_matched_line_by_line_with_ellipses(
    shown: list[str], actual: str, matches: bool
) -> None:
    assert doc_blocks.output_matches(shown, actual) is matches


def test_files_are_the_toml_blocks_that_name_themselves() -> None:
    files = doc_blocks.files(PAGE, "page.md")
    assert list(files) == ["plan.toml"]
    assert files["plan.toml"].startswith("# plan.toml: a plan\ncampaign_id")
    twice = "```toml\n# p.toml\na = 1\n```\n```toml\n# p.toml\na = 2\n```\n"
    with pytest.raises(BadBlock, match=r"page.md:5: p.toml is shown twice"):
        doc_blocks.files(twice, "page.md")


def test_a_plan_gains_the_arms_a_later_block_adds_to_it() -> None:
    ((where, plan),) = doc_blocks.plans(PAGE, "page.md")
    assert where == "page.md#1"
    assert plan["arms"][1] == {
        "name": "b",
        "simulated": {"decode_tok_s": 100.0},
        "container": {"name": "serve-b"},
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("```toml\n[[arms]]\nname = 'a'\n```\n", "page.md:1: arms shown before any plan"),
        (
            (
                "```toml\ncampaign_id = 'x'\n[[arms]]\nname = 'a'\n```\n"
                "```toml\n[[arms]]\nname = 'z'\n```\n"
            ),
            "page.md:6: arm 'z' is in no plan shown before",
        ),
        ("```toml\n[[arms]]\nname = \n```\n", "page.md:1: Invalid value"),
    ],
    ids=["fragment-first", "unknown-arm", "not-toml"],
)
def test_arms_that_belong_to_no_plan_are_refused(text: str, message: str) -> None:
    with pytest.raises(BadBlock, match=message):
        doc_blocks.plans(text, "page.md")


def test_against_replaces_endpoints_and_the_startup_stage_only() -> None:
    ((_, plan),) = doc_blocks.plans(PAGE, "page.md")
    urls = ["http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1"]
    rewritten = doc_blocks.against(plan, urls, "tiny")
    assert [(a["base_url"], a["model"]) for a in rewritten["arms"]] == list(
        zip(urls, ["tiny", "tiny"], strict=True)
    )
    assert "simulated" not in rewritten["arms"][1]
    assert rewritten["arms"][0]["identity"] == {"model": "kept"}
    assert [s["kind"] for s in rewritten["stages"]] == ["capacity"]
    assert plan["arms"][1]["simulated"] == {"decode_tok_s": 100.0}  # the page's own is kept
    with pytest.raises(ValueError, match="2 arms, 1 endpoints"):
        doc_blocks.against(plan, urls[:1], "tiny")


PLAN_TEXT = """campaign_id = "2026-12-01-x"   # a comment kept
[[arms]]
name = "a"
base_url = "http://127.0.0.1:30000/v1"   # kept too
model = "Qwen/Qwen3-8B"
[arms.identity]
model = "Qwen/Qwen3-8B"
[[arms]]
name = "b"
model = "Qwen/Qwen3-8B"
base_url = "http://127.0.0.1:30001/v1"
"""


def test_endpoints_are_replaced_in_the_text_and_nothing_else() -> None:
    urls = ["http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1"]
    text = doc_blocks.endpoints_replaced(PLAN_TEXT, urls, "tiny")
    assert "# a comment kept" in text and "# kept too" in text
    before, after = tomllib.loads(PLAN_TEXT), tomllib.loads(text)
    for arm, url in zip(before["arms"], urls, strict=True):
        arm.update(base_url=url, model="tiny")
    assert after == before
    assert after["arms"][0]["identity"] == {"model": "Qwen/Qwen3-8B"}


@pytest.mark.parametrize(
    ("text", "count", "message"),
    [
        (PLAN_TEXT.replace('model = "Qwen/Qwen3-8B"\nbase_url', "base_url"), 2,
         "every one of 2 arms needs a base_url and a model"),
        (PLAN_TEXT, 1, "more arms than the 1 endpoints given"),
        (PLAN_TEXT, 3, "2 arms for the 3 endpoints given"),
    ],
    ids=["an-arm-without-model", "more-arms-than-urls", "fewer-arms-than-urls"],
)  # fmt: skip
def test_endpoints_not_replaceable_as_asked_are_refused(
    text: str, count: int, message: str
) -> None:
    urls = [f"http://127.0.0.1:{port}/v1" for port in range(1, count + 1)]
    with pytest.raises(ValueError, match=f"^{message}$"):
        doc_blocks.endpoints_replaced(text, urls, "tiny")


def test_a_fence_s_language_is_the_first_word_of_its_info_string() -> None:
    text = "```{include} ../other.md\n```\n```toml extra\n# a.toml\nx = 1\n```\n"
    found = [(b.language, b.line) for b in doc_blocks.blocks(text, "page.md")]
    assert found == [("{include}", 1), ("toml", 3)]
    assert doc_blocks.files(text, "page.md") == {"a.toml": "# a.toml\nx = 1\n"}
