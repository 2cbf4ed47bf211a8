"""Reading TOML (plans, policies, simulator profiles) with one-line errors.

TOML integers are unbounded in Python and TOML floats may be inf or nan, but every number we
keep goes into JSON artifacts and DuckDB columns that hold 64 bits and finite values: such a
number is refused here, naming its key, rather than failing later in a serializer. Files are
read up to a size cap, so a path such as /dev/zero is refused rather than read forever.
"""

from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import Any

from ledger.errors import InvalidArtifact
from ledger.formats.jsonio import read_limited

__all__ = [
    "MAX_TOML_BYTES",
    "parse_toml",
    "read_toml",
]

_INT64 = (-(1 << 63), (1 << 63) - 1)
MAX_TOML_BYTES = 4 << 20
"""Plans, policies and profiles are a few kilobytes."""


def _check_ints(value: Any, key: str, source: str) -> None:
    if isinstance(value, int) and not isinstance(value, bool):
        if not _INT64[0] <= value <= _INT64[1]:
            raise InvalidArtifact(f"{source}: {key}: {value} is beyond the 64-bit integer range")
    elif isinstance(value, float) and not math.isfinite(value):
        # JSON, where every value we keep ends up, has no inf or nan.
        raise InvalidArtifact(f"{source}: {key}: {value} is not a finite number")
    elif isinstance(value, dict):
        for name, item in value.items():
            _check_ints(item, f"{key}.{name}" if key else str(name), source)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_ints(item, f"{key}[{index}]", source)


def parse_toml(text: str, *, source: str) -> dict[str, Any]:
    """The parsed document.

    Raises:
        InvalidArtifact: not TOML, or an integer beyond 64 bits; the message names ``source``.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InvalidArtifact(f"{source}: not valid TOML: {e}") from None
    _check_ints(data, "", source)
    return data


def read_toml(path: str | Path) -> dict[str, Any]:
    """The parsed file.

    Raises:
        InvalidArtifact: unreadable, not UTF-8, not TOML, or an integer beyond 64 bits.
    """
    try:
        data = read_limited(path, MAX_TOML_BYTES, what="plans, policies and profiles")
    except OSError as e:
        raise InvalidArtifact(f"{path}: cannot read: {e.strerror or e}") from None
    except InvalidArtifact as e:
        raise InvalidArtifact(f"{path}: {e}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidArtifact(f"{path}: not UTF-8: byte {e.start} is invalid") from None
    return parse_toml(text, source=str(path))
