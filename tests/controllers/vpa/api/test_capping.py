"""The capping processor, against upstream's ``pkg/utils/vpa/capping_test.go``.

Each table below names the upstream test it is taken from (TestApply,
TestRecommendationNotAvailable, TestRecommendationToLimitCapping,
TestRecommendationCappedToMinMaxPolicy, TestApplyCapsToLimitRange, TestApplyPodLimitRange,
TestApplyLimitRangeMinToRequest, TestCapPodMemoryWithUnderByteSplit); expected values carry the
arithmetic where it is not obvious, and the quantity strings are the ones upstream's Quantity
prints. Upstream runs ``applyPodLimitRange`` directly in TestApplyPodLimitRange; here the whole
processor runs, so containers without a recommendation get their requests inserted first (noted
where it matters). Hypothesis: every capped bound lies within minAllowed..maxAllowed.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubescale.controllers.vpa.api.capping import (
    CappedRecommendation,
    cap_recommendation,
    container_policy,
    controlled_values,
)
from kubescale.controllers.vpa.api.current_resources import parse_resource_list
from kubescale.controllers.vpa.api.limit_ranges import LimitRangeItem
from kubescale.objects.pod import Pod
from kubescale.objects.quantities import Quantity
from kubescale.objects.vpa import (
    PodResourcePolicy,
    RecommendedContainerResources,
    RecommendedPodResources,
)
from tests import builders

POD = functools.partial(builders.pods.typed_pod, name="pod1", api_version=None)

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


def entry(
    name: str,
    target: Resources | None = None,
    lower: Resources | None = None,
    upper: Resources | None = None,
) -> RecommendedContainerResources:
    result: RecommendedContainerResources = {"containerName": name}
    if target is not None:
        result["target"] = target
    if lower is not None:
        result["lowerBound"] = lower
    if upper is not None:
        result["upperBound"] = upper
    return result


def recommendation(*entries: RecommendedContainerResources) -> RecommendedPodResources:
    return {"containerRecommendations": list(entries)}


def limit_range(**lists: Resources) -> LimitRangeItem:
    parsed = {name: parse_resource_list(value) or {} for name, value in lists.items()}
    return LimitRangeItem(**parsed)


def texts(resources: Mapping[str, Quantity] | None) -> Resources | None:
    if resources is None:
        return None
    return {name: str(value) for name, value in resources.items()}


def cap(
    rec: RecommendedPodResources | None,
    the_pod: Pod,
    *,
    policy: PodResourcePolicy | None = None,
    container_lr: LimitRangeItem | None = None,
    pod_lr: LimitRangeItem | None = None,
) -> CappedRecommendation:
    capped = cap_recommendation(
        recommendation=rec,
        resource_policy=policy,
        pod=the_pod,
        container_limit_range=container_lr,
        pod_limit_range=pod_lr,
    )
    assert capped is not None
    return capped


def targets(capped: CappedRecommendation) -> dict[str, Resources | None]:
    return {c.container_name: texts(c.target) for c in capped.containers}


REQUESTS_ONLY: PodResourcePolicy = {
    "containerPolicies": [{"containerName": "*", "controlledValues": "RequestsOnly"}]
}
REQUESTS_AND_LIMITS: PodResourcePolicy = {
    "containerPolicies": [{"containerName": "*", "controlledValues": "RequestsAndLimits"}]
}


# -- TestApply / TestRecommendationNotAvailable ------------------------------------------------


def test_no_recommendation_and_no_policy_is_none() -> None:
    assert (
        cap_recommendation(
            recommendation=None,
            resource_policy=None,
            pod=POD(containers=[container("ctr-name")]),
            container_limit_range=None,
            pod_limit_range=None,
        )
        is None
    )


def test_recommendation_without_policy_is_unchanged() -> None:
    rec = recommendation(
        entry(
            "ctr-name",
            target={"cpu": "50", "memory": "100"},
            lower={"cpu": "500", "memory": "1k"},
            upper={"cpu": "1500", "memory": "2k"},
        )
    )
    capped = cap(rec, POD(containers=[container("ctr-name")]))
    (only,) = capped.containers
    assert texts(only.target) == {"cpu": "50", "memory": "100"}
    assert texts(only.lower_bound) == {"cpu": "500", "memory": "1k"}
    assert texts(only.upper_bound) == {"cpu": "1500", "memory": "2k"}
    assert not capped.annotations


def test_recommendation_for_another_container_is_dropped() -> None:
    rec = recommendation(entry("ctr-name-other", target={"cpu": "100m", "memory": "50000Mi"}))
    capped = cap(rec, POD(containers=[container("ctr-name")]))
    assert capped.containers == ()
    assert not capped.annotations


def test_policy_without_recommendation_gives_an_empty_one() -> None:
    capped = cap(None, POD(containers=[container("ctr-name")]), policy={"containerPolicies": []})
    assert capped.containers == ()


# -- TestRecommendationToLimitCapping ------------------------------------------------------------

LIMIT_CAPPING_POD = POD(containers=[container("ctr-name", limits={"cpu": "30", "memory": "70000"})])
LIMIT_CAPPING_REC = recommendation(
    entry(
        "ctr-name",
        target={"cpu": "20", "memory": "80000"},
        upper={"cpu": "100", "memory": "90000"},
    )
)


@dataclass(frozen=True)
class LimitCappingCase:
    name: str
    pod: Pod
    policy: PodResourcePolicy
    target: Resources
    upper: Resources
    annotations: tuple[str, ...] = ()


LIMIT_CAPPING_CASES = [
    LimitCappingCase(
        "no capping for default policy",
        LIMIT_CAPPING_POD,
        {},
        {"cpu": "20", "memory": "80k"},
        {"cpu": "100", "memory": "90k"},
    ),
    LimitCappingCase(
        "no capping for RequestsAndLimits policy",
        LIMIT_CAPPING_POD,
        REQUESTS_AND_LIMITS,
        {"cpu": "20", "memory": "80k"},
        {"cpu": "100", "memory": "90k"},
    ),
    LimitCappingCase(
        "capping for RequestsOnly policy",
        LIMIT_CAPPING_POD,
        REQUESTS_ONLY,
        {"cpu": "20", "memory": "70k"},
        {"cpu": "30", "memory": "70k"},
        ("memory capped to container limit",),
    ),
    LimitCappingCase(
        # The status limits (2.5 cpu, 60000 memory) win over the spec's (30, 70000).
        "capping for RequestsOnly policy for limits defined in containerStatus",
        POD(
            containers=[container("ctr-name", limits={"cpu": "30", "memory": "70000"})],
            status={
                "containerStatuses": [
                    {"name": "ctr-name", "resources": {"limits": {"cpu": "2.5", "memory": "60000"}}}
                ]
            },
        ),
        REQUESTS_ONLY,
        {"cpu": "2500m", "memory": "60k"},
        {"cpu": "2500m", "memory": "60k"},
        ("cpu capped to container limit", "memory capped to container limit"),
    ),
]


@pytest.mark.parametrize("case", LIMIT_CAPPING_CASES, ids=[c.name for c in LIMIT_CAPPING_CASES])
def test_recommendation_capped_to_the_container_limit(case: LimitCappingCase) -> None:
    capped = cap(LIMIT_CAPPING_REC, case.pod, policy=case.policy)
    (only,) = capped.containers
    assert texts(only.target) == case.target
    assert texts(only.upper_bound) == case.upper
    assert capped.annotations.get("ctr-name", ()) == case.annotations


# -- TestRecommendationCappedToMinMaxPolicy -------------------------------------------------------


def test_recommendation_capped_to_min_max_policy() -> None:
    rec = recommendation(
        entry(
            "ctr-name",
            target={"cpu": "300", "memory": "50000"},
            lower={"cpu": "200", "memory": "43000"},
            upper={"cpu": "500", "memory": "55000"},
        )
    )
    policy: PodResourcePolicy = {
        "containerPolicies": [
            {
                "containerName": "ctr-name",
                "minAllowed": {"cpu": "400", "memory": "40000"},
                "maxAllowed": {"cpu": "450", "memory": "45000"},
            }
        ]
    }
    capped = cap(rec, POD(containers=[container("ctr-name")]), policy=policy)
    (only,) = capped.containers
    assert texts(only.target) == {"cpu": "400", "memory": "45k"}
    assert texts(only.lower_bound) == {"cpu": "400", "memory": "43k"}
    assert texts(only.upper_bound) == {"cpu": "450", "memory": "45k"}
    # Only the Target's capping is annotated (the lower bound was raised silently).
    assert capped.annotations["ctr-name"] == (
        "cpu capped to minAllowed",
        "memory capped to maxAllowed",
    )


def test_zero_min_and_max_allowed_are_ignored() -> None:
    rec = recommendation(entry("c", target={"cpu": "300m", "memory": "1Gi"}))
    policy: PodResourcePolicy = {
        "containerPolicies": [
            {"containerName": "c", "minAllowed": {"cpu": "0"}, "maxAllowed": {"memory": "0"}}
        ]
    }
    capped = cap(rec, POD(containers=[container("c")]), policy=policy)
    assert targets(capped) == {"c": {"cpu": "300m", "memory": "1Gi"}}
    assert not capped.annotations


def test_container_policy_lookup_exact_name_wins_over_default() -> None:
    policy: PodResourcePolicy = {
        "containerPolicies": [
            {"containerName": "*", "maxAllowed": {"cpu": "1"}},
            {
                "containerName": "web",
                "maxAllowed": {"cpu": "2"},
                "controlledValues": "RequestsOnly",
            },
        ]
    }
    assert container_policy("web", policy) == policy["containerPolicies"][1]
    assert container_policy("sidecar", policy) == policy["containerPolicies"][0]
    assert container_policy("web", None) is None
    assert controlled_values("web", policy) == "RequestsOnly"
    assert controlled_values("sidecar", policy) == "RequestsAndLimits"
    rec = recommendation(entry("web", target={"cpu": "3"}), entry("sidecar", target={"cpu": "3"}))
    capped = cap(rec, POD(containers=[container("web"), container("sidecar")]), policy=policy)
    assert targets(capped) == {"web": {"cpu": "2"}, "sidecar": {"cpu": "1"}}


# -- TestApplyCapsToLimitRange ---------------------------------------------------------------------


def test_caps_to_container_limit_range() -> None:
    # max cpu 1 with request = limit = 1: max request 1000m x 1000m / 1000m = 1 -> target 2 -> 1.
    # min memory 500M with request = limit = 1G: min request 1G x 500M / 1G = 500M -> 200M -> 500M.
    rec = recommendation(entry("container", target={"cpu": "2", "memory": "200M"}))
    the_pod = POD(
        containers=[
            container(
                "container",
                requests={"cpu": "1", "memory": "1G"},
                limits={"cpu": "1", "memory": "1G"},
            )
        ]
    )
    capped = cap(rec, the_pod, container_lr=limit_range(max={"cpu": "1"}, min={"memory": "500M"}))
    assert targets(capped) == {"container": {"cpu": "1", "memory": "500M"}}
    assert capped.annotations["container"] == (
        "cpu capped to fit Max in container LimitRange",
        "memory capped to fit Min in container LimitRange",
    )


def test_container_limit_range_max_keeps_the_limit_to_request_ratio() -> None:
    # Request 500m, limit 1 (ratio 2): a 1-cpu max limit allows a 500m x 1000m / 1000m request.
    rec = recommendation(entry("c", target={"cpu": "2"}, upper={"cpu": "4"}, lower={"cpu": "100m"}))
    the_pod = POD(containers=[container("c", requests={"cpu": "500m"}, limits={"cpu": "1"})])
    capped = cap(rec, the_pod, container_lr=limit_range(max={"cpu": "1"}))
    (only,) = capped.containers
    assert texts(only.target) == {"cpu": "500m"}
    assert texts(only.upper_bound) == {"cpu": "500m"}
    assert texts(only.lower_bound) == {"cpu": "100m"}


def test_container_limit_range_default_limit_sets_the_ratio() -> None:
    # No limit: the LimitRange default 2 applies; request 1 -> ratio 2; max 3 -> request 1500m.
    rec = recommendation(entry("c", target={"cpu": "2"}))
    the_pod = POD(containers=[container("c", requests={"cpu": "1"})])
    capped = cap(rec, the_pod, container_lr=limit_range(max={"cpu": "3"}, default={"cpu": "2"}))
    assert targets(capped) == {"c": {"cpu": "1500m"}}


def test_container_without_limits_is_only_bounded_by_the_min() -> None:
    # GetBoundaryRequest is 0 (no bound) without a limit; the item's min still bounds the request.
    rec = recommendation(entry("c", target={"cpu": "50m", "memory": "10Gi"}))
    the_pod = POD(containers=[container("c", requests={"cpu": "10m"})])
    capped = cap(
        rec,
        the_pod,
        container_lr=limit_range(max={"cpu": "1", "memory": "1Gi"}, min={"cpu": "100m"}),
    )
    assert targets(capped) == {"c": {"cpu": "100m", "memory": "10Gi"}}
    assert capped.annotations["c"] == ("cpu capped to fit Min in container LimitRange",)


# -- TestApplyPodLimitRange ----------------------------------------------------------------------

TWO_CPU_CONTAINERS = POD(
    containers=[
        container("container1", requests={"cpu": "1"}, limits={"cpu": "1"}),
        container("container2", requests={"cpu": "1"}, limits={"cpu": "1"}),
    ]
)


def test_pod_limit_range_caps_target_cpu_to_max() -> None:
    # Limits = recommendations (request == limit): sumLimit 2 > max 1 -> each 1 x 1 / 2 = 500m.
    rec = recommendation(
        entry("container1", target={"cpu": "1"}), entry("container2", target={"cpu": "1"})
    )
    capped = cap(rec, TWO_CPU_CONTAINERS, pod_lr=limit_range(max={"cpu": "1"}))
    assert targets(capped) == {"container1": {"cpu": "500m"}, "container2": {"cpu": "500m"}}
    assert not capped.annotations


def test_pod_limit_range_caps_memory_to_min() -> None:
    # Request = limit = 1 byte: limits = recommendations = 1G each; min 4G > sumRecommendation
    # 2G -> each 1G x 4G / 2G = 2G.
    the_pod = POD(
        containers=[
            container("container1", requests={"memory": "1"}, limits={"memory": "1"}),
            container("container2", requests={"memory": "1"}, limits={"memory": "1"}),
        ]
    )
    rec = recommendation(
        entry("container1", target={"memory": "1G"}), entry("container2", target={"memory": "1G"})
    )
    capped = cap(rec, the_pod, pod_lr=limit_range(min={"memory": "4G"}))
    assert targets(capped) == {"container1": {"memory": "2G"}, "container2": {"memory": "2G"}}


def test_pod_limit_range_caps_memory_request_to_pod_min() -> None:
    # Limit 2 x request: limits 2G each, sumLimit 4G >= min 4G, but sumRecommendation 2G < 4G
    # -> each 1G x 4G / 2G = 2G.
    the_pod = POD(
        containers=[
            container("container1", requests={"memory": "1"}, limits={"memory": "2"}),
            container("container2", requests={"memory": "1"}, limits={"memory": "2"}),
        ]
    )
    rec = recommendation(
        entry("container1", target={"memory": "1G"}), entry("container2", target={"memory": "1G"})
    )
    capped = cap(rec, the_pod, pod_lr=limit_range(max={"memory": "10G"}, min={"memory": "4G"}))
    assert targets(capped) == {"container1": {"memory": "2G"}, "container2": {"memory": "2G"}}


def test_pod_limit_range_with_one_container_without_recommendation() -> None:
    # Upstream's direct applyPodLimitRange call leaves container2 out; the processor first
    # inserts container2's requests (1G) as its recommendation: sumRecommendation 2G,
    # sumLimit 4G -> both 1G x 4G / 2G = 2G.
    the_pod = POD(
        containers=[
            container("container1", requests={"memory": "1G"}, limits={"memory": "2G"}),
            container("container2", requests={"memory": "1G"}, limits={"memory": "2G"}),
        ]
    )
    rec = recommendation(entry("container1", target={"memory": "1G"}))
    capped = cap(rec, the_pod, pod_lr=limit_range(max={"memory": "10G"}, min={"memory": "4G"}))
    assert targets(capped) == {"container1": {"memory": "2G"}, "container2": {"memory": "2G"}}
    assert capped.containers[1].to_json() == {
        "containerName": "container2",
        "target": {"memory": "2G"},
    }


def test_pod_limit_range_with_extra_recommendation() -> None:
    # container1 is not in the pod: dropped. container2: limit 2 x 1G = 2G, 1G x 4G / 1G = 4G.
    the_pod = POD(
        containers=[container("container2", requests={"memory": "1"}, limits={"memory": "2"})]
    )
    rec = recommendation(
        entry("container1", target={"memory": "1G"}), entry("container2", target={"memory": "1G"})
    )
    capped = cap(rec, the_pod, pod_lr=limit_range(max={"memory": "10G"}, min={"memory": "4G"}))
    assert targets(capped) == {"container2": {"memory": "4G"}}


def test_pod_limit_range_min_rounds_cpu_up_to_the_next_millicore() -> None:
    # sumRecommendation 300m < min 1: 100m x 1000m / 300m = 333.3m -> 334m; 200m -> 666.7m ->
    # 667m; 334m + 667m = 1001m >= 1.
    the_pod = POD(
        containers=[
            container("a", requests={"cpu": "100m"}, limits={"cpu": "100m"}),
            container("b", requests={"cpu": "200m"}, limits={"cpu": "200m"}),
        ]
    )
    rec = recommendation(entry("a", target={"cpu": "100m"}), entry("b", target={"cpu": "200m"}))
    capped = cap(rec, the_pod, pod_lr=limit_range(min={"cpu": "1"}))
    assert targets(capped) == {"a": {"cpu": "334m"}, "b": {"cpu": "667m"}}


def test_pod_limit_range_max_rounds_cpu_down() -> None:
    # Limit 2 x request: limits 200m + 400m = 600m > max 500m -> recommendations scaled by
    # 500/600: 100m -> 83.3m -> 83m; 200m -> 166.7m -> 166m (limits then 166m + 332m <= 500m).
    the_pod = POD(
        containers=[
            container("a", requests={"cpu": "100m"}, limits={"cpu": "200m"}),
            container("b", requests={"cpu": "100m"}, limits={"cpu": "200m"}),
        ]
    )
    rec = recommendation(entry("a", target={"cpu": "100m"}), entry("b", target={"cpu": "200m"}))
    capped = cap(rec, the_pod, pod_lr=limit_range(max={"cpu": "500m"}))
    assert targets(capped) == {"a": {"cpu": "83m"}, "b": {"cpu": "166m"}}


def test_pod_limit_range_within_bounds_changes_nothing() -> None:
    rec = recommendation(entry("a", target={"cpu": "300m"}, upper={"cpu": "400m"}))
    the_pod = POD(containers=[container("a", requests={"cpu": "100m"}, limits={"cpu": "200m"})])
    capped = cap(rec, the_pod, pod_lr=limit_range(min={"cpu": "100m"}, max={"cpu": "1"}))
    (only,) = capped.containers
    assert texts(only.target) == {"cpu": "300m"}
    assert texts(only.upper_bound) == {"cpu": "400m"}


def test_pod_limit_range_scales_every_bound_and_leaves_missing_bounds_missing() -> None:
    # a: limit 2 x request. UpperBound: a's 1G -> limit 2G; b has no upper bound (0) and no
    # limit; sumLimit 2G, sumRecommendation 1G < min 4G -> a: 1G x 4G / 1G = 4G; b's missing
    # upper bound stays missing (upstream writes into its nil map and panics).
    # Target: a 200M (limit 400M), b's inserted 50M (no limit): sumRecommendation 250M ->
    # a: 200M x 4G / 250M = 3.2G, b: 50M x 4G / 250M = 800M.
    the_pod = POD(
        containers=[
            container("a", requests={"memory": "50M"}, limits={"memory": "100M"}),
            container("b", requests={"memory": "50M"}),
        ]
    )
    rec = recommendation(entry("a", target={"memory": "200M"}, upper={"memory": "1G"}))
    capped = cap(rec, the_pod, pod_lr=limit_range(min={"memory": "4G"}))
    a, b = capped.containers
    assert texts(a.target) == {"memory": "3200M"}
    assert texts(a.upper_bound) == {"memory": "4G"}
    assert a.lower_bound is None
    assert texts(b.target) == {"memory": "800M"}
    assert b.upper_bound is None
    assert b.lower_bound is None


def test_pod_limit_range_writes_a_zero_for_a_resource_the_recommendation_lacks() -> None:
    # Upstream quirk kept: a's target has no memory (0); scaling 0 x 1G / 100M writes 0 into it.
    # b: limit 2 x request -> 200M; sumRecommendation 100M < min 1G -> 100M x 1G / 100M = 1G.
    the_pod = POD(
        containers=[
            container("a", requests={"memory": "100M"}, limits={"memory": "200M"}),
            container("b", requests={"memory": "100M"}, limits={"memory": "200M"}),
        ]
    )
    rec = recommendation(
        entry("a", target={"cpu": "1"}), entry("b", target={"cpu": "1", "memory": "100M"})
    )
    capped = cap(rec, the_pod, pod_lr=limit_range(min={"memory": "1G"}))
    assert targets(capped) == {"a": {"cpu": "1", "memory": "0"}, "b": {"cpu": "1", "memory": "1G"}}


# -- TestApplyLimitRangeMinToRequest -------------------------------------------------------------


@dataclass(frozen=True)
class MinToRequestCase:
    name: str
    rec: RecommendedPodResources
    pod: Pod
    expect: dict[str, Resources]
    annotations: dict[str, tuple[str, ...]]
    container_lr: LimitRangeItem | None = None
    pod_lr: LimitRangeItem | None = None
    policy: PodResourcePolicy | None = field(default=None)


ONE_CONTAINER = POD(
    containers=[
        container(
            "container",
            requests={"cpu": "1", "memory": "50M"},
            limits={"cpu": "1", "memory": "100M"},
        )
    ]
)
ONE_REC = recommendation(entry("container", target={"cpu": "1", "memory": "200M"}))

MIN_TO_REQUEST_CASES = [
    MinToRequestCase(
        # min for the limit: 50M x 500M / 600M = 41666666; the item's min 500M is higher.
        "caps to min range if above container limit",
        ONE_REC,
        POD(
            containers=[
                container(
                    "container",
                    requests={"cpu": "1", "memory": "50M"},
                    limits={"cpu": "1", "memory": "600M"},
                )
            ]
        ),
        {"container": {"cpu": "1", "memory": "500M"}},
        {"container": ("memory capped to fit Min in container LimitRange",)},
        container_lr=limit_range(min={"memory": "500M"}),
    ),
    MinToRequestCase(
        "caps to container limit if below container limit",
        ONE_REC,
        ONE_CONTAINER,
        {"container": {"cpu": "1", "memory": "100M"}},
        {
            "container": (
                "memory capped to fit Min in container LimitRange",
                "memory capped to container limit",
            )
        },
        container_lr=limit_range(min={"memory": "500M"}),
        policy=REQUESTS_ONLY,
    ),
    MinToRequestCase(
        # Pod min: limit 100M x 200M / 50M = 400M; 200M x 500M / 200M = 500M; then the
        # RequestsOnly cap to the 100M limit (pod-LimitRange scaling is not annotated).
        "caps to pod limit if below pod limit",
        ONE_REC,
        ONE_CONTAINER,
        {"container": {"cpu": "1", "memory": "100M"}},
        {"container": ("memory capped to container limit",)},
        pod_lr=limit_range(min={"memory": "500M"}),
        policy=REQUESTS_ONLY,
    ),
    MinToRequestCase(
        # Status resources win: cpu 5m/5m and memory 50M/100M. Pod min cpu 2: 1 x 2 / 1 = 2,
        # memory 200M -> 500M, then both capped to the status limits.
        "uses container status limits when lower than both recommendation and pod limit range",
        ONE_REC,
        POD(
            containers=[
                container(
                    "container",
                    requests={"cpu": "10", "memory": "1G"},
                    limits={"cpu": "10", "memory": "1G"},
                )
            ],
            status={
                "containerStatuses": [
                    {
                        "name": "container",
                        "resources": {
                            "requests": {"cpu": "5m", "memory": "50M"},
                            "limits": {"cpu": "5m", "memory": "100M"},
                        },
                    }
                ]
            },
        ),
        {"container": {"cpu": "5m", "memory": "100M"}},
        {"container": ("cpu capped to container limit", "memory capped to container limit")},
        pod_lr=limit_range(min={"memory": "500M", "cpu": "2"}),
        policy=REQUESTS_ONLY,
    ),
    MinToRequestCase(
        # container2 gets its requests (1 cpu, 50M) inserted: limits 400M + 100M = 500M >= min,
        # sumRecommendation 250M < 500M -> 200M x 2 = 400M and 50M x 2 = 100M.
        "caps to pod limit one container with recommendation and one without",
        recommendation(entry("container1", target={"cpu": "1", "memory": "200M"})),
        POD(
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
        ),
        {
            "container1": {"cpu": "1", "memory": "400M"},
            "container2": {"cpu": "1", "memory": "100M"},
        },
        {},
        pod_lr=limit_range(min={"memory": "500M"}),
        policy=REQUESTS_AND_LIMITS,
    ),
    MinToRequestCase(
        # Limits 400M each >= min, sumRecommendation 400M < 500M -> 200M x 500M / 400M = 250M.
        "caps to pod limit two containers with recommendation",
        recommendation(
            entry("container1", target={"cpu": "1", "memory": "200M"}),
            entry("container2", target={"cpu": "1", "memory": "200M"}),
        ),
        POD(
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
        ),
        {
            "container1": {"cpu": "1", "memory": "250M"},
            "container2": {"cpu": "1", "memory": "250M"},
        },
        {},
        pod_lr=limit_range(min={"memory": "500M"}),
        policy=REQUESTS_AND_LIMITS,
    ),
]


@pytest.mark.parametrize("case", MIN_TO_REQUEST_CASES, ids=[c.name for c in MIN_TO_REQUEST_CASES])
def test_limit_range_min_to_request(case: MinToRequestCase) -> None:
    capped = cap(
        case.rec,
        case.pod,
        policy=case.policy,
        container_lr=case.container_lr,
        pod_lr=case.pod_lr,
    )
    assert targets(capped) == case.expect
    assert dict(capped.annotations) == case.annotations


# -- TestCapPodMemoryWithUnderByteSplit -----------------------------------------------------------

UNDER_BYTE_POD = POD(
    containers=[
        container("container-1", requests={"memory": "50M"}, limits={"memory": "50M"}),
        container("container-2", requests={"memory": "50M"}, limits={"memory": "50M"}),
    ]
)
UNDER_BYTE_REC = recommendation(
    entry("container-1", target={"memory": "1Gi"}), entry("container-2", target={"memory": "2Gi"})
)


def test_cap_pod_memory_to_max_with_under_byte_split() -> None:
    # 1Gi x 1Gi / 3Gi = 357913941.33 -> 357913941; 2Gi -> 715827882.67 -> 715827882 (down).
    capped = cap(UNDER_BYTE_REC, UNDER_BYTE_POD, pod_lr=limit_range(max={"memory": "1Gi"}))
    assert targets(capped) == {
        "container-1": {"memory": "357913941"},
        "container-2": {"memory": "715827882"},
    }


def test_cap_pod_memory_to_min_with_under_byte_split() -> None:
    # 1Gi x 4Gi / 3Gi = 1431655765.33 -> 1431655765; 2Gi -> 2863311530.67 -> 2863311530:
    # upstream's "round up to a full unit" re-rounds the floored byte count, a floor overall.
    capped = cap(UNDER_BYTE_REC, UNDER_BYTE_POD, pod_lr=limit_range(min={"memory": "4Gi"}))
    assert targets(capped) == {
        "container-1": {"memory": "1431655765"},
        "container-2": {"memory": "2863311530"},
    }


# -- shape --------------------------------------------------------------------------------------


def test_capped_entry_json_keeps_other_fields() -> None:
    rec = recommendation(
        {
            "containerName": "c",
            "target": {"cpu": "3"},
            "uncappedTarget": {"cpu": "3"},
            "lowerBound": {"cpu": "1"},
        }
    )
    policy: PodResourcePolicy = {
        "containerPolicies": [{"containerName": "c", "maxAllowed": {"cpu": "2"}}]
    }
    capped = cap(rec, POD(containers=[container("c")]), policy=policy)
    assert capped.containers[0].to_json() == {
        "containerName": "c",
        "target": {"cpu": "2"},
        "uncappedTarget": {"cpu": "3"},
        "lowerBound": {"cpu": "1"},
    }


def test_status_resources_without_limits_mean_no_limits() -> None:
    # containerStatuses[].resources is set but empty: no limits, so RequestsOnly caps nothing.
    the_pod = POD(
        containers=[container("c", limits={"cpu": "1"})],
        status={"containerStatuses": [{"name": "c", "resources": {}}]},
    )
    rec = recommendation(entry("c", target={"cpu": "2"}))
    capped = cap(rec, the_pod, policy=REQUESTS_ONLY)
    assert targets(capped) == {"c": {"cpu": "2"}}


def test_requests_only_cap_compares_milli_values() -> None:
    # 1000.5m has MilliValue 1001 (rounded up): not above a 1001m limit, so it stays.
    the_pod = POD(containers=[container("c", limits={"cpu": "1001m"})])
    rec = recommendation(entry("c", target={"cpu": "1000500u"}))
    assert targets(cap(rec, the_pod, policy=REQUESTS_ONLY)) == {"c": {"cpu": "1000500u"}}


# -- property -----------------------------------------------------------------------------------

_CPU = st.integers(min_value=1, max_value=64_000)  # milli-units
_MEMORY = st.integers(min_value=1, max_value=2**40)  # bytes


@st.composite
def _resources(draw: st.DrawFn) -> Resources | None:
    if not draw(st.booleans()):
        return None
    result: Resources = {}
    if draw(st.booleans()):
        result["cpu"] = f"{draw(_CPU)}m"
    if draw(st.booleans()):
        result["memory"] = str(draw(_MEMORY))
    return result


@st.composite
def _limit_range(draw: st.DrawFn) -> LimitRangeItem | None:
    if not draw(st.booleans()):
        return None
    maximum, minimum, default = draw(_resources()), draw(_resources()), draw(_resources())
    return limit_range(max=maximum or {}, min=minimum or {}, default=default or {})


@st.composite
def _capping_case(
    draw: st.DrawFn,
) -> tuple[
    RecommendedPodResources, Pod, PodResourcePolicy, LimitRangeItem | None, LimitRangeItem | None
]:
    names = [f"c{index}" for index in range(draw(st.integers(min_value=1, max_value=3)))]
    the_pod = POD(
        containers=[*(container(name, draw(_resources()), draw(_resources())) for name in names)]
    )
    entries = [
        entry(name, target=draw(_resources()), lower=draw(_resources()), upper=draw(_resources()))
        for name in names
        if draw(st.booleans())
    ]
    cpu_bounds = sorted((draw(_CPU), draw(_CPU)))
    memory_bounds = sorted((draw(_MEMORY), draw(_MEMORY)))
    policy: PodResourcePolicy = {
        "containerPolicies": [
            {
                "containerName": "*",
                "minAllowed": {"cpu": f"{cpu_bounds[0]}m", "memory": str(memory_bounds[0])},
                "maxAllowed": {"cpu": f"{cpu_bounds[1]}m", "memory": str(memory_bounds[1])},
            }
        ]
    }
    return recommendation(*entries), the_pod, policy, draw(_limit_range()), draw(_limit_range())


@given(_capping_case())
def test_capped_values_are_within_the_policy_unless_the_limit_range_wins(
    case: tuple[
        RecommendedPodResources,
        Pod,
        PodResourcePolicy,
        LimitRangeItem | None,
        LimitRangeItem | None,
    ],
) -> None:
    rec, the_pod, policy, container_lr, pod_lr = case
    capped = cap(rec, the_pod, policy=policy, container_lr=container_lr, pod_lr=pod_lr)
    bounds = policy["containerPolicies"][0]
    low = parse_resource_list(bounds["minAllowed"]) or {}
    high = parse_resource_list(bounds["maxAllowed"]) or {}
    overridden = {(conflict.container, conflict.resource) for conflict in capped.conflicts}
    for capped_container in capped.containers:
        for bound in (
            capped_container.target,
            capped_container.lower_bound,
            capped_container.upper_bound,
        ):
            for name, value in (bound or {}).items():
                if low[name] <= value <= high[name]:
                    continue
                # Only the container LimitRange may override the policy (it wins), and on the
                # Target the override is reported.
                key = (capped_container.container_name, name)
                assert container_lr is not None, key
                if bound is capped_container.target:
                    assert key in overridden, key
