"""The binpacking estimator (reference §2.3): First-Fit Decreasing on template copies, limits,
and the snapshot left unchanged."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.controllers.autoscaler.estimator.estimator import (
    BinpackingLimiter,
    estimate_nodes,
    limit_min,
    pod_group_score,
)
from kubescale.controllers.autoscaler.simulator.equivalence import build_pod_groups
from kubescale.controllers.autoscaler.simulator.template_nodes import (
    TemplateNode,
    sanitize_template,
)
from kubescale.objects.node import Node
from kubescale.objects.pod import Pod, PodSpec, TopologySpreadConstraint
from kubescale.scheduling.fit import ClusterSnapshot
from kubescale.scheduling.snapshot_journal import SnapshotJournal
from tests.controllers.autoscaler.builders import ca_node, ca_pod, group


def template(
    *,
    cpu: str = "4",
    memory: str = "16Gi",
    pods: int = 110,
    startup: list[Pod] | None = None,
) -> TemplateNode:
    return sanitize_template(
        node=ca_node("t", cpu=cpu, memory=memory, pods=pods),
        pods=startup or [],
        group_id="ng",
        source="provider",
    )


def pods_of(count: int, *, cpu: str, memory: str, owner: str = "web", **kw: Any) -> list[Pod]:
    return [
        ca_pod(f"{owner}-{i}", cpu=cpu, memory=memory, owner=("ReplicaSet", owner), **kw)
        for i in range(count)
    ]


def run(
    t: TemplateNode,
    pods: list[Pod],
    *,
    limiter: BinpackingLimiter | None = None,
    existing: list[Node] | None = None,
) -> tuple[int, int]:
    snapshot = ClusterSnapshot.build(nodes=existing or [], pods=[])
    journal = SnapshotJournal(snapshot)
    before = sorted(snapshot.nodes)
    result = estimate_nodes(
        journal=journal,
        template=t,
        groups=build_pod_groups(pods),
        limiter=limiter or BinpackingLimiter(),
    )
    assert sorted(snapshot.nodes) == before  # reverted
    return result.node_count, len(result.pods)


ANTI_AFFINITY = {
    "affinity": {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "db"}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
}


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        # 10 × 1 cpu on 4-cpu nodes: 4 per node → ceil(10/4) = 3 nodes, all placed
        ({"pods": [(10, "1", "1Gi")]}, (3, 10)),
        # 10 × (500m, 6Gi) on 16Gi: memory bound, floor(16/6) = 2 per node → 5 nodes
        ({"pods": [(10, "500m", "6Gi")]}, (5, 10)),
        # pod-count bound: maxPods 3, 10 tiny pods → 3+3+3+1 = 4 nodes
        ({"pods": [(10, "10m", "10Mi")], "max_pods": 3}, (4, 10)),
        # a 5-cpu pod fits no 4-cpu node: the fresh node e-0 stays empty → 0 nodes, 0 pods
        ({"pods": [(3, "5", "1Gi")]}, (0, 0)),
        # limiter of 2 nodes: 2 × 4 = 8 of the 10 pods
        ({"pods": [(10, "1", "1Gi")], "max_nodes": 2}, (2, 8)),
        # limiter negative (no capacity left): nothing
        ({"pods": [(10, "1", "1Gi")], "max_nodes": -1}, (0, 0)),
        # a 1-cpu DaemonSet pod on every template: 3 cpu left → 3 per node → ceil(10/3) = 4
        ({"pods": [(10, "1", "1Gi")], "daemonset_cpu": "1"}, (4, 10)),
        # FFD: 3 × 3 cpu first (score 0.75+), one per node → e-0..e-2 with 1 cpu free each;
        # then 3 × 1 cpu fill those gaps: 3 nodes in all
        ({"pods": [(3, "1", "1Gi"), (3, "3", "1Gi")]}, (3, 6)),
    ],
)
def test_binpacking_table(case: dict[str, Any], expected: tuple[int, int]) -> None:
    startup: list[Pod] = []
    if "daemonset_cpu" in case:
        startup = [ca_pod("ds", cpu=case["daemonset_cpu"], memory="", owner=("DaemonSet", "agent"))]
    t = template(pods=case.get("max_pods", 110), startup=startup)
    pods: list[Pod] = []
    for index, (count, cpu, memory) in enumerate(case["pods"]):
        pods += pods_of(count, cpu=cpu, memory=memory, owner=f"w{index}")
    limiter = BinpackingLimiter(max_nodes=case.get("max_nodes", 0))
    assert run(t, pods, limiter=limiter) == expected


def test_required_anti_affinity_on_hostname_puts_one_pod_per_node() -> None:
    pods = pods_of(
        5, cpu="100m", memory="100Mi", owner="db", labels={"app": "db"}, extra_spec=ANTI_AFFINITY
    )
    # each pod repels the others on its hostname: 5 template copies, one pod each
    assert run(template(), pods) == (5, 5)


def test_existing_nodes_are_not_used() -> None:
    # the cluster has a free 4-cpu node, but the estimate only counts new template nodes
    free = ca_node("existing", cpu="4", memory="16Gi")
    assert run(template(), pods_of(4, cpu="1", memory="1Gi"), existing=[free]) == (1, 4)


def test_pod_group_score_uses_regular_containers_against_allocatable() -> None:
    t = template(cpu="4", memory="16Gi")
    p = ca_pod("p", cpu="1", memory="4Gi")
    # 1000/4000 + 4Gi/16Gi = 0.25 + 0.25
    assert pod_group_score(p, t) == 0.5


@pytest.mark.parametrize(
    ("base", "target", "expected"),
    [
        (0, 0, 0),  # no limit and no limit
        (0, 5, 5),  # the first real limit
        (7, 5, 5),  # the smaller one
        (3, 5, 3),
        (3, 0, 3),  # 0 does not lift a limit
        (3, -1, -1),  # negative forbids
        (-1, 5, -1),
    ],
)
def test_limit_min(base: int, target: int, expected: int) -> None:
    assert limit_min(base, target) == expected


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        # static 1000, capacity max 10 − target 4 = 6 → 6
        ({"max": 10, "target": 4, "per_scaleup": 1000, "total": 0, "current": 50}, 6),
        # group full (10 − 10 = 0 → −1): no node at all
        ({"max": 10, "target": 10, "per_scaleup": 1000, "total": 0, "current": 50}, -1),
        # --max-nodes-total 52 with 50 nodes: room 2 < capacity 6 → 2
        ({"max": 10, "target": 4, "per_scaleup": 1000, "total": 52, "current": 50}, 2),
        # cluster already at the total: −1
        ({"max": 10, "target": 4, "per_scaleup": 1000, "total": 50, "current": 50}, -1),
        # --max-nodes-per-scaleup 3 is the smallest
        ({"max": 10, "target": 4, "per_scaleup": 3, "total": 0, "current": 50}, 3),
    ],
)
def test_limiter_thresholds(kw: dict[str, int], expected: int) -> None:
    limiter = BinpackingLimiter.for_group(
        group=group("g", max_size=kw["max"], target=kw["target"]),
        max_nodes_per_scaleup=kw["per_scaleup"],
        max_duration=10.0,
        max_nodes_total=kw["total"],
        current_nodes=kw["current"],
    )
    assert limiter.max_nodes == expected


def test_similar_groups_add_their_capacity() -> None:
    limiter = BinpackingLimiter.for_group(
        group=group("a", max_size=5, target=5),
        similar=[group("b", max_size=5, target=2)],
        max_nodes_per_scaleup=1000,
        max_duration=10.0,
        max_nodes_total=0,
        current_nodes=0,
    )
    assert limiter.max_nodes == 3  # (5 − 5) + (5 − 2)


def test_duration_limit_stops_adding_nodes() -> None:
    ticks = iter([0.0, 0.0, 11.0, 11.0, 11.0])
    limiter = BinpackingLimiter(max_nodes=0, max_duration=10.0, elapsed=lambda: next(ticks))
    # two nodes granted, then the clock says 11 s > 10 s
    assert run(template(), pods_of(20, cpu="1", memory="1Gi"), limiter=limiter) == (2, 8)


@settings(max_examples=120, deadline=None)
@given(
    count=st.integers(min_value=1, max_value=40),
    cpu=st.integers(min_value=50, max_value=4000),
    memory_mi=st.integers(min_value=10, max_value=16384),
    max_pods=st.integers(min_value=1, max_value=20),
)
def test_identical_pods_need_exactly_the_arithmetic_node_count(
    count: int, cpu: int, memory_mi: int, max_pods: int
) -> None:
    """Property: for identical pods, FFD's node count is ceil(n / per node), per node being the
    tightest of cpu, memory and pod count — and the snapshot is unchanged."""
    t = template(cpu="4", memory="16Gi", pods=max_pods)
    pods = pods_of(count, cpu=f"{cpu}m", memory=f"{memory_mi}Mi")
    per_node = min(4000 // cpu, (16 * 1024) // memory_mi, max_pods)
    nodes, placed = run(t, pods)
    assert (nodes, placed) == (math.ceil(count / per_node), count)


# ------------------------------------------------- host ports and topology spread (upstream)

ZONE = "topology.kubernetes.io/zone"


def estimatee(
    index: int,
    *,
    millicores: int,
    memory_bytes: int,
    owner: str = "estimatee",
    host_port: int = 0,
    max_skew: int = 0,
    key: str = "",
    min_domains: int | None = None,
) -> Pod:
    """``BuildTestPod("estimatee", cpu, mem, WithNamespace("universe"), WithLabels(app:
    estimatee), WithHostPort, WithMaxSkew(maxSkew, key, minDomains))``."""
    extra: PodSpec = {}
    if max_skew:
        constraint: TopologySpreadConstraint = {
            "maxSkew": max_skew,
            "topologyKey": key,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "estimatee"}},
        }
        if min_domains is not None:
            constraint["minDomains"] = min_domains
        extra["topologySpreadConstraints"] = [constraint]
    made = ca_pod(
        f"{owner}-{index}",
        cpu=f"{millicores}m",
        memory=str(memory_bytes),
        namespace="universe",
        owner=("ReplicaSet", owner),
        labels={"app": "estimatee"},
        extra_spec=extra,
    )
    if host_port:
        made["spec"]["containers"][0]["ports"] = [{"hostPort": host_port}]
    return made


def upstream_estimate(
    *, millicores: int, memory_mib: int, groups: list[list[Pod]], max_nodes: int = 0
) -> tuple[int, list[str]]:
    """``TestBinpackingEstimate``'s setting: the snapshot holds ``oldnode`` (100m, 100Mi, 10
    pods, zone-jupiter: a topology domain too small for most pods), the template is in
    zone-mars with 10 pods per node."""
    oldnode = ca_node("oldnode", cpu="100m", memory="100Mi", pods=10, labels={ZONE: "zone-jupiter"})
    t = sanitize_template(
        node=ca_node(
            "template",
            cpu=f"{millicores}m",
            memory=f"{memory_mib}Mi",
            pods=10,
            labels={ZONE: "zone-mars"},
        ),
        pods=[],
        group_id="ng",
        source="provider",
    )
    snapshot = ClusterSnapshot.build(nodes=[oldnode], pods=[])
    journal = SnapshotJournal(snapshot)
    result = estimate_nodes(
        journal=journal, template=t, groups=groups, limiter=BinpackingLimiter(max_nodes=max_nodes)
    )
    assert sorted(snapshot.nodes) == ["oldnode"]  # reverted
    assert not snapshot.nodes["oldnode"].pods
    return result.node_count, [p["metadata"]["name"] for p in result.pods]


def same(count: int, **kw: Any) -> list[Pod]:
    return [estimatee(i, **kw) for i in range(count)]


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        # "simple resource-based binpacking": 1000m nodes, 350m pods → 2 per node (3 × 350 =
        # 1050 > 1000): 10 pods → 5 nodes
        (
            {"m": 1000, "mib": 2000, "groups": [same(10, millicores=350, memory_bytes=1000)]},
            (5, 10),
        ),
        # "pods-per-node bound binpacking": 10 pods per node → 20 pods on 2 nodes
        (
            {"m": 10000, "mib": 20000, "groups": [same(20, millicores=10, memory_bytes=100)]},
            (2, 20),
        ),
        # "hostport conflict forces pod-per-node": 5 × 200m would fit, host port 5555 lets
        # one pod per node → 8 nodes
        (
            {
                "m": 1000,
                "mib": 5000,
                "groups": [same(8, millicores=200, memory_bytes=1000, host_port=5555)],
            },
            (8, 8),
        ),
        # "limiter cuts binpacking": 2 × 500m per node, 5 nodes allowed → 10 of 20 pods
        (
            {
                "m": 1000,
                "mib": 5000,
                "max": 5,
                "groups": [same(20, millicores=500, memory_bytes=1000)],
            },
            (5, 10),
        ),
        # "hostname topology spreading with maxSkew=2 forces 2 pods/node": oldnode is an empty
        # hostname domain (200m does not fit its 100m), so min = 0 and a node takes a third pod
        # only if 2 + 1 − 0 <= 2: no → 2 per node, 8 pods → 4 nodes
        (
            {
                "m": 1000,
                "mib": 5000,
                "groups": [
                    same(
                        8,
                        millicores=200,
                        memory_bytes=200,
                        max_skew=2,
                        key="kubernetes.io/hostname",
                        min_domains=1,
                    )
                ],
            },
            (4, 8),
        ),
        # "zonal topology spreading with maxSkew=2 only allows 2 pods to schedule": zone-jupiter
        # holds 0, so zone-mars takes 2 (2 + 1 − 0 > 2 for a third); a second node is in the same
        # zone and refuses it too → 1 node, 2 pods
        (
            {
                "m": 1000,
                "mib": 5000,
                "groups": [
                    same(8, millicores=20, memory_bytes=100, max_skew=2, key=ZONE, min_domains=1)
                ],
            },
            (1, 2),
        ),
        # "hostname topology spreading with maxSkew=1 with a large scaleup handles scheduling
        # pods retroactively", minDomains 3: e-0 takes 1 (2 domains < 3 → min 0); the 2nd pod is
        # refused there and goes to oldnode (20m fits its 100m: the retry over every other
        # node); the 3rd fits neither (1 + 1 − 0) → e-1; then domains e-0/oldnode/e-1 grow in
        # turn, 4 each: 12 pods on 3 nodes, oldnode counted as upstream counts it
        (
            {
                "m": 1000,
                "mib": 5000,
                "groups": [
                    same(
                        12,
                        millicores=20,
                        memory_bytes=100,
                        max_skew=1,
                        key="kubernetes.io/hostname",
                        min_domains=3,
                    )
                ],
            },
            (3, 12),
        ),
    ],
    ids=[
        "simple resource-based binpacking",
        "pods-per-node bound binpacking",
        "hostport conflict forces pod-per-node",
        "limiter cuts binpacking",
        "hostname spreading maxSkew=2 forces 2 pods per node",
        "zonal spreading maxSkew=2 only allows 2 pods",
        "hostname spreading maxSkew=1 minDomains=3 schedules retroactively",
    ],
)
def test_upstream_binpacking_estimate(case: dict[str, Any], expected: tuple[int, int]) -> None:
    count, placed = upstream_estimate(
        millicores=case["m"],
        memory_mib=case["mib"],
        groups=case["groups"],
        max_nodes=case.get("max", 0),
    )
    assert (count, len(placed)) == expected


def test_upstream_decreasing_ordered_pods_are_processed_first() -> None:
    # 10 × 50m and 10 × 500m, 5 nodes allowed: the 500m group goes first (score 0.5 > 0.05),
    # 2 per node fill all 5 nodes, the small pods find no room → the processed pods are the
    # high-resource ones
    small = [estimatee(i, millicores=50, memory_bytes=1000, owner="small") for i in range(10)]
    high = [estimatee(i, millicores=500, memory_bytes=1000, owner="high") for i in range(10)]
    count, placed = upstream_estimate(
        millicores=1000, memory_mib=5000, groups=[small, high], max_nodes=5
    )
    assert count == 5
    assert placed == [p["metadata"]["name"] for p in high]


def test_upstream_later_group_avoids_a_host_port_conflict() -> None:
    # TestBinpackingEstimatePlacementOnAddedNodes "pods go to an earlier node when the last
    # node has a host port conflict": big 600m × 2 take e-0 and e-1 (1200 > 1000); the two
    # 200m host-port pods then need one node each, both of which have 400m left → 2 nodes,
    # 4 pods
    big = [estimatee(i, millicores=600, memory_bytes=100, owner="big") for i in range(2)]
    ports = [
        estimatee(i, millicores=200, memory_bytes=100, owner="hostport", host_port=5555)
        for i in range(2)
    ]
    count, placed = upstream_estimate(millicores=1000, memory_mib=1000, groups=[big, ports])
    assert (count, len(placed)) == (2, 4)
