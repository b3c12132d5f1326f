"""``ApiServer.bookmark_watches``: a BOOKMARK at the current resourceVersion, behind the events.

The simulator relies on two properties: every open watch that allows bookmarks receives one at
the server's resourceVersion of the moment of the call, and it arrives only after every event
committed before the call (so a client that has read it has seen them all). Watches that did
not ask for bookmarks get none. Real HTTPS through the access layer; periodic bookmarks are
pushed an hour away so that only the forced ones appear.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kubescale.kube.client import KubeClient, connect
from kubescale.kube.resources import CONFIG_MAPS
from kubescale.kube.watch_stream import WatchStream
from kubescale.sim.apiserver.server import ApiServer


def configmap(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}


@pytest.fixture
async def quiet_server() -> AsyncIterator[ApiServer]:
    async with ApiServer(crd_dirs=[], bookmark_interval=3600.0) as server:
        yield server


@pytest.fixture
async def kube(quiet_server: ApiServer, tmp_path: Path) -> AsyncIterator[KubeClient]:
    path = tmp_path / "kubeconfig"
    quiet_server.write_kubeconfig(path)
    client = await connect(kubeconfig=path, rng=random.Random(0))
    try:
        yield client
    finally:
        await client.close()


async def watch(kube: KubeClient, *, since: int, bookmarks: bool) -> WatchStream:
    query = [("resourceVersion", str(since)), ("timeoutSeconds", "30")]
    if bookmarks:
        query.append(("allowWatchBookmarks", "true"))
    return await kube.open_watch(
        CONFIG_MAPS, namespace="default", query=query, inactivity_timeout=10.0
    )


async def next_event(stream: WatchStream) -> dict[str, Any]:
    event = await asyncio.wait_for(stream.next_event(), timeout=5.0)
    assert event is not None
    return event


def describe(event: dict[str, Any]) -> tuple[str, str]:
    meta = event["object"]["metadata"]
    return event["type"], str(meta.get("name") or meta["resourceVersion"])


async def test_the_bookmark_follows_the_events_committed_before_it(
    quiet_server: ApiServer, kube: KubeClient
) -> None:
    store = quiet_server.store
    since = store.resource_version
    stream = await watch(kube, since=since, bookmarks=True)
    try:
        store.create(configmap("a"), namespace="default")
        store.create(configmap("b"), namespace="default")
        reached = quiet_server.bookmark_watches()
        store.create(configmap("c"), namespace="default")
        events = [await next_event(stream) for _ in range(4)]
    finally:
        await stream.close()
    assert reached == 1
    rv_after_b = str(store.resource_version - 1)
    assert [describe(e) for e in events] == [
        ("ADDED", "a"),
        ("ADDED", "b"),
        ("BOOKMARK", rv_after_b),
        ("ADDED", "c"),
    ]
    bookmark = events[2]["object"]
    assert bookmark == {
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": rv_after_b},
    }


async def test_a_quiet_watch_gets_the_current_resource_version(
    quiet_server: ApiServer, kube: KubeClient
) -> None:
    store = quiet_server.store
    stream = await watch(kube, since=store.resource_version, bookmarks=True)
    try:
        # A write to another kind moves the server's resourceVersion but is not on this watch.
        store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "elsewhere"}})
        quiet_server.bookmark_watches()
        event = await next_event(stream)
    finally:
        await stream.close()
    assert describe(event) == ("BOOKMARK", str(store.resource_version))


async def test_watches_without_bookmarks_get_none(
    quiet_server: ApiServer, kube: KubeClient
) -> None:
    store = quiet_server.store
    plain = await watch(kube, since=store.resource_version, bookmarks=False)
    with_bookmarks = await watch(kube, since=store.resource_version, bookmarks=True)
    try:
        assert quiet_server.bookmark_watches() == 2
        store.create(configmap("after"), namespace="default")
        plain_events = [describe(await next_event(plain))]
        bookmarked = [describe(await next_event(with_bookmarks)) for _ in range(2)]
    finally:
        await plain.close()
        await with_bookmarks.close()
    assert plain_events == [("ADDED", "after")]
    assert bookmarked[0][0] == "BOOKMARK"
    assert bookmarked[1] == ("ADDED", "after")


async def test_no_open_watch_reaches_nobody(quiet_server: ApiServer) -> None:
    assert quiet_server.bookmark_watches() == 0
