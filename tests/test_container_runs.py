"""Containers that really run, through the docker SDK against podman's Docker API: a
startup under a host-memory limit (the seed 2026-09-17 startup campaign's shape, contained),
a restart that restores the same server or is refused, and the simulator measured inside a
container.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import docker.errors
import pytest

from ledger.measures import verdicts
from ledger.promotion._decide import decide
from ledger.promotion.policy import load_policy
from runners.plan import Container, EvidenceStage, parse_plan
from runners.plan_container import ContainerSpec
from runners.probes import container_documents, containers, startup
from tests import cells
from tests.components import api_answers
from tests.conftest import CONTAINERS_GROUP, CliRun, forge_seal, run_plan_text
from tests.container_host import LOADER, ContainerHost
from tests.llama_server import LlamaBuild, free_port

pytestmark = [pytest.mark.docker, CONTAINERS_GROUP]

WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def _contained_arm(
    host: ContainerHost,
    name: str,
    port: int,
    command: list[str],
    *,
    arm: str,
    model: str,
    limit_mib: int,
    volumes: list[str] | None = None,
    image: str | None = None,
    ready_url: str | None = None,
) -> str:
    """An arm served from a managed container whose port 8080 is published on ``port``."""
    ready = f'ready_url = "{ready_url}"\n' if ready_url else ""
    return f"""
[[arms]]
name = "{arm}"
base_url = "http://127.0.0.1:{port}/v1"
model = "{model}"
[arms.container]
name = "{name}"
docker_host = "{host.podman.socket}"
{ready}image = "{image or host.image}"
command = {_toml_list(command)}
volumes = {_toml_list(volumes or host.python_volumes())}
ports = {{ "8080" = "127.0.0.1:{port}" }}
memory_limit_mib = {limit_mib}
"""


def _loader_plan(host: ContainerHost, name: str, port: int, limit_mib: int) -> str:
    command = [sys.executable, str(LOADER), "200", "8080"]
    arm = _contained_arm(
        host, name, port, command, arm="candidate", model="loader", limit_mib=limit_mib
    )
    return f"""
campaign_id = "2026-12-03-loader-startup"
{arm}
[[stages]]
kind = "startup"
deadline_s = 60
poll_s = 0.2
"""


@pytest.fixture
def engine(container_host: ContainerHost) -> Iterator[Any]:
    client = containers.connect(container_host.podman.socket)
    yield client
    client.close()


@pytest.fixture
def name(engine: Any, request: pytest.FixtureRequest) -> Iterator[str]:
    """A container name of this test's own, removed afterwards."""
    chosen = f"anvil-{WORKER}-{request.node.name[:30].replace('_', '-')}".lower()
    yield chosen
    startup.remove_managed(engine, chosen)


def test_a_loader_past_its_limit_is_oom_killed_and_the_host_lives(
    container_host: ContainerHost, name: str, tmp_path: Path
) -> None:
    bystander = subprocess.Popen(["sleep", "300"])
    try:
        port = free_port()
        plan = _loader_plan(container_host, name, port, limit_mib=64)
        result, campaign = run_plan_text(plan, tmp_path / "raw")
        attempt = json.loads((campaign / "candidate/startup.json").read_text())
        # Contained: the kernel killed the loader inside its cgroup, not this process or
        # another on the host, as the seed's global OOM killer did.
        assert bystander.poll() is None
    finally:
        bystander.kill()
    assert attempt["outcome"] == "oom-killed" and attempt["passed"] is False, attempt["detail"]
    # The cgroup's own counters tell, whatever the engine says (podman on cgroup v1 says
    # OOMKilled false).
    assert {"cgroup-oom-kill", "killed-at-limit"} & set(attempt["oom_evidence"])
    assert attempt["exit_code"] == startup.KILLED
    memory = attempt["memory"]
    assert memory["readable"] is True and memory["limit_mib"] == 64
    assert 32 <= memory["peak_mib"] <= 64 and memory["limit_hits"] > 0
    assert attempt["memory_limit_mib"] == 64 and attempt["time_to_ready_s"] is None
    assert attempt["next_gate"].startswith("managed host-memory containment and loader")
    assert result.complete is True
    assert result.not_started == (f"arm 'candidate' startup: oom-killed ({attempt['detail']})",)
    decided = decide(campaign, load_policy())
    decision = decided.summary["decision"]
    assert decision["promotion_authorized"] is False
    assert decision["next_gate"] == attempt["next_gate"]
    assert decided.summary["failures"][0].startswith("candidate startup: oom-killed")


