"""The sanitizer against the labelled corpus, embedded in realistic artifacts."""

from __future__ import annotations

import json
import random
import re
import uuid
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ledger.sanitizer import _sanitizer as sanitizer_module
from ledger.sanitizer._sanitizer import Sanitizer, Taken, load_rules, rules_file
from tests.conftest import DATA, seed_paths

CORPUS = DATA / "secrets-corpus"
LABELLED = [json.loads(line) for line in (CORPUS / "derived/labelled_strings.jsonl").open()]
LOOKALIKES = [json.loads(line) for line in (CORPUS / "derived/public_id_lookalikes.jsonl").open()]
POSITIVES = [r["text"] for r in LABELLED if r["label"] == "positive"]
NEGATIVES = [r["text"] for r in LABELLED if r["label"] == "negative"] + [
    r["value"] for r in LOOKALIKES
]
PLACEHOLDERS = [r["text"] for r in LABELLED if r["label"] == "placeholder"]


def test_corpus_sizes() -> None:
    assert (len(POSITIVES), len(PLACEHOLDERS)) == (325, 3)
    assert len(NEGATIVES) == 1002


def _embeddings(value: str) -> list[Any]:
    """The value where artifacts hold such things: serve flags, environment, logs, nesting."""
    return [
        value,
        {"identity": {"declared_serve_flags": ["--tp-size 2", value, "--port 8001"]}},
        {"environment": {"EXTRA": value}},
        {"logs": [f"2026-11-29T12:00:00Z INFO worker 3: {value} (continuing)"]},
        {"a": {"b": [{"c": f"prefix {value} suffix"}]}},
    ]


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [k, *_strings(v)]]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def test_every_positive_is_redacted_in_every_embedding() -> None:
    sanitizer = Sanitizer()
    missed = []
    for text in POSITIVES:
        for document in _embeddings(text):
            cleaned = sanitizer.document(document)
            if cleaned == document or list(sanitizer.scan(cleaned)):
                missed.append(text)
                break
    assert missed == []


@pytest.mark.parametrize("pool", ["negatives", "placeholders"])
def test_public_identifiers_and_placeholders_survive(pool: str) -> None:
    sanitizer = Sanitizer()
    values = NEGATIVES if pool == "negatives" else PLACEHOLDERS
    changed = [v for v in values for doc in _embeddings(v) if sanitizer.document(doc) != doc]
    assert changed == []


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128)))


GENERATED = [
    ("gpu", lambda r: f"GPU-{_uuid(r)}"),
    ("gpu", lambda r: f"MIG-{_uuid(r)}"),
    ("gpu", lambda r: f"MIG-GPU-{_uuid(r)}/{r.randint(0, 7)}/{r.randint(0, 7)}"),
    (
        "endpoint",
        lambda r: f"http://10.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(1, 254)}:8001/v1",
    ),
    ("endpoint", lambda r: f"http://192.168.{r.randint(0, 255)}.{r.randint(1, 254)}:30000"),
    ("endpoint", lambda r: f"http://100.{r.randint(64, 127)}.{r.randint(0, 255)}.7/v1"),
    ("endpoint", lambda r: f"http://169.254.{r.randint(0, 255)}.{r.randint(1, 254)}/latest"),
    ("endpoint", lambda r: f"http://localhost:{r.randint(1024, 65535)}/metrics"),
    ("endpoint", lambda r: f"https://gpu-box-{r.randint(1, 99)}.internal:8443/v1"),
    ("endpoint", lambda r: f"ops{r.randint(1, 9)}@gpu-{r.randint(1, 9)}.lan"),
    ("path", lambda r: f"/home/user{r.randint(1, 999)}/models/glm/config.json"),
    ("path", lambda r: f"/Users/dev{r.randint(1, 99)}/cache/x.safetensors"),
    ("path", lambda r: f"/mnt/nvme{r.randint(0, 3)}/checkpoints/step-100"),
    ("path", lambda r: f"C:\\Users\\op{r.randint(1, 9)}\\AppData\\model.bin"),
    (
        "credential",
        lambda r: f"hf_{''.join(r.choices('abcdefghijklmnopqrstuvwxyzABCDEFGH0123456789', k=34))}",
    ),
    (
        "credential",
        lambda r: f"sk-proj-{''.join(r.choices('abcdefghijklmnopqrstuvwxyz0123456789', k=40))}",
    ),
    (
        "credential",
        lambda r: f"ghp_{''.join(r.choices('abcdefghijklmnopqrstuvwxyzABCDEF0123456789', k=36))}",
    ),
    ("credential", lambda r: f"AKIA{''.join(r.choices('ABCDEFGHIJKLMNOPQRSTUVWXYZ234567', k=16))}"),
    ("credential", lambda r: "--api-key " + "".join(r.choices("abcdef0123456789", k=24))),
    (
        "credential",
        lambda r: "Authorization: Bearer " + "".join(r.choices("abcdef0123456789", k=32)),
    ),
    # Private hosts by meaning: a private label anywhere, a host that carried credentials,
    # non-public IPv6 addresses outside URLs.
    ("endpoint", lambda r: f"gpu{r.randint(1, 99)}.corp.acme{r.randint(1, 9)}.com"),
    ("endpoint", lambda r: f"registry{r.randint(1, 9)}.internal.example:{r.randint(1, 9999)}"),
    ("endpoint", lambda r: f"nas{r.randint(1, 99)}.home.arpa"),
    (
        "endpoint",
        lambda r: f"https://ci{r.randint(1, 99)}:t{r.getrandbits(32):x}@cdn.example.com/v2/",
    ),
    (
        "endpoint",
        lambda r: f"fd{r.randint(0, 255):02x}:{r.getrandbits(16):x}::{r.randint(1, 4095):x}",
    ),
    (
        "endpoint",
        lambda r: f"[fe80::{r.getrandbits(16):x}%eth{r.randint(0, 3)}]:{r.randint(1024, 65535)}",
    ),
]


