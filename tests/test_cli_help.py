"""Every command's help says what each of its arguments is and ends with the exit statuses
of that command; ``--jobs`` is offered by the commands that read it and refused by the
others. The parser is walked as ``ledger`` builds it, the entry-point commands included,
so a command added later is held to the same rules."""

from __future__ import annotations

import argparse
import inspect
import re

import pytest

from ledger.cli._help import EXIT_HEADING, HelpFormatter, exit_statuses, group_exit_statuses
from ledger.cli._main import _parser
from ledger.exit_status import ExitStatus
from tests.conftest import ROOT, CliRun

# The commands whose function reads --jobs (through jobs_of): they start processes.
JOBS = {"ledger verify", "ledger seal", "ledger gate"}
# Commands that write nothing to standard output: a reader going away (141) cannot end them.
QUIET = {"ledger simulate"}
# Commands that serve until a signal stops them: they exit neither 0 nor 1 on purpose.
SERVING = {"ledger simulate"}
# Every command runs under ledger.cli.main: its parser exits 2 on bad arguments, and its
# signal handlers end any command with 129, 130 or 143.
EVERY_COMMAND = {2, 129, 130, 143}

# A status at the start of a line, or after the heading, a ';' or a ',' (one-line epilogs:
# "exit status: 0 ok; 1 ...").
_STATUS = re.compile(r"(?:^|\n|(?<!\d)[:;,])\s*(\d{1,3}(?:/\d{1,3})*)(?=\s)")


