"""The scheduling simulation: journal fork/revert/commit, TrySchedulePods with hints, the
similar-pod shortcut and break-on-failure, and pod equivalence groups."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.controllers.autoscaler.simulator.equivalence import (
    MAX_GROUPS_PER_CONTROLLER,
    build_pod_groups,
)
from kubescale.controllers.autoscaler.simulator.scheduling_simulation import SchedulingSimulator
from kubescale.objects.pod import Pod
from kubescale.scheduling.fit import ClusterSnapshot
from kubescale.scheduling.snapshot_journal import SnapshotJournal
from tests.controllers.autoscaler.builders import ca_node, ca_pod


def state(snapshot: ClusterSnapshot) -> dict[str, tuple[list[str], dict[str, int]]]:
    return {
        name: (
            sorted(p["metadata"]["name"] for p in s.pods),
            {k: v for k, v in s.requested.items() if v},
        )
        for name, s in snapshot.nodes.items()
    }


def test_revert_restores_nodes_and_pods() -> None:
    snapshot = ClusterSnapshot.build(
        nodes=[ca_node("a"), ca_node("b")], pods=[ca_pod("x", node_name="a", cpu="1")]
    )
    journal = SnapshotJournal(snapshot)
    before = state(snapshot)
    journal.fork()
    journal.remove_pod("a", ca_pod("x"))
    journal.add_pod("b", ca_pod("y", cpu="2"))
    journal.remove_node("a")
    journal.add_node_like("b", "copy")
    assert sorted(snapshot.nodes) == ["b", "copy"]
    assert snapshot.nodes["copy"].labels["kubernetes.io/hostname"] == "copy"
    assert snapshot.nodes["copy"].pods == []
    journal.revert()
    assert state(snapshot) == before


def test_nested_commit_is_undone_by_the_outer_revert() -> None:
    snapshot = ClusterSnapshot.build(nodes=[ca_node("a")], pods=[])
    journal = SnapshotJournal(snapshot)
    journal.fork()
    journal.fork()
    journal.add_pod("a", ca_pod("x"))
    journal.commit()
    assert len(snapshot.nodes["a"].pods) == 1
    journal.revert()
    assert snapshot.nodes["a"].pods == []


@settings(max_examples=100, deadline=None)
@given(
    ops=st.lists(
        st.tuples(st.sampled_from(["add", "remove", "drop", "copy"]), st.integers(0, 5)),
        max_size=25,
    )
)
def test_any_sequence_of_changes_reverts_exactly(ops: list[tuple[str, int]]) -> None:
    """Property: whatever is done inside a fork, a revert restores the snapshot."""
    nodes = [ca_node(f"n{i}") for i in range(3)]
    snapshot = ClusterSnapshot.build(
        nodes=nodes, pods=[ca_pod("p0", node_name="n0"), ca_pod("p1", node_name="n1")]
    )
    journal = SnapshotJournal(snapshot)
    before = state(snapshot)
    journal.fork()
    for index, (op, arg) in enumerate(ops):
        names = sorted(snapshot.nodes)
        if not names:
            break
        target = names[arg % len(names)]
        if op == "add":
            journal.add_pod(target, ca_pod(f"q{index}", cpu="10m"))
        elif op == "remove" and snapshot.nodes[target].pods:
            journal.remove_pod(target, snapshot.nodes[target].pods[0])
        elif op == "drop":
            journal.remove_node(target)
        elif op == "copy":
            journal.add_node_like(target, f"c{index}")
    journal.revert()
    assert state(snapshot) == before


def pods_of(count: int, owner: str, cpu: str) -> list[Pod]:
    return [ca_pod(f"{owner}-{i}", cpu=cpu, owner=("ReplicaSet", owner)) for i in range(count)]


def test_try_schedule_fills_and_reports_the_rest() -> None:
    snapshot = ClusterSnapshot.build(nodes=[ca_node("a", cpu="2"), ca_node("b", cpu="2")], pods=[])
    simulator = SchedulingSimulator(SnapshotJournal(snapshot))
    result = simulator.try_schedule_pods(pods_of(5, "web", "1"))
    # 2 + 2 fit; the fifth does not
    assert [(p.pod["metadata"]["name"], p.node) for p in result.scheduled] == [
        ("web-0", "a"),
        ("web-1", "a"),
        ("web-2", "b"),
        ("web-3", "b"),
    ]
    assert [p["metadata"]["name"] for p in result.unschedulable] == ["web-4"]


def test_a_similar_pod_is_not_tried_after_one_failed() -> None:
    snapshot = ClusterSnapshot.build(nodes=[ca_node("a", cpu="2")], pods=[])
    simulator = SchedulingSimulator(SnapshotJournal(snapshot))
    big = pods_of(3, "big", "3")
    result = simulator.try_schedule_pods(
        [*big, ca_pod("small", cpu="1", owner=("ReplicaSet", "s"))]
    )
    assert [p["metadata"]["name"] for p in result.unschedulable] == ["big-0", "big-1", "big-2"]
    assert [p.node for p in result.scheduled] == ["a"]


def test_break_on_failure_stops_at_the_first_misfit() -> None:
    snapshot = ClusterSnapshot.build(nodes=[ca_node("a", cpu="2")], pods=[])
    simulator = SchedulingSimulator(SnapshotJournal(snapshot))
    result = simulator.try_schedule_pods(
        [ca_pod("big", cpu="3", owner=None), ca_pod("small", cpu="1", owner=None)],
        break_on_failure=True,
    )
    assert result.scheduled == []
    assert [p["metadata"]["name"] for p in result.unschedulable] == ["big"]


def test_hints_send_a_pod_back_where_it_went() -> None:
    snapshot = ClusterSnapshot.build(nodes=[ca_node("a"), ca_node("b")], pods=[])
    journal = SnapshotJournal(snapshot)
    simulator = SchedulingSimulator(journal)
    simulator.hints[("default", "p")] = "b"
    journal.fork()
    result = simulator.try_schedule_pods([ca_pod("p")])
    assert result.scheduled[0].node == "b"
    journal.revert()
    assert snapshot.nodes["b"].pods == []


def test_equivalence_groups() -> None:
    a0, a1 = (
        ca_pod("a0", owner=("ReplicaSet", "a")),
        ca_pod("a1", owner=("ReplicaSet", "a"), node_name="x"),
    )
    big = ca_pod("a2", cpu="2", owner=("ReplicaSet", "a"))
    solo = ca_pod("solo", owner=None)
    ds = ca_pod("ds", owner=("DaemonSet", "agent"))
    groups = build_pod_groups([a0, big, solo, a1, ds])
    # nodeName is ignored; a different request is another group; controller-less and DS
    # pods are groups of one; groups in order of their first pod
    assert [[p["metadata"]["name"] for p in g] for g in groups] == [
        ["a0", "a1"],
        ["a2"],
        ["solo"],
        ["ds"],
    ]


def test_a_controller_keeps_at_most_ten_groups() -> None:
    pods = [ca_pod(f"p{i}", cpu=f"{100 + i}m", owner=("ReplicaSet", "a")) for i in range(12)]
    pods.append(ca_pod("p11-again", cpu="111m", owner=("ReplicaSet", "a")))
    groups = build_pod_groups(pods)
    # 10 remembered kinds; p10 and p11 are new groups each, and p11-again (same spec as p11,
    # but p11's kind was not remembered) is a group of its own too
    assert len(groups) == MAX_GROUPS_PER_CONTROLLER + 3
