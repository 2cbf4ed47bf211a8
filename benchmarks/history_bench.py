"""Change-point methods for ``ledger history``, measured on synthetic campaign series.

Each series is a metric over 50 campaigns (numpy, seeded): a level of 100 with 0 to 3
steps of 3 to 20 % either way (uniform in size and in number), each at least 8 campaigns
from the next and from either end, under multiplicative noise with a coefficient of
variation drawn from 1 to 2 % per series. One series in four has heavier tails: Student's t
noise with 3 degrees of freedom (scaled to the same variation), and each campaign an
outlier off by 6 to 15 % with probability 0.04 (a campaign on a noisy host, not a step).
A quarter of the series have no step at all: every change point flagged there is false.

Every method is run on every series. A flagged change point matches a true step when it
is within one campaign of it (each step matched once, nearest first); precision is the
matched share of the flagged, recall the matched share of the steps. For every matched
step, the 95 % interval of :func:`ledger.history._changepoints.step_of` over the method's
own segments either side is checked to hold the true change (coverage). Times are the
wall time of the method over every series (best of --repeat), and its ratio to ledger's
method timed in the same run. A second table splits precision, recall and false
positives between the series of normal noise and those with heavy tails.

The candidates: ledger's penalised fit with an absolute-deviation cost; the same fit with
a least-squares cost; ruptures' PELT with its l1 and rbf costs and its binary
segmentation (where ruptures is installed: the test extra; l1 with ledger's penalty, rbf
with a penalty of 2, chosen on this set); E-divisive (energy statistic, recursive
bisection, a permutation test of 99 permutations at p < 0.05; numpy, since neither
MongoDB's signal-processing-algorithms nor Apache Otava installs beside this numpy); and
rolling Mann-Whitney tests (scipy's exact test where scipy is installed, else
a normal approximation: two windows of 8 campaigns either side of each point, the least
p-value below 0.001 taken first, others within a window of it dropped).

    python benchmarks/history_bench.py [--series 400] [--seed 20261201] [--repeat 3]
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from ledger.history import _changepoints as changepoints

FloatArray = npt.NDArray[np.float64]
Method = Callable[[FloatArray], list[int]]

CAMPAIGNS = 50
SPACING = 8
"""Fewest campaigns between two steps, and between a step and either end."""


class Series:
    """One synthetic series and its truth."""

    def __init__(self, values: FloatArray, steps: list[int], changes: list[float], heavy: bool):
        self.values = values
        self.steps = steps
        """The index of the first campaign after each step."""
        self.changes = changes
        """Each step's true change, in percent."""
        self.heavy = heavy


def generate(rng: np.random.Generator, heavy: bool) -> Series:
    cv = rng.uniform(0.01, 0.02)
    wanted = int(rng.integers(0, 4))
    steps: list[int] = []
    while len(steps) < wanted:
        # Rejection until the spacing holds: three steps always fit in 50 campaigns.
        at = int(rng.integers(SPACING, CAMPAIGNS - SPACING + 1))
        if all(abs(at - s) >= SPACING for s in steps):
            steps.append(at)
    steps.sort()
    level = np.full(CAMPAIGNS, 100.0)
    changes = []
    for at in steps:
        change = rng.uniform(0.03, 0.20) * rng.choice([-1.0, 1.0])
        level[at:] *= 1 + change
        changes.append(change * 100)
    if heavy:
        noise = rng.standard_t(3, CAMPAIGNS) / math.sqrt(3) * cv
        outlier = rng.random(CAMPAIGNS) < 0.04
        noise += outlier * rng.choice([-1.0, 1.0], CAMPAIGNS) * rng.uniform(0.06, 0.15, CAMPAIGNS)
    else:
        noise = rng.normal(0.0, cv, CAMPAIGNS)
    return Series(level * np.exp(noise), steps, changes, heavy)


def ledger_fit(values: FloatArray) -> list[int]:
    return list(changepoints.fit(values).breaks)


