"""Sanitizer throughput on 2 cores, its prefilter's candidates, and detect-secrets, in one run.

A tree of --mib MiB is generated (seeded): cell-run-like JSON artifacts whose identities,
serve flags and environments carry planted secrets, GPU UUIDs, private endpoints and host
paths (and a Kubernetes-style ``{name, value}`` list); server logs with the same sprinkled
through ordinary lines; and, one file in ten, a configuration file (YAML values, TOML,
``.env``, CSV) whose secrets are opaque strings that only where they stand marks secret
(nested under ``credentials:``, an ``env`` entry's value, the item after ``--api-key``, a
``[*.auth]`` table, ``DB_PASS_n=``, an ``api_key`` column). The sanitizer does to each file
what ``ledger publish`` does: ``Sanitizer.document``, deterministic bytes and the
fail-closed rescan (``Sanitizer.scan``) per JSON artifact; ``Sanitizer.file_text`` (the
structure walk, decoded escapes, the detectors) and its rescan per text file. It runs

- without the prefilter, in one process (every detector over every text: the reference);
- with the Hyperscan prefilter, in one process, then in --jobs processes (each on a core
  of its own, taking the next file, largest first, from one queue, with a sanitizer of
  its own, as publishers of separate campaigns would), each --repeats times: the median
  is printed (the machines here are shared and noisy).

Every run must leave no planted value in its output, and the prefiltered output must be
byte-identical to the reference's. First, the prefilter candidates are measured on the
same files: how fast each engine tells which detectors may match a file, and how many
(file, detector) pairs it leaves to run. detect-secrets (default plugins and filters) runs
on the first --reference-mib MiB.

    python benchmarks/sanitize_bench.py [--mib 20] [--jobs 2] [--reference-mib 2] [--repeats 5]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import random
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import orjson

from ledger.sanitizer._prefilter import prefilter_for
from ledger.sanitizer._regex_forms import hyperscan_pattern
from ledger.sanitizer._sanitizer import Sanitizer, load_rules

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
        if index % 10 == 0:
            # Configuration kept beside a campaign: what only its structure marks secret.
            data, secrets = _config(rng, index)
            used.extend(secrets)
            (folder / _CONFIG_NAMES[index // 10 % len(_CONFIG_NAMES)].format(index)).write_bytes(
                data
            )
        elif index % 3:
            secret = rng.choice(planted)
            used.append(secret)
            document = {
                "schema": "anvil-serving.cell-run/v1",
                "identity": {
                    "declared_serve_flags": ["--tp-size 2", "--port 8001", f"--note {secret}"],
                    "environment": {"NCCL_P2P_DISABLE": "1", "EXTRA": secret},
                    "env": [
                        {"name": "NCCL_DEBUG", "value": "WARN"},
                        {"name": "VLLM_API_KEY", "value": _opaque(rng, used)},
                    ],
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


_CONFIG_NAMES = ["values-{:06d}.yaml", "serve-{:06d}.toml", "deploy-{:06d}.env", "keys-{:06d}.csv"]


def _opaque(rng: random.Random, used: list[str]) -> str:
    """A secret no pattern knows (only where it stands says what it is)."""
    value = "cfg" + "".join(rng.choices("abcdefghijkmnpqrstuvwxyz23456789", k=20))
    used.append(value)
    return value


def _config(rng: random.Random, index: int) -> tuple[bytes, list[str]]:
    """A configuration file of about 8 KB in the format its name says, with secrets under
    nested keys, in {name, value} entries, after flags and in a secret column."""
    used: list[str] = []
    kind = _CONFIG_NAMES[index // 10 % len(_CONFIG_NAMES)]
    lines: list[str] = []
    for n in range(60):
        word = rng.choice(WORDS)
        if kind.endswith(".yaml"):
            lines += [
                f"{word}{n}:",
                f"  replicas: {rng.randint(1, 8)}",
                f"  image: vllm/vllm-openai:v0.{rng.randint(5, 9)}.{rng.randint(0, 3)}",
                "  credentials:",
                f"    value: {_opaque(rng, used)}",
                "  env:",
                "    - name: HF_TOKEN",
                f"      value: {_opaque(rng, used)}",
                "  args:",
                "    - --api-key",
                f"    - {_opaque(rng, used)}",
            ]
        elif kind.endswith(".toml"):
            lines += [
                f"[{word}{n}]",
                f"port = {8000 + n}",
                f'model = "org/model-{word}"',
                f"[{word}{n}.auth]",
                f'value = "{_opaque(rng, used)}"',
            ]
        elif kind.endswith(".env"):
            lines += [f"{word.upper()}_{n}_PORT={8000 + n}", f"DB_PASS_{n}={_opaque(rng, used)}"]
        else:
            if not lines:
                lines.append("name,region,api_key,replicas")
            lines.append(f"{word}{n},eu-west-{n % 3},{_opaque(rng, used)},{rng.randint(1, 8)}")
    return ("\n".join(lines) + "\n").encode(), used


def _sanitized(sanitizer: Sanitizer, path: Path) -> bytes:
    """One file as publish sanitizes it, with the fail-closed rescan."""
    data = path.read_bytes()
    if path.suffix == ".json":
        cleaned = sanitizer.document(orjson.loads(data))
        output = orjson.dumps(cleaned, option=orjson.OPT_SORT_KEYS)
        if list(sanitizer.scan(cleaned)):
            raise SystemExit(f"{path.name}: still redactable after sanitizing")
        return output
    text = sanitizer.file_text(data.decode(), path.name)
    if sanitizer.file_hits(text, path.name):
        raise SystemExit(f"{path.name}: still redactable after sanitizing")
    return text.encode()


def _left(outputs: list[bytes], used: set[str]) -> list[str]:
    """The planted values some output still holds, as written or JSON-escaped."""
    blob = b"\n".join(outputs).decode()
    return sorted(v for v in used if v in blob or json.dumps(v)[1:-1] in blob)


def sanitize(
    files: list[Path], used: set[str], prefilter: bool = True
) -> tuple[float, dict[str, str], list[str]]:
    """Sanitizes ``files`` in this process: (seconds, file -> output digest, the planted
    values some output still holds)."""
    sanitizer = Sanitizer(prefilter=prefilter)
    prefilter_for(sanitizer.rules).build()  # once per process, as a long publication would
    digests: dict[str, str] = {}
    outputs: list[bytes] = []
    start = time.perf_counter()
    for path in files:
        output = _sanitized(sanitizer, path)
        digests[path.name] = hashlib.sha256(output).hexdigest()
        outputs.append(output)
    elapsed = time.perf_counter() - start
    return elapsed, digests, _left(outputs, used)


def _worker(
    queue: Any, go: Any, ready: Any, results: Any, used: set[str], repeats: int, core: int
) -> None:
    """Takes files from ``queue`` until it is empty, each run, with a sanitizer of its
    own per run; reports when it finished (the monotonic clock, which every process of
    this machine reads alike), then what its outputs still hold, off the clock."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {core})  # one core each, as a pool of publishers would get
    prefilter_for(load_rules()).build()
    Sanitizer().text("warm")
    ready.put(True)
    for _ in range(repeats):
        go.get()
        sanitizer = Sanitizer()
        outputs = []
        while True:
            path = queue.get()
            if path is None:
                break
            outputs.append(_sanitized(sanitizer, path))
        results.put((time.monotonic(), _left(outputs, used)))


