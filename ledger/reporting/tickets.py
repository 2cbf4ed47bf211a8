"""Follow-up tickets: ``tickets/<id>.md`` with front matter, linked both ways with a campaign.

A ticket is written from a campaign's failures, unmet rules and ``next_gate``; its front
matter names the campaign, and the campaign's ``follow-up.json`` names the ticket. The
tickets folder sits beside the evidence root (``evidence/`` and ``tickets/`` in a
repository; ``demo-out/public/`` and ``demo-out/tickets/`` for the demo).

Front matter is a small, strict subset of YAML: ``key: value`` lines between ``---``
lines, ``gates`` a JSON list (also valid YAML), nothing else.
"""

from __future__ import annotations

import datetime
import re
from pathlib import Path
from typing import Any

import attrs
import orjson

from ledger.errors import Error, InvalidArtifact, SchemaError, UsageError
from ledger.evidence import manifest
from ledger.formats.outputs import Changes, OutputExists
from ledger.formats.regular import read_regular
from ledger.formats.schema import document_bytes, read_document
from ledger.reporting import _markdown as markdown

__all__ = [
    "FOLLOW_UP_NAME",
    "FOLLOW_UP_SCHEMA",
    "STATUSES",
    "TICKETS_FOLDER",
    "LinkIssue",
    "Ticket",
    "TicketError",
    "campaign_link_issues",
    "campaigns_beside",
    "folder_issues",
    "needs_ticket",
    "new_ticket",
    "parse_ticket",
    "read_ticket",
    "tickets_folder_for",
]

TICKETS_FOLDER = "tickets"
FOLLOW_UP_NAME = "follow-up.json"
FOLLOW_UP_SCHEMA = "anvil-serving.follow-up/v1"
_ID = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}-[a-z0-9]+(-[a-z0-9]+)*")
_KEYS = ("id", "campaign", "status", "created", "gates")
STATUSES = ("open", "closed")


class TicketError(Error):
    """A ticket cannot be written or read."""


@attrs.frozen
class Ticket:
    """A ticket's front matter."""

    id: str
    campaign: str
    status: str
    created: str
    gates: tuple[str, ...]


def tickets_folder_for(campaign: Path) -> Path:
    """Where the tickets of a campaign live: beside its evidence root."""
    return campaign.resolve().parent.parent / TICKETS_FOLDER


def parse_ticket(text: str, *, source: str) -> Ticket:
    """Reads a ticket's front matter.

    Raises:
        TicketError: not front matter of the five keys, or a value out of form.
    """
    lines = text.split("\n")
    if not lines or lines[0] != "---" or "---" not in lines[1:]:
        raise TicketError(f"{source}: no front matter (a '---' line, keys, a '---' line)")
    end = lines.index("---", 1)
    values: dict[str, str] = {}
    for number, line in enumerate(lines[1:end], 2):
        key, sep, value = line.partition(": ")
        if not sep or key not in _KEYS or key in values:
            raise TicketError(f"{source}: line {number}: expected one of {', '.join(_KEYS)} once")
        values[key] = value.strip()
    missing = [k for k in _KEYS if k not in values]
    if missing:
        raise TicketError(f"{source}: front matter lacks {missing[0]}")
    if not _ID.fullmatch(values["id"]) or not _ID.fullmatch(values["campaign"]):
        raise TicketError(f"{source}: id and campaign must look like YYYY-MM-DD-slug")
    if values["status"] not in STATUSES:
        raise TicketError(f"{source}: status must be open or closed, got {values['status']!r}")
    try:
        datetime.date.fromisoformat(values["created"])
        gates = orjson.loads(values["gates"])
    except (ValueError, orjson.JSONDecodeError):
        raise TicketError(f"{source}: created must be YYYY-MM-DD and gates a JSON list") from None
    if not isinstance(gates, list) or not all(isinstance(g, str) for g in gates):
        raise TicketError(f"{source}: gates must be a list of gate names")
    return Ticket(
        values["id"], values["campaign"], values["status"], values["created"], tuple(gates)
    )


def read_ticket(path: Path) -> Ticket:
    """Reads ``tickets/<id>.md``; its id must be its file name.

    Raises:
        TicketError: unreadable or malformed.
    """
    try:
        text = read_regular(path).decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise TicketError(f"{path}: cannot read: {e}") from None
    ticket = parse_ticket(text, source=str(path))
    if ticket.id != path.stem:
        raise TicketError(f"{path}: id {ticket.id!r} is not the file name")
    return ticket


