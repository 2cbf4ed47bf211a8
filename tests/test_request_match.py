"""An A/B is matched only when both arms asked for the same thing: every part of the request
but the prompt counts (extra body, sampling and streaming options, headers, the path),
unless it is the declared variable."""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger.derivation._derive import _request_failures
from runners.campaign._stages import request_body, request_shape
from runners.client import EndpointClient
from runners.plan import parse_plan
from tests.conftest import CliRun, run_plan_text, verify_json

PLAN = """
campaign_id = "2026-11-29-extra-body"
seed = 5
[[arms]]
name = "base"
{extra}
[arms.simulated]
decode_tok_s = 2000.0
[arms.identity]
engine = "x"
[[arms]]
name = "cand"
[arms.simulated]
decode_tok_s = 2000.0
[arms.identity]
engine = "y"
[[stages]]
kind = "capacity"
context_targets = [256]
concurrency = 2
requests = 4
max_tokens = 8
controlled_output = true
"""
EXTRA = "extra_body = {logprobs = true, top_logprobs = 20, top_k = 1, repetition_penalty = 1.5}"
ADDED = ("logprobs", "repetition_penalty", "top_k", "top_logprobs")


KEY = "sk-anvil-request-shape-2718281828"


@pytest.fixture(scope="module")
def unequal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A campaign whose baseline alone sends four more sampling fields (and an API key)."""
    raw = tmp_path_factory.mktemp("unequal")
    os.environ["ANVIL_REQUEST_KEY"] = KEY
    try:
        extra = f'api_key_env = "ANVIL_REQUEST_KEY"\n{EXTRA}'
        yield run_plan_text(PLAN.format(extra=extra), raw)[1]
    finally:
        del os.environ["ANVIL_REQUEST_KEY"]


def _derive(cli: CliRun, folder: Path, *differs: str) -> tuple[int, dict[str, Any], str]:
    flags = [f for key in ("engine", *differs) for f in ("--differs", key)]
    status, _, err = cli("derive", str(folder), "--baseline", "base", "--candidate", "cand",
                         "--replace", *flags)  # fmt: skip
    document: dict[str, Any] = {}
    if status == 0:
        document = json.loads((folder / "derived" / "ab-comparison-base-vs-cand.json").read_bytes())
    return status, document, err


def test_a_cell_run_records_what_its_requests_sent(unequal: Path) -> None:
    cell = json.loads((unequal / "base" / "capacity" / "ctx256-c2-nothink.json").read_bytes())
    request = cell["request"]
    assert request["path"] == "/chat/completions"
    # The key was sent (the arm names its variable) and is recorded nowhere.
    assert "authorization" not in request["headers"]
    assert not any(KEY.encode() in p.read_bytes() for p in unequal.rglob("*") if p.is_file())
    body = request["body"]
    assert "messages" not in body
    assert {k: body[k] for k in ADDED} == {
        "logprobs": True, "top_logprobs": 20, "top_k": 1, "repetition_penalty": 1.5,
    }  # fmt: skip
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 8 and body["ignore_eos"] is True


def test_unequal_requests_are_not_matched(unequal: Path, cli: CliRun) -> None:
    status, document, err = _derive(cli, unequal)
    assert status == 0, err
    sampling = [f["reason"] for f in document["match_failures"] if f["rule"] == "sampling"]
    values = {"logprobs": "true", "repetition_penalty": "1.5", "top_k": "1", "top_logprobs": "20"}
    assert sampling == [
        f"capacity/ctx256-c2-nothink: request.body.{key} differs ({values[key]} vs null)"
        for key in ADDED
    ]
    assert document["matched"] is False
    assert set(sampling) <= set(document["match_reasons"])
    # Verify derives it again from the raw rows, and agrees.
    status, report = verify_json(cli, unequal)
    assert status == 0, report["findings"]


def test_the_declared_variable_is_not_a_mismatch(unequal: Path, cli: CliRun) -> None:
    status, document, err = _derive(cli, unequal, *(f"request.body.{k}" for k in ADDED))
    assert status == 0, err
    assert [f for f in document["match_failures"] if f["rule"] == "sampling"] == []
    # Declaring three of the four leaves the fourth.
    status, document, err = _derive(cli, unequal, *(f"request.body.{k}" for k in ADDED[:3]))
    assert status == 0, err
    reasons = [f["reason"] for f in document["match_failures"] if f["rule"] == "sampling"]
    assert reasons == ["capacity/ctx256-c2-nothink: request.body.top_logprobs differs (20 vs null)"]


def test_a_declared_part_the_requests_lack_is_a_mistyped_argument(
    unequal: Path, cli: CliRun
) -> None:
    status, _, err = _derive(cli, unequal, "request.body.nosuch")
    assert status == 2
    assert "'request.body.nosuch': neither arm's identity nor request has this key" in err
    assert "request.body.top_k" in err  # the keys that do differ are named


def _row(request: dict[str, Any] | None) -> dict[str, Any]:
    return {"request": None if request is None else json.dumps(request)}


SHAPE = {"path": "/chat/completions", "headers": {"accept": "text/event-stream"},
         "body": {"temperature": 0.0, "stream": True}}  # fmt: skip


@pytest.mark.parametrize(
    ("other", "expected"),
    [
        (SHAPE, []),
        ({**SHAPE, "path": "/completions"},
         ['request.path differs ("/chat/completions" vs "/completions")']),
        ({**SHAPE, "headers": {"accept": "application/json"}},
         ['request.headers.accept differs ("text/event-stream" vs "application/json")']),
        ({**SHAPE, "body": {"temperature": 0.0}}, ["request.body.stream differs (true vs null)"]),
        ({**SHAPE, "body": {"temperature": 0.0, "stream": True, "stop": ["\n"]}},
         ['request.body.stop differs (null vs ["\\n"])']),
        (None, ["the request sent is not recorded on cand (a cell run of an earlier version)"]),
        # As JSON types them: true is no 1 (a server reads top_k: true as no top_k at all)...
        ({**SHAPE, "body": {"temperature": False, "stream": 1}},
         ["request.body.stream differs (true vs 1)",
          "request.body.temperature differs (0.0 vs false)"]),
        # ...while 0 and 0.0 are one JSON number.
        ({**SHAPE, "body": {"temperature": 0, "stream": True}}, []),
    ],
)  # fmt: skip
def test_each_part_of_the_request_counts(other: dict[str, Any] | None, expected: list[str]) -> None:
    assert _request_failures(_row(SHAPE), _row(other), ("base", "cand"), ()) == expected


def test_the_arm_whose_request_is_not_recorded_is_named() -> None:
    assert _request_failures(_row(None), _row(SHAPE), ("base", "cand"), ()) == [
        "the request sent is not recorded on base (a cell run of an earlier version)"
    ]


def test_what_is_recorded_is_what_the_client_sends() -> None:
    """The recorded shape and the request on the wire come from one body: the request the
    client builds is the shape's body with the prompt's messages, at the shape's path."""
    plan = parse_plan(tomllib.loads(PLAN.format(extra=EXTRA)))
    arm, stage = plan.arms[0], plan.stages[0]
    cell = stage.cells[0]
    messages = [{"role": "user", "content": "a prompt"}]
    shape = request_shape(arm, stage, cell)
    client = EndpointClient("http://127.0.0.1:9/v1", concurrency=1)
    sent = client.chat_request(request_body(arm, stage, cell, messages))
    assert json.loads(sent.content) == {**shape["body"], "messages": messages}
    assert sent.url.path == "/v1" + shape["path"]
    assert {k: sent.headers[k] for k in shape["headers"]} == shape["headers"]


def test_cell_runs_that_record_no_request_are_compared_on_their_settings() -> None:
    # Written before the request was recorded: what both lack cannot differ.
    assert _request_failures(_row(None), _row(None), ("base", "cand"), ()) == []


def test_identities_are_compared_as_json_types_them() -> None:
    from ledger.derivation._derive import _same

    assert not _same({"tp": 1}, {"tp": True}) and not _same([0], [False])
    assert not _same(500, "500") and _same({"a": [1, 2.0]}, {"a": [1.0, 2]})
