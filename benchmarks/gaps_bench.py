"""What the gaps between chunks (the ``serving_metrics`` view's inter-token latency) cost a
database build: ``ledger.database.build`` of a raw campaign of --requests requests of
--tokens tokens each, with the gaps and without them (``gaps=False``, as derive and verify
build it), best of --repeat each, in one process.

The campaign is written as the runner writes it (``cell-run/v2``: a header per cell of
--per-cell requests, its records in JSON-lines parts of at most 8 MiB, each record's chunk
times compact in ``chunks_us``), or as ``cell-run/v1`` documents with ``--v1`` (chunk
times as a list of nanoseconds, publish_bench's records). Chunk times are 20 ms apart
with a jitter of about a millisecond, as a client with many streams records them; 2,000
distinct replies are drawn from, so the generator stays quick.

    python benchmarks/gaps_bench.py [--requests 250000] [--tokens 256] [--repeat 3] [--v1]
"""

from __future__ import annotations

import argparse
import hashlib
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from ledger.database import _database as database
from ledger.formats.cell_records import CELL_RUN_V2, encode_channels, encode_chunks, part_rel

CAMPAIGN = "2026-12-03-gaps-bench"
PART_BYTES = 8 << 20


def _replies(rng: random.Random, tokens: int, count: int = 2000) -> list[list[int]]:
    """Chunk times from the first token, in nanoseconds."""
    out = []
    for _ in range(count):
        at, times = 0, [0]
        for _ in range(tokens - 1):
            at += 20_000_000 + int(rng.gauss(0, 1_000_000))
            times.append(max(at, times[-1]))
        out.append(times)
    return out


def _record(rng: random.Random, index: int, chunks: list[int], tokens: int) -> dict[str, Any]:
    sent = index * 50_000_000 + rng.randrange(1_000_000)
    first = sent + 40_000_000 + rng.randrange(20_000_000)
    times = [first + t for t in chunks]
    return {
        "index": index,
        "warmup": index < 2,
        "sent_ns": sent,
        "headers_ns": sent + 900_000,
        "first_token_ns": first,
        "first_content_ns": first,
        "last_token_ns": times[-1],
        "end_ns": times[-1] + 150_000,
        "times": times,
        "usage": {"cached_tokens": 0, "completion_tokens": tokens, "prompt_tokens": 1024},
        "finish_reason": "length",
        "output_as_requested": True,
        "prompt_sha256": rng.randbytes(32).hex(),
        "content_sha256": rng.randbytes(32).hex(),
        "content_chars": 6 * tokens,
        "response_id": f"chatcmpl-{index}",
    }


def _v2_line(record: dict[str, Any], tokens: int, encoded: str) -> bytes:
    line = {k: v for k, v in record.items() if k != "times"}
    line["chunks_us"] = encoded
    line["channel_runs"] = encode_channels("c" * tokens)
    return orjson.dumps(line, option=orjson.OPT_SORT_KEYS) + b"\n"


def _header(cell: int, per_cell: int, schema: str) -> dict[str, Any]:
    return {
        "schema": schema,
        "campaign_id": CAMPAIGN,
        "arm": "baseline",
        "stage": {"name": "capacity", "kind": "capacity"},
        "cell": {
            "id": f"ctx1024-c{1 + cell % 64}-cell{cell:05}",
            "context_target": 1024,
            "concurrency": 1 + cell % 64,
            "requests": per_cell - 2,
            "warmup": 2,
        },
        "status": "complete",
        "identity": {"engine": "bench"},
    }


def generate(folder: Path, requests: int, tokens: int, per_cell: int, v1: bool) -> int:
    """A raw campaign of ``requests`` requests; returns its size in bytes."""
    rng = random.Random(requests)
    replies = _replies(rng, tokens)
    encoded = [encode_chunks(0, r) for r in replies]
    (folder / "baseline" / "capacity").mkdir(parents=True)
    total = 0
    for cell in range(requests // per_cell):
        rel = f"baseline/capacity/cell-{cell:05}.json"
        picks = [rng.randrange(len(replies)) for _ in range(per_cell)]
        records = [_record(rng, i, replies[p], tokens) for i, p in enumerate(picks)]
        if v1:
            header = _header(cell, per_cell, "anvil-serving.cell-run/v1")
            header["requests"] = [
                {**{k: v for k, v in r.items() if k != "times"}, "chunks_ns": r["times"]}
                for r in records
            ]
            data = orjson.dumps(header)
            (folder / rel).write_bytes(data)
            total += len(data)
            continue
        header = _header(cell, per_cell, CELL_RUN_V2)
        header["parts"], header["records"] = [], per_cell
        lines = [_v2_line(r, tokens, encoded[p]) for r, p in zip(records, picks, strict=True)]
        while lines:
            take, size = 0, 0
            while take < len(lines) and size < PART_BYTES:
                size += len(lines[take])
                take += 1
            data = b"".join(lines[:take])
            lines = lines[take:]
            part = part_rel(rel, len(header["parts"]) + 1)
            (folder / part).write_bytes(data)
            total += len(data)
            header["parts"].append(
                {
                    "path": part,
                    "sha256": hashlib.sha256(data).hexdigest(),
                    "bytes": len(data),
                    "requests": take,
                }
            )
        data = orjson.dumps(header)
        (folder / rel).write_bytes(data)
        total += len(data)
    return total


def _best(folder: Path, repeat: int, gaps: bool) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        database.build([folder], gaps=gaps).close()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=250_000)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--per-cell", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--v1", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp) / CAMPAIGN
        folder.mkdir()
        started = time.perf_counter()
        size = generate(folder, args.requests, args.tokens, args.per_cell, args.v1)
        print(
            f"generated {args.requests:,} requests of {args.tokens} tokens "
            f"({'v1' if args.v1 else 'v2'}, {size / 1e6:,.0f} MB) in "
            f"{time.perf_counter() - started:.0f} s",
            flush=True,
        )
        with_gaps = _best(folder, args.repeat, True)
        db = database.build([folder])
        gaps, rows = db.query("SELECT sum(n), count(*) FROM chunk_gaps").rows[0]
        db.close()
        without = _best(folder, args.repeat, False)
    print(
        f"build: {with_gaps:.3f} s with the gaps ({gaps:,} in {rows:,} histogram rows), "
        f"{without:.3f} s without: {with_gaps / without:.2f}x"
    )


if __name__ == "__main__":
    main()
