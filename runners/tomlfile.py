"""Reading a TOML file (plans, simulator profiles) with one-line errors."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from ledger.errors import InvalidArtifact


def read_toml(path: str | Path) -> dict[str, Any]:
    """The parsed file.

    Raises:
        InvalidArtifact: unreadable or not TOML; the message names the file.
    """
    try:
        with open(path, "rb") as stream:
            return tomllib.load(stream)
    except OSError as e:
        raise InvalidArtifact(f"{path}: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise InvalidArtifact(f"{path}: not valid TOML: {e}") from None
