"""The sanitizer's detectors one rule at a time: endpoints that name a host, masked GPU
identifiers, credential key names, word starts, public tokens and values already redacted."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ledger.evidence import scan
from ledger.sanitizer import _sanitizer as sanitizer
from ledger.sanitizer._sanitizer import Sanitizer, _plausible_endpoint


@pytest.mark.parametrize(
    ("value", "plausible"),
    [
        ("10.0.0.7", True),
        ("10.0.0.7:8000", True),
        ("bob:pw@10.0.0.7:8000", True),
        ("bob:pw@10.0.0.256:8000", False),  # the host is what follows the credentials
        ("u@0.0.0.0:80", False),
        ("255.255.255.255", True),
        ("10.0.0.256", False),  # not an address
        ("1.2.3", True),  # not four numbers: a name, kept as found
        ("1.2.3.4.5", True),
        ("1.2.x.4", True),
        ("0.0.0.0", False),  # every interface names no host
        ("0.0.0.0:8000", False),
        ("[::]", False),
        ("[fd00::1]:8000", True),
        ("registry.internal.example", True),
    ],
)
def test_an_endpoint_must_name_a_host(value: str, plausible: bool) -> None:
    assert _plausible_endpoint(value) is plausible


@pytest.mark.parametrize(
    ("value", "masked"),
    [
        ("GPU-00000000-0000-0000-0000-000000000000", True),
        ("MIG-00000000-0000-0000-0000-000000000001", True),
        ("GPU-0b5c3f1e-9a2d-4e6f-8a1b-2c3d4e5f6a7b", False),
        ("00000000-0000-0000-0000-000000000000", True),
        ("GPU-10000000-0000-0000-0000-00000000000f", False),
        ("GPUX-0000", True),
        # Every group counts, the first one too, with or without a prefix.
        ("GPU-f0000000-0000-0000-0000-000000000000", False),
        ("f0000000-0000-0000-0000-000000000000", False),
    ],
)
def test_masked_gpu_identifiers(value: str, masked: bool) -> None:
    assert Sanitizer._masked_uuid(value) is masked


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        ("api_key", True),
        ("apiKey", True),
        ("password", True),
        ("token", True),
        ("token_name", False),  # names the credential, is not one
        ("model", False),
        ("", False),
        ("client_secret", True),
        ("access_key", True),  # neither word alone, the pair is
        ("signingKey", True),
        ("key", False),
        ("monkey_business", False),
        # A time or a mode of tokens names no credential (an import's definitions).
        ("first_token_ms", False),
        ("first_token_ns", False),
        ("token_ms_secret", True),
        # A tokenizer's special token names no credential, however long its name; a plural
        # pair of a secret names credentials after any prefix.
        ("bos_token", False),
        ("model_bos_token", False),
        ("my_auth_tokens", True),
    ],
)
def test_secret_key_names(key: str, secret: bool) -> None:
    assert Sanitizer().secret_key(key) is secret


def test_a_pattern_that_must_start_a_word() -> None:
    detector = sanitizer._detector({"pattern": "tok[0-9]+", "word_start": True})
    text = "tok1 xtok2 _tok3 -tok4 \u00e9tok5 9tok6"
    assert [m.group(0) for m in detector.finditer(text, text.lower())] == [
        "tok1", "tok4", "tok5"
    ]  # fmt: skip
    plain = sanitizer._detector("tok[0-9]+")
    assert [m.group(0) for m in plain.finditer(text, text.lower())] == [
        "tok1", "tok2", "tok3", "tok4", "tok5", "tok6"
    ]  # fmt: skip


@pytest.mark.parametrize(
    "text",
    [
        "\u4ee4\u724cghp_" + "A" * 36,  # a CJK log writes its words without spaces
        "\u5bc6\u94a5sk-proj-" + "B" * 30,
        "\u0130sk-proj-" + "C" * 30,
        "\u0131ghp_" + "D" * 36,
        "caf\u00e9xoxb-" + "1" * 12,
    ],
)
def test_a_token_after_a_letter_outside_ascii_starts_a_word(text: str) -> None:
    # After an ASCII letter a token is part of a longer name (xtok2 above); a letter
    # outside ASCII is no part of an ASCII name.
    assert Sanitizer().text(text) != text
    assert "<redacted:credential:1>" in Sanitizer(prefilter=False).text(text)


def test_detection_is_the_same_on_short_and_long_texts() -> None:
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    for padding in (0, sanitizer._MEMO_LONGEST):
        text = "x" * padding + f" token {secret} "
        hits = Sanitizer().detect(text)
        assert [(h.category, text[h.start : h.end]) for h in hits] == [("credential", secret)]


def test_a_value_under_a_credential_key_is_redacted_whole() -> None:
    found = Sanitizer().detect("correct horse battery", key="password")
    assert [(h.category, h.start, h.end) for h in found] == [("credential", 0, 21)]
    assert Sanitizer().detect("12345", key="password") == []  # a short number is no secret
    assert Sanitizer().detect("null", key="password") == []


HEX = "ab" * 32


@pytest.mark.parametrize(
    ("text", "span", "allowed"),
    [
        # A hit on part of a digest: only the whole token around it is public.
        (f"sha256:{HEX} tail", (7, 40), True),  # the token reaches the start of the text
        (f"head sha256:{HEX}", (30, 76), True),  # and its end
        (f"head sha256:{HEX} tail", (20, 50), True),
        (f"head sha256:{HEX}z tail", (20, 50), False),  # the token is no digest
        (f"id:{HEX}-suffix", (3, 67), True),  # the token is not public, the hit alone is
        (f"token={'Z' * 30}", (6, 36), False),
        ("see api-key-ABCDEFGHIJKLMNOP here", (12, 28), False),
    ],
)
def test_a_public_token_around_a_hit_is_not_redacted(
    text: str, span: tuple[int, int], allowed: bool
) -> None:
    assert Sanitizer()._allowed(text, *span) is allowed


@pytest.mark.parametrize(
    ("text", "hits"),
    [
        # A hit may touch a value already redacted, on either side.
        ("<redacted:credential:1>10.0.0.7:8000", [("endpoint", "10.0.0.7:8000")]),
        ("10.0.0.7:8000<redacted:credential:1>", [("endpoint", "10.0.0.7:8000")]),
        # A match skipped for a reason of its own does not stop the matches after it.
        ("https://bob:pw@10.0.0.5:80/ and 10.0.0.7:8000",
         [("credential", "bob:pw"), ("endpoint", "10.0.0.5:80"), ("endpoint", "10.0.0.7:8000")]),
        ("GPU-00000000-0000-0000-0000-000000000000 GPU-0b5c3f1e-9a2d-4e6f-8a1b-2c3d4e5f6a7b",
         [("gpu", "GPU-0b5c3f1e-9a2d-4e6f-8a1b-2c3d4e5f6a7b")]),
        ("listen 0.0.0.0:8000 then 10.0.0.7:8000", [("endpoint", "10.0.0.7:8000")]),
        ("password=12345 password=hunter2secret", [("credential", "hunter2secret")]),
        ("sha1 0123456789abcdef0123456789abcdef01234567 then ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
         [("credential", "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8")]),
        ("/home/alice/ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8/x and /home/bob/y",
         [("path", "/home/alice"), ("credential", "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"),
          ("path", "/home/bob")]),
        # Inside a hit already taken, then free.
        ("https://10.0.0.5:pw@x.example/ and 10.0.0.7",
         [("credential", "10.0.0.5:pw"), ("endpoint", "x.example"), ("endpoint", "10.0.0.7")]),
        # Inside a public request id, then outside it.
        (f"req-sk-{'A' * 40} then sk-{'B' * 40}",
         [("credential", f"sk-{'B' * 40}")]),
    ],
)  # fmt: skip
def test_each_match_is_judged_on_its_own(text: str, hits: list[tuple[str, str]]) -> None:
    assert [(h.category, text[h.start : h.end]) for h in Sanitizer().detect(text)] == hits


@pytest.mark.parametrize("key", ["uuid", "gpu_uuid"])
def test_a_gpu_id_under_a_gpu_key_is_one_hit(key: str) -> None:
    text = "GPU-0b5c3f1e-9a2d-4e6f-8a1b-2c3d4e5f6a7b"
    assert [(h.category, h.start, h.end) for h in Sanitizer().detect(text, key=key)] == [
        ("gpu", 0, len(text))
    ]


def _min_width(pattern: str) -> int:
    """The fewest characters the rule's value (its ``secret`` group, or the whole match)
    can span, from Python's own regex parser."""
    import re._parser as parser  # type: ignore[import-not-found]

    compiled = re.compile(pattern)
    tree = parser.parse(pattern, compiled.flags)
    group = compiled.groupindex.get("secret")
    if group is None:
        return int(tree.getwidth()[0])

    def find(node: Any) -> int | None:
        # The parse tree nests SubPatterns in tuples and lists (branches, repeats, groups).
        if isinstance(node, parser.SubPattern):
            for op, av in node:
                if op is parser.SUBPATTERN and av[0] == group:
                    return int(av[3].getwidth()[0])
                found = find(av)
                if found is not None:
                    return found
        elif isinstance(node, list | tuple):
            for child in node:
                found = find(child)
                if found is not None:
                    return found
        return None

    width = find(tree)
    assert width is not None, pattern
    return width


