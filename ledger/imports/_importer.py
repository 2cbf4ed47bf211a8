"""``ledger import``: other benchmark tools' per-request records as raw artifacts.

Definitions are mapped by meaning, not by name (``tests/data/realworld/README.md``). A value
the source does not measure under our definition is null, never copied from a field that
only shares its name; the source's own per-request values are kept in ``tool_metrics``
under its names and units, and ``source.definitions`` says how the source measured.

- llmperf: its TTFT waits for the first chunk with visible content (our ``ttft_ms``); it
  records no first-token time of any channel and no last-token time.
- AIPerf (pre-0.2 export): its TTFT is the first chunk of any channel, reasoning included
  (our ``first_token_ms``; visible-content TTFT unknown, null); request latency ends at the
  last response, taken as the last token; output sequence length includes reasoning.
- vLLM ``--save-result --save-detailed`` and SGLang ``--output-details``: ``ttfts`` is the
  first chunk of any channel, ``itls`` the gaps between later chunks, so the span from
  first to last chunk is their sum.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any, TypeGuard

import attrs

from ledger.errors import InvalidArtifact, UsageError
from ledger.formats import jsonio
from ledger.formats.outputs import OutputExists, check_name, new_folder
from ledger.hashing import sha256_bytes

TOOLS = ("llmperf", "aiperf", "vllm", "sglang")
IMPORTED_SCHEMA = "anvil-serving.imported-run/v1"


def _record(
    index: int,
    *,
    ok: bool,
    error_class: str | None = None,
    prompt_tokens: int | None = None,
    completion_tokens: int | None = None,
    ttft_ms: float | None = None,
    first_token_ms: float | None = None,
    e2e_ms: float | None = None,
    decode_tok_s: float | None = None,
    effective_prefill_tok_s: float | None = None,
    sent_ns: int | None = None,
    end_ns: int | None = None,
    tool_metrics: dict[str, Any] | None = None,
    itl_ms: list[float] | None = None,
) -> dict[str, Any]:
    # itl_ms only where the tool measured every gap (vLLM's and SGLang's itls): the
    # database's inter-token latency pools them.
    return ({"itl_ms": itl_ms} if itl_ms is not None else {}) | {
        "index": index,
        "ok": ok,
        "error_class": error_class,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "finish_reason": None,
        "ttft_ms": ttft_ms,
        "first_token_ms": first_token_ms,
        "e2e_ms": e2e_ms,
        "decode_tok_s": decode_tok_s,
        "effective_prefill_tok_s": effective_prefill_tok_s,
        "sent_ns": sent_ns,
        "end_ns": end_ns,
        "tool_metrics": tool_metrics or {},
    }


_MAX_COUNT = (1 << 63) - 1


def _int(value: Any, what: str) -> int | None:
    """A count or a timestamp (a whole number, as a number or in ASCII digits); None when
    absent.

    Raises:
        InvalidArtifact: anything else: a fraction, text, negative, or beyond 64 bits (a
            column cannot hold it).
    """
    if isinstance(value, bool) or value is None:
        return None
    whole = isinstance(value, float) and value.is_integer()
    digits = isinstance(value, str) and value.strip().isascii() and value.strip().isdigit()
    if not (isinstance(value, int) or whole or digits):
        raise InvalidArtifact(f"{what} is {value!r}: a count is a whole number")
    number = value if isinstance(value, int) else int(value)
    if number is not None and not 0 <= number <= _MAX_COUNT:
        raise InvalidArtifact(f"{what} is {value!r}: a count must be from 0 to 2^63-1")
    return number


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


class _Parsed:
    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.version: str | None = None
        self.concurrency: int | None = None
        self.definitions: dict[str, str] = {}
        self.settings: dict[str, Any] = {}
        self.checks: list[dict[str, Any]] = []
        """The tool's stated aggregates against those recomputed from its records."""
        self.warnings: list[str] = []


