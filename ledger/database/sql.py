"""The ledger database's SQL: tables loaded from artifacts, and the metric definitions.

The metric definitions (``docs/concepts/metrics.md``) are written here once, as SQL over raw
request timestamps; every view, derived comparison and recomputation in verify reads them
from here.
"""

from __future__ import annotations

from collections.abc import Sequence

from ledger.measures.arrivals import LATE_THRESHOLD_MS

__all__ = [
    "CELLS_VIEW",
    "CELL_SETTINGS",
    "CELL_SETTINGS_EMPTY",
    "CHUNK_GAPS_DDL",
    "DESCRIPTIVE_BELOW",
    "IMPORTED_SETTINGS",
    "INSERT_CELL_PART_ROWS",
    "INSERT_CELL_RUN_ROWS",
    "INSERT_IMPORTED_GAPS",
    "INSERT_IMPORTED_ROWS",
    "INSERT_PART_GAPS",
    "INSERT_V1_GAPS",
    "METRICS",
    "REQUESTS_VIEW",
    "REQUEST_ROWS_DDL",
    "SCHEDULED",
    "SERVING_METRICS_VIEW",
    "SET_ASIDE",
    "TABLES_DDL",
    "V1_GAPS",
    "cells_select",
]

# One row per request. Timestamps are integer nanoseconds from the cell start.
REQUEST_ROWS_DDL = """
CREATE TABLE request_rows_loaded (
    campaign_id VARCHAR, arm VARCHAR, stage VARCHAR, stage_kind VARCHAR, cell VARCHAR,
    context_target BIGINT, concurrency BIGINT, thinking BOOLEAN, request_index BIGINT,
    warmup BOOLEAN, ok BOOLEAN, error_class VARCHAR, prompt_tokens BIGINT,
    completion_tokens BIGINT, cached_tokens BIGINT, finish_reason VARCHAR,
    output_as_requested BOOLEAN, prompt_sha256 VARCHAR, sent_ns BIGINT, end_ns BIGINT,
    ttft_ms DOUBLE, first_token_ms DOUBLE, e2e_ms DOUBLE, decode_tok_s DOUBLE,
    effective_prefill_tok_s DOUBLE, source VARCHAR, artifact VARCHAR,
    server_prompt_ms DOUBLE, server_decode_tok_s DOUBLE, scheduled_ns BIGINT
)
"""

# The metric definitions: the one place they are defined (docs/concepts/metrics.md).
#   ttft_ms                  request sent -> first visible content token
#   first_token_ms           request sent -> first token of any channel
#   e2e_ms                   request sent -> end of stream
#   decode_tok_s             (completion_tokens - 1) / (last token - first token) seconds
#   effective_prefill_tok_s  prompt_tokens / first-token seconds
# and, where the server reports its own timings (llama.cpp's ``timings``):
#   server_prompt_ms         the server's prompt processing time
#   server_decode_tok_s      the server's generated tokens / its generation seconds
SET_ASIDE = r"\.interrupted-[0-9]+\.json$"
"""A cell a resumed run set aside (``<cell>.interrupted-N.json``, with its parts): kept as
evidence of the interruption, hashed and checked by verify, but not rows of the cell,
which ran again whole; pooled with the rerun, its requests would be counted twice. (A
resumed run goes on with a cell it can read; one it cannot, or a v1 one, it sets aside.)"""

_CELL_RUN_ROWS = """
INSERT INTO request_rows_loaded
SELECT
    c.campaign_id, c.arm, c.stage.name, c.stage.kind, c.cell.id,
    c.cell.context_target, c.cell.concurrency, c.cell.thinking, r."index",
    r.warmup, r.error IS NULL, r.error."class", r.usage.prompt_tokens,
    r.usage.completion_tokens, r.usage.cached_tokens, r.finish_reason,
    r.output_as_requested, r.prompt_sha256, r.sent_ns, r.end_ns,
    (r.first_content_ns - r.sent_ns) / 1e6,
    (r.first_token_ns - r.sent_ns) / 1e6,
    (r.end_ns - r.sent_ns) / 1e6,
    CASE WHEN r.usage.completion_tokens > 1 AND r.last_token_ns > r.first_token_ns
         THEN (r.usage.completion_tokens - 1) / ((r.last_token_ns - r.first_token_ns) / 1e9)
    END,
    CASE WHEN r.first_token_ns > r.sent_ns
         THEN r.usage.prompt_tokens / ((r.first_token_ns - r.sent_ns) / 1e9)
    END,
    'anvil-ledger', c.artifact,
    r.server_timings.prompt_ms,
    CASE WHEN r.server_timings.predicted_ms > 0
         THEN r.server_timings.predicted_n / (r.server_timings.predicted_ms / 1e3)
    END,
    r.scheduled_ns
"""

