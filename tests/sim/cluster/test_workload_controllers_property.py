"""Property: whatever replica changes (and template changes) a Deployment goes through, it
converges to exactly ``spec.replicas`` non-terminating pods, all of the current template, within
a bounded number of steps after the last change — and never holds more than
``replicas + maxSurge`` pods' worth of ReplicaSet replicas while it gets there."""

from __future__ import annotations

import asyncio
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubescale.base.clock import VirtualClock
from kubescale.kube.resources import DEPLOYMENTS, REPLICA_SETS
from kubescale.sim.apiserver.server import ApiServer
from kubescale.sim.cluster.usage_models import POD_INDEX_ANNOTATION
from kubescale.sim.cluster.workload_controllers import WorkloadControllers
from tests.sim.cluster.test_workload_controllers import (
    SimCluster,
    StandInKubelet,
    web_deployment,
    with_image,
)

SETTLE_STEPS = 12
"""Enough for any rollout of ≤ 8 replicas with the default 25 % surge/unavailability."""

changes = st.lists(
    st.tuples(st.integers(min_value=0, max_value=8), st.booleans(), st.integers(0, 2)),
    min_size=1,
    max_size=6,
)


def _within_surge(cluster: SimCluster) -> None:
    replicas = cluster.get(DEPLOYMENTS, "web")["spec"]["replicas"]
    wanted = sum(rs["spec"]["replicas"] for rs in cluster.api.store.list(REPLICA_SETS))
    assert wanted <= replicas + math.ceil(replicas / 4)


async def _converges(sequence: list[tuple[int, bool, int]]) -> None:
    clock = VirtualClock()
    api = ApiServer(clock=clock, crd_dirs=[], seed=3)  # in-process: no listener needed
    controllers = WorkloadControllers(api=api)
    cluster = SimCluster(api=api, clock=clock, controllers=controllers, kubelet=StandInKubelet(api))
    cluster.create(web_deployment(replicas=2))
    await cluster.step(2)
    version = 1
    try:
        for replicas, new_template, wait in sequence:
            d = cluster.get(DEPLOYMENTS, "web")
            if new_template:
                version += 1
                d = with_image(d, f"nginx:{version}")
            d["spec"]["replicas"] = replicas
            cluster.api.store.update(d)
            for _ in range(wait):  # the next change may come before this one settled
                await cluster.step()
                _within_surge(cluster)
        for _ in range(SETTLE_STEPS):
            await cluster.step()
            _within_surge(cluster)
        d = cluster.get(DEPLOYMENTS, "web")
        replicas = d["spec"]["replicas"]
        live = cluster.active_pods()
        assert len(live) == replicas
        assert {p["spec"]["containers"][0]["image"] for p in live} <= {f"nginx:{version}"}
        assert len(cluster.pods()) == replicas  # nothing left terminating either
        status = d["status"]
        assert status["replicas"] == status["updatedReplicas"] == replicas
        assert status["availableReplicas"] == replicas
        active_sets = [
            rs for rs in cluster.api.store.list(REPLICA_SETS) if rs["spec"]["replicas"] > 0
        ]
        assert len(active_sets) == (1 if replicas else 0)
        indexes = [p["metadata"]["annotations"][POD_INDEX_ANNOTATION] for p in live]
        assert len(set(indexes)) == len(indexes)  # unique among live pods
    finally:
        controllers.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sequence=changes)
def test_a_deployment_converges_to_its_replicas(sequence: list[tuple[int, bool, int]]) -> None:
    asyncio.run(_converges(sequence))
