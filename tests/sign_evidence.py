"""Signs the repository's ``evidence/`` so that it verifies, and audits, by itself.

Each campaign gets a copy of the follow-up ticket it links (``tickets/<id>.md`` inside it,
as ``ledger ticket new`` now writes one), then is signed with ``ledger sign`` against a
private sigstore instance made for this run (``tests/private_sigstore.py``, served over
HTTP on 127.0.0.1). The instance's trusted root is written to
``tests/assets/evidence-signing/trusted_root.json``; its private keys exist only in this
process, so nobody can sign anything else under that root afterwards.

Run ``python -m tests.sign_evidence`` from the repository root after ``evidence/`` changes.
Real publications are signed by a CI identity on sigstore's public instance instead (see
the GitHub Actions job in docs/guides/publication.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ledger.evidence import manifest
from ledger.formats.schema import read_document
from ledger.reporting import tickets
from tests.private_sigstore import OIDC_ISSUER, SigstoreService

ROOT = Path(__file__).resolve().parent.parent
EVIDENCE = ROOT / "evidence"
TRUST = ROOT / "tests" / "assets" / "evidence-signing"
IDENTITY = "evidence-signing@anvil-ledger.invalid"
"""The identity every campaign of ``evidence/`` is signed by (with :data:`OIDC_ISSUER`)."""


def publish_tickets(campaign: Path) -> None:
    """Copies every ticket the campaign links from ``tickets/`` into it, re-sealed."""
    link = campaign / tickets.FOLLOW_UP_NAME
    if not link.exists():
        return
    files = {}
    for entry in read_document(link)["tickets"]:
        name = f"{tickets.TICKETS_FOLDER}/{entry['id']}.md"
        if not (campaign / name).exists():
            files[name] = (ROOT / name).read_bytes()
    if files:
        manifest.write_sealed(campaign, files, command="ticket publish", replace=False)


def main() -> int:
    TRUST.mkdir(parents=True, exist_ok=True)
    with SigstoreService() as service:
        config = service.write_trust_config(TRUST / "trust-config.json")
        for campaign in sorted(p for p in EVIDENCE.iterdir() if p.is_dir()):
            publish_tickets(campaign)
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "ledger",
                    "sign",
                    str(campaign),
                    "--trust-config",
                    str(config),
                    "--identity-token",
                    service.token(IDENTITY),
                ],
                check=True,
            )
        (TRUST / "trusted_root.json").write_text(
            json.dumps(service.instance.trusted_root(), indent=2) + "\n"
        )
        # The trust config names a server that is gone; only the root is kept.
        config.unlink()
    print(f"signed as {IDENTITY} ({OIDC_ISSUER}); root: {TRUST / 'trusted_root.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
