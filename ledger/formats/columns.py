"""The fields of run artifacts the ledger database loads, as DuckDB types, and whether a
parsed document's values convert to them exactly.

A field is described as the documents nest it (:data:`CELL_RUN_FIELDS`): a DuckDB type
name, a dict of fields (a STRUCT) or a one-item list (a LIST of that item). The same
description is ``read_json``'s ``columns`` and ``json_transform``'s structure.

``read_json`` opens and reads each file itself, about a millisecond per small cell run;
``json_transform`` takes text already read, ten times faster for the many small runs of a
published campaign. Both convert with the same code, and give the same values wherever a
value has the JSON type its field names. Where one does not, ``read_json`` converts what
it can (``"0.0"`` to 0.0, ``true`` to 1, ``2.5`` to 2) and refuses the rest with a message
that names the file, while ``json_transform`` gives NULL; so only a document whose every
loaded value has its field's type (:func:`loads_as_text`) takes the fast way, and one whose
number or boolean has another type (:func:`mistyped`) is refused, as verify refuses it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

__all__ = [
    "CELL_RUN_FIELDS",
    "IMPORTED_RUN_FIELDS",
    "RUN_FIELDS",
    "Check",
    "Fields",
    "checker",
    "duckdb_type",
    "kind_of_schema",
    "loads_as_text",
    "mistyped",
    "read_json_columns",
    "structure",
]

Fields = dict[str, Any]

# The parts of run artifacts the database loads (DuckDB types, nested as the documents
# are: a dict is a STRUCT, a one-item list a LIST). DuckDB ignores the rest (content
# digests, a v2 record's compact chunk times, which the database decodes itself), so large
# artifacts load without building them.
CELL_RUN_FIELDS: dict[str, Any] = {
    "campaign_id": "VARCHAR",
    "arm": "VARCHAR",
    "stage": {"name": "VARCHAR", "kind": "VARCHAR"},
    "cell": {
        "id": "VARCHAR",
        "context_target": "BIGINT",
        "concurrency": "BIGINT",
        "thinking": "BOOLEAN",
        "requests": "BIGINT",
        "warmup": "BIGINT",
        "max_tokens": "BIGINT",
        "controlled_output": "BOOLEAN",
        "temperature": "DOUBLE",
        "seed": "BIGINT",
        "prefix": "VARCHAR",
        "arrival": {"rate": "DOUBLE"},
    },
    "status": "VARCHAR",
    "identity": "JSON",
    "request": "JSON",
    "metrics": {
        "available": "BOOLEAN",
        "prefix_cache": {"hits": "DOUBLE", "queries": "DOUBLE", "hit_rate": "DOUBLE"},
    },
    "requests": [
        {
            "index": "BIGINT",
            "warmup": "BOOLEAN",
            "prompt_sha256": "VARCHAR",
            "sent_ns": "BIGINT",
            "first_token_ns": "BIGINT",
            "first_content_ns": "BIGINT",
            "last_token_ns": "BIGINT",
            "end_ns": "BIGINT",
            "usage": {
                "prompt_tokens": "BIGINT",
                "completion_tokens": "BIGINT",
                "cached_tokens": "BIGINT",
            },
            "finish_reason": "VARCHAR",
            "error": {"class": "VARCHAR"},
            "output_as_requested": "BOOLEAN",
            "server_timings": {
                "prompt_ms": "DOUBLE",
                "predicted_n": "DOUBLE",
                "predicted_ms": "DOUBLE",
            },
            "scheduled_ns": "BIGINT",
            # A v1 record's chunk times, for the gaps between them (inter-token latency).
            "chunks_ns": ["BIGINT"],
        }
    ],
}

IMPORTED_RUN_FIELDS: dict[str, Any] = {
    "campaign_id": "VARCHAR",
    "arm": "VARCHAR",
    "stage": "VARCHAR",
    "cell": {"id": "VARCHAR", "context_target": "BIGINT", "concurrency": "BIGINT"},
    "source": {"tool": "VARCHAR", "version": "VARCHAR", "settings": "JSON"},
    "requests": [
        {
            "index": "BIGINT",
            "ok": "BOOLEAN",
            "error_class": "VARCHAR",
            "prompt_tokens": "BIGINT",
            "completion_tokens": "BIGINT",
            "finish_reason": "VARCHAR",
            "ttft_ms": "DOUBLE",
            "first_token_ms": "DOUBLE",
            "e2e_ms": "DOUBLE",
            "decode_tok_s": "DOUBLE",
            "effective_prefill_tok_s": "DOUBLE",
            "sent_ns": "BIGINT",
            "end_ns": "BIGINT",
            "itl_ms": ["DOUBLE"],
        }
    ],
}

_INT64 = 1 << 63


def duckdb_type(spec: Any) -> str:
    """The DuckDB type of a field's description."""
    if isinstance(spec, str):
        return spec
    if isinstance(spec, list):
        return duckdb_type(spec[0]) + "[]"
    return "STRUCT(" + ", ".join(f'"{name}" {duckdb_type(s)}' for name, s in spec.items()) + ")"


