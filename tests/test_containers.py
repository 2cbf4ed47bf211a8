"""Container evidence through the docker SDK, against podman's Docker-compatible API.

Containers here are created from a one-file image that no engine can start (its command is
not in it): snapshots, restoration differences and the engine's refusal. The classification
of a start is fed real inspect output with its state changed, one state at a time;
containers that really run are in ``test_container_runs.py``.
"""

from __future__ import annotations

import contextlib
import copy
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker.errors
import pytest

from ledger.measures.verdicts import restoration_failures
from runners.plan_container import ContainerSpec
from runners.probes import containers, startup
from tests.components import TINY_IMAGE, Podman

pytestmark = pytest.mark.docker


@pytest.fixture
def engine(podman: Podman) -> Iterator[Any]:
    client = containers.connect(podman.socket)
    yield client
    client.close()


@pytest.fixture
def created(engine: Any, podman: Podman, request: pytest.FixtureRequest) -> Iterator[str]:
    name = f"anvil-{request.node.name[:40].replace('_', '-')}".lower()
    container = _create(podman, engine, name)
    yield name
    with contextlib.suppress(docker.errors.NotFound):
        container.remove(force=True)


def _create(podman: Podman, engine: Any, name: str, **extra: Any) -> Any:
    settings: dict[str, Any] = {
        "command": ["/bin/serve", "--port", "8001"],
        "environment": {"HF_TOKEN": "hf_not-a-real-secret-value", "NCCL_P2P_DISABLE": "1"},
        "labels": {"anvil.role": "serving"},
    }
    settings.update(extra)
    return podman.fresh_container(engine, name, **settings)


def test_snapshot_records_identity_and_state_but_no_variable_value(
    engine: Any, created: str
) -> None:
    snap = containers.snapshot(engine, created)
    assert snap["name"] == created
    assert len(snap["id"]) == 64
    assert snap["image_id"].startswith("sha256:") or len(snap["image_id"]) == 64
    assert snap["image"] == TINY_IMAGE
    assert snap["command"] == ["/bin/serve", "--port", "8001"]
    assert {"HF_TOKEN", "NCCL_P2P_DISABLE"} <= set(snap["env_names"])
    assert snap["labels"] == {"anvil.role": "serving"}
    assert snap["state"] == "created"
    assert snap["restart_count"] == 0 and snap["oom_killed"] is False
    assert snap["started_at"] is None
    assert len(snap["config_sha256"]) == 64
    assert "not-a-real-secret" not in repr(snap)


def test_unchanged_container_restores(engine: Any, created: str) -> None:
    before = containers.snapshot(engine, created)
    after = containers.snapshot(engine, created)
    assert restoration_failures(before, after) == []


def test_replaced_container_is_a_named_failure(engine: Any, podman: Podman, created: str) -> None:
    before = containers.snapshot(engine, created)
    _create(podman, engine, created, environment={"HF_TOKEN": "x", "EXTRA": "1"})
    after = containers.snapshot(engine, created)
    codes = [f["code"] for f in restoration_failures(before, after)]
    assert codes == ["container-replaced", "config-changed"]


def test_value_change_alone_keeps_the_config_digest(
    engine: Any, podman: Podman, created: str
) -> None:
    before = containers.snapshot(engine, created)
    _create(podman, engine, created, environment={"HF_TOKEN": "other", "NCCL_P2P_DISABLE": "0"})
    after = containers.snapshot(engine, created)
    # Names only: a changed value is not seen (the price of never recording values).
    assert after["config_sha256"] == before["config_sha256"]
    assert [f["code"] for f in restoration_failures(before, after)] == ["container-replaced"]


def test_restarts_oom_and_state_are_named(engine: Any, created: str) -> None:
    before = containers.snapshot(engine, created)
    after = copy.deepcopy(before)
    after.update(restart_count=2, oom_killed=True, state="exited")
    codes = [f["code"] for f in restoration_failures(before, after)]
    assert codes == ["restarted", "oom-killed", "state-changed"]
    assert [f["code"] for f in restoration_failures(before, None)] == ["container-missing"]


def test_missing_container_and_missing_engine(engine: Any, tmp_path: Any) -> None:
    with pytest.raises(LookupError, match="no container 'anvil-nowhere'"):
        containers.snapshot(engine, "anvil-nowhere")
    with pytest.raises(containers.EngineUnavailable):
        containers.connect(f"unix://{tmp_path}/no.sock")


def test_engine_refusing_to_start_is_start_failed(engine: Any, created: str) -> None:
    # /bin/serve is not in the image: every engine refuses to start it.
    attempt = startup.start_and_watch(
        engine, created, "http://127.0.0.1:9/v1/models", deadline_s=5, poll_s=0.1
    )
    assert attempt["outcome"] == "start-failed"
    assert attempt["detail"].startswith("the engine refused to start it")
    assert (
        startup.start_and_watch(engine, "anvil-nowhere", "http://x", deadline_s=1)["outcome"]
        == "start-failed"
    )


class _Ready(http.server.BaseHTTPRequestHandler):
    status = 503

    def do_GET(self) -> None:
        self.send_response(type(self).status)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def readiness() -> Iterator[tuple[str, type[_Ready]]]:
    handler = type("Handler", (_Ready,), {"status": 503})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1/models", handler
    server.shutdown()
    server.server_close()