def _walk(parser: argparse.ArgumentParser, name: str) -> list[tuple[str, argparse.ArgumentParser]]:
    found = [(name, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child, sub in action.choices.items():
                found += _walk(sub, f"{name} {child}")
    return found


PARSERS = dict(_walk(_parser(), "ledger"))


def _is_group(parser: argparse.ArgumentParser) -> bool:
    return any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)


LEAVES = {name: parser for name, parser in PARSERS.items() if not _is_group(parser)}


def _named(action: argparse.Action) -> str:
    return "/".join(action.option_strings) or str(action.metavar or action.dest)


def _statuses(epilog: str) -> set[int]:
    return {int(n) for item in _STATUS.findall(epilog) for n in item.split("/")}


def _problems(name: str, parser: argparse.ArgumentParser) -> list[str]:
    """What ``name``'s help lacks, against the rules of this module."""
    problems = [
        f"{_named(a)}: no help"
        for a in parser._actions
        if not isinstance(a, argparse._HelpAction)
        and (not (a.help or "").strip() or a.help == argparse.SUPPRESS)
    ]
    if not any("--verbose" in a.option_strings for a in parser._actions) and name != "ledger":
        problems.append("no -v/--verbose (main reads it for every command)")
    last = parser.format_help().rstrip().split("\n\n")[-1]
    if not last.startswith(EXIT_HEADING):
        return [*problems, f"the help does not end with {EXIT_HEADING!r}"]
    said = _statuses(parser.epilog or "")
    if not said <= set(ExitStatus):
        problems.append(
            f"statuses the command line never returns: {sorted(said - set(ExitStatus))}"
        )
    if _is_group(parser):
        if said != {2} or f"{name} COMMAND --help" not in (parser.epilog or ""):
            problems.append("a group's epilog names 2 alone and points to its commands' help")
        return problems
    expected = set(EVERY_COMMAND)
    expected |= set() if name in QUIET else {141}
    expected |= set() if name in SERVING else {0, 1}
    if missing := expected - said:
        problems.append(f"exit statuses not said: {sorted(missing)}")
    cannot = ({141} if name in QUIET else set()) | ({0, 1} if name in SERVING else set())
    if extra := said & cannot:
        problems.append(f"exit statuses it cannot give: {sorted(extra)}")
    return problems


def test_the_walk_finds_every_command_entry_points_included() -> None:
    assert {"ledger db build", "ledger signature verify", "ledger ticket new"} <= set(LEAVES)
    assert {"ledger run", "ledger simulate", "ledger demo", "ledger audit"} <= set(LEAVES)
    assert {"ledger", "ledger db", "ledger signature", "ledger ticket"} == set(PARSERS) - set(
        LEAVES
    )
    assert set(LEAVES) >= JOBS | QUIET | SERVING


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_every_help_says_each_argument_and_ends_with_its_exit_statuses(name: str) -> None:
    assert _problems(name, PARSERS[name]) == []


def _broken(**kwargs: object) -> argparse.ArgumentParser:
    """A command as the rules want it, then broken by ``kwargs``."""
    epilog = str(
        kwargs.get("epilog", exit_statuses(ok="done", refused="refused", unusable="a missing path"))
    )
    parser = argparse.ArgumentParser(prog="ledger x", epilog=epilog, formatter_class=HelpFormatter)
    parser.add_argument("-v", "--verbose", action="count", help=str(kwargs.get("v", "log more")))
    parser.add_argument("path", help=str(kwargs.get("path", "a path")))
    return parser


@pytest.mark.parametrize(
    ("broken", "said"),
    [
        ({"path": ""}, "path: no help"),
        ({"v": argparse.SUPPRESS}, "-v/--verbose: no help"),
        ({"epilog": ""}, "the help does not end with 'exit status:'"),
        ({"epilog": "exit status: 0 done; 1 refused; 2 unusable; 130/143 interrupted"},
         "exit statuses not said: [129, 141]"),
        ({"epilog": exit_statuses(ok="done", refused="r", unusable="u") + "\n  3    odd"},
         "statuses the command line never returns: [3]"),
    ],
)  # fmt: skip
def test_each_rule_alone_finds_its_defect(broken: dict[str, object], said: str) -> None:
    assert _problems("ledger x", _broken()) == []
    assert _problems("ledger x", _broken(**broken)) == [said]


def test_a_quiet_or_serving_command_is_not_said_to_exit_as_it_cannot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(f"{__name__}.QUIET", {"ledger x"})
    assert _problems("ledger x", _broken()) == ["exit statuses it cannot give: [141]"]
    monkeypatch.setattr(f"{__name__}.QUIET", set())
    monkeypatch.setattr(f"{__name__}.SERVING", {"ledger x"})
    assert _problems("ledger x", _broken()) == ["exit statuses it cannot give: [0, 1]"]


def test_a_group_points_to_its_commands() -> None:
    group = argparse.ArgumentParser(prog="ledger g", epilog=group_exit_statuses("ledger g"))
    group.add_argument("-v", "--verbose", action="count", help="log more")
    group.add_subparsers(dest="c", help="what to do").add_parser("x")
    assert _problems("ledger g", group) == []
    group.epilog = group_exit_statuses("ledger other")
    assert _problems("ledger g", group) == [
        "a group's epilog names 2 alone and points to its commands' help"
    ]


def test_a_one_line_epilog_names_its_statuses() -> None:
    assert _statuses("exit status: 0 ok (default 1); 1 refused; 2 bad, 130/143 stopped") == {
        0,
        1,
        2,
        130,
        143,
    }


def _reads_jobs(parser: argparse.ArgumentParser) -> bool:
    source = inspect.getsource(parser.get_default("func"))
    return "jobs_of(" in source or "args.jobs" in source


def test_jobs_is_offered_exactly_by_the_commands_that_read_it() -> None:
    offered = {
        name
        for name, parser in LEAVES.items()
        if any("--jobs" in a.option_strings for a in parser._actions)
    }
    assert offered == JOBS
    assert {name for name, parser in LEAVES.items() if _reads_jobs(parser)} == JOBS


def _required_argv(name: str) -> list[str]:
    """``name``'s command line with each required argument given a value it accepts."""
    argv = name.split()[1:]
    for action in LEAVES[name]._actions:
        if not (action.required or not action.option_strings) or action.nargs == 0:
            continue
        value = str(next(iter(action.choices))) if action.choices else "1"
        argv += [*action.option_strings[:1], value]
    return argv


@pytest.mark.parametrize("name", sorted(LEAVES))
def test_jobs_is_refused_by_a_command_that_does_not_read_it(cli: CliRun, name: str) -> None:
    argv = _required_argv(name)
    if name in JOBS:
        assert _parser().parse_args([*argv, "--jobs", "2"]).jobs == 2
        return
    assert _parser().parse_args(argv).func is LEAVES[name].get_default("func")
    status, out, err = cli(*argv, "--jobs", "2")
    assert (status, out) == (2, "")
    assert "unrecognized arguments: --jobs 2" in err and len(err.splitlines()) == 1, err


def test_gate_reads_ledger_jobs_as_verify_does(
    cli: CliRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    campaign = ROOT / "evidence" / "2026-11-29-simulated-example"
    monkeypatch.setenv("LEDGER_JOBS", "0")
    assert cli("gate", str(campaign)) == (2, "", "error: LEDGER_JOBS: must be at least 1, got 0\n")
    # --jobs wins over it.
    status, out, _ = cli("gate", "--jobs", "1", str(campaign))
    assert status == 1 and out.endswith("promotion NOT allowed\n")


def test_an_epilog_keeps_its_lines_and_hangs_each_under_its_meaning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    long = "a meaning long enough to wrap onto a second line at sixty columns"
    parser = argparse.ArgumentParser(
        prog="x",
        formatter_class=HelpFormatter,
        epilog=exit_statuses(ok=long, refused="refused", unusable="u"),
    )
    lines = parser.format_help().splitlines()
    first = lines.index(EXIT_HEADING) + 1
    assert lines[first].startswith("  0    a meaning") and len(lines[first]) <= 58
    assert lines[first + 1].startswith("       ") and lines[first + 1].strip()[0].isalpha()
    assert lines[first + 2] == "  1    refused"
    heads = [line[:6] for line in lines[first:] if not line.startswith("       ")]
    assert heads == [
        "  0   ",
        "  1   ",
        "  2   ",
        "  129 ",
        "  130 ",
        "  141 ",
        "  143 ",
    ]


def test_a_description_wraps_as_argparse_wraps_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "50")
    text = "One  paragraph, with  double spaces, long enough to wrap onto several lines here."
    ours = argparse.ArgumentParser(prog="x", description=text, formatter_class=HelpFormatter)
    theirs = argparse.ArgumentParser(prog="x", description=text)
    assert ours.format_help() == theirs.format_help()


def test_seal_names_its_default_reason() -> None:
    from ledger.evidence.manifest import DEFAULT_WITHHELD_REASON

    reason = next(a for a in LEAVES["ledger seal"]._actions if "--reason" in a.option_strings)
    assert DEFAULT_WITHHELD_REASON in (reason.help or "")
