"""Update priority of the VPA updater: which VPAs/pods, acceptance thresholds, ordering and
EvictionRequirements (upstream ``pkg/updater/priority`` rules; cases modelled on its tests:
update_priority_calculator_test.go, priority_processor_test.go,
scaling_direction_pod_eviction_admission_test.go). Pure: no API server."""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubescale.controllers.vpa.api.limit_ranges import merged_limit_range_item
from kubescale.controllers.vpa.api.vpa_policy import update_mode
from kubescale.controllers.vpa.updater.update_priority import (
    UpdatePriority,
    UpdateSettings,
    eviction_requirements_admit,
    observed_containers,
    parse_observed_containers,
    pod_is_updatable,
    pod_priority,
    prioritized_pods,
    quick_oom,
    update_priority,
    vpa_is_updated,
)
from kubescale.objects.pod import Pod
from tests import builders

START = datetime(2026, 1, 1, tzinfo=UTC)
SETTINGS = UpdateSettings()


def _ts(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def running_status(
    *, start: datetime | None = START, statuses: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """A Running pod's status: ``startTime`` from ``start`` and ``containerStatuses`` from
    ``statuses``, each when given."""
    status: dict[str, Any] = {"phase": "Running"}
    if start is not None:
        status["startTime"] = _ts(start)
    if statuses is not None:
        status["containerStatuses"] = statuses
    return status


running_pod = functools.partial(
    builders.pods.typed_pod,
    name="pod",
    containers=[builders.pods.container(requests={})],
    node_name="n1",
    status=running_status(),
    api_version=None,
)
"""A Running pod ``pod`` on ``n1``, started at ``START``, one container ``app`` requesting
nothing (each row gives its containers, annotations, status)."""


def entry(
    container: str = "app",
    *,
    target: dict[str, str],
    lower: dict[str, str] | None = None,
    upper: dict[str, str] | None = None,
) -> dict[str, Any]:
    result: dict[str, Any] = {"containerName": container, "target": target}
    if lower is not None:
        result["lowerBound"] = lower
    if upper is not None:
        result["upperBound"] = upper
    return result


build_vpa = functools.partial(
    builders.vpas.typed_vpa, spec={}, recommendations=[], api_version=None
)
"""A VPA ``default/vpa`` with a (possibly empty) spec and recommendation."""


def oom_status(name: str, *, ran: timedelta, finished: datetime) -> dict[str, Any]:
    return {
        "name": name,
        "lastState": {
            "terminated": {
                "reason": "OOMKilled",
                "startedAt": _ts(finished - ran),
                "finishedAt": _ts(finished),
            }
        },
    }


# -- modes and pods -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "gate", "expected"),
    [
        (None, False, True),  # GetUpdateMode default: Recreate
        ("Recreate", False, True),
        ("Auto", False, True),
        ("InPlaceOrRecreate", False, True),
        ("InPlace", False, False),
        ("InPlace", True, True),
        ("Off", True, False),
        ("Initial", True, False),
    ],
)
def test_vpa_modes_acted_on(mode: str | None, gate: bool, expected: bool) -> None:
    policy = {} if mode is None else {"updateMode": mode}
    vpa = build_vpa(spec={"updatePolicy": policy})
    assert vpa_is_updated(vpa, in_place_gate=gate) is expected


def test_update_mode_defaults_to_recreate() -> None:
    assert update_mode({"spec": {}}) == "Recreate"
    assert update_mode({"spec": {"updatePolicy": {"updateMode": ""}}}) == "Recreate"
    assert update_mode({"spec": {"updatePolicy": {"updateMode": "Off"}}}) == "Off"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({}, True),
        ({"spec": {"nodeName": ""}}, False),
        ({"spec": {}}, False),
        ({"status": {"phase": "Succeeded"}}, False),
        ({"status": {"phase": "Failed"}}, False),
        ({"status": {"phase": "Pending"}}, True),
        ({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}, False),
    ],
)
def test_pods_looked_at(change: dict[str, dict[str, Any]], expected: bool) -> None:
    pod = builders.meta.json_body(
        running_pod(containers=[builders.pods.container(requests={"cpu": "1"})])
    )
    for key, value in change.items():
        if key == "spec" and "nodeName" not in value:
            pod["spec"].pop("nodeName")
        else:
            pod[key].update(value)
    assert pod_is_updatable(builders.meta.stored_as(pod, Pod)) is expected


