"""The ``ledger`` command line: parses arguments, calls library functions, renders results.

Exit status (:func:`main`): 0 success (warnings allowed), 1 findings or a refusal about the
evidence, 2 unusable input, 130/143 after SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
from typing import Any, NoReturn, TypeVar

from ledger import __version__
from ledger.cli._decisions import (
    add_decision_commands,
    add_replace_flag,
    add_review_flag,
    is_folder,
)
from ledger.cli._help import HelpFormatter, exit_statuses, group_exit_statuses
from ledger.cli._history import add_history
from ledger.cli._jobs import add_jobs_option, jobs_of, positive_int
from ledger.cli._outputs import output_file_problem
from ledger.errors import Error, InvalidArtifact, SchemaError, Terminated, UsageError, printable
from ledger.exit_status import ExitStatus
from ledger.formats.jsonio import MAX_JSON_BYTES

REPORT_FORMATS = ("text", "json", "sarif", "junit")
"""What ``ledger verify --format`` writes (:func:`ledger.verification.render`)."""

_logger = logging.getLogger("ledger")


_PATH_METAVARS = frozenset(
    {
        "PATH",
        "DIR",
        "FILE",
        "CAMPAIGN_DIR",
        "RAW_CAMPAIGN",
        "BUNDLE",
        "PLAN.toml",
        "DIR|URL",
        "ROOT",
    }
)


def _path(text: str) -> str:
    # Path("") is ".": an empty argument would be the current folder, unasked.
    if not text:
        raise argparse.ArgumentTypeError("an empty path")
    return text


_Action = TypeVar("_Action", bound=argparse.Action)


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line (exit status 2), like every other error; an argument
    named as a path (by its metavar) is never empty; help keeps the lines of an epilog
    (every command's parser is one of these: argparse makes subcommands of its class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, printable(f"{self.prog}: error: {message} (see {self.prog} --help)") + "\n")

    def _add_action(self, action: _Action) -> _Action:
        # Every argument passes here, those of argument groups and mutually exclusive
        # groups too (they hand their actions to their parser).
        if action.metavar in _PATH_METAVARS and action.type is None:
            action.type = _path
        return super()._add_action(action)


_UNREADABLE = "a missing or unreadable path, a malformed file given as an argument"


def _parser(*, plugins: bool = True) -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    common.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="log more; twice re-raises errors with a traceback",
    )

    parser = _Parser(
        prog="ledger",
        description="Artifact ledger and evidence verification for LLM serving campaigns.",
        epilog=group_exit_statuses("ledger"),
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, help="what to do"
    )
    _add_verify(commands, common)
    _add_seal(commands, common)
    _add_database_commands(commands, common)
    _add_derive(commands, common)
    _add_import(commands, common)
    _add_publication_commands(commands, common)
    add_decision_commands(commands, common)
    add_history(commands, common)
    if plugins:
        _add_plugin_commands(commands, common)
    return parser


def _add_verify(commands: Any, common: argparse.ArgumentParser) -> None:
    verify = commands.add_parser(
        "verify",
        parents=[common],
        help="verify evidence roots, campaign folders or JSON documents",
        description="Check integrity, schemas, references, arithmetic, gates and decisions.",
        epilog=exit_statuses(
            ok="no error finding (warnings allowed)",
            refused="error findings (a malformed document is one)",
            unusable="a missing or unreadable path, a malformed --policy, a --tickets that is "
            "not a folder, a bad LEDGER_JOBS",
        ),
    )
    verify.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="an evidence root, a campaign folder, or a JSON document",
    )
    verify.add_argument(
        "--format",
        choices=REPORT_FORMATS,
        default="text",
        help="text for people (default), json for machines, sarif (2.1.0) for code "
        "scanning, junit (XML) for CI test reports",
    )
    verify.add_argument(
        "--output",
        metavar="FILE",
        help="write the report to FILE (replaced whole, never half-written) instead of "
        "standard output",
    )
    verify.add_argument(
        "--github-annotations",
        action="store_true",
        help="also print one GitHub Actions workflow command per finding on standard "
        "output (::error file=...,line=...::), which the runner shows on the file's line",
    )
    verify.add_argument(
        "--changed",
        action="store_true",
        help="the paths are changed files (as pre-commit passes them): verify each "
        "campaign folder that holds one; files in no campaign are left out",
    )
    add_jobs_option(verify)
    verify.add_argument(
        "--max-json-bytes",
        type=positive_int,
        default=MAX_JSON_BYTES,
        metavar="BYTES",
        help=f"largest JSON artifact parsed, in bytes (default {MAX_JSON_BYTES})",
    )
    verify.add_argument(
        "--tickets",
        metavar="DIR",
        help="where linked tickets are that a campaign does not publish itself (default: "
        "tickets/ beside each evidence root)",
    )
    verify.add_argument(
        "--public",
        action="store_true",
        help="every campaign must be a publication (an evidence repository's CI): a raw one "
        "is an error, and every file of every campaign is scanned for private data",
    )
    verify.add_argument(
        "--policy",
        metavar="FILE",
        help="the promotion policy summaries that claim promotion must meet "
        "(default: the policy shipped with ledger)",
    )
    verify.set_defaults(func=_verify)


def _add_seal(commands: Any, common: argparse.ArgumentParser) -> None:
    seal = commands.add_parser(
        "seal",
        parents=[common],
        help="write manifest.json and SHA256SUMS for a campaign folder",
        description="Record every file of a campaign folder with its digest, keeping existing "
        "withheld declarations. Sealing proves integrity from now on, never "
        "correctness.",
        epilog=exit_statuses(
            ok="sealed",
            refused="the seal does not hold (files changed since it; see "
            "--reseal-after-review), or the folder holds a symlink or special file",
            unusable="a missing folder, one not named like a campaign id, a --withhold that "
            "is not an artifact, a bad LEDGER_JOBS",
        ),
    )
    seal.add_argument(
        "folder", metavar="CAMPAIGN_DIR", help="the campaign folder (YYYY-MM-DD-words)"
    )
    add_jobs_option(seal)
    seal.add_argument(
        "--withhold",
        action="append",
        default=[],
        metavar="PATH",
        help="declare an artifact withheld (operator-private); repeatable",
    )
    seal.add_argument(
        "--withhold-missing",
        action="store_true",
        help="declare withheld every artifact the summary names that is absent",
    )
    seal.add_argument(
        "--reason",
        default=None,
        metavar="TEXT",
        help="reason recorded for new withheld entries (default: operator-private raw "
        "artifact; not published)",
    )
    add_review_flag(seal)
    seal.set_defaults(func=_seal)


def _add_database_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    loading = "the files cannot be loaded"
    sources = "an evidence root, a campaign folder (raw or public) or a Parquet export"
    db = commands.add_parser(
        "db",
        parents=[common],
        help="the ledger database (DuckDB built from evidence files)",
        description="The files stay the source of truth; the database is built from them.",
        epilog=group_exit_statuses("ledger db"),
    )
    db_commands = db.add_subparsers(
        dest="db_command", metavar="DB_COMMAND", required=True, help="what to do"
    )
    build = db_commands.add_parser(
        "build",
        parents=[common],
        help="build a DuckDB file from evidence roots, campaign folders or Parquet exports",
        epilog=exit_statuses(
            ok="built",
            refused=loading,
            unusable=f"{_UNREADABLE}, a PATH holding no campaign folder, a --db that exists "
            "or cannot be written",
        ),
    )
    build.add_argument("paths", nargs="+", metavar="PATH", help=f"{sources}; one or more")
    build.add_argument(
        "--db", required=True, metavar="FILE", help="the DuckDB file to create (a new path)"
    )
    build.set_defaults(func=_db_build)

    query = commands.add_parser(
        "sql",
        parents=[common],
        help="run SQL over evidence: views requests, cells; tables artifacts, gates, decisions",
        description="Build an in-memory ledger database from PATH and run one statement.",
        epilog=exit_statuses(
            ok="the statement ran; its rows are on standard output",
            refused=loading,
            unusable=f"{_UNREADABLE}, a PATH holding no campaign folder, SQL that does not "
            "parse or run, or that would change something",
        ),
    )
    query.add_argument("statement", metavar="SQL", help="one read-only SQL statement")
    _add_sources(query, sources)
    query.add_argument(
        "--format",
        choices=("table", "json", "csv"),
        default="table",
        help="table for people (default), json or csv for machines",
    )
    query.set_defaults(func=_sql)

    export = commands.add_parser(
        "export",
        parents=[common],
        help="write Hive-partitioned Parquet (campaign_id=/arm=) of the ledger database",
        epilog=exit_statuses(
            ok="exported",
            refused=loading,
            unusable=f"{_UNREADABLE}, a PATH holding no campaign folder, a --parquet that "
            "is a file, a folder that is not empty, or inside a source",
        ),
    )
    _add_sources(export, sources)
    export.add_argument(
        "--parquet",
        required=True,
        metavar="DIR",
        help="the folder to write: a new or empty one",
    )
    export.set_defaults(func=_export)


def _add_sources(parser: argparse.ArgumentParser, sources: str) -> None:
    """``--from PATH``, repeatable and required: the evidence a database is built from."""
    parser.add_argument(
        "--from",
        dest="sources",
        action="append",
        required=True,
        metavar="PATH",
        help=f"{sources}; repeatable",
    )


def _add_derive(commands: Any, common: argparse.ArgumentParser) -> None:
    derive = commands.add_parser(
        "derive",
        parents=[common],
        help="derive an os- or ab-comparison of two arms from raw request rows",
        description="Compute a comparison in DuckDB from a raw campaign's request records, "
        "write it under derived/ and re-seal the folder.",
        epilog=exit_statuses(
            ok="derived (matched or not: the reasons are printed)",
            refused="the seal does not hold, or the arms cannot be compared",
            unusable=f"{_UNREADABLE}, an arm the campaign lacks or the same arm twice, an "
            "unknown --differs key, a bad --slo, a comparison that exists with other "
            "content (without --replace)",
        ),
    )
    derive.add_argument(
        "campaign", metavar="CAMPAIGN_DIR", help="the raw campaign folder holding both arms"
    )
    derive.add_argument("--baseline", required=True, metavar="ARM", help="the arm compared against")
    derive.add_argument(
        "--candidate", required=True, metavar="ARM", help="the arm compared with it"
    )
    derive.add_argument(
        "--kind",
        choices=("os", "ab"),
        default="ab",
        help="ab (default): any two arms, ab-comparison/v1; os: an operating-system "
        "comparison, os-comparison/v1",
    )
    derive.add_argument(
        "--differs",
        action="append",
        default=[],
        metavar="KEY",
        help="an identity key the arms are meant to differ in (default for os: os); repeatable",
    )
    derive.add_argument(
        "--slo",
        action="append",
        metavar="KEY=MS,...",
        help="latency objectives for the load stages' goodput and sustainable rate, e.g. "
        "ttft_ms=500,tpot_ms=50,e2e_ms=5000,percentile=99 (keys: ttft_ms, tpot_ms, e2e_ms, "
        "percentile; default percentile 99; default: the run plan's [slo]); repeatable, "
        "each objective once; --kind ab only",
    )
    derive.add_argument(
        "--control",
        metavar="ARM",
        help="an arm run with the baseline's configuration (an A/A control): each median "
        "gains its noise floor, and a change within it reads no difference detected "
        "(default: the run plan's arm with repeat_of = the baseline; --kind ab only)",
    )
    add_review_flag(derive)
    add_replace_flag(derive, "comparisons")
    derive.set_defaults(func=_derive)


def _add_import(commands: Any, common: argparse.ArgumentParser) -> None:
    imported = commands.add_parser(
        "import",
        parents=[common],
        help="turn llmperf, AIPerf, vLLM or SGLang per-request results into raw artifacts",
        epilog=exit_statuses(
            ok="imported (a file's own aggregates that disagree are warnings)",
            refused="the seal of the campaign imported into does not hold",
            unusable=f"{_UNREADABLE} (not what TOOL writes, or without per-request "
            "records), a name that is not valid, a cell that exists",
        ),
    )
    imported.add_argument(
        "tool",
        choices=("llmperf", "aiperf", "vllm", "sglang"),
        metavar="TOOL",
        help="the tool that wrote FILE: llmperf, aiperf, vllm or sglang",
    )
    imported.add_argument(
        "files", nargs="+", metavar="FILE", help="its per-request results; one or more"
    )
    imported.add_argument(
        "--raw-dir",
        required=True,
        metavar="DIR",
        help="where raw campaigns go (the campaign is DIR/ID, made or extended)",
    )
    imported.add_argument(
        "--campaign", required=True, metavar="ID", help="the campaign id (YYYY-MM-DD-words)"
    )
    imported.add_argument(
        "--arm", required=True, metavar="NAME", help="the arm the results are recorded under"
    )
    imported.add_argument(
        "--stage",
        default="imported",
        metavar="NAME",
        help="the stage they are recorded under (default %(default)s)",
    )
    add_review_flag(imported)
    imported.set_defaults(func=_import)


def _add_publication_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    publish = commands.add_parser(
        "publish",
        parents=[common],
        help="sanitize a raw campaign into a public tree with manifest and in-toto statement",
        description="Redact credentials, GPU ids, private endpoints and host paths; rewrite "
        "references to the sanitized digests; seal; write statement.intoto.json. Refuses "
        "(exit 1, nothing written) if any detector still fires.",
        epilog=exit_statuses(
            ok="published",
            refused="the seal does not hold, or a detector still fires (nothing written)",
            unusable=f"{_UNREADABLE}, a folder that is not a sealed campaign, an output that "
            "exists or would be written inside the raw campaign, a campaign or the public tree",
        ),
    )
    publish.add_argument("raw", metavar="RAW_CAMPAIGN", help="the sealed raw campaign folder")
    publish.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="the public evidence root; the campaign is written to DIR/<campaign_id>",
    )
    publish.add_argument(
        "--map",
        default=None,
        metavar="FILE",
        help="the private raw-to-public digest map (default: <campaign_id>.publish-map.json "
        "beside the raw campaign)",
    )
    add_review_flag(publish)
    publish.set_defaults(func=_publish)
    _add_signature_commands(commands, common)


def _add_signature_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    signature = commands.add_parser(
        "signature",
        parents=[common],
        help="sigstore signatures, checked offline",
        epilog=group_exit_statuses("ledger signature"),
    )
    signature_commands = signature.add_subparsers(
        dest="signature_command", metavar="SIGNATURE_COMMAND", required=True, help="what to do"
    )
    check = signature_commands.add_parser(
        "verify",
        parents=[common],
        help="verify a sigstore bundle over a file offline against a pinned trusted root",
        description="Message-signature bundles and DSSE bundles holding an in-toto statement "
        "(the file's digest must then be one of its subjects).",
        epilog=exit_statuses(
            ok="verified",
            refused="not verified",
            unusable="a missing or unreadable file, bundle or trusted root, a bundle or "
            "trusted root that does not parse",
        ),
    )
    check.add_argument("file", metavar="FILE", help="the signed file")
    check.add_argument(
        "--bundle", required=True, metavar="BUNDLE", help="its sigstore bundle (.sigstore.json)"
    )
    check.add_argument("--identity", required=True, help="the signer's certificate identity")
    check.add_argument("--issuer", required=True, help="its OIDC issuer URL")
    roots = check.add_mutually_exclusive_group()
    roots.add_argument(
        "--trusted-root",
        metavar="FILE",
        help="a trusted_root.json to pin (default: sigstore's production root, pinned in ledger)",
    )
    roots.add_argument("--staging", action="store_true", help="the pinned staging root")
    check.set_defaults(func=_signature_verify)


def _publish(args: argparse.Namespace) -> int:
    from ledger.publication import publish

    published = publish(
        args.raw, args.out, digest_map=args.map, reseal_after_review=args.reseal_after_review
    )
    print(
        f"published {published.folder}: {published.artifacts} artifacts, "
        f"{published.redactions} distinct values redacted; private map {published.digest_map}"
    )
    if published.left_out:
        print(
            f"  left out: the raw campaign's report ({len(published.left_out)} files; it names "
            f"raw digests); run ledger report {published.folder}"
        )
    return 0


def _signature_verify(args: argparse.Namespace) -> int:
    from ledger.signatures import UnusableInputError, verify_file

    try:
        result = verify_file(
            args.file,
            args.bundle,
            identity=args.identity,
            issuer=args.issuer,
            trusted_root=args.trusted_root,
            staging=args.staging,
        )
    except UnusableInputError as e:
        print(f"ledger signature verify: error: {e.diagnostics()}", file=sys.stderr)
        return 2
    if result.ok:
        print(f"OK: {args.file}: {result.reason}")
        return 0
    print(f"FAIL: {args.file}: {result.reason}")
    return 1


def _refuse_inside(output: str, sources: list[str], what: str) -> None:
    from ledger.formats.outputs import is_within

    for source in sources:
        if is_within(output, source):
            # Files a sealed campaign does not list would break its seal.
            raise UsageError(f"{output}: the {what} would be written inside {source}")


def _db_build(args: argparse.Namespace) -> int:
    from ledger.database import build

    _refuse_inside(args.db, args.paths, "database")
    database = build(args.paths, database=args.db)
    rows = database.query("SELECT count(*) FROM request_rows").rows[0][0]
    database.close()
    print(f"built {args.db}: {rows} request rows")
    return 0


def _sql(args: argparse.Namespace) -> int:
    from ledger.database import build

    database = build(args.sources)
    try:
        table = database.user_query(args.statement)
    finally:
        database.close()
    if args.format == "json":
        text = json.dumps(table.to_json(), indent=2, ensure_ascii=False, allow_nan=False)
        _write_out(text + "\n")
    elif args.format == "csv":
        _write_out(table.to_csv())
    else:
        _write_out(table.to_text())
    return 0


def _export(args: argparse.Namespace) -> int:
    from ledger.database import build

    _refuse_inside(args.parquet, args.sources, "export")

    # Unlocked: the export's own COPY statements write the folder; no user SQL runs here.
    database = build(args.sources, locked=False)
    try:
        database.export_parquet(args.parquet)
    finally:
        database.close()
    print(f"exported to {args.parquet}")
    return 0


def _derive(args: argparse.Namespace) -> int:
    from ledger.derivation import derive_into

    if not is_folder(args.campaign, "derive"):
        return 2
    slo = None
    if args.slo is not None:
        from ledger.derivation.goodput import parse_slo

        if args.kind != "ab":
            raise UsageError("--slo: goodput is part of an A/B comparison (--kind ab)")
        try:
            # Given twice, both count: the last alone would drop an objective unseen.
            slo = parse_slo(",".join(args.slo))
        except ValueError as e:
            raise UsageError(f"--slo: {e}") from None
    if args.control is not None and args.kind != "ab":
        raise UsageError("--control: an A/A control calibrates an A/B comparison (--kind ab)")
    target = derive_into(
        args.campaign,
        args.baseline,
        args.candidate,
        kind=args.kind,
        differs=args.differs,
        slo=slo,
        reseal_after_review=args.reseal_after_review,
        replace=args.replace,
        control=args.control,
    )
    print(f"derived {target}")
    document = json.loads(target.read_bytes())
    reasons = document["match_reasons"]
    print("matched" if not reasons else f"not matched ({len(reasons)}):")
    for reason in reasons:
        print(printable(f"  {reason}"))
    for entry in document.get("unchecked", ()):
        print(printable(f"  not checked, {entry['rule']}: {entry['reason']}"))
    from ledger.derivation.calibration import verdict_lines

    for line in verdict_lines(document):
        print(printable(line))
    from ledger.derivation.goodput import sustained_text

    load = document.get("load")
    if load is not None:
        source = "--slo" if slo is not None else "the run plan's [slo]"
        shown = ", ".join(f"{k} {v:g}" for k, v in sorted(load["slo"].items()))
        print(f"  SLO ({source}): {shown}")
    for stage in document.get("load", {}).get("stages", ()):
        for role in ("baseline", "candidate"):
            shown = sustained_text(stage[role], lambda value: f"{value:g}")
            where = stage["stage"] + (" (thinking)" if stage["thinking"] else "")
            print(f"  {where}: {document[role]['arm']} sustains {shown} at the SLO")
    return 0


def _import(args: argparse.Namespace) -> int:
    from ledger.imports import import_files

    imported = import_files(
        args.tool,
        args.files,
        raw_dir=args.raw_dir,
        campaign=args.campaign,
        arm=args.arm,
        stage=args.stage,
        reseal_after_review=args.reseal_after_review,
    )
    for cell in imported.cells:
        print(f"imported {cell.path}")
        checks = cell.self_check
        if checks:
            print("the file's own aggregates, recomputed from its per-request records:")
            width = max(len(c["field"]) for c in checks)
            for check in checks:
                verdict = "agrees" if check["agrees"] else "DISAGREES"
                print(
                    f"  {check['field']:<{width}}  file {check['stated']:.6g}  "
                    f"recomputed {check['recomputed']:.6g}  {verdict}"
                )
        for warning in cell.warnings:
            print(f"warning: {warning}", file=sys.stderr)
    for line in imported.refused:
        print(f"warning: not imported: {line}", file=sys.stderr)
    return 0


CORE_COMMANDS = frozenset(
    {
        "verify",
        "seal",
        "db",
        "sql",
        "export",
        "derive",
        "import",
        "publish",
        "signature",
        "decide",
        "gate",
        "report",
        "ticket",
        "history",
    }
)
COMMAND_GROUP = "anvil_ledger.commands"
"""Entry points adding subcommands: ``runners`` registers ``run`` and ``simulate`` here,
so the core never imports it."""


def _add_plugin_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    from importlib.metadata import entry_points

    for entry in sorted(entry_points(group=COMMAND_GROUP), key=lambda e: e.name):
        try:
            register = entry.load()
        except ImportError as e:
            _logger.warning("command %s is unavailable: %s", entry.name, e)
            continue
        register(commands, common)


def _verify(args: argparse.Namespace) -> int:
    from ledger.evidence.tree import campaigns_holding
    from ledger.promotion.policy import load_policy
    from ledger.verification import Places, Report, UnusablePathError, render, verify_paths

    try:
        policy = load_policy(args.policy)
    except InvalidArtifact as e:
        print(f"ledger verify: error: {e}", file=sys.stderr)
        return 2
    if args.tickets is not None and not os.path.isdir(args.tickets):
        print(f"ledger verify: error: --tickets {args.tickets}: not a folder", file=sys.stderr)
        return 2
    problem = _verify_output_problem(args)
    if problem is not None:
        print(f"ledger verify: error: {problem}", file=sys.stderr)
        return 2
    paths = args.paths
    if args.changed:
        paths = campaigns_holding(args.paths)
    if paths:
        try:
            report = verify_paths(
                paths,
                jobs=jobs_of(args),
                max_json_bytes=args.max_json_bytes,
                policy=policy,
                tickets=args.tickets,
                public=args.public,
            )
        except UnusablePathError as e:
            print(f"ledger verify: error: {e.diagnostics()}", file=sys.stderr)
            return 2
    else:
        # A CI step that uploads the report finds one, empty, when a change touched no
        # campaign.
        print("ledger verify: no campaign holds the changed files", file=sys.stderr)
        report = Report(findings=(), campaign_names=(), documents=(), artifacts=0)
    places = Places()
    rendered = render(report, args.format, places)
    if args.output is not None:
        from ledger.formats.jsonio import write_atomic

        try:
            write_atomic(args.output, rendered)
        except OSError as e:
            print(f"ledger verify: error: --output {args.output}: {e.strerror}", file=sys.stderr)
            return 2
    else:
        _write_out(rendered.decode("utf-8"))
    if args.github_annotations:
        from ledger.verification import workflow_commands

        _write_out(workflow_commands(report, places))
    print("OK" if report.ok else "FAIL", file=sys.stderr)
    return 0 if report.ok else 1


def _verify_output_problem(args: argparse.Namespace) -> str | None:
    """Why the report cannot go where it is asked to, checked before anything is read."""
    if args.output is None:
        if args.github_annotations and args.format != "text":
            return (
                f"--github-annotations beside a {args.format} report on standard output would "
                "make it unreadable: give --output FILE"
            )
        return None
    return output_file_problem("--output", args.output)


def _seal(args: argparse.Namespace) -> int:
    from ledger.evidence import manifest

    if not is_folder(args.folder, "seal"):
        return 2
    sealed = manifest.seal(
        args.folder,
        withhold=args.withhold,
        withhold_missing=args.withhold_missing,
        reason=args.reason or manifest.DEFAULT_WITHHELD_REASON,
        reseal_after_review=args.reseal_after_review,
        jobs=jobs_of(args),
    )
    print(
        f"sealed {args.folder}: {len(sealed.artifacts)} artifacts, {len(sealed.withheld)} withheld"
    )
    # A path the folder never held is declared as given: say so, a typo would pass unseen.
    undisclosed = [
        w.path for w in sealed.withheld if w.path in (args.withhold or ()) and w.sha256 is None
    ]
    for path in undisclosed:
        print(printable(f"  {path}: not in the folder; declared withheld without a digest"))
    return 0


_SIGNALLED: list[int] = []
"""Signals received: DuckDB turns an interrupt into its own error, so the exit status
cannot come from the exception alone."""


def _on_signal(signum: int, frame: object) -> None:
    from ledger.formats.outputs import PLACED

    if PLACED:
        return  # the output is in place: finishing is what leaves no half-done work
    _SIGNALLED.append(signum)
    if signum != signal.SIGINT:
        raise Terminated
    raise KeyboardInterrupt


# A closed terminal or a dropped ssh session sends SIGHUP: a command ends as on SIGTERM.
_STOPPING = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


def _stopped(signum: int) -> str:
    if signum == signal.SIGINT:
        return "interrupted"
    return "hung up" if signum == getattr(signal, "SIGHUP", None) else "terminated"


def main(args: list[str] | None = None) -> int:
    """Runs the command line; returns the exit status (:mod:`ledger.exit_status`):

    0 success; 1 findings, or a refusal about the evidence; 2 unusable input (bad
    arguments, a missing or unreadable path, a malformed file given as an argument, an
    output that exists); 130 after Ctrl-C, 143 after SIGTERM and 129 after SIGHUP, with
    nothing half-written.
    """
    argv = sys.argv[1:] if args is None else args
    # Discovering the runner commands costs about 25 ms; the core commands skip it.
    parser = _parser(plugins=not argv or argv[0] not in CORE_COMMANDS)
    namespace = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if namespace.verbose else logging.WARNING,
        format="%(name)s: %(message)s",
    )
    _SIGNALLED.clear()
    from ledger.formats.outputs import PLACED

    PLACED.clear()
    previous = {n: signal.signal(n, _on_signal) for n in _STOPPING}
    try:
        status: int = namespace.func(namespace)
        # Within the try: output still buffered meets a closed pipe here, not at exit.
        sys.stdout.flush()
    except BrokenPipeError:
        return _reader_gone()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return ExitStatus.INTERRUPTED
    except Terminated:
        signum = _SIGNALLED[0] if _SIGNALLED else signal.SIGTERM
        print(_stopped(signum), file=sys.stderr)
        return 128 + signum
    except Exception as e:
        if _SIGNALLED:
            # An interrupt that a library reported as its own error ("Query interrupted").
            print(_stopped(_SIGNALLED[0]), file=sys.stderr)
            return 128 + _SIGNALLED[0]
        if namespace.verbose > 1:
            raise
        return _report_error(e)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    return status


def _write_out(text: str) -> None:
    """Writes ``text`` to standard output whole, or raises BrokenPipeError. Unbuffered
    (``python -u``, ``PYTHONUNBUFFERED``), a text stream's write returns after what one
    system call took and drops the rest unsaid: a reader that went away then looked like
    a command that said everything."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        sys.stdout.write(text)  # not a file (a test's capture): it takes the whole text
        return
    sys.stdout.flush()
    data = memoryview(text.encode(sys.stdout.encoding or "utf-8", sys.stdout.errors or "strict"))
    while data:
        data = data[os.write(fd, data) :]


