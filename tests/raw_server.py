"""A bare HTTP/1.1 server on a socket, for tests that need a server to misbehave in ways no
framework lets it: each connection is handed to :meth:`RawServer.handle` on its own thread."""

from __future__ import annotations

import socket
import threading


class RawServer:
    """Listens on 127.0.0.1 (a free port) until :meth:`close`; ``base_url`` ends in ``/v1``."""

    def __init__(self) -> None:
        self.connections = 0
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.listener.settimeout(0.2)
        self.base_url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/v1"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def handle(self, conn: socket.socket, index: int) -> None:
        """Serves connection ``index`` (counted from 0); closes it when done."""
        raise NotImplementedError

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed
            index = self.connections
            self.connections += 1
            threading.Thread(target=self.handle, args=(conn, index), daemon=True).start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.listener.close()


def read_head(conn: socket.socket) -> bytes | None:
    """The bytes of a request up to and past its blank line; None if the client closed
    first."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    return data
