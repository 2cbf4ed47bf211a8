"""Tests need nothing outside the repository: every data file is here, listed with its
source and digest, and no file of the project reads the folder beside the checkout."""

from __future__ import annotations

import hashlib
import re
import subprocess

import pytest

from tests.conftest import DATA, ROOT

_ROW = re.compile(r"^\| `([^`]+)` \| `([0-9a-f]{64})` \|$", re.MULTILINE)


def _listed() -> dict[str, str]:
    return dict(_ROW.findall((DATA / "PROVENANCE.md").read_text()))


def test_every_data_file_is_listed_with_its_sha256() -> None:
    listed = _listed()
    present = {
        p.relative_to(DATA).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in DATA.rglob("*")
        if p.is_file() and p.name != "PROVENANCE.md"
    }
    assert len(listed) > 50
    assert sorted(set(present) - set(listed)) == [], "unlisted in PROVENANCE.md"
    assert sorted(set(listed) - set(present)) == [], "listed but missing"
    changed = sorted(name for name, digest in listed.items() if present[name] != digest)
    assert changed == []


def test_every_source_folder_names_a_source_and_a_licence() -> None:
    text = (DATA / "PROVENANCE.md").read_text()
    sections = re.split(r"^## ", text, flags=re.MULTILINE)[1:]
    folders = {section.split("`")[1].rstrip("/") for section in sections}
    assert folders == {p.name for p in DATA.iterdir() if p.is_dir()}
    for section in sections:
        for field in ("- Source: ", "- Licence: ", "- What it must give: "):
            assert field in section, f"{section.splitlines()[0]}: no {field.strip()}"


# Spelled apart so that this file does not match itself.
_BESIDE = re.compile("|".join([r"\.\./" + "shared", r"parent\s*/\s*[\"']" + "shared" + "[\"']"]))


def _tracked() -> list[str]:
    result = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        pytest.fail(f"git ls-files failed: {result.stderr.strip()}")
    return result.stdout.splitlines()


def test_no_file_of_the_project_reads_the_folder_beside_the_checkout() -> None:
    offenders = []
    files = _tracked()
    assert "tests/conftest.py" in files
    for name in files:
        path = ROOT / name
        if not path.is_file() or name.startswith("tests/data/"):
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        if _BESIDE.search(text):
            offenders.append(name)
    assert offenders == []


def test_the_pattern_catches_both_spellings() -> None:
    assert _BESIDE.search("see ../" + "shared/seeds")
    assert _BESIDE.search("ROOT.parent / " + '"shared"')
    assert not _BESIDE.search('prefix = "shared"')
