"""A bench run in vLLM's detailed result format (``bench serve --save-result
--save-detailed``): its keys, its units (per-request times in seconds, aggregates in ms)
and its per-request arrays, so that ``ledger import vllm`` and vLLM's own readers take it.

Beside vLLM's arrays it writes ``e2els``, each request's end-to-end seconds (SGLang's
name): vLLM ends a request at its last content chunk, the ledger at the end of the stream,
and a reader recomputing the end-to-end figures from ttfts and itls alone would otherwise
disagree with the stated ones by the time the usage chunk and ``[DONE]`` took.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Iterable
from typing import Any

from ledger.measures.serving import METRICS, ServingSummary
from ledger.measures.serving import chunk_gaps_ms as gaps_ms
from runners.bench.flags import COMPLETIONS_ENDPOINT, BenchSettings
from runners.bench.summary import percentile_name


def _arrays(records: Iterable[dict[str, Any]]) -> dict[str, list[Any]]:
    arrays: dict[str, list[Any]] = {
        key: [] for key in ("input_lens", "output_lens", "ttfts", "itls", "e2els", "errors")
    }
    arrays["start_times"] = []
    for record in records:
        if record.get("warmup"):
            continue
        usage = record.get("usage") or {}
        sent, first, end = record["sent_ns"], record.get("first_token_ns"), record.get("end_ns")
        error = record.get("error")
        ok = error is None and first is not None and end is not None
        arrays["input_lens"].append(usage.get("prompt_tokens") or 0)
        arrays["output_lens"].append((usage.get("completion_tokens") or 0) if ok else 0)
        arrays["ttfts"].append((first - sent) / 1e9 if ok else 0.0)
        arrays["itls"].append([gap / 1e3 for gap in gaps_ms(record)] if ok else [])
        arrays["e2els"].append((end - sent) / 1e9 if ok else 0.0)
        arrays["errors"].append("" if ok else _error_text(error))
        arrays["start_times"].append(sent / 1e9)
    return arrays


def _error_text(error: Any) -> str:
    if not isinstance(error, dict):
        return "no first token"
    return f"{error.get('class')}: {error.get('message')}"


def vllm_result(
    settings: BenchSettings,
    summary: ServingSummary,
    records: Iterable[dict[str, Any]],
    *,
    started: datetime.datetime,
) -> dict[str, Any]:
    """The result document of one bench run."""
    rate: float | str = "inf" if math.isinf(settings.request_rate) else settings.request_rate
    backend = "openai" if settings.endpoint == COMPLETIONS_ENDPOINT else "openai-chat"
    result: dict[str, Any] = {
        "date": started.strftime("%Y%m%d-%H%M%S"),
        # vLLM's names of the two APIs: "openai" streams completions.
        "endpoint_type": backend,
        "backend": backend,
        "label": settings.arm,
        "model_id": settings.model,
        "tokenizer_id": settings.model,
        "num_prompts": settings.num_prompts,
        "request_rate": rate,
        "burstiness": settings.burstiness,
        "max_concurrency": settings.max_concurrency,
        "dataset_name": settings.dataset_name,
        "seed": settings.seed,
        "duration": summary.duration_s,
        "completed": summary.completed,
        "failed": summary.failed,
        "total_input_tokens": summary.total_input_tokens,
        "total_output_tokens": summary.total_output_tokens,
        "request_throughput": summary.request_throughput,
        "request_goodput": None,
        "output_throughput": summary.output_throughput,
        "total_token_throughput": summary.total_token_throughput,
    }
    if settings.dataset_name == "random":
        result |= {
            "random_input_len": settings.input_len,
            "random_output_len": settings.output_len,
            "random_range_ratio": settings.range_ratio,
        }
    else:
        result["sharegpt_output_len"] = settings.sharegpt_output_len
    result |= _arrays(records)
    for name in METRICS:
        dist = summary.metrics[name]
        if name not in settings.percentile_metrics or dist is None:
            continue
        result[f"mean_{name}_ms"] = dist.mean
        result[f"median_{name}_ms"] = dist.median
        result[f"std_{name}_ms"] = dist.std
        for p, value in dist.percentiles:
            result[f"p{percentile_name(p)}_{name}_ms"] = value
    return result
