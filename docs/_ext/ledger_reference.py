"""Pages generated from the code at build time, so that they cannot drift from it: the
command-line reference (from the parser), the finding codes (from ``ledger.findings``) and
the exit statuses (from ``ledger.exit_status``)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from ledger.cli import _main as _cli
from ledger.exit_status import MEANINGS
from ledger.findings import CHECKS


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def cli_page() -> str:
    # argparse wraps help to the terminal's width: a fixed one gives the same page anywhere.
    os.environ["COLUMNS"] = "88"
    parser = _cli._parser()
    lines = [
        "# Command-line reference",
        "",
        "Generated from the `ledger` command's own parser (`ledger COMMAND --help` prints",
        "the same). What each command does, with examples: [Commands](commands.md).",
        "",
        "```text",
        parser.format_help().rstrip(),
        "```",
        "",
    ]
    for name, sub in _subcommands(parser):
        lines += [f"## `ledger {name}`", "", "```text", sub.format_help().rstrip(), "```", ""]
    return "\n".join(lines)


def _subcommands(parser: argparse.ArgumentParser, prefix: str = "") -> list[tuple[str, Any]]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append((f"{prefix}{name}", sub))
                found += _subcommands(sub, f"{prefix}{name} ")
    return found


def findings_table() -> str:
    rows = ["| code | severity | check | meaning |", "| --- | --- | --- | --- |"]
    rows += [
        f"| `{code}` | {severity} | {check} | {_cell(meaning)} |"
        for check, codes in CHECKS.items()
        for code, (severity, meaning) in codes.items()
    ]
    return "\n".join(rows) + "\n"


def exit_statuses_table() -> str:
    rows = ["| status | name | meaning |", "| --- | --- | --- |"]
    rows += [
        f"| {int(status)} | `{status.name}` | {_cell(meaning)} |"
        for status, meaning in MEANINGS.items()
    ]
    return "\n".join(rows) + "\n"


def write(folder: Path) -> None:
    folder.mkdir(exist_ok=True)
    for name, text in (
        ("cli.md", cli_page()),
        ("findings-table.md", findings_table()),
        ("exit-statuses-table.md", exit_statuses_table()),
    ):
        path = folder / name
        # Rewritten only when it changes: Sphinx rereads what is newer.
        if not path.exists() or path.read_text() != text:
            path.write_text(text)


def _generate(app: Any) -> None:
    write(Path(app.srcdir) / "_generated")


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", _generate)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
