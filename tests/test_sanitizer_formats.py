"""Rules v2: the files people keep beside a campaign, as an attacker plants them.

Each case is a file planted in a raw campaign under ``notes/``: published, every secret
value is gone and every public identifier kept; pasted back into the publication, each is
caught by ``verify --public``. Every case was published verbatim by rules v1.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from ledger.evidence import scan
from ledger.formats.jsonio import read_json, write_json
from ledger.publication._publish import publish
from ledger.sanitizer._sanitizer import Sanitizer, load_rules, rules_file
from tests.conftest import CliRun, forge_seal, verify_json

PLACEHOLDER = re.compile(r"<redacted:[a-z]+:[0-9]+>")
WIDE_KEY = "".join(chr(ord(c) + 0xFEE0) for c in "API_KEY")
"""API_KEY in full-width letters."""


class Case(NamedTuple):
    name: str
    text: str
    secrets: tuple[str, ...]
    kept: tuple[str, ...] = ()
    v1_leaks: bool = True
    """Whether rules v1 published a secret of it (a Compose list's was caught already)."""


CASES = [
    # 1. YAML nesting
    Case(
        "nested.yaml",
        "credentials:\n  api_key: abcdefg1234567\n",
        ("abcdefg1234567",),
        ("api_key:",),
    ),
    Case("auth", "auth:\n  password: xq\n  type: basic\n", ("xq",), ("type: basic",)),
    Case("token", "token:\n  value: tokval99\n  file: /run/t\n", ("tokval99",), ("file: /run/t",)),
    # 2. Kubernetes and Compose
    Case(
        "env.json",
        '{"env": [{"name": "VLLM_API_KEY", "value": "sekretValue789"},'
        ' {"name": "PORT", "value": "8000"}]}',
        ("sekretValue789",),
        ('"VLLM_API_KEY"', '"value": "8000"'),
    ),
    Case(
        "deploy.yaml",
        "env:\n  - name: VLLM_API_KEY\n    value: sekretValue790\n"
        "  - name: HF_TOKEN_FILE\n    value: /run/secrets/hf\n",
        ("sekretValue790",),
        ("name: VLLM_API_KEY", "value: /run/secrets/hf"),
    ),
    Case(
        "compose",
        "services:\n  vllm:\n    image: vllm/vllm-openai:v0.6.3\n    environment:\n"
        "      - VLLM_API_KEY=sekretValue456\n      - MODEL=meta-llama/Llama-3.1-8B\n",
        ("sekretValue456",),
        ("vllm/vllm-openai:v0.6.3", "MODEL=meta-llama/Llama-3.1-8B"),
        False,
    ),
    Case(
        "args",
        "args:\n  - --api-key\n  - sekretValue123\n  - --hf-token\n  - hfsekret999\n"
        "  - --port\n  - '8000'\n",
        ("sekretValue123", "hfsekret999"),
        ("- --api-key", "- --port", "'8000'"),
    ),
    # 3. provider keys
    Case("groq", "GROQ=gsk_" + "a1B2c3D4" * 6 + "q1w2", ("gsk_" + "a1B2c3D4" * 6 + "q1w2",)),
    # 4. other spellings
    Case(
        "db.env",
        "DB_PASS=hunter2hunter # rotated\nSMTP_PW=mailpw77\nDB_HOST=db\n",
        ("hunter2hunter", "mailpw77"),
        ("DB_HOST=db", " # rotated\n"),
    ),
    Case(
        ".netrc",
        "machine api.example.com login bob password netrcsekret\n",
        ("netrcsekret",),
        ("api.example.com",),
    ),
    Case(
        "users.csv",
        "DB_USER,DB_PASSWORD,ROLE\nbob,csvsekret9,admin\n",
        ("csvsekret9",),
        ("admin", "DB_PASSWORD"),
    ),
    Case(
        "request.http",
        "POST /v1/chat HTTP/1.1\nOcp-Apim-Subscription-Key: 0123abcd0123abcd0123abcd0123abcd\n",
        ("0123abcd0123abcd0123abcd0123abcd",),
        ("Ocp-Apim-Subscription-Key:",),
    ),
    Case(
        "short.yaml",
        "pass: passsekret1\npw: pwsekret22\npass_rate: 0.93\n",
        ("passsekret1", "pwsekret22"),
        ("pass_rate: 0.93",),
    ),
    # 5. escapes and encodings
    Case("escaped.log", 'sent {"api\\u005fkey":"escsekret123"}\n', ("escsekret123",), ("sent",)),
    Case("slashes.txt", 'cache "\\/home\\/alice\\/models"\n', ("alice",), ("models",)),
    Case(
        "url.log", "GET /files?path=%2Fhome%2Falice%2Fmodels\n", ("alice",), ("GET /files?path=",)
    ),
    Case(
        "cut.log",
        "boot\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx1234567890abcdefghijklmnop\n"
        "qrstuvwxyzABCDEF",
        ("MIIEowIBAAKCAQEAx1234567890abcdefghijklmnop", "qrstuvwxyzABCDEF"),
        ("boot",),
    ),
    # 6. private locations
    Case("data.txt", "weights in /data/alice/models/x\n", ("/data/alice",), ("/models/x",)),
    Case("volumes.txt", "copied to /Volumes/Alice SSD/models\n", ("Alice SSD",), ("/models",)),
    Case("tilde.sh", "cd ~alice/models\n", ("~alice",), ("/models",)),
    Case("unc.txt", "share \\\\fileserver\\share\\models\n", ("fileserver",), ("models",)),
    Case("short-ip.txt", "served at http://10.1:8000/v1\n", ("10.1:8000",), ("/v1",)),
    Case(
        "brackets.yaml",
        "hf_token: <hunter2-in-brackets>\napi_key: ${KEY:-sk-default-1234}\n",
        ("hunter2-in-brackets", "sk-default-1234"),
        ("hf_token: <", "api_key: "),
    ),
    # Found by trying to get past the above: a file the structure walk cannot read whole,
    # a secret inside a string, other formats.
    Case(
        "chart-deployment.yaml",
        "env:\n{{- if .Values.auth }}\n  - name: VLLM_API_KEY\n    value: helmsekret01\n{{- end }}\n",
        ("helmsekret01",),
        ("{{- if .Values.auth }}",),
    ),
    Case(
        "manifests.yaml",
        "a: 1\n---\nenv:\n  - name: HF_TOKEN\n    value: docsekret02\n---\nports: [{port: 80}\n",
        ("docsekret02",),
        ("ports: [{port: 80}",),
    ),
    Case(
        "deploy.md",
        "# Deploy\n\n```yaml\nspec:\n  creds:\n    token:\n      inner: mdsekret03\n```\n",
        ("mdsekret03",),
        ("```yaml",),
    ),
    Case(
        "results.jsonl",
        '{"ttft_ms": NaN, "env": [{"name": "HF_TOKEN", "value": "nansekret04"}]}\n{"ok": 1}\n',
        ("nansekret04",),
        ('"ttft_ms": NaN',),
    ),
    Case(
        "server.log",
        'INFO launching with env={"name": "HF_TOKEN", "value": "logsekret05"}\nINFO ok\n'
        'INFO env={\\"name\\": \\"HF_TOKEN\\", \\"value\\": \\"escsekret06\\"}\n',
        ("logsekret05", "escsekret06"),
        ("INFO launching with env=", "INFO ok"),
    ),
    Case(
        "deploy-live.yaml",
        "metadata:\n  annotations:\n    kubectl.kubernetes.io/last-applied-configuration: |\n"
        '      {"spec":{"env":[{"name":"HF_TOKEN","value":"annsekret07"}]}}\n',
        ("annsekret07",),
        ("last-applied-configuration",),
    ),
    Case(
        "secret.yaml",
        "kind: Secret\nstringData:\n  hf: k8ssekret08\n",
        ("k8ssekret08",),
        ("kind: Secret",),
    ),
    Case(
        "settings.csv",
        "name,value\nHF_TOKEN,csvsekret10\nPORT,8000\n",
        ("csvsekret10",),
        ("PORT,8000",),
    ),
    Case("export.csv", "# exported\nuser,password\nbob,csvsekret11\n", ("csvsekret11",), ("bob,",)),
    Case(
        "netrc-backup",
        "# my netrc\nmachine api.example.com login bob password netsekret12\n",
        ("netsekret12", "bob"),
        ("api.example.com",),
    ),
    Case(
        "bom.yaml", "\ufefftoken:\n  value: bomsekret137\n", ("bomsekret13", "7\n"), ("  value: ",)
    ),
    Case(
        "crlf.ini", "\ufeff[credentials]\r\nopenai = crlfsekret14\r\n", ("crlfsekret14",), ("\r\n",)
    ),
    Case(
        "Dockerfile",
        "FROM x\nENV HF_TOKEN dockersekret15\n",
        ("dockersekret15",),
        ("ENV HF_TOKEN ",),
    ),
    Case(".env", 'GCP_SA_KEY="\nmultisekret16\n"\nPORT=1\n', ("multisekret16",), ("PORT=1",)),
    Case(
        "db.ini",
        "[database]\nhost = db\npassword =\n    contsekret17\n",
        ("contsekret17",),
        ("host = db",),
        False,
    ),
    Case(
        "bench.py",
        'os.environ["OPENAI_API_KEY"] = "pysekret18"\n',
        ("pysekret18",),
        ("os.environ[",),
    ),
    Case(
        "app.config",
        '<add key="ApiKey" value="xmlsekret19" />\n<password>xmlsekret20</password>\n',
        ("xmlsekret19", "xmlsekret20"),
        ('<add key="ApiKey"',),
    ),
    Case(
        "proxy.log",
        "GET /v1/models?key=querysekret21 200\nGET /x?api%255Fkey%253Ddoublesekret22 200\n",
        ("querysekret21", "doublesekret22"),
        ("GET /v1/models?key=",),
    ),
    Case("cmdline", "vllm\0serve\0--api-key\0nulsekret23\0", ("nulsekret23",), ("vllm\0serve",)),
    Case(
        "values.yml",
        "vllm:\n  api_keys:\n    - pluralsekret24\nsecrets:\n  openai: pluralsekret25\n",
        ("pluralsekret24", "pluralsekret25"),
        ("api_keys:",),
    ),
    Case(
        "secret-list.yaml",
        "auth:\n  args:\n    - --verbose\n    - flaglistsekret26\n",
        ("flaglistsekret26",),
        ("- --verbose",),
    ),
    Case(
        "glued-before.txt",
        "kept backup_ghp_" + "B2c3" * 9 + "\n",
        ("ghp_" + "B2c3" * 9,),
        ("backup_",),
    ),
    Case(
        "sniffed.txt", "user,password\nbob,sniffsekret27\n", ("sniffsekret27",), ("user,password",)
    ),
    Case(
        "creds.txt",
        "machine api.example.com login loginsekret28 password netsekret29\n",
        ("loginsekret28", "netsekret29"),
        ("machine api.example.com",),
    ),
    Case(
        "three-lines.csv",
        'user,password\nbob,"one\nmiddlesekret30\nend"\nann,x\n',
        ("middlesekret30",),
        ("user,password",),
    ),
    # 7. rules v2 items already noted
    Case(
        "placeholder.yaml",
        "password: <redacted:credential:1> hunter2\n",
        ("hunter2",),
        ("<redacted:credential:1>",),
    ),
    Case("glued.txt", "kept ghp_" + "A1b2" * 9 + "_backup\n", ("ghp_" + "A1b2" * 9,), ("_backup",)),
    Case(
        "fullwidth.txt",
        f"{WIDE_KEY}=fwsekret123456\n",
        ("fwsekret123456",),
        (f"{WIDE_KEY}=",),
    ),
    Case("cjk.txt", "数据库 密码=cjksekret123\n", ("cjksekret123",), ("数据库 密码=",)),
]

LOOK_ALIKES = [
    # Each a public text that resembles a case above; published byte for byte.
    ("card.md", "Mount the weights at /data/models/llama-3-8b or /data/hf.\n"),
    ("prose.md", "It took ~5 ms, ~/models holds them, and PROGRA~1 is a short name.\n"),
    ("pipe.txt", "docker at \\\\.\\pipe\\docker_engine; regex \\\\d+\\\\.\\\\d+\n"),
    ("public-ip.txt", "resolver http://8.8:53 and v10.1:8000\n"),
    ("mac.txt", "disk /Volumes/Macintosh HD/Applications\n"),
    (
        "k8s.yaml",
        "env:\n  - name: HF_TOKEN\n    valueFrom:\n      secretKeyRef:\n        name: hf\n        key: token\n",
    ),
    ("limits.yaml", "auth:\n  type: bearer\n  token_file: /run/secrets/t\nmax_tokens: 512\n"),
    ("args.yaml", "args:\n  - --api-key\n  - --port\n  - '8000'\n"),
    ("short-keys.txt", "gsk_short and xai-1 and r8_x and pplx-12\n"),
    ("secret-ref.yaml", "auth:\n  hfToken:\n    name: hf-secret\n    key: HF_TOKEN\n"),
    (
        "references.sh",
        (
            'curl -H "Authorization: Bearer $VLLM_API_KEY"\napi_key: ${OPENAI_API_KEY}\n'
            "HF_TOKEN=${HF_TOKEN:-}\ntoken: {{ .Values.token }}\n"
        ),
    ),
    ("schema.yaml", "vllmApiKey: # @schema type:[string, object]\nclusterDomain: cluster.local\n"),
    ("hub.yaml", "modelArtifactURI: hf://meta-llama/Llama-3.2-3B-Instruct\n"),
    ("glued-word.txt", "myghp_" + "A1b2" * 9 + "\n"),
    (
        "tokenizer.yaml",
        'bos_token: <|begin_of_text|>\neos_token: "<|eot_id|>"\npad_token: "<pad>"\n',
    ),
    ("oidc.ini", "[auth]\nprovider = oidc\nissuer = https://accounts.google.com\n"),
    ("template.yaml", 'token: "{{ .Values.token }}"\n'),
    ("sniff-look.txt", "name,token\nthe tokens, counted,here x\n"),
]


@pytest.mark.parametrize("prefilter", [True, False])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_each_case_is_redacted_in_place(case: Case, prefilter: bool) -> None:
    sanitizer = Sanitizer(prefilter=prefilter)
    cleaned = sanitizer.file_text(case.text, f"notes/{case.name}")
    for secret in case.secrets:
        assert secret not in cleaned
    for kept in case.kept:
        assert kept in cleaned
    # Only the redacted values changed: the rest of the file is its own bytes.
    outside = [p for p in PLACEHOLDER.split(cleaned) if p]
    position = 0
    for piece in outside:
        found = case.text.find(piece, position)
        assert found >= 0, (piece, case.text)
        position = found + len(piece)
    # Sanitizing again changes nothing; rules v1 published it as it was.
    assert sanitizer.file_text(cleaned, f"notes/{case.name}") == cleaned
    v1 = Sanitizer(load_rules(rules_file("1")), prefilter=prefilter)
    leaked = any(secret in v1.file_text(case.text, f"notes/{case.name}") for secret in case.secrets)
    assert leaked == case.v1_leaks


@pytest.mark.parametrize("prefilter", [True, False])
@pytest.mark.parametrize(("name", "text"), LOOK_ALIKES, ids=[n for n, _ in LOOK_ALIKES])
def test_look_alikes_are_published_as_they_are(name: str, text: str, prefilter: bool) -> None:
    assert Sanitizer(prefilter=prefilter).file_text(text, f"notes/{name}") == text


def test_yaml_keeps_its_comments_quotes_and_order() -> None:
    text = (
        "# serving settings\n"
        "zeta: 1  # first\n"
        "auth:\n"
        '  token: "abc123xyz"   # rotated monthly\n'
        "  header: 'Authorization'\n"
        "alpha: |\n"
        "  multi\n"
        "password: |\n"
        "  block-secret-1\n"
        "  block-secret-2\n"
        "after: kept\n"
    )
    cleaned = Sanitizer().file_text(text, "values.yaml")
    assert cleaned == (
        "# serving settings\n"
        "zeta: 1  # first\n"
        "auth:\n"
        '  token: "<redacted:credential:1>"   # rotated monthly\n'
        "  header: 'Authorization'\n"
        "alpha: |\n"
        "  multi\n"
        "password: <redacted:credential:2>\n"
        "after: kept\n"
    )


def test_toml_ini_and_csv_values_are_found_by_their_structure() -> None:
    sanitizer = Sanitizer()
    toml = '[server]\nport = 8000\n[server.auth]\nvalue = "tomlsekret1"\nargs = ["--api-key", "tomlsekret2"]\n'
    assert sanitizer.file_text(toml, "serve.toml") == (
        '[server]\nport = 8000\n[server.auth]\nvalue = "<redacted:credential:1>"\n'
        'args = ["--api-key", "<redacted:credential:2>"]\n'
    )
    ini = "[credentials]\nuser = svc\nhost_name = db\n[other]\nuser = public\n"
    assert sanitizer.file_text(ini, "db.ini") == (
        "[credentials]\nuser = <redacted:credential:3>\nhost_name = db\n[other]\nuser = public\n"
    )
    tsv = 'name\tapi_key\nx\t"quoted\tsekret"\ny\t\n'
    assert (
        sanitizer.file_text(tsv, "keys.tsv") == 'name\tapi_key\nx\t"<redacted:credential:4>"\ny\t\n'
    )


def test_a_csv_line_read_otherwise_by_the_csv_module_is_redacted_whole() -> None:
    text = 'user,password\nbob,"two\nlines"\nann,plainpw1\n'
    cleaned = Sanitizer().file_text(text, "users.csv")
    # The quoted line break splits a cell across lines: those lines cannot be placed.
    assert cleaned == (
        "user,password\n<redacted:credential:1>\n<redacted:credential:2>\n"
        "ann,<redacted:credential:3>\n"
    )


def test_a_toml_secret_it_cannot_place_makes_the_file_one_redaction() -> None:
    # Written with an escape, the value is not in the text as it reads: fail closed.
    text = 'api_key = "ab\\u0063defgh"\nport = 1\n'
    assert Sanitizer().file_text(text, "x.toml") == "<redacted:credential:1>"


def test_the_structure_walk_is_rules_v2_and_v1_keeps_its_output() -> None:
    text = "credentials:\n  api_key: abcdefg1234567\n"
    v1 = Sanitizer(load_rules(rules_file("1")))
    assert (
        v1.file_text(text, "x.yaml") == "credentials:\n  <redacted:credential:1> abcdefg1234567\n"
    )
    assert v1.file_hits(text, "x.yaml") == v1.detect(text)


def test_json_documents_walk_name_value_pairs_and_secret_parents() -> None:
    document = {
        "env": [
            {"name": "VLLM_API_KEY", "value": "sekretValue789"},
            {"name": "PORT", "value": "8000"},
        ],
        "credentials": {"value": "inherited1", "token_file": "/run/t", "n": 3},
    }
    cleaned = Sanitizer().document(document)
    assert cleaned == {
        "env": [
            {"name": "VLLM_API_KEY", "value": "<redacted:credential:2>"},
            {"name": "PORT", "value": "8000"},
        ],
        "credentials": {"value": "<redacted:credential:1>", "token_file": "/run/t", "n": 3},
    }
    assert list(Sanitizer().scan(cleaned)) == []
    assert list(Sanitizer().scan(document)) == [
        ("/credentials/value", "credential"),
        ("/env/0/value", "credential"),
    ]
    v1 = Sanitizer(load_rules(rules_file("1")))
    assert v1.document(document) is document


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory, two_arm_campaign: Path) -> dict[str, Any]:
    """The raw campaign with every case and look-alike planted, published once."""
    root = tmp_path_factory.mktemp("formats")
    raw = root / "raw" / two_arm_campaign.name
    shutil.copytree(two_arm_campaign, raw)
    (raw / "notes").mkdir()
    for case in CASES:
        (raw / "notes" / case.name).write_text(case.text, encoding="utf-8")
    for name, text in LOOK_ALIKES:
        (raw / "notes" / name).write_text(text, encoding="utf-8")
    forge_seal(raw)
    public = publish(raw, root / "public", digest_map=root / "map.json").folder
    return {"raw": raw, "public": public, "root": root}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_published_without_the_secret(planted: dict[str, Any], case: Case) -> None:
    published = (planted["public"] / "notes" / case.name).read_bytes().decode()
    for secret in case.secrets:
        assert secret not in published
    for kept in case.kept:
        assert kept in published


