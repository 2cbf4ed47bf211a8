"""Findings: what verify reports, each with a stable code.

Codes are part of the interface (CI scripts match on them): never rename one; add new ones.
The documentation's table of codes is generated from :data:`CODES`.
"""

from __future__ import annotations

from typing import Literal

import attrs

__all__ = ["CHECKS", "CODES", "Finding", "Issue", "Severity", "check_of"]

Severity = Literal["error", "warning"]

CHECKS: dict[str, dict[str, tuple[Severity, str]]] = {
    "reading": {
        "file-unreadable": ("error", "a file of the evidence cannot be opened or read"),
        "file-changed": ("error", "a file changed, vanished or was replaced while being verified"),
        "not-regular-file": ("error", "a FIFO, socket or device where an artifact should be"),
        "json-too-large": ("error", "a JSON artifact over the size cap (not parsed; still hashed)"),
        "too-large-to-scan": (
            "error",
            "a public text file over the size cap (hashed, not scanned for private data)",
        ),
        "json-bom": ("error", "a JSON artifact starts with a byte-order mark"),
        "json-encoding": ("error", "a JSON artifact is not UTF-8"),
        "json-syntax": ("error", "a JSON artifact does not parse"),
        "json-nonfinite": ("error", "NaN or Infinity in a JSON artifact"),
        "json-too-deep": ("error", "a JSON artifact nests deeper than the cap"),
        "duplicate-key": ("error", "an object holds the same key twice"),
    },
    "schemas": {
        "schema-undeclared": ("warning", "a JSON artifact has no schema field"),
        "schema-unknown": ("error", "a schema field names no known kind or version"),
        "schema-invalid": ("error", "a document breaks its schema"),
        "schema-mismatch": ("error", "the manifest records another schema than the document's"),
    },
    "campaign layout and manifest": {
        "no-campaign": ("error", "a folder given to verify holds no campaign"),
        "campaign-id-mismatch": ("error", "campaign_id differs from the campaign folder's name"),
        "manifest-missing": ("error", "a campaign folder has no manifest.json"),
        "hash-mismatch": ("error", "a file's SHA-256 differs from its manifest entry"),
        "size-mismatch": ("error", "a file's size differs from its manifest entry"),
        "missing-artifact": (
            "error",
            "an artifact listed or named is neither present nor withheld",
        ),
        "unlisted-file": ("error", "a file in the campaign folder is not in the manifest"),
        "withheld-artifact": ("warning", "an artifact is declared withheld (operator-private)"),
        "sha256sums-missing": ("error", "a campaign folder has no SHA256SUMS"),
        "sha256sums-invalid": ("error", "a SHA256SUMS line is not '<hex>  <path>'"),
        "sha256sums-mismatch": (
            "error",
            "SHA256SUMS is not the bytes seal writes for the manifest and its seal files",
        ),
        "resealed-after-review": (
            "warning",
            (
                "a command re-sealed the campaign over files that no longer matched its seal, "
                "after review (--reseal-after-review)"
            ),
        ),
    },
    "path safety": {
        "path-absolute": ("error", "an absolute path where a campaign-relative one is required"),
        "path-escape": ("error", "a path or symlink leads out of the campaign folder"),
        "path-invalid": ("error", "a path that is not normalized POSIX (./, //, \\, empty)"),
        "path-duplicate": ("error", "the same path listed twice"),
        "path-case-conflict": ("error", "two paths that differ only by letter case"),
        "symlink": ("warning", "a symlink inside the campaign folder (followed; it stays inside)"),
    },
    "references and arithmetic": {
        "reference-unresolved": ("error", "a {path, sha256} reference names no artifact"),
        "reference-mismatch": ("error", "a reference's sha256 differs from the artifact's"),
        "reference-withheld": ("warning", "a reference names a withheld artifact (not checkable)"),
        "derived-mismatch": (
            "error",
            "a derived number differs from its own row or from its recomputation from raw rows",
        ),
    },
    "gates and decisions": {
        "gate-inconsistent": ("error", "a gate's verdict contradicts its own counts"),
        "gate-failed-all-passed": ("warning", "a gate failed although every check passed"),
        "gate-count-mismatch": ("error", "completed + failed differs from requests"),
        "gate-rate-mismatch": ("error", "passed / attempted differs from pass_rate"),
        "ineligible-headline": (
            "error",
            "a headline result uses a population not performance-eligible",
        ),
        "decision-inconsistent": (
            "error",
            "identity and decision disagree on promotion_authorized",
        ),
        "promotion-incomplete": (
            "error",
            (
                "promotion authorized on an incomplete campaign, without a candidate, or with a "
                "required gate missing or failed"
            ),
        ),
        "promotion-contradicts-label": (
            "error",
            "promotion authorized with a no-promotion/rejected label",
        ),
        "promotion-without-ab": (
            "error",
            "promotion authorized without an A/B comparison artifact",
        ),
        "promotion-without-reserve": (
            "error",
            (
                "promotion authorized without post-workload GPU reserve evidence at the policy's "
                "threshold on every card"
            ),
        ),
        "promotion-unmatched-ab": (
            "error",
            "promotion authorized on an A/B comparison the policy does not count as matched",
        ),
        "promotion-without-restoration": (
            "error",
            "promotion authorized without evidence that the serving container was left unchanged",
        ),
        "promotion-without-approval": (
            "error",
            "promotion authorized without an approval of this summary signed by an allowed approver",
        ),
        "approval-unsigned": (
            "error",
            "a file under approvals/ is not an approval record with a bundle that signs it",
        ),
    },
    "publication": {
        "private-data": (
            "error",
            "a public artifact holds a credential, GPU id, private endpoint or host path",
        ),
        "sanitizer-outdated": (
            "warning",
            (
                "a publication names older sanitizer rules than the current ones (checked "
                "against the rules it names)"
            ),
        ),
        "sanitizer-unknown": (
            "error",
            (
                "a publication names sanitizer rules this ledger does not ship (checked "
                "against the current rules)"
            ),
        ),
        "statement-invalid": ("error", "statement.intoto.json is not an in-toto Statement v1"),
        "statement-mismatch": (
            "error",
            (
                "the statement's subjects disagree with the published files, or its predicate with "
                "the campaign"
            ),
        ),
        "seal-file-missing": (
            "error",
            "manifest.json declares a statement or sigstore bundle that the campaign lacks",
        ),
        "bundle-invalid": ("error", "statement.sigstore.json is not a DSSE bundle verify can read"),
        "bundle-mismatch": (
            "error",
            (
                "statement.sigstore.json does not sign statement.intoto.json, or its signature "
                "does not hold under its own certificate"
            ),
        ),
    },
    "follow-up tickets": {
        "ticket-missing": (
            "error",
            "a published campaign with failures or a next gate links no existing ticket",
        ),
        "ticket-mismatch": ("error", "a campaign links a ticket that names another campaign"),
        "ticket-invalid": ("error", "a ticket's front matter is missing or malformed"),
        "ticket-campaign-unknown": ("error", "a ticket names a campaign the evidence root lacks"),
    },
    "raw runs": {
        "run-incomplete": ("warning", "a raw run or one of its cells did not finish"),
        "run-unlisted": (
            "error",
            (
                "a cell run that the campaign's run-manifest.json does not list (a copy would be "
                "pooled with the cell it copies), or a part of one that no cell run lists"
            ),
        ),
        "not-published": (
            "error",
            "verify --public: a raw campaign where every campaign must be a publication",
        ),
        "run-manifest-mismatch": (
            "error",
            (
                "run-manifest.json lists an artifact under another arm, stage or cell than the "
                "artifact names, or lacks a cell run-plan.json plans"
            ),
        ),
        "record-inconsistent": ("error", "a request record or cell contradicts itself"),
        "schedule-mismatch": (
            "error",
            "an open-loop cell's due times are not the schedule its arrival settings give",
        ),
    },
}
"""Every finding code by the check that reports it (the campaign's part it speaks of): the
groups a JUnit report makes its test cases of."""

