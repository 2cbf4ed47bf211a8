"""The simulated endpoint's profile: its timing model, limits and injected faults."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from ledger.errors import InvalidArtifact
from ledger.formats.tomlio import read_toml

__all__ = [
    "FAULT_KINDS",
    "QUALITY_FAULT_KINDS",
    "Fault",
    "Profile",
    "QualityFault",
    "load_profile",
]

FAULT_KINDS = ("status", "disconnect", "stall", "malformed", "bad-usage")
"""Faults the endpoint can inject. ``stall`` with ``after_tokens = 0`` stalls before the
first token; a ``status`` fault answers with ``status`` instead of streaming; ``bad-usage``
streams a whole reply whose usage counts are negative (``prompt_tokens: -3``)."""


def _positive(instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if not value > 0:
        raise ValueError(f"{attribute.name} must be > 0, got {value!r}")


def _not_negative(instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if not value >= 0:
        raise ValueError(f"{attribute.name} must be >= 0, got {value!r}")


MAX_CV = 10.0
"""The largest coefficient of variation of a jitter: ten times the mean is noise enough."""


def _coefficient(instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if not 0 <= value <= MAX_CV:
        raise ValueError(f"{attribute.name} must be between 0 and {MAX_CV:g}, got {value!r}")


def _whole_or_none(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise ValueError(f"{attribute.name} must be a whole number, got {value!r}")


@attrs.frozen
class Fault:
    """One seeded fault: each request draws against ``rate``."""

    kind: str = attrs.field(validator=attrs.validators.in_(FAULT_KINDS))
    """One of :data:`FAULT_KINDS`."""
    rate: float = attrs.field(default=1.0)
    """Probability per request, 0 to 1."""
    status: int = 503
    """The HTTP status of a ``status`` fault."""
    after_tokens: int = attrs.field(default=4, validator=_not_negative)
    """Tokens sent before a disconnect, stall or malformed chunk."""
    seconds: float = attrs.field(default=3600.0, validator=_not_negative)
    """How long a stall lasts."""

    @rate.validator
    def _check_rate(self, attribute: attrs.Attribute[float], value: float) -> None:
        if not 0 <= value <= 1:
            raise ValueError(f"rate must be between 0 and 1, got {value!r}")


QUALITY_FAULT_KINDS = (
    "leak-reasoning",
    "wrong-tool",
    "broken-json",
    "ignore-word-limit",
    "late-canary",
    "miss-needle",
    "wrong-code",
    "blind",
)
"""Answering faults: each makes the answering mode fail the checks of one kind."""


@attrs.frozen
class QualityFault:
    """An answering fault, active for prompts within a token window."""

    kind: str = attrs.field(validator=attrs.validators.in_(QUALITY_FAULT_KINDS))
    """One of :data:`QUALITY_FAULT_KINDS`."""
    min_prompt_tokens: int = attrs.field(default=0, validator=_not_negative)
    """Active from this prompt length."""
    max_prompt_tokens: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(int))
    )
    """Active up to this prompt length (None: no upper bound)."""
    answer: str = attrs.field(
        default="incorrect", validator=attrs.validators.in_(("incorrect", "empty"))
    )
    """For ``miss-needle``: a wrong visible answer, or only whitespace until max_tokens."""


@attrs.frozen
class Profile:
    """What the simulated server is: every number of its timing model and limits."""

    model: str = "anvil-sim"
    """The served model name."""
    seed: int = 0
    """Seeds output text and fault draws."""
    context_limit: int = attrs.field(default=131072, validator=_positive)
    """Prompt plus max_tokens above this is refused with 400."""
    body_limit_bytes: int = attrs.field(default=8 << 20, validator=_positive)
    """A request body above this is refused with 413."""
    prefill_tok_s: float = attrs.field(default=20000.0, validator=_positive)
    """Prompt tokens processed per second (uncached ones)."""
    decode_tok_s: float = attrs.field(default=80.0, validator=_positive)
    """Tokens generated per second by one request."""
    overhead_ms: float = attrs.field(default=5.0, validator=_not_negative)
    """Fixed scheduling cost before prefill."""
    max_running_requests: int = attrs.field(default=8, validator=_positive)
    """Requests served at once; more wait in a queue."""
    prefix_cache: bool = True
    """Whether a repeated prompt prefix skips prefill."""
    prefix_block_tokens: int = attrs.field(default=16, validator=_positive)
    """Granularity of the prefix cache, in tokens."""
    prefix_cache_blocks: int = attrs.field(default=65536, validator=_positive)
    """Capacity of the prefix cache, in blocks (least recently used evicted)."""
    natural_output_tokens: int = attrs.field(default=48, validator=_positive)
    """Where a reply ends by itself when neither ignore_eos nor min_tokens forbids it."""
    reasoning_tokens: int = attrs.field(default=24, validator=_not_negative)
    """Tokens of the reasoning channel when thinking is enabled."""
    reasoning_field: str = attrs.field(
        default="reasoning_content",
        validator=attrs.validators.in_(("reasoning_content", "reasoning")),
    )
    """The delta field of reasoning (SGLang and older vLLM: reasoning_content)."""
    faults: tuple[Fault, ...] = ()
    """Injected faults, drawn in order; the first that fires applies."""
    answering: bool = True
    """Answer the functional and quality checks' prompts (``answers.py``)."""
    responses_api: bool = True
    """Serve ``POST /v1/responses``; without it that path is 404, as on servers that lack it."""
    quality_faults: tuple[QualityFault, ...] = ()
    """Answering faults."""
    close_after_response: bool = False
    """Serve one response per connection without saying so (no ``Connection: close``), as
    llama.cpp's server does. The close shows when the next request arrives on the kept
    connection: it is dropped unanswered. Dropping at that moment, rather than racing a close
    against the client's pool, makes every reuse meet a dead connection."""

    pause_at_request: int = 0
    """When the server receives its chat request of this number (counted from 1; 0:
    never), it stalls for ``pause_s``: no request starts until the pause is over (an
    engine stopped by a hang, a recompilation or a collection)."""
    pause_s: float = 0.0
    jitter_cv: float = attrs.field(default=0.0, validator=_coefficient)
    """Each request's service time (overhead, prefill and every decode step) is scaled by a
    lognormal factor of mean 1 and this coefficient of variation: a server's
    request-to-request noise. 0: every request as the timing model says."""
    run_cv: float = attrs.field(default=0.0, validator=_coefficient)
    """One lognormal factor of mean 1 and this coefficient of variation, drawn when the
    server starts, scales every request it serves: the noise between two runs of one
    configuration, which no resampling of a single run can see."""
    jitter_seed: int | None = attrs.field(default=None, validator=_whole_or_none)
    """Seeds the jitter draws; None: a fresh seed each start, so two runs of one profile
    differ as two runs of a real server do (a repeat of an arm with a seed draws what it
    drew: no A/A control)."""

    def to_json(self) -> dict[str, Any]:
        """The profile as recorded in an arm's identity."""
        document = attrs.asdict(self, recurse=False)
        document["faults"] = [attrs.asdict(f) for f in self.faults]
        document["quality_faults"] = [attrs.asdict(f) for f in self.quality_faults]
        return document

    @classmethod
    def from_mapping(cls, data: dict[str, Any], *, source: str = "profile") -> Profile:
        """Builds a profile from a TOML or JSON mapping.

        Raises:
            InvalidArtifact: an unknown key or a value out of range.
        """
        known = {a.name for a in attrs.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InvalidArtifact(
                f"{source}: unknown key {unknown[0]!r} (expected one of {', '.join(sorted(known))})"
            )
        values = dict(data)
        try:
            raw_faults = values.pop("faults", [])
            if not isinstance(raw_faults, list | tuple):
                raise TypeError(f"faults must be a list of tables, got {raw_faults!r}")
            faults = []
            for fault in raw_faults:
                if isinstance(fault, Fault):
                    faults.append(fault)
                elif isinstance(fault, dict):
                    _check_types(Fault, fault)
                    faults.append(Fault(**fault))
                else:
                    raise TypeError(f"a fault must be a table, got {fault!r}")
            quality = []
            raw_quality = values.pop("quality_faults", [])
            if not isinstance(raw_quality, list | tuple):
                raise TypeError(f"quality_faults must be a list of tables, got {raw_quality!r}")
            for fault in raw_quality:
                if isinstance(fault, QualityFault):
                    quality.append(fault)
                elif isinstance(fault, dict):
                    _check_types(QualityFault, fault)
                    quality.append(QualityFault(**fault))
                else:
                    raise TypeError(f"a quality fault must be a table, got {fault!r}")
            _check_types(cls, values)
            return cls(**values, faults=tuple(faults), quality_faults=tuple(quality))
        except (TypeError, ValueError) as e:
            raise InvalidArtifact(f"{source}: {e}") from None


_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
    "str": (str,),
}


def _check_types(cls: type, values: dict[str, Any]) -> None:
    for field in attrs.fields(cls):
        expected = _TYPES.get(str(field.type))
        if expected is None or field.name not in values:
            continue
        value = values[field.name]
        if (isinstance(value, bool) and bool not in expected) or not isinstance(value, expected):
            raise TypeError(f"{field.name} must be {field.type}, got {value!r}")


def load_profile(path: str | Path) -> Profile:
    """Reads a TOML profile file.

    Raises:
        InvalidArtifact: unreadable, not TOML, or not a valid profile.
    """
    return Profile.from_mapping(read_toml(path), source=str(path))
