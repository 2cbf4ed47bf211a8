"""``ledger verify --format junit``: JUnit XML for CI test reports.

One test suite per campaign folder (and per lone document), one test case per check of
:data:`ledger.findings.CHECKS` in it. A check fails when it found an error; its failure
carries every finding line of the check, warnings included, and a check with warnings alone
passes with them in its ``system-out``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from ledger.findings import CHECKS, Finding, check_of
from ledger.verification._places import plain
from ledger.verification._verify import Report

__all__ = ["to_junit"]

_OTHERS = "(beside the campaigns)"
"""The suite of findings no campaign or document owns: tickets published beside an
evidence root, checked by ``--public``."""


def _line(finding: Finding) -> str:
    where = f"{finding.path}#{finding.pointer}" if finding.pointer else finding.path
    return plain(f"{finding.severity} {finding.code} {where}: {finding.message}")


def _suites(report: Report) -> dict[str, list[Finding]]:
    suites: dict[str, list[Finding]] = {name: [] for name in report.campaign_names}
    suites.update({name: [] for name in report.documents if name not in suites})
    for finding in report.findings:
        if finding.campaign in suites:
            suites[finding.campaign].append(finding)
        elif not finding.campaign and finding.path in suites:
            suites[finding.path].append(finding)
        else:
            suites.setdefault(finding.campaign or _OTHERS, []).append(finding)
    return suites


def _case(suite: ET.Element, name: str, check: str, found: Sequence[Finding]) -> bool:
    case = ET.SubElement(suite, "testcase", classname=plain(name), name=check)
    errors = [f for f in found if f.severity == "error"]
    text = "\n".join(_line(f) for f in found)
    if errors:
        codes = sorted({f.code for f in errors})
        failure = ET.SubElement(
            case,
            "failure",
            type=codes[0],
            message=f"{len(errors)} error finding{'s' if len(errors) != 1 else ''}: "
            + ", ".join(codes),
        )
        failure.text = text
    elif found:
        ET.SubElement(case, "system-out").text = text
    return bool(errors)


def to_junit(report: Report) -> bytes:
    """The JUnit XML document of a verification, deterministic: no times, no host."""
    root = ET.Element("testsuites", name="ledger verify")
    total = failed = 0
    for name, found in _suites(report).items():
        suite = ET.SubElement(root, "testsuite", name=plain(name))
        failures = sum(
            _case(suite, name, check, [f for f in found if check_of(f.code) == check])
            for check in CHECKS
        )
        suite.set("tests", str(len(CHECKS)))
        suite.set("failures", str(failures))
        suite.set("errors", "0")
        suite.set("skipped", "0")
        total += len(CHECKS)
        failed += failures
    root.set("tests", str(total))
    root.set("failures", str(failed))
    root.set("errors", "0")
    ET.indent(root)
    document: bytes = ET.tostring(root, encoding="UTF-8", xml_declaration=True)
    return document + b"\n"
