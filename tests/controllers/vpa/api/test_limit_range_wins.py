"""The LimitRange wins: what the webhook sets always passes the API server (issue 19, issue 11).

Each case is a pod as kube-apiserver hands it to the webhook (API defaults and LimitRanger's
defaults applied, so valid), and the expected patch. Without this step upstream's pipeline
answers with a pod the API server refuses (the rows say with which error); the arithmetic
follows upstream's capping and ``GetProportionalLimit``, then the step of
:mod:`kubescale.controllers.vpa.api.limit_range_fit`.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

from kubescale.controllers.vpa.api.limit_range_fit import LimitRangeConflict
from kubescale.controllers.vpa.api.pod_admission import admit_pod
from kubescale.kube.resources import PODS
from kubescale.objects.admission_review import JsonPatchOperation
from kubescale.objects.limit_range import LimitRange
from kubescale.objects.pod import Pod
from kubescale.objects.quantities import Quantity
from kubescale.objects.vpa import VerticalPodAutoscaler
from kubescale.sim.apiserver.limit_ranger import (
    default_limit_range_items,
    limit_range_violation,
    with_limit_range_defaults,
)
from kubescale.sim.apiserver.patching import apply_json_patch
from kubescale.sim.apiserver.pod_validation import pod_resource_causes
from kubescale.sim.apiserver.strategy import apply_defaults
from tests import builders
from tests.builders.meta import stored_as

VPA = functools.partial(builders.vpas.vpa, name="vpa", target=builders.vpas.target_ref())

NO_MEMORY_LIMIT = "memory: limit NOT set since originalLimit is nil or 0"


def add(path: str, value: Any) -> dict[str, Any]:
    return {"op": "add", "path": path, "value": value}


def updates(text: str) -> dict[str, Any]:
    return add("/metadata/annotations/vpaUpdates", f"Pod resources updated by vpa: {text}")


def observed(names: str) -> dict[str, Any]:
    return add("/metadata/annotations/vpaObservedContainers", names)


def container(name: str, **resources: dict[str, str]) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "image": "app"}
    if resources:
        body["resources"] = dict(resources)
    return body


def limit_ranges(*items: dict[str, Any]) -> list[dict[str, Any]]:
    stored = {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "limits", "namespace": "default"},
        "spec": {"limits": list(items)},
    }
    default_limit_range_items(stored)  # as the API server stores it
    return [stored]


def seen_pod(ranges: list[dict[str, Any]], *containers: dict[str, Any]) -> dict[str, Any]:
    """The pod as the webhook receives it: API defaults, then LimitRanger's defaults."""
    posted = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web-0", "namespace": "default", "annotations": {}},
        "spec": {"containers": list(containers)},
    }
    apply_defaults(PODS, posted)
    return with_limit_range_defaults(posted, ranges)


def refusal(pod: dict[str, Any], ranges: list[dict[str, Any]]) -> str | None:
    checked = copy.deepcopy(pod)
    apply_defaults(PODS, checked)
    causes = pod_resource_causes(checked)
    if causes:
        return "; ".join(f"{field}: {message}" for _, field, message in causes)
    return limit_range_violation(checked, ranges)


def admitted(
    pod: dict[str, Any],
    the_vpa: dict[str, Any],
    ranges: list[dict[str, Any]],
    **options: Any,
) -> tuple[list[JsonPatchOperation], tuple[LimitRangeConflict, ...]]:
    assert refusal(pod, ranges) is None  # the API server takes the pod as it comes
    result = admit_pod(
        pod=stored_as(pod, Pod),
        vpa=stored_as(the_vpa, VerticalPodAutoscaler),
        limit_ranges=[stored_as(r, LimitRange) for r in ranges],
        **options,
    )
    assert refusal(apply_json_patch(pod, result.patches), ranges) is None  # and as patched
    return result.patches, result.limit_range_conflicts


def test_issue_19_min_allowed_above_the_limit_range_max() -> None:
    # LimitRange max cpu 50m (stored with default and defaultRequest 50m): the container gets
    # request = limit = 50m from LimitRanger. Recommendation 100m, minAllowed 4.
    # Upstream: the container LimitRange caps 100m to 50m x 50m / 50m = 50m, then minAllowed
    # raises it to 4 (limit 4, request == limit): "maximum cpu usage per Container is 50m, but
    # limit is 4". kubescale: the LimitRange again after the policy -> 50m, limit 50m.
    ranges = limit_ranges({"type": "Container", "max": {"cpu": "50m"}})
    pod = seen_pod(ranges, container("app"))
    patches, conflicts = admitted(
        pod,
        VPA(
            targets={"app": {"cpu": "100m"}},
            container_policies=[{"containerName": "*", "minAllowed": {"cpu": "4"}}],
        ),
        ranges,
    )
    assert patches == [
        add("/spec/containers/0/resources/requests/cpu", "50m"),
        add("/spec/containers/0/resources/limits/cpu", "50m"),
        updates(
            "container 0: cpu capped to fit Max in container LimitRange, cpu minAllowed "
            f"overridden to fit Max in container LimitRange, {NO_MEMORY_LIMIT}, cpu request, "
            "cpu limit"
        ),
        observed("app"),
    ]
    assert [c.describe() for c in conflicts] == [
        "container app: cpu minAllowed 4 is above what the container LimitRange allows "
        "(max 50m): the request is set to 50m"
    ]


