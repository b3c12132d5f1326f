"""Checkpoint writes and deletions are intents applied by the recommender's one plan executor:
each write a :class:`~kubescale.plans.intents.PatchOrCreate` (upstream's
``CreateOrUpdateVpaCheckpoint``: JSON patch of ``/status``, create on 404), each orphan's removal
a :class:`~kubescale.plans.intents.DeleteObject`; counted in ``kubescale_plan_intents_total``,
and refused — nothing sent — once this replica has lost the leader Lease.
"""

from __future__ import annotations

from datetime import timedelta

from prometheus_client import CollectorRegistry

from kubescale.controllers.vpa.checkpoint.checkpoint_store import CheckpointStore, checkpoint_write
from kubescale.coordination.disruption_ledger import DisruptionLedger
from kubescale.kube.resources import VPA_CHECKPOINTS
from kubescale.kube.shared_cache import SharedCache
from kubescale.objects.vpa_checkpoint import VerticalPodAutoscalerCheckpoint
from kubescale.plans.executor import PlanExecutor
from kubescale.plans.intents import describe
from kubescale.sim.apiserver.faults import WRITE_VERBS
from tests.controllers.vpa.checkpoint.test_checkpoint_store import _FixedClock, _model
from tests.controllers.vpa.recommender.test_recommender_loop import (
    NAMESPACE,
    START,
    Cluster,
    cluster,
    web_with_one_pod,
)

__all__ = ["cluster"]  # the fixture, re-exported for pytest


def counted(registry: CollectorRegistry, intent: str, outcome: str) -> float | None:
    return registry.get_sample_value(
        "kubescale_plan_intents_total",
        {"actor": "vpa-recommender", "intent": intent, "outcome": outcome},
    )


def test_a_checkpoint_write_is_one_patch_or_create() -> None:
    checkpoint: VerticalPodAutoscalerCheckpoint = {
        "metadata": {"name": "web-app", "namespace": NAMESPACE},
        "spec": {"vpaObjectName": "web", "containerName": "app"},
        "status": {"version": "v3", "totalSamplesCount": 1},
    }
    assert describe(checkpoint_write(checkpoint)) == (
        f"vpa-recommender: patch-or-create verticalpodautoscalercheckpoints {NAMESPACE}/web-app "
        'json [{"op":"replace","path":"/status","value":{"totalSamplesCount":1,"version":"v3"}}]'
    )


async def test_the_recommender_writes_its_checkpoints_through_its_executor(
    cluster: Cluster,
) -> None:
    await web_with_one_pod(cluster)
    cluster.vpa("web")
    registry = CollectorRegistry()
    loop = await cluster.recommender(registry=registry)
    await cluster.run(loop)
    assert [c["metadata"]["name"] for c in cluster.checkpoints()] == ["web-app"]
    assert counted(registry, "PatchOrCreate", "done") == 1  # created (the patch met a 404)
    await cluster.advance(60)
    await cluster.run(loop)
    assert counted(registry, "PatchOrCreate", "done") == 2  # replaced


async def test_no_checkpoint_is_written_or_deleted_after_the_lease_is_lost(
    cluster: Cluster,
) -> None:
    state = _model(3)
    informer = SharedCache(client=cluster.client, clock=cluster.clock).informers.informer(
        VPA_CHECKPOINTS
    )
    registry = CollectorRegistry()
    holding = [True]
    executor = PlanExecutor(
        client=cluster.client.gated(lambda: holding[0]),
        ledger=DisruptionLedger(shared=False),
        events=None,
        registry=registry,
    )
    store = CheckpointStore(
        client=cluster.client,
        informer=informer,
        ignored_namespace=lambda _: False,
        executor=executor,
    )
    first = await store.store(state, now=START, clock=_FixedClock(), deadline=1.0)
    assert (first.written, first.failed) == (3, 0)
    holding[0] = False
    cluster.api.requests.clear()
    later = await store.store(
        state, now=START + timedelta(minutes=1), clock=_FixedClock(), deadline=1.0
    )
    assert (later.written, later.failed) == (0, 3)
    # the three VPAs are gone: their checkpoints are orphans, but not this replica's to delete
    informer.start()
    assert await informer.wait_synced()
    try:
        assert await store.garbage_collect(existing_vpas=set(), now=START) == 0
    finally:
        await informer.stop()
    written = {r for r in cluster.api.requests.counts() if r.verb in WRITE_VERBS}
    assert written == set()
    assert len(cluster.checkpoints()) == 3
    assert counted(registry, "PatchOrCreate", "refused") == 3
    assert counted(registry, "DeleteObject", "refused") == 3
