"""The recommender's VPA status writes through the one plan executor.

``test_recommender_loop``'s worked example (one pod, one VPA): its one status write is a
``PatchObject`` intent (``add /status``, a JSON patch on the status subresource) counted done;
a replica that does not hold the Lease sends no status write at all — refused before it is sent.
"""

from __future__ import annotations

import asyncio
import random

from prometheus_client import CollectorRegistry

from kubescale.controllers.vpa.recommender.recommender_loop import RecommenderLoop
from kubescale.controllers.vpa.recommender.recommender_metrics import RecommenderMetrics
from kubescale.kube.shared_cache import SharedCache

from .test_recommender_loop import (
    Cluster,
    _recommender_settings,
    cluster,
    recommendation,
    web_with_one_pod,
)

__all__ = ["cluster"]  # the fixture, re-exported for pytest


def intents(registry: CollectorRegistry, outcome: str) -> float:
    value = registry.get_sample_value(
        "kubescale_plan_intents_total",
        {"actor": "vpa-recommender", "intent": "PatchObject", "outcome": outcome},
    )
    return 0.0 if value is None else value


async def test_the_status_write_is_an_intent_counted_done(cluster: Cluster) -> None:
    await web_with_one_pod(cluster)
    cluster.vpa("web")
    registry = CollectorRegistry()
    loop = await cluster.recommender(registry=registry)
    await cluster.run(loop)
    assert loop.status_writes == 1
    assert recommendation(cluster.get_vpa("web"))  # written
    assert intents(registry, "done") == 1


async def test_no_status_write_leaves_a_replica_without_the_lease(cluster: Cluster) -> None:
    await web_with_one_pod(cluster)
    cluster.vpa("web")
    registry = CollectorRegistry()
    cache = SharedCache(client=cluster.client, clock=cluster.client.clock, rng=random.Random(1))
    cluster.loops.append(cache)
    loop = RecommenderLoop(
        client=cluster.client.gated(lambda: False),
        cache=cache,
        settings=_recommender_settings({}),
        metrics=RecommenderMetrics(registry),
    )
    cache.start()
    assert await asyncio.wait_for(cache.wait_synced(), timeout=10)
    cluster.api.requests.clear()
    await cluster.run(loop)
    assert loop.status_writes == 0
    assert recommendation(cluster.get_vpa("web")) == []
    assert cluster.api.requests.count(resource="verticalpodautoscalers", subresource="status") == 0
    assert intents(registry, "refused") == 1