def _llmperf(documents: list[tuple[str, Any]]) -> _Parsed:
    parsed = _Parsed()
    parsed.definitions = {
        "ttft_ms": "llmperf ttft_s: request start to the first chunk with visible content",
        "first_token_ms": "not measured by llmperf (null)",
        "e2e_ms": "llmperf end_to_end_latency_s: request start to end of stream",
        "decode_tok_s": "not measured under our definition (no last-token time; null)",
        "tokens": "counted by llmperf's tokenizer, not the server's usage",
    }
    for name, document in documents:
        if isinstance(document, dict) and "results_ttft_s_mean" in document:
            parsed.version = str(document.get("version")) if document.get("version") else None
            parsed.concurrency = _concurrency(
                document.get("num_concurrent_requests"), "num_concurrent_requests"
            )
            parsed.settings = {"summary": name, "model": document.get("model")}
            continue
        if not isinstance(document, list):
            raise InvalidArtifact(f"{name}: expected llmperf's list of per-request records")
        for item in document:
            if not isinstance(item, dict) or "ttft_s" not in item:
                raise InvalidArtifact(f"{name}: a record without ttft_s is not from llmperf")
            failed = item.get("error_code") is not None or bool(item.get("error_msg"))
            ttft = _num(item.get("ttft_s"))
            e2e = _num(item.get("end_to_end_latency_s"))
            parsed.records.append(
                _record(
                    len(parsed.records),
                    ok=not failed,
                    error_class=f"llmperf:{item.get('error_code')}" if failed else None,
                    prompt_tokens=_int(item.get("number_input_tokens"), "number_input_tokens"),
                    completion_tokens=_int(
                        item.get("number_output_tokens"), "number_output_tokens"
                    ),
                    ttft_ms=ttft * 1000 if ttft is not None and not failed else None,
                    e2e_ms=e2e * 1000 if e2e is not None and not failed else None,
                    tool_metrics={
                        k: item.get(k)
                        for k in (
                            "ttft_s",
                            "end_to_end_latency_s",
                            "inter_token_latency_s",
                            "request_output_throughput_token_per_s",
                        )
                    },
                )
            )
    return parsed


_AIPERF_UNITS = {
    "ttft": "ms",
    "request_latency": "ms",
    "inter_token_latency": "ms",
    "input_sequence_length": "tokens",
    "output_sequence_length": "tokens",
    "output_token_count": "tokens",
    "reasoning_token_count": "tokens",
    "min_request_timestamp": "ns",
    "max_response_timestamp": "ns",
}
"""The unit AIPerf writes for each metric read; another unit is refused, never guessed."""


def _concurrency(value: Any, what: str) -> int | None:
    number = _int(value, what)
    if number == 0:
        raise InvalidArtifact(f"{what} is 0: a concurrency must be at least 1")
    return number


def _aiperf(documents: list[tuple[str, Any]]) -> _Parsed:
    parsed = _Parsed()
    parsed.definitions = {
        "first_token_ms": "AIPerf ttft: request start to the first chunk of any channel, "
        "reasoning included",
        "ttft_ms": "not measured by this AIPerf export (visible-content TTFT unknown; null)",
        "e2e_ms": "AIPerf request_latency: request start to the last response",
        "decode_tok_s": "(output_sequence_length - 1) / (request_latency - ttft); 1000 / "
        "AIPerf's inter_token_latency",
        "completion_tokens": "AIPerf output_sequence_length (visible and reasoning tokens)",
    }
    for name, document in documents:
        if isinstance(document, dict) and "records" in document:
            config = document.get("input_config") or {}
            loadgen = config.get("loadgen") if isinstance(config, dict) else None
            if isinstance(loadgen, dict):
                parsed.concurrency = _concurrency(loadgen.get("concurrency"), "concurrency")
            parsed.settings = {"aggregate": name}
            continue
        if not isinstance(document, list):
            raise InvalidArtifact(f"{name}: expected AIPerf's profile_export.jsonl")
        for item in document:
            metrics = item.get("metrics") if isinstance(item, dict) else None
            if not isinstance(metrics, dict):
                raise InvalidArtifact(f"{name}: a line without metrics is not from AIPerf")

            def value(key: str, metrics: dict[str, Any] = metrics, name: str = name) -> Any:
                entry = metrics.get(key)
                if not isinstance(entry, dict):
                    return None
                unit = entry.get("unit")
                if key in _AIPERF_UNITS and unit != _AIPERF_UNITS[key]:
                    raise InvalidArtifact(
                        f"{name}: metrics.{key} has unit {unit!r}; this import reads "
                        f"{_AIPERF_UNITS[key]!r} only"
                    )
                return entry.get("value")

            error = item.get("error")
            ok = error is None and value("ttft") is not None
            ttft, latency = _num(value("ttft")), _num(value("request_latency"))
            osl = _int(value("output_sequence_length"), "output_sequence_length")
            decode = None
            if (
                ok
                and osl
                and osl > 1
                and ttft is not None
                and latency is not None
                and latency > ttft
            ):
                decode = (osl - 1) / ((latency - ttft) / 1000)
            isl = _int(value("input_sequence_length"), "input_sequence_length")
            prefill = isl / (ttft / 1000) if ok and isl and ttft else None
            parsed.records.append(
                _record(
                    len(parsed.records),
                    ok=ok,
                    error_class=None
                    if ok
                    else f"aiperf:{error.get('type') if isinstance(error, dict) else 'error'}",
                    prompt_tokens=isl,
                    completion_tokens=osl,
                    first_token_ms=ttft if ok else None,
                    e2e_ms=latency if ok else None,
                    decode_tok_s=decode,
                    effective_prefill_tok_s=prefill,
                    sent_ns=_int(value("min_request_timestamp"), "min_request_timestamp"),
                    end_ns=_int(value("max_response_timestamp"), "max_response_timestamp"),
                    tool_metrics={
                        k: _num(value(k))
                        for k in (
                            "ttft",
                            "request_latency",
                            "inter_token_latency",
                            "output_token_count",
                            "reasoning_token_count",
                        )
                    },
                )
            )
    return parsed


