"""Informers against the in-process API server: sync, handlers, and an exact mirror through
dropped watches, forced 410s (ERROR event and HTTP), 5xx storms, 429 Retry-After and silent
watches (inactivity timeout)."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kubescale.base.clock import VirtualClock
from kubescale.base.collector import BULK_THRESHOLD
from kubescale.kube.client import KubeClient
from kubescale.kube.informer import EventHandlers, Informer, InformerSettings
from kubescale.kube.informer_set import InformerSet
from kubescale.kube.resources import ALL, CONFIG_MAPS, NAMESPACES, PODS, ResourceType
from kubescale.sim.apiserver.server import ApiServer
from tests import builders
from tests.kube.objects import PAUSE_POD, config_map

from .conftest import FAST_INFORMER, new_client
from .informer_checks import HandlerLog, assert_mirrors, eventually


@pytest.fixture
async def informer(client: KubeClient) -> AsyncIterator[Informer[Any]]:
    inf: Informer[Any] = Informer(
        client=client, resource=CONFIG_MAPS, settings=FAST_INFORMER, rng=random.Random(1)
    )
    try:
        yield inf
    finally:
        await inf.stop()


def _bump(apiserver: ApiServer, name: str, value: str) -> None:
    current = apiserver.store.get(CONFIG_MAPS, name, "default")
    current["data"] = {"v": value}
    apiserver.store.update(current)


async def test_sync_listers_and_handlers(
    apiserver: ApiServer, client: KubeClient, informer: Informer[Any]
) -> None:
    for name in ("a", "b", "c"):
        apiserver.store.create(config_map(name, labels={"app": "web" if name != "c" else "db"}))
    log = HandlerLog()
    informer.add_handlers(log.handlers())
    assert not informer.synced
    informer.start()
    assert await informer.wait_synced(within=5)
    assert sorted(k for _, k in log.calls) == ["default/a", "default/b", "default/c"]
    lister = informer.lister
    got = lister.get("a", "default")
    assert got is not None
    assert got["kind"] == "ConfigMap"
    assert sorted(o["metadata"]["name"] for o in lister.list(selector="app=web")) == ["a", "b"]

    await client.create(CONFIG_MAPS, config_map("d"))
    await client.patch(CONFIG_MAPS, "a", {"data": {"x": "1"}}, namespace="default")
    await client.delete(CONFIG_MAPS, "b", namespace="default")
    await assert_mirrors(client, informer, log=log)
    assert log.calls[3:] == [("add", "default/d"), ("update", "default/a"), ("delete", "default/b")]
    assert informer.stats.lists == 1
    assert informer.stats.gone == 0


async def test_a_late_handler_first_gets_the_cached_objects(
    apiserver: ApiServer, informer: Informer[Any]
) -> None:
    apiserver.store.create(config_map("a"))
    informer.start()
    await informer.wait_synced()
    log = HandlerLog()
    informer.add_handlers(log.handlers())
    assert log.calls == [("add", "default/a")]


async def test_wait_synced_times_out_while_lists_fail(
    apiserver: ApiServer, informer: Informer[Any]
) -> None:
    apiserver.faults.add(verb="list", resource="configmaps", status=500, count=None)
    informer.start()
    assert not await informer.wait_synced(within=0.2)
    assert not informer.synced
    apiserver.faults.clear()
    assert await informer.wait_synced(within=5)


async def test_the_collector_runs_less_often_while_a_list_fills_the_cache(
    apiserver: ApiServer, client: KubeClient, informer: Informer[Any]
) -> None:
    """The listed objects are stored and handed to the handlers inside ``bulk_allocation``
    (kubescale.base.collector); the process's threshold is back once synced, and when the
    informer is stopped while its LISTs fail."""
    process = gc.get_threshold()
    apiserver.store.create(config_map("a"))
    seen: list[int] = []
    informer.add_handlers(EventHandlers(on_add=lambda _: seen.append(gc.get_threshold()[0])))
    apiserver.faults.add(verb="list", resource="configmaps", status=500, count=None)
    informer.start()
    assert not await informer.wait_synced(within=0.2)
    await informer.stop()  # cancelled while LISTs fail (in a LIST or between two)
    assert gc.get_threshold() == process
    apiserver.faults.clear()
    informer.start()
    assert await informer.wait_synced(within=5)
    assert seen == [max(process[0], BULK_THRESHOLD)]  # the sync's add, during the LIST
    assert gc.get_threshold() == process
    await client.create(CONFIG_MAPS, config_map("b"))
    await eventually(lambda: len(seen) == 2)
    assert seen[1] == process[0]  # a watch event: the ordinary threshold


async def test_dropped_watches_resume_from_the_last_resource_version(
    apiserver: ApiServer, client: KubeClient, informer: Informer[Any]
) -> None:
    log = HandlerLog()
    informer.add_handlers(log.handlers())
    informer.start()
    await informer.wait_synced()
    for i in range(5):
        apiserver.store.create(config_map(f"cm{i}"))
        await asyncio.sleep(0.01)
        apiserver.faults.drop_watches("configmaps")
        _bump(apiserver, f"cm{i}", "1")
        await asyncio.sleep(0.01)
    await assert_mirrors(client, informer, log=log)
    assert sorted(log.calls) == sorted(
        [("add", f"default/cm{i}") for i in range(5)]
        + [("update", f"default/cm{i}") for i in range(5)]
    )
    assert informer.stats.lists == 1  # never needed a re-list
    assert informer.stats.watches >= 2


async def test_expired_history_relists_and_diffs(
    apiserver: ApiServer, client: KubeClient, informer: Informer[Any]
) -> None:
    for name in ("same", "changed", "removed", "recreated"):
        apiserver.store.create(config_map(name))
    log = HandlerLog()
    informer.add_handlers(log.handlers())
    informer.start()
    await informer.wait_synced()
    log.calls.clear()
    old_uid = log.uids["default/recreated"]

    # Keep the informer off the server while things change, then compact the history.
    apiserver.faults.add(verb="watch", resource="configmaps", status=500, count=None)
    apiserver.faults.drop_watches("configmaps")
    await eventually(lambda: informer.stats.errors >= 1)
    _bump(apiserver, "changed", "2")
    apiserver.store.delete(CONFIG_MAPS, "removed", "default")
    apiserver.store.delete(CONFIG_MAPS, "recreated", "default")
    apiserver.store.create(config_map("recreated", data={"new": "yes"}))
    apiserver.store.create(config_map("added"))
    apiserver.faults.expire_history()
    apiserver.faults.clear()

    await assert_mirrors(client, informer, log=log)
    assert informer.stats.gone >= 1
    assert informer.stats.lists == 2
    assert sorted(log.calls) == sorted(
        [
            ("update", "default/changed"),
            ("delete", "default/removed"),
            ("delete", "default/recreated"),
            ("add", "default/recreated"),
            ("add", "default/added"),
        ]
    )  # nothing for "same"
    assert log.uids["default/recreated"] != old_uid


async def test_http_410_on_watch_relists_without_spurious_events(
    apiserver: ApiServer, client: KubeClient, informer: Informer[Any]
) -> None:
    apiserver.store.create(config_map("a"))
    log = HandlerLog()
    informer.add_handlers(log.handlers())
    informer.start()
    await informer.wait_synced()
    apiserver.faults.add(verb="watch", resource="configmaps", status=410, count=1)
    apiserver.faults.drop_watches("configmaps")
    await eventually(lambda: informer.stats.lists == 2)
    await assert_mirrors(client, informer, log=log)
    assert informer.stats.gone == 1
    assert log.calls == [("add", "default/a")]


async def test_5xx_storms_on_list_and_watch(
    apiserver: ApiServer, client: KubeClient, informer: Informer[Any]
) -> None:
    apiserver.store.create(config_map("early"))
    apiserver.faults.add(verb="list", resource="configmaps", status=500, count=7)
    apiserver.faults.add(verb="watch", resource="configmaps", status=503, count=6)
    log = HandlerLog()
    informer.add_handlers(log.handlers())
    informer.start()
    await informer.wait_synced(within=5)
    for i in range(3):
        apiserver.store.create(config_map(f"during{i}"))
        await asyncio.sleep(0.005)
    await assert_mirrors(client, informer, log=log)
    assert informer.stats.errors >= 6 + 1  # 6 watch failures + one list given up by the client


async def test_a_429_on_watch_waits_retry_after(apiserver: ApiServer, kubeconfig: Path) -> None:
    clock = VirtualClock()
    kube = await new_client(kubeconfig, clock=clock)
    inf: Informer[Any] = Informer(
        client=kube, resource=CONFIG_MAPS, settings=FAST_INFORMER, rng=random.Random(2)
    )
    try:
        inf.start()
        await inf.wait_synced()
        await eventually(lambda: inf.stats.watches == 1)  # a watch is open to be cut
        apiserver.faults.add(
            verb="watch", resource="configmaps", status=429, retry_after=1, count=1
        )
        apiserver.faults.drop_watches("configmaps")
        # The cut stream costs one (short) backoff step ...
        await eventually(lambda: clock.sleepers == 1)
        deadline = clock.next_deadline()
        assert deadline is not None
        assert deadline - clock.elapsed < 0.05
        await clock.advance(deadline - clock.elapsed)
        # ... then the 429 costs exactly Retry-After.
        await eventually(lambda: inf.stats.errors == 2 and clock.sleepers == 1)
        deadline = clock.next_deadline()
        assert deadline is not None
        assert deadline - clock.elapsed == pytest.approx(1.0)
        apiserver.store.create(config_map("after"))
        await asyncio.sleep(0.05)
        assert inf.lister.get("after", "default") is None
        await clock.advance(1.0)
        await eventually(lambda: inf.lister.get("after", "default") is not None)
    finally:
        await inf.stop()
        await kube.close()


async def test_silent_watches_are_reestablished_after_the_inactivity_timeout(
    tmp_path: Path,
) -> None:
    async with ApiServer(bookmark_interval=60.0) as quiet:  # no bookmark within the test
        path = tmp_path / "kubeconfig"
        quiet.write_kubeconfig(path)
        kube = await new_client(path)
        settings = dataclasses.replace(
            FAST_INFORMER, inactivity_timeout=0.2, min_watch_timeout=30, max_watch_timeout=31
        )
        inf: Informer[Any] = Informer(client=kube, resource=CONFIG_MAPS, settings=settings)
        try:
            inf.start()
            await inf.wait_synced()
            await eventually(lambda: inf.stats.inactivity_reconnects >= 2, limit=3)
            # A server that stalls the next watch until released (never, here; on no clock):
            # only the client's 0.2 s inactivity timeout can bring it back (issue 32.7: no
            # elapsed time asserted).
            quiet.faults.add(verb="watch", resource="configmaps", status=0, hang=True, count=1)
            quiet.faults.drop_watches("configmaps")
            reconnects = inf.stats.inactivity_reconnects
            quiet.store.create(config_map("seen"))
            await eventually(lambda: inf.lister.get("seen", "default") is not None, limit=60)
            assert inf.stats.inactivity_reconnects > reconnects
            await assert_mirrors(kube, inf)
        finally:
            await inf.stop()
            await kube.close()


async def test_server_side_label_selector(apiserver: ApiServer, client: KubeClient) -> None:
    apiserver.store.create(config_map("a", labels={"app": "web"}))
    apiserver.store.create(config_map("b", labels={"app": "db"}))
    inf: Informer[Any] = Informer(
        client=client, resource=CONFIG_MAPS, label_selector="app=web", settings=FAST_INFORMER
    )
    log = HandlerLog()
    inf.add_handlers(log.handlers())
    try:
        inf.start()
        await inf.wait_synced()
        assert [o["metadata"]["name"] for o in inf.lister.list()] == ["a"]
        await client.patch(
            CONFIG_MAPS, "a", {"metadata": {"labels": {"app": "db"}}}, namespace="default"
        )
        await client.patch(
            CONFIG_MAPS, "b", {"metadata": {"labels": {"app": "web"}}}, namespace="default"
        )
        await assert_mirrors(client, inf, log=log, label_selector="app=web")
        assert log.calls == [("add", "default/a"), ("delete", "default/a"), ("add", "default/b")]
    finally:
        await inf.stop()


async def test_pod_indexes_follow_the_server(apiserver: ApiServer, client: KubeClient) -> None:
    apiserver.store.create(builders.meta.namespace(name="team"))
    apiserver.store.create(
        PAUSE_POD(
            name="p1",
            namespace="team",
            owner_references=[builders.meta.owner_reference(name="rs-rs-1", uid="rs-1")],
            node_name="n1",
        )
    )
    apiserver.store.create(
        PAUSE_POD(
            name="p2",
            namespace="team",
            owner_references=[builders.meta.owner_reference(name="rs-rs-1", uid="rs-1")],
        )
    )
    inf: Informer[Any] = Informer(
        client=client, resource=PODS, namespace="team", settings=FAST_INFORMER
    )
    try:
        inf.start()
        await inf.wait_synced()
        assert [p["metadata"]["name"] for p in inf.lister.by_node("n1")] == ["p1"]
        assert sorted(p["metadata"]["name"] for p in inf.lister.by_owner("rs-1")) == ["p1", "p2"]
        await client.create(PODS, PAUSE_POD(name="p3", namespace="team", node_name="n1"))
        await eventually(lambda: len(inf.lister.by_node("n1")) == 2)
        assert len(inf.lister.list(namespace="team")) == 3
    finally:
        await inf.stop()


async def test_every_catalogued_resource_type_can_be_informed(client: KubeClient) -> None:
    informers = InformerSet(client=client, settings=FAST_INFORMER)
    for resource in ALL:
        informers.informer(resource)
    assert informers.readiness_check() is not None
    informers.start()
    try:
        assert await informers.wait_synced(within=60)  # a guard: only a broken run waits
        assert informers.readiness_check() is None
        assert informers.informer(NAMESPACES) is informers.informer(NAMESPACES)
        names = {n["metadata"]["name"] for n in informers.lister(NAMESPACES).list()}
        assert "default" in names
        # Informers asked for after start() start at once.
        late = informers.informer(CONFIG_MAPS, namespace="default")
        assert await late.wait_synced(within=60)
    finally:
        await informers.stop()


def test_settings_validation() -> None:
    with pytest.raises(ValueError, match="watch timeouts"):
        InformerSettings(min_watch_timeout=10, max_watch_timeout=5)
    with pytest.raises(ValueError, match="positive"):
        InformerSettings(inactivity_timeout=0)


def test_watch_timeouts_are_jittered_over_five_to_ten_minutes(client: KubeClient) -> None:
    inf: Informer[Any] = Informer(client=client, resource=CONFIG_MAPS, rng=random.Random(5))
    draws = [inf.next_watch_timeout() for _ in range(500)]
    assert all(300 <= d < 600 for d in draws)
    assert min(draws) < 310
    assert max(draws) > 590


async def test_an_unserved_kind_keeps_retrying_without_syncing(client: KubeClient) -> None:
    widgets = ResourceType(
        group="example.com", version="v1", kind="Widget", plural="widgets", namespaced=True
    )
    inf: Informer[Any] = Informer(client=client, resource=widgets, settings=FAST_INFORMER)
    try:
        inf.start()
        # 404 → backoff → list again, repeatedly: waited for by count, not for a time that a
        # loaded machine stretches (issue 32.7)
        await eventually(lambda: inf.stats.errors >= 2, limit=60)
        assert not inf.synced
        assert inf.running
    finally:
        await inf.stop()


async def test_a_relist_unsyncs_the_cache_until_it_is_stored(
    apiserver: ApiServer, client: KubeClient, informer: Informer[Any]
) -> None:
    apiserver.store.create(config_map("a"))
    informer.start()
    assert await informer.wait_synced(within=5)
    await eventually(lambda: informer.stats.watches == 1)  # a watch is open to be cut
    # The next watch is answered 410 Gone: the informer must list again, and the server holds
    # that list until released; "b" is written meanwhile.
    listing = asyncio.Event()
    apiserver.context.observers.append(
        lambda r: listing.set() if (r.verb, r.resource) == ("list", "configmaps") else None
    )
    released = apiserver.faults.hold(verb="list", resource="configmaps")
    apiserver.faults.add(verb="watch", resource="configmaps", status=410, count=1)
    apiserver.faults.drop_watches("configmaps")
    await asyncio.wait_for(listing.wait(), timeout=5)
    apiserver.store.create(config_map("b"))
    assert informer.stats.gone == 1
    assert not informer.synced  # it may miss changes: nothing may decide on this cache
    assert not await informer.wait_synced(within=0)
    assert informer.lister.get("a", "default") is not None  # the last state is still served
    released.set()
    assert await informer.wait_synced(within=5)
    assert informer.lister.get("b", "default") is not None
    assert informer.stats.lists == 2


async def test_a_resource_the_server_does_not_serve_is_absent(
    apiserver: ApiServer, client: KubeClient, caplog: pytest.LogCaptureFixture
) -> None:
    machines = next(rt for rt in ALL if rt.plural == "machines")
    served = apiserver.registry.remove(machines.key)
    assert served is not None
    inf: Informer[Any] = Informer(
        client=client, resource=machines, settings=FAST_INFORMER, rng=random.Random(3)
    )
    try:
        with caplog.at_level("DEBUG", logger="kubescale"):
            inf.start()
            await eventually(lambda: inf.stats.errors >= 3)  # retried at the backoff's pace
            assert inf.absent
            assert not inf.synced
            warnings = [r for r in caplog.records if r.levelname == "WARNING"]
            # once, naming the resource as `kubectl api-resources` does
            assert [r.getMessage() for r in warnings] == [
                "the API server does not serve this resource; retrying"
            ]
            assert warnings[0].__dict__["fields"]["resource"] == (
                "machines.cluster.x-k8s.io/v1beta1"
            )
            apiserver.registry.add(served)  # the CRD is installed
            assert await inf.wait_synced(within=5)
            assert not inf.absent
    finally:
        await inf.stop()
