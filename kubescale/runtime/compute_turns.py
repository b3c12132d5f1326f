"""Turns for CPU-bound request handlers on the serving loop: a concurrency cap with a short,
bounded queue and an explicit refusal beyond it.

Why (issue 27, item 11): the scheduler extender's filter over 5,000 nodes is tens of
milliseconds of pure Python on the one event loop that also serves the webhook, ``/healthz``
and the control loops. Thirty-two clients posting such filters at once made every one of those
handlers ready in the same loop iteration, and asyncio ran them back to back: a webhook
request that arrived meanwhile waited for all of them (1.6 s; a small filter 2.3 s, beyond
kube-scheduler's 5 s ``httpTimeout`` on a busier machine).

:class:`ComputeTurns` gives such handlers turns:

* at most ``concurrency`` (1: computations on one loop never overlap anyway) compute at once;
  the others wait in arrival order, and a waiter whose turn comes resumes in the *next* loop
  iteration — after the loop has polled its sockets — so the webhook, ``/healthz`` and every
  other ready callback get the loop between two computations instead of after all of them.
  A synchronous computation never overlaps another, so a turn that were merely checked would
  always be free: the first of a burst therefore takes its turn and lets the loop pass once
  before computing, and the rest of the burst queues behind it;
* at most ``max_waiting`` wait; a request beyond that is refused at once (:meth:`turn` yields
  ``False``) and the route answers an explicit error. kube-scheduler treats an error of an
  extender marked ``ignorable`` as if the extender were absent for that pod (it logs the error
  and schedules on its own filters: ``findNodesThatPassExtenders`` skips ignorable extenders'
  errors), which is better than answering after its ``httpTimeout`` — the same outcome, seconds
  later, with the work wasted;
* a waiter that is cancelled (its client went away) gives up its place; one cancelled just as
  its turn came passes the turn on.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

__all__ = ["ComputeTurns"]


class ComputeTurns:
    """``concurrency`` turns, ``max_waiting`` places in the queue (module docstring)."""

    def __init__(
        self,
        *,
        max_waiting: int,
        concurrency: int = 1,
        on_change: Callable[[int, int], None] | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        if max_waiting < 0:
            raise ValueError(f"max_waiting must not be negative, got {max_waiting}")
        self.concurrency = concurrency
        self.max_waiting = max_waiting
        self._running = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._on_change = on_change
        self.refused = 0
        """Requests refused because ``max_waiting`` were already waiting."""

    @property
    def running(self) -> int:
        """Turns taken now."""
        return self._running

    @property
    def waiting(self) -> int:
        """Requests waiting for a turn now."""
        return len(self._waiters)

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change(self._running, len(self._waiters))

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[bool]:
        """Wait for a turn and hold it for the ``async with`` body (yields ``True``), or yield
        ``False`` at once when ``max_waiting`` requests are already waiting."""
        if self._running < self.concurrency and not self._waiters:
            self._running += 1
            try:
                # Hold the turn across one pass of the loop before computing: handlers made
                # ready in the same iteration (a burst of bodies read at once) queue behind
                # this one instead of each finding the turn free after the previous one's
                # synchronous computation has returned — which would be no turns at all.
                await asyncio.sleep(0)
            except asyncio.CancelledError:
                self._release()
                raise
        elif len(self._waiters) >= self.max_waiting:
            self.refused += 1
            yield False
            return
        else:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            self._changed()
            try:
                await waiter  # _release handed this waiter its turn (running already counts it)
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._release()  # the turn came with the cancellation: pass it on
                elif waiter in self._waiters:  # (_release drops cancelled waiters it meets)
                    self._waiters.remove(waiter)
                    self._changed()
                raise
        self._changed()
        try:
            yield True
        finally:
            self._release()

    def _release(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                # Handed over, not freed: a request arriving now queues behind the waiters.
                # The waiter resumes in the next loop iteration, after the socket poll.
                waiter.set_result(None)
                self._changed()
                return
        self._running -= 1
        self._changed()