# -- vpaObservedContainers ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", frozenset()),
        ("app", frozenset({"app"})),
        ("app, sidecar-1", frozenset({"app", "sidecar-1"})),
        ("app,sidecar", None),  # separator is ", ": "app,sidecar" is not a DNS-1123 label
        ("App", None),
        ("-app", None),
        ("app-", None),
        ("a" * 63, frozenset({"a" * 63})),
        ("a" * 64, None),
        ("app, ", None),
    ],
)
def test_parse_observed_containers(value: str, expected: frozenset[str] | None) -> None:
    assert parse_observed_containers(value) == expected


def test_observed_containers_of_pod() -> None:
    assert observed_containers(running_pod()) is None
    assert observed_containers(running_pod(annotations={"other": "x"})) is None
    assert observed_containers(
        running_pod(annotations={"vpaObservedContainers": "a, b"})
    ) == frozenset({"a", "b"})
    assert observed_containers(running_pod(annotations={"vpaObservedContainers": "B_"})) is None


# -- GetUpdatePriority --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("requests", "rec", "expected"),
    [
        # cpu 2 -> 10: |2000-10000|/2000 = 4
        ({"cpu": "2"}, entry(target={"cpu": "10"}), UpdatePriority(False, True, 4.0)),
        # cpu 4 -> 10: 6/4 = 1.5
        ({"cpu": "4"}, entry(target={"cpu": "10"}), UpdatePriority(False, True, 1.5)),
        # scale down, within bounds: 10 -> 5, diff 0.5
        (
            {"cpu": "10"},
            entry(target={"cpu": "5"}, lower={"cpu": "1"}, upper={"cpu": "10"}),
            UpdatePriority(False, False, 0.5),
        ),
        # above upperBound
        (
            {"cpu": "10"},
            entry(target={"cpu": "5"}, lower={"cpu": "1"}, upper={"cpu": "6"}),
            UpdatePriority(True, False, 0.5),
        ),
        # below lowerBound
        (
            {"cpu": "1"},
            entry(target={"cpu": "5"}, lower={"cpu": "2"}, upper={"cpu": "6"}),
            UpdatePriority(True, True, 4.0),
        ),
        # equal: nothing to do
        ({"cpu": "4"}, entry(target={"cpu": "4"}), UpdatePriority(False, False, 0.0)),
        # two resources sum their relative diffs: cpu 0.5 + memory 1.0
        (
            {"cpu": "2", "memory": "100Mi"},
            entry(target={"cpu": "3", "memory": "200Mi"}),
            UpdatePriority(False, True, 1.5),
        ),
        # missing memory request: ScaleUp and outside range; ΣReq floors at 1 milli-unit
        (
            {"cpu": "1"},
            entry(target={"cpu": "1", "memory": "1"}),
            UpdatePriority(True, True, 999.0),
        ),
        # a resource only in the request, not in the target, does not count
        (
            {"cpu": "1", "memory": "1Gi"},
            entry(target={"cpu": "1"}),
            UpdatePriority(False, False, 0.0),
        ),
        # no recommendation for the container
        ({"cpu": "1"}, entry("other", target={"cpu": "5"}), UpdatePriority(False, False, 0.0)),
    ],
)
def test_update_priority_single_container(
    requests: dict[str, str], rec: dict[str, Any], expected: UpdatePriority
) -> None:
    assert (
        update_priority(
            pod=running_pod(containers=[builders.pods.container(requests=requests)]),
            recommendation=builders.vpas.pod_recommendation(rec),
        )
        == expected
    )


def test_update_priority_sums_over_containers() -> None:
    pod = running_pod(
        containers=[
            {"name": "a", "resources": {"requests": {"cpu": "1"}}},
            {"name": "b", "resources": {"requests": {"cpu": "3"}}},
        ]
    )
    # ΣReq 4000m, ΣRec 2000m + 1000m: |4000-3000|/4000; one container scales up
    rec = builders.vpas.pod_recommendation(
        entry("a", target={"cpu": "2"}), entry("b", target={"cpu": "1"})
    )
    assert update_priority(pod=pod, recommendation=rec) == UpdatePriority(False, True, 0.25)


