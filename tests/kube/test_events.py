"""The event recorder against the server: PATCHed counts for repeats, aggregation of similar
events, fallback to create when the Event is gone, and the non-blocking queue."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from kubescale.base.clock import VirtualClock
from kubescale.kube.client import KubeClient
from kubescale.kube.event_correlation import AGGREGATE_PREFIX
from kubescale.kube.events import EventRecorder, object_reference
from kubescale.kube.resources import CORE_EVENTS
from kubescale.sim.apiserver.server import ApiServer

from .conftest import new_client
from .objects import PAUSE_POD


def _events(apiserver: ApiServer) -> list[dict[str, Any]]:
    return [
        e
        for e in apiserver.store.snapshots(CORE_EVENTS, "default")
        if e["involvedObject"]["name"] == "web-1"
    ]


def _requests(registry: CollectorRegistry, verb: str, code: str) -> float:
    value = registry.get_sample_value(
        "kubescale_apiserver_client_request_duration_seconds_count",
        {"verb": verb, "resource": "events", "code": code},
    )
    return value or 0.0


async def _setup(
    apiserver: ApiServer, kubeconfig: Path
) -> tuple[VirtualClock, CollectorRegistry, KubeClient, dict[str, Any]]:
    clock = VirtualClock()
    registry = CollectorRegistry()
    client = await new_client(kubeconfig, clock=clock, registry=registry)
    target = apiserver.store.create(PAUSE_POD(name="web-1"))
    return clock, registry, client, target


async def test_repeats_patch_the_count_of_one_event(apiserver: ApiServer, kubeconfig: Path) -> None:
    clock, registry, client, target = await _setup(apiserver, kubeconfig)
    recorder = EventRecorder(client=client, component="kubescale-updater", host="node-a")
    try:
        for _ in range(3):
            recorder.event(target, type="Normal", reason="EvictedByVPA", message="evicted")
            await recorder.flush()
            await clock.advance(15)
        events = _events(apiserver)
        assert len(events) == 1
        event = events[0]
        assert event["count"] == 3
        assert event["message"] == "evicted"
        assert event["firstTimestamp"] == "2026-01-01T00:00:00Z"
        assert event["lastTimestamp"] == "2026-01-01T00:00:30Z"
        assert event["source"] == {"component": "kubescale-updater", "host": "node-a"}
        assert event["involvedObject"] == object_reference(target)
        assert event["metadata"]["name"].startswith("web-1.")
        assert _requests(registry, "create", "201") == 1
        assert _requests(registry, "patch", "200") == 2
    finally:
        await recorder.close()
        await client.close()


async def test_similar_events_are_aggregated_after_ten(
    apiserver: ApiServer, kubeconfig: Path
) -> None:
    clock, _, client, target = await _setup(apiserver, kubeconfig)
    recorder = EventRecorder(client=client, component="kubescale-updater")
    try:
        for i in range(1, 13):
            recorder.event(target, type="Warning", reason="EvictionFailed", message=f"try {i}")
            await recorder.flush()
            await clock.advance(1)
        events = _events(apiserver)
        singles = sorted(
            e["message"]
            for e in events
            if e["count"] == 1 and not e["message"].startswith(AGGREGATE_PREFIX)
        )
        assert singles == sorted(f"try {i}" for i in range(1, 10))
        aggregates = [e for e in events if e["message"].startswith(AGGREGATE_PREFIX)]
        assert len(aggregates) == 1
        assert aggregates[0]["count"] == 3  # events 10, 11 and 12
        assert aggregates[0]["message"] == AGGREGATE_PREFIX + "try 12"
        assert aggregates[0]["type"] == "Warning"
    finally:
        await recorder.close()
        await client.close()


async def test_a_deleted_event_is_created_again(apiserver: ApiServer, kubeconfig: Path) -> None:
    clock, _, client, target = await _setup(apiserver, kubeconfig)
    recorder = EventRecorder(client=client, component="c")
    try:
        recorder.event(target, type="Normal", reason="R", message="m")
        await recorder.flush()
        (first,) = _events(apiserver)
        apiserver.store.delete(CORE_EVENTS, first["metadata"]["name"], "default")
        await clock.advance(5)
        recorder.event(target, type="Normal", reason="R", message="m")
        await recorder.flush()
        (again,) = _events(apiserver)
        assert again["metadata"]["name"] == first["metadata"]["name"]
        assert again["count"] == 2
    finally:
        await recorder.close()
        await client.close()


async def test_invalid_types_and_full_queues_drop_events(
    apiserver: ApiServer, kubeconfig: Path
) -> None:
    _, _, client, target = await _setup(apiserver, kubeconfig)
    recorder = EventRecorder(client=client, component="c", queue_length=2)
    try:
        recorder.event(target, type="Info", reason="R", message="m")
        assert recorder.dropped == 1
        for i in range(3):  # the third does not fit before the worker runs
            recorder.event(target, type="Normal", reason="R", message=f"m{i}")
        assert recorder.dropped == 2
        await recorder.flush()
        assert sorted(e["message"] for e in _events(apiserver)) == ["m0", "m1"]
    finally:
        await recorder.close()
        await client.close()


def test_object_reference_for_cluster_scoped_and_field_path() -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "u"}}
    assert object_reference(node) == {"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "u"}
    ref = object_reference(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}},
        field_path="spec.containers{app}",
    )
    assert ref["fieldPath"] == "spec.containers{app}"
    assert ref["namespace"] == "ns"
