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
  never touched by two threads). The serving loop is free meanwhile;
* **shutdown** (bench 27.11): a decision that computes for long must not hold the process past
  Kubernetes' ``terminationGracePeriodSeconds`` (30 s by default). Once the grace period for
  the loops' iterations is over, ``serve`` calls :func:`abandon_computing`: a cancelled caller
  then gets its ``CancelledError`` at once instead of when its decision returns (the loop's
  task ends, so the elector steps down and releases the Lease — upstream's ``ReleaseOnCancel``
  releases on cancel without waiting for the leader's work — and the leader gate refuses every
  write from then on). The decision's result is still dropped, and a later decision of the same
  :class:`OffLoop` still waits its turn on the one worker. The worker is a daemon thread, so
  the interpreter's exit does not join it (``concurrent.futures`` workers are joined at exit:
  the process outlived the grace period until it was killed at 60 s).

``run_inline=True`` keeps the decision on the caller's thread (the same calls, no thread): for
callers that want no thread at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import weakref
from collections.abc import Awaitable, Callable, Generator
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, TypeVar

__all__ = ["OffLoop", "abandon_computing"]

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


_Job = tuple[Future[Any], Callable[[], Any]]

_LIVE: weakref.WeakSet[OffLoop] = weakref.WeakSet()
"""Every OffLoop of the process, for :func:`abandon_computing`."""


def abandon_computing(loop: asyncio.AbstractEventLoop) -> int:
    """The process is stopping (module docstring): every :class:`OffLoop` whose callers await
    on ``loop`` stops holding a cancelled caller until its decision returns. Returns how many
    callers were waiting on a computing decision."""
    return sum(off_loop.abandon(loop) for off_loop in list(_LIVE))


def _work(jobs: queue.SimpleQueue[_Job | None]) -> None:
    """The worker thread: the decisions in order, one at a time, until ``None``."""
    while (job := jobs.get()) is not None:
        future, decision = job
        if not future.set_running_or_notify_cancel():
            continue  # cancelled while queued: it never starts
        try:
            result = decision()
        except BaseException as exc:  # handed to the caller, like concurrent.futures does
            future.set_exception(exc)
        else:
            future.set_result(result)
        del job, future, decision


class OffLoop:
    """One loop's decisions, one at a time, on a worker thread (module docstring)."""

    def __init__(self, name: str, *, run_inline: bool = False) -> None:
        self.name = name
        self.run_inline = run_inline
        self._jobs: queue.SimpleQueue[_Job | None] | None = None
        self._submitted: list[Future[Any]] = []
        """Decisions given to the worker and not seen finished (pruned at each submit)."""
        self._abandoned: set[asyncio.AbstractEventLoop] = set()
        """Event loops whose cancelled callers no longer wait (:func:`abandon_computing`)."""
        self._waiting: dict[asyncio.Future[None], asyncio.AbstractEventLoop] = {}
        """Cancelled callers waiting on a computing decision, woken by :meth:`abandon`."""
        self.decisions = 0
        """Decisions (or generator steps) started, for tests and metrics."""
        _LIVE.add(self)

    def _submit(self, decision: Callable[[], T]) -> Future[T]:
        if self._jobs is None:
            self._jobs = queue.SimpleQueue()
            # A daemon thread: never joined at interpreter exit (module docstring).
            threading.Thread(
                target=_work, args=(self._jobs,), name=f"decide-{self.name}", daemon=True
            ).start()
        future: Future[T] = Future()
        self._jobs.put((future, decision))
        return future

    def abandon(self, loop: asyncio.AbstractEventLoop) -> int:
        """From now on a caller on ``loop`` cancelled while its decision computes gets its
        ``CancelledError`` at once (:func:`abandon_computing`); wakes those waiting now."""
        self._abandoned.add(loop)
        woken = 0
        for wake, on in list(self._waiting.items()):
            if on is loop and not wake.done():
                wake.set_result(None)
                woken += 1
        return woken

    async def run(self, decision: Callable[[], T]) -> T:
        """``decision()`` on the worker thread; the caller awaits it without holding the
        serving loop. ``decision`` must read only what was copied for it (module docstring)."""
        self.decisions += 1
        if self.run_inline:
            return decision()
        future = self._submit(decision)
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
            # Unless the process is stopping (abandon_computing): then the caller goes at
            # once and the result is dropped when the decision returns.
            loop = asyncio.get_running_loop()
            abandoned: asyncio.Future[None] = loop.create_future()
            self._waiting[abandoned] = loop
            watched: set[asyncio.Future[Any]] = {waiter, abandoned}
            try:
                while not waiter.done() and loop not in self._abandoned:
                    with contextlib.suppress(asyncio.CancelledError):
                        await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
            finally:
                del self._waiting[abandoned]
            waiter.add_done_callback(_retrieve)  # a dropped decision's error is not logged
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
        for submitted in self._submitted:
            submitted.cancel()  # only the queued ones: a running future cannot be cancelled
        if self._jobs is not None:
            self._jobs.put(None)
            self._jobs = None


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()
