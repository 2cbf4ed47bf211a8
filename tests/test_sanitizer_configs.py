"""Real configuration files of LLM serving stacks (tests/data/configs, see PROVENANCE.md),
with secrets planted where each format holds them: every planted value redacted, every
public identifier kept, and each planted file pasted back into a publication caught."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ledger.publication._publish import publish
from ledger.sanitizer._sanitizer import Sanitizer, load_rules, rules_file
from tests.conftest import CliRun, forge_seal, verify_json

CONFIGS = Path(__file__).parent / "data" / "configs"
PLANTS: list[dict[str, Any]] = json.loads((CONFIGS / "plants.json").read_text())


def planted(entry: dict[str, Any]) -> str:
    text = (CONFIGS / entry["file"]).read_bytes().decode("utf-8")
    for plant in entry["plants"]:
        assert text.count(plant["find"]) == 1, plant["find"]
        text = text.replace(plant["find"], plant["replace"])
    return text


def test_the_corpus_covers_the_formats_people_keep() -> None:
    formats = {entry["format"] for entry in PLANTS}
    assert {"helm", "k8s", "compose", "shell", "dotenv", "toml", "ini", "csv"} <= formats
    assert sum(len(entry["plants"]) for entry in PLANTS) >= 50


@pytest.mark.parametrize("entry", PLANTS, ids=[e["file"] for e in PLANTS])
def test_planted_secrets_go_and_public_identifiers_stay(entry: dict[str, Any]) -> None:
    text = planted(entry)
    cleaned = Sanitizer().file_text(text, f"configs/{entry['file']}")
    for plant in entry["plants"]:
        assert plant["secret"] not in cleaned
    for kept in entry["keep"]:
        assert kept in cleaned


def test_rules_v1_left_planted_secrets_in_these_files() -> None:
    """The corpus tells the rules apart: v1 published some of what was planted."""
    v1 = Sanitizer(load_rules(rules_file("1")))
    left = [
        plant["secret"]
        for entry in PLANTS
        for plant in entry["plants"]
        if plant["secret"] in v1.file_text(planted(entry), f"configs/{entry['file']}")
    ]
    # v1 left a Groq key and values only their place marks (4 of the 59 at this writing).
    assert len(left) >= 3


def test_published_and_pasted_back(two_arm_campaign: Path, tmp_path: Path, cli: CliRun) -> None:
    raw = tmp_path / "raw" / two_arm_campaign.name
    shutil.copytree(two_arm_campaign, raw)
    for entry in PLANTS:
        target = raw / "configs" / entry["file"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(planted(entry).encode())
    forge_seal(raw)
    public = publish(raw, tmp_path / "public", digest_map=tmp_path / "map.json").folder
    for entry in PLANTS:
        published = (public / "configs" / entry["file"]).read_bytes().decode()
        assert not [p["secret"] for p in entry["plants"] if p["secret"] in published]
        assert not [k for k in entry["keep"] if k not in published]
    status, report = verify_json(cli, "--public", public)
    assert status == 0, report["findings"]
    for entry in PLANTS:
        (public / "configs" / entry["file"]).write_bytes(planted(entry).encode())
    forge_seal(public)
    status, report = verify_json(cli, "--public", public)
    assert status == 1
    caught = {
        f["path"].split("/configs/", 1)[-1]
        for f in report["findings"]
        if f["code"] == "private-data" and "/configs/" in f["path"]
    }
    assert caught == {entry["file"] for entry in PLANTS}
