"""Running the simulated endpoint: in this process (``ledger simulate``) or as a child.

A child gets a socket this process already bound (port 0, passed by descriptor), so there
is no window in which another program could take the port between choosing and binding.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from types import TracebackType
from typing import Self

import httpx

from ledger.errors import ServerError
from runners.simulate._app import RECEIVED_KEY, SimulatedEndpoint
from runners.simulate.profile import Profile

__all__ = [
    "HOST",
    "READY_TIMEOUT_S",
    "SimulatorProcess",
    "serve",
]

HOST = "127.0.0.1"
# A child imports in half a second; a CI host busy with compilers and containers has
# been measured to need more than 20 s, and a child that exits is noticed at once anyway.
READY_TIMEOUT_S = 60.0


def _protocol(close_after_response: bool) -> type:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class ArrivalStampingProtocol(HttpToolsProtocol):
        """Stamps a request's arrival as its first bytes are parsed.

        The ASGI task of a request starts only after the tasks of requests that arrived in
        the same loop iteration have run their synchronous part; stamping here keeps that
        queueing out of the server's reference times (``received_ns``).

        With ``close_after_response`` a connection serves one response: the next request
        on it is dropped unanswered, its connection closed, before any byte is parsed (see
        :attr:`Profile.close_after_response`).
        """

        answered = False

        def data_received(self, data: bytes) -> None:
            if close_after_response and self.answered:
                self.transport.close()
                return
            super().data_received(data)

        def on_response_complete(self) -> None:
            self.answered = True
            super().on_response_complete()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self.scope["state"][RECEIVED_KEY] = time.monotonic_ns()

    return ArrivalStampingProtocol


def serve(profile: Profile, *, port: int | None = None, fd: int | None = None) -> None:
    """Serves until interrupted, on 127.0.0.1:``port`` or an inherited bound socket."""
    import uvicorn

    sockets = None
    if fd is not None:
        # Not uvicorn's own ``fd`` option: it labels the socket AF_UNIX, so asyncio never
        # sets TCP_NODELAY on accepted connections and Nagle's algorithm holds back the
        # first token until the client's delayed ACK (about 40 ms).
        sockets = [socket.socket(fileno=fd)]
    config = uvicorn.Config(
        SimulatedEndpoint(profile),
        host=HOST,
        port=port or 0,
        # uvloop roughly halves the server's cost per chunk; plain asyncio where it is absent.
        loop="uvloop" if importlib.util.find_spec("uvloop") else "asyncio",
        http=_protocol(profile.close_after_response),
        lifespan="on",
        access_log=False,
        log_level="warning",
        timeout_keep_alive=30,
    )
    uvicorn.Server(config).run(sockets=sockets)


class SimulatorProcess:
    """A simulated endpoint in a child process, for a campaign or a test.

    ``with SimulatorProcess(profile) as sim:`` yields once ``sim.base_url`` answers.
    """

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self._socket: socket.socket | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self.port = 0

    @property
    def root_url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://{HOST}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL, ``.../v1``."""
        return self.root_url + "/v1"

    def start(self) -> None:
        """Starts the child and waits until it answers.

        Raises:
            ServerError: it did not start or did not answer in time.
        """
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, 0))
        sock.listen(1024)
        sock.set_inheritable(True)
        self._socket = sock
        self.port = sock.getsockname()[1]
        command = [
            sys.executable,
            "-m",
            "runners.simulate",
            "--fd",
            str(sock.fileno()),
            "--profile-json",
            json.dumps(self.profile.to_json()),
            "--parent-pid",
            str(os.getpid()),
        ]
        self._process = subprocess.Popen(command, pass_fds=(sock.fileno(),))
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            status = self._process.poll()
            if status is not None:
                self.stop()  # forgets the process: its status is read first
                raise ServerError(f"the simulated endpoint exited at start with status {status}")
            try:
                if (
                    httpx.get(self.base_url + "/models", timeout=1.0, trust_env=False).status_code
                    == 200
                ):
                    return
            except httpx.HTTPError:
                time.sleep(0.05)
        self.stop()
        raise ServerError(f"the simulated endpoint did not answer within {READY_TIMEOUT_S} s")

    def stop(self) -> None:
        """Stops the child (SIGTERM, then SIGKILL after 5 s)."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
