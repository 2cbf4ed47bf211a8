"""The key catalogue against gitleaks' default configuration (tests/data/key-catalogue):
every gitleaks rule that recognises a secret by a prefix or structure of its own is covered
by a rule of ours, whose positive is redacted and whose look-alike is not; and the documented
table says so in numbers."""

from __future__ import annotations

import json
import re
import tomllib
from collections import Counter
from typing import Any

import pytest

from ledger.sanitizer._sanitizer import Sanitizer, load_rules, rules_file
from tests.conftest import DATA, ROOT

FOLDER = DATA / "key-catalogue"
CATALOGUE: list[dict[str, Any]] = json.loads((FOLDER / "catalogue.json").read_text())
COVERAGE: dict[str, Any] = json.loads((FOLDER / "coverage.json").read_text())
GITLEAKS = tomllib.loads((FOLDER / "gitleaks.toml").read_text())
BY_ID = {entry["id"]: entry for entry in CATALOGUE}


def in_a_log(value: str) -> str:
    return f"2026-11-29T12:00:00Z WARN worker: found {value} in the request\n"


def test_every_gitleaks_rule_is_classified_once() -> None:
    ids = [rule["id"] for rule in GITLEAKS["rules"]]
    classified = [rule["id"] for rule in COVERAGE["rules"]]
    assert sorted(classified) == sorted(ids) and len(set(ids)) == len(ids)
    assert {rule["kind"] for rule in COVERAGE["rules"]} == {"prefix", "keyword"}


def test_every_prefix_rule_names_a_catalogue_entry() -> None:
    uncovered = [
        rule["id"]
        for rule in COVERAGE["rules"]
        if rule["kind"] == "prefix" and rule["covered_by"] is None
    ]
    # gitleaks' pkcs12-file matches file names (*.p12), not what a file holds.
    assert uncovered == ["pkcs12-file"]
    named = {rule["covered_by"] for rule in COVERAGE["rules"] if rule["covered_by"]}
    assert named <= set(BY_ID)
    claimed: dict[str, set[str]] = {}
    for entry in CATALOGUE:
        for gitleaks_id in entry["gitleaks"]:
            claimed.setdefault(gitleaks_id, set()).add(entry["id"])
    for rule in COVERAGE["rules"]:
        if rule["id"] in claimed:
            assert rule["covered_by"] in claimed[rule["id"]], rule["id"]


def test_every_new_spec_is_a_rule_of_v2_and_none_of_v1() -> None:
    def specs(version: str) -> list[Any]:
        path = rules_file(version)
        assert path is not None
        return json.loads(path.read_text())["credential"]["patterns"]

    v2, v1 = specs("2"), specs("1")
    for entry in CATALOGUE:
        if entry["spec"] is not None:
            assert entry["spec"] in v2, entry["id"]
            assert entry["spec"] not in v1, entry["id"]


@pytest.mark.parametrize("prefilter", [True, False])
def test_every_positive_is_redacted_and_every_negative_kept(prefilter: bool) -> None:
    sanitizer = Sanitizer(prefilter=prefilter)
    missed, taken = [], []
    for entry in CATALOGUE:
        # A format without a prefix of its own is found by the name it stands under.
        positive = entry["positive"]
        text = f"{entry['id'].upper().replace('-', '_')}_API_KEY={positive}\n"
        if entry["spec"] is not None or entry.get("keyed") is None:
            text = in_a_log(positive)
        cleaned = sanitizer.file_text(text, "serve.log")
        # Nor a tail of it: a pattern that stops short leaves the key's end published.
        # (Of a positive with public words, "Bearer x" or a command line, its longest.)
        tail = max(positive.split(), key=len)[-6:]
        if positive in cleaned or tail in cleaned:
            missed.append(entry["id"])
        if sanitizer.file_text(in_a_log(entry["negative"]), "serve.log") != in_a_log(
            entry["negative"]
        ):
            taken.append(entry["id"])
    assert missed == [] and taken == []


