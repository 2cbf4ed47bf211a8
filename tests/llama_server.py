"""llama.cpp's own ``llama-server`` as a test component: a real server no one here wrote.

Built from the pinned llama-cpp-python sdist, which carries llama.cpp's full source in
``vendor/llama.cpp`` (with real tokenizer vocabularies in ``models/`` and real chat
templates in ``models/templates/``), into a cache outside the repository keyed by the
sdist's sha256. The model is written here with llama.cpp's own ``gguf-py``: a tiny
random-weight llama-architecture network carrying Qwen2's real tokenizer and Qwen3's real
chat template, whose ``enable_thinking`` switch changes the prompt. Random weights make
its words meaningless, so functional checks fail, but every token is really tokenized,
templated, prefilled, sampled and streamed by llama.cpp.

The first build takes some minutes on two cores (docs/method/tested-against.md); later sessions
find it in the cache. A file lock lets parallel test workers share one build.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Self

import attrs
import httpx
import pytest

from tests.components import cache_folder, locked, missing

SDIST_NAME = "llama-cpp-python"
SDIST_VERSION = "0.3.36"
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
"""The pinned sdist; a download with another digest is refused."""
VOCABULARY = "models/ggml-vocab-qwen2.gguf"
TEMPLATE = "models/templates/Qwen-Qwen3-0.6B.jinja"
CMAKE_OPTIONS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_CURL=OFF",
    # A binary for any x86-64 or arm64 machine the cache may be copied to, not this CPU only.
    "-DGGML_NATIVE=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
)
MODEL_SHAPE = {"n_embd": 64, "n_layer": 2, "n_head": 4, "n_head_kv": 2, "n_ff": 128}
CONTEXT = 32768
"""The server's context, shared by its slots (``-np``)."""
HOST = "127.0.0.1"


class BuildFailed(RuntimeError):
    """The sdist could not be had or llama-server could not be built."""


def cache_root() -> Path:
    """Where the build lives: ``$ANVIL_TEST_CACHE``, else the user's cache folder."""
    return cache_folder() / "llama-server" / SDIST_SHA256[:16]


@attrs.frozen
class LlamaBuild:
    """A built server and the model it serves."""

    binary: Path
    model: Path
    source: Path
    """llama.cpp's source tree (``vendor/llama.cpp`` of the sdist)."""

    @property
    def commit(self) -> str:
        """llama.cpp's build number and commit as the binary reports them."""
        result = subprocess.run(
            [str(self.binary), "--version"], capture_output=True, text=True, check=False
        )
        lines = (result.stdout + result.stderr).splitlines()
        return next((line.strip() for line in lines if line.startswith("version")), "unknown")


def _run(command: list[str], log: Path, **settings: Any) -> None:
    with log.open("ab") as out:
        out.write(("$ " + " ".join(command) + "\n").encode())
        out.flush()
        result = subprocess.run(
            command, stdout=out, stderr=subprocess.STDOUT, check=False, **settings
        )
    if result.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-15:]
        raise BuildFailed(f"{command[0]} exited {result.returncode}:\n" + "\n".join(tail))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _sdist(root: Path, log: Path) -> Path:
    """The pinned sdist, from the cache or downloaded by pip from the package registry."""
    target = root / f"llama_cpp_python-{SDIST_VERSION}.tar.gz"
    if target.exists() and _sha256(target) == SDIST_SHA256:
        return target
    download = root / "download"
    shutil.rmtree(download, ignore_errors=True)
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--no-binary=:all:",
            "--dest",
            str(download),
            f"{SDIST_NAME}=={SDIST_VERSION}",
        ],
        log,
    )
    found = sorted(download.glob("*.tar.gz"))
    if len(found) != 1:
        raise BuildFailed(f"pip download left {[p.name for p in found]} in {download}")
    actual = _sha256(found[0])
    if actual != SDIST_SHA256:
        raise BuildFailed(f"{found[0].name}: sha256 {actual}, pinned {SDIST_SHA256}")
    os.replace(found[0], target)
    shutil.rmtree(download, ignore_errors=True)
    return target


def _extract(sdist: Path, root: Path) -> Path:
    source = root / "llama.cpp"
    if (source / "CMakeLists.txt").exists():
        return source
    prefix = f"llama_cpp_python-{SDIST_VERSION}/vendor/llama.cpp/"
    staging = root / "extract"
    shutil.rmtree(staging, ignore_errors=True)
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix)]
        tar.extractall(staging, members=members, filter="data")
    shutil.rmtree(source, ignore_errors=True)
    os.replace(staging / prefix.rstrip("/"), source)
    shutil.rmtree(staging, ignore_errors=True)
    return source


def _compile(source: Path, root: Path, log: Path) -> Path:
    binary = root / "bin" / "llama-server"
    if binary.exists():
        return binary
    cmake = shutil.which("cmake")
    if cmake is None:
        raise BuildFailed("cmake is not installed (CI installs it: .ci/run)")
    build = root / "build"
    _run([cmake, "-S", str(source), "-B", str(build), *CMAKE_OPTIONS], log)
    jobs = str(os.cpu_count() or 2)
    _run([cmake, "--build", str(build), "--target", "llama-server", "-j", jobs], log)
    built = build / "bin" / "llama-server"
    if not built.exists():
        raise BuildFailed(f"the build finished without {built}")
    binary.parent.mkdir(exist_ok=True)
    shutil.copy2(built, binary.with_suffix(".tmp"))
    os.replace(binary.with_suffix(".tmp"), binary)
    shutil.rmtree(build, ignore_errors=True)
    return binary