def test_update_priority_uses_applied_resources_from_status() -> None:
    pod = running_pod(containers=[builders.pods.container(requests={"cpu": "1"})])
    pod["status"]["containerStatuses"] = [{"name": "app", "resources": {"requests": {"cpu": "4"}}}]
    rec = builders.vpas.pod_recommendation(entry(target={"cpu": "4"}))
    assert update_priority(pod=pod, recommendation=rec) == UpdatePriority(False, False, 0.0)


def test_update_priority_counts_init_containers() -> None:
    pod = running_pod(containers=[builders.pods.container(requests={"cpu": "1"})])
    pod["spec"]["initContainers"] = [{"name": "init", "resources": {"requests": {"cpu": "1"}}}]
    rec = builders.vpas.pod_recommendation(
        entry(target={"cpu": "1"}), entry("init", target={"cpu": "3"})
    )
    assert update_priority(pod=pod, recommendation=rec) == UpdatePriority(False, True, 1.0)


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        (None, UpdatePriority(False, True, 0.5)),  # both: |2000-3000|/2000
        ("a", UpdatePriority(False, True, 1.0)),  # a only: 1 -> 2
        ("b", UpdatePriority(False, False, 0.0)),  # b only: already at target
        ("", UpdatePriority(False, False, 0.0)),  # none observed
        ("a,b", UpdatePriority(False, True, 0.5)),  # unparseable -> all: |2000-3000|/2000
    ],
)
def test_update_priority_observed_containers(
    annotation: str | None, expected: UpdatePriority
) -> None:
    pod = running_pod(
        containers=[
            {"name": "a", "resources": {"requests": {"cpu": "1"}}},
            {"name": "b", "resources": {"requests": {"cpu": "1"}}},
        ],
        annotations=None if annotation is None else {"vpaObservedContainers": annotation},
    )
    rec = builders.vpas.pod_recommendation(
        entry("a", target={"cpu": "2"}), entry("b", target={"cpu": "1"})
    )
    result = update_priority(pod=pod, recommendation=rec)
    assert result == expected


# -- AddPod acceptance --------------------------------------------------------------------------


def _accepted(pod: Pod, rec: dict[str, Any], now: datetime, **kw: Any) -> bool:
    settings = UpdateSettings(**kw)
    vpa = build_vpa(recommendations=[rec])
    return (
        pod_priority(
            vpa=vpa,
            pod=pod,
            recommendation=builders.vpas.pod_recommendation(rec),
            now=now,
            settings=settings,
        )
        is not None
    )


IN_RANGE = entry(target={"cpu": "1100m"}, lower={"cpu": "500m"}, upper={"cpu": "2"})


@pytest.mark.parametrize(
    ("request_cpu", "age", "expected"),
    [
        ("1", timedelta(hours=12), True),  # diff exactly 0.1 at exactly 12 h
        ("1", timedelta(hours=12) - timedelta(seconds=1), False),  # too young
        ("1", timedelta(hours=24), True),
        ("1001m", timedelta(hours=24), False),  # diff 99/1001 < 0.1
        ("1100m", timedelta(hours=24), False),  # diff 0
    ],
)
def test_lifetime_and_min_change_thresholds(
    request_cpu: str, age: timedelta, expected: bool
) -> None:
    pod = running_pod(containers=[builders.pods.container(requests={"cpu": request_cpu})])
    assert _accepted(pod, IN_RANGE, START + age) is expected


def test_missing_start_time_rejects_in_range_pod() -> None:
    pod = running_pod(
        containers=[builders.pods.container(requests={"cpu": "1"})],
        status=running_status(start=None),
    )
    assert not _accepted(pod, IN_RANGE, START + timedelta(days=2))


def test_outside_range_accepted_young_and_without_start_time() -> None:
    rec = entry(target={"cpu": "5"}, lower={"cpu": "1"}, upper={"cpu": "6"})
    assert _accepted(
        running_pod(containers=[builders.pods.container(requests={"cpu": "10"})]),
        rec,
        START + timedelta(hours=11),
    )
    assert _accepted(
        running_pod(
            containers=[builders.pods.container(requests={"cpu": "10"})],
            status=running_status(start=None),
        ),
        rec,
        START,
    )


def _unplaced(pod: Pod) -> Pod:
    """``pod`` as the scheduler left it: no node, no start time, PodScheduled False."""
    pod["spec"].pop("nodeName")
    pod["status"] = {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
    }
    return pod


# A young recommendation: target 350m, bounds still wide (few samples), as the recommender
# writes it minutes after a workload's first pods ran.
YOUNG = entry(target={"cpu": "350m"}, lower={"cpu": "25m"}, upper={"cpu": "100"})


