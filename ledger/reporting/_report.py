"""``ledger report``: a campaign's publication, in Markdown or self-contained HTML.

Like the seed publication: a result card, the setup, headline results, performance tables
per context target, functional and quality results, GPU and container evidence, failures,
limitations, follow-up tickets and an evidence index with digests. Charts are SVG files
under ``report/``; beside each, ``report/<chart>.json`` (``anvil-serving.graph-data/v1``)
holds the values drawn and the digests of the artifacts they came from. Both formats are
built from the same content; the same campaign gives the same bytes. The files are written
into the campaign folder, which is then re-sealed, so the manifest lists them.
"""

from __future__ import annotations

import html
import json
import re
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from ledger.database import Database, Table, build
from ledger.derivation.goodput import sustained_text
from ledger.errors import Error, InvalidArtifact, SchemaError
from ledger.evidence import manifest, tree
from ledger.formats.outputs import refuse_other_content
from ledger.formats.schema import document_bytes, read_document
from ledger.measures import arrivals, percentiles
from ledger.promotion import Evidence, load_evidence
from ledger.reporting import _charts as charts
from ledger.reporting import _markdown as markdown
from ledger.reporting.tickets import FOLLOW_UP_NAME

REPORT_FOLDER = tree.REPORT_FOLDER
is_report_file = tree.is_report_file
GRAPH_SCHEMA = "anvil-serving.graph-data/v1"
FORMATS = ("md", "html")


class ReportError(Error):
    """The campaign cannot be reported on (no decision summary yet)."""


Block = tuple[Any, ...]
"""("h2", text) | ("p", text) | ("list", items) | ("table", headers, rows) | ("chart", name)"""


@attrs.frozen
class Chart:
    """One chart: its SVG and its graph data."""

    name: str
    title: str
    svg: str
    data: dict[str, Any]


# A metric an arm lacks (no visible content: no TTFT; an import without prefill times: no
# effective prefill) is absent from its row.
_MISSING = {"baseline": None, "candidate": None, "change_percent": None}


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def _change(metric: dict[str, Any]) -> str:
    change = metric.get("change_percent")
    if change is None:
        return "-"
    interval = metric.get("change_ci95")
    text = f"{change:+.1f}%"
    if interval is not None:
        text += f" ({interval[0]:+.1f} to {interval[1]:+.1f})"
    verdict = metric.get("verdict")
    if verdict is not None and verdict != "descriptive":
        text += f", {verdict}"
    floor = metric.get("noise_floor_percent")
    if floor is not None:
        text += f" (noise floor {floor:.1f}%)"
    return text


def _verdicts_said(comparison: dict[str, Any]) -> str:
    """How many cells' decode p50 reads each verdict, and against what noise."""
    found: dict[str, int] = {}
    for row in comparison["rows"]:
        verdict = row["metrics"].get("decode_tok_s_p50", {}).get("verdict")
        if verdict is not None:
            found[verdict] = found.get(verdict, 0) + 1
    if not found:
        return ""
    counted = ", ".join(
        f"{verdict} in {count}" for verdict, count in sorted(found.items(), key=lambda i: i[0])
    )
    calibration = comparison.get("calibration")
    if not isinstance(calibration, dict):
        against = "with no A/A control: the noise between runs is not measured"
    elif calibration.get("matched"):
        against = f"against the noise floor of the A/A control {calibration['control']}"
    else:
        against = (
            f"the A/A control {calibration['control']} is not matched with the baseline: "
            "the noise between runs is not measured"
        )
    return f" ({counted}, {against})"


def _quantile(value: Any, q: float, count: int | None) -> Any:
    """A percentile as a report may state it: None where ``count`` values cannot support
    it (``ledger/measures/percentiles.py``)."""
    return value if percentiles.supported(q, count) else None


def _quantile_text(value: Any, q: float, count: int | None) -> str:
    return percentiles.stated(q, count, _fmt(value))


