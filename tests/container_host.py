"""Containers that really run, started through podman's Docker-compatible API.

No image registry is reachable from the test machines, so the image is built here: the
static ``busybox`` (Debian's ``busybox-static``) in an otherwise empty root filesystem,
imported with ``podman import``. A server runs in it from the host's own files, mounted
read-only: the host's Python (with this checkout and its virtual environment) for the
simulator and the test loader, the llama-server build for llama.cpp.

Where containers cannot start (no busybox, an engine that refuses), the tests that need
them skip with the engine's reason, except in CI, where they fail.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from tests.components import Podman, missing

BUSYBOX_IMAGE = "localhost/anvil-busybox:test"
ROOT = Path(__file__).resolve().parent.parent
LOADER = Path(__file__).resolve().parent / "container_loader.py"
_APPLETS = ("sh", "true", "sleep", "cat", "ls", "env")


def rootfs(busybox: Path, marker: str = "") -> bytes:
    """A root filesystem holding ``/bin/busybox`` and its applet links (and ``/etc/marker``
    when given: another marker, another image digest)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for folder in ("bin", "etc", "tmp", "proc", "sys", "dev"):
            info = tarfile.TarInfo(folder)
            info.type = tarfile.DIRTYPE
            info.mode = 0o1777 if folder == "tmp" else 0o755
            tar.addfile(info)
        data = busybox.read_bytes()
        info = tarfile.TarInfo("bin/busybox")
        info.size, info.mode = len(data), 0o755
        tar.addfile(info, io.BytesIO(data))
        for applet in _APPLETS:
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type, link.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(link)
        if marker:
            payload = marker.encode()
            info = tarfile.TarInfo("etc/marker")
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    return buffer.getvalue()


def _outermost(paths: list[Path]) -> list[Path]:
    """The paths that exist, without one inside another (as named: ``/lib`` may be a link
    into ``/usr``, and the image needs the name)."""
    kept: list[Path] = []
    for path in sorted({p.absolute() for p in paths if p.exists()}):
        if not any(path.is_relative_to(k) for k in kept):
            kept.append(path)
    return kept


@attrs.frozen
class ContainerHost:
    """An engine that starts containers, and the busybox image they run from."""

    podman: Podman
    busybox: Path
    image: str = BUSYBOX_IMAGE

    def import_image(self, tag: str, marker: str) -> str:
        """Imports another busybox image under ``tag``; its image id."""
        with tempfile.NamedTemporaryFile(suffix=".tar") as tarball:
            tarball.write(rootfs(self.busybox, marker))
            tarball.flush()
            result = subprocess.run(
                [*self.podman.base, "import", "--quiet", tarball.name, tag],
                capture_output=True,
                text=True,
                check=False,
                env=self.podman.env,
            )
        if result.returncode != 0:
            pytest.fail(f"podman import failed: {result.stderr.strip()}")
        return result.stdout.strip()

    def python_volumes(self, *extra: Path) -> list[str]:
        """Read-only mounts that let the host's Python, this checkout and its virtual
        environment run inside the image, each at its own path."""
        paths = [Path("/usr"), Path("/lib"), Path("/lib64"), Path(sys.base_prefix)]
        paths += [Path(sys.prefix), ROOT, *extra]
        return [f"{p}:{p}:ro" for p in _outermost(paths)]


@pytest.fixture(scope="session")
def container_host(podman: Podman) -> Iterator[ContainerHost]:
    """The busybox image, imported, and one container run to show that containers start."""
    busybox = shutil.which("busybox")
    if busybox is None:
        missing("busybox is not installed (busybox-static); the image is built from it")
    host = ContainerHost(podman, Path(busybox))
    host.import_image(BUSYBOX_IMAGE, "")
    trial = subprocess.run(
        [*podman.base, "run", "--rm", BUSYBOX_IMAGE, "/bin/true"],
        capture_output=True,
        text=True,
        check=False,
        env=podman.env,
        timeout=120,
    )
    if trial.returncode != 0:
        missing(f"containers do not start on this machine: {trial.stderr.strip()[-300:]}")
    yield host
