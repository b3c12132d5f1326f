"""End-to-end pod admission (webhook/pod_admission.py): VPA -> requests, limits, patch.

Each case is a whole pod CREATE as upstream's admission controller would mutate it; expected
patch lists are compared whole. The arithmetic follows upstream's rules (recommendation target,
capping, ``GetProportionalLimit``: CPU in milli-units, memory in whole bytes, rounded down).

The pod: ``app`` requests cpu 100m / memory 100Mi with limits 200m / 200Mi (ratio 2),
``sidecar`` requests cpu 50m and has only a memory limit of 128Mi. The VPA recommends
app 250m / 256Mi and sidecar 25m / 64Mi.
"""

from __future__ import annotations

import contextlib
import copy
import functools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubescale.controllers.vpa.api.pod_admission import PodAdmission, PodAdmissionError, admit_pod
from kubescale.controllers.vpa.api.startup_boost import StartupBoostSettings
from kubescale.objects.admission_review import JsonPatchOperation
from kubescale.objects.limit_range import LimitRange
from kubescale.objects.pod import Pod
from kubescale.objects.quantities import Quantity
from kubescale.objects.vpa import VerticalPodAutoscaler
from kubescale.sim.apiserver.patching import apply_json_patch
from tests import builders
from tests.builders.meta import stored_as
from tests.controllers.vpa.api.test_limit_range_property import (
    NODES,
    limit_ranges,
    pods,
    vpas,
)

q = Quantity.parse
NO_CPU_LIMIT = "cpu: limit NOT set since originalLimit is nil or 0"


def add(path: str, value: Any) -> JsonPatchOperation:
    return {"op": "add", "path": path, "value": value}


def updates(text: str) -> JsonPatchOperation:
    return add("/metadata/annotations/vpaUpdates", f"Pod resources updated by web-vpa: {text}")


EMPTY_ANNOTATIONS = add("/metadata/annotations", {})
OBSERVED = add("/metadata/annotations/vpaObservedContainers", "app, sidecar")


CONTAINERS = (
    builders.pods.container(
        "app",
        image="app:1",
        requests={"cpu": "100m", "memory": "100Mi"},
        limits={"cpu": "200m", "memory": "200Mi"},
    ),
    builders.pods.container(
        "sidecar", image="proxy:1", requests={"cpu": "50m"}, limits={"memory": "128Mi"}
    ),
)
build_pod = functools.partial(
    builders.pods.typed_pod,
    name=None,
    labels={"app": "web"},
    owner_references=[builders.meta.owner_reference(name="web-7c9f", uid="u1")],
    metadata_extra={"generateName": "web-7c9f-"},
    containers=CONTAINERS,
)
"""The pod of the module docstring, as a ReplicaSet creates it (``generateName``, no name)."""


def recommendation(*containers: tuple[str, str, str]) -> dict[str, Any]:
    return {
        "containerRecommendations": [
            {
                "containerName": name,
                "target": {"cpu": cpu, "memory": memory},
                "lowerBound": {"cpu": cpu, "memory": memory},
                "upperBound": {"cpu": cpu, "memory": memory},
                "uncappedTarget": {"cpu": cpu, "memory": memory},
            }
            for name, cpu, memory in containers
        ]
    }


DEFAULT_RECOMMENDATION = recommendation(("app", "250m", "256Mi"), ("sidecar", "25m", "64Mi"))


build_vpa = functools.partial(
    builders.vpas.typed_vpa,
    name="web-vpa",
    creation_timestamp="2024-01-01T00:00:00Z",
    target=builders.vpas.target_ref(),
    update_mode="Recreate",
    status={"recommendation": DEFAULT_RECOMMENDATION},
)
"""VPA ``web-vpa`` on Deployment ``web`` in Recreate mode recommending
:data:`DEFAULT_RECOMMENDATION` (``status`` replaces that status)."""


def hpa_on(resource: str, name: str = "web") -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web-hpa", "namespace": "default"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "minReplicas": 2,
            "maxReplicas": 10,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": resource,
                        "target": {"type": "Utilization", "averageUtilization": 70},
                    },
                }
            ],
        },
    }


