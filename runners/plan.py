"""The run plan (``PLAN.toml``): arms, stages and their cells, checked before anything runs.

Every error names the file and the key (``plan.toml: stages[1].requests: ...``) and is
raised as :class:`~ledger.errors.InvalidArtifact`. The plan as run is recorded in the
campaign folder as ``run-plan.json``; an API key never is, only the name of the
environment variable that holds it.
"""

from __future__ import annotations

import datetime
import hashlib
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from ledger.derivation.goodput import check_slo
from ledger.errors import InvalidArtifact
from ledger.formats.outputs import RESERVED_ARMS
from ledger.formats.tomlio import read_toml
from ledger.measures import functional
from ledger.measures.arrivals import (
    MAX_IN_FLIGHT,
    MIN_RATE,
    PROCESSES,
    Arrivals,
    offsets_ns,
    sweep_rate,
)
from runners.client import Deadlines, url_problem
from runners.plan_container import Container, parse_container
from runners.plan_reader import ENV_NAME as _ENV_NAME
from runners.plan_reader import TableReader as _Reader
from runners.simulate.profile import Profile, load_profile
from runners.workload import PREFIX_MODES
from runners.workload.sharegpt import Dataset

__all__ = [
    "APIS",
    "CODING_TASKS",
    "CONTEXT_FAMILIES",
    "DEFAULT_MIN_SUCCESS",
    "DEFAULT_RESERVE_MIB",
    "DEFAULT_THINKING",
    "EVIDENCE_KINDS",
    "FUNCTIONAL_KINDS",
    "MAX_CONCURRENCY",
    "MAX_CONTEXT_TARGET",
    "MAX_RATE",
    "MAX_REQUESTS",
    "MAX_SWEEP_RATES",
    "PLAN_SCHEMA",
    "PREFLIGHT_CHECKS",
    "STAGE_KINDS",
    "Arm",
    "Cell",
    "Container",
    "EvidenceStage",
    "Plan",
    "Stage",
    "check_context",
    "load_plan",
    "parse_plan",
    "rate_name",
]

PLAN_SCHEMA = "anvil-serving.run-plan/v1"
STAGE_KINDS = ("capacity", "endurance", "load", "sweep")
# The kinds whose gate counts the ledger recomputes: the same list, so a plan cannot name
# a gate the ledger would not check.
FUNCTIONAL_KINDS = functional.KINDS
"""Functional and quality gates: each writes one artifact per arm (``runners/checks/_families.py``)."""
EVIDENCE_KINDS = ("startup", "telemetry", "reserve", "restoration", *FUNCTIONAL_KINDS)
PREFLIGHT_CHECKS = (
    "text",
    "json-object",
    "json-schema",
    "retrieval",
    "tools",
    "long-tool-prompt",
    "streaming-tool-deltas",
    "tool-result-continuation",
    "responses-api",
    "image-ocr",
)
CONTEXT_FAMILIES = ("number", "phrase", "key-value")
CODING_TASKS = 5
"""How many coding tasks ``runners/workload/coding.py`` holds."""
DEFAULT_THINKING = {
    "enabled": {"chat_template_kwargs": {"enable_thinking": True}},
    "disabled": {"chat_template_kwargs": {"enable_thinking": False}},
}
"""How thinking is switched unless an arm says otherwise (SGLang's and vLLM's chat
template argument)."""
DEFAULT_RESERVE_MIB = 3072
APIS = ("chat", "completions")
"""What an arm's workload stages stream (``api``)."""
DEFAULT_MIN_SUCCESS = 1
"""Successful measured requests each cell of a workload stage needs unless its stage says
otherwise: a cell where nothing succeeded measured nothing (``ledger run`` exits 1)."""
MAX_REQUESTS = 1_000_000
"""Requests per cell: a million at 1 ms each is already a quarter of an hour."""
MAX_RATE = 100_000.0
"""Requests per second a load cell may ask for: beyond what one client process sends."""
MAX_CONCURRENCY = MAX_IN_FLIGHT
"""Requests in flight at once: each holds a connection and a task."""
MAX_CONTEXT_TARGET = 10_000_000
"""The largest context target a plan may name: above the largest context window served
today (10 M tokens), so a larger one is a typo, not a measurement."""
_CAMPAIGN_ID = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}-[a-z0-9]+(-[a-z0-9]+)*")


@attrs.frozen
class Cell:
    """One workload point: context target x concurrency (or, open-loop, arrival rate) x
    thinking mode."""

    context_target: int
    concurrency: int
    thinking: bool
    rate: float | None = None
    """Requests per second of a load stage's cell: sent on a schedule, not by workers."""

    @property
    def id(self) -> str:
        """``ctx4096-c1-nothink`` (``ctx4096-r2_5-nothink`` at 2.5 requests/s): the cell's
        file name without ``.json``."""
        mode = "think" if self.thinking else "nothink"
        load = f"c{self.concurrency}" if self.rate is None else f"r{rate_name(self.rate)}"
        return f"ctx{self.context_target}-{load}-{mode}"


