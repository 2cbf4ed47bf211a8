"""Typed models of the v1 documents, structured from validated JSON with cattrs.

The parsing order for untrusted input is fixed: size cap, strict JSON, JSON Schema, then
cattrs with extra keys forbidden, then cross-field checks. Schema first, because cattrs
coerces (``structure("1", float)`` is ``1.0``). Optional fields default to ``None`` and are
omitted when unstructured, so a seed document survives a round trip unchanged.
"""

from __future__ import annotations

import os
import re
from typing import Any, ClassVar, TypeVar

import attrs
import cattrs
from cattrs.gen import make_dict_unstructure_fn, override

from ledger.errors import InvalidArtifact, SchemaError
from ledger.formats import schema
from ledger.formats.jsonio import json_pointer, parse_strict, read_limited


@attrs.frozen
class Reference:
    """An artifact named by path (relative, POSIX) and the SHA-256 of its stored bytes."""

    path: str
    """Relative POSIX path inside the campaign folder."""
    sha256: str
    """64 lowercase hex."""


@attrs.frozen
class MetricPair:
    """One metric for both arms of an OS comparison."""

    windows: float
    """The baseline arm's value."""
    linux: float
    """The candidate arm's value."""
    change_percent: float | None
    """``(linux - windows) / windows * 100``; null when the baseline is zero."""


@attrs.frozen
class ArmCounts:
    """A count per arm (median output tokens)."""

    windows: float
    """The baseline arm's value."""
    linux: float
    """The candidate arm's value."""


@attrs.frozen
class OsComparisonRow:
    """One nominal context target of an OS comparison."""

    context_target: int
    """Nominal context the workload aimed at."""
    metrics: dict[str, MetricPair]
    """Metric name to both arms' values."""
    actual_prompt_tokens: float | None = None
    """Prompt tokens as the server counted them."""
    sample_count_per_os: int | None = None
    """Requests per arm behind each median."""
    windows_source: str | Reference | None = None
    """Artifact the baseline values came from."""
    linux_source: str | Reference | None = None
    """Artifact the candidate values came from."""
    sources: tuple[Reference, ...] | None = None
    """Every artifact the row was computed from, by digest."""
    limitations: tuple[str, ...] | None = None
    """What the row does not show."""
    median_output_tokens: ArmCounts | None = None
    """Median completion tokens per arm."""


@attrs.frozen
class EnduranceComparison:
    """The endurance block of an OS comparison."""

    decode_windows: float
    """Baseline decode median, tok/s."""
    decode_linux: float
    """Candidate decode median, tok/s."""
    decode_change_percent: float | None
    """``(linux - windows) / windows * 100``."""
    sample_count_per_os: int | None = None
    """Requests per arm."""
    windows_source: str | Reference | None = None
    """Artifact the baseline came from."""
    linux_source: str | Reference | None = None
    """Artifact the candidate came from."""
    sources: tuple[Reference, ...] | None = None
    """Every artifact the block was computed from, by digest."""
    limitations: tuple[str, ...] | None = None
    """What the block does not show."""


@attrs.frozen
class OsComparison:
    """``anvil-serving.os-comparison/v1``: two arms per context target."""

    SCHEMA: ClassVar[str] = "anvil-serving.os-comparison/v1"

    schema: str
    """Always :attr:`SCHEMA`."""
    rows: tuple[OsComparisonRow, ...]
    """One row per context target."""
    endurance: EnduranceComparison | None = None
    """The endurance comparison, when measured."""
    limitations: tuple[str, ...] | None = None
    """Limitations of the whole comparison."""


@attrs.frozen
class QualificationConfiguration:
    """``anvil-serving.llm-qualification-configuration/v1``: what a campaign measured."""

    SCHEMA: ClassVar[str] = "anvil-serving.llm-qualification-configuration/v1"

    schema: str
    """Always :attr:`SCHEMA`."""
    model: str
    """Model repository id."""
    served_model: str
    """The name the server exposes."""
    revision: str | None = None
    """Model revision (40-hex git revision)."""
    image: str | None = None
    """Container image, by digest."""
    os: str | None = None
    """Platform string of the serving host."""
    repository_revision: str | None = None
    """Revision of the benchmark runner."""
    declared_serve_flags: tuple[str, ...] | None = None
    """Server command-line flags as declared."""
    transport_controls: dict[str, str] | None = None
    """Environment controls (NCCL, CUDA) that shape transport."""
    runtime_identity_verified: str | None = None
    """How the running identity was checked."""
    comparison_differences: tuple[str, ...] | None = None
    """Declared differences between compared arms."""
    promotion_authorized: bool | None = None
    """Must agree with the decision's."""
    oci_build_revision: str | None = None
    """Source revision the image was built from."""
    oci_build_revision_source: str | None = None
    """How that revision was established."""


