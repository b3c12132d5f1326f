"""The per-iteration deadline of the provider's API calls, on a virtual clock.

The requests here are futures the test resolves (or never does): the mechanism — a call
abandoned exactly at the deadline, nothing sent after it, the caller's cancellation kept — is
what is checked. The same deadline against the in-process API server, with a ``/scale`` patch
the server never answers, is in ``test_autoscaler_faults.py``.
"""

from __future__ import annotations

import asyncio

import pytest

from kubescale.base.clock import VirtualClock
from kubescale.controllers.autoscaler.cloudprovider.cloud_provider import (
    NothingWritten,
    WriteOutcomeUnknown,
)
from kubescale.controllers.autoscaler.cloudprovider.write_deadline import WriteDeadline


class Request:
    """A request whose answer the test gives; counts how often it was sent."""

    def __init__(self) -> None:
        self.sent = 0
        self.cancelled = 0
        self.answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def __call__(self) -> str:
        self.sent += 1
        try:
            return await asyncio.shield(self.answer)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise


async def started(clock: VirtualClock, seconds: float = 10.0) -> WriteDeadline:
    deadline = WriteDeadline(clock=clock, seconds=seconds)
    deadline.start()
    return deadline


async def test_an_answer_before_the_deadline_is_returned() -> None:
    clock = VirtualClock()
    deadline = await started(clock)
    request = Request()
    call = asyncio.ensure_future(deadline.call("resize g to 3", request, writes=True))
    await clock.advance(9.0)  # 1 s before the deadline
    assert not call.done()
    request.answer.set_result("ok")
    assert await call == "ok"
    assert clock.sleepers == 0  # the timer is gone with the call
    assert deadline.remaining() == pytest.approx(1.0)


async def test_an_unanswered_write_is_abandoned_at_the_deadline_as_unknown() -> None:
    clock = VirtualClock()
    deadline = await started(clock)
    request = Request()
    call = asyncio.ensure_future(deadline.call("resize g to 3", request, writes=True))
    await clock.advance(9.999)
    assert not call.done()
    await clock.advance(0.001)  # 10 s: the deadline
    assert call.done()
    with pytest.raises(WriteOutcomeUnknown, match=r"^resize g to 3: no answer within the 10s "):
        await call
    assert (request.sent, request.cancelled) == (1, 1)  # sent once, then given up
    # nothing more is sent in this iteration
    later = Request()
    with pytest.raises(NothingWritten, match="not sent"):
        await deadline.call("resize h to 2", later, writes=True)
    assert later.sent == 0
    # the next iteration has its own deadline
    deadline.start()
    again = Request()
    again.answer.set_result("ok")
    assert await deadline.call("resize h to 2", again, writes=True) == "ok"


async def test_an_unanswered_read_wrote_nothing() -> None:
    clock = VirtualClock()
    deadline = await started(clock, seconds=5.0)
    request = Request()
    call = asyncio.ensure_future(deadline.call("read the size of g", request, writes=False))
    await clock.advance(5.0)
    assert call.done()
    with pytest.raises(NothingWritten, match="nothing written"):
        await call
    assert not isinstance(call.exception(), WriteOutcomeUnknown)


async def test_time_outside_the_calls_does_not_count() -> None:
    # the iteration's CPU work before and between calls (snapshot, binpacking) is not API time
    clock = VirtualClock()
    deadline = await started(clock)
    await clock.advance(60.0)  # a slow decision on a busy machine
    request = Request()
    call = asyncio.ensure_future(deadline.call("write", request, writes=True))
    await clock.advance(9.0)
    assert not call.done()  # 9 of its 10 s used
    request.answer.set_result("ok")
    assert await call == "ok"
    assert deadline.remaining() == pytest.approx(1.0)


async def test_calls_of_one_iteration_share_the_deadline() -> None:
    clock = VirtualClock()
    deadline = await started(clock)
    first = Request()
    call = asyncio.ensure_future(deadline.call("read", first, writes=False))
    await clock.advance(7.0)
    first.answer.set_result("7 s later")
    assert await call == "7 s later"
    second = Request()
    call = asyncio.ensure_future(deadline.call("write", second, writes=True))
    await clock.advance(3.0)  # 7 + 3 = 10: the second call had 3 s, not 10
    assert call.done()
    with pytest.raises(WriteOutcomeUnknown):
        await call


async def test_an_error_answer_is_raised_as_it_is() -> None:
    clock = VirtualClock()
    deadline = await started(clock)
    request = Request()
    request.answer.set_exception(RuntimeError("409 Conflict"))
    with pytest.raises(RuntimeError, match="409 Conflict"):
        await deadline.call("write", request, writes=True)


async def test_the_callers_cancellation_is_not_swallowed() -> None:
    clock = VirtualClock()
    deadline = await started(clock)
    request = Request()
    call = asyncio.ensure_future(deadline.call("write", request, writes=True))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert request.sent == 1
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert request.cancelled == 1  # the request went with it
    assert clock.sleepers == 0


def test_the_deadline_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        WriteDeadline(clock=VirtualClock(), seconds=0)