def _spread(length: int, ratio: float, draw: int) -> int:
    """A length uniform in ``[L * (1 - r), L * (1 + r)]`` (at least 1), from 64 random bits."""
    low = max(1, int(length * (1 - ratio)))
    high = max(low, int(length * (1 + ratio)))
    return low + draw % (high - low + 1)


def rate_name(rate: float) -> str:
    """A rate as a cell name spells it: 200 -> ``200``, 2.5 -> ``2_5``."""
    text = f"{rate:.6f}".rstrip("0").rstrip(".")
    return text.replace(".", "_")


@attrs.frozen
class Stage:
    """A capacity, endurance or load stage."""

    name: str
    kind: str
    cells: tuple[Cell, ...]
    requests: int | None
    """Measured requests per cell; None in a load stage scheduled by ``duration_s``."""
    max_tokens: int
    controlled_output: bool
    """ignore_eos and min_tokens = max_tokens on every request; true unless the plan says
    false, as a matched A/B needs every request to end by length at max_tokens."""
    warmup: int
    temperature: float
    seed: int
    arrival: dict[str, Any] | None = None
    """A load or sweep stage's arrivals: process, burstiness, duration_s, requests,
    max_in_flight."""
    sweep_rates: int | None = None
    """A sweep's number of rates between its synchronous rate and its ceiling."""
    min_success: int = DEFAULT_MIN_SUCCESS
    """Successful measured requests each cell must have for the run to succeed."""
    range_ratio: float = 0.0
    """Spread of each request's lengths, as vLLM's ``--random-range-ratio``: a request's
    prompt tokens and max_tokens are drawn, each, from ``[L * (1 - r), L * (1 + r)]`` around
    the cell's context target and the stage's max_tokens (``ledger bench``)."""

    dataset: Dataset | None = None
    """Prompts from a file (``ledger bench --dataset-name sharegpt``) rather than filler
    text sized to the context target, which is then the longest prompt the file admits."""

    def lengths(self, cell: Cell, index: int) -> tuple[int, int]:
        """Request ``index``'s prompt tokens (aimed at) and max_tokens."""
        if self.dataset is not None:
            chosen = self.dataset.prompts[index]
            return chosen.tokens, chosen.max_tokens
        if not self.range_ratio:
            return cell.context_target, self.max_tokens
        digest = hashlib.sha256(f"{self.seed}:{cell.id}:{index}:lengths".encode()).digest()
        prompt = _spread(cell.context_target, self.range_ratio, int.from_bytes(digest[:8]))
        output = _spread(self.max_tokens, self.range_ratio, int.from_bytes(digest[8:16]))
        return prompt, output

    def arrivals(self, cell: Cell) -> Arrivals | None:
        """The open-loop schedule settings of a load cell; None for a closed-loop one."""
        if self.arrival is None or cell.rate is None:
            return None
        return Arrivals(rate=cell.rate, seed=self.seed, **self.arrival)

    def measured(self, cell: Cell) -> int:
        """How many measured requests the cell sends."""
        arrivals = self.arrivals(cell)
        if arrivals is not None:
            return len(offsets_ns(arrivals, cell.id))
        assert self.requests is not None  # set for every closed-loop stage
        return self.requests

    def to_json(self) -> dict[str, Any]:
        """As recorded in ``run-plan.json``."""
        cells = []
        for c in self.cells:
            cell: dict[str, Any] = {
                "context_target": c.context_target,
                "concurrency": c.concurrency,
                "thinking": c.thinking,
                "id": c.id,
            }
            if c.rate is not None:
                cell["rate"] = c.rate
            cells.append(cell)
        out: dict[str, Any] = {
            "name": self.name,
            "kind": self.kind,
            "cells": cells,
            "requests": self.requests,
            "max_tokens": self.max_tokens,
            "controlled_output": self.controlled_output,
            "warmup": self.warmup,
            "temperature": self.temperature,
            "seed": self.seed,
        }
        if self.arrival is not None:
            out["arrival"] = dict(self.arrival)
        if self.sweep_rates is not None:
            out["rates"] = self.sweep_rates
        if self.range_ratio:
            out["range_ratio"] = self.range_ratio
        if self.dataset is not None:
            out["dataset"] = self.dataset.to_json()
        if self.min_success != DEFAULT_MIN_SUCCESS:
            # Only when set: a plan that leaves it out records what it did before the key
            # existed, so its run can still be resumed.
            out["min_success"] = self.min_success
        return out

    def sweep_cells(self, synchronous_rps: float, ceiling_rps: float) -> list[tuple[Cell, int]]:
        """A sweep's open-loop cells (with their positions, from 1): its rates spaced evenly
        between the synchronous rate and the ceiling, both left out, as a rate cell names
        them (to 0.01 request/s)."""
        assert self.sweep_rates is not None and self.arrival is not None
        probe = self.cells[0]
        cells: list[tuple[Cell, int]] = []
        for position in range(1, self.sweep_rates + 1):
            rate = sweep_rate(synchronous_rps, ceiling_rps, position, self.sweep_rates)
            cell = Cell(
                probe.context_target,
                self.arrival["max_in_flight"] or MAX_IN_FLIGHT,
                probe.thinking,
                rate,
            )
            if all(c.id != cell.id for c, _ in cells):
                cells.append((cell, position))
        return cells