def test_look_alikes_are_published_byte_for_byte(planted: dict[str, Any]) -> None:
    for name, text in LOOK_ALIKES:
        assert (planted["public"] / "notes" / name).read_text(encoding="utf-8") == text


def test_the_publication_names_rules_v2_and_verifies(planted: dict[str, Any], cli: CliRun) -> None:
    statement = read_json(planted["public"] / "statement.intoto.json")
    assert statement["predicate"]["sanitizer"] == {
        "version": "2",
        "sha256": load_rules().sha256,
    }
    status, report = verify_json(cli, "--public", planted["public"])
    assert status == 0, report["findings"]
    assert "sanitizer-outdated" not in {f["code"] for f in report["findings"]}


def test_every_case_pasted_back_is_caught(
    planted: dict[str, Any], cli: CliRun, tmp_path: Path
) -> None:
    public = tmp_path / "pasted" / planted["public"].name
    shutil.copytree(planted["public"], public)
    for case in CASES:
        (public / "notes" / case.name).write_text(case.text, encoding="utf-8")
    forge_seal(public)
    status, report = verify_json(cli, "--public", public)
    assert status == 1
    caught = {
        f["path"].rsplit("/", 1)[-1] for f in report["findings"] if f["code"] == "private-data"
    }
    assert caught == {case.name for case in CASES}


