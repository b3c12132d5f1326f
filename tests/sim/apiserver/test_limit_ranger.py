"""LimitRanger and the pod resource rules, as kube-apiserver applies them on pod create/resize.

Expected messages are upstream's (``plugin/pkg/admission/limitranger/admission.go``:
``minConstraint``, ``maxConstraint``, ``limitRequestRatioConstraint``, errors aggregated per
LimitRange and wrapped by ``admission.NewForbidden``; ``pkg/apis/core/validation``:
``ValidateResourceRequirements``). Values compare in milli-units, the ratio as float64 milli
values, printed with ``%f``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.aio import client
from kubernetes.aio.client.exceptions import ApiException

from kubescale.kube.resources import LIMIT_RANGES, PODS
from kubescale.sim.apiserver.limit_ranger import (
    LIMIT_RANGER_ANNOTATION,
    limit_range_violation,
    pod_limits,
    pod_requests,
    with_limit_range_defaults,
)
from kubescale.sim.apiserver.pod_validation import pod_resource_causes
from kubescale.sim.apiserver.server import ApiServer
from tests import builders
from tests.sim.apiserver.conftest import json_of, loose, status_of


def container(name: str = "app", **resources: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "image": "nginx", "resources": dict(resources)}


CPU_MAX_50M = {"type": "Container", "max": {"cpu": "50m"}}


@pytest.mark.parametrize(
    ("item", "resources", "expected"),
    [
        # 4 (4000m) > 50m: the limit is reported before the request.
        (CPU_MAX_50M, {"requests": {"cpu": "4"}, "limits": {"cpu": "4"}},
         "maximum cpu usage per Container is 50m, but limit is 4"),
        # limit 50m <= 50m, request 60m > 50m
        (CPU_MAX_50M, {"requests": {"cpu": "60m"}, "limits": {"cpu": "50m"}},
         "maximum cpu usage per Container is 50m, but request is 60m"),
        (CPU_MAX_50M, {"requests": {"cpu": "10m"}},
         "maximum cpu usage per Container is 50m.  No limit is specified"),
        (CPU_MAX_50M, {"requests": {"cpu": "50m"}, "limits": {"cpu": "50m"}}, None),
        # 0.1m reads as 1m (MilliValue rounds up): 1m > 0m? no — 1m <= 1m passes.
        ({"type": "Container", "max": {"cpu": "1m"}},
         {"requests": {"cpu": "0.1m"}, "limits": {"cpu": "1m"}}, None),
        ({"type": "Container", "min": {"memory": "64Mi"}}, {"limits": {"memory": "1Gi"}},
         "minimum memory usage per Container is 64Mi.  No request is specified"),
        ({"type": "Container", "min": {"memory": "64Mi"}},
         {"requests": {"memory": "32Mi"}, "limits": {"memory": "1Gi"}},
         "minimum memory usage per Container is 64Mi, but request is 32Mi"),
        # request 64Mi ok, limit 63Mi < 64Mi (a pod that pod validation would refuse first)
        ({"type": "Container", "min": {"memory": "64Mi"}},
         {"requests": {"memory": "64Mi"}, "limits": {"memory": "63Mi"}},
         "minimum memory usage per Container is 64Mi, but limit is 63Mi"),
        # 300m / 100m = 3.000000 > 2: float64(300)/float64(100)*1000 = 3000 > 2000
        ({"type": "Container", "maxLimitRequestRatio": {"cpu": "2"}},
         {"requests": {"cpu": "100m"}, "limits": {"cpu": "300m"}},
         "cpu max limit to request ratio per Container is 2, but provided ratio is 3.000000"),
        # 200m / 100m = 2.0 is allowed (not strictly above)
        ({"type": "Container", "maxLimitRequestRatio": {"cpu": "2"}},
         {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}}, None),
        ({"type": "Container", "maxLimitRequestRatio": {"cpu": "2"}}, {"limits": {"cpu": "1"}},
         "cpu max limit to request ratio per Container is 2, but no request is specified or "
         "request is 0"),
        ({"type": "Container", "maxLimitRequestRatio": {"cpu": "2"}},
         {"requests": {"cpu": "1"}},
         "cpu max limit to request ratio per Container is 2, but no limit is specified or "
         "limit is 0"),
    ],
)  # fmt: skip
def test_container_item_constraints(
    item: dict[str, Any], resources: dict[str, Any], expected: str | None
) -> None:
    assert (
        limit_range_violation(
            builders.pods.pod(containers=[container(**resources)]),
            [builders.limit_ranges.limit_range(items=[item])],
        )
        == expected
    )


def test_pod_item_sums_containers_and_counts_init_containers_as_the_scheduler_does() -> None:
    app = container("app", requests={"cpu": "300m"}, limits={"cpu": "400m"})
    proxy = container("proxy", requests={"cpu": "200m"}, limits={"cpu": "300m"})
    sidecar = {**container("log", requests={"cpu": "100m"}, limits={"cpu": "100m"}),
               "restartPolicy": "Always"}  # fmt: skip
    setup = container("setup", requests={"cpu": "900m"}, limits={"cpu": "900m"})
    subject = builders.pods.pod(containers=[app, proxy], init_containers=[sidecar, setup])
    # running: 300m + 200m + sidecar 100m = 600m; setup runs next to the sidecar: 900m + 100m
    # = 1 (1000m) -> the larger, 1.
    assert str(pod_requests(subject)["cpu"]) == "1"
    # limits: 400m + 300m + 100m = 800m vs 900m + 100m = 1 -> 1.
    assert str(pod_limits(subject)["cpu"]) == "1"
    item = {"type": "Pod", "max": {"cpu": "900m"}}
    assert limit_range_violation(subject, [builders.limit_ranges.limit_range(items=[item])]) == (
        "maximum cpu usage per Pod is 900m, but limit is 1"
    )


def test_several_errors_of_one_limit_range_are_bracketed_and_the_first_range_wins() -> None:
    subject = builders.pods.pod(
        containers=[container(requests={"cpu": "4", "memory": "1Gi"}, limits={"cpu": "4"})]
    )
    first = builders.limit_ranges.limit_range(
        name="a", items=[{"type": "Container", "max": {"cpu": "50m"}, "min": {"memory": "2Gi"}}]
    )
    second = builders.limit_ranges.limit_range(
        name="b", items=[{"type": "Container", "max": {"cpu": "1m"}}]
    )
    assert limit_range_violation(subject, [first, second]) == (
        "[minimum memory usage per Container is 2Gi, but request is 1Gi, "
        "maximum cpu usage per Container is 50m, but limit is 4]"
    )
    assert limit_range_violation(subject, [second]) == (
        "maximum cpu usage per Container is 1m, but limit is 4"
    )


def test_defaults_fill_what_containers_do_not_set_and_annotate_the_pod() -> None:
    ranges = [
        builders.limit_ranges.limit_range(
            items=[
                {
                    "type": "Container",
                    "default": {"cpu": "500m", "memory": "256Mi"},
                    "defaultRequest": {"cpu": "100m", "memory": "128Mi"},
                }
            ]
        )
    ]
    subject = builders.pods.pod(
        containers=[container("app", requests={"cpu": "200m"}), container("bare")]
    )
    defaulted = with_limit_range_defaults(subject, ranges)
    app, bare = defaulted["spec"]["containers"]
    assert app["resources"] == {
        "requests": {"cpu": "200m", "memory": "128Mi"},
        "limits": {"cpu": "500m", "memory": "256Mi"},
    }
    assert bare["resources"] == {
        "requests": {"cpu": "100m", "memory": "128Mi"},
        "limits": {"cpu": "500m", "memory": "256Mi"},
    }
    assert defaulted["metadata"]["annotations"][LIMIT_RANGER_ANNOTATION] == (
        "LimitRanger plugin set: memory request for container app; cpu, memory limit for "
        "container app; cpu, memory request for container bare; cpu, memory limit for "
        "container bare"
    )
    assert "annotations" not in subject["metadata"]  # the input is not changed


@pytest.mark.parametrize(
    ("resources", "causes"),
    [
        ({"requests": {"cpu": "4"}, "limits": {"cpu": "50m"}},
         [("FieldValueInvalid", "spec.containers[0].resources.requests",
           'Invalid value: "4": must be less than or equal to cpu limit of 50m')]),
        # a limit of 0 allows only a request of 0
        ({"requests": {"cpu": "100m"}, "limits": {"cpu": "0"}},
         [("FieldValueInvalid", "spec.containers[0].resources.requests",
           'Invalid value: "100m": must be less than or equal to cpu limit of 0')]),
        ({"requests": {"memory": "-1"}},
         [("FieldValueInvalid", "spec.containers[0].resources.requests[memory]",
           'Invalid value: "-1": must be greater than or equal to 0')]),
        ({"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "2"}},
         [("FieldValueInvalid", "spec.containers[0].resources.requests",
           'Invalid value: "1": must be equal to nvidia.com/gpu limit of 2')]),
        ({"requests": {"nvidia.com/gpu": "1"}},
         [("FieldValueRequired", "spec.containers[0].resources.limits",
           "Required value: Limit must be set for non overcommitable resources")]),
        ({"requests": {"cpu": "50m"}, "limits": {"cpu": "50m"}}, []),
    ],
)  # fmt: skip
def test_pod_validation_of_requests_and_limits(
    resources: dict[str, Any], causes: list[tuple[str, str, str]]
) -> None:
    assert pod_resource_causes(builders.pods.pod(containers=[container(**resources)])) == causes


# -- through the real client ----------------------------------------------------------------------


async def create_limit_range(api: Any, item: dict[str, Any]) -> dict[str, Any]:
    core = loose(client.CoreV1Api(api))
    created: dict[str, Any] = await json_of(
        await core.create_namespaced_limit_range_without_preload_content(
            "default", builders.limit_ranges.limit_range(items=[item])
        )
    )
    return created


async def post_pod(api: Any, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """POST the pod: the HTTP status and the body (the stored pod, or the Status)."""
    core = loose(client.CoreV1Api(api))
    response = await core.create_namespaced_pod_without_preload_content("default", body)
    answer: dict[str, Any] = await json_of(response)
    return response.status, answer


async def test_a_stored_limit_range_gets_its_container_defaults(api: Any) -> None:
    created = await create_limit_range(
        api, {"type": "Container", "max": {"cpu": "50m"}, "min": {"memory": "64Mi"}}
    )
    # SetDefaults_LimitRangeItem: default <- max; defaultRequest <- default, then <- min.
    assert created["spec"]["limits"] == [
        {
            "type": "Container",
            "max": {"cpu": "50m"},
            "min": {"memory": "64Mi"},
            "default": {"cpu": "50m"},
            "defaultRequest": {"cpu": "50m", "memory": "64Mi"},
        }
    ]


async def test_pod_create_is_defaulted_then_refused_above_the_max(
    api: Any, server: ApiServer
) -> None:
    await create_limit_range(api, {"type": "Container", "max": {"cpu": "50m"}})
    code, created = await post_pod(api, builders.pods.pod(containers=[container()]))
    assert code == 201
    assert created["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "50m"},
        "limits": {"cpu": "50m"},
    }
    assert created["metadata"]["annotations"] == {
        LIMIT_RANGER_ANNOTATION: "LimitRanger plugin set: cpu request for container app; "
        "cpu limit for container app"
    }
    too_big = builders.pods.pod(containers=[container(requests={"cpu": "4"}, limits={"cpu": "4"})])
    too_big["metadata"]["name"] = "web-1"
    code, status = await post_pod(api, too_big)
    assert (code, status["reason"]) == (403, "Forbidden")
    assert status["message"] == (
        'pods "web-1" is forbidden: maximum cpu usage per Container is 50m, but limit is 4'
    )
    assert server.store.peek(PODS, "web-1", "default") is None


async def test_a_request_above_its_limit_is_invalid(api: Any) -> None:
    code, status = await post_pod(
        api,
        builders.pods.pod(containers=[container(requests={"cpu": "1"}, limits={"cpu": "500m"})]),
    )
    assert (code, status["reason"]) == (422, "Invalid")
    assert status["message"] == (
        'Pod "web-0" is invalid: spec.containers[0].resources.requests: Invalid value: "1": '
        "must be less than or equal to cpu limit of 500m"
    )


async def test_a_resize_is_validated_but_not_defaulted(api: Any, server: ApiServer) -> None:
    code, created = await post_pod(
        api,
        builders.pods.pod(containers=[container(requests={"cpu": "20m"}, limits={"cpu": "40m"})]),
    )
    assert code == 201
    assert created["metadata"].get("annotations") is None
    await create_limit_range(api, {"type": "Container", "max": {"cpu": "50m"}})
    core = loose(client.CoreV1Api(api))
    patch = [{"op": "replace", "path": "/spec/containers/0/resources/limits/cpu", "value": "60m"}]
    with pytest.raises(ApiException) as caught:
        await core.patch_namespaced_pod_resize("web-0", "default", patch)
    assert status_of(caught.value)["message"] == (
        'pods "web-0" is forbidden: maximum cpu usage per Container is 50m, but limit is 60m'
    )
    patch = [{"op": "replace", "path": "/spec/containers/0/resources/requests/cpu", "value": "45m"}]
    with pytest.raises(ApiException) as caught:
        await core.patch_namespaced_pod_resize("web-0", "default", patch)
    assert status_of(caught.value)["message"] == (
        'Pod "web-0" is invalid: spec.containers[0].resources.requests: Invalid value: "45m": '
        "must be less than or equal to cpu limit of 40m"
    )
    patch[0]["value"] = "30m"
    await core.patch_namespaced_pod_resize("web-0", "default", patch)
    stored = server.store.get(PODS, "web-0", "default")
    assert stored["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "30m"}
    assert server.store.snapshots(LIMIT_RANGES, "default")[0]["spec"]["limits"][0]["default"] == {
        "cpu": "50m"
    }
    assert json.dumps(stored).count("limit-ranger") == 0
