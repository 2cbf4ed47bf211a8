"""The change-point method of ``ledger history`` on synthetic series (seeded numpy): where
it finds a step, what it leaves alone, the interval of a step, and its optimum against
ruptures' PELT. Precision and recall at scale are measured by
``benchmarks/history_bench.py``."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import ruptures

from ledger.history import _changepoints as changepoints
from ledger.history._changepoints import MIN_SCALE, fit, noise_scale, step_of


def _noisy(levels: list[tuple[int, float]], cv: float, seed: int) -> np.ndarray:
    """Segments of (length, level) under multiplicative noise of that variation."""
    values = np.concatenate([np.full(n, level) for n, level in levels])
    return values * np.exp(np.random.default_rng(seed).normal(0.0, cv, values.size))


@pytest.mark.parametrize("seed", range(5))
def test_a_clear_step_is_found_where_it_is(seed: int) -> None:
    values = _noisy([(20, 100.0), (20, 90.0)], 0.01, seed)
    found = fit(values)
    assert found.breaks == (20,)
    step = step_of(values[:20], values[20:], seed=seed)
    assert step.change_percent == pytest.approx(-10, abs=1.5)
    low, high = step.interval
    assert low < -10 < high


@pytest.mark.parametrize("seed", range(5))
def test_steps_either_way_are_found_in_a_long_series(seed: int) -> None:
    values = _noisy([(15, 100.0), (12, 108.0), (13, 100.0), (10, 95.0)], 0.015, seed)
    assert fit(values).breaks == (15, 27, 40)


def test_no_step_flags_nothing_in_all_but_a_few_series() -> None:
    # The noise scale is estimated from 49 differences: now and then it comes out low
    # enough that noise passes for a step.
    flagged = sum(bool(fit(_noisy([(50, 100.0)], 0.02, seed)).breaks) for seed in range(200))
    assert flagged <= 3


def test_one_outlying_campaign_is_not_a_step() -> None:
    values = _noisy([(30, 100.0)], 0.01, 3)
    values[12] *= 1.2
    assert fit(values).breaks == ()
    # The rule alone: a segment of one point would make it a level of its own.
    assert fit(values, min_segment=1).breaks == (12, 13)


def test_the_penalty_keeps_a_step_within_the_noise_out() -> None:
    values = _noisy([(10, 100.0), (10, 101.0)], 0.01, 1)
    assert fit(values).breaks == ()
    # The rule alone: a cheaper step would take the noise for one.
    assert fit(values, penalty=0.2).breaks != ()


def test_a_steady_series_has_the_smallest_scale_and_no_step_of_a_fraction_of_a_percent() -> None:
    values = [100.0] * 10 + [100.2] * 10
    assert noise_scale(values) == MIN_SCALE
    assert fit(values).breaks == ()
    # The rule alone: at the scale the series shows, a fifth of a percent is a step.
    assert fit(values, min_scale=0.0001).breaks == (10,)
    # Five percent on a series without noise is a step.
    assert fit([100.0] * 10 + [105.0] * 10).breaks == (10,)


def test_the_scale_comes_from_successive_differences_not_from_the_step() -> None:
    values = _noisy([(20, 100.0), (20, 50.0)], 0.02, 2)
    assert noise_scale(values) == pytest.approx(0.02, rel=0.35)


def test_a_series_too_short_for_two_segments_has_no_step() -> None:
    assert fit([100.0, 100.0, 50.0, 50.0, 50.0]).breaks == ()


@pytest.mark.parametrize("values", [[1.0, 0.0, 2.0], [1.0, -1.0], [1.0, math.nan], [math.inf]])
def test_values_that_are_not_positive_and_finite_are_refused(values: list[float]) -> None:
    with pytest.raises(ValueError, match="positive, finite"):
        fit(values)


def _cost(values: np.ndarray, breaks: list[int], scale: float) -> float:
    """The penalised cost of a partition, as the module's docstring defines it."""
    x = np.log(values)
    edges = [0, *breaks, x.size]
    deviations = sum(
        float(np.abs(x[a:b] - np.median(x[a:b])).sum()) for a, b in itertools.pairwise(edges)
    )
    return deviations / (scale / math.sqrt(2)) + changepoints.PENALTY * math.log(x.size) * len(
        breaks
    )


