"""The forms of a Python regex that Hyperscan is given (prefilter.py): each matches at
least where the regex does, and says where that is in a way a scan can report cheaply."""

from __future__ import annotations

import itertools
import re
from typing import Any

_NAMED_GROUP = re.compile(r"\(\?P<[A-Za-z_][A-Za-z0-9_]*>")
_LOOKBEHIND_CLASS = re.compile(r"^((?:\(\?[a-zA-Z]+\))?)\(\?<!\[((?:\\.|[^\]\\])*)\]\)")
"""A negative lookbehind of one character class where a match starts (after the flags)."""


def _drop_lookarounds(pattern: str) -> str:
    """``pattern`` without its lookaround groups (each assertion removed is a constraint
    less: what matched before still matches)."""
    out: list[str] = []
    i = 0
    depth_skip = 0
    stack: list[bool] = []  # per open group: is it a lookaround being dropped
    in_class = False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            if not depth_skip:
                out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            if char == "]":
                in_class = False
            if not depth_skip:
                out.append(char)
            i += 1
            continue
        if char == "[":
            in_class = True
            if not depth_skip:
                out.append(char)
            # A "]" right after "[" or "[^" is a literal member.
            rest = pattern[i + 1 :]
            lead = 2 if rest.startswith("^]") else 1 if rest.startswith("]") else 0
            if lead and not depth_skip:
                out.append(rest[:lead])
            i += 1 + lead
            continue
        if char == "(":
            look = pattern.startswith(("(?=", "(?!", "(?<=", "(?<!"), i)
            stack.append(look)
            if look:
                depth_skip += 1
            elif not depth_skip:
                out.append(char)
            i += 1
            continue
        if char == ")":
            look = stack.pop() if stack else False
            if look:
                depth_skip -= 1
            elif not depth_skip:
                out.append(char)
            i += 1
            continue
        if not depth_skip:
            out.append(char)
        i += 1
    return "".join(out)


def hyperscan_pattern(pattern: str) -> str:
    """A pattern Hyperscan compiles that matches wherever ``pattern`` matches: the span it
    reports holds the exact match."""
    pattern = _NAMED_GROUP.sub("(", pattern)
    # "Not after one of these" is "at a line's start, or after anything else": the
    # assertion becomes a character consumed, and the span only grows to its left.
    # Only where a match starts: elsewhere the character it would take is one the pattern
    # takes itself, and is dropped with the other lookarounds.
    pattern = _LOOKBEHIND_CLASS.sub(lambda m: f"{m.group(1)}(?:^|[^{m.group(2)}])", pattern)
    return _drop_lookarounds(pattern)


_UNBOUNDED = 1 << 16

_TYPE_FLAGS = re.ASCII | re.LOCALE | re.UNICODE


def _scoped(flags: int, added: int, removed: int) -> int:
    """The flags inside a group that adds and removes some, as Python's compiler reads
    them: a group that sets ASCII (or LOCALE, or UNICODE) drops the others, so that
    ``(?a:\\w)`` takes ASCII letters only inside a pattern that is Unicode."""
    if added & _TYPE_FLAGS:
        flags &= ~_TYPE_FLAGS
    return (flags | added) & ~removed


def _parts(op: Any, av: Any) -> list[Any]:
    """The sequences of items one parsed item holds (a group's, each branch, a repeat's
    body, a lookaround's), for a walk that needs no flags."""
    parser = re._parser  # type: ignore[attr-defined]
    if op in (parser.ASSERT, parser.ASSERT_NOT):
        return [av[1]]
    if op is parser.SUBPATTERN:
        return [av[-1]]
    if op is parser.BRANCH:
        return list(av[1])
    if op in (parser.MAX_REPEAT, parser.MIN_REPEAT, parser.POSSESSIVE_REPEAT):
        return [av[2]]
    if op is parser.ATOMIC_GROUP:
        return [av]
    return []


