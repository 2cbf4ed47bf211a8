"""Whether a run's workload cells measured anything: a cell whose successful measured
requests fall short of its stage's ``min_success`` (1 unless the plan says otherwise) makes
the run fail, although every request was recorded. Its failed requests stay evidence, and
the raw campaign is written and sealed either way; what this decides is the exit status,
and the one line that says why."""

from __future__ import annotations

from collections.abc import Iterable

from runners.campaign._cells import CellOutcome


def success_shortfall(outcomes: Iterable[CellOutcome]) -> str | None:
    """One line naming the first cell, in the order the run ended them, whose successful
    measured requests (warm-ups aside) fell short of its ``min_success``: its arm, stage and
    cell, how many succeeded, its first error, and how many other cells fell short. None
    when every cell met its minimum.

    Complete cells are judged, those this run measured and those it kept from an earlier
    one (``skipped``, read back from their parts): a resumed run that measured nothing new
    says the same as the run before it. An interrupted one (``incomplete``) is the
    interruption's to report.
    """
    short = [
        outcome
        for outcome in outcomes
        if outcome.status in ("complete", "skipped")
        and outcome.stats is not None
        and outcome.stats.requests - outcome.stats.failed < outcome.min_success
    ]
    if not short:
        return None
    first = short[0]
    assert first.stats is not None
    succeeded = first.stats.requests - first.stats.failed
    said = f"{succeeded} of {first.stats.requests} requests succeeded"
    if succeeded:
        said += f", fewer than the stage's min_success of {first.min_success}"
    line = f'arm "{first.arm}", stage "{first.stage}", cell "{first.cell}": {said}'
    if len(short) > 1:
        others = len(short) - 1
        line += f" ({others} more cell{'s' if others > 1 else ''} fell short)"
    if first.first_error is not None:
        line += f"; first error: {first.first_error}"
    return line
