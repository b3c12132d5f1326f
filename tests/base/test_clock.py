"""The virtual clock wakes sleepers in order and only when told to."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from kubescale.base.clock import RealClock, VirtualClock, sleep_or_stop


async def test_sleepers_wake_in_deadline_order_at_their_deadline() -> None:
    clock = VirtualClock(datetime(2026, 3, 1, tzinfo=UTC))
    woke: list[tuple[str, float]] = []

    async def sleeper(name: str, seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append((name, clock.elapsed))

    tasks = [asyncio.create_task(sleeper(n, s)) for n, s in (("b", 20), ("a", 5), ("c", 90))]
    await asyncio.sleep(0)
    assert clock.sleepers == 3
    await clock.advance(30)
    assert woke == [("a", 5), ("b", 20)]
    assert clock.elapsed == 30
    assert clock.now() == datetime(2026, 3, 1, tzinfo=UTC) + timedelta(seconds=30)
    await clock.advance(60)
    assert list(woke) == [("a", 5), ("b", 20), ("c", 90)]
    await asyncio.gather(*tasks)


async def test_time_does_not_move_by_itself() -> None:
    clock = VirtualClock()
    before = (clock.now(), clock.monotonic())
    await asyncio.sleep(0.01)
    assert (clock.now(), clock.monotonic()) == before


async def test_chained_sleeps_within_one_advance() -> None:
    clock = VirtualClock()
    ticks: list[float] = []

    async def ticker() -> None:
        for _ in range(5):
            await clock.sleep(10)
            ticks.append(clock.elapsed)

    task = asyncio.create_task(ticker())
    await clock.advance(45)
    assert ticks == [10, 20, 30, 40]
    await clock.advance(5)
    await task
    assert ticks == [10, 20, 30, 40, 50]


async def test_cancelled_sleepers_are_dropped() -> None:
    clock = VirtualClock()
    task = asyncio.create_task(clock.sleep(10))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert clock.sleepers == 0
    assert clock.next_deadline() is None
    await clock.advance(20)


async def test_rejects_going_back_and_naive_start() -> None:
    clock = VirtualClock()
    with pytest.raises(ValueError, match="cannot go back"):
        await clock.advance(-1)
    with pytest.raises(ValueError, match="timezone-aware"):
        VirtualClock(datetime(2026, 1, 1))


async def test_real_clock_is_aware_and_monotonic() -> None:
    clock = RealClock()
    assert clock.now().tzinfo is not None
    first = clock.monotonic()
    await clock.sleep(0.001)
    assert clock.monotonic() > first


async def test_sleep_or_stop_wakes_on_stop_and_leaves_no_sleeper() -> None:
    clock = VirtualClock()
    stop = asyncio.Event()
    full = asyncio.create_task(sleep_or_stop(clock, 10, stop))
    await clock.advance(10)
    assert await full is False  # slept the whole time
    interrupted = asyncio.create_task(sleep_or_stop(clock, 3600, stop))
    await asyncio.sleep(0)
    stop.set()
    assert await asyncio.wait_for(interrupted, timeout=1) is True
    assert clock.sleepers == 0
    assert await sleep_or_stop(clock, 10, stop) is True  # already stopped: returns at once