INSERT_CELL_RUN_ROWS = f"""{_CELL_RUN_ROWS}
FROM cell_run_files AS c, unnest(c.requests) AS u(r)
WHERE NOT regexp_matches(c.artifact, '{SET_ASIDE}')
"""

INSERT_CELL_PART_ROWS = f"""{_CELL_RUN_ROWS}
FROM cell_run_files AS c
JOIN cell_part_files AS p ON p.filename = c.filename,
unnest(p.requests) AS u(r)
WHERE NOT regexp_matches(c.artifact, '{SET_ASIDE}')
"""
"""A ``cell-run/v2``'s rows: its parts' records, with its own settings."""

INSERT_IMPORTED_ROWS = """
INSERT INTO request_rows_loaded
SELECT
    c.campaign_id, c.arm, c.stage, 'imported', c.cell.id, c.cell.context_target,
    c.cell.concurrency, NULL, r."index", false, r.ok, r.error_class, r.prompt_tokens,
    r.completion_tokens, NULL, r.finish_reason, NULL, NULL, r.sent_ns, r.end_ns,
    r.ttft_ms, r.first_token_ms, r.e2e_ms, r.decode_tok_s, r.effective_prefill_tok_s,
    c.source.tool, c.artifact, NULL, NULL, NULL
FROM imported_run_files AS c, unnest(c.requests) AS u(r)
"""

CELL_SETTINGS = f"""
CREATE TABLE cell_settings_loaded AS
SELECT
    campaign_id, arm, stage.name AS stage, stage.kind AS stage_kind, cell.id AS cell,
    cell.context_target AS context_target, cell.concurrency AS concurrency,
    cell.thinking AS thinking, cell."requests" AS planned_requests, cell.warmup AS warmup,
    cell.max_tokens AS max_tokens, cell.controlled_output AS controlled_output,
    cell.temperature AS temperature, cell.seed AS seed, cell.prefix AS prefix,
    status, CAST(identity AS VARCHAR) AS identity, metrics.available AS metrics_available,
    metrics.prefix_cache.hit_rate AS prefix_cache_hit_rate, artifact, sha256,
    cell.arrival.rate AS rate, CAST(request AS VARCHAR) AS request
FROM cell_run_files
WHERE NOT regexp_matches(artifact, '{SET_ASIDE}')
"""

CELL_SETTINGS_EMPTY = """
CREATE TABLE cell_settings_loaded (
    campaign_id VARCHAR, arm VARCHAR, stage VARCHAR, stage_kind VARCHAR, cell VARCHAR,
    context_target BIGINT, concurrency BIGINT, thinking BOOLEAN, planned_requests BIGINT,
    warmup BIGINT, max_tokens BIGINT, controlled_output BOOLEAN, temperature DOUBLE,
    seed BIGINT, prefix VARCHAR, status VARCHAR, identity VARCHAR, metrics_available BOOLEAN,
    prefix_cache_hit_rate DOUBLE, artifact VARCHAR, sha256 VARCHAR, rate DOUBLE,
    request VARCHAR
)
"""

# An imported run's settings as told by its tool, with the tool and its version, are its
# identity; what an A/B of two imports compares is chosen from them in derive.
IMPORTED_SETTINGS = """
INSERT INTO cell_settings_loaded
SELECT
    campaign_id, arm, stage, 'imported', cell.id, cell.context_target, cell.concurrency,
    NULL, len(requests), 0, NULL, NULL, NULL, NULL, NULL, NULL,
    CAST(json_merge_patch(
        CASE WHEN json_type(source.settings) = 'OBJECT' THEN source.settings ELSE '{}' END,
        json_object('tool', source.tool, 'version', source.version)
    ) AS VARCHAR),
    NULL, NULL, artifact, sha256, NULL, NULL
FROM imported_run_files
"""