def test_no_rule_can_redact_an_empty_value() -> None:
    rules = sanitizer.load_rules()
    detectors = [*rules.keyed, *(d for c in sanitizer.CATEGORIES for d in rules.patterns[c])]
    assert len(detectors) > 50
    widths = {d.pattern.pattern: _min_width(d.pattern.pattern) for d in detectors}
    assert all(w >= 1 for w in widths.values()), [p for p, w in widths.items() if w < 1]
    assert _min_width("(?P<secret>a*)b") == 0  # the check itself can fail


# -- private hosts by meaning -----------------------------------------------------------------


def _redacted(text: str) -> str:
    return Sanitizer().text(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # A private label first, in the middle, next to last and last.
        ("push to internal.acme.com now", "push to <redacted:endpoint:1> now"),
        ("push to gpu01.corp.acme.com now", "push to <redacted:endpoint:1> now"),
        ("push to registry.internal.example now", "push to <redacted:endpoint:1> now"),
        ("push to build.lan now", "push to <redacted:endpoint:1> now"),
        # Every private label, and the home.arpa zone.
        ("wiki.intranet.acme.de", "<redacted:endpoint:1>"),
        ("nas.lan.acme.net", "<redacted:endpoint:1>"),
        ("printer.local.acme.io", "<redacted:endpoint:1>"),
        ("db.private.example.org", "<redacted:endpoint:1>"),
        ("box.localdomain.acme.com", "<redacted:endpoint:1>"),
        ("vault.private", "<redacted:endpoint:1>"),
        ("nas.home.arpa", "<redacted:endpoint:1>"),
        ("GPU01.CORP.ACME.COM", "<redacted:endpoint:1>"),
        # A port makes it a host whatever its last label.
        ("gpu01.corp.acme:8000", "<redacted:endpoint:1>"),
        ("registry.internal.example:5000/v2/x", "<redacted:endpoint:1>/v2/x"),
        # The full stop that ends a sentence is not part of the name.
        ("ssh gpu01.corp.acme.com.", "ssh <redacted:endpoint:1>."),
        ("ssh gpu-1.internal.", "ssh <redacted:endpoint:1>."),
        # In a URL the host is a host: no top-level domain needed.
        ("http://gpu01.corp.acme:8000/v1", "http://<redacted:endpoint:1>/v1"),
        ("https://registry.internal.example/v2/", "https://<redacted:endpoint:1>/v2/"),
        ("https://internal.acme.weird/x", "https://<redacted:endpoint:1>/x"),
        ("http://nas.home.arpa/", "http://<redacted:endpoint:1>/"),
        ("http://vault.private:8200/", "http://<redacted:endpoint:1>/"),
        ("see http://gpu-1.internal.", "see http://<redacted:endpoint:1>."),
    ],
)
def test_a_private_label_anywhere_makes_a_private_host(text: str, expected: str) -> None:
    assert _redacted(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        # Whole labels only.
        "internalize.com corporate.com international.example.com",
        "my-corp.example.com lan-party.example.com localhost.example-cdn.com",
        "operator-private raw artifact",
        # A private word that is itself the registered name is public.
        "corp.com local.ai private.com https://corp.com/ https://local.ai/x",
        # File names and code, not hosts.
        "--config /etc/vllm/config.local.yaml settings.local.json README.internal.md",
        "at io.grpc.internal.ManagedChannelImpl.start(ManagedChannelImpl.java:120)",
        "ledger.sanitizer._sanitizer home.arpa",
        "Internal Server Error. LAN. Local. corp.",
        # localhost as today: redacted with a port or in a URL, kept alone.
        "localhost",
    ],
)
def test_a_private_word_that_names_no_private_host_is_kept(text: str) -> None:
    assert _redacted(text) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # The issue's case: the credentials and the host.
        ("https://bob:pw@registry.internal.example/v2/",
         "https://<redacted:credential:1>@<redacted:endpoint:1>/v2/"),
        # A public host that carried credentials names whose they were.
        ("https://bob:pw@github.com/org/repo.git",
         "https://<redacted:credential:1>@<redacted:endpoint:1>/org/repo.git"),
        ("https://s3cr3tt0ken@registry.example.com/v2/",
         "https://<redacted:credential:1>@<redacted:endpoint:1>/v2/"),
        ("redis://:hunter2@cache.example.com:6379/0",
         "redis://<redacted:credential:1>@<redacted:endpoint:1>/0"),
        ("postgres://u:p@[fd00::5]:5432/db",
         "postgres://<redacted:credential:1>@<redacted:endpoint:1>/db"),
        ("x_https://bob:hunter2@h.example.com/",
         "x_https://<redacted:credential:1>@<redacted:endpoint:1>/"),
        # A short number is no credential, but the host still carried one.
        ("https://12345@host.example.com/x", "https://12345@<redacted:endpoint:1>/x"),
        # Credentials redacted by an older sanitizer: the host still goes.
        ("https://<redacted:credential:1>@github.com/x",
         "https://<redacted:credential:1>@<redacted:endpoint:1>/x"),
        # Nothing before @ in the host part: a path, a query, a digest are not credentials.
        ("https://example.com/?u=me@x.com", "https://example.com/?u=<redacted:endpoint:1>"),
    ],
)  # fmt: skip
def test_a_host_that_carried_credentials_is_redacted_with_them(text: str, expected: str) -> None:
    assert _redacted(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # RFC 1918
        ("at 10.1.2.3 and 172.16.5.4:8000 and http://192.168.1.10/v1",
         "at <redacted:endpoint:1> and <redacted:endpoint:2> and http://<redacted:endpoint:3>/v1"),
        # loopback
        ("at 127.0.0.1:8000, [::1]:8000 and ::1 here",
         "at <redacted:endpoint:1>, <redacted:endpoint:2> and <redacted:endpoint:3> here"),
        ("http://[::1]:8000/metrics", "http://<redacted:endpoint:1>/metrics"),
        # link-local, with a zone
        ("at 169.254.169.254 and fe80::1ff:fe23:4567:890a%eth0/64",
         "at <redacted:endpoint:1> and <redacted:endpoint:2>/64"),
        ("http://[fe80::1%25eth0]:8080/", "http://<redacted:endpoint:1>/"),
        ("full fe80:0:0:0:0:0:0:1 form", "full <redacted:endpoint:1> form"),
        # CGNAT 100.64/10
        ("at 100.64.0.1 and http://100.127.255.254/", "at <redacted:endpoint:1> and http://<redacted:endpoint:2>/"),
        # unique-local fc00::/7
        ("at fd12:3456:789a::1 and fc00::1 and [fdff::2]:9000",
         "at <redacted:endpoint:1> and <redacted:endpoint:2> and <redacted:endpoint:3>"),
        # IPv4-mapped private: the whole address, not only its IPv4 half
        ("at ::ffff:10.0.0.1 and ::ffff:100.64.0.1 and [::ffff:192.168.0.1]:80",
         "at <redacted:endpoint:1> and <redacted:endpoint:2> and <redacted:endpoint:3>"),
        ("http://[::ffff:10.0.0.1]/", "http://<redacted:endpoint:1>/"),
        # A public address kept does not stop the private one after it.
        ("2001:4860:4860::8888 then fd00::1", "2001:4860:4860::8888 then <redacted:endpoint:1>"),
    ],
)  # fmt: skip
def test_every_non_public_address_family_is_redacted(text: str, expected: str) -> None:
    assert _redacted(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "2001:4860:4860::8888 answers",  # a public IPv6 address outside a URL
        "listen [::]:8000 and 0.0.0.0:8000",  # every interface names no host
        "Foo ::= bar",  # the unspecified address, or grammar
        "12:00:00.123 INFO and 10:20:30:40:50:60:70:80",  # times are no addresses
        "x = a[1::2] and b[::2] and std::vector<int>",
        "mac aa:bb:cc:dd:ee:ff",
        "fec0::1",  # site-local, long deprecated: ipaddress calls it global
    ],
)
def test_what_is_no_private_address_is_kept(text: str) -> None:
    assert _redacted(text) == text


