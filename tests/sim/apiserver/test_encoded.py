"""LIST pages joined from each stored object's kept encoding (the sim API server's `encoded`).

Through the real client: a LIST fills the encodings, a write drops the written object's, and the
next LIST shows the write — for every way an object changes (patch, PUT, status, delete, delete
and create again, cluster-scoped, the in-process store API). Paged and ``Exact`` LISTs that read
an older snapshot show that snapshot, not the kept encoding of the current object.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
from kubernetes.aio import client

from kubescale.kube.resources import CONFIG_MAPS
from kubescale.sim.apiserver.encoded import EncodedObjects, encode_json, list_bytes
from kubescale.sim.apiserver.server import ApiServer
from tests.builders.nodes import node
from tests.sim.apiserver.conftest import json_of, loose, pod_manifest

Read = Callable[[dict[str, Any]], Any]
"""What a row compares of each listed item."""


def _data(item: dict[str, Any]) -> Any:
    return (item["metadata"]["name"], item.get("data"))


def _phase(item: dict[str, Any]) -> Any:
    return (item["metadata"]["name"], item["status"].get("phase"))


def _labels(item: dict[str, Any]) -> Any:
    return (item["metadata"]["name"], item["metadata"].get("labels"))


async def _list_config_maps(api: Any) -> dict[str, Any]:
    core = loose(client.CoreV1Api(api))
    body: dict[str, Any] = await json_of(
        await core.list_namespaced_config_map_without_preload_content("default")
    )
    return body


async def _list_pods(api: Any) -> dict[str, Any]:
    core = loose(client.CoreV1Api(api))
    body: dict[str, Any] = await json_of(
        await core.list_namespaced_pod_without_preload_content("default")
    )
    return body


async def _list_nodes(api: Any) -> dict[str, Any]:
    core = loose(client.CoreV1Api(api))
    body: dict[str, Any] = await json_of(await core.list_node_without_preload_content())
    return body


async def _seed_config_maps(api: Any, server: ApiServer) -> None:
    core = loose(client.CoreV1Api(api))
    for name in ("a", "b"):
        await core.create_namespaced_config_map(
            "default", {"metadata": {"name": name}, "data": {"v": "1"}}
        )


async def _seed_pods(api: Any, server: ApiServer) -> None:
    core = loose(client.CoreV1Api(api))
    for name in ("a", "b"):
        await core.create_namespaced_pod("default", pod_manifest(name=name))


async def _seed_nodes(api: Any, server: ApiServer) -> None:
    core = loose(client.CoreV1Api(api))
    for name in ("a", "b"):
        await core.create_node(node(name=name, labels={"zone": "1"}))


async def _patch_data(api: Any, server: ApiServer) -> None:
    await loose(client.CoreV1Api(api)).patch_namespaced_config_map(
        "a", "default", {"data": {"v": "2"}}
    )


async def _put_data(api: Any, server: ApiServer) -> None:
    core = loose(client.CoreV1Api(api))
    current = await json_of(
        await core.read_namespaced_config_map_without_preload_content("a", "default")
    )
    current["data"] = {"v": "3"}
    await core.replace_namespaced_config_map("a", "default", current)


async def _delete(api: Any, server: ApiServer) -> None:
    await loose(client.CoreV1Api(api)).delete_namespaced_config_map("a", "default")


async def _delete_and_create(api: Any, server: ApiServer) -> None:
    core = loose(client.CoreV1Api(api))
    await core.delete_namespaced_config_map("a", "default")
    await core.create_namespaced_config_map(
        "default", {"metadata": {"name": "a"}, "data": {"v": "again"}}
    )


async def _store_update(api: Any, server: ApiServer) -> None:
    # the simulator's in-process writes go through the same storage
    current = server.store.get(CONFIG_MAPS, "a", "default")
    current["data"] = {"v": "in-process"}
    server.store.update(current)


async def _patch_status(api: Any, server: ApiServer) -> None:
    await loose(client.CoreV1Api(api)).patch_namespaced_pod_status(
        "a", "default", {"status": {"phase": "Running"}}
    )


async def _patch_node_labels(api: Any, server: ApiServer) -> None:
    await loose(client.CoreV1Api(api)).patch_node("a", {"metadata": {"labels": {"zone": "2"}}})


Step = Callable[[Any, ApiServer], Awaitable[None]]


@dataclass(frozen=True)
class Row:
    seed: Step
    lister: Callable[[Any], Awaitable[dict[str, Any]]]
    write: Step
    read: Read
    before: list[Any]
    after: list[Any]


ROWS = {
    "merge patch": Row(
        _seed_config_maps, _list_config_maps, _patch_data, _data,
        [("a", {"v": "1"}), ("b", {"v": "1"})], [("a", {"v": "2"}), ("b", {"v": "1"})],
    ),
    "PUT": Row(
        _seed_config_maps, _list_config_maps, _put_data, _data,
        [("a", {"v": "1"}), ("b", {"v": "1"})], [("a", {"v": "3"}), ("b", {"v": "1"})],
    ),
    "delete": Row(
        _seed_config_maps, _list_config_maps, _delete, _data,
        [("a", {"v": "1"}), ("b", {"v": "1"})], [("b", {"v": "1"})],
    ),
    "delete and create again": Row(
        _seed_config_maps, _list_config_maps, _delete_and_create, _data,
        [("a", {"v": "1"}), ("b", {"v": "1"})], [("a", {"v": "again"}), ("b", {"v": "1"})],
    ),
    "in-process store update": Row(
        _seed_config_maps, _list_config_maps, _store_update, _data,
        [("a", {"v": "1"}), ("b", {"v": "1"})], [("a", {"v": "in-process"}), ("b", {"v": "1"})],
    ),
    "status subresource": Row(
        _seed_pods, _list_pods, _patch_status, _phase,
        [("a", "Pending"), ("b", "Pending")], [("a", "Running"), ("b", "Pending")],
    ),
    "cluster-scoped labels": Row(
        _seed_nodes, _list_nodes, _patch_node_labels, _labels,
        [("a", {"zone": "1"}), ("b", {"zone": "1"})], [("a", {"zone": "2"}), ("b", {"zone": "1"})],
    ),
}  # fmt: skip


@pytest.mark.parametrize("row", list(ROWS.values()), ids=list(ROWS))
async def test_a_list_after_a_write_shows_the_write(api: Any, server: ApiServer, row: Row) -> None:
    await row.seed(api, server)
    first = await row.lister(api)
    assert [row.read(item) for item in first["items"]] == row.before
    kept = len(server.store.encoded)
    assert kept >= 2  # the listed objects' encodings are kept (and, below, not served stale)
    assert await row.lister(api) == first  # served from the kept encodings
    await row.write(api, server)
    assert len(server.store.encoded) < kept  # the written object's encoding was dropped
    after = await row.lister(api)
    assert [row.read(item) for item in after["items"]] == row.after
    assert int(after["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])
    # built-in items carry no apiVersion/kind, as kube-apiserver's
    assert all("kind" not in item and "apiVersion" not in item for item in after["items"])


async def test_a_paged_list_reads_its_snapshot_not_the_kept_encoding(
    api: Any, server: ApiServer
) -> None:
    core = loose(client.CoreV1Api(api))
    for name in ("a", "b", "c"):
        await core.create_namespaced_config_map(
            "default", {"metadata": {"name": name}, "data": {"v": "1"}}
        )
    await _list_config_maps(api)  # every encoding kept
    first = await json_of(
        await core.list_namespaced_config_map_without_preload_content("default", limit=2)
    )
    await core.patch_namespaced_config_map("c", "default", {"data": {"v": "2"}})
    second = await json_of(
        await core.list_namespaced_config_map_without_preload_content(
            "default", limit=2, _continue=first["metadata"]["continue"]
        )
    )
    # the page is cut from the first page's snapshot: c as it was then (upstream's
    # continue semantics), although c's current object differs
    assert [_data(i) for i in second["items"]] == [("c", {"v": "1"})]
    latest = await _list_config_maps(api)
    assert [_data(i) for i in latest["items"]] == [
        ("a", {"v": "1"}),
        ("b", {"v": "1"}),
        ("c", {"v": "2"}),
    ]


def test_an_older_snapshot_is_encoded_but_not_kept() -> None:
    encoded = EncodedObjects()
    key = (("", "configmaps"), "default", "a")
    stored = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {}}
    older = {**stored, "data": {"v": "old"}}
    assert orjson.loads(encoded.item(key, older, stored=stored, builtin=True)) == {
        "metadata": {"name": "a"},
        "data": {"v": "old"},
    }
    assert len(encoded) == 0
    assert orjson.loads(encoded.item(key, stored, stored=stored, builtin=False)) == stored
    assert len(encoded) == 1
    # an entry is served only for the very object it was encoded from
    assert orjson.loads(encoded.item(key, older, stored=stored, builtin=True))["data"] == {
        "v": "old"
    }


@pytest.mark.parametrize(
    "value",
    [
        {"big": 2**70},  # beyond orjson's 64-bit integers: the standard library's encoding
        {"text": "zoë ☃", "n": 1.5, "none": None, "yes": True, "list": [1, "2"]},
    ],
)
def test_encode_json_round_trips(value: dict[str, Any]) -> None:
    assert json.loads(encode_json(value)) == value


def test_list_bytes_is_the_list_document() -> None:
    items = [encode_json({"metadata": {"name": "a"}}), encode_json({"metadata": {"name": "b"}})]
    body = list_bytes(
        kind="ConfigMapList",
        api_version="v1",
        metadata={"resourceVersion": "7", "continue": "x"},
        items=items,
    )
    assert orjson.loads(body) == {
        "kind": "ConfigMapList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": "7", "continue": "x"},
        "items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}],
    }
    assert orjson.loads(list_bytes(kind="K", api_version="v", metadata={}, items=[]))["items"] == []
