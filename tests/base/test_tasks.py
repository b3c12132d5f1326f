"""A task's own cancellation is never swallowed by the helpers it waits in.

The defect (issue: split brain after a freeze): ``sleep_or_stop`` — and the same cleanup pattern
in the elector, the informer and the event recorder — cancelled its helper futures and awaited
them under ``suppress(CancelledError)``. When the stop event and the task's cancellation fired
in one tick, the task's ``CancelledError`` was delivered at that await and suppressed: the task
returned normally and ran on. A leader's loops cancelled by the elector kept going.
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from prometheus_client import CollectorRegistry

from kubescale.base.clock import VirtualClock, sleep_or_stop
from kubescale.base.tasks import cancel_and_wait
from kubescale.runtime.loop_runner import LoopRunner


@pytest.mark.parametrize("ticks", range(6))
async def test_sleep_or_stop_keeps_a_cancellation_that_arrives_with_the_stop(ticks: int) -> None:
    """The stop fires, and ``ticks`` event-loop turns later — while the helper is cleaning up
    its sleeper — the task is cancelled: it must end cancelled, whatever the interleaving."""
    clock = VirtualClock()
    stop = asyncio.Event()
    task = asyncio.create_task(sleep_or_stop(clock, 100.0, stop))
    await asyncio.sleep(0)  # the task is waiting now
    stop.set()
    for _ in range(ticks):
        await asyncio.sleep(0)
    if task.done():
        return  # it finished before the cancellation: nothing to swallow
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()


async def test_cancel_and_wait_keeps_the_callers_cancellation() -> None:
    helper = asyncio.create_task(asyncio.sleep(100))
    entered = asyncio.Event()

    async def owner() -> str:
        entered.set()
        await cancel_and_wait(helper)
        await asyncio.sleep(100)  # only reached if the cancellation was swallowed
        return "ran on"

    task = asyncio.create_task(owner())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert helper.cancelled()


class _Counter:
    name = "counter"

    def __init__(self) -> None:
        self.iterations = 0

    async def run_once(self, now: object) -> None:
        self.iterations += 1


async def test_a_cancelled_loop_runner_stops_even_when_stopped_in_the_same_tick() -> None:
    """What the elector does on a lost lease: cancel the runner (and a shutdown may stop it at
    the same moment). The runner's task ends cancelled; no loop runs again."""
    clock = VirtualClock()
    runner = LoopRunner(clock=clock, registry=CollectorRegistry())
    loop = _Counter()
    runner.add(loop, interval=10.0, jitter=0.0)
    task = asyncio.create_task(runner.run())
    for _ in range(20):
        await asyncio.sleep(0)
    assert loop.iterations == 1
    runner.stop()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert task.done()
    await clock.advance(100.0)
    assert loop.iterations == 1
