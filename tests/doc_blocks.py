"""Plans and commands as the documentation shows them, for the tests that run them.

Fenced ``toml`` blocks holding ``[[arms]]`` are plans when they have a ``campaign_id``,
else fragments of the plan shown before them on their page: each arm of a fragment adds
its keys to the plan's arm of the same name. A block whose first line is ``# NAME.toml``
is a file that the page's commands read.

Fenced ``console`` blocks hold commands: a line starting ``$ `` is one (a line ending in
`` \\`` goes on with the next), and the lines up to the next command are its output as
the page shows it, matched as doctest does with ELLIPSIS: every line in order, whole,
``...`` standing for any text within a line and a line of ``...`` alone for any lines. A
comment closing a command states its exit status (``# exit 1``; 0 without one) or what it
needs that the test suite cannot have (``# needs: a GPU``): such a command is shown, never
run, and the tests list every one, so none stops being run unnoticed.
"""

from __future__ import annotations

import copy
import re
import tomllib
from collections.abc import Sequence
from typing import Any

import attrs

FENCE = re.compile(r"^```(?P<info>.*)$")
COMMENT = re.compile(r"\s+#\s*(?P<comment>.*)$")
EXIT = re.compile(r"exit (?P<status>\d+)")
NEEDS = re.compile(r"needs: (?P<what>\S.*)")
FILE_LINE = re.compile(r"#\s*(?P<name>[\w.-]+\.toml)\b")
CONTAINER_STAGES = ("startup",)
"""Stages the plan tests leave out: startup starts the serving container itself, and with
none to start the arm's workload never runs."""


class BadBlock(ValueError):
    """A block the extractor cannot read as the page means it; names the page and line."""


@attrs.frozen
class Block:
    """One fenced block of a page."""

    page: str
    line: int
    """The line of its opening fence (1-based)."""
    language: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


@attrs.frozen
class Command:
    """One ``$`` command of a console block and what the page says of it."""

    text: str
    where: str
    status: int = 0
    needs: str | None = None
    output: tuple[str, ...] = ()


def blocks(text: str, page: str) -> list[Block]:
    """Every fenced block of a Markdown page, in order."""
    found: list[Block] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        end = index + 1
        while end < len(lines) and lines[end].rstrip() != "```":
            end += 1
        if end == len(lines):
            raise BadBlock(f"{page}:{index + 1}: a fenced block that never closes")
        body = "\n".join(lines[index + 1 : end]) + "\n"
        language = (opening.group("info").split() or [""])[0]
        found.append(Block(page, index + 1, language, body))
        index = end + 1
    return found


def _command(first: str, where: str) -> tuple[str, int, str | None]:
    """The command text of a ``$`` line, its expected status and what it needs."""
    status, needs = 0, None
    comment = COMMENT.search(first)
    if comment is not None:
        said = comment.group("comment")
        exit_status, wanted = EXIT.fullmatch(said), NEEDS.fullmatch(said)
        if exit_status is None and wanted is None:
            raise BadBlock(f"{where}: a command's comment is '# exit N' or '# needs: WHAT'")
        if exit_status is not None:
            status = int(exit_status.group("status"))
        else:
            assert wanted is not None
            needs = wanted.group("what").strip()
        first = first[: comment.start()]
    return first.strip(), status, needs


def commands(page_text: str, page: str) -> list[Command]:
    """Every command of the page's console blocks, in order."""
    found: list[Command] = []
    for block in blocks(page_text, page):
        if block.language != "console":
            continue
        lines = block.text.splitlines()
        if lines and not lines[0].startswith("$ "):
            raise BadBlock(f"{block.where}: a console block starts with a '$ ' command")
        index = 0
        while index < len(lines):
            where = f"{page}:{block.line + 1 + index}"
            joined = lines[index][2:]
            while joined.endswith("\\") and index + 1 < len(lines):
                index += 1
                joined = joined[:-1].rstrip() + " " + lines[index].strip()
            text, status, needs = _command(joined, where)
            index += 1
            output = []
            while index < len(lines) and not lines[index].startswith("$ "):
                output.append(lines[index].rstrip())
                index += 1
            found.append(Command(text, where, status, needs, tuple(output)))
    return found


