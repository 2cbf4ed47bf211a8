"""Deterministic prompts and their calibration against the server's token count.

The short-summary family: a filler text sized to a nominal context target, then a short
instruction naming the request. In ``shared`` prefix mode every prompt of a cell starts
with the same filler, so a prefix cache can serve it; in ``unique`` mode a per-request
session number comes first, so no two prompts share a prefix.

Numbers in prompts are zero-padded digits: tokenizers split digit runs the same way
whatever the digits, so prompts of one cell have equal token counts.

A prompt's digest is SHA-256 of its ``messages`` serialised as compact JSON with sorted
keys (:func:`prompt_bytes`): the same bytes a matched A/B comparison checks.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import orjson

PREFIX_MODES = ("shared", "unique")
TOLERANCE = 0.02
"""Calibrated prompts land within this fraction below the target, never above it."""
MAX_PROBES = 10

_VOCABULARY = (
    "a able about above across after again against air all almost along also always "
    "among an and animal another answer any are area around as ask at away back base be "
    "because been before began being below best better between big black blue board body "
    "book both box boy bring brought build built but by call came can car care carry "
    "cause center certain change check children city class clear close cold color come "
    "common complete could country course cover cross cut dark day deep did different "
    "direct do does dog done door down draw during each early earth east eat end enough "
    "even ever every example eye face fact fall family far farm fast father feel feet "
    "few field figure fill final find fine fire first fish five fly follow food foot for "
    "force form found four free friend from front full game gave general get girl give "
    "go gold good got govern great green ground group grow had half hand happen hard has "
    "have he head hear heard heat help her here high him his hold home horse hot hour "
    "house how hundred idea if in inch interest is island it just keep kind king knew "
    "know land language large last later lay lead learn leave left less let letter life "
    "light like line list listen little live long look lot low machine made main make man "
    "many map mark may me mean measure men might mile mind minute miss money moon more "
    "morning most mother mountain move much music must my name near need never new next "
    "night no north note nothing notice now number object of off often oh old on once one "
    "only open or order other our out over own page paper part pass people perhaps "
    "person picture piece place plain plan plane plant play point port pose possible "
    "power press problem product pull put question quick rain ran reach read ready real "
    "record red remember rest right river road rock room round rule run said same saw say "
    "school science sea second see seem self sentence serve set several shape she ship "
    "short should show side simple since sing size slow small snow so some song soon "
    "sound south space special spell stand star start state stay step still stood stop "
    "story street strong study such sun sure surface system table tail take talk teach "
    "tell ten test than that the their them then there these they thing think this those "
    "though thought three through time to together told too took top toward town travel "
    "tree true try turn two under unit until up upon us use usual very voice vowel wait "
    "walk want warm was watch water way we week weight well went were west what wheel "
    "when where which while white who whole why will wind with wonder wood word work "
    "world would write year yes yet you young"
).split()


class Filler:
    """The seeded filler text; the filler of ``n`` words is a prefix of that of ``n + 1``."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(f"anvil-ledger filler {seed}")
        self._words: list[str] = []

    def text(self, words: int) -> str:
        """The first ``words`` words, in sentences of twelve."""
        while len(self._words) < words:
            index = len(self._words)
            word = self._rng.choice(_VOCABULARY)
            if index % 12 == 0:
                word = word.capitalize()
            if index % 12 == 11:
                word += "."
            self._words.append(word)
        return " ".join(self._words[:words])


def session_number(seed: int, cell_id: str, index: int) -> str:
    """A twelve-digit number unique to one request of one cell."""
    digest = hashlib.sha256(f"{seed}:{cell_id}:{index}".encode()).digest()
    return f"{int.from_bytes(digest[:8], 'big') % 10**12:012d}"


def build_messages(
    filler: Filler, words: int, *, cell_id: str, index: int, prefix: str, seed: int
) -> list[dict[str, str]]:
    """The messages of request ``index`` (``-1`` is the calibration probe)."""
    tag = "calibration" if index < 0 else f"{index:04d}"
    instruction = f"Request {cell_id} #{tag}. Summarize the text above in three short sentences."
    body = f"{filler.text(words)}\n\n{instruction}"
    if prefix == "unique":
        number = session_number(seed, cell_id, index) if index >= 0 else "0" * 12
        body = f"Session {number}.\n{body}"
    return [{"role": "user", "content": body}]


def prompt_bytes(messages: list[dict[str, str]]) -> bytes:
    """The bytes a prompt digest is taken over."""
    return orjson.dumps(messages, option=orjson.OPT_SORT_KEYS)


