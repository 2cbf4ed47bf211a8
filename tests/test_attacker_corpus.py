"""The attacker's corpus: every mutation of every campaign of ``evidence/`` is caught by
``ledger verify``, and none makes it raise (``tests/attacker_corpus.py`` lists them)."""

from __future__ import annotations

import shutil
import traceback
from collections import Counter
from pathlib import Path

import pytest

from ledger.verification._verify import verify_paths
from tests.attacker_corpus import mutations
from tests.conftest import ROOT

EVIDENCE = ROOT / "evidence"
CAMPAIGNS = sorted(p.name for p in EVIDENCE.iterdir() if p.is_dir())
CORPUS_SIZE = 1496
"""The number of mutations, as the documentation states it (docs/guides/publication.md)."""


def test_the_corpus_is_the_size_the_documentation_states() -> None:
    sizes = {name: Counter(m.kind for m in mutations(EVIDENCE / name)) for name in CAMPAIGNS}
    total = sum(sum(kinds.values()) for kinds in sizes.values())
    for name, kinds in sizes.items():
        print(f"attacker corpus: {name}: {dict(sorted(kinds.items()))}")
    print(f"attacker corpus: {total} mutations of {len(CAMPAIGNS)} campaigns")
    assert total == CORPUS_SIZE
    assert sum(UNSIGNED.values()) == 687
    assert all(
        set(kinds) >= {"bit-flip", "truncation", "deletion", "byte-appended"}
        for kinds in sizes.values()
    )
    assert all(
        kinds["number-resealed"] > 0 and kinds["unlisted-file"] > 0 for kinds in sizes.values()
    )


UNSIGNED = {
    ("2026-09-02-glm53-sglang-sm120-qualification", 0): 2,
    ("2026-09-08-glm53-linux-wsl-comparison", 0): 31,
    ("2026-09-17-glm53-mixed35-startup", 0): 2,
    ("2026-11-29-simulated-example", 0): 179,
    ("2026-11-29-simulated-example", 200): 172,
    ("2026-11-29-simulated-example", 400): 176,
    ("2026-11-29-simulated-example", 600): 71,
    ("2026-11-29-simulated-example", 800): 0,
    ("2026-11-29-simulated-example", 1000): 22,
    ("2026-11-29-simulated-example", 1200): 32,
}
"""Re-sealed number edits each chunk's content checks catch with the signature aside (a
reference's digest, a recomputed comparison, a gate's counts): every campaign is signed, so
without this count a lost check would go unseen behind ``bundle-mismatch``. The documentation
states the total (687 of 1,216)."""
CHUNK = 200
"""Mutations per test, so that the parallel suite spreads the corpus over its workers."""
CHUNKS = [
    (name, start)
    for name in CAMPAIGNS
    for start in range(0, len(mutations(EVIDENCE / name)), CHUNK)
]


@pytest.mark.parametrize(("name", "start"), CHUNKS, ids=[f"{n}-{s}" for n, s in CHUNKS])
def test_every_mutation_of_the_evidence_is_caught(name: str, start: int, tmp_path: Path) -> None:
    pristine = EVIDENCE / name
    work = tmp_path / name
    corpus = mutations(pristine)[start : start + CHUNK]
    missed: list[str] = []
    raised: list[str] = []
    unsigned = 0
    for mutation in corpus:
        if work.exists():
            shutil.rmtree(work)
        shutil.copytree(pristine, work)
        mutation.apply(work)
        try:
            report = verify_paths([str(work)], jobs=1)
        except Exception:  # noqa: BLE001 - any exception is the finding here
            raised.append(f"{mutation}: {traceback.format_exc(limit=3)}")
            continue
        codes = {f.code for f in report.findings if f.severity == "error"}
        if not codes:
            missed.append(f"{mutation.kind} {mutation.rel} {mutation.where}")
        elif mutation.kind == "number-resealed" and codes - {"bundle-mismatch"}:
            unsigned += 1
    resealed = sum(1 for m in corpus if m.kind == "number-resealed")
    print(
        f"attacker corpus: {name}[{start}:]: {len(corpus) - len(missed) - len(raised)} of "
        f"{len(corpus)} "
        f"mutations caught; of {resealed} re-sealed number edits, {unsigned} caught by checks "
        "other than the signature"
    )
    assert raised == []
    assert missed == []
    assert unsigned == UNSIGNED[(name, start)]