def needs_ticket(summary: dict[str, Any]) -> bool:
    """A campaign with failures or a next gate needs a durable follow-up."""
    failures = summary.get("failures")
    next_gate = (summary.get("decision") or {}).get("next_gate")
    return bool(failures) or bool(next_gate)


def _body(summary: dict[str, Any], ticket: Ticket) -> str:
    decision = summary.get("decision") or {}
    lines = [
        "---",
        f"id: {ticket.id}",
        f"campaign: {ticket.campaign}",
        f"status: {ticket.status}",
        f"created: {ticket.created}",
        f"gates: {orjson.dumps(list(ticket.gates)).decode()}",
        "---",
        "",
        f"# Follow-up: {ticket.campaign}",
        "",
        markdown.line(
            f"Decision: {', '.join(decision.get('decision_labels') or ()) or 'none'}; "
            f"promotion authorized: {str(bool(decision.get('promotion_authorized'))).lower()}."
        ),
        "",
        "## Next gate",
        "",
        # Reasons and failures quote the evidence (identities, request fields): text only.
        markdown.line(str(decision.get("next_gate") or "None stated.")),
        "",
    ]
    unmet = decision.get("unmet") or []
    if unmet:
        lines += ["## Unmet promotion rules", ""]
        lines += ["- " + markdown.line(f"{u['rule']}: {u['reason']}") for u in unmet] + [""]
    failures = [f for f in summary.get("failures") or () if isinstance(f, str)]
    lines += ["## Failures", ""]
    lines += [f"- {markdown.line(f)}" for f in failures] or ["None recorded."]
    lines += [
        "",
        f"Evidence: the campaign {ticket.campaign} (its summary.json and manifest.json).",
        "",
    ]
    return "\n".join(lines)


def _failed_gates(summary: dict[str, Any]) -> tuple[str, ...]:
    names = []
    for gate in summary.get("gates") or ():
        if isinstance(gate, dict) and (
            gate.get("passed") is False or gate.get("status") == "failed"
        ):
            names.append(str(gate.get("name") or gate.get("artifact")))
    return tuple(names)


def new_ticket(
    campaign: str | Path,
    *,
    tickets: str | Path | None = None,
    slug: str | None = None,
    created: str | None = None,
    reseal_after_review: bool = False,
) -> Path:
    """Writes a ticket from a campaign's decision, links it from the campaign's
    ``follow-up.json``, publishes a copy inside the campaign (``tickets/<id>.md``) and
    re-seals the campaign, all at once or not at all.

    Raises:
        TicketError: no readable summary or follow-up, a bad slug or date.
        OutputExists: the ticket exists.
        SealBroken: the campaign no longer matches its seal.
    """
    folder = Path(campaign)
    review = manifest.check_seal(folder, "ticket new", reseal_after_review=reseal_after_review)
    try:
        summary = read_document(folder / manifest.SUMMARY_NAME)
    except (OSError, InvalidArtifact, SchemaError) as e:
        raise TicketError(f"{folder}: no readable summary.json ({e})") from None
    campaign_id = str(summary["campaign_id"])
    name = f"{campaign_id[11:]}-follow-up" if slug is None else slug
    ticket_id = f"{campaign_id[:10]}-{name}"
    if not _ID.fullmatch(ticket_id):
        raise UsageError(f"slug must be lowercase words joined by '-', got {name!r}")
    day = created or datetime.datetime.now(datetime.UTC).date().isoformat()
    try:
        datetime.date.fromisoformat(day)
    except ValueError:
        raise UsageError(f"created must be YYYY-MM-DD, got {day!r}") from None
    ticket = Ticket(ticket_id, campaign_id, "open", day, _failed_gates(summary))
    if tickets is not None and Path(tickets).exists() and not Path(tickets).is_dir():
        raise UsageError(f"--tickets {tickets}: not a folder")
    target = (Path(tickets) if tickets else tickets_folder_for(folder)) / f"{ticket_id}.md"
    if target.exists():
        raise OutputExists(f"{target} exists")
    inside = folder / TICKETS_FOLDER / f"{ticket_id}.md"
    if inside.exists():
        # Written before with another tickets folder: the campaign's sealed copy would be
        # replaced, and no longer be the copy of the ticket people work on.
        raise OutputExists(f"{inside} exists (ticket {ticket_id} was opened before)")
    link = folder / FOLLOW_UP_NAME
    ids: list[str] = []
    if link.exists():
        try:
            ids = [t["id"] for t in read_document(link)["tickets"]]
        except (OSError, InvalidArtifact, SchemaError) as e:
            raise TicketError(f"{link}: {e}") from None
    follow_up = document_bytes(
        {
            "schema": FOLLOW_UP_SCHEMA,
            "campaign_id": campaign_id,
            "tickets": [{"id": i} for i in sorted({*ids, ticket_id})],
        }
    )
    body = _body(summary, ticket).encode()
    ticket_file = Changes()
    ticket_file.put(target.parent, target.name, body, replace=False)
    # The copy inside is what a downloaded publication verifies by itself; the one in the
    # tickets folder is the one people keep working on.
    manifest.write_sealed(
        folder,
        {FOLLOW_UP_NAME: follow_up, f"{TICKETS_FOLDER}/{ticket_id}.md": body},
        command="ticket new",
        checked=(review,),
        also=ticket_file,
    )
    return target


