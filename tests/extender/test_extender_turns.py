"""The extender's verbs take turns to compute (issue 27 item 11): beyond
``--extender-max-waiting-requests`` waiting requests, a request is answered at once with an
explicit error — a filter ``Error`` (kube-scheduler skips an ignorable extender's error), a
prioritize 503 — instead of queueing behind the others past kube-scheduler's ``httpTimeout``.
The waiting ones are answered normally when their turn comes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from kubescale.cli.main import build_parser
from kubescale.extender.extender_config import (
    ExtenderConfigError,
    ExtenderSettings,
    extender_settings_from_args,
)
from kubescale.extender.extender_metrics import ExtenderMetrics

from .extender_fixtures import running_extender
from .test_extender_wire import NODES, POLICY, RUNNING, scheduler_pod

MAX_WAITING = 2


async def _until(predicate: Any) -> None:
    for _ in range(2000):  # loop passes, not seconds
        if predicate():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("condition never met")


async def test_requests_beyond_the_queue_are_refused_at_once_and_the_rest_answered() -> None:
    settings = ExtenderSettings(max_waiting_requests=MAX_WAITING)
    async with running_extender(POLICY, nodes=NODES, pods=RUNNING, settings=settings) as ext:
        registry = CollectorRegistry()
        ext.extender.metrics = ExtenderMetrics(registry)
        body = {"Pod": scheduler_pod(), "NodeNames": ["n1", "n2", "n3", "n4"]}
        turns = ext.extender.turns
        # Another computation holds the turn (as a filter of 5,000 nodes would, for longer).
        async with turns.turn() as held:
            assert held
            waiting = [asyncio.create_task(ext.post("filter", body)) for _ in range(MAX_WAITING)]
            await _until(lambda: turns.waiting == MAX_WAITING)
            # The queue is full: these are answered while the turn is still held.
            refused = await asyncio.gather(
                ext.post("filter", body), ext.post("filter", body), ext.post("prioritize", body)
            )
            assert [status for status, _ in refused] == [200, 200, 503]
            for _, answer in refused:
                assert answer["Error"].startswith(
                    "scheduler extender busy: 2 requests already waiting for their turn"
                )
                assert "--extender-max-waiting-requests" in answer["Error"]
            assert not any(task.done() for task in waiting)
        answers = await asyncio.gather(*waiting)
        # The two that waited got the real filter answer: n1 (untolerated PreferNoSchedule
        # taint) and n2 (3000m of 4000m = 75 % > the 50 % target) refused, n3 and n4 pass.
        for status, answer in answers:
            assert status == 200
            assert not answer.get("Error")
            assert answer["NodeNames"] == ["n3", "n4"]
        assert (turns.running, turns.waiting) == (0, 0)
        busy = registry.get_sample_value(
            "kubescale_extender_requests_total", {"verb": "filter", "result": "busy"}
        )
        assert busy == 2
        assert (
            registry.get_sample_value(
                "kubescale_extender_requests_total", {"verb": "prioritize", "result": "busy"}
            )
            == 1
        )
        assert registry.get_sample_value("kubescale_extender_requests_waiting") == 0


def test_a_negative_queue_length_is_a_one_line_error_naming_the_flag() -> None:
    args = build_parser().parse_args(["serve", "--extender-max-waiting-requests", "-1"])
    with pytest.raises(
        ExtenderConfigError, match=r"^--extender-max-waiting-requests must not be negative, got -1$"
    ):
        extender_settings_from_args(args)
    args = build_parser().parse_args(["serve"])
    assert extender_settings_from_args(args).max_waiting_requests == 8
