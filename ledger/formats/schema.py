"""Versioned JSON Schemas and the validation of documents against them.

A document names its schema in its ``schema`` field, ``anvil-serving.<kind>/v<N>``; the
schema lives in ``schemas/<kind>/v<N>.schema.json`` (``ledger/_schemas/`` inside the
wheel). Validation uses ``jsonschema-rs`` (hundreds of times faster than the reference
``jsonschema``, which the tests run beside it on every schema asset).

Version history:
    benchmark-decision-summary v1: the three seed summaries (2026-09).
    os-comparison v1, llm-qualification-configuration v1, manifest v1: 2026-11.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import jsonschema_rs
import orjson

from ledger.errors import InvalidArtifact, SchemaError
from ledger.formats import jsonio
from ledger.formats.jsonio import json_pointer

__all__ = [
    "SCHEMA_PREFIX",
    "SchemaId",
    "SchemaIssue",
    "document_bytes",
    "issues",
    "known_schemas",
    "load_schema",
    "read_document",
    "schema_of",
    "schema_root",
    "subschema_validator",
    "validate",
    "write_document",
]

SCHEMA_PREFIX = "anvil-serving."
_SCHEMA_ID = re.compile(r"anvil-serving\.(?P<kind>[a-z][a-z0-9-]*)/v(?P<version>[1-9][0-9]*)")
_MAX_ISSUES = 20


def schema_root() -> Path:
    """Returns the folder holding ``<kind>/v<N>.schema.json``.

    Inside an installed wheel the schemas are ``ledger/_schemas``; in a checkout (or an
    editable install) they are the repository's top-level ``schemas/``.
    """
    ledger = Path(__file__).resolve().parent.parent
    packaged = ledger / "_schemas"
    if packaged.is_dir():
        return packaged
    return ledger.parent / "schemas"


@attrs.frozen
class SchemaId:
    """A parsed ``anvil-serving.<kind>/v<N>`` identifier."""

    kind: str
    """The document kind, e.g. ``os-comparison``."""
    version: int
    """The major version."""

    @classmethod
    def parse(cls, value: object) -> SchemaId:
        """Parses a ``schema`` field.

        Raises:
            SchemaError: ``schema-unknown`` when the value is not a schema identifier.
        """
        match = _SCHEMA_ID.fullmatch(value) if isinstance(value, str) else None
        if match is None:
            raise SchemaError(
                f"schema {value!r} is not of the form 'anvil-serving.<kind>/v<N>'",
                code="schema-unknown",
                pointer="/schema",
            )
        return cls(match["kind"], int(match["version"]))

    def __str__(self) -> str:
        return f"{SCHEMA_PREFIX}{self.kind}/v{self.version}"

    @property
    def urn(self) -> str:
        """The schema's ``$id``."""
        return f"urn:anvil-serving:schema:{self.kind}:v{self.version}"


@functools.cache
def known_schemas() -> Mapping[SchemaId, Path]:
    """Every schema shipped with the toolkit, by identifier."""
    found: dict[SchemaId, Path] = {}
    for path in sorted(schema_root().glob("*/v*.schema.json")):
        version = path.name.removeprefix("v").removesuffix(".schema.json")
        if version.isdigit():
            found[SchemaId(path.parent.name, int(version))] = path
    return found


@functools.cache
def load_schema(schema_id: SchemaId) -> dict[str, Any]:
    """Returns the parsed schema document for ``schema_id``.

    Raises:
        SchemaError: ``schema-unknown`` when the toolkit has no such kind or version.
    """
    path = known_schemas().get(schema_id)
    if path is None:
        kinds = sorted({s.kind for s in known_schemas()})
        raise SchemaError(
            f"unknown schema {str(schema_id)!r} (known kinds: {', '.join(kinds)})",
            code="schema-unknown",
            pointer="/schema",
        )
    document: dict[str, Any] = orjson.loads(path.read_bytes())
    return document


