"""verify's rules one at a time, on the functions that hold them: references against known,
withheld and disclosed digests, the statement's subjects, the order of findings, the kinds a
manifest lists and which documents are derived again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ledger.formats.models import Manifest, ManifestEntry
from ledger.verification import _verify as verify
from tests.conftest import ASSETS

A, B = "a" * 64, "b" * 64


@pytest.mark.parametrize(
    ("path", "digest", "code"),
    [
        ("raw/a.json", A, None),
        ("raw/a.json", B, "reference-mismatch"),
        ("raw/disclosed.json", B, "reference-withheld"),  # agrees with what is disclosed
        ("raw/disclosed.json", A, "reference-mismatch"),  # the manifest disclosed B
        ("raw/undisclosed.json", A, "reference-withheld"),
        ("raw/nowhere.json", A, "reference-unresolved"),
        ("../escape.json", A, "path-escape"),
    ],
)
def test_a_reference_against_what_the_manifest_knows(
    path: str, digest: str, code: str | None
) -> None:
    known = {"raw/a.json": A}
    withheld: dict[str, str | None] = {"raw/disclosed.json": B, "raw/undisclosed.json": None}
    issue = verify._check_reference(
        "/sources/0", path, digest, known, withheld, known, listing=True
    )
    assert (issue.code if issue else None) == code
    if code == "reference-mismatch" and path == "raw/disclosed.json":
        assert issue is not None and issue.message == (
            f"reference to withheld 'raw/disclosed.json' says sha256 {A}, the manifest discloses {B}"
        )


C = "c" * 64


@pytest.mark.parametrize(
    ("present", "listing", "said"),
    [
        # The file was edited and the reference made to follow it, but not the seal: the
        # reference's digest is the file's, and the manifest's is the stale one.
        (
            {"raw/a.json": C},
            True,
            f"says sha256 {C}, the manifest lists {A} (and the file has {C})",
        ),
        (
            {"raw/a.json": B},
            True,
            f"says sha256 {C}, the manifest lists {A} (and the file has {B})",
        ),
        ({"raw/a.json": A}, True, f"says sha256 {C}, the manifest lists {A}"),
        # Without a readable manifest, the file's own digest is what is known.
        ({"raw/a.json": A}, False, f"says sha256 {C}, the file has {A}"),
    ],
)
def test_a_reference_mismatch_names_each_digest_for_what_it_is(
    present: dict[str, str], listing: bool, said: str
) -> None:
    known = {"raw/a.json": A} if listing else present
    issue = verify._check_reference(
        "/sources/0", "raw/a.json", C, known, {}, present, listing=listing
    )
    assert issue is not None and issue.code == "reference-mismatch"
    assert issue.message == f"reference to 'raw/a.json' {said}"


@pytest.mark.parametrize(
    ("path", "code"),
    [("raw/a.json", None), ("raw/held.json", None), ("raw/gone.json", "missing-artifact"),
     ("/abs.json", "path-absolute")],
)  # fmt: skip
def test_a_named_artifact_is_published_or_declared(path: str, code: str | None) -> None:
    issue = verify._check_named("/evidence/0", path, {"raw/a.json": A}, {"raw/held.json": None})
    assert (issue.code if issue else None) == code


def _statement(folder: Path, subjects: dict[str, str]) -> None:
    statement = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": n, "digest": {"sha256": d}} for n, d in subjects.items()],
        "predicateType": "https://example.com/p",
        "predicate": {"campaign_id": folder.name, "decision": None},
    }
    (folder / "statement.intoto.json").write_text(json.dumps(statement))


def test_every_subject_and_every_published_file_are_compared(tmp_path: Path) -> None:
    listed = {"summary.json": A, "raw/x.log": A, "raw/y.log": A}
    _statement(tmp_path, {"summary.json": A, "raw/x.log": B, "raw/extra.log": A,
                          "manifest.json": B})  # fmt: skip
    issues = verify._check_statement(tmp_path, listed, B)
    assert [(i.code, i.message) for i in issues] == [
        ("statement-mismatch", "subject 'raw/extra.log' is not published"),
        ("statement-mismatch", f"subject 'raw/x.log' has sha256 {B}, the file {A}"),
        ("statement-mismatch", "'raw/y.log' is published but not a subject"),
    ]
    _statement(tmp_path, {**listed, "manifest.json": B})
    assert verify._check_statement(tmp_path, listed, B) == []
    (tmp_path / "statement.intoto.json").write_text("{")
    (issue,) = verify._check_statement(tmp_path, listed, B)
    assert issue.code == "statement-invalid" and issue.message.startswith("cannot read: ")


def test_findings_sort_by_pointer_numerically() -> None:
    pointers = ["/rows/10/x", "/rows/2/x", "/rows/2", "/a", "/rows/b"]
    ordered = sorted(pointers, key=lambda p: verify._natural(p.split("/")))
    # Indices before names, and in number order: /rows/2 before /rows/10.
    assert ordered == ["/a", "/rows/2", "/rows/2/x", "/rows/10/x", "/rows/b"]
    # As numbers, leading zeros aside, however long (int() refuses past 4,300 digits).
    long = ["/k/" + "9" * 5000, "/k/1" + "0" * 4999, "/k/0" + "9" * 5000, "/k/08", "/k/9"]
    assert sorted(long, key=lambda p: verify._natural(p.split("/"))) == [
        "/k/08",
        "/k/9",
        "/k/1" + "0" * 4999,
        "/k/" + "9" * 5000,
        "/k/0" + "9" * 5000,  # the same number: kept in the order given
    ]


def test_the_kinds_a_manifest_lists() -> None:
    entries = (
        ManifestEntry("a.json", A, 1, "anvil-serving.ab-comparison/v1"),
        ManifestEntry("b.log", A, 1, None),
        ManifestEntry("c.json", A, 1, "anvil-serving.gpu-reserve/v1"),
    )
    loaded = Manifest(schema=Manifest.SCHEMA, campaign_id="2026-11-01-x", artifacts=entries,
                      withheld=())  # fmt: skip
    assert verify._listed_kinds(loaded) == ["ab-comparison", "gpu-reserve"]
    assert verify._listed_kinds(None) == []


def test_every_manifest_entry_is_checked_after_a_bad_one() -> None:
    from ledger.evidence import scan
    from ledger.formats.models import WithheldEntry

    entries = (
        ManifestEntry("../out.log", A, 1, None),  # path-escape
        ManifestEntry("raw/a.log", A, 1, None),
        ManifestEntry("raw/a.log", A, 1, None),  # path-duplicate
        ManifestEntry("SHA256SUMS", A, 1, None),  # path-invalid
        ManifestEntry("raw/gone.log", A, 1, None),  # missing-artifact
        ManifestEntry("raw/unread.log", A, 1, None),  # could not be read: its own finding
        ManifestEntry("raw/b.log", A, 2, None),  # hash-mismatch and size-mismatch
    )
    withheld = (
        WithheldEntry("/abs.log", "r"),  # path-absolute
        WithheldEntry("raw/a.log", "r"),  # path-duplicate: listed
        WithheldEntry("raw/held.log", "r", B),
        WithheldEntry("raw/held.log", "r"),  # path-duplicate: withheld twice
        WithheldEntry("raw/held2.log", "r"),
    )
    loaded = Manifest(schema=Manifest.SCHEMA, campaign_id="2026-11-01-x", artifacts=entries,
                      withheld=withheld)  # fmt: skip
    by_rel = {
        "raw/a.log": scan.FileResult("raw/a.log", A, 1),
        "raw/unread.log": scan.FileResult("raw/unread.log", None, None),
        "raw/b.log": scan.FileResult("raw/b.log", B, 3),
    }
    listed: dict[str, str] = {}
    held: dict[str, str | None] = {}
    found = [
        (i.code, i.pointer) for i in verify._check_manifest_entries(loaded, by_rel, listed, held)
    ]
    assert found == [
        ("path-escape", "/artifacts/0/path"),
        ("path-duplicate", "/artifacts/2/path"),
        ("path-invalid", "/artifacts/3/path"),
        ("missing-artifact", "/artifacts/4"),
        ("hash-mismatch", "/artifacts/6/sha256"),
        ("size-mismatch", "/artifacts/6/bytes"),
        ("path-absolute", "/withheld/0/path"),
        ("path-duplicate", "/withheld/1/path"),
        ("withheld-artifact", "/withheld/2"),
        ("path-duplicate", "/withheld/3/path"),
        ("withheld-artifact", "/withheld/4"),
    ]
    assert held == {"raw/held.log": B, "raw/held2.log": None}


def test_what_cannot_be_read_at_the_last_moment_adds_nothing_of_its_own(tmp_path: Path) -> None:
    from ledger.evidence import scan
    from ledger.promotion.policy import load_policy

    # Files that vanished after the scan: their own findings say why, these add none.
    assert verify._check_policy(tmp_path, None, load_policy()) == []
    gone = scan.FileResult("derived/gone.json", A, 10)
    assert verify._derivable(gone)
    assert verify._derived_document(tmp_path / gone.rel) is None
    assert verify._recomputed([(str(tmp_path), gone.rel)]) == [[]]


def test_a_manifest_with_only_warnings_is_still_read() -> None:
    from ledger.evidence import scan
    from ledger.findings import CODES, Issue

    warning = next(code for code, (severity, _) in CODES.items() if severity == "warning")
    error = next(code for code, (severity, _) in CODES.items() if severity == "error")
    folder = ASSETS / "verify" / "valid" / "2026-11-01-asset-campaign"
    found = scan.FileResult("manifest.json", A, 10, (Issue(warning, "", "w"),))
    assert verify._read_manifest(folder, found) is not None
    broken = scan.FileResult("manifest.json", A, 10, (Issue(error, "", "e"),))
    assert verify._read_manifest(folder, broken) is None


def test_a_folder_that_cannot_be_listed_is_named_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(self: Path) -> Any:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "iterdir", refuse)
    with pytest.raises(verify.UnusablePathError, match=r": Permission denied$"):
        verify.verify_paths([str(tmp_path)])


def test_sums_name_each_line_that_differs_from_the_manifest(tmp_path: Path) -> None:
    a, b, c = "a" * 64, "b" * 64, "c" * 64
    sums = tmp_path / "SHA256SUMS"
    sums.write_text(f"{a}  x.json\n{c}  z.json\n")
    issues = verify._check_sums(sums, {"x.json": b, "y.json": b}, set())
    assert [i.message for i in issues] == [
        (
            "not the bytes seal writes: differs at byte 0 (line 1, column 1): has "
            f"'{a}  x.json', expected '{b}  x.json'"
        ),
        f"'x.json': SHA256SUMS says {a}, expected {b}",
        "'y.json' is missing from SHA256SUMS",
        "'z.json' is in SHA256SUMS but not in the manifest",
    ]
    # A missing seal file's line is taken as written: its own finding says it is gone.
    sums.write_text(f"{b}  statement.sigstore.json\n{b}  x.json\n")
    assert verify._check_sums(sums, {"x.json": b}, {"statement.sigstore.json"}) == []
