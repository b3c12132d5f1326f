"""Property: a LIST, then every watch event from its resourceVersion, rebuilds the next LIST.

This is the contract informers rely on (list → watch from the list's resourceVersion → the cache
equals the server). Random sequences of creates, updates (no-ops included), finalizer
removals and deletes go through the real client; a watch opened from the first list's
resourceVersion (with or without a label selector) is replayed onto that list and compared
with a fresh list, objects and resourceVersions included.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes.aio import client
from kubernetes.aio.client.exceptions import ApiException

from kubescale.sim.apiserver.server import ApiServer
from tests.sim.apiserver.conftest import json_of, loose

NAMES = ("a", "b", "c", "d")
SENTINEL = "zz-sentinel"
_namespaces = itertools.count()

operations = st.lists(
    st.one_of(
        st.tuples(
            st.just("create"), st.sampled_from(NAMES), st.booleans(), st.booleans()
        ),  # name, labelled, finalizer
        st.tuples(st.just("update"), st.sampled_from(NAMES), st.integers(0, 2), st.booleans()),
        st.tuples(st.just("release"), st.sampled_from(NAMES), st.none(), st.none()),
        st.tuples(st.just("delete"), st.sampled_from(NAMES), st.none(), st.none()),
    ),
    max_size=14,
)


def _plain(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}


async def _apply(core: Any, namespace: str, operation: tuple[str, str, Any, Any]) -> None:
    verb, name, first, second = operation
    try:
        if verb == "create":
            meta: dict[str, Any] = {"name": name, "labels": {"keep": "yes"} if first else {}}
            if second:
                meta["finalizers"] = ["example.com/hold"]
            await core.create_namespaced_config_map(namespace, {"metadata": meta, "data": {}})
        elif verb == "update":
            labels = {"keep": "yes"} if second else {"keep": "no"}
            patch = {"metadata": {"labels": labels}, "data": {"v": str(first)}}
            await core.patch_namespaced_config_map(name, namespace, patch)
        elif verb == "release":
            await core.patch_namespaced_config_map(
                name, namespace, {"metadata": {"finalizers": None}}
            )
        else:
            await core.delete_namespaced_config_map(name, namespace)
    except ApiException as exc:
        if exc.status not in (404, 409):  # absent, or already there / being deleted
            raise


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(seed=operations, ops=operations, selective=st.booleans())
async def test_list_plus_watch_replay_equals_a_fresh_list(
    api: Any,
    server: ApiServer,
    seed: list[tuple[str, str, Any, Any]],
    ops: list[tuple[str, str, Any, Any]],
    selective: bool,
) -> None:
    core = loose(client.CoreV1Api(api))
    namespace = f"prop-{next(_namespaces)}"
    await core.create_namespace({"metadata": {"name": namespace}})
    for operation in seed:
        await _apply(core, namespace, operation)
    selector = "keep=yes" if selective else ""

    first = await json_of(
        await core.list_namespaced_config_map_without_preload_content(
            namespace, label_selector=selector
        )
    )
    state = {item["metadata"]["name"]: _plain(item) for item in first["items"]}
    response = await core.list_namespaced_config_map_without_preload_content(
        namespace,
        watch=True,
        label_selector=selector,
        resource_version=first["metadata"]["resourceVersion"],
        timeout_seconds=10,
    )
    for operation in ops:
        await _apply(core, namespace, operation)
    await core.create_namespaced_config_map(
        namespace, {"metadata": {"name": SENTINEL, "labels": {"keep": "yes"}}}
    )
    final = await json_of(
        await core.list_namespaced_config_map_without_preload_content(
            namespace, label_selector=selector
        )
    )

    last_rv = int(first["metadata"]["resourceVersion"])
    try:
        while True:
            line = await asyncio.wait_for(response.content.readline(), timeout=5)
            assert line, "the watch ended before the sentinel arrived"
            event = json.loads(line)
            obj = _plain(event["object"])
            name = obj["metadata"]["name"]
            rv = int(obj["metadata"]["resourceVersion"])
            assert rv > last_rv, "events must come in resourceVersion order"
            last_rv = rv
            if event["type"] == "DELETED":
                assert name in state
                del state[name]
            elif event["type"] == "ADDED":
                assert name not in state
                state[name] = obj
            else:
                assert event["type"] == "MODIFIED"
                assert name in state
                state[name] = obj
            if name == SENTINEL:
                break
    finally:
        response.release()
    assert state == {item["metadata"]["name"]: _plain(item) for item in final["items"]}
