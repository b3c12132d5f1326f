"""Bad input on the simulated cluster: a malformed node group, a pod no template fits, a
scale-up that times out, machines that fail, a provider call that fails, an eviction a PDB
refuses — each with a clear event, and the loop goes on."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import yaml

from kubescale.controllers.autoscaler.cloudprovider.clusterapi_annotations import (
    MAX_SIZE_ANNOTATION,
    MIN_SIZE_ANNOTATION,
)
from kubescale.controllers.autoscaler.config.autoscaler_config import (
    AutoscalerSettings,
    NodeGroupDefaults,
)
from kubescale.controllers.autoscaler.model.node_facts import TO_BE_DELETED_TAINT
from kubescale.kube.resources import CONFIG_MAPS, MACHINE_DEPLOYMENTS, MACHINES, NODES
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
FAST = AutoscalerSettings(
    initial_node_group_backoff_duration=timedelta(minutes=2),
    node_defaults=NodeGroupDefaults(max_node_provision_time=timedelta(minutes=3)),
)


def replicas(cluster: SimCluster, name: str) -> int:
    md = cluster.api.store.peek(MACHINE_DEPLOYMENTS, name, "default")
    return -1 if md is None else int(md["spec"]["replicas"])


def messages(cluster: SimCluster, reason: str) -> list[str]:
    return [e["message"] for e in cluster.events_with(reason)]


def status_groups(cluster: SimCluster) -> dict[str, dict[str, object]]:
    status = cluster.api.store.peek(CONFIG_MAPS, "cluster-autoscaler-status", "kube-system")
    assert status is not None
    return {g["name"]: g for g in yaml.safe_load(status["data"]["status"]).get("nodeGroups", [])}


BROKEN = {
    "apiVersion": "cluster.x-k8s.io/v1beta1",
    "kind": "MachineDeployment",
    "metadata": {
        "name": "broken",
        "namespace": "default",
        "annotations": {MIN_SIZE_ANNOTATION: "two", MAX_SIZE_ANNOTATION: "5"},
    },
    "spec": {
        "clusterName": "sim",
        "replicas": 1,
        "selector": {"matchLabels": {"cluster.x-k8s.io/deployment-name": "broken"}},
        "template": {"metadata": {"labels": {}}, "spec": {}},
    },
}


async def test_a_malformed_node_group_is_reported_and_the_rest_works(tmp_path: Path) -> None:
    async with sim_cluster(
        tmp_path,
        machine_deployments=[SMALL],
        settings=FAST,
        objects=[BROKEN, app_deployment("burst", replicas=6, cpu="500m")],
    ) as cluster:
        await cluster.run_until(lambda: replicas(cluster, "small") == 2, limit=60, what="scale-up")
        events = list(cluster.events_with("InvalidNodeGroup"))
        assert len(events) == 1  # reported once, not every loop
        assert events[0]["involvedObject"]["name"] == "broken"
        assert events[0]["type"] == "Warning"
        assert events[0]["message"] == (
            "node group MachineDeployment/default/broken: annotation "
            f"{MIN_SIZE_ANNOTATION}='two' is not an integer"
        )
        assert list(status_groups(cluster)) == ["MachineDeployment/default/small"]


async def test_a_pod_no_template_fits(tmp_path: Path) -> None:
    large = replace(
        SMALL, name="large", template=template("l8", "8", "32Gi", 0.4), min_size=0, replicas=0
    )
    async with sim_cluster(
        tmp_path,
        machine_deployments=[SMALL, large],
        settings=FAST,
        objects=[app_deployment("huge", replicas=1, cpu="16")],
    ) as cluster:
        await cluster.run_for(30)
        # both templates reject it for cpu: "1 Insufficient cpu" per group
        assert set(messages(cluster, "NotTriggerScaleUp")) == {
            "pod didn't trigger scale-up: 2 Insufficient cpu"
        }
        assert (replicas(cluster, "small"), replicas(cluster, "large")) == (1, 0)


async def test_a_scale_up_that_times_out_backs_off(tmp_path: Path) -> None:
    # the cloud has no stock beyond the first machine: the new machine never comes up
    starved = replace(SMALL, stock=1)
    async with sim_cluster(
        tmp_path,
        machine_deployments=[starved],
        settings=FAST,
        objects=[app_deployment("burst", replicas=6, cpu="500m")],
    ) as cluster:
        await cluster.run_until(lambda: replicas(cluster, "small") == 2, limit=60, what="scale-up")
        # 3 minutes later (max-node-provision-time) the request times out: the target goes back
        await cluster.run_until(lambda: replicas(cluster, "small") == 1, limit=300, what="revert")
        [timed_out] = messages(cluster, "ScaleUpTimedOut")
        assert timed_out.startswith(
            "Nodes added to group MachineDeployment/default/small failed to register within 3m"
        )
        await cluster.run_for(20)
        group = status_groups(cluster)["MachineDeployment/default/small"]
        assert group["scaleUp"]["status"] == "Backoff"  # type: ignore[index]
        assert group["scaleUp"]["backoffInfo"]["errorCode"] == "timeout"  # type: ignore[index]
        # the pending pods are told why nothing happens
        assert "pod didn't trigger scale-up: 1 in backoff after failed scale-up" in messages(
            cluster, "NotTriggerScaleUp"
        )
        assert (
            cluster.metric("cluster_autoscaler_failed_scale_ups_total", {"reason": "timeout"}) == 1
        )
        # the pending machine was removed with the size (the newest machine goes first)
        assert len(cluster.api.store.list(MACHINES, namespace="default")) == 1


async def test_machines_that_fail_are_deleted_and_back_the_group_off(tmp_path: Path) -> None:
    failing = replace(SMALL, stock=1, out_of_stock="fail")
    async with sim_cluster(
        tmp_path,
        machine_deployments=[failing],
        settings=FAST,
        objects=[app_deployment("burst", replicas=6, cpu="500m")],
    ) as cluster:
        await cluster.run_until(
            lambda: bool(messages(cluster, "ScaleUpFailed")), limit=180, what="failure seen"
        )
        [failed] = messages(cluster, "ScaleUpFailed")
        assert failed == (
            "Failed adding 1 nodes to group MachineDeployment/default/small due to "
            "99.ProvisioningFailed; source errors: Machine provisioning failed"
        )
        await cluster.run_for(60)
        # the failed machine was deleted (delete-machine + size − 1), the group is backed off
        assert replicas(cluster, "small") == 1
        assert len(cluster.api.store.list(MACHINES, namespace="default")) == 1
        group = status_groups(cluster)["MachineDeployment/default/small"]
        assert group["scaleUp"]["status"] == "Backoff"  # type: ignore[index]


async def test_a_failing_provider_call_is_an_event_and_the_loop_goes_on(tmp_path: Path) -> None:
    async with sim_cluster(
        tmp_path,
        machine_deployments=[SMALL],
        settings=FAST,
        objects=[app_deployment("burst", replicas=6, cpu="500m")],
    ) as cluster:
        cluster.api.faults.add(
            verb="patch", resource="machinedeployments/scale", status=500, count=None
        )
        await cluster.run_for(30)
        failures = messages(cluster, "FailedToScaleUpGroup")
        assert failures
        assert failures[0].startswith("Scale-up failed for group MachineDeployment/default/small: ")
        assert replicas(cluster, "small") == 1
        iterations = cluster.loop.iterations
        cluster.api.faults.clear()
        # after the 2-minute backoff the same scale-up goes through
        await cluster.run_until(lambda: replicas(cluster, "small") == 2, limit=240, what="retry")
        assert cluster.loop.iterations > iterations
        assert (
            cluster.metric(
                "cluster_autoscaler_failed_scale_ups_total", {"reason": "cloudProviderError"}
            )
            == 1
        )


async def test_a_drain_the_pdb_refuses_is_aborted(tmp_path: Path) -> None:
    async with sim_cluster(
        tmp_path,
        machine_deployments=[replace(SMALL, replicas=2)],
        settings=FAST,
        objects=[
            app_deployment("solo", replicas=1, cpu="100m"),
            builders.pdbs.pdb(name="solo", match_labels={"app": "solo"}, min_available=1),
        ],
    ) as cluster:
        await cluster.run_for(30)
        [solo] = cluster.running("solo")
        node_name = solo["spec"]["nodeName"]
        node = cluster.loop.nodes.lister.get(node_name)  # the loop's cache, typed Node
        assert node is not None
        # drain it by hand: the Eviction API answers 429 (0 disruptions allowed) every time
        await cluster.loop.actuator.start(
            [(node, "MachineDeployment/default/small")],
            drain=True,
            reason="underutilized",
            now=cluster.now,
        )
        tainted = cluster.api.store.peek(NODES, node_name)
        assert tainted is not None
        assert tainted["spec"]["unschedulable"] is True
        assert any(t["key"] == TO_BE_DELETED_TAINT for t in tainted["spec"]["taints"])
        await cluster.run_until(
            lambda: bool(messages(cluster, "ScaleDownFailed")), limit=240, what="drain aborted"
        )
        assert messages(cluster, "ScaleDownFailed") == [
            "failed to drain the node, aborting ScaleDown"
        ]
        restored = cluster.api.store.peek(NODES, node_name)
        assert restored is not None
        assert not restored["spec"].get("unschedulable")
        assert not any(
            t["key"] == TO_BE_DELETED_TAINT for t in restored["spec"].get("taints") or []
        )
        assert cluster.running("solo")[0]["metadata"]["name"] == solo["metadata"]["name"]
        assert (
            cluster.metric("cluster_autoscaler_evicted_pods_total", {"eviction_result": "failed"})
            > 0
        )
        assert cluster.loop.actuator.last_failure is not None