@attrs.frozen
class EvidenceStage:
    """A stage that records the serving system's state rather than sending a workload.

    ``startup`` starts the arm's container (creating it first when the plan gives its
    image) and waits for it to be ready, before anything else; ``restoration`` snapshots
    the container before the workload and after it, then with ``restart`` stops it, starts
    it again and sends it a first request;
    ``reserve`` reads GPU memory after the workload; ``telemetry`` samples the GPUs while
    the workload stage named by ``during`` runs.
    """

    name: str
    kind: str
    settings: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """As recorded in ``run-plan.json``."""
        return {"name": self.name, "kind": self.kind, **self.settings}


@attrs.frozen
class Arm:
    """One endpoint or configuration under test."""

    name: str
    base_url: str | None
    """None when the arm is an embedded simulated endpoint."""
    model: str
    api_key_env: str | None
    identity: dict[str, Any]
    extra_body: dict[str, Any]
    simulated: Profile | None
    container: Container | None = None
    gpus: tuple[int, ...] | None = None
    """NVML indices of the cards the arm's server uses; None: every card."""
    thinking: dict[str, dict[str, Any]] = attrs.field(factory=lambda: dict(DEFAULT_THINKING))
    """Request fields that switch thinking ``enabled`` and ``disabled`` on this server."""
    api: str = "chat"
    """What the workload stages stream: ``chat`` (``/chat/completions``, the server's chat
    template applied) or ``completions`` (``/completions``, the prompt as it is: what
    vLLM's ``bench serve`` sends by default). Functional gates always use chat."""
    repeat_of: str | None = None
    """The arm this one runs again, unchanged (an A/A control): ``ledger derive`` measures
    the noise between two runs of one configuration from the pair."""

    @property
    def manages_container(self) -> bool:
        """Whether ledger creates and removes the arm's container (an ``image`` given)."""
        return self.container is not None and self.container.spec is not None

    def thinking_fields(self, enabled: bool) -> dict[str, Any]:
        """The fields to merge into a request for that thinking mode."""
        return dict(self.thinking["enabled" if enabled else "disabled"])

    def to_json(self) -> dict[str, Any]:
        """As recorded in ``run-plan.json`` (the key's variable name, never the key)."""
        return (
            {
                "name": self.name,
                "base_url": self.base_url,
                "model": self.model,
                "api_key_env": self.api_key_env,
                "identity": self.identity,
                "extra_body": self.extra_body,
                "simulated": self.simulated.to_json() if self.simulated else None,
                "container": self.container.to_json() if self.container else None,
                "gpus": list(self.gpus) if self.gpus is not None else None,
                "thinking": self.thinking,
            }
            | ({"api": self.api} if self.api != "chat" else {})
            | ({"repeat_of": self.repeat_of} if self.repeat_of is not None else {})
        )


@attrs.frozen
class Plan:
    """A whole run plan."""

    campaign_id: str
    seed: int
    prefix: str
    deadlines: Deadlines
    arms: tuple[Arm, ...]
    stages: tuple[Stage, ...]
    evidence: tuple[EvidenceStage, ...] = ()
    slo: dict[str, float] | None = None
    """Latency objectives of the load stages: ``ledger derive`` uses them unless given
    ``--slo``."""
    interleave: bool = False
    """Whether the arms take turns request by request instead of one after another
    (``interleave = true``): a slow spell of the host or the endpoint then falls on every
    arm alike, instead of on whichever arm ran during it."""

    def evidence_of(self, kind: str) -> EvidenceStage | None:
        """The plan's stage of that evidence kind, if it has one."""
        return next((e for e in self.evidence if e.kind == kind), None)

    def to_json(self) -> dict[str, Any]:
        """The ``run-plan.json`` document."""
        return (
            {
                "schema": PLAN_SCHEMA,
                "campaign_id": self.campaign_id,
                "seed": self.seed,
                "prefix": self.prefix,
                "deadlines": attrs.asdict(self.deadlines),
                "arms": [a.to_json() for a in self.arms],
                "stages": [s.to_json() for s in self.stages],
                "evidence_stages": [e.to_json() for e in self.evidence],
            }
            | ({"slo": dict(self.slo)} if self.slo is not None else {})
            | ({"interleave": True} if self.interleave else {})
        )


def _deadlines(reader: _Reader) -> Deadlines:
    table = _Reader(reader.source, "deadlines", reader.get("deadlines", (dict,), {}))
    values = {}
    for name in ("connect_s", "first_byte_s", "idle_s", "total_s"):
        value = table.get(name, (int, float), None, "seconds")
        if value is not None:
            if value <= 0:
                raise table.error(name, f"must be > 0, got {value}")
            values[name] = float(value)
    table.finish()
    return Deadlines(**values)


def _slo(reader: _Reader) -> dict[str, float] | None:
    """The plan's ``[slo]`` table: thresholds in milliseconds and a percentile."""
    table = reader.get("slo", (dict,), None, "a table")
    if table is None:
        return None
    try:
        return check_slo(table)
    except ValueError as e:
        key, sep, message = str(e).partition(": ")
        if sep and key in table:
            raise reader.error(f"slo.{key}", message) from None
        raise reader.error("slo", str(e)) from None


