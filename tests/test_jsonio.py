from __future__ import annotations

import hashlib
import io
import json
import os
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.errors import InvalidArtifact
from ledger.formats import jsonio
from ledger.hashing import is_hex_digest, sha256_bytes, sha256_file, sha256_stream

VALID = [
    ("object", b'{"a": 1, "b": [1, 2.5, "x"]}', {"a": 1, "b": [1, 2.5, "x"]}),
    (
        "colon_in_strings",
        b'{"url": "http://h:1/a", "t": "14:10:29"}',
        {"url": "http://h:1/a", "t": "14:10:29"},
    ),
    ("unicode_escape", b'{"a": "\\u00e9", "b": "\\u003a"}', {"a": "\u00e9", "b": ":"}),
    ("same_key_in_sibling_objects", b'[{"a": 1}, {"a": 2}]', [{"a": 1}, {"a": 2}]),
    ("scalar", b"3", 3),
    ("depth_254", b"[" * 254 + b"]" * 254, None),
    ("depth_254_mixed", b'{"a":[' * 127 + b"1" + b"]}" * 127, None),
]

INVALID = [
    ("duplicate_top_level", b'{"a": 1, "a": 2}', "duplicate-key", "/a"),
    ("duplicate_nested", b'{"x": [{"k": 1}, {"k": 1, "k": 2}]}', "duplicate-key", "/x/1/k"),
    ("duplicate_with_space_before_colon", b'{"a" : 1, "a" : 2}', "duplicate-key", "/a"),
    # The colon count alone could be fooled by an escaped colon; the \u guard is not.
    ("duplicate_hidden_by_escaped_colon", b'{"a": 1, "a": "\\u003a"}', "duplicate-key", "/a"),
    ("duplicate_with_colons_in_values", b'{"a": "x:y", "a": "p:q"}', "duplicate-key", "/a"),
    ("nan", b'{"a": NaN}', "json-nonfinite", "/a"),
    ("infinity", b'{"z": [1, {"a~/b": -Infinity}]}', "json-nonfinite", "/z/1/a~0~1b"),
    ("overflow_to_infinity", b'{"a": 1e400}', "json-nonfinite", "/a"),
    # The first in document order, whichever kind; a top-level one is the whole document.
    ("first_of_two", b'{"b": [1e999], "a": NaN}', "json-nonfinite", "/b/0"),
    ("first_of_two_tokens", b'{"b": {"c": 1, "d": NaN}, "a": NaN}', "json-nonfinite", "/b/d"),
    ("first_in_a_list", b"[1.5, NaN, 1e999]", "json-nonfinite", "/1"),
    # An integer beyond any float is one too (orjson reads it as a float), and comes first.
    ("integer_beyond_a_float", b'{"b": 1' + b"0" * 400 + b', "a": NaN}', "json-nonfinite", "/b"),
    ("integer_past_int_digits", b"[1" + b"0" * 5000 + b"]", "json-nonfinite", "/0"),
    # A duplicate key does not hide the first.
    ("behind_a_duplicate", b'{"x": [{"a": Infinity, "a": 1}]}', "json-nonfinite", "/x/0/a"),
    # Too deep is too deep, whatever lies at the bottom; broken is broken.
    ("deep_nonfinite", b"[" * 300 + b"NaN" + b"]" * 300, "json-too-deep", ""),
    ("deeper_nonfinite", b'{"a":' * 1000 + b"NaN" + b"}" * 1000, "json-too-deep", ""),
    ("nonfinite_then_syntax", b"[1e400,]", "json-syntax", ""),
    ("unclosed_after_nan", b'{"a": [NaN', "json-syntax", ""),
    ("nan_glued", b'{"a": NaNa}', "json-syntax", ""),
    # A lone surrogate refused before the NaN is the failure (and is no pointer to print).
    ("lone_surrogate_then_nan", b'{"\\ud800": NaN}', "json-syntax", ""),
    ("nan_under_a_lone_surrogate", b'{"a": {"x\\udc00y": [NaN]}}', "json-syntax", ""),
    ("top_level", b"Infinity", "json-nonfinite", ""),
    ("bom_utf8", b'\xef\xbb\xbf{"a": 1}', "json-bom", ""),
    ("bom_utf16", b"\xff\xfe{\x00}\x00", "json-bom", ""),
    ("latin1", b'{"a": "\xe9"}', "json-encoding", ""),
    ("trailing_comma", b'{"a": 1,}', "json-syntax", ""),
    ("empty", b"", "json-syntax", ""),
    ("depth_255", b"[" * 255 + b"]" * 255, "json-too-deep", ""),
    ("depth_255_with_escapes", b'["\\u0041",' * 255 + b"1" + b"]" * 255, "json-too-deep", ""),
    ("depth_100000", b"[" * 100_000 + b"]" * 100_000, "json-too-deep", ""),
    ("deep_objects", b'{"a":' * 300 + b"1" + b"}" * 300, "json-too-deep", ""),
]