def lookahead_reach(pattern: re.Pattern[str]) -> int | None:
    """How many characters past a position the regex may look at there (lookaheads,
    ``\\b``), or None when there is no bound."""
    parser = re._parser  # type: ignore[attr-defined]

    def reach(items: Any) -> int | None:
        found = 1  # \b and \B look at the next character
        for op, av in items:
            if op in (parser.ASSERT, parser.ASSERT_NOT) and av[0] == 1:
                width = av[1].getwidth()[1]
                if width >= _UNBOUNDED:
                    return None
                found = max(found, width + 1)
            for sub in _parts(op, av):
                inner = reach(sub)
                if inner is None:
                    return None
                found = max(found, inner)
        return found

    return reach(parser.parse(pattern.pattern, pattern.flags))


def lookaround_width(pattern: re.Pattern[str]) -> int:
    """The most characters any lookahead or lookbehind of ``pattern`` looks at (0 for
    none; a large number for no bound)."""
    parser = re._parser  # type: ignore[attr-defined]

    def widest(items: Any) -> int:
        found = 0
        for op, av in items:
            if op in (parser.ASSERT, parser.ASSERT_NOT):
                found = max(found, av[1].getwidth()[1])
            for sub in _parts(op, av):
                found = max(found, widest(sub))
        return found

    return widest(parser.parse(pattern.pattern, pattern.flags))


def line_local(pattern: re.Pattern[str]) -> bool:
    """Whether no match of ``pattern`` can hold a line break (what its lookarounds look
    at aside) and every match holds a character."""
    parser = re._parser  # type: ignore[attr-defined]
    parsed = parser.parse(pattern.pattern, pattern.flags)
    return parsed.getwidth()[0] > 0 and not can_take(pattern, "\n")


def can_take(pattern: re.Pattern[str], characters: str, *, written: bool = False) -> bool:
    """Whether a match of ``pattern`` may hold one of ``characters`` (what its lookarounds
    look at aside; True for a part this cannot tell, such as a back reference). With
    ``written``: of the part :func:`reversed_expression` writes, where a match starts."""
    parser = re._parser  # type: ignore[attr-defined]
    codes = {ord(c) for c in characters}

    def takes(items: Any, flags: int) -> bool:
        for op, av in items:
            if op in (parser.ASSERT, parser.ASSERT_NOT, parser.AT):
                continue  # looks, takes nothing
            if op is parser.LITERAL:
                found = av in codes or (
                    bool(flags & re.IGNORECASE)
                    and any(chr(av).lower() == c.lower() for c in characters)
                )
            elif op is parser.NOT_LITERAL:
                found = bool(codes - {av})
            elif op is parser.ANY:
                found = bool(codes - {10}) or bool(flags & re.DOTALL)
            elif op is parser.IN:
                compiled = _node_pattern((op, av), flags)
                found = any(compiled.fullmatch(c) for c in characters)
            elif op is parser.SUBPATTERN:
                _, added, removed, sub = av
                found = takes(sub, _scoped(flags, added, removed))
            elif op is parser.BRANCH:
                found = any(takes(branch, flags) for branch in av[1])
            elif op in (parser.MAX_REPEAT, parser.MIN_REPEAT, parser.POSSESSIVE_REPEAT):
                found = takes(av[2], flags)
            elif op is parser.ATOMIC_GROUP:
                found = takes(av, flags)
            else:
                found = True
            if found:
                return True
        return False

    parsed = parser.parse(pattern.pattern, pattern.flags)
    items = _up_to_narrow_end(parsed, pattern.flags) if written else parsed
    return takes(items, pattern.flags)


_QUANTIFIER = re.compile(r"(?:[*+?]|\{([0-9]*)(?:,[0-9]*)?\})[?+]?")
_TRAILING_ASSERTIONS = frozenset({"$", r"\b", r"\B", r"\Z", r"\z"})


def _class_end(expression: str, i: int) -> int:
    """Where the class opening at ``i`` ends (one past its "]")."""
    i += 1
    if expression.startswith("^", i):
        i += 1
    if expression.startswith("]", i):
        i += 1
    while i < len(expression) and expression[i] != "]":
        i += 2 if expression[i] == "\\" else 1
    return i + 1


