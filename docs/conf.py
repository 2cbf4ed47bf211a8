"""Sphinx configuration of anvil-ledger's documentation (``make docs``)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))

project = "anvil-ledger"
author = "anvil-ledger contributors"
copyright = "2026, anvil-ledger contributors"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "ledger_reference",
]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_generated/*.md"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

html_theme = "furo"
html_title = "anvil-ledger"

autodoc_member_order = "bysource"
autodoc_typehints = "description"

# Links to files of the repository (scripts, modules, tests) are written as code, not
# links: the pages name them as the README does.
nitpicky = False
linkcheck_anchors = True
autodoc_default_options = {"ignore-module-all": True}
# A docstring names an attribute or error by its short name (``path``, ``InvalidArtifact``)
# that several public modules define alike; Sphinx links the first and would warn.
suppress_warnings = ["ref.python"]