def write_model(source: Path, path: Path) -> None:
    """A tiny random-weight llama GGUF with Qwen2's tokenizer and Qwen3's chat template."""
    sys.path.insert(0, str(source / "gguf-py"))
    try:
        import gguf
        import numpy as np
    finally:
        sys.path.remove(str(source / "gguf-py"))

    vocabulary = gguf.GGUFReader(source / VOCABULARY)
    shape = MODEL_SHAPE
    n_embd, n_ff, n_head, n_head_kv = (shape[k] for k in ("n_embd", "n_ff", "n_head", "n_head_kv"))
    tokens = vocabulary.fields["tokenizer.ggml.tokens"].contents()
    n_vocab = len(tokens)
    partial = path.with_suffix(".partial")
    writer = gguf.GGUFWriter(partial, "llama")
    writer.add_name("anvil-tiny-random")
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(shape["n_layer"])
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head_kv)
    writer.add_rope_dimension_count(n_embd // n_head)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_rope_freq_base(1e6)
    writer.add_vocab_size(n_vocab)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    for key, field in vocabulary.fields.items():
        if not key.startswith("tokenizer.") or key == "tokenizer.chat_template":
            continue
        value = field.contents()
        if field.types[0] == gguf.GGUFValueType.ARRAY:
            writer.add_array(key, value)
        else:
            writer.add_key_value(key, value, field.types[0])
    writer.add_chat_template((source / TEMPLATE).read_text())

    rng = np.random.default_rng(20261130)
    kv = n_embd // n_head * n_head_kv

    def weight(rows: int, cols: int) -> Any:
        return (rng.standard_normal((rows, cols)) * 0.2).astype(np.float16)

    writer.add_tensor("token_embd.weight", weight(n_vocab, n_embd))
    writer.add_tensor("output_norm.weight", np.ones(n_embd, dtype=np.float32))
    writer.add_tensor("output.weight", weight(n_vocab, n_embd))
    for layer in range(shape["n_layer"]):
        block = f"blk.{layer}."
        writer.add_tensor(block + "attn_norm.weight", np.ones(n_embd, dtype=np.float32))
        writer.add_tensor(block + "attn_q.weight", weight(n_embd, n_embd))
        writer.add_tensor(block + "attn_k.weight", weight(kv, n_embd))
        writer.add_tensor(block + "attn_v.weight", weight(kv, n_embd))
        writer.add_tensor(block + "attn_output.weight", weight(n_embd, n_embd))
        writer.add_tensor(block + "ffn_norm.weight", np.ones(n_embd, dtype=np.float32))
        writer.add_tensor(block + "ffn_gate.weight", weight(n_ff, n_embd))
        writer.add_tensor(block + "ffn_up.weight", weight(n_ff, n_embd))
        writer.add_tensor(block + "ffn_down.weight", weight(n_embd, n_ff))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(partial, path)


def build(root: Path | None = None) -> LlamaBuild:
    """Builds (or finds in the cache) llama-server and the tiny model.

    Raises:
        BuildFailed: no sdist with the pinned digest, no cmake, or a failed compile.
    """
    root = root or cache_root()
    with locked(root / ".lock"):
        log = root / "build.log"
        source = root / "llama.cpp"
        binary = root / "bin" / "llama-server"
        if not (binary.exists() and (source / "CMakeLists.txt").exists()):
            source = _extract(_sdist(root, log), root)
            binary = _compile(source, root, log)
        model = root / "anvil-tiny.gguf"
        if not model.exists():
            write_model(source, model)
        return LlamaBuild(binary, model, source)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


class LlamaServer:
    """One running llama-server on 127.0.0.1, stopped by :meth:`stop`."""

    def __init__(self, built: LlamaBuild, *, parallel: int, log: Path, extra: tuple[str, ...] = ()):
        self.built = built
        self.parallel = parallel
        self.port = free_port()
        self.log = log
        self.command = [
            str(built.binary),
            "--model",
            str(built.model),
            "--host",
            HOST,
            "--port",
            str(self.port),
            "--ctx-size",
            str(CONTEXT),
            "--parallel",
            str(parallel),
            "--threads",
            "1",
            "--jinja",
            "--metrics",
            "--reasoning-format",
            "deepseek",
            "--alias",
            "anvil-tiny",
            *extra,
        ]
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def root_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def base_url(self) -> str:
        return self.root_url + "/v1"

    def start(self, timeout_s: float = 60.0) -> None:
        out = self.log.open("ab")
        self._process = subprocess.Popen(self.command, stdout=out, stderr=subprocess.STDOUT)
        out.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"llama-server exited {self._process.returncode}: {self.tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.root_url + "/health", timeout=1.0, trust_env=False).is_success:
                    return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"llama-server not ready in {timeout_s} s: {self.tail()}")

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])

    def tokenize(self, text: str) -> list[int]:
        """The server's own token ids for ``text`` (no special tokens added)."""
        response = httpx.post(
            self.root_url + "/tokenize", json={"content": text}, timeout=10, trust_env=False
        )
        response.raise_for_status()
        return list(response.json()["tokens"])

    def stop(self) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@pytest.fixture(scope="session")
def llama_build() -> LlamaBuild:
    """llama-server and its model, built once (cached across sessions).

    A missing cmake or C++ compiler skips outside CI and fails in CI; a failed build always
    fails: it is a broken test component, not an absent one.
    """
    for tool in ("cmake", "c++"):
        if shutil.which(tool) is None:
            missing(f"{tool} is not installed; llama-server cannot be built")
    try:
        return build()
    except BuildFailed as e:
        pytest.fail(f"llama-server could not be built: {e}")


@pytest.fixture(scope="module")
def llama_server(
    llama_build: LlamaBuild, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LlamaServer]:
    """One llama-server with four slots for a test module, its log in a temporary folder."""
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with LlamaServer(llama_build, parallel=4, log=log) as running:
        yield running
