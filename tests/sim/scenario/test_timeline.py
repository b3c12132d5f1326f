"""Timeline aggregations against values computed by hand.

Each record stands for the interval up to the next record (the last for one step), so with a
15-minute step every sample is a quarter of an hour and the expected integrals below are plain
arithmetic on the numbers in each table.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.sim.scenario.json_report import dumps_report
from kubescale.sim.scenario.report_assembly import assemble_report
from kubescale.sim.scenario.time_statistics import (
    rounded,
    time_weighted_average,
    weighted_percentile,
)
from kubescale.sim.scenario.timeline import Timeline, TimelineEvent
from tests.sim.scenario.test_reports_synthetic_run import Sample, node_dict, pod_dict

START = datetime(2026, 1, 1, tzinfo=UTC)
GIB = float(2**30)


def sample(
    *,
    pod: str = "web-0",
    workload: str = "web",
    container: str = "app",
    cpu_request: float | None = 0.5,
    cpu_limit: float | None = 1.0,
    cpu_usage: float = 0.25,
    cpu_demand: float | None = None,
    memory_request: float | None = GIB,
    memory_limit: float | None = 2 * GIB,
    memory_usage: float = GIB / 2,
    throttled: bool = False,
    oom_killed: bool = False,
    running: bool = True,
    namespace: str = "default",
) -> Sample:
    return Sample(
        namespace=namespace,
        pod=pod,
        workload=workload,
        container=container,
        node="node-a",
        cpu_request=cpu_request,
        cpu_limit=cpu_limit,
        memory_request=memory_request,
        memory_limit=memory_limit,
        cpu_usage=cpu_usage,
        memory_usage=memory_usage,
        cpu_demand=cpu_usage if cpu_demand is None else cpu_demand,
        throttled=throttled,
        oom_killed=oom_killed,
        running=running,
    )


def run(
    steps: Sequence[Sequence[Sample]],
    *,
    step: float = 900.0,
    pods: Sequence[Sequence[dict[str, Any]]] | None = None,
    nodes: Sequence[Sequence[str]] | None = None,
    events: Sequence[Sequence[TimelineEvent]] | None = None,
    times: Sequence[float] | None = None,
    prices: dict[str, float] | None = None,
) -> dict[str, Any]:
    timeline = Timeline(scenario_name="t", seed=1, start=START, step=step, node_prices=prices or {})
    for i, samples in enumerate(steps):
        t = times[i] if times is not None else i * step
        timeline.record(
            now=START + timedelta(seconds=t),
            containers=samples,
            pods=pods[i] if pods is not None else [],
            nodes=[node_dict(n, "m5") for n in nodes[i]] if nodes is not None else [],
            events=events[i] if events is not None else [],
        )
    return assemble_report(timeline)


def only_container(report: dict[str, Any]) -> dict[str, Any]:
    (workload,) = report["workloads"]
    (container,) = workload["containers"]
    assert isinstance(container, dict)
    return container


# --- weighted percentiles ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "weights", "percent", "expected"),
    [
        # nearest rank with equal weights: x[ceil(p*n/100)] (1-based)
        (list(range(1, 11)), [1.0] * 10, 50, 5),
        (list(range(1, 11)), [1.0] * 10, 90, 9),
        (list(range(1, 11)), [1.0] * 10, 95, 10),
        (list(range(1, 11)), [1.0] * 10, 99, 10),
        (list(range(1, 11)), [1.0] * 10, 100, 10),
        (list(range(1, 11)), [1.0] * 10, 10, 1),
        (list(range(1, 11)), [1.0] * 10, 11, 2),
        ([7.0], [60.0], 50, 7.0),
        # order of the input does not matter
        ([3.0, 1.0, 2.0], [1.0, 1.0, 1.0], 50, 2.0),
        # time weights: 1 holds for 90 s, 5 for 10 s -> p50..p90 are 1, p95 is 5
        ([1.0, 5.0], [90.0, 10.0], 50, 1.0),
        ([1.0, 5.0], [90.0, 10.0], 90, 1.0),
        ([1.0, 5.0], [90.0, 10.0], 95, 5.0),
        # zero-length samples count for nothing
        ([1.0, 100.0], [60.0, 0.0], 99, 1.0),
        # a share that float sums leave a hair short still lands on the exact rank
        ([0.1] * 3 + [0.9] * 7, [0.1] * 10, 30, 0.1),
    ],
)
def test_weighted_percentile(
    values: list[float], weights: list[float], percent: float, expected: float
) -> None:
    assert weighted_percentile(values, weights, percent) == expected


def test_weighted_percentile_without_time_is_none() -> None:
    assert weighted_percentile([], [], 50) is None
    assert weighted_percentile([1.0], [0.0], 50) is None
    with pytest.raises(ValueError, match="percent"):
        weighted_percentile([1.0], [1.0], 0)


def test_time_weighted_average() -> None:
    assert time_weighted_average([(1.0, 30.0), (4.0, 10.0)]) == 1.75
    assert time_weighted_average([]) is None


@pytest.mark.parametrize(
    ("value", "unit", "expected"),
    [
        (0.1234567, "cores", 0.123457),
        (-0.0000001, "cores", 0.0),
        (1073741824.4, "bytes", 1073741824.0),
        (59.99951, "seconds", 60.0),
        (2 / 3, "hours", 0.666667),
    ],
)
def test_rounding(value: float, unit: str, expected: float) -> None:
    assert rounded(value, unit) == expected
    assert str(rounded(value, unit)) != "-0.0"


def test_rounding_refuses_non_finite_values() -> None:
    with pytest.raises(ValueError, match="finite"):
        rounded(float("nan"), "cores")


# --- requests vs usage -----------------------------------------------------------------------


def test_usage_percentiles_and_slack() -> None:
    # four quarter-hours at a 0.5-core / 1 GiB request
    usage = [0.1, 0.3, 0.5, 0.7]
    memory = [0.25, 0.5, 0.75, 1.5]
    report = run(
        [[sample(cpu_usage=u, memory_usage=m * GIB)] for u, m in zip(usage, memory, strict=True)]
    )
    container = only_container(report)
    cpu, mem = container["cpu"], container["memory"]
    assert cpu["request_avg_cores"] == 0.5
    assert cpu["limit_avg_cores"] == 1.0
    assert cpu["usage_cores"] == {
        "p50": 0.3, "p90": 0.7, "p95": 0.7, "p99": 0.7, "max": 0.7, "avg": 0.4,
    }  # fmt: skip
    # (0.4 + 0.2 + 0 - 0.2) cores x 0.25 h
    assert cpu["slack_core_hours"] == 0.1
    # (0.75 + 0.5 + 0.25 - 0.5) GiB x 0.25 h
    assert mem["slack_gib_hours"] == 0.25
    assert mem["usage_bytes"]["p50"] == 0.5 * GIB
    assert mem["usage_bytes"]["max"] == 1.5 * GIB
    assert report["duration"] == 3600.0
    assert report["workloads"][0]["slack_core_hours"] == 0.1


def test_slack_is_negative_when_usage_exceeds_the_request() -> None:
    report = run([[sample(cpu_request=0.1, cpu_usage=0.6, memory_request=None)]] * 2)
    container = only_container(report)
    # (0.1 - 0.6) cores x 0.5 h
    assert container["cpu"]["slack_core_hours"] == -0.25
    # no memory request reserves nothing: slack = -usage x time = -0.5 GiB x 0.5 h
    assert container["memory"]["request_avg_bytes"] is None
    assert container["memory"]["slack_gib_hours"] == -0.25


def test_uneven_record_intervals_weight_every_statistic() -> None:
    # records at 0, 60 and 240 s with a 60 s step: intervals 60, 180, 60
    requests = [1.0, 0.5, 2.0]
    usage = [0.2, 0.4, 0.9]
    report = run(
        [[sample(cpu_request=r, cpu_usage=u)] for r, u in zip(requests, usage, strict=True)],
        step=60.0,
        times=[0.0, 60.0, 240.0],
    )
    cpu = only_container(report)["cpu"]
    assert report["duration"] == 300.0
    assert cpu["request_avg_cores"] == rounded((60 * 1.0 + 180 * 0.5 + 60 * 2.0) / 300, "cores")
    # 0.4 holds for 180 of 300 s: it is the median and the 80th percentile
    assert cpu["usage_cores"]["p50"] == 0.4
    assert cpu["usage_cores"]["p90"] == 0.9
    slack = (60 * 0.8 + 180 * 0.1 + 60 * 1.1) / 3600
    assert cpu["slack_core_hours"] == rounded(slack, "hours")


def test_percentiles_only_count_time_the_container_ran_but_slack_counts_all() -> None:
    report = run(
        [
            [sample(cpu_usage=0.4)],
            [sample(cpu_usage=0.0, running=False, oom_killed=True)],
            [sample(cpu_usage=0.2)],
        ]
    )
    container = only_container(report)
    assert container["cpu"]["usage_cores"]["p50"] == 0.2
    assert container["cpu"]["usage_cores"]["avg"] == 0.3
    assert container["cpu"]["slack_core_hours"] == rounded((0.1 + 0.5 + 0.3) * 0.25, "hours")
    assert container["oom_kills"] == 1
    assert report["cluster"]["oom_kills"] == 1


def test_limits_average_over_limited_samples_only() -> None:
    report = run([[sample(cpu_limit=None)], [sample(cpu_limit=2.0)]])
    assert only_container(report)["cpu"]["limit_avg_cores"] == 2.0
    report = run([[sample(cpu_limit=None)]])
    assert only_container(report)["cpu"]["limit_avg_cores"] is None


def test_containers_of_one_name_pool_across_pods() -> None:
    report = run(
        [
            [sample(pod="web-0", cpu_usage=0.1), sample(pod="web-1", cpu_usage=0.3)],
            [sample(pod="web-0", cpu_usage=0.2), sample(pod="web-1", cpu_usage=0.4)],
        ]
    )
    container = only_container(report)
    assert container["samples"] == 4
    assert container["cpu"]["usage_cores"]["p50"] == 0.2
    assert container["cpu"]["usage_cores"]["max"] == 0.4
    # each pod-sample reserves 0.5 for 0.25 h: (0.4 + 0.2 + 0.3 + 0.1) x 0.25
    assert container["cpu"]["slack_core_hours"] == 0.25
    assert [c["pod"] for c in report["containers"]] == ["web-0", "web-1"]


# --- throttling, OOM kills, evictions -----------------------------------------------------------


def test_throttled_time_is_the_union_and_core_seconds_the_sum() -> None:
    def app(pod: str, demand: float) -> Sample:
        return sample(pod=pod, cpu_usage=min(demand, 1.0), cpu_demand=demand, throttled=demand > 1)

    report = run(
        [
            [app("web-0", 1.5), app("web-1", 1.2)],  # both throttled: counts once in time
            [app("web-0", 1.0), app("web-1", 1.4)],
            [app("web-0", 0.5), app("web-1", 0.5)],
        ]
    )
    (workload,) = report["workloads"]
    assert workload["throttled_seconds"] == 2 * 900.0
    assert workload["throttled_core_seconds"] == rounded((0.5 + 0.2 + 0.4) * 900, "seconds")
    assert workload["containers"][0]["throttled_seconds"] == 3 * 900.0  # pod-seconds
    assert report["containers"][0]["throttled"] == [1, 0, 0]
    assert report["containers"][0]["cpu_demand"] == [1.5, 1.0, 0.5]
    assert report["cluster"]["throttled_core_seconds"] == workload["throttled_core_seconds"]


def test_evictions_are_counted_for_the_workload_of_the_pod() -> None:
    pods = [[pod_dict("default", "web-0", "web", phase="Running")], []]
    events = [
        [],
        [
            TimelineEvent(900.0, "evicted", "default/web-0", "EvictionByEvictionAPI"),
            TimelineEvent(900.0, "evicted", "default/lone", ""),  # never seen: its own workload
            TimelineEvent(900.0, "pod-deleted", "default/web-0", ""),
        ],
    ]
    report = run([[], []], pods=pods, events=events)
    workloads = {w["name"]: w for w in report["workloads"]}
    assert workloads["web"]["evictions"] == 1
    assert report["cluster"]["evictions"] == 2
    assert [e["kind"] for e in report["events"]] == ["evicted", "evicted", "pod-deleted"]


def test_events_are_listed_in_time_order() -> None:
    events = [
        [TimelineEvent(0.0, "node-added", "n1", "")],
        [TimelineEvent(950.0, "b", "x", ""), TimelineEvent(900.0, "a", "x", "first")],
    ]
    report = run([[], []], events=events)
    assert [(e["time"], e["kind"]) for e in report["events"]] == [
        (0.0, "node-added"),
        (900.0, "a"),
        (950.0, "b"),
    ]


# --- pods: replicas, pending time ---------------------------------------------------------------


def test_replicas_and_pending_time() -> None:
    def web(name: str, phase: str, **kwargs: Any) -> dict[str, Any]:
        return pod_dict("default", name, "web", phase=phase, **kwargs)

    deleting = web("web-9", "Running")
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    pods = [
        [web("web-0", "Running"), web("web-1", "Pending", unschedulable=True)],
        [web("web-0", "Running"), web("web-1", "Pending", unschedulable=True), deleting],
        [web("web-0", "Running"), web("web-1", "Pending")],  # bound, not started yet
        [web("web-0", "Running"), web("web-1", "Running"), web("job", "Succeeded")],
    ]
    report = run([[]] * 4, pods=pods)
    workloads = {w["name"]: w for w in report["workloads"]}
    web_summary = workloads["web"]
    assert web_summary["pending_pod_seconds"] == 3 * 900.0
    assert web_summary["unschedulable_pod_seconds"] == 2 * 900.0
    assert web_summary["replicas"] == {"min": 2, "avg": 2.0, "max": 2}
    assert web_summary["series"] == {
        "replicas": [2, 2, 2, 2],
        "running": [1, 1, 1, 2],
        "pending": [1, 1, 1, 0],
    }
    assert report["cluster"]["pending_pod_seconds"] == 3 * 900.0


def test_a_pod_without_the_workload_label_is_its_own_workload() -> None:
    pod = {"metadata": {"namespace": "ns", "name": "solo"}, "status": {}}  # no phase: Pending
    report = run([[]], pods=[[pod]])
    (workload,) = report["workloads"]
    assert (workload["namespace"], workload["name"]) == ("ns", "solo")
    assert workload["pending_pod_seconds"] == 900.0


def test_replicas_count_from_the_first_appearance() -> None:
    pods = [[], [], [pod_dict("d", "a-0", "a", phase="Running")], []]
    report = run([[]] * 4, pods=pods)
    (workload,) = report["workloads"]
    # appeared in record 2: one replica for 900 s, none for the next 900 s
    assert workload["replicas"] == {"min": 0, "avg": 0.5, "max": 1}
    assert workload["series"]["replicas"] == [0, 0, 1, 0]


# --- nodes and cost ------------------------------------------------------------------------------


def test_node_hours_and_cost() -> None:
    nodes = [["n1"], ["n1"], ["n1", "n2", "n3"], ["n1", "n2"]]
    timeline = Timeline(
        scenario_name="t", seed=1, start=START, step=1800.0, node_prices={"n1": 0.1}
    )
    for i, names in enumerate(nodes):
        if i == 2:
            timeline.add_node_price("n2", 0.4)  # a group's machine, priced once it exists
        timeline.record(
            now=START + timedelta(seconds=1800 * i),
            containers=[],
            pods=[],
            nodes=[node_dict(n, "m5.large") for n in names],
            events=[],
        )
    cluster = assemble_report(timeline)["cluster"]
    # n1 2 h, n2 1 h, n3 0.5 h
    assert cluster["node_hours"] == 3.5
    assert cluster["cost"] == rounded(0.1 * 2 + 0.4 * 1, "cost")
    assert cluster["unpriced_nodes"] == ["n3"]
    assert cluster["node_count"] == {"min": 1, "max": 3, "avg": 1.75, "series": [1, 1, 3, 2]}
    assert [(n["name"], n["hours"], n["cost"], n["first_seen"], n["last_seen"]) for n in
            cluster["nodes"]] == [
        ("n1", 2.0, 0.2, 0.0, 5400.0),
        ("n2", 1.0, 0.4, 3600.0, 5400.0),
        ("n3", 0.5, 0.0, 3600.0, 3600.0),
    ]  # fmt: skip
    assert cluster["nodes"][0]["instance_type"] == "m5.large"


def test_empty_timeline_reports_zeros() -> None:
    timeline = Timeline(scenario_name="e", seed=0, start=START, step=60.0, node_prices={})
    report = assemble_report(timeline)
    assert report["duration"] == 0.0
    assert report["cluster"]["node_hours"] == 0.0
    assert report["cluster"]["node_count"]["min"] == 0
    assert report["workloads"] == []
    assert report["containers"] == []


# --- contract ------------------------------------------------------------------------------------


def test_records_must_move_forward() -> None:
    timeline = Timeline(scenario_name="t", seed=1, start=START, step=60.0, node_prices={})
    timeline.record(now=START, containers=[], pods=[], nodes=[], events=[])
    with pytest.raises(ValueError, match="forward"):
        timeline.record(now=START, containers=[], pods=[], nodes=[], events=[])


def test_start_must_be_aware_and_step_positive() -> None:
    with pytest.raises(ValueError, match="timezone"):
        Timeline(scenario_name="t", seed=1, start=datetime(2026, 1, 1), step=60, node_prices={})
    with pytest.raises(ValueError, match="step"):
        Timeline(scenario_name="t", seed=1, start=START, step=0, node_prices={})
    timeline = Timeline(scenario_name="t", seed=1, start=START, step=60, node_prices={})
    with pytest.raises(ValueError, match="negative"):
        timeline.add_node_price("n", -1.0)


def test_container_series_are_compact_columns() -> None:
    report = run([[sample(cpu_usage=0.1)], [sample(cpu_usage=0.2, cpu_limit=None)]])
    (series,) = report["containers"]
    assert series["t"] == [0.0, 900.0]
    assert series["cpu_usage"] == [0.1, 0.2]
    assert series["cpu_limit"] == [1.0, None]
    assert series["memory_request"] == [GIB, GIB]
    assert series["oom"] == [0, 0]
    assert series["running"] == [1, 1]
    assert report["times"] == [0.0, 900.0]


def test_sample_order_within_a_step_does_not_change_the_bytes() -> None:
    a = sample(pod="web-0", cpu_usage=0.1)
    b = sample(pod="web-1", cpu_usage=0.123456789)
    c = sample(pod="db-0", workload="db", container="db", namespace="data")
    forward = dumps_report(run([[a, b, c], [c, b, a]]))
    backward = dumps_report(run([[c, b, a], [a, c, b]]))
    assert forward == backward
    assert '"cpu_usage": [0.123457, 0.123457]' in forward


# --- invariants ----------------------------------------------------------------------------------

usage_values = st.lists(
    st.floats(min_value=0.0, max_value=64.0, allow_nan=False), min_size=1, max_size=40
)


@given(usage=usage_values, request=st.floats(min_value=0.0, max_value=64.0))
@settings(max_examples=60, deadline=None)
def test_percentiles_are_ordered_samples_and_slack_is_request_time_minus_usage_time(
    usage: list[float], request: float
) -> None:
    report = run([[sample(cpu_request=request, cpu_usage=u)] for u in usage], step=60.0)
    stats = only_container(report)["cpu"]["usage_cores"]
    ordered = [stats[k] for k in ("p50", "p90", "p95", "p99", "max")]
    assert ordered == sorted(ordered)
    assert set(ordered) <= {rounded(u, "cores") for u in usage}
    assert stats["max"] == rounded(max(usage), "cores")
    hours = len(usage) * 60 / 3600
    expected = request * hours - sum(usage) * 60 / 3600
    assert only_container(report)["cpu"]["slack_core_hours"] == pytest.approx(expected, abs=2e-6)


def test_samples_of_an_unlabelled_pod_join_the_pod_as_its_own_workload() -> None:
    pod = {"metadata": {"namespace": "default", "name": "solo"}, "status": {"phase": "Running"}}
    report = run([[sample(pod="solo", workload="")]], pods=[[pod]])
    (workload,) = report["workloads"]
    assert workload["name"] == "solo"
    assert workload["replicas"]["max"] == 1
    assert workload["containers"][0]["samples"] == 1
    assert report["containers"][0]["workload"] == "solo"