@pytest.mark.parametrize(
    ("category", "make"), GENERATED, ids=[f"{c}-{i}" for i, (c, _) in enumerate(GENERATED)]
)
def test_generated_identifiers(category: str, make: Any) -> None:
    rng = random.Random(category)
    for _ in range(20):
        value = make(rng)
        sanitizer = Sanitizer()
        cleaned = sanitizer.text(f"serving {value} now")
        assert f"<redacted:{category}:1>" in cleaned, (value, cleaned)
        assert not sanitizer.detect(cleaned)


def test_host_path_keeps_the_file_name() -> None:
    assert (
        Sanitizer().text("/home/alice/models/glm/config.json")
        == "<redacted:path:1>/models/glm/config.json"
    )


def test_gpu_uuid_under_gpu_keys_and_in_cuda_visible_devices() -> None:
    bare = "3f2a8c1e-9b7d-4e5f-a1b2-c3d4e5f6a7b8"
    sanitizer = Sanitizer()
    assert sanitizer.document({"gpu_uuid": bare}) == {"gpu_uuid": "<redacted:gpu:1>"}
    assert sanitizer.text(f"CUDA_VISIBLE_DEVICES={bare}") == "CUDA_VISIBLE_DEVICES=<redacted:gpu:1>"
    # The same UUID as a request id is public.
    assert sanitizer.document({"request_id": bare}) == {"request_id": bare}


def test_secret_keys_whatever_the_value() -> None:
    sanitizer = Sanitizer()
    document = {
        "api_key": "plainword",
        "password": "hunter2",
        "api_key_env": "MY_ENDPOINT_KEY",
        "max_tokens": 64,
        "prompt_tokens": 4054,
        "client_secret": "0afae57f3ccfd9d7f5767067bc48b30f719e271ba470488056e37ab35d4b6506",
        "revision": "0afae57f3ccfd9d7f5767067bc48b30f719e271ba470488056e37ab35d4b6506",
    }
    cleaned = sanitizer.document(document)
    assert cleaned["api_key"].startswith("<redacted:credential:")
    assert cleaned["password"].startswith("<redacted:credential:")
    assert cleaned["client_secret"].startswith("<redacted:credential:")
    # Names of variables, counts and public digests stay.
    assert (cleaned["api_key_env"], cleaned["max_tokens"], cleaned["prompt_tokens"]) == (
        "MY_ENDPOINT_KEY",
        64,
        4054,
    )
    assert cleaned["revision"] == document["revision"]


