"""What an A/B change means against the noise of the setup: verdicts, noise floors and the
smallest change a comparison can detect.

A bootstrap interval resamples the requests of one run: it knows the request-to-request
noise, not the run-to-run noise (a server restarted, a cache warmed differently, a
neighbour on the host). An A/A control measures the second: the same arm run again
(``repeat_of`` in a plan) and compared with the baseline like any candidate. Its change is
what two runs of one configuration differ by.

- The **noise floor** of a metric in a cell is the farthest edge from zero of the A/A
  change's 95 % interval: the largest change a repeat of the baseline is consistent with.
- A change is **detected** when its own 95 % interval excludes zero and, where an A/A
  control was run, its size exceeds the noise floor. A change not detected reads "no
  difference detected", whichever way it points; a detected one is an improvement or a
  regression by the metric's direction (throughputs up, latencies down).
- The **minimum detectable effect** (MDE) is the change that test detects with 80 %
  power: the noise floor (without a control, 1.96 standard errors) plus 0.84 standard
  errors of the comparison's own change, the standard error read from its interval
  (half its width over 1.96).

``benchmarks/ab_power.py`` measures the false-alarm rate and the power of these rules on
A/A and slowed campaigns (docs/guides/derive.md).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "HIGHER_IS_BETTER",
    "LEVEL",
    "POWER",
    "VERDICTS",
    "detectable",
    "judged",
    "noise_floor",
    "verdict",
    "verdict_lines",
]

LEVEL = 0.95
"""The confidence of every interval and test."""
POWER = 0.8
"""The probability of detecting a change of the minimum detectable effect."""
Z_LEVEL = 1.959963984540054
"""The standard normal quantile of 1 - (1 - LEVEL) / 2."""
Z_POWER = 0.8416212335729143
"""The standard normal quantile of POWER."""
HIGHER_IS_BETTER = frozenset({"decode_tok_s_p50", "effective_prefill_tok_s_p50"})
"""Metrics where a rise is an improvement; for the others (latencies) a fall is."""
VERDICTS = ("improvement", "regression", "no difference detected", "descriptive")
"""What a metric's change reads; ``descriptive`` where it has no interval."""


def noise_floor(aa_interval: list[float] | tuple[float, float] | None) -> float | None:
    """The noise floor from an A/A change's interval, in percent (None without one)."""
    if aa_interval is None:
        return None
    return max(abs(aa_interval[0]), abs(aa_interval[1]))


def detectable(
    interval: list[float] | tuple[float, float] | None, floor: float | None
) -> float | None:
    """The minimum detectable effect, in percent, of a change with ``interval``."""
    if interval is None:
        return None
    error = (interval[1] - interval[0]) / (2 * Z_LEVEL)
    threshold = floor if floor is not None else Z_LEVEL * error
    return threshold + Z_POWER * error


def verdict(
    metric: str,
    change: float | None,
    interval: list[float] | tuple[float, float] | None,
    floor: float | None,
) -> str:
    """What the change of ``metric`` reads (one of :data:`VERDICTS`)."""
    if change is None or interval is None:
        return "descriptive"
    excludes_zero = interval[0] > 0 or interval[1] < 0
    if not excludes_zero or (floor is not None and abs(change) <= floor):
        return "no difference detected"
    better = (change > 0) == (metric in HIGHER_IS_BETTER)
    return "improvement" if better else "regression"


def judged(
    metric: str, entry: dict[str, Any], aa_entry: dict[str, Any] | None, controlled: bool
) -> dict[str, Any]:
    """A comparison's metric entry with its verdict and MDE; with a control (``controlled``)
    also the A/A change, its interval and the noise floor (None where the control's cell
    has no interval for it)."""
    interval = entry.get("change_ci95")
    out = dict(entry)
    floor = None
    if controlled:
        aa_interval = aa_entry.get("change_ci95") if aa_entry else None
        floor = noise_floor(aa_interval)
        out["aa_change_percent"] = aa_entry.get("change_percent") if aa_entry else None
        out["aa_change_ci95"] = aa_interval
        out["noise_floor_percent"] = floor
    out["mde_percent"] = detectable(interval, floor)
    out["verdict"] = verdict(metric, entry.get("change_percent"), interval, floor)
    return out


def verdict_lines(document: dict[str, Any]) -> list[str]:
    """What ``ledger derive`` prints of a comparison's verdicts: its control, then one line
    per row with each median's verdict, change and (with a control) noise floor."""
    lines = []
    stated = document.get("calibration")
    if isinstance(stated, dict):
        usable = "matched" if stated.get("matched") else "not matched: no noise floor"
        lines.append(f"  A/A control: {stated.get('control')} ({usable})")
    for row in document.get("rows") or ():
        said = []
        for metric, entry in sorted((row.get("metrics") or {}).items()):
            if "verdict" not in entry:
                continue
            change = entry.get("change_percent")
            text = f"{metric} {entry['verdict']}"
            if change is not None:
                text += f" {change:+.1f}%"
            floor = entry.get("noise_floor_percent")
            if floor is not None:
                text += f" (noise floor {floor:.1f}%)"
            said.append(text)
        if said:
            lines.append(f"  {row['stage']}/{row['cell']}: " + ", ".join(said))
    return lines