def test_the_same_loader_under_a_larger_limit_is_ready(
    container_host: ContainerHost, name: str, tmp_path: Path
) -> None:
    port = free_port()
    plan = _loader_plan(container_host, name, port, limit_mib=512)
    _, campaign = run_plan_text(plan, tmp_path / "raw")
    attempt = json.loads((campaign / "candidate/startup.json").read_text())
    assert attempt["outcome"] == "ready" and attempt["passed"] is True, attempt["detail"]
    assert attempt["oom_evidence"] == [] and attempt["next_gate"] is None
    # From the engine's start: the loader's second of start-up and its 200 MiB, not the
    # container's creation, which elapsed_s counts too.
    assert 1.0 < attempt["time_to_ready_s"] < attempt["elapsed_s"]
    memory = attempt["memory"]
    # The loader holds 200 MiB before it answers: the peak shows it, under the limit.
    assert 200 <= memory["peak_mib"] < 512 and memory["oom_kills"] == 0
    assert attempt["after"]["state"] == "running"
    assert attempt["after"]["labels"] == {startup.MANAGED_LABEL: "2026-12-03-loader-startup"}
    assert attempt["after"]["image"] == container_host.image


def _simulator_plan(host: ContainerHost, name: str, port: int, *, image: str | None = None) -> str:
    command = [str(Path(sys.prefix) / "bin" / "ledger"), "simulate", "--host", "0.0.0.0"]
    command += ["--port", "8080"]
    arm = _contained_arm(
        host, name, port, command, arm="candidate", model="anvil-sim", limit_mib=512, image=image
    )
    return f"""
campaign_id = "2026-12-03-contained-simulator"
{arm}
[[stages]]
kind = "startup"
deadline_s = 60
poll_s = 0.2
[[stages]]
kind = "capacity"
context_targets = [256]
concurrency = [2]
requests = 6
max_tokens = 16
[[stages]]
kind = "restoration"
restart = true
deadline_s = 60
poll_s = 0.2
"""


