"""Secret values found by the structure of a text file (rules v2 and later).

A pattern reads a line; a configuration file says what its values are. Where a text
parses as YAML (JSON is YAML here), TOML, CSV or netrc, holds ``key = value`` lines (INI,
``.env``, HTTP headers, ``ENV`` in a Dockerfile), or prints JSON objects in its lines (a
log, JSON lines with a ``NaN``), its structure is walked and every value that stands for
a credential is returned as the span it occupies in the text, so that only those
characters are replaced and the rest of the file keeps its bytes:

- a value under a secret-like key, at any depth: ``credentials:`` then ``api_key: x``, or
  ``token:`` then ``value: x`` (a key that names a thing, ``token_file`` or ``auth_type``,
  stops what its parent made secret; so does a ``secretKeyRef``'s ``{name, key}``);
- the value of a ``{name, value}`` pair whose name is secret-like (a Kubernetes or ECS
  environment entry), and every value of a Kubernetes Secret's ``data``;
- in a list, the item after a secret-like flag (``--api-key`` then the key), the part of
  ``--api-key=x`` after ``=``, and of ``VLLM_API_KEY=x`` (a Compose environment list);
- in a CSV, the cells of a column whose header is secret-like, and the value of a row
  whose name is;
- in a netrc, what follows ``login``, ``password`` and ``account``.

Positions come from the parsers themselves (PyYAML's node marks, the JSON reader's ends)
or from the quoted form of each value found in the text (TOML, checked by parsing the
text again with the values replaced); what this module reads by hand is only the line
forms (``key = value``, ``[section]``, netrc tokens, one CSV line's cells). Whatever
cannot be placed, or is too deep to walk, is redacted whole: the walk fails closed.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import re
import tomllib
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import attrs
import yaml

from ledger.sanitizer import _textsearch as textsearch

Span = tuple[int, int]

SNIFF_BYTES = 1 << 20
"""A text of another kind (a log, notes) is tried as each structured format only up to
this size: configuration files are small, and a log is not YAML (what it holds of the
line forms is read at any size)."""

_YAML = (".yaml", ".yml")
_TOML = (".toml",)
_CSV = {".csv": ",", ".tsv": "\t"}
_NETRC = ("netrc", ".netrc", "_netrc")
VALUE_KEYS = frozenset({"value", "Value", "VALUE"})
NAME_KEYS = ("name", "Name", "NAME", "key", "Key", "KEY")
"""The keys of a ``{name, value}`` pair (a Kubernetes or ECS environment entry), as the
structure walk and the JSON document walk (sanitizer.py) both read them."""
_PLACEHOLDER = re.compile(r"<redacted:[a-z-]+:[0-9]+>")
_SHORT_NUMBER = re.compile(r"[0-9]{1,12}(?:\.[0-9]{1,12})?")
_ALNUM = re.compile(r"[^\W_]")
"""A letter or digit: what ``str.isalnum`` says of a character (``\\w`` less ``_``)."""
_LITERALS = frozenset({"true", "false", "null", "none", "yes", "no", "on", "off", "~"})
_LONG_NUMBER = 10**12
# The line forms are one pattern that starts at a line break (the text is read with one
# before it): a pattern that starts with a literal is searched for that character, several
# times faster than "^" tried at every position, and once rather than once a form.
_LINES = re.compile(
    # A line that starts otherwise (a log's timestamp) is left at its first character.
    r"\n(?=[ \t]*[\[A-Za-z_\"'-])[ \t]*(?:"
    # [section] (INI, TOML)
    r"\[\[?[ \t]*(?P<section>[^\]\r\n]{1,200}?)[ \t]*\]\]?[ \t]*(?=\r?\n|$)"
    # a Dockerfile's ENV NAME value, a shell's setx NAME value: a space for "="
    r"|(?:ENV|ARG|setx|setenv|set -gx)[ \t]+(?P<spaced>[A-Za-z_][A-Za-z0-9_]{0,127})[ \t]+"
    r"(?P<spaced_value>[^\s=][^\r\n]*)"
    # key = value, key: value, export KEY=value, - KEY=value, "key": "value",
    r"|(?:export[ \t]+|-[ \t]+|(?:ENV|ARG|setx|setenv|set -gx)[ \t]+)?[\"']?"
    r"(?P<key>[A-Za-z_][A-Za-z0-9_.\-]{0,127})[\"']?[ \t]*(?P<sep>=|:)(?![:=/])[ \t]*"
    r"(?P<value>[^\r\n]*))"
)
_VALUE_LINE = re.compile(r"\r?\n[ \t]*[\"']?(?:value|Value)[\"']?[ \t]*:[ \t]*(?P<value>[^\r\n]*)")
"""The ``value:`` line after a ``name:`` line: a Kubernetes environment entry, read where
the file is not YAML as a whole (a Helm template, a document among broken ones)."""
_NETRC_TOKEN = re.compile(r"\S+")
_HEADER = re.compile(r" ?[A-Za-z_][A-Za-z0-9_ .-]{0,63}")
REFERENCE = re.compile(
    r"(?i)(?:(?:bearer|basic|token)[ \t]+)?"
    r"(?:\$[A-Za-z_][A-Za-z0-9_]*|\$\{[A-Za-z_][A-Za-z0-9_]*(?::?-|:?\?[^}\r\n]*)?\}"
    r"|\{\{[^{}\r\n]*\}\})"
)
"""A value that names where the secret is (``$VLLM_API_KEY``, ``${HF_TOKEN}``,
``${HF_TOKEN:-}`` with no default, a template's ``{{ .Values.apiKey }}``), not a secret
itself. A default (``${KEY:-x}``) may be one, and so may ``<text>``: a placeholder such as
``<your-hf-token>`` cannot be told from a password written in brackets."""
_NETRC_SECRETS = frozenset({"login", "password", "account"})


@attrs.frozen
class KeyNames:
    """What the walk needs to know of a key's name."""

    secret: Callable[[str], bool]
    """Whether a key names a credential (its value is one)."""
    naming: Callable[[str], bool]
    """Whether a key names a thing (``token_file``, ``auth_type``): its value is not a
    credential even under a secret-like parent."""


def secret_spans(text: str, name: str, keys: KeyNames) -> list[Span]:
    """The spans of ``text`` (a file named ``name``) that hold credential values by its
    structure, sorted and apart. A structure too deep to walk is one span, the whole text
    (fail closed)."""
    try:
        return _merged(_spans(text, name, keys))
    except RecursionError:
        return [(0, len(text))]


@attrs.frozen
class _Plan:
    """Which whole-file readings a text gets, by its name and how it starts."""

    yaml: bool
    toml: bool
    csv: str | None
    """The delimiter, when read as CSV ("" to sniff one)."""
    netrc: bool

    @property
    def any(self) -> bool:
        return self.yaml or self.toml or self.csv is not None or self.netrc


def _plan(body: str, name: str) -> _Plan:
    lower = name.rsplit("/", 1)[-1].lower()
    suffix = "." + lower.rsplit(".", 1)[-1] if "." in lower else ""
    small = len(body) <= SNIFF_BYTES
    delimiter = _CSV.get(suffix)
    return _Plan(
        lower.endswith(_YAML) or (small and (_fenced(body) or _looks(body, _YAML_START))),
        lower.endswith(_TOML) or (small and _looks(body, _TOML_START)),
        delimiter if delimiter is not None else "" if small and _csv_header(body) else None,
        lower in _NETRC or lower.endswith(_NETRC[1:]) or (small and _looks_netrc(body)),
    )


def _fenced(text: str) -> bool:
    """Whether a text may hold a Markdown fenced block."""
    return textsearch.holds(text, "```") or textsearch.holds(text, "~~~")


def whole_readings(text: str, name: str) -> bool:
    """Whether a text is read as a whole by some format (YAML, TOML, CSV, netrc), beyond
    what its lines hold on their own."""
    return _plan(text.removeprefix("\ufeff"), name).any


def line_spans(text: str, windows: list[Span], keys: KeyNames) -> list[Span]:
    """What the line forms and the JSON objects of lines find in the windows of ``text``
    (each a run of whole lines): what a redaction may have changed of a text that no
    whole-file reading applies to."""
    out: list[Span] = []
    for start, end in windows:
        part = text[start:end]
        found = [(s - 1, e - 1) for s, e in _line_spans("\n" + part, keys)]
        found.extend(json_spans(part, keys))
        out.extend((s + start, e + start) for s, e in found)
    return _merged(out)


def _spans(text: str, name: str, keys: KeyNames) -> list[Span]:
    # A byte order mark is one character the parsers skip: read without it, placed after.
    bom = 1 if text.startswith("\ufeff") else 0
    body = text[bom:]
    plan = _plan(body, name)
    # The line forms are found in the text with a line break before it.
    spans: list[Span] = [
        (start + bom - 1, end + bom - 1) for start, end in _line_spans("\n" + body, keys)
    ]
    found: list[Span] = list(json_spans(body, keys))
    if plan.yaml:
        found.extend(_yaml_spans(body, keys))
    if plan.toml:
        found.extend(_toml_spans(body, keys))
    if plan.csv is not None:
        found.extend(_csv_spans(body, keys, plan.csv or None))
    if plan.netrc:
        found.extend(_netrc_spans(body))
    return spans + [(start + bom, end + bom) for start, end in found]


_YAML_START = re.compile(r"[ \t]*(?:---|-[ \t]|[\"'A-Za-z_][^:\r\n]{0,200}:(?:[ \t]|\r?$)|[{\[])")
_TOML_START = re.compile(r"[ \t]*(?:\[|[\"'A-Za-z_][A-Za-z0-9_.\"' -]{0,200}=)")


def _looks(text: str, start: re.Pattern[str]) -> bool:
    """Whether the first line that is neither blank nor a comment starts as the format's
    lines do: a log is not tried as YAML or TOML (a parser may take long on what is not)."""
    for line in text[:65536].split("\n", 64):
        stripped = line.strip()
        if stripped and not stripped.startswith(("#", "//", ";")):
            return start.match(line) is not None
    return False


def _merged(spans: list[Span]) -> list[Span]:
    spans.sort()
    out: list[Span] = []
    for start, end in spans:
        if start >= end:
            continue
        if out and start < out[-1][1]:
            out[-1] = (out[-1][0], max(end, out[-1][1]))
        else:
            out.append((start, end))
    return out


def value_pieces(text: str, start: int, end: int) -> Iterator[Span]:
    """The parts of a secret value ``text[start:end]`` to redact: the whole, trimmed of
    surrounding white space; where it holds placeholders already, each run of text
    between them that holds a letter or a digit (``<redacted:credential:1> hunter2``: the
    second word is a secret the first redaction left); nothing for a value that is only
    placeholders, a literal (``true``, ``null``) or a short number."""
    value = text[start:end]
    stripped = value.strip()
    if (
        not stripped
        or _SHORT_NUMBER.fullmatch(stripped)
        or stripped.lower() in _LITERALS
        or REFERENCE.fullmatch(stripped)
    ):
        return
    if "<redacted:" not in value:
        # No placeholder (most values): the whole, trimmed, if it holds a letter or digit.
        if _ALNUM.search(stripped):
            left = len(value) - len(value.lstrip())
            yield start + left, start + left + len(stripped)
        return
    last = 0
    for match in [*_PLACEHOLDER.finditer(value), None]:
        low, high = match.span() if match is not None else (len(value), len(value))
        piece = value[last:low]
        if _ALNUM.search(piece):
            left = len(piece) - len(piece.lstrip())
            right = len(piece.rstrip())
            yield start + last + left, start + last + right
        last = high


# -- YAML (and JSON) -------------------------------------------------------------------


def _yaml_spans(text: str, keys: KeyNames, chunks: bool = True) -> list[Span]:
    try:
        documents = list(yaml.compose_all(text, Loader=_Loader))
    except (yaml.YAMLError, ValueError):
        # One broken document, or YAML inside Markdown: each document and each fenced
        # block read on its own, where it is.
        if not chunks:
            return []
        return [
            (start + offset, end + offset)
            for offset, chunk in _chunks(text)
            for start, end in _yaml_spans(chunk, keys, chunks=False)
        ]
    out: list[Span] = []
    seen: set[tuple[int, bool]] = set()
    for document in documents:
        if isinstance(document, yaml.MappingNode | yaml.SequenceNode):
            _walk_node(text, document, False, keys, out, seen)
    return out


_DOCUMENT = re.compile(r"^---[ \t]*$|^\.\.\.[ \t]*$", re.MULTILINE)
_FENCED = re.compile(
    r"^[ \t]*(?:```|~~~)[^\n]*\n(.*?)^[ \t]*(?:```|~~~)[ \t]*$", re.MULTILINE | re.DOTALL
)


def _chunks(text: str) -> Iterator[tuple[int, str]]:
    """The documents between ``---`` lines, and the fenced blocks of Markdown, with where
    each starts."""
    start = 0
    for match in _DOCUMENT.finditer(text):
        yield start, text[start : match.start()]
        start = match.end()
    yield start, text[start:]
    for match in _FENCED.finditer(text) if _fenced(text) else ():
        yield match.start(1), match.group(1)


_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_Base):  # type: ignore[misc]
    """Composes without resolving each plain scalar's type (a Python call per scalar):
    only a secret's is looked at (:func:`_plain_tag`)."""

    yaml_implicit_resolvers: ClassVar[dict[str, Any]] = {}

    def resolve(self, kind: type[yaml.Node], value: Any, implicit: Any) -> str:
        # What the base class returns with no implicit or path resolvers, without its
        # lookups (once a node).
        return _DEFAULT_TAGS[kind]


