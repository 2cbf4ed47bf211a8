"""Mutation score of the modules that decide what is true (``make mutants``).

Each mutant is one small deliberate bug in one function: a comparison turned round, ``and``
for ``or``, a ``not`` dropped, a number moved by one, a constant flipped, a call statement
removed, a returned value replaced by ``None``. The whole suite runs once, unmutated, to learn
which tests call each function and how long each takes. Each mutant then runs the tests that
call its function: those of the module's own test file (``tests/test_<module>*.py``), then
the fastest of the others up to ``--budget`` seconds of their measured time. It stops at the
first failure; a mutant that no test notices *survives*.

Speed comes from loading everything once: this process imports the project and the tests,
then forks one child per mutant. The child swaps the mutated function's code object into
the live function (so every ``from x import f`` sees the bug too), runs pytest in-process
and exits with pytest's status. A mutant that runs past its time limit counts as killed
(an endless loop is a visible failure).

String literals are not mutated: findings are asserted by their stable codes, pointers and
paths, and the exact wording of messages is checked where it is a contract.

Survivors that are equivalent to the original (no input can tell them apart) are listed in
docs/method/mutation-score.md, with the reason; this script reads that table and
reports them apart. It exits 1 when any module kills under 90% of its non-equivalent
mutants or leaves a survivor that is not listed.

    python benchmarks/mutation_score.py                    # every module
    python benchmarks/mutation_score.py --module verify    # one (a suffix of its path)
    python benchmarks/mutation_score.py --jobs 2 --json mutants.json
"""

from __future__ import annotations

import argparse
import ast
import copy
import importlib
import inspect
import json
import os
import select
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import CodeType, FunctionType, ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MUTATION_PAGE = ROOT / "docs" / "method" / "mutation-score.md"
GOAL = 0.90

# The modules under test, each with the functions in scope (None: all of them).
SCOPE: dict[str, tuple[str, ...] | None] = {
    "ledger/formats/jsonio.py": None,
    "ledger/measures/verdicts.py": None,
    "ledger/evidence/documents.py": None,
    "ledger/promotion/policy.py": None,
    "ledger/evidence/gate.py": None,
    "ledger/promotion/_evaluation.py": None,
    "ledger/evidence/manifest.py": None,
    "ledger/verification/_verify.py": None,
    "ledger/signatures/_bundles.py": None,
    # derive's recomputation: what verify re-derives and compares with the stated artifact
    # (not derive_into, which writes a new one).
    "ledger/derivation/_derive.py": (
        "_close",
        "first_difference",
        "_change",
        "_cells",
        "_values",
        "_intervals",
        "_identity",
        "_prompt_evidence",
        "_match_failures",
        "_limitations",
        "derive",
        "_paired_cells",
        "_derivation",
        "_unpaired",
        "_some_cells",
        "_metric_values",
        "_sources",
        "_label",
        "_os_document",
        "_mid",
        "_ab_document",
        "recompute",
        "_at",
    ),
    # The detectors (the rules' matching), not the placeholder bookkeeping around them.
    "ledger/sanitizer/_sanitizer.py": (
        "Detector",
        "_detector",
        "load_rules",
        "key_words",
        "Sanitizer.secret_key",
        "Sanitizer._gpu_key",
        "Sanitizer._allowed",
        "Sanitizer._masked_uuid",
        "Sanitizer.detect",
        "Sanitizer._detect",
        "Sanitizer._unlisted",
        "_Hits.add",
        "_plausible_endpoint",
    ),
}
# Every test may kill a mutant; each mutant runs the tests that call its function (the
# module's own test file, then the fastest others within the budget). Left out: tests that
# compare clocks, build llama.cpp or a wheel, run the whole demo, hash two gigabytes or
# verify the attacker's 1,496 mutations of evidence/; none of them is the only check of a
# rule.
TESTS = ("tests",)
EXCLUDE = (
    "tests/test_accuracy.py",
    "tests/test_demo.py",
    "tests/test_llama_server.py",
    "tests/test_packaging.py",
    "tests/test_attacker_corpus.py",
    "tests/test_verify_edges.py::test_two_gigabyte_json_is_hashed_not_parsed",
)

_COMPARE_SWAP: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_BINOP_SWAP: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Mult,
    ast.Mod: ast.Mult,
    ast.BitOr: ast.BitAnd,
    ast.BitAnd: ast.BitOr,
}