@attrs.frozen
class LinkIssue:
    """A ticket-link problem: the file it is about, relative to a display root."""

    where: str
    """``campaign`` (a campaign's file) or ``tickets`` (a ticket file)."""
    rel: str
    code: str
    message: str


def campaign_link_issues(folder: Path, summary: dict[str, Any], tickets: Path) -> list[LinkIssue]:
    """A public campaign that needs a follow-up must link tickets that exist and name it.

    A linked ticket is looked for inside the campaign first (``tickets/<id>.md``, published
    with it), then in ``tickets``, the folder beside the evidence root or the one given.
    """
    if not needs_ticket(summary):
        return []
    link = folder / FOLLOW_UP_NAME
    if not link.exists():
        return [
            LinkIssue(
                "campaign",
                FOLLOW_UP_NAME,
                "ticket-missing",
                "the campaign has failures or a next gate but links no ticket (ledger ticket new)",
            )
        ]
    try:
        ids = [t["id"] for t in read_document(link)["tickets"]]
    except (OSError, InvalidArtifact, SchemaError):
        return []  # the file's own findings say why
    found = []
    for ticket_id in ids:
        name = f"{ticket_id}.md"
        inside = folder / TICKETS_FOLDER / name
        path = inside if inside.exists() else tickets / name
        if not path.exists():
            found.append(
                LinkIssue(
                    "campaign",
                    FOLLOW_UP_NAME,
                    "ticket-missing",
                    f"links ticket {ticket_id}, but neither the campaign nor the tickets "
                    f"folder holds {TICKETS_FOLDER}/{name}",
                )
            )
            continue
        try:
            ticket = read_ticket(path)
        except TicketError as e:
            # A ticket that does not parse links nothing, wherever it is.
            rel = f"{TICKETS_FOLDER}/{name}" if path == inside else FOLLOW_UP_NAME
            found.append(LinkIssue("campaign", rel, "ticket-invalid", e.diagnostics()))
            continue
        if ticket.campaign != summary.get("campaign_id"):
            found.append(
                LinkIssue(
                    "campaign",
                    FOLLOW_UP_NAME,
                    "ticket-mismatch",
                    f"links ticket {ticket_id}, which names campaign {ticket.campaign}",
                )
            )
    return found


def campaigns_beside(tickets: Path) -> set[str]:
    """The campaigns of every evidence root beside a tickets folder: the folders of its
    parent that are campaigns, and those of its parent's other folders."""
    from ledger.evidence import tree

    found: set[str] = set()
    try:
        for child in tickets.parent.iterdir():
            if child == tickets or not child.is_dir() or child.is_symlink():
                continue
            if tree.is_campaign(child):
                found.add(child.name)
                continue
            found.update(c.name for c in tree.campaign_folders(child) if tree.is_campaign(c))
    except OSError:
        pass  # an unreadable neighbour vouches for nothing
    return found


def folder_issues(tickets: Path, campaigns: set[str]) -> list[LinkIssue]:
    """Every ticket of a folder must parse and name a campaign of the evidence root."""
    if not tickets.is_dir():
        return []
    found = []
    for path in sorted(tickets.glob("*.md")):
        rel = path.name
        try:
            ticket = read_ticket(path)
        except TicketError as e:
            found.append(LinkIssue("tickets", rel, "ticket-invalid", e.diagnostics()))
            continue
        if ticket.campaign not in campaigns:
            found.append(
                LinkIssue(
                    "tickets",
                    rel,
                    "ticket-campaign-unknown",
                    f"names campaign {ticket.campaign}, which is in no evidence root beside "
                    "the tickets folder",
                )
            )
    return found
