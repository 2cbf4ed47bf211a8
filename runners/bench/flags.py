"""The settings of ``ledger bench`` and the one-arm plan they make.

Each flag means what vLLM's ``bench serve`` means by it; what has no counterpart in a plan
(the chosen percentiles, where the result file goes) stays here.
"""

from __future__ import annotations

import datetime
import math
from pathlib import Path
from typing import Any

import attrs

from ledger.errors import InvalidArtifact, UsageError
from ledger.formats.jsonio import read_json
from ledger.measures.arrivals import MIN_RATE
from runners.plan import MAX_CONCURRENCY, PLAN_SCHEMA, Arm, Plan, parse_plan
from runners.workload.sharegpt import MAX_PROMPT_TOKENS, Dataset, load_sharegpt

__all__ = [
    "CHAT_ENDPOINT",
    "COMPLETIONS_ENDPOINT",
    "STAGE",
    "BenchSettings",
    "bench_plan",
    "check_settings",
    "joined_plan",
]

STAGE = "bench"
"""The stage every bench run measures: two runs of one campaign compare it."""
CHAT_ENDPOINT = "/v1/chat/completions"
COMPLETIONS_ENDPOINT = "/v1/completions"
ENDPOINTS = (CHAT_ENDPOINT, COMPLETIONS_ENDPOINT)
METRICS_DEFAULT = ("ttft", "tpot", "itl")
"""vLLM's ``--percentile-metrics`` default."""


@attrs.frozen
class BenchSettings:
    """What the command line asked for."""

    base_url: str
    model: str
    endpoint: str = CHAT_ENDPOINT
    dataset_name: str = "random"
    dataset_path: str | None = None
    sharegpt_output_len: int | None = None
    input_len: int = 1024
    output_len: int = 128
    range_ratio: float = 0.0
    num_prompts: int = 1000
    request_rate: float = math.inf
    burstiness: float = 1.0
    max_concurrency: int | None = None
    ignore_eos: bool = False
    seed: int = 0
    warmups: int = 0
    api_key_env: str | None = None
    campaign: str = attrs.field(factory=lambda: f"{datetime.date.today().isoformat()}-bench")
    arm: str = "bench"
    identity: dict[str, str] = attrs.field(factory=dict)
    """``--metadata`` KEY=VALUE pairs: what the arm is."""
    percentile_metrics: tuple[str, ...] = METRICS_DEFAULT
    metric_percentiles: tuple[float, ...] = (99.0,)

    @property
    def concurrency(self) -> int:
        """Requests in flight at most: vLLM's ``--max-concurrency``, else all at once."""
        return self.max_concurrency or min(self.num_prompts, MAX_CONCURRENCY)


def _arm(settings: BenchSettings) -> dict[str, Any]:
    base = settings.base_url.rstrip("/")
    # vLLM's --base-url is the server's root and --endpoint the path under it; an arm's
    # base_url is the API root that /chat/completions follows.
    root = base if base.endswith("/v1") else base + "/v1"
    arm: dict[str, Any] = {"name": settings.arm, "base_url": root, "model": settings.model}
    if settings.endpoint == COMPLETIONS_ENDPOINT:
        arm["api"] = "completions"
    if settings.api_key_env is not None:
        arm["api_key_env"] = settings.api_key_env
    arm["identity"] = {"tool": "ledger bench", "endpoint": settings.endpoint, **settings.identity}
    return arm


def _stage(settings: BenchSettings, dataset: Dataset | None) -> dict[str, Any]:
    input_len, output_len = settings.input_len, settings.output_len
    if dataset is not None:
        # A dataset's prompts are sent as they are: the target is the longest it admits.
        input_len = MAX_PROMPT_TOKENS
        output_len = max(p.max_tokens for p in dataset.prompts)
    common: dict[str, Any] = {
        "name": STAGE,
        "max_tokens": output_len,
        "controlled_output": settings.ignore_eos,
        "warmup": settings.warmups,
        "seed": settings.seed,
    }
    if math.isinf(settings.request_rate):
        # Every request as soon as a slot frees: a closed loop at the concurrency.
        return common | {
            "kind": "capacity",
            "context_targets": [input_len],
            "concurrency": settings.concurrency,
            "requests": settings.num_prompts,
        }
    stage = common | {
        "kind": "load",
        "context_target": input_len,
        "rate": settings.request_rate,
        "requests": settings.num_prompts,
    }
    # vLLM draws gaps from a gamma distribution whose shape is the burstiness: 1 is Poisson.
    if settings.burstiness != 1.0:
        stage |= {"arrival": "gamma", "burstiness": settings.burstiness}
    if settings.max_concurrency is not None:
        stage["max_in_flight"] = settings.max_concurrency
    return stage


