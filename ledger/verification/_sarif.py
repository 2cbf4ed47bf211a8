"""``ledger verify --format sarif``: a SARIF 2.1.0 log for code scanning.

One rule per finding code (its meaning and severity from :data:`ledger.findings.CODES`,
its check as a tag), one result per finding: the file as the physical location with the
line its JSON pointer names, the pointer itself as the logical location.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ledger import __version__
from ledger.findings import CODES, check_of
from ledger.verification._places import Places, plain, uri
from ledger.verification._verify import Report

__all__ = ["SARIF_SCHEMA", "SARIF_VERSION", "to_sarif"]

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
_FINGERPRINT = "anvilLedgerFinding/v1"
"""A result's identity across runs: its code, file and pointer, not its line (a file
edited above the finding moves it, and code scanning should still see the same alert)."""


def _rules() -> list[dict[str, Any]]:
    rules = []
    for code, (severity, meaning) in CODES.items():
        check = check_of(code)
        rules.append(
            {
                "id": code,
                "name": "".join(part.title() for part in code.split("-")),
                "shortDescription": {"text": meaning},
                "fullDescription": {"text": f"{meaning} (check: {check})"},
                "defaultConfiguration": {"level": severity},
                "properties": {"tags": ["anvil-ledger", check]},
            }
        )
    return rules


def to_sarif(report: Report, places: Places | None = None) -> dict[str, Any]:
    """The SARIF log of a verification: one run, one result per finding, in the report's
    order (so the same evidence gives the same bytes)."""
    index = {code: i for i, code in enumerate(CODES)}
    places = places or Places()
    results = []
    for finding in report.findings:
        identity = f"{finding.code}\0{finding.path}\0{finding.pointer}".encode(
            "utf-8", "surrogateescape"
        )
        location: dict[str, Any] = {
            "physicalLocation": {
                "artifactLocation": {"uri": uri(finding.path)},
                "region": {"startLine": places.line(finding)},
            }
        }
        if finding.pointer:
            location["logicalLocations"] = [
                {"fullyQualifiedName": plain(finding.pointer), "kind": "value"}
            ]
        results.append(
            {
                "ruleId": finding.code,
                "ruleIndex": index[finding.code],
                "level": finding.severity,
                "message": {"text": plain(finding.message)},
                "locations": [location],
                "partialFingerprints": {_FINGERPRINT: hashlib.sha256(identity).hexdigest()[:32]},
                "properties": {"campaign": plain(finding.campaign)},
            }
        )
    return {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "anvil-ledger",
                        "fullName": "anvil-ledger verify",
                        "version": __version__,
                        "semanticVersion": __version__,
                        "rules": _rules(),
                    }
                },
                "columnKind": "unicodeCodePoints",
                "results": results,
                "invocations": [
                    {
                        "executionSuccessful": True,
                        "exitCode": 0 if report.ok else 1,
                    }
                ],
                "properties": {
                    "campaigns": report.campaigns,
                    "artifacts": report.artifacts,
                    "errors": report.errors,
                    "warnings": report.warnings,
                },
            }
        ],
    }