@pytest.mark.parametrize(
    ("value", "private"),
    [
        ("fd00::1", True),
        ("[fd00::1]:8000", True),
        ("fe80::1%eth0", True),
        ("[fe80::1%25eth0]", True),
        ("::1", True),
        ("::ffff:10.0.0.1", True),
        ("::ffff:100.64.0.1", True),  # judged as IPv4 whatever the Python version
        ("10.0.0.1", True),
        ("100.64.0.1", True),
        ("::ffff:8.8.8.8", False),
        ("2001:4860:4860::8888", False),
        ("[2001:4860:4860::8888]:443", False),
        ("8.8.8.8", False),
        ("::", False),  # names no host
        ("0.0.0.0", False),
        ("12:00:00", False),  # no address at all
        ("fd00::1::2", False),
    ],
)
def test_a_non_global_address(value: str, private: bool) -> None:
    assert sanitizer._non_global_address(value) is private


def test_a_detector_can_be_limited_to_non_global_addresses() -> None:
    spec = {"pattern": "[0-9a-f:.]+", "non_global": True}
    assert sanitizer._detector(spec).non_global is True
    assert sanitizer._detector({"pattern": "x"}).non_global is False
    rules = sanitizer.load_rules()
    limited = [d for c in sanitizer.CATEGORIES for d in rules.patterns[c] if d.non_global]
    # An IPv6 address, and a shortened IPv4 one after a scheme ("http://10.1:8000").
    assert len(limited) == 2


