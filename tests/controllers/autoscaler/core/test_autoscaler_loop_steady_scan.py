"""A steady scan of the real loop costs what changed (issue 29, ``core/snapshot_cache.py``).

One MachineDeployment ``small`` (2-cpu nodes, 1 replica) and a Deployment ``web`` of 3 × 500m:
the three pods run on the one node (1.5 of 2 cpu). Once everything runs, an iteration with
nothing changed derives no pod's facts again and builds no node's snapshot piece again; a pod
changed through the API server is the only one derived again (and its node the only one
rebuilt); a pod deleted is released.
"""

from __future__ import annotations

from pathlib import Path

from kubescale.kube.resources import PODS

from ..sim_harness import SimCluster, app_deployment, sim_cluster
from ..test_autoscaler_e2e import SETTINGS, SMALL


async def _scan(cluster: SimCluster) -> tuple[int, int, int]:
    """One iteration once the informers caught up: (pods derived, nodes rebuilt, released)."""
    await cluster.settle()
    await cluster.loop.run_once(cluster.now)
    loop = cluster.loop
    return loop.pod_facts.computed, loop.node_pieces.rebuilt, loop.pod_facts.released


async def test_a_steady_scan_derives_nothing_again(tmp_path: Path) -> None:
    async with sim_cluster(
        tmp_path,
        machine_deployments=[SMALL],
        settings=SETTINGS,
        objects=[app_deployment("web", replicas=3, cpu="500m")],
    ) as cluster:
        await cluster.run_for(60)
        assert len(cluster.running("web")) == 3
        await _scan(cluster)
        # nothing changed since the last iteration: no pod, no node derived again
        assert await _scan(cluster) == (0, 0, 0)
        assert len(cluster.loop.pod_facts) == 3

        web = sorted(p["metadata"]["name"] for p in cluster.running("web"))
        changed = cluster.api.store.peek(PODS, web[0], "default")
        assert changed is not None
        labels = {**changed["metadata"]["labels"], "touched": "yes"}
        cluster.api.store.update({**changed, "metadata": {**changed["metadata"], "labels": labels}})
        assert await _scan(cluster) == (1, 1, 0)

        # deleted at once (grace period 0): the pod's entry is released, its node rebuilt; the
        # ReplicaSet's replacement is not created before the actors' next step
        cluster.api.store.delete(PODS, web[1], "default", grace_period_seconds=0)
        assert await _scan(cluster) == (0, 1, 1)
        assert len(cluster.loop.pod_facts) == len(cluster.loop.pods.lister.list()) == 2
