"""Fault injection, as a client sees it: error Statuses, Retry-After, slowness, broken watches."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import aiohttp
import pytest
from kubernetes.aio import client
from kubernetes.aio.client.exceptions import ApiException

from kubescale.sim.apiserver.server import ApiServer

from .conftest import loose, status_of


async def drain(response: Any) -> None:
    while await response.content.readline():
        pass


async def test_internal_error_for_the_next_matching_requests(api: Any, server: ApiServer) -> None:
    core = loose(client.CoreV1Api(api))
    server.faults.add(verb="list", resource="configmaps", status=500, count=2)
    await core.list_namespaced_pod("default")  # another resource: untouched
    for _ in range(2):
        with pytest.raises(ApiException) as caught:
            await core.list_namespaced_config_map("default")
        status = status_of(caught.value)
        assert caught.value.status == 500
        assert (status["reason"], status["code"]) == ("InternalError", 500)
    await core.list_namespaced_config_map("default")  # the count is used up


async def test_too_many_requests_with_retry_after(api: Any, server: ApiServer) -> None:
    server.faults.add(verb="create", status=429, retry_after=3)
    with pytest.raises(ApiException) as caught:
        await loose(client.CoreV1Api(api)).create_namespaced_config_map(
            "default", {"metadata": {"name": "x"}}
        )
    status = status_of(caught.value)
    assert caught.value.status == 429
    assert loose(caught.value).headers["Retry-After"] == "3"
    assert status["reason"] == "TooManyRequests"
    assert status["details"]["retryAfterSeconds"] == 3


async def test_faults_on_a_subresource_only(api: Any, server: ApiServer) -> None:
    apps = loose(client.AppsV1Api(api))
    await apps.create_namespaced_deployment(
        "default",
        {
            "metadata": {"name": "web"},
            "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "app", "image": "nginx"}]},
                },
            },
        },
    )
    server.faults.add(resource="deployments/scale", status=503, count=None)
    await apps.read_namespaced_deployment("web", "default")
    for _ in range(3):
        with pytest.raises(ApiException) as caught:
            await apps.read_namespaced_deployment_scale("web", "default")
        assert caught.value.status == 503
    server.faults.clear()
    await apps.read_namespaced_deployment_scale("web", "default")


async def test_slow_responses(api: Any, server: ApiServer) -> None:
    server.faults.add(verb="get", status=0, delay=0.3)
    core = loose(client.CoreV1Api(api))
    started = time.monotonic()
    await core.read_namespace("default")
    assert time.monotonic() - started >= 0.3
    started = time.monotonic()
    await core.read_namespace("default")
    assert time.monotonic() - started < 0.3


async def test_held_requests_wait_for_their_release(api: Any, server: ApiServer) -> None:
    released = server.faults.hold(verb="list", resource="configmaps")
    core = loose(client.CoreV1Api(api))
    arrived = asyncio.Event()
    server.context.observers.append(
        lambda record: arrived.set() if record.resource == "configmaps" else None
    )
    listing = asyncio.ensure_future(core.list_namespaced_config_map("default"))
    # the request reached the server and waits there: another one is answered meanwhile
    await asyncio.wait_for(arrived.wait(), timeout=5)
    await core.read_namespace("default")
    assert not listing.done()
    released.set()
    assert (await asyncio.wait_for(listing, timeout=5)).items == []
    await core.list_namespaced_config_map("default")  # count 1: the next one is not held


async def test_dropped_watch_breaks_the_stream(api: Any, server: ApiServer) -> None:
    core = loose(client.CoreV1Api(api))
    response = await core.list_namespaced_config_map_without_preload_content(
        "default", watch=True, resource_version=str(server.store.resource_version)
    )
    await core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    line = await asyncio.wait_for(response.content.readline(), timeout=5)
    assert json.loads(line)["type"] == "ADDED"
    server.faults.drop_watches("configmaps")
    with pytest.raises(aiohttp.ClientPayloadError):
        await asyncio.wait_for(drain(response), timeout=5)
    response.release()
    assert server.faults.dropped_watches == 1


async def test_drop_watches_of_another_resource_leaves_this_one(
    api: Any, server: ApiServer
) -> None:
    core = loose(client.CoreV1Api(api))
    response = await core.list_namespaced_config_map_without_preload_content(
        "default", watch=True, resource_version=str(server.store.resource_version)
    )
    server.faults.drop_watches("pods")
    await core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    line = await asyncio.wait_for(response.content.readline(), timeout=5)
    assert json.loads(line)["type"] == "ADDED"
    response.release()


async def test_forced_gone_for_watches_from_old_versions(api: Any, server: ApiServer) -> None:
    core = loose(client.CoreV1Api(api))
    start = server.store.resource_version
    await core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    server.faults.expire_history()
    response = await core.list_namespaced_config_map_without_preload_content(
        "default", watch=True, resource_version=str(start), timeout_seconds=5
    )
    event = json.loads(await asyncio.wait_for(response.content.readline(), timeout=5))
    response.release()
    assert event["type"] == "ERROR"
    assert event["object"]["code"] == 410
    assert event["object"]["reason"] == "Expired"
    current = server.store.resource_version
    ok = await core.list_namespaced_config_map_without_preload_content(
        "default", watch=True, resource_version=str(current), timeout_seconds=1
    )
    assert await asyncio.wait_for(ok.content.readline(), timeout=5) == b""
    ok.release()


async def test_injected_watch_failure_status(api: Any, server: ApiServer) -> None:
    server.faults.add(verb="watch", status=410)
    response = await loose(client.CoreV1Api(api)).list_namespaced_pod_without_preload_content(
        "default", watch=True, resource_version="1"
    )
    try:
        assert response.status == 410
        assert (await response.json())["reason"] == "Expired"
    finally:
        response.release()


@pytest.mark.parametrize(
    ("status", "reason", "message"),
    [
        (500, "InternalError", "Internal error occurred: injected fault"),
        (
            504,
            "Timeout",
            "Timeout: request did not complete within requested timeout - context deadline "
            "exceeded",
        ),
    ],
)
async def test_commit_then_fail_stores_the_write_and_answers_the_error(
    api: Any, server: ApiServer, status: int, reason: str, message: str
) -> None:
    core = loose(client.CoreV1Api(api))
    server.faults.add(verb="create", resource="configmaps", status=status, after_commit=True)
    with pytest.raises(ApiException) as caught:
        await core.create_namespaced_config_map("default", {"metadata": {"name": "kept"}})
    failure = status_of(caught.value)
    assert caught.value.status == status
    assert (failure["reason"], failure["message"]) == (reason, message)
    # The write happened although the client was told it failed.
    stored = await core.read_namespaced_config_map("kept", "default")
    assert stored.metadata.name == "kept"
    # A request the server refuses by itself keeps its own answer: nothing was committed.
    server.faults.add(verb="create", resource="configmaps", status=500, after_commit=True)
    with pytest.raises(ApiException) as refused:
        await core.create_namespaced_config_map("default", {"metadata": {"name": "kept"}})
    assert refused.value.status == 409


def test_fault_arguments_are_checked(server: ApiServer) -> None:
    with pytest.raises(ValueError, match="unknown verb"):
        server.faults.add(verb="read")
    with pytest.raises(ValueError, match="status"):
        server.faults.add(status=200)
    with pytest.raises(ValueError, match="count"):
        server.faults.add(count=0)
    with pytest.raises(ValueError, match="after_commit needs a write verb"):
        server.faults.add(verb="get", after_commit=True)
    with pytest.raises(ValueError, match="after_commit needs a write verb"):
        server.faults.add(verb="create", status=0, after_commit=True)