# Open-loop requests (a load stage's) carry the time they were due, scheduled_ns:
#   lateness_ms              due -> sent: how late the client's own sender was
#   ttft_from_schedule_ms    due -> first visible content token (as the user saw it)
#   e2e_from_schedule_ms     due -> end of stream
# A request the sender held back (max_in_flight, or a client too slow for the rate) waits
# in the client; latency from the send time hides that wait, latency from the due time
# does not (coordinated omission, corrected).
SCHEDULED = """
    (sent_ns - scheduled_ns) / 1e6 AS lateness_ms,
    ttft_ms + (sent_ns - scheduled_ns) / 1e6 AS ttft_from_schedule_ms,
    e2e_ms + (sent_ns - scheduled_ns) / 1e6 AS e2e_from_schedule_ms"""

REQUESTS_VIEW = f"""
CREATE VIEW requests AS
SELECT campaign_id, arm, stage, cell, context_target, concurrency, request_index, warmup,
       ok, error_class, prompt_tokens, completion_tokens, finish_reason, ttft_ms,
       first_token_ms, e2e_ms, decode_tok_s, effective_prefill_tok_s, server_prompt_ms,
       server_decode_tok_s, {SCHEDULED}
FROM request_rows
"""

DESCRIPTIVE_BELOW = 20
"""Cells with fewer measured requests label their p90/p99 descriptive."""


def _percentiles(metric: str) -> str:
    return (
        f"median({metric}) AS {metric}_p50, "
        f"quantile_cont({metric}, 0.9) AS {metric}_p90, "
        f"quantile_cont({metric}, 0.99) AS {metric}_p99"
    )


def _percentile_names(metric: str) -> str:
    return f"{metric}_p50, {metric}_p90, {metric}_p99"


METRICS = ("ttft_ms", "first_token_ms", "e2e_ms", "decode_tok_s", "effective_prefill_tok_s")

# Statistics over measured requests (warm-ups excluded); timing statistics over the
# successful ones only, failures counted. Throughput: completion tokens of the successful
# requests over the span from the first one sent to the last one ended.
# Two groupings joined by cell (every measured request; the successful ones): the
# successful ones selected once by WHERE cost half of what a FILTER on each aggregate of
# one grouping did (every FILTER is a selection of its own over every row). Counts of a
# cell with no successful request are 0, as a count over no rows is.
_EVERY = f"""
    SELECT
        campaign_id, arm, stage, cell, any_value(stage_kind) AS stage_kind,
        any_value(context_target) AS context_target, any_value(concurrency) AS concurrency,
        any_value(thinking) AS thinking,
        count(*) FILTER (WHERE NOT warmup) AS n,
        count(*) FILTER (WHERE NOT warmup AND NOT ok) AS failed,
        -- Open loop: the sender against its schedule (every measured request, failed ones
        -- too: each was due), the rate it achieved.
        median(lateness_ms) FILTER (WHERE NOT warmup) AS lateness_ms_p50,
        quantile_cont(lateness_ms, 0.99) FILTER (WHERE NOT warmup) AS lateness_ms_p99,
        max(lateness_ms) FILTER (WHERE NOT warmup) AS lateness_ms_max,
        (count(scheduled_ns) FILTER (WHERE NOT warmup) - 1)
            / nullif((max(sent_ns) FILTER (WHERE NOT warmup AND scheduled_ns IS NOT NULL)
                      - min(sent_ns) FILTER (WHERE NOT warmup AND scheduled_ns IS NOT NULL))
                     / 1e9, 0) AS achieved_rate_rps
    FROM (SELECT *, {SCHEDULED} FROM request_rows)
    GROUP BY campaign_id, arm, stage, cell
"""