@attrs.frozen
class GateSummary:
    """Nested counts of an agentic or SWE gate."""

    attempted: int | None = None
    """Cases attempted."""
    passed: int | None = None
    """Cases passed."""
    pass_rate: float | None = None
    """``passed / attempted``."""
    required_pass_rate: float | None = None
    """The policy's threshold."""
    graded: int | None = None
    """Cases graded."""
    resolved: int | None = None
    """Cases resolved."""
    resolve_rate: float | None = None
    """``resolved / graded``."""


@attrs.frozen
class Gate:
    """A pass/fail check, in any of the shapes the seeds use."""

    name: str | None = None
    """Human name (older seeds)."""
    artifact: str | None = None
    """Path of the artifact holding the gate's evidence."""
    status: str | None = None
    """``passed``/``failed``/... (older seeds)."""
    detail: str | None = None
    """Free text."""
    passed: bool | None = None
    """Verdict."""
    checks_passed: int | None = None
    """Checks that passed."""
    checks: int | None = None
    """Checks run."""
    attempts: int | None = None
    """Attempts made."""
    passed_attempts: int | None = None
    """Attempts that passed."""
    completeness: str | None = None
    """Whether the suite ran to the end."""
    summary: GateSummary | None = None
    """Nested counts."""
    requests: int | None = None
    """Requests sent (a workload population)."""
    completed: int | None = None
    """Requests that completed."""
    failed: int | None = None
    """Requests that failed."""
    performance_eligible: bool | None = None
    """Whether the population may back a performance claim."""
    empty_length_terminated: int | None = None
    """Answers empty at the length limit."""
    incorrect_visible_answers: int | None = None
    """Visible answers that were wrong."""

    @property
    def label(self) -> str:
        """The gate's artifact path, else its name."""
        return self.artifact or self.name or "?"


@attrs.frozen
class PolicyRef:
    """The promotion policy a decision was evaluated against."""

    name: str
    """The policy's ``name``."""
    sha256: str
    """SHA-256 of its canonical JSON."""


@attrs.frozen
class UnmetRule:
    """A policy rule a decision did not meet."""

    rule: str
    """``complete``, ``required-gates``, ``matched-ab``, ``reserve``, ``restoration``, ..."""
    reason: str
    """Why, from the evidence."""


@attrs.frozen
class Decision:
    """Labels and the promotion verdict of a campaign."""

    promotion_authorized: bool
    """Whether the configuration may serve real traffic."""
    evidence_labels: tuple[str, ...] | None = None
    """Kinds of evidence gathered."""
    decision_labels: tuple[str, ...] | None = None
    """``verified``, ``no-promotion``, ``rejected``, ..."""
    selected_recipe: str | None = None
    """The recipe chosen, if any."""
    next_gate: str | None = None
    """What must happen before the next decision."""
    candidate: str | None = None
    """The arm the decision is about (``ledger decide``)."""
    policy: PolicyRef | None = None
    """The policy it was evaluated against (``ledger decide``)."""
    unmet: tuple[UnmetRule, ...] | None = None
    """Every rule it did not meet (``ledger decide``)."""


@attrs.frozen
class Measurement:
    """How a campaign measured."""

    path: str | None = None
    """Measurement path (online direct, routed, ...)."""
    warm_cold_state: str | None = None
    """Cache and process warmth."""
    sample_count: int | str | None = None
    """Total samples, or a description of them."""
    statistics: tuple[str, ...] | None = None
    """Statistics reported."""


