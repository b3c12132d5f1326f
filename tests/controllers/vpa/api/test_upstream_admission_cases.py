"""Issue 11's differences with upstream's admission controller, each settled (README table).

Expected patches are worked out from upstream VPA 1.8's code
(``resource/pod/recommendation/recommendation_provider.go``, ``pkg/utils/vpa/capping.go``,
``resource/pod/patch/resource_updates.go``): admission patches every resource of a container's
(capped) recommendation whatever the container policy's ``mode`` and ``controlledResources``
say (only the recommender reads them), and capping -- the Pod LimitRange, which inserts
containers without a recommendation, and ``minAllowed`` -- applies to a container in
``mode: Off`` as to any other. Where upstream writes an annotation entry that names no update
(``container 1: ``), kubescale writes none (a deliberate deviation).
"""

from __future__ import annotations

import functools
from typing import Any

import pytest

from kubescale.controllers.vpa.api.pod_admission import admit_pod
from tests import builders

VPA = functools.partial(builders.vpas.typed_vpa, name="vpa", target=builders.vpas.target_ref())


def add(path: str, value: Any) -> dict[str, Any]:
    return {"op": "add", "path": path, "value": value}


def updates(text: str) -> dict[str, Any]:
    return add("/metadata/annotations/vpaUpdates", f"Pod resources updated by vpa: {text}")


def observed(names: str) -> dict[str, Any]:
    return add("/metadata/annotations/vpaObservedContainers", names)


NEW_ANNOTATIONS = add("/metadata/annotations", {})
NO_MEMORY_LIMIT = "memory: limit NOT set since originalLimit is nil or 0"


def container(name: str, **resources: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "image": "app", "resources": dict(resources)}


# (a) and (b): the recommendation holds memory only (e.g. written before the policy changed).
# Upstream sets the memory request -- the container has no limit, so GetProportionalLimit gives
# none and its "limit NOT set" annotations are dropped -- and names it.
MEMORY_ONLY = [
    NEW_ANNOTATIONS,
    add("/spec/containers/0/resources", {}),
    add("/spec/containers/0/resources/requests", {}),
    add("/spec/containers/0/resources/requests/memory", "300Mi"),
    updates("container 0: memory request"),
    observed("app"),
]


@pytest.mark.parametrize(
    "policy",
    [
        {"containerName": "app", "controlledResources": ["cpu"]},
        {"containerName": "app", "controlledResources": ["cpu"], "mode": "Off"},
    ],
    ids=["(a) controlledResources [cpu]", "(b) and mode Off"],
)
def test_admission_sets_what_the_recommendation_holds(policy: dict[str, Any]) -> None:
    the_vpa = VPA(targets={"app": {"memory": "300Mi"}}, container_policies=[policy])
    result = admit_pod(
        pod=builders.pods.typed_pod(containers=[{"name": "app", "image": "app"}]),
        vpa=the_vpa,
        limit_ranges=[],
    )
    assert result.patches == MEMORY_ONLY


@pytest.mark.parametrize("name", ["sidecar", "*"])
def test_c_a_mode_off_container_is_capped_by_the_pod_limit_range(name: str) -> None:
    # app recommends 500m; sidecar (mode Off) has no recommendation. Pod LimitRange max 600m.
    # capProportionallyToPodLimitRange inserts sidecar with its requests (100m). Target cpu:
    # limits app 200m x 500m / 100m = 1000m, sidecar 200m (request = recommendation) -> sum
    # 1200m > max 600m: each recommendation scaled by 600/1200, down: app 250m, sidecar 50m.
    # Limits: app 200m x 250m / 100m = 500m, sidecar 200m x 50m / 100m = 100m; total 600m.
    # GetProportionalLimit also reports the memory limit it could not set (no memory limit).
    policies = [{"containerName": name, "mode": "Off"}]
    if name == "*":
        policies.insert(0, {"containerName": "app", "mode": "Auto"})
    the_pod = builders.pods.typed_pod(
        containers=[
            container("app", requests={"cpu": "100m"}, limits={"cpu": "200m"}),
            container("sidecar", requests={"cpu": "100m"}, limits={"cpu": "200m"}),
        ]
    )
    result = admit_pod(
        pod=the_pod,
        vpa=VPA(targets={"app": {"cpu": "500m"}}, container_policies=policies),
        limit_ranges=[
            builders.limit_ranges.typed_limit_range(items=[{"type": "Pod", "max": {"cpu": "600m"}}])
        ],
    )
    assert result.patches == [
        NEW_ANNOTATIONS,
        add("/spec/containers/0/resources/requests/cpu", "250m"),
        add("/spec/containers/0/resources/limits/cpu", "500m"),
        add("/spec/containers/1/resources/requests/cpu", "50m"),
        add("/spec/containers/1/resources/limits/cpu", "100m"),
        updates(
            f"container 0: {NO_MEMORY_LIMIT}, cpu request, cpu limit;"
            f" container 1: {NO_MEMORY_LIMIT}, cpu request, cpu limit"
        ),
        observed("app, sidecar"),
    ]


def test_c_minallowed_raises_a_mode_off_container_with_a_recommendation() -> None:
    # A stale recommendation of 100m for a container now in mode Off with minAllowed 300m:
    # applyVPAPolicy raises it to 300m; the limit keeps the 1:2 ratio, 200m x 300m / 100m.
    the_pod = builders.pods.typed_pod(
        containers=[container("app", requests={"cpu": "100m"}, limits={"cpu": "200m"})]
    )
    the_vpa = VPA(
        targets={"app": {"cpu": "100m"}},
        container_policies=[{"containerName": "*", "mode": "Off", "minAllowed": {"cpu": "300m"}}],
    )
    result = admit_pod(pod=the_pod, vpa=the_vpa, limit_ranges=[])
    assert result.patches == [
        NEW_ANNOTATIONS,
        add("/spec/containers/0/resources/requests/cpu", "300m"),
        add("/spec/containers/0/resources/limits/cpu", "600m"),
        updates(
            f"container 0: cpu capped to minAllowed, {NO_MEMORY_LIMIT}, cpu request, cpu limit"
        ),
        observed("app"),
    ]


def test_d_a_container_given_nothing_gets_no_entry_and_no_patch() -> None:
    # Upstream adds "resources: {}" to "bare" and writes "container 1: " -- an entry naming no
    # update. kubescale leaves "bare" out of the patch and the annotation.
    the_pod = builders.pods.typed_pod(
        containers=[container("app", requests={"cpu": "100m"}), {"name": "bare", "image": "b"}]
    )
    result = admit_pod(pod=the_pod, vpa=VPA(targets={"app": {"cpu": "250m"}}), limit_ranges=[])
    assert result.patches == [
        NEW_ANNOTATIONS,
        add("/spec/containers/0/resources/requests/cpu", "250m"),
        updates("container 0: cpu request"),
        observed("app, bare"),
    ]


def test_d_no_entry_at_all_when_no_container_gets_anything() -> None:
    the_pod = builders.pods.typed_pod(containers=[{"name": "bare", "image": "b"}])
    result = admit_pod(pod=the_pod, vpa=VPA(targets={}), limit_ranges=[])
    assert result.patches == [NEW_ANNOTATIONS, observed("bare")]
