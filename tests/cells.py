"""A cell run as tests read and edit it, whichever version: its records as ``requests``.

``load`` gives a v2 cell run with its parts' records under ``requests`` (each as readers
see it, its default fields put back); ``save`` writes the records back into parts split
as they were (or as asked), in the writer's own form, with the header's part list,
digests and counts made to match, as an editor who knew the format would: a test that
wants a header's counts wrong edits the header after it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import orjson

from ledger.formats.cell_records import CELL_RUN_V2, DEFAULTS, part_rel, records


def campaign_of(path: Path) -> Path:
    """The campaign folder of a cell run at ``<campaign>/<arm>/<stage>/<cell>.json``."""
    return path.parent.parent.parent


def load(path: Path) -> dict[str, Any]:
    """The cell run at ``path``, its records under ``requests``."""
    document: dict[str, Any] = json.loads(path.read_bytes())
    if document.get("schema") == CELL_RUN_V2:
        document["requests"] = list(records(campaign_of(path), document))
    return document


def rel_of(path: Path) -> str:
    return path.relative_to(campaign_of(path)).as_posix()


def save(path: Path, document: dict[str, Any], *, split: list[int] | None = None) -> None:
    """Writes a document ``load`` gave: a v2 one's ``requests`` into its parts, ``split``
    records a part (default: as they were listed; the rest into the last)."""
    edited = document
    document = dict(document)
    if document.get("schema") != CELL_RUN_V2:
        path.write_text(json.dumps(document))
        return
    requests = document.pop("requests")
    campaign = campaign_of(path)
    own = rel_of(path).removesuffix(".json") + ".part-"
    for part in document.get("parts", ()):
        if part["path"].startswith(own):
            (campaign / part["path"]).unlink(missing_ok=True)
    sizes = split if split is not None else [p["requests"] for p in document.get("parts", ())]
    sizes = sizes or [len(requests)]
    parts = []
    start = 0
    for number, size in enumerate(sizes, 1):
        last = number == len(sizes)
        chunk = requests[start:] if last else requests[start : start + size]
        start += size
        data = b"".join(_dumps(_line(r)) + b"\n" for r in chunk)
        rel = part_rel(rel_of(path), number)
        (campaign / rel).write_bytes(data)
        parts.append(
            {
                "path": rel,
                "sha256": hashlib.sha256(data).hexdigest(),
                "bytes": len(data),
                "requests": len(chunk),
            }
        )
    document["parts"] = parts
    document["records"] = len(requests)
    path.write_text(json.dumps(document))
    # The caller's document lists the parts as they are now, for where().
    edited.update(parts=parts, records=len(requests))


def _dumps(record: dict[str, Any]) -> bytes:
    try:
        return orjson.dumps(record, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # a number past 64 bits, as a test may write one
        return json.dumps(record, sort_keys=True, separators=(",", ":")).encode()


def _line(record: dict[str, Any]) -> dict[str, Any]:
    """A record as the writer writes it: chunk_tokens (what load adds, the channels'
    count) and the fields at their defaults left out; any other value kept, even one a
    test made wrong."""
    return {
        k: v
        for k, v in record.items()
        if k != "chunk_tokens"
        and not (k in DEFAULTS and v == DEFAULTS[k] and type(v) is type(DEFAULTS[k]))
    }


def where(path: Path, document: dict[str, Any], index: int) -> tuple[str, int]:
    """(part path, line) of the ``index``-th record of a v2 document ``load`` gave."""
    for part in document["parts"]:
        if index < part["requests"]:
            return part["path"], index + 1
        index -= part["requests"]
    raise IndexError(index)
