"""A deadline per loop iteration for the provider's calls to the API server.

A ``/scale`` write the API server never answers would otherwise hold the loop for the client's
whole retry budget (5 tries × a 30 s request timeout = 150 s) every time it is tried. Instead,
every provider call of one iteration shares one deadline (:meth:`WriteDeadline.start` at the
start of each iteration, ``--scan-interval`` seconds by default):

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
        self._ends: float | None = None

    def start(self) -> None:
        """A new iteration: its calls have ``seconds`` from now."""
        self._ends = self.clock.monotonic() + self.seconds

    def remaining(self) -> float:
        if self._ends is None:
            return self.seconds
        return self._ends - self.clock.monotonic()

    async def call(self, what: str, request: Callable[[], Awaitable[T]], *, writes: bool) -> T:
        """``request()`` if it answers before the deadline. ``what`` names it in errors
        ("resize MachineDeployment/default/small to 3"); ``writes``: whether an unanswered
        request may have changed something."""
        remaining = self.remaining()
        if remaining <= 0:
            raise NothingWritten(
                f"{what}: not sent, the {self.seconds:g}s deadline of this iteration has passed"
            )
        task = asyncio.ensure_future(request())
        timer = asyncio.ensure_future(self.clock.sleep(remaining))
        try:
            done, _ = await asyncio.wait({task, timer}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            await cancel_and_wait(task, timer)  # the caller is cancelled: so is the request
            raise
        if task in done:
            await cancel_and_wait(timer)
            return task.result()
        await cancel_and_wait(task)
        self._ends = self.clock.monotonic()  # spent: the iteration sends nothing more
        if writes:
            raise WriteOutcomeUnknown(
                f"{what}: no answer within the {self.seconds:g}s deadline of this iteration; "
                "the write may have happened"
            )
        raise NothingWritten(
            f"{what}: no answer within the {self.seconds:g}s deadline of this iteration; "
            "nothing written"
        )
