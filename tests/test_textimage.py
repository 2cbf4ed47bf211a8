"""The OCR check's image, read by decoders this project did not write.

The runner draws the PNG and the simulator reads it back with the same module, so that
round trip cannot see a drawing bug. Here Pillow decodes the file (its own PNG reader) and
each glyph cell is compared pixel by pixel; and Tesseract, an OCR engine from Debian's
packages, reads the very image the preflight check sends.
"""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image, ImageFilter, ImageOps

from runners.checks._preflight import OCR_PHRASE
from runners.workload import textimage
from tests.components import missing

EVERY = "ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789-"
MARGIN, GAP = 2, 1


@pytest.mark.parametrize("scale", [1, 2, 4])
@pytest.mark.parametrize("text", [EVERY, OCR_PHRASE, "W"])
def test_pillow_decodes_each_glyph_where_it_belongs(text: str, scale: int) -> None:
    image = Image.open(io.BytesIO(textimage.render_png(text, scale=scale)))
    image.load()
    assert (image.format, image.mode) == ("PNG", "L")
    cells_w = MARGIN * 2 + len(text) * (textimage.GLYPH_W + GAP) - GAP
    cells_h = MARGIN * 2 + textimage.GLYPH_H
    assert image.size == (cells_w * scale, cells_h * scale)
    pixels = image.load()
    assert pixels is not None
    grid = []
    for cy in range(cells_h):
        row = []
        for cx in range(cells_w):
            block = {
                pixels[cx * scale + dx, cy * scale + dy]
                for dx in range(scale)
                for dy in range(scale)
            }
            assert block in ({0}, {255}), f"cell {cx},{cy} is not one solid square: {block}"
            row.append("#" if block == {0} else ".")
        grid.append("".join(row))
    # Margins and gaps are paper; each glyph sits in its own 5x7 cell.
    for line in grid[:MARGIN] + grid[-MARGIN:]:
        assert set(line) == {"."}
    for n, char in enumerate(text):
        left = MARGIN + n * (textimage.GLYPH_W + GAP)
        drawn = tuple(line[left : left + textimage.GLYPH_W] for line in grid[MARGIN:-MARGIN])
        assert drawn == textimage._FONT[char], f"glyph {char!r} at {n}"
        if n + 1 < len(text):
            assert {line[left + textimage.GLYPH_W] for line in grid} == {"."}


def test_every_glyph_is_distinct_and_inked() -> None:
    glyphs = {char: rows for char, rows in textimage._FONT.items() if char != " "}
    assert len(set(glyphs.values())) == len(glyphs)
    assert all("#" in "".join(rows) for rows in glyphs.values())


def test_an_ocr_engine_reads_the_image_the_check_sends(tmp_path: Path) -> None:
    tesseract = shutil.which("tesseract")
    if tesseract is None:
        missing("tesseract is not installed (Debian: tesseract-ocr)")
        return
    image = Image.open(io.BytesIO(textimage.render_png(OCR_PHRASE)))
    # Tesseract is trained on print, not on square pixels: enlarge, pad and soften the
    # edges, as a camera or a resampling vision encoder would. The pixels stay the check's.
    image = image.resize((image.width * 3 // 2, image.height * 3 // 2), Image.Resampling.NEAREST)
    image = ImageOps.expand(image, border=40, fill=255).filter(ImageFilter.GaussianBlur(2))
    path = tmp_path / "ocr.png"
    image.save(path)
    read = subprocess.run(
        [tesseract, str(path), "-", "--psm", "7"], capture_output=True, text=True, check=True
    ).stdout
    assert read.strip() == OCR_PHRASE
