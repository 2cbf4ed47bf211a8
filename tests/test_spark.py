"""``ledger export``'s Parquet is what a cluster reads: Spark (local mode, a real JVM) over
the export computes the same per-cell statistics as ``ledger sql`` over the same campaigns.

DuckDB stays the embedded engine; this is the proof that an export handed to Spark or Trino
on object storage means the same numbers (docs/guides/database.md).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger.imports import import_files
from tests.components import missing
from tests.conftest import DATA, ROOT, CliRun

REAL = DATA / "realworld"
VLLM = REAL / "vllm-bench-serve/vllm-0.15.0-qwen3-8b-tp8-c50-detailed.json"
SGLANG = REAL / "sglang-bench-serving/sglang-0.5.9-qwen3-8b-c100-output-details.jsonl"
# Arm names a partition reader could take for numbers: "007" would become 7.
IMPORTED = "2026-12-01-imported-arms"
ARMS = ("007", "010")

# The per-cell statistics ``ledger sql`` serves from its ``cells`` view, written again for
# Spark over the export's raw request rows: DuckDB's median and quantile_cont are Spark's
# exact percentile, both interpolating between the two nearest ranks.
MEASURED = "FILTER (WHERE ok AND NOT warmup)"
METRICS = ("ttft_ms", "first_token_ms", "e2e_ms", "decode_tok_s")
PERCENTILES = ", ".join(
    f"percentile({m}, {q}) {MEASURED} AS {m}_p{round(q * 100)}"
    for m in METRICS
    for q in (0.5, 0.9, 0.99)
)
SPARK_CELLS = f"""
SELECT campaign_id, arm, stage, cell,
       count(*) FILTER (WHERE NOT warmup) AS n,
       count(*) FILTER (WHERE NOT warmup AND NOT ok) AS failed,
       {PERCENTILES},
       percentile(completion_tokens, 0.5) {MEASURED} AS median_output_tokens
FROM request_rows
GROUP BY campaign_id, arm, stage, cell
ORDER BY campaign_id, arm, stage, cell
"""
COLUMNS = [
    "campaign_id", "arm", "stage", "cell", "n", "failed",
    *(f"{m}_{p}" for m in METRICS for p in ("p50", "p90", "p99")),
    "median_output_tokens",
]  # fmt: skip
LEDGER_CELLS = f"SELECT {', '.join(COLUMNS)} FROM cells ORDER BY campaign_id, arm, stage, cell"


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """A local Spark session of two cores on a real JVM (Java from Debian's packages)."""
    if shutil.which("java") is None:
        missing("java is not installed; Spark needs a JVM")
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        missing("pyspark is not installed (pip install -e '.[test]')")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("anvil-ledger-export")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    """``evidence/`` (our own runs) and a campaign of two imports, exported together."""
    folder = tmp_path_factory.mktemp("spark")
    raw = folder / "raw"
    for arm, tool, source in zip(ARMS, ("vllm", "sglang"), (VLLM, SGLANG), strict=True):
        import_files(tool, [source], raw_dir=raw, campaign=IMPORTED, arm=arm)
    sources = [ROOT / "evidence", raw / IMPORTED]
    return folder, sources


def _ledger_cells(cli: CliRun, sources: list[Path]) -> list[dict[str, Any]]:
    args = [a for s in sources for a in ("--from", str(s))]
    status, out, err = cli("sql", LEDGER_CELLS, *args, "--format", "json")
    assert status == 0, err
    rows: list[dict[str, Any]] = json.loads(out)
    return rows


def _spark_cells(spark: Any, export: Path, *, infer_types: bool) -> list[dict[str, Any]]:
    spark.conf.set("spark.sql.sources.partitionColumnTypeInference.enabled", str(infer_types))
    table = (export / "request_rows").as_posix()
    spark.read.option("basePath", table).parquet(table).createOrReplaceTempView("request_rows")
    return [row.asDict() for row in spark.sql(SPARK_CELLS).collect()]


def test_spark_over_the_export_computes_the_ledger_s_per_cell_statistics(
    spark: Any, export: tuple[Path, list[Path]], cli: CliRun
) -> None:
    folder, sources = export
    target = folder / "export"
    args = [a for s in sources for a in ("--from", str(s))]
    assert cli("export", *args, "--parquet", str(target))[0] == 0
    expected = _ledger_cells(cli, sources)
    # Our own runs (evidence/: two arms, four cells each) and both imported tools are in it.
    assert {(r["campaign_id"], r["arm"]) for r in expected} == {
        ("2026-11-29-simulated-example", "baseline"),
        ("2026-11-29-simulated-example", "candidate"),
        (IMPORTED, "007"),
        (IMPORTED, "010"),
    }
    assert len(expected) == 10
    assert all(r["n"] > 0 and r["e2e_ms_p50"] is not None for r in expected)

    got = _spark_cells(spark, target, infer_types=False)
    assert [list(r) for r in got] == [COLUMNS] * len(got)
    assert len(got) == len(expected)
    for spark_row, ledger_row in zip(got, expected, strict=True):
        for column in COLUMNS:
            value, want = spark_row[column], ledger_row[column]
            if isinstance(want, float) and value is not None:
                # Both interpolate h = (n - 1) * q between the same two order statistics;
                # the two engines round the interpolation differently (p99s differ in the last bit).
                assert value == pytest.approx(want, rel=1e-12, abs=0), (column, ledger_row)
            else:
                assert value == want, (column, ledger_row)

    # The same query over DuckDB reading the export, not the campaigns: the export itself
    # holds what the ledger computed from the artifacts.
    assert _ledger_cells(cli, [target]) == expected


def test_spark_s_partition_type_inference_would_rename_an_arm(
    spark: Any, export: tuple[Path, list[Path]], cli: CliRun
) -> None:
    """Why the documentation tells Spark to read partition values as strings: in an export whose
    arms all look like numbers, "007" is read by default as the integer 7, and its rows no
    longer carry the arm they were run under."""
    folder, sources = export
    target = folder / "export-imported"
    assert cli("export", "--from", str(sources[1]), "--parquet", str(target))[0] == 0
    inferred = {r["arm"] for r in _spark_cells(spark, target, infer_types=True)}
    assert inferred == {7, 10}
    as_strings = {r["arm"] for r in _spark_cells(spark, target, infer_types=False)}
    assert as_strings == set(ARMS)
