"""The ledger database: DuckDB built from evidence files, which stay the source of truth.

The metric definitions are SQL in :mod:`~ledger.database.sql`.
"""

from __future__ import annotations

from ledger.database import sql
from ledger.database._database import (
    Database,
    DatabaseError,
    Known,
    Table,
    build,
    insert_rows,
    plain,
)

__all__ = [
    "Database",
    "DatabaseError",
    "Known",
    "Table",
    "build",
    "insert_rows",
    "plain",
    "sql",
]
