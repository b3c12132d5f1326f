"""The extender's decisions on a worker thread, its cache written only between them.

Why (issue 27, item 11): a 5,000-node filter is ~100 ms of pure Python. Taking turns
(:mod:`kubescale.runtime.compute_turns`) keeps a burst of filters from running back to back on
the serving loop, but each one still holds the loop for its whole computation: the webhook and
``/healthz`` waited up to one filter (300 ms p50 under a 32-client flood on a loaded machine).
On a thread of its own the computation holds the GIL only for CPython's switch interval (5 ms)
at a time while the serving loop wants it, so the loop answers between slices.

The decision reads the :class:`~.cluster_cache.ClusterCache` and the eviction memory, which the
serving loop writes (informer events, the descheduler's usage readings and evictions). Nothing
may write them while a decision reads, and nothing may block the loop to wait for one, so
:class:`DeferredWrites` queues every write the loop makes while a decision runs and applies
them, in order, on the loop as soon as it has returned. Decisions run one at a time on a
one-thread executor (the turns already serialize them; the executor keeps that true when a
request is cancelled while its decision still runs).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any, TypeVar

from kubescale.coordination.eviction_memory import DEFAULT_MAX_ENTRIES, EvictionMemory
from kubescale.objects.pod import Pod

__all__ = ["DecisionThread", "DeferredMemory", "DeferredUsage", "DeferredWrites"]

T = TypeVar("T")


class DeferredWrites:
    """Writes of the serving loop, applied at once unless a decision is reading (then queued
    and applied in order when it has returned). Used on the loop's thread only."""

    def __init__(self) -> None:
        self._reading = 0
        self._pending: deque[Callable[[], None]] = deque()
        self.deferred = 0
        """Writes that had to wait for a decision (a counter for tests and metrics)."""

    @property
    def reading(self) -> bool:
        return self._reading > 0

    def apply(self, write: Callable[[], None]) -> None:
        if self._reading or self._pending:
            self.deferred += 1
            self._pending.append(write)
            return
        write()

    def wrap(self, handler: Callable[[Any], None]) -> Callable[[Any], None]:
        """``handler`` (an informer handler), deferred while a decision reads."""

        def deferred(obj: Any) -> None:
            self.apply(lambda: handler(obj))

        return deferred

    def begin(self) -> None:
        self._reading += 1

    def end(self) -> None:
        self._reading -= 1
        while not self._reading and self._pending:
            self._pending.popleft()()


class DeferredUsage:
    """The cache's :class:`~kubescale.coordination.descheduling_board.UsageReceiver`
    side, through :class:`DeferredWrites`."""

    def __init__(self, receiver: Any, writes: DeferredWrites) -> None:
        self._receiver = receiver
        self._writes = writes

    def set_node_metrics(self, usage: Mapping[str, Mapping[str, int]] | None) -> None:
        self._writes.apply(lambda: self._receiver.set_node_metrics(usage))

    def set_metric_values(self, query: str, values: Mapping[str, float] | None) -> None:
        self._writes.apply(lambda: self._receiver.set_metric_values(query, values))


class DeferredMemory(EvictionMemory):
    """The eviction memory whose :meth:`record` (the descheduler's evictions) goes through
    :class:`DeferredWrites`."""

    def __init__(
        self,
        *,
        duration: timedelta,
        writes: DeferredWrites,
        max_entries: int = DEFAULT_MAX_ENTRIES,
    ) -> None:
        super().__init__(duration=duration, max_entries=max_entries)
        self._writes = writes

    def record(self, pod: Pod, node: str, now: datetime) -> None:
        self._writes.apply(lambda: EvictionMemory.record(self, pod, node, now))


class DecisionThread:
    """Runs one decision at a time on a worker thread, with the writes deferred meanwhile."""

    def __init__(self, writes: DeferredWrites) -> None:
        self.writes = writes
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="extender")

    async def run(self, decision: Callable[[], T]) -> T:
        """``decision()`` on the worker; a cancelled caller leaves it to finish, the writes
        deferred until it has."""
        loop = asyncio.get_running_loop()
        self.writes.begin()
        future = loop.run_in_executor(self._executor, decision)
        try:
            return await asyncio.shield(future)
        finally:
            if future.done():
                self.writes.end()
            else:
                future.add_done_callback(lambda _f: self.writes.end())

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
