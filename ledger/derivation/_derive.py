"""``ledger derive``: comparison artifacts computed in DuckDB from raw request rows.

Two kinds, for any two arms of a campaign:

- ``os-comparison/v1`` in the shape of seed 2026-09-08's ``headline_results`` (the
  baseline arm in the ``windows`` slots, the candidate in ``linux``);
- ``ab-comparison/v1``, baseline and candidate by name with their declared differences.

Each row pairs the two arms' cells of one stage and cell id. Medians come from the
``cells`` view; each median's change carries a seeded bootstrap 95 % interval, or is
labelled descriptive when an arm has fewer than ten successful requests. Whether the arms
are matched is decided from the data, with every reason when they are not, and so are the
limitations. ``recompute`` derives again and names the first field that differs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ledger.database import Database, DatabaseError, build
from ledger.derivation import _bootstrap as bootstrap
from ledger.derivation import calibration, goodput
from ledger.derivation._comparison_reads import DuplicateCell, Ordered, Reads
from ledger.errors import Error, UsageError
from ledger.evidence import manifest
from ledger.findings import Issue
from ledger.formats.outputs import check_name, refuse_other_content
from ledger.formats.schema import document_bytes, read_document
from ledger.imports import DATASET_KEYS
from ledger.measures import percentiles

KINDS = ("os", "ab")
MEDIANS = {
    "decode_tok_s_p50": "decode_tok_s",
    "effective_prefill_tok_s_p50": "effective_prefill_tok_s",
    "ttft_p50_ms": "ttft_ms",
    "e2e_p50_ms": "e2e_ms",
}
"""Comparison metric -> request column whose median it is."""
FIRST_TOKEN = {"first_token_p50_ms": "first_token_ms"}
"""Compared only where an arm has no visible-content TTFT: the tools that imports read time
the first chunk of any channel, which is what ``first_token_ms`` measures."""
TOLERANCE = 1e-9
"""Relative tolerance of a recomputed float."""
CACHE_REUSE_GAP = 0.05
"""Prefix-cache hit rates further apart than this make two cells' cache reuse differ."""
DERIVED_FOLDER = "derived"


class DeriveError(Error):
    """A comparison cannot be derived (unknown arm, no common cell, no campaign)."""


class ArgumentError(DeriveError):
    """An argument names nothing the campaign has (an arm, a declared key), or names one
    arm twice: a mistyped command, unusable input (exit status 2)."""

    exit_status = 2


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None or isinstance(a, bool) or isinstance(b, bool):
            return a is b
        return math.isclose(float(a), float(b), rel_tol=TOLERANCE, abs_tol=1e-12)
    return bool(a == b)


def first_difference(expected: Any, actual: Any, pointer: str = "") -> str | None:
    """The JSON pointer of the first value that differs (floats within TOLERANCE)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in sorted(set(expected) | set(actual)):
            if key not in expected or key not in actual:
                return f"{pointer}/{key}"
            found = first_difference(expected[key], actual[key], f"{pointer}/{key}")
            if found is not None:
                return found
        return None
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return pointer or "/"
        for index, (a, b) in enumerate(zip(expected, actual, strict=True)):
            found = first_difference(a, b, f"{pointer}/{index}")
            if found is not None:
                return found
        return None
    return None if _close(expected, actual) else (pointer or "/")


def _change(baseline: float | None, candidate: float | None) -> float | None:
    if baseline is None or candidate is None or baseline == 0:
        return None
    return (candidate - baseline) / baseline * 100


def _intervals(
    groups: dict[tuple[str, int], list[Ordered]],
    seed: int,
    metrics: dict[str, str],
    whole: Callable[[str, int, int], Ordered],
) -> dict[str, list[tuple[float, float] | None]]:
    """Per metric, per row: the bootstrap interval of the change of the median, from each
    column's ordered values per (column, arm role) and row (:meth:`Reads.values`);
    ``whole(column, role, row)`` reads a cell whole where its resamples reach past its
    window."""
    # Draws depend only on a cell's size: one draw per distinct size serves every cell and
    # metric of that size; the two arms draw independently.
    positions = []
    for role in (0, 1):
        sizes = sorted({o.size for c in metrics.values() for o in groups[(c, role)] if o.size})
        first, second = bootstrap.median_positions(
            np.array(sizes, dtype=np.int64), seed=bootstrap.seed_for(str(seed), str(role))
        )
        positions.append({size: (first[i], second[i]) for i, size in enumerate(sizes)})
    out: dict[str, list[tuple[float, float] | None]] = {}
    for metric, column in metrics.items():
        rows: list[int] = []
        medians: tuple[list[np.ndarray[Any, Any]], list[np.ndarray[Any, Any]]] = ([], [])
        pairs = list(zip(groups[(column, 0)], groups[(column, 1)], strict=True))
        for row, (a, b) in enumerate(pairs):
            if min(a.size, b.size) < bootstrap.MIN_SAMPLES:
                continue
            rows.append(row)
            for role, ordered in enumerate((a, b)):
                found = bootstrap.medians_of(ordered, *positions[role][ordered.size])
                if found is None:
                    found = bootstrap.medians_of(
                        whole(column, role, row), *positions[role][ordered.size]
                    )
                assert found is not None, "a whole cell holds every rank"
                medians[role].append(found)
        intervals: list[tuple[float, float] | None] = [None] * len(pairs)
        for row, interval in zip(rows, bootstrap.percent_change_intervals(*medians), strict=True):
            intervals[row] = interval
        out[metric] = intervals
    return out


def _identity(row: dict[str, Any]) -> dict[str, Any]:
    raw = row.get("identity")
    if not raw:
        return {}
    value = json.loads(raw)
    return value if isinstance(value, dict) else {}


MATCH_RULES = (
    "requests-succeeded",
    "prompt-digests",
    "prompt-tokens",
    "sampling",
    "concurrency",
    "controlled-output",
    "cache-state",
    "identity",
)
"""What a matched A/B requires, each a rule a promotion policy names (every policy
enforces ``requests-succeeded``: an arm with nothing measured is no comparison)."""

IMPORTED_DATASET = DATASET_KEYS
"""An imported run's settings that choose its prompts: they stand in for digests."""
IMPORTED_LOAD = ("max_concurrency", "request_rate", "burstiness")
IMPORTED_NAMES = (
    "date",
    "label",
    "tag",
    "summary",
    "aggregate",
    "server_info.host",
    "server_info.port",
    "server_info.nccl_port",
)
"""Settings that name an imported run, its file or where its server listened, not what it
ran: never compared."""
IMPORTED_GROUPS = ("metadata", "server_info")
"""Settings that hold one value per key: vLLM's ``--metadata``, SGLang's server flags."""