@pytest.mark.parametrize(
    ("request_cpu", "expected"),
    [
        # diff |1000 - 350| / 1000 = 0.65 >= 0.1, within [25m, 100]: replaced at any age
        ("1", True),
        # diff |380 - 350| / 380 = 0.079 < 0.1: not worth a new pod
        ("380m", False),
        # diff |389 - 350| / 389 = 0.1003 >= 0.1
        ("389m", True),
        # diff 0
        ("350m", False),
    ],
)
def test_a_pod_on_no_node_needs_only_the_min_change(request_cpu: str, expected: bool) -> None:
    # one-brain offers unschedulable pods (pod_is_updatable(unschedulable_too=True)): no start
    # time and no age — it runs nowhere, the lifetime threshold protects nothing.
    pod = _unplaced(
        running_pod(
            containers=[builders.pods.container(requests={"cpu": request_cpu})],
            status=running_status(start=None),
        )
    )
    assert _accepted(pod, YOUNG, START) is expected
    # the same pod running (young, within range) is left alone, as upstream does
    assert not _accepted(
        running_pod(containers=[builders.pods.container(requests={"cpu": request_cpu})]),
        YOUNG,
        START,
    )


def test_a_pod_on_no_node_outside_the_range_is_accepted_whatever_the_change() -> None:
    # request 100.5 above the upper bound 100: outside the range, accepted as upstream accepts
    # it, though diff |100.5 - 99| / 100.5 = 0.0149 < 0.1
    rec = entry(target={"cpu": "99"}, lower={"cpu": "25m"}, upper={"cpu": "100"})
    assert _accepted(
        _unplaced(
            running_pod(
                containers=[builders.pods.container(requests={"cpu": "100500m"})],
                status=running_status(start=None),
            )
        ),
        rec,
        START,
    )


def test_min_change_priority_from_settings() -> None:
    # upstream TestUpdateLonglivedPods: MinChangePriority 0.5, 13 h: diff 0.25 no, 4.0 yes
    rec = entry(target={"cpu": "5"}, lower={"cpu": "1"}, upper={"cpu": "6"})
    now = START + timedelta(hours=13)
    assert not _accepted(
        running_pod(containers=[builders.pods.container(requests={"cpu": "4"})]),
        rec,
        now,
        pod_update_threshold=0.5,
    )
    assert _accepted(
        running_pod(containers=[builders.pods.container(requests={"cpu": "1"})]),
        rec,
        now,
        pod_update_threshold=0.5,
    )


QUICK_NOW = START + timedelta(hours=11)


@pytest.mark.parametrize(
    ("ran", "expected"),
    [
        (timedelta(minutes=2), True),
        (timedelta(minutes=10) - timedelta(seconds=1), True),
        (timedelta(minutes=10), False),  # strictly less than the threshold
        (timedelta(minutes=57), False),
    ],
)
def test_quick_oom_threshold(ran: timedelta, expected: bool) -> None:
    pod = running_pod(
        containers=[builders.pods.container(requests={"cpu": "4"})],
        status=running_status(
            statuses=[oom_status("app", ran=ran, finished=QUICK_NOW - timedelta(minutes=3))]
        ),
    )
    rec = entry(target={"cpu": "5"}, lower={"cpu": "1"}, upper={"cpu": "6"})
    assert quick_oom(pod=pod, vpa=build_vpa(recommendations=[rec]), settings=SETTINGS) is expected
    # young pod, in range, diff 0.25: accepted only through the quick OOM
    assert _accepted(pod, rec, QUICK_NOW) is expected


def test_quick_oom_without_resource_change_is_rejected() -> None:
    pod = running_pod(
        containers=[builders.pods.container(requests={"cpu": "4", "memory": "8Gi"})],
        status=running_status(
            statuses=[oom_status("app", ran=timedelta(minutes=2), finished=QUICK_NOW)]
        ),
    )
    rec = entry(
        target={"cpu": "4", "memory": "8Gi"},
        lower={"cpu": "2", "memory": "5Gi"},
        upper={"cpu": "5", "memory": "10Gi"},
    )
    assert quick_oom(pod=pod, vpa=build_vpa(recommendations=[rec]), settings=SETTINGS)
    assert not _accepted(pod, rec, QUICK_NOW)