def test_verify_checks_a_publication_against_the_rules_it_names(
    planted: dict[str, Any], cli: CliRun, tmp_path: Path
) -> None:
    """A v1 publication holding what only v2 finds verifies, with a warning; the same
    folder naming v2 does not; one naming rules this ledger lacks is an error."""
    public = tmp_path / "named" / planted["public"].name
    shutil.copytree(planted["public"], public)
    nested = next(case for case in CASES if case.name == "deploy.yaml")
    # Only a file v1 reads as clean: v1 finds things in what v2 published of others.
    shutil.rmtree(public / "notes")
    (public / "notes").mkdir()
    (public / "notes" / nested.name).write_text(nested.text, encoding="utf-8")
    # A JSON document is scanned with the named rules too (v1 walks no secret parent).
    (public / "notes" / "doc.json").write_text('{"credentials": {"value": "inherited1"}}')

    def name_rules(version: str, sha256: str) -> tuple[int, list[tuple[str, str]]]:
        statement = read_json(public / "statement.intoto.json")
        statement["predicate"]["sanitizer"] = {"version": version, "sha256": sha256}
        write_json(public / "statement.intoto.json", statement)
        forge_seal(public)
        status, report = verify_json(cli, "--public", public)
        return status, [
            (f["code"], f["path"].rsplit("/", 1)[-1])
            for f in report["findings"]
            if f["code"] in ("private-data", "sanitizer-outdated", "sanitizer-unknown")
        ]

    found_by_v2 = {("private-data", "doc.json"), ("private-data", nested.name)}
    v1 = load_rules(rules_file("1")).sha256
    assert name_rules("1", v1) == (0, [("sanitizer-outdated", "statement.intoto.json")])
    status, found = name_rules("2", load_rules().sha256)
    assert (status, set(found)) == (1, found_by_v2)
    # Another build of the current version (other bytes): a warning, checked against it.
    status, found = name_rules("2", "0" * 64)
    assert (status, set(found)) == (
        1,
        {("sanitizer-outdated", "statement.intoto.json"), *found_by_v2},
    )
    assert name_rules("1", "0" * 64) == (0, [("sanitizer-outdated", "statement.intoto.json")])
    status, found = name_rules("9", "0" * 64)
    assert (status, set(found)) == (
        1,
        {("sanitizer-unknown", "statement.intoto.json"), *found_by_v2},
    )