def _items(expression: str) -> list[tuple[int, int, int]]:
    """The top-level items of an expression, each (start, end of its atom, end of its
    quantifier); a "|" between two branches is an item of its own."""
    items: list[tuple[int, int, int]] = []
    i = 0
    while i < len(expression):
        start = i
        char = expression[i]
        if char == "|":
            items.append((i, i + 1, i + 1))
            i += 1
            continue
        if char == "\\":
            i += 4 if expression.startswith("x", i + 1) else 2
        elif char == "[":
            i = _class_end(expression, i)
        elif char == "(":
            depth = 0
            while i < len(expression):
                char = expression[i]
                if char == "\\":
                    i += 2
                    continue
                if char == "[":
                    i = _class_end(expression, i)
                    continue
                depth += 1 if char == "(" else -1 if char == ")" else 0
                i += 1
                if depth == 0:
                    break
        else:
            i += 1
        atom = i
        quantifier = _QUANTIFIER.match(expression, i)
        if quantifier:
            i = quantifier.end()
        items.append((start, atom, i))
    return items


def _shortened(expression: str) -> str:
    """``expression`` with its last unbounded or optional items cut to their least (in
    each branch, where it has several)."""
    items = _items(expression)
    bars = [start for start, _, _ in items if expression[start] == "|"]
    if bars:
        edges = [-1, *bars, len(expression)]
        return "|".join(_shortened(expression[a + 1 : b]) for a, b in itertools.pairwise(edges))
    while items:
        start, atom_end, end = items[-1]
        atom = expression[start:atom_end]
        quantifier = _QUANTIFIER.fullmatch(expression, atom_end, end)
        if quantifier is not None:
            least = (
                int(quantifier.group(1) or 0)
                if quantifier.group(0).startswith("{")
                else 1
                if quantifier.group(0).startswith("+")
                else 0
            )
            if least == 0:
                items.pop()
                continue
            return expression[:start] + (atom if least == 1 else f"{atom}{{{least}}}")
        if atom in _TRAILING_ASSERTIONS:
            items.pop()
            continue
        if atom.startswith("(?:"):
            opening = "(?:"
        elif atom.startswith("(") and not atom.startswith("(?"):
            opening = "("
        else:
            break
        return expression[:start] + opening + _shortened(atom[len(opening) : -1]) + ")"
    return expression[: items[-1][2]] if items else ""


def shortest_forms(expression: str) -> list[str]:
    """Forms of an expression each match of which has a prefix, from the same start, that
    the form matches: first the one with its unbounded or optional tail cut to its least
    (its ends come one per match rather than one per character a repeat could take), then
    the expression itself; only those that cannot match nothing."""
    forms = []
    for candidate in dict.fromkeys((_shortened(expression), expression)):
        try:
            width = re._parser.parse(candidate).getwidth()[0]  # type: ignore[attr-defined]
        except re.error:
            continue
        if width > 0:
            forms.append(candidate)
    return forms


_FLAGS_ITEM = re.compile(r"\(\?[a-zA-Z]+\)")
_UNSPLIT_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\[0-9uUN]")
_LITERAL_ATOM = re.compile(r"\\x[0-9a-fA-F]{2}|\\[^A-Za-z0-9]|[^\\\[\](){}|.^$*+?]")


def _flat(expression: str) -> list[str] | None:
    """The top-level items of an expression (each atom with its quantifier), with each
    group of one branch and no quantifier opened into its items; None where the top
    level has branches."""
    out: list[str] = []
    for start, atom_end, end in _items(expression):
        atom = expression[start:atom_end]
        if atom == "|":
            return None
        capturing = atom.startswith("(") and not atom.startswith("(?")
        opening = "(?:" if atom.startswith("(?:") else "(" if capturing else ""
        inner = _flat(atom[len(opening) : -1]) if opening and end == atom_end else None
        if inner is None:
            out.append(expression[start:end])
        else:
            out.extend(inner)
    return out


def trimmed_form(expression: str) -> str | None:
    """The part of a (Hyperscan) expression from its first literal item on, where what
    comes before it may repeat without bound: each match of the expression holds a match
    of that part ending where it ends, and a literal to look for first is much cheaper to
    Hyperscan than a run of a class checked at every character (an e-mail address's
    local part before its "@"). None where nothing is to gain."""
    if _UNSPLIT_ESCAPE.search(expression):
        return None  # an escape of several characters :func:`_items` would cut apart
    items = _flat(expression)
    if items is None:
        return None
    flags = ""
    while items and _FLAGS_ITEM.fullmatch(items[0]):
        flags += items.pop(0)
    for index, item in enumerate(items):
        if _LITERAL_ATOM.fullmatch(item):
            before = items[:index]
            if any(re.search(r"[*+]|\{[0-9]*,\}", _atom_tail(b)) for b in before):
                return flags + "".join(items[index:])
            return None
    return None