_DEFAULT_TAGS = {
    yaml.ScalarNode: "tag:yaml.org,2002:str",
    yaml.SequenceNode: "tag:yaml.org,2002:seq",
    yaml.MappingNode: "tag:yaml.org,2002:map",
}


def _plain_tag(value: str) -> str:
    """The type YAML's safe schema gives a plain scalar (bool, null, int, float, str)."""
    resolvers = yaml.SafeLoader.yaml_implicit_resolvers
    for tag, regexp in resolvers.get(value[:1] if value else "", ()):
        if regexp.match(value):
            return str(tag)
    return "tag:yaml.org,2002:str"


def _walk_node(
    text: str,
    node: yaml.Node,
    secret: bool,
    keys: KeyNames,
    out: list[Span],
    seen: set[tuple[int, bool]],
) -> None:
    # An alias is the node it names: walked once per way of reaching it (a recursive
    # alias would be walked forever).
    mark = (id(node), secret)
    if mark in seen:
        return
    seen.add(mark)
    if isinstance(node, yaml.ScalarNode):
        if secret:
            out.extend(_scalar_pieces(text, node))
    elif isinstance(node, yaml.MappingNode):
        named = _pair_name(node.value, keys)
        stored = any(
            _scalars(k, v) and k.value == "kind" and v.value == "Secret" for k, v in node.value
        )
        if secret and reference({k.value for k, _ in node.value if isinstance(k, yaml.ScalarNode)}):
            secret = False
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else None
            under = _under(name, secret, keys) or (named and name in VALUE_KEYS)
            under = under or (stored and name in _SECRET_DATA)
            _walk_node(text, value, under, keys, out, seen)
    elif isinstance(node, yaml.SequenceNode):
        items = node.value
        for index, item in enumerate(items):
            if not isinstance(item, yaml.ScalarNode):
                _walk_node(text, item, secret, keys, out, seen)
                continue
            before = items[index - 1] if index else None
            after_flag = (
                isinstance(before, yaml.ScalarNode)
                and _secret_flag(str(before.value), keys)
                and not str(item.value).startswith("-")
            )
            if after_flag or (secret and not str(item.value).startswith("--")):
                # A flag names itself, even in a list a secret-like key holds.
                out.extend(_scalar_pieces(text, item))
            else:
                out.extend(_assigned(text, item, keys))


