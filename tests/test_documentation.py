"""The documents speak to users about the product: the README stays a few screens, every
document the repository cites is in it, and none reads as a working log."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.conftest import ROOT

CITED = re.compile(r"(?<![\w/.-])((?:docs|tests/data)/[\w./-]+\.md|[A-Z]+\.md)\b")
WORKING_LOG = re.compile(r"(?i)\b(?:this|the last|the previous) stop\b|\ban earlier build\b")


def _tracked() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    suffixes = {".py", ".md", ".toml", ".cfg", ".yaml", ".yml", ""}
    return [
        ROOT / name
        for name in listed.split("\0")
        if name
        and not name.startswith("tests/data/")
        and Path(name).suffix in suffixes
        and (ROOT / name).is_file()
    ]


def test_the_readme_is_a_few_screens() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250


def _missing_citations(path: Path, root: Path) -> list[str]:
    """The documents ``path`` cites that are neither under ``root`` nor beside ``path``."""
    missing = []
    for match in CITED.finditer(path.read_text(errors="replace")):
        cited = match.group(1).rstrip(".")
        if (root / cited).is_file():
            continue
        # A path relative to the citing file, or the provenance record by its name.
        if (path.parent / cited).is_file() or (root / "tests" / "data" / cited).is_file():
            continue
        missing.append(f"{path.relative_to(root)}: {cited}")
    return missing


def test_every_document_cited_is_in_the_repository() -> None:
    assert [m for path in _tracked() for m in _missing_citations(path, ROOT)] == []


def test_the_cited_check_finds_a_missing_document(tmp_path: Path) -> None:
    (tmp_path / "docs" / "guides").mkdir(parents=True)
    (tmp_path / "docs" / "guides" / "runs.md").write_text("runs\n")
    (tmp_path / "tests" / "data").mkdir(parents=True)
    (tmp_path / "tests" / "data" / "PROVENANCE.md").write_text("sources\n")
    (tmp_path / "docs" / "guides" / "beside.md").write_text("beside\n")
    # Spelled apart: the scan of the repository above does not find them here.
    missing, nowhere = "DESIGN" + ".md", "docs/guides/" + "nowhere.md"
    page = "docs/guides/" + "page.md"
    citing = tmp_path / page
    citing.write_text(
        f"see {missing} and {nowhere}, not docs/guides/runs.md, PROVENANCE.md or beside.md\n"
    )
    assert _missing_citations(citing, tmp_path) == [f"{page}: {missing}", f"{page}: {nowhere}"]


def test_no_document_reads_as_a_working_log() -> None:
    found = [
        f"{path.relative_to(ROOT)}: {match.group(0)}"
        for path in _tracked()
        for match in WORKING_LOG.finditer(path.read_text(errors="replace"))
    ]
    assert found == []
    assert WORKING_LOG.search("as measured at the last " + "stop") is not None
    assert WORKING_LOG.search("an earlier " + "build gave 51 MB/s") is not None
