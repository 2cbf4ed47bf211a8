from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from referencing import Registry, Resource

from ledger.errors import InvalidArtifact, SchemaError
from ledger.formats import schema
from ledger.formats.jsonio import parse_strict, read_json
from tests.conftest import ASSETS, ROOT, seed_paths

SUMMARY = schema.SchemaId("benchmark-decision-summary", 1)


def _reference_validator(schema_id: schema.SchemaId) -> jsonschema.Draft202012Validator:
    registry: Registry[Any] = Registry().with_resources(
        (s.urn, Resource.from_contents(schema.load_schema(s))) for s in schema.known_schemas()
    )
    return jsonschema.Draft202012Validator(schema.load_schema(schema_id), registry=registry)


def test_every_schema_is_valid_2020_12_with_its_urn() -> None:
    found = schema.known_schemas()
    assert {str(s) for s in found} >= {
        "anvil-serving.benchmark-decision-summary/v1",
        "anvil-serving.os-comparison/v1",
        "anvil-serving.llm-qualification-configuration/v1",
        "anvil-serving.manifest/v1",
    }
    for schema_id, path in found.items():
        document = json.loads(path.read_text())
        jsonschema.Draft202012Validator.check_schema(document)
        assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert document["$id"] == schema_id.urn
        assert path == ROOT / "schemas" / schema_id.kind / f"v{schema_id.version}.schema.json"


@pytest.mark.parametrize("path", seed_paths(), ids=lambda p: p.name[:10])
def test_seed_summaries_are_accepted_as_they_are(path: Path) -> None:
    document = read_json(path)
    assert schema.validate(document) == SUMMARY
    assert list(_reference_validator(SUMMARY).iter_errors(document)) == []


def test_seed_parts_validate_as_their_own_kinds() -> None:
    seed = read_json(next(p for p in seed_paths() if "2026-09-08" in p.name))
    assert schema.validate(seed["headline_results"]) == schema.SchemaId("os-comparison", 1)
    assert schema.validate(seed["identity"]) == schema.SchemaId(
        "llm-qualification-configuration", 1
    )


def _seed() -> dict[str, Any]:
    return read_json(next(p for p in seed_paths() if "2026-09-02" in p.name))  # type: ignore[no-any-return]


def _without(key: str) -> dict[str, Any]:
    document = _seed()
    del document[key]
    return document


def _with(path: list[Any], value: Any) -> dict[str, Any]:
    document = _seed()
    target = document
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return document


REJECTED = [
    ("missing_schema", _without("schema"), "schema-undeclared", ""),
    ("missing_campaign_id", _without("campaign_id"), "schema-invalid", ""),
    ("missing_decision", _without("decision"), "schema-invalid", ""),
    ("unknown_top_level_key", _with(["verdict"], "ship"), "schema-invalid", ""),
    ("complete_not_boolean", _with(["complete"], "true"), "schema-invalid", "/complete"),
    (
        "promotion_not_boolean",
        _with(["decision", "promotion_authorized"], 1),
        "schema-invalid",
        "/decision/promotion_authorized",
    ),
    ("gates_not_list", _with(["gates"], {"name": "x"}), "schema-invalid", "/gates"),
    ("gate_count_negative", _with(["gates", 0, "checks"], -1), "schema-invalid", "/gates/0/checks"),
    ("gate_unknown_key", _with(["gates", 0, "verdict"], "ok"), "schema-invalid", "/gates/0"),
    ("campaign_id_malformed", _with(["campaign_id"], "Sept 2"), "schema-invalid", "/campaign_id"),
    (
        "headline_not_strings",
        _with(["headline_results"], [1, 2]),
        "schema-invalid",
        "/headline_results",
    ),
    (
        "wrong_schema_version",
        _with(["schema"], "anvil-serving.benchmark-decision-summary/v7"),
        "schema-unknown",
        "/schema",
    ),
    ("schema_not_an_identifier", _with(["schema"], "summary"), "schema-unknown", "/schema"),
]


@pytest.mark.parametrize(
    ("document", "code", "pointer"), [r[1:] for r in REJECTED], ids=[r[0] for r in REJECTED]
)
def test_summary_rejections(document: dict[str, Any], code: str, pointer: str) -> None:
    with pytest.raises(SchemaError) as raised:
        schema.validate(document)
    assert raised.value.code == code
    assert raised.value.pointer == pointer


def _schema_assets() -> list[Path]:
    paths = sorted((ASSETS / "verify").glob("*/*/*.json"))
    return [p for p in paths if p.stat().st_size < 1 << 20]


def test_fast_and_reference_validators_agree_on_every_asset() -> None:
    """jsonschema-rs (used by verify) and jsonschema (the reference) give the same verdicts."""
    checked = 0
    documents: list[Any] = [read_json(p) for p in seed_paths()]
    documents += [document for _, document, _, _ in REJECTED]
    for path in _schema_assets():
        try:
            documents.append(parse_strict(path.read_bytes()))
        except InvalidArtifact:
            continue
    for document in documents:
        try:
            schema_id = schema.schema_of(document)
            schema.load_schema(schema_id)
        except SchemaError:
            continue
        fast = schema.issues(document, schema_id)
        reference = sorted(
            "".join(f"/{p}" for p in e.absolute_path)
            for e in _reference_validator(schema_id).iter_errors(document)
        )
        assert (not fast) == (not reference), document
        checked += 1
    assert checked >= 60


def test_issue_pointers_name_the_value() -> None:
    document = copy.deepcopy(_seed())
    document["gates"][2]["checks"] = "ten"
    found = schema.issues(document, SUMMARY)
    assert [i.pointer for i in found] == ["/gates/2/checks"]
    assert "ten" in found[0].message
