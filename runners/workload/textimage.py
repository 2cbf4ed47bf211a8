"""Text rendered into a PNG, and read back: the image of the OCR check.

The runner draws its own image (a 5x7 bitmap font, scaled, black on white, written as a
grayscale PNG with the standard library's zlib), so the check needs no image library and
no file from elsewhere, and a vision model has a clean, unambiguous text to read. The
simulated endpoint reads the same images back with :func:`read_text`: it recognises only
this font, which is all its answering mode needs.
"""

from __future__ import annotations

import base64
import struct
import zlib

__all__ = [
    "data_uri",
    "parse_data_uri",
    "read_text",
    "render_png",
]

# 5 columns x 7 rows per glyph: "#" is ink.
_FONT = {
    "A": (".###.", "#...#", "#...#", "#####", "#...#", "#...#", "#...#"),
    "B": ("####.", "#...#", "#...#", "####.", "#...#", "#...#", "####."),
    "C": (".###.", "#...#", "#....", "#....", "#....", "#...#", ".###."),
    "D": ("####.", "#...#", "#...#", "#...#", "#...#", "#...#", "####."),
    "E": ("#####", "#....", "#....", "####.", "#....", "#....", "#####"),
    "F": ("#####", "#....", "#....", "####.", "#....", "#....", "#...."),
    "G": (".###.", "#...#", "#....", "#.###", "#...#", "#...#", ".####"),
    "H": ("#...#", "#...#", "#...#", "#####", "#...#", "#...#", "#...#"),
    "I": (".###.", "..#..", "..#..", "..#..", "..#..", "..#..", ".###."),
    "J": ("..###", "...#.", "...#.", "...#.", "#..#.", "#..#.", ".##.."),
    "K": ("#...#", "#..#.", "#.#..", "##...", "#.#..", "#..#.", "#...#"),
    "L": ("#....", "#....", "#....", "#....", "#....", "#....", "#####"),
    "M": ("#...#", "##.##", "#.#.#", "#...#", "#...#", "#...#", "#...#"),
    "N": ("#...#", "#...#", "##..#", "#.#.#", "#..##", "#...#", "#...#"),
    "O": (".###.", "#...#", "#...#", "#...#", "#...#", "#...#", ".###."),
    "P": ("####.", "#...#", "#...#", "####.", "#....", "#....", "#...."),
    "Q": (".###.", "#...#", "#...#", "#...#", "#.#.#", "#..#.", ".##.#"),
    "R": ("####.", "#...#", "#...#", "####.", "#.#..", "#..#.", "#...#"),
    "S": (".####", "#....", "#....", ".###.", "....#", "....#", "####."),
    "T": ("#####", "..#..", "..#..", "..#..", "..#..", "..#..", "..#.."),
    "U": ("#...#", "#...#", "#...#", "#...#", "#...#", "#...#", ".###."),
    "V": ("#...#", "#...#", "#...#", "#...#", "#...#", ".#.#.", "..#.."),
    "W": ("#...#", "#...#", "#...#", "#.#.#", "#.#.#", "##.##", "#...#"),
    "X": ("#...#", "#...#", ".#.#.", "..#..", ".#.#.", "#...#", "#...#"),
    "Y": ("#...#", "#...#", ".#.#.", "..#..", "..#..", "..#..", "..#.."),
    "Z": ("#####", "....#", "...#.", "..#..", ".#...", "#....", "#####"),
    "0": (".###.", "#...#", "#..##", "#.#.#", "##..#", "#...#", ".###."),
    "1": ("..#..", ".##..", "..#..", "..#..", "..#..", "..#..", ".###."),
    "2": (".###.", "#...#", "....#", "...#.", "..#..", ".#...", "#####"),
    "3": ("#####", "...#.", "..#..", "...#.", "....#", "#...#", ".###."),
    "4": ("...#.", "..##.", ".#.#.", "#..#.", "#####", "...#.", "...#."),
    "5": ("#####", "#....", "####.", "....#", "....#", "#...#", ".###."),
    "6": ("..##.", ".#...", "#....", "####.", "#...#", "#...#", ".###."),
    "7": ("#####", "....#", "...#.", "..#..", ".#...", ".#...", ".#..."),
    "8": (".###.", "#...#", "#...#", ".###.", "#...#", "#...#", ".###."),
    "9": (".###.", "#...#", "#...#", ".####", "....#", "...#.", ".##.."),
    "-": (".....", ".....", ".....", "#####", ".....", ".....", "....."),
    " ": (".....", ".....", ".....", ".....", ".....", ".....", "....."),
}
GLYPH_W, GLYPH_H = 5, 7
_GAP = 1
_MARGIN = 2


