"""Fixtures for access-layer tests: an in-process API server and clients talking HTTPS to it.

Every request goes through ``kubernetes.aio`` over real TLS to
:class:`kubescale.sim.apiserver.server. ApiServer`; nothing in the client is patched. Timeouts and
backoffs are shrunk so fault runs take milliseconds.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from kubescale.base.clock import Clock
from kubescale.kube.backoff import BackoffPolicy
from kubescale.kube.client import ClientSettings, KubeClient, connect
from kubescale.kube.informer import InformerSettings
from kubescale.sim.apiserver.server import ApiServer

FAST_CLIENT = ClientSettings(
    request_timeout=5.0,
    connect_timeout=2.0,
    max_attempts=5,
    retry_backoff=BackoffPolicy(initial=0.002, cap=0.02, jitter=0.5),
)
FAST_INFORMER = InformerSettings(
    min_watch_timeout=1.0,
    max_watch_timeout=3.0,
    inactivity_timeout=2.0,
    connect_timeout=2.0,
    backoff=BackoffPolicy(initial=0.002, cap=0.02, jitter=1.0),
)


@pytest.fixture
async def apiserver() -> AsyncIterator[ApiServer]:
    async with ApiServer(bookmark_interval=0.2) as server:
        yield server


@pytest.fixture
def kubeconfig(apiserver: ApiServer, tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    apiserver.write_kubeconfig(path)
    return path


async def new_client(
    kubeconfig: Path,
    *,
    clock: Clock | None = None,
    registry: CollectorRegistry | None = None,
    settings: ClientSettings = FAST_CLIENT,
    seed: int = 0,
) -> KubeClient:
    return await connect(
        kubeconfig=kubeconfig,
        clock=clock,
        registry=registry,
        settings=settings,
        rng=random.Random(seed),
    )


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
async def client(kubeconfig: Path, registry: CollectorRegistry) -> AsyncIterator[KubeClient]:
    kube = await new_client(kubeconfig, registry=registry)
    try:
        yield kube
    finally:
        await kube.close()
