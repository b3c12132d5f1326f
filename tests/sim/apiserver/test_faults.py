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

from kubescale.kube.resources import CONFIG_MAPS
from kubescale.sim.apiserver.server import ApiServer
from tests.sim.apiserver.conftest import loose, status_of


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
    assert time.monotonic() - started >= 0.3  # a delay never ends early, however loaded
    # the rule was used up by that one request: the next is served without delay (asserted on
    # the rules, not on elapsed time, which a busy machine stretches)
    assert server.faults.take(verb="get", resource="namespaces") is None
    await core.read_namespace("default")


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


async def test_commit_then_answer_late_stores_the_write_before_the_answer(
    api: Any, server: ApiServer
) -> None:
    """``after_commit`` with ``status=0`` and a delay: stored at once, answered late (the
    write an answer lost to a client timeout still committed)."""
    core = loose(client.CoreV1Api(api))
    server.faults.add(verb="create", resource="configmaps", status=0, delay=0.5, after_commit=True)
    request = asyncio.ensure_future(
        core.create_namespaced_config_map("default", {"metadata": {"name": "late"}})
    )
    stored = False
    while not stored and not request.done():  # the store shows it while the answer is held
        await asyncio.sleep(0.001)
        stored = any(c["metadata"]["name"] == "late" for c in server.store.snapshots(CONFIG_MAPS))
    assert stored
    assert not request.done()
    answered = await request
    assert answered.metadata.name == "late"


async def test_metrics_apis_take_faults_by_qualified_resource(server: ApiServer) -> None:
    """A metrics API's rule names ``<resource>.<group>``: core ``pods`` rules leave it alone."""
    server.metrics.set_external_metric(namespace="default", metric="queue", value="4")
    server.faults.add(resource="queue.external.metrics.k8s.io", status=0, body="not json")
    server.faults.add(resource="pods.metrics.k8s.io", status=503)
    queue = f"{server.http_url}/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue"
    async with aiohttp.ClientSession() as http:
        async with http.get(queue) as response:
            assert (response.status, await response.text()) == (200, "not json")
        async with http.get(queue) as response:  # the count is used up
            assert (await response.json())["items"][0]["value"] == "4"
        async with http.get(f"{server.http_url}/api/v1/namespaces/default/pods") as response:
            assert response.status == 200
        metrics = f"{server.http_url}/apis/metrics.k8s.io/v1beta1/namespaces/default/pods"
        async with http.get(metrics) as response:
            assert response.status == 503


async def test_a_hung_request_waits_for_release(api: Any, server: ApiServer) -> None:
    server.faults.add(verb="get", resource="namespaces", status=0, hang=True)
    core = loose(client.CoreV1Api(api))
    held = asyncio.ensure_future(core.read_namespace("default"))
    for _ in range(1000):  # until the server has taken the request (and the fault)
        if server.requests.count(verb="get", resource="namespaces"):
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    assert not held.done()  # held: no answer until released
    server.faults.release()
    assert (await held).metadata.name == "default"
    await core.read_namespace("default")  # count 1: the next one is not held


async def test_a_body_fault_needs_status_zero(server: ApiServer) -> None:
    with pytest.raises(ValueError, match="status=0"):
        server.faults.add(resource="pods", body="{}")
