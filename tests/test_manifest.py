"""The seal's own rules: what a summary names, how SHA256SUMS is read, how a broken seal is
reported, and what a withholding seal moves and puts back."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ledger.errors import VerificationError
from ledger.evidence import manifest
from ledger.formats.models import BenchmarkDecisionSummary, Review, ReviewedChange, structure
from ledger.formats.outputs import OutputExists
from tests.conftest import ASSETS, ROOT, SEEDS

VALID = ASSETS / "verify" / "valid" / "2026-11-01-asset-campaign"


def test_named_artifacts_are_the_evidence_the_gates_and_the_headline_sources() -> None:
    document: dict[str, Any] = json.loads(
        (SEEDS / "2026-09-08-glm53-linux-wsl-comparison.summary.json").read_text()
    )
    document["evidence"] = ["raw/a.json", "raw/b.json"]
    document["gates"] = [{"name": "no artifact"}, {"name": "g", "artifact": "raw/gate.json"}]
    named = manifest.named_artifacts(structure(document, BenchmarkDecisionSummary))
    assert named[:3] == [
        ("/evidence/0", "raw/a.json"),
        ("/evidence/1", "raw/b.json"),
        ("/gates/1/artifact", "raw/gate.json"),
    ]
    headline = document["headline_results"]
    assert named[3:] and all(p.startswith("/headline_results/") for p, _ in named[3:])
    assert ("/headline_results/rows/0/windows_source", headline["rows"][0]["windows_source"]) in (
        named
    )
    document["gates"] = None
    assert ("/gates/1/artifact", "raw/gate.json") not in manifest.named_artifacts(
        structure(document, BenchmarkDecisionSummary)
    )


def test_sums_lines_are_numbered_from_one() -> None:
    good = f"{'a' * 64}  raw/a.json\n"
    digests, issues = manifest.parse_sums((good + "not a line\n" + good).encode())
    assert digests == {"raw/a.json": "a" * 64}
    assert [(i.code, i.pointer) for i in issues] == [
        ("sha256sums-invalid", "/2"),
        ("sha256sums-invalid", "/3"),
    ]
    assert issues[1].message == "line 3 lists 'raw/a.json' again"


def test_sums_that_are_not_utf8() -> None:
    digests, issues = manifest.parse_sums(b"\xff\xfe")
    assert digests == {}
    assert [(i.code, i.pointer, i.message) for i in issues] == [
        ("sha256sums-invalid", "", "not UTF-8")
    ]


def test_sums_lines_end_at_newline_only() -> None:
    """As for sha256sum: a vertical tab, form feed or \\r is part of the line, not its end."""
    a, b = "a" * 64, "b" * 64
    digests, issues = manifest.parse_sums(f"{a}  x.json\v{b}  y.json\n".encode())
    assert digests == {f"x.json\v{b}  y.json": a}
    assert issues == []
    digests, _ = manifest.parse_sums(f"{a}  x.json\n{b}  y.json".encode())
    assert digests == {"x.json": a, "y.json": b}


@pytest.mark.parametrize(
    ("data", "expected", "message"),
    [
        (b"ab\ncd\n", b"ab\ncd\n", None),
        (b"ab\ncX\n", b"ab\ncd\n", "differs at byte 4 (line 2, column 2): has 'cX', expected 'cd'"),
        (
            b"ab\vcd\n",
            b"ab\ncd\n",
            "differs at byte 2 (line 1, column 3): has 'ab\\x0bcd', expected 'ab'",
        ),
        (b"ab\n", b"ab\ncd\n", "ends at byte 3 (line 2); expected more: 'cd'"),
        (b"ab\ncd\nef", b"ab\ncd\n", "has more than expected from byte 6 (line 3): 'ef'"),
        (b"\nab", b"xab\n", "differs at byte 0 (line 1, column 1): has '', expected 'xab'"),
        (b"\nab", b"\nac", "differs at byte 2 (line 2, column 2): has 'ab', expected 'ac'"),
        (b"\n\nX", b"\n\nY", "differs at byte 2 (line 3, column 1): has 'X', expected 'Y'"),
        (
            b"x" * 99 + b"a",
            b"x" * 99 + b"b",
            "differs at byte 99 (line 1, column 100): has '"
            + "x" * 99
            + "a', expected '"
            + "x" * 99
            + "b'",
        ),
        (
            b"x" * 100 + b"a",
            b"x" * 100 + b"b",
            "differs at byte 100 (line 1, column 101): has '"
            + "x" * 100
            + "...', expected '"
            + "x" * 100
            + "...'",
        ),
        (
            b"x" * 300,
            b"y",
            "differs at byte 0 (line 1, column 1): has '" + "x" * 100 + "...', expected 'y'",
        ),
    ],
)
def test_first_difference_names_the_byte_and_line(
    data: bytes, expected: bytes, message: str | None
) -> None:
    assert manifest.first_byte_difference(data, expected) == message


def test_a_sums_file_read_differently_by_sha256sum_is_not_the_seal(tmp_path: Path) -> None:
    folder = _sealed_copy(tmp_path)
    assert manifest.changes_since_seal(folder) == []
    sums = folder / manifest.SUMS_NAME
    sums.write_bytes(sums.read_bytes().replace(b"\n", b"\v", 1))
    assert manifest.changes_since_seal(folder) == [ReviewedChange(manifest.SUMS_NAME, "changed")]
    # One byte of whitespace more is not the seal either, though every digest is the same.
    sums.write_bytes(sums.read_bytes().replace(b"\v", b"\n") + b"\n")
    assert manifest.changes_since_seal(folder) == [ReviewedChange(manifest.SUMS_NAME, "changed")]


def test_a_declared_seal_file_missing_is_a_change(tmp_path: Path) -> None:
    folder = tmp_path / "2026-09-17-glm53-mixed35-startup"
    shutil.copytree(ROOT / "evidence" / folder.name, folder)
    assert manifest.changes_since_seal(folder) == []
    (folder / manifest.BUNDLE_NAME).unlink()
    recorded = manifest.parse_sums((folder / manifest.SUMS_NAME).read_bytes())[0]
    assert manifest.changes_since_seal(folder) == [
        ReviewedChange(manifest.BUNDLE_NAME, "missing", recorded[manifest.BUNDLE_NAME])
    ]
    with pytest.raises(manifest.SealBroken, match=r"statement\.sigstore\.json \(missing\)"):
        manifest.check_seal(folder, "ticket new")
    # A changed one is named as itself, not as the SHA256SUMS line that no longer fits.
    (folder / manifest.BUNDLE_NAME).write_bytes(b"{}")
    assert manifest.changes_since_seal(folder) == [
        ReviewedChange(
            manifest.BUNDLE_NAME,
            "changed",
            recorded[manifest.BUNDLE_NAME],
            hashlib.sha256(b"{}").hexdigest(),
        )
    ]
    assert manifest.check_seal(folder, "sign", renewing=[manifest.BUNDLE_NAME]) is None


def test_an_undeclared_statement_is_checked_by_its_subjects() -> None:
    """A statement the manifest does not declare (sealed before seals were recorded) has
    no SHA256SUMS line: its subjects are what say it no longer fits."""
    folder = ASSETS / "verify" / "statement_subject_digest_wrong" / VALID.name
    assert "seals" not in json.loads((folder / manifest.MANIFEST_NAME).read_bytes())
    assert manifest.changes_since_seal(folder) == [
        ReviewedChange(manifest.STATEMENT_NAME, "changed")
    ]


def _sealed_copy(tmp_path: Path) -> Path:
    folder = tmp_path / VALID.name
    shutil.copytree(VALID, folder)
    return folder


@pytest.mark.parametrize("count", [8, 9, 12])
def test_a_broken_seal_names_eight_changes_and_counts_the_rest(tmp_path: Path, count: int) -> None:
    folder = _sealed_copy(tmp_path)
    for i in range(count):
        (folder / "raw" / f"added-{i:02}.log").write_text("x\n")
    with pytest.raises(manifest.SealBroken) as raised:
        manifest.check_seal(folder, "report")
    message = str(raised.value)
    shown = [f"raw/added-{i:02}.log (added)" for i in range(8)]
    assert ", ".join(shown) in message
    assert f"raw/added-{8:02}.log" not in message
    more = f"{', '.join(shown)} and {count - 8} more." if count > 8 else f"{', '.join(shown)}."
    assert more in message
    assert len(raised.value.changes) == count


def test_write_sealed_returns_the_manifest_it_wrote(tmp_path: Path) -> None:
    folder = _sealed_copy(tmp_path)
    sealed = manifest.write_sealed(folder, {"raw/note.log": b"note\n"}, command="report")
    assert sealed == manifest.read_manifest(folder / "manifest.json")
    assert "raw/note.log" in {a.path for a in sealed.artifacts}


def test_withhold_missing_declares_what_the_summary_names_and_is_absent(tmp_path: Path) -> None:
    folder = _sealed_copy(tmp_path)
    summary = json.loads((folder / "summary.json").read_text())
    summary["evidence"] = [*summary.get("evidence", []), "raw/never-published.json"]
    (folder / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    sealed = manifest.seal(folder, withhold_missing=True, reseal_after_review=True, jobs=1)
    assert "raw/never-published.json" in {w.path for w in sealed.withheld}
    # Without the flag, nothing the summary names is declared on its behalf.
    plain = _sealed_copy(tmp_path / "plain")
    (plain / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    sealed = manifest.seal(plain, reseal_after_review=True, jobs=1)
    assert "raw/never-published.json" not in {w.path for w in sealed.withheld}


def test_a_failed_withholding_seal_puts_every_moved_file_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _sealed_copy(tmp_path)
    before = {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}

    def fail(*_: Any, **__: Any) -> Any:
        raise OSError("disk full")

    monkeypatch.setattr(manifest, "seal_files", fail)
    with pytest.raises(OSError, match="disk full"):
        manifest.seal(folder, withhold=["raw/windows.log", "raw/linux.log"], jobs=1)
    after = {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    assert after == before
    aside = manifest.withheld_folder(folder)
    assert not aside.exists() or not any(p.is_file() for p in aside.rglob("*"))


def test_an_unreadable_seal_is_resealed_only_after_review(tmp_path: Path) -> None:
    folder = _sealed_copy(tmp_path)
    (folder / "manifest.json").write_text("{")
    with pytest.raises(VerificationError, match="cannot read the seal"):
        manifest.seal_files(folder)
    sealed, _ = manifest.seal_files(folder, reviews=[Review("seal", ())])
    assert [r.command for r in sealed.reviews] == ["seal"]


def test_withholding_refuses_a_file_already_set_aside(tmp_path: Path) -> None:
    folder = _sealed_copy(tmp_path)
    aside = manifest.withheld_folder(folder) / "raw" / "linux.log"
    aside.parent.mkdir(parents=True)
    aside.write_text("kept earlier\n")
    with pytest.raises(OutputExists, match="nothing was moved or sealed"):
        manifest.seal(folder, withhold=["raw/linux.log"], jobs=1)
    assert (folder / "raw" / "linux.log").exists() and aside.read_text() == "kept earlier\n"


def test_only_json_files_are_read_as_documents(tmp_path: Path) -> None:
    folder = _sealed_copy(tmp_path)
    (folder / "raw" / "summary-copy.txt").write_bytes((folder / "summary.json").read_bytes())
    sealed = manifest.seal(folder, reseal_after_review=True, jobs=1)
    schemas = {a.path: a.schema for a in sealed.artifacts}
    assert schemas["raw/summary-copy.txt"] is None
    assert schemas["summary.json"] == "anvil-serving.benchmark-decision-summary/v1"


def test_pending_seal_files_are_not_artifacts(tmp_path: Path) -> None:
    folder = _sealed_copy(tmp_path)
    pending = {"SHA256SUMS": b"stale\n", "raw/z.log": b"z\n"}
    sealed, files = manifest.seal_files(folder, pending, reviews=[Review("t", ())])
    paths = {a.path for a in sealed.artifacts}
    assert "raw/z.log" in paths and "SHA256SUMS" not in paths
    assert b"stale" not in files["SHA256SUMS"]


def test_a_file_that_cannot_be_read_stops_the_seal_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ledger.evidence import scan
    from ledger.findings import Issue

    folder = _sealed_copy(tmp_path)
    real = scan.process_files

    def vanishing(tasks: Any, **kwargs: Any) -> Any:
        for result in real(tasks, **kwargs):
            if result.rel == "raw/linux.log":
                issue = Issue("file-changed", "", "vanished while being verified")
                result = scan.FileResult(result.rel, None, None, (issue,))
            yield result

    monkeypatch.setattr(scan, "process_files", vanishing)
    with pytest.raises(VerificationError, match=r"raw/linux.log: vanished while being verified$"):
        manifest.seal(folder, reseal_after_review=True, jobs=1)


def test_the_seal_sign_writes_declares_the_bundle_to_come(tmp_path: Path) -> None:
    folder = tmp_path / "2026-09-17-glm53-mixed35-startup"
    shutil.copytree(ROOT / "evidence" / folder.name, folder)
    (folder / manifest.BUNDLE_NAME).unlink()
    sealed, files = manifest.seal_files(folder)
    assert sealed.seals == (manifest.STATEMENT_NAME,)
    sealed, files = manifest.seal_files(folder, signed=True)
    assert sealed.seals == (manifest.STATEMENT_NAME, manifest.BUNDLE_NAME)
    # No line for a bundle not yet written; sums_adding gives it one.
    assert manifest.BUNDLE_NAME.encode() not in files[manifest.SUMS_NAME]
    with_bundle = manifest.sums_adding(files[manifest.SUMS_NAME], {manifest.BUNDLE_NAME: b"b"})
    digests, issues = manifest.parse_sums(with_bundle)
    assert issues == [] and digests[manifest.BUNDLE_NAME] == hashlib.sha256(b"b").hexdigest()
    assert with_bundle == manifest.render_sums(digests.items())
