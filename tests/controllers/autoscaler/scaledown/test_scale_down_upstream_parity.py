"""Scale-down next to upstream's cluster autoscaler, on the simulated cluster and a real API
server: empty nodes first, no scale-down mid-rollout, upstream's scale-down events.

The scenarios are the ones where kubescale and upstream (clusterapi provider, same
MachineDeployments and pods) used to part ways; each assertion is what upstream does.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from kubescale.controllers.autoscaler.cloudprovider.clusterapi_annotations import (
    DEPLOYMENT_NAME_LABEL,
    REVISION_ANNOTATION,
)
from kubescale.controllers.autoscaler.config.autoscaler_config import (
    AutoscalerSettings,
    NodeGroupDefaults,
)
from kubescale.kube.resources import MACHINE_DEPLOYMENTS, MACHINE_SETS, NODES
from kubescale.sim.cluster.node_groups import MachineDeploymentGroup
from tests.controllers.autoscaler.sim_harness import (
    SimCluster,
    app_deployment,
    sim_cluster,
    template,
)

SETTINGS = AutoscalerSettings(
    scale_down_delay_after_add=timedelta(minutes=2),
    node_defaults=NodeGroupDefaults(scale_down_unneeded_time=timedelta(minutes=2)),
)


def pool(replicas: int) -> MachineDeploymentGroup:
    return MachineDeploymentGroup(
        name="pool",
        template=template("s2", "2", "8Gi", 0.10),
        min_size=1,
        max_size=5,
        replicas=replicas,
        provisioning_delay=60,
        deprovisioning_delay=30,
    )


def replicas(cluster: SimCluster) -> int:
    md = cluster.api.store.peek(MACHINE_DEPLOYMENTS, "pool", "default")
    return -1 if md is None else int(md["spec"]["replicas"])


def resize(cluster: SimCluster, count: int) -> None:
    """Someone (not the autoscaler) sets the MachineDeployment's replicas."""
    md = cluster.api.store.peek(MACHINE_DEPLOYMENTS, "pool", "default")
    assert md is not None
    updated = copy.deepcopy(md)
    updated["spec"]["replicas"] = count
    cluster.api.store.update(updated)


def messages(cluster: SimCluster, reason: str) -> list[str]:
    return [str(e["message"]) for e in cluster.events_with(reason)]


def evictions(cluster: SimCluster) -> float:
    return cluster.metric("cluster_autoscaler_evicted_pods_total", {"eviction_result": "succeeded"})


async def test_empty_nodes_are_deleted_first_and_nothing_is_evicted(tmp_path: Path) -> None:
    """Upstream's EmptySorting processor puts empty candidates first: three empty nodes go, the
    occupied one stays, no pod is evicted.

    One 2-cpu node holds two 400m pods (0.8 / 2 = 0.4 ≤ 0.5: underutilized); three more empty
    nodes join. Simulated in name order instead, the occupied node came first (its pods fit on
    an empty one), then that node (now holding them) moved them on again: the occupied node was
    drained (2 evictions) while empty nodes stayed."""
    # the occupied node is simulated again every loop (upstream --unremovable-node-recheck-
    # timeout, here 10 s), so it is a candidate next to the empty ones once they register
    settings = replace(SETTINGS, unremovable_node_recheck_timeout=timedelta(seconds=10))
    async with sim_cluster(
        tmp_path,
        machine_deployments=[pool(1)],
        settings=settings,
        objects=[app_deployment("work", replicas=2, cpu="400m")],
    ) as cluster:
        await cluster.run_until(
            lambda: len(cluster.running("work")) == 2, limit=60, what="pods running"
        )
        [occupied] = {p["spec"]["nodeName"] for p in cluster.running("work")}
        resize(cluster, 4)
        await cluster.run_until(
            lambda: len(cluster.node_names()) == 4, limit=180, what="three more nodes"
        )
        empty = sorted(set(cluster.node_names()) - {occupied})
        # seed 1 names the occupied node second of four: in name order it was simulated
        # before two of the empty nodes
        assert sorted([occupied, *empty]).index(occupied) == 1
        await cluster.run_until(lambda: replicas(cluster) == 1, limit=900, what="scale-down")
        await cluster.run_until(
            lambda: len(cluster.node_names()) == 1, limit=120, what="three nodes gone"
        )
        assert (cluster.node_names(), evictions(cluster)) == ([occupied], 0)
        assert "deleting pod for node scale down" not in messages(cluster, "ScaleDown")
        assert {p["spec"]["nodeName"] for p in cluster.running("work")} == {occupied}
        # upstream's deleteAsyncEmpty at the start, RegisterAndRecordSuccessfulScaleDownEvent
        # once the provider deleted the node
        assert sorted(messages(cluster, "ScaleDownEmpty")) == sorted(
            [f'Scale-down: removing empty node "{n}"' for n in empty]
            + [f"Scale-down: empty node {n} removed" for n in empty]
        )
        assert (
            cluster.metric(
                "cluster_autoscaler_scaled_down_nodes_total",
                {"reason": "empty", "gpu_resource_name": "", "gpu_name": ""},
            )
            == 3
        )


