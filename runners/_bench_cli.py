"""``ledger bench``: the flags of vLLM's ``bench serve`` (``runners/bench``)."""

from __future__ import annotations

import argparse
import datetime
import math
import os
import sys
from pathlib import Path
from typing import Any

from ledger.cli import exit_statuses
from ledger.errors import UsageError

RESERVED_IDENTITY = ("tool", "endpoint")
"""Identity keys a bench records itself (``--metadata`` cannot set them)."""


def register_bench(commands: Any, common: argparse.ArgumentParser) -> None:
    """Adds ``ledger bench --base-url URL --model M [vLLM bench serve flags]``."""
    bench = commands.add_parser(
        "bench",
        parents=[common],
        help="benchmark one endpoint with the flags of vLLM's 'bench serve'",
        description="Send --num-prompts random prompts of --random-input-len tokens to an "
        "OpenAI-compatible endpoint (all at once up to --max-concurrency, or at "
        "--request-rate), write a sealed raw campaign of one arm and one stage (as 'ledger "
        "run' writes it), and print vLLM's summary block. A second run with another --arm "
        "into the same --campaign adds an arm: 'ledger derive --kind ab' compares them.",
        epilog=exit_statuses(
            ok="the run is sealed and its requests met the minimum (one succeeded)",
            refused="no request succeeded (one line names the arm, the stage, the cell and "
            "the first error), or the run did not complete",
            unusable="a ShareGPT file missing or malformed, flags this bench cannot measure, "
            "or a campaign it cannot join (another workload, an arm measured already)",
            stopped="the campaign is sealed with its cell incomplete (run again into "
            "another --campaign)",
        ),
    )
    endpoint = bench.add_argument_group("endpoint (as vLLM's bench serve)")
    endpoint.add_argument(
        "--base-url", required=True, help="the server's root, e.g. http://127.0.0.1:8000"
    )
    endpoint.add_argument("--model", required=True, help="the served model name")
    endpoint.add_argument(
        "--endpoint",
        default="/v1/chat/completions",
        choices=["/v1/chat/completions", "/v1/completions"],
        help="the API streamed: chat (default, the server's chat template applied) or "
        "completions (the prompt as it is, vLLM's default)",
    )
    endpoint.add_argument(
        "--metadata",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="what this arm is (image, flags, GPU): recorded in its identity, which an A/B "
        "names with 'ledger derive --differs KEY'; repeatable",
    )
    endpoint.add_argument(
        "--api-key-env",
        metavar="NAME",
        help="the environment variable holding the API key (default: OPENAI_API_KEY when "
        "set); the key is never written",
    )
    data = bench.add_argument_group("prompts")
    data.add_argument(
        "--dataset-name",
        default="random",
        choices=["random", "sharegpt"],
        help="random (default): prompts of a set length, sized against the server's token "
        "count; sharegpt: each conversation's first turn of --dataset-path",
    )
    data.add_argument(
        "--dataset-path", metavar="FILE", help="the ShareGPT-format JSON file (sharegpt only)"
    )
    data.add_argument(
        "--sharegpt-output-len",
        type=_count,
        metavar="TOKENS",
        help="every reply's max_tokens (default: its conversation's reply, estimated at 4 "
        "tokens for 3 words)",
    )
    data.add_argument(
        "--random-input-len", type=_count, default=1024, help="prompt tokens (default 1024)"
    )
    data.add_argument(
        "--random-output-len",
        type=_count,
        default=128,
        help="max_tokens of each request (default 128)",
    )
    data.add_argument(
        "--random-range-ratio",
        type=float,
        default=0.0,
        help="spread of each request's lengths: its prompt and output tokens are drawn from "
        "[L * (1 - r), L * (1 + r)] (default 0: every request alike)",
    )
    data.add_argument(
        "--num-prompts", type=_count, default=1000, help="measured requests (default 1000)"
    )
    data.add_argument(
        "--num-warmups",
        type=_zero_or_more,
        default=0,
        help="requests sent first, not measured (default 0)",
    )
    data.add_argument(
        "--seed", type=int, default=0, help="seed of the prompts and arrivals (default 0)"
    )
    data.add_argument(
        "--ignore-eos",
        action="store_true",
        help="every reply runs to --random-output-len tokens (ignore_eos, min_tokens): what "
        "a matched A/B needs",
    )
    load = bench.add_argument_group("load")
    load.add_argument(
        "--request-rate",
        type=_rate,
        default=math.inf,
        help="requests per second on a seeded schedule, or inf (default): each request as "
        "soon as a slot is free",
    )
    load.add_argument(
        "--burstiness",
        type=float,
        default=1.0,
        help="shape of the gamma distribution of the gaps (1: Poisson)",
    )
    load.add_argument(
        "--max-concurrency", type=_count, help="requests in flight at most (default: all)"
    )
    out = bench.add_argument_group("output")
    out.add_argument(
        "--raw-dir", default="raw", metavar="DIR", help="where raw campaigns go (default raw)"
    )
    out.add_argument(
        "--campaign", metavar="ID", help="campaign id (default: today's date, then -bench)"
    )
    out.add_argument(
        "--arm", default="bench", metavar="NAME", help="this run's arm (default %(default)s)"
    )
    out.add_argument(
        "--percentile-metrics",
        default="ttft,tpot,itl",
        help="metrics whose percentiles are printed: ttft, tpot, itl, e2el (default %(default)s)",
    )
    out.add_argument(
        "--metric-percentiles",
        default="99",
        help="percentiles printed, comma-separated (default %(default)s)",
    )
    out.add_argument(
        "--save-result",
        action="store_true",
        help="also write the run in vLLM's detailed result format (JSON)",
    )
    out.add_argument(
        "--result-dir",
        metavar="DIR",
        default=".",
        help="where --save-result writes (default: the current folder)",
    )
    out.add_argument(
        "--result-filename",
        metavar="FILE",
        help="its name (default: ledger-bench-<arm>-<campaign>.json)",
    )
    bench.set_defaults(func=_bench)