_SUCCESSFUL = f"""
    SELECT
        campaign_id, arm, stage, cell,
        {", ".join(_percentiles(m) for m in METRICS)},
        sum(completion_tokens) / nullif((max(end_ns) - min(sent_ns)) / 1e9, 0)
            AS throughput_tok_s,
        median(completion_tokens) AS median_output_tokens,
        count(*) FILTER (WHERE NOT coalesce(output_as_requested, false))
            AS lengths_not_as_requested,
        median(prompt_tokens) AS actual_prompt_tokens,
        -- The client's clock against the server's: the first token (any channel: the
        -- server's prompt time ends with it) less the server's prompt time is what lies
        -- between the two, network, queueing, tokenizing and templating; and the decode
        -- rates side by side.
        count(server_prompt_ms) AS server_timed,
        median(first_token_ms - server_prompt_ms) AS server_gap_ms_p50,
        median(server_decode_tok_s) AS server_decode_tok_s_p50,
        median((decode_tok_s - server_decode_tok_s) / server_decode_tok_s * 100)
            AS decode_vs_server_pct_p50,
        -- Latency as the user saw it, from the time each request was due.
        {_percentiles("ttft_from_schedule_ms")},
        {_percentiles("e2e_from_schedule_ms")}{{extra}}
    FROM (SELECT *, {SCHEDULED} FROM request_rows WHERE ok AND NOT warmup)
    GROUP BY campaign_id, arm, stage, cell
"""


def cells_select(extra: Sequence[tuple[str, str]] = ()) -> str:
    """The ``cells`` view's query; with ``extra`` (name, aggregate) columns over each
    cell's successful measured requests after the view's own."""
    more = "".join(f", {aggregate} AS {name}" for name, aggregate in extra)
    names = "".join(f", {name}" for name, _ in extra)
    return f"""
WITH every AS ({_EVERY}), measured AS ({_SUCCESSFUL.replace("{extra}", more)})
SELECT
    campaign_id, arm, stage, cell, stage_kind, context_target, concurrency, thinking, n,
    failed, {", ".join(_percentile_names(m) for m in METRICS)},
    CASE WHEN n < {DESCRIPTIVE_BELOW} THEN 'descriptive' ELSE 'estimate' END
        AS percentile_label,
    throughput_tok_s, median_output_tokens,
    coalesce(lengths_not_as_requested, 0) AS lengths_not_as_requested,
    actual_prompt_tokens, coalesce(server_timed, 0) AS server_timed, server_gap_ms_p50,
    server_decode_tok_s_p50, decode_vs_server_pct_p50, lateness_ms_p50, lateness_ms_p99,
    lateness_ms_max, lateness_ms_p99 > {LATE_THRESHOLD_MS} AS limited_by_client,
    achieved_rate_rps, {_percentile_names("ttft_from_schedule_ms")},
    {_percentile_names("e2e_from_schedule_ms")}{names}
FROM every LEFT JOIN measured USING (campaign_id, arm, stage, cell)
"""


CELLS_VIEW = "CREATE VIEW cells AS" + cells_select()

# Inter-token latency as vLLM pools it: every gap between successive token-bearing chunks
# of a cell's successful measured requests, in whole microseconds (a cell-run/v2's
# resolution: each chunk time rounded half up from the first token; a v1's list of
# nanoseconds is rounded the same way). Kept as a histogram, one row per cell and distinct
# gap with its count, so that a campaign's gaps take the space of its distinct values.
# An imported run's gaps are the tool's own (vLLM's and SGLang's itls), in ms as it
# measured them.
CHUNK_GAPS_DDL = """
CREATE TABLE chunk_gaps_loaded (
    campaign_id VARCHAR, arm VARCHAR, stage VARCHAR, cell VARCHAR, gap_ms DOUBLE, n BIGINT
)
"""

INSERT_PART_GAPS = f"""
INSERT INTO chunk_gaps_loaded
SELECT c.campaign_id, c.arm, c.stage.name, c.cell.id, g.gap_us / 1e3, sum(g.n)
FROM chunk_gap_counts AS g
JOIN chunk_gap_runs AS r USING (run)
JOIN cell_run_files AS c ON c.filename = r.filename
WHERE NOT regexp_matches(c.artifact, '{SET_ASIDE}')
GROUP BY c.campaign_id, c.arm, c.stage.name, c.cell.id, g.gap_us
"""
"""A ``cell-run/v2``'s gaps, decoded from its parts (``ledger/database/_chunk_gaps.py``)."""

