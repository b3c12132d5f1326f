"""``autoscaling/v1`` HPAs: the in-process API server converts to and from the stored v2 as
kube-apiserver does (reference §3.1), and the loop (which reads v2) scales a v1-created HPA."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest

from kubescale.kube.api_paths import ApiPath
from kubescale.kube.resources import HORIZONTAL_POD_AUTOSCALERS
from kubescale.sim.apiserver.hpa_versions import v1_to_v2, v2_to_v1
from tests.controllers.vpa.recommender.test_recommender_loop import Cluster, cluster

from .hpa_cluster import NAMESPACE, Hpas

__all__ = ["cluster"]

HPA_V1 = replace(HORIZONTAL_POD_AUTOSCALERS, version="v1")
WEB = {"app": "web"}

V2: dict[str, Any] = {
    "apiVersion": "autoscaling/v2",
    "kind": "HorizontalPodAutoscaler",
    "metadata": {"name": "web", "namespace": "shop"},
    "spec": {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "minReplicas": 2,
        "maxReplicas": 10,
        "metrics": [
            {
                "type": "Pods",
                "pods": {
                    "metric": {"name": "qps"},
                    "target": {"type": "AverageValue", "averageValue": "10"},
                },
            },
            {
                "type": "Resource",
                "resource": {
                    "name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 50},
                },
            },
        ],
        "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}},
    },
    "status": {
        "currentReplicas": 3,
        "desiredReplicas": 4,
        "currentMetrics": [
            {
                "type": "Pods",
                "pods": {"metric": {"name": "qps"}, "current": {"averageValue": "12"}},
            },
            {
                "type": "Resource",
                "resource": {"name": "cpu", "current": {"averageUtilization": 70}},
            },
        ],
        "conditions": [
            {
                "type": "AbleToScale",
                "status": "True",
                "reason": "SucceededRescale",
                "message": "m",
                "lastTransitionTime": "2026-01-05T00:00:00Z",
            }
        ],
    },
}


def test_v2_to_v1_puts_the_rest_in_annotations() -> None:
    v1 = v2_to_v1(V2)
    assert v1["apiVersion"] == "autoscaling/v1"
    assert v1["spec"]["targetCPUUtilizationPercentage"] == 50
    assert v1["status"]["currentCPUUtilizationPercentage"] == 70
    notes = v1["metadata"]["annotations"]
    assert json.loads(notes["autoscaling.alpha.kubernetes.io/metrics"]) == [
        {"type": "Pods", "pods": {"metricName": "qps", "targetAverageValue": "10"}}
    ]
    assert json.loads(notes["autoscaling.alpha.kubernetes.io/current-metrics"]) == [
        {"type": "Pods", "pods": {"metricName": "qps", "currentAverageValue": "12"}}
    ]
    assert (
        json.loads(notes["autoscaling.alpha.kubernetes.io/conditions"])
        == V2["status"]["conditions"]
    )
    # and back: the annotations folded in and removed, the CPU target after the others
    assert v1_to_v2(v1) == V2


@pytest.fixture
async def hpas(cluster: Cluster) -> AsyncIterator[Hpas]:
    built = Hpas(cluster)
    yield built
    await built.close()


async def test_a_v1_hpa_is_scaled_and_reads_back_as_v1(hpas: Hpas) -> None:
    client = hpas.cluster.client
    hpas.deployment("web", replicas=2)
    for i in range(2):
        hpas.pod(f"web-{i}", labels=WEB, usage="900m")
    created = await client.create(
        HPA_V1,
        {
            "metadata": {
                "name": "web",
                "namespace": NAMESPACE,
                "annotations": {"hpa.kubescale.io/controller": "kubescale"},
            },
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "maxReplicas": 10,
                "targetCPUUtilizationPercentage": 50,
            },
        },
    )
    assert created["apiVersion"] == "autoscaling/v1"
    stored = hpas.get_hpa("web")
    assert stored["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 50
    loop = await hpas.loop()
    await hpas.run(loop)
    # 90% of 50 → 1.8; ceil(3.6) = 4
    assert hpas.replicas("web") == 4
    read = await client.get(HPA_V1, "web", namespace=NAMESPACE)
    assert read["status"]["currentCPUUtilizationPercentage"] == 90
    assert (read["status"]["currentReplicas"], read["status"]["desiredReplicas"]) == (2, 4)
    conditions = json.loads(
        read["metadata"]["annotations"]["autoscaling.alpha.kubernetes.io/conditions"]
    )
    assert [c["type"] for c in conditions] == ["AbleToScale", "ScalingActive", "ScalingLimited"]
    listed = await client.list(HPA_V1, namespace=NAMESPACE)
    assert [item["spec"]["targetCPUUtilizationPercentage"] for item in listed["items"]] == [50]
    # a merge patch of the v1 view
    patched = await client.patch(
        HPA_V1, "web", {"spec": {"targetCPUUtilizationPercentage": 70}}, namespace=NAMESPACE
    )
    assert patched["spec"]["targetCPUUtilizationPercentage"] == 70
    assert (
        hpas.get_hpa("web")["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 70
    )
    group = await client.request(
        verb="get", method="GET", resource=HPA_V1, path=ApiPath("/apis/autoscaling")
    )
    assert [v["version"] for v in group["versions"]] == ["v2", "v1"]
