"""WATCH through the real client: ordering, bookmarks, timeouts, 410 Gone, selector transitions."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes.aio import client, watch

from kubescale.base.clock import VirtualClock
from kubescale.kube.resources import CONFIG_MAPS
from kubescale.sim.apiserver.server import ApiServer
from tests.sim.apiserver.conftest import client_configuration, loose, pod_manifest


def configmap(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}}


async def open_watch(api: Any, **params: Any) -> Any:
    core = loose(client.CoreV1Api(api))
    return await core.list_namespaced_config_map_without_preload_content(
        "default", watch=True, **params
    )


async def read_events(response: Any, *, count: int | None = None) -> list[dict[str, Any]]:
    """Events until ``count`` were read, or until the server ends the stream."""
    events: list[dict[str, Any]] = []
    try:
        while count is None or len(events) < count:
            line = await asyncio.wait_for(response.content.readline(), timeout=5)
            if not line:
                break
            events.append(json.loads(line))
    finally:
        response.release()
    return events


def summary(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["type"], e["object"]["metadata"].get("name", "")) for e in events]


async def test_events_after_a_resource_version_in_order(api: Any, server: ApiServer) -> None:
    store = server.store
    store.create(configmap("a"), namespace="default")
    start = store.resource_version
    store.create(configmap("b"), namespace="default")
    current = store.get(CONFIG_MAPS, "a", "default")
    store.update({**current, "data": {"x": "1"}})
    store.delete(CONFIG_MAPS, "b", "default")
    response = await open_watch(api, resource_version=str(start))
    assert response.status == 200
    assert response.headers["Content-Type"] == "application/json"
    events = await read_events(response, count=3)
    assert summary(events) == [("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")]
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert versions == list(range(start + 1, start + 4))
    assert events[0]["object"]["kind"] == "ConfigMap"


async def test_watch_without_resource_version_starts_with_current_objects(
    api: Any, server: ApiServer
) -> None:
    server.store.create(configmap("old"), namespace="default")
    response = await open_watch(api, timeout_seconds=2)
    first = await read_events(response, count=1)
    assert summary(first) == [("ADDED", "old")]


async def test_live_events_reach_an_open_watch(api: Any, server: ApiServer) -> None:
    response = await open_watch(api, resource_version=str(server.store.resource_version))
    reader = asyncio.create_task(read_events(response, count=2))
    await asyncio.sleep(0.05)
    core = loose(client.CoreV1Api(api))
    await core.create_namespaced_config_map("default", configmap("live"))
    await core.delete_namespaced_config_map("live", "default")
    assert summary(await reader) == [("ADDED", "live"), ("DELETED", "live")]


async def test_bookmarks_carry_only_the_resource_version(api: Any, server: ApiServer) -> None:
    server.store.create(configmap("a"), namespace="default")
    response = await open_watch(
        api, resource_version=str(server.store.resource_version), allow_watch_bookmarks=True
    )
    events = await read_events(response, count=2)  # the fixture's interval is 0.2 s
    assert [e["type"] for e in events] == ["BOOKMARK", "BOOKMARK"]
    assert events[0]["object"] == {
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": str(server.store.resource_version)},
    }


async def test_events_queued_when_a_bookmark_falls_due_are_all_delivered(
    api: Any, server: ApiServer
) -> None:
    """Regression: a bookmark due while events wait in the queue must not stall the stream."""
    response = await open_watch(
        api, resource_version=str(server.store.resource_version), allow_watch_bookmarks=True
    )
    first = await read_events_keep_open(response, count=1)  # the first bookmark, at 0.2 s
    assert first[0]["type"] == "BOOKMARK"
    await asyncio.sleep(0.19)  # the next bookmark falls due while the burst below is queued
    for index in range(300):
        server.store.create(configmap(f"burst-{index}"), namespace="default")
    events = await read_events(response, count=300 + 1)
    added = [name for kind, name in summary(events) if kind == "ADDED"]
    assert added[:300] == [f"burst-{index}" for index in range(300)]


async def read_events_keep_open(response: Any, *, count: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    while len(events) < count:
        line = await asyncio.wait_for(response.content.readline(), timeout=5)
        events.append(json.loads(line))
    return events


async def test_no_bookmarks_unless_asked(api: Any, server: ApiServer) -> None:
    response = await open_watch(api, resource_version="1", timeout_seconds=1)
    assert await read_events(response) == []


async def test_timeout_seconds_ends_the_stream_cleanly(api: Any) -> None:
    started = time.monotonic()
    response = await open_watch(api, resource_version="1", timeout_seconds=1)
    assert await read_events(response) == []
    # the server ended the stream (read_events returned) and not before its timeout; no upper
    # bound: a busy machine stretches it (issue 32.7)
    assert time.monotonic() - started >= 0.9


async def test_too_old_resource_version_is_an_error_event(clock: VirtualClock) -> None:
    async with ApiServer(clock=clock, crd_dirs=[], history_window=5) as server:
        configuration = await client_configuration(server.kubeconfig())
        async with client.ApiClient(configuration=configuration) as api:
            for index in range(10):
                server.store.create(configmap(f"cm-{index}"), namespace="default")
            response = await open_watch(api, resource_version="2", timeout_seconds=5)
            events = await read_events(response)
    floor = server.store.events.floor
    assert floor == server.store.resource_version - 5
    assert events == [
        {
            "type": "ERROR",
            "object": {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": f"too old resource version: 2 ({floor})",
                "reason": "Expired",
                "code": 410,
            },
        }
    ]


async def test_selector_watch_turns_updates_into_added_and_deleted(
    api: Any, server: ApiServer
) -> None:
    core = loose(client.CoreV1Api(api))
    response = await core.list_namespaced_pod_without_preload_content(
        "default",
        watch=True,
        label_selector="app=web",
        resource_version=str(server.store.resource_version),
    )
    await core.create_namespaced_pod("default", pod_manifest(name="p", labels={"app": "web"}))
    await core.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"app": "db"}}})
    await core.patch_namespaced_pod("p", "default", {"metadata": {"annotations": {"a": "1"}}})
    await core.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"app": "web"}}})
    await core.patch_namespaced_pod("p", "default", {"metadata": {"annotations": {"a": "2"}}})
    await core.delete_namespaced_pod("p", "default")
    events = await read_events(response, count=6)
    # the delete of an unscheduled pod is a MODIFIED (deletionTimestamp) then a DELETED
    assert [e["type"] for e in events] == [
        "ADDED",
        "DELETED",
        "ADDED",
        "MODIFIED",
        "MODIFIED",
        "DELETED",
    ]
    stopped_matching = events[1]["object"]
    assert stopped_matching["metadata"]["labels"] == {"app": "web"}  # the previous content
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert versions == sorted(versions)


async def test_field_selector_watch_follows_one_object(api: Any, server: ApiServer) -> None:
    core = loose(client.CoreV1Api(api))
    response = await core.list_namespaced_config_map_without_preload_content(
        "default", watch=True, field_selector="metadata.name=b"
    )
    await core.create_namespaced_config_map("default", configmap("a"))
    await core.create_namespaced_config_map("default", configmap("b"))
    assert summary(await read_events(response, count=1)) == [("ADDED", "b")]


async def stream_of(api: Any, **params: Any) -> AsyncIterator[dict[str, Any]]:
    core = loose(client.CoreV1Api(api))
    watcher = loose(watch).Watch()  # untyped in kubernetes 37
    async for event in watcher.stream(core.list_namespaced_config_map, "default", **params):
        yield event


async def test_client_watch_helper_reads_typed_objects(api: Any, server: ApiServer) -> None:
    server.store.create(configmap("a", tier="x"), namespace="default")
    seen = []
    async for event in stream_of(api, timeout_seconds=1, allow_watch_bookmarks=True):
        if event["type"] != "BOOKMARK":
            seen.append((event["type"], event["object"].metadata.name))
    assert seen == [("ADDED", "a")]


@pytest.mark.parametrize("bad", ["abc", "-3"])
async def test_malformed_resource_version_is_bad_request(api: Any, bad: str) -> None:
    response = await open_watch(api, resource_version=bad)
    try:
        assert response.status == 400
    finally:
        response.release()
