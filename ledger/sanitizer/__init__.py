"""The sanitizer: what ``ledger publish`` redacts from a campaign before it is public, and
what ``ledger verify --public`` looks for again in a publication.

Rules are versioned files (``ledger/_rules/sanitizer-v<N>.json``): the detectors' regexes
with their literal conditions, the secret-like key words, and from version 2 the structure
walk of configuration files (``_structure``) and the decoded escapes. The detectors run
where the Hyperscan prefilter (``_prefilter``, the regex forms in ``_regex_forms``) says
they may match; the hits are the exact regexes' own either way.
"""

from __future__ import annotations

from ledger.sanitizer._sanitizer import (
    CURRENT_VERSION,
    JSON_LINES,
    Detector,
    Hit,
    KeyCollision,
    Rules,
    Sanitizer,
    load_rules,
    rules_file,
)

__all__ = [
    "CURRENT_VERSION",
    "JSON_LINES",
    "Detector",
    "Hit",
    "KeyCollision",
    "Rules",
    "Sanitizer",
    "load_rules",
    "rules_file",
]
