"""``ledger verify --github-annotations``: one GitHub Actions workflow command per finding
(``::error file=…,line=…,title=…::message``), which the runner turns into an annotation on
the file's line in the job summary and the pull request."""

from __future__ import annotations

import re

from ledger.verification._places import Places, plain
from ledger.verification._verify import Report

__all__ = ["workflow_commands"]


def _data(text: str) -> str:
    # The runner's own escapes: a message may hold '%' and (escaped) nothing else it reads.
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def _file(path: str) -> str:
    # The runner decodes %0A and %0D in a property: a file name's line breaks reach it as
    # they are, and the annotation lands on the file. Other control characters it has no
    # escape for are written as escapes, as everywhere else.
    return "".join(
        part if part in ("\r", "\n") else plain(part) for part in re.split(r"([\r\n])", path)
    )


def workflow_commands(report: Report, places: Places | None = None) -> str:
    """The workflow commands, one line each, in the report's order."""
    places = places or Places()
    lines = []
    for finding in report.findings:
        where = f"#{finding.pointer}" if finding.pointer else ""
        title = f"{finding.code}{where}"
        lines.append(
            f"::{finding.severity} file={_property(_file(finding.path))},"
            f"line={places.line(finding)},title={_property(plain(title))}"
            f"::{_data(plain(finding.message))}"
        )
    return "".join(line + "\n" for line in lines)
