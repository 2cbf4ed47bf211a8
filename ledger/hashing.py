"""SHA-256 digests of artifacts, always of the bytes as stored."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import BinaryIO, NewType

__all__ = [
    "CHUNK_SIZE",
    "HexDigest",
    "format_digest",
    "is_hex_digest",
    "sha256_bytes",
    "sha256_file",
    "sha256_stream",
]

HexDigest = NewType("HexDigest", str)
"""64 lowercase hex characters: the SHA-256 of an artifact's stored bytes."""

CHUNK_SIZE = 1 << 20
"""Read size for streamed hashing: large enough to amortise syscalls, small enough that
memory stays flat however large the artifact."""

_HEX_DIGEST = re.compile(r"[0-9a-f]{64}")


def is_hex_digest(value: object) -> bool:
    """Tells whether ``value`` is a SHA-256 digest in the canonical form (64 lowercase hex)."""
    return isinstance(value, str) and _HEX_DIGEST.fullmatch(value) is not None


def sha256_bytes(data: bytes) -> HexDigest:
    """Returns the digest of ``data``."""
    return HexDigest(hashlib.sha256(data).hexdigest())


def sha256_stream(stream: BinaryIO) -> tuple[HexDigest, int]:
    """Hashes a binary stream through a fixed buffer.

    Returns:
        the digest and the number of bytes read.
    """
    # NOTE: a fixed buffer keeps memory constant for arbitrarily large artifacts; the
    # digest is of what was read, so callers compare the byte count with what they expect.
    hasher = hashlib.sha256()
    buffer = bytearray(CHUNK_SIZE)
    view = memoryview(buffer)
    total = 0
    while True:
        count = stream.readinto(view)  # type: ignore[attr-defined]
        if not count:
            break
        hasher.update(view[:count])
        total += count
    return HexDigest(hasher.hexdigest()), total


def sha256_file(path: str | Path) -> tuple[HexDigest, int]:
    """Returns the digest and size of the file at ``path``, streamed.

    Raises:
        OSError: the file cannot be read.
    """
    with open(path, "rb", buffering=0) as stream:
        return sha256_stream(stream)


def format_digest(digest: HexDigest) -> str:
    """Returns the human form of a digest, ``sha256:<hex>``."""
    return f"sha256:{digest}"
