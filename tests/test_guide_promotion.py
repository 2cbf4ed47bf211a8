"""docs/guides/endpoint-to-promotion.md, run as the page shows it.

Its ``plan.toml`` and ``policy.toml`` are written to an empty folder, the plan's arms
pointed at two llama-server processes (``tests/llama_server.py``; one per arm, so that the
candidate does not find the baseline's prompts in a prefix cache) by replacing their
``base_url`` and ``model`` and nothing else, and every ``$`` command of the page runs there
in order, as a subprocess, as a user would run it: its exit status and its output are
checked against the page (``tests/doc_blocks.py`` says how the page states them).

The plan's GPU and container stages (telemetry, reserve, restoration) run as on any
machine without an NVIDIA driver or a reachable container engine: ``DOCKER_HOST`` points
at a socket that does not exist, and the machine is expected to have no NVML (as CI's;
on one with an NVIDIA driver the reserve would read its cards and the gate's output would
differ from the page). They record NVML's error and the engine's, nothing is made up, and
the gate refuses on them as the page shows, beside the functional gates that the tiny
random-weight model fails. The commands whose shown result needs a GPU, the serving
containers or an OIDC identity for sigstore are marked on the page (``# needs: ...``),
shown and not run; ``NOT_RUN`` lists them, so that none stops being run unnoticed. The
promotion they lead to, with reserve and restoration evidence and a signed approval, is
what tests/test_promotion.py reaches with the NVML shim and a private sigstore instance.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

from tests import doc_blocks
from tests.conftest import ROOT
from tests.llama_server import LlamaBuild, LlamaServer

PAGE = "docs/guides/endpoint-to-promotion.md"
NOT_RUN = [
    ("ledger approve", "the evidence above and an approver's OIDC identity"),
    ("ledger decide", "the signed approval"),
    ("ledger gate", "the signed approval"),
    ("ledger sign", "an OIDC identity for sigstore"),
    ("ledger audit", "the signed statement"),
]
"""The page's commands that need what the test machine lacks, in page order."""
LEDGER = Path(sys.executable).with_name("ledger")
COMMAND_TIMEOUT_S = 600
"""Far past the run's 80 s here: a server that hangs fails the test, not the suite."""


def _page() -> tuple[dict[str, str], list[doc_blocks.Command]]:
    text = (ROOT / PAGE).read_text()
    return doc_blocks.files(text, PAGE), doc_blocks.commands(text, PAGE)


def test_the_page_shows_its_files_and_marks_only_what_cannot_run() -> None:
    files, commands = _page()
    assert sorted(files) == ["plan.toml", "policy.toml"]
    marked = [(" ".join(c.text.split()[:2]), c.needs) for c in commands if c.needs]
    assert marked == NOT_RUN
    run = [c for c in commands if c.needs is None]
    assert len(run) >= 10
    for command in run:
        assert command.text.split()[0] == "ledger", command.where
        # Each command the test runs says what it prints: nothing passes unlooked at.
        assert [line for line in command.output if line.strip() != "..."], command.where
    assert sorted({c.status for c in run}) == [0, 1]


def _write_files(folder: Path, files: dict[str, str], urls: list[str]) -> None:
    for name, text in files.items():
        if name == "plan.toml":
            replaced = doc_blocks.endpoints_replaced(text, urls, "anvil-tiny")
            # Only the endpoints moved: the plan run is the page's plan.
            shown, written = tomllib.loads(text), tomllib.loads(replaced)
            for arm, url in zip(shown["arms"], urls, strict=True):
                arm.update(base_url=url, model="anvil-tiny")
            assert written == shown
            text = replaced
        (folder / name).write_text(text)


def test_the_guide_runs_from_two_endpoints_to_the_gate_and_a_publication(
    llama_build: LlamaBuild, tmp_path: Path
) -> None:
    files, commands = _page()
    work = tmp_path / "work"
    work.mkdir()
    plan = tomllib.loads(files["plan.toml"])
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "DOCKER_HOST": f"unix://{tmp_path}/no-container-engine.sock",
        **{arm["api_key_env"]: "guide-test-key" for arm in plan["arms"] if "api_key_env" in arm},
    }
    with (
        LlamaServer(llama_build, parallel=1, log=tmp_path / "baseline.log") as baseline,
        LlamaServer(llama_build, parallel=1, log=tmp_path / "candidate.log") as candidate,
    ):
        _write_files(work, files, [baseline.base_url, candidate.base_url])
        for command in commands:
            if command.needs is not None:
                continue
            args = shlex.split(command.text)
            done = subprocess.run(
                [str(LEDGER), *args[1:]],
                cwd=work,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                check=False,
                timeout=COMMAND_TIMEOUT_S,
            )
            said = f"{command.where}: $ {command.text}\n{done.stdout[-4000:]}"
            assert done.returncode == command.status, said
            assert doc_blocks.output_matches(command.output, done.stdout), said
    assert (work / "public" / plan["campaign_id"] / "report.md").is_file()