# app:     requests 250m / 256Mi; limits 200m*250m/100m = 500m, 200Mi*256Mi/100Mi = 512Mi.
# sidecar: requests 25m / 64Mi; no cpu limit to scale (annotated), memory limit with no memory
#          request -> equal to the new request, 64Mi.
FULL_PATCH = [
    EMPTY_ANNOTATIONS,
    add("/spec/containers/0/resources/requests/cpu", "250m"),
    add("/spec/containers/0/resources/requests/memory", "256Mi"),
    add("/spec/containers/0/resources/limits/cpu", "500m"),
    add("/spec/containers/0/resources/limits/memory", "512Mi"),
    add("/spec/containers/1/resources/requests/cpu", "25m"),
    add("/spec/containers/1/resources/requests/memory", "64Mi"),
    add("/spec/containers/1/resources/limits/memory", "64Mi"),
    updates(
        "container 0: cpu request, memory request, cpu limit, memory limit;"
        f" container 1: {NO_CPU_LIMIT}, cpu request, memory request, memory limit"
    ),
    OBSERVED,
]


def admission(
    patches: list[JsonPatchOperation], skipped: frozenset[str] = frozenset()
) -> PodAdmission:
    return PodAdmission(
        patches=patches, vpa="web-vpa", applied=bool(patches), skipped_resources=skipped
    )


