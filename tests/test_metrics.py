"""Prometheus counters from vLLM- and SGLang-style expositions."""

from __future__ import annotations

from runners.campaign._metrics import parse_counters, prefix_cache_delta

VLLM = """# HELP vllm:prefix_cache_queries_total Prefix cache queries, in tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 1000.0
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 250.0
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{le="0.3",model_name="m"} 4.0
vllm:e2e_request_latency_seconds_sum{model_name="m"} 1.5
# TYPE vllm:request_success counter
vllm:request_success_total{finished_reason="length",model_name="m"} 9.0
vllm:request_success_created{finished_reason="length",model_name="m"} 1.7e9
odd_metric{label="a \\"quoted\\", value"} NaN
"""

SGLANG = """# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="m"} 5000
# TYPE sglang:cached_tokens_total counter
sglang:cached_tokens_total{model_name="m"} 1200
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{model_name="m"} 0.24
"""


def test_counters_only_with_sorted_labels() -> None:
    samples = parse_counters(VLLM)
    assert samples == {
        'vllm:prefix_cache_hits_total{engine="0",model_name="m"}': 250.0,
        'vllm:prefix_cache_queries_total{engine="0",model_name="m"}': 1000.0,
        'vllm:request_success_total{finished_reason="length",model_name="m"}': 9.0,
    }


def test_vllm_prefix_cache_delta() -> None:
    before = parse_counters(VLLM)
    after = parse_counters(VLLM.replace("1000.0", "3000.0").replace("250.0", "1750.0"))
    delta = prefix_cache_delta(before, after)
    assert delta == {
        "hits_family": "vllm:prefix_cache_hits_total",
        "queries_family": "vllm:prefix_cache_queries_total",
        "hits": 1500.0,
        "queries": 2000.0,
        "hit_rate": 0.75,
    }


def test_sglang_prefix_cache_delta_and_cache_gauge() -> None:
    before = parse_counters(SGLANG)
    assert before['sglang:cache_hit_rate{model_name="m"}'] == 0.24
    after = parse_counters(SGLANG.replace("5000", "9000").replace("1200", "4200"))
    delta = prefix_cache_delta(before, after)
    assert delta is not None
    assert (delta["hits"], delta["queries"], delta["hit_rate"]) == (3000.0, 4000.0, 0.75)


def test_no_prefix_cache_family() -> None:
    assert prefix_cache_delta({"x_total": 1.0}, {"x_total": 2.0}) is None


LLAMACPP = """# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 16
# TYPE llamacpp:prompt_tokens_cached_total counter
llamacpp:prompt_tokens_cached_total 10
"""


def test_llamacpp_prompt_counter_leaves_cached_tokens_out() -> None:
    before = parse_counters(LLAMACPP)
    # 100 more prompt tokens processed, 300 more taken from the cache: 400 asked for.
    after = parse_counters(LLAMACPP.replace(" 16", " 116").replace(" 10", " 310"))
    delta = prefix_cache_delta(before, after)
    assert delta is not None
    assert (delta["hits"], delta["queries"], delta["hit_rate"]) == (300.0, 400.0, 0.75)
    assert delta["queries_family"] == (
        "llamacpp:prompt_tokens_total + llamacpp:prompt_tokens_cached_total"
    )
