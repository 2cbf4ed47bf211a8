"""Promotion policies (``anvil-serving.promotion-policy/v1``): the rules a decision must meet.

A policy is a TOML file, checked against its JSON Schema like any artifact. The default
ships inside the package (``ledger/_policy/default.toml``); it names no approver, so as
shipped it authorizes no promotion until an organization names its own.
"""

from __future__ import annotations

import hashlib
import importlib.resources
from pathlib import Path
from typing import Any

import attrs

from ledger.errors import InvalidArtifact
from ledger.formats import jsonio, schema
from ledger.formats.tomlio import parse_toml, read_toml

__all__ = [
    "PINNED_ROOTS",
    "POLICY_SCHEMA",
    "PROMOTION_LEVELS",
    "Approver",
    "MatchedAB",
    "Policy",
    "load_policy",
    "parse_policy",
]

POLICY_SCHEMA = "anvil-serving.promotion-policy/v1"
_SHOWN = 5
"""Schema problems a policy error names; the rest are counted."""
PINNED_ROOTS = ("production", "staging")
PROMOTION_LEVELS = (
    "ANVIL_PROMOTION_LEVEL_1",
    "ANVIL_PROMOTION_LEVEL_2",
    "ANVIL_PROMOTION_LEVEL_3",
)
"""The levels :attr:`Policy.level` names (custom SLSA results: never ``SLSA_`` ones)."""


@attrs.frozen
class MatchedAB:
    """What makes an A/B comparison matched enough to promote on."""

    equal_prompts: bool
    equal_sampling: bool
    equal_concurrency: bool
    controlled_output: bool
    equal_cache_state: bool
    identity_within_declared: bool
    min_samples_per_cell: int
    sustainable_rate_no_worse: bool = False
    """The candidate's sustainable rate at the comparison's SLO is at least the baseline's,
    in every load stage (the comparison must then be derived with an SLO)."""
    minimum_detectable_effect_percent: float | None = None
    """Every median of every compared cell must detect a change this small: the comparison
    needs an A/A control, and each median's MDE at most this (None: no such rule)."""

    def to_json(self) -> dict[str, Any]:
        """As a policy document holds it; the rate and MDE rules only when set, so every
        policy written before they existed keeps its bytes and its digest."""
        found = attrs.asdict(self)
        if not self.sustainable_rate_no_worse:
            del found["sustainable_rate_no_worse"]
        if self.minimum_detectable_effect_percent is None:
            del found["minimum_detectable_effect_percent"]
        return found

    def enforced_rules(self) -> frozenset[str]:
        """The ``match_failures`` rules of a derived comparison this policy counts."""
        rules = {
            # No setting turns it off: a cell where an arm had no successful request
            # compares nothing, whatever else a policy relaxes.
            "requests-succeeded": True,
            "prompt-digests": self.equal_prompts,
            "prompt-tokens": self.equal_prompts,
            "sampling": self.equal_sampling,
            "concurrency": self.equal_concurrency,
            "controlled-output": self.controlled_output,
            "cache-state": self.equal_cache_state,
            "identity": self.identity_within_declared,
        }
        return frozenset(rule for rule, on in rules.items() if on)


@attrs.frozen
class Approver:
    """An identity allowed to approve, as its sigstore certificate names it."""

    identity: str
    issuer: str


