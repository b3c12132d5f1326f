"""The extender's decisions on a worker thread (:mod:`kubescale.extender.offload`): the serving
loop runs while a decision computes, and nothing writes the cache or the eviction memory while
one reads — the loop's writes are queued meanwhile and applied in order right after it.

Mechanisms, not elapsed time: the decision itself waits for a callback of the serving loop to
have run (a ``threading.Event`` the loop sets); on the serving loop that callback could not run
until the decision returned.
"""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta

import pytest

from kubescale.extender.extender_config import ExtenderSettings
from kubescale.extender.offload import DecisionThread, DeferredMemory, DeferredUsage, DeferredWrites
from tests.controllers.descheduler.builders import NOW, cycle_pod

from .extender_fixtures import running_extender
from .test_extender_wire import NODES, POLICY, RUNNING, scheduler_pod

SAFETY_SECONDS = 10.0
"""Only so that a broken build does not hang: the assertion is on the event, not the time."""


async def _until_done_reading(writes: DeferredWrites) -> None:
    for _ in range(100_000):  # loop passes: the decision's end is a callback on this loop
        if not writes.reading:
            return
        await asyncio.sleep(0.0001)
    raise AssertionError("the decision never ended")


async def test_the_serving_loop_runs_while_a_decision_computes() -> None:
    loop = asyncio.get_running_loop()
    loop_ran = threading.Event()

    def decision() -> bool:
        # Started: ask the serving loop to run a callback, then wait until it has.
        loop.call_soon_threadsafe(loop_ran.set)
        return loop_ran.wait(SAFETY_SECONDS)

    decisions = DecisionThread(DeferredWrites())
    try:
        assert await decisions.run(decision) is True
    finally:
        decisions.close()


def test_on_the_serving_loop_the_same_decision_starves_the_loop() -> None:
    """The contrast (what the route did before): run inline, the callback waits for the end."""

    async def scenario() -> bool:
        loop = asyncio.get_running_loop()
        loop_ran = threading.Event()
        loop.call_soon(loop_ran.set)
        return loop_ran.wait(0.2)  # inline: the loop cannot run the callback meanwhile

    assert asyncio.run(scenario()) is False


async def test_writes_wait_for_the_decision_and_apply_in_order() -> None:
    writes = DeferredWrites()
    applied: list[str] = []
    writes.apply(lambda: applied.append("idle"))
    assert applied == ["idle"]  # no decision reading: at once
    started = threading.Event()
    release = threading.Event()

    def decision() -> list[str]:
        started.set()
        release.wait(SAFETY_SECONDS)
        return list(applied)  # what the decision could see

    decisions = DecisionThread(writes)
    try:
        running = asyncio.ensure_future(decisions.run(decision))
        assert await asyncio.to_thread(started.wait, SAFETY_SECONDS)
        handler = writes.wrap(lambda obj: applied.append(f"informer {obj}"))
        handler("a")
        writes.apply(lambda: applied.append("usage"))
        handler("b")
        assert applied == ["idle"]  # queued, not applied, and the loop did not block
        assert writes.deferred == 3
        release.set()
        seen = await running
        assert seen == ["idle"]  # the decision read a cache nobody wrote
        assert applied == ["idle", "informer a", "usage", "informer b"]  # in order, after it
    finally:
        decisions.close()


async def test_a_cancelled_request_keeps_writes_queued_until_its_decision_returns() -> None:
    writes = DeferredWrites()
    started, release = threading.Event(), threading.Event()

    def decision() -> None:
        started.set()
        release.wait(SAFETY_SECONDS)

    decisions = DecisionThread(writes)
    try:
        request = asyncio.ensure_future(decisions.run(decision))
        assert await asyncio.to_thread(started.wait, SAFETY_SECONDS)
        request.cancel()
        with pytest.raises(asyncio.CancelledError):
            await request
        applied: list[str] = []
        writes.apply(lambda: applied.append("write"))
        assert applied == []  # the decision still reads
        assert writes.reading
        release.set()
        await _until_done_reading(writes)
        assert applied == ["write"]
    finally:
        decisions.close()


def test_the_memory_and_usage_go_through_the_writes() -> None:
    writes = DeferredWrites()
    memory = DeferredMemory(duration=timedelta(minutes=10), writes=writes)
    received: list[object] = []

    class Receiver:
        def set_node_metrics(self, usage: object) -> None:
            received.append(usage)

        def set_metric_values(self, query: str, values: object) -> None:
            received.append((query, values))

    usage = DeferredUsage(Receiver(), writes)
    writes.begin()
    memory.record(cycle_pod("p", "n1", cpu="100m"), "n1", NOW)
    usage.set_node_metrics({"n1": {"cpu": 1}})
    assert len(memory) == 0
    assert received == []
    writes.end()
    assert len(memory) == 1
    assert received == [{"n1": {"cpu": 1}}]


async def test_the_routes_answer_the_same_from_the_worker_thread() -> None:
    async with running_extender(
        POLICY, nodes=NODES, pods=RUNNING, settings=ExtenderSettings()
    ) as ext:
        ext.extender.decisions = DecisionThread(DeferredWrites())
        try:
            body = {"Pod": scheduler_pod(), "NodeNames": ["n1", "n2", "n3", "n4"]}
            status, answer = await ext.post("filter", body)
            # n1: untolerated PreferNoSchedule taint; n2: 3000m of 4000m = 75 % > 50 %.
            assert status == 200
            assert answer["NodeNames"] == ["n3", "n4"]
            status, scores = await ext.post("prioritize", body)
            assert status == 200
            assert {s["Host"] for s in scores} == {"n1", "n2", "n3", "n4"}
            status, refused = await ext.post("prioritize", None, raw=b"{")
            assert status == 400
            assert refused["Error"]
        finally:
            ext.extender.decisions.close()