async def test_no_node_of_a_machine_deployment_mid_rollout_is_removed(tmp_path: Path) -> None:
    """Upstream's clusterapi ``ScaleDownNodeUpgradeProcessor``: while an older-revision
    MachineSet of the MachineDeployment still has replicas, none of its nodes is a scale-down
    candidate. Three empty nodes, min size 1: without the check two were deleted mid-rollout;
    once the rollout is over (the newer MachineSet gone, the remaining one is the latest
    revision) the two go."""
    async with sim_cluster(tmp_path, machine_deployments=[pool(3)], settings=SETTINGS) as cluster:
        await cluster.step()  # the MachineDeployment, its MachineSet and three nodes exist
        [current] = cluster.api.store.snapshots(MACHINE_SETS, "default")
        assert current["metadata"]["annotations"][REVISION_ANNOTATION] == "1"
        md = cluster.api.store.peek(MACHINE_DEPLOYMENTS, "pool", "default")
        assert md is not None
        # a rollout starts: revision 2's MachineSet exists (no machines yet); revision 1's still
        # has its 3 replicas
        cluster.api.store.create(
            {
                "apiVersion": current["apiVersion"],
                "kind": "MachineSet",
                "metadata": {
                    "name": "pool-zzzzzz",  # sorts after the simulator's own MachineSet
                    "namespace": "default",
                    "labels": {DEPLOYMENT_NAME_LABEL: "pool"},
                    "annotations": {REVISION_ANNOTATION: "2"},
                    "ownerReferences": copy.deepcopy(current["metadata"]["ownerReferences"]),
                },
                "spec": {
                    "clusterName": "sim",
                    "replicas": 0,
                    "selector": {"matchLabels": {"rollout": "pool-2"}},
                    "template": {
                        "metadata": {"labels": {"rollout": "pool-2"}},
                        "spec": copy.deepcopy(current["spec"]["template"]["spec"]),
                    },
                },
            }
        )
        for _ in range(48):  # 8 minutes: cooldown (2m) and unneeded time (2m) long past
            await cluster.step()
            assert cluster.loop.report.unneeded == []
            assert cluster.loop.report.tainted == []
        assert replicas(cluster) == 3
        assert len(cluster.node_names()) == 3
        assert messages(cluster, "ScaleDownEmpty") == []
        # the rollout is over: revision 1's MachineSet is the only (latest) one
        cluster.api.store.delete(MACHINE_SETS, "pool-zzzzzz", "default")
        await cluster.run_until(lambda: replicas(cluster) == 1, limit=600, what="scale-down")
        assert len(messages(cluster, "ScaleDownEmpty")) >= 2


async def test_drain_start_and_end_events_have_upstreams_texts(tmp_path: Path) -> None:
    """``deleteAsyncDrain``: "Scale-down: removing node %s, utilization: %v, pods to
    reschedule: %s" (``utilization.Info{CpuUtil MemUtil GpuUtil DynamicResourceUtil
    ResourceName Utilization}``, pod names joined by ","), then "Scale-down: node %s removed
    with drain".

    Two 2-cpu/8Gi nodes, one 100m/256Mi pod each: cpu 100/2000 = 0.05, memory
    256Mi/8Gi = 0.03125; cpu > memory, so ResourceName cpu and Utilization 0.05:
    ``{0.05 0.03125 0 0 cpu 0.05}``."""
    async with sim_cluster(
        tmp_path,
        machine_deployments=[pool(2)],
        settings=SETTINGS,
        objects=[app_deployment("steady", replicas=2, cpu="100m", memory="256Mi")],
    ) as cluster:
        await cluster.run_until(
            lambda: len(cluster.running("steady")) == 2, limit=60, what="pods running"
        )
        placed = {p["spec"]["nodeName"]: p["metadata"]["name"] for p in cluster.running("steady")}
        assert len(placed) == 2  # least-allocated scoring spread them
        await cluster.run_until(lambda: replicas(cluster) == 1, limit=600, what="scale-down")
        started = [
            m for m in messages(cluster, "ScaleDown") if m.startswith("Scale-down: removing")
        ]
        [victim] = [
            n
            for n in placed
            if any(m.startswith(f"Scale-down: removing node {n},") for m in started)
        ]
        assert started == [
            f"Scale-down: removing node {victim}, utilization: {{0.05 0.03125 0 0 cpu 0.05}}, "
            f"pods to reschedule: {placed[victim]}"
        ]
        await cluster.run_until(
            lambda: cluster.api.store.peek(NODES, victim) is None, limit=120, what="node gone"
        )
        assert f"Scale-down: node {victim} removed with drain" in messages(cluster, "ScaleDown")
        assert evictions(cluster) == 1