def _atom_tail(item: str) -> str:
    """An item's quantifier (what follows its atom)."""
    _, atom_end, end = _items(item)[0]
    return item[atom_end:end]


def line_forms(expression: str) -> list[str]:
    """The forms to look for a line-local expression by, best first: each match of the
    expression holds a match of the form, so that one ends on its line (the
    :func:`trimmed_form` of its shortest form, where it has one, then
    :func:`shortest_forms`)."""
    forms = shortest_forms(expression)
    trimmed = trimmed_form(forms[0]) if forms else None
    return [trimmed, *forms] if trimmed is not None else forms


def hyperscan_literal(code: int) -> str:
    """One character as Hyperscan reads it literally."""
    return chr(code) if chr(code).isalnum() and code < 128 else f"\\x{code:02x}"


class _Unwritable(Exception):
    """A part of a regex :func:`reversed_expression` does not write."""


def reversed_expression(pattern: re.Pattern[str]) -> bytes | None:
    """A Hyperscan expression that matches, read backwards, a prefix of every string
    ``pattern`` matches (what its assertions and lookarounds would refuse too): its ends
    in a reversed text are where ``pattern``'s matches may start. Each character it may
    take is written as the set of ASCII characters Python's own regex matches there (the
    prefilter reads ASCII text only), so case, ``\\s`` and the flags of a group are
    Python's. None for what it cannot write (a back reference, a character that matches
    no ASCII one), and for a regex that can match nothing (an empty match starts
    anywhere)."""
    parser = re._parser  # type: ignore[attr-defined]

    def backwards(items: Any, flags: int) -> str:
        out: list[str] = []
        for op, av in reversed(list(items)):
            if op in (parser.AT, parser.ASSERT, parser.ASSERT_NOT):
                continue  # an assertion dropped: a constraint less
            if op in (parser.LITERAL, parser.NOT_LITERAL, parser.ANY, parser.IN):
                out.append(_written(_ascii_matches(repr((op, av)), (op, av), flags)))
            elif op is parser.SUBPATTERN:
                _, added, removed, sub = av
                out.append(f"(?:{backwards(sub, _scoped(flags, added, removed))})")
            elif op is parser.BRANCH:
                out.append("(?:" + "|".join(backwards(b, flags) for b in av[1]) + ")")
            elif op in (parser.MAX_REPEAT, parser.MIN_REPEAT, parser.POSSESSIVE_REPEAT):
                low, high, sub = av
                bound = "" if high is parser.MAXREPEAT or high == parser.MAXREPEAT else high
                out.append(f"(?:{backwards(sub, flags)}){{{low},{bound}}}")
            elif op is parser.ATOMIC_GROUP:
                out.append(f"(?:{backwards(av, flags)})")
            else:
                raise _Unwritable
        return "".join(out)

    try:
        parsed = parser.parse(pattern.pattern, pattern.flags)
        if parsed.getwidth()[0] == 0:
            return None
        return backwards(_up_to_narrow_end(parsed, pattern.flags), pattern.flags).encode()
    except _Unwritable:
        return None


_NODE_PATTERNS: dict[tuple[str, int], re.Pattern[str]] = {}
_ASCII_MATCHES: dict[tuple[str, int], frozenset[int]] = {}


def _node_pattern(node: Any, flags: int) -> re.Pattern[str]:
    """One character-taking node of a parsed regex, compiled alone under ``flags``
    (remembered by the node's repr: the same classes recur across rules)."""
    key = (repr(node), flags)
    found = _NODE_PATTERNS.get(key)
    if found is None:
        parser = re._parser  # type: ignore[attr-defined]
        found = _NODE_PATTERNS[key] = re._compiler.compile(  # type: ignore[attr-defined]
            parser.SubPattern(parser.State(), [node]), flags
        )
    return found


def _ascii_matches(key: str, node: Any, flags: int) -> frozenset[int]:
    """The ASCII characters one character-taking node of a parsed regex matches, under
    ``flags`` (remembered by the node's repr)."""
    found = _ASCII_MATCHES.get((key, flags))
    if found is None:
        compiled = _node_pattern(node, flags)
        found = frozenset(c for c in range(128) if compiled.fullmatch(chr(c)))
        _ASCII_MATCHES[(key, flags)] = found
    return found