def test_placeholders_are_stable_idempotent_and_deterministic() -> None:
    document = {
        "b": "token=hf_abcdefghijklmnopqrstuvwxyz012345 at http://10.0.0.5:8001",
        "a": ["hf_abcdefghijklmnopqrstuvwxyz012345", "/home/bob/x.log"],
    }
    first = Sanitizer().document(document)
    assert first == Sanitizer().document(json.loads(json.dumps(document)))
    assert first["a"][0] == "<redacted:credential:1>"
    assert first["b"] == "token=<redacted:credential:1> at http://<redacted:endpoint:1>"
    again = Sanitizer()
    assert again.document(first) == first
    assert again.redactions == 0


@pytest.mark.parametrize("prefilter", [True, False])
def test_a_new_value_is_numbered_past_the_placeholders_it_meets(prefilter: bool) -> None:
    token = "hf_abcdefghijklmnopqrstuvwxyz012345"
    # In the text it is in: the placeholder there stands for another value.
    text = Sanitizer(prefilter=prefilter).text(f"was <redacted:credential:3> now {token}")
    assert text == "was <redacted:credential:3> now <redacted:credential:4>"
    # In another string of the document, whichever comes first; other categories apart.
    sanitizer = Sanitizer(prefilter=prefilter)
    document = {"a": token, "b": ["<redacted:credential:2>", "<redacted:gpu:9>"]}
    assert sanitizer.document(document)["a"] == "<redacted:credential:3>"
    assert sanitizer.text("at /home/bob/x") == "at <redacted:path:1>/x"
    # Reserved by whoever numbers across texts; a number too long to count to is no
    # reservation (nor an error: int() refuses past 4,300 digits).
    sanitizer = Sanitizer(prefilter=prefilter)
    sanitizer.reserve("<redacted:credential:7> <redacted:credential:" + "9" * 5000 + ">")
    sanitizer.reserve("<redacted:credential:5>")
    assert sanitizer.text(token) == "<redacted:credential:8>"
    sanitizer.reserve("<redacted:gpu:" + "1" * 18 + ">")
    assert sanitizer.text("GPU-3f2a8c1e-9b7d-4e5f-a1b2-c3d4e5f6a7b8") == (
        "<redacted:gpu:" + "1" * 17 + "2>"
    )
    # Past 18 digits a number is not counted from, but never given again when counting
    # reaches it; a number 0 is counted past too.
    sanitizer = Sanitizer(prefilter=prefilter)
    sanitizer.reserve("<redacted:path:0> <redacted:gpu:" + "1" * 19 + ">")
    sanitizer.reserve(
        "<redacted:credential:" + "9" * 18 + "> <redacted:credential:1" + "0" * 18 + ">"
    )
    assert sanitizer.text("at /home/bob/x") == "at <redacted:path:1>/x"
    assert sanitizer.text("GPU-3f2a8c1e-9b7d-4e5f-a1b2-c3d4e5f6a7b8") == "<redacted:gpu:1>"
    assert sanitizer.text(token) == "<redacted:credential:1" + "0" * 17 + "1>"


@pytest.mark.parametrize("prefilter", [True, False])
def test_a_file_of_json_lines_reserves_each_line_as_a_reader_decodes_it(prefilter: bool) -> None:
    token = "hf_abcdefghijklmnopqrstuvwxyz012345"
    sanitizer = Sanitizer(prefilter=prefilter)
    sanitizer.reserve_lines(
        "plain <redacted:endpoint:4>\n"
        '{"a": 1}\n'
        '{"note": "\\u003credacted:credential:6>"}\n'
        '"\\u003credacted:path:3>"\n'
        '{"n": NaN, "note": "\\u003credacted:gpu:2>"}\n'
    )
    assert sanitizer.text(token) == "<redacted:credential:7>"
    assert sanitizer.text("at /home/bob/x") == "at <redacted:path:4>/x"
    assert sanitizer.text("GPU-3f2a8c1e-9b7d-4e5f-a1b2-c3d4e5f6a7b8") == "<redacted:gpu:3>"
    assert sanitizer.text("at 10.1.2.3") == "at <redacted:endpoint:5>"