@dataclass
class Mutant:
    module: str
    qualname: str
    original: str
    mutated: str
    line: int
    occurrence: int
    # Where it sits: the path of AST indices from the module, so it can be rebuilt in a child.
    path: tuple[tuple[str, int | None], ...]
    kind: str
    variant: int
    """Which of the node's variants (``_variants``) this mutant is."""
    status: str = "pending"
    seconds: float = 0.0
    tests: int = 0
    ran: bool = False
    exit: int | None = None
    killed_by: str = ""

    @property
    def key(self) -> str:
        suffix = f" #{self.occurrence}" if self.occurrence > 1 else ""
        return f"{self.qualname}: {self.original} -> {self.mutated}{suffix}"


def _short(node: ast.AST) -> str:
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= 70 else text[:67] + "..."


def _variants(node: ast.AST) -> Iterator[tuple[str, ast.AST]]:
    """(kind, replacement) for each mutation of this node alone."""
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            swap = _COMPARE_SWAP.get(type(op))
            if swap is not None:
                new = copy.deepcopy(node)
                new.ops[i] = swap()
                yield "compare", new
    elif isinstance(node, ast.BoolOp):
        new = copy.deepcopy(node)
        new.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        yield "boolean", new
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield "not", copy.deepcopy(node.operand)
    elif isinstance(node, ast.BinOp | ast.AugAssign):
        swap = _BINOP_SWAP.get(type(node.op))
        if swap is not None:
            new = copy.deepcopy(node)
            new.op = swap()
            yield "arithmetic", new
    elif isinstance(node, ast.Constant) and not isinstance(node.value, str | bytes):
        value = node.value
        if isinstance(value, bool):
            yield "constant", ast.Constant(not value)
        elif isinstance(value, int):
            yield "constant", ast.Constant(value + 1)
            if value != 0:
                yield "constant", ast.Constant(0)
        elif isinstance(value, float):
            yield "constant", ast.Constant(value * 2 if value else 1.0)
    elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call | ast.Await):
        yield "removed call", ast.Pass()
    elif isinstance(node, ast.Return) and node.value is not None:
        if not (isinstance(node.value, ast.Constant) and node.value.value is None):
            yield "return None", ast.Return(ast.Constant(None))
    elif isinstance(node, ast.Break):
        yield "loop", ast.Continue()
    elif isinstance(node, ast.Continue):
        yield "loop", ast.Break()


def _skip(node: ast.AST) -> bool:
    # Docstrings, annotations and type-checking blocks do not run.
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return True
    return isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"


def _walk(
    node: ast.AST, path: tuple[tuple[str, int | None], ...]
) -> Iterator[tuple[ast.AST, tuple[tuple[str, int | None], ...]]]:
    yield node, path
    for name, value in ast.iter_fields(node):
        if name in {"annotation", "returns", "decorator_list", "type_comment"}:
            continue
        if isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, ast.AST) and not _skip(item):
                    yield from _walk(item, (*path, (name, i)))
        elif isinstance(value, ast.AST):
            yield from _walk(value, (*path, (name, None)))


def _functions(
    tree: ast.Module,
) -> Iterator[tuple[str, ast.AST, tuple[tuple[str, int | None], ...]]]:
    """(qualname, node, path) of each top-level function and method."""
    for i, node in enumerate(tree.body):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node.name, node, (("body", i),)
        elif isinstance(node, ast.ClassDef):
            for j, item in enumerate(node.body):
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    yield f"{node.name}.{item.name}", item, (("body", i), ("body", j))


def _in_scope(qualname: str, names: tuple[str, ...] | None) -> bool:
    if names is None:
        return True
    return any(qualname == n or qualname.startswith(n + ".") for n in names)


_SOURCES: dict[str, str] = {}
"""Each module's text as it was when its mutants were made (edits during a run change nothing)."""


def _source(module: str) -> str:
    if module not in _SOURCES:
        _SOURCES[module] = (ROOT / module).read_text()
    return _SOURCES[module]


