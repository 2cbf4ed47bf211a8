"""A history: every series of an evidence root with its segments and change points.

Each series is fitted on its own (:mod:`ledger.history._changepoints`); each step between
two segments becomes a :class:`ChangePoint` that names the campaigns on either side, the
levels, the change and its interval, whether it is a regression (a drop of a throughput,
a rise of a latency), and the identity fields that differ between the two campaigns.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from ledger.history import _changepoints as changepoints
from ledger.history._series import METRICS, Excluded, Point, Reading, Series, read_series

__all__ = ["ChangePoint", "History", "SeriesHistory", "history"]


@attrs.frozen
class ChangePoint:
    """A step in a series."""

    index: int
    """The position of the first point after the step."""
    before: Point
    """The last point before it."""
    after: Point
    """The first point after it."""
    step: changepoints.Step
    regression: bool
    """Whether the step goes the wrong way for its metric."""
    differs: tuple[tuple[str, Any, Any], ...]
    """(field, before, after) of each carried identity field that differs between the
    two points (None: absent)."""


@attrs.frozen
class SeriesHistory:
    """A series with its fit."""

    series: Series
    fit: changepoints.Fit
    levels: tuple[tuple[int, int, float], ...]
    """(start, stop, median) of each segment."""
    change_points: tuple[ChangePoint, ...]

    @property
    def unit(self) -> str:
        """The metric's unit."""
        return METRICS[self.series.metric][0]

    @property
    def better(self) -> str:
        """``higher`` or ``lower``: which way the metric improves."""
        return METRICS[self.series.metric][1]


@attrs.frozen
class History:
    """The history of an evidence root."""

    across: tuple[str, ...]
    campaigns: tuple[tuple[str, str | None], ...]
    """Every campaign read, in time order, with its start."""
    series: tuple[SeriesHistory, ...]
    excluded: tuple[Excluded, ...]
    skipped: tuple[Excluded, ...]

    @property
    def points(self) -> int:
        """Points in every series."""
        return sum(len(s.series.points) for s in self.series)

    @property
    def change_points(self) -> int:
        """Change points in every series."""
        return sum(len(s.change_points) for s in self.series)

    @property
    def regressions(self) -> int:
        """Change points that are regressions."""
        return sum(c.regression for s in self.series for c in s.change_points)


def _seed(series: Series, index: int) -> int:
    """A 32-bit seed from what the series measured and where the step is: the same step
    of the same series gets the same interval on every run."""
    text = json.dumps([series.key, series.metric, index], sort_keys=True, ensure_ascii=False)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")


def _differs(
    before: Mapping[str, Any], after: Mapping[str, Any]
) -> tuple[tuple[str, Any, Any], ...]:
    return tuple(
        (key, before.get(key), after.get(key))
        for key in sorted(set(before) | set(after))
        if before.get(key) != after.get(key)
    )


def fit_series(series: Series) -> SeriesHistory:
    """The segments and change points of one series."""
    values = [p.value for p in series.points]
    fit = changepoints.fit(values)
    bounds = fit.bounds(len(values))
    levels = tuple((start, stop, float(np.median(values[start:stop]))) for start, stop in bounds)
    higher = METRICS[series.metric][1] == "higher"
    found = []
    for (start, at), (_, stop) in itertools.pairwise(bounds):
        step = changepoints.step_of(values[start:at], values[at:stop], seed=_seed(series, at))
        before, after = series.points[at - 1], series.points[at]
        found.append(
            ChangePoint(
                at,
                before,
                after,
                step,
                step.after < step.before if higher else step.after > step.before,
                _differs(before.carried, after.carried),
            )
        )
    return SeriesHistory(series, fit, levels, tuple(found))


def history(root: str | Path, *, across: Sequence[str] = ()) -> History:
    """Verifies ``root``, reads the series of the campaigns that passed and finds their
    change points.

    Raises:
        UsageError: ``root`` is not a folder, holds no campaign, or ``across`` names a
            field that is not a named identity field.
        HistoryError: a campaign that passed verification cannot be read.
    """
    reading: Reading = read_series(root, across=across)
    return History(
        tuple(dict.fromkeys(across)),
        reading.campaigns,
        tuple(fit_series(s) for s in reading.series),
        reading.excluded,
        reading.skipped,
    )
