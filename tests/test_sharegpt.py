"""ShareGPT-format prompts (``runners.workload.sharegpt``): which conversations are kept,
in which order, and ``ledger bench --dataset-name sharegpt`` sending them as they are."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ledger.errors import InvalidArtifact
from ledger.formats import cell_records
from ledger.formats.jsonio import read_json
from runners.simulate.serve import SimulatorProcess
from runners.workload import prompt_digest
from runners.workload.sharegpt import estimated_tokens, load_sharegpt
from tests.conftest import CliRun, verify_json


def _conversation(prompt_words: int, reply_words: int, tag: str) -> dict[str, Any]:
    prompt = " ".join([f"p{tag}"] + ["word"] * (prompt_words - 1))
    reply = " ".join(["answer"] * reply_words)
    return {"id": tag, "conversations": [{"from": "human", "value": prompt},
                                         {"from": "gpt", "value": reply}]}  # fmt: skip


def _file(tmp_path: Path, items: list[Any]) -> Path:
    path = tmp_path / "sharegpt.json"
    path.write_text(json.dumps(items))
    return path


def test_estimated_tokens_are_four_for_three_words() -> None:
    assert [estimated_tokens(t) for t in ("", "a", "a b c", "a b c d")] == [0, 2, 4, 6]


def test_only_conversations_vllm_would_keep_are_kept(tmp_path: Path) -> None:
    items = [
        _conversation(30, 20, "kept"),
        _conversation(2, 20, "prompt-too-short"),  # 3 estimated tokens
        _conversation(30, 2, "reply-too-short"),
        _conversation(800, 20, "prompt-too-long"),  # 1,067 tokens
        _conversation(760, 780, "too-long-together"),  # 1,014 + 1,040
        {"id": "one-turn", "conversations": [{"from": "human", "value": "a b c d e"}]},
        {"id": "not-text", "conversations": [{"from": "human", "value": 3}, {"value": "x"}]},
        "not an object",
    ]
    dataset = load_sharegpt(_file(tmp_path, items), count=1, seed=0, output_len=None)
    (prompt,) = dataset.prompts
    assert prompt.text.startswith("pkept") and prompt.tokens == 40 and prompt.max_tokens == 27
    with pytest.raises(InvalidArtifact, match=r"1 usable conversations .* fewer than the 2"):
        load_sharegpt(_file(tmp_path, items), count=2, seed=0, output_len=None)
    # A fixed output length keeps a conversation whose own reply is too short, and one
    # whose reply was too long beside its prompt.
    fixed = load_sharegpt(_file(tmp_path, items), count=3, seed=0, output_len=8)
    kept = sorted(p.text.split()[0] for p in fixed.prompts)
    assert kept == ["pkept", "preply-too-short", "ptoo-long-together"]
    assert {p.max_tokens for p in fixed.prompts} == {8}


def test_the_seed_chooses_the_order_and_the_file_is_named_by_digest(tmp_path: Path) -> None:
    path = _file(tmp_path, [_conversation(10 + i, 10, str(i)) for i in range(20)])
    first = load_sharegpt(path, count=20, seed=1, output_len=None)
    again = load_sharegpt(path, count=20, seed=1, output_len=None)
    other = load_sharegpt(path, count=20, seed=2, output_len=None)
    assert first.prompts == again.prompts and first.prompts != other.prompts
    assert sorted(p.text for p in first.prompts) == sorted(p.text for p in other.prompts)
    assert first.to_json() == {
        "name": "sharegpt",
        "file": "sharegpt.json",
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "prompts": 20,
    }


@pytest.mark.parametrize(
    ("content", "message"),
    [("{}", "not a ShareGPT file"), ("[1,", "sharegpt.json"), ("", "sharegpt.json")],
)
def test_a_file_that_is_not_sharegpt_is_refused(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "sharegpt.json"
    path.write_text(content)
    with pytest.raises(InvalidArtifact, match=message):
        load_sharegpt(path, count=1, seed=0, output_len=None)


def test_bench_sends_the_files_prompts_as_they_are(
    cli: CliRun, simulator: Callable[..., SimulatorProcess], tmp_path: Path
) -> None:
    items = [_conversation(10 + 3 * i, 5 + i, str(i)) for i in range(30)]
    path = _file(tmp_path, items)
    url = simulator(decode_tok_s=400.0, prefill_tok_s=200000.0).root_url
    status, out, err = cli(
        "bench", "--base-url", url, "--model", "anvil-sim", "--dataset-name", "sharegpt",
        "--dataset-path", str(path), "--num-prompts", "20", "--max-concurrency", "4",
        "--ignore-eos", "--raw-dir", str(tmp_path / "raw"), "--campaign", "2026-12-03-sgpt",
    )  # fmt: skip
    assert status == 0, err
    assert "Successful requests:                     20" in out
    folder = tmp_path / "raw/2026-12-03-sgpt"
    plan = read_json(folder / "run-plan.json")
    dataset = plan["stages"][0]["dataset"]
    assert dataset["name"] == "sharegpt" and dataset["prompts"] == 20
    workload = read_json(folder / "workload-manifest.json")
    assert workload["cells"][0]["calibration"]["status"] == "dataset"
    (header,) = (folder / "bench/bench").glob("*.json")
    records = list(cell_records.records(folder, read_json(header)))
    by_digest = {
        prompt_digest([{"role": "user", "content": c["conversations"][0]["value"]}]): c
        for c in items
    }
    for record in records:
        conversation = by_digest[record["prompt_sha256"]]
        reply = conversation["conversations"][1]["value"]
        assert record["max_tokens"] == estimated_tokens(reply)
        assert record["usage"]["completion_tokens"] == record["max_tokens"]
    assert len({r["prompt_sha256"] for r in records}) == 20
    assert verify_json(cli, folder)[0] == 0


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--dataset-name", "sharegpt"), "--dataset-name sharegpt needs --dataset-path FILE"),
        (("--dataset-path", "x.json"), "--dataset-path is the file of --dataset-name sharegpt"),
        (("--dataset-name", "sharegpt", "--dataset-path", "missing.json"), "missing.json"),
        (
            ("--dataset-name", "sharegpt", "--dataset-path", "x", "--random-range-ratio", "0.1"),
            "--random-range-ratio is a random dataset's",
        ),
    ],
)
def test_unusable_dataset_flags_exit_2_in_one_line(
    cli: CliRun, tmp_path: Path, extra: tuple[str, ...], message: str
) -> None:
    args = ["bench", "--base-url", "http://127.0.0.1:9", "--model", "m", "--raw-dir"]
    status, _, err = cli(*args, str(tmp_path / "raw"), *extra)
    assert status == 2
    assert len(err.strip().splitlines()) == 1 and message in err, err
    assert not (tmp_path / "raw").exists()
