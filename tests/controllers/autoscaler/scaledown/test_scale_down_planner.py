"""The scale-down planner (reference §3.2): eligibility, drain simulation, unneeded time,
min sizes, PDBs, parallelism, and the disruption-cost order."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.controllers.autoscaler.cloudprovider.cloud_provider import (
    NodeGroup,
    ProviderSnapshot,
)
from kubescale.controllers.autoscaler.config.autoscaler_config import AutoscalerSettings
from kubescale.controllers.autoscaler.model.node_facts import (
    SCALE_DOWN_DISABLED_ANNOTATION,
    TO_BE_DELETED_TAINT,
    node_readiness,
)
from kubescale.controllers.autoscaler.model.pod_facts import PriorityResolver
from kubescale.controllers.autoscaler.scaledown.scale_down_planner import (
    NodeToRemove,
    ScaleDownPlanner,
)
from kubescale.controllers.autoscaler.simulator.drainability import DrainContext, PdbTracker
from kubescale.controllers.autoscaler.simulator.removal_simulation import simulate_node_removal
from kubescale.controllers.autoscaler.simulator.scheduling_simulation import SchedulingSimulator
from kubescale.objects.node import Node
from kubescale.objects.pdb import PodDisruptionBudget
from kubescale.objects.pod import Pod, PodSpec
from kubescale.objects.replica_set import ReplicaSet
from kubescale.scheduling.fit import ClusterSnapshot
from kubescale.scheduling.pod_resources import node_allocatable
from kubescale.scheduling.snapshot_journal import SnapshotJournal
from tests.controllers.autoscaler.builders import NOW, ca_node, ca_pod, group, snapshot

UNNEEDED = timedelta(minutes=10)
THREE_REPLICAS: ReplicaSet = {"spec": {"replicas": 3}}


class World:
    def __init__(
        self,
        nodes: list[Node],
        pods: list[Pod],
        *,
        min_size: int = 0,
        pdbs: list[PodDisruptionBudget] | None = None,
        settings: AutoscalerSettings | None = None,
    ) -> None:
        self.nodes = nodes
        self.provider: ProviderSnapshot = snapshot(group("g", min_size=min_size, nodes=nodes))
        self.pods = pods
        self.cluster = ClusterSnapshot.build(nodes=nodes, pods=pods)
        self.simulator = SchedulingSimulator(SnapshotJournal(self.cluster))
        self.planner = ScaleDownPlanner(settings=settings or AutoscalerSettings())
        self.pdbs = pdbs or []

    def update(self, at: timedelta = timedelta(0)) -> list[NodeToRemove]:
        # every loop simulates on a fresh snapshot of the cluster
        self.cluster = ClusterSnapshot.build(nodes=self.nodes, pods=self.pods)
        self.simulator = SchedulingSimulator(SnapshotJournal(self.cluster))
        return self.planner.update(
            now=NOW + at,
            candidates=self.nodes,
            destinations={n["metadata"]["name"] for n in self.nodes},
            simulator=self.simulator,
            provider=self.provider,
            readiness=node_readiness,
            context=DrainContext(
                pdbs=PdbTracker(self.pdbs),
                now=NOW + at,
                controller=lambda namespace, owner: THREE_REPLICAS,
            ),
            priority=PriorityResolver(),
        )

    def delete(
        self, at: timedelta, *, in_progress: dict[str, int] | None = None, drains: int = 0
    ) -> tuple[list[str], list[str]]:
        empty, drain = self.planner.nodes_to_delete(
            now=NOW + at,
            provider=self.provider,
            readiness=node_readiness,
            all_nodes=self.nodes,
            node_capacity=node_allocatable,
            deletions_in_progress=in_progress or {},
            drains_in_progress=drains,
            priority=PriorityResolver(),
        )
        return [c.name for c in empty], [c.name for c in drain]

    def reason(self, name: str) -> str:
        return self.planner.unremovable[name].reason


def three_nodes() -> tuple[list[Node], list[Pod]]:
    nodes = [ca_node(f"n{i}", cpu="4", memory="16Gi") for i in range(3)]
    pods = [
        ca_pod("busy", cpu="3", memory="1Gi", node_name="n0"),  # n0: 3/4 = 0.75 > 0.5
        ca_pod("light", cpu="1", memory="1Gi", node_name="n1"),  # n1: 1/4 = 0.25
    ]
    return nodes, pods  # n2 empty


def test_unneeded_nodes_and_why_the_others_are_not() -> None:
    world = World(*three_nodes())
    found = world.update()
    assert sorted(n.name for n in found) == ["n1", "n2"]
    assert world.reason("n0") == "NotUnderutilized"
    light = next(n for n in found if n.name == "n1")
    # light (1 cpu) moves to n0, which has exactly 1 cpu free
    assert [p["metadata"]["name"] for p in light.pods_to_move] == ["light"]
    assert [p["metadata"]["name"] for p in world.cluster.nodes["n0"].pods] == ["busy", "light"]


@pytest.mark.parametrize(
    ("name", "removable", "reason"),
    [
        # upstream pkg/simulator/cluster.go SimulateNodeRemoval: a node the snapshot does not
        # hold (GetNodeInfo → ErrNodeNotFound) is NoNodeInfo, not UnexpectedError
        ("gone", False, "NoNodeInfo"),
        # n1's pod (1 cpu) fits on n0 (4 − 3 = 1 cpu free): removable
        ("n1", True, ""),
        # n2 is empty: removable, nothing to move
        ("n2", True, ""),
    ],
)
def test_removal_simulation_outcomes(name: str, removable: bool, reason: str) -> None:
    world = World(*three_nodes())
    destinations = {n["metadata"]["name"] for n in world.nodes}
    result = simulate_node_removal(
        name,
        simulator=world.simulator,
        destinations=destinations,
        context=DrainContext(
            pdbs=PdbTracker([]),
            now=NOW,
            controller=lambda namespace, owner: THREE_REPLICAS,
        ),
    )
    assert (result.removable, result.reason) == (removable, reason)
    assert (name in destinations) is (not removable and name != "gone")


def test_empty_nodes_are_simulated_first() -> None:
    """Upstream sorts scale-down candidates with its EmptySorting processor first
    (``pkg/processors/scaledowncandidates/emptycandidates``), then PreviousCandidates.

    n0 holds two 1-cpu pods (2/4 = 0.5 ≤ 0.5: underutilized), n1..n3 are empty. Empty first:
    n1, n2, n3 are removable with nothing to move and leave the destinations, so n0's pods have
    nowhere to go (NoPlaceToMovePods) — three empty deletions, no eviction. By name only, n0
    came first (its pods onto n1), then n1 (the moved pods onto n2), n2 (onto n3), and n3 had
    nowhere left: one node to drain (n0, 2 evictions) and no empty node at all."""
    nodes = [ca_node(f"n{i}", cpu="4", memory="16Gi") for i in range(4)]
    pods = [
        ca_pod("w1", cpu="1", memory="1Gi", node_name="n0"),
        ca_pod("w2", cpu="1", memory="1Gi", node_name="n0"),
    ]
    world = World(nodes, pods)
    found = world.update()
    assert sorted(n.name for n in found) == ["n1", "n2", "n3"]
    assert all(n.empty for n in found)
    assert world.reason("n0") == "NoPlaceToMovePods"
    empty, drain = world.delete(UNNEEDED + timedelta(seconds=1))
    assert (sorted(empty), drain) == (["n1", "n2", "n3"], [])


def test_removal_waits_for_the_unneeded_time_strictly() -> None:
    world = World(*three_nodes())
    world.update()
    assert world.delete(timedelta(0)) == ([], [])
    assert world.reason("n2") == "NotUnneededLongEnough"
    # since + 10m is not before now at exactly 10m
    world.update(UNNEEDED)
    assert world.delete(UNNEEDED) == ([], [])
    world.update(UNNEEDED + timedelta(seconds=1))
    # empty first, then the node to drain
    assert world.delete(UNNEEDED + timedelta(seconds=1)) == (["n2"], ["n1"])


def test_min_size_counts_planned_and_in_progress_deletions() -> None:
    world = World(*three_nodes(), min_size=2)
    world.update()
    later = UNNEEDED + timedelta(minutes=1)
    world.update(later)
    # 3 nodes, min 2: n2 goes (3 > 2), then n1 would leave 2 − ... 2 ≤ 2 → min size reached
    assert world.delete(later) == (["n2"], [])
    assert world.reason("n1") == "NodeGroupMinSizeReached"
    # one deletion already under way: 3 − 1 = 2 ≤ 2 → nothing
    world.update(later)
    assert world.delete(later, in_progress={"g": 1}) == ([], [])


def test_parallelism_budgets() -> None:
    world = World(*three_nodes(), settings=AutoscalerSettings(max_scale_down_parallelism=1))
    world.update()
    later = UNNEEDED + timedelta(minutes=1)
    world.update(later)
    assert world.delete(later) == (["n2"], [])
    world.update(later)
    # the drain budget (1) is taken by a drain in progress
    world.planner.settings = AutoscalerSettings()
    assert world.delete(later, drains=1) == (["n2"], [])


def test_eligibility_reasons() -> None:
    nodes = [
        ca_node("disabled", annotations={SCALE_DOWN_DISABLED_ANNOTATION: "true"}),
        ca_node(
            "deleting",
            taints=[
                {
                    "key": TO_BE_DELETED_TAINT,
                    "value": str(int((NOW - timedelta(minutes=1)).timestamp())),
                    "effect": "NoSchedule",
                }
            ],
        ),
        ca_node("other", provider_id="elsewhere://x"),
    ]
    world = World(nodes, [])
    world.provider = snapshot(group("g", nodes=nodes[:2]))
    world.update()
    assert world.reason("disabled") == "ScaleDownDisabledAnnotation"
    assert world.reason("deleting") == "CurrentlyBeingDeleted"
    assert world.reason("other") == "NotAutoscaled"


def test_blocked_nodes_are_not_rechecked_for_a_while() -> None:
    nodes = [ca_node("a"), ca_node("b")]
    pods = [ca_pod("bare", owner=None, node_name="a")]
    world = World(nodes, pods)
    world.update()
    assert world.planner.unremovable["a"].reason == "BlockedByPod"
    assert world.planner.unremovable["a"].detail == "NotReplicated"
    world.update(timedelta(minutes=4))
    assert world.reason("a") == "RecentlyUnremovable"
    world.update(timedelta(minutes=6))
    assert world.reason("a") == "BlockedByPod"


def test_pdb_lets_only_one_node_go_per_loop() -> None:
    nodes = [ca_node(f"n{i}", cpu="4") for i in range(3)]
    pods = [
        ca_pod("w0", node_name="n0", labels={"app": "web"}),
        ca_pod("w1", node_name="n1", labels={"app": "web"}),
        ca_pod("big", cpu="3500m", node_name="n2"),
    ]
    pdb: PodDisruptionBudget = {
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}},
        "status": {"disruptionsAllowed": 1},
    }
    world = World(nodes, pods, pdbs=[pdb])
    found = world.update()
    # n0's pod may move (budget 1 → 0); n1's pod would exceed the budget
    assert [n.name for n in found] == ["n0"]
    assert world.planner.unremovable["n1"].detail == "NotEnoughPdb"


def test_disruption_cost_picks_the_cheapest_node_to_drain() -> None:
    nodes = [ca_node(f"n{i}", cpu="4") for i in range(3)]
    pods = [
        ca_pod("vip", cpu="1", node_name="n0", priority=10**9),
        ca_pod("batch", cpu="1", node_name="n1", priority=0),
        ca_pod("filler", cpu="2500m", node_name="n2"),
    ]
    later = UNNEEDED + timedelta(minutes=1)
    # default order: by unneeded time, then name → n0 (the VIP pod) drains first
    world = World(nodes, pods)
    world.update()
    world.update(later)
    assert world.delete(later) == ([], ["n0"])
    # disruption cost: n1's pod (cost 1) is cheaper than n0's (cost 10)
    costly = replace(AutoscalerSettings(), candidates_order="disruption-cost")
    world = World(nodes, pods, settings=costly)
    world.update()
    world.update(later)
    assert world.delete(later) == ([], ["n1"])


@settings(max_examples=60, deadline=None)
@given(
    loads=st.lists(
        st.lists(st.integers(min_value=100, max_value=1300), max_size=3), min_size=2, max_size=6
    )
)
def test_moved_pods_fit_on_nodes_that_stay(loads: list[list[int]]) -> None:
    """Property: after planning, every node's requests still fit its allocatable, and every
    moved pod landed on a node that is not planned for removal."""
    nodes = [ca_node(f"n{i}", cpu="4", memory="64Gi") for i in range(len(loads))]
    pods = [
        ca_pod(
            f"p{i}-{j}",
            cpu=f"{m}m",
            memory="10Mi",
            node_name=f"n{i}",
            owner=("ReplicaSet", f"r{i}{j}"),
        )
        for i, load in enumerate(loads)
        for j, m in enumerate(load)
    ]  # at most 3 × 1300m = 3900m per node: every node starts within its 4 cpu
    world = World(nodes, pods)
    found = world.update()
    removed = {n.name for n in found}
    for state in world.cluster.nodes.values():
        assert state.requested.get("cpu", 0) <= state.allocatable["cpu"]
    for candidate in found:
        for moved in candidate.pods_to_move:
            holders = [n for n, s in world.cluster.nodes.items() if moved in s.pods]
            assert len(holders) == 1
            assert holders[0] not in removed


@settings(max_examples=60, deadline=None)
@given(
    loads=st.lists(
        st.lists(st.integers(min_value=100, max_value=1300), max_size=3), min_size=2, max_size=6
    )
)
def test_every_empty_node_is_unneeded_and_stays_empty(loads: list[list[int]]) -> None:
    """Property (upstream's EmptySorting first): an empty node is simulated before any pod can
    be moved onto it, so every node without pods is found unneeded, with nothing to move, and
    no planned move lands on it."""
    nodes = [ca_node(f"n{i}", cpu="4", memory="64Gi") for i in range(len(loads))]
    pods = [
        ca_pod(f"p{i}-{j}", cpu=f"{m}m", memory="10Mi", node_name=f"n{i}")
        for i, load in enumerate(loads)
        for j, m in enumerate(load)
    ]
    world = World(nodes, pods)
    found = {n.name: n for n in world.update()}
    for i, load in enumerate(loads):
        if load:
            continue
        name = f"n{i}"
        assert name in found
        assert found[name].empty
        assert world.cluster.nodes[name].pods == []


def test_node_group_of_a_node_to_remove() -> None:
    nodes, pods = three_nodes()
    world = World(nodes, pods)
    found = world.update()
    assert {n.group_id for n in found} == {"g"}
    assert isinstance(world.provider.groups["g"], NodeGroup)


def _with_host_port(made: Pod, port: int) -> Pod:
    made["spec"]["containers"][0]["ports"] = [{"containerPort": port, "hostPort": port}]
    return made


def test_drain_simulation_respects_host_ports() -> None:
    # n0: busy 2 cpu + exporter 500m holding host port 9100 → 2.5/4 = 0.625, not a candidate.
    # n1: only an exporter (500m, port 9100) → 0.125, a candidate; its exporter would fit n0 by
    # cpu (1.5 free) but NodePorts refuses it there → n1 cannot go
    nodes = [ca_node("n0", cpu="4", memory="16Gi"), ca_node("n1", cpu="4", memory="16Gi")]
    pods = [
        ca_pod("busy", cpu="2", memory="1Gi", node_name="n0"),
        _with_host_port(
            ca_pod(
                "exporter-a", cpu="500m", memory="100Mi", node_name="n0", owner=("ReplicaSet", "x")
            ),
            9100,
        ),
        _with_host_port(
            ca_pod(
                "exporter-b", cpu="500m", memory="100Mi", node_name="n1", owner=("ReplicaSet", "x")
            ),
            9100,
        ),
    ]
    world = World(nodes, pods)
    assert world.update() == []
    assert world.reason("n0") == "NotUnderutilized"
    assert world.reason("n1") == "NoPlaceToMovePods"


def test_drain_simulation_respects_topology_spread() -> None:
    # web pods spread by hostname, maxSkew 1: one on each of n0, n1, n2 (n0 also runs busy 3 cpu,
    # not a candidate). Draining n1 takes web-1 off: domains n0 1, n1 0 (the node stays in the
    # snapshot until it is gone), n2 1 → on n0 or n2: 1 + 1 − 0 = 2 > 1, refused; n2 likewise
    spread: PodSpec = {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}},
            }
        ]
    }
    nodes = [ca_node(f"n{i}", cpu="4", memory="16Gi") for i in range(3)]
    pods = [
        ca_pod("busy", cpu="3", memory="1Gi", node_name="n0", owner=("ReplicaSet", "b"), labels={}),
        *(
            ca_pod(f"web-{i}", cpu="100m", memory="100Mi", node_name=f"n{i}", extra_spec=spread)
            for i in range(3)
        ),
    ]
    world = World(nodes, pods)
    assert world.update() == []
    assert world.reason("n1") == "NoPlaceToMovePods"
    assert world.reason("n2") == "NoPlaceToMovePods"
