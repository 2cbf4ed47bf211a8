"""``ledger decide`` and ``ledger gate``: the promotion commands of the command line."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ledger.errors import InvalidArtifact


def add_decision_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    """Adds ``decide`` and ``gate``."""
    decide = commands.add_parser(
        "decide",
        parents=[common],
        help="write a campaign's summary.json from its evidence under a promotion policy",
        description="Gates from the stage artifacts, headline results from the derived A/B "
        "comparison, failures and limitations from the data; promotion_authorized only when "
        "every rule of the policy holds. Writes summary.json and policy.json, re-seals.",
    )
    gate = commands.add_parser(
        "gate",
        parents=[common],
        help="exit 0 only when the campaign may be promoted (a deployment gate)",
        description="Verify the campaign, then evaluate the policy on its evidence and its "
        "summary.json; print every rule with its reasons. Exit 0 promotion allowed, 1 not "
        "allowed, 2 could not run.",
    )
    for parser in (decide, gate):
        parser.add_argument("campaign", metavar="CAMPAIGN_DIR")
        parser.add_argument(
            "--policy",
            metavar="FILE",
            help="a promotion-policy/v1 TOML file (default: the policy shipped with ledger)",
        )
        parser.add_argument(
            "--candidate", metavar="ARM", help="the arm to decide on (default: from the A/B)"
        )
    decide.set_defaults(func=_decide)
    gate.set_defaults(func=_gate)


def _load(args: argparse.Namespace, command: str) -> Any:
    from ledger.policy import load_policy

    if not os.path.isdir(args.campaign):
        print(f"ledger {command}: error: {args.campaign}: not a folder", file=sys.stderr)
        return None
    try:
        return load_policy(args.policy)
    except InvalidArtifact as e:
        print(f"ledger {command}: error: {e}", file=sys.stderr)
        return None


def _decide(args: argparse.Namespace) -> int:
    from ledger.decide import decide

    policy = _load(args, "decide")
    if policy is None:
        return 2
    decided = decide(args.campaign, policy, candidate=args.candidate)
    decision = decided.summary["decision"]
    print(
        f"decided {decided.path}: {', '.join(decision['decision_labels'])}; "
        f"promotion_authorized {str(decision['promotion_authorized']).lower()} "
        f"(policy {policy.name!r})"
    )
    for unmet in decided.evaluation.unmet:
        print(f"  unmet {unmet.rule}: {unmet.reason}")
    if decided.proposal_sha256 and not decision["promotion_authorized"]:
        print(f"  to approve: sign an approval of summary sha256 {decided.proposal_sha256}")
    return 0


def _gate(args: argparse.Namespace) -> int:
    from ledger import manifest
    from ledger.promotion import RULE_CODES, Unmet, evaluate, load_evidence
    from ledger.verify import verify_paths

    policy = _load(args, "gate")
    if policy is None:
        return 2
    report = verify_paths([args.campaign], jobs=args.jobs, policy=policy)
    evidence = load_evidence(args.campaign)
    summary_path = os.path.join(args.campaign, manifest.SUMMARY_NAME)
    summary_bytes = None
    if os.path.exists(summary_path):
        with open(summary_path, "rb") as f:
            summary_bytes = f.read()
    evaluation = evaluate(evidence, policy, candidate=args.candidate, summary_bytes=summary_bytes)
    unmet = list(evaluation.unmet)
    print(f"policy {policy.name!r} ({policy.source}), candidate {evaluation.candidate}")
    if summary_bytes is None and policy.approval_required:
        unmet.append(Unmet("approval", "no summary.json to approve (run ledger decide)"))
    if not report.ok:
        print(f"  FAIL evidence: {report.errors} error findings (run ledger verify)")
    failed_rules = {u.rule for u in unmet}
    for rule in dict.fromkeys(RULE_CODES):
        if rule == "approval" and not policy.approval_required:
            continue
        if rule == "restoration" and not policy.restoration_required:
            continue
        mark = "FAIL" if rule in failed_rules else "ok  "
        print(f"  {mark} {rule}")
        for item in unmet:
            if item.rule == rule:
                print(f"       {item.reason}")
    allowed = report.ok and not unmet
    print("promotion allowed" if allowed else "promotion NOT allowed")
    return 0 if allowed else 1