CASES = [
    pytest.param(
        {"vpa": None},
        PodAdmission(patches=[], vpa=None, applied=False, skipped_resources=frozenset()),
        id="no VPA: nothing, not applied",
    ),
    pytest.param({"vpa": build_vpa(update_mode="Recreate")}, admission(FULL_PATCH), id="Recreate"),
    pytest.param(
        {"vpa": build_vpa(update_mode="Initial")},
        admission(FULL_PATCH),
        id="Initial: same patch at creation",
    ),
    pytest.param(
        {"vpa": build_vpa(update_mode=None)},
        admission(FULL_PATCH),
        id="no updatePolicy (default mode)",
    ),
    pytest.param(
        {
            "vpa": build_vpa(
                update_mode="Off", spec={"startupBoost": {"cpu": {"type": "Factor", "factor": 2}}}
            )
        },
        admission([EMPTY_ANNOTATIONS, OBSERVED]),
        id="Off (matched for its startup boost): no requests, no limits, observed only",
    ),
    pytest.param(
        {"vpa": build_vpa(status={})},
        admission([EMPTY_ANNOTATIONS, OBSERVED]),
        id="no recommendation yet: observed containers only",
    ),
    pytest.param(
        {
            "vpa": build_vpa(
                container_policies=[{"containerName": "sidecar", "mode": "Off"}],
                status={"recommendation": recommendation(("app", "250m", "256Mi"))},
            )
        },
        admission(
            [
                *FULL_PATCH[:5],
                updates("container 0: cpu request, memory request, cpu limit, memory limit"),
                OBSERVED,
            ]
        ),
        id="container mode Off: no recommendation for it, left alone",
    ),
    pytest.param(
        {
            "vpa": build_vpa(
                container_policies=[{"containerName": "*", "controlledValues": "RequestsOnly"}]
            )
        },
        admission(
            [
                EMPTY_ANNOTATIONS,
                # 250m > limit 200m and 256Mi > limit 200Mi: capped to the limits; limits untouched.
                add("/spec/containers/0/resources/requests/cpu", "200m"),
                add("/spec/containers/0/resources/requests/memory", "200Mi"),
                add("/spec/containers/1/resources/requests/cpu", "25m"),
                add("/spec/containers/1/resources/requests/memory", "64Mi"),
                updates(
                    "container 0: cpu capped to container limit, memory capped to container limit,"
                    " cpu request, memory request; container 1: cpu request, memory request"
                ),
                OBSERVED,
            ]
        ),
        id="RequestsOnly: capped to the container limit, limits untouched",
    ),
    pytest.param(
        {
            "vpa": build_vpa(
                container_policies=[{"containerName": "app", "controlledResources": ["memory"]}]
            )
        },
        # Admission sets what the recommendation holds (cpu too), as upstream: only the
        # recommender reads controlledResources.
        admission(FULL_PATCH),
        id="controlledResources [memory] on one container: the recommendation's cpu still set",
    ),
    pytest.param(
        {
            "vpa": build_vpa(
                container_policies=[
                    {
                        "containerName": "app",
                        "maxAllowed": {"cpu": "150m"},
                        "minAllowed": {"memory": "300Mi"},
                    }
                ]
            )
        },
        admission(
            [
                EMPTY_ANNOTATIONS,
                # 250m -> maxAllowed 150m, limit 200m*150m/100m = 300m;
                # 256Mi -> minAllowed 300Mi, limit 200Mi*300Mi/100Mi = 600Mi.
                add("/spec/containers/0/resources/requests/cpu", "150m"),
                add("/spec/containers/0/resources/requests/memory", "300Mi"),
                add("/spec/containers/0/resources/limits/cpu", "300m"),
                add("/spec/containers/0/resources/limits/memory", "600Mi"),
                *FULL_PATCH[5:8],
                updates(
                    "container 0: cpu capped to maxAllowed, memory capped to minAllowed,"
                    " cpu request, memory request, cpu limit, memory limit;"
                    f" container 1: {NO_CPU_LIMIT}, cpu request, memory request, memory limit"
                ),
                OBSERVED,
            ]
        ),
        id="minAllowed / maxAllowed",
    ),
    pytest.param(
        {
            "vpa": build_vpa(),
            "limit_ranges": [
                builders.limit_ranges.typed_limit_range(
                    items=[{"type": "Container", "max": {"cpu": "400m"}}]
                )
            ],
        },
        admission(
            [
                EMPTY_ANNOTATIONS,
                # max limit 400m at ratio 2 -> max request 100m*400m/200m = 200m; limit 400m.
                add("/spec/containers/0/resources/requests/cpu", "200m"),
                add("/spec/containers/0/resources/requests/memory", "256Mi"),
                add("/spec/containers/0/resources/limits/cpu", "400m"),
                add("/spec/containers/0/resources/limits/memory", "512Mi"),
                *FULL_PATCH[5:8],
                updates(
                    "container 0: cpu capped to fit Max in container LimitRange, cpu request,"
                    " memory request, cpu limit, memory limit;"
                    f" container 1: {NO_CPU_LIMIT}, cpu request, memory request, memory limit"
                ),
                OBSERVED,
            ]
        ),
        id="container LimitRange max keeps the limit within it",
    ),
    pytest.param(
        {
            "vpa": build_vpa(),
            "limit_ranges": [
                builders.limit_ranges.typed_limit_range(
                    items=[{"type": "Container", "default": {"cpu": "300m", "memory": "300Mi"}}]
                )
            ],
        },
        admission(
            [
                *FULL_PATCH[:5],
                add("/spec/containers/1/resources/requests/cpu", "25m"),
                add("/spec/containers/1/resources/requests/memory", "64Mi"),
                # no cpu limit: the LimitRange default 300m stands in for it, scaled with the
                # request 50m -> 25m: 300m*25m/50m = 150m.
                add("/spec/containers/1/resources/limits/cpu", "150m"),
                add("/spec/containers/1/resources/limits/memory", "64Mi"),
                updates(
                    "container 0: cpu request, memory request, cpu limit, memory limit;"
                    " container 1: cpu request, memory request, cpu limit, memory limit"
                ),
                OBSERVED,
            ]
        ),
        id="LimitRange default limit stands in for a missing limit",
    ),
    pytest.param(
        {"vpa": build_vpa(), "hpas": [hpa_on("cpu")], "avoid_hpa_conflict": True},
        admission(
            [
                EMPTY_ANNOTATIONS,
                add("/spec/containers/0/resources/requests/memory", "256Mi"),
                add("/spec/containers/0/resources/limits/memory", "512Mi"),
                add("/spec/containers/1/resources/requests/memory", "64Mi"),
                add("/spec/containers/1/resources/limits/memory", "64Mi"),
                updates(
                    "container 0: memory request, memory limit;"
                    " container 1: memory request, memory limit"
                ),
                OBSERVED,
            ],
            frozenset({"cpu"}),
        ),
        id="HPA on cpu with the conflict check on: cpu left alone",
    ),
    pytest.param(
        {"vpa": build_vpa(), "hpas": [hpa_on("cpu")], "avoid_hpa_conflict": False},
        admission(FULL_PATCH),
        id="HPA on cpu with the conflict check off: upstream behaviour",
    ),
    pytest.param(
        {"vpa": build_vpa(), "hpas": [hpa_on("cpu", name="other")], "avoid_hpa_conflict": True},
        admission(FULL_PATCH),
        id="HPA on another workload: no conflict",
    ),
    pytest.param(
        {"vpa": build_vpa(), "largest_node_allocatable": {"cpu": q("200m"), "memory": q("1Gi")}},
        admission(
            [
                EMPTY_ANNOTATIONS,
                # cpu wanted 250m + 25m = 275m > 200m: each scaled by 200/275, rounded down:
                # 250*200//275 = 181m, 25*200//275 = 18m; app limit 200m*181m/100m = 362m.
                add("/spec/containers/0/resources/requests/cpu", "181m"),
                add("/spec/containers/0/resources/requests/memory", "256Mi"),
                add("/spec/containers/0/resources/limits/cpu", "362m"),
                add("/spec/containers/0/resources/limits/memory", "512Mi"),
                add("/spec/containers/1/resources/requests/cpu", "18m"),
                add("/spec/containers/1/resources/requests/memory", "64Mi"),
                add("/spec/containers/1/resources/limits/memory", "64Mi"),
                updates(
                    "container 0: cpu capped to fit the largest node, cpu request, memory request,"
                    " cpu limit, memory limit; container 1: cpu capped to fit the largest node,"
                    f" {NO_CPU_LIMIT}, cpu request, memory request, memory limit"
                ),
                OBSERVED,
            ]
        ),
        id="node fit on: cpu scaled to the largest node",
    ),
    pytest.param(
        {"vpa": build_vpa(), "largest_node_allocatable": {"cpu": q("4"), "memory": q("16Gi")}},
        admission(FULL_PATCH),
        id="node fit on, pod fits: unchanged",
    ),
    pytest.param(
        {"vpa": build_vpa(), "largest_node_allocatable": None},
        admission(FULL_PATCH),
        id="node fit off",
    ),
]


