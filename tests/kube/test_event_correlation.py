"""EventCorrelator: client-go's de-duplication, aggregation and spam filter (events_cache.go)."""

from __future__ import annotations

from typing import Any

import pytest

from kubescale.base.clock import VirtualClock
from kubescale.kube.event_correlation import (
    AGGREGATE_PREFIX,
    EventCorrelator,
    aggregate_key,
    event_key,
    event_name,
    format_time,
    unix_nanos,
)


def make(
    clock: VirtualClock,
    message: str,
    *,
    reason: str = "Evicted",
    name: str = "web-1",
    field_path: str = "",
    type_: str = "Normal",
) -> dict[str, Any]:
    now = clock.now()
    involved: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": "default",
        "name": name,
        "uid": f"uid-{name}",
    }
    if field_path:
        involved["fieldPath"] = field_path
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": event_name(name, unix_nanos(now)), "namespace": "default"},
        "involvedObject": involved,
        "reason": reason,
        "message": message,
        "firstTimestamp": format_time(now),
        "lastTimestamp": format_time(now),
        "count": 1,
        "type": type_,
        "source": {"component": "kubescale-updater"},
        "reportingComponent": "kubescale-updater",
        "reportingInstance": "",
    }


async def test_identical_events_become_a_patch_of_the_first() -> None:
    clock = VirtualClock()
    correlator = EventCorrelator(clock=clock)
    first = correlator.correlate(make(clock, "evicted to apply new resources"))
    assert first.patch is None
    assert first.event is not None
    assert first.event["count"] == 1
    first_name = first.event["metadata"]["name"]
    await clock.advance(30)
    second = correlator.correlate(make(clock, "evicted to apply new resources"))
    assert second.event is not None
    assert second.event["metadata"]["name"] == first_name
    assert second.event["count"] == 2
    assert second.event["firstTimestamp"] == "2026-01-01T00:00:00Z"
    assert second.patch == {
        "count": 2,
        "lastTimestamp": "2026-01-01T00:00:30Z",
        "message": "evicted to apply new resources",
    }
    third = correlator.correlate(make(clock, "evicted to apply new resources"))
    assert third.patch is not None
    assert third.patch["count"] == 3


async def test_server_state_is_remembered_for_the_next_patch() -> None:
    clock = VirtualClock()
    correlator = EventCorrelator(clock=clock)
    created = correlator.correlate(make(clock, "m")).event
    assert created is not None
    stored = {**created, "metadata": {**created["metadata"], "resourceVersion": "42"}, "count": 5}
    correlator.update_state(stored)
    again = correlator.correlate(make(clock, "m")).event
    assert again is not None
    assert again["metadata"]["resourceVersion"] == "42"
    assert again["count"] == 6


def test_keys_follow_upstream_fields() -> None:
    clock = VirtualClock()
    base = make(clock, "m")
    other_path = make(clock, "m", field_path="spec.containers{app}")
    other_message = make(clock, "n")
    other_reason = make(clock, "m", reason="Scaled")
    # getEventKey includes fieldPath and message; the aggregate key includes neither.
    assert event_key(base) != event_key(other_path)
    assert event_key(base) != event_key(other_message)
    assert aggregate_key(base)[0] == aggregate_key(other_path)[0] == aggregate_key(other_message)[0]
    assert aggregate_key(base)[0] != aggregate_key(other_reason)[0]
    assert aggregate_key(other_message)[1] == "n"


async def test_ten_distinct_messages_within_the_window_aggregate() -> None:
    clock = VirtualClock()
    correlator = EventCorrelator(clock=clock)
    results = []
    for i in range(1, 10):
        results.append(correlator.correlate(make(clock, f"message {i}")))
        await clock.advance(10)
    assert all(r.event is not None and r.patch is None for r in results)
    assert all(r.event and not r.event["message"].startswith(AGGREGATE_PREFIX) for r in results)

    tenth = correlator.correlate(make(clock, "message 10"))
    assert tenth.event is not None
    assert tenth.patch is None
    assert tenth.event["message"] == AGGREGATE_PREFIX + "message 10"
    assert tenth.event["count"] == 1
    assert tenth.event["reason"] == "Evicted"
    assert tenth.event["involvedObject"]["name"] == "web-1"
    aggregate_name = tenth.event["metadata"]["name"]

    await clock.advance(10)
    eleventh = correlator.correlate(make(clock, "message 11"))
    assert eleventh.event is not None
    assert eleventh.event["metadata"]["name"] == aggregate_name
    assert eleventh.patch == {
        "count": 2,
        "lastTimestamp": format_time(clock.now()),
        "message": AGGREGATE_PREFIX + "message 11",
    }


async def test_the_window_slides_from_the_last_similar_event() -> None:
    clock = VirtualClock()
    correlator = EventCorrelator(clock=clock)
    # Ten distinct messages 5 minutes apart: never 10 minutes since the previous one.
    last = None
    for i in range(10):
        last = correlator.correlate(make(clock, f"m{i}"))
        await clock.advance(300)
    assert last is not None
    assert last.event is not None
    assert last.event["message"].startswith(AGGREGATE_PREFIX)


async def test_a_quiet_gap_longer_than_the_window_starts_over() -> None:
    clock = VirtualClock()
    correlator = EventCorrelator(clock=clock)
    for i in range(9):
        correlator.correlate(make(clock, f"m{i}"))
    await clock.advance(601)
    fresh = correlator.correlate(make(clock, "m9"))
    assert fresh.event is not None
    assert fresh.event["message"] == "m9"


async def test_spam_filter_allows_a_burst_of_25_then_one_per_five_minutes() -> None:
    clock = VirtualClock()
    correlator = EventCorrelator(clock=clock)
    outcomes = [correlator.correlate(make(clock, "same")).skip for _ in range(26)]
    assert outcomes == [False] * 25 + [True]
    await clock.advance(299)
    assert correlator.correlate(make(clock, "same")).skip
    await clock.advance(1)
    assert not correlator.correlate(make(clock, "same")).skip
    # Another object has its own bucket.
    assert not correlator.correlate(make(clock, "same", name="web-2")).skip


@pytest.mark.parametrize("size", [2, 3])
def test_lru_bound_forgets_old_observations(size: int) -> None:
    clock = VirtualClock()
    correlator = EventCorrelator(clock=clock, cache_size=size)
    correlator.correlate(make(clock, "first"))
    for i in range(size):
        correlator.correlate(make(clock, f"other {i}", reason=f"R{i}"))
    again = correlator.correlate(make(clock, "first"))
    assert again.patch is None  # evicted from the LRU: written as a new event


def test_names_stay_unique_when_the_clock_stands_still() -> None:
    clock = VirtualClock()
    correlator = EventCorrelator(clock=clock)
    names = [correlator.unique_name("web-1", clock.now()) for _ in range(3)]
    base = unix_nanos(clock.now())
    assert names == [f"web-1.{base:x}", f"web-1.{base + 1:x}", f"web-1.{base + 2:x}"]