@pytest.mark.parametrize("prefilter", [True, False])
def test_json_lines_as_a_reader_decodes_them(prefilter: bool) -> None:
    """A line that is a JSON string is sanitized as JSON; one that is not strict JSON (a
    NaN, a duplicate key) cannot be rewritten as JSON, so a secret its escapes spell is
    found, not published unseen."""
    sanitizer = Sanitizer(prefilter=prefilter)
    text = (
        '"\\u0070assword=hunter2secret"\n'
        '{"a": NaN, "k": "\\u0070assword=hunter2secret"}\n'
        '{"k": "x", "k": "ghp_\\u0041BCDEFGHIJKLMNOPQRSTUVWXYZabcdefghij"}\n'
        '{"a": NaN, "k": "plain \\u003credacted:credential:9> \\n"}\n'
    )
    cleaned = sanitizer.lines(text)
    lines = cleaned.split("\n")
    assert lines[0] == '"password=<redacted:credential:10>"'
    # Rules v2 decode the escapes of any text: what they spell is redacted where it is.
    assert lines[1] == '{"a": NaN, "k": "\\u0070assword=<redacted:credential:10>"}'
    assert lines[2] == '{"k": "x", "k": "<redacted:credential:11>"}'
    assert list(sanitizer.scan_lines(cleaned)) == []
    # Rules v1 found them (a publish refused the file), and left them in the text.
    v1 = Sanitizer(load_rules(rules_file("1")), prefilter=prefilter)
    cleaned = v1.lines(text)
    assert cleaned.split("\n")[1:3] == text.split("\n")[1:3]
    assert list(v1.scan_lines(cleaned)) == [
        (2, "", "credential written with JSON escapes"),
        (3, "", "credential written with JSON escapes"),
    ]


@pytest.mark.parametrize("prefilter", [True, False])
def test_long_numbers_under_a_secret_key_in_a_list_and_alone(prefilter: bool) -> None:
    sanitizer = Sanitizer(prefilter=prefilter)
    assert sanitizer.document({"api_key": 10**12}) == {"api_key": "<redacted:credential:1>"}
    assert sanitizer.document({"api_key": [10**12 + 1, 5]}) == {
        "api_key": ["<redacted:credential:2>", 5]
    }
    numbers = {"counts": [10**12, 5], "api_key": [10**12 - 1, 5]}
    assert sanitizer.document(numbers) is numbers
    fresh = Sanitizer(prefilter=prefilter)
    assert list(fresh.scan({"api_key": [-(10**12)]})) == [("/api_key/0", "credential")]
    assert list(fresh.scan(10**12, key="api_key")) == [("", "credential")]
    assert list(fresh.scan("abcdefghijklmnop1234", key="api_key")) == [("", "credential")]
    assert list(fresh.scan(numbers)) == []


@pytest.mark.parametrize("prefilter", [True, False])
def test_a_secret_used_as_a_key_leaves_its_value_as_it_was(prefilter: bool) -> None:
    key = "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX12"
    sanitizer = Sanitizer(prefilter=prefilter)
    cleaned = sanitizer.document({key: "key is secret"})
    assert cleaned == {"<redacted:credential:1>": "key is secret"}
    assert list(Sanitizer(prefilter=prefilter).scan(cleaned)) == []
    assert sanitizer.document(cleaned) == cleaned
    # A key that names a secret in words is still one, placeholder or not.
    assert sanitizer.document({"api_key <redacted:path:1>": "abc"}) == {
        "api_key <redacted:path:1>": "<redacted:credential:2>"
    }


@pytest.mark.parametrize("prefilter", [True, False])
def test_credentials_that_overlap_are_one_redaction(prefilter: bool) -> None:
    # The Google key runs on into the private key's dashes: one span of both.
    key = "AIzaSyA1234567890abcdefghijklmnopqrstu1234567"
    block = "-----BEGIN PRIVATE KEY-----\nMIIabc\n-----END PRIVATE KEY-----"
    sanitizer = Sanitizer(prefilter=prefilter)
    cleaned = sanitizer.document({"note": key + block})
    assert cleaned == {"note": "<redacted:credential:1>"}
    assert sanitizer.text(key + block) == "<redacted:credential:1>"
    # Two keyed values inside one block: one span of all three, not pieces that overlap.
    inner = block.replace("MIIabc", "token=abc123xyz789\nsecret=def456uvw012")
    assert Sanitizer(prefilter=prefilter).text(inner) == "<redacted:credential:1>"