def check_settings(settings: BenchSettings) -> None:
    """Refuses what this bench cannot measure as vLLM would, in one line each.

    Raises:
        UsageError: the first such setting.
    """
    if settings.endpoint not in ENDPOINTS:
        raise UsageError(f"--endpoint {settings.endpoint}: expected {' or '.join(ENDPOINTS)}")
    if settings.dataset_name == "sharegpt" and settings.dataset_path is None:
        raise UsageError("--dataset-name sharegpt needs --dataset-path FILE")
    if settings.dataset_name != "sharegpt" and settings.dataset_path is not None:
        raise UsageError("--dataset-path is the file of --dataset-name sharegpt only")
    if settings.dataset_name == "sharegpt" and settings.range_ratio:
        raise UsageError("--random-range-ratio is a random dataset's; a ShareGPT file sets lengths")
    if not 0 <= settings.range_ratio < 1:
        raise UsageError(
            f"--random-range-ratio {settings.range_ratio:g}: from 0 (every request alike) to "
            "below 1"
        )
    if not math.isinf(settings.request_rate) and settings.request_rate < MIN_RATE:
        raise UsageError(
            f"--request-rate {settings.request_rate:g}: at least {MIN_RATE} requests/s, or inf"
        )
    if settings.max_concurrency is not None and settings.max_concurrency > MAX_CONCURRENCY:
        raise UsageError(f"--max-concurrency: at most {MAX_CONCURRENCY:,}")


def bench_plan(settings: BenchSettings) -> Plan:
    """The one-arm, one-stage plan of a bench run.

    Raises:
        UsageError: a setting this bench cannot measure.
        InvalidArtifact: a setting the plan refuses (the message names its key).
    """
    check_settings(settings)
    dataset = None
    if settings.dataset_name == "sharegpt":
        assert settings.dataset_path is not None  # check_settings holds it
        dataset = load_sharegpt(
            settings.dataset_path,
            count=settings.warmups + settings.num_prompts,
            seed=settings.seed,
            output_len=settings.sharegpt_output_len,
        )
    document = {
        "campaign_id": settings.campaign,
        "seed": settings.seed,
        # vLLM's random prompts share no prefix: each starts with its own session number,
        # so that no request reads another's prefix from the server's cache.
        "prefix": "unique",
        "arms": [_arm(settings)],
        "stages": [_stage(settings, dataset)],
    }
    try:
        plan = parse_plan(document, source="ledger bench")
    except InvalidArtifact as e:
        raise UsageError(_as_flags(str(e))) from None
    if not settings.range_ratio and dataset is None:
        return plan
    # Not plan keys: a spread of lengths and a file's prompts are what vLLM's datasets
    # are, and a bench asks for them (run-plan.json records them all the same).
    stage = attrs.evolve(plan.stages[0], range_ratio=settings.range_ratio, dataset=dataset)
    return attrs.evolve(plan, stages=(stage,))


def joined_plan(settings: BenchSettings, folder: Path) -> Plan | None:
    """The plan of a bench run into a campaign an earlier bench run made: its recorded arms
    and this one. None when the folder holds no run.

    Raises:
        UsageError: the folder holds a run that is not a bench of the same workload, or
            the arm is measured there already.
    """
    recorded_path = folder / "run-plan.json"
    if not recorded_path.exists():
        return None
    recorded = read_json(recorded_path)
    if not isinstance(recorded, dict) or recorded.get("schema") != PLAN_SCHEMA:
        raise UsageError(f"{recorded_path}: not a run plan; choose another --campaign")
    mine = bench_plan(settings)
    names = [arm.get("name") for arm in recorded.get("arms", [])]
    if settings.arm in names:
        raise UsageError(
            f"campaign {settings.campaign}: arm {settings.arm!r} is measured already (a run "
            "is never measured again over its evidence); choose another --arm, or another "
            "--campaign"
        )
    wanted = mine.to_json()
    differing = _differing_flag(recorded, wanted)
    if differing is not None:
        raise UsageError(
            f"campaign {settings.campaign}: its runs measured another workload ({differing} "
            "differs from its first run's; an A/B compares one workload); choose another "
            "--campaign"
        )
    try:
        arms = tuple(_recorded_arm(arm, recorded_path) for arm in recorded["arms"])
    except (KeyError, TypeError, AttributeError):
        raise UsageError(
            f"{recorded_path}: its arms are not as a run records them; choose another --campaign"
        ) from None
    return attrs.evolve(mine, arms=(*arms, *mine.arms))