def _arm(source: str, base: Path, index: int, table: Any) -> Arm:
    reader = _Reader(source, f"arms[{index}]", table)
    name = reader.name("name")
    if name in RESERVED_ARMS:
        # Its folder would be the campaign's own: an approval or a derived comparison.
        raise reader.error("name", f"{name!r} is a campaign's own folder; choose another")
    base_url = reader.get("base_url", (str,), None, "a URL")
    simulated_table = reader.get("simulated", (dict,), None)
    profile = None
    if simulated_table is not None:
        if base_url is not None:
            raise reader.error("simulated", "an arm has base_url or simulated, not both")
        settings = dict(simulated_table)
        profile_file = settings.pop("profile", None)
        if profile_file is not None and not isinstance(profile_file, str):
            raise reader.error("simulated.profile", f"expected a file name, got {profile_file!r}")
        loaded = load_profile(base / profile_file) if profile_file else Profile()
        merged = loaded.to_json() | settings
        profile = Profile.from_mapping(merged, source=f"{source}: arms[{index}].simulated")
    elif base_url is None:
        raise reader.error("base_url", "is required (or a [arms.simulated] table)")
    elif (problem := url_problem(base_url)) is not None:
        # A URL with user:password@ is not repeated: the message goes to logs and CI output.
        got = "" if "@" in base_url else f", got {base_url!r}"
        raise reader.error("base_url", f"{problem}{got}")
    model = reader.get("model", (str,), profile.model if profile else ..., "a model name")
    if profile is not None and model != profile.model:
        raise reader.error(
            "model", f"the simulated endpoint serves {profile.model!r}, got {model!r}"
        )
    key_env = reader.get("api_key_env", (str,), None, "an environment variable name")
    if key_env is not None and not _ENV_NAME.fullmatch(key_env):
        raise reader.error("api_key_env", f"not an environment variable name: {key_env!r}")
    identity = reader.get("identity", (dict,), {})
    extra_body = reader.get("extra_body", (dict,), {})
    gpus = reader.get("gpus", (list,), None, "a list of NVML card indices")
    if gpus is not None and (
        not gpus or not all(type(g) is int and g >= 0 for g in gpus) or len(set(gpus)) != len(gpus)
    ):
        raise reader.error("gpus", f"expected distinct card indices (0, 1, ...), got {gpus!r}")
    container = parse_container(source, index, reader.get("container", (dict,), None))
    thinking = _thinking(source, index, reader.get("thinking", (dict,), None))
    api = reader.get("api", (str,), "chat", "chat or completions")
    if api not in APIS:
        raise reader.error("api", f"expected chat or completions, got {api!r}")
    reader.finish()
    return Arm(
        name,
        base_url,
        model,
        key_env,
        identity,
        extra_body,
        profile,
        container,
        tuple(gpus) if gpus is not None else None,
        thinking,
        api,
    )


def _arms(source: str, base: Path, tables: list[Any]) -> tuple[Arm, ...]:
    """Every arm, a repeat (``repeat_of``) as a copy of the arm it names under its own name."""
    parsed: list[Arm | tuple[str, str, _Reader]] = []
    for index, table in enumerate(tables):
        if isinstance(table, dict) and "repeat_of" in table:
            reader = _Reader(source, f"arms[{index}]", table)
            name = reader.name("name")
            repeated = reader.get("repeat_of", (str,), what="the name of another arm")
            # Every setting is the repeated arm's: one given here would make the repeat
            # another configuration, and its pair no A/A control.
            extra = sorted(set(table) - {"name", "repeat_of"})
            if extra:
                raise reader.error(
                    extra[0], f"an arm with repeat_of takes every setting of {repeated!r}"
                )
            parsed.append((name, repeated, reader))
        else:
            parsed.append(_arm(source, base, index, table))
    named = {a.name: a for a in parsed if isinstance(a, Arm)}
    arms = []
    for entry in parsed:
        if isinstance(entry, Arm):
            arms.append(entry)
            continue
        name, repeated, reader = entry
        original = named.get(repeated)
        if original is None:
            others = ", ".join(sorted(named)) or "none"
            raise reader.error(
                "repeat_of", f"names no arm with its own settings: {repeated!r} (arms: {others})"
            )
        if original.manages_container:
            # Its container is created and removed by name: two arms cannot own it.
            raise reader.error(
                "repeat_of",
                f"arm {repeated!r} manages its container; repeat an arm that names a "
                "running one (base_url and [arms.container] without image)",
            )
        arms.append(attrs.evolve(original, name=name, repeat_of=repeated))
    return tuple(arms)


def _thinking(source: str, index: int, table: Any) -> dict[str, dict[str, Any]]:
    if table is None:
        return dict(DEFAULT_THINKING)
    reader = _Reader(source, f"arms[{index}].thinking", table)
    switch = {
        mode: reader.get(mode, (dict,), what="a table of request fields")
        for mode in ("enabled", "disabled")
    }
    reader.finish()
    return switch