@pytest.fixture(scope="module")
def contained_campaign(
    container_host: ContainerHost, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    """The simulator served from a container: started, measured, restarted, asked again."""
    client = containers.connect(container_host.podman.socket)
    chosen = f"anvil-{WORKER}-contained-sim"
    try:
        plan = _simulator_plan(container_host, chosen, free_port())
        result, campaign = run_plan_text(plan, tmp_path_factory.mktemp("contained") / "raw")
        assert result.complete is True
        yield campaign
    finally:
        startup.remove_managed(client, chosen)
        client.close()


def test_the_simulator_is_measured_inside_its_container(contained_campaign: Path) -> None:
    attempt = json.loads((contained_campaign / "candidate/startup.json").read_text())
    assert attempt["outcome"] == "ready", attempt["detail"]
    identity = attempt["after"]
    assert identity["state"] == "running" and len(identity["id"]) == 64
    assert re.fullmatch(r"(sha256:)?[0-9a-f]{64}", identity["image_id"])
    assert attempt["memory"]["peak_mib"] > 10 and attempt["memory"]["oom_kills"] == 0
    cell_run = contained_campaign / "candidate/capacity/ctx256-c2-nothink.json"
    cell = json.loads(cell_run.read_text())
    assert cell["status"] == "complete" and cell["records"] == 6
    assert cell["endpoint"]["simulated"] is False
    part = cell_run.with_name("ctx256-c2-nothink.part-0001.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in part]
    assert len(records) == 6 and all(r.get("error") is None for r in records)
    # Served from the container: its /metrics counted these requests.
    served = cell["metrics"]["after"]['vllm:request_success_total{model_name="anvil-sim"}']
    assert (
        served - cell["metrics"]["before"]['vllm:request_success_total{model_name="anvil-sim"}']
        >= 6
    )
    manifest = json.loads((contained_campaign / "run-manifest.json").read_text())
    assert manifest["complete"] is True


def test_a_real_restart_is_restoration_evidence_the_gate_accepts(
    contained_campaign: Path,
) -> None:
    document = json.loads((contained_campaign / "candidate/restoration.json").read_text())
    assert document["passed"] is True and document["failures"] == []
    restart = document["restart"]
    first, second = restart["first_start"], restart["second_start"]
    # Created again from the plan: a new container, the same server.
    assert first["id"] != second["id"] and first["name"] == second["name"]
    assert first["started_at"] < second["started_at"]
    for same in ("image_id", "command", "env_sha256", "config_sha256"):
        assert first[same] == second[same], same
    assert restart["attempt"]["outcome"] == "ready" and restart["attempt"]["time_to_ready_s"] > 0
    request = restart["first_request"]
    assert request["ok"] is True and request["completion_tokens"] > 0
    assert request["sent_at"] > restart["stopped_at"]
    decided = decide(contained_campaign, load_policy())
    gates = {g["name"]: g for g in decided.summary["gates"]}
    assert gates["candidate restoration"]["passed"] is True
    assert "stopped and started again" in gates["candidate restoration"]["detail"]
    unmet = {u["rule"] for u in decided.summary["decision"]["unmet"]}
    assert "restoration" not in unmet
    assert "exact-restoration" in decided.summary["decision"]["evidence_labels"]


def _started(
    host: ContainerHost, name: str, image: str
) -> tuple[container_documents.ContainerWitness, Any, str]:
    """The contained simulator started from ``image``: its witness, restoration stage and
    readiness URL."""
    port = free_port()
    plan = parse_plan(tomllib.loads(_simulator_plan(host, name, port, image=image)))
    container = plan.arms[0].container
    assert container is not None
    witness = container_documents.ContainerWitness(container)
    stage = plan.evidence_of("restoration")
    ready_url = f"http://127.0.0.1:{port}/v1/models"
    assert witness.start(ready_url, stage.settings, plan.campaign_id)["outcome"] == "ready"
    return witness, stage, ready_url


def _codes(restarted: dict[str, Any]) -> set[str]:
    return {f["code"] for f in verdicts.restart_failures(restarted)}


def test_a_restart_onto_another_image_digest_is_refused(
    container_host: ContainerHost, name: str
) -> None:
    tag = f"localhost/anvil-moving-{WORKER}:test"
    first_id = container_host.import_image(tag, "first build")
    witness, stage, ready_url = _started(container_host, name, tag)
    try:
        # The tag moves while the server runs, as a pull of ":latest" moves it.
        second_id = container_host.import_image(tag, "second build")
        assert second_id != first_id
        restarted = container_documents.restart(
            witness, ready_url, stage, "2026-12-03-x", witness.snapshot()
        )
    finally:
        witness.close()
    assert restarted["attempt"]["outcome"] == "ready"
    assert restarted["first_start"]["image_id"].endswith(first_id.removeprefix("sha256:"))
    assert restarted["second_start"]["image_id"].endswith(second_id.removeprefix("sha256:"))
    codes = _codes(restarted)
    assert "restart-image-changed" in codes
    assert not codes & {"restart-command-changed", "restart-environment-changed"}


def test_a_restart_with_other_arguments_is_refused(
    container_host: ContainerHost, name: str
) -> None:
    witness, stage, ready_url = _started(container_host, name, container_host.image)
    container = witness.container
    assert container.spec is not None and container.spec.command is not None
    # Started again by hand with one more flag: another server than the one measured.
    other = attrs.evolve(
        container, spec=attrs.evolve(container.spec, command=(*container.spec.command, "-v"))
    )
    relaunch = container_documents.ContainerWitness(other)
    try:
        restarted = container_documents.restart(
            relaunch, ready_url, stage, "2026-12-03-x", relaunch.snapshot()
        )
    finally:
        witness.close()
        relaunch.close()
    assert restarted["attempt"]["outcome"] == "ready"
    codes = _codes(restarted)
    assert {"restart-command-changed", "restart-config-changed"} <= codes
    assert "restart-image-changed" not in codes
    assert restarted["second_start"]["command"][-1] == "-v"


def test_an_existing_container_restarts_in_place(
    container_host: ContainerHost, engine: Any, name: str
) -> None:
    """A container ledger did not create is stopped and started again, never replaced."""
    port = free_port()
    volumes = {
        v.split(":")[0]: {"bind": v.split(":")[1], "mode": "ro"}
        for v in container_host.python_volumes()
    }
    engine.containers.create(
        container_host.image,
        [sys.executable, str(LOADER), "8", "8080"],
        name=name,
        ports={"8080/tcp": ("127.0.0.1", port)},
        volumes=volumes,
        environment={"HF_TOKEN": "hf_not-a-real-secret-value"},
    )
    try:
        witness = container_documents.ContainerWitness(
            Container(name, container_host.podman.socket, None)
        )
        ready_url = f"http://127.0.0.1:{port}/health"
        timing = {"deadline_s": 60.0, "poll_s": 0.2}
        assert witness.start(ready_url, timing, "2026-12-03-x")["outcome"] == "ready"
        stage = EvidenceStage("restoration", "restoration", {"restart": True, **timing})
        restarted = container_documents.restart(
            witness, ready_url, stage, "2026-12-03-x", witness.snapshot()
        )
        witness.close()
    finally:
        engine.containers.get(name).remove(force=True)
    first, second = restarted["first_start"], restarted["second_start"]
    assert first["id"] == second["id"] and first["started_at"] < second["started_at"]
    assert first["env_sha256"] == second["env_sha256"]
    assert "hf_not-a-real-secret-value" not in json.dumps(restarted)
    # Restored in every way a snapshot shows; no request was sent here.
    assert _codes(restarted) == {"restart-no-request"}


def test_llama_server_is_measured_inside_its_container(
    container_host: ContainerHost, llama_build: LlamaBuild, name: str, tmp_path: Path
) -> None:
    port = free_port()
    command = [
        str(llama_build.binary),
        *("--model", str(llama_build.model), "--host", "0.0.0.0", "--port", "8080"),
        *("--ctx-size", "4096", "--parallel", "2", "--threads", "1", "--jinja", "--metrics"),
        *("--reasoning-format", "deepseek", "--alias", "anvil-tiny"),
    ]
    volumes = container_host.python_volumes(llama_build.binary.parent.parent)
    arm = _contained_arm(
        container_host,
        name,
        port,
        command,
        arm="llama",
        model="anvil-tiny",
        limit_mib=2048,
        volumes=volumes,
        ready_url=f"http://127.0.0.1:{port}/health",
    )
    plan = f"""
campaign_id = "2026-12-03-contained-llama"
[deadlines]
first_byte_s = 120
idle_s = 30
{arm}
[[stages]]
kind = "startup"
deadline_s = 120
poll_s = 0.2
[[stages]]
kind = "capacity"
context_targets = [512]
concurrency = [1, 2]
requests = 4
max_tokens = 8
[[stages]]
kind = "restoration"
restart = true
deadline_s = 120
poll_s = 0.2
"""
    result, campaign = run_plan_text(plan, tmp_path / "raw")
    assert result.complete is True
    attempt = json.loads((campaign / "llama/startup.json").read_text())
    assert attempt["outcome"] == "ready", (attempt["detail"], attempt["log_tail"])
    assert attempt["after"]["command"][0] == str(llama_build.binary)
    # The model's weights and llama.cpp's buffers, counted by the container's own cgroup.
    assert attempt["memory"]["peak_mib"] > 5 and attempt["memory"]["limit_mib"] == 2048
    for path in sorted(campaign.glob("llama/capacity/ctx*.json")):
        cell = cells.load(path)
        assert cell["status"] == "complete", path.name
        assert [r["error"] for r in cell["requests"]] == [None] * len(cell["requests"])
        for record in cell["requests"]:
            # llama.cpp's own tokenizer and timings: a peer, not our simulator.
            assert 0.98 * 512 <= record["usage"]["prompt_tokens"] <= 512
            assert record["usage"]["completion_tokens"] == 8
            assert record["server_timings"]["predicted_n"] == 8
    restoration = json.loads((campaign / "llama/restoration.json").read_text())
    assert restoration["passed"] is True, restoration["failures"]
    assert restoration["restart"]["first_request"]["ok"] is True


def test_the_gate_recomputes_a_restart_rather_than_trusting_passed(
    contained_campaign: Path, tmp_path: Path
) -> None:
    campaign = tmp_path / contained_campaign.name
    shutil.copytree(contained_campaign, campaign)
    path = campaign / "candidate/restoration.json"
    document = json.loads(path.read_text())
    # Edited by hand: another image at the second start, still claiming to pass.
    document["restart"]["second_start"]["image_id"] = "sha256:" + "9" * 64
    assert document["passed"] is True
    path.write_text(json.dumps(document))
    forge_seal(campaign)
    decided = decide(campaign, load_policy())
    gate = {g["name"]: g for g in decided.summary["gates"]}["candidate restoration"]
    assert gate["passed"] is False
    assert gate["detail"].startswith("restart-image-changed: the restart changed the image")
    assert "restoration" in {u["rule"] for u in decided.summary["decision"]["unmet"]}


def test_an_engine_that_goes_away_mid_start_is_engine_unavailable(
    container_host: ContainerHost, engine: Any, name: str
) -> None:
    """A second API service on the same storage, stopped once the container runs."""
    podman = container_host.podman
    socket = Path(tempfile.mkdtemp(prefix="anvil-alt-", dir="/tmp")) / "alt.sock"
    service = subprocess.Popen(
        [*podman.base, "system", "service", "--time=0", f"unix://{socket}"],
        env=podman.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def stop_when_running() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(docker.errors.NotFound):
                if engine.containers.get(name).status == "running":
                    break
            time.sleep(0.05)
        service.terminate()

    try:
        deadline = time.monotonic() + 30
        while not api_answers(socket):
            assert service.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        client = containers.connect(f"unix://{socket}")
        spec = ContainerSpec(container_host.image, ("/bin/sleep", "300"), {}, (), {}, (), 64)
        stopper = threading.Thread(target=stop_when_running)
        stopper.start()
        # Never ready (nothing listens): only the engine's answers end the watch.
        attempt = startup.start_and_watch(
            client, name, "http://127.0.0.1:9/health", deadline_s=60, poll_s=0.2, spec=spec
        )
        stopper.join()
        client.close()
    finally:
        service.kill()
        service.wait()
        shutil.rmtree(socket.parent, ignore_errors=True)
    assert attempt["outcome"] == "engine-unavailable", attempt
    assert attempt["detail"].startswith("the engine stopped answering: ")
    assert len(attempt["detail"].splitlines()) == 1


def test_a_server_that_exits_names_its_code_and_its_log_keeps_no_passed_secret(
    container_host: ContainerHost,
    name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cli: CliRun,
) -> None:
    secret = "hf_aVeryPrivateTokenValue0123456789"
    monkeypatch.setenv("ANVIL_TEST_TOKEN", secret)
    port = free_port()
    arm = _contained_arm(
        container_host,
        name,
        port,
        ["/bin/sh", "-c", "echo starting with $ANVIL_TEST_TOKEN; env; exit 3"],
        arm="candidate",
        model="m",
        limit_mib=64,
    ).replace("memory_limit_mib", 'environment_from = ["ANVIL_TEST_TOKEN"]\nmemory_limit_mib')
    plan = f"""
campaign_id = "2026-12-03-exits"
{arm}
[[stages]]
kind = "startup"
deadline_s = 60
poll_s = 0.2
"""
    plan_file = tmp_path / "plan.toml"
    plan_file.write_text(plan)
    status, _, err = cli("run", str(plan_file), "--raw-dir", str(tmp_path / "raw"))
    # Nothing else to run, yet the server never came up: the run says so, and fails.
    assert status == 1
    assert err.strip().splitlines()[-1] == (
        "ledger run: arm 'candidate' startup: exited (exited with code 3 before it was ready)"
    )
    campaign = tmp_path / "raw/2026-12-03-exits"
    text = (campaign / "candidate/startup.json").read_text()
    attempt = json.loads(text)
    assert attempt["outcome"] == "exited" and attempt["exit_code"] == 3, attempt["detail"]
    assert attempt["oom_evidence"] == []
    assert attempt["next_gate"] == "the server's exit with code 3 explained before retry"
    assert "starting with <ANVIL_TEST_TOKEN>" in attempt["log_tail"]
    assert "ANVIL_TEST_TOKEN=<ANVIL_TEST_TOKEN>" in attempt["log_tail"]
    assert secret not in text
    assert all(secret not in p.read_text() for p in campaign.rglob("*.json"))


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_signal_during_a_start_ends_the_run_at_once(
    container_host: ContainerHost, engine: Any, name: str, tmp_path: Path, signum: int, status: int
) -> None:
    port = free_port()
    arm = _contained_arm(
        container_host, name, port, ["/bin/sleep", "300"], arm="candidate", model="m", limit_mib=64
    )
    plan = tmp_path / "plan.toml"
    plan.write_text(f'campaign_id = "2026-12-03-stopped"\n{arm}\n[[stages]]\nkind = "startup"\n')
    process = subprocess.Popen(
        [sys.executable, "-m", "ledger", "run", str(plan), "--raw-dir", str(tmp_path / "raw")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while True:
        assert time.monotonic() < deadline and process.poll() is None
        with contextlib.suppress(docker.errors.NotFound):
            if engine.containers.get(name).status == "running":
                break
        time.sleep(0.05)
    signalled = time.monotonic()
    process.send_signal(signum)
    _, err = process.communicate(timeout=60)
    # Not after the start's 900 s deadline: the watch ends with the run.
    assert time.monotonic() - signalled < 20
    assert process.returncode == status, err.decode()
    assert "--resume" in err.decode()
    assert not (tmp_path / "raw/2026-12-03-stopped/candidate/startup.json").exists()


def test_a_running_container_of_another_campaign_is_left_alone(
    container_host: ContainerHost, engine: Any, name: str
) -> None:
    port = free_port()
    spec = ContainerSpec(
        container_host.image,
        (sys.executable, str(LOADER), "8", "8080"),
        {},
        (),
        {"8080/tcp": f"127.0.0.1:{port}"},
        tuple(container_host.python_volumes()),
        64,
    )
    url = f"http://127.0.0.1:{port}/health"

    def start(campaign_id: str) -> dict[str, Any]:
        return startup.start_and_watch(
            engine, name, url, deadline_s=60, poll_s=0.2, spec=spec, campaign_id=campaign_id
        )

    assert start("2026-12-03-a")["outcome"] == "ready"
    serving = engine.containers.get(name).id
    refused = start("2026-12-03-b")
    assert refused["outcome"] == "start-failed"
    assert refused["detail"] == (
        f"a container named {name!r} runs for campaign 2026-12-03-a: stop it, or name "
        "another container in the plan"
    )
    assert engine.containers.get(name).id == serving
    assert engine.containers.get(name).status == "running"
    # Its own campaign's is replaced (a run repeated), and so is a stopped one of another.
    assert start("2026-12-03-a")["outcome"] == "ready"
    assert engine.containers.get(name).id != serving
    engine.containers.get(name).stop(timeout=10)
    assert start("2026-12-03-b")["outcome"] == "ready"
    assert engine.containers.get(name).labels[startup.MANAGED_LABEL] == "2026-12-03-b"
