"""``ledger publish``: a raw campaign made public, sanitized and resealed."""

from __future__ import annotations

from ledger.publication._publish import (
    Published,
    PublishError,
    masked_path,
    name_hits,
    publish,
)

__all__ = [
    "PublishError",
    "Published",
    "masked_path",
    "name_hits",
    "publish",
]