# Two lists unnested in one SELECT are read side by side: each chunk with the one before
# it. A chunk earlier than the one before it (out of order: verify's
# record-inconsistent) is -1, which no gap is, for the build to refuse by name. Keyed by
# the cell run's row, not its names: grouping 16 million gaps by four text columns took
# 2.4 s, by the row 0.9 s.
V1_GAPS = f"""
CREATE TEMP TABLE v1_gaps AS
SELECT id,
       CASE WHEN later < earlier THEN -1
            ELSE (later - first + 500) // 1000 - (earlier - first + 500) // 1000
       END AS gap_us,
       count(*) AS n
FROM (
    SELECT c.rowid AS id, r.chunks_ns[1] AS first,
           unnest(list_slice(r.chunks_ns, 2, len(r.chunks_ns))) AS later,
           unnest(list_slice(r.chunks_ns, 1, len(r.chunks_ns) - 1)) AS earlier
    FROM cell_run_files AS c, unnest(c.requests) AS u(r)
    WHERE r.error IS NULL AND NOT r.warmup AND len(r.chunks_ns) > 1
      AND NOT regexp_matches(c.artifact, '{SET_ASIDE}')
)
GROUP BY ALL
"""
"""A ``cell-run/v1``'s gaps, by cell run, for the build to check before they are pooled."""

INSERT_V1_GAPS = """
INSERT INTO chunk_gaps_loaded
SELECT c.campaign_id, c.arm, c.stage.name, c.cell.id, g.gap_us / 1e3, sum(g.n)
FROM v1_gaps AS g JOIN cell_run_files AS c ON c.rowid = g.id
GROUP BY c.campaign_id, c.arm, c.stage.name, c.cell.id, g.gap_us
"""

INSERT_IMPORTED_GAPS = """
INSERT INTO chunk_gaps_loaded
SELECT c.campaign_id, c.arm, c.stage, c.cell.id, g.gap_ms, g.n
FROM (
    SELECT id, gap_ms, count(*) AS n
    FROM (
        SELECT c.rowid AS id, unnest(r.itl_ms) AS gap_ms
        FROM imported_run_files AS c, unnest(c.requests) AS u(r)
        WHERE r.ok
    )
    GROUP BY ALL
) AS g JOIN imported_run_files AS c ON c.rowid = g.id
"""


def _moments(value: str, name: str) -> str:
    """A value's mean, population standard deviation (numpy's default) and linear
    percentiles (numpy's default; ``quantile_cont``), for the view to name."""
    return (
        f"avg({value}) AS mean_{name}_ms, stddev_pop({value}) AS std_{name}_ms, "
        f"quantile_cont({value}, [0.5, 0.9, 0.99]) AS {name}_q"
    )


def _from_quantiles(name: str) -> str:
    return (
        f"mean_{name}_ms, {name}_q[1] AS median_{name}_ms, std_{name}_ms, "
        f"{name}_q[2] AS p90_{name}_ms, {name}_q[3] AS p99_{name}_ms"
    )


def _gap_quantile(q: float) -> str:
    """The linear percentile ``q`` of a cell's gaps, read from their histogram: the values
    at ranks floor(h) and floor(h) + 1 (from 0) of h = (count - 1) * q, as
    ``quantile_cont`` reads them from the sorted values, and the fraction of h between."""
    rank = f"floor((total - 1) * {q})"
    low = f"min(gap_ms) FILTER (WHERE upto > {rank})"
    high = f"coalesce(min(gap_ms) FILTER (WHERE upto > {rank} + 1), {low})"
    fraction = f"(any_value(total) - 1) * {q} - floor((any_value(total) - 1) * {q})"
    return f"{low} + ({fraction}) * ({high} - {low})"


_KEYS = "campaign_id, arm, stage, cell"

# vLLM counts a request as completed when it succeeded and its first token came (one
# without a token failed); llmperf's imports time only the first visible content.
_COMPLETED = "ok AND coalesce(first_token_ms, ttft_ms) IS NOT NULL"

