"""``ledger import``: other benchmark tools' per-request records (llmperf, AIPerf, vLLM's
and SGLang's benchmark scripts) as raw artifacts of a campaign, mapped by meaning, not by
name; with each source's own aggregates checked against what its records give."""

from __future__ import annotations

from ledger.imports._importer import (
    AGREEMENT,
    DATASET_KEYS,
    IMPORTED_SCHEMA,
    TOOLS,
    Imported,
    ImportedCell,
    import_files,
    self_check,
)

__all__ = [
    "AGREEMENT",
    "DATASET_KEYS",
    "IMPORTED_SCHEMA",
    "TOOLS",
    "Imported",
    "ImportedCell",
    "import_files",
    "self_check",
]
