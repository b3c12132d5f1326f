"""A small simulated cluster for ``kubescale report``: one node, two Deployments, a VPA with a
recommendation on one of them, an HPA, and metrics.k8s.io values (shared by the report tests
and the Chromium screenshot of the report page)."""

from __future__ import annotations

from kubescale.kube.resources import HORIZONTAL_POD_AUTOSCALERS, NODES, PODS
from kubescale.sim.apiserver.server import ApiServer
from tests import builders

MIB = 2**20


def populate(server: ApiServer) -> None:
    """web: 2 × (500m, 512Mi) with a VPA (lower 100m/200Mi, target 200m/300Mi, upper
    400m/600Mi) and an HPA; api: 1 × (100m, no memory request) without a VPA, using 300m and
    100Mi; node-a: 4 CPUs, 8Gi allocatable, using 1 CPU and 2Gi."""
    store = server.store
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})
    store.create(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "node-a"},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
        }
    )
    node = store.get(NODES, "node-a")
    node["status"] = {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}
    store.update_status(node)
    web_requests = {"cpu": "500m", "memory": "512Mi"}
    store.create(
        builders.workloads.deployment(
            name="web",
            namespace="shop",
            labels={"app": "web"},
            replicas=2,
            match_labels={"app": "web"},
            template=builders.workloads.pod_template(
                labels={"app": "web"},
                containers=[
                    builders.pods.container(
                        image="shop:1", requests=web_requests, limits={"cpu": "1"}
                    )
                ],
            ),
        )
    )
    store.create(
        builders.workloads.deployment(
            name="api",
            namespace="shop",
            labels={"app": "api"},
            replicas=1,
            match_labels={"app": "api"},
            template=builders.workloads.pod_template(
                labels={"app": "api"},
                containers=[
                    builders.pods.container(
                        image="shop:1", requests={"cpu": "100m"}, limits={"cpu": "1"}
                    )
                ],
            ),
        )
    )
    for name, app, requests in (
        ("web-1", "web", web_requests),
        ("web-2", "web", web_requests),
        ("api-1", "api", {"cpu": "100m"}),
    ):
        store.create(
            builders.pods.pod(
                name=name,
                namespace="shop",
                labels={"app": app},
                node_name="node-a",
                containers=[builders.pods.container(image="shop:1", requests=requests)],
            )
        )
        pod = store.get(PODS, name, "shop")
        pod["status"] = {"phase": "Running"}
        store.update_status(pod)
    for name in ("web-1", "web-2"):
        server.metrics.set_pod_metrics(
            namespace="shop",
            name=name,
            labels={"app": "web"},
            containers={"app": {"cpu": "150m", "memory": "280Mi"}},
        )
    server.metrics.set_pod_metrics(
        namespace="shop",
        name="api-1",
        labels={"app": "api"},
        containers={"app": {"cpu": "300m", "memory": "100Mi"}},
    )
    server.metrics.set_node_metrics(name="node-a", usage={"cpu": "1", "memory": "2Gi"})
    vpa_type = store.registry.by_kind("autoscaling.k8s.io/v1", "VerticalPodAutoscaler")
    assert vpa_type is not None
    store.create(
        {
            "apiVersion": "autoscaling.k8s.io/v1",
            "kind": "VerticalPodAutoscaler",
            "metadata": {"name": "web-vpa", "namespace": "shop"},
            "spec": {
                "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "updatePolicy": {"updateMode": "Off"},
            },
        }
    )
    vpa = store.get(vpa_type, "web-vpa", "shop")
    vpa["status"] = {
        "recommendation": {
            "containerRecommendations": [
                {
                    "containerName": "app",
                    "lowerBound": {"cpu": "100m", "memory": "200Mi"},
                    "target": {"cpu": "200m", "memory": "300Mi"},
                    "upperBound": {"cpu": "400m", "memory": "600Mi"},
                }
            ]
        }
    }
    store.update_status(vpa)
    store.create(
        {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "minReplicas": 2,
                "maxReplicas": 6,
                "metrics": [
                    {
                        "type": "Resource",
                        "resource": {
                            "name": "cpu",
                            "target": {"type": "Utilization", "averageUtilization": 70},
                        },
                    }
                ],
            },
        }
    )
    hpa = store.get(HORIZONTAL_POD_AUTOSCALERS, "web", "shop")
    hpa["status"] = {
        "currentReplicas": 2,
        "desiredReplicas": 2,
        "currentMetrics": [
            {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 30}}}
        ],
        "conditions": [
            {"type": "AbleToScale", "status": "True", "reason": "ReadyForNewScale"},
            {"type": "ScalingLimited", "status": "True", "reason": "TooFewReplicas"},
        ],
    }
    store.update_status(hpa)
