"""The loop runner on a virtual clock: interval, jitter bounds, failures, liveness, stop."""

from __future__ import annotations

import asyncio
import itertools
import random
from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from kubescale.base.clock import VirtualClock
from kubescale.runtime.loop_runner import LoopRunner


class RecordingLoop:
    """Records the virtual time of each iteration; raises on the iterations in ``fail_on``."""

    def __init__(
        self, clock: VirtualClock, name: str = "recorder", fail_on: set[int] | None = None
    ):
        self._clock = clock
        self._name = name
        self.fail_on = fail_on or set()
        self.starts: list[float] = []
        self.nows: list[datetime] = []

    @property
    def name(self) -> str:
        return self._name

    async def run_once(self, now: datetime) -> None:
        self.starts.append(self._clock.elapsed)
        self.nows.append(now)
        if len(self.starts) - 1 in self.fail_on:
            raise RuntimeError("boom")


class BlockingLoop:
    """Blocks inside its second iteration until released, like a wedged API call."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.entered = asyncio.Event()
        self.finished = 0

    @property
    def name(self) -> str:
        return "blocker"

    async def run_once(self, now: datetime) -> None:
        if self.finished >= 1:
            self.entered.set()
            await self.release.wait()
        self.finished += 1


def _sample(registry: CollectorRegistry, name: str, loop: str) -> float:
    value = registry.get_sample_value(name, {"loop": loop})
    return 0.0 if value is None else value


async def _start(runner: LoopRunner) -> asyncio.Task[None]:
    task = asyncio.create_task(runner.run())
    for _ in range(5):
        await asyncio.sleep(0)
    return task


async def _stop(runner: LoopRunner, task: asyncio.Task[None]) -> None:
    runner.stop()
    await asyncio.wait_for(task, timeout=5)


async def test_runs_at_once_then_every_interval_without_jitter() -> None:
    clock = VirtualClock()
    loop = RecordingLoop(clock)
    runner = LoopRunner(clock=clock, registry=CollectorRegistry(), rng=random.Random(1))
    runner.add(loop, interval=60, jitter=0)
    task = await _start(runner)
    await clock.advance(60 * 5)
    await _stop(runner, task)
    assert loop.starts == [0, 60, 120, 180, 240, 300]
    # run_once gets the clock's wall time at the start of the iteration
    assert [(n - loop.nows[0]).total_seconds() for n in loop.nows] == loop.starts


@settings(max_examples=20, deadline=None)
@given(jitter=st.floats(min_value=0.0, max_value=1.0), seed=st.integers(0, 2**32 - 1))
def test_gaps_stay_within_jitter_bounds(jitter: float, seed: int) -> None:
    async def scenario() -> list[float]:
        clock = VirtualClock()
        loop = RecordingLoop(clock)
        runner = LoopRunner(clock=clock, registry=CollectorRegistry(), rng=random.Random(seed))
        runner.add(loop, interval=30, jitter=jitter)
        task = await _start(runner)
        await clock.advance(30 * 40)
        await _stop(runner, task)
        return loop.starts

    starts = asyncio.run(scenario())
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert len(gaps) >= 19
    assert all(30 <= gap <= 30 * (1 + jitter) + 1e-9 for gap in gaps), gaps


async def test_jitter_actually_spreads_the_gaps() -> None:
    clock = VirtualClock()
    loop = RecordingLoop(clock)
    runner = LoopRunner(clock=clock, registry=CollectorRegistry(), rng=random.Random(7))
    runner.add(loop, interval=10, jitter=0.5)
    task = await _start(runner)
    await clock.advance(10 * 50)
    await _stop(runner, task)
    gaps = {round(b - a, 6) for a, b in zip(loop.starts, loop.starts[1:], strict=False)}
    assert len(gaps) > 10  # not a fixed period
    assert min(gaps) >= 10
    assert max(gaps) <= 15


async def test_a_raising_loop_is_counted_and_keeps_running() -> None:
    clock = VirtualClock()
    registry = CollectorRegistry()
    failing = RecordingLoop(clock, name="flaky", fail_on={0, 2, 3})
    healthy = RecordingLoop(clock, name="steady")
    runner = LoopRunner(clock=clock, registry=registry, rng=random.Random(1))
    runner.add(failing, interval=10, jitter=0)
    runner.add(healthy, interval=10, jitter=0)
    task = await _start(runner)
    await clock.advance(50)
    assert not task.done()  # the error did not end the runner
    await _stop(runner, task)
    assert failing.starts == [0, 10, 20, 30, 40, 50]
    assert healthy.starts == [0, 10, 20, 30, 40, 50]
    assert runner.failures("flaky") == 3
    assert runner.failures("steady") == 0
    assert _sample(registry, "kubescale_loop_failures_total", "flaky") == 3
    assert _sample(registry, "kubescale_loop_execution_latency_seconds_count", "flaky") == 6
    assert runner.liveness_check() is None  # failing iterations still complete


async def test_healthz_reason_when_a_loop_stalls() -> None:
    clock = VirtualClock()
    blocker = BlockingLoop()
    runner = LoopRunner(clock=clock, registry=CollectorRegistry(), rng=random.Random(1))
    runner.add(blocker, interval=10, jitter=0)
    task = await _start(runner)
    await clock.advance(10)
    await asyncio.wait_for(blocker.entered.wait(), timeout=5)
    # The only completed iteration ended at t=0; 5 x 10 s = 50 s are tolerated.
    await clock.advance(49)
    assert clock.elapsed == 59
    assert runner.stalled() == ["blocker"]
    reason = runner.liveness_check()
    assert reason is not None
    assert "blocker" in reason
    blocker.release.set()
    for _ in range(5):
        await asyncio.sleep(0)
    assert runner.stalled() == []
    assert runner.liveness_check() is None
    await _stop(runner, task)


async def test_not_stalled_just_under_five_intervals() -> None:
    clock = VirtualClock()
    blocker = BlockingLoop()
    runner = LoopRunner(clock=clock, registry=CollectorRegistry())
    runner.add(blocker, interval=10, jitter=0)
    task = await _start(runner)
    await clock.advance(50)  # blocked since t=10; last completion t=0; 50 - 0 = 50, not > 50
    assert runner.stalled() == []
    await clock.advance(0.5)
    assert runner.stalled() == ["blocker"]
    blocker.release.set()
    await _stop(runner, task)


async def test_stop_finishes_the_iteration_in_progress() -> None:
    clock = VirtualClock()
    blocker = BlockingLoop()
    sleeper = RecordingLoop(clock, name="sleeper")
    runner = LoopRunner(clock=clock, registry=CollectorRegistry())
    runner.add(blocker, interval=10, jitter=0)
    runner.add(sleeper, interval=3600, jitter=0)
    task = await _start(runner)
    await clock.advance(10)
    await asyncio.wait_for(blocker.entered.wait(), timeout=5)
    runner.stop()
    for _ in range(10):
        await asyncio.sleep(0)
    assert not task.done()  # waits for the blocked iteration rather than cancelling it
    blocker.release.set()
    await asyncio.wait_for(task, timeout=5)
    assert blocker.finished == 2  # the interrupted iteration ran to its end
    assert sleeper.starts == [0]  # the sleeping loop left its hour-long sleep at once


async def test_add_validates_its_arguments() -> None:
    clock = VirtualClock()
    runner = LoopRunner(clock=clock, registry=CollectorRegistry())
    loop = RecordingLoop(clock)
    with pytest.raises(ValueError, match="interval must be > 0"):
        runner.add(loop, interval=0)
    with pytest.raises(ValueError, match="jitter"):
        runner.add(loop, interval=1, jitter=2)
    runner.add(loop, interval=1)
    with pytest.raises(ValueError, match="added twice"):
        runner.add(loop, interval=1)


class HeldCaches:
    """A loop's collections, synced or not as the test says (the real ones are
    :class:`~kubescale.runtime.cache_gate.CacheGate`, exercised in ``test_serve_sync_gate``)."""

    def __init__(self, *names: str) -> None:
        self.names = list(names)
        self._synced = asyncio.Event()

    def waiting(self) -> list[str]:
        return [] if self._synced.is_set() else list(self.names)

    async def wait(self) -> None:
        await self._synced.wait()

    def release(self) -> None:
        self._synced.set()

    def hold(self) -> None:
        self._synced.clear()


class CacheCheckingLoop(RecordingLoop):
    """Records, at each iteration, what its caches were still waiting for."""

    def __init__(self, clock: VirtualClock, caches: HeldCaches) -> None:
        super().__init__(clock)
        self.caches = caches
        self.seen_waiting: list[list[str]] = []

    async def run_once(self, now: datetime) -> None:
        self.seen_waiting.append(self.caches.waiting())
        await super().run_once(now)


async def _settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


async def test_a_loop_waits_for_its_caches_and_is_not_stalled_meanwhile() -> None:
    clock = VirtualClock()
    registry = CollectorRegistry()
    caches = HeldCaches("nodes", "pods")
    loop = RecordingLoop(clock)
    runner = LoopRunner(clock=clock, registry=registry, rng=random.Random(1))
    runner.add(loop, interval=10, jitter=0, caches=caches)
    task = await _start(runner)
    assert loop.starts == []
    assert runner.waiting("recorder") == ("nodes", "pods")
    assert _sample(registry, "kubescale_loop_waiting_for_caches", "recorder") == 1.0
    await clock.advance(10 * 5 + 1)  # past the stall threshold (5 × 10 s)
    assert loop.starts == []
    assert runner.stalled() == []  # waiting for caches is reported by /readyz, not /healthz
    caches.release()
    await _settle()
    assert loop.starts == [51]  # at once when synced, not at the next interval
    assert runner.waiting("recorder") == ()
    assert _sample(registry, "kubescale_loop_waiting_for_caches", "recorder") == 0.0
    caches.hold()  # a re-list after 410 Gone
    await clock.advance(10)
    assert loop.starts == [51]
    assert runner.waiting("recorder") == ("nodes", "pods")
    await _stop(runner, task)  # stopping while waiting returns
    assert loop.starts == [51]


@settings(max_examples=30, deadline=None)
@given(
    ops=st.lists(
        st.one_of(
            st.tuples(st.just("advance"), st.integers(1, 40)),
            st.tuples(st.just("hold"), st.just(0)),
            st.tuples(st.just("release"), st.just(0)),
        ),
        max_size=25,
    )
)
def test_no_iteration_starts_while_caches_are_unsynced(ops: list[tuple[str, int]]) -> None:
    async def scenario() -> CacheCheckingLoop:
        clock = VirtualClock()
        caches = HeldCaches("pods")
        loop = CacheCheckingLoop(clock, caches)
        runner = LoopRunner(clock=clock, registry=CollectorRegistry(), rng=random.Random(0))
        runner.add(loop, interval=10, jitter=0.1, caches=caches)
        task = await _start(runner)
        for op, seconds in ops:
            if op == "advance":
                await clock.advance(seconds)
            elif op == "hold":
                caches.hold()
            else:
                caches.release()
            await _settle()
        caches.release()
        await clock.advance(20)
        await _stop(runner, task)
        return loop

    loop = asyncio.run(scenario())
    assert loop.starts, "the loop never ran once its caches were synced"
    assert all(waiting == [] for waiting in loop.seen_waiting), loop.seen_waiting


class _SteppingClock(VirtualClock):
    """Monotonic time moves a second at every read: every iteration overruns its interval."""

    def monotonic(self) -> float:
        self._stepped = getattr(self, "_stepped", 0.0) + 1.0
        return super().monotonic() + self._stepped


class ComputingLoop:
    """An iteration that computes without awaiting anything (a CPU-bound decision)."""

    def __init__(self, runner_stop: list[LoopRunner], iterations: int) -> None:
        self._runner = runner_stop
        self._iterations = iterations
        self.done = 0

    @property
    def name(self) -> str:
        return "computing"

    async def run_once(self, now: datetime) -> None:
        self.done += 1
        if self.done >= self._iterations:
            self._runner[0].stop()


async def test_an_overrunning_loop_lets_the_event_loop_pass_between_iterations() -> None:
    # Interval 0.1 s, every iteration "takes" 1 s (the stepping clock): the next one is due at
    # once. Between two iterations the event loop must still run the other ready callbacks
    # (a webhook request, /healthz): count the iterations each callback saw.
    clock = _SteppingClock()
    holder: list[LoopRunner] = []
    runner = LoopRunner(clock=clock, registry=CollectorRegistry(), rng=random.Random(0))
    holder.append(runner)
    loop = ComputingLoop(holder, iterations=20)
    runner.add(loop, interval=0.1, jitter=0.0)
    seen: list[int] = []

    def other() -> None:  # a callback of another part of the process, ready all the time
        seen.append(loop.done)
        if not runner.stopping:
            asyncio.get_running_loop().call_soon(other)

    asyncio.get_running_loop().call_soon(other)
    await asyncio.wait_for(runner.run(), timeout=5)
    # Before: the 20 iterations ran back to back, the callback saw 0 then 20.
    assert loop.done == 20
    assert [n for n in range(1, 20) if n in seen] == list(range(1, 20))
