"""The coding-quality tasks: small functions with hidden tests, and running an answer's code.

Each task states a function to write; its hidden tests are never shown to the model. An
answer's first fenced Python block (or its whole text, when it has none) runs in a fresh
interpreter in a temporary folder, with a timeout, CPU, memory and file-size limits, and
every connection refused by an audit hook. This contains an answer that loops, allocates or writes without
end; it is not a sandbox against code written to escape, which a model under test on the
operator's own machine is not expected to be.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

import attrs

__all__ = [
    "TASKS",
    "Task",
    "extract_code",
    "run_hidden_tests",
    "task_named",
]


@attrs.frozen
class Task:
    """One coding task."""

    name: str
    """The function to write."""
    prompt: str
    tests: str
    """Assertions on the function, run after the answer's code."""
    reference: str
    """A correct solution: the tests must pass on it (and the simulated endpoint's answer)."""
    buggy: str
    """A plausible wrong solution: the tests must fail on it."""


def _prompt(signature: str, behaviour: str) -> str:
    return (
        f"Write a Python function `{signature}` that {behaviour} "
        "Reply with one ```python code block holding the function and nothing else."
    )


TASKS: tuple[Task, ...] = (
    Task(
        "is_palindrome",
        _prompt(
            "is_palindrome(s: str) -> bool",
            "returns True when s reads the same forwards and backwards, ignoring case and "
            "every character that is not a letter or a digit.",
        ),
        "assert is_palindrome('A man, a plan, a canal: Panama')\n"
        "assert is_palindrome('')\n"
        "assert not is_palindrome('anvil')\n"
        "assert is_palindrome('No lemon, no melon')\n"
        "assert not is_palindrome('ab1ba2')\n",
        "def is_palindrome(s):\n"
        "    kept = [c.lower() for c in s if c.isalnum()]\n"
        "    return kept == kept[::-1]\n",
        "def is_palindrome(s):\n    return s == s[::-1]\n",
    ),
    Task(
        "fizzbuzz",
        _prompt(
            "fizzbuzz(n: int) -> list[str]",
            "returns the strings for 1 to n: 'Fizz' for multiples of 3, 'Buzz' for multiples "
            "of 5, 'FizzBuzz' for multiples of both, otherwise the number as text.",
        ),
        "assert fizzbuzz(0) == []\n"
        "assert fizzbuzz(5) == ['1', '2', 'Fizz', '4', 'Buzz']\n"
        "assert fizzbuzz(15)[-1] == 'FizzBuzz'\n"
        "assert len(fizzbuzz(100)) == 100\n",
        "def fizzbuzz(n):\n"
        "    out = []\n"
        "    for i in range(1, n + 1):\n"
        "        word = ('Fizz' if i % 3 == 0 else '') + ('Buzz' if i % 5 == 0 else '')\n"
        "        out.append(word or str(i))\n"
        "    return out\n",
        "def fizzbuzz(n):\n"
        "    return ['Fizz' if i % 3 == 0 else 'Buzz' if i % 5 == 0 else str(i)\n"
        "            for i in range(1, n + 1)]\n",
    ),
    Task(
        "merge_intervals",
        _prompt(
            "merge_intervals(intervals: list[list[int]]) -> list[list[int]]",
            "merges overlapping or touching closed intervals and returns them sorted by start.",
        ),
        "assert merge_intervals([]) == []\n"
        "assert merge_intervals([[1, 3], [2, 6], [8, 10], [15, 18]]) == "
        "[[1, 6], [8, 10], [15, 18]]\n"
        "assert merge_intervals([[5, 7], [1, 5]]) == [[1, 7]]\n"
        "assert merge_intervals([[1, 4], [2, 3]]) == [[1, 4]]\n",
        "def merge_intervals(intervals):\n"
        "    merged = []\n"
        "    for start, end in sorted(intervals):\n"
        "        if merged and start <= merged[-1][1]:\n"
        "            merged[-1][1] = max(merged[-1][1], end)\n"
        "        else:\n"
        "            merged.append([start, end])\n"
        "    return merged\n",
        "def merge_intervals(intervals):\n"
        "    merged = []\n"
        "    for start, end in sorted(intervals):\n"
        "        if merged and start < merged[-1][1]:\n"
        "            merged[-1][1] = end\n"
        "        else:\n"
        "            merged.append([start, end])\n"
        "    return merged\n",
    ),
    Task(
        "rle_encode",
        _prompt(
            "rle_encode(s: str) -> str",
            "run-length encodes s as each character followed by the length of its run, "
            "for example 'aaabcc' becomes 'a3b1c2'.",
        ),
        "assert rle_encode('') == ''\n"
        "assert rle_encode('aaabcc') == 'a3b1c2'\n"
        "assert rle_encode('abc') == 'a1b1c1'\n"
        "assert rle_encode('zzzzzzzzzzzz') == 'z12'\n"
        "assert rle_encode('aabaa') == 'a2b1a2'\n",
        "def rle_encode(s):\n"
        "    out = []\n"
        "    i = 0\n"
        "    while i < len(s):\n"
        "        j = i\n"
        "        while j < len(s) and s[j] == s[i]:\n"
        "            j += 1\n"
        "        out.append(f'{s[i]}{j - i}')\n"
        "        i = j\n"
        "    return ''.join(out)\n",
        "def rle_encode(s):\n    return ''.join(f'{c}{s.count(c)}' for c in dict.fromkeys(s))\n",
    ),
    Task(
        "second_largest",
        _prompt(
            "second_largest(values: list[int]) -> int | None",
            "returns the second largest distinct value, or None when there are fewer than "
            "two distinct values.",
        ),
        "assert second_largest([3, 1, 2]) == 2\n"
        "assert second_largest([5, 5, 4]) == 4\n"
        "assert second_largest([7, 7]) is None\n"
        "assert second_largest([]) is None\n"
        "assert second_largest([-1, -3, -2]) == -2\n",
        "def second_largest(values):\n"
        "    distinct = sorted(set(values))\n"
        "    return distinct[-2] if len(distinct) > 1 else None\n",
        "def second_largest(values):\n"
        "    ordered = sorted(values)\n"
        "    return ordered[-2] if len(ordered) > 1 else None\n",
    ),
)

