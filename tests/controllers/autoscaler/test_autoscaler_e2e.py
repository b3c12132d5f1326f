"""End to end on the simulated cluster: pending pods → MachineDeployment ``/scale`` → Machines →
Nodes → pods scheduled; then load gone → a node drained through the Eviction API (PDB honoured)
and its Machine deleted with the ``delete-machine`` annotation; node-hours and cost."""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import yaml

from kubescale.controllers.autoscaler.cloudprovider.clusterapi_annotations import (
    DELETE_MACHINE_ANNOTATION,
)
from kubescale.controllers.autoscaler.config.autoscaler_config import (
    AutoscalerSettings,
    NodeGroupDefaults,
)
from kubescale.kube.resources import CONFIG_MAPS, DEPLOYMENTS, MACHINE_DEPLOYMENTS, MACHINES
from kubescale.sim.cluster.node_groups import MachineDeploymentGroup
from tests import builders

from .sim_harness import SimCluster, app_deployment, sim_cluster, template

SMALL = MachineDeploymentGroup(
    name="small",
    template=template("s2", "2", "8Gi", 0.10),
    min_size=1,
    max_size=5,
    replicas=1,
    provisioning_delay=60,
    deprovisioning_delay=30,
)
LARGE = MachineDeploymentGroup(
    name="large",
    template=template("l8", "8", "32Gi", 0.40),
    min_size=0,
    max_size=3,
    replicas=0,
    provisioning_delay=60,
    deprovisioning_delay=30,
)
SETTINGS = AutoscalerSettings(
    scale_down_delay_after_add=timedelta(minutes=2),
    node_defaults=NodeGroupDefaults(scale_down_unneeded_time=timedelta(minutes=2)),
)


def replicas(cluster: SimCluster, name: str) -> int:
    md = cluster.api.store.peek(MACHINE_DEPLOYMENTS, name, "default")
    return -1 if md is None else int(md["spec"]["replicas"])  # -1: not created yet


def scale(cluster: SimCluster, name: str, count: int) -> None:
    current = cluster.api.store.peek(DEPLOYMENTS, name, "default")
    assert current is not None
    updated = copy.deepcopy(current)
    updated["spec"]["replicas"] = count
    cluster.api.store.update(updated)