@pytest.mark.parametrize("seed", range(40))
def test_the_fit_is_the_optimum_ruptures_pelt_finds(seed: int) -> None:
    rng = np.random.default_rng(seed)
    levels = [(int(rng.integers(5, 15)), float(rng.uniform(80, 120))) for _ in range(4)]
    values = _noisy(levels, float(rng.uniform(0.01, 0.03)), seed)
    if seed % 4 == 0:
        values[int(rng.integers(0, values.size))] *= 1.15
    ours = fit(values)
    x = np.log(values).reshape(-1, 1)
    pen = changepoints.PENALTY * math.log(x.shape[0]) * ours.scale / math.sqrt(2)
    theirs = ruptures.Pelt(model="l1", min_size=changepoints.MIN_SEGMENT, jump=1)
    found = theirs.fit(x).predict(pen=pen)[:-1]
    # Partitions of equal cost may differ (a median between two points): the cost may not.
    assert _cost(values, list(ours.breaks), ours.scale) == pytest.approx(
        _cost(values, found, ours.scale), rel=1e-9
    )
    edges = [0, *ours.breaks, values.size]
    assert all(b - a >= changepoints.MIN_SEGMENT for a, b in itertools.pairwise(edges))


def test_a_step_interval_is_the_same_for_the_same_seed() -> None:
    before, after = _noisy([(12, 100.0)], 0.02, 1), _noisy([(12, 95.0)], 0.02, 2)
    assert step_of(before, after, seed=7) == step_of(before, after, seed=7)
    assert step_of(before, after, seed=7).interval != step_of(before, after, seed=8).interval
    step = step_of(before, after, seed=7)
    assert step.before == float(np.median(before)) and step.after == float(np.median(after))
    assert step.change_percent == pytest.approx((step.after - step.before) / step.before * 100)


def test_step_intervals_hold_the_true_step_about_95_times_in_100() -> None:
    rng = np.random.default_rng(20261201)
    held = 0
    for trial in range(300):
        change = rng.uniform(-0.2, 0.2)
        n, m = int(rng.integers(8, 25)), int(rng.integers(8, 25))
        cv = rng.uniform(0.01, 0.02)
        before = 100 * np.exp(rng.normal(0, cv, n))
        after = 100 * (1 + change) * np.exp(rng.normal(0, cv, m))
        low, high = step_of(before, after, seed=trial).interval
        held += low <= change * 100 <= high
    assert 0.88 <= held / 300 <= 0.99


def test_a_step_needs_a_value_either_side() -> None:
    with pytest.raises(ValueError, match="either side"):
        step_of([], [1.0], seed=0)


def test_a_segment_of_three_points_is_the_shortest_found() -> None:
    assert changepoints.MIN_SEGMENT == 3
    assert fit([100.0] * 10 + [80.0] * 3).breaks == (10,)
    # Two points after the step are no segment: the last one holds three.
    assert fit([100.0] * 10 + [80.0] * 2).breaks == (9,)


@pytest.mark.parametrize(
    ("metric", "after", "regression"),
    [
        ("decode_tok_s", 90.0, True),
        ("decode_tok_s", 110.0, False),
        ("throughput_tok_s", 90.0, True),
        ("effective_prefill_tok_s", 110.0, False),
        ("ttft_ms", 110.0, True),
        ("ttft_ms", 90.0, False),
        ("e2e_ms", 90.0, False),
        ("e2e_ms", 110.0, True),
    ],
)
def test_a_step_is_a_regression_by_the_metric_s_direction(
    metric: str, after: float, regression: bool
) -> None:
    from ledger.history._history import fit_series
    from ledger.history._series import Point, Series

    values = [100.0] * 10 + [after] * 10
    points = tuple(
        Point(f"2026-10-{i + 1:02d}-c", "a", "cell", None, v, 10, {}) for i, v in enumerate(values)
    )
    (change,) = fit_series(Series({"stage": "s"}, metric, points)).change_points
    assert change.index == 10 and change.regression is regression