def _written(codes: frozenset[int]) -> str:
    """A set of ASCII characters as Hyperscan reads it."""
    if not codes:
        raise _Unwritable  # it matches no ASCII character, which is all the text holds
    if len(codes) == 1:
        return hyperscan_literal(next(iter(codes)))
    if len(codes) == 128:
        return r"[\x00-\xff]"
    ranges: list[str] = []
    for _, run in itertools.groupby(enumerate(sorted(codes)), lambda pair: pair[1] - pair[0]):
        members = [code for _, code in run]
        low, high = hyperscan_literal(members[0]), hyperscan_literal(members[-1])
        ranges.append(low if len(members) == 1 else f"{low}-{high}")
    return "[" + "".join(ranges) + "]"


_NARROW = 8
"""Characters a part may end with and still be where a backward scan begins: one that can
end with any of many (a run of a class) would have it follow every character."""


def _up_to_narrow_end(parsed: Any, flags: int) -> list[Any]:
    """The top-level items of a parsed regex up to the last that holds a character and
    ends with one of few: every match starts where a match of those starts, and read
    backwards they begin with something Hyperscan finds quickly. All of them when no
    item is such."""
    parser = re._parser  # type: ignore[attr-defined]
    items = list(parsed)
    for cut in range(len(items), 0, -1):
        item = parser.SubPattern(parsed.state, items[cut - 1 : cut])
        if item.getwidth()[0] > 0:
            ending = _last_characters(items[cut - 1 : cut], flags)
            if ending is not None and len(ending) <= _NARROW:
                return items[:cut]
    return items


def _last_characters(items: list[Any], flags: int) -> set[int] | None:
    """The ASCII characters a match of ``items`` may end with; None when there are more
    than :data:`_NARROW` or it cannot tell."""
    return _edge_characters(items, flags, True, _NARROW)


def first_characters(pattern: re.Pattern[str]) -> set[int] | None:
    """The ASCII characters (their codes) a match of ``pattern`` may start with (what its
    assertions would refuse too); None when it cannot tell."""
    parser = re._parser  # type: ignore[attr-defined]
    parsed = parser.parse(pattern.pattern, pattern.flags)
    return _edge_characters(list(parsed), pattern.flags, False, 128)


def _edge_characters(items: list[Any], flags: int, last: bool, limit: int) -> set[int] | None:
    """The ASCII characters a match of ``items`` may end with (``last``) or start with;
    None when there are more than ``limit`` or it cannot tell."""
    parser = re._parser  # type: ignore[attr-defined]
    found: set[int] = set()
    for op, av in reversed(items) if last else items:
        if op in (parser.AT, parser.ASSERT, parser.ASSERT_NOT):
            continue
        single: set[int] | None
        if op is parser.LITERAL:
            single = {av}
            if flags & re.IGNORECASE and av < 128:
                single = {ord(chr(av).lower()), ord(chr(av).upper())}
        elif op is parser.IN:
            single = set(_ascii_matches(repr((op, av)), (op, av), flags))
        elif op is parser.SUBPATTERN:
            _, added, removed, sub = av
            single = _edge_characters(list(sub), _scoped(flags, added, removed), last, limit)
        elif op is parser.BRANCH:
            single = set()
            for branch in av[1]:
                edge = _edge_characters(list(branch), flags, last, limit)
                if edge is None:
                    return None
                single |= edge
        elif op in (parser.MAX_REPEAT, parser.MIN_REPEAT, parser.POSSESSIVE_REPEAT):
            single = _edge_characters(list(av[2]), flags, last, limit)
        else:
            return None
        if single is None:
            return None
        found |= single
        if len(found) > limit:
            return None
        if parser.SubPattern(parser.State(), [(op, av)]).getwidth()[0] > 0:
            return found  # this one holds a character: what is past it is no edge
    return found


SPECIAL = frozenset("\u0130\u0131\u017f\u212a")
"""The characters outside ASCII that Python's regex, ignoring case, takes for ASCII
letters (and two of which are lowered to ASCII): they stand for nothing else."""