def test_quick_oom_other_reason_ignored() -> None:
    status = oom_status("app", ran=timedelta(minutes=1), finished=QUICK_NOW)
    status["lastState"]["terminated"]["reason"] = "Error"
    pod = running_pod(
        containers=[builders.pods.container(requests={"cpu": "4"})],
        status=running_status(statuses=[status]),
    )
    assert not quick_oom(pod=pod, vpa=build_vpa(), settings=SETTINGS)


def test_quick_oom_missing_timestamps_is_zero_duration() -> None:
    status = {"name": "app", "lastState": {"terminated": {"reason": "OOMKilled"}}}
    pod = running_pod(
        containers=[builders.pods.container(requests={"cpu": "4"})],
        status=running_status(statuses=[status]),
    )
    assert quick_oom(pod=pod, vpa=build_vpa(), settings=SETTINGS)


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [(None, True), ("app", True), ("", False), ("other", False), ("Bad_Name", True)],
)
def test_quick_oom_observed_containers(annotation: str | None, expected: bool) -> None:
    pod = running_pod(
        containers=[builders.pods.container(requests={"cpu": "4"})],
        annotations=None if annotation is None else {"vpaObservedContainers": annotation},
        status=running_status(
            statuses=[oom_status("app", ran=timedelta(minutes=2), finished=QUICK_NOW)]
        ),
    )
    assert quick_oom(pod=pod, vpa=build_vpa(), settings=SETTINGS) is expected


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ({"containerName": "app", "mode": "Auto"}, True),
        ({"containerName": "app", "mode": "Off"}, False),
        ({"containerName": "*", "mode": "Off"}, False),
        ({"containerName": "other", "mode": "Off"}, True),
    ],
)
def test_quick_oom_container_mode_off(policy: dict[str, Any], expected: bool) -> None:
    pod = running_pod(
        containers=[builders.pods.container(requests={"cpu": "4"})],
        status=running_status(
            statuses=[oom_status("app", ran=timedelta(minutes=2), finished=QUICK_NOW)]
        ),
    )
    vpa = build_vpa(spec={"resourcePolicy": {"containerPolicies": [policy]}})
    assert quick_oom(pod=pod, vpa=vpa, settings=SETTINGS) is expected


@pytest.mark.parametrize(("gate", "expected"), [(False, True), (True, False)])
def test_per_vpa_evict_after_oom_seconds(gate: bool, expected: bool) -> None:
    pod = running_pod(
        containers=[builders.pods.container(requests={"cpu": "4"})],
        status=running_status(
            statuses=[oom_status("app", ran=timedelta(minutes=2), finished=QUICK_NOW)]
        ),
    )
    vpa = build_vpa(spec={"updatePolicy": {"evictAfterOOMSeconds": 60}})
    settings = UpdateSettings(per_vpa_config=gate)
    assert quick_oom(pod=pod, vpa=vpa, settings=settings) is expected


# -- ordering -----------------------------------------------------------------------------------


def _names(result: list[Any]) -> list[str]:
    return [p.pod["metadata"]["name"] for p in result]


def test_order_by_resource_diff() -> None:
    # upstream TestSortPriority: target 10 cpu; requests 2, 4, 1, 3 -> diffs 4, 1.5, 9, 2.33
    vpa = build_vpa(recommendations=[entry(target={"cpu": "10"})])
    pods = [
        running_pod(name="POD1", containers=[builders.pods.container(requests={"cpu": "2"})]),
        running_pod(name="POD2", containers=[builders.pods.container(requests={"cpu": "4"})]),
        running_pod(name="POD3", containers=[builders.pods.container(requests={"cpu": "1"})]),
        running_pod(name="POD4", containers=[builders.pods.container(requests={"cpu": "3"})]),
    ]
    result = prioritized_pods(
        vpa=vpa, pods=pods, now=START + timedelta(hours=24), settings=SETTINGS
    )
    assert _names(result) == ["POD3", "POD1", "POD4", "POD2"]