_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)

_HARNESS = """\
import resource, runpy, sys
limit = {limit_s}
resource.setrlimit(resource.RLIMIT_CPU, (limit, limit))
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
def _no_network(event, args):
    # An audit hook cannot be removed by the code it watches.
    if event in ("socket.connect", "socket.getaddrinfo", "socket.bind", "socket.sendto"):
        raise OSError("network access is disabled in the coding check")
sys.addaudithook(_no_network)
namespace = runpy.run_path("solution.py")
globals().update({{k: v for k, v in namespace.items() if not k.startswith("__")}})
exec(compile(open("tests.py").read(), "tests.py", "exec"))
print("all hidden tests passed")
"""


def extract_code(answer: str) -> str:
    """The first fenced Python block of an answer, or the whole answer."""
    match = _FENCE.search(answer)
    return match.group(1) if match else answer


def run_hidden_tests(code: str, task: Task, *, timeout_s: float = 10.0) -> tuple[bool, str]:
    """Runs ``code`` then the task's hidden tests in a fresh interpreter.

    Returns whether every test passed, and a one-line reason.
    """
    with tempfile.TemporaryDirectory(prefix="anvil-coding-") as folder:
        root = Path(folder)
        (root / "solution.py").write_text(code, encoding="utf-8")
        (root / "tests.py").write_text(task.tests, encoding="utf-8")
        (root / "harness.py").write_text(_HARNESS.format(limit_s=max(1, int(timeout_s) + 1)))
        try:
            done = subprocess.run(
                [sys.executable, "-I", "-S", "harness.py"],
                cwd=root,
                env={"PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0"},
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return False, f"timed out after {timeout_s:g} s"
    if done.returncode == 0:
        return True, "all hidden tests passed"
    lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
    return False, (lines[-1] if lines else f"exit status {done.returncode}")[:300]


def task_named(name: str) -> Task | None:
    """The task whose function is ``name``."""
    return next((t for t in TASKS if t.name == name), None)