@pytest.mark.parametrize(("kwargs", "expected"), CASES)
def test_admit_pod(kwargs: dict[str, Any], expected: PodAdmission) -> None:
    the_pod = build_pod()
    before = copy.deepcopy(the_pod)
    arguments: dict[str, Any] = {"limit_ranges": [], **kwargs}
    result = admit_pod(pod=the_pod, **arguments)
    assert result == expected
    assert the_pod == before  # pure: the input is not modified
    apply_json_patch(the_pod, result.patches)  # and the patch applies


def test_container_without_resources_and_nothing_to_set_is_not_listed() -> None:
    """Upstream gives a container with neither requests nor limits ``resources: {}`` and an
    empty ``container i: `` entry even when nothing is set on it; kubescale writes neither."""
    the_pod = build_pod(containers=[*CONTAINERS, builders.pods.container("bare", image="bare:1")])
    result = admit_pod(pod=the_pod, vpa=build_vpa(status={}), limit_ranges=[])
    assert result.patches == [
        EMPTY_ANNOTATIONS,
        add("/metadata/annotations/vpaObservedContainers", "app, sidecar, bare"),
    ]


def test_applied_patch_gives_the_pod_upstreams_resources() -> None:
    the_pod = build_pod()
    result = admit_pod(pod=the_pod, vpa=build_vpa(), limit_ranges=[])
    patched = apply_json_patch(the_pod, result.patches)
    assert patched["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "250m", "memory": "256Mi"},
        "limits": {"cpu": "500m", "memory": "512Mi"},
    }
    assert patched["spec"]["containers"][1]["resources"] == {
        "requests": {"cpu": "25m", "memory": "64Mi"},
        "limits": {"memory": "64Mi"},
    }
    assert set(patched["metadata"]["annotations"]) == {"vpaUpdates", "vpaObservedContainers"}


def test_malformed_recommendation_raises_admission_error() -> None:
    vpa = build_vpa(status={"recommendation": recommendation(("app", "lots", "256Mi"))})
    with pytest.raises(PodAdmissionError):
        admit_pod(pod=build_pod(), vpa=vpa, limit_ranges=[])


# -- admit_pod reads its inputs and never writes them ------------------------------------------


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    posted=pods(),
    ranges=limit_ranges(),
    vpa=vpas(),
    node=NODES,
    boost=st.booleans(),
)
def test_admit_pod_leaves_its_inputs_as_they_were(
    posted: dict[str, Any],
    ranges: list[dict[str, Any]],
    vpa: dict[str, Any],
    node: dict[str, str] | None,
    boost: bool,
) -> None:
    """The callers hand ``admit_pod`` the informers' own objects (the updater, the autoscaler's
    requests-ahead) or the request's pod, uncopied: admission must not change any of them
    (nor a nested part: a shallow copy would not have protected those either)."""
    the_pod = stored_as(copy.deepcopy(posted), Pod)
    the_vpa = stored_as(copy.deepcopy(vpa), VerticalPodAutoscaler)
    the_ranges = [stored_as(copy.deepcopy(r), LimitRange) for r in ranges]
    with contextlib.suppress(PodAdmissionError):  # refused input is not changed either
        admit_pod(
            pod=the_pod,
            vpa=the_vpa,
            limit_ranges=the_ranges,
            largest_node_allocatable=(
                {name: Quantity.parse(value) for name, value in node.items()} if node else None
            ),
            startup_boost=StartupBoostSettings() if boost else None,
        )
    assert the_pod == posted
    assert the_vpa == vpa
    assert the_ranges == ranges