def _recorded_arm(data: dict[str, Any], where: Path) -> Arm:
    """An arm as ``run-plan.json`` records it, back as the plan had it."""
    if data.get("simulated") is not None or data.get("container") is not None:
        raise UsageError(
            f"{where}: arm {data.get('name')!r} is not an endpoint that a bench run measured; "
            "choose another --campaign"
        )
    return Arm(
        name=data["name"],
        base_url=data["base_url"],
        model=data["model"],
        api_key_env=data["api_key_env"],
        identity=data["identity"],
        extra_body=data["extra_body"],
        simulated=None,
        gpus=None if data["gpus"] is None else tuple(data["gpus"]),
        thinking=data["thinking"],
        api=data.get("api", "chat"),
    )


_PLAN_FLAGS = {
    "campaign_id": "--campaign",
    "seed": "--seed",
    "arms[0].name": "--arm",
    "arms[0].base_url": "--base-url",
    "arms[0].model": "--model",
    "arms[0].api_key_env": "--api-key-env",
    "stages[0].requests": "--num-prompts",
    "stages[0].max_tokens": "--random-output-len",
    "stages[0].context_target": "--random-input-len",
    "stages[0].context_targets": "--random-input-len",
    "stages[0].concurrency": "--max-concurrency",
    "stages[0].max_in_flight": "--max-concurrency",
    "stages[0].rate": "--request-rate",
    "stages[0].burstiness": "--burstiness",
    "stages[0].warmup": "--num-warmups",
    "stages[0].seed": "--seed",
}
"""The plan key each flag sets: a refusal of the plan a bench makes names the flag."""


def _as_flags(message: str) -> str:
    """``ledger bench: stages[0].rate: ...`` -> ``--request-rate: ...``."""
    _, _, rest = message.partition("ledger bench: ")
    key, colon, said = rest.partition(": ")
    flag = _PLAN_FLAGS.get(key)
    return f"{flag}: {said}" if flag is not None and colon else rest or message


_STAGE_FLAGS = {
    "kind": "--request-rate",
    "cells": "--random-input-len, --max-concurrency or --request-rate",
    "requests": "--num-prompts",
    "max_tokens": "--random-output-len",
    "controlled_output": "--ignore-eos",
    "warmup": "--num-warmups",
    "seed": "--seed",
    "arrival": "--burstiness or --max-concurrency",
    "range_ratio": "--random-range-ratio",
    "dataset": "--dataset-name or --dataset-path (the file's digest)",
}


def _differing_flag(recorded: dict[str, Any], wanted: dict[str, Any]) -> str | None:
    """The flag whose setting makes ``wanted`` another workload than ``recorded``; None
    when only the arms differ (an arm's API is part of the workload: a chat template
    changes every prompt)."""
    for key in sorted(set(wanted) | set(recorded)):
        if key in ("arms", "stages") or wanted.get(key) == recorded.get(key):
            continue
        return "--seed" if key == "seed" else key
    apis = {arm.get("api", "chat") for arm in recorded.get("arms", []) if isinstance(arm, dict)}
    if apis and apis != {wanted["arms"][0].get("api", "chat")}:
        return "--endpoint"
    theirs = recorded.get("stages")
    if not isinstance(theirs, list) or len(theirs) != 1 or not isinstance(theirs[0], dict):
        return "the stage"
    stage: dict[str, Any] = wanted["stages"][0]
    for key in sorted(set(stage) | set(theirs[0])):
        if stage.get(key) != theirs[0].get(key):
            return _STAGE_FLAGS.get(str(key), str(key))
    return None
