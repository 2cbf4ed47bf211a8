"""Follow-up tickets, and verify's check that campaigns and tickets link both ways."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ledger.errors import UsageError
from ledger.formats.outputs import OutputExists
from ledger.reporting.tickets import TicketError, new_ticket, parse_ticket, read_ticket
from tests.conftest import ROOT, CliRun, forge_seal, verify_json

SEED = "2026-09-17-glm53-mixed35-startup"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A copy of this repository's evidence/ and tickets/."""
    shutil.copytree(ROOT / "evidence", tmp_path / "evidence")
    shutil.copytree(ROOT / "tickets", tmp_path / "tickets")
    return tmp_path


def _codes(report: dict[str, Any]) -> list[tuple[str, str]]:
    return sorted(
        (f["code"], f["path"]) for f in report["findings"] if f["code"].startswith("ticket-")
    )


def test_the_repository_links_both_ways(repo: Path, cli: CliRun) -> None:
    status, report = verify_json(cli, repo / "evidence")
    assert status == 0, report
    assert _codes(report) == []


def test_a_ticket_written_from_a_decision(repo: Path) -> None:
    folder = repo / "evidence" / SEED
    (folder / "follow-up.json").unlink()
    forge_seal(folder)
    for old in (repo / "tickets").glob("2026-09-17-*.md"):
        old.unlink()
    path = new_ticket(folder, slug="host-memory", created="2026-11-29")
    assert path == repo / "tickets" / "2026-09-17-host-memory.md"
    ticket = read_ticket(path)
    assert (ticket.campaign, ticket.status, ticket.created) == (SEED, "open", "2026-11-29")
    assert ticket.gates == ("candidate readiness",)
    text = path.read_text()
    assert "Managed host-memory containment and loader diagnosis before retry." in text
    assert "- Global OOM killed desktop ChatGPT process" in text
    assert (
        '"tickets": [\n    {\n      "id": "2026-09-17-host-memory"'
        in (folder / "follow-up.json").read_text()
    )
    with pytest.raises(OutputExists, match="exists"):
        new_ticket(folder, slug="host-memory", created="2026-11-29")
    # Another tickets folder: the campaign's sealed copy of the ticket was replaced, and
    # the two copies disagreed with nothing to say so.
    copy = folder / "tickets" / "2026-09-17-host-memory.md"
    published = copy.read_bytes()
    elsewhere = repo / "elsewhere"
    with pytest.raises(OutputExists, match=f"^{copy} exists \\(ticket 2026-09-17-host-memory"):
        new_ticket(folder, slug="host-memory", created="2026-12-06", tickets=elsewhere)
    assert copy.read_bytes() == published and not elsewhere.exists()
    with pytest.raises(UsageError, match="slug must be"):
        new_ticket(folder, slug="Host Memory")


def _unpublish_tickets(campaign: Path) -> None:
    """Removes the copies of its tickets a campaign publishes: links resolve beside it."""
    shutil.rmtree(campaign / "tickets")
    forge_seal(campaign)


def test_verify_finds_every_broken_link(repo: Path, cli: CliRun) -> None:
    evidence, tickets = repo / "evidence", repo / "tickets"
    for campaign in evidence.iterdir():
        _unpublish_tickets(campaign)
    # A campaign whose link was removed, one that links a ticket naming another campaign,
    # a ticket naming a campaign that is not there, and one without front matter.
    (evidence / SEED / "follow-up.json").unlink()

    forge_seal(evidence / SEED)
    linked = tickets / "2026-09-02-sm120-qualification-follow-up.md"
    linked.write_text(
        linked.read_text().replace("campaign: 2026-09-02-glm53", "campaign: 2026-09-03-glm53")
    )
    (tickets / "2026-10-01-orphan.md").write_text(
        "---\nid: 2026-10-01-orphan\ncampaign: 2026-10-01-gone\nstatus: open\n"
        "created: 2026-10-01\ngates: []\n---\n"
    )
    (tickets / "2026-10-02-notes.md").write_text("just notes\n")
    status, report = verify_json(cli, evidence)
    assert status == 1
    assert _codes(report) == [
        ("ticket-campaign-unknown", f"{repo}/tickets/2026-09-02-sm120-qualification-follow-up.md"),
        ("ticket-campaign-unknown", f"{repo}/tickets/2026-10-01-orphan.md"),
        ("ticket-invalid", f"{repo}/tickets/2026-10-02-notes.md"),
        (
            "ticket-mismatch",
            f"{evidence}/2026-09-02-glm53-sglang-sm120-qualification/follow-up.json",
        ),
        ("ticket-missing", f"{evidence}/{SEED}/follow-up.json"),
    ]
    # A link to a ticket file that is gone.
    (tickets / "2026-09-08-linux-benchmark-evidence-gaps.md").unlink()
    _, report = verify_json(cli, evidence)
    missing = [m for m in report["findings"] if m["code"] == "ticket-missing"]
    assert [m["path"] for m in missing] == [
        f"{evidence}/2026-09-08-glm53-linux-wsl-comparison/follow-up.json",
        f"{evidence}/{SEED}/follow-up.json",
    ]
    assert "neither the campaign nor the tickets folder holds" in missing[0]["message"]


