"""The recommender's VPA status writes through the one plan executor.

``test_recommender_loop``'s worked example (one pod, one VPA): its one status write is a
``PatchObject`` intent (``add /status``, a JSON patch on the status subresource) counted done;
a replica that does not hold the Lease sends no status write at all — refused before it is sent;
with ``--dry-run`` every write of the iteration is logged and none is sent.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random

import pytest
from prometheus_client import CollectorRegistry

from kubescale.controllers.vpa.recommender.recommender_loop import RecommenderLoop
from kubescale.controllers.vpa.recommender.recommender_metrics import RecommenderMetrics
from kubescale.kube.shared_cache import SharedCache
from kubescale.plans.executor import DRY_RUN_PREFIX
from kubescale.sim.apiserver.faults import WRITE_VERBS
from tests.controllers.vpa.checkpoint.test_checkpoint_store import upstream_checkpoint

from .test_recommender_loop import (
    NAMESPACE,
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


async def test_dry_run_logs_the_iteration_and_writes_nothing(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """``--dry-run`` (one flag for every system that plans): the status write, the checkpoint
    write and, once ``--checkpoints-gc-interval`` has passed, the orphan's deletion are logged,
    in RunOnce's order, and not one write request reaches the API server."""
    await web_with_one_pod(cluster)
    cluster.vpa("web")
    cluster.api.store.create(upstream_checkpoint("gone", "app"))
    registry = CollectorRegistry()
    loop = await cluster.recommender({"dry-run": True}, registry=registry)
    caplog.set_level(logging.INFO, logger="kubescale.plans")
    cluster.api.requests.clear()
    await cluster.run(loop)
    first = [r.getMessage() for r in caplog.records if r.name == "kubescale.plans"]
    await cluster.advance(601)  # past --checkpoints-gc-interval (10m) since start-up
    caplog.clear()
    await cluster.run(loop)
    second = [r.getMessage() for r in caplog.records if r.name == "kubescale.plans"]
    written = {r for r in cluster.api.requests.counts() if r.verb in WRITE_VERBS}
    assert written == set()
    assert recommendation(cluster.get_vpa("web")) == []
    assert sorted(c["metadata"]["name"] for c in cluster.checkpoints()) == ["gone-app"]
    status = f"{DRY_RUN_PREFIX}vpa-recommender: patch verticalpodautoscalers {NAMESPACE}/web/status"
    checkpoint = (
        f"{DRY_RUN_PREFIX}vpa-recommender: patch-or-create verticalpodautoscalercheckpoints "
        f"{NAMESPACE}/web-app"
    )
    delete = (
        f"{DRY_RUN_PREFIX}vpa-recommender: delete verticalpodautoscalercheckpoints "
        f"{NAMESPACE}/gone-app"
    )
    # Each line up to its JSON payload. Nothing was written, so the second iteration decides
    # the status write again; the orphan's deletion comes last, after the checkpoint writes.
    assert [line.split(" json ", 1)[0] for line in first] == [status, checkpoint]
    assert [line.split(" json ", 1)[0] for line in second] == [status, checkpoint, delete]
    assert (
        registry.get_sample_value(
            "kubescale_plan_intents_total",
            {"actor": "vpa-recommender", "intent": "PatchObject", "outcome": "dry-run"},
        )
        == 2
    )
    # The printed status is the one a recommender without --dry-run writes at that moment.
    (patch,) = json.loads(second[0].split(" json ", 1)[1])
    writer = await cluster.recommender(registry=CollectorRegistry())
    await cluster.run(writer)
    assert (
        recommendation(cluster.get_vpa("web"))
        == (patch["value"]["recommendation"]["containerRecommendations"])
    )
