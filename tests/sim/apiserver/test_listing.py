"""LIST: label and field selectors, limit/continue paging, resourceVersion semantics."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.aio import client
from kubernetes.aio.client.exceptions import ApiException

from kubescale.kube.resources import CONFIG_MAPS
from kubescale.sim.apiserver.server import ApiServer
from tests.sim.apiserver.conftest import json_of, loose, pod_manifest, status_of

PODS = [
    ("web-1", {"app": "web", "tier": "front"}, "node-a", "Running"),
    ("web-2", {"app": "web", "tier": "back"}, "node-b", "Running"),
    ("db-1", {"app": "db"}, "node-a", "Pending"),
    ("batch-1", {"app": "batch", "canary": "true"}, None, "Pending"),
]


async def seed_pods(api: Any) -> None:
    core = loose(client.CoreV1Api(api))
    for name, labels, node, phase in PODS:
        await core.create_namespaced_pod(
            "default", pod_manifest(name=name, labels=labels, node_name=node)
        )
        if phase != "Pending":
            await core.patch_namespaced_pod_status(name, "default", {"status": {"phase": phase}})


async def names(api: Any, **params: Any) -> list[str]:
    core = loose(client.CoreV1Api(api))
    body = await json_of(
        await core.list_namespaced_pod_without_preload_content("default", **params)
    )
    return [item["metadata"]["name"] for item in body["items"]]


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=web", ["web-1", "web-2"]),
        ("app==web,tier=front", ["web-1"]),
        ("app!=web", ["batch-1", "db-1"]),
        ("app in (db, batch)", ["batch-1", "db-1"]),
        ("app notin (web)", ["batch-1", "db-1"]),
        ("tier", ["web-1", "web-2"]),
        ("!tier", ["batch-1", "db-1"]),
        ("app=web,tier notin (back)", ["web-1"]),
        ("", ["batch-1", "db-1", "web-1", "web-2"]),
    ],
)
async def test_label_selectors(api: Any, selector: str, expected: list[str]) -> None:
    await seed_pods(api)
    assert await names(api, label_selector=selector) == expected


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("spec.nodeName=node-a", ["db-1", "web-1"]),
        ("spec.nodeName=", ["batch-1"]),
        ("spec.nodeName!=node-a", ["batch-1", "web-2"]),
        ("status.phase=Running", ["web-1", "web-2"]),
        ("status.phase=Running,spec.nodeName=node-b", ["web-2"]),
        ("metadata.name=db-1", ["db-1"]),
        ("metadata.namespace=default,status.phase!=Running", ["batch-1", "db-1"]),
        ("spec.schedulerName=default-scheduler", ["batch-1", "db-1", "web-1", "web-2"]),
    ],
)
async def test_field_selectors(api: Any, selector: str, expected: list[str]) -> None:
    await seed_pods(api)
    assert await names(api, field_selector=selector) == expected


async def test_unsupported_field_label_is_bad_request(api: Any) -> None:
    with pytest.raises(ApiException) as caught:
        await loose(client.CoreV1Api(api)).list_namespaced_pod(
            "default", field_selector="spec.priority=1"
        )
    status = status_of(caught.value)
    assert caught.value.status == 400
    assert status["reason"] == "BadRequest"
    assert status["message"] == "field label not supported: spec.priority"


async def test_field_selector_on_core_events(api: Any) -> None:
    core = loose(client.CoreV1Api(api))
    for name, kind in (("e1", "Pod"), ("e2", "Node")):
        await core.create_namespaced_event(
            "default",
            {
                "metadata": {"name": name},
                "involvedObject": {"kind": kind, "name": "x", "namespace": "default"},
                "reason": "Test",
            },
        )
    body = await json_of(
        await core.list_namespaced_event_without_preload_content(
            "default", field_selector="involvedObject.kind=Pod,involvedObject.name=x"
        )
    )
    assert [e["metadata"]["name"] for e in body["items"]] == ["e1"]


async def test_bad_label_selector_is_bad_request(api: Any) -> None:
    with pytest.raises(ApiException) as caught:
        await loose(client.CoreV1Api(api)).list_namespaced_pod(
            "default", label_selector="app in web"
        )
    assert caught.value.status == 400


async def test_list_across_namespaces_and_item_shape(api: Any) -> None:
    core = loose(client.CoreV1Api(api))
    await core.create_namespace({"metadata": {"name": "other"}})
    await core.create_namespaced_pod("other", pod_manifest(name="a"))
    await core.create_namespaced_pod("default", pod_manifest(name="b"))
    body = await json_of(await core.list_pod_for_all_namespaces_without_preload_content())
    assert body["kind"] == "PodList"
    assert body["apiVersion"] == "v1"
    keys = [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in body["items"]]
    assert keys == [("default", "b"), ("other", "a")]
    # kube-apiserver omits apiVersion/kind on the items of a built-in list
    assert all("kind" not in item for item in body["items"])


async def test_paging_walks_every_object_once(api: Any, server: ApiServer) -> None:
    core = loose(client.CoreV1Api(api))
    for index in range(23):
        server.store.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{index:02d}"}},
            namespace="default",
        )
    seen: list[str] = []
    token: str | None = None
    pages = 0
    list_rv = None
    while True:
        body = await json_of(
            await core.list_namespaced_config_map_without_preload_content(
                "default", limit=5, _continue=token
            )
        )
        pages += 1
        list_rv = list_rv or body["metadata"]["resourceVersion"]
        assert body["metadata"]["resourceVersion"] == list_rv  # one consistent snapshot
        seen += [item["metadata"]["name"] for item in body["items"]]
        token = body["metadata"].get("continue")
        if pages == 1:
            assert body["metadata"]["remainingItemCount"] == 18
            # changes after the first page do not show up in the later pages
            server.store.create(
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm-99"}},
                namespace="default",
            )
            server.store.delete(CONFIG_MAPS, "cm-20", "default")
        if not token:
            break
    assert pages == 5
    assert seen == [f"cm-{index:02d}" for index in range(23)]


async def test_expired_continue_token_is_gone(api: Any, server: ApiServer) -> None:
    core = loose(client.CoreV1Api(api))
    for index in range(4):
        server.store.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{index}"}},
            namespace="default",
        )
    first = await json_of(
        await core.list_namespaced_config_map_without_preload_content("default", limit=2)
    )
    server.store.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "later"}},
        namespace="default",
    )
    server.faults.expire_history()
    with pytest.raises(ApiException) as caught:
        await core.list_namespaced_config_map(
            "default", limit=2, _continue=first["metadata"]["continue"]
        )
    status = status_of(caught.value)
    assert caught.value.status == 410
    assert status["reason"] == "Expired"
    assert status["message"].startswith("The provided continue parameter is too old")
    # the Status carries a token that continues inconsistently, from the latest state
    rest = await json_of(
        await core.list_namespaced_config_map_without_preload_content(
            "default", _continue=status["metadata"]["continue"]
        )
    )
    assert [i["metadata"]["name"] for i in rest["items"]] == ["cm-2", "cm-3", "later"]


async def test_garbage_continue_token_is_bad_request(api: Any) -> None:
    with pytest.raises(ApiException) as caught:
        await loose(client.CoreV1Api(api)).list_namespaced_pod("default", _continue="not-a-token")
    assert caught.value.status == 400
    assert status_of(caught.value)["message"].startswith("continue key is not valid")


async def test_resource_version_match_exact_reads_the_past(api: Any, server: ApiServer) -> None:
    core = loose(client.CoreV1Api(api))
    await core.create_namespaced_config_map(
        "default", {"metadata": {"name": "a"}, "data": {"v": "1"}}
    )
    past = str(server.store.resource_version)
    await core.patch_namespaced_config_map("a", "default", {"data": {"v": "2"}})
    await core.create_namespaced_config_map("default", {"metadata": {"name": "b"}})
    old = await json_of(
        await core.list_namespaced_config_map_without_preload_content(
            "default", resource_version=past, resource_version_match="Exact"
        )
    )
    assert old["metadata"]["resourceVersion"] == past
    assert [(i["metadata"]["name"], i["data"]) for i in old["items"]] == [("a", {"v": "1"})]
    latest = await json_of(
        await core.list_namespaced_config_map_without_preload_content(
            "default", resource_version="0"
        )
    )
    assert [i["metadata"]["name"] for i in latest["items"]] == ["a", "b"]
    with pytest.raises(ApiException) as caught:
        await core.list_namespaced_config_map("default", resource_version="999999")
    assert caught.value.status == 504
    assert status_of(caught.value)["message"].startswith("Too large resource version: 999999")