@pytest.mark.parametrize("prefilter", [True, False])
def test_credentials_that_touch_are_two(prefilter: bool) -> None:
    block = f"-----BEGIN PRIVATE KEY-----\n{PEM_BODY}\n-----END PRIVATE KEY-----"
    assert len(Sanitizer(prefilter=prefilter).detect(block + block)) == 2


def test_taken_spans_overlap_only_where_they_share_a_position() -> None:
    taken = Taken([(2, 5), (9, 12)])
    assert taken.overlapping(5, 8) == [] and taken.overlapping(0, 2) == []
    assert taken.overlapping(4, 6) == [(2, 5)] and taken.overlapping(0, 20) == [(2, 5), (9, 12)]
    taken.remove(2, 5)
    assert taken.overlapping(0, 20) == [(9, 12)] and taken.free(2, 5)


PEM_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKjMzEfYyjiWA4R4"


@pytest.mark.parametrize("prefilter", [True, False])
@pytest.mark.parametrize(
    "before",
    ["password=hunter2", "password=sk-proj-abcdefghijklmnopqrstuvwxyz0123", "api_key: abc123"],
)
def test_a_secret_written_against_a_private_key_does_not_hide_the_key(
    before: str, prefilter: bool
) -> None:
    """The keyed value runs to the next space, over the key's `-----BEGIN`: were the two
    kept apart, the private key would be found by neither pass, and its body published."""
    block = f"-----BEGIN PRIVATE KEY-----\n{PEM_BODY}\n-----END PRIVATE KEY-----"
    sanitizer = Sanitizer(prefilter=prefilter)
    name = re.match(r"[a-z_]+[=:] ?", before)
    assert name is not None
    # The keyed value and the key: one redaction, the same value the same placeholder.
    expected = f"{name.group(0)}<redacted:credential:1> done"
    assert sanitizer.text(f"{before}{block} done") == expected
    assert sanitizer.document({"env": [f"{before}{block} done"]}) == {"env": [expected]}
    # In a text file's "key=value" line, the rest of the value is a secret too (rules v2).
    assert sanitizer.lines(f"line one\n{before}{block} done\n") == (
        f"line one\n{name.group(0)}<redacted:credential:1> <redacted:credential:2>\n"
    )
    v1 = Sanitizer(load_rules(rules_file("1")), prefilter=prefilter)
    assert v1.lines(f"line one\n{before}{block} done\n") == f"line one\n{expected}\n"


def test_seed_evidence_is_clean() -> None:
    sanitizer = Sanitizer()
    for path in seed_paths():
        assert list(sanitizer.scan(json.loads(path.read_text()))) == [], path.name


@pytest.mark.parametrize("prefilter", [True, False])
@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("connected to 10.1.2.3.", "connected to {}."),  # a sentence's full stop
        ("worker 10.1.2.3_w1", "worker {}_w1"),
        ("w_10.1.2.3 up", "w_{} up"),
        ("logs/10.1.2.3.log", "logs/{}.log"),  # a file named after its host
        ("at 10.1.2.3:8001.", "at {}."),
    ],
)
def test_an_ipv4_address_is_redacted_whatever_punctuation_follows(
    prefilter: bool, text: str, kept: str
) -> None:
    """An address at a sentence's end or beside an underscore was published as it was."""
    assert Sanitizer(prefilter=prefilter).text(text) == kept.format("<redacted:endpoint:1>")


@pytest.mark.parametrize("text", ["version 1.2.3.4.5", "v1.2.3.4", "1.2.3.4.5.6"])
def test_a_longer_dotted_number_is_not_an_address(text: str) -> None:
    assert Sanitizer().text(text) == text


@pytest.mark.parametrize("value", ["true", "false", "FALSE", "null", "None"])
def test_a_secret_key_s_literal_values_are_not_credentials(value: str) -> None:
    sanitizer = Sanitizer()
    assert sanitizer.detect(value, "api_key") == []
    assert [h.category for h in sanitizer.detect(value + "y", "api_key")] == ["credential"]


