"""Lease renewal on a thread of its own, so CPU work on the serving loop cannot stop it.

Why (issue 27, item 11): the process serves the webhook and the scheduler extender and runs
its control loops on one event loop. A CPU-bound stretch on that loop — a flood of 5,000-node
extender filters, or one autoscaler or descheduler iteration over 30,000 pods — kept the
elector's renewal from running for longer than ``renew-deadline`` (10 s), so the leader gave up
its Lease while doing the leader's work (the write gate held: no split-brain write, but the
loops stopped and another replica had to take over).

:class:`ElectionThread` runs the :class:`~kubescale.kube.leader_election.LeaderElector` on a
dedicated thread with its own event loop and its own API client (an ``aiohttp`` session belongs
to the loop that made it). Renewal is I/O: while the serving thread computes, CPython hands the
GIL to the election thread at every switch interval (5 ms), so a renewal waits milliseconds,
not for the computation to end. The rules of leader election are unchanged (client-go's,
:mod:`kubescale.kube.leader_election`); only where they run moves:

* the gated work (the leader-only loop runner) still runs on the serving loop: when the elector
  starts leading, the work is started there as a task; when leadership is lost the task is
  cancelled there, and the elector's ``_step_down`` waits for it as before (client-go cancels
  the leader's context and waits);
* the write gate (``may_write``) and ``is_leader`` are read from the serving thread: both are a
  flag and a float written by the election thread, and lapse by themselves at the deadline;
* a clean stop sets the elector's ``stop`` on its loop; it waits for the work to finish on the
  serving loop, releases the Lease, and the thread ends.

Only with the real clock: a :class:`~kubescale.base.clock.VirtualClock` is driven from one loop,
so ``serve`` keeps the elector on the serving loop with any other clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from kubescale.base.logs import component_logger
from kubescale.base.tasks import cancel_and_wait
from kubescale.kube.client import KubeClient
from kubescale.kube.leader_election import LeaderElector

__all__ = ["ElectionThread"]

Work = Callable[[], Coroutine[Any, Any, None]]


class ElectionThread:
    """A :class:`LeaderElector` campaigning on its own thread and event loop (module docstring).

    ``connect`` makes the elector's API client and ``make_elector`` the elector, both on the
    election thread's loop (``loop_factory``: ``None`` for asyncio's). :meth:`start` returns
    once the elector exists; :meth:`run` campaigns until ``stop`` is set, running ``work`` on
    the caller's loop while leading.
    """

    def __init__(
        self,
        *,
        connect: Callable[[], Coroutine[Any, Any, KubeClient]],
        make_elector: Callable[[KubeClient], LeaderElector],
        loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        self._connect = connect
        self._make_elector = make_elector
        self._loop_factory = loop_factory
        self._log = logger or component_logger("leader-election")
        self._thread = threading.Thread(target=self._main, name="lease-renewal", daemon=True)
        self._thread_loop: asyncio.AbstractEventLoop | None = None
        self._serving_loop: asyncio.AbstractEventLoop | None = None
        self._elector: LeaderElector | None = None
        self._ready: asyncio.Future[LeaderElector] | None = None
        self._finished: asyncio.Future[None] | None = None
        self._go: asyncio.Event | None = None  # on the thread's loop
        self._stop: asyncio.Event | None = None  # on the thread's loop
        self._campaign: asyncio.Task[None] | None = None  # on the thread's loop
        self._work: Work | None = None

    @property
    def elector(self) -> LeaderElector:
        if self._elector is None:
            raise RuntimeError("ElectionThread.start() has not returned yet")
        return self._elector

    @property
    def thread(self) -> threading.Thread:
        return self._thread

    async def start(self) -> LeaderElector:
        """Start the thread; the elector, once its client is connected (its error, if not)."""
        serving = asyncio.get_running_loop()
        self._serving_loop = serving
        self._ready = serving.create_future()
        self._finished = serving.create_future()
        self._thread.start()
        try:
            self._elector = await self._ready
        except BaseException:
            await self.close()
            raise
        return self._elector

    async def run(self, *, work: Work, stop: asyncio.Event) -> None:
        """Campaign (and lead, running ``work`` on this loop) until ``stop``; the Lease is
        released before this returns. Cancelling it cancels the campaign the same way."""
        thread_loop = self._thread_loop
        finished = self._finished
        if thread_loop is None or finished is None or self._go is None:
            raise RuntimeError("ElectionThread.start() must succeed before run()")
        self._work = work
        thread_loop.call_soon_threadsafe(self._go.set)
        watcher: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({watcher, finished}, return_when=asyncio.FIRST_COMPLETED)
            if not finished.done():
                self._call_in_thread(self._set_stop)
            await asyncio.shield(finished)
        except asyncio.CancelledError:
            self._call_in_thread(self._cancel_campaign)
            await asyncio.wait({finished})
            raise
        finally:
            await cancel_and_wait(watcher)

    async def close(self) -> None:
        """End the thread (stopping a campaign that was never run) and wait for it."""
        finished = self._finished
        if not self._thread.is_alive() or finished is None:
            return
        self._call_in_thread(self._cancel_campaign)
        await asyncio.wait({finished})

    # ---- on the election thread ------------------------------------------------------------

    def _call_in_thread(self, callback: Callable[[], None]) -> None:
        loop = self._thread_loop
        if loop is not None and not loop.is_closed():
            # the loop may close between the check and the call
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(callback)

    def _set_stop(self) -> None:
        if self._stop is not None:
            self._stop.set()

    def _cancel_campaign(self) -> None:
        if self._campaign is not None:
            self._campaign.cancel()

    def _to_serving(self, future: asyncio.Future[Any] | None, outcome: BaseException | Any) -> None:
        loop = self._serving_loop
        if future is None or loop is None or loop.is_closed():
            return

        def settle() -> None:
            if future.done():
                return
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)

        with contextlib.suppress(RuntimeError):  # the serving loop closed meanwhile
            loop.call_soon_threadsafe(settle)

    def _main(self) -> None:
        try:
            with asyncio.Runner(loop_factory=self._loop_factory) as runner:
                runner.run(self._campaign_main())
        except asyncio.CancelledError:
            # close() or a cancelled run(): the elector has stepped down and released.
            self._to_serving(self._ready, RuntimeError("lease renewal thread stopped"))
        except BaseException as exc:  # the thread must always report back
            self._to_serving(self._ready, exc)
            self._log.exception("lease renewal thread failed")
        finally:
            self._to_serving(self._finished, None)

    async def _campaign_main(self) -> None:
        self._thread_loop = asyncio.get_running_loop()
        self._go = asyncio.Event()
        self._stop = asyncio.Event()
        self._campaign = asyncio.current_task()
        try:
            client = await self._connect()
        except Exception as exc:
            self._to_serving(self._ready, exc)
            return
        try:
            elector = self._make_elector(client)
            self._to_serving(self._ready, elector)
            await self._go.wait()
            await elector.run(on_started_leading=self._lead, stop=self._stop)
        finally:
            await client.close()

    async def _lead(self) -> None:
        """The gated work, run on the serving loop for as long as this task runs here."""
        serving = self._serving_loop
        work = self._work
        assert serving is not None
        assert work is not None
        here = asyncio.get_running_loop()
        done = asyncio.Event()
        state: dict[str, Any] = {"task": None, "cancelled": False}

        def finished_there(task: asyncio.Task[None]) -> None:
            if not task.cancelled() and task.exception() is not None:
                self._log.error("work under leadership failed", exc_info=task.exception())
            here.call_soon_threadsafe(done.set)

        def start_there() -> None:
            if state["cancelled"]:
                here.call_soon_threadsafe(done.set)
                return
            task: asyncio.Task[None] = serving.create_task(work())
            state["task"] = task
            task.add_done_callback(finished_there)

        def cancel_there() -> None:
            state["cancelled"] = True
            task = state["task"]
            if task is not None:
                task.cancel()

        serving.call_soon_threadsafe(start_there)
        try:
            await done.wait()
        except asyncio.CancelledError:
            # Leadership lost (or the elector cancelled): stop the work where it runs and
            # wait for it, as client-go waits for the leader's context to be done.
            serving.call_soon_threadsafe(cancel_there)
            await done.wait()
            raise