def test_the_v1_rules_file_is_frozen() -> None:
    """Publications name v1 by version; what v1 is must never change under them."""
    path = rules_file("1")
    assert path is not None
    assert load_rules(path).sha256 == (
        "3256a3f8b31884cb0eef2f00299243dbf173a935a1fa81ed5ddeb64665158232"
    )
    assert rules_file("0") is None and rules_file("../x") is None and rules_file("3") is None


def test_a_file_too_large_to_sniff_still_gets_its_line_forms(tmp_path: Path) -> None:
    from ledger.sanitizer import _structure as structure

    filler = "INFO ok\n" * (structure.SNIFF_BYTES // 8 + 1)
    text = filler + "DB_PASS=bigsekret77\ncredentials:\n  value: missedbyyaml\n"
    cleaned = Sanitizer().file_text(text, "serve.log")
    assert "bigsekret77" not in cleaned
    # Not read as YAML at this size (a log is not YAML): the nested value is left.
    assert "missedbyyaml" in cleaned
    # Named as YAML, it is read as YAML whatever its size.
    yaml = "# ok\n" * (structure.SNIFF_BYTES // 5 + 1) + "credentials:\n  value: missedbyyaml\n"
    assert "missedbyyaml" not in Sanitizer().file_text(yaml, "big.yaml")


def test_verify_scans_a_text_file_with_the_structure_walk(tmp_path: Path) -> None:
    path = tmp_path / "values.yaml"
    path.write_text("auth:\n  password: xq\n")
    found = scan.process_file(scan.FileTask(str(path), "values.yaml", False, None, True))
    assert [i.message for i in found.issues] == ["line 2: credential in a public file"]


@pytest.mark.parametrize("prefilter", [True, False])
def test_full_width_and_foreign_key_names_in_json_strings_and_keys(prefilter: bool) -> None:
    document = {
        "note": f"{WIDE_KEY}=abc12345",
        "b": "密码=zzz999",
        "密码": "kv1234",
        WIDE_KEY: "kv5678",
        "c": "plain",
    }
    cleaned = Sanitizer(prefilter=prefilter).document(document)
    assert cleaned == {
        "b": "密码=<redacted:credential:1>",
        "c": "plain",
        "note": f"{WIDE_KEY}=<redacted:credential:2>",
        "密码": "<redacted:credential:3>",
        WIDE_KEY: "<redacted:credential:4>",
    }
    assert list(Sanitizer(prefilter=prefilter).scan(document)) == [
        ("/b", "credential"),
        ("/note", "credential"),
        ("/密码", "credential"),
        (f"/{WIDE_KEY}", "credential"),
    ]
    v1 = Sanitizer(load_rules(rules_file("1")), prefilter=prefilter)
    assert v1.document(document) is document


def test_a_placeholder_and_more_in_a_json_string_under_a_secret_key() -> None:
    document = {"password": "<redacted:credential:1> jsonrest1"}
    assert Sanitizer().document(document) == {
        "password": "<redacted:credential:1> <redacted:credential:2>"
    }
    v1 = Sanitizer(load_rules(rules_file("1")))
    assert v1.document(document) is document


@pytest.mark.parametrize(
    ("name", "text"),
    [
        # An alias inside what it names: walked once, not forever.
        ("alias.yaml", "auth: &a\n  password: aliassekret1\n  self: *a\n"),
        # Deeper than Python's stack: the whole file is one redaction, not a crash.
        ("deep.yaml", "{a: " * 985 + "deepsekret1" + "}" * 985),
        ("deep.toml", "a." * 2000 + 'a = "deepsekret1"\n'),
    ],
)
def test_structures_that_refer_to_themselves_or_run_deep(name: str, text: str) -> None:
    cleaned = Sanitizer().file_text(text, name)
    assert "sekret1" not in cleaned


def test_toml_pairs_numbers_flags_and_references() -> None:
    text = (
        'env = [{name = "API_KEY", value = "tomlpair1"}, {name = "PORT", value = "8000"}]\n'
        "auth = {pin = 12345678901234}\n"
        'args = ["--smtp-pw", "tomlflag2", "--port", "9000"]\n'
        'creds = {hf = {name = "hf-secret", key = "HF_TOKEN"}}\n'
    )
    cleaned = Sanitizer().file_text(text, "serve.toml")
    for secret in ("tomlpair1", "12345678901234", "tomlflag2"):
        assert secret not in cleaned
    for kept in ('value = "8000"', '"9000"', 'name = "hf-secret", key = "HF_TOKEN"'):
        assert kept in cleaned


def test_a_toml_value_also_quoted_in_a_comment_is_no_place_for_the_real_one() -> None:
    # The escaped value is not found as written; its copy in a comment must not count.
    text = 'credentials = { value = "Zq8v\\u004cm3Np7" }\n# ex: "Zq8vLm3Np7"\n'
    cleaned = Sanitizer().file_text(text, "x.toml")
    assert "Zq8v" not in cleaned


def test_publish_refuses_a_file_whose_utf16_reading_holds_a_secret(
    two_arm_campaign: Path, tmp_path: Path
) -> None:
    from ledger.publication._publish import PublishError

    raw = tmp_path / "raw" / two_arm_campaign.name
    shutil.copytree(two_arm_campaign, raw)
    (raw / "ps-env.log").write_bytes("HF_TOKEN=Utf16SecretZq8vLm3Np7\r\n".encode("utf-16-le"))
    forge_seal(raw)
    with pytest.raises(
        PublishError, match=r"ps-env\.log: credential in the text it holds read as UTF-16"
    ):
        publish(raw, tmp_path / "public", digest_map=tmp_path / "map.json")
    assert not (tmp_path / "public").exists()


def test_a_carriage_return_alone_in_a_csv_cell_is_no_traceback() -> None:
    # Python's csv reader raises on it: the line is not read as CSV, and the text is
    # published as any text is.
    assert Sanitizer().file_text("a,\rb\nc,d", "notes/F") == "a,\rb\nc,d"
    # A row the reader cannot take under a secret column is redacted whole (fail closed).
    assert Sanitizer().file_text("name,api_key\nweb\r,s3cretvalue99\n", "keys.csv") == (
        "name,api_key\n<redacted:credential:1>\n"
    )
