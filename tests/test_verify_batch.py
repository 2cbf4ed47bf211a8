"""Verify derives every comparison of a tree in one database: the findings are those of
deriving each in a database of its own campaign."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

import ledger.database
from ledger.database import _database as database
from ledger.derivation import _comparison_reads as comparison_reads
from ledger.derivation import _derive as derive
from ledger.derivation._derive import derive_into
from ledger.evidence import manifest, scan
from ledger.evidence.tree import list_campaign
from ledger.formats import columns, jsonio
from ledger.formats.jsonio import write_json
from ledger.promotion import _evaluation as promotion
from ledger.promotion._decide import decide
from ledger.promotion.policy import parse_policy
from ledger.verification import _verify as verify
from ledger.verification._verify import verify_paths
from tests.conftest import forge_seal

EXAMPLE = Path(__file__).resolve().parent.parent / "evidence" / "2026-11-29-simulated-example"


def _copy(root: Path, copy: int) -> Path:
    """The published example under a new id, its comparison derived again under it."""
    old, new = EXAMPLE.name, f"{EXAMPLE.name}-copy{copy}"
    target = root / new
    for path in sorted(EXAMPLE.rglob("*")):
        if path.is_dir() or path.name in (*manifest.SEAL_FILES, manifest.BUNDLE_NAME):
            continue
        out = target / path.relative_to(EXAMPLE).as_posix().replace(old, new)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(path.read_bytes().replace(old.encode(), new.encode()))
    sealed = manifest.read_manifest(EXAMPLE / manifest.MANIFEST_NAME)
    manifest.seal(target, withhold=[w.path for w in sealed.withheld], check=False, jobs=1)
    derive_into(target, "baseline", "candidate", differs=["simulated_profile"], replace=True)
    # Its summary states the comparison's figures: decided again, as after any derive.
    recorded = json.loads((target / "policy.json").read_bytes())
    decide(target, parse_policy(recorded, source="policy.json"), candidate="candidate")
    return target


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tree")
    for copy in range(3):
        _copy(root, copy)
    # One comparison edited and re-sealed: only deriving it again can tell.
    edited = root / f"{EXAMPLE.name}-copy1" / "derived/ab-comparison-baseline-vs-candidate.json"
    document = json.loads(edited.read_bytes())
    metric = document["rows"][0]["metrics"]["e2e_p50_ms"]
    metric["candidate"] *= 1.01
    metric["change_percent"] = (metric["candidate"] - metric["baseline"]) / metric["baseline"] * 100
    write_json(edited, document)
    forge_seal(edited.parent.parent)
    return root


def _findings(root: Path) -> list[tuple[str, str, str, str]]:
    report = verify_paths([str(root)], jobs=1)
    return [(f.path, f.code, f.pointer, f.message) for f in report.findings]


def test_one_database_finds_what_one_per_campaign_finds(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[int] = []
    gaps: list[object] = []  # a comparison reads no gap between chunks: none is decoded
    real = database.build

    def counted(paths: list[Path], **options: object) -> database.Database:
        built.append(len(paths))
        gaps.append(options.get("gaps"))
        return real(paths, **options)  # type: ignore[arg-type]

    # verify builds through the package's name, derive through its own.
    monkeypatch.setattr(ledger.database, "build", counted)
    monkeypatch.setattr(derive, "build", counted)
    batched = _findings(tree)
    assert built == [3]  # one database for the three campaigns' comparisons
    assert gaps == [False]

    def alone(paths: list[Path], **options: object) -> database.Database:
        if len(paths) > 1:
            raise database.DatabaseError("as if one campaign could not be loaded")
        built.append(1)
        gaps.append(options.get("gaps"))
        return real(paths, **options)  # type: ignore[arg-type]

    built.clear()
    gaps.clear()
    monkeypatch.setattr(ledger.database, "build", alone)
    monkeypatch.setattr(derive, "build", alone)
    assert _findings(tree) == batched
    assert built == [1, 1, 1]  # each derived again in its own
    assert gaps == [False] * 3
    mismatches = [f for f in batched if f[1] == "derived-mismatch"]
    # The edited comparison, and the summary, whose figures it no longer gives.
    assert [(Path(f[0]).relative_to(tree).parts[0], f[2]) for f in mismatches] == [
        (f"{EXAMPLE.name}-copy1", "/rows/0/metrics/e2e_p50_ms/candidate"),
        (f"{EXAMPLE.name}-copy1", "/headline_results/0"),
    ]


def test_the_cores_share_the_derivations_and_find_the_same(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each worker derives a batch of campaigns (forked: the wrapper is theirs too) and
    # restates summaries; the findings are those of one process, in the same order.
    log = tmp_path / "batches"
    real = verify._recomputed

    def logged(batch: list[tuple[str, str]], known: Any = None) -> list[list[Any]]:
        with log.open("a") as out:
            out.write(f"{os.getpid()} {' '.join(Path(f).name for f, _ in batch)}\n")
        return real(batch, known)

    monkeypatch.setattr(verify, "_recomputed", logged)
    alone = verify_paths([str(tree)], jobs=1)
    log.unlink()
    shared = verify_paths([str(tree)], jobs=2)
    assert shared.findings == alone.findings
    assert any(f.code == "derived-mismatch" for f in shared.findings)
    lines = sorted(log.read_text().splitlines(), key=lambda line: line.split()[1:])
    pids = {line.split()[0] for line in lines}
    batches = [line.split()[1:] for line in lines]
    name = EXAMPLE.name
    assert len(pids) == 2 and str(os.getpid()) not in pids
    assert batches == [[f"{name}-copy0", f"{name}-copy2"], [f"{name}-copy1"]]


def test_a_campaign_the_shared_database_cannot_load_is_derived_alone(tree: Path) -> None:
    # A comparison naming another campaign: in a database of every campaign it would be
    # derived from the other one's rows; alone it cannot be derived at all.
    stray = tree / f"{EXAMPLE.name}-copy2" / "derived/ab-comparison-baseline-vs-candidate.json"
    saved = stray.read_bytes()
    try:
        document = json.loads(saved)
        document["campaign_id"] = f"{EXAMPLE.name}-copy0"
        write_json(stray, document)
        forge_seal(stray.parent.parent)
        found = [f for f in _findings(tree) if f[0].endswith("copy2/derived/" + stray.name)]
        message = (
            f"cannot be derived again: {stray}: campaign_id '{EXAMPLE.name}-copy0' but "
            f"the folder is '{EXAMPLE.name}-copy2' (a copied campaign?); run ledger verify"
        )
        assert [(f[1], f[2], f[3]) for f in found if f[1] == "derived-mismatch"] == [
            ("derived-mismatch", "/derivation", message)
        ]
    finally:
        stray.write_bytes(saved)
        forge_seal(stray.parent.parent)


def test_verify_reads_every_comparison_in_one_query_each(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    for name in ("_read_cells", "_read_values", "_read_evidence"):
        original = getattr(comparison_reads.Reads, name)

        def counted(self: comparison_reads.Reads, _name: str = name, _f: Any = original) -> Any:
            calls.append(_name)
            return _f(self)

        monkeypatch.setattr(comparison_reads.Reads, name, counted)
    report = verify_paths([str(tree)], jobs=1)
    derived = [f for f in report.findings if f.code == "derived-mismatch"]
    # Three comparisons, the edited one still caught (its summary too).
    assert report.campaigns == 3 and [Path(f.path).relative_to(tree).parts for f in derived] == [
        (f"{EXAMPLE.name}-copy1", "derived", "ab-comparison-baseline-vs-candidate.json"),
        (f"{EXAMPLE.name}-copy1", "summary.json"),
    ]
    assert sorted(calls) == ["_read_cells", "_read_evidence", "_read_values"]


def _logging_restated(monkeypatch: pytest.MonkeyPatch, log: Path) -> None:
    """Each restatement writes the documents it was handed (forked: the wrapper is the
    workers' too)."""
    real = verify._restated

    def logged(folder: str, documents: dict[str, Any] | None = None) -> list[Any]:
        with log.open("a") as out:
            names = "none" if documents is None else ",".join(sorted(documents))
            out.write(f"{Path(folder).name} {names}\n")
        return real(folder, documents)

    monkeypatch.setattr(verify, "_restated", logged)


def test_a_summary_is_restated_from_what_its_reader_parsed(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A campaign read whole by one worker is restated there, from the documents it
    # parsed; one whose files are spread over batches is restated afterwards, reading
    # them again. The findings are the same.
    log = tmp_path / "restated"
    _logging_restated(monkeypatch, log)
    whole = verify_paths([str(tree)], jobs=2)
    calls = sorted(line.split() for line in log.read_text().splitlines())
    assert [name for name, _ in calls] == [f"{EXAMPLE.name}-copy{i}" for i in range(3)]
    for _, names in calls:
        held = names.split(",")
        assert {"summary.json", "run-manifest.json", "policy.json", "manifest.json"} <= set(held)
        assert any(n.startswith("candidate/capacity/") for n in held)
        assert not any(n.endswith((".md", ".svg", ".html")) for n in held)
    log.unlink()
    monkeypatch.setattr(scan, "_BATCH_FILES", 4)
    split = verify_paths([str(tree)], jobs=2)
    assert sorted(line.split()[1] for line in log.read_text().splitlines()) == ["none"] * 3
    assert split.findings == whole.findings
    assert any(
        f.code == "derived-mismatch" and f.path.endswith("summary.json") for f in whole.findings
    )


def test_a_document_that_breaks_its_schema_is_read_again_not_handed_on(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Handed on, a cell run that breaks its schema would be counted by the restatement as
    # if read_document had taken it: it is left out, and read again (and refused) there.
    cell = tree / f"{EXAMPLE.name}-copy2" / "candidate/capacity/ctx1024-c1-nothink.json"
    saved = cell.read_bytes()
    log = tmp_path / "restated"
    try:
        document = json.loads(saved)
        document["status"] = "half-done"
        write_json(cell, document)
        forge_seal(cell.parent.parent.parent)
        _logging_restated(monkeypatch, log)
        whole = verify_paths([str(tree)], jobs=1)
        handed = {
            line.split()[0]: line.split()[1].split(",") for line in log.read_text().splitlines()
        }
        assert "candidate/capacity/ctx1024-c1-nothink.json" not in handed[cell.parents[2].name]
        assert "candidate/capacity/ctx1024-c1-nothink.json" in handed[f"{EXAMPLE.name}-copy0"]
        monkeypatch.setattr(scan, "_BATCH_FILES", 4)
        assert verify_paths([str(tree)], jobs=1).findings == whole.findings
        codes = {f.code for f in whole.findings if f.path.startswith(str(cell.parents[2]))}
        assert "schema-invalid" in codes
    finally:
        cell.write_bytes(saved)
        forge_seal(cell.parent.parent.parent)


def test_the_databases_are_told_what_the_workers_read(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The files of the campaigns derived again are not read again to learn their schemas:
    # the findings are those of a database that reads every one.
    sniffed: list[str] = []
    real = database._sniff
    monkeypatch.setattr(
        database, "_sniff", lambda file, *rest: sniffed.append(file) or real(file, *rest)
    )
    told = _findings(tree)
    assert sniffed == []
    monkeypatch.setattr(verify, "_known", lambda campaign, results: {})
    assert _findings(tree) == told
    assert len(sniffed) > 3 * 20


def test_a_restatement_handed_documents_reads_none_of_them_again(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What the worker parsed (from the bytes it hashed) is what the restatement counts:
    # reading a file again could give other bytes, and costs a parse and a validation.
    folder = tree / f"{EXAMPLE.name}-copy1"
    documents: dict[str, Any] = {}
    for entry in list_campaign(folder).entries:
        task = scan.FileTask(entry.path, entry.rel, entry.rel.endswith(".json"), entry.identity)
        scan.process_file(task, documents=documents)
    assert {"summary.json", "policy.json", "manifest.json", "run-manifest.json"} <= set(documents)
    expected = verify._restated(str(folder))
    read: list[str] = []
    for module, name in (
        (promotion, "read_document"),
        (verify, "read_document"),
        (jsonio, "read_json"),
    ):
        real = getattr(module, name)

        def spied(path: Any, *rest: Any, _real: Any = real, **options: Any) -> Any:
            read.append(Path(path).relative_to(folder).as_posix())
            return _real(path, *rest, **options)

        monkeypatch.setattr(module, name, spied)
    assert verify._restated(str(folder), documents) == expected != []
    assert not set(read) & set(documents), sorted(set(read) & set(documents))


def test_a_document_handed_on_under_a_path_no_listing_gives_is_not_read_from_there(
    tmp_path: Path,
) -> None:
    # A run manifest may name "a//b.json" or "a\\b.json"; no listing gives such a name, and
    # it is refused as before, whatever a mapping of documents holds under it.
    for odd in ("candidate\\x.json", "a//b.json", "./b.json"):
        evidence = promotion.Evidence(tmp_path, tmp_path.name, documents={odd: {"x": 1}})
        assert promotion._read(evidence, odd) is None
        assert "not a normalized relative POSIX path" in evidence.problems[0]


def test_the_databases_are_told_what_each_run_is(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    told: list[Any] = []
    real = verify._recomputed

    def capture(batch: list[tuple[str, str]], known: Any = None) -> list[list[Any]]:
        told.append(known)
        return real(batch, known)

    monkeypatch.setattr(verify, "_recomputed", capture)
    _findings(tree)
    (known,) = told
    runs = 0
    for path, found in known.items():
        data = Path(path).read_bytes()
        document = json.loads(data)
        assert found is not None and found[0] == document["schema"]
        assert found[1:4] == (
            document.get("campaign_id"),
            hashlib.sha256(data).hexdigest(),
            len(data),
        )
        assert found[4] is columns.loads_as_text(document)
        runs += found[4]
    assert runs >= 3 * 8
