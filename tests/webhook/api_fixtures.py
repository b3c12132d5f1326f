"""Fixtures shared by the webhook's API-server tests: a virtual clock, an ApiServer on it, and a
KubeClient connected to it; ``eventually`` waits (real time, bounded) for a condition."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from kubescale.base.clock import VirtualClock
from kubescale.kube.client import KubeClient, connect
from kubescale.sim.apiserver.server import ApiServer


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
