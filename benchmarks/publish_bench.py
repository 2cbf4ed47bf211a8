"""``ledger publish`` end to end on raw campaigns of up to a million requests: time and peak
memory at each size, to show the memory stays flat as the campaign grows.

For each --sizes entry, a sealed raw campaign is generated (seeded): cells of
--per-cell requests each, every request as the runner records it (64 chunk times, digests,
usage, server timings), every cell's identity carrying planted secrets (an API key in the
serve flags, a token in the environment, GPU UUIDs, a private endpoint, a home path), and
a run manifest that references every cell by digest (so publish rewrites references).
Then ``ledger publish`` runs on it in a fresh process, which prints its wall time and peak
resident memory, and the publication is checked: no planted value left in any file.

    python benchmarks/publish_bench.py [--sizes 250000,1000000] [--per-cell 1000]
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from ledger.evidence import manifest

CAMPAIGN = "2026-12-01-publish-bench"
SECRETS = (
    "sk-proj-Zq81nB3xT0aL9fW2cV7mR4kP6sJ1hD5gE8yU3",
    "hf_QwErTyUiOpAsDfGhJkLzXcVbNm012345",
    "GPU-7c1e2f3a-4b5d-4e6f-8a9b-0c1d2e3f4a5b",
    "10.42.7.19",
    "/home/build-runner",
)

PUBLISH = """
import resource, sys, time
from ledger.cli._main import main
start = time.perf_counter()
status = main(["publish", sys.argv[1], "--out", sys.argv[2]])
seconds = time.perf_counter() - start
print(status, seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def _request(rng: random.Random, index: int, cell: int) -> dict[str, Any]:
    sent = index * 250_000_000 + rng.randrange(1_000_000)
    first = sent + 40_000_000 + rng.randrange(20_000_000)
    chunks = [first + i * 4_200_000 + rng.randrange(400_000) for i in range(64)]
    return {
        "chunk_channels": "c" * 64,
        "chunk_tokens": 64,
        "chunks_ns": chunks,
        "content_chars": 380 + rng.randrange(20),
        "content_sha256": rng.randbytes(32).hex(),
        "done_marker": True,
        "end_ns": chunks[-1] + 150_000,
        "error": None,
        "finish_reason": "length",
        "first_content_ns": first,
        "first_token_ns": first,
        "headers_ns": sent + 900_000,
        "index": index,
        "last_token_ns": chunks[-1],
        "output_as_requested": True,
        "prompt_sha256": rng.randbytes(32).hex(),
        "reasoning_chars": 0,
        "resent": None,
        "response_id": f"chatcmpl-{cell}-{index}",
        "sent_ns": sent,
        "server_timings": {"prompt_ms": 38.5, "predicted_n": 64, "predicted_ms": 268.8},
        "tool_calls": [],
        "usage": {"cached_tokens": 0, "completion_tokens": 64, "prompt_tokens": 1024},
        "warmup": index < 2,
    }


def _cell(rng: random.Random, cell: int, requests: int) -> dict[str, Any]:
    key, token, gpu, host, home = SECRETS
    return {
        "schema": "https://anvil-ledger.dev/schemas/cell-run/v1",
        "campaign_id": CAMPAIGN,
        "arm": "baseline",
        "stage": {"name": "capacity", "kind": "capacity"},
        "cell": {"id": f"ctx1024-c{1 + cell % 64}-nothink", "context_target": 1024},
        "status": "complete",
        "identity": {
            "declared_serve_flags": [f"--api-key {key}", f"--model-path {home}/models/q"],
            "environment": {"HF_TOKEN": token, "CUDA_VISIBLE_DEVICES": gpu},
            "gpu_uuids": [gpu],
            "endpoint": f"http://{host}:8001/v1",
        },
        "requests": [_request(rng, i, cell) for i in range(requests)],
    }


def generate(folder: Path, requests: int, per_cell: int) -> int:
    """A sealed raw campaign of ``requests`` requests; returns its size in bytes."""
    rng = random.Random(requests)
    total = 0
    cells = []
    (folder / "baseline" / "capacity").mkdir(parents=True)
    for cell in range(requests // per_cell):
        rel = f"baseline/capacity/cell-{cell:05}.json"
        data = orjson.dumps(_cell(rng, cell, per_cell), option=orjson.OPT_SORT_KEYS)
        (folder / rel).write_bytes(data)
        total += len(data)
        cells.append({"artifact": {"path": rel, "sha256": _sha256(data)}})
    run_manifest = orjson.dumps({"campaign_id": CAMPAIGN, "cells": cells})
    (folder / "run-manifest.json").write_bytes(run_manifest)
    manifest.seal(folder, check=False)
    return total + len(run_manifest)


def _sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="250000,1000000")
    parser.add_argument("--per-cell", type=int, default=1000)
    args = parser.parse_args()
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as temp:
            raw = Path(temp) / "raw" / CAMPAIGN
            started = time.perf_counter()
            total = generate(raw, size, args.per_cell)
            print(
                f"generated {size:,} requests in {size // args.per_cell:,} cells, "
                f"{total / 1e6:,.0f} MB ({time.perf_counter() - started:.0f} s)",
                flush=True,
            )
            out = subprocess.run(
                [sys.executable, "-c", PUBLISH, str(raw), str(Path(temp) / "public")],
                check=True,
                capture_output=True,
                text=True,
            ).stdout.split()
            status, seconds, peak = int(out[-3]), float(out[-2]), int(out[-1]) / 1024
            if status != 0:
                raise SystemExit(f"ledger publish exited {status}")
            public = Path(temp) / "public" / CAMPAIGN
            for path in public.rglob("*"):
                if path.is_file():
                    data = path.read_bytes()
                    left = [s for s in SECRETS if s.encode() in data]
                    if left:
                        raise SystemExit(f"{path}: planted values left: {left}")
            rows.append((size, total, seconds, peak))
            print(
                f"published {size:,} requests: {seconds:.1f} s, {total / 1e6 / seconds:.1f} MB/s, "
                f"peak {peak:,.0f} MiB; no planted value left",
                flush=True,
            )
    print("| requests | raw size | `ledger publish` | throughput | peak memory |")
    print("| --- | --- | --- | --- | --- |")
    for size, total, seconds, peak in rows:
        print(
            f"| {size:,} | {total / 1e6:,.0f} MB | {seconds:.1f} s | "
            f"{total / 1e6 / seconds:.1f} MB/s | {peak:,.0f} MiB |"
        )
    if len(rows) > 1:
        print(
            f"peak memory, largest over smallest: {rows[-1][3] / rows[0][3]:.2f}x for "
            f"{rows[-1][0] / rows[0][0]:.0f}x the requests (goal: flat)"
        )


if __name__ == "__main__":
    main()