def _typed(value: Any) -> Any:
    """``value`` as JSON types it, for comparing: ``true`` is no ``1`` and ``false`` no
    ``0`` (Python's ``True == 1`` would match a server's ``top_k: true`` with ``1``), while
    ``1`` and ``1.0`` are one JSON number."""
    if isinstance(value, bool):
        return ("boolean", value)
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return value


def _same(a: Any, b: Any) -> bool:
    return bool(_typed(a) == _typed(b))


REQUEST_PREFIX = "request."
"""How a part of the request names itself in ``--differs``: ``request.path``,
``request.headers.<name>``, ``request.body.<field>`` (``request.body.top_k``)."""


def _request(row: dict[str, Any]) -> dict[str, Any] | None:
    """What a cell's requests sent but their prompts, one key per part (see
    :data:`REQUEST_PREFIX`); None when the cell run does not record it (written before it
    was recorded, or imported)."""
    raw = row.get("request")
    value = json.loads(raw) if raw else None
    if not isinstance(value, dict):
        return None
    parts: dict[str, Any] = {f"{REQUEST_PREFIX}path": value.get("path")}
    for group in ("headers", "body"):
        members = value.get(group)
        for key, member in members.items() if isinstance(members, dict) else ():
            parts[f"{REQUEST_PREFIX}{group}.{key}"] = member
    return parts


def _request_failures(
    a: dict[str, Any], b: dict[str, Any], arms: tuple[str, str], declared: Sequence[str]
) -> list[str]:
    """How the two arms' requests differ beyond what is declared: a field only one arm
    sends counts (an absent field reads as null, as JSON)."""
    shapes = _request(a), _request(b)
    if shapes == (None, None):
        return []  # neither records it: the cell's own settings are what is compared
    missing = [arm for arm, shape in zip(arms, shapes, strict=True) if shape is None]
    if missing:
        return [
            f"the request sent is not recorded on {missing[0]} (a cell run of an earlier version)"
        ]
    first, second = shapes
    assert first is not None and second is not None
    return [
        f"{key} differs "
        f"({json.dumps(first.get(key), sort_keys=True)} vs {json.dumps(second.get(key), sort_keys=True)})"
        for key in sorted(set(first) | set(second))
        if not _same(first.get(key), second.get(key)) and key not in declared
    ]