@attrs.frozen
class BenchmarkDecisionSummary:
    """``anvil-serving.benchmark-decision-summary/v1``: a campaign's published decision."""

    SCHEMA: ClassVar[str] = "anvil-serving.benchmark-decision-summary/v1"

    schema: str
    """Always :attr:`SCHEMA`."""
    campaign_id: str
    """``YYYY-MM-DD-slug``."""
    complete: bool
    """Whether every planned stage ran."""
    decision: Decision
    """The verdict."""
    identity: QualificationConfiguration | dict[str, Any] | None = None
    """Typed when it declares a schema, free-form in the older seeds."""
    workload: dict[str, Any] | None = None
    """Workload description (free-form in v1)."""
    measurement: Measurement | None = None
    """How it was measured."""
    gates: tuple[Gate, ...] | None = None
    """Pass/fail checks."""
    headline_results: tuple[str, ...] | OsComparison | None = None
    """Sentences, or a machine-derived OS comparison."""
    failures: tuple[str, ...] | None = None
    """Failures retained."""
    limitations: tuple[str, ...] | None = None
    """What the campaign does not show."""
    evidence: tuple[str, ...] | None = None
    """Paths of the artifacts the summary rests on."""

    @property
    def identity_promotion_authorized(self) -> bool | None:
        """The identity's own ``promotion_authorized``, when it states one."""
        if isinstance(self.identity, QualificationConfiguration):
            return self.identity.promotion_authorized
        if isinstance(self.identity, dict):
            value = self.identity.get("promotion_authorized")
            return value if isinstance(value, bool) else None
        return None


@attrs.frozen
class ManifestEntry:
    """One published file of a campaign."""

    path: str
    """Relative POSIX path."""
    sha256: str
    """Digest of the stored bytes."""
    bytes: int
    """Size of the stored bytes."""
    schema: str | None
    """The document's ``schema`` field; None for files that are not JSON documents."""


@attrs.frozen
class WithheldEntry:
    """An artifact the campaign rests on that is operator-private and not published."""

    path: str
    """Relative POSIX path it has in the raw campaign."""
    reason: str
    """Why it is withheld."""
    sha256: str | None = None
    """Digest of the raw original, when the operator chose to disclose it."""


@attrs.frozen
class ReviewedChange:
    """A file that differed from the seal when a command re-sealed after review."""

    path: str
    """Relative POSIX path."""
    change: str
    """``changed``, ``added`` or ``missing``."""
    sealed_sha256: str | None = None
    """The digest the previous seal recorded (None when the file was not sealed)."""
    sha256: str | None = None
    """The digest found (None when the file was missing)."""


@attrs.frozen
class Review:
    """A re-seal over changes the previous seal did not vouch for, made on purpose with
    ``--reseal-after-review``. Kept by every later seal, and reported by verify."""

    command: str
    """The command that re-sealed (``report``, ``seal``, ...)."""
    changes: tuple[ReviewedChange, ...]
    """What differed from the previous seal; empty when there was no previous seal."""


@attrs.frozen
class Manifest:
    """``anvil-serving.manifest/v1``: the root of a campaign's reference DAG."""

    SCHEMA: ClassVar[str] = "anvil-serving.manifest/v1"

    schema: str
    """Always :attr:`SCHEMA`."""
    campaign_id: str
    """The campaign the folder holds."""
    artifacts: tuple[ManifestEntry, ...]
    """Every file, sorted by path."""
    withheld: tuple[WithheldEntry, ...]
    """Declared-private artifacts, sorted by path."""
    reviews: tuple[Review, ...] = ()
    """Re-seals made over a broken or missing seal, oldest first (omitted when none)."""
    seals: tuple[str, ...] = ()
    """The seal files the campaign has beyond ``manifest.json`` and ``SHA256SUMS``: its
    statement and the statement's sigstore bundle (omitted when none). Deleting one is
    then an error, not a quiet loss of what a signature covers."""


def _structure_source(value: Any, _: Any) -> str | Reference:
    if isinstance(value, str):
        return value
    return converter.structure(value, Reference)


def _structure_identity(value: Any, _: Any) -> QualificationConfiguration | dict[str, Any]:
    if isinstance(value, dict) and "schema" in value:
        return converter.structure(value, QualificationConfiguration)
    if not isinstance(value, dict):
        raise TypeError(f"identity must be an object, got {type(value).__name__}")
    return dict(value)


def _structure_headline(value: Any, _: Any) -> tuple[str, ...] | OsComparison:
    if isinstance(value, dict):
        return converter.structure(value, OsComparison)
    return converter.structure(value, tuple[str, ...])


def _structure_sample_count(value: Any, _: Any) -> int | str:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError(f"sample_count must be an integer or a string, got {value!r}")
    return value


converter = cattrs.Converter(forbid_extra_keys=True, omit_if_default=True)
"""The one converter for every model: extra keys forbidden, ``None`` fields omitted."""

_UNION_HOOKS: list[tuple[Any, Any]] = [
    (str | Reference, _structure_source),
    (QualificationConfiguration | dict[str, Any], _structure_identity),
    (tuple[str, ...] | OsComparison, _structure_headline),
    (int | str, _structure_sample_count),
]


