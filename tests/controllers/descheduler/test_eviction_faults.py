"""The descheduler's limits hold when an eviction commits but its answer is lost (issue 27, 5).

Nodes n1 (tainted ``NoSchedule``) and n2; web-0 and web-1 on n1; RemovePodsViolatingNodeTaints
wants both gone; the policy allows one eviction per node (or in total) and
``gracePeriodSeconds: 0``, so an eviction removes its pod at once. The first eviction's POST is
stored by the API server, but its answer never reaches the descheduler as an answer:

* ``late``: the answer comes past the client's request timeout (a transport error);
* ``503``: the answer is a ``503`` with ``Retry-After`` (the write is retried after it);

the client sends the POST again, and the retry meets ``404`` (web-0 is gone: the first try
removed it) or ``429`` (the PodDisruptionBudget the first try used). Upstream counts a 404/429 as
an error, not an eviction, and moves to the next pod: web-1 went too — two evictions against a
limit of one. The rule (reference §2 and the house rule): a write whose outcome is unknown counts
as done until proven otherwise, and an answer to the retry says nothing about the first attempt.
So web-0's eviction counts (result ``success``), and web-1 meets the limit (its result is the
limit's error text): exactly one pod is evicted.
"""

from __future__ import annotations

import asyncio
import random
from datetime import timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from kubescale.controllers.descheduler.descheduler_config import DeschedulerSettings
from kubescale.controllers.descheduler.descheduler_loop import DeschedulerLoop
from kubescale.controllers.descheduler.descheduler_metrics import DeschedulerMetrics
from kubescale.controllers.descheduler.framework.eviction import (
    NODE_LIMIT_TEXT,
    TOTAL_LIMIT_TEXT,
)
from kubescale.coordination.eviction_memory import EvictionMemory
from kubescale.kube.client import KubeClient, connect
from kubescale.kube.events import EventRecorder
from kubescale.kube.informer_set import InformerSet
from kubescale.kube.resources import PODS
from kubescale.kube.transport import ClientSettings
from kubescale.sim.apiserver.server import ApiServer
from kubescale.sim.scenario.runner import SimulationClientClock
from tests.builders.meta import json_body

from .builders import cycle_node, cycle_pod
from .test_descheduler_loop import TAINT, Setup, create_pod, setup, taints_policy

__all__ = ["setup"]  # the fixture, shared with the loop's tests

LABELS = {
    "strategy": "RemovePodsViolatingNodeTaints",
    "profile": "default",
    "namespace": "default",
    "node": "n1",
}


def evicted(api: ApiServer) -> list[str]:
    """web pods removed from the store, or being deleted."""
    present = {
        p["metadata"]["name"]: bool(p["metadata"].get("deletionTimestamp"))
        for p in api.store.snapshots(PODS)
    }
    return sorted(name for name in ("web-0", "web-1") if name not in present or present[name])


async def short_timeout_client(setup: Setup, tmp_path: Path, seconds: float) -> KubeClient:
    """The loop's own client, with a request timeout the late answer outlasts; its retries
    wait no time (the simulation's client clock)."""
    kubeconfig = tmp_path / "loop-kubeconfig"
    setup.api.write_kubeconfig(kubeconfig)
    return await connect(
        kubeconfig=kubeconfig,
        clock=SimulationClientClock(setup.clock),
        registry=CollectorRegistry(),
        settings=ClientSettings(request_timeout=seconds),
        rng=random.Random(3),
    )


@pytest.mark.parametrize("limit", ["maxNoOfPodsToEvictPerNode", "maxNoOfPodsToEvictTotal"])
@pytest.mark.parametrize(
    ("first", "retry"), [("late", 404), ("503", 404), ("late", 429), ("503", 429)]
)
async def test_an_eviction_retried_after_no_answer_counts_against_the_limit(
    setup: Setup, tmp_path: Path, limit: str, first: str, retry: int
) -> None:
    api = setup.api
    api.store.create(json_body(cycle_node("n1", taints=[TAINT])))
    api.store.create(json_body(cycle_node("n2")))
    for name in ("web-0", "web-1"):
        create_pod(api, cycle_pod(name, "n1", cpu="100m", labels={"app": "web"}))
    policy = taints_policy(**{limit: 1, "gracePeriodSeconds": 0})
    # A timeout of 0.25 s against an answer 1.5 s late: the client gives up on the first POST
    # (a transport error), which the API server has stored already.
    loop_client = await short_timeout_client(setup, tmp_path, seconds=0.25)
    if first == "late":
        api.faults.add(
            verb="create", resource="pods/eviction", status=0, delay=1.5, after_commit=True
        )
    else:
        api.faults.add(
            verb="create", resource="pods/eviction", status=503, retry_after=1, after_commit=True
        )
    if retry == 429:
        # What the retry meets when the first try used the budget (web-0's removal would
        # otherwise answer 404 first): the budget's refusal.
        api.faults.add(verb="create", resource="pods/eviction", status=429, count=1)
    informers = InformerSet(client=setup.client, rng=random.Random(1))
    registry = CollectorRegistry()
    events = EventRecorder(client=setup.client, component="descheduler")
    loop = DeschedulerLoop(
        client=loop_client,
        informers=informers,
        settings=DeschedulerSettings(policy=policy),
        policy=policy,
        metrics=DeschedulerMetrics(registry),
        events=events,
        memory=EvictionMemory(duration=timedelta(minutes=10)),
    )
    informers.start()
    try:
        assert await asyncio.wait_for(informers.wait_synced(), timeout=10)
        target = str(api.store.resource_version)
        for _ in range(100):
            api.bookmark_watches()
            if await loop.wait_for_resource_version(target, within=0.1):
                break
        await loop.run_once(setup.clock.now())
        # web-0's first POST committed; its retry's 404/429 does not prove otherwise: it is
        # counted, and web-1 meets the limit (1 + 1 > 1). Today: 2 evictions.
        assert evicted(api) == ["web-0"]
        limit_text = NODE_LIMIT_TEXT if limit == "maxNoOfPodsToEvictPerNode" else TOTAL_LIMIT_TEXT

        def sample(result: str) -> float:
            value = registry.get_sample_value(
                "descheduler_pods_evicted_total", {"result": result, **LABELS}
            )
            return 0.0 if value is None else value

        assert (sample("success"), sample("error"), sample(limit_text)) == (1, 0, 1)
        # and the retry did go out and meet the refusal (not a test of nothing)
        posts = sum(
            n
            for r, n in api.requests.counts().items()
            if r.verb == "create" and r.subresource == "eviction" and r.name == "web-0"
        )
        assert posts >= 2  # more only if a retry itself outlasts the short timeout
    finally:
        await events.close()
        await informers.stop()
        await loop_client.close()
