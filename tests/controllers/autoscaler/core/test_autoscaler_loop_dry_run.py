"""``--dry-run`` for the cluster autoscaler, through the real client against the in-process API
server: the loop decides as usual, the one executor prints each intent
(``dry-run cluster-autoscaler: …``, :func:`kubescale.plans.intents.describe`) and not one
write request reaches the server.

Scale-up (``test_autoscaler_e2e``'s first case): MachineDeployment ``small`` (2 cpu nodes, 1 of
5) runs 4 of ``burst``'s 6 × 500m pods; 2 pend. least-waste prefers ``small`` (waste
(2−1)/2 + (8−0.5)/8 = 1.4375) to ``large`` ((8−1)/8 + (32−0.5)/32 = 1.859): one node,
``small`` 1 → 2.

Scale-down: ``small`` at 2 of min 1, no workload: both nodes are empty and unneeded; after
``--scale-down-unneeded-time`` (2 min here) the first by name goes (one node: the group may lose
1 above its min of 1): the ``ToBeDeleted`` taint, then — ``--node-delete-delay-after-taint``
(5 s) later, at the next loop — its deletion through the provider (Cluster API: the Machine's
``delete-machine`` annotation and ``/scale`` to 1), printed as ``delete-nodes``.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from kubescale.controllers.autoscaler.config.autoscaler_config import (
    AutoscalerSettings,
    NodeGroupDefaults,
)
from kubescale.kube.resources import CONFIG_MAPS, MACHINE_DEPLOYMENTS, MACHINES, NODES
from kubescale.plans.executor import DRY_RUN_PREFIX
from kubescale.sim.apiserver.faults import WRITE_VERBS
from kubescale.sim.cluster.node_groups import MachineDeploymentGroup
from tests.controllers.autoscaler.sim_harness import (
    SimCluster,
    app_deployment,
    sim_cluster,
    template,
)

ACTOR = f"{DRY_RUN_PREFIX}cluster-autoscaler"
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
    dry_run=True,
    scale_down_delay_after_add=timedelta(0),
    node_defaults=NodeGroupDefaults(scale_down_unneeded_time=timedelta(minutes=2)),
)


def replicas(cluster: SimCluster, name: str) -> int:
    md = cluster.api.store.peek(MACHINE_DEPLOYMENTS, name, "default")
    assert md is not None
    return int(md["spec"]["replicas"])


async def prepare(cluster: SimCluster, steps: int) -> None:
    """The cluster's own actors (workload controllers, scheduler, kubelet) for ``steps`` steps
    without the autoscaler, so that its first loop sees the pods bound or pending."""
    for _ in range(steps):
        for actor in cluster.actors:
            await actor.step(cluster.now)
        await cluster.clock.advance(cluster.step_seconds)


async def loops(cluster: SimCluster, count: int) -> None:
    """``count`` autoscaler loops (and nothing else: no actor writes meanwhile), 10 s apart."""
    for _ in range(count):
        await cluster.settle()
        await cluster.loop.run_once(cluster.now)
        await cluster.events.flush()
        await cluster.clock.advance(cluster.step_seconds)


def writes(cluster: SimCluster) -> dict[str, int]:
    return {
        f"{r.verb} {r.resource}": n
        for r, n in cluster.api.requests.counts().items()
        if r.verb in WRITE_VERBS
    }


def printed(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "kubescale.plans"]


async def test_scale_up_is_printed_and_nothing_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with sim_cluster(
        tmp_path,
        machine_deployments=[SMALL, LARGE],
        settings=SETTINGS,
        objects=[app_deployment("burst", replicas=6, cpu="500m")],
    ) as cluster:
        await prepare(cluster, 3)
        caplog.set_level(logging.INFO, logger="kubescale.plans")
        caplog.clear()
        cluster.api.requests.clear()
        await loops(cluster, 2)
        assert writes(cluster) == {}
        assert replicas(cluster, "small") == 1
        assert (
            cluster.api.store.peek(CONFIG_MAPS, "cluster-autoscaler-status", "kube-system") is None
        )
        lines = printed(caplog)
        status = f"{ACTOR}: write-configmap configmaps kube-system/cluster-autoscaler-status "
        on_status = f"{ACTOR}: event ConfigMap kube-system/cluster-autoscaler-status"
        small = "MachineDeployment/default/small"
        # the first loop: the status ConfigMap starts as Initializing, then the scale-up
        assert lines[0].startswith(status + '{"status":"autoscalerStatus: Initializing\\n')
        assert lines[1:4] == [
            f'{on_status} Normal ScaledUpGroup "Scale-up: setting group {small} size to 2 '
            'instead of 1 (max: 5)"',
            f"{ACTOR}: increase-size node-group {small} delta=+1",
            f'{on_status} Normal ScaledUpGroup "Scale-up: group {small} size set to 2 '
            'instead of 1 (max: 5)"',
        ]
        triggered = [line for line in lines if " TriggeredScaleUp " in line]
        assert len(triggered) == 4
        assert all(
            line.startswith(f"{ACTOR}: event Pod default/burst-")
            and line.endswith(f'"pod triggered scale-up: [{{{small} 1->2 (max: 5)}}]"')
            for line in triggered
        )
        # every loop ends with the status ConfigMap; nothing was written, so the second loop
        # sees the same world (``small`` still at 1, 2 pods pending) and prints the same plan
        assert lines[4:6] == triggered[:2]
        assert lines[6].startswith(status + '{"status":"autoscalerStatus: Running\\n')
        assert lines[7:12] == lines[1:6]
        assert lines[12].startswith(status + '{"status":"autoscalerStatus: Running\\n')
        assert len(lines) == 13
        sample = cluster.registry.get_sample_value(
            "kubescale_plan_intents_total",
            {"actor": "cluster-autoscaler", "intent": "ResizeNodeGroup", "outcome": "dry-run"},
        )
        assert sample == 2


async def test_scale_down_taint_and_deletion_are_printed_and_nothing_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with sim_cluster(
        tmp_path, machine_deployments=[replace(SMALL, replicas=2)], settings=SETTINGS
    ) as cluster:
        await prepare(cluster, 9)  # the two machines come up (60 s) and their nodes register
        nodes = sorted(n["metadata"]["name"] for n in cluster.api.store.snapshots(NODES))
        assert len(nodes) == 2
        machines = cluster.api.store.snapshots(MACHINES, "default")
        caplog.set_level(logging.INFO, logger="kubescale.plans")
        caplog.clear()
        cluster.api.requests.clear()
        await loops(cluster, 15)  # 150 s: unneeded for 2 min, then tainted, then deleted
        assert writes(cluster) == {}
        assert replicas(cluster, "small") == 2
        assert cluster.api.store.snapshots(MACHINES, "default") == machines
        for node in cluster.api.store.snapshots(NODES):
            assert not (node.get("spec") or {}).get("taints")
        lines = [line for line in printed(caplog) if " write-configmap " not in line]
        first = nodes[0]
        # the DeletionCandidate soft taints: nothing was written, so every loop finds both
        # unneeded nodes untainted and prints their taints again (value: the loop's time)
        soft = [line for line in lines if " DeletionCandidateOfClusterAutoscaler=" in line]
        started = int(cluster.now.timestamp()) - 15 * 10  # the first of the 15 loops
        assert soft[:4] == [
            f"{ACTOR}: taint nodes {name} DeletionCandidateOfClusterAutoscaler={t}:PreferNoSchedule"
            for t in (started, started + 10)
            for name in nodes
        ]
        # unneeded since the first loop; removable once since + 2 min is *before* the loop's
        # time (upstream's planner: NotUnneededLongEnough while !since.Add(unneededTime)
        # .Before(now)): not at +120 s, at the next loop, +130 s
        hard_at = started + 130
        assert [line for line in lines if line not in soft] == [
            f"{ACTOR}: taint nodes {first} ToBeDeletedByClusterAutoscaler={hard_at}:NoSchedule "
            "cordon",  # --cordon-node-before-terminating
            f'{ACTOR}: event Node {first} Normal ScaleDown "marked the node as '
            'toBeDeleted/unschedulable"',
            f"{ACTOR}: event ConfigMap kube-system/cluster-autoscaler-status Normal "
            f'ScaleDownEmpty "Scale-down: removing empty node \\"{first}\\""',
            # --node-delete-delay-after-taint (5 s) has passed at the next loop
            f'{ACTOR}: delete-nodes node-group MachineDeployment/default/small ["{first}"]',
            f"{ACTOR}: event ConfigMap kube-system/cluster-autoscaler-status Normal "
            f'ScaleDownEmpty "Scale-down: empty node {first} removed"',
        ]


async def test_first_loop_clean_up_and_min_size_are_printed_and_nothing_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The rest of ``RunOnce`` in the same one plan: the first loop's ``cleanUpIfRequired``
    (a ``ToBeDeleted`` taint an earlier run left on ``small``'s node) and
    ``--enforce-node-group-min-size`` (``small`` at 1 of min 2: + (2 − 1) = +1), between the
    status ConfigMap's ``Initializing`` and its ``Running``. Nothing is written, so the second
    loop prints the min-size resize again (the taint clean-up is the first loop's only)."""
    settings = replace(SETTINGS, enforce_node_group_min_size=True)
    async with sim_cluster(
        tmp_path, machine_deployments=[replace(SMALL, min_size=2)], settings=settings
    ) as cluster:
        await prepare(cluster, 9)  # the machine comes up (60 s) and its node registers
        (registered,) = cluster.api.store.snapshots(NODES)
        name = registered["metadata"]["name"]
        left = {"key": "ToBeDeletedByClusterAutoscaler", "value": "1", "effect": "NoSchedule"}
        spec = {**registered["spec"], "taints": [left]}
        cluster.api.store.update({**registered, "spec": spec})
        caplog.set_level(logging.INFO, logger="kubescale.plans")
        caplog.clear()
        cluster.api.requests.clear()
        await loops(cluster, 2)
        assert writes(cluster) == {}
        assert replicas(cluster, "small") == 1
        lines = printed(caplog)
        status = f"{ACTOR}: write-configmap configmaps kube-system/cluster-autoscaler-status "
        min_size = f"{ACTOR}: increase-size node-group MachineDeployment/default/small delta=+1"
        assert lines[0].startswith(status + '{"status":"autoscalerStatus: Initializing\\n')
        assert lines[1:3] == [
            f"{ACTOR}: untaint nodes {name} ToBeDeletedByClusterAutoscaler uncordon",
            min_size,
        ]
        assert lines[3].startswith(status + '{"status":"autoscalerStatus: Running\\n')
        assert lines[4] == min_size
        assert lines[5].startswith(status + '{"status":"autoscalerStatus: Running\\n')
        assert len(lines) == 6
