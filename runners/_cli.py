"""The runner commands of ``ledger``: ``run`` and ``simulate``.

They reach the ``ledger`` command through the ``anvil_ledger.commands`` entry-point group,
so that the core never imports ``runners`` (``docs/design/architecture.md``, the layers).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from typing import TYPE_CHECKING, Any

from ledger.cli import REVIEW_HELP, exit_statuses, is_folder
from ledger.errors import UsageError

if TYPE_CHECKING:
    from runners.publication import SigningSetup


def register_run(commands: Any, common: argparse.ArgumentParser) -> None:
    """Adds ``ledger run PLAN --raw-dir DIR [--resume]``."""
    run = commands.add_parser(
        "run",
        parents=[common],
        help="run a plan's workload and evidence stages against its endpoints",
        description="Measure every arm x stage x cell of PLAN.toml and write the raw "
        "campaign folder DIR/<campaign_id>/.",
        epilog=exit_statuses(
            ok="every cell completed with at least its stage's min_success successful "
            "requests (default 1; failed requests are evidence, recorded either way)",
            refused="a cell fell short or a container was not ready (one line names each), "
            "or an error (a changed plan on --resume, an unset API key or environment_from "
            "variable)",
            unusable="a missing or malformed plan, a context target beyond what the endpoint "
            "or the plan allows",
            stopped="the complete cells are kept (finish with --resume)",
        ),
    )
    run.add_argument("plan", metavar="PLAN.toml", help="the run plan (a run-plan/v1 TOML file)")
    run.add_argument(
        "--raw-dir",
        required=True,
        metavar="DIR",
        help="where raw campaigns go (the run writes DIR/<campaign_id>/)",
    )
    run.add_argument(
        "--resume",
        action="store_true",
        help="finish an interrupted run of the same plan, keeping its complete cells",
    )
    run.set_defaults(func=_run)


def register_simulate(commands: Any, common: argparse.ArgumentParser) -> None:
    """Adds ``ledger simulate --port P [--host ADDRESS] [--profile FILE]``."""
    simulate = commands.add_parser(
        "simulate",
        parents=[common],
        help="serve the simulated OpenAI-compatible endpoint (on 127.0.0.1 by default)",
        description="A real HTTP server with a timing model, prefix cache, limits and "
        "seeded fault injection: /v1/models, /v1/chat/completions, /v1/completions, /metrics, "
        "/sim/requests. "
        "It serves until a signal stops it.",
        epilog=exit_statuses(
            ok=None,
            refused=None,
            unusable="a port in use, a missing or malformed --profile",
            stopped="the server shut down",
            writes_stdout=False,
        ),
    )
    simulate.add_argument("--port", type=_port, required=True, help="the TCP port to listen on")
    simulate.add_argument(
        "--host",
        type=_address,
        default="127.0.0.1",
        metavar="ADDRESS",
        help="the IP address to listen on (default 127.0.0.1; 0.0.0.0 in a container, so that "
        "a published port reaches it)",
    )
    simulate.add_argument("--profile", metavar="FILE", help="a TOML profile (default: built in)")
    simulate.set_defaults(func=_simulate)


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a TCP port is 1 to 65535, got {value}")
    return value


def _address(text: str) -> str:
    import ipaddress

    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an IP address, got {text!r}") from None


def register_sign(commands: Any, common: argparse.ArgumentParser) -> None:
    """Adds ``ledger sign CAMPAIGN``."""
    sign = commands.add_parser(
        "sign",
        parents=[common],
        help="sign a published campaign's statement, or a gate's verification summary, with "
        "sigstore (keyless)",
        description="A campaign folder: declares the bundle in manifest.json, then signs the "
        "statement over it into statement.sigstore.json (a DSSE bundle). A verification "
        "summary (ledger gate --attest FILE): signs it into FILE.sigstore.json. Needs the "
        "network and an identity: --identity-token, or the ambient OIDC credential of a CI "
        "job (GitHub Actions: 'id-token: write').",
        epilog=exit_statuses(
            ok="signed",
            refused="nothing to sign, the seal does not hold, or signing failed (no "
            "ambient OIDC credential)",
            unusable="a missing folder or file, a file that is no verification summary, a "
            "bundle that exists (without --replace), an identity token or --trust-config "
            "that cannot be used",
        ),
    )
    sign.add_argument(
        "campaign",
        metavar="CAMPAIGN_DIR|SUMMARY",
        help="the published campaign folder, or a verification summary that ledger gate "
        "--attest wrote",
    )
    _add_signing_options(sign)
    sign.add_argument(
        "--replace",
        action="store_true",
        help="sign again a statement the campaign's bundle already signs, or a summary "
        "whose bundle exists",
    )
    sign.add_argument("--reseal-after-review", action="store_true", help=REVIEW_HELP)
    sign.set_defaults(func=_sign)


def _add_signing_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--identity-token",
        metavar="TOKEN",
        default=os.environ.get("SIGSTORE_IDENTITY_TOKEN") or None,
        help="an OIDC identity token (default: $SIGSTORE_IDENTITY_TOKEN, else the ambient "
        "credential of a CI job)",
    )
    instance = parser.add_mutually_exclusive_group()
    instance.add_argument(
        "--trust-config",
        metavar="FILE",
        help="a sigstore client trust config: sign with a private instance",
    )
    instance.add_argument("--staging", action="store_true", help="sigstore's staging instance")


def _signing_setup(args: argparse.Namespace) -> SigningSetup:
    from runners.publication import SigningSetup

    return SigningSetup(args.identity_token, args.trust_config, args.staging)


def register_approve(commands: Any, common: argparse.ArgumentParser) -> None:
    """Adds ``ledger approve CAMPAIGN``."""
    approve = commands.add_parser(
        "approve",
        parents=[common],
        help="approve a campaign's promotion: an approval record, signed with sigstore",
        description="Writes approvals/<arm>-<digest>.json naming the exact summary that "
        "would authorize promotion (every other rule of the policy must hold), and signs it "
        "(keyless, ambient OIDC) unless --no-sign. Then run 'ledger decide' again.",
        epilog=exit_statuses(
            ok="the record is written (and signed, unless --no-sign)",
            refused="the seal does not hold, the campaign is not approvable, or signing failed",
            unusable="a missing folder, a malformed --policy, an arm the campaign lacks",
        ),
    )
    approve.add_argument("campaign", metavar="CAMPAIGN_DIR", help="the campaign folder")
    approve.add_argument(
        "--policy",
        metavar="FILE",
        help="a promotion-policy/v1 TOML file (default: the policy shipped with ledger)",
    )
    approve.add_argument(
        "--candidate", metavar="ARM", help="the arm to approve (default: from the A/B)"
    )
    approve.add_argument("--note", help="a sentence recorded in the approval")
    approve.add_argument("--reseal-after-review", action="store_true", help=REVIEW_HELP)
    approve.add_argument(
        "--no-sign",
        action="store_true",
        help="only write the record (sign it yourself: python -m sigstore sign RECORD)",
    )
    _add_signing_options(approve)
    approve.set_defaults(func=_approve)


def _approve(args: argparse.Namespace) -> int:
    from ledger.promotion import write_approval_record
    from ledger.promotion.policy import load_policy
    from runners.publication import sign_file

    if not is_folder(args.campaign, "approve"):
        return 2
    policy = load_policy(args.policy)
    try:
        record, _ = write_approval_record(
            args.campaign,
            policy,
            candidate=args.candidate,
            note=args.note,
            reseal_after_review=args.reseal_after_review,
        )
    except ValueError as e:
        print(f"ledger approve: not approvable: {e}", file=sys.stderr)
        return 1
    print(f"approval record: {record}")
    if not args.no_sign:
        print(f"signed: {sign_file(record, _signing_setup(args))}")
    return 0


def register_demo(commands: Any, common: argparse.ArgumentParser) -> None:
    """Adds ``ledger demo --out DIR``."""
    demo = commands.add_parser(
        "demo",
        parents=[common],
        help="the whole pipeline on the embedded simulated endpoint (run, derive, decide, "
        "publish, ticket, report, verify)",
        description="Needs no GPU and no server. Writes DIR/raw, DIR/private, DIR/public and "
        "DIR/tickets; prints the decision, its reasons and where the report is.",
        epilog=exit_statuses(
            ok="the publication verifies",
            refused="it does not, or a step failed",
            unusable="an --out that is not a new or empty folder",
        ),
    )
    demo.add_argument("--out", required=True, metavar="DIR", help="an empty or new folder")
    demo.set_defaults(func=_demo)


def _demo(args: argparse.Namespace) -> int:
    from runners.campaign.progress import progress_for
    from runners.demo import print_result, run_demo

    result = run_demo(args.out, progress=progress_for())
    print_result(result, sys.stdout)
    return 0 if result.verified.ok else 1


def register_audit(commands: Any, common: argparse.ArgumentParser) -> None:
    """Adds ``ledger audit DIR|URL --identity I --issuer X``."""
    audit = commands.add_parser(
        "audit",
        parents=[common],
        help="audit a published campaign (folder or URL): signature, subjects, every check",
        description="Fetch a published campaign (folder, or http(s) with size caps and no "
        "redirect to another host), verify the statement's sigstore bundle offline, check "
        "every subject digest against the files, then run every verify check; with "
        "--verification-summary, also check a gate's signed verification summary of it.",
        epilog=exit_statuses(
            ok="passed",
            refused="failed (each problem on a line)",
            unusable="a missing folder, a URL that cannot be fetched or a fetch past its "
            "limits, a bundle or trusted root that does not parse, a --tickets that is not "
            "a folder, a malformed --policy, a --verification-summary without its file or a "
            "policy to name",
        ),
    )
    audit.add_argument(
        "source", metavar="DIR|URL", help="a published campaign's folder, or its http(s) URL"
    )
    audit.add_argument(
        "--identity", required=True, help="the certificate identity that must have signed it"
    )
    audit.add_argument("--issuer", required=True, help="its OIDC issuer URL")
    roots = audit.add_mutually_exclusive_group()
    roots.add_argument(
        "--trusted-root",
        metavar="FILE",
        help="a trusted_root.json to pin (default: sigstore's production root, pinned in ledger)",
    )
    roots.add_argument("--staging", action="store_true", help="the pinned staging root")
    audit.add_argument(
        "--tickets",
        metavar="DIR",
        help="where linked tickets are that the campaign does not publish itself",
    )
    audit.add_argument(
        "--policy",
        metavar="FILE",
        help="the promotion policy a summary claiming promotion must meet, and the one a "
        "verification summary must name (default: the policy shipped with ledger)",
    )
    audit.add_argument(
        "--verification-summary",
        metavar="FILE",
        help="also check a gate's verification summary of the campaign (ledger gate --attest "
        "FILE, signed beside it as FILE.sigstore.json): signed by the identity, naming this "
        "campaign's manifest, the policy of --policy-digest, and a passed verdict",
    )
    audit.add_argument(
        "--policy-digest",
        metavar="SHA256",
        help="the sha256 of the promotion policy the summary must name (ledger gate prints "
        "it; default: that of --policy, which one of the two must give)",
    )
    audit.add_argument(
        "--summary-identity",
        metavar="IDENTITY",
        help="the identity that must have signed the summary (default: --identity)",
    )
    audit.add_argument(
        "--summary-issuer",
        metavar="ISSUER",
        help="its OIDC issuer URL (default: --issuer)",
    )
    audit.add_argument(
        "--timeout",
        type=_positive_float,
        default=30.0,
        metavar="SECONDS",
        help="the longest wait for a connection or the next bytes (default %(default)g)",
    )
    audit.add_argument(
        "--deadline",
        type=_positive_float,
        default=3600.0,
        metavar="SECONDS",
        help="the longest the whole fetch may take (default %(default)g)",
    )
    audit.add_argument(
        "--max-file-mib",
        type=_positive_float,
        default=256.0,
        metavar="MIB",
        help="the largest file fetched (default %(default)g)",
    )
    audit.set_defaults(func=_audit)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value <= 1e6:
        raise argparse.ArgumentTypeError(
            f"must be a number of seconds or MiB in (0, 1e6], got {text!r}"
        )
    return value


def _sign(args: argparse.Namespace) -> int:
    from runners.publication import sign, sign_summary

    if os.path.isfile(args.campaign):
        if args.reseal_after_review:
            raise UsageError("--reseal-after-review is for a campaign folder, not a summary")
        bundle, who = sign_summary(args.campaign, _signing_setup(args), replace=args.replace)
        print(f"signed: {bundle} (by {who})")
        return 0
    if not is_folder(args.campaign, "sign"):
        return 2
    bundle, who = sign(
        args.campaign,
        _signing_setup(args),
        replace=args.replace,
        reseal_after_review=args.reseal_after_review,
    )
    print(f"signed: {bundle} (by {who})")
    return 0


def _audit(args: argparse.Namespace) -> int:
    from ledger.promotion.policy import load_policy
    from ledger.signatures import UnusableInputError
    from runners.publication import AuditInputError, ExpectedSummary, FetchLimits, audit

    limits = FetchLimits(
        max_file_bytes=int(args.max_file_mib * (1 << 20)),
        stall_s=args.timeout,
        deadline_s=args.deadline,
    )
    if args.tickets is not None and not os.path.isdir(args.tickets):
        print(f"ledger audit: error: --tickets {args.tickets}: not a folder", file=sys.stderr)
        return 2
    problem = _summary_argument_problem(args)
    if problem is not None:
        print(f"ledger audit: error: {problem}", file=sys.stderr)
        return 2
    policy = load_policy(args.policy)
    summary = None
    if args.verification_summary is not None:
        summary = ExpectedSummary(
            args.verification_summary,
            args.policy_digest or policy.sha256,
            args.summary_identity or args.identity,
            args.summary_issuer or args.issuer,
        )
    try:
        result = audit(
            args.source,
            identity=args.identity,
            issuer=args.issuer,
            trusted_root=args.trusted_root,
            staging=args.staging,
            limits=limits,
            tickets=args.tickets,
            summary=summary,
            policy=policy,
        )
    except (AuditInputError, UnusableInputError) as e:
        print(f"ledger audit: error: {e.diagnostics()}", file=sys.stderr)
        return 2
    for problem in result.problems:
        print(problem)
    print("OK" if result.ok else "FAIL", file=sys.stderr)
    return 0 if result.ok else 1


def _summary_argument_problem(args: argparse.Namespace) -> str | None:
    from ledger.signatures import is_sha256

    given = args.verification_summary is not None
    if not given:
        extra = [
            name
            for name, value in (
                ("--policy-digest", args.policy_digest),
                ("--summary-identity", args.summary_identity),
                ("--summary-issuer", args.summary_issuer),
            )
            if value is not None
        ]
        return f"{extra[0]} is for --verification-summary" if extra else None
    if os.path.isdir(args.verification_summary):
        return f"--verification-summary {args.verification_summary}: a folder, not a file"
    if not os.path.isfile(args.verification_summary):
        return f"--verification-summary {args.verification_summary}: no such file"
    if args.policy_digest is None and args.policy is None:
        return "--verification-summary needs --policy or --policy-digest: the policy it must name"
    if args.policy_digest is not None and not is_sha256(args.policy_digest):
        return f"--policy-digest {args.policy_digest!r}: not a lowercase hex sha256"
    return None


def _run(args: argparse.Namespace) -> int:
    from runners.campaign import run_plan, success_shortfall
    from runners.campaign.closing import closing_table
    from runners.plan import load_plan

    plan = load_plan(args.plan)
    result = run_plan(plan, args.raw_dir, resume=args.resume)
    sys.stdout.write(closing_table(result.cells))
    print(f"raw campaign: {result.folder}", file=sys.stderr)
    if result.interrupted is not None:
        print(
            f"interrupted by {result.interrupted}; finish with: ledger run {args.plan} "
            f"--raw-dir {args.raw_dir} --resume",
            file=sys.stderr,
        )
        return result.stopped_status
    shortfall = success_shortfall(result.cells)
    for line in (*result.not_started, *([shortfall] if shortfall is not None else [])):
        print(f"ledger run: {line}", file=sys.stderr)
    return 0 if result.complete and shortfall is None and not result.not_started else 1


def _simulate(args: argparse.Namespace) -> int:
    from runners.simulate.profile import Profile, load_profile
    from runners.simulate.serve import serve

    profile = load_profile(args.profile) if args.profile else Profile()
    # Bound here, before saying so: a port in use is refused in one line, not after
    # "serving" was printed.
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    shown = f"[{args.host}]" if family == socket.AF_INET6 else args.host
    try:
        listener.bind((args.host, args.port))
        listener.listen(1024)
    except OSError as e:
        listener.close()
        raise UsageError(f"cannot listen on {shown}:{args.port}: {e.strerror or e}") from None
    print(f"serving {profile.model!r} on http://{shown}:{args.port}/v1", file=sys.stderr)
    serve(profile, fd=listener.fileno())
    return 0
