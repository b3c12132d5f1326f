"""What admission sets on a pod, against upstream's ``recommendation_provider_test.go``.

TestUpdateResourceRequests and TestGetContainersResources (the ``addAll=false`` admission cases)
are tabled with upstream's inputs and the exact quantity strings; the rest covers update mode
Off, container mode Off and controlledResources (not read by admission), status-first current
resources, annotation order, the pod-LimitRange insertion, and the two steps beyond upstream
(skipped resources for the HPA conflict, node fit).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubescale.controllers.vpa.api.current_resources import parse_resource_list
from kubescale.controllers.vpa.api.limit_ranges import LimitRangeItem
from kubescale.controllers.vpa.api.pod_resources import (
    ContainerResources,
    PodResources,
    capped_recommendation,
    pod_resources,
)
from kubescale.objects.pod import Pod
from kubescale.objects.quantities import Quantity
from kubescale.objects.vpa import VerticalPodAutoscaler, VerticalPodAutoscalerStatus
from tests import builders
from tests.builders.meta import stored_as

POD = functools.partial(
    builders.pods.typed_pod, name="pod", labels={"app": "testingApp"}, api_version=None
)
VPA = functools.partial(
    builders.vpas.typed_vpa,
    name="vpa1",
    target=builders.vpas.target_ref(name="app"),
    status={},
    api_version=None,
)

Resources = dict[str, str]


def container(
    name: str, requests: Resources | None = None, limits: Resources | None = None
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": name, "image": "app", "resources": resources}


def policy(name: str = "container1", **fields: Any) -> dict[str, Any]:
    return {"containerName": name, **fields}


def limit_range(**lists: Resources) -> LimitRangeItem:
    return LimitRangeItem(
        **{name: parse_resource_list(value) or {} for name, value in lists.items()}
    )


def texts(resources: Mapping[str, Quantity]) -> Resources:
    return {name: str(value) for name, value in resources.items()}


def run(
    the_pod: Pod,
    the_vpa: VerticalPodAutoscaler,
    *,
    container_lr: LimitRangeItem | None = None,
    pod_lr: LimitRangeItem | None = None,
    skip: frozenset[str] = frozenset(),
    allocatable: Resources | None = None,
) -> PodResources:
    return pod_resources(
        pod=the_pod,
        vpa=the_vpa,
        container_limit_range=container_lr,
        pod_limit_range=pod_lr,
        skip_resources=skip,
        largest_node_allocatable=parse_resource_list(allocatable) if allocatable else None,
    )


def single(result: PodResources) -> tuple[Resources, Resources]:
    (only,) = result.containers
    return texts(only.requests), texts(only.limits)


# -- TestUpdateResourceRequests ---------------------------------------------------------------

NAME = "container1"
BASE_MIN = {"cpu": "1", "memory": "100Mi"}
BASE_MAX = {"cpu": "3", "memory": "1Gi"}
# WithTargetResource("", "666"): a weird empty resource name that must be purged.
BASE_TARGET = {"cpu": "2", "memory": "200Mi", "": "666"}


def base_vpa(
    target: Resources | None = None,
    *,
    min_allowed: Resources | None = None,
    max_allowed: Resources | None = None,
    controlled_values: str | None = None,
) -> VerticalPodAutoscaler:
    fields: dict[str, Any] = {
        "minAllowed": BASE_MIN if min_allowed is None else min_allowed,
        "maxAllowed": BASE_MAX if max_allowed is None else max_allowed,
    }
    if controlled_values is not None:
        fields["controlledValues"] = controlled_values
    return VPA(
        targets={NAME: BASE_TARGET if target is None else target},
        container_policies=[policy(NAME, **fields)],
    )


UNINITIALIZED = POD(containers=[container(NAME)])
INITIALIZED = POD(containers=[container(NAME, requests={"cpu": "2", "memory": "100Mi"})])
LIMITS_MATCH_REQUESTS = POD(
    containers=[
        container(
            NAME, requests={"cpu": "2", "memory": "200Mi"}, limits={"cpu": "2", "memory": "200Mi"}
        )
    ]
)
DOUBLE_LIMIT = POD(
    containers=[
        container(
            NAME, requests={"cpu": "1", "memory": "100Mi"}, limits={"cpu": "2", "memory": "200Mi"}
        )
    ]
)
TENFOLD_LIMIT = POD(
    containers=[
        container(
            NAME, requests={"cpu": "1", "memory": "100Mi"}, limits={"cpu": "10", "memory": "1000Mi"}
        )
    ]
)
LIMITS_NO_REQUESTS = POD(containers=[container(NAME, limits={"cpu": "2", "memory": "200Mi"})])


@dataclass(frozen=True)
class Case:
    name: str
    pod: Pod
    vpa: VerticalPodAutoscaler
    requests: Resources
    limits: Resources = field(default_factory=dict)
    annotations: dict[str, tuple[str, ...]] = field(default_factory=dict)
    container_lr: LimitRangeItem | None = None


EMPTY_RECOMMENDATION = base_vpa()
EMPTY_RECOMMENDATION["status"]["recommendation"] = {}
NIL_RECOMMENDATION = base_vpa()
NIL_RECOMMENDATION["status"] = stored_as({"recommendation": None}, VerticalPodAutoscalerStatus)

UPDATE_CASES = [
    Case("uninitialized pod", UNINITIALIZED, base_vpa(), {"cpu": "2", "memory": "200Mi"}),
    Case(
        "target below min",
        UNINITIALIZED,
        base_vpa(
            {"cpu": "3", "memory": "150Mi"},
            min_allowed={"cpu": "4", "memory": "300Mi"},
            max_allowed={"cpu": "5", "memory": "1Gi"},
        ),
        {"cpu": "4", "memory": "300Mi"},
        annotations={NAME: ("cpu capped to minAllowed", "memory capped to minAllowed")},
    ),
    Case(
        "target above max",
        UNINITIALIZED,
        base_vpa(
            {"cpu": "7", "memory": "2Gi"},
            min_allowed={"cpu": "4", "memory": "300Mi"},
            max_allowed={"cpu": "5", "memory": "1Gi"},
        ),
        {"cpu": "5", "memory": "1Gi"},
        annotations={NAME: ("cpu capped to maxAllowed", "memory capped to maxAllowed")},
    ),
    Case("initialized pod", INITIALIZED, base_vpa(), {"cpu": "2", "memory": "200Mi"}),
    Case(
        "high memory",
        INITIALIZED,
        base_vpa(
            {"cpu": "2", "memory": "1000Mi"},
            min_allowed={},
            max_allowed={"cpu": "3", "memory": "3Gi"},
        ),
        {"cpu": "2", "memory": "1000Mi"},
    ),
    Case("empty recommendation", INITIALIZED, EMPTY_RECOMMENDATION, {}),
    Case("nil recommendation", INITIALIZED, NIL_RECOMMENDATION, {}),
    Case(
        "guaranteed resources",
        LIMITS_MATCH_REQUESTS,
        base_vpa(),
        {"cpu": "2", "memory": "200Mi"},
        {"cpu": "2", "memory": "200Mi"},
    ),
    Case(
        "guaranteed resources - no request",
        LIMITS_NO_REQUESTS,
        base_vpa(),
        {"cpu": "2", "memory": "200Mi"},
        {"cpu": "2", "memory": "200Mi"},
    ),
    Case(
        # 2000m x 2000m / 1000m = 4000m; 200Mi x 200Mi / 100Mi = 400Mi (BinarySI kept).
        "proportional limit - as default",
        DOUBLE_LIMIT,
        base_vpa(),
        {"cpu": "2", "memory": "200Mi"},
        {"cpu": "4", "memory": "400Mi"},
    ),
    Case(
        "proportional limit - set explicit",
        DOUBLE_LIMIT,
        base_vpa(controlled_values="RequestsAndLimits"),
        {"cpu": "2", "memory": "200Mi"},
        {"cpu": "4", "memory": "400Mi"},
    ),
    Case(
        "disabled limit scaling",
        DOUBLE_LIMIT,
        base_vpa(controlled_values="RequestsOnly"),
        {"cpu": "2", "memory": "200Mi"},
    ),
    Case(
        "disabled limit scaling - requests capped at limit",
        DOUBLE_LIMIT,
        base_vpa(
            {"cpu": "3", "memory": "500Mi"},
            max_allowed={"cpu": "5", "memory": "1Gi"},
            controlled_values="RequestsOnly",
        ),
        {"cpu": "2", "memory": "200Mi"},
        annotations={NAME: ("cpu capped to container limit", "memory capped to container limit")},
    ),
    Case(
        # cpu: 10000m x 1Ei-in-milli / 1000m > MaxInt64; memory 1000Mi x 1Ei / 100Mi = 10 x 2^60.
        "limit over int64",
        TENFOLD_LIMIT,
        base_vpa(
            {"cpu": "1Ei", "memory": "1Ei"},
            min_allowed={},
            max_allowed={"cpu": "1Ei", "memory": "1Ei"},
        ),
        # Beyond upstream: the cpu request 1Ei is above that limit, which the API server
        # refuses; the request is capped at the limit (memory 1Ei = 2^60 is below its limit).
        {"cpu": "9223372036854775807m", "memory": "1Ei"},
        {"cpu": "9223372036854775807m", "memory": "9223372036854775807"},
        annotations={
            NAME: (
                "cpu: failed to keep limit to request ratio; capping limit to int64",
                "memory: failed to keep limit to request ratio; capping limit to int64",
                "cpu capped to container limit",
            )
        },
    ),
    Case(
        # Defaults 2 / 100Mi equal the requests, so the limits equal the new requests.
        "proportional limit from default",
        INITIALIZED,
        base_vpa(),
        {"cpu": "2", "memory": "200Mi"},
        {"cpu": "2", "memory": "200Mi"},
        container_lr=limit_range(default={"cpu": "2", "memory": "100Mi"}),
    ),
]


@pytest.mark.parametrize("case", UPDATE_CASES, ids=[case.name for case in UPDATE_CASES])
def test_update_resource_requests(case: Case) -> None:
    result = run(case.pod, case.vpa, container_lr=case.container_lr)
    assert single(result) == (case.requests, case.limits)
    assert dict(result.annotations) == case.annotations


# -- TestGetContainersResources (addAll=false) --------------------------------------------------

FULL = container(
    "container", requests={"cpu": "1", "memory": "1M"}, limits={"cpu": "10", "memory": "10M"}
)
REQUESTS_ONLY_CONTAINER = container("container", requests={"cpu": "1", "memory": "1M"})

CONTAINERS_CASES = [
    Case(
        "CPU and Memory recommendation, request and limits set",
        POD(containers=[FULL]),
        VPA(targets={"container": {"cpu": "2", "memory": "2M"}}),
        {"cpu": "2", "memory": "2M"},
        {"cpu": "20", "memory": "20M"},
    ),
    Case(
        "CPU and Memory recommendation, only request set",
        POD(containers=[REQUESTS_ONLY_CONTAINER]),
        VPA(targets={"container": {"cpu": "2", "memory": "2M"}}),
        {"cpu": "2", "memory": "2M"},
    ),
    Case(
        "CPU only recommendation, request and limits set",
        POD(containers=[FULL]),
        VPA(targets={"container": {"cpu": "2"}}),
        {"cpu": "2"},
        {"cpu": "20"},
        {"container": ("memory: limit NOT set since recommendedRequest is nil or 0",)},
    ),
    Case(
        "Memory only recommendation, request and limits set",
        POD(containers=[FULL]),
        VPA(targets={"container": {"memory": "2M"}}),
        {"memory": "2M"},
        {"memory": "20M"},
        {"container": ("cpu: limit NOT set since recommendedRequest is nil or 0",)},
    ),
]


@pytest.mark.parametrize("case", CONTAINERS_CASES, ids=[case.name for case in CONTAINERS_CASES])
def test_get_containers_resources(case: Case) -> None:
    result = run(case.pod, case.vpa)
    assert single(result) == (case.requests, case.limits)
    assert dict(result.annotations) == case.annotations


# -- modes and policy ---------------------------------------------------------------------------


def test_update_mode_off_sets_nothing() -> None:
    # Upstream drops requests, limits and the capping annotations ("cpu capped to maxAllowed").
    result = run(
        DOUBLE_LIMIT,
        VPA(
            targets={NAME: {"cpu": "5"}},
            container_policies=[policy(maxAllowed={"cpu": "1"})],
            update_mode="Off",
        ),
    )
    assert result.containers == (ContainerResources(),)
    assert not result.annotations


@pytest.mark.parametrize("mode", ["Initial", "Recreate", "Auto", "InPlaceOrRecreate", None])
def test_other_update_modes_set_the_recommendation(mode: str | None) -> None:
    result = run(INITIALIZED, VPA(targets={NAME: {"cpu": "5"}}, update_mode=mode))
    assert single(result) == ({"cpu": "5"}, {})


def test_container_mode_off_is_capped_like_any_other() -> None:
    # Upstream admission does not read the container's mode: a recommendation for it (stale)
    # is capped and set. sidecar 5 -> maxAllowed 1; request == limit (100m) -> limit = 1.
    the_pod = POD(
        containers=[
            container("app", requests={"cpu": "1"}, limits={"cpu": "2"}),
            container("sidecar", requests={"cpu": "100m"}, limits={"cpu": "100m"}),
        ]
    )
    the_vpa = VPA(
        targets={"app": {"cpu": "3"}, "sidecar": {"cpu": "5"}},
        container_policies=[policy("sidecar", mode="Off", maxAllowed={"cpu": "1"})],
    )
    result = run(the_pod, the_vpa)
    app, sidecar = result.containers
    assert (texts(app.requests), texts(app.limits)) == ({"cpu": "3"}, {"cpu": "6"})
    assert (texts(sidecar.requests), texts(sidecar.limits)) == ({"cpu": "1"}, {"cpu": "1"})
    assert result.annotations["sidecar"] == (
        "cpu capped to maxAllowed",
        "memory: limit NOT set since originalLimit is nil or 0",
    )


def test_containers_without_recommendation_are_skipped() -> None:
    the_pod = POD(containers=[container("app"), container("other", requests={"cpu": "1"})])
    result = run(the_pod, VPA(targets={"app": {"cpu": "3"}}))
    assert [texts(c.requests) for c in result.containers] == [{"cpu": "3"}, {}]


def test_controlled_resources_are_the_recommenders_business() -> None:
    # A stale recommendation still holds cpu after controlledResources became [memory]:
    # admission sets it, as upstream (cpu limit 10 x 2 / 1 = 20, memory 10M x 2M / 1M = 20M).
    the_vpa = VPA(
        targets={"container": {"cpu": "2", "memory": "2M"}},
        container_policies=[policy("container", controlledResources=["memory"])],
    )
    result = run(POD(containers=[FULL]), the_vpa)
    assert single(result) == ({"cpu": "2", "memory": "2M"}, {"cpu": "20", "memory": "20M"})
    assert not result.annotations


def test_current_resources_come_from_the_container_status() -> None:
    # Spec: request 500m, limit 1. Status (resized in place): request 1, limit 4 -> ratio 4:
    # limit 4000m x 2000m / 1000m = 8.
    the_pod = POD(
        containers=[container(NAME, requests={"cpu": "500m"}, limits={"cpu": "1"})],
        status={
            "containerStatuses": [
                {"name": NAME, "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "4"}}}
            ]
        },
    )
    assert single(run(the_pod, VPA(targets={NAME: {"cpu": "2"}}))) == ({"cpu": "2"}, {"cpu": "8"})


def test_outputs_are_in_canonical_order_and_read_only() -> None:
    the_vpa = VPA(targets={NAME: {"memory": "1Gi", "ephemeral-storage": "1Gi", "cpu": "1"}})
    result = run(UNINITIALIZED, the_vpa)
    (only,) = result.containers
    assert list(only.requests) == ["cpu", "memory", "ephemeral-storage"]
    with pytest.raises(TypeError):
        only.requests["cpu"] = Quantity.parse("2")  # type: ignore[index]


def test_annotation_order_capping_node_fit_limits() -> None:
    # maxAllowed caps cpu 4 -> 3; the 2-cpu node lowers it to 3000m x 2000m / 3000m = 2;
    # the cpu limit follows the fitted request: 2000m x 2000m / 1000m = 4; memory has no limit.
    the_pod = POD(containers=[container(NAME, requests={"cpu": "1"}, limits={"cpu": "2"})])
    the_vpa = VPA(
        targets={NAME: {"cpu": "4", "memory": "1Gi"}},
        container_policies=[policy(maxAllowed={"cpu": "3"})],
    )
    result = run(the_pod, the_vpa, allocatable={"cpu": "2", "memory": "8Gi"})
    assert single(result) == ({"cpu": "2", "memory": "1Gi"}, {"cpu": "4"})
    assert result.annotations[NAME] == (
        "cpu capped to maxAllowed",
        "cpu capped to fit the largest node",
        "memory: limit NOT set since originalLimit is nil or 0",
    )


def test_pod_limit_range_inserts_and_patches_containers_without_recommendation() -> None:
    # Upstream: container2's requests become its recommendation and are scaled with container1's
    # (sumRecommendation 250M < min 500M: x2), so admission patches container2 too.
    # Limits: container1 100M x 400M / 50M = 800M; container2 100M x 100M / 50M = 200M; cpu
    # request == limit, so the cpu limit is the recommendation.
    the_pod = POD(
        containers=[
            container(
                "container1",
                requests={"cpu": "1", "memory": "50M"},
                limits={"cpu": "1", "memory": "100M"},
            ),
            container(
                "container2",
                requests={"cpu": "1", "memory": "50M"},
                limits={"cpu": "1", "memory": "100M"},
            ),
        ]
    )
    the_vpa = VPA(targets={"container1": {"cpu": "1", "memory": "200M"}})
    result = run(the_pod, the_vpa, pod_lr=limit_range(min={"memory": "500M"}))
    assert [(texts(c.requests), texts(c.limits)) for c in result.containers] == [
        ({"cpu": "1", "memory": "400M"}, {"cpu": "1", "memory": "800M"}),
        ({"cpu": "1", "memory": "100M"}, {"cpu": "1", "memory": "200M"}),
    ]
    assert not result.annotations


# -- beyond upstream: skipped resources (HPA conflict) -----------------------------------------

SKIP_POD = POD(
    containers=[
        container(
            NAME, requests={"cpu": "1", "memory": "1Gi"}, limits={"cpu": "2", "memory": "2Gi"}
        )
    ]
)
SKIP_VPA = VPA(
    targets={NAME: {"cpu": "2", "memory": "2Gi"}},
    container_policies=[policy(maxAllowed={"cpu": "1500m"})],
)


def test_without_skipped_resources_everything_is_set() -> None:
    # cpu capped to 1500m, limit 2000m x 1500m / 1000m = 3; memory 2Gi x 2Gi / 1Gi = 4Gi.
    result = run(SKIP_POD, SKIP_VPA)
    assert single(result) == ({"cpu": "1500m", "memory": "2Gi"}, {"cpu": "3", "memory": "4Gi"})
    assert result.annotations[NAME] == ("cpu capped to maxAllowed",)


def test_skipped_resources_keep_request_limit_and_annotations_out() -> None:
    result = run(SKIP_POD, SKIP_VPA, skip=frozenset({"cpu"}))
    assert single(result) == ({"memory": "2Gi"}, {"memory": "4Gi"})
    assert not result.annotations


def test_skipping_every_resource_sets_nothing() -> None:
    result = run(SKIP_POD, SKIP_VPA, skip=frozenset({"cpu", "memory"}))
    assert result.containers == (ContainerResources(),)
    assert not result.annotations


# -- beyond upstream: node fit -----------------------------------------------------------------


def test_node_fit_counts_unpatched_containers_and_scales_limits() -> None:
    # The sidecar (no recommendation) keeps 1 cpu: room 2000m - 1000m = 1000m for the app's
    # recommended 3 -> 3000m x 1000m / 3000m = 1000m. Its limit keeps ratio 2: 2000m.
    the_pod = POD(
        containers=[
            container("app", requests={"cpu": "500m"}, limits={"cpu": "1"}),
            container("sidecar", requests={"cpu": "1"}),
        ]
    )
    result = run(the_pod, VPA(targets={"app": {"cpu": "3"}}), allocatable={"cpu": "2"})
    app, sidecar = result.containers
    assert (texts(app.requests), texts(app.limits)) == ({"cpu": "1"}, {"cpu": "2"})
    assert sidecar == ContainerResources()
    # No memory limit while a cpu limit results: upstream reports why memory has none.
    assert result.annotations == {
        "app": (
            "cpu capped to fit the largest node",
            "memory: limit NOT set since originalLimit is nil or 0",
        )
    }


def test_node_fit_leaves_a_fitting_pod_alone() -> None:
    result = run(
        INITIALIZED, VPA(targets={NAME: {"cpu": "3", "memory": "1Gi"}}), allocatable={"cpu": "4"}
    )
    assert single(result) == ({"cpu": "3", "memory": "1Gi"}, {})
    assert not result.annotations


# -- capped_recommendation -----------------------------------------------------------------------


def test_capped_recommendation_shape() -> None:
    the_vpa = VPA(
        targets={NAME: {"cpu": "7", "memory": "50Mi"}},
        container_policies=[policy(maxAllowed={"cpu": "5"}, minAllowed={"memory": "100Mi"})],
    )
    the_vpa["status"]["recommendation"]["containerRecommendations"][0]["uncappedTarget"] = {
        "cpu": "7"
    }
    assert capped_recommendation(
        vpa=the_vpa, pod=UNINITIALIZED, container_limit_range=None, pod_limit_range=None
    ) == {
        "containerRecommendations": [
            {
                "containerName": NAME,
                "target": {"cpu": "5", "memory": "100Mi"},
                "uncappedTarget": {"cpu": "7"},
            }
        ]
    }


def test_capped_recommendation_without_recommendation() -> None:
    assert (
        capped_recommendation(
            vpa=VPA(targets=None),
            pod=UNINITIALIZED,
            container_limit_range=None,
            pod_limit_range=None,
        )
        == {}
    )
    with_policy = VPA(targets=None, container_policies=[policy(maxAllowed={"cpu": "1"})])
    assert capped_recommendation(
        vpa=with_policy, pod=UNINITIALIZED, container_limit_range=None, pod_limit_range=None
    ) == {"containerRecommendations": []}


# -- property -------------------------------------------------------------------------------------

_QUANTITY = st.sampled_from(["100m", "1", "250m", "2", "64Mi", "1Gi", "0", "3500m"])
_LIST = st.dictionaries(st.sampled_from(["cpu", "memory"]), _QUANTITY, max_size=2)


@given(
    st.lists(st.tuples(st.booleans(), _LIST, _LIST, _LIST), min_size=1, max_size=4),
    st.sampled_from([None, "RequestsOnly", "RequestsAndLimits"]),
)
def test_one_entry_per_container_and_only_recommended_containers_change(
    spec: list[tuple[bool, Resources, Resources, Resources]], values: str | None
) -> None:
    names = [f"c{index}" for index in range(len(spec))]
    the_pod = POD(
        containers=[
            *(
                container(name, requests, limits)
                for name, (_, requests, limits, _) in zip(names, spec, strict=True)
            )
        ]
    )
    targets = {name: target for name, (has, _, _, target) in zip(names, spec, strict=True) if has}
    fields = {} if values is None else {"controlledValues": values}
    result = run(the_pod, VPA(targets=targets, container_policies=[policy("*", **fields)]))
    assert len(result.containers) == len(names)
    for name, resources in zip(names, result.containers, strict=True):
        if name not in targets:
            assert resources == ContainerResources()
        assert set(resources.requests) <= set(targets.get(name, {}))
        if values == "RequestsOnly":
            assert not resources.limits