def mutants_of(module: str, names: tuple[str, ...] | None) -> list[Mutant]:
    tree = ast.parse(_source(module), module)
    found: list[Mutant] = []
    seen: dict[tuple[str, str, str], int] = {}
    for qualname, function, base in _functions(tree):
        if not _in_scope(qualname, names):
            continue
        assert isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
        for i, statement in enumerate(function.body):
            if _skip(statement):
                continue
            for node, path in _walk(statement, (*base, ("body", i))):
                for index, (kind, replacement) in enumerate(_variants(node)):
                    original, mutated = _short(node), _short(replacement)
                    if original == mutated:
                        continue
                    k = (qualname, original, mutated)
                    seen[k] = seen.get(k, 0) + 1
                    found.append(
                        Mutant(
                            module=module,
                            qualname=qualname,
                            original=original,
                            mutated=mutated,
                            line=getattr(node, "lineno", 0),
                            occurrence=seen[k],
                            path=path,
                            kind=kind,
                            variant=index,
                        )
                    )
    return found


def _locate(tree: ast.AST, path: tuple[tuple[str, int | None], ...]) -> tuple[Any, str, int | None]:
    parent: Any = tree
    for name, index in path[:-1]:
        parent = getattr(parent, name) if index is None else getattr(parent, name)[index]
    name, index = path[-1]
    return parent, name, index


def _mutated_tree(mutant: Mutant) -> ast.Module:
    tree = ast.parse(_source(mutant.module), mutant.module)
    parent, name, index = _locate(tree, mutant.path)
    node = getattr(parent, name) if index is None else getattr(parent, name)[index]
    _, replacement = list(_variants(node))[mutant.variant]
    ast.copy_location(replacement, node)
    ast.fix_missing_locations(replacement)
    if index is None:
        setattr(parent, name, replacement)
    else:
        getattr(parent, name)[index] = replacement
    return tree


def _code_named(code: CodeType, qualname: str) -> CodeType | None:
    for const in code.co_consts:
        if isinstance(const, CodeType):
            if const.co_qualname == qualname:
                return const
            inner = _code_named(const, qualname)
            if inner is not None:
                return inner
    return None


def _live_function(module: ModuleType, qualname: str) -> FunctionType:
    owner: Any = module
    for part in qualname.split("."):
        owner = inspect.getattr_static(owner, part)
    if isinstance(owner, staticmethod | classmethod):
        owner = owner.__func__
    if isinstance(owner, property):
        owner = owner.fget
    owner = inspect.unwrap(owner)
    assert isinstance(owner, FunctionType), (qualname, owner)
    return owner


def _import(module: str) -> ModuleType:
    return importlib.import_module(module.removesuffix(".py").replace("/", "."))


def _swap_code(module: str, tree: ast.Module, qualnames: list[str]) -> None:
    compiled = compile(tree, str(ROOT / module), "exec")
    live = _import(module)
    for qualname in qualnames:
        code = _code_named(compiled, qualname)
        assert code is not None, qualname
        _live_function(live, qualname).__code__ = code


def apply(mutant: Mutant) -> None:
    """Puts the mutant into the running process: the live function gets the mutated code."""
    _swap_code(mutant.module, _mutated_tree(mutant), [mutant.qualname])


HITS: set[tuple[str, str]] = set()
"""Functions called since the last test began, while coverage is being collected."""


def instrument(module: str) -> None:
    """Makes every function of the module note its call in HITS (for choosing tests)."""
    tree = ast.parse(_source(module), module)
    qualnames = []
    for qualname, function, _ in _functions(tree):
        assert isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
        note = ast.parse(f"_MUTATION_HITS_.add(({module!r}, {qualname!r}))").body[0]
        function.body.insert(0, ast.copy_location(note, function.body[0]))
        qualnames.append(qualname)
    ast.fix_missing_locations(tree)
    _import(module).__dict__["_MUTATION_HITS_"] = HITS
    _swap_code(module, tree, qualnames)


def _pytest_args(tests: list[str], basetemp: Path) -> list[str]:
    args = ["-x", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", f"--basetemp={basetemp}"]
    args += [f"--deselect={d}" for d in EXCLUDE if "::" in d]
    args += [f"--ignore={d}" for d in EXCLUDE if "::" not in d]
    return [*args, *tests]


def _quiet() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)


