"""Incremental Server-Sent Events parsing on raw bytes.

The parser is fed whatever the transport delivers (a read can end anywhere: inside a
line, between ``\\r`` and ``\\n``, inside a multi-byte character) and hands back the
``data`` payload of each completed event. Comments (``: keep-alive``), ``event``/``id``/
``retry`` fields and events without data are consumed silently. Decoding works on bytes
because a per-line ``str`` path (httpx's ``aiter_lines``) costs several microseconds an
event, which at high concurrency is the client's whole budget (see ``docs/method/client-overhead.md``).
"""

from __future__ import annotations

_DATA = b"data:"


def _event_data(block: bytes) -> bytes | None:
    """The ``data`` of one event block (lines without the blank terminator)."""
    if block.startswith(b"data: ") and b"\n" not in block:
        return block[6:]
    lines: list[bytes] = []
    for line in block.split(b"\n"):
        if not line.startswith(_DATA):
            # Comments, other fields and unknown lines carry no data.
            continue
        value = line[5:]
        lines.append(value[1:] if value.startswith(b" ") else value)
    if not lines:
        return None
    return b"\n".join(lines)


class SSEParser:
    """Turns a byte stream into event payloads, whatever the chunk boundaries."""

    __slots__ = ("_pending", "_skip_lf")

    def __init__(self) -> None:
        self._pending = b""
        self._skip_lf = False

    @property
    def pending(self) -> bytes:
        """Bytes of an event not yet terminated by a blank line."""
        return self._pending

    def feed(self, chunk: bytes) -> list[bytes]:
        """Consumes ``chunk``; returns the data payloads of the events it completed."""
        if self._skip_lf:
            # The previous read ended with a CR, already taken as a line end: an LF
            # starting this one is the second half of that CRLF.
            self._skip_lf = False
            if chunk.startswith(b"\n"):
                chunk = chunk[1:]
        if b"\r" in chunk:
            self._skip_lf = chunk.endswith(b"\r")
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        data = self._pending + chunk if self._pending else chunk
        events: list[bytes] = []
        pos = 0
        find = data.find
        while True:
            end = find(b"\n\n", pos)
            if end < 0:
                break
            if end > pos:
                payload = _event_data(data[pos:end])
                if payload is not None:
                    events.append(payload)
            pos = end + 2
            # Extra blank lines between events are empty blocks: skip them.
            while data.startswith(b"\n", pos):
                pos += 1
        self._pending = data[pos:]
        return events