class _Builder:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        try:
            self.summary = read_document(folder / manifest.SUMMARY_NAME)
        except (OSError, InvalidArtifact, SchemaError) as e:
            raise ReportError(
                f"{folder}: no readable summary.json ({e}); run ledger decide"
            ) from None
        self.evidence: Evidence = load_evidence(folder)
        self.loaded = manifest.read_manifest(folder / manifest.MANIFEST_NAME)
        self.digests = {a.path: a.sha256 for a in self.loaded.artifacts}
        self.decision = self.summary["decision"]
        self.candidate = self.decision.get("candidate")
        self.comparison_path, self.comparison = self._comparison()
        self.baseline = self.comparison["baseline"]["arm"] if self.comparison else None
        kinds = {
            d["stage"]["name"]: d["stage"]["kind"]
            for docs in self.evidence.cells.values()
            for _, d in docs
        }
        self.stage_kinds = kinds
        self.charts: list[Chart] = []
        self._database: Database | None = None

    def query(self, text: str, parameters: Sequence[Any] = ()) -> Table:
        """A query over the campaign's ledger database, built once per report."""
        if self._database is None:
            self._database = build([self.folder])
        return self._database.query(text, list(parameters))

    def _comparison(self) -> tuple[str | None, dict[str, Any] | None]:
        for path, document in self.evidence.comparisons:
            if self.candidate is None or document["candidate"]["arm"] == self.candidate:
                return path, document
        return None, None

    def ref(self, path: str) -> dict[str, str]:
        return {"path": path, "sha256": self.digests.get(path, "")}

    # -- content ----------------------------------------------------------------------

    def blocks(self) -> list[Block]:
        try:
            return self._blocks()
        finally:
            if self._database is not None:
                self._database.close()
                self._database = None

    def _blocks(self) -> list[Block]:
        out: list[Block] = []
        campaign = self.summary["campaign_id"]
        title = f"{campaign}: {self.candidate or 'campaign'}"
        if self.baseline:
            title += f" versus {self.baseline}"
        out.append(("h1", title))
        labels = ", ".join(self.decision.get("decision_labels") or ()) or "none"
        out.append(("p", f"Date: {campaign[:10]}"))
        state = "complete" if self.summary.get("complete") else "incomplete"
        authorized = "authorized" if self.decision["promotion_authorized"] else "not authorized"
        out.append(("p", f"Campaign state: {state}; promotion {authorized}."))
        out.append(("p", f"Decision: {labels}. Next gate: {self.decision.get('next_gate', '-')}"))
        out.extend(self._result_card())
        out.extend(self._setup())
        out.append(("h2", "Headline results"))
        out.extend(self._headlines())
        out.extend(self._performance())
        out.extend(self._serving())
        out.extend(self._load())
        out.extend(self._server_clock())
        out.extend(self._functional())
        out.extend(self._system())
        out.append(("h2", "Failures"))
        out.append(("list", list(self._strings("failures")) or ["None recorded."]))
        out.append(("h2", "Limitations"))
        out.append(("list", list(self._strings("limitations")) or ["None recorded."]))
        out.extend(self._follow_up())
        out.extend(self._index())
        return out

    def _headlines(self) -> list[Block]:
        headline = self.summary.get("headline_results")
        if not isinstance(headline, dict):
            return [("list", list(self._strings("headline_results")) or ["None stated."])]
        # A machine-derived OS comparison (os-comparison/v1): its rows as a table.
        rows = []
        for row in headline.get("rows") or ():
            for name, metric in sorted((row.get("metrics") or {}).items()):
                rows.append(
                    [
                        _fmt(row.get("context_target")),
                        _fmt(row.get("actual_prompt_tokens"), 0),
                        name,
                        _fmt(metric.get("windows")),
                        _fmt(metric.get("linux")),
                        _change(metric),
                    ]
                )
        out: list[Block] = [
            (
                "table",
                ["Nominal target", "Actual prompt tokens", "Metric", "Windows", "Linux", "Change"],
                rows,
            )
        ]
        endurance = headline.get("endurance")
        if isinstance(endurance, dict):
            change = _change({"change_percent": endurance.get("decode_change_percent")})
            text = (
                f"Endurance decode p50: {_fmt(endurance.get('decode_windows'))} (Windows) and "
                f"{_fmt(endurance.get('decode_linux'))} (Linux) tok/s, {change}, "
                f"n={_fmt(endurance.get('sample_count_per_os'))} per OS."
            )
            out.append(("p", text))
        return out

    def _strings(self, key: str) -> Sequence[str]:
        value = self.summary.get(key)
        return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []

    def _result_card(self) -> list[Block]:
        out: list[Block] = [("h2", "Result card")]
        sentences = []
        if self.comparison:
            changes = [
                r["metrics"]["decode_tok_s_p50"]["change_percent"]
                for r in self.comparison["rows"]
                if r["metrics"].get("decode_tok_s_p50", {}).get("change_percent") is not None
            ]
            if changes:
                sentences.append(
                    f"Decode p50 of {self.candidate} against {self.baseline} changed "
                    f"{min(changes):+.1f}% to {max(changes):+.1f}% across {len(changes)} cells"
                    + _verdicts_said(self.comparison)
                    + "."
                )
            unmet_rules = {u.get("rule") for u in self.decision.get("unmet") or []}
            if not self.comparison.get("matched"):
                sentences.append("The A/B comparison is not matched.")
            elif "matched-ab" in unmet_rules:
                # Derive's checks hold, the policy's stricter ones (samples per cell, the
                # rules an import cannot check) do not: the limitations say which.
                sentences.append(
                    "The A/B comparison is matched as derived, but not under the policy: "
                    "descriptive only."
                )
            else:
                sentences.append("The A/B comparison is matched.")
        unmet = self.decision.get("unmet") or []
        if unmet:
            sentences.append(
                "Promotion is not authorized. Unmet rules: "
                + "; ".join(f"{u['rule']} ({u['reason']})" for u in unmet)
                + "."
            )
        elif self.decision["promotion_authorized"]:
            sentences.append("Every rule of the promotion policy holds.")
        if (self.summary.get("measurement") or {}).get("path") == "simulated endpoint":
            sentences.append(
                "Measured on the embedded simulated endpoint: a timing model, not a GPU."
            )
        out.append(("p", " ".join(sentences) or "No comparison in this campaign."))
        return out

    def _setup(self) -> list[Block]:
        rows = [["Campaign", self.summary["campaign_id"]]]
        if not self.comparison:
            identity = dict(self.summary.get("identity") or {})
            arm = identity.pop("arm", None)
            rows.append(["Candidate", _identity_text(identity, None if arm is None else str(arm))])
        if self.comparison:
            # Both arms as the comparison states them, so that the two rows read alike.
            for role in ("candidate", "baseline"):
                side = self.comparison[role]
                rows.append([role.capitalize(), _identity_text(side["identity"], side["arm"])])
            declared = self.comparison["derivation"].get("declared_differences") or []
            rows.append(["Declared differences", ", ".join(declared) or "none"])
        measurement = self.summary.get("measurement") or {}
        rows.append(["Measurement path", str(measurement.get("path", "-"))])
        rows.append(["Warm/cold state", str(measurement.get("warm_cold_state", "-"))])
        rows.append(["Samples", _fmt(measurement.get("sample_count"))])
        policy = self.decision.get("policy")
        if policy:
            rows.append(["Policy", f"{policy['name']} (sha256 {policy['sha256'][:16]})"])
        return [("h2", "Setup"), ("table", ["Setup", "Measured configuration"], rows)]

    def _rows(self, endurance: bool) -> list[dict[str, Any]]:
        if not self.comparison:
            return []
        rows = [
            r
            for r in self.comparison["rows"]
            if (self.stage_kinds.get(r["stage"]) == "endurance") == endurance
        ]
        return sorted(rows, key=_row_order)

    def _performance(self) -> list[Block]:
        rows = self._rows(endurance=False)
        if not rows or not self.comparison:
            return [("h2", "Performance"), ("p", "No A/B comparison: no performance tables.")]
        b, c = self.baseline, self.candidate
        out: list[Block] = [("h2", "Performance")]
        out.append(
            (
                "p",
                (
                    f"Medians per cell, {c} against {b}; changes are (candidate - baseline) / "
                    "baseline with a seeded bootstrap 95% interval. Decode and effective prefill "
                    "are better when higher, TTFT and E2E when lower. A change is an "
                    "improvement or a regression only where its interval excludes zero and, "
                    "with an A/A control, it exceeds the noise floor (the largest change a "
                    "repeat of the baseline is consistent with); otherwise no difference is "
                    "detected."
                ),
            )
        )
        out.append(self._throughput_table(rows))
        out.append(self._latency_table(rows))
        out.extend(self._performance_charts(rows))
        out.extend(self._endurance())
        return out

    def _throughput_table(self, rows: list[dict[str, Any]]) -> Block:
        b, c = self.baseline, self.candidate
        table = []
        for r in rows:
            m = {
                "decode_tok_s_p50": _MISSING,
                "effective_prefill_tok_s_p50": _MISSING,
                **r["metrics"],
            }
            table.append(
                [
                    _target(r, rows),
                    f"{_fmt(r['actual_prompt_tokens']['baseline'], 0)} / {_fmt(r['actual_prompt_tokens']['candidate'], 0)}",
                    _fmt(m["decode_tok_s_p50"]["baseline"]),
                    _fmt(m["decode_tok_s_p50"]["candidate"]),
                    _change(m["decode_tok_s_p50"]),
                    _fmt(m["effective_prefill_tok_s_p50"]["baseline"], 0),
                    _fmt(m["effective_prefill_tok_s_p50"]["candidate"], 0),
                    _change(m["effective_prefill_tok_s_p50"]),
                ]
            )
        return (
            "table",
            [
                "Nominal target",
                "Actual prompt tokens",
                f"{b} decode tok/s",
                f"{c} decode tok/s",
                "Decode change",
                f"{b} effective prefill tok/s",
                f"{c} effective prefill tok/s",
                "Prefill change",
            ],
            table,
        )

    def _latency_table(self, rows: list[dict[str, Any]]) -> Block:
        b, c = self.baseline, self.candidate
        latency = []
        for r in rows:
            m = {"ttft_p50_ms": _MISSING, "e2e_p50_ms": _MISSING, **r["metrics"]}
            first = "ttft_p50_ms"
            if "ttft_p50_ms" not in r["metrics"] and "first_token_p50_ms" in r["metrics"]:
                # Derive compares the first token of any channel where TTFT is unknown.
                first = "first_token_p50_ms"
            note = " (first token, any channel)" if first != "ttft_p50_ms" else ""
            latency.append(
                [
                    _target(r, rows),
                    f"{_fmt(m[first]['baseline'])} / {_fmt(m[first]['candidate'])}{note}",
                    _change(m[first]),
                    f"{_fmt(m['e2e_p50_ms']['baseline'])} / {_fmt(m['e2e_p50_ms']['candidate'])}",
                    _change(m["e2e_p50_ms"]),
                    f"{_fmt(r['median_output_tokens']['baseline'], 0)} / {_fmt(r['median_output_tokens']['candidate'], 0)}",
                    f"{r['n']['baseline']} / {r['n']['candidate']}",
                ]
            )
        return (
            "table",
            [
                "Nominal target",
                f"TTFT ms {b} / {c}",
                "TTFT change",
                f"E2E ms {b} / {c}",
                "E2E change",
                "Median output tokens",
                "n",
            ],
            latency,
        )

    def _performance_charts(self, rows: list[dict[str, Any]]) -> list[Block]:
        b, c = self.baseline, self.candidate
        out: list[Block] = []
        sources = [self.ref(self.comparison_path or "")] + [
            self.ref(s["path"]) for r in rows for s in r.get("sources") or () if isinstance(s, dict)
        ]
        categories = [f"{_fmt(r['context_target'])}" for r in rows]
        for name, metric, title, unit, better, digits in (
            ("decode", "decode_tok_s_p50", "Decode p50 by context target", "tok/s", "higher", 2),
            (
                "prefill",
                "effective_prefill_tok_s_p50",
                "Effective prefill p50 by context target",
                "tok/s",
                "higher",
                0,
            ),
            ("ttft", "ttft_p50_ms", "TTFT p50 by context target", "ms", "lower", 2),
            (
                "first-token",
                "first_token_p50_ms",
                "First token (any channel) p50 by context target",
                "ms",
                "lower",
                2,
            ),
            ("e2e", "e2e_p50_ms", "E2E p50 by context target", "ms", "lower", 2),
        ):
            if not any(metric in r["metrics"] for r in rows):
                continue
            series = [
                (
                    str(arm),
                    [
                        round(float(r["metrics"][metric][role]), digits)
                        if metric in r["metrics"]
                        else None
                        for r in rows
                    ],
                )
                for arm, role in ((b, "baseline"), (c, "candidate"))
            ]
            self._chart(name, title, unit, better, categories, series, sources)
            out.append(("chart", name))
        return out

    def _serving(self) -> list[Block]:
        """Per cell, the figures vLLM's bench serve states (the ``serving_metrics`` view)."""
        if not self.evidence.cells and not self.evidence.imported:
            return []
        table = self.query(
            f"SELECT arm, stage, cell, {', '.join(_SERVING_RATES)}, "
            + ", ".join(
                f"{stat}_{metric}_ms" for metric, _ in _SERVING_METRICS for stat in _SERVING_STATS
            )
            + " FROM serving_metrics ORDER BY arm, stage, cell"
        )
        if not table.rows:
            return []
        rates = []
        latencies = []
        for row in table.rows:
            arm, stage, cell, *values = row
            where = [str(arm), f"{stage}/{cell}"]
            completed, failed, *per_second = values[: len(_SERVING_RATES)]
            rates.append([*where, _fmt(completed), _fmt(failed), *map(_fmt, per_second)])
            stats = iter(values[len(_SERVING_RATES) :])
            for _, name in _SERVING_METRICS:
                latencies.append(
                    [
                        *where,
                        name,
                        *(
                            _fmt(next(stats))
                            if q is None
                            else _quantile_text(next(stats), q, completed)
                            for q in _SERVING_STATS.values()
                        ),
                    ]
                )
        return [
            ("h3", "Serving metrics"),
            (
                "p",
                (
                    "Per cell, as vLLM's bench serve states them: over the measured requests "
                    "that completed (a first token came); TTFT to the first token of any "
                    "channel, TPOT (E2E - TTFT) / (output tokens - 1), ITL every gap between "
                    "successive chunks of every request, pooled; E2E to the end of the "
                    "stream. Throughputs are over the cell's duration, its first request sent "
                    "to its last one ended."
                ),
            ),
            (
                "table",
                [
                    "Arm",
                    "Cell",
                    "Completed",
                    "Failed",
                    "Duration s",
                    "Requests/s",
                    "Output tok/s",
                    "Total tok/s",
                ],
                rates,
            ),
            (
                "table",
                ["Arm", "Cell", "Metric", "Mean ms", "Median ms", "Std ms", "P90 ms", "P99 ms"],
                latencies,
            ),
        ]

    def _server_clock(self) -> list[Block]:
        """Per cell, the server's own timings beside ours, where the server reports them."""
        if not self.stage_kinds:
            return []
        table = self.query(
            "SELECT arm, stage, cell, server_timed, server_gap_ms_p50, decode_tok_s_p50, "
            "server_decode_tok_s_p50, decode_vs_server_pct_p50 FROM cells "
            "WHERE server_timed > 0 ORDER BY arm, stage, cell"
        )
        if not table.rows:
            return []
        rows = [
            [
                str(arm),
                f"{stage}/{cell}",
                str(timed),
                *map(_fmt, (gap, ours, theirs)),
                "-" if pct is None else _fmt(pct, 1) + "%",
            ]
            for arm, stage, cell, timed, gap, ours, theirs, pct in table.rows
        ]
        header = [
            "Arm",
            "Cell",
            "Requests with server timings",
            "First token - server prompt ms (p50)",
            "Decode tok/s p50 (ours)",
            "Server decode tok/s p50",
            "Ours vs server (p50)",
        ]
        return [
            ("h3", "The server's clock beside ours"),
            (
                "p",
                (
                    "The server reported its own timing of each request (llama.cpp's timings). "
                    "First token less the server's prompt time is what lies outside the "
                    "server's clock: the network, queueing before the slot, tokenizing and "
                    "templating."
                ),
            ),
            ("table", header, rows),
        ]

    def _endurance(self) -> list[Block]:
        stages = sorted({s for s, k in self.stage_kinds.items() if k == "endurance"})
        if not stages or not self.comparison:
            return []
        table = self.query(
            "SELECT arm, decode_tok_s FROM requests WHERE stage = ? AND NOT warmup AND ok "
            "AND decode_tok_s IS NOT NULL ORDER BY arm, cell, request_index",
            [stages[0]],
        )
        values: dict[str, list[float]] = {}
        exact: dict[str, list[float]] = {}
        for arm, value in table.rows:
            values.setdefault(str(arm), []).append(round(float(value), 2))
            exact.setdefault(str(arm), []).append(float(value))
        arms = [a for a in (self.baseline, self.candidate) if a in values]
        sources = [
            self.ref(path)
            for arm in arms
            for path, d in self.evidence.cells.get(arm or "", ())
            if d["stage"]["name"] == stages[0]
        ]
        series = [(str(a), values[str(a)]) for a in arms]
        self._chart(
            "endurance",
            f"Decode tok/s per request, {stages[0]} stage",
            "tok/s",
            "higher",
            [],
            [(a, [*vs]) for a, vs in series],
            sources,
            strip=True,
        )
        rows = [
            # The median as derive and DuckDB take it, of the values as measured: the mean
            # of the middle two for an even count (the upper one alone, of values rounded
            # for the chart, disagreed with the headline and the chart's own mark).
            [a, str(len(vs)), _fmt(min(vs)), _fmt(statistics.median(exact[a])), _fmt(max(vs))]
            for a, vs in series
        ]
        return [
            ("h3", "Endurance"),
            (
                "p",
                "Every measured request of the endurance stage, not pooled with the context cells.",
            ),
            ("table", ["Arm", "Requests", "Min decode tok/s", "Median", "Max"], rows),
            ("chart", "endurance"),
        ]

    def _load(self) -> list[Block]:
        """Open-loop stages: latency against rate at the comparison's SLO, goodput, the
        sustainable rate, and where the client rather than the server set the pace."""
        load = (self.comparison or {}).get("load")
        if not isinstance(load, dict):
            return []
        slo = load["slo"]
        metric = next((k for k in ("e2e_ms", "ttft_ms", "tpot_ms") if k in slo), None)
        if metric is None:
            return [("h2", "Load and goodput"), ("p", "The comparison's SLO names no threshold.")]
        name = {"e2e_ms": "E2E", "ttft_ms": "TTFT", "tpot_ms": "TPOT"}[metric]
        stem = metric.removesuffix("_ms")
        arms = [self.comparison["baseline"]["arm"], self.comparison["candidate"]["arm"]]  # type: ignore[index]
        shown = ", ".join(f"{k} {_fmt(v)}" for k, v in sorted(slo.items()))
        out: list[Block] = [("h2", "Load and goodput")]
        out.append(
            (
                "p",
                (
                    f"Open-loop cells: each request sent when it was due. SLO: {shown}. A "
                    "request is good when it succeeded and met every threshold, its latencies "
                    "taken from when it was due (as a user saw them)."
                ),
            )
        )
        for number, stage in enumerate(load["stages"], start=1):
            where = stage["stage"] + (" (thinking)" if stage["thinking"] else "")
            sides = [stage["baseline"], stage["candidate"]]
            rates = sorted({r["rate"] for side in sides for r in side["rows"]})
            categories = [f"{_fmt(r)} req/s" for r in rates]
            table = []
            limited = []
            series: list[tuple[str, list[float | None]]] = []
            marks = []
            for arm, side in zip(arms, sides, strict=True):
                by_rate = {r["rate"]: r for r in side["rows"]}
                for q, fraction in (("p50", 0.5), ("p99", 0.99)):
                    series.append(
                        (
                            f"{arm} {q}",
                            [
                                _quantile(row.get(f"{stem}_{q}_ms"), fraction, _succeeded(row))
                                for row in (by_rate.get(r, {}) for r in rates)
                            ],
                        )
                    )
                for r in side["rows"]:
                    ok = _succeeded(r)
                    table.append(
                        [arm, _fmt(r["rate"]), _fmt(r["achieved_rate_rps"]),
                         f"{r['good']}/{r['requests']}", _fmt(r["goodput_rps"]),
                         *(_quantile_text(r[f"{name}_{q}_ms"], fraction, ok)
                           for name in ("ttft", "tpot", "e2e")
                           for q, fraction in (("p50", 0.5), ("p99", 0.99))),
                         _quantile_text(r["lateness_p99_ms"], 0.99, r["requests"])]
                    )  # fmt: skip
                    if r["limited_by_client"]:
                        limited.append(f"{arm} at {_fmt(r['rate'])} req/s")
                rate = side["sustainable_rate_rps"]
                text = sustained_text(side, _fmt)
                out.append(("p", f"{where}: {arm} sustains {text} at the SLO."))
                if rate is not None:
                    marks.append((rates.index(rate), f"{arm} sustains {_fmt(rate)} req/s"))
            out.append(
                (
                    "table",
                    ["Arm", "Rate", "Achieved", "Good", "Goodput req/s", "TTFT p50", "TTFT p99",
                     "TPOT p50", "TPOT p99", "E2E p50", "E2E p99", "Late p99 ms"],
                    table,
                ),
            )  # fmt: skip
            if limited:
                out.append(
                    (
                        "p",
                        "The client, not the server, set the pace of "
                        + ", ".join(limited)
                        + f": its sender was late by more than {_fmt(arrivals.LATE_THRESHOLD_MS)}"
                        " ms at the 99th percentile. Latency from the due time includes that wait "
                        "(a user would have had it); part of it is this client's, not the "
                        "server's.",
                    )
                )
            # Numbered, not named after the stage: "x" thinking and a stage "x-think" would meet.
            chart = f"load-{number}"
            title = f"{where}: {name} from the due time against rate (p50 solid, p99 dashed)"
            unit = "ms"
            svg = charts.lines(
                title, unit, categories, series, threshold=(f"SLO {name} {_fmt(slo[metric])} ms",
                slo[metric]), marks=marks,
            )  # fmt: skip
            self._graph(
                chart, title, unit, "lower", categories, series,
                [self.ref(self.comparison_path or "")], svg,
                threshold={"label": f"SLO {name}", "value": slo[metric]},
                marks=[{"category": categories[i], "label": label} for i, label in marks],
            )  # fmt: skip
            out.append(("chart", chart))
        return out

    def _chart(
        self,
        name: str,
        title: str,
        unit: str,
        better: str,
        categories: list[str],
        series: list[tuple[str, list[float | None]]],
        sources: list[dict[str, str]],
        *,
        strip: bool = False,
    ) -> None:
        svg = (
            charts.strips(title, unit, [(n, [v for v in vs if v is not None]) for n, vs in series])
            if strip
            else charts.bars(title, unit, categories, series)
        )
        self._graph(name, title, unit, better, categories, series, sources, svg)

    def _graph(
        self,
        name: str,
        title: str,
        unit: str,
        better: str,
        categories: list[str],
        series: list[tuple[str, list[float | None]]],
        sources: list[dict[str, str]],
        svg: str,
        **extra: Any,
    ) -> None:
        """A chart's SVG with its graph data; ``extra`` adds optional graph-data fields."""
        # Only what the manifest lists: a graph-data reference names a digest.
        unique = list({s["path"]: s for s in sources if s["path"] and s["sha256"]}.values())
        data = {
            "schema": GRAPH_SCHEMA,
            "campaign_id": self.summary["campaign_id"],
            "chart": name,
            "title": title,
            "unit": unit,
            "better": better,
            "categories": categories,
            "series": [{"arm": arm, "values": vs} for arm, vs in series],
            "sources": unique,
            **extra,
        }
        self.charts.append(Chart(name, title, svg, data))

    def _functional(self) -> list[Block]:
        gates = self.summary.get("gates") or []
        rows = [
            [
                str(g.get("name") or g.get("artifact")),
                "passed" if g.get("passed") else "failed",
                str(g.get("detail", "-")),
            ]
            for g in gates
        ]
        out: list[Block] = [("h2", "Gates: functional, quality, workload and system")]
        out.append(("table", ["Gate", "Verdict", "Detail"], rows or [["-", "-", "no gates"]]))
        context = self.evidence.stages.get((self.candidate or "", "context-quality"))
        if context is not None:
            out.extend(self._context(context[1]))
        failed_checks = []
        for (arm, kind), (_path, document) in sorted(self.evidence.stages.items()):
            for record in document.get("records") or ():
                if record["verdict"] == "failed":
                    failed_checks.append(f"{arm} {kind} {record['name']}: {record['detail']}")
        if failed_checks:
            out.append(("h3", "Failed checks"))
            out.append(("list", failed_checks))
        return out

    def _context(self, document: dict[str, Any]) -> list[Block]:
        rows = [
            [
                _fmt(d["depth"]),
                _fmt(d["prompt_tokens_median"]),
                f"{d['passed']}/{d['attempts']}",
                str(d["empty_length_terminated"]),
                str(d["incorrect_visible_answers"]),
                str(d["errors"]),
            ]
            for d in document["depths"]
        ]
        shape = " The curve is non-monotonic." if document["non_monotonic"] else ""
        note = (
            f"effective_context {_fmt(document['effective_context'])}: the largest depth up "
            f"to which every depth passes at least {document['pass_fraction']} of its "
            f"attempts (the run's setting; the policy judges again).{shape}"
        )
        return [
            ("h3", f"Context quality, {self.candidate}"),
            (
                "table",
                [
                    "Nominal depth",
                    "Measured prompt tokens (median)",
                    "Passed",
                    "Empty at length",
                    "Incorrect",
                    "Errors",
                ],
                rows,
            ),
            ("p", note),
        ]

    def _system(self) -> list[Block]:
        out: list[Block] = []
        arm = self.candidate or ""
        telemetry = self.evidence.stages.get((arm, "telemetry"))
        if telemetry is not None:
            _, document = telemetry
            out.append(("h2", "GPU telemetry"))
            if not document["available"]:
                error = next((s["nvml"]["error"] for s in document["samples"]), "unknown")
                out.append(("p", f"No GPU reading during {document['during']}: {error}."))
            else:
                rows = [
                    [
                        str(card["index"]),
                        str(card["name"]),
                        f"{_fmt(card['free_mib']['min'])} - {_fmt(card['free_mib']['max'])}",
                        f"{_fmt(card['temperature_c']['min'])} - {_fmt(card['temperature_c']['max'])}",
                        f"{_fmt(card['power_w']['min'])} - {_fmt(card['power_w']['max'])}",
                        ", ".join(f"{k} {v}" for k, v in sorted(card["throttle_seen"].items()))
                        or "none",
                    ]
                    for card in document["summary"]
                ]
                out.append(
                    (
                        "table",
                        [
                            "Card",
                            "Name",
                            "Free MiB",
                            "Temperature C",
                            "Power W",
                            "Throttle (samples)",
                        ],
                        rows,
                    )
                )
        return out

    def _follow_up(self) -> list[Block]:
        path = self.folder / FOLLOW_UP_NAME
        if not path.exists():
            return []
        try:
            document = read_document(path)
        except (OSError, InvalidArtifact, SchemaError):
            return []
        items = [f"tickets/{t['id']}.md" for t in document["tickets"]]
        return [("h2", "Durable follow-up"), ("list", items)]

    def _index(self) -> list[Block]:
        rows = [
            [a.path, a.sha256, _fmt(a.bytes)]
            for a in self.loaded.artifacts
            if not is_report_file(a.path)
        ]
        out: list[Block] = [
            ("h2", "Evidence index"),
            ("p", "Every artifact of the campaign's manifest, with its SHA-256 as published."),
            ("table", ["Artifact", "SHA-256", "Bytes"], rows),
        ]
        if self.loaded.withheld:
            out.append(("h3", "Withheld (operator-private)"))
            out.append(("list", [f"{w.path}: {w.reason}" for w in self.loaded.withheld]))
        return out


