"""What every functional and quality check shares: the session that sends requests, and
the record a check leaves (request, response excerpt, assertion, verdict).

Every check records the request it sent (long texts shortened, with the SHA-256 of the
whole body), an excerpt of the response, the assertion it made and its verdict:
``passed``, ``failed`` or ``not-applicable`` (the server lacks the feature; never a pass).
Requests go one at a time: these stages measure answers, not speed.
"""

from __future__ import annotations

import hashlib
import re
import time
from typing import Any

import orjson

from runners.client import EndpointClient, RequestRecord
from runners.plan import Arm, EvidenceStage

EXCERPT = 300
_SHORT = 400
WORDS_PER_TOKEN = 0.75
"""English words per token of common tokenizers: sizes nominal-depth filler."""
NOT_APPLICABLE_STATUS = frozenset({404, 405, 501})


def _shorten(value: Any) -> Any:
    if isinstance(value, str):
        if value.startswith("data:"):
            return f"{value[:30]}... [{len(value)} characters]"
        if len(value) > _SHORT:
            return f"{value[:200]} ... {value[-120:]} [{len(value)} characters]"
        return value
    if isinstance(value, list):
        if len(value) > 8:
            return [_shorten(v) for v in value[:3]] + [f"... [{len(value)} items]"]
        return [_shorten(v) for v in value]
    if isinstance(value, dict):
        return {k: _shorten(v) for k, v in value.items()}
    return value


def request_record(body: dict[str, Any]) -> dict[str, Any]:
    """The request as an artifact keeps it: shortened, with the digest of the whole."""
    return {
        "sha256": hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest(),
        "body": _shorten(body),
    }


def response_record(record: RequestRecord) -> dict[str, Any]:
    """An excerpt of a streamed response."""
    usage = record.usage or {}
    return {
        "excerpt": record.text[:EXCERPT],
        "content_chars": len(record.text),
        "finish_reason": record.finish_reason,
        "reasoning_chars": record.reasoning_chars,
        "tool_calls": [
            {"name": c.get("name"), "arguments": str(c.get("arguments", ""))[:EXCERPT]}
            for _, c in sorted(record.tool_calls.items())
        ],
        "tool_deltas": record.chunk_channels.count("t"),
        "prompt_tokens": usage.get("prompt_tokens"),
        "error": record.error,
    }


def check(
    name: str,
    body: dict[str, Any],
    response: dict[str, Any],
    assertion: str,
    verdict: str,
    detail: str,
    **extra: Any,
) -> dict[str, Any]:
    """One check as its artifact records it."""
    return {
        "name": name,
        "request": request_record(body),
        "response": response,
        "assertion": assertion,
        "verdict": verdict,
        "detail": detail,
        **extra,
    }


class Session:
    """What every check of a stage needs: the client, the arm and the stage's settings."""

    def __init__(self, client: EndpointClient, arm: Arm, stage: EvidenceStage, seed: int) -> None:
        self.client = client
        self.arm = arm
        self.stage = stage
        self.seed = seed
        self.origin = time.perf_counter_ns()

    def body(
        self,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int | None = None,
        thinking: bool | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        """A chat request; ``thinking`` None leaves the server's default."""
        body: dict[str, Any] = dict(self.arm.extra_body)
        if thinking is not None:
            body.update(self.arm.thinking_fields(thinking))
        body.update(
            model=self.arm.model,
            messages=messages,
            max_tokens=max_tokens or int(self.stage.settings["max_tokens"]),
            temperature=0.0,
            seed=self.seed,
            **fields,
        )
        return body

    async def send(self, body: dict[str, Any]) -> RequestRecord:
        return await self.client.chat(body, origin_ns=self.origin)


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def failed_request(record: RequestRecord) -> str | None:
    if record.error is not None:
        return f"request failed: {record.error['class']}: {record.error['message']}"
    return None


def json_content(text: str) -> tuple[Any, str | None]:
    try:
        return orjson.loads(text.strip()), None
    except orjson.JSONDecodeError as e:
        return None, f"the answer is not JSON: {e}"


def placed(filler: str, needle: str, fraction: float) -> str:
    """The filler with the needle inserted, as whole sentences, at ``fraction`` of it."""
    sentences = re.split(r"(?<=\.)\s+", filler.strip())
    at = round(fraction * len(sentences))
    return " ".join([*sentences[:at], needle, *sentences[at:]])