def _detailed(documents: list[tuple[str, Any]], tool: str) -> tuple[list[_Parsed], list[str]]:
    """One run per result line (SGLang appends one line per run to its JSONL), and a
    one-line refusal for each line that holds no per-request arrays."""
    runs: list[_Parsed] = []
    refused: list[str] = []
    for name, document in documents:
        lines = document if isinstance(document, list) else [document]
        before, refused_before = len(runs), len(refused)
        for number, line in enumerate(lines, 1):
            if not isinstance(line, dict):
                raise InvalidArtifact(f"{name}: line {number} is not a JSON object")
            if "ttfts" not in line or "itls" not in line:
                other = _per_request_tool(line)
                if other is not None:
                    # Advice to rerun this tool would send the user the wrong way.
                    raise InvalidArtifact(
                        f"{name}: line {number} is one request of {other}'s, not a {tool} "
                        f"result: import it as {other}"
                    )
                refused.append(
                    f"{name}: line {number} has no per-request arrays (ttfts, itls); "
                    + (
                        "run sglang.bench_serving with --output-details"
                        if tool == "sglang"
                        else "run vllm bench serve with --save-result --save-detailed"
                    )
                )
                continue
            where = f"{name} line {number}" if isinstance(document, list) else name
            runs.append(_detailed_run(line, tool, where, name, number))
        if len(runs) == before and len(refused) > refused_before:
            # A file none of whose lines can be imported is refused, beside others or not.
            mine = refused[refused_before:]
            more = f" (and the {len(mine) - 1} other lines alike)" if len(mine) > 1 else ""
            raise InvalidArtifact(mine[0] + more)
    return runs, refused


def _detailed_run(line: dict[str, Any], tool: str, where: str, name: str, number: int) -> _Parsed:
    """One result line of SGLang's or vLLM's as a run: its identity, its records, and the
    file's own aggregates checked against them."""
    _check_tool(line, tool, where)
    parsed = _Parsed()
    if tool == "vllm":
        line, notes = _vllm_versions(line, where)
        parsed.warnings += notes
    parsed.definitions = {
        "first_token_ms": f"{tool} ttfts: request start to the first chunk of any channel",
        "ttft_ms": f"not separated from reasoning by {tool} (null)",
        "decode_tok_s": "(output_len - 1) / sum(itls): first to last chunk",
        "e2e_ms": f"{tool} e2els",
        "itl_ms": f"{tool} itls in ms: every gap between successive chunks after the first",
    }
    if line.get("start_times"):
        parsed.definitions["sent_ns"] = (
            f"{tool} start_times (a monotonic clock's seconds) in ns; end_ns is sent_ns + e2e"
        )
    parsed.concurrency = _concurrency(line.get("max_concurrency"), "max_concurrency")
    parsed.version, parsed.settings = _detailed_identity(line)
    arrays = _arrays(line, name, number)
    _detailed_records(parsed, line, arrays, tool, where)
    # After the records: each value has been checked to be a number by then.
    for check in self_check(line, arrays):
        parsed.checks.append(check)
        if not check["agrees"]:
            parsed.warnings.append(
                f"{where}: {check['field']}: the file says {check['stated']!r}, its "
                f"per-request arrays give {check['recomputed']!r}"
            )
    if not arrays["e2els"]:
        parsed.definitions["e2e_ms"] = (
            f"{tool} e2els where the file has them; else ttft + sum(itls), request "
            "start to the last chunk (the tool stored no per-request latency)"
        )
    return parsed