def reference(keys: set[str] | dict[str, Any]) -> bool:
    """Whether an object's keys make it a reference to a stored secret, not a secret: a
    Kubernetes ``secretKeyRef`` (``{name, key}``) names the Secret and its key."""
    return "name" in keys and "key" in keys


_SECRET_DATA = frozenset({"data", "stringData"})


def _scalars(key: yaml.Node, value: yaml.Node) -> bool:
    return isinstance(key, yaml.ScalarNode) and isinstance(value, yaml.ScalarNode)


def _secret_object(members: dict[str, Any]) -> bool:
    """Whether an object is a Kubernetes Secret: all its ``data`` is secret."""
    return members.get("kind") == "Secret"


def _under(name: str | None, secret: bool, keys: KeyNames) -> bool:
    """Whether a value under key ``name`` is a credential, its parent's being ``secret``."""
    if name is None:
        return secret
    if keys.secret(name):
        return True
    return secret and not keys.naming(name)


def _pair_name(pairs: list[tuple[yaml.Node, yaml.Node]], keys: KeyNames) -> bool:
    """Whether a mapping is a ``{name, value}`` pair whose name is secret-like."""
    for key, value in pairs:
        if (
            isinstance(key, yaml.ScalarNode)
            and key.value in NAME_KEYS
            and isinstance(value, yaml.ScalarNode)
            and keys.secret(str(value.value))
        ):
            return True
    return False