@pytest.mark.parametrize("prefilter", [True, False])
def test_a_value_after_a_secret_flag_in_an_argv_is_a_credential(prefilter: bool) -> None:
    # docker inspect records a container's command as a list, flag and value apart.
    argv = ["serve", "--model", "org/m", "--api-key", "Tr0ub4dor-and-3-horses", "--port", "8000",
            "--max-tokens", "512", "--token", "-", "--db_password", "hunter2hunter2"]  # fmt: skip
    sanitizer = Sanitizer(prefilter=prefilter)
    assert list(sanitizer.scan({"command": argv})) == [
        ("/command/4", "credential"),
        ("/command/12", "credential"),
    ]
    cleaned = sanitizer.document({"command": argv})["command"]
    assert cleaned[4].startswith("<redacted:credential:") and cleaned[12].startswith("<redacted:")
    # The flags themselves, other values, and a flag's "-" (standard input) stay.
    kept = [i for i in range(len(argv)) if i not in (4, 12)]
    assert [cleaned[i] for i in kept] == [argv[i] for i in kept]
    assert list(sanitizer.scan({"command": cleaned})) == []


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ('--api-key "Tr0ub4dor-and-3"', "Tr0ub4dor-and-3"),
        ("--api-key 'Tr0ub4dor-and-3'", "Tr0ub4dor-and-3"),
        ("--api_key Tr0ub4dor-and-3", "Tr0ub4dor-and-3"),
        ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA=="),
        ("Proxy-Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA=="),
        ("NGC_KEY nvapi-" + "Ab1_" * 16, "nvapi-" + "Ab1_" * 16),
        ("--db_password Tr0ub4dor-and-3", "Tr0ub4dor-and-3"),
        ("--client_secret=Tr0ub4dor-and-3", "Tr0ub4dor-and-3"),
        # The scheme is no secret, the credentials after it are: the whole is redacted.
        ("Authorization: Negotiate YIIGhgYJKoZIhvcSAQICAQBuggZ1MIIGcaADAgEF", "YIIGhgYJKoZIhvc"),
        ("Authorization: NTLM TlRMTVNTUAABAAAAB4IIogAAAAAAAAAA==", "TlRMTVNTUAABAAAAB4"),
        ("auth: Negotiate YIIGhgYJKoZIhvcSAQICAQBuggZ1MIIGcaADAgEF", "YIIGhgYJKoZIhvc"),
        # A Digest response is a hash of the password: every parameter goes.
        (
            (
                'Authorization: Digest username="bob", realm="x", nonce="dcd98b7102dd2f0e8b11", '
                'response="6629fae49393a05397450978507c4ef1"'
            ),
            "6629fae49393a05397450978507c4ef1",
        ),
        (
            (
                'log {"h": "Authorization: Digest username=\\"bob\\", '
                'response=\\"6629fae49393a05397450978507c4ef1\\""} end'
            ),
            "6629fae49393a05397450978507c4ef1",
        ),
    ],
)
def test_quoted_flag_values_basic_auth_and_nvidia_keys(text: str, secret: str) -> None:
    sanitizer = Sanitizer()
    cleaned = sanitizer.text(text)
    assert secret not in cleaned and "<redacted:credential:1>" in cleaned
    assert sanitizer.detect(cleaned) == []


_HEX40 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b"
_HEX64 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"


@pytest.mark.parametrize("prefilter", [True, False])
@pytest.mark.parametrize(
    "text",
    [
        f"vllm serve org/m --api-key {_HEX40} --port 8000",
        f"--token {_HEX64}",
        f"--hf-token\t{_HEX40}",
    ],
)
def test_a_digest_shaped_value_after_a_secret_flag_is_a_credential(
    text: str, prefilter: bool
) -> None:
    # `openssl rand -hex 20` makes a key that looks like a commit: the flag names it a secret,
    # as `--api-key=<hex>` and `API_KEY=<hex>` do.
    secret = _HEX64 if _HEX64 in text else _HEX40
    sanitizer = Sanitizer(prefilter=prefilter)
    assert secret not in sanitizer.text(text)
    cleaned = sanitizer.document({"command": text, "revision": _HEX40, "sha256": _HEX64})
    assert secret not in cleaned["command"] and "<redacted:credential:" in cleaned["command"]
    # The same digits as a revision or a digest are public identifiers.
    assert (cleaned["revision"], cleaned["sha256"]) == (_HEX40, _HEX64)
    assert sanitizer.text(f"--revision {_HEX40} sha256 {_HEX64}") == (
        f"--revision {_HEX40} sha256 {_HEX64}"
    )


