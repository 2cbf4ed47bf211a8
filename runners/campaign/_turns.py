"""Arms taking turns one request at a time (a plan's ``interleave = true``).

Run one after another, each arm meets whatever the host and the endpoint were doing while
it ran: a neighbour's burst, a CPU's clock, a cache warming. On a shared host such spells
move a run's medians by more than its own interval admits (docs/guides/derive.md,
"Interleaved arms", measured by benchmarks/ab_power.py). Taking turns, request by request,
spreads a spell over every arm alike, and the comparison sees what differs between arms.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator, Iterable

__all__ = ["Turns"]


class Turns:
    """Arms taking turns in rounds: each arm waits for its turn to send one request and
    hands the turn on when its request has ended. Round r starts r places further along
    the arms' order (a, b, c; b, c, a; c, a, b; ...), so the first turn passes from arm to
    arm: on one endpoint the request before a turn can leave it warmer (the same prompt
    just read, a cache just filled), and no arm is always the one after another. An arm
    whose cell is done leaves; until it has, it keeps its place."""

    def __init__(self, names: Iterable[str]) -> None:
        self._order = list(names)
        self._round = 0
        self._queue = collections.deque(self._order)
        """The arms still to take this round's turn, the one whose turn it is first."""
        self._changed = asyncio.Condition()

    @property
    def order(self) -> tuple[str, ...]:
        """The arms still taking turns, in their order."""
        return tuple(self._order)

    def _next_round(self) -> None:
        self._round += 1
        if self._order:
            shift = self._round % len(self._order)
            self._queue = collections.deque(self._order[shift:] + self._order[:shift])

    def _handed_on(self, name: str) -> None:
        if self._queue and self._queue[0] == name:
            self._queue.popleft()
        if not self._queue:
            self._next_round()

    @contextlib.asynccontextmanager
    async def turn(self, name: str) -> AsyncIterator[None]:
        """Waits for ``name``'s turn; the turn passes on as the block ends (raised or not).

        Raises:
            ValueError: ``name`` is not taking turns.
        """
        if name not in self._order:
            raise ValueError(f"{name!r} is not taking turns")
        async with self._changed:
            await self._changed.wait_for(lambda: bool(self._queue) and self._queue[0] == name)
        try:
            yield
        finally:
            async with self._changed:
                self._handed_on(name)
                self._changed.notify_all()

    async def leave(self, name: str) -> None:
        """``name`` takes no more turns; the others go on in their order."""
        async with self._changed:
            if name not in self._order:
                return
            self._order.remove(name)
            if name in self._queue:
                self._queue.remove(name)
            if not self._queue:
                self._next_round()
            self._changed.notify_all()
