"""Every field the HPA controller reads is named by the HPA TypedDict (issue 30 item 3).

A projected informer cache keeps only the fields :mod:`kubescale.objects` names, so a field
read but not named would be silently dropped from cached objects the day HPAs are projected.
``spec.selectionStrategy`` (upstream ``pod_filters.go``: ``LabelSelector`` or
``OwnerReferences``) was read by :func:`parse_hpa` but missing from
``HorizontalPodAutoscalerSpec``: the spec parsed from the projected HPA chose the pods by label.
And ``behavior.scaleUp.selectPolicy: Disabled`` coming through the real informer is honoured.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubescale.controllers.hpa.hpa_spec import parse_hpa
from kubescale.objects.hpa import HorizontalPodAutoscaler
from kubescale.objects.projection import project, projection_of
from tests.builders import hpas as hpa_builders
from tests.builders.meta import stored_as
from tests.controllers.hpa.test_hpa_loop import hpas
from tests.controllers.vpa.recommender.test_recommender_loop import cluster

from .hpa_cluster import Hpas

__all__ = ["cluster", "hpas"]  # the fixtures, re-exported for pytest

DISABLED_UP: dict[str, Any] = {
    "scaleUp": {"selectPolicy": "Disabled"},
    "scaleDown": {
        "stabilizationWindowSeconds": 60,
        "selectPolicy": "Min",
        "policies": [
            {"type": "Pods", "value": 1, "periodSeconds": 60},
            {"type": "Percent", "value": 10, "periodSeconds": 30},
        ],
        "tolerance": "50m",
    },
}


@pytest.mark.parametrize(
    "spec",
    [
        {"selectionStrategy": "OwnerReferences"},
        {"selectionStrategy": "LabelSelector", "behavior": DISABLED_UP},
        {"selectionStrategy": "OwnerReferences", "minReplicas": 2, "behavior": DISABLED_UP},
    ],
)
def test_the_projected_hpa_parses_as_the_whole_one(spec: dict[str, Any]) -> None:
    typed = stored_as(
        hpa_builders.hpa(
            name="web", target=hpa_builders.scale_target_ref(), max_replicas=10, spec=spec
        ),
        HorizontalPodAutoscaler,
    )
    projected = project(typed, projection_of(HorizontalPodAutoscaler))
    assert parse_hpa(projected) == parse_hpa(typed)


async def test_select_policy_disabled_through_the_informer_is_honoured(hpas: Hpas) -> None:
    # Two Deployments of 2 pods at 900m of 1000m: 90% against a 50% target, so
    # ceil(90/50 × 2) = ceil(3.6) = 4 wanted by each; the HPA whose scaleUp selectPolicy is
    # Disabled stays at 2 (upstream: Disabled returns the current replicas), the other goes to
    # 4 (legacy limit max(2 × 2, 4) = 4).
    for name in ("web", "off"):
        hpas.deployment(name, replicas=2)
        for i in range(2):
            hpas.pod(f"{name}-{i}", labels={"app": name}, usage="900m")
    hpas.hpa("web", target="web")
    hpas.hpa("off", target="off", behavior={"scaleUp": {"selectPolicy": "Disabled"}})
    loop = await hpas.loop()
    cached = {h["metadata"]["name"]: h for h in loop.hpas.lister.list()}
    assert cached["off"]["spec"]["behavior"]["scaleUp"]["selectPolicy"] == "Disabled"
    await hpas.run(loop)
    assert hpas.replicas("web") == 4
    assert hpas.replicas("off") == 2
    assert hpas.get_hpa("off")["status"]["desiredReplicas"] == 2