def prompt_digest(messages: list[dict[str, str]]) -> str:
    """SHA-256 hex of :func:`prompt_bytes`."""
    return hashlib.sha256(prompt_bytes(messages)).hexdigest()


@attrs.frozen
class Calibration:
    """How a cell's filler was sized against one arm's token count."""

    arm: str
    """The arm whose server counted."""
    target_tokens: int
    """The nominal context target."""
    filler_words: int
    """Words of filler chosen."""
    prompt_tokens: int | None
    """Prompt tokens of the calibration probe at that size (None when it failed)."""
    probes: tuple[tuple[int, int], ...]
    """Every probe as (filler words, prompt tokens)."""
    error: str | None = None
    """Why calibration failed; the cell then runs with an estimated size."""
    dataset: bool = False
    """The cell's prompts are a dataset's: nothing was sized, nothing probed."""

    @property
    def ok(self) -> bool:
        """True when the probe landed within the tolerance."""
        return self.error is None

    def words_for(self, tokens: int) -> int:
        """Filler words for a prompt of ``tokens`` rather than the target: along the line
        from the probe without filler through the calibrated size (token count is close to
        linear in filler words)."""
        if tokens == self.target_tokens:
            return self.filler_words
        base = next((t for w, t in self.probes if w == 0), 0)
        measured = self.prompt_tokens if self.prompt_tokens is not None else self.target_tokens
        if measured <= base or not self.filler_words:
            return max(0, round(self.filler_words * tokens / max(self.target_tokens, 1)))
        return max(0, round(self.filler_words * (tokens - base) / (measured - base)))

    def to_json(self) -> dict[str, Any]:
        """As recorded in the workload manifest."""
        return {
            "arm": self.arm,
            "target_tokens": self.target_tokens,
            "filler_words": self.filler_words,
            "prompt_tokens": self.prompt_tokens,
            "probes": [list(p) for p in self.probes],
            "status": "dataset" if self.dataset else "ok" if self.ok else "failed",
            "error": self.error,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Calibration:
        """Reads one back from a workload manifest."""
        return cls(
            arm=data["arm"],
            target_tokens=data["target_tokens"],
            filler_words=data["filler_words"],
            prompt_tokens=data["prompt_tokens"],
            probes=tuple((int(w), int(t)) for w, t in data["probes"]),
            error=data["error"],
            dataset=data["status"] == "dataset",
        )


Probe = Callable[[int], Awaitable[int | str]]
"""Sends the calibration prompt with a filler of N words: prompt tokens, or an error."""


async def calibrate(
    arm: str, target: int, probe: Probe, *, hint_words: int | None, max_words: int
) -> Calibration:
    """Finds the filler size whose prompt lands in ``[target * (1 - TOLERANCE), target]``.

    Token count is close to linear in filler words, so each step aims at the middle of
    the band along the line through the two nearest probes. No probe is larger than
    ``max_words``: memory stays bounded whatever the target.
    """
    low = int(target * (1 - TOLERANCE))
    aim = (low + target) / 2
    probes: list[tuple[int, int]] = []

    def failed(words: int, error: str) -> Calibration:
        return Calibration(arm, target, words, None, tuple(probes), error)

    base = await probe(0)
    if isinstance(base, str):
        return failed(hint_words or int(target * 0.7), f"probe without filler failed: {base}")
    probes.append((0, base))
    if base > target:
        return failed(0, f"the instruction alone is {base} tokens, above the target {target}")
    words = hint_words if hint_words else max(1, int((aim - base) / 1.3))
    for _ in range(MAX_PROBES):
        if words > max_words:
            return failed(
                max_words, f"the target needs more than {max_words} filler words, the most sent"
            )
        result = await probe(words)
        if isinstance(result, str):
            return failed(words, f"probe with {words} filler words failed: {result}")
        probes.append((words, result))
        if low <= result <= target:
            return Calibration(arm, target, words, result, tuple(probes))
        below = max((p for p in probes if p[1] < low), default=probes[0])
        above = min((p for p in probes if p[1] > target), default=None)
        if above is None:
            rate = (result - base) / words if words else 1.3
            following = int(words + (aim - result) / max(rate, 1e-6))
        else:
            span = above[1] - below[1]
            following = int(below[0] + (aim - below[1]) * (above[0] - below[0]) / max(span, 1))
            if above[0] - below[0] <= 1:
                break
            following = min(max(following, below[0] + 1), above[0] - 1)
        words = max(1, following)
    last_words = max((p for p in probes if p[1] <= target), default=probes[0])[0]
    return failed(last_words, f"no filler size lands within {TOLERANCE:.0%} below {target} tokens")
