"""``ledger bench``: one endpoint measured with the flags of vLLM's ``bench serve``, written
as a sealed raw campaign of one arm and one stage, summarised as vLLM summarises a run, and
optionally saved in vLLM's detailed result format (:mod:`~runners.bench.result`).
"""

from __future__ import annotations

from runners.bench.flags import BenchSettings, bench_plan
from runners.bench.result import vllm_result
from runners.bench.summary import summary_block

__all__ = [
    "BenchSettings",
    "bench_plan",
    "summary_block",
    "vllm_result",
]
