"""``OffLoop``: a loop's decision on a worker thread, the loop free meanwhile (issue 27 item 11).

Mechanisms, no timing: the thread a decision runs on (``threading.get_ident``), the loop
answering while a decision is blocked on a ``threading.Event`` the test releases only after,
and what a cancelled caller leaves behind.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Generator
from functools import partial

import pytest

from kubescale.runtime.off_loop import OffLoop, abandon_computing


def computing(off: OffLoop) -> bool:
    return off.computing


class Blocked:
    """A decision that records its thread and waits for the test; on the loop's own thread it
    fails at once instead (waiting there would hang the loop that should release it)."""

    def __init__(self, loop_thread: int) -> None:
        self.loop_thread = loop_thread
        self.threads: list[int] = []
        self.release = threading.Event()
        self.entered = asyncio.Event()
        self._loop = asyncio.get_running_loop()

    def __call__(self) -> str:
        self.threads.append(threading.get_ident())
        if threading.get_ident() == self.loop_thread:
            raise AssertionError("the decision runs on the event loop's thread")
        self._loop.call_soon_threadsafe(self.entered.set)
        self.release.wait()
        return "decided"


async def test_a_decision_runs_on_another_thread_while_the_loop_serves() -> None:
    off = OffLoop("test")
    decision = Blocked(threading.get_ident())
    try:
        task = asyncio.create_task(off.run(decision))
        await decision.entered.wait()
        assert off.computing
        # the loop is free: other work completes while the decision is blocked
        served = await asyncio.create_task(asyncio.sleep(0, result="served"))
        assert served == "served"
        assert not task.done()
        decision.release.set()
        assert await task == "decided"
        assert decision.threads
        assert decision.threads[0] != threading.get_ident()
        assert not off.computing
    finally:
        decision.release.set()
        off.close()


async def test_one_worker_per_loop_keeps_its_decisions_in_order() -> None:
    off = OffLoop("test")
    seen: list[tuple[int, int]] = []

    def decision(i: int) -> int:
        seen.append((i, threading.get_ident()))
        return i

    try:
        results = await asyncio.gather(*(off.run(partial(decision, i)) for i in range(5)))
        assert results == [0, 1, 2, 3, 4]
        assert [i for i, _ in seen] == [0, 1, 2, 3, 4]
        assert len({thread for _, thread in seen}) == 1  # one worker thread
        assert off.decisions == 5
    finally:
        off.close()


async def test_a_decision_error_reaches_the_caller() -> None:
    off = OffLoop("test")

    def broken() -> None:
        raise ValueError("bad input")

    try:
        with pytest.raises(ValueError, match="bad input"):
            await off.run(broken)
    finally:
        off.close()


async def test_drive_steps_on_the_worker_acts_on_the_loop() -> None:
    loop_thread = threading.get_ident()
    step_threads: list[int] = []
    act_threads: list[int] = []

    def decision() -> Generator[str, bool, list[bool]]:
        answers: list[bool] = []
        for name in ("a", "b", "c"):
            step_threads.append(threading.get_ident())
            answers.append((yield name))
        step_threads.append(threading.get_ident())
        return answers

    async def act(name: str) -> bool:
        act_threads.append(threading.get_ident())
        await asyncio.sleep(0)
        return name != "b"

    off = OffLoop("test")
    try:
        assert await off.drive(decision(), act) == [True, False, True]
    finally:
        off.close()
    assert len(step_threads) == 4
    assert loop_thread not in step_threads
    assert act_threads == [loop_thread] * 3


async def test_cancelled_caller_waits_for_the_decision_then_nothing_acts() -> None:
    loop_thread = threading.get_ident()
    decision = Blocked(loop_thread)
    acted: list[str] = []

    def steps() -> Generator[str, bool, None]:
        decision()  # blocked until the test releases it, after the cancellation
        yield "write"

    async def act(request: str) -> bool:
        acted.append(request)
        return True

    off = OffLoop("test")
    try:
        task = asyncio.create_task(off.drive(steps(), act))
        await decision.entered.wait()
        queued = asyncio.create_task(off.run(lambda: acted.append("queued decision")))
        await asyncio.sleep(0)
        task.cancel()
        queued.cancel()
        # a decision not started is dropped at once
        with pytest.raises(asyncio.CancelledError):
            await queued
        # the one computing cannot be interrupted: the task ends once it has returned, and a
        # second cancellation meanwhile changes nothing
        for _ in range(10):
            await asyncio.sleep(0)
        assert not task.done()
        task.cancel()
        for _ in range(10):
            await asyncio.sleep(0)
        assert not task.done()
        assert computing(off)
        decision.release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not computing(off)  # nothing of the loop runs on after its task
        await off.idle()
        for _ in range(10):
            await asyncio.sleep(0)
        assert acted == []  # the step's request was dropped; the queued decision never ran
    finally:
        decision.release.set()
        off.close()


async def test_run_inline_stays_on_the_callers_thread() -> None:
    off = OffLoop("test", run_inline=True)
    assert await off.run(threading.get_ident) == threading.get_ident()


async def test_abandoned_a_cancelled_caller_goes_at_once_and_nothing_acts() -> None:
    # Shutdown (bench 27.11): once the process abandons computing decisions, a cancelled
    # caller does not wait for its decision; the result is still dropped, the next decision
    # of the loop still waits its turn on the one worker, and the worker is a daemon thread
    # (the interpreter's exit does not join it).
    loop_thread = threading.get_ident()
    decision = Blocked(loop_thread)
    acted: list[str] = []

    def steps() -> Generator[str, bool, None]:
        decision()
        yield "write"

    async def act(request: str) -> bool:
        acted.append(request)
        return True

    off = OffLoop("test")
    try:
        task = asyncio.create_task(off.drive(steps(), act))
        await decision.entered.wait()
        workers = [t for t in threading.enumerate() if t.name == "decide-test"]
        assert [t.daemon for t in workers] == [True]
        task.cancel()
        for _ in range(10):
            await asyncio.sleep(0)
        assert not task.done()  # the contract until the process stops: it waits
        assert abandon_computing(asyncio.get_running_loop()) >= 1
        with pytest.raises(asyncio.CancelledError):
            await task
        assert computing(off)  # the decision still computes: not waited for
        after = asyncio.create_task(off.run(lambda: acted.append("next decision")))
        for _ in range(10):
            await asyncio.sleep(0)
        assert acted == []  # queued behind the computing one: one decision at a time
        decision.release.set()
        await after
        await off.idle()
        assert acted == ["next decision"]  # the abandoned step's request was dropped
    finally:
        decision.release.set()
        off.close()