SIGPIPE_STATUS = ExitStatus.READER_GONE
"""The status of a command whose reader went away (``ledger sql ... | head``), as the
shell reports any program that SIGPIPE ends."""


def _reader_gone() -> int:
    """The reader of standard output has gone: nothing more to say, and no one to say it
    to. Standard output goes to /dev/null, so that flushing at exit raises nothing more."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)
    return SIGPIPE_STATUS


def _report_error(error: Exception) -> int:
    """One line on stderr for an error that ended a command; its exit status."""
    if isinstance(error, Error):
        print(f"error: {error.diagnostics()}", file=sys.stderr)
        # Evidence inside a campaign is checked by verify and wrapped by the commands that
        # read it; a malformed document that reaches here is a file named on the command line.
        return 2 if isinstance(error, InvalidArtifact | SchemaError) else error.exit_status
    if isinstance(error, OSError):
        # A path the command had to read or write: unusable input, never a traceback.
        where = f"{error.filename}: " if error.filename else ""
        print(printable(f"error: {where}{error.strerror or error}"), file=sys.stderr)
        return 2
    print(
        printable(
            f"error: internal error ({type(error).__name__}: {' '.join(str(error).split())}); "
            "please report it, with the output of the same command run with -vv after "
            "its name (ledger verify -vv ...)"
        ),
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