def test_scale_up_first() -> None:
    # upstream TestSortPriorityResourcesDecrease: the scale-up pod has the smallest diff yet
    # comes first: POD1 cpu 4->5 (0.25), POD2 8->5 (0.375), POD3 10->5 (0.5)
    vpa = build_vpa(recommendations=[entry(target={"cpu": "5"})])
    pods = [
        running_pod(name="POD2", containers=[builders.pods.container(requests={"cpu": "8"})]),
        running_pod(name="POD3", containers=[builders.pods.container(requests={"cpu": "10"})]),
        running_pod(name="POD1", containers=[builders.pods.container(requests={"cpu": "4"})]),
    ]
    result = prioritized_pods(
        vpa=vpa, pods=pods, now=START + timedelta(hours=24), settings=SETTINGS
    )
    assert _names(result) == ["POD1", "POD3", "POD2"]
    assert [p.priority.scale_up for p in result] == [True, False, False]


def test_ties_ordered_by_name_whatever_the_input_order() -> None:
    vpa = build_vpa(recommendations=[entry(target={"cpu": "2"})])
    pods = [
        running_pod(name=name, containers=[builders.pods.container(requests={"cpu": "1"})])
        for name in ("c", "a", "b")
    ]
    now = START + timedelta(hours=24)
    assert _names(prioritized_pods(vpa=vpa, pods=pods, now=now, settings=SETTINGS)) == [
        "a",
        "b",
        "c",
    ]


