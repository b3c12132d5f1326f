"""Which resources an HPA scales a workload on (webhook/hpa_conflict.py).

An HPA on the same namespace/kind/name whose metrics include a ``Resource`` or
``ContainerResource`` metric on cpu or memory claims that resource; an ``autoscaling/v2`` HPA
without metrics is defaulted to 80% CPU utilisation and an ``autoscaling/v1`` HPA only knows
CPU, so both claim cpu.
"""

from __future__ import annotations

from typing import Any, cast

import pytest

from kubescale.controllers.vpa.api.controller_refs import ControllerRef
from kubescale.controllers.vpa.api.hpa_conflict import hpa_scaled_resources, hpas_scaled_resources
from kubescale.objects.hpa import HorizontalPodAutoscaler

WEB = ControllerRef(api_version="apps/v1", kind="Deployment", name="web", namespace="default")


def resource_metric(name: str) -> dict[str, Any]:
    return {
        "type": "Resource",
        "resource": {"name": name, "target": {"type": "Utilization", "averageUtilization": 70}},
    }


def container_metric(name: str) -> dict[str, Any]:
    return {
        "type": "ContainerResource",
        "containerResource": {
            "name": name,
            "container": "app",
            "target": {"type": "Utilization", "averageUtilization": 60},
        },
    }


def hpa(
    *metrics: dict[str, Any],
    kind: str = "Deployment",
    name: str = "web",
    namespace: str = "default",
    api_version: str = "autoscaling/v2",
    spec_extra: dict[str, Any] | None = None,
) -> HorizontalPodAutoscaler:
    spec: dict[str, Any] = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": kind, "name": name},
        "minReplicas": 1,
        "maxReplicas": 10,
    }
    if metrics:
        spec["metrics"] = list(metrics)
    spec.update(spec_extra or {})
    return cast(
        HorizontalPodAutoscaler,
        {
            "apiVersion": api_version,
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "h", "namespace": namespace},
            "spec": spec,
        },
    )


EXTERNAL = {
    "type": "External",
    "external": {"metric": {"name": "queue"}, "target": {"type": "Value", "value": "10"}},
}
PODS = {
    "type": "Pods",
    "pods": {"metric": {"name": "rps"}, "target": {"type": "AverageValue", "averageValue": "1"}},
}


@pytest.mark.parametrize(
    ("the_hpa", "expected"),
    [
        pytest.param(hpa(resource_metric("cpu")), {"cpu"}, id="Resource cpu"),
        pytest.param(hpa(resource_metric("memory")), {"memory"}, id="Resource memory"),
        pytest.param(
            hpa(resource_metric("cpu"), resource_metric("memory")), {"cpu", "memory"}, id="both"
        ),
        pytest.param(hpa(container_metric("memory")), {"memory"}, id="ContainerResource memory"),
        pytest.param(hpa(EXTERNAL, PODS), set(), id="External and Pods metrics claim nothing"),
        pytest.param(hpa(EXTERNAL, resource_metric("cpu")), {"cpu"}, id="mixed metrics"),
        pytest.param(
            hpa(resource_metric("ephemeral-storage")), set(), id="other resources are not VPA's"
        ),
        pytest.param(hpa(), {"cpu"}, id="v2 without metrics defaults to CPU"),
        pytest.param(
            hpa(api_version="autoscaling/v1", spec_extra={"targetCPUUtilizationPercentage": 50}),
            {"cpu"},
            id="autoscaling/v1 scales on CPU",
        ),
        pytest.param(hpa(resource_metric("cpu"), name="api"), set(), id="another workload"),
        pytest.param(
            hpa(resource_metric("cpu"), kind="StatefulSet"), set(), id="same name, another kind"
        ),
        pytest.param(hpa(resource_metric("cpu"), namespace="other"), set(), id="another namespace"),
    ],
)
def test_hpa_scaled_resources(the_hpa: HorizontalPodAutoscaler, expected: set[str]) -> None:
    assert hpa_scaled_resources(the_hpa, WEB) == frozenset(expected)


def test_no_controller_means_no_conflict() -> None:
    assert hpa_scaled_resources(hpa(resource_metric("cpu")), None) == frozenset()


def test_union_over_hpas() -> None:
    hpas = [
        hpa(resource_metric("cpu")),
        hpa(container_metric("memory")),
        hpa(resource_metric("cpu"), name="x"),
    ]
    assert hpas_scaled_resources(hpas, WEB) == frozenset({"cpu", "memory"})
    assert hpas_scaled_resources([], WEB) == frozenset()
