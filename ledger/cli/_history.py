"""``ledger history``: the change points of an evidence root's campaigns over time."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from ledger.cli._decisions import add_replace_flag, is_folder, replace_without_target
from ledger.cli._help import exit_statuses
from ledger.errors import printable

_FIELDS = ("model", "revision", "engine", "engine_version", "gpu")


def add_history(commands: Any, common: argparse.ArgumentParser) -> None:
    """Adds ``history``."""
    history = commands.add_parser(
        "history",
        parents=[common],
        help="change points of each metric across an evidence root's campaigns over time",
        description="Verify ROOT, read every campaign that passes from its raw request rows, "
        "group the cells by what they measured (model, revision, engine and version, GPU, "
        "stage, context, concurrency or rate, thinking, output length), order them in time "
        "and flag each step of a metric with the campaigns on either side, its size and its "
        "interval.",
        epilog=exit_statuses(
            ok="history written",
            refused="a campaign under ROOT failed verification: it is excluded and listed, "
            "and the history of the rest is written",
            unusable="a missing ROOT, one that is not a folder or holds no campaign folder, "
            "an --html FILE in a missing folder or inside a campaign, or one that exists "
            "with other content (without --replace)",
        ),
    )
    history.add_argument(
        "root",
        metavar="ROOT",
        help="an evidence root (a folder of campaign folders), or one campaign folder",
    )
    history.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text for people (default: the series with a change point), json for machines "
        "(every series, anvil-serving.history/v1)",
    )
    history.add_argument(
        "--across",
        action="append",
        default=[],
        metavar="FIELD",
        help="follow a metric across this identity field (one of "
        f"{', '.join(_FIELDS)}, or any other, dotted where nested; a prefix takes every "
        "field beneath it): it leaves the series key, and a change point names it when it "
        "differs across the step; repeatable",
    )
    history.add_argument(
        "--html",
        metavar="FILE",
        help="also write a self-contained HTML page with one chart per series",
    )
    add_replace_flag(history, "--html files")
    history.set_defaults(func=_history)


def _campaign_holding(path: str, root: str) -> Path | None:
    """The campaign folder of ``root`` that ``path`` lies in, if any: a file written there
    would break its seal."""
    from ledger.evidence import tree
    from ledger.formats.outputs import is_within

    folder = Path(root)
    campaigns = [folder] if tree.is_campaign(folder) else sorted(folder.iterdir())
    return next((c for c in campaigns if c.is_dir() and is_within(path, c)), None)


def _html_problem(path: str, root: str) -> str | None:
    target = Path(path)
    if not target.absolute().parent.is_dir():
        return f"--html {path}: no such folder {target.absolute().parent}"
    if target.exists() and not target.is_file():
        return f"--html {path}: not a regular file"
    campaign = _campaign_holding(path, root)
    if campaign is not None:
        return f"--html {path}: inside the campaign {campaign}; it would break its seal"
    return None


def _write_html(path: str, page: str, replace: bool) -> None:
    from ledger.formats.outputs import Changes, refuse_other_content

    target = Path(path).absolute()
    data = page.encode("utf-8")
    if not replace:
        refuse_other_content(target.parent, {target.name: data}, "--replace")
    changes = Changes()
    changes.put(target.parent, target.name, data)
    changes.commit()


def _write_out(text: str) -> None:
    """Writes ``text`` to standard output whole, as ``ledger sql`` does: unbuffered, a
    text stream's write returns after one system call and drops the rest unsaid."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        sys.stdout.write(text)  # not a file (a test's capture): it takes the whole text
        return
    sys.stdout.flush()
    data = memoryview(text.encode(sys.stdout.encoding or "utf-8", sys.stdout.errors or "strict"))
    while data:
        data = data[os.write(fd, data) :]


def _history(args: argparse.Namespace) -> int:
    from ledger.history import history, render_html, render_json, render_text

    if replace_without_target("history", args.replace, args.html, "--html FILE"):
        return 2
    if not is_folder(args.root, "history"):
        return 2
    if args.html is not None:
        problem = _html_problem(args.html, args.root)
        if problem is not None:
            print(printable(f"ledger history: error: {problem}"), file=sys.stderr)
            return 2
    found = history(args.root, across=args.across)
    if args.html is not None:
        _write_html(args.html, render_html(found), args.replace)
    _write_out(render_json(found) if args.format == "json" else render_text(found))
    if found.excluded:
        print(
            printable(
                f"FAIL: {len(found.excluded)} excluded, failed verification (ledger verify "
                f"{args.root} lists every finding)"
            ),
            file=sys.stderr,
        )
        return 1
    return 0
