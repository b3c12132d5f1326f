"""RemoveDuplicates and RemovePodsViolatingTopologySpreadConstraint (reference §1a)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tests.controllers.descheduler.builders import (
    NOW,
    cycle_node,
    cycle_pod,
    evicted,
    owner,
    policy,
    run,
)

DUPLICATES = ("balance", "RemoveDuplicates", None)


def copies(prefix: str, node_name: str, count: int, *, start: int = 0, **extra: Any) -> list[Any]:
    """``count`` pods of ReplicaSet ``web``, created a minute apart (listing order = index)."""
    return [
        cycle_pod(
            f"{prefix}{i}", node_name, created=NOW - timedelta(minutes=100 - start - i), **extra
        )
        for i in range(count)
    ]


def test_duplicates_are_spread_to_the_average() -> None:
    # 4 copies: n1 has 3 (original + 2 duplicates), n2 1. Three nodes match the duplicates'
    # placement → upperAvg = ceil(4 / 3) = 2; n1: 2 dups + 1 = 3 > 2 → evict dups[2−1:] = [a2].
    nodes = [cycle_node("n1"), cycle_node("n2"), cycle_node("n3")]
    pods = copies("a", "n1", 3) + copies("b", "n2", 1, start=10)
    assert evicted(run(policy(DUPLICATES), nodes, pods)) == ["a2"]
    # 4 copies all on n1: upperAvg 2, dups 3 → evict dups[1:] = [a2, a3]
    pods = copies("a", "n1", 4)
    assert evicted(run(policy(DUPLICATES), nodes, pods)) == ["a2", "a3"]


def test_duplicates_need_two_target_nodes() -> None:
    # n2 and n3 tainted: the duplicates' class matches only n1 (1 node, not > 1) → no targets.
    taint = {"key": "x", "effect": "NoSchedule"}
    nodes = [cycle_node("n1"), cycle_node("n2", taints=[taint]), cycle_node("n3", taints=[taint])]
    assert evicted(run(policy(DUPLICATES), nodes, copies("a", "n1", 4))) == []
    # a cordoned node still counts as a target (only taints and affinity are checked)
    nodes = [cycle_node("n1"), cycle_node("n2", unschedulable=True)]
    assert evicted(run(policy(DUPLICATES), nodes, copies("a", "n1", 4))) == ["a2", "a3"]


def test_duplicates_key_on_owner_and_images() -> None:
    nodes = [cycle_node("n1"), cycle_node("n2")]
    pods = [
        *copies("a", "n1", 2),
        cycle_pod("other-image", "n1", image="redis"),
        cycle_pod("other-owner", "n1", owners=[owner(name="api")]),
        cycle_pod("job", "n1", owners=[owner("Job", "batch")]),
        cycle_pod("job2", "n1", owners=[owner("Job", "batch")]),
    ]
    # web×2 on n1: occurrences 2, targets 2, upperAvg 1 → dups [a1] → 2 > 1 → evict a1.
    # Job batch×2: same → evict job2 unless Jobs are excluded.
    assert sorted(evicted(run(policy(DUPLICATES), nodes, pods))) == ["a1", "job2"]
    excluded = ("balance", "RemoveDuplicates", {"excludeOwnerKinds": ["Job"]})
    assert evicted(run(policy(excluded), nodes, pods)) == ["a1"]


def spread(
    key: str = "zone", *, skew: int = 1, when: str = "DoNotSchedule", **extra: Any
) -> dict[str, Any]:
    return {
        "topologySpreadConstraints": [
            {
                "maxSkew": skew,
                "topologyKey": key,
                "whenUnsatisfiable": when,
                "labelSelector": {"matchLabels": {"app": "web"}},
                **extra,
            }
        ]
    }


TSC = ("balance", "RemovePodsViolatingTopologySpreadConstraint", None)
ZONES = [cycle_node("n1", labels={"zone": "a"}), cycle_node("n2", labels={"zone": "b"})]


def web(name: str, node_name: str, minute: int, **extra: Any) -> Any:
    spec = extra.pop("spec", None) or spread()
    return cycle_pod(
        name,
        node_name,
        labels={"app": "web"},
        created=NOW - timedelta(minutes=100 - minute),
        spec=spec,
        **extra,
    )


def test_topology_spread_moves_half_the_skew() -> None:
    # zone a 4 pods, zone b 1: avg 5/2 = 2.5, skew 3 > 1. move = min(ceil(4 − 2.5) = 2,
    # ceil(2.5 − 1) = 2, ceil((3 − 1)/2) = 1) = 1 → the last pod of zone a's order (equal keys:
    # listing order) → a3. Then a 3, b 2: skew 1 → balanced.
    pods = [web(f"a{i}", "n1", i) for i in range(4)] + [web("b0", "n2", 10)]
    assert evicted(run(policy(TSC), ZONES, pods)) == ["a3"]


def test_topology_spread_order_within_a_domain() -> None:
    # Upstream's comparator: no priority first, then ascending priority; pods are taken from
    # the end, so the highest priority goes (the code, not its comment, is followed).
    pods = [
        web("p3", "n1", 0, priority=3),
        web("none", "n1", 1),
        web("p1", "n1", 2, priority=1),
        web("p2", "n1", 3, priority=2),
        web("b0", "n2", 10),
    ]
    assert evicted(run(policy(TSC), ZONES, pods)) == ["p3"]
    # pods with a nodeSelector come before the others, so they go last
    pods = [
        web("sel", "n1", 0, spec={**spread(), "nodeSelector": {"zone": "a"}}),
        *(web(f"a{i}", "n1", i + 1) for i in range(3)),
        web("b0", "n2", 10),
    ]
    assert evicted(run(policy(TSC), ZONES, pods)) == ["a2"]


def test_topology_spread_constraint_kinds_and_balanced_domains() -> None:
    soft = [web(f"a{i}", "n1", i, spec=spread(when="ScheduleAnyway")) for i in range(4)]
    soft.append(web("b0", "n2", 10, spec=spread(when="ScheduleAnyway")))
    assert evicted(run(policy(TSC), ZONES, soft)) == []
    both = (
        "balance",
        "RemovePodsViolatingTopologySpreadConstraint",
        {"constraints": ["DoNotSchedule", "ScheduleAnyway"]},
    )
    assert evicted(run(policy(both), ZONES, soft)) == ["a3"]
    # 3 vs 1 with maxSkew 2 is balanced
    pods = [web(f"a{i}", "n1", i, spec=spread(skew=2)) for i in range(3)]
    pods.append(web("b0", "n2", 10, spec=spread(skew=2)))
    assert evicted(run(policy(TSC), ZONES, pods)) == []


def test_topology_balance_node_fit() -> None:
    # The moved pod does not fit zone b's node (3 cpu asked, n2 has 4 with 2 taken): with
    # topologyBalanceNodeFit (default) it is counted as moved but not evicted.
    pods = [web(f"a{i}", "n1", i, cpu="3") for i in range(4)]
    pods.append(web("b0", "n2", 10, cpu="2"))
    nodes = [
        cycle_node("n1", cpu="16", labels={"zone": "a"}),
        cycle_node("n2", labels={"zone": "b"}),
    ]
    assert evicted(run(policy(TSC), nodes, pods)) == []
    off = (
        "balance",
        "RemovePodsViolatingTopologySpreadConstraint",
        {"topologyBalanceNodeFit": False},
    )
    assert evicted(run(policy(off), nodes, pods)) == ["a3"]


def test_topology_spread_node_inclusion_policies() -> None:
    # zone c's node is tainted. Ignore (default): zone c is a domain with 0 pods → avg 4/3,
    # skew 3 − 0 > 1 → zone a gives pods. Honor: zone c is not a domain; a 3 vs b 1, maxSkew 2
    # → balanced.
    taint = {"key": "x", "effect": "NoSchedule"}
    nodes = [*ZONES, cycle_node("n3", labels={"zone": "c"}, taints=[taint])]
    pods = [web(f"a{i}", "n1", i, spec=spread(skew=2)) for i in range(3)]
    pods.append(web("b0", "n2", 10, spec=spread(skew=2)))
    # Ignore: sorted [c 0, b 1, a 3], avg 4/3; i=c, j=a: skew 3 > 2, move = min(ceil(3 − 1.33)
    # = 2, ceil(1.33 − 0) = 2, ceil((3−2)/2) = 1) = 1 → a2 marked; it must fit a node of the
    # below-average domains (c: tainted → no; b: 1 < 1.33 → n2 fits) → evicted.
    assert evicted(run(policy(TSC), nodes, pods)) == ["a2"]
    honor = [
        web(
            p["metadata"]["name"],
            p["spec"]["nodeName"],
            i,
            spec=spread(skew=2, nodeTaintsPolicy="Honor"),
        )
        for i, p in enumerate(pods)
    ]
    assert evicted(run(policy(TSC), nodes, honor)) == []
