"""How a run's memory, its artifacts and the steps after it grow with its length.

A simulated endpoint (``ledger simulate`` with a fast profile, in its own process) serves
campaigns of two arms, baseline and candidate, each with half of --sizes requests in one
capacity cell at concurrency 32. For each size, ``ledger run`` runs in its own process,
then ``ledger seal``, ``ledger verify``, ``ledger derive`` (A/B) and ``ledger publish`` on
the result, each in its own process. Printed per size: the runner's peak RSS, bytes on
disk per request and per generated token, and each step's wall time and peak RSS; then
the ratios against the smallest size (RSS: the goal is at most 1.2x at the largest; time:
between consecutive sizes, where linear growth reads as the ratio of the sizes).

Then --token-requests requests of --token-length tokens (512), for the bytes per
generated token of long replies, with the simulator's decode rate at --token-rate tokens
per second (a realistic gap between chunks, jittered by the real scheduler).

Then the endurance (skipped with --no-endurance): the requests of an hour at 100 requests
per second (--endurance-requests, 360,000), each arm open-loop (Poisson arrivals) at
--endurance-rate requests per second (so the hour takes minutes), the same steps after it.

    python benchmarks/run_bench.py [--sizes 1000,10000,100000] [--tokens 64]
        [--token-requests 1000] [--token-length 512] [--token-rate 400]
        [--no-endurance] [--endurance-requests 360000] [--endurance-rate 1000]
        [--work DIR]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ledger.formats.cell_records import records

LEDGER = [sys.executable, "-m", "ledger"]
DERIVE = "--baseline baseline --candidate candidate --kind ab --differs served".split()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _measured(command: list[str], *, env: dict[str, str] | None = None) -> tuple[float, float]:
    """Runs a command to its end: (wall seconds, peak RSS in MiB of its process)."""
    # Its log to a file: a pipe nobody reads until the end fills, and the command stops.
    with tempfile.TemporaryFile() as log:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, env=env)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        code = os.waitstatus_to_exitcode(status)
        process.returncode = code
        if code not in (0, 1):
            log.seek(0)
            said = log.read().decode("utf-8", "replace")[-2000:]
            raise SystemExit(f"{' '.join(command)}: exit {code}\n{said}")
    return wall, usage.ru_maxrss / 1024


class Simulator:
    """``ledger simulate`` in its own process, with a profile of this benchmark's."""

    def __init__(self, work: Path, name: str, profile: str) -> None:
        self.port = _free_port()
        path = work / f"{name}.toml"
        path.write_text(profile)
        self.process = subprocess.Popen(
            [*LEDGER, "simulate", "--port", str(self.port), "--profile", str(path)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(200):
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        raise SystemExit("the simulator did not start")

    def close(self) -> None:
        self.process.terminate()
        self.process.wait()


FAST = """decode_tok_s = 200000.0
prefill_tok_s = 10000000.0
overhead_ms = 0.0
max_running_requests = 1024
prefix_cache = false
"""


def _plan(path: Path, campaign: str, port: int, stage: str) -> None:
    arms = "".join(
        f'[[arms]]\nname = "{name}"\nbase_url = "http://127.0.0.1:{port}/v1"\n'
        f'model = "anvil-sim"\n[arms.identity]\nserved = "{name}"\n'
        for name in ("baseline", "candidate")
    )
    path.write_text(f'campaign_id = "{campaign}"\nseed = 7\nprefix = "unique"\n{arms}{stage}')


def _capacity(requests: int, tokens: int) -> str:
    return (
        '[[stages]]\nkind = "capacity"\ncontext_targets = [128]\nconcurrency = 32\n'
        f"requests = {requests}\nmax_tokens = {tokens}\ncontrolled_output = true\nwarmup = 0\n"
    )


def _load(requests: int, rate: float) -> str:
    return (
        '[[stages]]\nkind = "load"\ncontext_target = 128\n'
        f"rate = {rate}\nrequests = {requests}\nmax_in_flight = 512\nmax_tokens = 16\n"
        "controlled_output = true\nwarmup = 0\n"
    )


def _on_disk(folder: Path) -> tuple[int, int, int]:
    """(bytes of the cell runs, requests, generated tokens) of a raw campaign."""
    size = requests = tokens = 0
    for header in sorted(folder.glob("*/*/*.json")):
        document = json.loads(header.read_bytes())
        if document.get("schema", "").startswith("anvil-serving.cell-run/"):
            size += header.stat().st_size + sum(p["bytes"] for p in document.get("parts", ()))
            for record in records(folder, document):
                requests += 1
                tokens += (record.get("usage") or {}).get("completion_tokens") or 0
    return size, requests, tokens


def _campaign(work: Path, name: str, port: int, stage: str) -> dict[str, float]:
    """Runs one campaign and the steps after it; their figures."""
    plan = work / f"{name}.toml"
    raw = work / f"raw-{name}"
    campaign = f"2026-12-03-{name}"
    _plan(plan, campaign, port, stage)
    folder = raw / campaign
    out: dict[str, float] = {}
    out["run_s"], out["run_rss"] = _measured([*LEDGER, "run", str(plan), "--raw-dir", str(raw)])
    out["bytes"], out["requests"], out["tokens"] = _on_disk(folder)
    steps = {
        "seal": [*LEDGER, "seal", str(folder)],
        "verify": [*LEDGER, "verify", str(folder)],
        "derive": [*LEDGER, "derive", str(folder), *DERIVE],
        "publish": [*LEDGER, "publish", str(folder), "--out", str(work / f"public-{name}")],
    }
    for step, command in steps.items():
        out[f"{step}_s"], out[f"{step}_rss"] = _measured(command)
    shutil.rmtree(raw)
    shutil.rmtree(work / f"public-{name}")
    return out


def _row(label: str, figures: dict[str, float]) -> str:
    steps = "  ".join(
        f"{step} {figures[f'{step}_s']:7.1f} s {figures[f'{step}_rss']:5.0f} MiB"
        for step in ("seal", "verify", "derive", "publish")
    )
    return (
        f"{label:>10}  run {figures['run_s']:7.1f} s  peak RSS {figures['run_rss']:5.0f} MiB  "
        f"{figures['bytes'] / figures['requests']:6.0f} B/request  "
        f"{figures['bytes'] / figures['tokens']:5.2f} B/token  {steps}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--token-requests", type=int, default=1000)
    parser.add_argument("--token-length", type=int, default=512)
    parser.add_argument("--token-rate", type=float, default=400.0)
    parser.add_argument("--no-endurance", action="store_true")
    parser.add_argument("--endurance-requests", type=int, default=360_000)
    parser.add_argument("--endurance-rate", type=float, default=1000.0)
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="run-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    sizes = [int(s) for s in args.sizes.split(",")]
    fast = Simulator(work, "fast", FAST)
    results: dict[int, dict[str, float]] = {}
    try:
        print(f"{len(sizes)} sizes, two arms of a capacity cell each, {args.tokens}-token replies")
        for size in sizes:
            results[size] = _campaign(
                work, f"c{size}", fast.port, _capacity(size // 2, args.tokens)
            )
            print(_row(f"{size:,}", results[size]), flush=True)
        small, large = results[sizes[0]], results[sizes[-1]]
        print(
            f"peak RSS {sizes[-1]:,} / {sizes[0]:,}: "
            f"{large['run_rss'] / small['run_rss']:.2f}x (goal <= 1.2x)"
        )
        for before, after in itertools.pairwise(sizes):
            grown = after / before
            print(
                f"time {after:,} / {before:,} requests, linear at {grown:g}x: "
                + ", ".join(
                    f"{step} {results[after][f'{step}_s'] / results[before][f'{step}_s']:.1f}x"
                    for step in ("run", "seal", "verify", "derive", "publish")
                )
            )
    finally:
        fast.close()
    paced = Simulator(work, "paced", FAST.replace("200000.0", str(args.token_rate)))
    try:
        long = _campaign(
            work,
            "tokens",
            paced.port,
            _capacity(args.token_requests // 2, args.token_length),
        )
        print(_row(f"{args.token_length} tok", long))
        print(
            f"bytes per generated token, {args.token_length}-token replies at "
            f"{args.token_rate:g} tok/s: {long['bytes'] / long['tokens']:.2f} (goal <= 4)"
        )
    finally:
        paced.close()
    if args.no_endurance:
        return
    fast = Simulator(work, "fast", FAST)
    try:
        each = args.endurance_requests
        hour = _campaign(work, "endurance", fast.port, _load(each, args.endurance_rate))
        print(
            f"endurance: {each:,} requests an arm (an hour at 100/s), open loop at "
            f"{args.endurance_rate:g}/s"
        )
        print(_row("endurance", hour))
    finally:
        fast.close()


if __name__ == "__main__":
    main()
