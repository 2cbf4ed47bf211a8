"""Prompts from a ShareGPT-format file, as vLLM's ``--dataset-name sharegpt`` takes them:
each conversation's first turn is a prompt, its second the reply whose length sets the
request's max_tokens (unless a fixed output length is asked for).

vLLM counts tokens with the model's tokenizer; a bench has only the server, so a text's
tokens are estimated at four for every three words. The estimate decides which
conversations are kept (vLLM's filter: prompt and reply at least 4 tokens, prompt at most
1,024, both together at most 2,048) and each reply's length; the server's own count of each
prompt is in its record's usage.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import Any

import attrs

from ledger.errors import InvalidArtifact
from ledger.formats.jsonio import parse_strict, read_limited

MAX_PROMPT_TOKENS = 1024
"""The longest prompt kept, in estimated tokens: vLLM's filter, and the cell's context
target."""
MAX_TOTAL_TOKENS = 2048
MIN_TOKENS = 4
MAX_FILE_BYTES = 2 << 30
"""ShareGPT_V3_unfiltered_cleaned_split.json, the file vLLM's docs name, is 642 MiB."""


def estimated_tokens(text: str) -> int:
    """Four tokens for every three words, rounded up (at least 1 for a text with a word)."""
    words = len(text.split())
    return -(-4 * words // 3)


@attrs.frozen
class DatasetPrompt:
    text: str
    max_tokens: int
    tokens: int
    """The prompt's estimated tokens."""


@attrs.frozen
class Dataset:
    """The prompts a stage sends, in order: request ``i`` sends ``prompts[i]``."""

    name: str
    file: str
    """The file's name (not its path: a plan records no place on one machine)."""
    sha256: str
    """Of the file's bytes."""
    prompts: tuple[DatasetPrompt, ...] = attrs.field(repr=False)

    def to_json(self) -> dict[str, Any]:
        """As ``run-plan.json`` records it: which file, not its text."""
        return {
            "name": self.name,
            "file": self.file,
            "sha256": self.sha256,
            "prompts": len(self.prompts),
        }


def _turns(item: Any) -> tuple[str, str] | None:
    if not isinstance(item, dict):
        return None
    turns = item.get("conversations")
    if not isinstance(turns, list) or len(turns) < 2:
        return None
    texts = [t.get("value") if isinstance(t, dict) else None for t in turns[:2]]
    if not all(isinstance(t, str) for t in texts):
        return None
    return texts[0], texts[1]  # type: ignore[return-value]


def load_sharegpt(path: str | Path, *, count: int, seed: int, output_len: int | None) -> Dataset:
    """``count`` prompts drawn (seeded) from the file's usable conversations.

    Raises:
        InvalidArtifact: the file is unreadable, not a ShareGPT list, or holds fewer
            usable conversations than ``count`` (the message says how many it holds).
    """
    path = Path(path)
    raw = read_limited(path, MAX_FILE_BYTES, what="ShareGPT files")
    try:
        data = parse_strict(raw)
    except InvalidArtifact as e:
        raise InvalidArtifact(f"{path}: {e}") from None
    if not isinstance(data, list):
        raise InvalidArtifact(
            f"{path}: not a ShareGPT file (a JSON list of {{'conversations': [...]}} objects)"
        )
    usable = []
    for item in data:
        turns = _turns(item)
        if turns is None:
            continue
        prompt, reply = turns
        tokens = estimated_tokens(prompt)
        wanted = output_len if output_len is not None else estimated_tokens(reply)
        if tokens < MIN_TOKENS or (wanted < MIN_TOKENS and output_len is None):
            continue
        if tokens > MAX_PROMPT_TOKENS or tokens + wanted > MAX_TOTAL_TOKENS:
            continue
        usable.append(DatasetPrompt(prompt, wanted, tokens))
    if len(usable) < count:
        raise InvalidArtifact(
            f"{path}: {len(usable)} usable conversations (a prompt of 4 to "
            f"{MAX_PROMPT_TOKENS} estimated tokens, with its reply at most "
            f"{MAX_TOTAL_TOKENS}), fewer than the {count} requests asked for"
        )
    random.Random(seed).shuffle(usable)
    digest = hashlib.sha256(raw).hexdigest()
    return Dataset("sharegpt", path.name, digest, tuple(usable[:count]))