@functools.cache
def _validator(schema_id: SchemaId) -> Any:
    schema = load_schema(schema_id)
    registry = jsonschema_rs.Registry([(s.urn, load_schema(s)) for s in known_schemas()])
    return jsonschema_rs.validator_for(schema, registry=registry)


@functools.cache
def subschema_validator(schema_id: SchemaId, name: str) -> Any:
    """A validator of one of a schema's ``$defs`` (a cell run's record)."""
    registry = jsonschema_rs.Registry([(s.urn, load_schema(s)) for s in known_schemas()])
    return jsonschema_rs.validator_for(
        {"$ref": f"{schema_id.urn}#/$defs/{name}"}, registry=registry
    )


@attrs.frozen
class SchemaIssue:
    """One way a document fails its schema."""

    pointer: str
    """JSON pointer of the offending value (``""`` for the whole document)."""
    message: str
    """What is wrong, as the validator words it."""


def schema_of(document: object) -> SchemaId:
    """Returns the schema a document declares.

    Raises:
        SchemaError: ``schema-undeclared`` when it has no ``schema`` field,
            ``schema-unknown`` when the field is malformed.
    """
    if not isinstance(document, dict) or "schema" not in document:
        raise SchemaError("document has no 'schema' field", code="schema-undeclared")
    return SchemaId.parse(document["schema"])


def issues(document: object, schema_id: SchemaId) -> list[SchemaIssue]:
    """Validates ``document`` against ``schema_id``; returns its issues, first ones first.

    Raises:
        SchemaError: ``schema-unknown`` when the toolkit has no such schema.
    """
    validator = _validator(schema_id)
    if validator.is_valid(document):
        return []
    found = [
        SchemaIssue(json_pointer(list(e.instance_path)), e.message)
        for e in validator.iter_errors(document)
    ]
    # Deterministic order whatever order the validator walks in.
    found.sort(key=lambda issue: (issue.pointer, issue.message))
    return found[:_MAX_ISSUES]


def validate(document: object) -> SchemaId:
    """Validates a document against the schema it declares.

    Returns:
        the schema identifier.

    Raises:
        SchemaError: the schema is undeclared or unknown, or the document breaks it; the
            error's ``pointer`` names the first offending value.
    """
    schema_id = schema_of(document)
    found = issues(document, schema_id)
    if found:
        first = found[0]
        raise SchemaError(
            f"does not match {schema_id}: {first.message} at {first.pointer or '/'}",
            pointer=first.pointer,
        )
    return schema_id


def read_document(path: str | Path, *, max_bytes: int | None = None) -> dict[str, Any]:
    """Reads an untrusted JSON artifact strictly and validates it against its schema.

    Raises:
        InvalidArtifact: too large, not strict JSON (duplicate keys, NaN, ...).
        SchemaError: undeclared, unknown or invalid; the message names the file.
        OSError: the file cannot be read.
    """
    try:
        document = jsonio.read_json(path, max_bytes=max_bytes or jsonio.MAX_JSON_BYTES)
        validate(document)
    except (InvalidArtifact, SchemaError) as e:
        where = f"{path}#{e.pointer}" if e.pointer else str(path)
        raise type(e)(f"{where}: {e}", code=e.code, pointer=e.pointer) from None
    return document  # type: ignore[no-any-return]


def document_bytes(document: dict[str, Any]) -> bytes:
    """Validates a document against its schema; returns the bytes it is written as.

    Raises:
        SchemaError: the document does not satisfy its schema.
    """
    validate(document)
    return jsonio.dumps_deterministic(document)


def write_document(path: str | Path, document: dict[str, Any], *, replace: bool = True) -> bytes:
    """Validates a document against its schema, then writes it deterministically and atomically.

    Returns:
        the bytes written (their SHA-256 is the artifact's digest).

    Raises:
        SchemaError: the document does not satisfy its schema (nothing is written).
        FileExistsError: ``path`` exists and ``replace`` is false.
    """
    validate(document)
    return jsonio.write_json(path, document, replace=replace)