def _rows(char: str) -> tuple[str, ...]:
    return _FONT[char]


def _pixels(text: str) -> list[list[int]]:
    """Unscaled 0/1 pixels (1 = ink) of ``text`` on one line, with a margin."""
    width = _MARGIN * 2 + len(text) * (GLYPH_W + _GAP) - _GAP
    height = _MARGIN * 2 + GLYPH_H
    grid = [[0] * width for _ in range(height)]
    for n, char in enumerate(text):
        left = _MARGIN + n * (GLYPH_W + _GAP)
        for y, row in enumerate(_rows(char)):
            for x, mark in enumerate(row):
                if mark == "#":
                    grid[_MARGIN + y][left + x] = 1
    return grid


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def render_png(text: str, *, scale: int = 4) -> bytes:
    """``text`` (capital letters, digits, spaces and hyphens) as an 8-bit grayscale PNG.

    Raises:
        ValueError: a character the font lacks.
    """
    missing = sorted(set(text) - set(_FONT))
    if missing or not text:
        raise ValueError(f"cannot render {text!r}: no glyph for {missing or 'an empty text'}")
    grid = _pixels(text)
    raw = bytearray()
    for row in grid:
        line = bytes(0 if ink else 255 for ink in row for _ in range(scale))
        for _ in range(scale):
            raw += b"\x00" + line  # filter type 0 on every scanline
    width, height = len(grid[0]) * scale, len(grid) * scale
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(bytes(raw), 9))
        + _chunk(b"IEND", b"")
    )


def data_uri(png: bytes) -> str:
    """The PNG as a ``data:`` URI for an ``image_url`` content part."""
    return "data:image/png;base64," + base64.b64encode(png).decode()


def _decode_png(png: bytes) -> list[list[int]] | None:
    if not png.startswith(b"\x89PNG\r\n\x1a\n"):
        return None
    offset, idat, width, height = 8, b"", 0, 0
    while offset + 8 <= len(png):
        (length,) = struct.unpack(">I", png[offset : offset + 4])
        kind = png[offset + 4 : offset + 8]
        data = png[offset + 8 : offset + 8 + length]
        offset += 12 + length
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", data)
            if (depth, color, interlace) != (8, 0, 0):
                return None  # only the images render_png writes
        elif kind == b"IDAT":
            idat += data
    try:
        raw = zlib.decompress(idat)
    except zlib.error:
        return None
    stride = width + 1
    if width == 0 or len(raw) != stride * height:
        return None
    rows = []
    for y in range(height):
        if raw[y * stride] != 0:
            return None
        rows.append([1 if value < 128 else 0 for value in raw[y * stride + 1 : (y + 1) * stride]])
    return rows


def read_text(png: bytes) -> str | None:
    """The text of an image :func:`render_png` wrote, or None for any other image."""
    grid = _decode_png(png)
    if grid is None:
        return None
    height = len(grid)
    scale, remainder = divmod(height, _MARGIN * 2 + GLYPH_H)
    if scale < 1 or remainder:
        return None
    small = [row[::scale] for row in grid[::scale]]
    glyphs = {_rows(c): c for c in _FONT}
    width = len(small[0])
    count = (width - _MARGIN * 2 + _GAP) // (GLYPH_W + _GAP)
    text = []
    for n in range(count):
        left = _MARGIN + n * (GLYPH_W + _GAP)
        cell = tuple(
            "".join("#" if small[_MARGIN + y][left + x] else "." for x in range(GLYPH_W))
            for y in range(GLYPH_H)
        )
        char = glyphs.get(cell)
        if char is None:
            return None
        text.append(char)
    return "".join(text)


def parse_data_uri(uri: str) -> bytes | None:
    """The bytes of a base64 ``data:image/png`` URI, or None."""
    prefix = "data:image/png;base64,"
    if not uri.startswith(prefix):
        return None
    try:
        return base64.b64decode(uri[len(prefix) :], validate=True)
    except ValueError:
        return None
