"""``ledger run``: a plan's arms x stages x cells, written as a raw campaign folder, with its
progress (:mod:`~runners.campaign.progress`) and the cell statistics of its table.
"""

from __future__ import annotations

from runners.campaign import progress
from runners.campaign._campaign import CampaignRun, RunResult, run_plan
from runners.campaign._cells import CellOutcome
from runners.campaign._shortfall import success_shortfall

__all__ = [
    "CampaignRun",
    "CellOutcome",
    "RunResult",
    "progress",
    "run_plan",
    "success_shortfall",
]