@pytest.mark.parametrize(
    ("data", "expected"), [(d, e) for _, d, e in VALID], ids=[n for n, _, _ in VALID]
)
def test_parse_strict_accepts(data: bytes, expected: object) -> None:
    parsed = jsonio.parse_strict(data)
    if expected is not None:
        assert parsed == expected


@pytest.mark.parametrize(
    ("data", "code", "pointer"),
    [(d, c, p) for _, d, c, p in INVALID],
    ids=[n for n, _, _, _ in INVALID],
)
def test_parse_strict_rejects(data: bytes, code: str, pointer: str) -> None:
    with pytest.raises(InvalidArtifact) as raised:
        jsonio.parse_strict(data)
    assert raised.value.code == code
    assert raised.value.pointer == pointer


_keys = st.sampled_from(["a", "b", "c:d", "e f"])
_scalars = st.one_of(st.integers(-5, 5), st.text(alphabet='ab:" \\', max_size=4), st.booleans())


@st.composite
def _object_text(draw: st.DrawFn, depth: int = 0) -> tuple[str, bool]:
    """JSON object text, written by hand so it may repeat keys; returns (text, has_duplicate)."""
    keys = draw(st.lists(_keys, max_size=4))
    parts = []
    duplicate = len(set(keys)) != len(keys)
    for key in keys:
        if depth < 2 and draw(st.booleans()):
            text, nested_duplicate = draw(_object_text(depth + 1))
            duplicate = duplicate or nested_duplicate
        else:
            text = json.dumps(draw(_scalars))
        spacing = draw(st.sampled_from(["", " ", "\n"]))
        parts.append(f"{json.dumps(key)}{spacing}:{spacing}{text}")
    return "{" + ",".join(parts) + "}", duplicate


@settings(max_examples=300, deadline=None)
@given(_object_text())
def test_duplicate_detection_is_exact(case: tuple[str, bool]) -> None:
    text, has_duplicate = case
    if has_duplicate:
        with pytest.raises(InvalidArtifact, match="duplicate key"):
            jsonio.parse_strict(text.encode())
    else:
        assert jsonio.parse_strict(text.encode()) == json.loads(text)


def test_dumps_is_deterministic_and_canonical() -> None:
    one = jsonio.dumps_deterministic({"b": 1.5, "a": ["é", 0.1 + 0.2], "c": {"z": 1, "y": None}})
    two = jsonio.dumps_deterministic({"c": {"y": None, "z": 1}, "a": ["é", 0.1 + 0.2], "b": 1.5})
    assert one == two
    assert (
        one
        == (
            '{\n  "a": [\n    "é",\n    0.30000000000000004\n  ],\n  "b": 1.5,\n'
            '  "c": {\n    "y": null,\n    "z": 1\n  }\n}\n'
        ).encode()
    )


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_dumps_refuses_nonfinite(value: float) -> None:
    with pytest.raises(ValueError, match="non-finite"):
        jsonio.dumps_deterministic({"a": [1, {"b": value}]})


