"""Fixtures for access-layer tests: an in-process API server and clients talking HTTPS to it.

Every request goes through kubescale's own aiohttp client over real TLS to
:class:`kubescale.sim.apiserver.server.ApiServer`; nothing in the client is patched. Backoffs are
shrunk so fault runs take milliseconds; the request timeout is not (see ``FAST_CLIENT``).
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
    # Not a bound any test here depends on: client and in-process API server share one event
    # loop, and a starved loop (load ~15 on 2 cores) can need more than a few seconds of wall
    # time for one request (the first Deployment create imports the field-validation models,
    # ~0.4 CPU-s). A 5 s total then expired after the server had stored the object, the
    # transport retried the named create, as it promises, and the retry met 409 AlreadyExists.
    # Tests of timeouts set their own settings (or hold requests with fault injection).
    request_timeout=3600.0,
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
