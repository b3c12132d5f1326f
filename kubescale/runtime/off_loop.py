"""A loop's CPU-bound decision on a worker thread, its reads and writes on the serving loop.

Why (issue 27, item 11): a control loop's iteration at 1,000 nodes / 30,000 pods (a
descheduling cycle with ``nodeFit``, the cluster autoscaler's snapshot, filter-out-schedulable
and scale-down planner) is seconds of pure Python. On the one event loop that also serves the
webhook, the extender and ``/healthz``, every request waited for the whole iteration: with
descheduling cycles back to back the webhook answered 18 of 600 reviews in 30 s. The loop
runner's passes between iterations only helped between iterations.

:class:`OffLoop` runs the pure part of an iteration on a worker thread of the loop's own.
CPython lets one thread run Python at a time, but a thread that computes hands the GIL over
every switch interval (5 ms) when another thread wants it, so the serving loop answers between
slices of the decision instead of after it. The contract for a call site:

* **read on the loop, decide on the thread**: the decision gets copies taken on the loop's
  thread — ``lister.list()`` (a new list of the cached objects, which informers replace and
  never change in place), ``dict(...)`` of what it looks up, a detached copy of the disruption
  ledger. A worker thread never iterates a live informer cache or any structure the loop
  writes: the loop goes on applying watch events while the decision computes, and the
  decision sees the snapshot it was given, as if it had computed at the instant it started;
* **write on the loop**: the decision returns what to do (a plan, or one request at a time:
  :meth:`OffLoop.drive`) and the loop carries it out, with the Lease checked before each write
  as before (the leader client's gate);
* **one decision at a time per loop**: each :class:`OffLoop` has one worker thread, so the
  state a loop keeps between iterations (request caches, scheduling hints) is never touched by
  two decisions at once;
* **cancellation**: a decision still queued never starts, and its caller gets the
  ``CancelledError`` at once. A decision computing cannot be interrupted (nor could it on the
  loop, before): the caller's ``CancelledError`` is raised (never swallowed) once the decision
  has returned, and its result is dropped — so nothing is written after the cancellation, and
  no decision of a loop is still running when its task has ended (the loop's own state is
  never touched by two threads). The serving loop is free meanwhile.

``run_inline=True`` keeps the decision on the caller's thread (the same calls, no thread): for
callers that want no thread at all.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Generator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, TypeVar

__all__ = ["OffLoop"]

T = TypeVar("T")
Y = TypeVar("Y")
S = TypeVar("S")
R = TypeVar("R")


@dataclass(frozen=True)
class _Step(Generic[Y, R]):
    """One step of a generator decision: what it yielded, or what it returned."""

    done: bool
    request: Y | None = None
    result: R | None = None


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _advance(steps: Generator[Y, S, R], value: S | None, first: bool) -> _Step[Y, R]:
    # StopIteration cannot cross a future (asyncio refuses it): it becomes a _Step here.
    try:
        request = next(steps) if first else steps.send(value)  # type: ignore[arg-type]
    except StopIteration as stop:
        return _Step(done=True, result=stop.value)
    return _Step(done=False, request=request)


class OffLoop:
    """One loop's decisions, one at a time, on a worker thread (module docstring)."""

    def __init__(self, name: str, *, run_inline: bool = False) -> None:
        self.name = name
        self.run_inline = run_inline
        self._executor: ThreadPoolExecutor | None = None
        self._submitted: list[Future[Any]] = []
        """Decisions given to the worker and not seen finished (pruned at each submit)."""
        self.decisions = 0
        """Decisions (or generator steps) started, for tests and metrics."""

    def _worker(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix=f"decide-{self.name}"
            )
        return self._executor

    async def run(self, decision: Callable[[], T]) -> T:
        """``decision()`` on the worker thread; the caller awaits it without holding the
        serving loop. ``decision`` must read only what was copied for it (module docstring)."""
        self.decisions += 1
        if self.run_inline:
            return decision()
        future: Future[T] = self._worker().submit(decision)
        self._submitted = [f for f in self._submitted if not f.done()]
        self._submitted.append(future)
        waiter = asyncio.wrap_future(future)
        try:
            return await asyncio.shield(waiter)
        except asyncio.CancelledError:
            if future.cancel():
                raise  # still queued: it never starts
            # Computing: a thread cannot be interrupted. Wait for its end before the
            # cancellation goes on, so that no decision of this loop runs on after its task has
            # ended (its state is touched by one thread at a time), then drop the result.
            # Before the change the decision ran on the loop, where a cancellation could not
            # interrupt it either; the serving loop is free meanwhile.
            while not waiter.done():
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.wait({waiter})
            if not waiter.cancelled():
                waiter.exception()  # retrieved: a dropped decision's error is not logged
            raise

    async def drive(
        self,
        steps: Generator[Y, S, R],
        act: Callable[[Y], Awaitable[S]],
    ) -> R:
        """Run a generator decision: each step (up to the next request it yields) on the
        worker, each request carried out by ``act`` on the loop and its answer sent back into
        the generator; returns the generator's return value.

        ``act`` runs between two steps, when the generator is not executing: it may refresh
        the copies the generator reads (e.g. the ledger its next step counts)."""
        step: _Step[Y, R] = await self.run(partial(_advance, steps, None, True))
        while not step.done:
            answer = await act(step.request)  # type: ignore[arg-type]
            step = await self.run(partial(_advance, steps, answer, False))
        return step.result  # type: ignore[return-value]

    @property
    def computing(self) -> bool:
        """A decision is running or queued on the worker now."""
        return any(not f.done() for f in self._submitted)

    async def idle(self) -> None:
        """Return once the worker has finished what it was given (a cancelled caller's
        decision included)."""
        loop = asyncio.get_running_loop()
        for submitted in list(self._submitted):
            if submitted.done():
                continue
            finished: asyncio.Future[None] = loop.create_future()

            def wake(_future: Future[Any], finished: asyncio.Future[None] = finished) -> None:
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                    loop.call_soon_threadsafe(_resolve, finished)

            submitted.add_done_callback(wake)
            await finished

    def close(self) -> None:
        """Stop the worker once its current decision is done; nothing queued starts."""
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