_WORD = re.compile(r"\w")
_DIGIT = re.compile(r"\d")
_SPACE = re.compile(r"\s")

KINDS = {
    # kind: (a character outside ASCII of that kind, the ASCII characters it may stand as)
    "word": ("\u00e9", "_" + "ZQXJzqxj" + "0123456789"),
    "digit": ("\u0663", "_" + "0123456789" + "ZQXJzqxj"),
    "space": ("\u00a0", " \t\x0b\x0c"),
    "other": ("\u2013", "\x7f!#$%&*,;?@^`|~"),
}
"""Every character outside ASCII is of one kind, by what Python's ``\\w``, ``\\d`` and ``\\s``
say of it; a stand-in keeps what ``\\w`` says (so ``\\b`` reads it alike)."""


def kind_of(char: str) -> str:
    """The kind (:data:`KINDS`) of a character outside ASCII."""
    if _WORD.match(char):
        return "digit" if _DIGIT.match(char) else "word"
    return "space" if _SPACE.match(char) else "other"


def stand_ins(patterns: list[re.Pattern[str]]) -> dict[str, str]:
    """Per kind of character outside ASCII, an ASCII character that every part of every
    pattern takes wherever it takes one of that kind (and, in a negative lookaround,
    only there: the prefilter may turn one into its complement): a text with each such
    character replaced by its kind's stand-in matches every pattern at least where the
    text did. What a part takes of a character outside ASCII depends on its kind alone
    when the part names no such character itself (then none is given: every text
    outside ASCII is read whole) and the character is not one of :data:`SPECIAL`. A kind
    without a stand-in is absent."""
    parser = re._parser  # type: ignore[attr-defined]
    parts: list[tuple[Any, int, bool]] = []

    def collect(items: Any, flags: int, negative: bool) -> bool:
        for op, av in items:
            if op in (parser.LITERAL, parser.NOT_LITERAL, parser.ANY, parser.IN):
                if _names_outside_ascii(op, av):
                    return False
                parts.append(((op, av), flags, negative))
                continue
            nested: list[tuple[Any, int, bool]] = []
            if op in (parser.ASSERT, parser.ASSERT_NOT):
                nested.append((av[1], flags, negative or op is parser.ASSERT_NOT))
            elif op is parser.SUBPATTERN:
                _, added, removed, sub = av
                nested.append((sub, _scoped(flags, added, removed), negative))
            elif op is parser.BRANCH:
                nested.extend((branch, flags, negative) for branch in av[1])
            elif op in (parser.MAX_REPEAT, parser.MIN_REPEAT, parser.POSSESSIVE_REPEAT):
                nested.append((av[2], flags, negative))
            elif op is parser.ATOMIC_GROUP:
                nested.append((av, flags, negative))
            elif op not in (parser.AT, parser.GROUPREF):
                # A part read otherwise (a conditional group): no stand-in is known to do.
                return False
            if not all(collect(*n) for n in nested):
                return False
        return True

    for pattern in patterns:
        if not collect(parser.parse(pattern.pattern, pattern.flags), pattern.flags, False):
            return {}
    out = {}
    for kind, (sample, candidates) in KINDS.items():
        for candidate in candidates:
            if all(
                _stands(node, flags, negative, sample, candidate) for node, flags, negative in parts
            ):
                out[kind] = candidate
                break
    return out


def _names_outside_ascii(op: Any, av: Any) -> bool:
    parser = re._parser  # type: ignore[attr-defined]
    if op in (parser.LITERAL, parser.NOT_LITERAL):
        return bool(av >= 128)
    if op is parser.IN:
        return any(
            (kind in (parser.LITERAL, parser.NOT_LITERAL) and value >= 128)
            or (kind is parser.RANGE and value[1] >= 128)
            for kind, value in av
        )
    return False


def _stands(node: Any, flags: int, negative: bool, sample: str, candidate: str) -> bool:
    """Whether ``candidate`` is taken by the part wherever ``sample`` is (and only there,
    in a negative lookaround)."""
    compiled = _node_pattern(node, flags)
    takes_sample = compiled.fullmatch(sample) is not None
    takes_candidate = compiled.fullmatch(candidate) is not None
    return takes_sample == takes_candidate if negative else takes_candidate or not takes_sample
