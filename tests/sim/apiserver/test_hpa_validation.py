"""The in-process API server refuses the HPAs kube-apiserver refuses (issue 27, HPA item 10).

Expected texts are ``pkg/apis/autoscaling/validation/validation.go``'s details under
``field.Error``'s printing (``<path>: Invalid value: <value>: <detail>``; a Quantity printed as
its ``%#v``, as users report it in kedacore/keda#3669), joined by ``errors.NewInvalid``.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kubernetes.aio import client
from kubernetes.aio.client.exceptions import ApiException

from kubescale.sim.apiserver.hpa_validation import go_quantity, hpa_causes
from kubescale.sim.apiserver.server import ApiServer
from tests import builders
from tests.sim.apiserver.conftest import loose, status_of

ZERO = (
    "resource.Quantity{i:resource.int64Amount{value:0, scale:0}, "
    'd:resource.infDecAmount{Dec:(*inf.Dec)(nil)}, s:"0", Format:"DecimalSI"}'
)


def cpu(target: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"type": "Resource", "resource": {"name": "cpu", "target": target}}]


REFUSED = [
    # (spec fields, the causes' "field: message" texts, in upstream's order)
    pytest.param(
        {"minReplicas": 5, "maxReplicas": 2},
        ["spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`"],
        id="min-above-max",
    ),
    pytest.param(
        {"metrics": cpu({"type": "Utilization", "averageUtilization": 0})},
        [
            "spec.metrics[0].resource.target.averageUtilization: Invalid value: 0: "
            "must be greater than 0"
        ],
        id="utilization-0",
    ),
    pytest.param(
        {
            "metrics": [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": "qps"},
                        "target": {"type": "AverageValue", "averageValue": "0"},
                    },
                }
            ]
        },
        [f"spec.metrics[0].pods.target.averageValue: Invalid value: {ZERO}: must be positive"],
        id="average-value-0",
    ),
    pytest.param(
        {
            "metrics": [
                {
                    "type": "External",
                    "external": {
                        "metric": {"name": "queue"},
                        "target": {"type": "Value", "value": "-5"},
                    },
                }
            ]
        },
        [
            "spec.metrics[0].external.target.value: Invalid value: resource.Quantity{i:resource."
            "int64Amount{value:-5, scale:0}, d:resource.infDecAmount{Dec:(*inf.Dec)(nil)}, "
            's:"-5", Format:"DecimalSI"}: must be positive'
        ],
        id="external-value-negative",
    ),
    pytest.param(
        # HPAScaleToZero is alpha, off in kube-apiserver: the lower bound is 1
        {"minReplicas": 0, "maxReplicas": 0},
        [
            "spec.minReplicas: Invalid value: 0: must be greater than or equal to 1",
            "spec.maxReplicas: Invalid value: 0: must be greater than 0",
            "spec.metrics: Forbidden: must specify at least one Object or External metric to "
            "support scaling to zero replicas",
        ],
        id="zero-replicas",
    ),
    pytest.param(
        {"metrics": [{"type": "Resource"}]},
        [
            "spec.metrics[0].resource: Required value: must populate information for the given "
            "metric source"
        ],
        id="source-missing",
    ),
    pytest.param(
        {"behavior": {"scaleDown": {"stabilizationWindowSeconds": 3601, "policies": []}}},
        [
            "spec.behavior.scaleDown.stabilizationWindowSeconds: Invalid value: 3601: must be "
            "less than or equal to 3600",
            "spec.behavior.scaleDown.policies: Required value: must specify at least one Policy",
        ],
        id="behavior",
    ),
    pytest.param(
        {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "a/b"}},
        ["spec.scaleTargetRef.name: Invalid value: \"a/b\": may not contain '/'"],
        id="target-name",
    ),
]


@pytest.mark.parametrize(("spec", "texts"), REFUSED)
async def test_refused_as_kube_apiserver_does(
    api: Any, spec: dict[str, Any], texts: list[str]
) -> None:
    autoscaling = loose(client.AutoscalingV2Api(api))
    with pytest.raises(ApiException) as caught:
        await autoscaling.create_namespaced_horizontal_pod_autoscaler(
            "default",
            builders.hpas.hpa(
                target=builders.hpas.scale_target_ref(),
                max_replicas=10,
                metrics=cpu({"type": "Utilization", "averageUtilization": 50}),
                spec=spec,
            ),
        )
    status = status_of(caught.value)
    assert (caught.value.status, status["reason"]) == (422, "Invalid")
    joined = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    assert status["message"] == f'HorizontalPodAutoscaler.autoscaling "web" is invalid: {joined}'
    assert [f"{c['field']}: {c['message']}" for c in status["details"]["causes"]] == texts


async def test_valid_ones_are_stored_and_updates_are_checked(api: Any, server: ApiServer) -> None:
    autoscaling = loose(client.AutoscalingV2Api(api))
    # defaulted behavior (absent policies are filled before validation), min 1 ≤ max 1
    body = builders.hpas.hpa(
        target=builders.hpas.scale_target_ref(),
        max_replicas=10,
        metrics=cpu({"type": "Utilization", "averageUtilization": 50}),
        spec={
            "minReplicas": 1,
            "maxReplicas": 1,
            "behavior": {"scaleDown": {"selectPolicy": "Min"}},
        },
    )
    await autoscaling.create_namespaced_horizontal_pod_autoscaler("default", body)
    current = await autoscaling.read_namespaced_horizontal_pod_autoscaler("web", "default")
    current = api.sanitize_for_serialization(current)
    current["spec"]["minReplicas"] = 3  # above maxReplicas 1
    with pytest.raises(ApiException) as caught:
        await autoscaling.replace_namespaced_horizontal_pod_autoscaler("web", "default", current)
    assert status_of(caught.value)["details"]["causes"][0]["field"] == "spec.maxReplicas"
    # the status subresource validates the status only
    current["spec"]["minReplicas"] = 1
    current["status"] = {"currentReplicas": 1, "desiredReplicas": 1}
    await autoscaling.replace_namespaced_horizontal_pod_autoscaler_status("web", "default", current)
    server.hpa_scale_to_zero = True  # the gate on: minReplicas 0 with an External metric
    external = [
        {
            "type": "External",
            "external": {"metric": {"name": "queue"}, "target": {"type": "Value", "value": "5"}},
        }
    ]
    zero = builders.hpas.hpa(
        target=builders.hpas.scale_target_ref(),
        max_replicas=10,
        metrics=cpu({"type": "Utilization", "averageUtilization": 50}),
        spec={"minReplicas": 0, "metrics": external},
    )
    zero["metadata"]["name"] = "zero"
    await autoscaling.create_namespaced_horizontal_pod_autoscaler("default", zero)


def test_go_quantity_printing() -> None:
    assert go_quantity("0") == ZERO
    # 1.5k: digits 15, exponent 3 - 1 = 2; canonical 1500 → "1500"
    assert go_quantity("1.5k") == (
        "resource.Quantity{i:resource.int64Amount{value:15, scale:2}, "
        'd:resource.infDecAmount{Dec:(*inf.Dec)(nil)}, s:"1500", Format:"DecimalSI"}'
    )
    assert go_quantity("nonsense") == '"nonsense"'


@given(
    minimum=st.one_of(st.none(), st.integers(min_value=-3, max_value=12)),
    maximum=st.integers(min_value=-3, max_value=12),
    utilization=st.integers(min_value=-3, max_value=120),
)
def test_accepted_exactly_within_upstreams_bounds(
    minimum: int | None, maximum: int, utilization: int
) -> None:
    """An otherwise valid HPA is accepted iff 1 ≤ minReplicas (when set) ≤ maxReplicas, 1 ≤
    maxReplicas and 1 ≤ averageUtilization."""
    spec: dict[str, Any] = {
        "maxReplicas": maximum,
        "metrics": cpu({"type": "Utilization", "averageUtilization": utilization}),
    }
    if minimum is not None:
        spec["minReplicas"] = minimum
    accepted = not hpa_causes(
        builders.hpas.hpa(
            target=builders.hpas.scale_target_ref(),
            max_replicas=10,
            metrics=cpu({"type": "Utilization", "averageUtilization": 50}),
            spec=spec,
        )
    )
    low = 1 if minimum is None else minimum
    assert accepted == (1 <= low <= maximum and maximum >= 1 and utilization >= 1)
