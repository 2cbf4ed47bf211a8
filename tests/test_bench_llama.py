"""``ledger bench`` against llama.cpp's own server, both APIs: the summary, the saved result
read back by ``ledger import vllm`` with every self-check agreeing, and a verified
campaign. The simulator agrees with our client by construction; this server does not."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import CliRun, verify_json
from tests.llama_server import LlamaServer

pytestmark = pytest.mark.xdist_group("llama-server")


@pytest.mark.parametrize("endpoint", ["/v1/chat/completions", "/v1/completions"])
def test_bench_against_llama_server(
    llama_server: LlamaServer, cli: CliRun, tmp_path: Path, endpoint: str
) -> None:
    root = llama_server.base_url.removesuffix("/v1")
    status, out, err = cli(
        "bench", "--base-url", root, "--model", "anvil-tiny", "--endpoint", endpoint,
        "--random-input-len", "256", "--random-output-len", "16", "--num-prompts", "12",
        "--max-concurrency", "4", "--ignore-eos", "--raw-dir", str(tmp_path / "raw"),
        "--campaign", "2026-12-03-llama", "--save-result", "--result-dir", str(tmp_path),
        "--result-filename", "result.json", "--percentile-metrics", "ttft,tpot,itl,e2el",
    )  # fmt: skip
    assert status == 0, err
    figures = dict(re.findall(r"^([A-Z][^:]+):\s+([0-9.]+)$", out, re.MULTILINE))
    assert figures["Successful requests"] == "12" and figures["Failed requests"] == "0"
    assert figures["Total generated tokens"] == str(12 * 16)
    assert float(figures["Mean TPOT (ms)"]) > 0 and float(figures["Median ITL (ms)"]) > 0
    # Twelve requests bound a median, not a p99: the summary names it instead.
    assert re.search(r"^P99 ITL \(ms\):\s+too few requests for p99$", out, re.MULTILINE), out
    # The server's own tokenizer counted the prompts: calibrated to 5 % below 256.
    saved = json.loads((tmp_path / "result.json").read_text())
    assert all(243 <= n <= 256 for n in saved["input_lens"]), saved["input_lens"]
    assert saved["backend"] == ("openai" if endpoint == "/v1/completions" else "openai-chat")
    status, report = verify_json(cli, tmp_path / "raw" / "2026-12-03-llama")
    assert status == 0, report["findings"]
    status, out, err = cli(
        "import", "vllm", str(tmp_path / "result.json"), "--raw-dir", str(tmp_path / "imp"),
        "--campaign", "2026-12-03-imported", "--arm", "llama",
    )  # fmt: skip
    assert status == 0, err
    verdicts = re.findall(r"^\s+(\S+)\s+file \S+\s+recomputed \S+\s+(\S+)$", out, re.MULTILINE)
    assert len(verdicts) >= 16 and all(v == "agrees" for _, v in verdicts), out
