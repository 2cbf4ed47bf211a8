"""How often ``ledger derive`` calls two runs of one configuration different, and how often
it sees a 5 % slower decode: the false-alarm rate and the power of its verdicts, measured.

Each campaign is a real ``ledger run`` of three arms, then ``ledger derive`` of baseline
against candidate with the third arm, a repeat of the baseline (``repeat_of``), as the A/A
control (ledger/derivation/calibration.py):

1. **A/A on the simulator**: candidate and baseline are one profile, with request-to-request
   jitter (--jitter-cv) and run-to-run noise (--run-cv). A false alarm is a campaign where
   any median of any cell reads improvement or regression. Goal: at most 5 %.
2. **A 5 % slower decode on the simulator**: the candidate's decode rate is 0.95 times the
   baseline's. Detected where decode reads a regression. Goal: at least 80 %.
3. **A/A on llama-server** (built from source as the tests build it; skipped with
   --no-llama): every arm is the one server, one request at a time, its prompt cache off,
   the arms taking turns request by request (``interleave = true``). Goal: at most 1 false
   alarm in --pairs. With --llama-sequential the same pairs run again arm after arm, for
   contrast (no goal): on a shared host that design meets the host's slow spells one arm
   at a time.

Printed: per setup the campaigns, the campaigns with a false alarm or a detection, each
median's rate of verdicts, its mean noise floor and MDE, and the goal met or not.

    python benchmarks/ab_power.py [--campaigns 20] [--pairs 10] [--requests 100]
        [--concurrency 16] [--jitter-cv 0.05] [--run-cv 0.005] [--no-llama]
        [--llama-sequential] [--no-simulator] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LEDGER = [sys.executable, "-m", "ledger"]
METRICS = ("decode_tok_s_p50", "effective_prefill_tok_s_p50", "ttft_p50_ms", "e2e_p50_ms")
DETECTED = ("improvement", "regression")


def _plan(
    campaign: str,
    *,
    arms: dict[str, str],
    requests: int,
    context: int,
    max_tokens: int,
    concurrency: int,
    interleave: bool = False,
) -> str:
    """A plan of baseline, candidate and the baseline's repeat, each arm's table given."""
    lines = [f'campaign_id = "{campaign}"', "seed = 11", 'prefix = "unique"']
    lines += ["interleave = true", ""] if interleave else [""]
    for name, table in arms.items():
        lines += ["[[arms]]", f'name = "{name}"', table, ""]
    lines += [
        "[[arms]]",
        'name = "baseline-again"',
        'repeat_of = "baseline"',
        "",
        "[[stages]]",
        'kind = "capacity"',
        f"context_targets = [{context}]",
        f"concurrency = {concurrency}",
        f"requests = {requests}",
        f"max_tokens = {max_tokens}",
        "controlled_output = true",
        "warmup = 2",
    ]
    return "\n".join(lines) + "\n"


def _simulated(decode: float, jitter_cv: float, run_cv: float) -> str:
    # A GPU server's scale at concurrency 1: about 100 ms to the first token of a 512-token
    # prompt, 100 tokens per second of decode.
    return (
        "[arms.simulated]\n"
        f"decode_tok_s = {decode!r}\nprefill_tok_s = 6000.0\noverhead_ms = 20.0\n"
        f"max_running_requests = 64\nprefix_cache = false\n"
        f"jitter_cv = {jitter_cv!r}\nrun_cv = {run_cv!r}"
    )


def _campaign(work: Path, plan: str, name: str, differs: tuple[str, ...] = ()) -> dict[str, object]:
    """Runs and derives one campaign (the arms declared to differ in ``differs``): its
    comparison document."""
    path = work / f"{name}.toml"
    path.write_text(plan)
    raw = work / "raw"
    for command in (
        [*LEDGER, "run", str(path), "--raw-dir", str(raw)],
        [*LEDGER, "derive", str(raw / name), "--baseline", "baseline", "--candidate", "candidate"]
        + [f"--differs={key}" for key in differs],
    ):
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(command[2:4])} failed: {done.stderr[-2000:]}")
    derived = raw / name / "derived" / "ab-comparison-baseline-vs-candidate.json"
    document: dict[str, object] = json.loads(derived.read_text())
    return document


class Tally:
    """The verdicts of one setup's campaigns."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.campaigns = 0
        self.any_detected = 0
        self.unmatched = 0
        self.verdicts: dict[str, Counter[str]] = {m: Counter() for m in METRICS}
        self.floors: dict[str, list[float]] = {m: [] for m in METRICS}
        self.mdes: dict[str, list[float]] = {m: [] for m in METRICS}
        self.changes: list[float] = []
        """Every cell's decode change, candidate and control against the baseline."""

    def add(self, document: dict[str, object]) -> None:
        self.campaigns += 1
        calibration = document.get("calibration")
        if not document.get("matched") or not (
            isinstance(calibration, dict) and calibration.get("matched")
        ):
            self.unmatched += 1
        found = False
        rows = document["rows"]
        assert isinstance(rows, list)
        for row in rows:
            for metric in METRICS:
                entry = row["metrics"].get(metric)
                if entry is None:
                    continue
                self.verdicts[metric][entry["verdict"]] += 1
                found |= entry["verdict"] in DETECTED
                if entry.get("noise_floor_percent") is not None:
                    self.floors[metric].append(entry["noise_floor_percent"])
                if entry.get("mde_percent") is not None:
                    self.mdes[metric].append(entry["mde_percent"])
            decode = row["metrics"].get("decode_tok_s_p50") or {}
            for key in ("change_percent", "aa_change_percent"):
                if decode.get(key) is not None:
                    self.changes.append(decode[key])
        self.any_detected += found

    def rate(self, metric: str, verdict: str) -> float:
        total = sum(self.verdicts[metric].values())
        return self.verdicts[metric][verdict] / total if total else float("nan")


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def _report(tally: Tally, goal: str | None, met: bool = True) -> None:
    judged = f"goal {goal}: {'met' if met else 'MISSED'}" if goal else "no goal (for contrast)"
    print(f"\n{tally.label}: {tally.campaigns} campaigns, {judged}")
    if tally.changes:
        print(
            "  decode median of the candidate or the repeat against the baseline: "
            f"{min(tally.changes):+.1f} % to {max(tally.changes):+.1f} %"
        )
    print(
        f"  campaigns with any median called different: {tally.any_detected}"
        f" ({tally.any_detected / tally.campaigns:.0%}); not matched: {tally.unmatched}"
    )
    print(f"  {'median':<28} {'improvement':>11} {'regression':>10} {'floor %':>8} {'MDE %':>6}")
    for metric in METRICS:
        print(
            f"  {metric:<28} {tally.rate(metric, 'improvement'):>11.0%}"
            f" {tally.rate(metric, 'regression'):>10.0%}"
            f" {_mean(tally.floors[metric]):>8.2f} {_mean(tally.mdes[metric]):>6.2f}"
        )