def _secret_flag(item: str, keys: KeyNames) -> bool:
    return item.startswith("-") and "=" not in item and keys.secret(item.lstrip("-"))


def _scalar_pieces(text: str, node: yaml.ScalarNode) -> Iterator[Span]:
    plain = not node.style and node.tag == "tag:yaml.org,2002:str"
    tag = (_plain_tag(str(node.value)) if plain else node.tag).rsplit(":", 1)[-1]
    if tag in ("bool", "null", "float"):
        return iter(())
    if tag == "int" and not _long_number(str(node.value)):
        return iter(())
    start, end = node.start_mark.index, node.end_mark.index
    if node.style in ('"', "'"):
        start, end = start + 1, end - 1
    elif node.style in ("|", ">"):
        # The indicator goes with the value: "key: <placeholder>" is still YAML.
        end = start + len(text[start:end].rstrip())
    return value_pieces(text, start, end)


def _long_number(value: str) -> bool:
    try:
        number = int(value.replace("_", ""), 0)
    except ValueError:
        return True
    return number >= _LONG_NUMBER or number <= -_LONG_NUMBER


def _assigned(text: str, node: yaml.ScalarNode, keys: KeyNames) -> Iterator[Span]:
    """The value part of a list item ``NAME=value`` or ``--flag=value`` whose name is
    secret-like, found in the item's own characters."""
    value = str(node.value)
    name, equals, _ = value.partition("=")
    if not equals or not keys.secret(name.lstrip("-").strip()):
        return
    start, end = node.start_mark.index, node.end_mark.index
    if node.style in ('"', "'"):
        start, end = start + 1, end - 1
    raw = text[start:end]
    at = raw.find("=")
    if at >= 0:
        yield from value_pieces(text, start + at + 1, end)