def test_write_atomic_replaces_whole(tmp_path: Path) -> None:
    target = tmp_path / "a.json"
    jsonio.write_json(target, {"v": 1})
    jsonio.write_json(target, {"v": 2})
    assert json.loads(target.read_bytes()) == {"v": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_write_atomic_keeps_old_file_when_interrupted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "a.json"
    jsonio.write_json(target, {"v": 1})
    old = target.read_bytes()

    def crash(*_: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        jsonio.write_json(target, {"v": 2})
    assert target.read_bytes() == old
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"], "temp file left behind"


def test_write_atomic_refuses_to_overwrite_without_replace(tmp_path: Path) -> None:
    target = tmp_path / "a.json"
    target.write_bytes(b"{}\n")
    with pytest.raises(FileExistsError):
        jsonio.write_atomic(target, b"[]\n", replace=False)
    assert target.read_bytes() == b"{}\n"


def test_read_limited_refuses_before_reading(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with open(big, "wb") as stream:
        stream.truncate(2 * 1024**3)  # sparse: 2 GiB without using the disk
    with pytest.raises(InvalidArtifact) as raised:
        jsonio.read_json(big)
    assert raised.value.code == "json-too-large"


def test_sha256_streams_the_stored_bytes(tmp_path: Path) -> None:
    data = os.urandom(3 * (1 << 20) + 17)
    path = tmp_path / "blob"
    path.write_bytes(data)
    expected = hashlib.sha256(data).hexdigest()
    assert sha256_file(path) == (expected, len(data))
    assert sha256_stream(io.BytesIO(data)) == (expected, len(data))
    assert sha256_bytes(data) == expected
    assert is_hex_digest(expected)
    assert not is_hex_digest(expected.upper())


@pytest.mark.parametrize(
    ("text", "pointer"),
    [
        ('{"a": 1, "b": 2, "a": 3, "b": 4}', "/a"),
        ('{"a": 1, "b": 2, "b": 3}', "/b"),
        ('{"x": 1, "y": {"k": 1, "j": 2, "k": 3}}', "/y/k"),
        ('[{"u": 1}, {"v": 1, "w": 1, "v": 2}]', "/1/v"),
    ],
)
def test_the_first_repeated_key_is_named(text: str, pointer: str) -> None:
    with pytest.raises(InvalidArtifact) as raised:
        jsonio.parse_strict(text.encode())
    assert raised.value.code == "duplicate-key"
    assert raised.value.pointer == pointer


def test_nonfinite_at_the_root_is_placed_at_slash() -> None:
    with pytest.raises(ValueError, match=r"^non-finite number nan at /$"):
        jsonio.dumps_deterministic(float("nan"))


def test_read_limited_reads_a_file_of_exactly_the_cap(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_bytes(b"x" * 64)
    assert jsonio.read_limited(path, 64) == b"x" * 64
    path.write_bytes(b"x" * 65)
    with pytest.raises(InvalidArtifact, match="65 bytes is over the 64-byte limit"):
        jsonio.read_limited(path, 64)


def test_read_limited_refuses_a_file_that_grows_past_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The file grows after its size was read: only the cap on the read can catch it.
    path = tmp_path / "growing"
    path.write_bytes(b"y" * 65)
    real_fstat = os.fstat

    def before_it_grew(fd: int) -> os.stat_result:
        found = real_fstat(fd)
        return os.stat_result((*found[:6], 10, *found[7:]))

    monkeypatch.setattr(jsonio.os, "fstat", before_it_grew)
    with pytest.raises(InvalidArtifact, match="grew past the 64-byte limit"):
        jsonio.read_limited(path, 64)


@pytest.mark.parametrize("kind", ["fifo", "device", "folder"])
def test_read_limited_opens_only_a_regular_file(tmp_path: Path, kind: str) -> None:
    """A named pipe blocked open() until a writer came; nothing is read from any but a
    regular file."""
    from ledger.formats.regular import NotRegularFile

    path = tmp_path / "input"
    if kind == "fifo":
        os.mkfifo(path)  # no writer: a blocking open would wait forever
        said = "a named pipe, not a regular file"
    elif kind == "device":
        path = Path("/dev/zero")
        said = "a character device, not a regular file"
    else:
        path.mkdir()
        said = "a folder, not a regular file"
    with pytest.raises(NotRegularFile) as raised:
        jsonio.read_limited(path, 64)
    assert raised.value.strerror == said and raised.value.filename == str(path)
    assert isinstance(raised.value, OSError)  # every caller's OSError handling applies


def _open_descriptors() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_write_atomic_syncs_the_file_and_its_folder_and_restores_the_umask(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    sizes: list[int] = []
    real_fsync = os.fsync

    def record(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        sizes.append(os.fstat(fd).st_size)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", record)
    target = tmp_path / "a.json"
    before = _open_descriptors()
    old_umask = os.umask(0o022)
    try:
        written = jsonio.write_json(target, {"v": 1})
        assert os.umask(0o022) == 0o022, "the umask was not restored"
    finally:
        os.umask(old_umask)
    assert written == target.read_bytes() == b'{\n  "v": 1\n}\n'
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    # The temporary file's contents, then the folder that holds the rename.
    assert len(synced) == 2
    assert synced[0].startswith(str(tmp_path / ".a.json.")) and synced[1] == str(tmp_path)
    assert sizes[0] == len(written), "fsynced before the bytes left Python's buffer"
    assert _open_descriptors() == before, "a descriptor was left open"
    jsonio.write_atomic(target, b"[]\n")  # replacing is the default
    assert target.read_bytes() == b"[]\n"


def test_write_temp_removes_its_file_when_writing_fails(tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        jsonio.write_temp(tmp_path / "a.json", "not bytes")  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_the_non_finite_dialect_of_python_s_json() -> None:
    data = b'{"a": Infinity, "b": [1, -Infinity, NaN], "c": "Infinity", "d": {"e": 2.5}}'
    document, found = jsonio.parse_with_nonfinite(data)
    assert document == {"a": "inf", "b": [1, "-inf", "nan"], "c": "Infinity", "d": {"e": 2.5}}
    assert found == ["/a", "/b/1", "/b/2"]
    assert jsonio.parse_with_nonfinite(b'{"a": 1}') == ({"a": 1}, [])


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b'{"a": Infinity, "a": 1}', "duplicate-key"),
        (b'{"a": Infinity, "b": 1e999}', "json-nonfinite"),
        (b'{"a": Infinity,}', "json-syntax"),
        (b"[" * 5000 + b"Infinity" + b"]" * 5000, "json-too-deep"),
    ],
)
def test_the_dialect_is_otherwise_strict(data: bytes, code: str) -> None:
    with pytest.raises(InvalidArtifact) as raised:
        jsonio.parse_with_nonfinite(data)
    assert raised.value.code == code