def test_a_publication_verifies_without_the_tickets_folder(repo: Path, cli: CliRun) -> None:
    """Each campaign publishes the ticket it links: evidence/ alone verifies."""
    shutil.rmtree(repo / "tickets")
    status, report = verify_json(cli, repo / "evidence")
    assert status == 0, report
    # Without the published copy, the link needs the tickets folder: --tickets names it.
    _unpublish_tickets(repo / "evidence" / SEED)
    status, report = verify_json(cli, repo / "evidence")
    assert _codes(report) == [("ticket-missing", f"{repo}/evidence/{SEED}/follow-up.json")]
    kept = repo / "kept"
    kept.mkdir()
    shutil.copy(ROOT / "tickets" / "2026-09-17-mixed35-startup-host-memory.md", kept)
    status, report = verify_json(cli, "--tickets", kept, repo / "evidence")
    assert _codes(report) == []
    status, _, err = cli("verify", "--tickets", str(repo / "nowhere"), str(repo / "evidence"))
    assert (
        status == 2
        and err.strip() == f"ledger verify: error: --tickets {repo}/nowhere: not a folder"
    )


@pytest.mark.parametrize(
    ("edit", "code"),
    [
        (lambda t: t.replace("campaign: 2026-09-17", "campaign: 2026-09-18"), "ticket-mismatch"),
        (lambda t: "no front matter\n" + t, "ticket-invalid"),
    ],
    ids=["names-another-campaign", "malformed"],
)
def test_a_published_ticket_is_checked_like_one_beside(
    repo: Path, cli: CliRun, edit: Any, code: str
) -> None:
    campaign = repo / "evidence" / SEED
    (inside,) = (campaign / "tickets").glob("*.md")
    inside.write_text(edit(inside.read_text()))
    forge_seal(campaign)
    status, report = verify_json(cli, repo / "evidence")
    assert status == 1
    where = f"{campaign}/follow-up.json" if code == "ticket-mismatch" else str(inside)
    assert _codes(report) == [(code, where)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("no front matter\n", "no front matter"),
        ("---\nid: 2026-01-01-a\n---\n", "lacks campaign"),
        (
            "---\nid: x\ncampaign: y\nstatus: open\ncreated: 2026-01-01\ngates: []\n---\n",
            "YYYY-MM-DD-slug",
        ),
        (
            "---\nid: 2026-01-01-a\ncampaign: 2026-01-01-b\nstatus: done\ncreated: 2026-01-01\ngates: []\n---\n",
            "status must be open or closed",
        ),
        (
            "---\nid: 2026-01-01-a\ncampaign: 2026-01-01-b\nstatus: open\ncreated: soon\ngates: []\n---\n",
            "created must be",
        ),
        ("---\nid: 2026-01-01-a\nid: 2026-01-01-a\n---\n", "line 3"),
    ],
)
def test_malformed_front_matter(text: str, message: str) -> None:
    with pytest.raises(TicketError, match=message):
        parse_ticket(text, source="t.md")


def test_ticket_command(repo: Path, cli: CliRun) -> None:
    folder = repo / "evidence" / SEED
    status, out, _ = cli(
        "ticket", "new", str(folder), "--slug", "retry-plan", "--created", "2026-11-29"
    )
    assert status == 0 and out.strip() == f"ticket: {repo / 'tickets' / '2026-09-17-retry-plan.md'}"
    status, _, err = cli("ticket", "new", str(repo / "nowhere"))
    assert status == 2 and err.strip().endswith("nowhere: no such folder")
    status, report = verify_json(cli, repo / "evidence")
    # The campaign was signed: its new ticket changed what the signature covered, so the
    # bundle no longer signs its statement until 'ledger sign' runs again.
    assert status == 1
    assert {(f["code"], f["path"]) for f in report["findings"] if f["severity"] == "error"} == {
        ("bundle-mismatch", f"{folder}/statement.sigstore.json")
    }
    assert (folder / "tickets" / "2026-09-17-retry-plan.md").read_bytes() == (
        repo / "tickets" / "2026-09-17-retry-plan.md"
    ).read_bytes()