def least_squares(values: FloatArray) -> list[int]:
    """ledger's fit with the squared deviation from the segment mean as the cost (Gaussian
    noise of the same scale)."""
    x = np.log(values)
    n = x.size
    m = changepoints.MIN_SEGMENT
    variance = changepoints.noise_scale(values) ** 2
    sums = np.concatenate([[0.0], np.cumsum(x)])
    squares = np.concatenate([[0.0], np.cumsum(x * x)])
    beta = changepoints.PENALTY * math.log(n)
    best = np.full(n + 1, np.inf)
    best[0] = -beta
    previous = np.zeros(n + 1, dtype=np.int64)
    for t in range(m, n + 1):
        starts = np.array([0, *range(m, t - m + 1)], dtype=np.int64)
        size = t - starts
        total = sums[t] - sums[starts]
        cost = (squares[t] - squares[starts] - total * total / size) / variance
        pick = int(np.argmin(best[starts] + cost))
        best[t] = best[starts[pick]] + cost[pick] + beta
        previous[t] = starts[pick]
    return changepoints.backtrack(previous, n)


def ruptures_method(kind: str, model: str) -> Method:
    import ruptures

    def run(values: FloatArray) -> list[int]:
        x = np.log(values).reshape(-1, 1)
        scale = changepoints.noise_scale(values)
        # l1 with ledger's penalty in its cost's units (the same optimum as ledger's fit);
        # the kernel cost has units of its own: 2, chosen by hand on this set.
        pen = changepoints.PENALTY * math.log(x.shape[0]) * scale / math.sqrt(2)
        if model == "rbf":
            pen = 2.0
        if kind == "pelt":
            algo = ruptures.Pelt(model=model, min_size=changepoints.MIN_SEGMENT, jump=1)
        else:
            algo = ruptures.Binseg(model=model, min_size=changepoints.MIN_SEGMENT, jump=1)
        found: list[int] = algo.fit(x).predict(pen=pen)
        return found[:-1]

    return run


def _energy(x: FloatArray, m: int) -> tuple[float, int]:
    """The largest E-divisive statistic over the splits of ``x`` (alpha 1), and where."""
    n = x.size
    distance = np.abs(x[:, None] - x[None, :])
    c = np.zeros((n + 1, n + 1))
    c[1:, 1:] = distance.cumsum(0).cumsum(1)
    t = np.arange(m, n - m + 1)
    left, right = t, n - t
    between = (c[t, n] - c[t, t]) / (left * right)
    within_left = c[t, t] / (left * (left - 1))
    within_right = (c[n, n] - c[t, n] - c[n, t] + c[t, t]) / (right * (right - 1))
    q = left * right / n * (2 * between - within_left - within_right)
    pick = int(np.argmax(q))
    return float(q[pick]), int(t[pick])


def e_divisive(permutations: int = 99, alpha: float = 0.05, m: int = 4) -> Method:
    def run(values: FloatArray) -> list[int]:
        x = np.log(values)
        rng = np.random.RandomState(0)
        segments = [(0, x.size)]
        breaks: list[int] = []
        while True:
            candidates = [(*_energy(x[a:b], m), a, b) for a, b in segments if b - a >= 2 * m]
            if not candidates:
                break
            q, at, a, b = max(candidates)
            part = x[a:b]
            exceed = sum(_energy(rng.permutation(part), m)[0] >= q for _ in range(permutations))
            if (exceed + 1) / (permutations + 1) > alpha:
                break
            breaks.append(a + at)
            segments.remove((a, b))
            segments += [(a, a + at), (a + at, b)]
        return sorted(breaks)

    return run


def rolling_mann_whitney(window: int = 8, alpha: float = 0.001) -> Method:
    try:
        from scipy.stats import mannwhitneyu
    except ImportError:
        mannwhitneyu = None

    def p_value(a: FloatArray, b: FloatArray) -> float:
        if mannwhitneyu is not None:
            return float(mannwhitneyu(a, b, alternative="two-sided").pvalue)
        u = float((a[:, None] > b[None, :]).sum())
        mean = a.size * b.size / 2
        sd = math.sqrt(a.size * b.size * (a.size + b.size + 1) / 12)
        return math.erfc(max(abs(u - mean) - 0.5, 0) / sd / math.sqrt(2))

    def run(values: FloatArray) -> list[int]:
        n = values.size
        p = np.ones(n)
        for i in range(window, n - window + 1):
            p[i] = p_value(values[i - window : i], values[i : i + window])
        breaks: list[int] = []
        for i in np.argsort(p, kind="stable"):
            if p[i] >= alpha:
                break
            if all(abs(int(i) - b) >= window for b in breaks):
                breaks.append(int(i))
        return sorted(breaks)

    return run


class Score:
    def __init__(self) -> None:
        self.flagged = self.matched = self.steps = 0
        self.false_on_flat = 0
        self.covered = 0