@attrs.frozen
class Policy:
    """A loaded policy."""

    name: str
    required_gates: tuple[str, ...]
    reserve_min_free_mib: int
    matched_ab: MatchedAB
    restoration_required: bool
    approval_required: bool
    approvers: tuple[Approver, ...]
    trusted_root: str
    """``production``, ``staging`` or an absolute path to a trusted_root.json."""
    source: str
    """Where it was read from (a path, or ``default``)."""
    context_pass_fraction: float = 0.9
    """Each depth of a context-quality sweep must pass at least this fraction."""
    coding_pass_rate: float = 1.0
    """A coding-quality gate passes at this fraction of attempts or more."""

    def to_json(self) -> dict[str, Any]:
        """The policy as a ``promotion-policy/v1`` document."""
        return {
            "schema": POLICY_SCHEMA,
            "name": self.name,
            "required_gates": list(self.required_gates),
            "reserve_min_free_mib": self.reserve_min_free_mib,
            "matched_ab": self.matched_ab.to_json(),
            "restoration": {"required": self.restoration_required},
            "quality": {
                "context_pass_fraction": self.context_pass_fraction,
                "coding_pass_rate": self.coding_pass_rate,
            },
            "approval": {
                "required": self.approval_required,
                "trusted_root": self.trusted_root
                if self.trusted_root in PINNED_ROOTS
                else Path(self.trusted_root).name,
                "approvers": [attrs.asdict(a) for a in self.approvers],
            },
        }

    @property
    def level(self) -> str:
        """What a gate that passes under this policy attests (a verification summary's
        ``verifiedLevels``), each level holding the ones below: 1, every verify check and
        the rules every policy keeps (complete, required gates, a matched A/B, the GPU
        reserve); 2, also the serving container shown unchanged (restoration); 3, also a
        signed approval by a named approver."""
        if not self.restoration_required:
            return PROMOTION_LEVELS[0]
        return PROMOTION_LEVELS[2] if self.approval_required else PROMOTION_LEVELS[1]

    @property
    def sha256(self) -> str:
        """SHA-256 of :meth:`to_json` in canonical form: which policy a decision used."""
        return hashlib.sha256(jsonio.dumps_deterministic(self.to_json())).hexdigest()


def parse_policy(data: dict[str, Any], *, source: str, base: Path | None = None) -> Policy:
    """Checks a policy mapping against its schema and builds it.

    Raises:
        InvalidArtifact: its problems, each with its JSON pointer.
    """
    if data.get("schema") != POLICY_SCHEMA:
        raise InvalidArtifact(
            f"{source}: schema must be {POLICY_SCHEMA!r}, got {data.get('schema')!r}"
        )
    problems = schema.issues(data, schema.SchemaId.parse(POLICY_SCHEMA))
    if problems:
        # Every problem at once, on one line: a policy is edited by hand, and fixing one
        # error at a time costs a run per error.
        shown = "; ".join(f"{p.pointer or '/'}: {p.message}" for p in problems[:_SHOWN])
        more = f" (and {len(problems) - _SHOWN} more)" if len(problems) > _SHOWN else ""
        raise InvalidArtifact(f"{source}: {shown}{more}")
    approval = data["approval"]
    quality = data.get("quality") or {}
    root = approval["trusted_root"]
    if root not in PINNED_ROOTS:
        path = Path(root)
        if not path.is_absolute():
            path = (base or Path(".")) / path
        root = str(path.resolve())
    return Policy(
        name=data["name"],
        required_gates=tuple(data["required_gates"]),
        reserve_min_free_mib=data["reserve_min_free_mib"],
        matched_ab=MatchedAB(**data["matched_ab"]),
        restoration_required=data["restoration"]["required"],
        approval_required=approval["required"],
        approvers=tuple(Approver(**a) for a in approval["approvers"]),
        trusted_root=root,
        source=source,
        context_pass_fraction=float(quality.get("context_pass_fraction", 0.9)),
        coding_pass_rate=float(quality.get("coding_pass_rate", 1.0)),
    )


def load_policy(path: str | Path | None = None) -> Policy:
    """Reads a policy TOML file, or the default one.

    Raises:
        InvalidArtifact: unreadable, not TOML, or not a valid policy.
    """
    if path is None:
        text = (importlib.resources.files("ledger") / "_policy" / "default.toml").read_text()
        return parse_policy(parse_toml(text, source="default"), source="default")
    path = Path(path)
    if path.is_dir():
        raise InvalidArtifact(f"{path}: a folder, not a policy file")
    return parse_policy(read_toml(path), source=str(path), base=path.parent)
