"""What the database's check of record bounds costs a build: ``ledger.database.build`` of a
raw campaign of --requests requests (publish_bench's generator: every request as the runner
records it), with the check and with it left out, best of --repeat each, in one process.

The check reads the bounds of every loaded number from the run schemas and looks for the
first record beyond one (``ledger/database/_record_bounds.py``): the price of verify and
the database agreeing on what a valid record is.

    python benchmarks/bounds_bench.py [--requests 250000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from publish_bench import CAMPAIGN, generate

from ledger.database import _database as database


def _best(folder: Path, repeat: int, check: Callable[..., Any]) -> float:
    database._refuse_out_of_bounds = check
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        database.build([folder]).close()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=250_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp) / CAMPAIGN
        folder.mkdir()
        size = generate(folder, args.requests, 1000)
        real = database._refuse_out_of_bounds
        without = _best(folder, args.repeat, lambda *_: None)
        checked = _best(folder, args.repeat, real)
        database._refuse_out_of_bounds = real
    print(
        f"build of {args.requests:,} requests ({size / 1e6:,.0f} MB): {without:.3f} s without "
        f"the bounds check, {checked:.3f} s with it: {checked / without:.3f}x"
    )


if __name__ == "__main__":
    main()