def test_the_providers_rules_v1_did_not_know_are_found_now() -> None:
    v1 = Sanitizer(load_rules(rules_file("1")))
    v2 = Sanitizer()
    for name in ("groq", "xai", "perplexity", "replicate", "langsmith", "fireworks"):
        entry = BY_ID[name]
        assert entry["positive"] in v1.file_text(in_a_log(entry["positive"]), "serve.log")
        assert entry["positive"] not in v2.file_text(in_a_log(entry["positive"]), "serve.log")


def test_gitleaks_true_positives_of_prefix_rules_are_redacted() -> None:
    prefix = {r["id"] for r in COVERAGE["rules"] if r["kind"] == "prefix" and r["covered_by"]}
    samples = [
        json.loads(line)
        for line in (DATA / "secrets-corpus" / "gitleaks" / "rule_samples.jsonl").open()
    ]
    positives = [s for s in samples if s["label"] == "tp" and s["rule_id"] in prefix]
    assert len(positives) > 150
    rules = {rule["id"]: rule for rule in GITLEAKS["rules"]}
    sanitizer = Sanitizer()
    left, read = [], 0
    for sample in positives:
        secret = _gitleaks_secret(rules[sample["rule_id"]], sample["text"])
        if secret is None:
            # gitleaks' own regex does not read so in Python: something is found at least.
            assert sanitizer.file_hits(sample["text"], "sample.txt"), sample["rule_id"]
            continue
        read += 1
        if secret in sanitizer.file_text(sample["text"], "sample.txt"):
            left.append(sample["rule_id"])
    assert read > 150 and left == []


def _gitleaks_secret(rule: dict[str, Any], text: str) -> str | None:
    """The secret gitleaks' own rule finds in ``text`` (its ``secretGroup``, else its first
    group, else the whole match), where its Go regex reads the same in Python."""
    try:
        pattern = re.compile(rule["regex"])
    except (re.error, KeyError):
        return None
    match = pattern.search(text)
    if match is None:
        return None
    group = rule.get("secretGroup") or (1 if pattern.groups else 0)
    found = match.group(group)
    return found if found and len(found) >= 6 else None


def keyword_samples() -> tuple[int, int]:
    """gitleaks' true positives of its keyword rules: (redacted, all)."""
    keyword = {r["id"] for r in COVERAGE["rules"] if r["kind"] == "keyword"}
    samples = [
        json.loads(line)
        for line in (DATA / "secrets-corpus" / "gitleaks" / "rule_samples.jsonl").open()
    ]
    positives = [s["text"] for s in samples if s["label"] == "tp" and s["rule_id"] in keyword]
    sanitizer = Sanitizer()
    return sum(1 for text in positives if sanitizer.file_hits(text, "sample.txt")), len(positives)


def coverage_rows() -> dict[str, tuple[int, int]]:
    """(rules, covered) per kind, as the documented table states them."""
    counts = Counter(rule["kind"] for rule in COVERAGE["rules"])
    covered = Counter(rule["kind"] for rule in COVERAGE["rules"] if rule["covered_by"])
    new = sum(
        1
        for rule in COVERAGE["rules"]
        if rule["kind"] == "prefix"
        and rule["covered_by"]
        and BY_ID[rule["covered_by"]]["spec"] is not None
    )
    ours = sum(1 for entry in CATALOGUE if entry["spec"] is not None and not entry["gitleaks"])
    return {
        "prefix": (counts["prefix"], covered["prefix"]),
        "prefix-new": (new, new),
        "keyword": (counts["keyword"], counts["keyword"]),
        "ours": (ours, ours),
    }


def test_the_documented_table_counts_what_the_catalogue_holds() -> None:
    text = (ROOT / "docs" / "reference" / "sanitizer-rules.md").read_text()
    table = text[text.index("| gitleaks default rules") :].split("\n\n", 1)[0]
    numbers = [int(n.replace(",", "")) for n in re.findall(r"\| ([0-9,]+) (?=\|)", table)]
    rows = coverage_rows()
    total = len(COVERAGE["rules"])
    assert f"{total} rules" in table
    assert numbers[:2] == list(rows["prefix"])
    assert f"{rows['prefix-new'][0]} by patterns new in v2" in text
    assert numbers[2] == rows["keyword"][0]
    assert f"{rows['ours'][0]} formats gitleaks has no rule for" in text
    redacted, samples = keyword_samples()
    assert f"{redacted} of its {samples} samples" in table