def read_json_columns(fields: Fields) -> dict[str, str]:
    """``read_json``'s ``columns``: each top-level field's DuckDB type."""
    return {name: duckdb_type(spec) for name, spec in fields.items()}


def structure(fields: Fields) -> str:
    """``json_transform``'s structure argument."""
    return json.dumps(fields, sort_keys=False)


Check = Callable[[Any], bool]

_SCALARS = {
    "VARCHAR": "type({v}) is str",
    "BIGINT": "type({v}) is int and -_INT64 <= {v} < _INT64",
    # A whole number is a double to both (orjson reads none past 64 bits).
    "DOUBLE": "type({v}) is float or (type({v}) is int and -_INT64 <= {v} < _INT64)",
    "BOOLEAN": "type({v}) is bool",
}


def checker(spec: Any) -> Check:
    """Whether a parsed value converts to ``spec`` exactly (an absent or null field does:
    both give NULL). Written out as one function, as cattrs writes its structuring
    functions: a cell run's requests are checked at a few hundred nanoseconds each."""
    lines = ["def check(value):"]
    counter = iter(range(1 << 30))
    _emit(spec, "value", lines, 1, counter)
    lines.append("    return True")
    namespace: dict[str, Any] = {"_INT64": _INT64}
    # Our own text, from field names of ours: no input reaches it.
    exec(compile("\n".join(lines), f"<columns check {id(spec)}>", "exec"), namespace)  # noqa: S102
    check: Check = namespace["check"]
    return check


def _emit(spec: Any, name: str, lines: list[str], depth: int, counter: Any) -> None:
    """Statements that return False unless the value in variable ``name`` converts."""
    pad = "    " * depth
    if isinstance(spec, str):
        if spec == "JSON":
            return  # any value is its own JSON text to both
        lines.append(f"{pad}if {name} is not None and not ({_SCALARS[spec].format(v=name)}):")
        lines.append(f"{pad}    return False")
        return
    lines.append(f"{pad}if {name} is not None:")
    if isinstance(spec, list):
        item = f"v{next(counter)}"
        lines.append(f"{pad}    if type({name}) is not list:")
        lines.append(f"{pad}        return False")
        lines.append(f"{pad}    for {item} in {name}:")
        _emit(spec[0], item, lines, depth + 2, counter)
        return
    lines.append(f"{pad}    if type({name}) is not dict:")
    lines.append(f"{pad}        return False")
    for field, inner in spec.items():
        if inner == "JSON":
            continue
        value = f"v{next(counter)}"
        lines.append(f"{pad}    {value} = {name}.get({field!r})")
        _emit(inner, value, lines, depth + 1, counter)


RUN_FIELDS: dict[str, Fields] = {
    "cell-run": CELL_RUN_FIELDS,
    "imported-run": IMPORTED_RUN_FIELDS,
}
"""The run artifacts whose requests are rows (by kind), and the fields loaded of each."""
_CHECKS: dict[str, Check] = {}


def kind_of_schema(schema: str) -> str:
    """``anvil-serving.cell-run/v1`` -> ``cell-run``."""
    return schema.removeprefix("anvil-serving.").split("/")[0]


def loads_as_text(document: Any) -> bool:
    """Whether a parsed document is a run whose every loaded value has its field's JSON
    type: ``json_transform`` then gives it what ``read_json`` gives it."""
    if type(document) is not dict or type(document.get("schema")) is not str:
        return False
    kind = kind_of_schema(document["schema"])
    fields = RUN_FIELDS.get(kind)
    if fields is None:
        return False
    check = _CHECKS.get(kind)
    if check is None:
        check = _CHECKS[kind] = checker(fields)
    return check(document)


_NUMBERS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "BIGINT": ("a whole number", lambda v: type(v) is int and -_INT64 <= v < _INT64),
    "DOUBLE": (
        "a number",
        lambda v: type(v) is float or (type(v) is int and -_INT64 <= v < _INT64),
    ),
    "BOOLEAN": ("true or false", lambda v: type(v) is bool),
}
"""The loaded types DuckDB's reader converts into from another JSON type (``true`` and
``"253"`` into BIGINT, ``2.5`` into BIGINT by truncation), and what each must be."""


def mistyped(document: Any, fields: Fields) -> tuple[str, Any, str] | None:
    """The first loaded number or boolean of a run whose JSON type is not its field's:
    (JSON pointer, the value, what it must be); None when there is none. A null is no
    value (NULL to both), and a string field is read as what it holds."""
    from ledger.formats.jsonio import json_pointer

    def walk(spec: Any, value: Any, path: list[str | int]) -> tuple[str, Any, str] | None:
        if value is None:
            return None
        if isinstance(spec, str):
            rule = _NUMBERS.get(spec)
            if rule is not None and not rule[1](value):
                return json_pointer(path), value, rule[0]
            return None
        if isinstance(spec, list):
            items = value if isinstance(value, list) else ()
            for index, item in enumerate(items):
                found = walk(spec[0], item, [*path, index])
                if found is not None:
                    return found
            return None
        if not isinstance(value, dict):
            return None
        for name, inner in spec.items():
            found = walk(inner, value.get(name), [*path, name])
            if found is not None:
                return found
        return None

    return walk(fields, document, [])