def _optional(hook: Any) -> Any:
    def structure_optional(value: Any, cls: Any) -> Any:
        return None if value is None else hook(value, cls)

    return structure_optional


for _union, _hook in _UNION_HOOKS:
    converter.register_structure_hook(_union, _hook)
    converter.register_structure_hook(_union | None, _optional(_hook))
    converter.register_unstructure_hook(_union, converter.unstructure)
    converter.register_unstructure_hook(_union | None, converter.unstructure)
# The manifest's `schema` is None for non-JSON files and must be written as null, not omitted.
converter.register_unstructure_hook(
    ManifestEntry,
    make_dict_unstructure_fn(ManifestEntry, converter, schema=override(omit_if_default=False)),
)

_CATTRS_PATH = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\['([^']*)'\]")

T = TypeVar("T")


def _pointer_from_cattrs(path: str) -> str:
    parts: list[str | int] = []
    for name, index, key in _CATTRS_PATH.findall(path.removeprefix("$")):
        parts.append(name or (int(index) if index else key))
    return json_pointer(parts)


def structure(document: Any, model: type[T]) -> T:
    """Structures a schema-valid document into ``model``.

    Raises:
        SchemaError: a value cattrs cannot structure; the pointer names it.
    """
    try:
        return converter.structure(document, model)
    except (cattrs.BaseValidationError, TypeError, ValueError) as e:
        messages = (
            cattrs.transform_error(e) if isinstance(e, cattrs.BaseValidationError) else [f"{e} @ $"]
        )
        first = messages[0]
        text, _, where = first.rpartition(" @ ")
        pointer = _pointer_from_cattrs(where) if where.startswith("$") else ""
        raise SchemaError(
            f"cannot read as {model.__name__}: {text or first}", pointer=pointer
        ) from None


def unstructure(model: object) -> Any:
    """Returns the JSON form of a model (``None`` fields omitted)."""
    return converter.unstructure(model)


_MODELS: dict[str, type[Any]] = {
    BenchmarkDecisionSummary.SCHEMA: BenchmarkDecisionSummary,
    OsComparison.SCHEMA: OsComparison,
    QualificationConfiguration.SCHEMA: QualificationConfiguration,
    Manifest.SCHEMA: Manifest,
}


def model_for(schema_id: str) -> type[Any] | None:
    """Returns the model class for a schema identifier, or None when it has none yet."""
    return _MODELS.get(schema_id)


def from_document(document: Any) -> Any:
    """Validates a parsed document against its declared schema and structures it.

    Returns:
        the model instance, or the document itself for a valid kind with no model yet.

    Raises:
        SchemaError: undeclared, unknown or invalid.
    """
    schema_id = schema.validate(document)
    model = model_for(str(schema_id))
    return document if model is None else structure(document, model)


def from_json(raw: bytes, expected: type[T]) -> T:
    """The entry point for one untrusted document of a known kind.

    Raises:
        InvalidArtifact: not strict JSON.
        SchemaError: not the expected kind, or invalid.
    """
    document = parse_strict(raw)
    result = from_document(document)
    if not isinstance(result, expected):
        raise SchemaError(
            f"expected {expected.__name__}, got schema {document.get('schema')!r}",
            pointer="/schema",
        )
    return result


def read_artifact(path: str | os.PathLike[str], expected: type[T]) -> T:
    """Reads one untrusted artifact file of a known kind.

    Raises:
        InvalidArtifact: too large or not strict JSON; the message names the file and the
            JSON pointer.
        SchemaError: not the expected kind, or invalid; likewise named.
        OSError: the file cannot be read.
    """
    try:
        return from_json(read_limited(path), expected)
    except (InvalidArtifact, SchemaError) as e:
        where = f"{os.fspath(path)}#{e.pointer}" if e.pointer else os.fspath(path)
        raise type(e)(f"{where}: {e}", code=e.code, pointer=e.pointer) from None


__all__ = [
    "ArmCounts",
    "BenchmarkDecisionSummary",
    "Decision",
    "EnduranceComparison",
    "Gate",
    "GateSummary",
    "InvalidArtifact",
    "Manifest",
    "ManifestEntry",
    "Measurement",
    "MetricPair",
    "OsComparison",
    "OsComparisonRow",
    "QualificationConfiguration",
    "Reference",
    "Review",
    "ReviewedChange",
    "WithheldEntry",
    "from_document",
    "from_json",
    "read_artifact",
    "structure",
    "unstructure",
]
