"""A percentile is stated only where the cell's requests bound it (ledger/measures/percentiles.py):
the rule, and each place that states percentiles following it."""

from __future__ import annotations

from typing import Any

import pytest

from ledger.derivation import goodput
from ledger.measures import percentiles
from ledger.measures.serving import Distribution, ServingSummary
from runners.bench.summary import summary_block


@pytest.mark.parametrize(("q", "needed"), [(0.5, 6), (0.9, 29), (0.95, 59), (0.99, 299)])
def test_the_fewest_requests_that_bound_each_percentile(q: float, needed: int) -> None:
    assert percentiles.min_samples(q) == needed

    # The chance that the smallest and largest of n values hold the q-quantile between them.
    def bracketed(n: int) -> float:
        return 1 - q**n - (1 - q) ** n

    assert bracketed(needed) >= 0.95 > bracketed(needed - 1)
    assert percentiles.supported(q, needed) and not percentiles.supported(q, needed - 1)
    assert not percentiles.supported(q, None)


def test_a_stricter_confidence_needs_more() -> None:
    assert percentiles.min_samples(0.99, 0.99) == 459
    assert percentiles.min_samples(0.999) == 2995


@pytest.mark.parametrize(("q", "confidence"), [(0, 0.95), (1, 0.95), (0.99, 1.0), (0.5, 0)])
def test_a_quantile_or_confidence_out_of_range_is_refused(q: float, confidence: float) -> None:
    with pytest.raises(ValueError, match="between 0 and 1"):
        percentiles.min_samples(q, confidence)


def test_names_and_the_sentence_in_place_of_a_number() -> None:
    assert [percentiles.name_of(q) for q in (0.5, 0.9, 0.99, 0.999)] == [
        "p50", "p90", "p99", "p99.9"
    ]  # fmt: skip
    assert percentiles.too_few(0.99) == "too few requests for p99"


def _load_row(requests: int, succeeded: int) -> dict[str, Any]:
    figures = {f"{m}_{p}_ms": 10.0 for m in ("ttft", "tpot", "e2e") for p in ("p50", "p99")}
    return {
        "cell": "ctx64-r2-nothink", "rate": 2.0, "requests": requests, "good": succeeded,
        "succeeded": succeeded, "achieved_rate_rps": 2.0, "lateness_p99_ms": 0.5, **figures,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("requests", "succeeded", "stated"),
    [
        (299, 299, {"p50", "p99", "lateness"}),
        (299, 298, {"p50", "lateness"}),
        (298, 298, {"p50"}),
        (10, 5, set()),
        (10, 6, {"p50"}),
    ],
)
def test_a_load_row_states_the_percentiles_its_requests_support(
    requests: int, succeeded: int, stated: set[str]
) -> None:
    slo = {"e2e_ms": 100.0, "percentile": 99.0}
    summary = goodput.stage_summary(
        [_load_row(requests, succeeded)], slo, campaign="c", arm="a", stage="load/nothink"
    )
    (row,) = summary["rows"]
    assert row["succeeded"] == succeeded
    for metric in ("ttft", "tpot", "e2e"):
        for p in ("p50", "p99"):
            assert (row[f"{metric}_{p}_ms"] is not None) == (p in stated)
    assert (row["lateness_p99_ms"] is not None) == ("lateness" in stated)
    # Derived again as before the rule (a comparison without ``inference``): every figure.
    before = goodput.stage_summary(
        [_load_row(requests, succeeded)], slo, campaign="c", arm="a", stage="load/nothink",
        supported_only=False,
    )["rows"][0]  # fmt: skip
    assert "succeeded" not in before and before["e2e_p99_ms"] == 10.0


def _summary(completed: int) -> ServingSummary:
    ttft = Distribution(completed, 10.0, 9.5, 1.0, ((50.0, 9.5), (90.0, 11.25), (99.0, 12.5)))
    return ServingSummary(completed, 0, 1.0, 100, 100, 1.0, 1.0, 2.0, {"ttft": ttft, "tpot": None})


def test_the_bench_summary_names_a_percentile_it_cannot_state() -> None:
    few = summary_block(_summary(30), concurrency=None, metrics=("ttft",))
    assert "P50 TTFT (ms):                           9.50\n" in few
    assert "P90 TTFT (ms):                           11.25\n" in few
    assert "P99 TTFT (ms):                           too few requests for p99\n" in few
    many = summary_block(_summary(299), concurrency=None, metrics=("ttft",))
    assert "P99 TTFT (ms):                           12.50\n" in many


def test_a_percentile_is_shown_or_named() -> None:
    assert percentiles.stated(0.99, 299, "12.50") == "12.50"
    assert percentiles.stated(0.99, 298, "12.50") == "too few requests for p99"
    assert percentiles.stated(0.5, None, "3.00") == "too few requests for p50"
