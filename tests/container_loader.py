"""A server that loads before it serves, as a model server loads its checkpoint: it holds
``MIB`` MiB of host memory, taken 4 MiB at a time after a second of start-up (a server
reads its configuration first), then answers ``/health`` and ``/v1/models`` on ``PORT``.
SIGTERM ends it at once, as a stopped server ends.

Run inside a test container: ``python container_loader.py MIB PORT``.
"""

from __future__ import annotations

import http.server
import signal
import sys
import time

_STEP = 4 << 20


class _Ready(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b'{"object":"list","data":[{"id":"loader"}]}'
        self.send_response(200 if self.path in ("/health", "/v1/models") else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def main() -> None:
    mib, port = int(sys.argv[1]), int(sys.argv[2])
    # As the container's first process it has no default handler for SIGTERM: give it one.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    time.sleep(1.0)
    held = []
    for _ in range(mib // 4):
        block = bytearray(_STEP)
        # Touch every page: memory is counted when it is written, not when it is asked for.
        block[::4096] = b"\x01" * (_STEP // 4096)
        held.append(block)
        time.sleep(0.005)
    http.server.HTTPServer(("0.0.0.0", port), _Ready).serve_forever()


if __name__ == "__main__":
    main()
