"""Promotion policies: the shipped default, TOML files and their errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.errors import InvalidArtifact
from ledger.promotion.policy import load_policy
from tests.conftest import CliRun

DEFAULT_TEXT = (Path(__file__).resolve().parent.parent / "ledger/_policy/default.toml").read_text()


def test_default_policy_is_fail_closed() -> None:
    policy = load_policy()
    assert policy.source == "default"
    assert policy.reserve_min_free_mib == 3072
    assert policy.required_gates == ("preflight", "thinking-control", "capacity", "endurance")
    assert (policy.context_pass_fraction, policy.coding_pass_rate) == (0.9, 1.0)
    assert policy.restoration_required and policy.approval_required
    assert policy.approvers == ()  # nobody can approve until an organization names someone
    assert policy.matched_ab.enforced_rules() == {
        "requests-succeeded",
        "prompt-digests",
        "prompt-tokens",
        "sampling",
        "concurrency",
        "controlled-output",
        "cache-state",
        "identity",
    }
    assert len(policy.sha256) == 64


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text(text)
    return path


def test_a_policy_file_names_its_approvers_and_root(tmp_path: Path) -> None:
    text = DEFAULT_TEXT.replace(
        'trusted_root = "production"', 'trusted_root = "roots/trusted_root.json"'
    ).replace(
        "approvers = []", 'approvers = [{ identity = "a@example.com", issuer = "https://i" }]'
    )
    policy = load_policy(_write(tmp_path, text))
    assert policy.trusted_root == str(tmp_path / "roots/trusted_root.json")
    assert [(a.identity, a.issuer) for a in policy.approvers] == [("a@example.com", "https://i")]
    # Recorded in a campaign, a root path keeps only its name: no host path in evidence.
    assert policy.to_json()["approval"]["trusted_root"] == "trusted_root.json"
    assert policy.sha256 != load_policy().sha256


def test_relaxing_a_rule_changes_the_digest(tmp_path: Path) -> None:
    relaxed = load_policy(
        _write(
            tmp_path, DEFAULT_TEXT.replace("equal_cache_state = true", "equal_cache_state = false")
        )
    )
    assert "cache-state" not in relaxed.matched_ab.enforced_rules()
    assert relaxed.sha256 != load_policy().sha256


def test_no_policy_counts_an_arm_where_nothing_succeeded(tmp_path: Path) -> None:
    from ledger.promotion import comparison_failures

    text = DEFAULT_TEXT
    for rule in ("equal_prompts", "equal_sampling", "equal_concurrency", "controlled_output",
                 "equal_cache_state", "identity_within_declared"):  # fmt: skip
        text = text.replace(f"{rule} = true", f"{rule} = false")
    text = text.replace("min_samples_per_cell = 10", "min_samples_per_cell = 1")
    relaxed = load_policy(_write(tmp_path, text))
    assert relaxed.matched_ab.enforced_rules() == {"requests-succeeded"}
    nothing = "capacity/c1: 0 of 4 requests succeeded on cand"
    row = {"stage": "capacity", "cell": "c1", "n": {"baseline": 4, "candidate": 4},
           "failed": {"baseline": 0, "candidate": 4}}  # fmt: skip
    document = {
        "baseline": {"arm": "base"},
        "candidate": {"arm": "cand"},
        "rows": [row],
        "match_failures": [
            {"rule": "requests-succeeded", "reason": nothing},
            {"rule": "prompt-tokens", "reason": "capacity/c1: actual prompt tokens differ"},
        ],
    }
    assert comparison_failures(document, relaxed)[0] == nothing
    assert "capacity/c1: actual prompt tokens differ" not in comparison_failures(document, relaxed)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda t: t.replace("reserve_min_free_mib = 3072", 'reserve_min_free_mib = "3 GiB"'),
            r'/reserve_min_free_mib: "3 GiB" is not of type "integer"',
        ),
        (
            lambda t: t.replace("[restoration]", "colour = 'red'\n[restoration]"),
            r"policy.toml: /quality: .*colour",
        ),
        (
            lambda t: t.replace(
                "anvil-serving.promotion-policy/v1", "anvil-serving.promotion-policy/v9"
            ),
            r"schema must be 'anvil-serving.promotion-policy/v1'",
        ),
        (
            lambda t: t.replace("min_samples_per_cell = 10", "min_samples_per_cell = 0"),
            r"/matched_ab/min_samples_per_cell",
        ),
        (lambda t: t + "\n[[[broken", r"not valid TOML"),
    ],
)
def test_bad_policies_are_one_line_errors(tmp_path: Path, edit: object, message: str) -> None:
    path = _write(tmp_path, edit(DEFAULT_TEXT))  # type: ignore[operator]
    with pytest.raises(InvalidArtifact, match=message) as raised:
        load_policy(path)
    assert "\n" not in str(raised.value)
    assert str(raised.value).startswith(str(path))


def test_every_problem_of_a_policy_is_named_on_one_line(tmp_path: Path) -> None:
    text = DEFAULT_TEXT.replace("reserve_min_free_mib = 3072", 'reserve_min_free_mib = "lots"')
    text = text.replace("min_samples_per_cell = 10", "min_samples_per_cell = 0")
    with pytest.raises(InvalidArtifact) as raised:
        load_policy(_write(tmp_path, text))
    message = str(raised.value)
    assert "\n" not in message
    assert "/reserve_min_free_mib" in message and "/matched_ab/min_samples_per_cell" in message
    assert "more)" not in message
    # Past five, the rest are counted rather than listed.
    for rule in ("equal_prompts", "equal_sampling", "equal_concurrency", "controlled_output"):
        text = text.replace(f"{rule} = true", f'{rule} = "yes"')
    with pytest.raises(InvalidArtifact, match=r"\(and 1 more\)$") as raised:
        load_policy(_write(tmp_path, text))
    assert str(raised.value).count("; ") == 4


def test_commands_refuse_an_unusable_policy(
    tmp_path: Path, cli: CliRun, two_arm_campaign: Path
) -> None:
    missing = tmp_path / "nope.toml"
    for command in ("decide", "gate"):
        status, _, err = cli(command, str(two_arm_campaign), "--policy", str(missing))
        assert status == 2
        assert err.strip().count("\n") == 0 and "cannot read" in err
    status, _, err = cli("verify", str(two_arm_campaign), "--policy", str(missing))
    assert status == 2 and "cannot read" in err
    status, _, err = cli("decide", str(tmp_path / "no-campaign"))
    assert status == 2 and err.strip().endswith("no-campaign: no such folder")


def test_policy_rules_name_every_match_rule_derive_writes() -> None:
    from ledger.derivation._derive import MATCH_RULES
    from ledger.formats.schema import SchemaId, load_schema

    schema = load_schema(SchemaId.parse("anvil-serving.ab-comparison/v1"))
    enum = schema["properties"]["match_failures"]["items"]["properties"]["rule"]["enum"]
    assert set(enum) == set(MATCH_RULES) == load_policy().matched_ab.enforced_rules()