def _simulator_setups(args: argparse.Namespace, work: Path) -> tuple[Tally, Tally]:
    shape = {
        "requests": args.requests,
        "context": 512,
        "max_tokens": 16,
        "concurrency": args.concurrency,
    }
    same, slower = Tally("A/A, simulator"), Tally("decode 5 % slower, simulator")
    for tally, factor in ((same, 1.0), (slower, 0.95)):
        for index in range(args.campaigns):
            name = f"2026-12-03-{'aa' if factor == 1.0 else 'slow'}-{index:02d}"
            arms = {
                "baseline": _simulated(100.0, args.jitter_cv, args.run_cv),
                "candidate": _simulated(100.0 * factor, args.jitter_cv, args.run_cv),
            }
            differs = ("simulated_profile",) if factor != 1.0 else ()
            tally.add(_campaign(work, _plan(name, arms=arms, **shape), name, differs))
    return same, slower


def _llama_setups(args: argparse.Namespace, work: Path) -> list[Tally]:
    """The interleaved A/A pairs, then (with --llama-sequential) the sequential ones."""
    sys.path.insert(0, str(ROOT))
    from tests.llama_server import LlamaServer, build

    tallies = []
    with LlamaServer(build(), parallel=1, log=work / "llama.log") as server:
        # The prompt cache off: each arm would otherwise find the one before it cached.
        table = (
            f'base_url = "{server.base_url}"\nmodel = "anvil-tiny"\n'
            "[arms.extra_body]\ncache_prompt = false"
        )
        # One request at a time: the server's batching of concurrent requests depends on
        # how they happen to overlap, another noise than the server's own.
        shape = {"requests": args.requests, "context": 256, "max_tokens": 16, "concurrency": 1}
        for interleave in (True, False)[: 2 if args.llama_sequential else 1]:
            design = "interleaved" if interleave else "sequential"
            tally = Tally(f"A/A, llama-server, arms {design}")
            for index in range(args.pairs):
                name = f"2026-12-03-llama-{design}-{index:02d}"
                arms = {"baseline": table, "candidate": table}
                plan = _plan(name, arms=arms, interleave=interleave, **shape)
                tally.add(_campaign(work, plan, name))
            tallies.append(tally)
    return tallies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--campaigns", type=int, default=20)
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--jitter-cv", type=float, default=0.05)
    parser.add_argument("--run-cv", type=float, default=0.005)
    parser.add_argument("--no-llama", action="store_true")
    parser.add_argument("--llama-sequential", action="store_true")
    parser.add_argument("--no-simulator", action="store_true")
    parser.add_argument("--work", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        work = args.work or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        if not args.no_simulator:
            print(
                f"simulator: decode 100 tok/s, 512-token prompts, 16 tokens out, jitter_cv "
                f"{args.jitter_cv}, run_cv {args.run_cv}; {args.requests} requests per arm at "
                f"concurrency {args.concurrency}"
            )
            same, slower = _simulator_setups(args, work)
            _report(same, "false alarms <= 5 %", same.any_detected <= 0.05 * same.campaigns)
            detected = slower.verdicts["decode_tok_s_p50"]["regression"]
            goal = "decode regression detected >= 80 %"
            _report(slower, goal, detected >= 0.8 * slower.campaigns)
        if not args.no_llama:
            print(
                f"\nllama-server: the tests' tiny model on one CPU thread, prompt cache off, "
                f"256-token prompts, 16 tokens out; {args.requests} requests per arm at "
                "concurrency 1"
            )
            interleaved, *sequential = _llama_setups(args, work)
            _report(interleaved, "at most 1 false alarm", interleaved.any_detected <= 1)
            for contrast in sequential:
                _report(contrast, None)
        print(f"\n{time.perf_counter() - started:.0f} s in all")


if __name__ == "__main__":
    main()