def _evidence_stage(reader: _Reader, kind: str) -> EvidenceStage:
    name = reader.name("name") if "name" in reader.table else kind
    settings: dict[str, Any] = {}
    if kind == "reserve":
        free = reader.get("min_free_mib", (int,), DEFAULT_RESERVE_MIB, "MiB")
        if free < 0:
            raise reader.error("min_free_mib", f"must be >= 0, got {free}")
        settings["min_free_mib"] = free
    elif kind == "telemetry":
        settings["during"] = reader.name("during")
        interval = reader.get("interval_s", (int, float), 1.0, "seconds")
        if interval <= 0:
            raise reader.error("interval_s", f"must be > 0, got {interval}")
        settings["interval_s"] = float(interval)
    elif kind == "startup":
        settings.update(_start_timing(reader))
    elif kind == "restoration":
        # Recorded only when set, so that a plan without it records what it always did.
        if reader.get("restart", (bool,), False):
            settings["restart"] = True
            settings.update(_start_timing(reader))
    elif kind in FUNCTIONAL_KINDS:
        settings = _functional_settings(reader, kind)
    reader.finish()
    return EvidenceStage(name, kind, settings)


def _start_timing(reader: _Reader) -> dict[str, float]:
    """How long a start may take to be ready, and how often readiness is probed."""
    settings = {}
    for key, default in (("deadline_s", 900.0), ("poll_s", 1.0)):
        value = reader.get(key, (int, float), default, "seconds")
        if value <= 0:
            raise reader.error(key, f"must be > 0, got {value}")
        settings[key] = float(value)
    return settings


_FUNCTIONAL_COUNTS: dict[str, tuple[tuple[str, int, int, int], ...]] = {
    # kind: (key, default, lowest, highest)
    "preflight": (("tools", 20, 1, 20), ("long_tool_tokens", 100000, 0, 10_000_000)),
    "thinking-control": (("repetitions", 2, 1, 100),),
    "strict-output": (("requests", 3, 1, 1000), ("word_limit", 12, 3, 1000)),
    "canary": (("requests", 10, 1, 1000),),
    "context-quality": (("positions", 5, 1, 100), ("repetitions", 2, 1, 100)),
    "coding-quality": (("tasks", CODING_TASKS, 1, CODING_TASKS), ("repetitions", 3, 1, 100)),
}
_FUNCTIONAL_MAX_TOKENS = {
    "preflight": 256,
    "thinking-control": 256,
    "strict-output": 64,
    "canary": 64,
    "context-quality": 32,
    "coding-quality": 512,
}


def _functional_settings(reader: _Reader, kind: str) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "max_tokens": reader.positive("max_tokens", _FUNCTIONAL_MAX_TOKENS[kind])
    }
    for key, default, lowest, highest in _FUNCTIONAL_COUNTS[kind]:
        value = reader.get(key, (int,), default, "a whole number")
        if not lowest <= value <= highest:
            raise reader.error(key, f"must be between {lowest} and {highest}, got {value}")
        settings[key] = value
    if kind == "preflight":
        skip = reader.get("skip", (list,), [], "a list of check names")
        unknown = [s for s in skip if s not in PREFLIGHT_CHECKS]
        if unknown:
            raise reader.error(
                "skip", f"unknown check {unknown[0]!r} (one of {', '.join(PREFLIGHT_CHECKS)})"
            )
        settings["skip"] = list(dict.fromkeys(skip))
    elif kind == "context-quality":
        settings["depths"] = sorted(set(reader.int_list("depths")))
        families = reader.get("families", (list,), list(CONTEXT_FAMILIES), "a list of families")
        unknown = [f for f in families if f not in CONTEXT_FAMILIES]
        if unknown or not families:
            raise reader.error(
                "families", f"expected some of {', '.join(CONTEXT_FAMILIES)}, got {families!r}"
            )
        settings["families"] = list(dict.fromkeys(families))
        settings["pass_fraction"] = _fraction(reader, "pass_fraction", 0.9)
    elif kind == "coding-quality":
        timeout = reader.get("timeout_s", (int, float), 10.0, "seconds")
        if not 0 < timeout <= 600:
            raise reader.error("timeout_s", f"must be > 0 and at most 600, got {timeout}")
        settings["timeout_s"] = float(timeout)
        settings["required_pass_rate"] = _fraction(reader, "required_pass_rate", 1.0)
    return settings


def _fraction(reader: _Reader, key: str, default: float) -> float:
    value = float(reader.get(key, (int, float), default, "a fraction"))
    if not 0 <= value <= 1:
        raise reader.error(key, f"must be between 0 and 1, got {value}")
    return value