SHA = "sha256:" + "0123456789abcdef" * 4
PUBLIC = [
    "huggingface.co",
    "https://huggingface.co/ormandj/GLM-5.3-Flash-FP8/resolve/main/config.json",
    "ormandj/GLM-5.3-Flash-FP8",
    "github.com",
    "https://github.com/sgl-project/sglang/releases/tag/v0.4.6.post5",
    "git+https://github.com/org/repo.git@v1.2",
    f"ghcr.io/owner/image@{SHA}",
    f"docker://ghcr.io/owner/image@{SHA}",
    "pypi.org",
    "https://pypi.org/simple/vllm/",
    "vllm==0.6.3.post1",
    "sglang 0.4.6.post5 and torch 2.5.1+cu124",
    "nvcr.io/nvidia/pytorch:24.10-py3",
    "international.example.com",
    "https://corp.com/",
    "2001:4860:4860::8888",
]


@pytest.mark.parametrize("text", PUBLIC)
def test_public_identifiers_do_not_change(text: str) -> None:
    sanitizer = Sanitizer()
    document = {"identity": {"note": text, "flags": [f"--model {text}", text]}, text: 1}
    assert sanitizer.text(text) == text
    assert sanitizer.document(document) == document
    assert list(sanitizer.scan(document)) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Already redacted before the private-host rules, and still: every IPv4 address
        # (the corpus's public ones too), any four dotted numbers, and user@host.
        ("8.8.8.8", "<redacted:endpoint:1>"),
        ("http://8.8.8.8/", "http://<redacted:endpoint:1>/"),
        ("version 1.2.3.4", "version <redacted:endpoint:1>"),
        ("::ffff:8.8.8.8", "::ffff:<redacted:endpoint:1>"),
        ("http://[2001:4860:4860::8888]/", "http://<redacted:endpoint:1>/"),
        ("mail alice@example.com", "mail <redacted:endpoint:1>"),
        ("ssh ops@gpu-1.lan", "ssh ops@<redacted:endpoint:1>"),
    ],
)
def test_what_was_redacted_before_is_redacted_the_same_way(text: str, expected: str) -> None:
    assert _redacted(text) == expected