def run_parallel(
    files: list[Path], jobs: int, used: set[str], repeats: int
) -> tuple[list[float], list[str]]:
    """Wall seconds of each of ``repeats`` runs with ``jobs`` processes (after each has
    built its databases) taking the next file from one queue, largest first, as a pool
    of publishers would; and the planted values an output still holds."""
    context = multiprocessing.get_context("fork")
    queue, ready, results = (context.Queue() for _ in range(3))
    # A start signal each: one process cannot take another's.
    goes = [context.Queue() for _ in range(jobs)]
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
    workers = [
        context.Process(
            target=_worker,
            args=(queue, go, ready, results, used, repeats, cores[i % len(cores)]),
        )
        for i, go in enumerate(goes)
    ]
    for worker in workers:
        worker.start()
    for _ in workers:
        ready.get()
    order = sorted(files, key=lambda p: (-p.stat().st_size, p.name))
    walls: list[float] = []
    left: set[str] = set()
    for _ in range(repeats):
        for path in [*order, *[None] * jobs]:
            queue.put(path)
        time.sleep(0.2)  # the queue filled before the clock starts
        start = time.monotonic()
        for go in goes:
            go.put(True)
        finished = [results.get() for _ in workers]
        walls.append(max(at for at, _ in finished) - start)
        left.update(v for _, found in finished for v in found)
    for worker in workers:
        worker.join()
    return walls, sorted(left)


