"""Sanitizer throughput beside detect-secrets scanning the same files, in one run.

A tree of --mib MiB is generated (seeded): cell-run-like JSON artifacts whose identities,
serve flags and environments carry planted secrets, GPU UUIDs, private endpoints and host
paths, and server logs with the same sprinkled through ordinary lines. Each tool reads
every file once, in this process, best of --repeat:

- ledger: ``Sanitizer.document`` on each JSON artifact (parsed with orjson) and
  ``Sanitizer.text`` on each log, as ``ledger publish`` does;
- detect-secrets: ``SecretsCollection.scan_file`` with its default plugins and filters.

It prints MB/s for both and the ratio (goal: at least 2x), and checks that no planted
value survives in the sanitized output.

    python benchmarks/sanitize_bench.py [--mib 200] [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
import uuid
from pathlib import Path

import orjson

from ledger._internal.sanitizer import Sanitizer

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "data" / "secrets-corpus"
WORDS = "decode prefill scheduler batch tokens cache warm request served queue ready".split()


def _planted(rng: random.Random) -> list[str]:
    corpus = CORPUS / "derived" / "labelled_strings.jsonl"
    positives = [
        json.loads(line)["text"] for line in corpus.open() if '"label": "positive"' in line
    ]
    generated = [
        f"GPU-{uuid.UUID(int=rng.getrandbits(128))}",
        f"http://10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}:8001/v1",
        f"/home/user{rng.randint(1, 999)}/models/x.safetensors",
        "hf_" + "".join(rng.choices("abcdefghijklmnopqrstuvwxyzABCDEFGH0123456789", k=34)),
    ]
    return [p for p in positives if "\n" not in p] + generated


def generate(folder: Path, mib: int, seed: int = 0) -> list[str]:
    """Writes the tree; returns the planted values."""
    rng = random.Random(seed)
    planted = _planted(rng)
    used: list[str] = []
    total = 0
    index = 0
    while total < mib << 20:
        index += 1
        if index % 3:
            secret = rng.choice(planted)
            used.append(secret)
            document = {
                "schema": "anvil-serving.cell-run/v1",
                "identity": {
                    "declared_serve_flags": ["--tp-size 2", "--port 8001", f"--note {secret}"],
                    "environment": {"NCCL_P2P_DISABLE": "1", "EXTRA": secret},
                    "model": "org/model-name",
                    "revision": f"{rng.getrandbits(160):040x}",
                },
                "requests": [
                    {
                        "index": i,
                        "prompt_sha256": f"{rng.getrandbits(256):064x}",
                        "response_id": f"chatcmpl-{rng.getrandbits(64):x}",
                        "finish_reason": "length",
                        "chunks_ns": [rng.randint(0, 10**9) for _ in range(24)],
                    }
                    for i in range(40)
                ],
            }
            data = orjson.dumps(document, option=orjson.OPT_INDENT_2)
            (folder / f"cell-{index:06d}.json").write_bytes(data)
        else:
            lines = []
            for n in range(2000):
                if n % 97 == 0:
                    secret = rng.choice(planted)
                    used.append(secret)
                    lines.append(f"2026-11-29T12:00:{n % 60:02d}Z WARN worker: {secret}")
                else:
                    lines.append(
                        f"2026-11-29T12:00:{n % 60:02d}Z INFO "
                        + " ".join(rng.choice(WORDS) for _ in range(12))
                        + f" req=chatcmpl-{rng.getrandbits(48):x}"
                    )
            data = ("\n".join(lines) + "\n").encode()
            (folder / f"serve-{index:06d}.log").write_bytes(data)
        total += len(data)
    return used


def run_ledger(files: list[Path]) -> tuple[float, list[bytes]]:
    sanitizer = Sanitizer()
    outputs = []
    start = time.perf_counter()
    for path in files:
        data = path.read_bytes()
        if path.suffix == ".json":
            outputs.append(orjson.dumps(sanitizer.document(orjson.loads(data))))
        else:
            outputs.append(sanitizer.text(data.decode()).encode())
    return time.perf_counter() - start, outputs


def run_detect_secrets(files: list[Path]) -> tuple[float, int]:
    from detect_secrets import SecretsCollection
    from detect_secrets.settings import default_settings

    start = time.perf_counter()
    with default_settings():
        collection = SecretsCollection()
        for path in files:
            collection.scan_file(str(path))
    found = sum(len(v) for _, v in collection.data.items())
    return time.perf_counter() - start, found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp)
        used = generate(folder, args.mib)
        files = sorted(folder.iterdir())
        size = sum(p.stat().st_size for p in files) / 1e6
        print(f"{size:.0f} MB in {len(files)} files, {len(used)} planted values")
        ours = min((run_ledger(files) for _ in range(args.repeat)), key=lambda r: r[0])
        blob = b"\n".join(ours[1])
        # Each planted value once: searching 200 MB for each of 15,000 plants takes minutes.
        missed = sorted(
            v for v in set(used) if v.encode() in blob or json.dumps(v)[1:-1].encode() in blob
        )
        print(
            f"ledger sanitizer:  {size / ours[0]:7.1f} MB/s ({ours[0]:.1f} s), "
            f"planted values left: {len(missed)}",
            flush=True,
        )
        for value in missed[:5]:
            print("  left:", value[:80])
        theirs = min((run_detect_secrets(files) for _ in range(args.repeat)), key=lambda r: r[0])
        print(
            f"detect-secrets:    {size / theirs[0]:7.1f} MB/s ({theirs[0]:.1f} s), "
            f"{theirs[1]} findings"
        )
        print(f"ratio: {theirs[0] / ours[0]:.2f}x (goal: at least 2x)")


if __name__ == "__main__":
    main()
