"""The document formats: their JSON Schemas (:mod:`~ledger.formats.schema`) and typed
models (:mod:`~ledger.formats.models`), the run fields the database loads
(:mod:`~ledger.formats.columns`), a cell run's records wherever it keeps them
(:mod:`~ledger.formats.cell_records`), and how their files are read and written: strict
JSON and TOML, regular files only, outputs made visible together or not at all.
"""

from __future__ import annotations

from ledger.formats import (
    cell_records,
    columns,
    jsonio,
    models,
    outputs,
    regular,
    schema,
    tomlio,
)

__all__ = [
    "cell_records",
    "columns",
    "jsonio",
    "models",
    "outputs",
    "regular",
    "schema",
    "tomlio",
]