# The standard serving metrics, as vLLM's bench serve defines them (docs/concepts/metrics.md):
# over each cell's measured requests (warm-ups excluded); latencies over the completed
# ones, in ms. TTFT is the first token of any channel (vLLM's first chunk with a choice);
# TPOT (E2E - TTFT) / (output tokens - 1) for requests of more than one output token; ITL
# every gap between successive chunks, pooled over the cell's requests; E2E sent to the
# end of the stream. The duration is the cell's wall time, its first request sent to its
# last one ended (failed ones too); throughputs are the completed requests' over it.
SERVING_METRICS_VIEW = f"""
CREATE VIEW serving_metrics AS
WITH every AS (
    SELECT {_KEYS},
           count(*) FILTER (WHERE {_COMPLETED}) AS completed,
           count(*) FILTER (WHERE NOT ({_COMPLETED})) AS failed,
           (max(end_ns) - min(sent_ns)) / 1e9 AS duration_s
    FROM request_rows WHERE NOT warmup
    GROUP BY ALL
), successful AS (
    SELECT {_KEYS},
           sum(prompt_tokens) AS total_input_tokens,
           sum(completion_tokens) AS total_output_tokens,
           {_moments("first_token_ms", "ttft")},
           {_moments("tpot_ms", "tpot")},
           {_moments("e2e_ms", "e2el")}
    FROM (
        SELECT *, CASE WHEN completion_tokens > 1
                       THEN (e2e_ms - first_token_ms) / (completion_tokens - 1) END AS tpot_ms
        FROM request_rows WHERE {_COMPLETED} AND NOT warmup
    )
    GROUP BY ALL
), gap_counts AS (
    SELECT {_KEYS}, gap_ms, sum(n) AS n FROM chunk_gaps GROUP BY ALL
), gap_ranks AS (
    SELECT *,
           sum(n) OVER (PARTITION BY {_KEYS} ORDER BY gap_ms ROWS UNBOUNDED PRECEDING)
               AS upto,
           sum(n) OVER (PARTITION BY {_KEYS}) AS total,
           sum(gap_ms * n) OVER (PARTITION BY {_KEYS}) / sum(n) OVER (PARTITION BY {_KEYS})
               AS mean
    FROM gap_counts
), itl AS (
    SELECT {_KEYS},
           any_value(mean) AS mean_itl_ms,
           {_gap_quantile(0.5)} AS median_itl_ms,
           sqrt(sum(n * (gap_ms - mean) * (gap_ms - mean)) / any_value(total)) AS std_itl_ms,
           {_gap_quantile(0.9)} AS p90_itl_ms,
           {_gap_quantile(0.99)} AS p99_itl_ms
    FROM gap_ranks
    GROUP BY ALL
)
SELECT {_KEYS}, completed, failed, duration_s,
       completed / nullif(duration_s, 0) AS request_throughput,
       coalesce(total_output_tokens, 0) / nullif(duration_s, 0) AS output_throughput,
       (coalesce(total_input_tokens, 0) + coalesce(total_output_tokens, 0))
           / nullif(duration_s, 0) AS total_token_throughput,
       total_input_tokens, total_output_tokens,
       {_from_quantiles("ttft")},
       {_from_quantiles("tpot")},
       mean_itl_ms, median_itl_ms, std_itl_ms, p90_itl_ms, p99_itl_ms,
       {_from_quantiles("e2el")}
FROM every
LEFT JOIN successful USING ({_KEYS})
LEFT JOIN itl USING ({_KEYS})
"""

TABLES_DDL = """
CREATE TABLE artifacts (campaign_id VARCHAR, path VARCHAR, sha256 VARCHAR, bytes BIGINT,
                        schema VARCHAR);
CREATE TABLE gates (campaign_id VARCHAR, position BIGINT, name VARCHAR, passed BOOLEAN,
                    artifact VARCHAR, gate JSON);
CREATE TABLE decisions (campaign_id VARCHAR, complete BOOLEAN, promotion_authorized BOOLEAN,
                        decision_labels VARCHAR[], evidence_labels VARCHAR[], next_gate VARCHAR);
"""
