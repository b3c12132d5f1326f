"""Injectable time.

Nothing in kubescale's logic reads wall time or sleeps on it directly: it asks a :class:`Clock`.
Production uses :class:`RealClock`; tests and the simulator use :class:`VirtualClock`, whose time
only moves when told to, so an hour of loop intervals, lease expiries or half-life decay runs in
milliseconds and is the same every run.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from kubescale.base.tasks import cancel_and_wait


class Clock(Protocol):
    """The one source of time for logic."""

    def now(self) -> datetime:
        """Wall time as an aware UTC datetime (what Kubernetes timestamps are made of)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back; only differences mean anything."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait until ``seconds`` have passed on this clock."""
        ...


class RealClock:
    """The machine's clocks."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class VirtualClock:
    """A clock that moves only when :meth:`advance` (or :meth:`set`) is called.

    Sleepers are woken in deadline order. After each batch of wake-ups, :meth:`advance` yields
    to the event loop ``settle_rounds`` times so the woken tasks can run their next step (and
    usually go back to sleep on this clock) before time moves on. That is enough for code whose
    steps do not wait on real I/O; code that does real I/O between sleeps should be driven step
    by step (the simulator calls ``run_once(now)`` itself rather than relying on sleepers).
    """

    def __init__(
        self,
        start: datetime | None = None,
        *,
        monotonic_start: float = 1000.0,
        settle_rounds: int = 20,
    ) -> None:
        if start is None:
            start = datetime(2026, 1, 1, tzinfo=UTC)
        if start.tzinfo is None:
            raise ValueError("VirtualClock start must be timezone-aware")
        self._wall_start = start
        self._mono_start = monotonic_start
        self._elapsed = 0.0
        self._settle_rounds = settle_rounds
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now(self) -> datetime:
        return self._wall_start + timedelta(seconds=self._elapsed)

    def monotonic(self) -> float:
        return self._mono_start + self._elapsed

    @property
    def elapsed(self) -> float:
        """Seconds advanced since the clock was made."""
        return self._elapsed

    @property
    def sleepers(self) -> int:
        """How many sleeps are pending (cancelled ones excluded)."""
        return sum(1 for _, _, fut in self._sleepers if not fut.done())

    def next_deadline(self) -> float | None:
        """Elapsed-seconds value at which the earliest pending sleeper wakes, if any."""
        self._drop_cancelled()
        return self._sleepers[0][0] if self._sleepers else None

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._elapsed + seconds, next(self._seq), fut))
        await fut

    async def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, waking every sleeper due on the way, in order."""
        if seconds < 0:
            raise ValueError("a clock cannot go back")
        target = self._elapsed + seconds
        await self._settle()
        while True:
            self._drop_cancelled()
            if not self._sleepers or self._sleepers[0][0] > target:
                break
            deadline = self._sleepers[0][0]
            self._elapsed = max(self._elapsed, deadline)
            while self._sleepers and self._sleepers[0][0] <= self._elapsed:
                _, _, fut = heapq.heappop(self._sleepers)
                if not fut.done():
                    fut.set_result(None)
            await self._settle()
        self._elapsed = target

    async def _settle(self) -> None:
        for _ in range(self._settle_rounds):
            await asyncio.sleep(0)

    def _drop_cancelled(self) -> None:
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)


async def sleep_or_stop(
    clock: Clock,
    seconds: float,
    stop: asyncio.Event,
    *,
    also: asyncio.Future[Any] | None = None,
) -> bool:
    """Sleep ``seconds`` on ``clock``, or less if ``stop`` is set (or ``also`` finishes)
    meanwhile; ``True`` if stopped.

    The one way periodic work in kubescale waits (loops, certificate watcher): it wakes at once
    on shutdown, leaves no pending sleeper behind, and never swallows a cancellation of the
    calling task (:func:`kubescale.base.tasks.cancel_and_wait`). ``also`` belongs to the caller
    and is not cancelled here.
    """
    if stop.is_set():
        return True
    sleeper = asyncio.ensure_future(clock.sleep(seconds))
    stopper = asyncio.ensure_future(stop.wait())
    waiters: set[asyncio.Future[Any]] = {sleeper, stopper}
    if also is not None:
        waiters.add(also)
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        await cancel_and_wait(sleeper, stopper)
    return stop.is_set()
