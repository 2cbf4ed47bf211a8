"""``ledger verify`` for CI systems: SARIF 2.1.0 checked against the published schema,
JUnit XML read by an independent reader (junitparser), GitHub workflow commands, the
report written to a file, and ``--changed`` for a pre-commit hook."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.findings import CHECKS, CODES, check_of
from ledger.formats.json_lines import line_of
from tests.conftest import DATA, ROOT, CliRun

SCHEMA = json.loads((DATA / "sarif" / "sarif-schema-2.1.0.json").read_text())
PUBLISHED = "2026-11-29-simulated-example"
DECIDED = "2026-09-08-glm53-linux-wsl-comparison"
QUALIFIED = "2026-09-02-glm53-sglang-sm120-qualification"


@pytest.fixture
def evidence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the repository's evidence/, verified from its parent as CI does."""
    shutil.copytree(ROOT / "evidence", tmp_path / "evidence")
    monkeypatch.chdir(tmp_path)
    return tmp_path / "evidence"


def _broken(evidence: Path) -> None:
    """One changed byte in a published file, one document that no longer parses."""
    report = evidence / PUBLISHED / "report.md"
    data = bytearray(report.read_bytes())
    data[10] ^= 1
    report.write_bytes(bytes(data))
    (evidence / DECIDED / "follow-up.json").write_text('{"schema": ')


def _sarif(cli: CliRun, *args: str) -> tuple[int, dict[str, Any]]:
    status, out, _ = cli("verify", "evidence", "--format", "sarif", *args)
    return status, json.loads(out)


