"""``ledger demo --out DIR``: the whole pipeline on the embedded simulated endpoint.

Run the demo plan (two simulated arms that differ in their profile; preflight, thinking
control, capacity at three context targets, endurance, context quality, GPU telemetry and
reserve), derive the A/B comparison, decide under the default policy, publish the
sanitized campaign, open its follow-up ticket, render the report (Markdown and HTML),
verify the publication, and say what was decided and why. Everything goes under ``DIR``:
``raw/``, ``private/`` (the publish map), ``public/``, ``tickets/``.
"""

from __future__ import annotations

import importlib.resources
import tomllib
from pathlib import Path
from typing import TextIO

import attrs

from ledger.derivation import derive_into
from ledger.errors import Terminated
from ledger.formats.outputs import OutputExists
from ledger.formats.schema import read_document
from ledger.promotion import decide
from ledger.promotion.policy import load_policy
from ledger.publication import publish
from ledger.reporting import write_report
from ledger.reporting.tickets import needs_ticket, new_ticket
from ledger.verification import Report, verify_paths
from runners.campaign import run_plan
from runners.campaign.progress import Progress
from runners.plan import parse_plan

__all__ = [
    "DECLARED",
    "DemoResult",
    "plan_text",
    "print_result",
    "run_demo",
]

DECLARED = ("simulated_profile",)
"""The one identity key the demo's arms differ in."""


@attrs.frozen
class DemoResult:
    """Where the demo left its outputs, and what it decided."""

    public: Path
    report: Path
    html: Path
    ticket: Path | None
    summary: dict[str, object]
    verified: Report


def plan_text() -> str:
    """The demo plan, as shipped (``examples/simulated.toml`` is the same file)."""
    return (importlib.resources.files("runners") / "_demo" / "plan.toml").read_text()


def run_demo(out: str | Path, *, progress: Progress | None = None) -> DemoResult:
    """Runs the whole pipeline into ``out`` (which must be empty or absent).

    Raises:
        RunnerError: ``out`` holds files already.
    """
    root = Path(out)
    if root.exists() and not root.is_dir():
        raise OutputExists(f"{root} exists and is not a folder; the demo writes a new folder")
    if root.exists() and any(root.iterdir()):
        raise OutputExists(f"{root} is not empty; the demo writes a new folder (remove it first)")
    plan = parse_plan(tomllib.loads(plan_text()), source="demo plan")
    result = run_plan(plan, root / "raw", progress=progress)
    # Interrupted, the run stops where it is (its folder sealed and resumable) and so does
    # the demo: nothing is derived from half a campaign.
    if result.interrupted == "SIGTERM":
        raise Terminated
    if result.interrupted is not None:
        raise KeyboardInterrupt
    raw = result.folder
    arms = [a.name for a in plan.arms]
    derive_into(raw, arms[0], arms[1], kind="ab", differs=DECLARED)
    decide(raw, load_policy())
    published = publish(raw, root / "public", digest_map=root / "private" / "publish-map.json")
    summary = read_document(published.folder / "summary.json")
    ticket = None
    if needs_ticket(summary):
        ticket = new_ticket(
            published.folder, tickets=root / "tickets", created=plan.campaign_id[:10]
        )
    write_report(published.folder, ("md", "html"))
    verified = verify_paths([str(root / "public")])
    return DemoResult(
        published.folder,
        published.folder / "report.md",
        published.folder / "report.html",
        ticket,
        summary,
        verified,
    )


def print_result(result: DemoResult, stream: TextIO) -> None:
    """The decision, its reasons, and where everything is."""
    decision = result.summary["decision"]
    assert isinstance(decision, dict)
    authorized = "authorized" if decision["promotion_authorized"] else "NOT authorized"

    def say(text: str = "") -> None:
        print(text, file=stream)

    say()
    say(f"decision: {', '.join(decision['decision_labels'])}; promotion {authorized}")
    for unmet in decision.get("unmet") or ():
        say(f"  because {unmet['rule']}: {unmet['reason']}")
    reserve = [u for u in decision.get("unmet") or () if u["rule"] == "reserve"]
    if reserve and "no GPU reading" in reserve[0]["reason"]:
        say(
            "  (this machine has no NVIDIA GPU: the reserve evidence is recorded as "
            "unavailable, with NVML's error, and promotion cannot be authorized without it)"
        )
    if any(u["rule"] == "restoration" for u in decision.get("unmet") or ()):
        say(
            "  (the simulated endpoints are processes, not containers: there is no serving "
            "container whose restoration could be shown)"
        )
    say(f"next gate: {decision.get('next_gate')}")
    say(f"report: {result.report}")
    say(f"report (HTML): {result.html}")
    if result.ticket is not None:
        say(f"ticket: {result.ticket}")
    say(f"verify {result.public.parent}: {result.verified.summary_line()}")