def _observer(engine: Any, name: str, url: str, **state: Any) -> Any:
    """Real inspect output of the container, its state set as a started one would show."""

    def observe() -> containers.Observation:
        attrs_ = engine.containers.get(name).attrs
        current = {**attrs_["State"], **state}
        running = current["Status"] == "running"
        return containers.Observation(
            current["Status"],
            bool(current["OOMKilled"]),
            current["ExitCode"],
            containers.probe_ready(url) if running else None,
        )

    return observe


def test_startup_classification(
    engine: Any, created: str, readiness: tuple[str, type[_Ready]]
) -> None:
    url, handler = readiness
    clock = iter(range(1000))

    def watch(**state: Any) -> tuple[str, int, containers.Observation]:
        return containers.watch_startup(
            _observer(engine, created, url, **state),
            deadline_s=3,
            clock=lambda: float(next(clock)),
            wait=lambda _: False,
        )

    outcome, probes, last = watch(Status="running")
    assert (outcome, last.probe) == ("not-ready", "HTTP 503")
    assert probes >= 2
    handler.status = 200
    assert watch(Status="running")[0] == "ready"
    assert watch(Status="exited", ExitCode=137)[0] == "exited"
    assert watch(Status="exited", ExitCode=137, OOMKilled=True)[0] == "oom-killed"
    unreachable = containers.probe_ready("http://127.0.0.1:9/v1/models", timeout_s=1)
    assert unreachable.startswith("ConnectError")


def _spec(**changes: Any) -> ContainerSpec:
    settings: dict[str, Any] = {
        "image": TINY_IMAGE,
        "command": ("/bin/serve",),
        "environment": {},
        "environment_from": (),
        "ports": {},
        "volumes": (),
        "memory_limit_mib": 64,
    }
    settings.update(changes)
    return ContainerSpec(**settings)


def test_a_container_ledger_did_not_create_is_never_replaced(engine: Any, created: str) -> None:
    before = containers.snapshot(engine, created)
    attempt = startup.start_and_watch(
        engine, created, "http://127.0.0.1:9/v1/models", deadline_s=1, spec=_spec()
    )
    assert attempt["outcome"] == "start-failed"
    assert "exists and ledger did not create it" in attempt["detail"]
    assert containers.snapshot(engine, created) == before


def test_a_managed_container_is_created_from_the_plan_and_replaced(
    engine: Any, created: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    engine.containers.get(created).remove(force=True)
    monkeypatch.setenv("ANVIL_PASSED", "from-ledger")
    spec = _spec(
        environment={"NCCL_P2P_DISABLE": "1"},
        environment_from=("ANVIL_PASSED",),
        ports={"8000/tcp": "127.0.0.1:18123", "9000/tcp": "18124"},
        volumes=(f"{tmp_path}:/models:ro", f"{tmp_path}:/cache"),
    )
    ids = []
    for _ in range(2):
        # /bin/serve is not in the tiny image: created, then refused at the start.
        attempt = startup.start_and_watch(
            engine,
            created,
            "http://127.0.0.1:9/v1/models",
            deadline_s=1,
            spec=spec,
            campaign_id="c",
        )
        assert attempt["detail"].startswith("the engine refused to start it"), attempt
        made = engine.containers.get(created)
        assert made.labels[startup.MANAGED_LABEL] == "c"
        assert made.attrs["HostConfig"]["Memory"] == 64 << 20
        assert {"NCCL_P2P_DISABLE=1", "ANVIL_PASSED=from-ledger"} <= set(
            made.attrs["Config"]["Env"]
        )
        # Published where the plan says: loopback only when it says so.
        assert made.attrs["HostConfig"]["PortBindings"] == {
            "8000/tcp": [{"HostIp": "127.0.0.1", "HostPort": "18123"}],
            "9000/tcp": [{"HostIp": "", "HostPort": "18124"}],
        }
        mounts = {m["Destination"]: m["RW"] for m in made.attrs["Mounts"]}
        assert mounts == {"/models": False, "/cache": True}
        ids.append(made.id)
    # The second attempt replaced the first container: ledger created it.
    assert ids[0] != ids[1]


def test_a_managed_start_refused_before_anything_is_created(
    engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANVIL_UNSET_VARIABLE", raising=False)
    name = "anvil-refused-before-creating"
    for spec, reason in (
        (
            _spec(environment_from=("ANVIL_UNSET_VARIABLE",)),
            "environment variable ANVIL_UNSET_VARIABLE (environment_from) is not set",
        ),
        (
            _spec(image="localhost/anvil-absent:none"),
            # No registry answers for localhost: the pull fails, and says why.
            "image 'localhost/anvil-absent:none' is not on the engine and could not be pulled: ",
        ),
    ):
        attempt = startup.start_and_watch(engine, name, "http://x", deadline_s=1, spec=spec)
        assert attempt["outcome"] == "start-failed"
        assert attempt["detail"].startswith(reason) and len(attempt["detail"].splitlines()) == 1
        with pytest.raises(docker.errors.NotFound):
            engine.containers.get(name)


def test_a_port_already_answering_is_not_taken_for_the_start(
    engine: Any, created: str, readiness: tuple[str, type[_Ready]]
) -> None:
    url, handler = readiness
    handler.status = 200
    engine.containers.get(created).remove(force=True)
    attempt = startup.start_and_watch(engine, created, url, deadline_s=5, spec=_spec())
    assert attempt["outcome"] == "start-failed"
    assert attempt["detail"] == (
        f"{url} answers before the container starts: another server holds its port, and "
        "its readiness would be taken for this one's"
    )
    # Created from the plan, never started.
    assert engine.containers.get(created).status == "created"
