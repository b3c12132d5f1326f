"""An extender on a real aiohttp server over a :class:`ClusterCache` filled by the test."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer

from kubescale.base.clock import VirtualClock
from kubescale.coordination.eviction_memory import EvictionMemory
from kubescale.coordination.placement_rules import PlacementRules
from kubescale.extender.cluster_cache import ClusterCache
from kubescale.extender.extender_config import ExtenderSettings
from kubescale.extender.extender_routes import SchedulerExtender
from kubescale.objects.node import Node
from kubescale.objects.pod import Pod
from kubescale.scheduling.policy.policy_loading import DeschedulerPolicy
from tests.controllers.descheduler.builders import NOW


@dataclass
class Running:
    extender: SchedulerExtender
    cache: ClusterCache
    memory: EvictionMemory
    session: aiohttp.ClientSession
    url: str

    async def post(self, verb: str, body: Any, *, raw: bytes | None = None) -> tuple[int, Any]:
        data = raw if raw is not None else json.dumps(body).encode()
        async with self.session.post(
            f"{self.url}/scheduler/{verb}",
            data=data,
            headers={"Content-Type": "application/json"},
        ) as response:
            return response.status, json.loads(await response.read())


@asynccontextmanager
async def running_extender(
    policy: DeschedulerPolicy,
    *,
    nodes: Sequence[Node] = (),
    pods: Sequence[Pod] = (),
    readiness: Any = None,
    settings: ExtenderSettings | None = None,
) -> AsyncIterator[Running]:
    clock = VirtualClock(NOW)
    cache = ClusterCache(policy=policy, now=clock.now).load(nodes=nodes, pods=pods)
    memory = EvictionMemory(duration=timedelta(minutes=10))
    extender = SchedulerExtender(
        cache=cache,
        rules=PlacementRules.from_policy(policy),
        veto=memory,
        settings=settings if settings is not None else ExtenderSettings(),
        clock=clock,
        readiness=readiness or (lambda: None),
    )
    app = web.Application()
    extender.mount(app)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as session:
            yield Running(
                extender=extender,
                cache=cache,
                memory=memory,
                session=session,
                url=f"http://127.0.0.1:{server.port}",
            )
    finally:
        await server.close()
