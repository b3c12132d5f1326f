"""The extender's filter sees the candidates kube-scheduler's own filters left — NodePorts and
PodTopologySpread included — so its "never strand a pod on policy grounds" fallback is decided
on the nodes the pod can really use.

Policy: RemovePodsViolatingNodeTaints with ``includePreferNoSchedule``: the extender refuses
``n1`` (tainted PreferNoSchedule, which kube-scheduler itself allows). ``exporter`` (2 replicas)
binds host port 9100. The first replica: candidates n1, n2 → the extender refuses n1 → n2. The
second: NodePorts refuses n2 (port held), the extender gets n1 only, would refuse every
candidate → refuses none (policy fallback) → n1. Were n2 sent again, the extender would pass
it and both exporters would bind the same host port on n2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.controllers.descheduler.builders import policy

from .sim_harness import Harness, simulated_cluster

PREFER_NO = policy(
    ("deschedule", "RemovePodsViolatingNodeTaints", {"includePreferNoSchedule": True})
)
SOFT_TAINT = {"key": "maintenance", "value": "soon", "effect": "PreferNoSchedule"}


def deploy_with(cluster: Harness, name: str, replicas: int, extra: dict[str, Any]) -> None:
    labels = {"app": name}
    container: dict[str, Any] = {
        "name": "app",
        "image": f"{name}:1",
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
        **extra.pop("container", {}),
    }
    cluster.api.store.create(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {**extra, "containers": [container]},
                },
            },
        }
    )


async def test_fallback_is_decided_on_nodes_free_of_the_pods_host_port(tmp_path: Path) -> None:
    async with simulated_cluster(PREFER_NO, tmp_path, extender=True) as cluster:
        cluster.add_node("n1")
        cluster.add_node("n2")
        cluster.taint_node("n1", SOFT_TAINT)
        ports = {"container": {"ports": [{"containerPort": 9100, "hostPort": 9100}]}}
        deploy_with(cluster, "exporter", 2, ports)
        for _ in range(3):
            await cluster.step()
        assert cluster.placement("exporter") == {"n1": 1, "n2": 1}
        assert cluster.extender_metrics.fallbacks._value.get() == 1


async def test_fallback_is_decided_on_nodes_the_spread_allows(tmp_path: Path) -> None:
    # web spread by hostname, maxSkew 1, 2 replicas: the second may not join the first on n2
    # (1 + 1 − 0 > 1, n1 being an empty domain): n1 is its only candidate → fallback → n1
    async with simulated_cluster(PREFER_NO, tmp_path, extender=True) as cluster:
        cluster.add_node("n1")
        cluster.add_node("n2")
        cluster.taint_node("n1", SOFT_TAINT)
        spread = {
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": "kubernetes.io/hostname",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "web"}},
                }
            ]
        }
        deploy_with(cluster, "web", 2, spread)
        for _ in range(3):
            await cluster.step()
        assert cluster.placement("web") == {"n1": 1, "n2": 1}
        assert cluster.extender_metrics.fallbacks._value.get() == 1