def output_matches(shown: Sequence[str], actual: str) -> bool:
    """Whether ``actual`` is what the page shows: each line whole and in order, ``...``
    any text within a line, a line of ``...`` any lines (none included)."""
    pattern = []
    for line in shown:
        if line.strip() == "...":
            pattern.append(r"(?:[^\n]*\n)*?")
        else:
            pattern.append(re.escape(line.rstrip()).replace(r"\.\.\.", r"[^\n]*") + r"\n")
    lines = [line.rstrip() for line in actual.splitlines()]
    text = "".join(line + "\n" for line in lines)
    return re.fullmatch("".join(pattern), text) is not None


def files(page_text: str, page: str) -> dict[str, str]:
    """The TOML files a page's commands read: blocks whose first line is ``# NAME.toml``."""
    named: dict[str, str] = {}
    for block in blocks(page_text, page):
        first = block.text.splitlines()[0] if block.text.strip() else ""
        match = FILE_LINE.match(first)
        if block.language != "toml" or match is None:
            continue
        if match.group("name") in named:
            raise BadBlock(f"{block.where}: {match.group('name')} is shown twice")
        named[match.group("name")] = block.text
    return named


def plans(page_text: str, page: str) -> list[tuple[str, dict[str, Any]]]:
    """The plans a page shows, as ``page#n`` and the plan with its fragments merged in."""
    found: list[tuple[str, dict[str, Any]]] = []
    for block in blocks(page_text, page):
        if block.language != "toml" or not re.search(r"(?m)^\[\[arms\]\]", block.text):
            continue
        try:
            table = tomllib.loads(block.text)
        except tomllib.TOMLDecodeError as e:
            raise BadBlock(f"{block.where}: {e}") from None
        if "campaign_id" in table:
            found.append((f"{page}#{len(found) + 1}", table))
        elif not found:
            raise BadBlock(f"{block.where}: arms shown before any plan they belong to")
        else:
            _merge_arms(found[-1][1], table, block.where)
    return found


def _merge_arms(plan: dict[str, Any], fragment: dict[str, Any], where: str) -> None:
    arms = {arm["name"]: arm for arm in plan["arms"]}
    for extra in fragment["arms"]:
        arm = arms.get(extra.get("name"))
        if arm is None:
            raise BadBlock(f"{where}: arm {extra.get('name')!r} is in no plan shown before")
        arm.update({k: v for k, v in extra.items() if k != "name"})


def against(plan: dict[str, Any], urls: Sequence[str], model: str) -> dict[str, Any]:
    """The plan with its arms' endpoints replaced, in order, by ``urls`` and ``model`` (a
    simulated arm becomes a served one), and without its container-starting stages;
    everything else as it was. An arm that repeats another (``repeat_of``) has no endpoint
    of its own: it runs against the one it repeats."""
    rewritten = copy.deepcopy(plan)
    served = [arm for arm in rewritten["arms"] if "repeat_of" not in arm]
    if len(urls) != len(served):
        raise ValueError(f"{len(served)} arms, {len(urls)} endpoints")
    for arm, url in zip(served, urls, strict=True):
        arm.pop("simulated", None)
        arm.update(base_url=url, model=model)
    rewritten["stages"] = [s for s in rewritten["stages"] if s["kind"] not in CONTAINER_STAGES]
    return rewritten


def endpoints_replaced(text: str, urls: Sequence[str], model: str) -> str:
    """A plan's TOML text with each ``[[arms]]`` table's ``base_url`` and ``model`` values
    replaced, in order, by ``urls`` and ``model``; every other byte kept. Raises ValueError
    where an arm lacks either key or the arms are not as many as the URLs."""
    out: list[str] = []
    table = ""
    arm = -1
    replaced: list[set[str]] = []
    for line in text.splitlines(keepends=True):
        header = re.match(r"\s*(\[\[?[^\]]+\]\]?)", line)
        if header is not None and not line.lstrip().startswith("#"):
            table = header.group(1).replace(" ", "")
            if table == "[[arms]]":
                arm += 1
                replaced.append(set())
        key = re.match(r"(\s*(base_url|model)\s*=\s*)\"[^\"]*\"", line)
        if table == "[[arms]]" and key is not None:
            if arm >= len(urls):
                raise ValueError(f"more arms than the {len(urls)} endpoints given")
            value = urls[arm] if key.group(2) == "base_url" else model
            line = key.group(1) + f'"{value}"' + line[key.end() :]
            replaced[arm].add(key.group(2))
        out.append(line)
    if len(replaced) != len(urls):
        raise ValueError(f"{len(replaced)} arms for the {len(urls)} endpoints given")
    if any(keys != {"base_url", "model"} for keys in replaced):
        raise ValueError(f"every one of {len(urls)} arms needs a base_url and a model")
    return "".join(out)