def _imported(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return "imported" in (a.get("stage_kind"), b.get("stage_kind"))


def _differing(a: dict[str, Any], b: dict[str, Any], keys: Sequence[str]) -> list[str]:
    # As JSON: 500 and "500" must not read alike, and an absent setting reads as null.
    return [
        f"{k} differs ({json.dumps(a.get(k))} vs {json.dumps(b.get(k))})"
        for k in keys
        if not _same(a.get(k), b.get(k))
    ]


def _requests(count: int) -> str:
    return f"{count} request{'' if count == 1 else 's'}"


def _imported_identity(settings: dict[str, Any]) -> dict[str, Any]:
    """What an imported run says of the deployment: its settings less those compared
    apart or that only name it, with each ``--metadata`` value and server flag as
    ``metadata.<key>`` or ``server_info.<key>``, so that one can be declared as the
    difference."""
    identity: dict[str, Any] = {}
    for key, value in settings.items():
        if key in IMPORTED_GROUPS and isinstance(value, dict):
            identity.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            identity[key] = value
    ignored = {*IMPORTED_DATASET, *IMPORTED_LOAD, *IMPORTED_NAMES}
    return {k: v for k, v in identity.items() if k not in ignored}


def _compared(a: dict[str, Any], b: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The two identities whose differences must be declared."""
    ident_a, ident_b = _identity(a), _identity(b)
    if _imported(a, b):
        return _imported_identity(ident_a), _imported_identity(ident_b)
    return ident_a, ident_b


def _check_declared(
    pairs: list[tuple[dict[str, Any], dict[str, Any]]],
    declared: Sequence[str],
    required: Sequence[str],
) -> None:
    """Refuses a declared difference that neither arm's identity names, a ``required``
    one (``--kind os``'s) that does not differ, and declared differences none of which
    differs: in any cell both arms ran. A comparison labelled by what it compares (an
    os-comparison of two arms on one OS) would compare something else, or nothing."""
    # The parts of the request count as identity keys here: one of them may be the
    # declared variable (--differs request.body.top_k).
    compared = []
    for a, b in pairs:
        ident_a, ident_b = _compared(a, b)
        compared.append((ident_a | (_request(a) or {}), ident_b | (_request(b) or {})))
    differing = sorted(
        {k for ia, ib in compared for k in set(ia) | set(ib) if not _same(ia.get(k), ib.get(k))}
    )
    named = f"(the keys that differ: {', '.join(differing) or 'none'})"
    known = {k for identities in compared for ident in identities for k in ident}

    def flag(key: str) -> str:
        return "--kind os" if key in required else "--differs"

    for key in declared:
        if key not in known:
            raise ArgumentError(
                f"{flag(key)} {key!r}: neither arm's identity nor request has this key {named}"
            )
    same = [k for k in required if k not in differing]
    if declared and not set(declared) & set(differing):
        same = list(declared)
    if same:
        values = ", ".join(f"{k} {json.dumps(compared[0][0].get(k))}" for k in same)
        raise DeriveError(
            f"{flag(same[0])} {', '.join(map(repr, same))}: both arms have {values} in every "
            f"cell they both ran, so the comparison is not of what it declares {named}"
        )


def _match_failures(
    evidence: dict[tuple[str, str], tuple[int, int, int]],
    arms: tuple[str, str],
    pairs: list[tuple[dict[str, Any], dict[str, Any]]],
    declared: Sequence[str],
) -> list[dict[str, str]]:
    failures: list[dict[str, str]] = []

    def fail(rule: str, reason: str) -> None:
        failures.append({"rule": rule, "reason": reason})

    baseline, candidate = arms
    # First, whatever else differs: a cell where an arm had no successful request compares
    # nothing, and the other reasons it gives (a refused port's prompt tokens, say) are
    # only its consequences.
    for a, b in pairs:
        for row, arm in ((a, baseline), (b, candidate)):
            if row["n"] - row["failed"] == 0:
                fail(
                    "requests-succeeded",
                    f"{a['stage']}/{a['cell']}: 0 of {row['n']} requests succeeded on {arm}",
                )
    for a, b in pairs:
        where = f"{a['stage']}/{a['cell']}"
        digests, tokens, outputs = evidence.get((a["stage"], a["cell"]), (0, 0, 0))
        ident_a, ident_b = _identity(a), _identity(b)
        if _imported(a, b):
            # What imports can offer: the dataset settings the tool recorded, and each
            # request's input and output lengths, position by position.
            for row, arm in ((a, baseline), (b, candidate)):
                if row.get("artifact") is None:
                    fail("prompt-digests", f"{where}: no settings recorded for the run on {arm}")
            for reason in _differing(ident_a, ident_b, IMPORTED_DATASET):
                fail("prompt-digests", f"{where}: dataset setting {reason}")
            if tokens:
                fail("prompt-tokens", f"{where}: input lengths differ for {_requests(tokens)}")
            if outputs:
                fail(
                    "controlled-output", f"{where}: output lengths differ for {_requests(outputs)}"
                )
            for reason in _differing(a, b, ("concurrency",)) + _differing(
                ident_a, ident_b, IMPORTED_LOAD
            ):
                fail("concurrency", f"{where}: {reason}")
        else:
            if digests:
                fail("prompt-digests", f"{where}: prompt digests differ for {digests} requests")
            elif tokens:
                fail("prompt-tokens", f"{where}: actual prompt tokens differ for {tokens} requests")
            for name in ("max_tokens", "temperature", "seed", "concurrency", "thinking", "prefix"):
                if not _same(a.get(name), b.get(name)):
                    rule = "concurrency" if name == "concurrency" else "sampling"
                    fail(rule, f"{where}: {name} differs ({a.get(name)} vs {b.get(name)})")
            for reason in _request_failures(a, b, arms, declared):
                fail("sampling", f"{where}: {reason}")
            for row, arm in ((a, baseline), (b, candidate)):
                off = row.get("lengths_not_as_requested")
                if not row.get("controlled_output"):
                    fail("controlled-output", f"{where}: output uncontrolled on {arm}")
                elif off:
                    fail(
                        "controlled-output",
                        f"{where}: {off} output lengths not as requested on {arm}",
                    )
        rate_a, rate_b = a.get("prefix_cache_hit_rate"), b.get("prefix_cache_hit_rate")
        if rate_a is not None and rate_b is not None and abs(rate_a - rate_b) > CACHE_REUSE_GAP:
            fail(
                "cache-state",
                f"{where}: cache reuse differs (prefix-cache hit rate {rate_a:.3f} vs {rate_b:.3f})",
            )
        ident_a, ident_b = _compared(a, b)
        undeclared = sorted(
            k
            for k in set(ident_a) | set(ident_b)
            if not _same(ident_a.get(k), ident_b.get(k)) and k not in declared
        )
        if undeclared:
            fail("identity", f"{where}: identities differ in undeclared {', '.join(undeclared)}")
    unique: dict[str, dict[str, str]] = {}
    for failure in failures:
        unique.setdefault(failure["reason"], failure)
    return list(unique.values())


def _unchecked(
    pairs: list[tuple[dict[str, Any], dict[str, Any]]], arms: tuple[str, str]
) -> list[dict[str, str]]:
    """The rules a pair's data cannot show either way: imported results carry no prompt
    digests and no sampling parameters, and an arm without a measured prefix-cache hit rate
    (no /metrics, an import) leaves cache reuse uncompared. A policy that enforces one of
    them refuses."""
    found: list[dict[str, str]] = []
    for a, b in pairs:
        if _imported(a, b):
            found.extend(_imported_unchecked(a, b))
        unmeasured = [
            arm for arm, row in zip(arms, (a, b), strict=True)
            if row.get("prefix_cache_hit_rate") is None
        ]  # fmt: skip
        if unmeasured:
            found.append(
                {
                    "rule": "cache-state",
                    "reason": f"{a['stage']}/{a['cell']}: cache reuse was not compared (no "
                    f"measured prefix-cache hit rate on {' and '.join(unmeasured)})",
                }
            )
    return found


def _imported_unchecked(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, str]]:
    where = f"{a['stage']}/{a['cell']}"
    identities = [(_identity(row), row.get("stage_kind") == "imported") for row in (a, b)]
    tools = " and ".join(
        dict.fromkeys(str(i.get("tool") or "the import") for i, mine in identities if mine)
    )
    record = "record" if " and " in tools else "records"
    recorded = [k for k in IMPORTED_DATASET if any(k in i for i, _ in identities)]
    return [
        {
            "rule": "prompt-digests",
            "reason": f"{where}: prompt identity was not checked by digest ({tools} "
            f"{record} no prompts); the prompts were "
            "matched on the input length of each request"
            + (f" and on {', '.join(recorded)}" if recorded else "")
            + ("" if "seed" in recorded else " (no dataset seed was recorded)"),
        },
        {
            "rule": "sampling",
            "reason": f"{where}: sampling parameters were not checked ({tools} "
            f"{record} no temperature or max_tokens); "
            "the output length of each request was compared",
        },
    ]


def _limitations(
    pairs: list[tuple[dict[str, Any], dict[str, Any]]], arms: tuple[str, str]
) -> list[str]:
    found: list[str] = []
    for a, b in pairs:
        where = f"{a['stage']}/{a['cell']}"
        for row, arm in ((a, arms[0]), (b, arms[1])):
            ok = row["n"] - row["failed"]
            if row["failed"]:
                found.append(
                    f"{where}: {row['failed']} of {row['n']} requests failed on {arm}, excluded from timing statistics"
                )
            if ok < bootstrap.MIN_SAMPLES:
                found.append(
                    f"{where}: {ok} successful requests on {arm}; descriptive medians only"
                )
            if row.get("stage_kind") == "imported":
                found.append(f"{where}: cache reuse not measured on {arm} (an imported result)")
                continue
            if row.get("controlled_output") is False or row.get("controlled_output") is None:
                found.append(f"{where}: output length not controlled on {arm}")
            rate = row.get("prefix_cache_hit_rate")
            if rate is not None:
                found.append(f"{where}: measured prefix-cache hit rate {rate:.3f} on {arm}")
            elif row.get("metrics_available") is False:
                found.append(f"{where}: cache reuse not measured on {arm} (no /metrics)")
    # Cache reuse unmeasured is already a limitation of each arm, said above.
    found += [e["reason"] for e in _unchecked(pairs, arms) if e["rule"] != "cache-state"]
    return list(dict.fromkeys(found))


def reads_of(db: Database, comparisons: Sequence[tuple[str, tuple[str, str]]]) -> Reads:
    """What deriving each (campaign, (baseline, candidate)) reads, one query for all."""
    (first_token,) = FIRST_TOKEN.values()
    return Reads(db, comparisons, tuple(MEDIANS.values()), (MEDIANS["ttft_p50_ms"], first_token))


def derive(
    db: Database,
    campaign: str,
    baseline: str,
    candidate: str,
    *,
    kind: str = "ab",
    differs: Sequence[str] = (),
    check_declared: bool = False,
    slo: dict[str, float] | None = None,
    reads: Reads | None = None,
    control: str | None = None,
    inference: bool = True,
) -> dict[str, Any]:
    """The comparison document (not yet written).

    Args:
        check_declared: refuse a declared difference that neither arm's identity names
            (``ledger derive``; a stated comparison is derived again as it declares).
        slo: latency objectives: each arm's load stages then get goodput per rate and the
            sustainable rate at the SLO (``ledger/derivation/goodput.py``).
        reads: what :func:`reads_of` read for many comparisons, this one among them
            (verify's); by default it is read for this one alone.
        control: an arm run with the baseline's configuration (an A/A control): each
            metric gains the A/A change and the noise floor (``calibration.py``).
        inference: (``ab`` only) state each metric's verdict and minimum detectable
            effect, and only the load percentiles each cell's requests support
            (``ledger/measures/percentiles.py``); false derives a comparison again as
            ledger derived it before these existed.

    Raises:
        DeriveError: unknown kind or arm, no cell both arms ran, or (``check_declared``) a
            declared difference no identity names.
    """
    if kind not in KINDS:
        raise DeriveError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if slo is not None and kind != "ab":
        raise DeriveError("an SLO's goodput is part of an A/B comparison (--kind ab)")
    if baseline == candidate:
        raise ArgumentError(f"baseline and candidate are the same arm {baseline!r}")
    inference = inference and kind == "ab"
    if control is not None:
        if not inference:
            raise DeriveError("an A/A control calibrates an A/B comparison (--kind ab)")
        if control in (baseline, candidate):
            raise ArgumentError(f"the A/A control {control!r} is one of the compared arms")
    arms = (baseline, candidate)
    comparison = (campaign, arms)
    reads = reads or reads_of(db, [comparison])
    cells, pairs = _paired_cells(reads, comparison)
    declared = list(dict.fromkeys(differs)) or (["os"] if kind == "os" else [])
    if check_declared:
        # An os-comparison is of two operating systems, whatever else it declares (a
        # stated one derived again keeps what it declared).
        required = ["os"] if kind == "os" else []
        declared = list(dict.fromkeys([*required, *declared]))
        _check_declared(pairs, declared, required)
    seed = bootstrap.seed_for(campaign, baseline, candidate, kind)
    columns = reads.columns(comparison)
    metrics = {m: c for m, c in {**MEDIANS, **FIRST_TOKEN}.items() if c in columns}
    intervals = _intervals(
        reads.values(comparison),
        seed,
        metrics,
        lambda column, role, row: reads.whole(comparison, column, role, row),
    )
    failures = _match_failures(reads.evidence(comparison), arms, pairs, declared)
    derivation = _derivation(kind, arms, declared, slo)
    document: dict[str, Any]
    if kind == "os":
        document = _os_document(pairs, intervals, arms)
    else:
        document = _ab_document(pairs, intervals, arms)
    limitations = _limitations(pairs, arms) + _unpaired(cells, arms)
    if inference:
        derivation["inference"] = {
            "level": calibration.LEVEL,
            "power": calibration.POWER,
            "percentile_confidence": percentiles.CONFIDENCE,
            "control": control,
        }
        aa = None
        if control is not None:
            aa = _control(db, campaign, baseline, control, reads)
            document["calibration"] = {
                "control": control,
                "matched": aa["matched"],
                "match_reasons": aa["match_reasons"],
            }
        limitations += _judge(document["rows"], aa, control)
    document.update(
        campaign_id=campaign,
        matched=not failures,
        match_reasons=[f["reason"] for f in failures],
        match_failures=failures,
        limitations=limitations,
        derivation=derivation,
    )
    unchecked = _unchecked(pairs, arms)
    if unchecked:
        document["unchecked"] = unchecked
    if slo is not None:
        document["load"] = _load(db, campaign, arms, slo, inference=inference)
    return document


def _control(
    db: Database, campaign: str, baseline: str, control: str, reads: Reads
) -> dict[str, Any]:
    """The A/A comparison of the baseline with its control, matched on every rule with no
    declared difference (a control that differs in anything measures more than noise)."""
    pair = (campaign, (baseline, control))
    try:
        return derive(
            db,
            campaign,
            baseline,
            control,
            reads=reads if reads.holds(pair) else reads_of(db, [pair]),
            inference=False,
        )
    except DeriveError as e:
        raise type(e)(f"the A/A control {control!r}: {e}") from None


def _judge(rows: list[dict[str, Any]], aa: dict[str, Any] | None, control: str | None) -> list[str]:
    """Each median's verdict and MDE (with the control, its A/A change and noise floor) in
    place; the limitations that follow from the control."""
    controlled = aa is not None
    usable = aa is not None and aa["matched"]
    limitations = []
    if aa is not None and not usable:
        limitations.append(
            f"the A/A control {control} is not matched with the baseline "
            f"({'; '.join(aa['match_reasons'])}): no noise floor"
        )
    elif aa is None:
        limitations.append(
            "no A/A control: the noise between two runs of one configuration is not "
            "measured, and the verdicts rest on each run's own requests"
        )
    by_cell = {(r["stage"], r["cell"]): r for r in aa["rows"]} if usable and aa else {}
    for row in rows:
        aa_row = by_cell.get((row["stage"], row["cell"]))
        if usable and aa_row is None:
            limitations.append(
                f"{row['stage']}/{row['cell']}: not run by the A/A control {control}; no "
                "noise floor"
            )
        aa_metrics = aa_row["metrics"] if aa_row else {}
        for metric, entry in list(row["metrics"].items()):
            if "change_ci95" not in entry:
                continue  # throughput: one figure per cell, no interval to judge by
            row["metrics"][metric] = calibration.judged(
                metric, entry, aa_metrics.get(metric), controlled
            )
    return limitations


def _paired_cells(
    reads: Reads, comparison: tuple[str, tuple[str, str]]
) -> tuple[list[dict[tuple[str, str], Any]], list[tuple[Any, Any]]]:
    """Each arm's cells by (stage, cell), and the pairs both arms ran.

    Raises:
        DeriveError: a cell is twice in one arm, or no cell of one arm matches the other's.
        ArgumentError: an arm has no cell.
    """
    campaign, arms = comparison
    try:
        cells = reads.cells(comparison)
    except DuplicateCell as e:
        raise DeriveError(str(e)) from None
    for arm, found in zip(arms, cells, strict=True):
        if not found:
            raise ArgumentError(f"campaign {campaign!r} has no cells of arm {arm!r}")
    keys = reads.keys(comparison)
    if not keys:
        raise DeriveError(
            f"no cell of {arms[0]!r} ({_some_cells(cells[0])}) matches a cell of {arms[1]!r} "
            f"({_some_cells(cells[1])}): cells pair by stage and cell name"
        )
    return cells, [(cells[0][k], cells[1][k]) for k in keys]


def _some_cells(found: dict[tuple[str, str], Any]) -> str:
    """An arm's cells for a message: the first three by name, and how many more."""
    names = [f"{stage}/{cell}" for stage, cell in found]
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _derivation(
    kind: str, arms: tuple[str, str], declared: list[str], slo: dict[str, float] | None
) -> dict[str, Any]:
    """How the comparison was derived: its arms, declared differences and bootstrap."""
    derivation: dict[str, Any] = {
        "tool": "ledger derive",
        "kind": kind,
        "baseline": arms[0],
        "candidate": arms[1],
        "declared_differences": declared,
        "bootstrap": {
            "resamples": bootstrap.RESAMPLES,
            "confidence": 0.95,
            "min_samples": bootstrap.MIN_SAMPLES,
            "method": "exact multinomial descent on sorted values, numpy RandomState",
        },
    }
    if slo is not None:
        derivation["slo"] = dict(slo)
    return derivation


def _unpaired(cells: list[dict[tuple[str, str], Any]], arms: tuple[str, str]) -> list[str]:
    """The cells only one arm ran: named as limitations, not compared."""
    return [
        f"{stage}/{cell}: only on {arm}, not compared"
        for arm, mine, theirs in ((arms[0], cells[0], cells[1]), (arms[1], cells[1], cells[0]))
        for stage, cell in mine
        if (stage, cell) not in theirs
    ]


def _load(
    db: Database,
    campaign: str,
    arms: tuple[str, str],
    slo: dict[str, float],
    *,
    inference: bool = True,
) -> dict[str, Any]:
    """Goodput per rate and the sustainable rate of every load stage both arms ran, a
    stage's thinking modes apart (each its own run of rates)."""
    rows = db.query(goodput.cell_query(slo), [campaign, *arms]).to_json()
    settings = {
        (r["arm"], r["stage"], r["cell"]): (r["rate"], bool(r["thinking"]))
        for r in db.query(
            "SELECT arm, stage, cell, rate, thinking FROM cell_settings WHERE campaign_id = ? "
            "AND arm IN (?, ?) AND rate IS NOT NULL",
            [campaign, *arms],
        ).to_json()
    }
    runs: dict[tuple[str, bool], dict[str, list[dict[str, Any]]]] = {}
    for row in rows:
        found = settings.get((row["arm"], row["stage"], row["cell"]))
        if found is None:
            continue  # due times without a load cell's settings: verify reports it
        rate, thinking = found
        row["rate"] = rate
        runs.setdefault((row["stage"], thinking), {}).setdefault(row["arm"], []).append(row)
    both = [key for key, found in sorted(runs.items()) if set(found) == set(arms)]
    if not both:
        raise DeriveError(
            f"an SLO was given, but no load stage of campaign {campaign!r} was run by both "
            f"{arms[0]!r} and {arms[1]!r}: goodput is derived from open-loop cells"
        )
    return {
        "slo": dict(slo),
        "stages": [
            {
                "stage": name,
                "thinking": thinking,
                **{
                    role: goodput.stage_summary(
                        runs[(name, thinking)][arm],
                        slo,
                        campaign=campaign,
                        arm=arm,
                        stage=f"{name}/{'think' if thinking else 'nothink'}",
                        supported_only=inference,
                    )
                    for role, arm in zip(("baseline", "candidate"), arms, strict=True)
                },
            }
            for name, thinking in both
        ],
    }


def _metric_values(
    a: dict[str, Any],
    b: dict[str, Any],
    names: tuple[str, str],
    interval: dict[str, tuple[float, float] | None],
) -> dict[str, Any]:
    metrics: dict[str, Any] = {}
    medians = {**MEDIANS, **FIRST_TOKEN}
    for metric in (*interval, "throughput_tok_s"):
        column = f"{medians[metric]}_p50" if metric in medians else metric
        va, vb = a.get(column), b.get(column)
        if va is None or vb is None:
            continue
        if metric in FIRST_TOKEN and None not in (a.get("ttft_ms_p50"), b.get("ttft_ms_p50")):
            continue
        entry = {names[0]: va, names[1]: vb, "change_percent": _change(va, vb)}
        if metric in medians:
            ci = interval.get(metric)
            entry["change_ci95"] = list(ci) if ci is not None else None
        metrics[metric] = entry
    return metrics


def _sources(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, str]]:
    return [
        {"path": row["artifact"], "sha256": row["sha256"]}
        for row in (a, b)
        if row.get("artifact") and row.get("sha256")
    ]


def _label(a: dict[str, Any], b: dict[str, Any]) -> str:
    small = min(a["n"] - a["failed"], b["n"] - b["failed"]) < bootstrap.MIN_SAMPLES
    return "descriptive" if small else "estimate"


def _os_document(
    pairs: list[tuple[dict[str, Any], dict[str, Any]]],
    intervals: dict[str, list[tuple[float, float] | None]],
    arms: tuple[str, str],
) -> dict[str, Any]:
    names = ("windows", "linux")
    rows = []
    endurance = None
    for index, (a, b) in enumerate(pairs):
        interval = {m: values[index] for m, values in intervals.items()}
        if a["stage_kind"] == "endurance":
            if (
                endurance is None
                and a.get("decode_tok_s_p50") is not None
                and b.get("decode_tok_s_p50") is not None
            ):
                ci = interval["decode_tok_s_p50"]
                endurance = {
                    "sample_count_per_os": min(a["n"] - a["failed"], b["n"] - b["failed"]),
                    "windows_source": a.get("artifact") or a["cell"],
                    "linux_source": b.get("artifact") or b["cell"],
                    "sources": _sources(a, b),
                    "decode_windows": a["decode_tok_s_p50"],
                    "decode_linux": b["decode_tok_s_p50"],
                    "decode_change_percent": _change(a["decode_tok_s_p50"], b["decode_tok_s_p50"]),
                    "decode_change_ci95": list(ci) if ci is not None else None,
                    "label": _label(a, b),
                }
            continue
        row: dict[str, Any] = {
            "context_target": a["context_target"],
            "stage": a["stage"],
            "cell": a["cell"],
            "concurrency": a["concurrency"],
            "actual_prompt_tokens": _mid(
                a.get("actual_prompt_tokens"), b.get("actual_prompt_tokens")
            ),
            "sample_count_per_os": min(a["n"] - a["failed"], b["n"] - b["failed"]),
            "metrics": _metric_values(a, b, names, interval),
            "windows_source": a.get("artifact") or a["cell"],
            "linux_source": b.get("artifact") or b["cell"],
            "sources": _sources(a, b),
            "label": _label(a, b),
            "limitations": _limitations([(a, b)], arms),
        }
        if a.get("thinking") is not None:
            row["thinking"] = a["thinking"]
        outputs = (a.get("median_output_tokens"), b.get("median_output_tokens"))
        if None not in outputs:
            row["median_output_tokens"] = {"windows": outputs[0], "linux": outputs[1]}
        rows.append(row)
    document: dict[str, Any] = {
        "schema": "anvil-serving.os-comparison/v1",
        "baseline_arm": arms[0],
        "candidate_arm": arms[1],
        "rows": rows,
    }
    if endurance is not None:
        document["endurance"] = endurance
    return document


def _mid(a: float | None, b: float | None) -> float | None:
    present = [v for v in (a, b) if v is not None]
    return sum(present) / len(present) if present else None


def _ab_document(
    pairs: list[tuple[dict[str, Any], dict[str, Any]]],
    intervals: dict[str, list[tuple[float, float] | None]],
    arms: tuple[str, str],
) -> dict[str, Any]:
    names = ("baseline", "candidate")
    rows = []
    for index, (a, b) in enumerate(pairs):
        interval = {m: values[index] for m, values in intervals.items()}
        rows.append(
            {
                "stage": a["stage"],
                "cell": a["cell"],
                "context_target": a["context_target"],
                "concurrency": a["concurrency"],
                "thinking": a.get("thinking"),
                "n": {"baseline": a["n"], "candidate": b["n"]},
                "failed": {"baseline": a["failed"], "candidate": b["failed"]},
                "label": _label(a, b),
                "actual_prompt_tokens": {
                    "baseline": a.get("actual_prompt_tokens"),
                    "candidate": b.get("actual_prompt_tokens"),
                },
                "median_output_tokens": {
                    "baseline": a.get("median_output_tokens"),
                    "candidate": b.get("median_output_tokens"),
                },
                "metrics": _metric_values(a, b, names, interval),
                "sources": _sources(a, b),
            }
        )
    return {
        "schema": "anvil-serving.ab-comparison/v1",
        "baseline": {"arm": arms[0], "identity": _identity(pairs[0][0])},
        "candidate": {"arm": arms[1], "identity": _identity(pairs[0][1])},
        "rows": rows,
    }


def output_name(kind: str, baseline: str, candidate: str) -> str:
    """Where a derived comparison goes inside its campaign folder."""
    label = "os-comparison" if kind == "os" else "ab-comparison"
    return f"{DERIVED_FOLDER}/{label}-{baseline}-vs-{candidate}.json"


def derive_into(
    folder: str | Path,
    baseline: str,
    candidate: str,
    *,
    kind: str = "ab",
    differs: Sequence[str] = (),
    reseal_after_review: bool = False,
    replace: bool = False,
    slo: dict[str, float] | None = None,
    control: str | None = None,
) -> Path:
    """Derives a comparison from a campaign folder, writes it under ``derived/`` and re-seals.

    ``control``: the A/A control arm; by default (``ab``) the run plan's first arm that
    repeats the baseline (``repeat_of``), if it has one and it is not the candidate.

    Raises:
        DeriveError: as :func:`derive`, or the folder holds no campaign.
        SealBroken: the folder no longer matches its seal (see ``manifest.check_seal``).
        UsageError: an arm name is not valid.
        OutputExists: the comparison exists with other content and ``replace`` is false.
    """
    root = Path(folder)
    check_name("arm", baseline)
    check_name("arm", candidate)
    if control is not None:
        check_name("arm", control)
    from_plan = slo is None and kind == "ab"
    planned = control is None and kind == "ab"
    if from_plan or planned:
        path, plan = _run_plan(root)
        if from_plan:
            slo = _slo_of(path, plan)
        if planned:
            control = _control_of(plan, baseline, candidate)
    review = manifest.check_seal(root, "derive", reseal_after_review=reseal_after_review)
    try:
        db = build([root], gaps=False)
    except DatabaseError as e:
        raise DeriveError(str(e)) from None
    try:
        campaign = root.resolve().name
        if from_plan and slo is not None and not _both_ran_load(db, campaign, baseline, candidate):
            # The plan's SLO is for its load stages: with none to apply it to, the
            # comparison has no goodput, rather than no comparison at all.
            slo = None
        if planned and control is not None and not _ran(db, campaign, control):
            # A run stopped before the plan's repeat ran: no control, rather than no
            # comparison (named with --control, a missing one is refused).
            control = None
        document = derive(
            db,
            campaign,
            baseline,
            candidate,
            kind=kind,
            differs=differs,
            check_declared=True,
            slo=slo,
            control=control,
        )
    finally:
        db.close()
    name = output_name(kind, baseline, candidate)
    files = {name: document_bytes(document)}
    if not replace:
        refuse_other_content(root, files, "--replace")
    manifest.write_sealed(
        root,
        files,
        command="derive",
        checked=(review,),
    )
    return root / name


def _both_ran_load(db: Database, campaign: str, baseline: str, candidate: str) -> bool:
    """Whether both arms hold open-loop (load or sweep rate) cells."""
    found = db.query(
        "SELECT count(DISTINCT arm) FROM cell_settings WHERE campaign_id = ? "
        "AND arm IN (?, ?) AND rate IS NOT NULL",
        [campaign, baseline, candidate],
    ).rows
    return bool(found) and found[0][0] == 2


def _ran(db: Database, campaign: str, arm: str) -> bool:
    """Whether ``arm`` has a cell in the campaign."""
    found = db.query(
        "SELECT count(*) FROM cell_settings WHERE campaign_id = ? AND arm = ?", [campaign, arm]
    ).rows
    return bool(found) and found[0][0] > 0


def _run_plan(folder: Path) -> tuple[Path, dict[str, Any] | None]:
    """The campaign's ``run-plan.json`` and its document (None where it has none)."""
    path = folder / "run-plan.json"
    if not path.is_file():
        return path, None
    try:
        return path, read_document(path)
    except (OSError, Error) as e:
        # Derived without what its plan states (an SLO, an A/A control), a comparison
        # would quietly lack its goodput or its noise floors.
        raise DeriveError(f"{path}: {e}") from None


def _control_of(plan: dict[str, Any] | None, baseline: str, candidate: str) -> str | None:
    """The run plan's first arm that repeats ``baseline`` (``repeat_of``) and is not
    ``candidate``: the comparison's A/A control."""
    arms = plan.get("arms") if plan is not None else None
    for arm in arms if isinstance(arms, list) else ():
        if isinstance(arm, dict) and arm.get("repeat_of") == baseline:
            name = arm.get("name")
            if isinstance(name, str) and name != candidate:
                return name
    return None


def plan_slo(folder: Path) -> dict[str, float] | None:
    """The SLO a campaign's run plan states (``[slo]``), if it has one."""
    return _slo_of(*_run_plan(folder))


def _slo_of(path: Path, plan: dict[str, Any] | None) -> dict[str, float] | None:
    stated = plan.get("slo") if plan is not None else None
    if not isinstance(stated, dict):
        return None
    try:
        return goodput.check_slo(stated)
    except ValueError as e:
        raise DeriveError(f"{path}: slo: {e}") from None


def recompute(
    folder: Path,
    document: dict[str, Any],
    database: Database | None = None,
    reads: Reads | None = None,
) -> list[Issue]:
    """Derives ``document`` again from the folder's raw rows; a ``derived-mismatch`` issue
    names the first differing field.

    Args:
        database: one already built from this folder among others (verify builds one for
            every campaign it recomputes); its rows are keyed by campaign, and the
            document's own ``campaign_id`` must be the folder's.
        reads: what :func:`reads_of` read from ``database`` for every comparison verify
            recomputes, this one among them (:func:`comparison_of`).
    """
    derivation = document.get("derivation")
    if not isinstance(derivation, dict):
        return []
    try:
        db = build([folder], gaps=False) if database is None else database
        try:
            campaign, (baseline, candidate) = comparison_of(document)
            inference = derivation.get("inference")
            fresh = derive(
                db,
                campaign,
                baseline,
                candidate,
                kind=str(derivation.get("kind")),
                differs=list(derivation.get("declared_differences") or ()),
                slo=derivation.get("slo"),
                reads=reads if database is not None else None,
                control=_stated_control(inference),
                inference=inference is not None,
            )
        finally:
            if database is None:
                db.close()
    except (DeriveError, DatabaseError, UsageError) as e:
        return [Issue("derived-mismatch", "/derivation", f"cannot be derived again: {e}")]
    pointer = first_difference(fresh, document)
    if pointer is None:
        return []
    return [
        Issue("derived-mismatch", pointer, _difference(_at(document, pointer), _at(fresh, pointer)))
    ]


def _difference(stated: Any, fresh: Any) -> str:
    """What differs, in a line a reader can take in: two lists by what each lacks (a list
    of limitations runs to kilobytes), anything else as it is, cut short."""
    if isinstance(stated, list) and isinstance(fresh, list):
        said = [f"states {len(stated)} entries; derived again from the raw rows: {len(fresh)}"]
        unstated = [x for x in fresh if x not in stated]
        underived = [x for x in stated if x not in fresh]
        if unstated:
            said.append(f"not stated: {_cut(unstated[0])}" + _more(len(unstated)))
        if underived:
            said.append(f"not derived: {_cut(underived[0])}" + _more(len(underived)))
        return "; ".join(said)
    return f"states {_cut(stated)}; derived again from the raw rows: {_cut(fresh)}"


def _cut(value: Any, limit: int = 200) -> str:
    shown = repr(value)
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


def _more(count: int) -> str:
    return f" (and {count - 1} more)" if count > 1 else ""


def _stated_control(inference: Any) -> str | None:
    control = inference.get("control") if isinstance(inference, dict) else None
    return control if isinstance(control, str) else None


def comparisons_of(document: dict[str, Any]) -> list[tuple[str, tuple[str, str]]]:
    """Every (campaign, (arm, arm)) deriving ``document`` again reads: its own, and the A/A
    one of its control where it states one."""
    campaign, arms = comparison_of(document)
    derivation = document.get("derivation")
    stated = derivation.get("inference") if isinstance(derivation, dict) else None
    control = _stated_control(stated)
    return [(campaign, arms)] + ([(campaign, (arms[0], control))] if control else [])


def comparison_of(document: dict[str, Any]) -> tuple[str, tuple[str, str]]:
    """The (campaign, (baseline, candidate)) a derived document states."""
    derivation = document.get("derivation")
    stated = derivation if isinstance(derivation, dict) else {}
    return (
        str(document.get("campaign_id")),
        (str(stated.get("baseline")), str(stated.get("candidate"))),
    )


def _at(document: Any, pointer: str) -> Any:
    value = document
    for part in pointer.strip("/").split("/") if pointer.strip("/") else ():
        if isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return "(absent)"
    return value