def test_recommendation_is_capped_before_priority() -> None:
    # maxAllowed 1 caps the target 4 to 1 == request: nothing to do
    vpa = build_vpa(
        recommendations=[entry(target={"cpu": "4"})],
        spec={
            "resourcePolicy": {
                "containerPolicies": [{"containerName": "app", "maxAllowed": {"cpu": "1"}}]
            }
        },
    )
    now = START + timedelta(hours=24)
    assert (
        prioritized_pods(
            vpa=vpa,
            pods=[running_pod(containers=[builders.pods.container(requests={"cpu": "1"})])],
            now=now,
            settings=SETTINGS,
        )
        == []
    )
    # a container LimitRange max (limit 1:1 with the request) works the same way
    limited = running_pod(
        containers=[
            {"name": "app", "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}}
        ]
    )
    plain = build_vpa(recommendations=[entry(target={"cpu": "4"})])
    lr = merged_limit_range_item(
        [{"spec": {"limits": [{"type": "Container", "max": {"cpu": "1"}}]}}], item_type="Container"
    )
    assert (
        prioritized_pods(
            vpa=plain,
            pods=[limited],
            now=now,
            settings=SETTINGS,
            container_limit_range=lr,
        )
        == []
    )
    result = prioritized_pods(
        vpa=plain,
        pods=[running_pod(containers=[builders.pods.container(requests={"cpu": "1"})])],
        now=now,
        settings=SETTINGS,
    )
    assert [p.priority for p in result] == [UpdatePriority(False, True, 3.0)]


@given(st.lists(st.tuples(st.integers(1, 5000), st.integers(1, 5000)), min_size=1, max_size=8))
def test_order_invariant(request_and_target: list[tuple[int, int]]) -> None:
    """Accepted pods come ScaleUp first, then by non-increasing ResourceDiff."""
    pods = [
        running_pod(
            name=f"p{i}",
            containers=[{"name": f"c{i}", "resources": {"requests": {"cpu": f"{r}m"}}}],
        )
        for i, (r, _) in enumerate(request_and_target)
    ]
    vpa = build_vpa(
        recommendations=[
            *(
                entry(f"c{i}", target={"cpu": f"{t}m"})
                for i, (_, t) in enumerate(request_and_target)
            )
        ]
    )
    result = prioritized_pods(vpa=vpa, pods=pods, now=START + timedelta(days=1), settings=SETTINGS)
    keys = [(not p.priority.scale_up, -p.priority.resource_diff) for p in result]
    assert keys == sorted(keys)
    expected = sum(1 for r, t in request_and_target if abs(r - t) / r >= 0.1)
    assert len(result) == expected


# -- EvictionRequirements -----------------------------------------------------------------------

HIGHER_CPU = {"resources": ["cpu"], "changeRequirement": "TargetHigherThanRequests"}
LOWER_CPU = {"resources": ["cpu"], "changeRequirement": "TargetLowerThanRequests"}
HIGHER_CPU_OR_MEM = {
    "resources": ["cpu", "memory"],
    "changeRequirement": "TargetHigherThanRequests",
}
LOWER_MEM = {"resources": ["memory"], "changeRequirement": "TargetLowerThanRequests"}


@pytest.mark.parametrize(
    ("policy", "requests", "target", "expected"),
    [
        (
            None,
            {"cpu": "1", "memory": "1Gi"},
            {"cpu": "1", "memory": "1Gi"},
            True,
        ),  # no updatePolicy
        ({}, {"cpu": "1", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"}, True),  # no requirements
        (
            {"evictionRequirements": [HIGHER_CPU]},
            {"cpu": "1", "memory": "1Gi"},
            {"cpu": "2", "memory": "1Gi"},
            True,
        ),
        (
            {"evictionRequirements": [HIGHER_CPU]},
            {"cpu": "2", "memory": "1Gi"},
            {"cpu": "1", "memory": "1Gi"},
            False,
        ),
        (
            {"evictionRequirements": [HIGHER_CPU]},
            {"cpu": "1", "memory": "1Gi"},
            {"cpu": "1", "memory": "2Gi"},
            False,
        ),
        (
            {"evictionRequirements": [LOWER_CPU]},
            {"cpu": "2", "memory": "1Gi"},
            {"cpu": "1", "memory": "1Gi"},
            True,
        ),
        (
            {"evictionRequirements": [LOWER_CPU]},
            {"cpu": "1", "memory": "1Gi"},
            {"cpu": "1", "memory": "1Gi"},
            False,
        ),
        # any listed resource satisfies one requirement
        (
            {"evictionRequirements": [HIGHER_CPU_OR_MEM]},
            {"cpu": "1", "memory": "1Gi"},
            {"cpu": "1", "memory": "2Gi"},
            True,
        ),
        # all requirements must hold: cpu up AND memory down
        (
            {"evictionRequirements": [HIGHER_CPU, LOWER_MEM]},
            {"cpu": "1", "memory": "2Gi"},
            {"cpu": "2", "memory": "1Gi"},
            True,
        ),
        (
            {"evictionRequirements": [HIGHER_CPU, LOWER_MEM]},
            {"cpu": "1", "memory": "1Gi"},
            {"cpu": "2", "memory": "2Gi"},
            False,
        ),
        # a container without a cpu or a memory request is admitted
        ({"evictionRequirements": [HIGHER_CPU]}, {"cpu": "2"}, {"cpu": "1", "memory": "1Gi"}, True),
        (
            {"evictionRequirements": [HIGHER_CPU]},
            {"memory": "1Gi"},
            {"cpu": "1", "memory": "1Gi"},
            True,
        ),
    ],
)
def test_eviction_requirements(
    policy: dict[str, Any] | None, requests: dict[str, str], target: dict[str, str], expected: bool
) -> None:
    vpa = build_vpa(spec={"updatePolicy": policy})
    rec = builders.vpas.pod_recommendation(entry(target=target))
    assert (
        eviction_requirements_admit(
            vpa=vpa,
            pod=running_pod(containers=[builders.pods.container(requests=requests)]),
            recommendation=rec,
        )
        is expected
    )


def test_eviction_requirements_one_container_is_enough() -> None:
    pod = running_pod(
        containers=[
            {"name": "a", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}},
            {"name": "b", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
            {"name": "off", "resources": {}},  # no recommendation (mode Off): skipped
        ]
    )
    vpa = build_vpa(spec={"updatePolicy": {"evictionRequirements": [HIGHER_CPU]}})
    both = builders.vpas.pod_recommendation(
        entry("a", target={"cpu": "1", "memory": "1Gi"}),
        entry("b", target={"cpu": "2", "memory": "1Gi"}),
    )
    only_a = builders.vpas.pod_recommendation(entry("a", target={"cpu": "1", "memory": "1Gi"}))
    assert eviction_requirements_admit(vpa=vpa, pod=pod, recommendation=both)
    assert not eviction_requirements_admit(vpa=vpa, pod=pod, recommendation=only_a)


def test_prioritized_pods_drops_pods_refused_by_requirements() -> None:
    vpa = build_vpa(
        recommendations=[entry(target={"cpu": "5", "memory": "1Gi"})],
        spec={"updatePolicy": {"updateMode": "Recreate", "evictionRequirements": [HIGHER_CPU]}},
    )
    pods = [
        running_pod(
            name="up", containers=[builders.pods.container(requests={"cpu": "1", "memory": "1Gi"})]
        ),
        running_pod(
            name="down",
            containers=[builders.pods.container(requests={"cpu": "10", "memory": "1Gi"})],
        ),
    ]
    result = prioritized_pods(vpa=vpa, pods=pods, now=START + timedelta(days=1), settings=SETTINGS)
    assert _names(result) == ["up"]


# -- why a pod is accepted: PodPriority.reason ---------------------------------------------------


def _reason(pod: Pod, rec: dict[str, Any], now: datetime) -> str | None:
    accepted = pod_priority(
        vpa=build_vpa(recommendations=[rec]),
        pod=pod,
        recommendation=builders.vpas.pod_recommendation(rec),
        now=now,
        settings=SETTINGS,
    )
    return None if accepted is None else accepted.reason


MEMORY_BAND = entry(
    target={"cpu": "1", "memory": "450Mi"},
    lower={"cpu": "500m", "memory": "400Mi"},
    upper={"cpu": "2", "memory": "1Gi"},
)


@pytest.mark.parametrize(
    ("pod", "rec", "now", "reason"),
    [
        # upstream AddPod, first rule: outside the recommended range, at any age.
        # memory 362Mi < lowerBound 400Mi (cpu 1 within [500m, 2])
        (
            running_pod(
                containers=[builders.pods.container(requests={"cpu": "1", "memory": "362Mi"})]
            ),
            MEMORY_BAND,
            START,
            "app memory request 362.0Mi below the lower bound 400.0Mi (target 450.0Mi)",
        ),
        # cpu 3 > upperBound 2 and memory 2Gi > 1Gi: both said, in resource order
        (
            running_pod(
                containers=[builders.pods.container(requests={"cpu": "3", "memory": "2Gi"})]
            ),
            MEMORY_BAND,
            START,
            "app cpu request 3.00 above the upper bound 2.00 (target 1.00); "
            "app memory request 2.00Gi above the upper bound 1.00Gi (target 450.0Mi)",
        ),
        # 1 byte below the bound: shown apart (6 decimals of Mi), not "400.0Mi below 400.0Mi"
        (
            running_pod(
                containers=[
                    builders.pods.container(requests={"cpu": "1", "memory": str(400 * 2**20 - 1)})
                ]
            ),
            MEMORY_BAND,
            START,
            "app memory request 399.999999Mi below the lower bound 400.000000Mi (target 450.0Mi)",
        ),
        # no memory request at all: outside the range (upstream sets both flags)
        (
            running_pod(containers=[builders.pods.container(requests={"cpu": "1"})]),
            MEMORY_BAND,
            START,
            "app memory request unset (target 450.0Mi)",
        ),
        # in range, young (11 h < 12 h), but OOM-killed after 2 min < --evict-after-oom-threshold
        # 10 min; diff |4 - 5| / 4 = 0.25 > 0
        (
            running_pod(
                containers=[builders.pods.container(requests={"cpu": "4"})],
                status=running_status(
                    statuses=[
                        oom_status(
                            "app",
                            ran=timedelta(minutes=2),
                            finished=QUICK_NOW - timedelta(minutes=3),
                        )
                    ]
                ),
            ),
            entry(target={"cpu": "5"}, lower={"cpu": "1"}, upper={"cpu": "6"}),
            QUICK_NOW,
            "app OOM-killed after running 2m0s, within --evict-after-oom-threshold 10m0s",
        ),
        # in range [500m, 2] after exactly 12 h: diff |1000 - 1100| / 1000 = 0.10 >= 0.1
        (
            running_pod(containers=[builders.pods.container(requests={"cpu": "1"})]),
            IN_RANGE,
            START + timedelta(hours=12),
            "requests 0.10 from the target (--pod-update-threshold 0.1) after running 12h0m0s "
            "(--in-recommendation-bounds-eviction-lifetime-threshold 12h0m0s)",
        ),
        # in range and 1 s short of 12 h: not accepted, no reason
        (
            running_pod(containers=[builders.pods.container(requests={"cpu": "1"})]),
            IN_RANGE,
            START + timedelta(hours=12, seconds=-1),
            None,
        ),
        # on no node (one-brain): diff |1000 - 350| / 1000 = 0.65, no lifetime needed
        (
            _unplaced(
                running_pod(
                    containers=[builders.pods.container(requests={"cpu": "1"})],
                    status=running_status(start=None),
                )
            ),
            YOUNG,
            START,
            "requests 0.65 from the target (--pod-update-threshold 0.1), not scheduled",
        ),
    ],
)
def test_the_reason_a_pod_is_accepted(
    pod: Pod, rec: dict[str, Any], now: datetime, reason: str | None
) -> None:
    assert _reason(pod, rec, now) == reason