PRIVATE_HOSTS = [
    "gpu01.corp.acme.com",
    "registry.internal.example",
    "nas.home.arpa",
    "https://bob:pw@registry.internal.example/v2/",
    "https://tok3n@github.com/org/repo",
    "fd12:3456::7",
    "[fe80::1%eth0]:8080",
    "::ffff:10.0.0.1",
]


@pytest.mark.parametrize("text", PRIVATE_HOSTS)
def test_a_private_host_fails_the_rescan_until_redacted(text: str) -> None:
    sanitizer = Sanitizer()
    document = {"logs": [f"connected to {text} (ok)"], "identity": {"endpoint": text}}
    assert len(list(sanitizer.scan(document))) >= 2
    cleaned = sanitizer.document(document)
    assert list(sanitizer.scan(cleaned)) == []
    assert sanitizer.document(cleaned) == cleaned
    assert "endpoint" in {hit.category for hit in sanitizer.detect(text)}


@pytest.mark.parametrize("text", PRIVATE_HOSTS)
def test_verify_finds_a_private_host_in_a_public_file(text: str, tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text(f"see {text} for the weights\n")
    artifact = tmp_path / "artifact.json"
    artifact.write_text(json.dumps({"identity": {"note": f"pulled from {text}"}}))
    found = scan.process_file(scan.FileTask(str(notes), "notes.txt", False, scan_private=True))
    assert ("private-data", "", "line 1: endpoint in a public file") in [
        (i.code, i.pointer, i.message) for i in found.issues
    ]
    found = scan.process_file(scan.FileTask(str(artifact), "a.json", True, scan_private=True))
    assert ("private-data", "/identity/note", "endpoint in a public artifact") in [
        (i.code, i.pointer, i.message) for i in found.issues
    ]
    # The same files, not public, are not scanned.
    found = scan.process_file(scan.FileTask(str(notes), "notes.txt", False))
    assert found.issues == ()


@pytest.mark.parametrize("value", ["::1", "[::1]", "db.lan", "x.corp", "fd00::1"])
def test_a_short_private_host_is_redacted_as_a_whole_value(value: str) -> None:
    # The length shortcut must not be longer than the shortest private host.
    assert len(value) >= sanitizer._SHORTEST
    assert Sanitizer().document({"host": value}) == {"host": "<redacted:endpoint:1>"}


@pytest.mark.parametrize(
    "text",
    [
        "Decision: no-promotion; promotion authorized: false.",
        "authorization: none.",
        "token: null.",
    ],
)
def test_a_literal_ending_a_sentence_is_no_credential(text: str) -> None:
    assert Sanitizer().text(text) == text


def test_a_path_keeps_the_separator_after_it_and_one_placeholder() -> None:
    """The trailing ';' or ',' was taken into the path and deleted with it, and the same
    path got a placeholder of its own for each separator."""
    text = "model: /workspace/m; next: 1\nmodel: /workspace/m, next\nmodel: /workspace/m\n"
    assert Sanitizer().text(text) == (
        "model: <redacted:path:1>; next: 1\nmodel: <redacted:path:1>, next\n"
        "model: <redacted:path:1>\n"
    )


@pytest.mark.parametrize(
    "text",
    [
        "tokenizer_mode=auto",
        "tokenizer_id: Qwen/Qwen3-8B",
        "tbo_token_distribution_threshold=0.48",
        "max_tokens=128",
    ],
)
def test_settings_named_after_tokens_are_no_credentials(text: str) -> None:
    assert Sanitizer().text(text) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("token=abcd1234efgh", "token=<redacted:credential:1>"),
        ("auth_token: s3cr3tvalue", "auth_token: <redacted:credential:1>"),
        ("tokenizer_secret=abcd1234efgh", "tokenizer_secret=<redacted:credential:1>"),
        ("token: 1234.5678abc", "token: <redacted:credential:1>"),
    ],
)
def test_a_token_setting_is_still_a_credential(text: str, expected: str) -> None:
    assert Sanitizer().text(text) == expected