_SERVING_RATES = (
    "completed",
    "failed",
    "duration_s",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
)
_SERVING_METRICS = (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2el", "E2E"))
_SERVING_STATS = {"mean": None, "median": 0.5, "std": None, "p90": 0.9, "p99": 0.99}
"""The statistics of the serving table, each percentile's quantile."""


def _succeeded(row: dict[str, Any]) -> int | None:
    """A load row's successful requests; derived before they were stated, its requests (at
    least as many): a percentile its requests cannot support, its successes cannot either."""
    found = row.get("succeeded", row.get("requests"))
    return found if isinstance(found, int) else None


_RATE = re.compile(r"-r(?P<whole>[0-9]+)(?:_(?P<part>[0-9]+))?(?:-|$)")
"""An open-loop cell's rate as its name spells it (``ctx1024-r2_5-nothink``: 2.5 req/s)."""


def _rate(row: dict[str, Any]) -> float | None:
    match = _RATE.search(str(row.get("cell", "")))
    if match is None:
        return None
    return float(f"{match['whole']}.{match['part'] or 0}")


def _row_order(row: dict[str, Any]) -> tuple[Any, ...]:
    """Rows by stage, context, concurrency, then rate as a number (``r5`` before ``r20``)."""
    rate = _rate(row)
    return (
        row["stage"],
        row["context_target"],
        row.get("concurrency") or 0,
        rate is not None,
        rate or 0.0,
        row["cell"],
    )


def _target(row: dict[str, Any], rows: Sequence[dict[str, Any]]) -> str:
    """A performance row's label: stage and context target, with the concurrency, the
    request rate and the thinking mode where the stage's rows differ in them (else two rows
    read alike)."""
    label = f"{row['stage']} {_fmt(row['context_target'])}"
    mine = [r for r in rows if r["stage"] == row["stage"]]
    if len({r.get("concurrency") for r in mine}) > 1:
        label += f" c{row.get('concurrency')}"
    if len({_rate(r) for r in mine}) > 1:
        rate = _rate(row)
        label += f" {rate:g} req/s" if rate is not None else " closed loop"
    if len({r.get("thinking") for r in mine}) > 1:
        label += " thinking" if row.get("thinking") else " no thinking"
    return label


_SEPARATORS = re.compile(r"[;:,=]|^\s|\s$")
"""What would make a value read as more keys, or as none, in an identity's line."""


def _identity_value(value: Any) -> str:
    """A value as an identity's line shows it: quoted as JSON when it holds what separates
    keys (``engine = "vllm; os: windows"`` read as two keys) or is no plain text."""
    if isinstance(value, str) and not _SEPARATORS.search(value) and value:
        return value
    return (
        json.dumps(value, ensure_ascii=False) if not isinstance(value, int | float) else str(value)
    )


def _identity_text(identity: dict[str, Any], arm: str | None = None) -> str:
    parts = [] if arm is None else [f"arm {arm}"]
    for key, value in sorted(identity.items()):
        if isinstance(value, dict):
            inner = ", ".join(
                f"{_identity_value(k)}={_identity_value(v)}"
                for k, v in sorted(value.items())
                if not isinstance(v, list | dict)
            )
            parts.append(f"{_identity_value(key)}: {inner}")
        else:
            parts.append(f"{_identity_value(key)}: {_identity_value(value)}")
    return "; ".join(parts)


# -- rendering ------------------------------------------------------------------------


def render_markdown(blocks: Sequence[Block], charts_: Sequence[Chart]) -> str:
    by_name = {c.name: c for c in charts_}
    lines: list[str] = []
    for block in blocks:
        kind = block[0]
        if kind in ("h1", "h2", "h3"):
            lines += [f"{'#' * int(kind[1])} {markdown.line(block[1])}", ""]
        elif kind == "p":
            lines += [markdown.line(block[1]), ""]
        elif kind == "list":
            lines += [f"- {markdown.line(item)}" for item in block[1]] + [""]
        elif kind == "table":
            headers, rows = block[1], block[2]
            lines.append("| " + " | ".join(markdown.cell(h) for h in headers) + " |")
            lines.append("|" + " --- |" * len(headers))
            lines += ["| " + " | ".join(markdown.cell(c) for c in row) + " |" for row in rows]
            lines.append("")
        elif kind == "chart":
            chart = by_name[block[1]]
            lines += [
                f"![{chart.title}]({REPORT_FOLDER}/{chart.name}.svg)",
                "",
                f"Graph data and hashes: [{REPORT_FOLDER}/{chart.name}.json]({REPORT_FOLDER}/{chart.name}.json)",
                "",
            ]
    return "\n".join(lines).rstrip() + "\n"


_STYLE = (
    "body{font-family:'DejaVu Sans',Helvetica,Arial,sans-serif;max-width:1100px;margin:2em auto;"
    "padding:0 1em;color:#222;line-height:1.45}table{border-collapse:collapse;margin:1em 0;"
    "font-size:.9em}th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left;"
    "vertical-align:top}th{background:#f2f2f2}td{word-break:break-word}figure{margin:1.5em 0}"
    "figcaption{font-size:.85em;color:#555}details{margin:.5em 0}code{font-size:.85em}"
)


def render_html(blocks: Sequence[Block], charts_: Sequence[Chart]) -> str:
    by_name = {c.name: c for c in charts_}
    e = html.escape
    title = next((b[1] for b in blocks if b[0] == "h1"), "report")
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{e(title)}</title>",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<style>{_STYLE}</style></head><body>",
    ]
    for block in blocks:
        kind = block[0]
        if kind in ("h1", "h2", "h3"):
            out.append(f"<{kind}>{e(block[1])}</{kind}>")
        elif kind == "p":
            out.append(f"<p>{e(block[1])}</p>")
        elif kind == "list":
            out.append("<ul>" + "".join(f"<li>{e(i)}</li>" for i in block[1]) + "</ul>")
        elif kind == "table":
            head = "".join(f"<th>{e(h)}</th>" for h in block[1])
            body = "".join(
                "<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in block[2]
            )
            out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
        elif kind == "chart":
            chart = by_name[block[1]]
            data = chart.data
            rows = "".join(
                f"<tr><td>{e(s['arm'])}</td><td>{e(', '.join(str(v) for v in s['values']))}</td></tr>"
                for s in data["series"]
            )
            sources = "".join(
                f"<li><code>{e(s['path'])}</code> sha256 <code>{e(s['sha256'])}</code></li>"
                for s in data["sources"]
            )
            categories = e(", ".join(data["categories"])) or "per request"
            out.append(
                f'<figure id="chart-{e(chart.name)}">{chart.svg}'
                f"<figcaption>{e(chart.title)} ({e(data['unit'])}, {e(data['better'])} is better). "
                f'Graph data: <a href="{REPORT_FOLDER}/{e(chart.name)}.json">'
                f"{REPORT_FOLDER}/{e(chart.name)}.json</a></figcaption>"
                f"<details><summary>Graph data and hashes</summary><p>Categories: {categories}</p>"
                f"<table><thead><tr><th>Arm</th><th>Values</th></tr></thead><tbody>{rows}</tbody>"
                f"</table><ul>{sources}</ul></details></figure>"
            )
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def write_report(
    folder: str | Path,
    formats: Sequence[str] = ("md",),
    *,
    reseal_after_review: bool = False,
    replace: bool = False,
) -> list[Path]:
    """Writes the report in each format, its charts and graph data, and re-seals, all at
    once or not at all.

    Raises:
        ReportError: no readable decision summary or manifest.
        SealBroken: the folder no longer matches its seal (see ``manifest.check_seal``).
        OutputExists: a report file exists with other content and ``replace`` is false.
        ValueError: an unknown format.
    """
    root = Path(folder)
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise ValueError(f"unknown report format {unknown[0]!r} (md or html)")
    if not (root / manifest.MANIFEST_NAME).exists():
        raise ReportError(f"{root}: no manifest.json; seal the campaign first")
    review = manifest.check_seal(root, "report", reseal_after_review=reseal_after_review)
    if replace:
        # A format rendered before is rendered again: left as it was, it would report an
        # earlier decision beside this one, both sealed as the campaign's report.
        formats = [f for f in FORMATS if f in formats or (root / f"report.{f}").exists()]
    builder = _Builder(root)
    blocks = builder.blocks()
    files: dict[str, bytes] = {}
    for chart in builder.charts:
        files[f"{REPORT_FOLDER}/{chart.name}.svg"] = chart.svg.encode()
        files[f"{REPORT_FOLDER}/{chart.name}.json"] = document_bytes(chart.data)
    for fmt in formats:
        text = (render_markdown if fmt == "md" else render_html)(blocks, builder.charts)
        files[f"report.{fmt}"] = text.encode()
    if not replace:
        refuse_other_content(root, files, "--replace")
    manifest.write_sealed(root, files, command="report", checked=(review,))
    return [root / rel for rel in files]
