"""Which resources an HPA scales a workload on (webhook/hpa_conflict.py).

An HPA on the same namespace/kind/name whose metrics include a ``Resource`` or
``ContainerResource`` metric on cpu or memory claims that resource; an ``autoscaling/v2`` HPA
without metrics is defaulted to 80% CPU utilisation and an ``autoscaling/v1`` HPA only knows
CPU, so both claim cpu.
"""

from __future__ import annotations

import functools
from typing import Any, cast

import pytest

from kubescale.controllers.vpa.api.controller_refs import ControllerRef
from kubescale.coordination.resource_ownership import hpa_scaled_resources, hpas_scaled_resources
from kubescale.objects.hpa import HorizontalPodAutoscaler
from tests import builders

HPA = functools.partial(
    builders.hpas.hpa,
    name="h",
    target=builders.hpas.scale_target_ref(),
    min_replicas=1,
    max_replicas=10,
)

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
        pytest.param(HPA(metrics=[resource_metric("cpu")]), {"cpu"}, id="Resource cpu"),
        pytest.param(HPA(metrics=[resource_metric("memory")]), {"memory"}, id="Resource memory"),
        pytest.param(
            HPA(metrics=[resource_metric("cpu"), resource_metric("memory")]),
            {"cpu", "memory"},
            id="both",
        ),
        pytest.param(
            HPA(metrics=[container_metric("memory")]), {"memory"}, id="ContainerResource memory"
        ),
        pytest.param(
            HPA(metrics=[EXTERNAL, PODS]), set(), id="External and Pods metrics claim nothing"
        ),
        pytest.param(HPA(metrics=[EXTERNAL, resource_metric("cpu")]), {"cpu"}, id="mixed metrics"),
        pytest.param(
            HPA(metrics=[resource_metric("ephemeral-storage")]),
            set(),
            id="other resources are not VPA's",
        ),
        pytest.param(HPA(), {"cpu"}, id="v2 without metrics defaults to CPU"),
        pytest.param(
            HPA(api_version="autoscaling/v1", spec={"targetCPUUtilizationPercentage": 50}),
            {"cpu"},
            id="autoscaling/v1 scales on CPU",
        ),
        pytest.param(
            HPA(
                metrics=[resource_metric("cpu")], target=builders.hpas.scale_target_ref(name="api")
            ),
            set(),
            id="another workload",
        ),
        pytest.param(
            HPA(
                metrics=[resource_metric("cpu")],
                target=builders.hpas.scale_target_ref(kind="StatefulSet"),
            ),
            set(),
            id="same name, another kind",
        ),
        pytest.param(
            HPA(metrics=[resource_metric("cpu")], namespace="other"), set(), id="another namespace"
        ),
    ],
)
def test_hpa_scaled_resources(the_hpa: dict[str, Any], expected: set[str]) -> None:
    assert hpa_scaled_resources(cast(HorizontalPodAutoscaler, the_hpa), WEB) == frozenset(expected)


def test_no_controller_means_no_conflict() -> None:
    hpa = cast(HorizontalPodAutoscaler, HPA(metrics=[resource_metric("cpu")]))
    assert hpa_scaled_resources(hpa, None) == frozenset()


def test_union_over_hpas() -> None:
    hpas = [
        HPA(metrics=[resource_metric("cpu")]),
        HPA(metrics=[container_metric("memory")]),
        HPA(metrics=[resource_metric("cpu")], target=builders.hpas.scale_target_ref(name="x")),
    ]
    assert hpas_scaled_resources(cast(list[HorizontalPodAutoscaler], hpas), WEB) == frozenset(
        {"cpu", "memory"}
    )
    assert hpas_scaled_resources([], WEB) == frozenset()
