"""Node groups: static nodes, and Cluster API groups driven the way cluster-autoscaler does.

The autoscaler's side is played over REST with the access layer's client, as its clusterapi
provider acts (reference §4.1): read and set ``spec.replicas`` through the MachineDeployment's
``/scale``, and before scaling down annotate the chosen Machine with
``cluster.x-k8s.io/delete-machine``. The simulated cluster must answer with Machines, then Nodes
after the provisioning delay (``spec.providerID`` = the Machine's, the group's labels, taints and
allocatable, Ready), and on scale-down remove the annotated Machine first, with its Node.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kubescale.base.clock import VirtualClock
from kubescale.kube.client import KubeClient, connect
from kubescale.kube.resources import MACHINE_DEPLOYMENTS, MACHINE_SETS, MACHINES, NODES, PODS
from kubescale.sim.apiserver.server import ApiServer
from kubescale.sim.cluster.machine_controllers import DELETE_MACHINE_ANNOTATION
from kubescale.sim.cluster.node_groups import (
    MachineDeploymentGroup,
    NodeGroups,
    NodeTemplate,
    StaticNodeGroup,
)
from kubescale.sim.cluster.scheduler import Scheduler

BATCH_TAINT = {"key": "dedicated", "value": "batch", "effect": "NoSchedule"}
WORKERS = MachineDeploymentGroup(
    name="workers",
    template=NodeTemplate(
        instance_type="m5.xlarge",
        cpu="4",
        memory="16Gi",
        allocatable_cpu="3800m",
        allocatable_memory="15Gi",
        pods=58,
        labels={"pool": "workers"},
        taints=(BATCH_TAINT,),
        zones=("eu-1a", "eu-1b"),
        price_per_hour=0.192,
    ),
    min_size=1,
    max_size=5,
    replicas=1,
    provisioning_delay=120,
    deprovisioning_delay=30,
)


@dataclass
class Env:
    api: ApiServer
    clock: VirtualClock
    groups: NodeGroups
    kube: KubeClient

    async def step(self, seconds: float = 0) -> None:
        if seconds:
            await self.clock.advance(seconds)
        await self.groups.step(self.clock.now())

    @property
    def t(self) -> float:
        return self.clock.elapsed

    def machines(self) -> list[dict[str, Any]]:
        return self.api.store.list(MACHINES, namespace="default")

    def node_names(self) -> list[str]:
        return [n["metadata"]["name"] for n in self.api.store.list(NODES)]

    def events(self) -> list[tuple[float, str, str]]:
        return [(e.time, e.kind, e.subject) for e in self.groups.events()]


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    clock = VirtualClock()
    async with ApiServer(clock=clock, crd_dirs=[], seed=3) as api:
        groups = NodeGroups(
            api, start=clock.now(), machine_deployments=[WORKERS], rng=random.Random(3)
        )
        api.write_kubeconfig(tmp_path / "kubeconfig")
        async with await connect(kubeconfig=tmp_path / "kubeconfig", clock=clock) as kube:
            yield Env(api=api, clock=clock, groups=groups, kube=kube)


async def test_static_nodes_are_registered_ready_on_the_first_step() -> None:
    clock = VirtualClock()
    api = ApiServer(clock=clock, crd_dirs=[])
    template = NodeTemplate(
        instance_type="c5.large",
        cpu="2",
        memory="4Gi",
        labels={"pool": "fixed"},
        zones=("a", "b"),
        price_per_hour=0.085,
    )
    groups = NodeGroups(
        api, start=clock.now(), static=[StaticNodeGroup(name="fixed", count=3, template=template)]
    )
    await groups.step(clock.now())
    nodes = api.store.list(NODES)
    assert [n["metadata"]["name"] for n in nodes] == ["fixed-0", "fixed-1", "fixed-2"]
    assert [n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in nodes] == [
        "a",
        "b",
        "a",
    ]
    first = nodes[0]
    assert first["metadata"]["labels"] == {
        "pool": "fixed",
        "kubernetes.io/hostname": "fixed-0",
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": "c5.large",
        "topology.kubernetes.io/zone": "a",
    }
    assert first["spec"] == {"providerID": "sim://fixed-0"}
    assert first["status"]["allocatable"] == {"cpu": "2", "memory": "4Gi", "pods": "110"}
    ready = [c for c in first["status"]["conditions"] if c["type"] == "Ready"]
    assert ready[0]["status"] == "True"
    assert [(e.time, e.kind, e.subject) for e in groups.events()] == [
        (0.0, "node-added", "fixed-0"),
        (0.0, "node-added", "fixed-1"),
        (0.0, "node-added", "fixed-2"),
    ]
    assert groups.node_prices() == {"fixed-0": 0.085, "fixed-1": 0.085, "fixed-2": 0.085}
    assert groups.group_of("fixed-2") == "fixed"
    await groups.step(clock.now())
    assert groups.events() == []


async def test_a_machine_deployment_is_a_node_group_the_autoscaler_can_read(env: Env) -> None:
    await env.step()
    md = env.api.store.get(MACHINE_DEPLOYMENTS, "workers", "default")
    annotations = md["metadata"]["annotations"]
    assert annotations["cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"] == "1"
    assert annotations["cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"] == "5"
    prefix = "capacity.cluster-autoscaler.kubernetes.io/"
    assert annotations[prefix + "cpu"] == "3800m"
    assert annotations[prefix + "memory"] == "15Gi"
    assert annotations[prefix + "maxPods"] == "58"
    assert (
        annotations[prefix + "labels"] == "node.kubernetes.io/instance-type=m5.xlarge,pool=workers"
    )
    assert annotations[prefix + "taints"] == "dedicated=batch:NoSchedule"
    (machine_set,) = env.api.store.list(MACHINE_SETS, namespace="default")
    assert machine_set["metadata"]["ownerReferences"][0]["name"] == "workers"
    assert machine_set["metadata"]["ownerReferences"][0]["controller"] is True
    (machine,) = env.machines()
    assert machine["metadata"]["ownerReferences"][0]["kind"] == "MachineSet"
    assert machine["metadata"]["finalizers"] == ["machine.cluster.x-k8s.io"]
    # the group's first machines are up when the run starts
    name = machine["metadata"]["name"]
    assert machine["spec"]["providerID"] == f"sim://{name}"
    assert machine["status"]["phase"] == "Running"
    assert machine["status"]["nodeRef"]["name"] == name
    assert env.node_names() == [name]
    assert env.events() == [(0.0, "node-added", name)]
    scale = await env.kube.get_scale(MACHINE_DEPLOYMENTS, "workers", namespace="default")
    assert scale["spec"]["replicas"] == 1
    assert scale["status"] == {
        "replicas": 1,
        "selector": "cluster.x-k8s.io/cluster-name=sim,cluster.x-k8s.io/deployment-name=workers",
    }


async def test_scale_up_adds_nodes_after_the_provisioning_delay(env: Env) -> None:
    await env.step()
    await env.kube.scale(MACHINE_DEPLOYMENTS, "workers", namespace="default", replicas=3)
    await env.step(60)
    assert len(env.machines()) == 3
    phases = sorted(m["status"]["phase"] for m in env.machines())
    assert phases == ["Provisioning", "Provisioning", "Running"]
    assert len(env.node_names()) == 1
    assert env.api.store.get(MACHINE_DEPLOYMENTS, "workers", "default")["status"]["phase"] == (
        "ScalingUp"
    )
    await env.step(60)
    assert len(env.node_names()) == 1  # 120 s after the scale-up is the next step
    assert env.events() == []
    await env.step(60)
    new = [m for m in env.machines() if m["status"]["phase"] == "Provisioned"]
    assert len(new) == 2
    added = sorted(m["metadata"]["name"] for m in new)
    assert sorted(subject for _, _, subject in env.events()) == added
    assert {kind for _, kind, _ in env.events()} == {"node-added"}
    node = env.api.store.get(NODES, added[0])
    assert node["spec"]["providerID"] == f"sim://{added[0]}"
    assert node["spec"]["taints"] == [BATCH_TAINT]
    assert node["metadata"]["labels"]["pool"] == "workers"
    assert node["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "m5.xlarge"
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == added[0]
    assert node["status"]["allocatable"] == {"cpu": "3800m", "memory": "15Gi", "pods": "58"}
    assert node["status"]["capacity"] == {"cpu": "4", "memory": "16Gi", "pods": "58"}
    assert [c["status"] for c in node["status"]["conditions"] if c["type"] == "Ready"] == ["True"]
    assert node["metadata"]["annotations"]["cluster.x-k8s.io/machine"] == added[0]
    zones = sorted(
        env.api.store.get(NODES, n)["metadata"]["labels"]["topology.kubernetes.io/zone"]
        for n in env.node_names()
    )
    assert zones == ["eu-1a", "eu-1a", "eu-1b"]
    await env.step(60)
    assert {m["status"]["phase"] for m in env.machines()} == {"Running"}
    status = env.api.store.get(MACHINE_DEPLOYMENTS, "workers", "default")["status"]
    assert (status["replicas"], status["readyReplicas"], status["phase"]) == (3, 3, "Running")
    assert set(env.groups.node_prices()) == set(env.node_names())


async def test_scale_down_removes_the_annotated_machine_and_its_node(env: Env) -> None:
    await env.step()
    await env.kube.scale(MACHINE_DEPLOYMENTS, "workers", namespace="default", replicas=3)
    for _ in range(4):
        await env.step(60)
    names = sorted(m["metadata"]["name"] for m in env.machines())
    victim = names[1]
    scheduler = Scheduler(env.api)
    tolerant = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "batch-0", "namespace": "default"},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": victim},
            "tolerations": [{"key": "dedicated", "operator": "Exists"}],
            "containers": [{"name": "c", "image": "x"}],
        },
    }
    env.api.store.create(tolerant)
    await scheduler.step(env.clock.now())
    assert env.api.store.get(PODS, "batch-0", "default")["spec"]["nodeName"] == victim

    # what cluster-autoscaler's clusterapi DeleteNodes does: annotate, then scale down
    await env.kube.patch(
        MACHINES,
        victim,
        {"metadata": {"annotations": {DELETE_MACHINE_ANNOTATION: "2026-01-01T00:04:00Z"}}},
        namespace="default",
    )
    await env.kube.scale(MACHINE_DEPLOYMENTS, "workers", namespace="default", replicas=2)
    await env.step(10)
    machine = env.api.store.get(MACHINES, victim, "default")
    assert machine["metadata"]["deletionTimestamp"]
    assert machine["status"]["phase"] == "Deleting"
    assert env.api.store.get(NODES, victim)["spec"]["unschedulable"] is True
    assert env.events() == []
    await env.step(20)
    assert victim in env.node_names()  # 20 s into the 30 s deprovisioning delay
    await env.step(10)
    assert env.events() == [(env.t, "node-removed", victim)]
    assert victim not in env.node_names()
    assert victim not in [m["metadata"]["name"] for m in env.machines()]
    assert env.api.store.list(PODS) == []
    assert sorted(m["metadata"]["name"] for m in env.machines()) == [names[0], names[2]]
    assert victim in env.groups.node_prices()  # the removed node's cost still counts


async def test_scale_down_without_an_annotation_removes_the_newest(env: Env) -> None:
    await env.step()
    first = env.machines()[0]["metadata"]["name"]
    await env.kube.scale(MACHINE_DEPLOYMENTS, "workers", namespace="default", replicas=2)
    await env.step(60)
    await env.kube.scale(MACHINE_DEPLOYMENTS, "workers", namespace="default", replicas=1)
    await env.step(60)
    # the newest machine was still provisioning: it goes at once, with no node to remove
    assert [m["metadata"]["name"] for m in env.machines()] == [first]
    assert env.node_names() == [first]
    assert env.events() == []


async def test_a_group_starting_empty_waits_the_delay_for_its_first_node() -> None:
    clock = VirtualClock()
    api = ApiServer(clock=clock, crd_dirs=[])
    empty = MachineDeploymentGroup(
        name="spot", template=WORKERS.template, min_size=0, max_size=3, replicas=0
    )
    groups = NodeGroups(api, start=clock.now(), machine_deployments=[empty])
    await groups.step(clock.now())
    assert api.store.list(MACHINES) == []
    md = api.store.get(MACHINE_DEPLOYMENTS, "spot", "default")
    md["spec"]["replicas"] = 1
    api.store.update(md)
    await clock.advance(60)
    await groups.step(clock.now())
    assert api.store.list(NODES) == []
    await clock.advance(120)
    await groups.step(clock.now())
    assert [(e.time, e.kind) for e in groups.events()] == [(180.0, "node-added")]