@pytest.mark.parametrize("where", ["given", "beside-one-campaign"])
def test_a_linked_ticket_that_does_not_parse_links_nothing(
    repo: Path, cli: CliRun, where: str
) -> None:
    """Found in --tickets, or beside a campaign verified alone (where no folder check
    runs), a junk ticket is still reported at the link."""
    campaign = repo / "evidence" / SEED
    _unpublish_tickets(campaign)
    junk = repo / "kept" if where == "given" else repo / "tickets"
    junk.mkdir(exist_ok=True)
    (junk / "2026-09-17-mixed35-startup-host-memory.md").write_text("just notes\n")
    extra = ["--tickets", junk] if where == "given" else []
    status, report = verify_json(cli, *extra, campaign)
    assert status == 1
    assert _codes(report) == [("ticket-invalid", f"{campaign}/follow-up.json")]


def test_verify_checks_the_tickets_beside_the_root_even_with_tickets_given(
    repo: Path, cli: CliRun
) -> None:
    (repo / "tickets" / "2026-10-02-notes.md").write_text("just notes\n")
    kept = repo / "kept"
    kept.mkdir()
    status, report = verify_json(cli, "--tickets", kept, repo / "evidence")
    assert status == 1
    assert _codes(report) == [("ticket-invalid", f"{repo}/tickets/2026-10-02-notes.md")]


def test_ticket_new_refuses_a_tickets_path_that_is_a_file(repo: Path, cli: CliRun) -> None:
    folder = repo / "evidence" / SEED
    before = (folder / "manifest.json").read_bytes()
    status, _, err = cli(
        "ticket", "new", str(folder), "--tickets", str(repo / "evidence" / SEED / "summary.json")
    )
    assert status == 2
    assert err.strip().endswith(f"--tickets {folder}/summary.json: not a folder")
    assert (folder / "manifest.json").read_bytes() == before


def test_a_tickets_folder_shared_by_two_roots_names_campaigns_of_either(
    repo: Path, two_arm_campaign: Path, cli: CliRun
) -> None:
    """raw/ and evidence/ share tickets/: verifying raw/ alone, a ticket of a published
    campaign is no unknown campaign (it was ticket-campaign-unknown, exit 1)."""
    raw = repo / "raw"
    raw.mkdir()
    shutil.copytree(two_arm_campaign, raw / two_arm_campaign.name)
    status, report = verify_json(cli, raw)
    assert status == 0, report["findings"]
    assert _codes(report) == []
    # A ticket of a campaign in no root beside the folder is still unknown.
    (repo / "tickets" / "2026-10-01-orphan.md").write_text(
        "---\nid: 2026-10-01-orphan\ncampaign: 2026-10-01-gone\nstatus: open\n"
        "created: 2026-10-01\ngates: []\n---\n"
    )
    status, report = verify_json(cli, raw)
    assert status == 1
    assert _codes(report) == [("ticket-campaign-unknown", f"{repo}/tickets/2026-10-01-orphan.md")]
    # A campaign folder right beside the tickets folder is a neighbour too.
    (repo / "2026-10-01-gone").mkdir()
    (repo / "2026-10-01-gone" / "manifest.json").write_text("{}")
    status, report = verify_json(cli, raw)
    assert status == 0 and _codes(report) == []


