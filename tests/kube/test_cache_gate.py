"""A component's cache gate over real informers: what its loops wait for, what /readyz says."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from kubescale.kube.client import KubeClient
from kubescale.kube.informer import Informer
from kubescale.kube.resources import CONFIG_MAPS, MACHINES, ResourceType
from kubescale.runtime.cache_gate import CacheGate
from kubescale.sim.apiserver.server import ApiServer

from .conftest import FAST_INFORMER
from .informer_checks import eventually


def _informer(client: KubeClient, resource: ResourceType) -> Informer[Any]:
    return Informer(client=client, resource=resource, settings=FAST_INFORMER, rng=random.Random(4))


async def test_a_needed_collection_not_served_is_named_and_waited_for(
    apiserver: ApiServer, client: KubeClient
) -> None:
    assert apiserver.registry.remove(MACHINES.key) is not None
    config_maps, machines = _informer(client, CONFIG_MAPS), _informer(client, MACHINES)
    gate = CacheGate("cluster-autoscaler", [config_maps, machines])
    try:
        assert gate.waiting() == ["configmaps", "machines"]
        config_maps.start()
        machines.start()
        await eventually(lambda: machines.absent)
        assert await config_maps.wait_synced(within=5)
        assert gate.waiting() == ["machines"]
        assert gate.readiness_check() == (
            "caches not synced: machines; "
            "not served by the API server: machines.cluster.x-k8s.io/v1beta1"
        )
        waiter = asyncio.ensure_future(gate.wait())
        await asyncio.sleep(0)
        assert not waiter.done()
        apiserver.registry.add(MACHINES)  # the CRD is installed
        await asyncio.wait_for(waiter, timeout=5)
        assert gate.readiness_check() is None
    finally:
        await config_maps.stop()
        await machines.stop()


async def test_an_optional_collection_not_served_is_not_waited_for(
    apiserver: ApiServer, client: KubeClient
) -> None:
    assert apiserver.registry.remove(MACHINES.key) is not None
    config_maps, machines = _informer(client, CONFIG_MAPS), _informer(client, MACHINES)
    gate = CacheGate("cluster-autoscaler", [config_maps], optional=[machines])
    try:
        config_maps.start()
        assert await config_maps.wait_synced(within=5)
        waiter = asyncio.ensure_future(gate.wait())
        await asyncio.sleep(0)
        assert not waiter.done()  # the optional one has not listed yet: it may be served
        machines.start()
        # returns once the optional one proved absent
        await asyncio.wait_for(waiter, timeout=5)
        assert machines.absent
        assert gate.waiting() == []
        assert gate.readiness_check() is None
    finally:
        await config_maps.stop()
        await machines.stop()