def test_an_import_s_definitions_are_published_as_they_are() -> None:
    definitions = {
        "first_token_ms": "vllm ttfts: request start to the first chunk of any channel",
        "e2e_ms": "vllm e2els",
    }
    assert Sanitizer().document({"definitions": definitions}) == {"definitions": definitions}


def test_a_long_number_under_a_secret_key_is_a_credential() -> None:
    """A numeric key or account secret was published as it was: only strings were read.
    Shorter numbers (counts, ports, timeouts) and numbers under other keys stay numbers."""
    document = {
        "admin_api_key": 12345678901234,
        "password": -12345678901234,
        "auth_timeout": 300,
        "token_count": 12345678901234,
        "sent_ns": 99999999999999,
        "flag": True,
        "nested": [{"client_secret": 10**15}],
    }
    sanitizer = Sanitizer()
    assert sorted(sanitizer.scan(document)) == [
        ("/admin_api_key", "credential"),
        ("/nested/0/client_secret", "credential"),
        ("/password", "credential"),
    ]
    cleaned = sanitizer.document(document)
    assert cleaned == {
        "admin_api_key": "<redacted:credential:1>",
        "auth_timeout": 300,
        "flag": True,
        "nested": [{"client_secret": "<redacted:credential:2>"}],
        "password": "<redacted:credential:3>",
        "sent_ns": 99999999999999,
        "token_count": 12345678901234,
    }
    assert list(sanitizer.scan(cleaned)) == []
    assert Sanitizer().document({"admin_api_key": 999_999_999_999}) == {
        "admin_api_key": 999_999_999_999
    }