def test_issue_11_a_limit_of_zero_caps_the_request() -> None:
    # limits.cpu "0": the request defaults to 0. Recommendation 100m. GetProportionalLimit sets
    # no limit (original limit 0, no memory limit either: no limits, no annotations), so
    # upstream writes request 100m: "must be less than or equal to cpu limit of 0".
    pod = seen_pod([], container("app", limits={"cpu": "0"}))
    patches, conflicts = admitted(
        pod, VPA(targets={"app": {"cpu": "100m"}}, container_policies=[]), []
    )
    assert patches == [
        add("/spec/containers/0/resources/requests/cpu", "0"),
        updates("container 0: cpu capped to container limit, cpu request"),
        observed("app"),
    ]
    assert conflicts == ()  # the container's own limit, no LimitRange involved: no Event


def test_requests_only_request_is_raised_to_keep_the_limit_request_ratio() -> None:
    # RequestsOnly keeps the limit 1; the request 100m would make limit/request 10 > 2
    # ("cpu max limit to request ratio per Container is 2, but provided ratio is 10.000000").
    # The smallest request passing is 1000m / 2 = 500m.
    ranges = limit_ranges({"type": "Container", "maxLimitRequestRatio": {"cpu": "2"}})
    pod = seen_pod(ranges, container("app", requests={"cpu": "600m"}, limits={"cpu": "1"}))
    policy = {"containerName": "app", "controlledValues": "RequestsOnly"}
    patches, conflicts = admitted(
        pod, VPA(targets={"app": {"cpu": "100m"}}, container_policies=[policy]), ranges
    )
    assert patches == [
        add("/spec/containers/0/resources/requests/cpu", "500m"),
        updates(
            "container 0: cpu raised to fit maxLimitRequestRatio in container LimitRange, "
            "cpu request"
        ),
        observed("app"),
    ]
    assert [(c.container, c.resource) for c in conflicts] == [("app", "cpu")]


def test_pod_limit_range_exceeded_after_min_allowed_leaves_the_resource_alone() -> None:
    # Pod max cpu 1. Each container 100m / 200m; the Pod LimitRange step passes (limits 400m).
    # minAllowed 400m raises both to 400m, limits 200m x 400m / 100m = 800m each: 1600m > 1
    # ("maximum cpu usage per Pod is 1, but limit is 1600m"). cpu is left as it was in both;
    # memory (no memory limits) is still set.
    ranges = limit_ranges({"type": "Pod", "max": {"cpu": "1"}})
    both = {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}}
    pod = seen_pod(ranges, container("app", **both), container("sidecar", **both))
    the_vpa = VPA(
        targets={"app": {"cpu": "100m", "memory": "128Mi"}, "sidecar": {"cpu": "100m"}},
        container_policies=[{"containerName": "*", "minAllowed": {"cpu": "400m"}}],
    )
    patches, conflicts = admitted(pod, the_vpa, ranges)
    assert patches == [
        add("/spec/containers/0/resources/requests/memory", "128Mi"),
        updates(
            "container 0: memory: limit NOT set since originalLimit is nil or 0, cpu left "
            "unchanged to fit Pod LimitRange, memory request"
        ),
        observed("app, sidecar"),
    ]
    assert [c.describe() for c in conflicts] == [
        "cpu left as it was in every container: maximum cpu usage per Pod is 1, but limit is 1600m"
    ]


def test_node_fit_never_goes_below_the_limit_range_min() -> None:
    # LimitRange min cpu 200m. Request 200m / limit 400m; recommendation 1; the largest node
    # has 100m: node fit lowers the request to 100m (limit 400m x 100m / 200m = 200m), below
    # the min ("minimum cpu usage per Container is 200m, but request is 100m"). The request goes
    # back to 200m; the limit 200m stays within [200m, ...].
    ranges = limit_ranges({"type": "Container", "min": {"cpu": "200m"}})
    pod = seen_pod(ranges, container("app", requests={"cpu": "200m"}, limits={"cpu": "400m"}))
    patches, conflicts = admitted(
        pod,
        VPA(targets={"app": {"cpu": "1"}}, container_policies=[]),
        ranges,
        largest_node_allocatable={"cpu": Quantity.parse("100m")},
    )
    assert patches == [
        add("/spec/containers/0/resources/requests/cpu", "200m"),
        add("/spec/containers/0/resources/limits/cpu", "200m"),
        updates(
            f"container 0: cpu capped to fit the largest node, {NO_MEMORY_LIMIT}, cpu capped to "
            "fit Min in container LimitRange, cpu request, cpu limit"
        ),
        observed("app"),
    ]
    assert [(c.container, c.resource) for c in conflicts] == [("app", "cpu")]


def test_a_resource_that_cannot_be_overcommitted_is_never_changed() -> None:
    # A recommendation for nvidia.com/gpu would set a request unequal to its limit ("must be
    # equal to nvidia.com/gpu limit of 1"); it is left alone, cpu is set.
    gpu = {"nvidia.com/gpu": "1"}
    pod = seen_pod([], container("app", requests={"cpu": "100m", **gpu}, limits=gpu))
    patches, _ = admitted(
        pod, VPA(targets={"app": {"cpu": "200m", "nvidia.com/gpu": "2"}}, container_policies=[]), []
    )
    assert patches == [
        add("/spec/containers/0/resources/requests/cpu", "200m"),
        updates(
            "container 0: nvidia.com/gpu left unchanged: requests must equal limits, cpu request"
        ),
        observed("app"),
    ]