def _stage(source: str, index: int, table: Any, seed: int) -> Stage | EvidenceStage:
    reader = _Reader(source, f"stages[{index}]", table)
    kinds = STAGE_KINDS + EVIDENCE_KINDS
    kind = reader.get("kind", (str,), what="a stage kind")
    if kind not in kinds:
        raise reader.error("kind", f"expected one of {', '.join(kinds)}, got {kind!r}")
    if kind in EVIDENCE_KINDS:
        return _evidence_stage(reader, kind)
    name = reader.name("name") if "name" in reader.table else kind
    minimum = reader.get("min_success", (int,), DEFAULT_MIN_SUCCESS, "a whole number of requests")
    if kind in ("load", "sweep"):
        built = (_load_stage if kind == "load" else _sweep_stage)(reader, name, seed)
        return _with_min_success(reader, built, minimum)
    if kind == "capacity":
        key = "context_targets"
        targets = reader.int_list(key)
    else:
        key = "context_target"
        targets = [reader.positive(key)]
    beyond = [t for t in targets if t > MAX_CONTEXT_TARGET]
    if beyond:
        raise reader.error(
            key,
            f"{beyond[0]} tokens is beyond any serving context window (at most "
            f"{MAX_CONTEXT_TARGET:,}); a typo?",
        )
    concurrency = reader.int_list("concurrency", 1)
    thinking = reader.bool_list("thinking", False)
    requests = reader.positive("requests")
    max_tokens = reader.positive("max_tokens")
    for key, values, cap in (
        ("requests", [requests], MAX_REQUESTS),
        ("concurrency", concurrency, MAX_CONCURRENCY),
        ("max_tokens", [max_tokens], MAX_CONTEXT_TARGET),
    ):
        if max(values) > cap:
            raise reader.error(key, f"{max(values)} is more than {cap:,}; a typo?")
    _, controlled, warmup, temperature, stage_seed = _sampling(reader, seed)
    reader.finish()
    cells = tuple(
        Cell(t, c, th)
        for t in dict.fromkeys(targets)
        for c in dict.fromkeys(concurrency)
        for th in thinking
    )
    stage = Stage(
        name, kind, cells, requests, max_tokens, controlled, warmup, temperature, stage_seed
    )
    return _with_min_success(reader, stage, minimum)


def _with_min_success(reader: _Reader, stage: Stage, minimum: int) -> Stage:
    """The stage with its ``min_success``, refused where a cell could never meet it."""
    if minimum < 0:
        raise reader.error("min_success", f"must be 0 or more, got {minimum}")
    if minimum <= DEFAULT_MIN_SUCCESS:
        # Every cell sends a request at least: only a larger minimum can be out of reach
        # (and an open loop's count costs its schedule).
        return attrs.evolve(stage, min_success=minimum)
    counts = [(f"cell {cell.id}", stage.measured(cell)) for cell in stage.cells]
    if stage.sweep_rates is not None and stage.arrival is not None:
        rate_requests = stage.arrival["requests"]
        if rate_requests is not None:
            counts.append(("each rate cell", rate_requests))
    for where, count in counts:
        if minimum > count:
            raise reader.error(
                "min_success",
                f"{minimum} is more than the {count} measured requests of {where}; "
                "it could never be met",
            )
    return attrs.evolve(stage, min_success=minimum)


def _sampling(reader: _Reader, seed: int) -> tuple[int, bool, int, float, int]:
    """max_tokens, controlled_output, warmup, temperature and seed of a workload stage."""
    max_tokens = reader.positive("max_tokens")
    if max_tokens > MAX_CONTEXT_TARGET:
        raise reader.error(
            "max_tokens", f"{max_tokens} is more than {MAX_CONTEXT_TARGET:,}; a typo?"
        )
    controlled = reader.get("controlled_output", (bool,), True, "true or false")
    warmup = reader.get("warmup", (int,), 0, "a whole number")
    if not 0 <= warmup <= MAX_REQUESTS:
        raise reader.error("warmup", f"must be 0 to {MAX_REQUESTS:,}, got {warmup}")
    temperature = float(reader.get("temperature", (int, float), 0.0, "a number"))
    if not 0 <= temperature <= 2:
        raise reader.error("temperature", f"must be between 0 and 2, got {temperature}")
    stage_seed = reader.get("seed", (int,), seed, "a whole number")
    return max_tokens, controlled, warmup, temperature, stage_seed


def _arrival(reader: _Reader) -> dict[str, Any]:
    """The arrival settings of a load or sweep stage."""
    process = reader.get("arrival", (str,), "poisson", "poisson, constant or gamma")
    if process not in PROCESSES:
        raise reader.error("arrival", f"expected one of {', '.join(PROCESSES)}, got {process!r}")
    burstiness = float(reader.get("burstiness", (int, float), 1.0, "a number"))
    if "burstiness" in reader.table and process != "gamma":
        raise reader.error("burstiness", f"only a gamma arrival has a burstiness, not {process}")
    if not (math.isfinite(burstiness) and burstiness > 0):
        raise reader.error("burstiness", f"must be above 0, got {burstiness}")
    requests = reader.get("requests", (int,), None, "a whole number")
    duration = reader.get("duration_s", (int, float), None, "seconds")
    if (requests is None) == (duration is None):
        raise reader.error("requests", "a load stage sets requests or duration_s, one of them")
    if requests is not None and not 1 <= requests <= MAX_REQUESTS:
        raise reader.error("requests", f"must be 1 to {MAX_REQUESTS:,}, got {requests}")
    if duration is not None and not (math.isfinite(duration) and duration > 0):
        raise reader.error("duration_s", f"must be above 0, got {duration}")
    in_flight = reader.get("max_in_flight", (int,), None, "a whole number")
    if in_flight is not None and not 1 <= in_flight <= MAX_CONCURRENCY:
        raise reader.error("max_in_flight", f"must be 1 to {MAX_CONCURRENCY:,}, got {in_flight}")
    return {
        "process": process,
        "burstiness": burstiness,
        "duration_s": None if duration is None else float(duration),
        "requests": requests,
        "max_in_flight": in_flight,
    }


