"""Fixtures shared by the webhook's API-server tests: a virtual clock, an ApiServer on it, and a
KubeClient connected to it; ``eventually`` waits (real time, bounded) for a condition."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from kubescale.base.clock import Clock, VirtualClock
from kubescale.controllers.vpa.admission.admission_caches import AdmissionCaches
from kubescale.kube.client import KubeClient, connect
from kubescale.kube.shared_cache import SharedCache
from kubescale.sim.apiserver.server import ApiServer
from kubescale.webhook.webhook_config import WebhookSettings


async def eventually(predicate: Callable[[], bool], *, within: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not predicate():
        assert loop.time() < deadline, "condition not reached"
        await asyncio.sleep(0.005)


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
async def api(clock: VirtualClock) -> AsyncIterator[ApiServer]:
    async with ApiServer(clock=clock) as server:
        yield server


@pytest.fixture
async def kube(api: ApiServer, clock: VirtualClock, tmp_path: Path) -> AsyncIterator[KubeClient]:
    api.write_kubeconfig(tmp_path / "kubeconfig")
    client = await connect(kubeconfig=tmp_path / "kubeconfig", clock=clock, rng=random.Random(0))
    try:
        yield client
    finally:
        await client.close()


def build_caches(
    client: KubeClient, settings: WebhookSettings, *, clock: Clock
) -> tuple[SharedCache, AdmissionCaches]:
    """A shared cache (not started) and the webhook's caches over it, as the settings ask."""
    cache = SharedCache(client=client, clock=clock)
    caches = AdmissionCaches(
        cache=cache,
        vpa_object_namespace=settings.vpa_object_namespace,
        ignored_namespaces=settings.ignored_vpa_object_namespaces,
        watch_hpas=settings.avoid_hpa_conflict,
        watch_nodes=settings.cap_to_largest_node,
    )
    return cache, caches