CODES: dict[str, tuple[Severity, str]] = {
    code: meaning for codes in CHECKS.values() for code, meaning in codes.items()
}
"""Every finding code: its severity and what it means."""

_CHECK_OF = {code: check for check, codes in CHECKS.items() for code in codes}


def check_of(code: str) -> str:
    """The check (a key of :data:`CHECKS`) that reports ``code``."""
    return _CHECK_OF[code]


@attrs.frozen
class Issue:
    """A finding before it is attached to a file."""

    code: str
    """A key of :data:`CODES`."""
    pointer: str
    """JSON pointer inside the file, ``""`` for the whole."""
    message: str
    """One line; never the value of something private."""

    @property
    def severity(self) -> Severity:
        """The code's severity."""
        return CODES[self.code][0]


@attrs.frozen(order=True)
class Finding:
    """One result of verification."""

    path: str
    """The file (or folder) as reached from the arguments given to verify."""
    pointer: str
    """JSON pointer inside the file."""
    code: str
    """Stable kebab-case identifier; a key of :data:`CODES`."""
    severity: Severity
    """``error`` fails verification; ``warning`` does not."""
    message: str
    """One line for people."""
    campaign: str = attrs.field(default="", eq=False, order=False)
    """The campaign folder the finding belongs to, for grouping ("" for lone documents)."""

    @classmethod
    def of(cls, path: str, issue: Issue, campaign: str = "") -> Finding:
        """Attaches an issue to a file."""
        return cls(path, issue.pointer, issue.code, issue.severity, issue.message, campaign)

    def to_json(self) -> dict[str, str]:
        """The machine form, as ``--format json`` prints it."""
        return {
            "code": self.code,
            "severity": self.severity,
            "path": self.path,
            "pointer": self.pointer,
            "message": self.message,
        }