MAX_SWEEP_RATES = 32
"""Rates of one sweep: each is a cell of its own."""


def _sweep_stage(reader: _Reader, name: str, seed: int) -> Stage:
    """A sweep: one request at a time, then all at once, on the plan's first arm; then
    ``rates`` open-loop cells spaced between the two rates found, run by every arm."""
    target = reader.positive("context_target")
    if target > MAX_CONTEXT_TARGET:
        raise reader.error(
            "context_target", f"{target} tokens is beyond any serving context window"
        )
    count = reader.get("rates", (int,), 5, "a whole number")
    if not 1 <= count <= MAX_SWEEP_RATES:
        raise reader.error("rates", f"must be 1 to {MAX_SWEEP_RATES}, got {count}")
    probe = reader.get("probe_requests", (int,), 20, "a whole number")
    if not 2 <= probe <= MAX_CONCURRENCY:
        raise reader.error("probe_requests", f"must be 2 to {MAX_CONCURRENCY:,}, got {probe}")
    arrival = _arrival(reader)
    thinking = reader.get("thinking", (bool,), False, "true or false")
    max_tokens, controlled, warmup, temperature, stage_seed = _sampling(reader, seed)
    reader.finish()
    # Measured one at a time (the synchronous rate), then all at once (the ceiling).
    cells = (Cell(target, 1, thinking), Cell(target, probe, thinking))
    return Stage(
        name, "sweep", cells, probe, max_tokens, controlled, warmup, temperature, stage_seed,
        arrival, count,
    )  # fmt: skip


def _load_stage(reader: _Reader, name: str, seed: int) -> Stage:
    """An open-loop stage: one cell per rate, each sending on a schedule from the seed."""
    target = reader.positive("context_target")
    if target > MAX_CONTEXT_TARGET:
        raise reader.error(
            "context_target", f"{target} tokens is beyond any serving context window"
        )
    value = reader.get("rate", (int, float, list), what="requests per second or a list of them")
    rates = value if isinstance(value, list) else [value]
    if not rates or not all(
        type(r) in (int, float) and math.isfinite(r) and MIN_RATE <= r <= MAX_RATE for r in rates
    ):
        raise reader.error(
            "rate", f"expected requests per second from {MIN_RATE} to {MAX_RATE:,}, got {value!r}"
        )
    repeated = [r for i, r in enumerate(rates) if r in rates[:i]]
    if repeated:
        raise reader.error("rate", f"{repeated[0]} is listed twice")
    arrival = _arrival(reader)
    thinking = reader.bool_list("thinking", False)
    max_tokens, controlled, warmup, temperature, stage_seed = _sampling(reader, seed)
    reader.finish()
    in_flight = arrival["max_in_flight"]
    requests = arrival["requests"]
    # The cap on requests in flight is the cell's concurrency: what the concurrency rule
    # of a matched A/B compares. Without one, the client's own ceiling.
    cells = tuple(
        Cell(target, in_flight or MAX_IN_FLIGHT, th, float(r))
        for r in dict.fromkeys(rates)
        for th in thinking
    )
    if len({c.id for c in cells}) < len(cells):
        raise reader.error("rate", f"two rates spell the same cell name: {value!r}")
    stage = Stage(
        name, "load", cells, requests, max_tokens, controlled, warmup, temperature, stage_seed,
        arrival,
    )  # fmt: skip
    for cell in cells:
        try:
            stage.measured(cell)
        except ValueError as e:
            raise reader.error("rate", f"{cell.id}: {e}") from None
    return stage