def test_a_digest_header_inside_a_json_line_keeps_the_line_s_json() -> None:
    text = '{"Authorization": "Digest username=x, response=abcdef0123"}, "next": 1'
    assert Sanitizer().text(text) == '{"Authorization": "<redacted:credential:1>"}, "next": 1'


def test_json_lines_are_sanitized_as_the_json_they_decode_to() -> None:
    # Escapes a JSON reader decodes: as text, neither line names a key or an address.
    text = (
        '{"api\\u005fkey": "plainsecretvalue30", "n": 1}\n'
        '{"url": "http://10\\u002e0.0.5:8000/v1"}\n'
        "2026-11-29 INFO token=abcdefgh1234 served\n"
        '{"ok": "fine",  "n": 2}\n'
    )
    sanitizer = Sanitizer()
    assert list(sanitizer.scan_lines(text)) == [
        (1, "/api_key", "credential"),
        (2, "/url", "endpoint"),
    ]
    out = sanitizer.lines(text).split("\n")
    assert out[0] == '{"api_key":"<redacted:credential:1>","n":1}'
    assert out[1] == '{"url":"http://<redacted:endpoint:1>/v1"}'
    assert "abcdefgh1234" not in out[2]  # a line of text is sanitized as text
    assert out[3] == '{"ok": "fine",  "n": 2}'  # nothing redacted: the line as it was
    assert list(sanitizer.scan_lines("\n".join(out))) == []


def test_a_json_line_holding_an_array_is_decoded_too() -> None:
    text = ' [{"api\\u005fkey": "plainsecretvalue30"}, "--api\\u002dkey", "Tr0ub4dor-and-3"]\n'
    sanitizer = Sanitizer()
    assert list(sanitizer.scan_lines(text)) == [
        (1, "/0/api_key", "credential"),
        (1, "/2", "credential"),
    ]
    cleaned = sanitizer.lines(text)
    assert "plainsecretvalue30" not in cleaned and "Tr0ub4dor-and-3" not in cleaned
    assert json.loads(cleaned)[1] == "--api-key"


@pytest.mark.parametrize(
    "text",
    [
        "auth_mode: oauth-proxy",
        "api_key_env: VLLM_API_KEY",
        '"api_key_env": "VLLM_API_KEY"',
        '"prompt_tokens": 1234567890123',
        "token_budget: high-effort",
        "secret_name: hf-token-ref",
        '["--api-key-env", "VLLM_API_KEY", "--max-model-len", "8192"]',
    ],
)
def test_names_of_secrets_in_text_stay_as_under_a_json_key(text: str) -> None:
    # A report prints identities as "key: value" lines: read as the JSON they came from.
    assert Sanitizer().text(text) == text


@pytest.mark.parametrize(
    "text", ["auth_token: abcdefgh123", "token: abcdefgh1234", 'SUMO_ACCESS_ID = "suGyI5imvADdvU"']
)
def test_a_secret_s_own_name_still_makes_its_value_secret(text: str) -> None:
    assert "<redacted:credential:1>" in Sanitizer().text(text)


def test_what_holds_no_hit_is_kept_and_what_holds_one_is_rebuilt() -> None:
    requests = [{"index": i, "finish_reason": "length"} for i in range(3)]
    document = {
        "identity": {"environment": {"HF_TOKEN": "hf_" + "a" * 34}, "model": "org/m"},
        "requests": requests,
    }
    cleaned = Sanitizer().document(document)
    assert cleaned["requests"] is requests  # nothing in it redacted: not copied
    assert cleaned["identity"] is not document["identity"]
    assert cleaned["identity"]["environment"]["HF_TOKEN"] == "<redacted:credential:1>"
    assert document["identity"]["environment"]["HF_TOKEN"].startswith("hf_")