def _whole(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < least:
        said = "at least 1" if least == 1 else f"{least} or more"
        raise argparse.ArgumentTypeError(f"must be {said}, got {value}")
    return value


def _count(text: str) -> int:
    return _whole(text, 1)


def _zero_or_more(text: str) -> int:
    return _whole(text, 0)


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected requests per second or inf, got {text!r}"
        ) from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0 or inf, got {text!r}")
    return value


def _settings(args: argparse.Namespace) -> Any:
    from ledger.measures.serving import METRICS, parse_percentiles
    from runners.bench import BenchSettings

    metrics = tuple(m.strip() for m in args.percentile_metrics.split(",") if m.strip())
    unknown = [m for m in metrics if m not in METRICS]
    if unknown or not metrics:
        raise UsageError(
            f"--percentile-metrics {args.percentile_metrics!r}: expected names from "
            f"{', '.join(METRICS)}"
        )
    try:
        percentiles = parse_percentiles(args.metric_percentiles)
    except ValueError as e:
        raise UsageError(f"--metric-percentiles: {e}") from None
    identity: dict[str, str] = {}
    for item in args.metadata:
        key, equals, value = item.partition("=")
        key = key.strip()
        if not equals or not key:
            raise UsageError(f"--metadata {item!r}: expected KEY=VALUE")
        if key in RESERVED_IDENTITY:
            raise UsageError(f"--metadata {item!r}: {key!r} is recorded by ledger bench itself")
        if key in identity:
            raise UsageError(f"--metadata {item!r}: {key!r} is given twice")
        identity[key] = value.strip()
    key_env = args.api_key_env
    if key_env is None and os.environ.get("OPENAI_API_KEY"):
        key_env = "OPENAI_API_KEY"
    extra: dict[str, Any] = {} if args.campaign is None else {"campaign": args.campaign}
    return BenchSettings(
        base_url=args.base_url,
        model=args.model,
        endpoint=args.endpoint,
        dataset_name=args.dataset_name,
        dataset_path=args.dataset_path,
        sharegpt_output_len=args.sharegpt_output_len,
        input_len=args.random_input_len,
        output_len=args.random_output_len,
        range_ratio=args.random_range_ratio,
        num_prompts=args.num_prompts,
        request_rate=args.request_rate,
        burstiness=args.burstiness,
        max_concurrency=args.max_concurrency,
        ignore_eos=args.ignore_eos,
        seed=args.seed,
        warmups=args.num_warmups,
        api_key_env=key_env,
        arm=args.arm,
        identity=identity,
        percentile_metrics=metrics,
        metric_percentiles=percentiles,
        **extra,
    )


def _result_path(args: argparse.Namespace, settings: Any) -> Path:
    """Where ``--save-result`` writes, refused before the run rather than after it: a name
    that is a path, a folder that cannot be made, a file that exists (evidence is never
    replaced unasked)."""
    name = args.result_filename or f"ledger-bench-{settings.arm}-{settings.campaign}.json"
    if Path(name).name != name or name in (".", ".."):
        raise UsageError(
            f"--result-filename {name}: a file name, not a path (the folder is --result-dir)"
        )
    folder = Path(args.result_dir)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--result-dir {args.result_dir}: {e.strerror or e}") from None
    path = folder / name
    if path.exists():
        raise UsageError(f"{path} exists; choose another --result-filename or remove it")
    return path


def _bench(args: argparse.Namespace) -> int:
    from runners.bench.run import run_bench

    settings = _settings(args)
    result_path = None
    if args.save_result:
        result_path = _result_path(args, settings)
    started = datetime.datetime.now(datetime.UTC)
    return run_bench(settings, Path(args.raw_dir), result_path=result_path, started=started,
                     out=sys.stdout)  # fmt: skip
