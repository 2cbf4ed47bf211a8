"""The rules of container evidence, one broken at a time: the memory cgroup's counters as
the kernel writes them (v1 and v2), what counts as an OOM kill, what a restart must keep,
and the plan's ``[arms.container]`` table."""

from __future__ import annotations

import copy
import os
import re
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest

from ledger.errors import InvalidArtifact
from ledger.measures import verdicts
from runners.plan import parse_plan
from runners.plan_container import ContainerSpec
from runners.probes import cgroups, containers, startup
from runners.probes.container_documents import ContainerWitness, next_gate, restoration_document
from tests.conftest import CliRun

MIB = 1 << 20


def _write(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


V1_KILLED = {
    "memory.usage_in_bytes": f"{60 * MIB}\n",
    "memory.max_usage_in_bytes": f"{64 * MIB}\n",
    "memory.limit_in_bytes": f"{64 * MIB}\n",
    "memory.failcnt": "233\n",
    "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n",
}
V2_KILLED = {
    "memory.current": f"{60 * MIB}\n",
    "memory.peak": f"{64 * MIB}\n",
    "memory.max": f"{64 * MIB}\n",
    "memory.events": "low 0\nhigh 0\nmax 41\noom 1\noom_kill 1\noom_group_kill 0\n",
}


def test_v1_and_v2_counters_read_alike(tmp_path: Path) -> None:
    v1 = cgroups.read_memory("v1", _write(tmp_path / "v1", V1_KILLED))
    v2 = cgroups.read_memory("v2", _write(tmp_path / "v2", V2_KILLED))
    assert v1 == cgroups.MemoryReading(60 * MIB, 64 * MIB, 64 * MIB, 233, 233, 1)
    assert v2 == cgroups.MemoryReading(60 * MIB, 64 * MIB, 64 * MIB, None, 41, 1)


def test_no_limit_and_a_gone_folder(tmp_path: Path) -> None:
    unlimited = {**V1_KILLED, "memory.limit_in_bytes": "9223372036854771712\n"}
    assert cgroups.read_memory("v1", _write(tmp_path / "v1", unlimited)).limit is None
    v2 = {**V2_KILLED, "memory.max": "max\n"}
    assert cgroups.read_memory("v2", _write(tmp_path / "v2", v2)).limit is None
    # Removed when the container exited: no reading, not an error.
    assert cgroups.read_memory("v1", tmp_path / "gone") is None
    assert cgroups.read_memory("v2", tmp_path / "gone") is None


def _replace(path: Path, text: str) -> None:
    """Writes ``path`` whole at once, as the kernel serves a cgroup file."""
    path.with_suffix(".new").write_text(text)
    os.replace(path.with_suffix(".new"), path)


def _readings(watch: cgroups.MemoryWatch, count: int) -> None:
    deadline = time.monotonic() + 10
    while watch.readings < count:
        assert time.monotonic() < deadline, "the watch stopped reading"
        time.sleep(0.001)


def test_a_watch_keeps_the_peak_and_the_last_counters(tmp_path: Path) -> None:
    folder = _write(tmp_path / "v1", {**V1_KILLED, "memory.max_usage_in_bytes": "0\n"})
    watch = cgroups.MemoryWatch("v1", folder, interval_s=0.001).start()
    _readings(watch, 3)
    _replace(folder / "memory.usage_in_bytes", f"{10 * MIB}\n")
    _readings(watch, watch.readings + 2)
    watch.stop()
    seen = watch.to_json()
    # Usage fell; the peak it reached stays.
    assert seen["peak_mib"] == 60.0 and seen["oom_kills"] == 1 and seen["limit_hits"] == 233
    assert watch.oom_killed and watch.at_limit


def test_a_watch_takes_the_kernel_s_own_peak(tmp_path: Path) -> None:
    # Between two readings usage rose to 64 MiB and fell back: only the kernel saw it.
    folder = _write(tmp_path / "v1", {**V1_KILLED, "memory.usage_in_bytes": f"{10 * MIB}\n"})
    watch = cgroups.MemoryWatch("v1", folder, interval_s=0.001).start()
    _readings(watch, 2)
    watch.stop()
    assert watch.to_json()["peak_mib"] == 64.0


def test_a_watch_ends_when_the_folder_goes_and_not_before(tmp_path: Path) -> None:
    folder = _write(tmp_path / "v1", V1_KILLED)
    watch = cgroups.MemoryWatch("v1", folder, interval_s=0.001).start()
    _readings(watch, 2)
    # A file caught half-written is skipped, not taken for the container's end.
    (folder / "memory.usage_in_bytes").write_text("")
    time.sleep(0.05)
    assert watch._thread.is_alive()
    _replace(folder / "memory.usage_in_bytes", f"{MIB}\n")
    _readings(watch, watch.readings + 1)
    for name in V1_KILLED:
        (folder / name).unlink()
    folder.rmdir()
    watch._thread.join(timeout=10)
    assert not watch._thread.is_alive()
    watch.stop()


@pytest.mark.parametrize(
    ("outcome", "evidence", "expected"),
    [
        ("exited", ["killed-at-limit"], "oom-killed"),
        # A worker killed and its server left waiting: not merely not ready.
        ("not-ready", ["cgroup-oom-kill"], "oom-killed"),
        ("ready", ["cgroup-oom-kill"], "ready"),
        ("exited", [], "exited"),
        ("not-ready", [], "not-ready"),
        ("start-failed", ["engine"], "start-failed"),
    ],
)
def test_oom_evidence_settles_the_outcome(outcome: str, evidence: list[str], expected: str) -> None:
    assert startup.with_oom(outcome, evidence) == expected


def test_the_environment_digest_holds_values_and_leaves_out_the_hostname() -> None:
    digest = containers.env_digest
    assert digest({"Env": ["A=1", "HOSTNAME=x"]}) == digest({"Env": ["HOSTNAME=y", "A=1"]})
    assert digest({"Env": ["A=1"]}) != digest({"Env": ["A=2"]})
    assert digest({"Env": ["A=1"]}) != digest({"Env": ["A=1", "B=1"]})
    assert digest({"Env": None}) == digest({})


def test_an_engine_that_does_not_answer_is_a_finding_not_a_traceback(tmp_path: Path) -> None:
    import docker

    client = docker.DockerClient(base_url=f"unix://{tmp_path}/gone.sock", version="1.41")
    spec = ContainerSpec("i", None, {}, (), {}, (), None)
    for attempt in (
        startup.start_and_watch(client, "c", "http://x", deadline_s=1),
        startup.start_and_watch(client, "c", "http://x", deadline_s=1, spec=spec),
    ):
        assert attempt["outcome"] == "engine-unavailable"
        assert attempt["detail"].startswith("the engine stopped answering: ConnectionError")
    assert startup.stop(client, "c").startswith("the engine stopped answering: ")
    with pytest.raises(containers.EngineUnavailable):
        containers.snapshot(client, "c")


def test_locate_refuses_what_is_not_the_container() -> None:
    with pytest.raises(cgroups.CgroupUnreadable, match="no running process"):
        cgroups.locate(0, "abc")
    # This test's own process: a cgroup, but not the container's.
    with pytest.raises(cgroups.CgroupUnreadable, match="does not name the container"):
        cgroups.locate(os.getpid(), "f" * 64)
    with pytest.raises(cgroups.CgroupUnreadable, match="not visible on this host"):
        cgroups.locate(2**22 + 7, "abc")


class _Watch(cgroups.MemoryWatch):
    def __init__(self, oom_kills: int, limit_hits: int) -> None:
        super().__init__("v1", Path("/nowhere"))
        self.last = cgroups.MemoryReading(MIB, MIB, MIB, limit_hits, limit_hits, oom_kills)


@pytest.mark.parametrize(
    ("engine_oom", "exit_code", "watch", "expected"),
    [
        (False, 0, _Watch(0, 0), []),
        # Docker Engine's word is taken as is.
        (True, 137, None, ["engine"]),
        (False, 1, _Watch(1, 0), ["cgroup-oom-kill"]),
        (False, 137, _Watch(0, 5), ["killed-at-limit"]),
        # Killed by SIGKILL without reaching the limit: someone else's kill, not memory.
        (False, 137, _Watch(0, 0), []),
        # At the limit but still running (no exit status): not killed.
        (False, None, _Watch(0, 5), []),
        (False, 137, None, []),
    ],
)
def test_oom_evidence_sources(
    engine_oom: bool, exit_code: int | None, watch: Any, expected: list[str]
) -> None:
    assert startup.oom_evidence(engine_oom, exit_code, watch) == expected


def _snapshot(started_at: str, container_id: str = "a" * 64) -> dict[str, Any]:
    return {
        "id": container_id,
        "name": "serve",
        "image_id": "sha256:" + "1" * 64,
        "command": ["/bin/serve", "--port", "8000"],
        "env_sha256": "2" * 64,
        "config_sha256": "3" * 64,
        "started_at": started_at,
        "restart_count": 0,
        "oom_killed": False,
        "state": "running",
    }


RESTORED = {
    "first_start": _snapshot("2026-12-03T10:00:00Z"),
    "stopped_at": "2026-12-03T10:05:00Z",
    "stop_error": None,
    "attempt": {"outcome": "ready", "detail": "ready after 3 probes"},
    "second_start": _snapshot("2026-12-03T10:05:01Z", "b" * 64),
    "first_request": {"ok": True, "error": None},
}


def test_a_restored_restart_has_no_failure() -> None:
    assert verdicts.restart_failures(RESTORED) == []


@pytest.mark.parametrize(
    ("path", "value", "code"),
    [
        (("stop_error",), "the engine refused to stop it", "restart-stop-failed"),
        (("attempt", "outcome"), "oom-killed", "restart-not-ready"),
        (("attempt",), None, "restart-not-ready"),
        (("second_start", "image_id"), "sha256:" + "9" * 64, "restart-image-changed"),
        (("second_start", "command"), ["/bin/serve", "--port", "8001"], "restart-command-changed"),
        (("second_start", "env_sha256"), "8" * 64, "restart-environment-changed"),
        (("first_start", "env_sha256"), None, "restart-environment-changed"),
        (("second_start", "config_sha256"), "7" * 64, "restart-config-changed"),
        (("first_request",), None, "restart-no-request"),
        (("first_request", "ok"), False, "restart-request-failed"),
        (("second_start",), None, "restart-missing-snapshot"),
        (("first_start",), None, "restart-missing-snapshot"),
    ],
)
def test_each_restart_rule_alone(path: tuple[str, ...], value: Any, code: str) -> None:
    broken = copy.deepcopy(RESTORED)
    target = broken
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    assert [f["code"] for f in verdicts.restart_failures(broken)] == [code]


def test_a_container_that_would_not_stop() -> None:
    # As restart() leaves it: no second start was tried.
    stuck = {**copy.deepcopy(RESTORED), "stop_error": "timeout", "attempt": None}
    stuck["second_start"] = None
    assert [f["code"] for f in verdicts.restart_failures(stuck)] == [
        "restart-stop-failed",
        "restart-missing-snapshot",
    ]


def test_the_restoration_document_counts_the_restart() -> None:
    plan = parse_plan(_plan('image = "localhost/i:1"', "restart = true"))
    arm, stage = plan.arms[0], plan.evidence_of("restoration")
    assert arm.container is not None and stage is not None
    witness = ContainerWitness(arm.container)
    before = (RESTORED["first_start"], "2026-12-03T09:59:00Z")
    after = (RESTORED["first_start"], "2026-12-03T10:04:59Z")
    passed = restoration_document(plan, arm, stage, witness, before, after, RESTORED)
    assert passed["passed"] is True and passed["restart"] == RESTORED
    moved = copy.deepcopy(RESTORED)
    moved["second_start"]["image_id"] = "sha256:" + "9" * 64
    refused = restoration_document(plan, arm, stage, witness, before, after, moved)
    assert refused["passed"] is False
    assert [f["code"] for f in refused["failures"]] == ["restart-image-changed"]


def test_the_same_start_is_not_a_restart() -> None:
    unmoved = copy.deepcopy(RESTORED)
    unmoved["second_start"] = copy.deepcopy(unmoved["first_start"])
    assert [f["code"] for f in verdicts.restart_failures(unmoved)] == ["not-restarted"]
    # The same start time on a new container is a restart (clocks can repeat a second).
    renamed = copy.deepcopy(unmoved)
    renamed["second_start"]["id"] = "c" * 64
    assert verdicts.restart_failures(renamed) == []


def _plan(container: str, restoration: str = "") -> dict[str, Any]:
    return tomllib.loads(
        f"""
campaign_id = "2026-12-03-rules"
[[arms]]
name = "a"
base_url = "http://127.0.0.1:8000/v1"
model = "m"
[arms.container]
name = "serve"
{container}
[[stages]]
kind = "startup"
[[stages]]
kind = "restoration"
{restoration}
"""
    )


def test_a_managed_container_as_recorded() -> None:
    plan = parse_plan(
        _plan(
            'image = "localhost/vllm:1"\ncommand = ["vllm", "serve", "m"]\n'
            'environment = { NCCL_P2P_DISABLE = "1" }\nenvironment_from = ["HF_TOKEN"]\n'
            'ports = { "8000" = "127.0.0.1:8000", "9000/udp" = 9000 }\n'
            'volumes = ["/models:/models:ro", "cache:/root/.cache"]\nmemory_limit_mib = 65536',
            "restart = true\ndeadline_s = 600",
        )
    )
    container = plan.arms[0].container
    assert container is not None and container.spec is not None
    assert container.to_json()["spec"] == {
        "image": "localhost/vllm:1",
        "command": ["vllm", "serve", "m"],
        "environment": {"NCCL_P2P_DISABLE": "1"},
        "environment_from": ["HF_TOKEN"],
        "ports": {"8000/tcp": "127.0.0.1:8000", "9000/udp": "9000"},
        "volumes": ["/models:/models:ro", "cache:/root/.cache"],
        "memory_limit_mib": 65536,
    }
    stage = plan.evidence_of("restoration")
    assert stage is not None
    assert stage.to_json() == {
        "name": "restoration",
        "kind": "restoration",
        "restart": True,
        "deadline_s": 600.0,
        "poll_s": 1.0,
    }


def test_container_settings_are_recorded_in_one_order() -> None:
    plan = parse_plan(
        _plan(
            'image = "i"\nports = { "9000" = 9000, "8000" = 8000 }\n'
            'environment_from = ["B", "A", "B"]\nmemory_limit_mib = 6'
        )
    )
    container = plan.arms[0].container
    assert container is not None and container.spec is not None
    assert list(container.spec.ports) == ["8000/tcp", "9000/tcp"]
    assert container.spec.environment_from == ("B", "A")
    assert container.spec.memory_limit_mib == 6


def test_a_plan_without_restart_records_what_it_did() -> None:
    plan = parse_plan(_plan(""))
    stage = plan.evidence_of("restoration")
    assert stage is not None and stage.to_json() == {"name": "restoration", "kind": "restoration"}
    container = plan.arms[0].container
    assert container is not None and "spec" not in container.to_json()


@pytest.mark.parametrize(
    ("container", "restoration", "message"),
    [
        ('image = ""', "", "container.image: must not be empty"),
        ('image = "i"\ncommand = []', "", "container.command: expected a non-empty list"),
        ('image = "i"\ncommand = "serve"', "", "container.command: expected a list of strings"),
        ('image = "i"\nenvironment = { "A-B" = "1" }', "", "environment.A-B: not a variable name"),
        ('image = "i"\nenvironment = { A = 1 }', "", "environment.A: expected a string, got 1"),
        ('image = "i"\nenvironment_from = ["1X"]', "", "not a variable name: '1X'"),
        (
            'image = "i"\nenvironment = { A = "1" }\nenvironment_from = ["A"]',
            "",
            "A is also set in environment",
        ),
        ('image = "i"\nports = { "http" = 8000 }', "", r"container.ports.http: expected a"),
        ('image = "i"\nports = { "8000" = 70000 }', "", r"ports.8000: expected a host port"),
        ('image = "i"\nports = { "8000" = ":8000" }', "", r"ports.8000: expected a host port"),
        ('image = "i"\nvolumes = ["/models"]', "", 'expected "SOURCE:TARGET'),
        ('image = "i"\nvolumes = ["/m:models"]', "", 'expected "SOURCE:TARGET'),
        ('image = "i"\nvolumes = ["/m:/m:rx"]', "", 'expected "SOURCE:TARGET'),
        ('image = "i"\nmemory_limit_mib = 5', "", "memory_limit_mib: must be at least 6"),
        ('image = "i"\nports = { "8000" = "300.1.1.1:8000" }', "", r"ports.8000: expected a host"),
        ('image = "i"\nvolumes = ["/a:/m", "/b:/m:ro"]', "", "volumes: /m is mounted twice"),
        ('docker_host = "bogus://x"', "", "docker_host: expected unix://, tcp://"),
        ('docker_host = "/run/docker.sock"', "", "docker_host: expected unix://, tcp://"),
        ('image = "i"\nports = { "8000" = 0 }', "", r"ports.8000: expected a host port"),
        ('image = "i"\nports = { "8000/sctp" = 8000 }', "", r"ports.8000/sctp: expected a"),
        ('image = "i"\nvolumes = [":/m"]', "", 'expected "SOURCE:TARGET'),
        ("memory_limit_mib = 1024", "", "memory_limit_mib: needs an image"),
        ('command = ["serve"]', "", "command: needs an image"),
        ("", "restart = 1", "restart: expected true or false"),
        ("", "deadline_s = 5", "deadline_s: unknown key"),
        ("", "restart = true\npoll_s = 0", "poll_s: must be > 0"),
    ],
)
def test_each_container_setting_refused_alone(
    container: str, restoration: str, message: str
) -> None:
    with pytest.raises(InvalidArtifact, match=message if "\\" in message else re.escape(message)):
        parse_plan(_plan(container, restoration))


def test_an_unset_passed_variable_is_refused_before_anything_runs(
    tmp_path: Path, cli: CliRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANVIL_NOT_SET_HERE", raising=False)
    plan = tmp_path / "plan.toml"
    plan.write_text(
        'campaign_id = "2026-12-03-env"\n[[arms]]\nname = "a"\n'
        'base_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n[arms.container]\nname = "serve"\n'
        'image = "localhost/x:1"\nenvironment_from = ["ANVIL_NOT_SET_HERE"]\n'
        '[[stages]]\nkind = "startup"\n'
    )
    status, _, err = cli("run", str(plan), "--raw-dir", str(tmp_path / "raw"))
    assert status == 1
    assert err.strip().endswith(
        "arm 'a': environment variable ANVIL_NOT_SET_HERE (container environment_from) is not set"
    )
    assert not (tmp_path / "raw").exists()
    monkeypatch.setenv("ANVIL_NOT_SET_HERE", "")
    # Set, even empty, it is passed on: the refusal was the variable's absence alone.
    status, _, err = cli("run", str(plan), "--raw-dir", str(tmp_path / "raw"))
    assert "environment_from" not in err


def _watch(states: list[str | None], **settings: Any) -> tuple[str, int, list[float]]:
    """watch_startup over probes answering ``states`` in turn, one second apart."""
    answers = iter(states)
    now = iter(float(t) for t in range(100))
    waits: list[float] = []

    def wait(seconds: float) -> bool:
        waits.append(seconds)
        return bool(settings.get("stop_after") and len(waits) >= settings["stop_after"])

    outcome, probes, _ = containers.watch_startup(
        lambda: containers.Observation("running", False, None, next(answers)),
        deadline_s=settings.get("deadline_s", 10.0),
        poll_s=settings.get("poll_s", 1.0),
        clock=lambda: next(now),
        wait=wait,
    )
    return outcome, probes, waits


def test_the_deadline_bounds_the_start() -> None:
    assert _watch(["HTTP 503", "ready"])[:2] == ("ready", 2)
    # Ready at the third probe, 3 s in, against a 2 s deadline: not ready in time.
    assert _watch(["HTTP 503", "HTTP 503", "ready"], deadline_s=2.0)[0] == "not-ready"
    # A poll longer than what is left of the deadline waits only what is left (the clock
    # reads 1 s at the first probe, 2 s at the second).
    outcome, _, waits = _watch(["HTTP 503"] * 3, deadline_s=2.5, poll_s=100.0)
    assert outcome == "not-ready" and waits == [1.5, 0.5]


def test_a_stop_ends_the_watch_at_once() -> None:
    outcome, probes, waits = _watch(["HTTP 503"] * 50, deadline_s=900.0, stop_after=2)
    assert (outcome, probes, len(waits)) == ("not-ready", 2, 2)


def test_the_progress_line_of_a_snapshot_before_the_workload() -> None:
    from runners.campaign._evidence_stages import _evidence_line

    before = {"passed": False, "failures": [{"code": "in-progress", "message": "m"}]}
    assert _evidence_line(before) == "snapshot taken before the workload"
    after = {"passed": False, "failures": [{"code": "restart-image-changed", "message": "x"}]}
    assert _evidence_line(after) == "failed: x"
    # A reserve's failures are sentences, not coded objects.
    assert _evidence_line({"passed": False, "failures": ["card 0: 2 MiB free"]}) == (
        "failed: card 0: 2 MiB free"
    )


@pytest.mark.parametrize(
    ("attempt", "expected"),
    [
        ({"outcome": "ready"}, None),
        (
            {"outcome": "oom-killed", "memory": {"limit_mib": 64.0, "peak_mib": 64.0}},
            (
                "managed host-memory containment and loader diagnosis before retry: it reached "
                "its 64 MiB limit (peak 64 MiB)"
            ),
        ),
        (
            {"outcome": "oom-killed", "memory": {"limit_mib": None, "peak_mib": None}},
            "managed host-memory containment and loader diagnosis before retry",
        ),
        (
            {"outcome": "exited", "exit_code": 1},
            "the server's exit with code 1 explained before retry",
        ),
        (
            {"outcome": "not-ready", "last_probe": "HTTP 503"},
            "readiness within 900 s (last probe: HTTP 503)",
        ),
        (
            {"outcome": "start-failed", "detail": "no image"},
            "a container the engine starts: no image",
        ),
        ({"outcome": "engine-unavailable", "detail": "gone"}, "a reachable container engine: gone"),
    ],
)
def test_each_outcome_names_its_next_gate(attempt: dict[str, Any], expected: str | None) -> None:
    assert next_gate(attempt, 900.0) == expected
