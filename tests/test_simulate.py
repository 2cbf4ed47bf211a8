"""The simulated endpoint: a real HTTP server whose behaviour follows its profile."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from ledger.errors import InvalidArtifact
from runners.campaign._stats import request_metrics
from runners.client import EndpointClient, RequestRecord
from runners.simulate._app import SimulatedEndpoint
from runners.simulate._model import PrefixCache
from runners.simulate.profile import Profile, load_profile
from runners.simulate.serve import SimulatorProcess

Start = Callable[..., SimulatorProcess]
MESSAGES = [{"role": "user", "content": "Summarize the scheduling policy in one sentence."}]


def _post(sim: SimulatorProcess, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(sim.base_url + "/chat/completions", json=body, trust_env=False, timeout=30)


def test_models_lists_the_profile_model(simulator: Start) -> None:
    sim = simulator(model="qwen-sim", context_limit=4096)
    data = httpx.get(sim.base_url + "/models", trust_env=False).json()["data"]
    assert [(m["id"], m["max_model_len"]) for m in data] == [("qwen-sim", 4096)]


def test_non_streaming_reply_with_usage_and_reasoning(simulator: Start) -> None:
    sim = simulator(decode_tok_s=1000.0, reasoning_tokens=4, natural_output_tokens=6)
    body = {
        "model": "anvil-sim",
        "messages": MESSAGES,
        "max_tokens": 50,
        "chat_template_kwargs": {"enable_thinking": True},
    }
    reply = _post(sim, body).json()
    choice = reply["choices"][0]
    assert choice["finish_reason"] == "stop"
    assert len(choice["message"]["reasoning_content"].split()) == 4
    assert len(choice["message"]["content"].split()) == 6
    assert reply["usage"]["completion_tokens"] == 10
    assert reply["usage"]["completion_tokens_details"] == {"reasoning_tokens": 4}


def test_json_response_format_is_valid_json(simulator: Start) -> None:
    sim = simulator(decode_tok_s=2000.0)
    schema = {
        "type": "object",
        "properties": {"title": {"type": "string"}, "score": {"type": "integer"}},
    }
    body = {
        "model": "anvil-sim",
        "messages": MESSAGES,
        "max_tokens": 200,
        "response_format": {"type": "json_schema", "json_schema": {"schema": schema}},
    }
    content = _post(sim, body).json()["choices"][0]["message"]["content"]
    parsed = httpx.Response(200, content=content).json()
    assert set(parsed) == {"title", "score"}
    assert isinstance(parsed["score"], int)


def test_unknown_model_is_404_and_bad_json_is_400(simulator: Start) -> None:
    sim = simulator()
    assert _post(sim, {"model": "other", "messages": MESSAGES}).status_code == 404
    response = httpx.post(sim.base_url + "/chat/completions", content=b"{", trust_env=False)
    assert response.status_code == 400


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"model": "anvil-sim", "prompt": ["a"], "stream": True}, "prompt must be a string"),
        ({"model": "anvil-sim", "prompt": "Hello there."}, "this endpoint streams only"),
        ({"model": "other", "prompt": "Hello there.", "stream": True}, "does not exist"),
    ],
)
def test_a_completion_it_cannot_serve_is_refused(
    simulator: Start, body: dict[str, Any], message: str
) -> None:
    sim = simulator()
    url = sim.base_url + "/completions"
    response = httpx.post(url, json=body, trust_env=False, timeout=30)
    assert response.status_code in (400, 404) and message in response.json()["message"]


def test_a_completion_streams_text_chunks_without_a_chat_template(simulator: Start) -> None:
    sim = simulator(decode_tok_s=2000.0)
    body = {"model": "anvil-sim", "prompt": "Hello there.", "max_tokens": 5, "stream": True,
            "stream_options": {"include_usage": True}}  # fmt: skip
    chat = {**body, "messages": [{"role": "user", "content": "Hello there."}]}
    del chat["prompt"]
    events = []
    for path, request in (("/completions", body), ("/chat/completions", chat)):
        response = httpx.post(sim.base_url + path, json=request, trust_env=False, timeout=30)
        lines = [line[6:] for line in response.text.splitlines() if line.startswith("data: {")]
        events.append([json.loads(line) for line in lines])
    completion, chatted = events
    texts = [e["choices"][0]["text"] for e in completion if e["choices"]]
    assert len(texts) == 6 and texts[-1] == "" and all(texts[:5])
    assert all(e["object"] == "text_completion" for e in completion)
    # The prompt as it is counts fewer tokens than the same text in a chat template.
    assert completion[-1]["usage"]["prompt_tokens"] < chatted[-1]["usage"]["prompt_tokens"]


def test_context_limit_message_names_the_limit(simulator: Start) -> None:
    sim = simulator(context_limit=64)
    response = _post(sim, {"model": "anvil-sim", "messages": MESSAGES, "max_tokens": 60})
    assert response.status_code == 400
    assert "maximum context length is 64 tokens" in response.json()["message"]


def test_prefix_cache_makes_a_repeated_prompt_cheaper(simulator: Start) -> None:
    # 8000 prompt tokens at 20000 tok/s is 400 ms of prefill; a cached repeat skips it.
    sim = simulator(prefill_tok_s=20000.0, decode_tok_s=1000.0, overhead_ms=1.0)
    text = " ".join(f"word{i}" for i in range(8000))
    body = {"model": "anvil-sim", "messages": [{"role": "user", "content": text}]}

    async def two() -> list[RequestRecord]:
        async with EndpointClient(sim.base_url, concurrency=1) as client:
            origin = time.perf_counter_ns()
            first = await client.chat({**body, "max_tokens": 2}, origin_ns=origin)
            second = await client.chat({**body, "max_tokens": 2}, origin_ns=origin)
            return [first, second]

    first, second = asyncio.run(two())
    assert first.usage is not None and second.usage is not None
    assert first.usage["cached_tokens"] == 0
    assert second.usage["cached_tokens"] == second.usage["prompt_tokens"] - 1 - (
        (second.usage["prompt_tokens"] - 1) % 16
    )
    ttft = [(r.first_token_ns or 0) - r.sent_ns for r in (first, second)]
    assert ttft[0] > 350e6
    assert ttft[1] < 50e6
    metrics = httpx.get(sim.root_url + "/metrics", trust_env=False).text
    assert (
        f'vllm:prefix_cache_hits_total{{model_name="anvil-sim"}} {float(second.usage["cached_tokens"])}'
        in metrics
    )


def test_prefix_cache_evicts_least_recently_used() -> None:
    cache = PrefixCache(block_tokens=2, capacity_blocks=2)
    a, b = ["a", "b", "c", "d"], ["x", "y", "z", "w"]
    assert cache.lookup_and_insert(a, 10) == 0
    assert cache.lookup_and_insert(a, 10) == 4
    cache.lookup_and_insert(b, 10)
    assert cache.lookup_and_insert(a, 10) == 0


def test_max_running_requests_queues_the_rest(simulator: Start) -> None:
    # One slot, 10 tokens at 100 tok/s each (~90 ms of decode): the second request waits.
    sim = simulator(max_running_requests=1, decode_tok_s=100.0, overhead_ms=0.0)
    body = {"model": "anvil-sim", "messages": MESSAGES, "max_tokens": 10, "ignore_eos": True}

    async def both() -> list[RequestRecord]:
        async with EndpointClient(sim.base_url, concurrency=2) as client:
            origin = time.perf_counter_ns()
            return list(await asyncio.gather(*(client.chat(body, origin_ns=origin) for _ in "ab")))

    records = asyncio.run(both())
    ttfts = sorted((r.first_token_ns or 0) - r.sent_ns for r in records)
    assert ttfts[0] < 30e6
    assert ttfts[1] > 80e6


def test_faults_are_seeded(simulator: Start) -> None:
    faults = [{"kind": "status", "status": 503, "rate": 0.5}]
    statuses = []
    for _ in range(2):
        sim = simulator(seed=11, faults=faults, decode_tok_s=5000.0)
        body = {"model": "anvil-sim", "messages": MESSAGES, "max_tokens": 1}
        statuses.append([_post(sim, body).status_code for _ in range(12)])
        sim.stop()
    assert statuses[0] == statuses[1]
    assert set(statuses[0]) == {200, 503}


def test_profile_file_and_its_errors(tmp_path: Path) -> None:
    good = tmp_path / "good.toml"
    good.write_text('model = "m"\ndecode_tok_s = 42.5\n[[faults]]\nkind = "stall"\nrate = 0.25\n')
    profile = load_profile(good)
    assert profile.decode_tok_s == 42.5
    assert profile.faults[0].kind == "stall"
    assert Profile.from_mapping(profile.to_json()) == profile
    for text, message in [
        ("decode_tok_s = 0\n", "decode_tok_s must be > 0"),
        ("decode_tok_s = 'fast'\n", "decode_tok_s must be float"),
        ("speed = 3\n", "unknown key 'speed'"),
        ("[[faults]]\nkind = 'meteor'\n", "'kind' must be in"),
        ("[[faults]]\nkind = 'stall'\nrate = 2.0\n", "rate must be between 0 and 1"),
        ("model = \n", "not valid TOML"),
    ]:
        bad = tmp_path / "bad.toml"
        bad.write_text(text)
        with pytest.raises(InvalidArtifact, match=message):
            load_profile(bad)


def test_a_child_that_exits_at_start_is_one_error_naming_its_status(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import subprocess
    import sys

    from runners.simulate import serve

    real = subprocess.Popen

    def exits(command: list[str], **options: Any) -> Any:
        # A child killed by the interrupt that also reached its parent, for instance.
        return real([sys.executable, "-c", "raise SystemExit(3)"], **options)

    monkeypatch.setattr(serve.subprocess, "Popen", exits)
    with pytest.raises(serve.ServerError, match="exited at start with status 3"):
        SimulatorProcess(Profile()).start()


def _factors(profile: Profile, count: int) -> list[float]:
    endpoint = SimulatedEndpoint(profile)
    return [endpoint._service_factor() for _ in range(count)]


def _cv(values: list[float]) -> float:
    mean = sum(values) / len(values)
    return (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5 / mean


def test_jitter_scales_each_request_by_a_lognormal_of_mean_one() -> None:
    factors = _factors(Profile(jitter_cv=0.1, jitter_seed=3), 20000)
    assert sum(factors) / len(factors) == pytest.approx(1.0, abs=0.005)
    assert _cv(factors) == pytest.approx(0.1, abs=0.005)
    assert min(factors) > 0
    # Seeded, the draws repeat; unseeded, each start of the server draws its own.
    assert _factors(Profile(jitter_cv=0.1, jitter_seed=3), 50) == factors[:50]
    assert _factors(Profile(jitter_cv=0.1), 50) != _factors(Profile(jitter_cv=0.1), 50)
    assert set(_factors(Profile(jitter_seed=3), 100)) == {1.0}


def test_run_noise_is_one_factor_per_start() -> None:
    starts = [SimulatedEndpoint(Profile(run_cv=0.05, jitter_seed=seed)) for seed in range(4000)]
    runs = [s.run_factor for s in starts]
    assert _cv(runs) == pytest.approx(0.05, abs=0.004)
    # Without request noise, every request of one start has that start's factor.
    assert set(_factors(Profile(run_cv=0.05, jitter_seed=8), 20)) == {
        SimulatedEndpoint(Profile(run_cv=0.05, jitter_seed=8)).run_factor
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("jitter_cv = -0.1\n", "jitter_cv must be between 0 and 10, got -0.1"),
        ("jitter_cv = 1e200\n", "jitter_cv must be between 0 and 10, got 1e"),
        ("run_cv = -1\n", "run_cv must be between 0 and 10"),
        ("run_cv = nan\n", "run_cv: nan is not a finite number"),
        ("jitter_seed = true\n", "jitter_seed must be a whole number"),
        ("jitter_seed = 1.5\n", "jitter_seed must be a whole number"),
    ],
)
def test_jitter_settings_are_checked(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "profile.toml"
    path.write_text(text)
    with pytest.raises(InvalidArtifact, match=message):
        load_profile(path)


def test_a_jittered_server_streams_at_each_request_s_own_rate(simulator: Start) -> None:
    # 40 tokens at 400 tok/s is about 100 ms of decode, long against the client's
    # resolution: each request's measured rate follows the rate the server drew for it.
    sim = simulator(decode_tok_s=400.0, jitter_cv=0.3, jitter_seed=5, overhead_ms=60.0)
    body = {"model": "anvil-sim", "messages": MESSAGES, "max_tokens": 40, "ignore_eos": True}

    async def some() -> list[RequestRecord]:
        async with EndpointClient(sim.base_url, concurrency=1) as client:
            origin = time.perf_counter_ns()
            return [await client.chat(body, origin_ns=origin) for _ in range(12)]

    records = asyncio.run(some())
    log = httpx.get(sim.root_url + "/sim/requests", trust_env=False).json()["requests"][-12:]
    drawn = [entry["decode_tok_s"] for entry in log]
    factors = [entry["service_factor"] for entry in log]
    assert _cv(drawn) > 0.1
    # Within 15 %: a loaded machine wakes the server late now and then; the draws differ by
    # 30 % and more, so a server that ignored them would miss by as much.
    figures = [request_metrics(record.to_json()) for record in records]
    for measured, rate in zip(figures, drawn, strict=True):
        assert measured["decode_tok_s"] == pytest.approx(rate, rel=0.15)
    # The 60 ms before the first token are scaled by the same draw: the slowest draw's
    # first token comes later than the fastest's by at least half of what the draws say
    # (a late wake-up on a busy machine adds milliseconds, not tens of them).
    slow, fast = factors.index(max(factors)), factors.index(min(factors))
    assert 60.0 * (factors[slow] - factors[fast]) > 20.0
    later = figures[slow]["first_token_ms"] - figures[fast]["first_token_ms"]
    assert later > 0.5 * 60.0 * (factors[slow] - factors[fast])