def candidates(files: list[Path]) -> list[tuple[str, float, int, int, str]]:
    """Per prefilter engine: (name, MB/s, detectors left to run over all files, files,
    what it gives). Each tells, per file, which detectors may match it."""
    import ahocorasick
    import re2

    rules = load_rules()
    detectors = rules.detectors
    texts = [p.read_bytes() for p in files]
    size = sum(map(len, texts)) / 1e6
    rows = []

    def timed(name: str, fired: Any, gives: str) -> None:
        start = time.perf_counter()
        total = sum(len(fired(data)) for data in texts)
        rows.append((name, size / (time.perf_counter() - start), total, len(texts), gives))

    expressions = [hyperscan_pattern(d.pattern.pattern) for d in detectors]
    engine = prefilter_for(rules)

    def hyperscan_fired(data: bytes) -> set[int]:
        return engine.firing(data) - {engine.count}

    timed("hyperscan 0.9 (line forms, backward forms, literals)", hyperscan_fired,
          "which regexes, and where (lines, or starts)")  # fmt: skip

    regex_set = re2.Set.SearchSet(re2.Options())
    for expression in expressions:
        regex_set.Add(expression)
    regex_set.Compile()
    timed("google-re2 Set (every regex, lookarounds dropped)", lambda d: regex_set.Match(d) or [],
          "which regexes, no positions")  # fmt: skip

    automaton = ahocorasick.Automaton()
    for detector in detectors:
        for literal in detector.any:
            automaton.add_word(literal, literal)
    automaton.make_automaton()
    always = {i for i, d in enumerate(detectors) if not d.any}

    def literal_fired(data: bytes) -> set[int]:
        seen = {literal for _, literal in automaton.iter(data.decode().lower())}
        return always | {i for i, d in enumerate(detectors) if seen.intersection(d.any)}

    timed(f"pyahocorasick (the rules' literals; {len(always)} regexes have none)",
          literal_fired, "which literals, then every regex that has one")  # fmt: skip

    def python_fired(data: bytes) -> set[int]:
        lower = data.decode().lower()
        return {i for i, d in enumerate(detectors) if not d.any or any(x in lower for x in d.any)}

    timed("Python `in` per literal (without a prefilter)", python_fired, "the same as above")
    return rows


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
    parser.add_argument("--mib", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--reference-mib", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp) / "tree"
        folder.mkdir()
        used = set(generate(folder, args.mib))
        files = sorted(folder.iterdir())
        size = sum(p.stat().st_size for p in files) / 1e6
        print(f"{size:.0f} MB in {len(files)} files, {len(used)} distinct planted values")
        print("\nprefilter candidates (which detectors may match each file):")
        print("| engine | MB/s | (file, regex) pairs left to run | gives |")
        print("| --- | --- | --- | --- |")
        for name, speed, left, count, gives in candidates(files):
            print(
                f"| {name} | {speed:.0f} | {left:,} of {count * len(load_rules().detectors):,} | {gives} |"
            )
        print()
        reference, expected, left = sanitize(files, used, prefilter=False)
        print(
            f"sanitizer, no prefilter, 1 process:   {size / reference:7.1f} MB/s "
            f"({reference:.1f} s), planted values left: {len(left)}"
        )
        singles = []
        for _ in range(args.repeats):
            single, digests, left = sanitize(files, used)
            singles.append(single)
            if digests != expected:
                break
        single = statistics.median(singles)
        same = "identical to the reference" if digests == expected else "DIFFERS from the reference"
        print(
            f"sanitizer, prefilter, 1 process:      {size / single:7.1f} MB/s "
            f"({single:.2f} s, median of {len(singles)}), planted values left: {len(left)}, "
            f"output {same}"
        )
        # Each process numbers its own placeholders: the outputs are not the reference's.
        walls, left = run_parallel(files, args.jobs, used, args.repeats)
        wall = statistics.median(walls)
        print(
            f"sanitizer, prefilter, {args.jobs} processes:    {size / wall:7.1f} MB/s "
            f"({wall:.2f} s, median of {len(walls)}), planted values left: {len(left)}"
        )
        sample, total = [], 0
        for path in files:
            if total >= args.reference_mib << 20:
                break
            sample.append(path)
            total += path.stat().st_size
        theirs, found = run_detect_secrets(sample)
        print(
            f"detect-secrets (first {total / 1e6:.1f} MB): {total / 1e6 / theirs:7.1f} MB/s, "
            f"{found} findings"
        )
        print(
            f"ratio: {size / wall:.1f} MB/s on {args.jobs} cores (goal: at least 100 MB/s); "
            f"{reference / single:.1f}x the reference on one"
        )


if __name__ == "__main__":
    main()
