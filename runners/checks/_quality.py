"""The quality checks: thinking control, strict output, canaries, the long-context sweep
and coding."""

from __future__ import annotations

import asyncio
import hashlib
import random
import re
from typing import Any

from runners.checks import _session as checks
from runners.workload import Filler, coding

# -- thinking control -----------------------------------------------------------------

_MARKUP = re.compile(r"</?think>|<\|?reasoning\|?>", re.IGNORECASE)


async def run_thinking_control(session: checks.Session) -> list[dict[str, Any]]:
    found = []
    for repetition in range(int(session.stage.settings["repetitions"])):
        for enabled in (False, True):
            word = f"THINK-{'ON' if enabled else 'OFF'}-{repetition + 1}"
            body = session.body(
                checks.user(f"Reply with exactly this word and nothing else: {word}"),
                thinking=enabled,
            )
            record = await session.send(body)
            problem = checks.failed_request(record)
            if problem is None and enabled and record.reasoning_chars == 0:
                problem = "no reasoning channel with thinking enabled"
            if problem is None and not enabled:
                if record.reasoning_chars:
                    problem = (
                        f"{record.reasoning_chars} reasoning characters with thinking disabled"
                    )
                elif _MARKUP.search(record.text):
                    problem = "reasoning markup in the visible content with thinking disabled"
            found.append(
                checks.check(
                    f"thinking-{'enabled' if enabled else 'disabled'}-{repetition + 1}",
                    body,
                    checks.response_record(record),
                    "enabled: a dedicated reasoning channel"
                    if enabled
                    else "disabled: no reasoning channel and no reasoning markup in the content",
                    "failed" if problem else "passed",
                    problem or "as switched",
                )
            )
    return found


# -- strict output and canaries ------------------------------------------------------

_TOPICS = (
    "what a load balancer does",
    "why a prefix cache speeds up prefill",
    "what tensor parallelism splits",
    "why decode is memory-bound",
    "what a KV cache stores",
)


async def run_strict_output(session: checks.Session) -> list[dict[str, Any]]:
    limit = int(session.stage.settings["word_limit"])
    found = []
    for index in range(int(session.stage.settings["requests"])):
        topic = _TOPICS[index % len(_TOPICS)]
        body = session.body(checks.user(f"In at most {limit} words, explain {topic}."))
        record = await session.send(body)
        words = len(record.text.split())
        problem = checks.failed_request(record)
        if problem is None and record.finish_reason != "stop":
            problem = f"ended by {record.finish_reason} after {words} words, not by itself"
        elif problem is None and not 0 < words <= limit:
            problem = f"{words} words, limit {limit}"
        found.append(
            checks.check(
                f"strict-output-{index + 1}",
                body,
                checks.response_record(record),
                f"a non-empty answer of at most {limit} words that ends before max_tokens",
                "failed" if problem else "passed",
                problem or f"{words} words",
            )
        )
    return found


async def run_canary(session: checks.Session) -> list[dict[str, Any]]:
    rng = random.Random(f"anvil-ledger canary {session.seed}")
    found = []
    for index in range(int(session.stage.settings["requests"])):
        token = f"CANARY-{rng.getrandbits(24):06X}"
        body = session.body(
            checks.user(
                f"Begin your reply with the token {token}, then explain in one sentence what a cache is."
            )
        )
        record = await session.send(body)
        problem = checks.failed_request(record)
        if problem is None and not record.text.lstrip().startswith(token):
            problem = f"the reply starts {record.text.strip()[:40]!r}"
        found.append(
            checks.check(
                f"canary-{index + 1}",
                body,
                checks.response_record(record),
                f"the visible reply begins with the unique token {token}",
                "failed" if problem else "passed",
                problem or "first position",
            )
        )
    return found


# -- context quality ------------------------------------------------------------------

FAMILIES = ("number", "phrase", "key-value")
_PHRASE_WORDS = "silver lantern harbor quiet meadow copper falcon amber river cedar".split()


def _needle(family: str, rng: random.Random) -> tuple[str, str, str]:
    """(needle text, question, expected answer) of one family."""
    if family == "number":
        value = str(rng.randint(10000, 99999))
        return (
            f"The secret number is {value}.",
            "What is the secret number? Answer with the number only.",
            value,
        )
    if family == "phrase":
        value = " ".join(rng.sample(_PHRASE_WORDS, 3))
        return (
            f"The secret phrase is {value}.",
            "What is the secret phrase? Answer with the phrase only.",
            value,
        )
    keys = [f"K-{rng.randint(1000, 9999)}" for _ in range(5)]
    values = [str(rng.randint(10, 999)) for _ in keys]
    block = " ".join(f"The value for key {k} is {v}." for k, v in zip(keys, values, strict=True))
    pick = rng.randrange(len(keys))
    return (
        block,
        f"What is the value for key {keys[pick]}? Answer with the value only.",
        values[pick],
    )


async def run_context_quality(session: checks.Session) -> list[dict[str, Any]]:
    settings = session.stage.settings
    positions = int(settings["positions"])
    found = []
    for depth in settings["depths"]:
        filler = Filler(session.seed).text(max(12, int(depth * checks.WORDS_PER_TOKEN)))
        for family in settings["families"]:
            for position in range(positions):
                fraction = position / (positions - 1) if positions > 1 else 0.5
                for repetition in range(int(settings["repetitions"])):
                    rng = random.Random(f"{session.seed}:{depth}:{family}:{position}:{repetition}")
                    needle, question, expected = _needle(family, rng)
                    body = session.body(
                        checks.user(f"{checks.placed(filler, needle, fraction)}\n\n{question}")
                    )
                    record = await session.send(body)
                    visible = record.text.strip()
                    if record.error is not None:
                        verdict, outcome = "failed", "error"
                    elif expected.lower() in visible.lower():
                        verdict, outcome = "passed", "passed"
                    elif not visible and record.finish_reason == "length":
                        verdict, outcome = "failed", "empty-at-length"
                    else:
                        verdict, outcome = "failed", "incorrect"
                    found.append(
                        checks.check(
                            f"{family}-d{depth}-p{position}-r{repetition + 1}",
                            body,
                            checks.response_record(record),
                            f"the visible answer holds {expected!r}",
                            verdict,
                            outcome if outcome != "error" else str(checks.failed_request(record)),
                            depth=depth,
                            family=family,
                            position=round(fraction, 4),
                            outcome=outcome,
                        )
                    )
    return found


# -- coding quality -------------------------------------------------------------------


async def run_coding_quality(session: checks.Session) -> list[dict[str, Any]]:
    settings = session.stage.settings
    tasks = coding.TASKS[: int(settings["tasks"])]
    found = []
    for repetition in range(int(settings["repetitions"])):
        for task in tasks:
            body = session.body(checks.user(task.prompt))
            record = await session.send(body)
            problem = checks.failed_request(record)
            if problem is None:
                code = coding.extract_code(record.text)
                ok, detail = await asyncio.to_thread(
                    coding.run_hidden_tests, code, task, timeout_s=float(settings["timeout_s"])
                )
                problem = None if ok else detail
                code_sha256 = hashlib.sha256(code.encode()).hexdigest()
            else:
                code_sha256 = None
            found.append(
                checks.check(
                    f"{task.name}-r{repetition + 1}",
                    body,
                    checks.response_record(record),
                    f"the answer's code passes the hidden tests of {task.name}",
                    "failed" if problem else "passed",
                    problem or "all hidden tests passed",
                    task=task.name,
                    code_sha256=code_sha256,
                )
            )
    return found