# -- JSON inside lines ----------------------------------------------------------------

_DECODER = json.JSONDecoder()
_OBJECTS_A_LINE = 16


def json_spans(text: str, keys: KeyNames) -> Iterator[Span]:
    """Credential values of the JSON objects a line holds (a log line that prints one, a
    line of JSON lines with a ``NaN``): each parsed where it starts, as Python's reader
    does, and its values found in the line in their JSON form; a value that cannot be
    found so makes the object one span (fail closed)."""
    if "{" not in text:
        return
    starts = _ObjectStarts(text)
    position = 0
    while True:
        start = starts.next(position)
        if start < 0:
            return
        line_end = text.find("\n", start)
        line_end = len(text) if line_end < 0 else line_end
        for _ in range(_OBJECTS_A_LINE):
            try:
                value, end = _DECODER.raw_decode(text, start)
            except (ValueError, RecursionError):
                end = start + 1
            else:
                values: list[str] = []
                _walk_data(value, False, keys, values)
                yield from _placed(text, start, end, values)
            start = starts.next(max(end, start + 1))
            if start < 0 or start >= line_end:
                break
        position = line_end + 1


class _ObjectStarts:
    """Where JSON objects may start (``{"`` or ``{ "``), found with ``str.find`` (a regex
    that starts with a class tries each character), each form looked for again only once
    passed."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.found = {form: -2 for form in ('{"', '{ "')}

    def next(self, position: int) -> int:
        best = -1
        for form, at in self.found.items():
            if at == -1:
                continue
            if at < position:
                at = self.found[form] = textsearch.find(self.text, form, position)
            if at >= 0 and (best < 0 or at < best):
                best = at
        return best


def _placed(text: str, start: int, end: int, values: list[str]) -> Iterator[Span]:
    for value in dict.fromkeys(values):
        if not any(value_pieces(value, 0, len(value))):
            continue
        forms = {json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}
        located = False
        for form in forms:
            at = text.find(form, start, end)
            while at >= 0:
                located = True
                yield from value_pieces(text, at, at + len(form))
                at = text.find(form, at + len(form), end)
        if not located:
            yield start, end
            return


# -- TOML ------------------------------------------------------------------------------


def _toml_spans(text: str, keys: KeyNames) -> list[Span]:
    try:
        document = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError, RecursionError):
        return []
    values: list[str] = []
    _walk_data(document, False, keys, values)
    out: list[Span] = []
    unplaced = False
    for value in dict.fromkeys(values):
        if not any(value_pieces(value, 0, len(value))):
            continue  # empty, a literal, a short number: nothing to place
        found = list(_quoted(text, value))
        unplaced = unplaced or not found
        for start, end in found:
            out.extend(value_pieces(text, start, end))
    # Without an escape in the text, each value stands as it reads wherever it is; with
    # one, a value found may be a copy (in a comment) of one written otherwise.
    if (unplaced or "\\" in text) and _left_in(text, out, keys):
        # A value written with escapes the text does not show as it reads (found, if at
        # all, in a copy elsewhere): the file holds a secret this cannot place, so all
        # of it is one redaction (never published as it is).
        return [(0, len(text))]
    return out


def _left_in(text: str, spans: list[Span], keys: KeyNames) -> bool:
    """Whether the TOML ``text``, with ``spans`` replaced, still holds a secret value."""
    pieces: list[str] = []
    last = 0
    for start, end in _merged(sorted(spans)):
        pieces += (text[last:start], "0" if text[start:end].isdigit() else "R")
        last = end
    try:
        document = tomllib.loads("".join(pieces) + text[last:])
    except (tomllib.TOMLDecodeError, ValueError):
        return True
    values: list[str] = []
    _walk_data(document, False, keys, values)
    return any(v not in ("R", "0") and any(value_pieces(v, 0, len(v))) for v in values)


def _walk_data(value: Any, secret: bool, keys: KeyNames, out: list[str]) -> None:
    """Into ``out``, each credential string of a parsed document (a number as its digits)."""
    if isinstance(value, dict):
        secret = secret and not reference(value)
        stored = _secret_object(value)
        named = any(
            k in NAME_KEYS and isinstance(v, str) and keys.secret(v) for k, v in value.items()
        )
        for k, item in value.items():
            under = _under(k, secret, keys) or (named and k in VALUE_KEYS)
            _walk_data(item, under or (stored and k in _SECRET_DATA), keys, out)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            before = value[index - 1] if index else None
            if isinstance(item, str) and secret and item.startswith("--"):
                continue  # a flag names itself, even in a list a secret-like key holds
            if isinstance(item, str) and not secret:
                if (
                    isinstance(before, str)
                    and _secret_flag(before, keys)
                    and not item.startswith("-")
                ):
                    out.append(item)
                else:
                    name, equals, rest = item.partition("=")
                    if equals and rest and keys.secret(name.lstrip("-").strip()):
                        out.append(rest)
            else:
                _walk_data(item, secret, keys, out)
    elif secret and isinstance(value, str):
        out.append(value)
    elif secret and type(value) is int and (value >= _LONG_NUMBER or value <= -_LONG_NUMBER):
        out.append(str(value))


def _quoted(text: str, value: str) -> Iterator[Span]:
    """Where ``value`` stands in the text as a TOML value: inside quotes, or a number's
    digits standing alone."""
    if not value.strip():
        return
    if value.lstrip("-").isdigit():
        for match in re.finditer(rf"(?<![0-9A-Za-z_.]){re.escape(value)}(?![0-9A-Za-z_.])", text):
            yield match.span()
        return
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    for form in dict.fromkeys((f'"{escaped}"', f"'{value}'")):
        position = text.find(form)
        while position >= 0:
            yield position + 1, position + len(form) - 1
            position = text.find(form, position + len(form))
    # Inside a longer string (the value of "--api-key=x", "KEY=x"): where it ends one.
    for closing in ('"', "'"):
        form = value + closing
        position = text.find(form)
        while position >= 0:
            yield position, position + len(value)
            position = text.find(form, position + len(form))


# -- line forms: INI, .env, HTTP headers ----------------------------------------------


def _line_spans(text: str, keys: KeyNames) -> Iterator[Span]:
    """``key = value`` and ``key: value`` lines whose key is secret-like, or whose section
    (``[credentials]``) is and the key does not name a thing; a ``value:`` line after a
    ``name:`` line that names a secret. ``text`` starts with a line break."""
    section = False
    for match in _LINES.finditer(text):
        if match.group("section") is not None:
            section = keys.secret(match.group("section"))
            continue
        if match.group("spaced") is not None:
            if keys.secret(match.group("spaced")):
                yield from _line_value(text, *match.span("spaced_value"), " ")
            continue
        key = match.group("key")
        if keys.secret(key) or (section and not keys.naming(key)):
            yield from _line_value(text, *match.span("value"), match.group("sep"))
        elif key in NAME_KEYS and keys.secret(match.group("value").strip().strip("\"',").strip()):
            after = _VALUE_LINE.match(text, match.end())
            if after is not None:
                yield from _line_value(text, *after.span("value"), ":")


_QUOTED_REACH = 65536
_CONTINUED = re.compile(r"\n([ \t]+)(?![ \t]|-[ \t]|[A-Za-z_\"'][^\s:=]*[ \t]*[:=])([^\r\n]*)")


def _continued(text: str, end: int) -> Iterator[Span]:
    """The indented lines after a key with no value on its own line that are no key of
    their own nor a list item: an INI value continued (``password =`` then the value)."""
    while True:
        match = _CONTINUED.match(text, end)
        if match is None or not match.group(2).strip():
            return
        yield from value_pieces(text, *match.span(2))
        end = match.end()


def _line_value(text: str, start: int, end: int, sep: str) -> Iterator[Span]:
    value = text[start:end]
    stripped = value.rstrip()
    if not stripped:
        yield from _continued(text, end)
        return
    if stripped[0] in "{[|>&*!":
        return  # a structure of its own (YAML reads it)
    if stripped[0] == "#" and (sep == ":" or (start > 0 and text[start - 1] in " \t")):
        return  # a comment where a value would be: none
    first = stripped[0]
    if first in "\"'":
        close = stripped.find(first, 1)
        if close > 0:
            yield from value_pieces(text, start + 1, start + close)
            return
        # Quoted over several lines (.env allows it): to the closing quote.
        close = text.find(first, end, end + _QUOTED_REACH)
        yield from value_pieces(text, start + 1, close if close > 0 else end)
        return
    # An unquoted value ends at a comment: " #" (.env, YAML) or " ;" (INI).
    cut = len(stripped)
    for marker in (" #", "\t#", " ;", "\t;") if sep else ():
        at = stripped.find(marker)
        if at >= 0:
            cut = min(cut, at)
    yield from value_pieces(text, start, start + cut)


# -- CSV -------------------------------------------------------------------------------


def _csv_header(text: str) -> bool:
    """Whether a text not named a CSV reads as one: a first line (after ``#`` comments)
    of several names, and a next line of as many cells."""
    found = _header(text, None)
    return found is not None and found[3]


def _header(
    text: str, delimiter: str | None
) -> tuple[int, str, list[tuple[int, int, str]], bool] | None:
    """Where a CSV's rows start, its delimiter, its header's cells and whether a text not
    named a CSV reads as one; None when it has no header and rows."""
    # Comment lines before the header (an export's preamble) are skipped.
    skipped = 0
    while text.startswith("#", skipped):
        after = text.find("\n", skipped)
        if after < 0:
            return None
        skipped = after + 1
    newline = text.find("\n", skipped)
    if newline < 0:
        return None  # a header alone holds no value
    header = text[skipped:newline].rstrip("\r")
    named = delimiter is not None
    if delimiter is None:
        delimiter = next((d for d in (",", "\t", ";") if d in header), None)
        if delimiter is None:
            return None
    names = _cells(header, delimiter)
    if names is None:
        return None
    sniffed = True
    if not named:
        second = _cells(text[newline + 1 :].split("\n", 1)[0].rstrip("\r"), delimiter)
        sniffed = not (
            len(names) < 2
            or not all(_HEADER.fullmatch(cell) for _, _, cell in names)
            or second is None
            or len(second) != len(names)
        )
    return newline, delimiter, names, sniffed


def _csv_spans(text: str, keys: KeyNames, delimiter: str | None) -> list[Span]:
    found = _header(text, delimiter)
    if found is None or not found[3]:
        return []
    newline, delimiter, names, _ = found
    columns = {i for i, (_, _, cell) in enumerate(names) if keys.secret(cell.strip())}
    # A name column and a value column: the value of each row whose name is secret-like.
    headers = [cell.strip() for _, _, cell in names]
    pair = next((headers.index(n) for n in NAME_KEYS if n in headers), None)
    paired = next((headers.index(v) for v in sorted(VALUE_KEYS) if v in headers), None)
    if not columns and (pair is None or paired is None):
        return []
    out: list[Span] = []
    offset = newline + 1
    quoted = False
    for line in text[offset:].split("\n"):
        row = line.rstrip("\r")
        # An odd count of quotes opens or closes a cell that holds a line break: each
        # line of it is read whole, as the cells cannot be told apart line by line.
        odd = row.count('"') % 2 == 1
        cells = None if quoted or odd else _cells(row, delimiter)
        quoted = quoted != odd
        if cells is None:
            out.append((offset, offset + len(row)))  # cannot tell its cells: all of it
        else:
            wanted = set(columns)
            if (
                pair is not None
                and paired is not None
                and pair < len(cells)
                and keys.secret(cells[pair][2].strip())
            ):
                wanted.add(paired)
            for index in wanted:
                if index < len(cells):
                    low, high, _ = cells[index]
                    out.extend(value_pieces(text, offset + low, offset + high))
        offset += len(line) + 1
    return out


def _cells(line: str, delimiter: str) -> list[tuple[int, int, str]] | None:
    """Each cell of one CSV line: its span (inside quotes) and value, or None when the
    line is not what the csv module reads it as (a quoted line break)."""
    cells: list[tuple[int, int, str]] = []
    position = 0
    while True:
        if line.startswith('"', position):
            close = position + 1
            while True:
                close = line.find('"', close)
                if close < 0:
                    return None
                if line.startswith('""', close):
                    close += 2
                    continue
                break
            cells.append((position + 1, close, line[position + 1 : close].replace('""', '"')))
            position = close + 1
            if position < len(line) and line[position] != delimiter:
                return None
        else:
            stop = line.find(delimiter, position)
            stop = len(line) if stop < 0 else stop
            cells.append((position, stop, line[position:stop]))
            position = stop
        if position >= len(line):
            break
        position += 1
        if position == len(line):
            cells.append((position, position, ""))
            break
    try:
        parsed = next(csv.reader(io.StringIO(line), delimiter=delimiter), [])
    except csv.Error:
        return None  # a carriage return alone in a cell: not a line the reader takes
    if [cell for _, _, cell in cells] != (parsed or [""]):
        return None
    return cells


# -- netrc -----------------------------------------------------------------------------


def _looks_netrc(text: str) -> bool:
    for line in text[:65536].split("\n", 64):
        words = line.split()
        if words and not words[0].startswith("#"):
            return words[0] in ("machine", "default")
    return False


def _netrc_spans(text: str) -> Iterator[Span]:
    tokens = list(_NETRC_TOKEN.finditer(text))
    for before, token in itertools.pairwise(tokens):
        if before.group() in _NETRC_SECRETS:
            yield from value_pieces(text, *token.span())
