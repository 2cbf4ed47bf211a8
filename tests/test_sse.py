"""SSE parsing survives any chunk boundary, comments, keep-alives and multi-line data."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runners.client._sse import SSEParser

STREAM = (
    b": keep-alive\n\n"
    b'data: {"a": 1}\n\n'
    b"event: message\nid: 7\nretry: 10\n"
    b'data: {"b":\ndata: 2}\n\n'
    b":comment without space\n"
    b"data:no-space\n\n"
    b"\n\n"
    b"data: [DONE]\n\n"
)
EXPECTED = [b'{"a": 1}', b'{"b":\n2}', b"no-space", b"[DONE]"]


def _feed_all(parser: SSEParser, pieces: list[bytes]) -> list[bytes]:
    out: list[bytes] = []
    for piece in pieces:
        out.extend(parser.feed(piece))
    return out


def test_whole_stream_at_once() -> None:
    assert _feed_all(SSEParser(), [STREAM]) == EXPECTED


def test_byte_by_byte() -> None:
    assert _feed_all(SSEParser(), [bytes([b]) for b in STREAM]) == EXPECTED


@pytest.mark.parametrize("newline", [b"\r\n", b"\r"], ids=["crlf", "cr"])
def test_other_line_endings_byte_by_byte(newline: bytes) -> None:
    stream = STREAM.replace(b"\n", newline)
    assert _feed_all(SSEParser(), [bytes([b]) for b in stream]) == EXPECTED


def test_crlf_split_between_reads_is_one_line_end() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: x\r") == []
    # The CR ending this read is a line end at once; the LF that follows is its CRLF half.
    assert parser.feed(b"\n\r") == [b"x"]
    assert parser.feed(b"\ndata: y\r\n\r\n") == [b"y"]
    assert parser.pending == b""


def test_unterminated_event_stays_pending() -> None:
    parser = SSEParser()
    assert parser.feed(b'data: {"partial": ') == []
    assert parser.pending == b'data: {"partial": '


def test_utf8_split_inside_a_character() -> None:
    data = 'data: {"content": "héllo ✓"}\n\n'.encode()
    cut = data.index("✓".encode()) + 1
    assert _feed_all(SSEParser(), [data[:cut], data[cut:]]) == [data[6:-2]]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=30), st.booleans())
def test_any_split_gives_the_same_events(cuts: list[int], crlf: bool) -> None:
    stream = STREAM.replace(b"\n", b"\r\n") if crlf else STREAM
    points = sorted({min(c, len(stream)) for c in cuts})
    pieces = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]
    assert _feed_all(SSEParser(), pieces) == EXPECTED
