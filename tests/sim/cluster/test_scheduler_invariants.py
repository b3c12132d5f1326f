"""Properties of one scheduling pass over random nodes and pods (hypothesis).

Whatever the mix: no node ends up with more requested cpu, memory or pods than it allocates;
every pod left unbound carries ``PodScheduled=False``/``Unschedulable`` whose FitError counts one
verdict per node; such a pod really fits no node once the pass is over (binding only ever takes
room away, so what did not fit in its turn cannot fit later); and the same input gives the same
placement.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any, cast

from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.base.clock import VirtualClock
from kubescale.kube.resources import NODES, PODS
from kubescale.objects.node import Node
from kubescale.objects.pod import Pod
from kubescale.scheduling.filters import first_untolerated_taint
from kubescale.scheduling.pod_resources import node_allocatable, pod_requests
from kubescale.sim.apiserver.server import ApiServer
from kubescale.sim.cluster.node_templates import NodeTemplate, build_node
from kubescale.sim.cluster.scheduler import Scheduler

TAINT = {"key": "dedicated", "value": "x", "effect": "NoSchedule"}
TOLERATION = {"key": "dedicated", "operator": "Exists"}

nodes_strategy = st.lists(
    st.tuples(
        st.integers(min_value=500, max_value=4000),  # millicores
        st.integers(min_value=512, max_value=8192),  # MiB
        st.integers(min_value=1, max_value=5),  # pods
        st.booleans(),  # tainted
    ),
    min_size=1,
    max_size=4,
)
pods_strategy = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=3000),
        st.integers(min_value=0, max_value=4096),
        st.booleans(),  # tolerates the taint
        st.integers(min_value=0, max_value=2),  # priority
    ),
    max_size=12,
)


def build(
    nodes: list[tuple[int, int, int, bool]], pods: list[tuple[int, int, bool, int]]
) -> ApiServer:
    clock = VirtualClock()
    api = ApiServer(clock=clock, crd_dirs=[])
    for index, (cpu, memory, count, tainted) in enumerate(nodes):
        template = NodeTemplate(
            instance_type="t",
            cpu=f"{cpu}m",
            memory=f"{memory}Mi",
            pods=count,
            taints=(TAINT,) if tainted else (),
        )
        api.store.create(
            build_node(
                name=f"n{index}",
                template=template,
                zone="z",
                provider_id=f"sim://n{index}",
                address="10.0.0.1",
                ready_since="2026-01-01T00:00:00Z",
            )
        )
    for index, (cpu, memory, tolerant, priority) in enumerate(pods):
        requests = {}
        if cpu:
            requests["cpu"] = f"{cpu}m"
        if memory:
            requests["memory"] = f"{memory}Mi"
        spec: dict[str, Any] = {
            "priority": priority,
            "containers": [{"name": "c", "image": "x", "resources": {"requests": requests}}],
        }
        if tolerant:
            spec["tolerations"] = [TOLERATION]
        api.store.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"p{index}", "namespace": "default"},
                "spec": spec,
            }
        )
    asyncio.run(Scheduler(api).step(clock.now()))
    return api


def placement(api: ApiServer) -> dict[str, str | None]:
    return {p["metadata"]["name"]: p["spec"].get("nodeName") for p in api.store.list(PODS)}


def fits(pod: Pod, node: Node, placed: list[Pod]) -> bool:
    if first_untolerated_taint(
        node["spec"].get("taints") or [], pod["spec"].get("tolerations") or []
    ):
        return False
    offered = node_allocatable(node)
    if len(placed) + 1 > offered["pods"]:
        return False
    wanted = pod_requests(pod)
    for resource in ("cpu", "memory"):
        used = sum(pod_requests(p).get(resource, 0) for p in placed)
        if wanted.get(resource, 0) and wanted.get(resource, 0) > offered[resource] - used:
            return False
    return True


@settings(max_examples=60, deadline=None)
@given(nodes=nodes_strategy, pods=pods_strategy)
def test_one_pass_never_overcommits_and_explains_every_pending_pod(
    nodes: list[tuple[int, int, int, bool]], pods: list[tuple[int, int, bool, int]]
) -> None:
    api = build(nodes, pods)
    # the store's JSON as the typed objects the shared fit reads
    all_pods = cast(list[Pod], api.store.list(PODS))
    node_objects = {n["metadata"]["name"]: n for n in cast(list[Node], api.store.list(NODES))}
    for name, node in node_objects.items():
        placed = [p for p in all_pods if p["spec"].get("nodeName") == name]
        offered = node_allocatable(node)
        assert len(placed) <= offered["pods"]
        for resource in ("cpu", "memory"):
            assert sum(pod_requests(p).get(resource, 0) for p in placed) <= offered[resource]
    for pod in all_pods:
        if pod["spec"].get("nodeName"):
            continue
        (condition,) = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
        assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
        total = len(node_objects)
        filters, preemption = condition["message"].split(" preemption: ")
        assert filters.startswith(f"0/{total} nodes are available: ")
        counts = [int(n) for n in re.findall(r"(?:: |, )(\d+) ", preemption)]
        assert sum(counts) == total
        for name, node in node_objects.items():
            placed = [p for p in all_pods if p["spec"].get("nodeName") == name]
            assert not fits(pod, node, placed)
    assert placement(build(nodes, pods)) == placement(api)
