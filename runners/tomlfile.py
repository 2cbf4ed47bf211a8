"""Reading a TOML file (plans, simulator profiles) with one-line errors: the core's reader."""

from ledger._internal.tomlio import parse_toml, read_toml

__all__ = ["parse_toml", "read_toml"]