def test_sarif_validates_against_the_published_schema(evidence: Path, cli: CliRun) -> None:
    status, clean = _sarif(cli)
    assert status == 0
    jsonschema.Draft4Validator(SCHEMA).validate(clean)
    assert clean["runs"][0]["invocations"][0]["exitCode"] == 0
    _broken(evidence)
    status, broken = _sarif(cli)
    assert status == 1
    jsonschema.Draft4Validator(SCHEMA).validate(broken)
    codes = {r["ruleId"] for r in broken["runs"][0]["results"]}
    assert {"hash-mismatch", "json-syntax"} <= codes
    # The validator is no formality: what SARIF requires, taken away, is refused.
    del broken["runs"][0]["results"][0]["message"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft4Validator(SCHEMA).validate(broken)


def test_one_rule_per_code_with_its_meaning_severity_and_check(evidence: Path, cli: CliRun) -> None:
    _, log = _sarif(cli)
    rules = log["runs"][0]["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == list(CODES)
    for rule in rules:
        severity, meaning = CODES[rule["id"]]
        assert rule["shortDescription"]["text"] == meaning
        assert rule["defaultConfiguration"]["level"] == severity
        assert check_of(rule["id"]) in rule["properties"]["tags"]


def test_each_finding_is_one_result_on_its_file_line_and_pointer(
    evidence: Path, cli: CliRun
) -> None:
    _broken(evidence)
    _, found, _ = cli("verify", "evidence", "--format", "json")
    findings = json.loads(found)["findings"]
    _, log = _sarif(cli)
    run = log["runs"][0]
    results = run["results"]
    assert len(results) == len(findings)
    rules = run["tool"]["driver"]["rules"]
    for result, finding in zip(results, findings, strict=True):
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"] == finding["code"]
        assert result["level"] == finding["severity"]
        assert result["message"]["text"] == finding["message"]
        location = result["locations"][0]
        assert location["physicalLocation"]["artifactLocation"]["uri"] == finding["path"]
        logical = location.get("logicalLocations", [{}])[0].get("fullyQualifiedName", "")
        assert logical == finding["pointer"]
    # The line is where the pointer's value starts in the file.
    gate = next(r for r in results if r["ruleId"] == "gate-failed-all-passed")
    uri = gate["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    line = gate["locations"][0]["physicalLocation"]["region"]["startLine"]
    assert line > 1
    assert Path(uri).read_text().splitlines()[line - 1].strip().startswith('"passed": false')
    assert run["invocations"][0]["exitCode"] == 1
    # A fingerprint follows its finding (code, file and pointer), never another's.
    prints = [next(iter(r["partialFingerprints"].values())) for r in results]
    assert len(set(prints)) == len(prints)
    _, again = _sarif(cli, "--jobs", "1")
    assert [next(iter(r["partialFingerprints"].values())) for r in again["runs"][0]["results"]] == (
        prints
    )
    assert run["properties"]["errors"] == sum(1 for f in findings if f["severity"] == "error")


def test_the_same_evidence_gives_the_same_bytes(evidence: Path, cli: CliRun) -> None:
    _broken(evidence)
    for format in ("sarif", "junit"):
        first = cli("verify", "evidence", "--format", format)[1]
        assert cli("verify", "evidence", "--format", format)[1] == first


def test_junit_is_one_case_per_campaign_and_check(evidence: Path, cli: CliRun) -> None:
    from junitparser import Failure, JUnitXml

    _broken(evidence)
    status, _, _ = cli("verify", "evidence", "--format", "junit", "--output", "verify.xml")
    assert status == 1
    xml = JUnitXml.fromfile("verify.xml")
    suites = {suite.name: suite for suite in xml}
    campaigns = sorted(p.name for p in evidence.iterdir() if p.is_dir() and p.name != "tickets")
    assert sorted(suites) == [f"evidence/{c}" for c in campaigns]
    failed: dict[tuple[str, str], str] = {}
    for name, suite in suites.items():
        cases = list(suite)
        assert [c.name for c in cases] == list(CHECKS)
        assert all(c.classname == name for c in cases)
        for case in cases:
            for result in case.result:
                assert isinstance(result, Failure)
                failed[(name, case.name)] = result.text
    assert set(failed) == {
        (f"evidence/{PUBLISHED}", "campaign layout and manifest"),
        (f"evidence/{DECIDED}", "reading"),
        # Its document no longer parses, and no longer has its sealed digest.
        (f"evidence/{DECIDED}", "campaign layout and manifest"),
    }
    text = failed[(f"evidence/{PUBLISHED}", "campaign layout and manifest")]
    assert text.startswith(
        f"error hash-mismatch evidence/{PUBLISHED}/manifest.json#/artifacts/22/sha256: "
        "'report.md' has sha256"
    )
    assert xml.failures == 3 and xml.tests == len(campaigns) * len(CHECKS)
    # A check with warnings alone passes, its warnings beside it.
    manifest_case = next(
        c for c in suites[f"evidence/{QUALIFIED}"] if c.name == "campaign layout and manifest"
    )
    assert manifest_case.is_passed and "withheld-artifact" in (manifest_case.system_out or "")


def test_a_failed_junit_check_lists_its_warnings_beside_its_errors(
    evidence: Path, cli: CliRun
) -> None:
    from junitparser import Failure, JUnitXml

    # The qualification's manifest check has warnings alone (withheld artifacts); one
    # changed byte adds an error to the same check.
    summary = evidence / QUALIFIED / "summary.json"
    summary.write_bytes(summary.read_bytes() + b" ")
    assert cli("verify", "evidence", "--format", "junit", "--output", "v.xml")[0] == 1
    suite = next(s for s in JUnitXml.fromfile("v.xml") if s.name == f"evidence/{QUALIFIED}")
    case = next(c for c in suite if c.name == "campaign layout and manifest")
    (failure,) = case.result
    assert isinstance(failure, Failure)
    lines = failure.text.splitlines()
    errors = {line.split()[1] for line in lines if line.startswith("error ")}
    assert errors == {"size-mismatch", "hash-mismatch"}
    assert any(line.startswith("warning withheld-artifact ") for line in lines)


def test_annotations_place_each_finding_on_its_line(evidence: Path, cli: CliRun) -> None:
    _broken(evidence)
    odd = evidence / PUBLISHED / "a,b:100%.txt"
    odd.write_text("unlisted")
    status, out, err = cli(
        "verify", "evidence", "--format", "sarif", "--output", "v.sarif", "--github-annotations"
    )
    assert status == 1 and err == "FAIL\n"
    lines = out.splitlines()
    findings = json.loads(cli("verify", "evidence", "--format", "json")[1])["findings"]
    assert len(lines) == len(findings)
    results = json.loads(Path("v.sarif").read_text())["runs"][0]["results"]
    command = re.compile(r"::(error|warning) file=([^,]*),line=(\d+),title=([^:]*)::(.*)")
    placed = []
    for line, finding, result in zip(lines, findings, results, strict=True):
        match = command.fullmatch(line)
        assert match is not None, line
        assert match.group(1) == finding["severity"]
        assert match.group(4).startswith(finding["code"])
        # On the same line as the SARIF result places it.
        region = result["locations"][0]["physicalLocation"].get("region", {})
        placed.append(int(match.group(3)))
        assert placed[-1] == region.get("startLine", 1)
    assert max(placed) > 1
    assert (
        f"::error file=evidence/{PUBLISHED}/a%2Cb%3A100%25.txt,line=1,title=unlisted-file::" in out
    )
    assert json.loads(Path("v.sarif").read_text())["version"] == "2.1.0"


def test_an_annotation_names_a_file_with_a_line_break_as_the_runner_decodes_it(
    evidence: Path, cli: CliRun
) -> None:
    (evidence / PUBLISHED / "two\nlines\x1b.txt").write_text("unlisted")
    status, out, _ = cli("verify", str(evidence / PUBLISHED), "--github-annotations")
    assert status == 1
    # %0A is a line break to the runner; ESC has no escape of its own and stays readable.
    name = f"{evidence}/{PUBLISHED}/two%0Alines\\x1b.txt".replace(":", "%3A")
    assert f"::error file={name},line=1,title=unlisted-file::" in out


def test_annotations_never_mix_into_a_machine_report(evidence: Path, cli: CliRun) -> None:
    status, out, err = cli("verify", "evidence", "--format", "sarif", "--github-annotations")
    assert (status, out) == (2, "")
    assert err.startswith("ledger verify: error: --github-annotations") and "--output" in err
    # Beside the text report they are allowed: the runner hides the commands.
    status, out, _ = cli("verify", "evidence", "--github-annotations")
    assert status == 0 and "::warning file=evidence/" in out and "0 errors" in out


def test_an_output_that_cannot_be_written_is_refused_before_verifying(
    evidence: Path, cli: CliRun
) -> None:
    status, out, err = cli("verify", "evidence", "--format", "junit", "--output", "no/such.xml")
    assert (status, out) == (2, "")
    assert err == "ledger verify: error: --output no/such.xml: no such folder no\n"
    status, _, err = cli("verify", "evidence", "--output", str(evidence))
    assert status == 2 and "a folder, not a file" in err
    assert not Path("no").exists()


def test_changed_files_verify_the_campaigns_that_hold_them(evidence: Path, cli: CliRun) -> None:
    _broken(evidence)
    Path("README.md").write_text("not evidence")
    changed = [
        f"evidence/{PUBLISHED}/report.md",
        f"evidence/{PUBLISHED}/manifest.json",
        f"evidence/{DECIDED}/tickets/x.md",
        "README.md",
    ]
    status, out, _ = cli("verify", "--changed", "--format", "json", *changed)
    summary = json.loads(out)["summary"]
    assert status == 1 and summary["campaigns"] == 2
    status, out, _ = cli("verify", "--changed", "--format", "json", changed[0])
    assert status == 1 and json.loads(out)["summary"]["campaigns"] == 1
    # A subfolder of a campaign that looks like one (named like a campaign id) is not
    # verified alone: the campaign holding it is.
    inner = evidence / PUBLISHED / "2026-01-01-inner"
    inner.mkdir()
    (inner / "notes.json").write_text("{}")
    status, out, _ = cli("verify", "--changed", "--format", "json", str(inner / "notes.json"))
    assert (status, out) == cli("verify", "--format", "json", str(evidence / PUBLISHED))[:2]
    assert json.loads(out)["summary"]["campaigns"] == 1
    status, out, err = cli("verify", "--changed", "README.md")
    assert (status, out) == (0, "0 errors, 0 warnings in 0 campaigns, 0 artifacts\n")
    assert err == "ledger verify: no campaign holds the changed files\nOK\n"
    # The report a CI step uploads is still written, empty.
    status, _, _ = cli(
        "verify", "--changed", "--format", "sarif", "--output", "r.sarif", "README.md"
    )
    sarif = json.loads(Path("r.sarif").read_text())
    assert status == 0 and sarif["runs"][0]["results"] == []


def _dump(value: Any, indent: int | None) -> bytes:
    return json.dumps(value, indent=indent).encode()


def _paths(value: Any, prefix: str = "") -> list[str]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            escaped = key.replace("~", "~0").replace("/", "~1")
            found += _paths(item, f"{prefix}/{escaped}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, f"{prefix}/{index}")
    return found


def _replaced(value: Any, tokens: list[str], sentinel: str) -> Any:
    if not tokens:
        return sentinel
    head = tokens[0].replace("~1", "/").replace("~0", "~")
    if isinstance(value, list):
        copy = list(value)
        copy[int(head)] = _replaced(value[int(head)], tokens[1:], sentinel)
        return copy
    return {k: (_replaced(v, tokens[1:], sentinel) if k == head else v) for k, v in value.items()}


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(alphabet='ab01/~"\\\n{}[],: ', max_size=4), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_JSON, st.sampled_from([None, 0, 2]), st.data())
def test_a_pointer_is_placed_on_the_line_its_value_starts(
    value: Any, indent: int | None, data: st.DataObject
) -> None:
    pointer = data.draw(st.sampled_from(_paths(value)))
    sentinel = "\u2603sentinel\u2603"
    text = _dump(value, indent)
    # The text before a value does not change when the value does: the sentinel's line
    # is the value's.
    marked = _dump(_replaced(value, pointer.split("/")[1:] if pointer else [], sentinel), indent)
    expected = marked.decode().split(json.dumps(sentinel))[0].count("\n") + 1
    assert line_of(text, pointer) == expected


def test_a_pointer_the_text_lacks_is_placed_nowhere() -> None:
    text = b'{"a": [1, {"b": 2}], "c/d": {}}'
    assert line_of(text, "/a/2") is None
    assert line_of(text, "/b") is None
    assert line_of(text, "a") is None
    assert line_of(b'{"a": ', "/a") is None
    assert line_of(text, "/c~1d") == 1
    # "~01" is "~1" escaped, never "/": the escapes are undone ~1 first, then ~0.
    spread = b'{\n"/": 1,\n"~1": 2\n}'
    assert (line_of(spread, "/~01"), line_of(spread, "/~1")) == (3, 2)


def test_a_sums_line_and_an_absolute_path_are_placed_as_code_scanning_reads_them(
    evidence: Path, cli: CliRun
) -> None:
    sums = evidence / PUBLISHED / "SHA256SUMS"
    lines = sums.read_text().splitlines()
    lines[2] = "not a digest line"
    sums.write_text("\n".join(lines) + "\n")
    campaign = str(evidence / PUBLISHED)  # absolute: a file:// URI, spaces and all escaped
    _, out, _ = cli("verify", campaign, "--format", "sarif")
    results = json.loads(out)["runs"][0]["results"]
    invalid = next(r for r in results if r["ruleId"] == "sha256sums-invalid")
    place = invalid["locations"][0]["physicalLocation"]
    assert place["region"]["startLine"] == 3
    assert place["artifactLocation"]["uri"] == f"file://{quote(str(sums))}"
    assert invalid["locations"][0]["logicalLocations"][0]["fullyQualifiedName"] == "/3"


def test_a_lone_document_is_a_suite_of_its_own(evidence: Path, cli: CliRun) -> None:
    from junitparser import JUnitXml

    document = f"evidence/{DECIDED}/summary.json"
    _, out, _ = cli("verify", document, "--format", "junit")
    suites = list(JUnitXml.fromstring(out.encode()))
    assert [s.name for s in suites] == [document]
    assert [c.name for c in suites[0]] == list(CHECKS)


def test_an_output_that_is_no_regular_file_is_never_replaced(evidence: Path, cli: CliRun) -> None:
    status, out, err = cli("verify", "evidence", "--format", "json", "--output", "/dev/null")
    assert (status, out) == (2, "")
    assert "not a regular file" in err
    assert Path("/dev/null").is_char_device()