async def test_scale_up_then_drain_and_delete(tmp_path: Path) -> None:
    async with sim_cluster(
        tmp_path,
        machine_deployments=[SMALL, LARGE],
        settings=SETTINGS,
        objects=[app_deployment("burst", replicas=6, cpu="500m")],
    ) as cluster:
        # ---------------------------------------------------------------- scale-up
        # one 2-cpu node holds 4 × 500m; 2 pods pend. least-waste: a small node wastes
        # (2−1)/2 + (8−0.5)/8 = 1.4375, a large one (8−1)/8 + (32−0.5)/32 = 1.859 → small 1→2
        await cluster.run_until(lambda: replicas(cluster, "small") == 2, limit=60, what="scale-up")
        assert replicas(cluster, "large") == 0
        triggered = cluster.events_with("TriggeredScaleUp")
        assert len(triggered) == 2
        assert {e["message"] for e in triggered} == {
            "pod triggered scale-up: [{MachineDeployment/default/small 1->2 (max: 5)}]"
        }
        assert cluster.metric("cluster_autoscaler_scaled_up_nodes_total") == 1
        # the machine comes up after 60 s, its node registers, the scheduler binds the pods
        await cluster.run_until(
            lambda: len(cluster.running("burst")) == 6, limit=180, what="pods scheduled"
        )
        assert len(cluster.node_names()) == 2
        status = cluster.api.store.peek(CONFIG_MAPS, "cluster-autoscaler-status", "kube-system")
        assert status is not None
        parsed = yaml.safe_load(status["data"]["status"])
        groups = {g["name"]: g for g in parsed["nodeGroups"]}
        assert groups["MachineDeployment/default/small"]["health"]["cloudProviderTarget"] == 2
        assert (
            groups["MachineDeployment/default/small"]["health"]["nodeCounts"]["registered"]["ready"]
            == 2
        )
        # ------------------------------------------------------------ load gone
        scale(cluster, "burst", 0)
        await cluster.run_for(60)
        cluster.api.store.create(
            builders.pdbs.pdb(name="steady", match_labels={"app": "steady"}, max_unavailable=1)
        )
        cluster.api.store.create(app_deployment("steady", replicas=2, cpu="100m"))
        await cluster.run_for(30)
        steady = cluster.running("steady")
        # least-allocated scoring spreads the two pods over the two empty nodes
        assert len({p["spec"]["nodeName"] for p in steady}) == 2
        marked: dict[str, str] = {}

        def machine_deleted() -> bool:
            # the PDB (maxUnavailable 1 of 2) holds at every step: a steady pod keeps running
            assert len(cluster.running("steady")) >= 1
            for machine in cluster.api.store.snapshots(MACHINES, "default"):
                annotations = machine["metadata"].get("annotations") or {}
                if DELETE_MACHINE_ANNOTATION in annotations:
                    marked[machine["metadata"]["name"]] = annotations[DELETE_MACHINE_ANNOTATION]
            return replicas(cluster, "small") == 1

        await cluster.run_until(machine_deleted, limit=600, what="scale-down")
        # the first node by name was drained: its steady pod evicted through the Eviction API
        # (the PDB allows 1), recreated by its ReplicaSet on the other node
        [victim] = marked
        assert marked[victim].endswith(" +0000 UTC")
        evicted = [
            e
            for e in cluster.events_with("ScaleDown")
            if e["message"] == "deleting pod for node scale down"
        ]
        assert len(evicted) == 1
        assert (
            cluster.metric(
                "cluster_autoscaler_evicted_pods_total", {"eviction_result": "succeeded"}
            )
            == 1
        )
        removed = cluster.events_with("ScaleDown")
        assert any(e["message"] == f"Scale-down: node {victim} removed with drain" for e in removed)
        assert any(e["message"] == "marked the node as toBeDeleted/unschedulable" for e in removed)
        await cluster.run_until(
            lambda: victim not in cluster.node_names(), limit=120, what="node gone"
        )
        await cluster.run_for(30)
        assert len(cluster.node_names()) == 1
        assert len(cluster.running("steady")) == 2
        assert {p["spec"]["nodeName"] for p in cluster.running("steady")} == set(
            cluster.node_names()
        )
        assert (
            cluster.metric(
                "cluster_autoscaler_scaled_down_nodes_total",
                {"reason": "underutilized", "gpu_resource_name": "", "gpu_name": ""},
            )
            == 1
        )
        hours, cost = cluster.node_hours_and_cost()
        # a node all along plus one for a part of the run: between 1 and 2 node × duration
        duration = cluster.t / 3600
        assert duration < hours < 2 * duration
        assert cost == sum(
            s / 3600 * cluster.groups.node_prices()[n] for n, s in cluster.node_seconds.items()
        )
        print(f"\nnode-hours {hours:.3f}, cost {cost:.4f} over {duration:.3f} h")


async def test_no_scale_down_while_the_pdb_forbids_it(tmp_path: Path) -> None:
    settings = replace(SETTINGS, scale_down_delay_after_add=timedelta(0))
    two = replace(SMALL, replicas=2)
    async with sim_cluster(
        tmp_path,
        machine_deployments=[two],
        settings=settings,
        objects=[
            app_deployment("steady", replicas=2, cpu="100m"),
            builders.pdbs.pdb(name="steady", match_labels={"app": "steady"}, min_available=2),
        ],
    ) as cluster:
        seen: set[tuple[str, str]] = set()
        for _ in range(42):  # 7 minutes
            await cluster.step()
            seen |= {(u.reason, u.detail) for u in cluster.loop.planner.unremovable.values()}
        # both nodes underutilized for long enough, but moving a pod would break minAvailable 2;
        # blocked nodes are re-checked after --unremovable-node-recheck-timeout (5m)
        assert replicas(cluster, "small") == 2
        assert seen == {("BlockedByPod", "NotEnoughPdb"), ("RecentlyUnremovable", "")}
        assert (
            cluster.metric(
                "cluster_autoscaler_evicted_pods_total", {"eviction_result": "succeeded"}
            )
            == 0
        )
