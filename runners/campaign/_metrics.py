"""Prometheus ``/metrics`` scraping, so prefix-cache reuse is measured, not assumed.

Only counters are kept (and gauges whose name mentions a cache), keyed by the sample's
name and sorted labels. The prefix-cache families of vLLM and SGLang are recognised and
their before/after difference is recorded with the family it came from; so is llama.cpp's,
whose prompt counter leaves out the tokens it took from the cache.
"""

from __future__ import annotations

import math
import re
from typing import Any

from runners.client import EndpointClient

PREFIX_CACHE_FAMILIES = (
    ("vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total", True),
    ("vllm:gpu_prefix_cache_hits_total", "vllm:gpu_prefix_cache_queries_total", True),
    ("sglang:cached_tokens_total", "sglang:prompt_tokens_total", True),
    ("llamacpp:prompt_tokens_cached_total", "llamacpp:prompt_tokens_total", False),
)
"""(hits, prompt tokens, whether the prompt counter includes the hits) by server, in tokens."""

_SAMPLE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)(?:\s+\S+)?$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
MAX_SAMPLES = 5000


def _labels(text: str) -> str | None:
    inner = text[1:-1]
    pairs = []
    pos = 0
    while pos < len(inner):
        match = _LABEL.match(inner, pos)
        if match is None:
            return None
        pairs.append(f'{match.group(1)}="{match.group(2)}"')
        pos = match.end()
    return "{" + ",".join(sorted(pairs)) + "}" if pairs else ""


def parse_counters(text: str) -> dict[str, float]:
    """Counter samples (and cache gauges) of a Prometheus text exposition."""
    types: dict[str, str] = {}
    samples: dict[str, float] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split()
            if len(parts) >= 4 and parts[1] == "TYPE":
                types[parts[2]] = parts[3]
            continue
        match = _SAMPLE.match(line)
        if match is None:
            continue
        name, labels, raw = match.groups()
        if name.endswith("_created"):
            continue
        family = name.removesuffix("_total")
        kind = types.get(name) or types.get(family)
        if not (kind == "counter" or (kind is None and name.endswith("_total")) or "cache" in name):
            continue
        if kind in ("histogram", "summary"):
            continue
        try:
            value = float(raw)
        except ValueError:
            continue
        if not math.isfinite(value):
            continue
        key_labels = _labels(labels) if labels else ""
        if key_labels is None:
            continue
        samples[name + key_labels] = value
        if len(samples) >= MAX_SAMPLES:
            break
    return dict(sorted(samples.items()))


def _family_total(samples: dict[str, float], family: str) -> float | None:
    values = [v for k, v in samples.items() if k == family or k.startswith(family + "{")]
    return sum(values) if values else None


def prefix_cache_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, Any] | None:
    """Hits and queries between two scrapes, from the first family both scrapes hold."""
    for hits_name, queries_name, includes_hits in PREFIX_CACHE_FAMILIES:
        values = [_family_total(s, n) for s in (before, after) for n in (hits_name, queries_name)]
        if any(v is None for v in values):
            continue
        hits_before, queries_before, hits_after, queries_after = (float(v or 0) for v in values)
        hits = hits_after - hits_before
        queries = queries_after - queries_before + (0 if includes_hits else hits)
        return {
            "hits_family": hits_name,
            "queries_family": queries_name if includes_hits else f"{queries_name} + {hits_name}",
            "hits": hits,
            "queries": queries,
            "hit_rate": hits / queries if queries > 0 else None,
        }
    return None


async def scrape(client: EndpointClient) -> dict[str, float] | str:
    """The server's counters, or a one-line reason there are none."""
    result = await client.get(client.root_url + "/metrics")
    if isinstance(result, str):
        return result
    status, body = result
    if status != 200:
        return f"/metrics answered HTTP {status}"
    samples = parse_counters(body.decode("utf-8", "replace"))
    return samples if samples else "/metrics holds no counters"
