"""Goodput under latency objectives, and the largest rate a deployment sustains at them.

An SLO names thresholds (``ttft_ms``, ``tpot_ms``, ``e2e_ms``, any of them) and a
``percentile``. A measured request of an open-loop cell is good when it succeeded and meets
every threshold, its latencies taken from when it was due (as the user saw them: a request
the client held back waited too); time per output token is the decode gap,
(last token - first token) / (completion tokens - 1), and a one-token answer has none to
miss. A cell's good fraction is good / measured; its goodput, the good fraction of the
rate it achieved (good requests per second; never above the achieved rate).

The sustainable rate of an arm's load stage is the largest rate at which the good fraction
is at or above ``percentile`` / 100 there and at every lower rate; none when the lowest
rate misses. Its interval: a resample of a cell's requests draws its good count from a
binomial of the cell's size and fraction (all a fraction depends on), every cell at once,
the sustainable rate found in each of the 2,000 resamples, and the 2.5th and 97.5th
percentiles taken at rates the stage ran (0 for none). Draws come from numpy's legacy
``RandomState`` seeded by the campaign, arm and stage, so verify derives the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ledger.database import sql
from ledger.derivation import _bootstrap as bootstrap
from ledger.measures import percentiles
from ledger.measures.arrivals import LATE_THRESHOLD_MS

__all__ = [
    "SLO_KEYS",
    "cell_query",
    "check_slo",
    "parse_slo",
    "seed_of",
    "stage_summary",
    "sustainable",
    "sustainable_interval",
    "sustained_text",
]

SLO_KEYS = ("ttft_ms", "tpot_ms", "e2e_ms")


def check_slo(stated: dict[str, Any]) -> dict[str, float]:
    """An SLO given as a mapping (a plan's ``[slo]`` table, a derivation's record).

    Raises:
        ValueError: an unknown key, a value that is not a positive number, no threshold,
            or a percentile outside (0, 100]; the message names the key.
    """
    slo: dict[str, float] = {}
    for key, value in stated.items():
        if key not in (*SLO_KEYS, "percentile"):
            raise ValueError(f"{key}: unknown key (expected {', '.join(SLO_KEYS)}, percentile)")
        if isinstance(value, bool) or not isinstance(value, int | float):
            # One error type for every invalid SLO, whatever made it so.
            raise ValueError(f"{key}: expected a number, got {value!r}")  # noqa: TRY004
        if not 0 < value < float("inf"):
            raise ValueError(f"{key}: must be a positive, finite number, got {value!r}")
        if key == "percentile" and value > 100:
            # Said before a missing threshold: it is what the user typed.
            raise ValueError(f"percentile: must be at most 100, got {value!r}")
        slo[key] = float(value)
    if not any(k in slo for k in SLO_KEYS):
        raise ValueError(f"an SLO needs at least one of {', '.join(SLO_KEYS)}")
    slo.setdefault("percentile", 99.0)
    return slo


def parse_slo(text: str) -> dict[str, float]:
    """``ttft_ms=500,e2e_ms=5000,percentile=99`` as a mapping, checked as :func:`check_slo`.

    Raises:
        ValueError: a part that is not KEY=NUMBER with a known key, a key given twice, or
            what :func:`check_slo` refuses.
    """
    stated: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        key, sep, value = part.partition("=")
        if not sep or key not in (*SLO_KEYS, "percentile"):
            raise ValueError(
                f"{part!r}: expected KEY=NUMBER with KEY one of {', '.join(SLO_KEYS)}, percentile"
            )
        if key in stated:
            raise ValueError(f"{key} is given twice")
        try:
            stated[key] = float(value)
        except ValueError:
            raise ValueError(f"{part!r}: {value!r} is not a number") from None
    return check_slo(stated)


def cell_query(slo: dict[str, float]) -> str:
    """Per (arm, stage, cell) of one campaign's two arms (parameters: campaign, the two
    arms): measured and good requests, the span, and latency percentiles from the due time.
    Open-loop cells only: their requests carry due times."""
    conditions = ["ok"]
    columns = {
        "ttft_ms": "ttft_from_schedule_ms",
        "tpot_ms": "tpot_ms",
        "e2e_ms": "e2e_from_schedule_ms",
    }
    for key, column in columns.items():
        if key in slo:
            # A one-token answer has no decode gap: nothing to miss.
            missing = "true" if key == "tpot_ms" else "false"
            conditions.append(f"coalesce({column} <= {float(slo[key])!r}, {missing})")
    good = " AND ".join(conditions)
    measured = "FILTER (WHERE ok)"
    percentiles = ", ".join(
        f"quantile_cont({column}, {q}) {measured} AS {key.removesuffix('_ms')}_p{round(q * 100)}_ms"
        for key, column in columns.items()
        for q in (0.5, 0.99)
    )
    return f"""
        SELECT arm, stage, cell, count(*) AS requests, count(*) FILTER (WHERE {good}) AS good,
               count(*) FILTER (WHERE ok) AS succeeded,
               (count(*) - 1) / nullif((max(sent_ns) - min(sent_ns)) / 1e9, 0)
                   AS achieved_rate_rps,
               quantile_cont(lateness_ms, 0.99) AS lateness_p99_ms,
               {percentiles}
        FROM (
            SELECT *, {sql.SCHEDULED}, 1000 / decode_tok_s AS tpot_ms
            FROM request_rows
            WHERE campaign_id = ? AND arm IN (?, ?) AND NOT warmup AND scheduled_ns IS NOT NULL
        )
        GROUP BY arm, stage, cell
    """


def sustainable(rates: list[float], fractions: list[float], target: float) -> float | None:
    """The largest rate whose fraction, and every lower rate's, is at or above ``target``."""
    found = None
    for rate, fraction in sorted(zip(rates, fractions, strict=True), key=lambda p: p[0]):
        if fraction < target:
            break
        found = rate
    return found


