"""Projected informer caches (issue 29) against the in-process API server: a pods informer from
the shared set keeps only what the typed Pod names, and a re-list after expired history replaces
each projected object with the projection of the server's current one."""

from __future__ import annotations

from typing import Any

from kubescale.kube.client import KubeClient
from kubescale.kube.indexes import object_key
from kubescale.kube.informer_set import InformerSet
from kubescale.kube.resources import PODS
from kubescale.objects.projection import PROJECTIONS, project
from kubescale.sim.apiserver.server import ApiServer
from tests import builders

from .conftest import FAST_INFORMER
from .informer_checks import HandlerLog, eventually

POD = PROJECTIONS[("", "Pod")]


def _stored_pod(name: str, *, app: str = "web") -> dict[str, Any]:
    body = builders.pods.pod(
        name=name,
        labels={"app": app},
        annotations={"kubectl.kubernetes.io/last-applied-configuration": "{}"},
        node_name="n1",
        status={"phase": "Running"},
    )
    body["metadata"]["managedFields"] = [{"manager": "kubectl", "operation": "Update"}]
    return body


async def _server_projection(client: KubeClient) -> dict[str, Any]:
    listed = await client.list_all(PODS)
    return {
        object_key(obj): project({**obj, "kind": "Pod", "apiVersion": "v1"}, POD)
        for obj in listed.items
    }


async def test_a_relist_replaces_projected_objects(
    apiserver: ApiServer, client: KubeClient
) -> None:
    # the bulk path stores objects as sent: managedFields and status included
    apiserver.store.load(_stored_pod(name) for name in ("same", "changed", "removed", "recreated"))
    informers = InformerSet(client=client, settings=FAST_INFORMER)
    informer = informers.informer(PODS)
    assert informer.projection is POD
    log = HandlerLog()
    informer.add_handlers(log.handlers())
    informers.start()
    try:
        await informer.wait_synced()
        cached = informer.lister.get("same", "default")
        assert cached is not None
        assert "managedFields" not in cached["metadata"]
        assert cached["metadata"]["annotations"] == {}
        assert cached["status"] == {"phase": "Running"}
        log.calls.clear()
        old_uid = log.uids["default/recreated"]

        apiserver.faults.add(verb="watch", resource="pods", status=500, count=None)
        apiserver.faults.drop_watches("pods")
        await eventually(lambda: informer.stats.errors >= 1)
        # "changed": same uid, new labels and resourceVersion (stored again by the bulk path,
        # which keeps the object as sent, like an etcd restore)
        changed = _stored_pod("changed", app="api")
        changed["metadata"]["uid"] = log.uids["default/changed"]
        for name in ("changed", "removed", "recreated"):
            apiserver.store.delete(PODS, name, "default", grace_period_seconds=0)
        apiserver.store.load([changed, _stored_pod("recreated", app="new"), _stored_pod("added")])
        apiserver.faults.expire_history()
        apiserver.faults.clear()

        await eventually(lambda: informer.stats.lists == 2 and informer.synced)
        want = await _server_projection(client)
        have = {object_key(obj): obj for obj in informer.cache.values()}
        assert have == want  # every object is the projection of the server's current one
        assert have["default/changed"]["metadata"]["labels"] == {"app": "api"}
        assert have["default/recreated"]["metadata"]["labels"] == {"app": "new"}
        assert log.uids["default/recreated"] != old_uid
        assert sorted(log.calls) == sorted(
            [
                ("update", "default/changed"),
                ("delete", "default/removed"),
                ("delete", "default/recreated"),
                ("add", "default/recreated"),
                ("add", "default/added"),
            ]
        )
        assert not log.violations
        # the indexes follow the projected objects
        assert {object_key(o) for o in informer.cache.by_index("node", "n1")} == set(want)
    finally:
        await informers.stop()


async def test_an_unprojected_set_keeps_whole_objects(
    apiserver: ApiServer, client: KubeClient
) -> None:
    apiserver.store.load([_stored_pod("whole")])
    informers = InformerSet(client=client, settings=FAST_INFORMER, projected=False)
    informer = informers.informer(PODS)
    informers.start()
    try:
        await informer.wait_synced()
        cached = informer.lister.get("whole", "default")
        assert cached is not None
        assert "managedFields" in cached["metadata"]
    finally:
        await informers.stop()


async def test_a_list_is_projected_page_by_page(apiserver: ApiServer, client: KubeClient) -> None:
    # 5 pods in pages of 2: 3 LIST requests; each page's items are projected before the next
    # page is asked for (so the decoded pages are not all held until the end)
    apiserver.store.load(_stored_pod(f"p{i}") for i in range(5))
    lists_before_each: list[int] = []

    def projected(obj: dict[str, Any]) -> dict[str, Any]:
        lists_before_each.append(apiserver.requests.count(verb="list", resource="pods"))
        return {"metadata": dict(obj["metadata"])}

    result = await client.list_all(PODS, page_size=2, transform=projected)
    assert [obj["metadata"]["name"] for obj in result.items] == [f"p{i}" for i in range(5)]
    assert lists_before_each == [1, 1, 2, 2, 3]
