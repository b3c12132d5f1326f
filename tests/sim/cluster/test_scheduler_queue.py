"""The simulated scheduler's queue and writes: binding order, the Unschedulable condition.

Upstream facts: PrioritySort orders by priority (highest first) then by the time the pod was
queued; the binding sets ``spec.nodeName`` and ``PodScheduled=True``; a pod that fits nowhere
gets ``PodScheduled=False``/``Unschedulable`` with the FitError message, written again only when
it changes; ``preemptionPolicy: Never`` pods are "not eligible" for preemption.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from kubescale.base.clock import VirtualClock
from kubescale.kube.client import connect
from kubescale.kube.resources import NODES, PODS, PRIORITY_CLASSES
from kubescale.sim.apiserver.server import ApiServer
from kubescale.sim.cluster.scheduler import Scheduler
from tests import builders

POD = functools.partial(
    builders.pods.pod,
    containers=[builders.pods.container(image="nginx", requests={"cpu": "1"})],
)

ONE_CPU_NODE_FULL = (
    "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: "
    "1 No preemption victims found for incoming pod."
)


node = functools.partial(builders.nodes.sim_node, instance_type="small", cpu="1", memory="4Gi")
"""A simulated ``small`` node: 1 CPU, 4Gi."""


def where(api: ApiServer, name: str) -> str | None:
    node_name = api.store.get(PODS, name, "default")["spec"].get("nodeName")
    return str(node_name) if node_name else None


def scheduled_condition(api: ApiServer, name: str) -> dict[str, Any]:
    conditions = api.store.get(PODS, name, "default")["status"].get("conditions") or []
    (condition,) = [c for c in conditions if c["type"] == "PodScheduled"]
    return dict(condition)


async def test_higher_priority_binds_first_even_if_younger() -> None:
    clock = VirtualClock()
    api = ApiServer(clock=clock, crd_dirs=[])
    api.store.create(node(name="n1"))
    api.store.create(POD(name="old-low", spec={"priority": 0}))
    await clock.advance(10)
    api.store.create(POD(name="new-high", spec={"priority": 1000}))
    await Scheduler(api).step(clock.now())
    assert where(api, "new-high") == "n1"
    assert where(api, "old-low") is None
    assert scheduled_condition(api, "old-low")["message"] == ONE_CPU_NODE_FULL


async def test_equal_priority_binds_the_older_pod_first() -> None:
    clock = VirtualClock()
    api = ApiServer(clock=clock, crd_dirs=[])
    api.store.create(node(name="n1"))
    api.store.create(POD(name="b-older"))
    await clock.advance(10)
    api.store.create(POD(name="a-younger"))
    await Scheduler(api).step(clock.now())
    assert (where(api, "b-older"), where(api, "a-younger")) == ("n1", None)


async def test_priority_class_names_and_the_global_default_resolve_to_values() -> None:
    clock = VirtualClock()
    api = ApiServer(clock=clock, crd_dirs=[])
    for name, value, default in (("critical", 1000, False), ("normal", 10, True)):
        api.store.create(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
                "globalDefault": default,
            }
        )
    assert len(api.store.list(PRIORITY_CLASSES)) == 2
    api.store.create(node(name="n1", cpu="2"))
    api.store.create(POD(name="first-no-class"))  # the global default: 10
    await clock.advance(1)
    api.store.create(POD(name="second-critical", spec={"priorityClassName": "critical"}))
    await clock.advance(1)
    api.store.create(POD(name="third-explicit", spec={"priority": -5}))
    await Scheduler(api).step(clock.now())
    assert where(api, "second-critical") == "n1"
    assert where(api, "first-no-class") == "n1"
    assert where(api, "third-explicit") is None


async def test_unschedulable_condition_written_once_then_replaced_by_the_binding() -> None:
    clock = VirtualClock()
    api = ApiServer(clock=clock, crd_dirs=[])
    scheduler = Scheduler(api)
    api.store.create(node(name="n1"))
    api.store.create(POD(name="hog"))
    await scheduler.step(clock.now())
    api.store.create(POD(name="waiting"))
    await scheduler.step(clock.now())
    condition = scheduled_condition(api, "waiting")
    assert condition == {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": ONE_CPU_NODE_FULL,
        "lastProbeTime": None,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    version = api.store.resource_version
    await clock.advance(60)
    await scheduler.step(clock.now())
    assert api.store.resource_version == version  # same verdict: nothing written

    api.store.create(
        node(name="n0-tainted", taints=({"key": "k", "value": "v", "effect": "NoSchedule"},))
    )
    await scheduler.step(clock.now())
    assert scheduled_condition(api, "waiting")["message"] == (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {k: v}. "
        "preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, "
        "1 Preemption is not helpful for scheduling."
    )

    await clock.advance(60)
    api.store.create(node(name="n2"))
    await scheduler.step(clock.now())
    assert where(api, "waiting") == "n2"
    assert scheduled_condition(api, "waiting") == {
        "type": "PodScheduled",
        "status": "True",
        "lastProbeTime": None,
        "lastTransitionTime": "2026-01-01T00:02:00Z",
    }
    assert scheduler.bound_total == 2


async def test_preemption_policy_never_is_not_eligible() -> None:
    clock = VirtualClock()
    api = ApiServer(clock=clock, crd_dirs=[])
    api.store.create(node(name="n1"))
    api.store.create(
        POD(
            name="big",
            containers=[builders.pods.container(image="nginx", requests={"cpu": "2"})],
            spec={"preemptionPolicy": "Never"},
        )
    )
    await Scheduler(api).step(clock.now())
    assert scheduled_condition(api, "big")["message"] == (
        "0/1 nodes are available: 1 Insufficient cpu. "
        "preemption: not eligible due to preemptionPolicy=Never."
    )


async def test_pods_of_other_schedulers_gated_or_deleting_are_left_alone() -> None:
    clock = VirtualClock()
    api = ApiServer(clock=clock, crd_dirs=[])
    api.store.create(node(name="n1", cpu="8"))
    api.store.create(POD(name="other", spec={"schedulerName": "my-scheduler"}))
    api.store.create(POD(name="gated", spec={"schedulingGates": [{"name": "example.com/wait"}]}))
    api.store.create(POD(name="mine"))
    await Scheduler(api).step(clock.now())
    assert (where(api, "other"), where(api, "gated"), where(api, "mine")) == (None, None, "n1")
    assert not api.store.get(PODS, "other", "default")["status"].get("conditions")
    named = Scheduler(api, scheduler_name="my-scheduler")
    await named.step(clock.now())
    assert where(api, "other") == "n1"


async def test_bindings_are_what_api_clients_read(tmp_path: Path) -> None:
    clock = VirtualClock()
    async with ApiServer(clock=clock, crd_dirs=[]) as api:
        api.write_kubeconfig(tmp_path / "kubeconfig")
        async with await connect(kubeconfig=tmp_path / "kubeconfig", clock=clock) as kube:
            await kube.create(NODES, node(name="n1", cpu="2"))
            await kube.create(PODS, POD(name="web"), namespace="default")
            await Scheduler(api).step(clock.now())
            read = await kube.get(PODS, "web", namespace="default")
    assert read["spec"]["nodeName"] == "n1"
    assert read["status"]["conditions"][0]["type"] == "PodScheduled"
    assert read["status"]["conditions"][0]["status"] == "True"
