"""Runs each controller's ``run_once(now)`` on its interval, like upstream's RunOnce loops.

Contract:
- A loop runs at once when started, then every ``interval`` seconds start-to-start, each gap
  stretched by a random factor in ``[1, 1 + jitter]`` (client-go ``wait.Jitter``) so replicas and
  loops do not fall into lock-step. An iteration that overruns its interval is followed by the
  next after ``OVERRUN_PASSES`` passes of the event loop (so the servers sharing it answer the
  requests that arrived meanwhile); missed ticks are not replayed.
- An iteration that raises is logged and counted, and the loop goes on at the next interval: the
  process never dies of a loop error.
- A runner may have a *gate* (``serve``: this replica holds the leader Lease), checked before
  every iteration; while it is closed iterations are skipped and counted
  (``kubescale_loop_skipped_total``).
- A loop may have *caches* (``serve``: its component's collections,
  :class:`~kubescale.runtime.cache_gate.CacheGate`): no iteration starts while one of them is not
  synced — the first list, or a re-list after ``410 Gone`` — as upstream's controllers start
  their workers after ``WaitForCacheSync``. The loop logs ``waiting for caches to sync`` naming
  them, waits (``kubescale_loop_waiting_for_caches`` is 1 meanwhile, and the loop is not
  *stalled*), logs ``caches synced`` and runs at once; the gate is checked again first.
- Liveness: a loop is *stalled* when no iteration (successful or not) has completed for
  ``stall_factor`` (5) × its interval; :meth:`LoopRunner.stalled` feeds ``/healthz``.
- :meth:`LoopRunner.stop` (wired to SIGTERM) lets each loop finish the iteration in progress, then
  returns; nothing is cancelled mid-iteration unless the caller's grace period runs out.
- A loop whose iteration is CPU-bound (the descheduler's cycle, the cluster autoscaler's
  snapshot, filter-out-schedulable, scale-up decision and scale-down planner) computes it on a
  worker thread of its own (:class:`~kubescale.runtime.off_loop.OffLoop`): it reads copies on
  the loop, decides on the thread, writes on the loop, so the servers sharing the event loop
  answer while it computes. A cancelled iteration ends once the step computing has returned,
  and writes nothing after.

Time comes from the injected :class:`~kubescale.base.clock.Clock`; only the latency histogram reads
a real timer, because it measures how long our own code took, not what time it is.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from kubescale.base.clock import Clock, sleep_or_stop
from kubescale.base.logs import component_logger
from kubescale.base.tasks import cancel_and_wait
from kubescale.kube.errors import KubeError, failure_log_level

DEFAULT_JITTER = 0.1
STALL_FACTOR = 5.0
OVERRUN_PASSES = 16
"""Event-loop passes between an overrunning iteration and the next (microseconds when idle)."""
LATENCY_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


class LoopCaches(Protocol):
    """The collections a loop decides on (:class:`~kubescale.runtime.cache_gate.CacheGate`)."""

    def waiting(self) -> list[str]:
        """Names of the collections not synced; empty when the loop may run."""
        ...

    async def wait(self) -> None:
        """Return once :meth:`waiting` is empty."""
        ...


class Loop(Protocol):
    """A controller loop: one decision-and-act pass over cached state."""

    @property
    def name(self) -> str: ...

    async def run_once(self, now: datetime) -> None: ...


@dataclass
class _LoopState:
    loop: Loop
    interval: float
    jitter: float
    last_completed: float
    wake: asyncio.Event | None = None
    caches: LoopCaches | None = None
    waiting: tuple[str, ...] = ()
    """The collections the loop is waiting for before its next iteration."""
    iterations: int = 0
    failures: int = 0


class LoopMetrics:
    """Per-loop execution latency, failures and last completion, labelled by loop name."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.latency = Histogram(
            "kubescale_loop_execution_latency_seconds",
            "Time one run_once iteration of a loop took.",
            ["loop"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.failures = Counter(
            "kubescale_loop_failures",
            "Iterations of a loop that raised an error.",
            ["loop"],
            registry=registry,
        )
        self.skipped = Counter(
            "kubescale_loop_skipped",
            "Iterations of a loop not run because the runner's gate was closed (a leader-only "
            "loop on a replica that no longer holds the Lease).",
            ["loop"],
            registry=registry,
        )
        self.waiting_for_caches = Gauge(
            "kubescale_loop_waiting_for_caches",
            "1 while a loop waits for its collections to sync (first list, or a re-list after "
            "410 Gone) before its next iteration, else 0.",
            ["loop"],
            registry=registry,
        )
        self.last_completion = Gauge(
            "kubescale_loop_last_completion_timestamp_seconds",
            "Unix time at which an iteration of the loop last completed (successfully or not).",
            ["loop"],
            registry=registry,
        )


class LoopRunner:
    """Runs loops concurrently on one event loop until stopped."""

    def __init__(
        self,
        *,
        clock: Clock,
        registry: CollectorRegistry,
        rng: random.Random | None = None,
        stall_factor: float = STALL_FACTOR,
        timer: Callable[[], float] = time.perf_counter,
        logger: logging.Logger | None = None,
        metrics: LoopMetrics | None = None,
        gate: Callable[[], bool] | None = None,
    ) -> None:
        self._clock = clock
        self._gate = gate
        self._metrics = metrics if metrics is not None else LoopMetrics(registry)
        self._rng = rng if rng is not None else random.Random()
        self._stall_factor = stall_factor
        self._timer = timer
        self._log = logger or component_logger("runner")
        self._states: dict[str, _LoopState] = {}
        self._stop = asyncio.Event()
        self._running = False

    def add(
        self,
        loop: Loop,
        *,
        interval: float,
        jitter: float = DEFAULT_JITTER,
        wake: asyncio.Event | None = None,
        caches: LoopCaches | None = None,
    ) -> None:
        """Register a loop; must be called before :meth:`run`. Setting ``wake`` makes the loop
        run at once instead of at its next interval (the event is cleared as it starts);
        ``caches`` are waited for before every iteration (module docstring)."""
        if self._running:
            raise RuntimeError("loops must be added before the runner starts")
        if interval <= 0:
            raise ValueError(f"loop {loop.name}: interval must be > 0, got {interval}")
        if not 0 <= jitter <= 1:
            raise ValueError(f"loop {loop.name}: jitter must be within [0, 1], got {jitter}")
        if loop.name in self._states:
            raise ValueError(f"loop {loop.name} added twice")
        self._states[loop.name] = _LoopState(
            loop=loop,
            interval=interval,
            jitter=jitter,
            last_completed=self._clock.monotonic(),
            wake=wake,
            caches=caches,
        )

    @property
    def loop_names(self) -> list[str]:
        return list(self._states)

    def iterations(self, name: str) -> int:
        return self._states[name].iterations

    def failures(self, name: str) -> int:
        return self._states[name].failures

    def waiting(self, name: str) -> tuple[str, ...]:
        """The collections loop ``name`` is waiting for (empty when it is not waiting)."""
        return self._states[name].waiting

    def stop(self) -> None:
        """Ask every loop to finish its current iteration and return."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def stalled(self) -> list[str]:
        """Names of loops with no completed iteration for ``stall_factor`` × interval."""
        now = self._clock.monotonic()
        return [
            name
            for name, state in self._states.items()
            if not state.waiting  # waiting for its caches: /readyz says so, it is not stuck
            and now - state.last_completed > self._stall_factor * state.interval
        ]

    def liveness_check(self) -> str | None:
        """``None`` when every loop is live, else a reason naming the stalled loops."""
        stalled = self.stalled()
        if not stalled:
            return None
        return "loops not completing within {}x their interval: {}".format(
            self._stall_factor, ", ".join(sorted(stalled))
        )

    async def run(self) -> None:
        """Run every loop until :meth:`stop`; returns once each has finished its iteration."""
        self._running = True
        now = self._clock.monotonic()
        for state in self._states.values():
            state.last_completed = now
        try:
            async with asyncio.TaskGroup() as group:
                for state in self._states.values():
                    group.create_task(self._run_loop(state), name=f"loop:{state.loop.name}")
        finally:
            self._running = False

    async def _run_loop(self, state: _LoopState) -> None:
        name = state.loop.name
        latency = self._metrics.latency.labels(name)
        failures = self._metrics.failures.labels(name)
        last_completion = self._metrics.last_completion.labels(name)
        while not self._stop.is_set():
            started = self._clock.monotonic()
            begun = self._timer()
            if state.wake is not None:
                state.wake.clear()
            if self._gate is not None and not self._gate():
                # Checked before every iteration: a leader-only loop never starts one on a
                # replica that lost the Lease, even before the elector has cancelled it.
                self._metrics.skipped.labels(name).inc()
                self._log.warning(
                    "gate closed: iteration skipped", extra={"fields": {"loop": name}}
                )
                state.last_completed = self._clock.monotonic()
                await self._sleep_unless_stopped(state.interval, state.wake)
                continue
            if state.caches is not None and state.caches.waiting():
                await self._wait_for_caches(state, state.caches)
                continue  # the gate (the Lease) is checked again before the iteration
            try:
                await state.loop.run_once(self._clock.now())
            except KubeError as err:
                # The API server failed or is unreachable: one line, no traceback (the
                # transport reports an unreachable server once per backoff step).
                state.failures += 1
                failures.inc()
                self._log.log(
                    failure_log_level(err, logging.WARNING),
                    "loop iteration failed; retrying next interval",
                    extra={"fields": {"loop": name, "error": str(err)}},
                )
            except Exception:
                state.failures += 1
                failures.inc()
                self._log.exception(
                    "loop iteration failed; retrying next interval",
                    extra={"fields": {"loop": name}},
                )
            finally:
                latency.observe(self._timer() - begun)
                state.iterations += 1
                state.last_completed = self._clock.monotonic()
                last_completion.set(self._clock.now().timestamp())
            gap = state.interval * (1.0 + self._rng.uniform(0.0, state.jitter))
            await self._sleep_unless_stopped(started + gap - self._clock.monotonic(), state.wake)
        self._log.info("loop stopped", extra={"fields": {"loop": name}})

    async def _wait_for_caches(self, state: _LoopState, caches: LoopCaches) -> None:
        name = state.loop.name
        state.waiting = tuple(caches.waiting())
        gauge = self._metrics.waiting_for_caches.labels(name)
        gauge.set(1)
        self._log.info(
            "waiting for caches to sync",
            extra={"fields": {"loop": name, "collections": list(state.waiting)}},
        )
        synced = asyncio.ensure_future(caches.wait())
        stopped = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait({synced, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await cancel_and_wait(synced, stopped)
            state.waiting = ()
            gauge.set(0)
            state.last_completed = self._clock.monotonic()
        if not self._stop.is_set():
            self._log.info("caches synced", extra={"fields": {"loop": name}})

    async def _sleep_unless_stopped(self, seconds: float, wake: asyncio.Event | None) -> None:
        if seconds <= 0:
            # An overrunning loop goes on at once, but never without a few passes of the event
            # loop: an iteration that computed without awaiting anything would otherwise be
            # followed by the next with no chance for the webhook, the extender or /healthz
            # (issue 27 item 11: a descheduling cycle longer than its interval starved them).
            # One pass moves a request one step (accept, TLS, read, handle, write): give the
            # requests that arrived during the iteration enough passes to be answered.
            for _ in range(OVERRUN_PASSES):
                await asyncio.sleep(0)
            return
        if wake is None:
            await sleep_or_stop(self._clock, seconds, self._stop)
            return
        if wake.is_set():
            return
        waker = asyncio.ensure_future(wake.wait())
        try:
            await sleep_or_stop(self._clock, seconds, self._stop, also=waker)
        finally:
            await cancel_and_wait(waker)
