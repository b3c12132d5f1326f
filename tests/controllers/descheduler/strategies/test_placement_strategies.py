"""RemovePodsViolatingNodeTaints, RemovePodsViolatingNodeAffinity and
RemovePodsViolatingInterPodAntiAffinity, from upstream's rules (reference §1a)."""

from __future__ import annotations

from typing import Any

import pytest

from kubescale.scheduling.policy.fields import PolicyError
from tests.controllers.descheduler.builders import (
    cycle_node,
    cycle_pod,
    evicted,
    owner,
    policy,
    run,
)

NO_SCHEDULE = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
PREFER = {"key": "soft", "value": "x", "effect": "PreferNoSchedule"}
NO_EXECUTE = {"key": "gone", "effect": "NoExecute"}


def taints(**args: Any) -> tuple[str, str, dict[str, Any]]:
    return ("deschedule", "RemovePodsViolatingNodeTaints", args)


@pytest.mark.parametrize(
    ("node_taints", "args", "expected"),
    [
        # NoSchedule untolerated → evicted
        ([NO_SCHEDULE], {}, ["plain"]),
        # PreferNoSchedule only counts with includePreferNoSchedule
        ([PREFER], {}, []),
        ([PREFER], {"includePreferNoSchedule": True}, ["plain", "tolerates-gpu"]),
        # NoExecute is the taint manager's job
        ([NO_EXECUTE], {}, []),
        # excludedTaints: "dedicated" (key) and "dedicated=gpu" (key=value) both match;
        # "dedicated=cpu" does not
        ([NO_SCHEDULE], {"excludedTaints": ["dedicated"]}, []),
        ([NO_SCHEDULE], {"excludedTaints": ["dedicated=gpu"]}, []),
        ([NO_SCHEDULE], {"excludedTaints": ["dedicated=cpu"]}, ["plain"]),
        # includedTaints: only listed taints count
        ([NO_SCHEDULE], {"includedTaints": ["other"]}, []),
        ([NO_SCHEDULE], {"includedTaints": ["dedicated=gpu"]}, ["plain"]),
    ],
)
def test_node_taints(
    node_taints: list[dict[str, str]], args: dict[str, Any], expected: list[str]
) -> None:
    nodes = [cycle_node("n1", taints=node_taints), cycle_node("n2")]
    tolerate_gpu = {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
    pods = [
        cycle_pod("plain", "n1"),
        cycle_pod("tolerates-gpu", "n1", spec={"tolerations": [tolerate_gpu]}),
        cycle_pod("tolerates-all", "n1", spec={"tolerations": [{"operator": "Exists"}]}),
    ]
    assert evicted(run(policy(taints(**args)), nodes, pods)) == expected


def test_node_taints_scope_and_evictor() -> None:
    nodes = [cycle_node("n1", taints=[NO_SCHEDULE]), cycle_node("n2")]
    pods = [
        cycle_pod("a", "n1", namespace="team", labels={"app": "a"}),
        cycle_pod("b", "n1", namespace="other", labels={"app": "a"}),
        cycle_pod("c", "n1", namespace="team", labels={"app": "c"}),
        cycle_pod("bare", "n1", namespace="team", labels={"app": "a"}, owners=[]),
    ]
    args = {"namespaces": {"include": ["team"]}, "labelSelector": {"matchLabels": {"app": "a"}}}
    # b: namespace not included; c: labels do not match; bare: the evictor protects it
    assert evicted(run(policy(taints(**args)), nodes, pods)) == ["a"]


def test_node_taints_validation() -> None:
    with pytest.raises(PolicyError, match=r"includedTaints: cannot be set together"):
        policy(taints(excludedTaints=["a"], includedTaints=["b"]))
    with pytest.raises(PolicyError, match=r"namespaces: only one of include and exclude"):
        policy(taints(namespaces={"include": ["a"], "exclude": ["b"]}))


def affinity(*types: str) -> tuple[str, str, dict[str, Any]]:
    return ("deschedule", "RemovePodsViolatingNodeAffinity", {"nodeAffinityType": list(types)})


def required_affinity(key: str, value: str) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}
    return {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
            }
        }
    }


def preferred_affinity(*weighted: tuple[int, str, str]) -> dict[str, Any]:
    return {
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": weight,
                        "preference": {
                            "matchExpressions": [{"key": key, "operator": "In", "values": [value]}]
                        },
                    }
                    for weight, key, value in weighted
                ]
            }
        }
    }


REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def test_required_node_affinity() -> None:
    nodes = [cycle_node("n1", labels={"disk": "hdd"}), cycle_node("n2", labels={"disk": "ssd"})]
    pods = [
        # wants ssd, runs on hdd, fits n2 → evicted
        cycle_pod("wrong", "n1", cpu="1", spec=required_affinity("disk", "ssd")),
        # wants hdd, is on hdd → stays
        cycle_pod("right", "n1", cpu="1", spec=required_affinity("disk", "hdd")),
        # wants nvme: fits no node → stays (PodFitsAnyNode)
        cycle_pod("nowhere", "n1", cpu="1", spec=required_affinity("disk", "nvme")),
        # a nodeSelector alone is not "required node affinity"
        cycle_pod("selector", "n1", cpu="1", spec={"nodeSelector": {"disk": "ssd"}}),
    ]
    assert evicted(run(policy(affinity(REQUIRED)), nodes, pods)) == ["wrong"]
    # too big for n2 (8 cpu of 4) → does not fit anywhere → stays
    big = [cycle_pod("wrong", "n1", cpu="8", spec=required_affinity("disk", "ssd"))]
    assert evicted(run(policy(affinity(REQUIRED)), nodes, big)) == []


def test_preferred_node_affinity() -> None:
    nodes = [
        cycle_node("n1", labels={"disk": "hdd", "zone": "a"}),
        cycle_node("n2", labels={"disk": "ssd", "zone": "a"}),
    ]
    pods = [
        # weights: n1 = 0 + 5 (zone a) = 5, n2 = 20 + 5 = 25 → best 25 > 5 → evicted
        cycle_pod("better", "n1", spec=preferred_affinity((20, "disk", "ssd"), (5, "zone", "a"))),
        # n1 = 5, n2 = 5 → not better → stays
        cycle_pod("equal", "n1", spec=preferred_affinity((5, "zone", "a"))),
        # on its best node already
        cycle_pod("best", "n2", spec=preferred_affinity((20, "disk", "ssd"))),
    ]
    assert evicted(run(policy(affinity(PREFERRED)), nodes, pods)) == ["better"]


def test_node_affinity_needs_a_type() -> None:
    with pytest.raises(PolicyError, match=r"nodeAffinityType: needs to be set"):
        policy(("deschedule", "RemovePodsViolatingNodeAffinity", {}))
    with pytest.raises(PolicyError, match=r"nodeAffinityType\[0\]: 'sometimes' is not"):
        policy(affinity("sometimes"))


def anti_affinity(app: str, topology_key: str = "kubernetes.io/hostname") -> dict[str, Any]:
    return {
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": topology_key}
                ]
            }
        }
    }


ANTI = ("deschedule", "RemovePodsViolatingInterPodAntiAffinity", None)


def test_inter_pod_anti_affinity_lowest_priority_goes_and_leaves_the_set() -> None:
    # p1 (prio 100) and p2 (prio 10) on n1 both refuse "app=web" next to them, and both are
    # web. Low → high priority: p2 first: p1 matches → p2 evicted and leaves the set; then p1:
    # no other web pod on n1 → stays. p3 on n2 alone → stays.
    nodes = [cycle_node("n1"), cycle_node("n2")]
    pods = [
        cycle_pod("p1", "n1", labels={"app": "web"}, priority=100, spec=anti_affinity("web")),
        cycle_pod("p2", "n1", labels={"app": "web"}, priority=10, spec=anti_affinity("web")),
        cycle_pod("p3", "n2", labels={"app": "web"}, spec=anti_affinity("web")),
    ]
    assert evicted(run(policy(ANTI), nodes, pods)) == ["p2"]
    # When the eviction fails (a PDB), p2 stays in the set and p1 violates too.
    report = run(policy(ANTI), nodes, pods, answer=lambda request: False)
    assert [r.pod for r in report.evictions] == ["default/p2", "default/p1"]


def test_inter_pod_anti_affinity_topology_and_namespaces() -> None:
    # zone topology: n1 and n2 share zone a; "db" on n2 is in zone a → "app" on n1 violates.
    nodes = [
        cycle_node("n1", labels={"zone": "a"}),
        cycle_node("n2", labels={"zone": "a"}),
        cycle_node("n3", labels={"zone": "b"}),
    ]
    pods = [
        cycle_pod("app", "n1", spec=anti_affinity("db", "zone"), owners=[owner(name="app")]),
        cycle_pod("db", "n2", labels={"app": "db"}, owners=[owner(name="db")]),
        cycle_pod("far", "n3", spec=anti_affinity("db", "zone"), owners=[owner(name="far")]),
        # another namespace's db does not count (term namespaces default to the pod's own)
        cycle_pod("other-app", "n1", namespace="other", spec=anti_affinity("db", "zone")),
    ]
    assert evicted(run(policy(ANTI), nodes, pods)) == ["app"]
