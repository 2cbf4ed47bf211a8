"""Typed reading of a plan's TOML tables, with errors that name the file and the key."""

from __future__ import annotations

import re
from typing import Any

from ledger.errors import InvalidArtifact

__all__ = ["ENV_NAME", "NAME", "TableReader"]

NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
"""An arm's or a stage's name."""
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""An environment variable's name."""

_TOML_NAMES = {dict: "a table", list: "an array", str: "a string", bool: "true or false",
               int: "a whole number", float: "a number"}  # fmt: skip
"""What a plan's author calls each kind: the file is TOML, not Python."""


class TableReader:
    """Typed access to one TOML table with errors that name the key."""

    def __init__(self, source: str, where: str, table: Any) -> None:
        self.source = source
        self.where = where
        if not isinstance(table, dict):
            raise self.error("", f"expected a table, got {table!r}")
        self.table: dict[str, Any] = table
        self.used: set[str] = set()

    def error(self, key: str, message: str) -> InvalidArtifact:
        place = ".".join(p for p in (self.where, key) if p)
        return InvalidArtifact(f"{self.source}: {place or 'plan'}: {message}")

    def get(self, key: str, kinds: tuple[type, ...], default: Any = ..., what: str = "") -> Any:
        self.used.add(key)
        if key not in self.table:
            if default is ...:
                raise self.error(key, "is required")
            return default
        value = self.table[key]
        if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
            named = what or _TOML_NAMES.get(kinds[0], kinds[0].__name__)
            raise self.error(key, f"expected {named}, got {value!r}")
        return value

    def positive(self, key: str, default: Any = ...) -> int:
        value = self.get(key, (int,), default, "a whole number")
        if value < 1:
            raise self.error(key, f"must be at least 1, got {value}")
        return int(value)

    def name(self, key: str) -> str:
        value = self.get(key, (str,), what="a name")
        if not NAME.fullmatch(value):
            raise self.error(key, f"must match [a-z0-9][a-z0-9_-]*, got {value!r}")
        return str(value)

    def int_list(self, key: str, default: Any = ...) -> list[int]:
        value = self.get(key, (int, list), default, "a whole number or a list of them")
        values = value if isinstance(value, list) else [value]
        if not values or not all(type(v) is int and v >= 1 for v in values):
            raise self.error(key, f"expected positive whole numbers, got {value!r}")
        return list(values)

    def bool_list(self, key: str, default: Any) -> list[bool]:
        value = self.get(key, (bool, list), default, "true, false or a list of them")
        values = value if isinstance(value, list) else [value]
        if not values or not all(isinstance(v, bool) for v in values):
            raise self.error(key, f"expected true/false values, got {value!r}")
        return list(dict.fromkeys(values))

    def finish(self) -> None:
        unknown = sorted(set(self.table) - self.used)
        if unknown:
            raise self.error(unknown[0], "unknown key")