def _match(found: Sequence[int], truth: Sequence[int]) -> dict[int, int]:
    """true index -> the flagged one matched to it (within one campaign, nearest first)."""
    pairs = sorted((abs(f - t), t, f) for t in truth for f in found if abs(f - t) <= 1)
    matched: dict[int, int] = {}
    used: set[int] = set()
    for _, t, f in pairs:
        if t not in matched and f not in used:
            matched[t] = f
            used.add(f)
    return matched


def run(method: Method, series: Sequence[Series], repeat: int) -> tuple[list[list[int]], float]:
    """What the method flags on each series, and its wall time over all of them (the best
    of ``repeat`` runs)."""
    best = math.inf
    for _ in range(repeat):
        started = time.perf_counter()
        found = [method(s.values) for s in series]
        best = min(best, time.perf_counter() - started)
    return found, best


def score(series: Sequence[Series], found: Sequence[list[int]]) -> Score:
    result = Score()
    for s, flagged in zip(series, found, strict=True):
        matched = _match(flagged, s.steps)
        result.flagged += len(flagged)
        result.matched += len(matched)
        result.steps += len(s.steps)
        if not s.steps:
            result.false_on_flat += len(flagged)
        edges = [0, *flagged, s.values.size]
        for at, change in zip(s.steps, s.changes, strict=True):
            if at not in matched:
                continue
            k = edges.index(matched[at])
            step = changepoints.step_of(
                s.values[edges[k - 1] : edges[k]], s.values[edges[k] : edges[k + 1]], seed=at
            )
            low, high = step.interval
            result.covered += low <= change <= high
    return result


def _rates(result: Score) -> tuple[float, float]:
    precision = result.matched / result.flagged if result.flagged else 1.0
    recall = result.matched / result.steps if result.steps else 1.0
    return precision, recall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=400, help="synthetic series")
    parser.add_argument("--seed", type=int, default=20261201, help="numpy seed")
    parser.add_argument("--repeat", type=int, default=3, help="runs per timing; the best counts")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    series = [generate(rng, heavy=i % 4 == 3) for i in range(args.series)]
    flat = sum(1 for s in series if not s.steps)
    steps = sum(len(s.steps) for s in series)
    methods: list[tuple[str, Method]] = [
        ("ledger: penalised fit, absolute deviation (numpy)", ledger_fit),
        ("penalised fit, least squares (numpy)", least_squares),
    ]
    try:
        import ruptures  # noqa: F401
    except ImportError:
        print("ruptures is not installed (pip install -e '.[test]'): its rows are left out")
    else:
        methods += [
            ("ruptures PELT, l1 cost", ruptures_method("pelt", "l1")),
            ("ruptures PELT, rbf cost", ruptures_method("pelt", "rbf")),
            ("ruptures binary segmentation, l1 cost", ruptures_method("binseg", "l1")),
        ]
    methods += [
        ("E-divisive, permutation test (numpy)", e_divisive()),
        ("rolling Mann-Whitney, 8 either side", rolling_mann_whitney()),
    ]
    print(
        f"{len(series)} series of {CAMPAIGNS} campaigns, {steps} steps, {flat} series with "
        f"none; seed {args.seed}"
    )
    print()
    print(
        "| method | precision | recall | false positives on the series without a step | "
        "95 % interval holds the true step | time | vs ledger |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    reference = None
    by_kind = []
    for name, method in methods:
        found, seconds = run(method, series, args.repeat)
        reference = reference or seconds
        result = score(series, found)
        precision, recall = _rates(result)
        coverage = result.covered / result.matched if result.matched else 0.0
        print(
            f"| {name} | {precision:.3f} | {recall:.3f} | {result.false_on_flat} on {flat} | "
            f"{coverage:.3f} | {seconds:.2f} s | {seconds / reference:.2f}x |",
            flush=True,
        )
        kinds = []
        for heavy in (False, True):
            chosen = [i for i, s in enumerate(series) if s.heavy == heavy]
            part = score([series[i] for i in chosen], [found[i] for i in chosen])
            kinds.append((*_rates(part), part.false_on_flat))
        by_kind.append((name, kinds))
    flats = [sum(1 for s in series if s.heavy == heavy and not s.steps) for heavy in (False, True)]
    print()
    print(
        "| method | normal noise: precision | recall | false positives | heavy tails: "
        "precision | recall | false positives |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, kinds in by_kind:
        cells = [
            f"{p:.3f} | {r:.3f} | {fp} on {n}" for (p, r, fp), n in zip(kinds, flats, strict=True)
        ]
        print(f"| {name} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