def test_a_ticket_opened_from_inside_the_campaign_goes_where_it_would_from_outside(
    repo: Path, cli: CliRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = repo / "evidence" / SEED
    (folder / "follow-up.json").unlink()
    forge_seal(folder)
    for old in (repo / "tickets").glob("2026-09-17-*.md"):
        old.unlink()
    monkeypatch.chdir(folder)
    status, _, err = cli("ticket", "new", ".", "--slug", "inside", "--created", "2026-11-29")
    assert status == 0, err
    assert (repo / "tickets" / "2026-09-17-inside.md").is_file()
    assert (folder / "tickets" / "2026-09-17-inside.md").is_file()
    assert not (repo.parent / "tickets").exists()


def test_a_ticket_shows_the_evidence_it_quotes_as_text() -> None:
    """Unmet reasons and failures quote identities and request fields: a key holding a
    line break, a heading and a script rendered as a heading, a table and a script."""
    import re

    from markdown_it import MarkdownIt

    from ledger.reporting.tickets import Ticket, _body

    hostile = "identities differ in undeclared x\n# Pwned heading\n| <script>x</script> | ![](https://e.example/p.png)"
    summary = {
        "failures": [hostile, "- a list of its own"],
        "decision": {"decision_labels": ["no-promotion"], "promotion_authorized": False,
                     "next_gate": hostile, "unmet": [{"rule": "ab-matched", "reason": hostile}]},
    }  # fmt: skip
    text = _body(summary, Ticket("2026-11-29-x", "2026-11-29-c", "open", "2026-11-29", ()))
    page = MarkdownIt("commonmark", {"html": True}).enable("table").render(text)
    tags = re.findall(r"<([a-z][a-z0-9]*)[\s>]", page)
    assert "script" not in tags and "img" not in tags and "table" not in tags
    assert tags.count("h1") == 1  # the ticket's own title
    assert page.count("&lt;script&gt;x&lt;/script&gt;") == 3


def test_verify_public_scans_what_the_repository_publishes_beside_its_campaigns(
    repo: Path, cli: CliRun
) -> None:
    """A ticket opened on a raw campaign quotes its raw values, and it lands in the tickets
    folder an evidence repository publishes; notes lie at the evidence root. Neither was
    scanned, so a token in them passed verify --public."""
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    ticket = repo / "tickets" / "2026-09-02-sm120-qualification-follow-up.md"
    ticket.write_text(
        ticket.read_text() + f"\nrequest.body.api_token differs (null vs {token!r})\n"
    )
    (repo / "evidence" / "notes.md").write_text(f"rotate {token}\n")
    # CI configuration is published too, in a hidden folder no campaign is named like.
    (repo / "evidence" / ".github" / "workflows").mkdir(parents=True)
    (repo / "evidence" / ".github" / "workflows" / "ci.yml").write_text(f"token: {token}\n")
    (repo / "evidence" / f"{token}.md").write_text("named after a token\n")
    status, report = verify_json(cli, "--public", repo / "evidence")
    assert status == 1
    found = sorted(
        (f["path"], f["message"].split(": ")[-1])
        for f in report["findings"]
        if f["code"] == "private-data"
    )
    assert found == [
        (f"{repo}/evidence/.github/workflows/ci.yml", "credential in a public file"),
        (f"{repo}/evidence/<redacted:credential>.md", "credential in a public file name"),
        (f"{repo}/evidence/notes.md", "credential in a public file"),
        (f"{repo}/tickets/{ticket.name}", "credential in a public file"),
    ]
    assert token not in json.dumps(report)


def test_verify_public_reads_links_and_utf16_beside_the_campaigns(
    repo: Path, tmp_path: Path, cli: CliRun
) -> None:
    """Git publishes a symlink's target text, a copy that follows links publishes what it
    leads to, and a forge shows a UTF-16 file as text: each passed verify --public."""
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    evidence = repo / "evidence"
    (evidence / "README.md").symlink_to(f"notes-{token}.md")
    outside = tmp_path / "private.md"
    outside.write_text(f"rotate {token}\n")
    (evidence / "outside.md").symlink_to(outside)
    (evidence / "utf16.md").write_bytes(f"K={token}\n".encode("utf-16"))
    (evidence / ".github").mkdir()
    (evidence / ".github" / "notes.txt").write_bytes(f"k: {token}\n".encode("utf-16-le"))
    (repo / "tickets" / f"{token}.md").write_text("not a ticket\n")
    status, report = verify_json(cli, "--public", evidence)
    assert status == 1
    found = sorted(
        (f["path"].rsplit("/", 1)[-1], f["code"], f["message"].split(": ")[-1])
        for f in report["findings"]
        if f["code"] in ("private-data", "path-escape", "ticket-invalid")
    )
    assert found == [
        ("<redacted:credential>.md", "private-data", "credential in a public file name"),
        ("<redacted:credential>.md", "ticket-invalid",
         "no front matter (a '---' line, keys, a '---' line)"),
        ("README.md", "private-data", "credential in a public symlink's target"),
        ("notes.txt", "private-data", "credential in a public file (read as UTF-16)"),
        ("outside.md", "path-escape", "a symlink leading out of the folder it is published in"),
        ("outside.md", "private-data", "credential in a public file"),
        ("utf16.md", "private-data", "credential in a public file (read as UTF-16)"),
    ]  # fmt: skip
    # Nothing printed shows the token: a ticket's parse error names its path, masked.
    assert token not in json.dumps(report)
    # Without --public a folder is published by its own files alone, as before.
    status, report = verify_json(cli, repo / "evidence")
    assert not any(f["code"] == "private-data" for f in report["findings"])


def test_an_empty_slug_is_refused_not_replaced_by_the_default(repo: Path, cli: CliRun) -> None:
    folder = repo / "evidence" / SEED
    status, _, err = cli("ticket", "new", str(folder), "--slug", "")
    assert status == 2 and "slug must be lowercase words joined by '-', got ''" in err
