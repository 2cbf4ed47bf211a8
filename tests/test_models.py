from __future__ import annotations

from pathlib import Path

import pytest

from ledger.errors import InvalidArtifact, SchemaError
from ledger.formats import models
from ledger.formats.jsonio import dumps_deterministic, read_json
from tests.conftest import seed_paths


@pytest.mark.parametrize("path", seed_paths(), ids=lambda p: p.name[:10])
def test_seed_round_trips_through_models(path: Path) -> None:
    document = read_json(path)
    summary = models.from_json(path.read_bytes(), models.BenchmarkDecisionSummary)
    assert summary.campaign_id == document["campaign_id"]
    assert models.unstructure(summary) == document


def test_typed_parts_of_the_comparison_seed() -> None:
    path = next(p for p in seed_paths() if "2026-09-08" in p.name)
    summary = models.from_json(path.read_bytes(), models.BenchmarkDecisionSummary)
    assert isinstance(summary.identity, models.QualificationConfiguration)
    assert summary.identity.promotion_authorized is False
    assert isinstance(summary.headline_results, models.OsComparison)
    row = summary.headline_results.rows[0]
    assert row.context_target == 4096
    assert row.metrics["decode_tok_s_p50"].linux == pytest.approx(149.019, rel=1e-5)
    assert summary.gates is not None
    assert summary.gates[3].artifact == "routed-thinking-enabled.json"


def test_untyped_identity_of_older_seed_stays_a_mapping() -> None:
    path = next(p for p in seed_paths() if "2026-09-17" in p.name)
    summary = models.from_json(path.read_bytes(), models.BenchmarkDecisionSummary)
    assert isinstance(summary.identity, dict)
    assert summary.identity["model"]["repository"] == "satgeze/GLM-5.3-Flash-EXL3-TR3-3.5bpw"
    assert summary.headline_results == (
        "Host RAM exhaustion during checkpoint loading; no candidate inference evidence.",
    )


def test_from_json_rejects_in_the_documented_order() -> None:
    with pytest.raises(InvalidArtifact, match="duplicate key"):
        models.from_json(b'{"schema": "a", "schema": "b"}', models.Manifest)
    with pytest.raises(SchemaError, match="required"):
        models.from_json(b'{"schema": "anvil-serving.manifest/v1"}', models.Manifest)
    summary = next(p for p in seed_paths())
    with pytest.raises(SchemaError, match="expected Manifest"):
        models.from_json(summary.read_bytes(), models.Manifest)


def test_structure_error_names_the_pointer() -> None:
    with pytest.raises(SchemaError) as raised:
        models.structure(
            {
                "schema": "x",
                "campaign_id": "c",
                "complete": True,
                "decision": {"promotion_authorized": False, "extra": 1},
            },
            models.BenchmarkDecisionSummary,
        )
    assert raised.value.pointer == "/decision"
    assert "extra" in str(raised.value)


def test_manifest_serialises_null_schema() -> None:
    manifest = models.Manifest(
        models.Manifest.SCHEMA,
        "2026-01-01-x",
        (models.ManifestEntry("a.md", "0" * 64, 3, None),),
        (),
    )
    assert b'"schema": null' in dumps_deterministic(models.unstructure(manifest))


def test_read_artifact_errors_name_the_file_and_pointer(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    path.write_bytes(
        b'{"schema": "anvil-serving.manifest/v1", "campaign_id": 5, '
        b'"artifacts": [], "withheld": []}'
    )
    with pytest.raises(SchemaError) as raised:
        models.read_artifact(path, models.Manifest)
    assert str(raised.value).startswith(f"{path}#/campaign_id: ")
    path.write_bytes(b'{"a": 1, "a": 2}')
    with pytest.raises(InvalidArtifact) as invalid:
        models.read_artifact(path, models.Manifest)
    assert str(invalid.value) == f"{path}#/a: duplicate key 'a'"
    assert invalid.value.code == "duplicate-key"