def parse_plan(data: dict[str, Any], *, source: str = "plan", base: Path = Path(".")) -> Plan:
    """Builds a plan from a TOML mapping.

    Raises:
        InvalidArtifact: the first problem, with its key.
    """
    reader = _Reader(source, "", data)
    campaign_id = reader.get("campaign_id", (str,), what="YYYY-MM-DD-slug")
    if not _CAMPAIGN_ID.fullmatch(campaign_id):
        raise reader.error("campaign_id", f"must look like 2026-11-29-slug, got {campaign_id!r}")
    try:
        # Before anything runs: the seal refuses it, after every cell was measured.
        datetime.date.fromisoformat(campaign_id[:10])
    except ValueError:
        raise reader.error(
            "campaign_id", f"{campaign_id!r} does not start with a real date"
        ) from None
    seed = reader.get("seed", (int,), 0, "a whole number")
    prefix = reader.get("prefix", (str,), "shared", "shared or unique")
    if prefix not in PREFIX_MODES:
        raise reader.error("prefix", f"expected shared or unique, got {prefix!r}")
    deadlines = _deadlines(reader)
    slo = _slo(reader)
    interleave = reader.get("interleave", (bool,), False, "true or false")
    arms_table = reader.get("arms", (list,), what="[[arms]] tables")
    stages_table = reader.get("stages", (list,), what="[[stages]] tables")
    reader.finish()
    if not arms_table:
        raise reader.error("arms", "at least one arm is required")
    if not stages_table:
        raise reader.error("stages", "at least one stage is required")
    arms = _arms(source, base, arms_table)
    parsed = [_stage(source, i, t, seed) for i, t in enumerate(stages_table)]
    stages = tuple(s for s in parsed if isinstance(s, Stage))
    evidence = tuple(s for s in parsed if isinstance(s, EvidenceStage))
    # A functional gate alone is a plan: a preflight is the first thing an operator runs
    # against a new server. So is a startup: whether a configuration loads within its
    # memory, and how fast, is the first question of a new one. Reserve, telemetry or
    # restoration alone measure no workload and no behaviour, so they are not.
    if not stages and not any(s.kind in (*FUNCTIONAL_KINDS, "startup") for s in evidence):
        raise reader.error(
            "stages", "at least one capacity, endurance, functional or startup stage is required"
        )
    for label, names in (("arms", [a.name for a in arms]), ("stages", [s.name for s in parsed])):
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise reader.error(label, f"name {duplicates[0]!r} is used twice")
    _check_evidence(reader, arms, stages, parsed)
    if interleave:
        _check_interleave(reader, arms, stages, evidence)
    for arm in arms:
        if arm.simulated is not None:
            check_context(
                arm.name, stages, arm.simulated.context_limit, "its profile's context_limit"
            )
    return Plan(campaign_id, seed, prefix, deadlines, arms, stages, evidence, slo, interleave)


def check_context(arm: str, stages: Sequence[Stage], limit: int, source: str) -> None:
    """Refuses context targets the endpoint cannot hold.

    Raises:
        InvalidArtifact: a cell's target is over ``limit`` (the message names it).
    """
    for stage in stages:
        for cell in stage.cells:
            if cell.context_target > limit:
                raise InvalidArtifact(
                    f"arm {arm!r}: stage {stage.name!r} cell {cell.id}: context target "
                    f"{cell.context_target} is beyond the endpoint's context of {limit} tokens "
                    f"({source}); lower the target or raise the server's limit"
                )


def _check_evidence(
    reader: _Reader,
    arms: tuple[Arm, ...],
    stages: tuple[Stage, ...],
    parsed: list[Stage | EvidenceStage],
) -> None:
    workload = {s.name for s in stages}
    seen: set[str] = set()
    for index, stage in enumerate(parsed):
        if not isinstance(stage, EvidenceStage):
            continue
        where = f"stages[{index}]"
        if stage.kind in seen:
            raise reader.error(where, f"a plan has at most one {stage.kind} stage")
        seen.add(stage.kind)
        if stage.kind == "telemetry" and stage.settings["during"] not in workload:
            raise reader.error(
                f"{where}.during",
                f"names no capacity or endurance stage: {stage.settings['during']!r}",
            )
        if stage.kind in ("startup", "restoration"):
            bare = [a.name for a in arms if a.container is None]
            if bare:
                raise reader.error(
                    where, f"{stage.kind} needs an [arms.container] table on arm {bare[0]!r}"
                )


_SOLO_EVIDENCE = ("startup", "restoration", "telemetry")
"""Evidence of one arm's own server or GPUs over its stage: arms that take turns share
their stages and run their servers at once."""


def _check_interleave(
    reader: _Reader,
    arms: tuple[Arm, ...],
    stages: tuple[Stage, ...],
    evidence: tuple[EvidenceStage, ...],
) -> None:
    """Refuses what arms taking turns one request at a time cannot measure as planned."""
    if len(arms) < 2:
        raise reader.error("interleave", "arms take turns: the plan has one arm")
    for arm in arms:
        if arm.manages_container:
            raise reader.error(
                "interleave",
                f"arm {arm.name!r} manages its container, started and removed in its turn; "
                "interleaved arms are all running at once (base_url or [arms.simulated])",
            )
    for step in evidence:
        if step.kind in _SOLO_EVIDENCE:
            raise reader.error(
                "interleave",
                f"a {step.kind} stage measures one arm's server on its own; "
                "interleaved arms share their stages",
            )
    for stage in stages:
        if stage.kind in ("load", "sweep"):
            raise reader.error(
                "interleave",
                f"stage {stage.name!r} sends on a schedule ({stage.kind}); interleaved arms "
                "take turns one request at a time",
            )
        for cell in stage.cells:
            if cell.concurrency != 1:
                # Turns of one request each keep what the endpoint serves at once as the
                # cell says; at a higher concurrency the arms' requests would share batches.
                raise reader.error(
                    "interleave",
                    f"stage {stage.name!r} cell {cell.id}: concurrency {cell.concurrency}; "
                    "interleaved arms take turns one request at a time (concurrency 1)",
                )


def load_plan(path: str | Path) -> Plan:
    """Reads and checks a ``PLAN.toml``.

    Raises:
        InvalidArtifact: unreadable, not TOML, or not a valid plan.
    """
    path = Path(path)
    return parse_plan(read_toml(path), source=str(path), base=path.parent)
