"""``Informer.wait_for_resource_version`` / ``InformerSet.wait_for_resource_version``.

The simulator's settling step: after ``ApiServer.bookmark_watches()`` an informer's cache
reflects the store once it has read the bookmark; events before it are applied and their
handlers have run. Real watches over HTTPS; periodic bookmarks are an hour away so that only
forced ones move a quiet informer.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kubescale.kube.client import KubeClient
from kubescale.kube.informer import EventHandlers, Informer
from kubescale.kube.informer_set import InformerSet
from kubescale.kube.resources import CONFIG_MAPS, PODS
from kubescale.sim.apiserver.server import ApiServer

from .conftest import FAST_INFORMER, new_client
from .objects import config_map

QUIET_INFORMER = FAST_INFORMER.__class__(
    min_watch_timeout=30.0,
    max_watch_timeout=60.0,
    inactivity_timeout=30.0,
    connect_timeout=2.0,
    backoff=FAST_INFORMER.backoff,
)


@pytest.fixture
async def quiet_server() -> AsyncIterator[ApiServer]:
    async with ApiServer(bookmark_interval=3600.0) as server:
        yield server


@pytest.fixture
async def kube(quiet_server: ApiServer, tmp_path: Path) -> AsyncIterator[KubeClient]:
    path = tmp_path / "kubeconfig"
    quiet_server.write_kubeconfig(path)
    client = await new_client(path)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
async def informers(kube: KubeClient) -> AsyncIterator[InformerSet]:
    informer_set = InformerSet(client=kube, settings=QUIET_INFORMER, rng=random.Random(3))
    try:
        yield informer_set
    finally:
        await informer_set.stop()


async def started(informer: Informer[Any]) -> Informer[Any]:
    informer.start()
    assert await informer.wait_synced(within=5)
    return informer


async def watching(server: ApiServer, count: int) -> None:
    """Until ``count`` watches are open (subscribed): a bookmark reaches only those."""
    async with asyncio.timeout(5):
        # Nothing signals a new subscription: poll the count.
        while server.store.events.subscriptions < count:  # noqa: ASYNC110
            await asyncio.sleep(0.005)


async def test_a_synced_informer_reflects_its_list(
    quiet_server: ApiServer, informers: InformerSet
) -> None:
    quiet_server.store.create(config_map("a"))
    informer = await started(informers.informer(CONFIG_MAPS))
    current = str(quiet_server.store.resource_version)
    assert informer.reflects(current)
    assert await informer.wait_for_resource_version(current, within=0.01)
    assert not informer.reflects(str(quiet_server.store.resource_version + 1))


async def test_events_up_to_the_version_are_applied_and_handled(
    quiet_server: ApiServer, informers: InformerSet
) -> None:
    informer = await started(informers.informer(CONFIG_MAPS))
    seen: list[str] = []
    informer.add_handlers(
        EventHandlers(
            on_add=lambda obj: seen.append(obj["metadata"]["name"]),
            on_update=lambda _old, new: seen.append(new["metadata"]["name"] + "*"),
        )
    )
    for name in ("a", "b", "c"):
        quiet_server.store.create(config_map(name))
    current = quiet_server.store.get(CONFIG_MAPS, "b", "default")
    quiet_server.store.update({**current, "data": {"x": "1"}})
    target = str(quiet_server.store.resource_version)
    assert await informer.wait_for_resource_version(target, within=5)
    assert seen == ["a", "b", "c", "b*"]
    assert informer.resource_version == target
    b = informer.lister.get("b", "default")
    assert b is not None
    assert b["data"] == {"x": "1"}


async def test_a_quiet_informer_needs_a_bookmark(
    quiet_server: ApiServer, informers: InformerSet
) -> None:
    informer = await started(informers.informer(CONFIG_MAPS))
    # Wait until its watch is open (subscribed), else the bookmark has nobody to reach.
    await watching(quiet_server, 1)
    quiet_server.store.create(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "elsewhere"}}
    )
    target = str(quiet_server.store.resource_version)
    assert not await informer.wait_for_resource_version(target, within=0.2)
    assert quiet_server.bookmark_watches() == 1
    assert await informer.wait_for_resource_version(target, within=5)
    assert informer.stats.bookmarks >= 1


async def test_the_set_waits_for_every_informer(
    quiet_server: ApiServer, informers: InformerSet
) -> None:
    config_maps = await started(informers.informer(CONFIG_MAPS))
    pods = await started(informers.informer(PODS))
    await watching(quiet_server, 2)
    quiet_server.store.create(config_map("only-config-maps-see-this"))
    target = str(quiet_server.store.resource_version)
    assert await config_maps.wait_for_resource_version(target, within=5)
    assert not pods.reflects(target)
    assert not await informers.wait_for_resource_version(target, within=0.1)
    quiet_server.bookmark_watches()
    assert await informers.wait_for_resource_version(target, within=5)
    assert pods.reflects(target)


@pytest.mark.parametrize(
    ("cached", "wanted", "reflects"),
    [
        ("12", "12", True),
        ("12", "9", True),  # numerically older, though later as text
        ("9", "12", False),
        ("", "1", False),
        ("abc", "abc", True),  # not a number: only equality can tell
        ("abc", "abd", False),
    ],
)
async def test_version_comparison(
    kube: KubeClient, cached: str, wanted: str, reflects: bool
) -> None:
    informer: Informer[Any] = Informer(client=kube, resource=CONFIG_MAPS, settings=QUIET_INFORMER)
    informer._set_resource_version(cached)
    assert informer.reflects(wanted) is reflects


async def test_a_non_numeric_version_that_is_not_reached_fails_at_once(kube: KubeClient) -> None:
    informer: Informer[Any] = Informer(client=kube, resource=CONFIG_MAPS, settings=QUIET_INFORMER)
    result: Any = await informer.wait_for_resource_version("not-a-number", within=60)
    assert result is False
