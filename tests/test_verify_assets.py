"""Each defect asset makes verify report exactly its codes, with the right exit status."""

from __future__ import annotations

import filecmp
import os
from pathlib import Path

import pytest
from generate_verify_assets import CAMPAIGN, DEFECTS, generate

from ledger.findings import CODES
from tests.conftest import ASSETS, CliRun, verify_json

VERIFY = ASSETS / "verify"


def _codes(report: dict[str, object]) -> set[str]:
    findings = report["findings"]
    assert isinstance(findings, list)
    return {f["code"] for f in findings} - {"withheld-artifact"}


def test_valid_campaign_has_only_withheld_warnings(cli: CliRun) -> None:
    status, report = verify_json(cli, VERIFY / "valid")
    assert status == 0
    assert _codes(report) == set()
    assert report["summary"] == {
        "errors": 0,
        "warnings": 5,
        "campaigns": 1,
        "artifacts": 6,
        "ok": True,
    }


@pytest.mark.parametrize("name", sorted(DEFECTS))
def test_defect_asset(cli: CliRun, name: str) -> None:
    expected, _ = DEFECTS[name]
    status, report = verify_json(cli, VERIFY / name)
    assert _codes(report) == expected
    has_error = any(CODES[code][0] == "error" for code in expected)
    assert status == (1 if has_error else 0)
    for finding in report["findings"]:
        assert finding["path"].startswith(f"{VERIFY / name}/{CAMPAIGN}")
        assert finding["pointer"] == "" or finding["pointer"].startswith("/")
        assert "\n" not in finding["message"]


def test_every_code_has_an_asset_or_a_test() -> None:
    covered = set().union(*(codes for codes, _ in DEFECTS.values()))
    # These need a file system state that git cannot hold; tests/test_verify_edges.py makes them.
    covered |= {
        "no-campaign",
        "not-regular-file",
        "file-changed",
        "json-too-large",
        # A public text file over a size limit the test lowers: tests/test_verify_edges.py.
        "too-large-to-scan",
        "withheld-artifact",
        # A review recorded by a command: tests/test_verify_edges.py and tests/test_hostile.py.
        "resealed-after-review",
        # Needs a measured campaign with an A/B comparison: tests/test_promotion.py.
        "promotion-unmatched-ab",
        # Needs a measured campaign's run manifest: tests/test_database.py.
        "run-unlisted",
        # Needs a measured campaign's run manifest and plan: tests/test_promotion.py.
        "run-manifest-mismatch",
        # Needs a publication whose statement was deleted: tests/test_publish.py.
        "not-published",
        # Need a tickets folder in several states: tests/test_tickets.py.
        "ticket-missing",
        "ticket-mismatch",
        "ticket-invalid",
        "ticket-campaign-unknown",
        # Need a real sigstore bundle, which a generator cannot make byte for byte again:
        # tests/test_bundles.py signs with the private instance.
        "bundle-invalid",
        "bundle-mismatch",
        # Needs a measured campaign and a private sigstore's signature: tests/test_lost_seal.py.
        "approval-unsigned",
        # Need a publication whose statement names other rules (the seal rewritten to
        # hold the edited statement): tests/test_sanitizer_formats.py.
        "sanitizer-outdated",
        "sanitizer-unknown",
    }
    assert covered == set(CODES)


def _same_tree(left: Path, right: Path) -> None:
    compare = filecmp.dircmp(left, right)
    assert not compare.left_only and not compare.right_only, (
        left,
        compare.left_only,
        compare.right_only,
    )
    for name in compare.common_files:
        a, b = left / name, right / name
        if a.is_symlink() or b.is_symlink():
            assert os.readlink(a) == os.readlink(b)
        else:
            assert a.read_bytes() == b.read_bytes(), a
    for name in compare.common_dirs:
        _same_tree(left / name, right / name)


def test_generator_reproduces_checked_in_assets(tmp_path: Path) -> None:
    generate(tmp_path / "verify")
    _same_tree(tmp_path / "verify", VERIFY)