def sustainable_interval(
    rates: list[float], sizes: list[int], good: list[int], target: float, *, seed: int
) -> list[float] | None:
    """The 95 % bootstrap interval of :func:`sustainable`, at rates the stage ran (0 for
    none); None when a cell has no measured request."""
    if not sizes or min(sizes) == 0:
        return None
    order = sorted(range(len(rates)), key=lambda i: rates[i])
    ordered = np.array([rates[i] for i in order])
    n = np.array([sizes[i] for i in order], dtype=np.int64)
    p = np.array([good[i] / sizes[i] for i in order])
    rng = np.random.RandomState(seed)
    draws = rng.binomial(n, p, size=(bootstrap.RESAMPLES, len(n))) / n
    meets = draws >= target
    # The first cell (by rate) that misses ends the run of rates sustained.
    first_miss = np.where(meets.all(axis=1), len(n), np.argmin(meets, axis=1))
    values = np.where(first_miss > 0, ordered[np.maximum(first_miss - 1, 0)], 0.0)
    low = float(np.percentile(values, 2.5, method="lower"))
    high = float(np.percentile(values, 97.5, method="higher"))
    return [low, high]


def sustained_text(side: dict[str, Any], number: Callable[[float], str]) -> str:
    """What an arm's side of a load stage sustains at the SLO, in words: "at least" when it
    is the highest rate the arm ran (nothing higher was tried, so that is a lower bound)."""
    rate, interval = side["sustainable_rate_rps"], side["sustainable_rate_ci95"]
    if rate is None:
        text = "none of its rates"
    elif rate >= max(row["rate"] for row in side["rows"]):
        text = f"at least {number(rate)} req/s, the highest rate it ran"
    else:
        text = f"{number(rate)} req/s"
    if interval is not None:
        text += f" (95 % interval {number(interval[0])} to {number(interval[1])})"
    return text


def seed_of(campaign: str, arm: str, stage: str) -> int:
    """The interval's seed: stable across runs and machines."""
    return bootstrap.seed_for(campaign, arm, stage, "sustainable-rate")


def stage_summary(
    rows: list[dict[str, Any]],
    slo: dict[str, float],
    *,
    campaign: str,
    arm: str,
    stage: str,
    supported_only: bool = True,
) -> dict[str, Any]:
    """One arm's load stage: its rows by rate with goodput, and the sustainable rate.

    ``supported_only``: a latency percentile is stated only where the cell's successful
    requests support it (the lateness p99 where its requests do), null elsewhere, and each
    row states how many succeeded (``ledger/measures/percentiles.py``); false states them
    all, as ledger did before."""
    target = slo["percentile"] / 100
    rows = sorted(rows, key=lambda r: r["rate"])
    out_rows = []
    for row in rows:
        requests, good = int(row["requests"]), int(row["good"])
        out_rows.append(
            {
                "cell": row["cell"],
                "rate": row["rate"],
                "requests": requests,
                "good": good,
                "good_fraction": good / requests if requests else None,
                "goodput_rps": None
                if requests == 0 or row["achieved_rate_rps"] is None
                else row["achieved_rate_rps"] * good / requests,
                "achieved_rate_rps": row["achieved_rate_rps"],
                "lateness_p99_ms": row["lateness_p99_ms"],
                "limited_by_client": row["lateness_p99_ms"] is not None
                and row["lateness_p99_ms"] > LATE_THRESHOLD_MS,
                **{
                    f"{name}_{p}_ms": row[f"{name}_{p}_ms"]
                    for name in ("ttft", "tpot", "e2e")
                    for p in ("p50", "p99")
                },
            }
        )
        if supported_only:
            _supported(out_rows[-1], int(row["succeeded"]))
    rates = [r["rate"] for r in out_rows]
    fractions = [r["good_fraction"] or 0.0 for r in out_rows]
    return {
        "rows": out_rows,
        "sustainable_rate_rps": sustainable(rates, fractions, target),
        "sustainable_rate_ci95": sustainable_interval(
            rates,
            [r["requests"] for r in out_rows],
            [r["good"] for r in out_rows],
            target,
            seed=seed_of(campaign, arm, stage),
        ),
    }


def _supported(row: dict[str, Any], succeeded: int) -> None:
    """Nulls the percentiles a load row's requests cannot support, in place."""
    row["succeeded"] = succeeded
    for key in list(row):
        quantile = _QUANTILES.get(key.rsplit("_", 2)[-2]) if key.endswith("_ms") else None
        if quantile is None:
            continue
        count = row["requests"] if key.startswith("lateness_") else succeeded
        if not percentiles.supported(quantile, count):
            row[key] = None


_QUANTILES = {"p50": 0.5, "p99": 0.99}
