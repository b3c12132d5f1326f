"""A deadline per loop iteration for the provider's calls to the API server.

A ``/scale`` write the API server never answers would otherwise hold the loop for the client's
whole retry budget (5 tries × a 30 s request timeout = 150 s) every time it is tried. Instead,
the provider calls of one iteration may wait on the API server for ``--scan-interval`` seconds
in all (:meth:`WriteDeadline.start` at the start of each iteration). Only the time spent inside
the calls counts, so the CPU work of the iteration before them (snapshot, binpacking) does not
use it up on a busy machine:

* a call still unanswered when the deadline passes is abandoned (its request cancelled); if it
  was a write, :class:`~.cloud_provider.WriteOutcomeUnknown` — the write may have been committed
  (kube-apiserver can commit and still time out, or answer after we stopped listening); if it
  was a read before a write, :class:`~.cloud_provider.NothingWritten`;
* once the deadline has passed, further calls of the iteration are not sent
  (:class:`~.cloud_provider.NothingWritten`): the next iteration starts with a new deadline.

The deadline is measured on an injectable :class:`~kubescale.base.clock.Clock`. It bounds real
I/O, so in a service (and in a simulation whose client clock does not wait) it is the real
clock; tests inject a virtual one and move it past the deadline while a request hangs.

A cancellation aimed at the calling task is never swallowed: the request and the timer are
cancelled and the cancellation goes on (:func:`kubescale.base.tasks.cancel_and_wait`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from kubescale.base.clock import Clock
from kubescale.base.tasks import cancel_and_wait
from kubescale.controllers.autoscaler.cloudprovider.cloud_provider import (
    NothingWritten,
    WriteOutcomeUnknown,
)

__all__ = ["WriteDeadline"]

T = TypeVar("T")


class WriteDeadline:
    """One deadline per iteration, shared by the provider's calls (module docstring)."""

    def __init__(self, *, clock: Clock, seconds: float) -> None:
        if seconds <= 0:
            raise ValueError("the provider call deadline must be positive")
        self.clock = clock
        self.seconds = seconds
        self._spent = 0.0

    def start(self) -> None:
        """A new iteration: its calls have ``seconds`` between them again."""
        self._spent = 0.0

    def remaining(self) -> float:
        """Seconds the iteration's calls may still wait."""
        return self.seconds - self._spent

    async def call(self, what: str, request: Callable[[], Awaitable[T]], *, writes: bool) -> T:
        """``request()`` if it answers before the deadline. ``what`` names it in errors
        ("resize MachineDeployment/default/small to 3"); ``writes``: whether an unanswered
        request may have changed something."""
        remaining = self.remaining()
        if remaining <= 0:
            raise NothingWritten(
                f"{what}: not sent, the {self.seconds:g}s deadline of this iteration has passed"
            )
        began = self.clock.monotonic()
        task = asyncio.ensure_future(request())
        timer = asyncio.ensure_future(self.clock.sleep(remaining))
        try:
            done, _ = await asyncio.wait({task, timer}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            await cancel_and_wait(task, timer)  # the caller is cancelled: so is the request
            raise
        finally:
            self._spent += self.clock.monotonic() - began
        if task in done:
            await cancel_and_wait(timer)
            return task.result()
        await cancel_and_wait(task)
        self._spent = self.seconds  # used up: the iteration sends nothing more
        if writes:
            raise WriteOutcomeUnknown(
                f"{what}: no answer within the {self.seconds:g}s deadline of this iteration; "
                "the write may have happened"
            )
        raise NothingWritten(
            f"{what}: no answer within the {self.seconds:g}s deadline of this iteration; "
            "nothing written"
        )