def _detailed_identity(line: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """The tool's version and the settings that say what was run."""
    info = line.get("server_info")
    server: dict[str, Any] = info if isinstance(info, dict) else {}
    version = line.get("version") or server.get("version")
    settings: dict[str, Any] = {
        k: line.get(k) for k in _IDENTITY_KEYS if line.get(k) not in (None, "")
    }
    if line.get("metadata"):
        settings["metadata"] = line["metadata"]
    if server.get("model_path"):
        # A private path, as often as not: publication sanitizes it like any other.
        settings["model_path"] = server["model_path"]
    # The server's flags, what an A/B of two SGLang runs differs in; not its runtime
    # state (throughput, memory), nor again what is kept above.
    flags = {k: v for k, v in server.items() if k not in _SERVER_INFO_KEPT_APART}
    if flags:
        settings["server_info"] = flags
    return (str(version) if version else None), settings


def _detailed_records(
    parsed: _Parsed, line: dict[str, Any], arrays: dict[str, Any], tool: str, where: str
) -> None:
    """A record for each request of the line's per-request arrays."""
    ttfts, itls = arrays["ttfts"], arrays["itls"]
    inputs, outputs = arrays["input_lens"], arrays["output_lens"]
    errors, starts = arrays["errors"], arrays["start_times"]
    texts = line.get("generated_texts")
    for i, ttft in enumerate(ttfts):
        error = errors[i] if i < len(errors) else ""
        gaps = itls[i]
        output = _int(outputs[i], f"output_lens[{i}]") if i < len(outputs) else None
        ok = _succeeded(ttft, error)
        span = sum(gaps)
        decode = (output - 1) / span if ok and output and output > 1 and span > 0 else None
        e2e = _end_to_end(arrays, i) if ok else None
        if ok and not math.isfinite((float(ttft) + (e2e or 0.0)) * 1000):
            raise InvalidArtifact(
                f"{where}: request {i}: its times in ms (ttfts[{i}], its end to end) "
                "are beyond any time"
            )
        sent, end = _times_ns(starts[i] if starts else None, e2e, f"{where}: request {i}")
        parsed.records.append(
            _record(
                len(parsed.records),
                ok=ok,
                error_class=None if ok else f"{tool}:error",
                prompt_tokens=_int(inputs[i], f"input_lens[{i}]") if i < len(inputs) else None,
                completion_tokens=output,
                first_token_ms=float(ttft) * 1000 if ok else None,
                e2e_ms=e2e * 1000 if ok and e2e is not None else None,
                decode_tok_s=decode,
                sent_ns=sent,
                end_ns=end,
                itl_ms=[float(g) * 1000 for g in gaps] if ok else None,
                tool_metrics={
                    "ttft_s": _num(ttft),
                    "itl_sum_s": span,
                    "itl_count": len(gaps),
                    "error": error or None,
                    # What the model wrote, as our own records keep it: never the text.
                    "generated_text_sha256": _text_digest(texts, i),
                    # vLLM 0.15 and later: a monotonic clock's seconds, not a date.
                    "start_time_monotonic_s": _num(starts[i]) if starts else None,
                },
            )
        )


def _times_ns(start: Any, e2e: float | None, what: str) -> tuple[int | None, int | None]:
    """A request's start (vLLM's ``start_times``: a monotonic clock's seconds) and end
    (start + end to end) in nanoseconds on that clock, as ``sent_ns`` and ``end_ns``; None
    where the tool recorded no start (an end, also for a failed request).

    Raises:
        InvalidArtifact: a start before the clock's zero, or a time past 64 bits of
            nanoseconds.
    """
    if start is None:
        return None, None
    sent = round(float(start) * 1e9)
    end = None if e2e is None else sent + round(e2e * 1e9)
    if not 0 <= sent <= _MAX_COUNT or (end is not None and not sent <= end <= _MAX_COUNT):
        raise InvalidArtifact(
            f"{what}: its start_times {start!r} and end to end are not nanoseconds a "
            "64-bit clock holds"
        )
    return sent, end


# Keys one of the two tools writes and the other never does (vLLM 0.6 to 0.19, SGLang's
# bench_serving): the same per-request arrays would otherwise import under the wrong name,
# with the other tool's settings filed as its own.
_MARKS = {
    "vllm": re.compile(
        r"endpoint_type|model_id|tokenizer_id|start_times|request_goodput:?|"
        r"(mean|median|std|p[0-9.]+)_e2el_ms"
    ),
    "sglang": re.compile(
        r"server_info|accept_length|total_output_tokens_retokenized|total_input_text_tokens|"
        r"(mean|median|std|p[0-9.]+)_e2e_latency_ms"
    ),
}


def _per_request_tool(line: dict[str, Any]) -> str | None:
    """The tool whose per-request record ``line`` is, when it is one (llmperf's
    ``individual_*.json`` items, AIPerf's ``profile_export.jsonl`` lines)."""
    if "ttft_s" in line and "end_to_end_latency_s" in line:
        return "llmperf"
    if isinstance(line.get("metadata"), dict) and isinstance(line.get("metrics"), dict):
        return "aiperf"
    return None


def _check_tool(line: dict[str, Any], tool: str, where: str) -> None:
    """Refuses a line that only the other tool writes.

    Raises:
        InvalidArtifact: it has keys of the other tool and none of ``tool``'s own.
    """
    other = "sglang" if tool == "vllm" else "vllm"
    theirs = sorted(k for k in line if _MARKS[other].fullmatch(k))
    if theirs and not any(_MARKS[tool].fullmatch(k) for k in line):
        writer = "SGLang's bench_serving" if other == "sglang" else "vLLM's bench serve"
        raise InvalidArtifact(
            f"{where}: {', '.join(theirs[:3])} are what {writer} writes, not {tool}'s: import "
            f"it as {other}"
        )


_PER_REQUEST = (
    "ttfts",
    "itls",
    "input_lens",
    "output_lens",
    "errors",
    "e2els",
    "start_times",
    # Shorter, each later text's digest would be filed under the request before it.
    "generated_texts",
)
_VLLM_KEYS = frozenset(
    {
        "backend", "endpoint_type", "label", "model_id", "tokenizer_id", "date", "num_prompts",
        "request_rate", "burstiness", "max_concurrency", "duration", "completed", "failed",
        "total_input_tokens", "total_output_tokens", "request_throughput", "request_goodput",
        "output_throughput", "total_token_throughput", "max_output_tokens_per_s",
        "max_concurrent_requests", "rtfx", "version", "tag", "generated_texts",
    }
)  # fmt: skip
"""The top-level keys vLLM's ``bench serve`` writes, 0.6 to 0.19, besides per-request
arrays and ``<statistic>_<metric>_ms`` aggregates: any other is ``--metadata``."""
_VLLM_AGGREGATE = re.compile(r"(mean|median|std|p[0-9.]+)_[a-z0-9_]+_ms")


def _vllm_versions(line: dict[str, Any], where: str) -> tuple[dict[str, Any], list[str]]:
    """The line with each vLLM release's variants read alike, its ``--metadata``, and a
    named warning for each key a release did not write."""
    line = dict(line)
    notes = []
    if "request_goodput:" in line:
        # vLLM around 0.6 wrote the key with its colon.
        line.setdefault("request_goodput", line.pop("request_goodput:"))
    if "failed" not in line:
        notes.append(
            f"{where}: no 'failed' (vLLM before 0.7 did not write it): failures are read from "
            "errors"
        )
    if "backend" not in line:
        notes.append(
            f"{where}: no 'backend' (vLLM 0.9 writes endpoint_type only): the endpoint type "
            "stands for it"
        )
    metadata = {
        key: value
        for key, value in line.items()
        if key not in _VLLM_KEYS
        and key not in _IDENTITY_KEYS
        and key not in _PER_REQUEST
        and not _VLLM_AGGREGATE.fullmatch(key)
        and not isinstance(value, list | dict)
    }
    if metadata:
        line["metadata"] = metadata
    return line, notes


_SERVER_INFO_KEPT_APART = frozenset({"model_path", "version", "internal_states"})
DATASET_KEYS = (
    "dataset_name",
    "num_prompts",
    "random_input_len",
    "random_output_len",
    "random_range_ratio",
    "random_prefix_len",
    "sharegpt_output_len",
    "seed",
)
"""The settings of a run that choose its prompts: an A/B of two imports compares them
where it cannot compare prompt digests."""
_IDENTITY_KEYS = (
    "backend",
    "endpoint_type",
    "label",
    "model_id",
    "tokenizer_id",
    "date",
    "tag",
    "request_rate",
    "burstiness",
    "max_concurrency",
    *DATASET_KEYS,
)
"""What a result line says about the run itself: the imported arm's identity, the dataset
settings an A/B of two imports compares, concurrency, rate and tag."""

AGREEMENT = 1e-4
"""The relative difference beyond which a tool's stated aggregate and the one recomputed
from its per-request arrays disagree (counts must be equal)."""
_STATISTICS = ("mean", "median", "std", "p99")
_COUNTS = frozenset({"completed", "total_input_tokens", "total_output_tokens"})
_METRIC_KEYS = {
    "ttft": ("ttft",),
    "tpot": ("tpot",),
    "itl": ("itl",),
    "e2e": ("e2el", "e2e_latency"),
}


def _aggregates(arrays: dict[str, list[Any]]) -> dict[str, float]:
    """What vLLM's and SGLang's benchmark clients state, recomputed from the per-request
    arrays as they compute it: over successful requests, in ms, population std, linear
    percentiles; E2E from ``e2els`` or else ttft + sum(itls)."""
    import numpy as np

    errors = arrays["errors"]
    ok = [
        i
        for i, ttft in enumerate(arrays["ttfts"])
        if _succeeded(ttft, errors[i] if i < len(errors) else "")
    ]
    ends = {i: _end_to_end(arrays, i) for i in ok}
    ttft = [float(arrays["ttfts"][i]) * 1000 for i in ok]
    e2e = [end * 1000 for end in ends.values() if end is not None]
    outputs = arrays["output_lens"]
    tpot = [
        (end - float(arrays["ttfts"][i])) * 1000 / (outputs[i] - 1)
        for i, end in ends.items()
        if end is not None and outputs and isinstance(outputs[i], int) and outputs[i] > 1
    ]
    values = {
        "ttft": ttft,
        "tpot": tpot,
        "itl": [float(g) * 1000 for i in ok for g in arrays["itls"][i]],
        "e2e": e2e,
    }
    found: dict[str, float] = {"completed": float(len(ok))}
    if arrays["input_lens"]:
        found["total_input_tokens"] = float(sum(arrays["input_lens"][i] for i in ok))
    if arrays["output_lens"]:
        found["total_output_tokens"] = float(sum(arrays["output_lens"][i] for i in ok))
    for metric, series in values.items():
        if not series:
            continue
        data = np.asarray(series, dtype=float)
        computed = {
            "mean": float(np.mean(data)),
            "median": float(np.median(data)),
            "std": float(np.std(data)),
            "p99": float(np.percentile(data, 99)),
        }
        for stat in _STATISTICS:
            for key in _METRIC_KEYS[metric]:
                found[f"{stat}_{key}_ms"] = computed[stat]
    return found


def self_check(line: dict[str, Any], arrays: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Every aggregate the line states that its arrays can give, beside the recomputed
    value: ``{"field", "stated", "recomputed", "agrees"}``, in field order."""
    checks = []
    for field, recomputed in sorted(_aggregates(arrays).items()):
        stated = line.get(field)
        if not _finite(stated):
            continue  # not stated by this version of the tool, or not a number
        value = float(stated)
        if field in _COUNTS:
            agrees = value == recomputed  # a count is exact or wrong
        else:
            agrees = abs(value - recomputed) <= AGREEMENT * max(abs(value), abs(recomputed))
        checks.append(
            {"field": field, "stated": stated, "recomputed": recomputed, "agrees": agrees}
        )
    return checks


def _arrays(line: dict[str, Any], name: str, number: int) -> dict[str, list[Any]]:
    """The per-request arrays of one result line: one entry per request in each, or a
    refusal naming the array (a shorter one would silently drop requests)."""
    found: dict[str, list[Any]] = {}
    for key in _PER_REQUEST:
        value = line.get(key)
        if value is None and key not in ("ttfts", "itls"):
            found[key] = []
            continue
        if not isinstance(value, list):
            raise InvalidArtifact(
                f"{name}: line {number}: {key} is "
                f"{'null' if value is None else type(value).__name__}, not an array"
            )
        found[key] = value
    count = len(found["ttfts"])
    for key, value in found.items():
        if value and len(value) != count:
            raise InvalidArtifact(
                f"{name}: line {number}: {key} has {len(value)} entries for {count} requests "
                "(ttfts); every per-request array must have one entry per request"
            )
    if len(found["itls"]) != count:
        raise InvalidArtifact(
            f"{name}: line {number}: itls has {len(found['itls'])} entries for {count} requests"
        )
    for index, gaps in enumerate(found["itls"]):
        if not isinstance(gaps, list) or not all(_finite(g) for g in gaps):
            raise InvalidArtifact(f"{name}: line {number}: itls[{index}] is not a list of numbers")
        if not math.isfinite(sum(gaps)):
            raise InvalidArtifact(f"{name}: line {number}: itls[{index}] sums beyond any time")
    for key in ("ttfts", "e2els", "start_times"):
        for index, value in enumerate(found[key]):
            if value is not None and not _finite(value):
                raise InvalidArtifact(
                    f"{name}: line {number}: {key}[{index}] is {value!r}, not a number"
                )
    return found


def _succeeded(ttft: Any, error: Any) -> bool:
    """A request the tool counts as successful: no error and a first token."""
    return not error and _num(ttft) is not None and float(ttft) > 0


def _end_to_end(arrays: dict[str, list[Any]], i: int) -> float | None:
    """A request's end-to-end seconds: the tool's ``e2els`` where it stores them, else the
    first chunk's time plus every gap after it (request start to the last chunk)."""
    if arrays["e2els"]:
        return _num(arrays["e2els"][i])
    return float(arrays["ttfts"][i]) + float(sum(arrays["itls"][i]))


def _text_digest(texts: Any, index: int) -> str | None:
    if not isinstance(texts, list) or index >= len(texts) or not isinstance(texts[index], str):
        return None
    return sha256_bytes(texts[index].encode("utf-8", "surrogatepass"))


def _finite(value: Any) -> TypeGuard[int | float]:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer beyond any float
        return False


def _not_imported(stage: Path) -> str | None:
    """The first file of a stage folder that is not an imported run (a measured cell)."""
    for path in sorted(stage.glob("*")) if stage.is_dir() else ():
        try:
            document = jsonio.read_json(path)
        except (OSError, InvalidArtifact):
            return path.name
        if not isinstance(document, dict) or document.get("schema") != IMPORTED_SCHEMA:
            return path.name
    return None


def _load(path: Path, data: bytes, tool: str) -> tuple[Any, list[str]]:
    """The document (a list of lines for JSONL), and where SGLang's dialect wrote a bare
    ``Infinity`` or ``NaN``: accepted from SGLang only, whose ``json.dumps`` writes them."""
    jsonl = path.suffix == ".jsonl"
    lines = data.splitlines() if jsonl else [data]
    documents, tokens = [], []
    for number, line in enumerate(lines, 1):
        if jsonl and not line.strip():
            continue
        try:
            if tool == "sglang":
                document, found = jsonio.parse_with_nonfinite(line)
            else:
                document, found = jsonio.parse_strict(line), []
        except InvalidArtifact as e:
            if not jsonl:
                raise
            # The parser counts within the line it was given: name the file's line.
            raise InvalidArtifact(f"line {number} of the file: {e}") from None
        documents.append(document)
        tokens += [f"line {number}: {pointer}" if len(lines) > 1 else pointer for pointer in found]
    return (documents if jsonl else documents[0]), tokens


def import_files(
    tool: str,
    files: Sequence[str | Path],
    *,
    raw_dir: str | Path,
    campaign: str,
    arm: str,
    stage: str = "imported",
    reseal_after_review: bool = False,
) -> Imported:
    """Writes the imported-run artifacts of a tool's files: one per run (an SGLang JSONL
    holds one run per line); lines without per-request records are refused one by one
    while the others import (all refused: :class:`InvalidArtifact`).

    Nothing is created before the names are checked; the artifact and the campaign's new
    seal are written together or not at all; an existing cell is never replaced.

    Raises:
        UsageError: a name is not valid, or the cell's artifact exists.
        InvalidArtifact: a file is not what the tool writes, or holds no per-request records.
        SealBroken: the campaign folder exists and no longer matches its seal.
        OSError: a file cannot be read.
    """
    from ledger.evidence import manifest

    if tool not in TOOLS:
        raise InvalidArtifact(f"unknown tool {tool!r} (expected one of {', '.join(TOOLS)})")
    for kind, name in (("campaign", campaign), ("arm", arm), ("stage", stage)):
        check_name(kind, name)
    documents = []
    sources = []
    dialect: list[str] = []
    for raw in files:
        path = Path(raw)
        try:
            data = jsonio.read_limited(path)
            document, tokens = _load(path, data, tool)
            documents.append((path.name, document))
            dialect += [f"{path.name} {where}" for where in tokens]
        except InvalidArtifact as e:
            raise InvalidArtifact(f"{path}: {e}", code=e.code, pointer=e.pointer) from None
        # The digest of the bytes parsed, read once.
        sources.append({"name": path.name, "sha256": sha256_bytes(data)})
    refused: list[str] = []
    if tool == "llmperf":
        runs = [_llmperf(documents)]
    elif tool == "aiperf":
        runs = [_aiperf(documents)]
    else:
        runs, refused = _detailed(documents, tool)
    if not any(run.records for run in runs):
        raise InvalidArtifact(f"no per-request records in {', '.join(str(f) for f in files)}")
    folder = Path(raw_dir) / campaign
    written: dict[str, bytes] = {}
    cells: list[ImportedCell] = []
    for run in runs:
        rel, data = _cell(
            run, tool, sources, dialect, campaign=campaign, arm=arm, stage=stage, taken=written
        )
        written[rel] = data
        cells.append(ImportedCell(folder / rel, tuple(run.checks), tuple(run.warnings)))
    for rel in written:
        if (folder / rel).exists():
            raise OutputExists(
                f"{folder / rel} exists; an import never replaces evidence (import into "
                "another --stage)"
            )
    measured = _not_imported(folder / arm / stage)
    if measured is not None:
        raise UsageError(
            f"{folder / arm / stage} holds the run's own artifacts ({measured}); imported "
            "requests go into a stage of their own (--stage)"
        )
    if folder.exists():
        manifest.write_sealed(
            folder,
            written,
            command="import",
            replace=False,
            reseal_after_review=reseal_after_review,
        )
    else:
        with new_folder(folder) as work:
            manifest.write_sealed(work, written, command="import", checked=(None,))
    return Imported(tuple(cells), tuple(refused))


@attrs.frozen
class ImportedCell:
    """One imported-run artifact, with what its self-check found (as the artifact records
    it: ``source.self_check`` and ``source.warnings``)."""

    path: Path
    self_check: tuple[dict[str, Any], ...]
    warnings: tuple[str, ...]


@attrs.frozen
class Imported:
    """What an import wrote, and the lines it refused while importing the others."""

    cells: tuple[ImportedCell, ...]
    """One per run (an SGLang JSONL holds one run per line)."""
    refused: tuple[str, ...] = ()
    """One line each: a run of the file that holds no per-request records, and why."""

    @property
    def paths(self) -> tuple[Path, ...]:
        """The artifacts written."""
        return tuple(cell.path for cell in self.cells)


def _slug(value: str) -> str:
    """A tag as part of a cell name: lower-case words joined by '-' ("" when none); two
    tags that read alike there are kept apart by ``-run2``."""
    return re.sub(r"[^a-z0-9]+", "-", value.lower()).strip("-")[:40].strip("-")


def _private(text: str) -> str | None:
    """The category of the first thing the sanitizer would redact in ``text``, if any."""
    from ledger.evidence.scan import detector

    hits = detector().detect(text)
    return hits[0].category if hits else None


def _cell(
    run: _Parsed,
    tool: str,
    sources: list[dict[str, str]],
    dialect: list[str],
    *,
    campaign: str,
    arm: str,
    stage: str,
    taken: Collection[str] = (),
) -> tuple[str, bytes]:
    """A run's artifact, named from its context, concurrency, request rate and tag; a name
    already ``taken`` (a path) gets ``-run2``, ``-run3``, in the file and in the cell id."""
    from ledger.formats.schema import document_bytes

    definitions = dict(run.definitions)
    if dialect:
        shown = ", ".join(dialect[:4]) + (
            f" and {len(dialect) - 4} more" if len(dialect) > 4 else ""
        )
        definitions["non_finite"] = (
            "SGLang writes Python's bare Infinity and NaN, which are not JSON; each is recorded "
            "as the string 'inf', '-inf' or 'nan' (a request_rate of inf: every request sent "
            f"at once): {shown}"
        )
    prompts = [r["prompt_tokens"] for r in run.records if r["prompt_tokens"] is not None]
    target = int(statistics.median(prompts)) if prompts else None
    cell_id = (f"ctx{target}" if target else "ctx-unknown") + (
        f"-c{run.concurrency}" if run.concurrency else ""
    )
    rate = run.settings.get("request_rate")
    if _finite(rate) and rate > 0:
        # 1e+300 and 1e-300 must not read alike: the exponent's sign is spelled out.
        shown = f"{float(rate):g}".replace(".", "p").replace("e+", "e").replace("e-", "em")
        cell_id += f"-r{shown}"
    tag = run.settings.get("tag")
    if isinstance(tag, str) and _slug(tag):
        held = _private(tag)
        if held is None:
            cell_id += f"-{_slug(tag)}"
        else:
            # Publication redacts the tag, but names are published as they are, and its
            # slug (gpu01-corp-acme-com) no longer reads as what the sanitizer looks for.
            named = ", ".join(source["name"] for source in sources)
            run.warnings.append(
                f"{named}: the tag holds a {held}: it is left out of the cell name, which is "
                "published as it is"
            )
    base, copy = cell_id, 1
    while f"{arm}/{stage}/{cell_id}.json" in taken:
        # The same settings twice in one file (SGLang appends every run): kept apart.
        copy += 1
        cell_id = f"{base}-run{copy}"
    document = {
        "schema": IMPORTED_SCHEMA,
        "campaign_id": campaign,
        "arm": arm,
        "stage": stage,
        "cell": {"id": cell_id, "context_target": target, "concurrency": run.concurrency},
        "source": {
            "tool": tool,
            "version": run.version,
            "files": sources,
            "definitions": definitions,
            "settings": json.loads(json.dumps(run.settings, default=str)),
            **({"self_check": run.checks} if run.checks else {}),
            **({"warnings": run.warnings} if run.warnings else {}),
        },
        "requests": run.records,
    }
    return f"{arm}/{stage}/{cell_id}.json", document_bytes(document)