class _FirstFailure:
    """A pytest plugin: writes the id of the first failing test (what killed the mutant)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.failed and not self.path.exists():
            self.path.write_text(f"{report.nodeid} ({report.when})")


def _fork(mutant: Mutant | None, tests: list[str], basetemp: Path, failure: Path) -> int:
    pid = os.fork()
    if pid == 0:
        status = 3
        try:
            import pytest

            _quiet()
            if mutant is not None:
                apply(mutant)
            plugins = [_FirstFailure(failure)]
            status = int(pytest.main(_pytest_args(tests, basetemp), plugins=plugins))
        finally:
            os._exit(status)
    return pid


class _Coverage:
    """A pytest plugin: which in-scope functions each test calls, and how long it takes."""

    def __init__(self) -> None:
        self.tests: dict[str, list[str]] = {}
        self.seconds: dict[str, float] = {}
        self.failed: list[str] = []

    def pytest_runtest_protocol(self, item: Any) -> Iterator[None]:
        HITS.clear()
        began = time.perf_counter()
        yield
        self.seconds[item.nodeid] = time.perf_counter() - began
        for module, qualname in HITS:
            self.tests.setdefault(f"{module}::{qualname}", []).append(item.nodeid)

    pytest_runtest_protocol.hookwrapper = True  # type: ignore[attr-defined]

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.failed:
            self.failed.append(report.nodeid)


def coverage(modules: list[str], work: Path) -> dict[str, Any]:
    """Runs the tests once, unmutated, in a child: the tests of each function, their times."""
    out = work / "coverage.json"
    pid = os.fork()
    if pid == 0:
        status = 3
        try:
            import pytest

            _quiet()
            for module in modules:
                instrument(module)
            plugin = _Coverage()
            args = [a for a in _pytest_args(list(TESTS), work / "coverage") if a != "-x"]
            status = int(pytest.main(args, plugins=[plugin]))
            out.write_text(json.dumps(vars(plugin)))
        finally:
            os._exit(status)
    status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    result: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {}
    if status != 0 or not result:
        failed = ", ".join(result.get("failed", [])) or f"pytest exit {status}"
        raise SystemExit(f"the tests must pass without any mutant first: {failed}")
    return result


def _equivalent() -> dict[tuple[str, str], str]:
    """The documented table of equivalent mutants: (module, mutant key) -> reason."""
    table: dict[tuple[str, str], str] = {}
    text = MUTATION_PAGE.read_text()
    start = text.find("## Equivalent mutants")
    if start < 0:
        return table
    for line in text[start:].splitlines()[1:]:
        if line.startswith("#"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`ledger/"):
            table[(cells[0].strip("`"), cells[1].strip("`").replace("\\|", "|"))] = cells[2]
    return table


def run(
    modules: list[str],
    jobs: int,
    timeout_factor: float,
    budget: float,
    out: Path | None,
    chosen: str = "",
    cached: Path | None = None,
    resume: Path | None = None,
) -> int:
    import pytest

    # Import everything once, here, so that every child starts warm. Workers of verify's
    # pool would be other processes; one job keeps every call in the process under test.
    os.environ["LEDGER_JOBS"] = "1"
    for module in modules:
        _import(module)
    with open(os.devnull, "w") as quiet:
        saved = sys.stdout
        sys.stdout = quiet
        try:
            pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", *TESTS])
        finally:
            sys.stdout = saved
    work = Path(tempfile.mkdtemp(prefix="mutants-"))
    # Campaigns that fixtures build are built once, by the unmutated code (tests/conftest.py).
    (work / "fixtures").mkdir()
    os.environ["ANVIL_TEST_FIXTURE_CACHE"] = str(work / "fixtures")
    equivalent = _equivalent()
    # Mutants an earlier run killed stay killed: tests were only added since.
    earlier = {
        (r["module"], r["key"]): r["status"]
        for r in (json.loads(resume.read_text()) if resume else [])
        if r["status"] in {"killed", "timeout"}
    }
    results: list[Mutant] = []
    failed = False
    try:
        began = time.monotonic()
        if cached is not None and cached.exists():
            covered = json.loads(cached.read_text())
        else:
            covered = coverage(list(SCOPE), work)
            if cached is not None:
                cached.write_text(json.dumps(covered))
        print(
            f"coverage: {len(covered['seconds'])} tests in {time.monotonic() - began:.0f} s",
            flush=True,
        )
        seconds: dict[str, float] = covered["seconds"]
        for module in modules:
            mutants = [m for m in mutants_of(module, SCOPE[module]) if chosen in m.key]
            for m in mutants:
                m.status = earlier.get((m.module, m.key), "pending")
            again = sum(m.status == "pending" for m in mutants)
            print(f"{module}: {len(mutants)} mutants, {again} to run", flush=True)
            _run_all(mutants, covered["tests"], seconds, jobs, timeout_factor, budget, work)
            results += mutants
            failed |= _summary(module, mutants, equivalent)
            if out is not None:
                _write_results(out, results)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    _table(modules, results, equivalent)
    return 1 if failed else 0


def _write_results(out: Path, results: list[Mutant]) -> None:
    rows = [
        {"module": m.module, "key": m.key, "line": m.line, "kind": m.kind,
         "status": m.status, "tests": m.tests, "killed_by": m.killed_by or None,
         "exit": m.exit,
         "seconds": round(m.seconds, 2)}
        for m in results
    ]  # fmt: skip
    out.write_text(json.dumps(rows, indent=1) + "\n")


def _within(module: str, tests: list[str], seconds: dict[str, float], budget: float) -> list[str]:
    """The module's own tests (``tests/test_<name>*.py``), then the fastest others whose
    measured times add up to the budget; put back together by file in the suite's order:
    interleaving files would tear down and rebuild every module-scoped fixture (a campaign
    run) between two tests."""
    own = f"tests/test_{Path(module).stem.lstrip('_')}"
    chosen = [t for t in tests if t.startswith(own)]
    spent = 0.0
    for test in tests:
        if test in chosen:
            continue
        if chosen and spent + seconds[test] > budget:
            break
        chosen.append(test)
        spent += seconds[test]
    files = {t.split("::")[0]: rank for rank, t in reversed(list(enumerate(chosen)))}
    order = {t: i for i, t in enumerate(seconds)}  # the order the suite ran in
    return sorted(chosen, key=lambda t: (files[t.split("::")[0]], order[t]))


@dataclass
class _Job:
    mutant: Mutant | None
    tests: list[str]
    deadline: float
    code: int = 0
    seconds: float = 0.0
    timed_out: bool = False
    killed_by: str = ""


def _execute(jobs: list[_Job], parallel: int, work: Path, progress: bool) -> None:
    """Runs each job in its own forked child, ``parallel`` at a time, within its deadline."""
    pending = list(enumerate(jobs))
    running: dict[int, tuple[_Job, float, Path]] = {}
    done = 0
    while pending or running:
        while pending and len(running) < parallel:
            i, job = pending.pop(0)
            temp = work / f"m{i}"
            failure = work / f"m{i}.failed"
            failure.unlink(missing_ok=True)
            running[_fork(job.mutant, job.tests, temp, failure)] = (job, time.monotonic(), temp)
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            now = time.monotonic()
            for child, (job, began, _) in running.items():
                if now - began > job.deadline and not job.timed_out:
                    os.kill(child, signal.SIGKILL)
                    job.timed_out = True
            select.select([], [], [], 0.05)
            continue
        job, began, temp = running.pop(pid)
        job.seconds = time.monotonic() - began
        job.code = os.waitstatus_to_exitcode(status)
        failure = temp.with_name(temp.name + ".failed")
        if failure.exists():
            job.killed_by = failure.read_text()
        shutil.rmtree(temp, ignore_errors=True)
        if job.code in {4, 5}:
            what = job.mutant.key if job.mutant else "the unmutated code"
            raise SystemExit(f"pytest could not run the tests of {what} (exit {job.code})")
        done += 1
        if progress and done % 50 == 0:
            print(f"  {done}/{len(jobs)}", flush=True)


def _run_all(
    mutants: list[Mutant],
    tests_of: dict[str, list[str]],
    seconds: dict[str, float],
    parallel: int,
    timeout_factor: float,
    budget: float,
    work: Path,
) -> None:
    jobs: list[_Job] = []
    for mutant in mutants:
        if mutant.status != "pending":
            continue
        tests = sorted(tests_of.get(f"{mutant.module}::{mutant.qualname}", []),
                       key=lambda t: (seconds[t], t))  # fmt: skip
        tests = _within(mutant.module, tests, seconds, budget)
        mutant.tests = len(tests)
        if not tests:
            mutant.status = "not covered"
            continue
        deadline = 10.0 + timeout_factor * sum(seconds[t] for t in tests)
        jobs.append(_Job(mutant, tests, deadline))
    _execute(jobs, parallel, work, progress=True)
    # A child past its deadline may only have met slow fixtures: time the same tests without
    # the mutant, then give the mutant three times that. Only then is a timeout a kill.
    slow = [job for job in jobs if job.timed_out]
    if slow:
        clean = {tuple(job.tests): _Job(None, job.tests, 600.0) for job in slow}
        _execute(list(clean.values()), parallel, work, progress=False)
        for job in slow:
            reference = clean[tuple(job.tests)]
            if reference.code != 0:
                raise SystemExit(f"tests fail without a mutant: {reference.killed_by}")
            job.deadline = 10.0 + 3 * reference.seconds
            job.timed_out = False
        _execute(slow, parallel, work, progress=False)
    for job in jobs:
        mutant = job.mutant
        assert mutant is not None
        mutant.ran = True
        mutant.seconds = job.seconds
        mutant.exit, mutant.killed_by = job.code, job.killed_by
        if job.timed_out:
            mutant.status = "timeout"
        elif job.code == 0:
            mutant.status = "survived"
        else:
            mutant.status = "killed"
    for mutant in mutants:
        if not mutant.ran and mutant.status != "not covered":
            continue
        if mutant.status in {"survived", "not covered"} or len(mutants) <= 5:
            by = mutant.killed_by
            print(f"  {mutant.status} ({mutant.seconds:.1f} s) {by}  "
                  f"{mutant.module}:{mutant.line}  {mutant.key}", flush=True)  # fmt: skip


def _counts(
    mutants: list[Mutant], module: str, equivalent: dict[tuple[str, str], str]
) -> tuple[int, list[Mutant], list[Mutant], float]:
    killed = sum(m.status in {"killed", "timeout"} for m in mutants)
    survivors = [m for m in mutants if m.status in {"survived", "not covered"}]
    listed = [m for m in survivors if (module, m.key) in equivalent]
    unlisted = [m for m in survivors if (module, m.key) not in equivalent]
    scored = len(mutants) - len(listed)
    return killed, listed, unlisted, (killed / scored if scored else 1.0)


def _summary(module: str, mutants: list[Mutant], equivalent: dict[tuple[str, str], str]) -> bool:
    killed, listed, unlisted, score = _counts(mutants, module, equivalent)
    print(
        f"{module}: {killed} killed, {len(listed)} equivalent, {len(unlisted)} survived "
        f"of {len(mutants)}: {score:.1%}",
        flush=True,
    )
    return score < GOAL or bool(unlisted)


def _table(
    modules: list[str], results: list[Mutant], equivalent: dict[tuple[str, str], str]
) -> None:
    print()
    print(f"{'module':32} {'mutants':>7} {'killed':>7} {'equiv.':>7} {'survived':>8} {'score':>7}")
    for module in modules:
        mutants = [m for m in results if m.module == module]
        killed, listed, unlisted, score = _counts(mutants, module, equivalent)
        print(
            f"{module:32} {len(mutants):7} {killed:7} {len(listed):7} {len(unlisted):8} "
            f"{score:7.1%}"
        )
    survivors = {(m.module, m.key) for m in results if m.status in {"survived", "not covered"}}
    unlisted = [m for m in results if (m.module, m.key) in survivors - set(equivalent)]
    if unlisted:
        print("\nsurvivors not listed as equivalent:")
        for m in unlisted:
            print(f"  {m.module}:{m.line}  `{m.key}`")
    stale = {(mod, key) for mod, key in set(equivalent) - survivors if mod in modules}
    if stale:
        print("\nlisted as equivalent but killed (remove them from docs/method/mutation-score.md):")
        for mod, key in sorted(stale):
            print(f"  {mod}  `{key}`")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--module", action="append", default=[], help="part of a module's path")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--timeout-factor", type=float, default=4.0)
    parser.add_argument(
        "--budget",
        type=float,
        default=5.0,
        help="seconds of measured test time per mutant (the fastest covering tests first)",
    )
    parser.add_argument(
        "--coverage", type=Path, help="keep which tests call what here, and reuse it if present"
    )
    parser.add_argument(
        "--resume",
        type=Path,
        help="a --json file of an earlier run: run only the mutants it did not kill",
    )
    parser.add_argument("--mutant", help="only the mutants whose key contains this text")
    parser.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    parser.add_argument("--json", type=Path, help="write every mutant's result here")
    args = parser.parse_args()
    modules = [m for m in SCOPE if not args.module or any(s in m for s in args.module)]
    if not modules:
        print(f"no module matches {args.module}; choose from: {', '.join(SCOPE)}")
        return 2
    if args.list:
        for module in modules:
            for m in mutants_of(module, SCOPE[module]):
                print(f"{module}:{m.line}  {m.key}")
        return 0
    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT))
    return run(
        modules,
        args.jobs,
        args.timeout_factor,
        args.budget,
        args.json,
        args.mutant or "",
        args.coverage,
        args.resume,
    )


if __name__ == "__main__":
    sys.exit(main())
