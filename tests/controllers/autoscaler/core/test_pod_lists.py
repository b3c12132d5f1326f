"""Pod lists of RunOnce (reference §1 steps 5-19) and the resource limits (§2.2 step 9)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from kubescale.controllers.autoscaler.config.autoscaler_config import ResourceRange
from kubescale.controllers.autoscaler.core.loop_scale_up import pods_of_draining_nodes
from kubescale.controllers.autoscaler.core.pod_lists import (
    all_pods_are_new,
    drop_expendable,
    drop_young_pods,
    filter_out_schedulable,
    pods_by_schedulability,
)
from kubescale.controllers.autoscaler.model.pod_facts import (
    POD_SCALE_UP_DELAY_ANNOTATION,
    PriorityResolver,
)
from kubescale.controllers.autoscaler.scaleup.resource_limits import ResourceLimits, ScaleDownLimits
from kubescale.controllers.autoscaler.simulator.scheduling_simulation import SchedulingSimulator
from kubescale.objects.pod import Pod
from kubescale.scheduling.fit import ClusterSnapshot
from kubescale.scheduling.snapshot_journal import SnapshotJournal
from tests.controllers.autoscaler.builders import GI, NOW, ca_node, ca_pod, stamp


def test_pods_by_schedulability() -> None:
    pods: list[Pod] = [
        ca_pod("bound", node_name="n"),
        ca_pod("pending", unschedulable=True),
        ca_pod("new"),  # not yet looked at by the scheduler
        ca_pod("done", node_name="n", phase="Succeeded"),
        {
            **ca_pod("leaving", unschedulable=True),
            "metadata": {**ca_pod("leaving")["metadata"], "deletionTimestamp": "x"},
        },
    ]
    result = pods_by_schedulability(pods)
    assert [p["metadata"]["name"] for p in result.scheduled] == ["bound"]
    assert [p["metadata"]["name"] for p in result.unschedulable] == ["pending"]


def test_expendable_pods_are_dropped_below_the_cutoff() -> None:
    resolver = PriorityResolver([{"metadata": {"name": "low"}, "value": -20}])
    pods = [
        ca_pod("default"),  # priority 0
        ca_pod("at-cutoff", priority=-10),  # -10 is not below -10
        ca_pod("below", priority=-11),
        ca_pod("by-class", extra_spec={"priorityClassName": "low"}),
    ]
    kept = drop_expendable(pods, cutoff=-10, priority=resolver)
    assert [p["metadata"]["name"] for p in kept] == ["default", "at-cutoff"]


@pytest.mark.parametrize(
    ("age", "delay", "annotation", "kept"),
    [
        (timedelta(seconds=5), timedelta(0), None, True),  # 5 s > 0
        (timedelta(0), timedelta(0), None, False),  # age must be strictly above
        (timedelta(seconds=20), timedelta(seconds=30), None, False),
        (timedelta(seconds=31), timedelta(seconds=30), None, True),
        # the annotation lengthens the delay: 31 s ≤ 1 m
        (timedelta(seconds=31), timedelta(seconds=30), "1m", False),
        # ... but cannot shorten it: 10 s ≤ 30 s despite "5s"
        (timedelta(seconds=10), timedelta(seconds=30), "5s", False),
        # unparsable: ignored, the flag's delay applies
        (timedelta(seconds=31), timedelta(seconds=30), "soon", True),
    ],
)
def test_young_pods(age: timedelta, delay: timedelta, annotation: str | None, kept: bool) -> None:
    annotations = {POD_SCALE_UP_DELAY_ANNOTATION: annotation} if annotation else None
    p = ca_pod("p", created=NOW - age, annotations=annotations)
    assert bool(drop_young_pods([p], now=NOW, delay=delay)) is kept


def test_all_pods_are_new() -> None:
    assert all_pods_are_new([ca_pod("a", created=NOW - timedelta(seconds=1))], now=NOW)
    assert not all_pods_are_new([ca_pod("a", created=NOW - timedelta(seconds=2))], now=NOW)
    gpu = ca_pod("g", created=NOW - timedelta(seconds=10))
    gpu["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "1"}
    assert all_pods_are_new([gpu], now=NOW)  # 10 s < 30 s for GPU pods
    assert not all_pods_are_new([], now=NOW)


def test_filter_out_schedulable_places_by_priority() -> None:
    snapshot = ClusterSnapshot.build(nodes=[ca_node("n", cpu="2")], pods=[])
    journal = SnapshotJournal(snapshot)
    pods = [
        ca_pod("low", cpu="2", priority=0, owner=("ReplicaSet", "a")),
        ca_pod("high", cpu="2", priority=100, owner=("ReplicaSet", "b")),
        ca_pod("ds", cpu="1", owner=("DaemonSet", "agent")),
    ]
    left, placed = filter_out_schedulable(
        pods, simulator=SchedulingSimulator(journal), priority=PriorityResolver()
    )
    # high goes first and takes the node; low still needs room; the DaemonSet pod is dropped
    assert [p["metadata"]["name"] for p in placed] == ["high"]
    assert [p["metadata"]["name"] for p in left] == ["low"]
    assert [p["metadata"]["name"] for p in snapshot.nodes["n"].pods] == ["high"]


def test_scale_up_resource_limits() -> None:
    limits = ResourceLimits(
        cores=ResourceRange(min=0, max=20), memory=ResourceRange(min=0, max=100 * GI)
    )
    # groups: 3 × 4 cores + 2 × 2 cores; the other node's 1500m rounds up to 2 cores:
    # 12 + 4 + 2 = 18 cores; memory 48 + 16 + 4 = 68Gi
    usage = limits.usage(
        groups=[(3, {"cpu": 4000, "memory": 16 * GI}), (2, {"cpu": 2000, "memory": 8 * GI})],
        other_nodes=[{"cpu": 1500, "memory": 4 * GI}],
    )
    assert usage == (18, 68 * GI)
    # 2 cores left: floor(2/4) = 0 of a 4-core node → cpu exceeded
    assert limits.allowed_delta(usage=usage, per_node={"cpu": 4000, "memory": GI}, wanted=3) == (
        0,
        ("cpu",),
    )
    # a 1-core node: floor(2/1) = 2 of 3 wanted, no resource fully exceeded
    assert limits.allowed_delta(usage=usage, per_node={"cpu": 1000, "memory": GI}, wanted=3) == (
        2,
        (),
    )
    # memory: 32Gi left / 16Gi = 2
    assert limits.allowed_delta(
        usage=usage, per_node={"cpu": 1000, "memory": 16 * GI}, wanted=5
    ) == (2, ())


def test_scale_down_resource_minimums() -> None:
    limits = ResourceLimits(
        cores=ResourceRange(min=8, max=100), memory=ResourceRange(min=0, max=10**15)
    )
    left = ScaleDownLimits.of(limits, [{"cpu": 4000, "memory": GI}] * 3)  # 12 cores, min 8 → 4
    assert left.try_remove({"cpu": 4000, "memory": GI}) == ()
    assert left.try_remove({"cpu": 4000, "memory": GI}) == ("cpu",)
    assert left.cores_left == 0


def test_pods_of_draining_nodes_count_each_pod_once() -> None:
    """Pods still on a node being drained need room elsewhere; one already evicted
    (terminating) leaves the node but is not counted: its replacement is pending already; a
    pod no controller recreates, and DaemonSet pods, are not counted either."""
    evicted = ca_pod("evicted", node_name="n1")
    evicted["metadata"]["deletionTimestamp"] = stamp(NOW)
    pods = [
        ca_pod("stays", node_name="n1"),
        evicted,
        ca_pod("bare", node_name="n1", owner=None),
        ca_pod("agent", node_name="n1", owner=("DaemonSet", "agent")),
        ca_pod("other", node_name="n2"),
    ]
    snapshot = ClusterSnapshot.build(nodes=[ca_node("n1"), ca_node("n2")], pods=pods)
    journal = SnapshotJournal(snapshot)
    moved = pods_of_draining_nodes(journal, ["n1"])
    assert [p["metadata"]["name"] for p in moved] == ["stays"]
    assert sorted(p["metadata"]["name"] for p in snapshot.nodes["n1"].pods) == ["agent"]
    assert [p["metadata"]["name"] for p in snapshot.nodes["n2"].pods] == ["other"]
