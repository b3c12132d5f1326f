"""DaemonSets: one pod per eligible node, pinned with a matchFields node affinity; taints,
tolerations, node selectors, nodes coming and going, rolling updates."""

from __future__ import annotations

import functools

from kubescale.kube.resources import DAEMON_SETS, NODES
from kubescale.sim.cluster.daemon_sets import DAEMON_TOLERATIONS, target_node
from kubescale.sim.cluster.usage_models import WORKLOAD_LABEL
from tests import builders
from tests.sim.cluster.test_workload_controllers import SimCluster, cluster, with_image

__all__ = ["cluster"]

GPU_TAINT = {"key": "gpu", "value": "true", "effect": "NoSchedule"}


agent_template = functools.partial(
    builders.workloads.pod_template,
    labels={"app": "agent"},
    containers=[builders.pods.container("agent", image="agent:1")],
)
"""The agent's pod template: ``app: agent``, one container ``agent:1``, ``spec`` added."""


daemon_set = functools.partial(
    builders.workloads.daemon_set,
    name="agent",
    match_labels={"app": "agent"},
    template=agent_template(),
)


def placement(cluster: SimCluster) -> dict[str, int]:
    counts: dict[str, int] = {}
    for pod in cluster.active_pods():
        node = target_node(pod)
        assert node is not None
        counts[node] = counts.get(node, 0) + 1
    return counts


async def test_one_pod_per_node_except_a_tainted_one(cluster: SimCluster) -> None:
    for name in ("node-1", "node-2"):
        cluster.add_node(name)
    cluster.add_node("gpu-1", taints=[GPU_TAINT])
    cluster.create(daemon_set())
    await cluster.controllers_only()
    assert placement(cluster) == {"node-1": 1, "node-2": 1}
    pod = next(p for p in cluster.pods() if target_node(p) == "node-1")
    assert pod["spec"]["affinity"] == {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": ["node-1"]}
                        ]
                    }
                ]
            }
        }
    }
    assert "nodeName" not in pod["spec"]  # the scheduler binds it
    assert pod["metadata"]["labels"][WORKLOAD_LABEL] == "agent"
    tolerations = pod["spec"]["tolerations"]
    for key, effect in DAEMON_TOLERATIONS:
        assert {"key": key, "operator": "Exists", "effect": effect} in tolerations
    await cluster.step(2)
    status = cluster.get(DAEMON_SETS, "agent")["status"]
    assert status == {
        "observedGeneration": 1,
        "desiredNumberScheduled": 2,
        "currentNumberScheduled": 2,
        "numberMisscheduled": 0,
        "numberReady": 2,
        "numberAvailable": 2,
        "numberUnavailable": 0,
        "updatedNumberScheduled": 2,
    }


async def test_a_toleration_admits_the_tainted_node(cluster: SimCluster) -> None:
    cluster.add_node("node-1")
    cluster.add_node("gpu-1", taints=[GPU_TAINT])
    toleration = {"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    cluster.create(daemon_set(template=agent_template(spec={"tolerations": [toleration]})))
    await cluster.controllers_only()
    assert placement(cluster) == {"node-1": 1, "gpu-1": 1}


async def test_a_cordoned_or_not_ready_node_still_gets_its_pod(cluster: SimCluster) -> None:
    cluster.add_node(
        "node-1", taints=[{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]
    )
    cluster.add_node(
        "node-2", taints=[{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]
    )
    cluster.create(daemon_set())
    await cluster.controllers_only()
    assert placement(cluster) == {"node-1": 1, "node-2": 1}


async def test_new_nodes_get_a_pod_and_removed_nodes_lose_it(cluster: SimCluster) -> None:
    cluster.add_node("node-1")
    cluster.create(daemon_set())
    await cluster.step(2)
    cluster.add_node("node-2")
    await cluster.step()
    assert placement(cluster) == {"node-1": 1, "node-2": 1}
    cluster.api.store.delete(NODES, "node-1")
    await cluster.step()
    assert placement(cluster) == {"node-2": 1}


async def test_node_selector_and_label_changes(cluster: SimCluster) -> None:
    cluster.add_node("node-1", labels={"disk": "ssd"})
    cluster.add_node("node-2", labels={"disk": "hdd"})
    cluster.create(daemon_set(template=agent_template(spec={"nodeSelector": {"disk": "ssd"}})))
    await cluster.step(2)
    assert placement(cluster) == {"node-1": 1}
    node = cluster.get(NODES, "node-2", None)
    node["metadata"]["labels"]["disk"] = "ssd"
    cluster.api.store.update(node)
    await cluster.step()
    assert placement(cluster) == {"node-1": 1, "node-2": 1}
    node = cluster.get(NODES, "node-1", None)
    node["metadata"]["labels"]["disk"] = "hdd"
    cluster.api.store.update(node)
    await cluster.step()
    assert placement(cluster) == {"node-2": 1}


async def test_a_new_no_execute_taint_removes_the_pod_a_no_schedule_one_does_not(
    cluster: SimCluster,
) -> None:
    cluster.add_node("node-1")
    cluster.add_node("node-2")
    cluster.create(daemon_set())
    await cluster.step(2)
    for name, effect in (("node-1", "NoSchedule"), ("node-2", "NoExecute")):
        node = cluster.get(NODES, name, None)
        node["spec"]["taints"] = [{"key": "maintenance", "effect": effect}]
        cluster.api.store.update(node)
    await cluster.step()
    assert placement(cluster) == {"node-1": 1}
    status = cluster.get(DAEMON_SETS, "agent")["status"]
    assert status["desiredNumberScheduled"] == 0
    assert status["numberMisscheduled"] == 1


async def test_rolling_update_replaces_one_node_at_a_time(cluster: SimCluster) -> None:
    for name in ("node-1", "node-2", "node-3"):
        cluster.add_node(name)
    cluster.create(daemon_set())
    await cluster.step(2)
    cluster.api.store.update(with_image(cluster.get(DAEMON_SETS, "agent"), "agent:2"))
    updated_per_step = []
    for _ in range(8):
        await cluster.controllers_only()
        live = cluster.active_pods()
        updated_per_step.append(sum(p["spec"]["containers"][0]["image"] == "agent:2" for p in live))
        assert len(live) >= 2  # maxUnavailable 1 of 3 nodes
        cluster.kubelet.step(cluster.clock.now())
    assert updated_per_step[-1] == 3
    assert placement(cluster) == {"node-1": 1, "node-2": 1, "node-3": 1}
    assert cluster.get(DAEMON_SETS, "agent")["status"]["updatedNumberScheduled"] == 3
