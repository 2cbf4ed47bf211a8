"""``ledger decide``, ``gate``, ``report`` and ``ticket``: the commands that turn a
campaign's evidence into a decision, a publication and its follow-up."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.cli._help import exit_statuses, group_exit_statuses
from ledger.cli._jobs import add_jobs_option, jobs_of
from ledger.cli._outputs import output_file_problem
from ledger.errors import InvalidArtifact, printable
from ledger.formats.regular import read_regular

if TYPE_CHECKING:
    from ledger.promotion.policy import Policy
    from ledger.verification import Report

_NOT_CAMPAIGN = "a missing folder or one that is not a campaign's"
_SEAL = "the seal does not hold (files changed since it; see --reseal-after-review)"

REVIEW_HELP = (
    "extend the campaign although its files no longer match its seal (or it has none): "
    "after you have reviewed every change 'ledger verify' reports; recorded in manifest.json"
)


def add_review_flag(parser: argparse.ArgumentParser) -> None:
    """``--reseal-after-review``, for every command that writes into a sealed campaign."""
    parser.add_argument("--reseal-after-review", action="store_true", help=REVIEW_HELP)


def add_replace_flag(parser: argparse.ArgumentParser, what: str) -> None:
    """``--replace``, for a command whose output may exist with other content."""
    parser.add_argument(
        "--replace",
        action="store_true",
        help=f"replace {what} that exist with other content (by default refused)",
    )


def replace_without_target(command: str, replace: bool, target: str | None, option: str) -> bool:
    """Whether ``--replace`` is given without the option naming the file it would replace;
    if so, says so (exit 2): the flag was meant for a file the command was not given."""
    if replace and target is None:
        print(f"ledger {command}: error: --replace is given without {option}", file=sys.stderr)
    return replace and target is None


def is_folder(path: str, command: str) -> bool:
    """Whether ``path`` is a folder; if not, says so in one line (the caller exits 2)."""
    if os.path.isdir(path):
        return True
    reason = "not a folder" if os.path.lexists(path) else "no such folder"
    print(f"ledger {command}: error: {path}: {reason}", file=sys.stderr)
    return False


def is_campaign_folder(path: str, command: str) -> bool:
    """Whether ``path`` is a campaign's folder; if not, says so in one line (exit 2): a
    root of campaigns would otherwise be judged, or reported on, as one campaign."""
    from ledger.evidence import tree

    if not is_folder(path, command):
        return False
    if tree.is_campaign(Path(path)):
        return True
    print(
        f"ledger {command}: error: {path}: not a campaign folder (it is not named like one "
        f"and holds none of {', '.join(tree.CAMPAIGN_MARKERS)})",
        file=sys.stderr,
    )
    return False


def add_decision_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    """Adds ``decide``, ``gate``, ``report`` and ``ticket``."""
    decide = commands.add_parser(
        "decide",
        parents=[common],
        help="write a campaign's summary.json from its evidence under a promotion policy",
        description="Gates from the stage artifacts, headline results from the derived A/B "
        "comparison, failures and limitations from the data; promotion_authorized only when "
        "every rule of the policy holds. Writes summary.json and policy.json, re-seals.",
        epilog=exit_statuses(
            ok="summary.json written, whether promotion is authorized or not",
            refused=f"{_SEAL}, or neither a run's nor an import's campaign",
            unusable="a missing folder, a malformed --policy, an arm the campaign lacks",
        ),
    )
    gate = commands.add_parser(
        "gate",
        parents=[common],
        help="exit 0 only when the campaign may be promoted (a deployment gate)",
        description="Verify the campaign, then evaluate the policy on its evidence and its "
        "summary.json; print every rule with its reasons.",
        epilog=exit_statuses(
            ok="promotion allowed (and its verification summary written, with --attest)",
            refused="promotion not allowed (a rule unmet, or error findings), or no "
            "manifest.json for --attest to name",
            unusable=f"{_NOT_CAMPAIGN}, a malformed --policy, an arm the campaign lacks, a bad "
            "LEDGER_JOBS, an --attest FILE that exists (without --replace) or whose folder "
            "does not",
        ),
    )
    for parser in (decide, gate):
        parser.add_argument("campaign", metavar="CAMPAIGN_DIR", help="the campaign folder")
        parser.add_argument(
            "--policy",
            metavar="FILE",
            help="a promotion-policy/v1 TOML file (default: the policy shipped with ledger)",
        )
        parser.add_argument(
            "--candidate", metavar="ARM", help="the arm to decide on (default: from the A/B)"
        )
    add_jobs_option(gate)
    gate.add_argument(
        "--attest",
        metavar="FILE",
        help="write the decision as a verification summary attestation (an in-toto "
        "statement, SLSA verification_summary/v1) to FILE; sign it with 'ledger sign FILE'",
    )
    add_replace_flag(gate, "an --attest FILE")
    add_review_flag(decide)
    decide.set_defaults(func=_decide)
    gate.set_defaults(func=_gate)
    _add_report(commands, common)
    _add_ticket(commands, common)


def _add_report(commands: Any, common: argparse.ArgumentParser) -> None:
    report = commands.add_parser(
        "report",
        parents=[common],
        help="write a campaign's publication (Markdown or self-contained HTML, SVG charts)",
        description="report.md or report.html, charts under report/ with their graph data "
        "and source digests, an evidence index; written into the campaign and re-sealed. "
        "Run it on the published (sanitized) campaign.",
        epilog=exit_statuses(
            ok="written",
            refused=f"{_SEAL}, or no readable summary",
            unusable=f"{_NOT_CAMPAIGN}, report files that exist with other content "
            "(without --replace)",
        ),
    )
    report.add_argument("campaign", metavar="CAMPAIGN_DIR", help="the campaign folder")
    report.add_argument(
        "--format",
        dest="formats",
        action="append",
        choices=("md", "html"),
        help="md (default) or html; repeat for both",
    )
    add_review_flag(report)
    add_replace_flag(report, "report files")
    report.set_defaults(func=_report)


def _add_ticket(commands: Any, common: argparse.ArgumentParser) -> None:
    ticket = commands.add_parser(
        "ticket",
        parents=[common],
        help="follow-up tickets (tickets/<id>.md)",
        epilog=group_exit_statuses("ledger ticket"),
    )
    ticket_commands = ticket.add_subparsers(
        dest="ticket_command", metavar="TICKET_COMMAND", required=True, help="what to do"
    )
    new = ticket_commands.add_parser(
        "new",
        parents=[common],
        help="write a ticket from a campaign's failures and next gate, linked both ways",
        epilog=exit_statuses(
            ok="written",
            refused=f"{_SEAL}, or no readable summary",
            unusable="a missing folder, a bad --slug or --created, a --tickets that is not a "
            "folder, a ticket that exists",
        ),
    )
    new.add_argument("campaign", metavar="CAMPAIGN_DIR", help="the campaign folder")
    new.add_argument(
        "--tickets",
        metavar="DIR",
        help="where tickets go (default: tickets/ beside the evidence root)",
    )
    new.add_argument("--slug", help="the ticket id after the date (default: <campaign>-follow-up)")
    new.add_argument(
        "--created", metavar="YYYY-MM-DD", help="the ticket's date (default: today, UTC)"
    )
    add_review_flag(new)
    new.set_defaults(func=_ticket_new)


def _report(args: argparse.Namespace) -> int:
    from ledger.reporting import write_report

    if not is_campaign_folder(args.campaign, "report"):
        return 2
    formats = args.formats or ["md"]
    for path in write_report(
        args.campaign,
        formats,
        reseal_after_review=args.reseal_after_review,
        replace=args.replace,
    ):
        if path.name.startswith("report."):
            print(f"report: {path}")
    return 0


def _ticket_new(args: argparse.Namespace) -> int:
    from ledger.reporting.tickets import new_ticket

    if not is_folder(args.campaign, "ticket"):
        return 2
    path = new_ticket(
        args.campaign,
        tickets=args.tickets,
        slug=args.slug,
        created=args.created,
        reseal_after_review=args.reseal_after_review,
    )
    print(f"ticket: {path}")
    return 0


def _load(args: argparse.Namespace, command: str) -> Any:
    from ledger.promotion.policy import load_policy

    if not is_folder(args.campaign, command):
        return None
    try:
        return load_policy(args.policy)
    except InvalidArtifact as e:
        print(f"ledger {command}: error: {e}", file=sys.stderr)
        return None


def _decide(args: argparse.Namespace) -> int:
    from ledger.promotion import decide

    policy = _load(args, "decide")
    if policy is None:
        return 2
    decided = decide(
        args.campaign,
        policy,
        candidate=args.candidate,
        reseal_after_review=args.reseal_after_review,
    )
    decision = decided.summary["decision"]
    print(
        f"decided {decided.path}: {', '.join(decision['decision_labels'])}; "
        f"promotion_authorized {str(decision['promotion_authorized']).lower()} "
        f"(policy {policy.name!r})"
    )
    for unmet in decided.evaluation.unmet:
        print(printable(f"  unmet {unmet.rule}: {unmet.reason}"))
    if decided.proposal_sha256 and not decision["promotion_authorized"]:
        print(f"  to approve: sign an approval of summary sha256 {decided.proposal_sha256}")
    return 0


def _gate(args: argparse.Namespace) -> int:
    from ledger.evidence import manifest
    from ledger.promotion import RULE_CODES, Unmet, evaluate, load_evidence, pick_candidate
    from ledger.verification import verify_paths

    if replace_without_target("gate", args.replace, args.attest, "--attest FILE"):
        return 2
    if not is_campaign_folder(args.campaign, "gate"):
        return 2
    policy = _load(args, "gate")
    if policy is None:
        return 2
    if args.attest is not None and not _attest_usable(args.attest, args.replace):
        return 2
    evidence = load_evidence(args.campaign)
    if args.candidate is not None:
        picked, why = pick_candidate(evidence, args.candidate)
        if picked is None:
            # A name the campaign lacks is a mistyped argument, not a rule to list as unmet.
            arms = ", ".join(evidence.arms)
            print(f"ledger gate: error: {args.campaign}: {why} (arms: {arms})", file=sys.stderr)
            return 2
    # The manifest the summary attests is the one verified: read before, compared after.
    sealed = _manifest_digest(args.campaign) if args.attest is not None else None
    report = verify_paths([args.campaign], jobs=jobs_of(args), policy=policy)
    summary_path = os.path.join(args.campaign, manifest.SUMMARY_NAME)
    summary_bytes = None
    if os.path.exists(summary_path):
        summary_bytes = read_regular(summary_path)
    evaluation = evaluate(evidence, policy, candidate=args.candidate, summary_bytes=summary_bytes)
    unmet = list(evaluation.unmet)
    print(f"policy {policy.name!r} ({policy.source}), candidate {evaluation.candidate}")
    if summary_bytes is None and policy.approval_required:
        unmet.append(Unmet("approval", "no summary.json to approve (run ledger decide)"))
    if not report.ok:
        print(f"  FAIL evidence: {report.errors} error findings (run ledger verify)")
    failed_rules = {u.rule for u in unmet}
    rules = [
        rule
        for rule in dict.fromkeys(RULE_CODES)
        if (rule != "approval" or policy.approval_required)
        and (rule != "restoration" or policy.restoration_required)
    ]
    for rule in rules:
        print(f"  {'FAIL' if rule in failed_rules else 'ok  '} {rule}")
        for item in unmet:
            if item.rule == rule:
                print(printable(f"       {item.reason}"))
    allowed = report.ok and not unmet
    print("promotion allowed" if allowed else "promotion NOT allowed")
    if args.attest is not None:
        written = _attest(
            args,
            sealed,
            policy,
            evaluation.candidate,
            report,
            [r for r in rules if r not in failed_rules],
            [(u.rule, u.reason) for u in unmet],
        )
        if not written:
            return 1
    return 0 if allowed else 1


def _attest_usable(path: str, replace: bool) -> bool:
    """Whether the attestation can be written where asked; if not, says why (exit 2)."""
    exists = (
        None
        if replace
        else "exists (--replace to write over it; its signature would then be stale)"
    )
    problem = output_file_problem("--attest", path, exists=exists)
    if problem is not None:
        print(f"ledger gate: error: {problem}", file=sys.stderr)
    return problem is None


def _manifest_digest(campaign: str) -> str | None:
    from ledger.evidence import manifest
    from ledger.hashing import sha256_file

    path = Path(campaign) / manifest.MANIFEST_NAME
    try:
        return sha256_file(path)[0] if path.is_file() else None
    except OSError:
        return None


def _attest(
    args: argparse.Namespace,
    sealed: str | None,
    policy: Policy,
    candidate: str | None,
    report: Report,
    met: list[str],
    unmet: list[tuple[str, str]],
) -> bool:
    from ledger import signatures
    from ledger.formats import jsonio

    campaign = Path(args.campaign)
    digest = _manifest_digest(args.campaign)
    if digest is None:
        print(
            f"ledger gate: {args.campaign}: no readable manifest.json: the decision has no "
            "evidence to attest (run ledger seal)",
            file=sys.stderr,
        )
        return False
    if digest != sealed:
        print(
            f"ledger gate: {args.campaign}: manifest.json changed while it was gated; "
            "nothing attested",
            file=sys.stderr,
        )
        return False
    statement = signatures.verification_summary(
        campaign_id=campaign.resolve().name,
        manifest_sha256=digest,
        policy_name=policy.name,
        policy_sha256=policy.sha256,
        level=policy.level,
        candidate=candidate,
        errors=report.errors,
        warnings=report.warnings,
        met=([] if report.errors else ["evidence"]) + met,
        unmet=([("evidence", f"{report.errors} error findings")] if report.errors else []) + unmet,
        verified_at=signatures.time_verified(),
    )
    jsonio.write_atomic(args.attest, jsonio.dumps_deterministic(statement))
    result = statement["predicate"]["verificationResult"]
    print(f"verification summary ({result}, policy sha256 {policy.sha256}): {args.attest}")
    return True