def test_an_object_met_twice_is_rebuilt_each_time() -> None:
    # One list under two keys (a document built in Python, not parsed): where its strings
    # are is known for its last place only, and the hits between the two are kept apart.
    shared = ["--port 8001", "warm"]
    document = {"a_flags": shared, "m": "sk-" + "b" * 40, "z_flags": shared}
    cleaned = Sanitizer().document(document)
    assert cleaned == {"a_flags": shared, "m": "<redacted:credential:1>", "z_flags": shared}
    assert Sanitizer(prefilter=False).document(document) == cleaned


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 12)), max_size=40))
def test_a_span_is_free_exactly_when_it_overlaps_nothing_taken(
    spans: list[tuple[int, int]],
) -> None:
    taken, every = Taken(), []
    for start, width in spans:
        end = start + width
        overlaps = any(end > a and start < b for a, b in every)
        assert taken.free(start, end) is not overlaps
        if not overlaps and width:
            taken.add(start, end)
            every.append((start, end))
    assert bool(taken) is bool(every)


@pytest.mark.parametrize("prefilter", [True, False])
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # The name of a thing took a scheme word, a space and the next keyed value as its
        # own value: the keyed value inside it is found.
        ("auth_mode=basic password=hunter2x", "auth_mode=basic password=<redacted:credential:1>"),
        ("auth_mode=basic\npassword=hunter2x", "auth_mode=basic\npassword=<redacted:credential:1>"),
        # A name of a thing, then a keyed value of the same rule further on.
        ("auth_mode=basic, password=hunter2x", "auth_mode=basic, password=<redacted:credential:1>"),
        (
            "api_key_env=OPENAI_KEY token=abcdef123456",
            "api_key_env=OPENAI_KEY token=<redacted:credential:1>",
        ),
    ],
)
def test_a_keyed_value_after_the_name_of_a_thing_is_redacted(
    prefilter: bool, text: str, expected: str
) -> None:
    assert Sanitizer(prefilter=prefilter).text(text) == expected


@pytest.mark.parametrize("prefilter", [True, False])
def test_a_match_over_a_placeholder_does_not_stop_its_rule(prefilter: bool) -> None:
    """A private key whose body is a placeholder (sanitized before) is left; the next
    block, a real one, is still found."""
    kept = "-----BEGIN PRIVATE KEY-----\n<redacted:credential:7>\n-----END PRIVATE KEY-----"
    block = f"-----BEGIN PRIVATE KEY-----\n{PEM_BODY}\n-----END PRIVATE KEY-----"
    cleaned = Sanitizer(prefilter=prefilter).text(f"{kept} then {block}")
    assert cleaned == f"{kept} then <redacted:credential:8>"  # numbered past the one kept


_KEYS = st.sampled_from(["a", "api_key", "token_count", "args", "gpu_uuid", "--api-key", "env"])
_SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False),
    st.integers(-(10**13), 10**13),
    st.sampled_from(["--api-key", "--token", "-x", "--flag=1", "hf_" + "a" * 32, "plain"]),
    st.text(max_size=8),
)
_JSON = st.recursive(
    _SCALAR,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(_KEYS | st.text(max_size=4), inner),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(_JSON, st.sampled_from([None, "api_key", "args"]))
@example({"api_key": [10**12], "token": 10**12, "password": -(10**12)}, None)
@example([-(10**12), "x"], "api_key")
@example(10**12, "api_key")
def test_the_scan_looks_at_the_strings_the_walk_in_order_does(value: Any, key: str | None) -> None:
    """The fail-closed scan asks whether any (string, key) holds something, from sets; the
    walk in order (which sanitizing rebuilds from) must give the same pairs."""
    sanitizer = Sanitizer()
    ordered: list[tuple[str, str | None]] = []
    sanitizer_module._strings(value, key, ordered, sanitizer._numbers())
    strings: set[tuple[str, str | None]] = set()
    keys: set[str] = set()
    sanitizer_module._distinct_strings(value, key, strings, keys, sanitizer._numbers())
    assert set(ordered) == strings | {(k, None) for k in keys}


@pytest.mark.parametrize("prefilter", [True, False])
def test_the_scan_finds_a_secret_that_is_only_a_key(prefilter: bool) -> None:
    token = "ghp_" + "K" * 36
    document = {"rows": [{"n": 1}, {token: 2, "note": "plain"}]}
    assert list(Sanitizer(prefilter=prefilter).scan(document)) == [
        ("/rows/1/<redacted:credential>", "credential (in a key)")
    ]
