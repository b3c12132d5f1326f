"""Property: a pod placed on a node the extender lets through is not evicted by the next
descheduler cycle for a placement reason (node taints, node affinity, inter-pod anti-affinity,
topology spread, low node utilization).

Random small clusters (zones, taints, cordons, cpu sizes), running pods of three owners (with
anti-affinity and spread constraints), a random policy made of those five plugins, and a pending
pod. The extender's filter decides over every node (memory off); unless it had to fall back
(the policy refused every node), the pod is bound to each node it passed, in turn, and one cycle
runs with every eviction succeeding: none of them may be that pod's for one of those five
plugins. Run once against a copy of the extender whose LowNodeUtilization check ignores the
pod's own requests, hypothesis finds a counterexample at once (see the issue-14 report).
"""

from __future__ import annotations

from copy import deepcopy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubescale.controllers.descheduler.descheduling_cycle import descheduling_cycle, run_cycle
from kubescale.coordination.placement_rules import PlacementRules
from kubescale.extender.cluster_cache import ClusterCache
from kubescale.extender.extender_decisions import decide_filter
from kubescale.scheduling.cycle_view import CycleView, cycle_nodes
from kubescale.scheduling.policy.policy_loading import DeschedulerPolicy
from tests.controllers.descheduler.builders import NOW, cycle_node, cycle_pod, owner, policy, stamp

PLACEMENT = {
    "RemovePodsViolatingNodeTaints",
    "RemovePodsViolatingNodeAffinity",
    "RemovePodsViolatingInterPodAntiAffinity",
    "RemovePodsViolatingTopologySpreadConstraint",
    "LowNodeUtilization",
}
APPS = ("a", "b", "c")
ZONES = ("z1", "z2", "z3")
TAINTS = (
    {"key": "soft", "value": "x", "effect": "PreferNoSchedule"},
    {"key": "hard", "value": "y", "effect": "NoSchedule"},
)


def spread_spec(app: str, skew: int, when: str, key: str) -> dict[str, Any]:
    return {
        "maxSkew": skew,
        "topologyKey": key,
        "whenUnsatisfiable": when,
        "labelSelector": {"matchLabels": {"app": app}},
    }


def anti_affinity_spec(app: str, key: str) -> dict[str, Any]:
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}
            ]
        }
    }


@st.composite
def pod_specs(draw: st.DrawFn) -> dict[str, Any]:
    """Placement-related spec fields for a pod."""
    spec: dict[str, Any] = {}
    if draw(st.booleans()):
        spec["tolerations"] = draw(
            st.sampled_from(
                [
                    [{"key": "soft", "operator": "Exists"}],
                    [{"operator": "Exists"}],
                    [{"key": "hard", "operator": "Exists"}, {"key": "soft", "operator": "Exists"}],
                ]
            )
        )
    affinity: dict[str, Any] = {}
    if draw(st.integers(0, 3)) == 0:
        affinity.update(
            anti_affinity_spec(
                draw(st.sampled_from(APPS)),
                draw(st.sampled_from(["zone", "kubernetes.io/hostname"])),
            )
        )
    if draw(st.integers(0, 3)) == 0:
        affinity["nodeAffinity"] = {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": draw(st.integers(1, 50)),
                    "preference": {
                        "matchExpressions": [
                            {
                                "key": "zone",
                                "operator": "In",
                                "values": [draw(st.sampled_from(ZONES))],
                            }
                        ]
                    },
                }
            ]
        }
    if affinity:
        spec["affinity"] = affinity
    if draw(st.integers(0, 2)) == 0:
        spec["topologySpreadConstraints"] = [
            spread_spec(
                draw(st.sampled_from(APPS)),
                draw(st.integers(1, 2)),
                draw(st.sampled_from(["DoNotSchedule", "ScheduleAnyway"])),
                draw(st.sampled_from(["zone", "kubernetes.io/hostname"])),
            )
        ]
    return spec


@st.composite
def clusters(draw: st.DrawFn) -> tuple[DeschedulerPolicy, list[Any], list[Any], Any]:
    count = draw(st.integers(2, 5))
    nodes = []
    for i in range(count):
        taints = [t for t in TAINTS if draw(st.integers(0, 3)) == 0]
        nodes.append(
            cycle_node(
                f"n{i}",
                cpu=str(draw(st.integers(2, 8))),
                pods=str(draw(st.integers(4, 20))),
                labels={"zone": draw(st.sampled_from(ZONES))},
                taints=taints,
                unschedulable=draw(st.integers(0, 5)) == 0,
            )
        )
    pods = []
    for j in range(draw(st.integers(0, 10))):
        app = draw(st.sampled_from(APPS))
        pods.append(
            cycle_pod(
                f"p{j}",
                f"n{draw(st.integers(0, count - 1))}",
                cpu=f"{draw(st.integers(1, 20)) * 100}m",
                labels={"app": app},
                owners=[owner(name=app)],
                priority=draw(st.sampled_from([None, 0, 10])),
                spec=draw(pod_specs()),
                status={"startTime": stamp(NOW)},
            )
        )
    plugins: list[tuple[str, str, dict[str, Any] | None]] = []
    if draw(st.booleans()):
        plugins.append(
            (
                "deschedule",
                "RemovePodsViolatingNodeTaints",
                {"includePreferNoSchedule": draw(st.booleans())},
            )
        )
    if draw(st.booleans()):
        types = draw(
            st.sampled_from(
                [
                    ["requiredDuringSchedulingIgnoredDuringExecution"],
                    ["preferredDuringSchedulingIgnoredDuringExecution"],
                    [
                        "requiredDuringSchedulingIgnoredDuringExecution",
                        "preferredDuringSchedulingIgnoredDuringExecution",
                    ],
                ]
            )
        )
        plugins.append(
            ("deschedule", "RemovePodsViolatingNodeAffinity", {"nodeAffinityType": types})
        )
    if draw(st.booleans()):
        plugins.append(("deschedule", "RemovePodsViolatingInterPodAntiAffinity", None))
    if draw(st.booleans()):
        plugins.append(
            (
                "balance",
                "RemovePodsViolatingTopologySpreadConstraint",
                {
                    "constraints": draw(
                        st.sampled_from([["DoNotSchedule"], ["DoNotSchedule", "ScheduleAnyway"]])
                    ),
                    "topologyBalanceNodeFit": draw(st.booleans()),
                },
            )
        )
    if draw(st.booleans()):
        low = draw(st.integers(0, 60))
        high = draw(st.integers(low, 90))
        deviation = draw(st.booleans())
        resources = draw(st.sampled_from([["cpu"], ["cpu", "pods"], ["pods"]]))
        plugins.append(
            (
                "balance",
                "LowNodeUtilization",
                {
                    "thresholds": dict.fromkeys(resources, low if not deviation else low % 30),
                    "targetThresholds": dict.fromkeys(
                        resources, high if not deviation else high % 30
                    ),
                    "useDeviationThresholds": deviation,
                    "numberOfNodes": draw(st.integers(0, 1)),
                },
            )
        )
    the_policy = policy(*plugins)
    app = draw(st.sampled_from(APPS))
    pending = cycle_pod(
        "new",
        None,
        cpu=f"{draw(st.integers(1, 20)) * 100}m",
        labels={"app": app},
        owners=[owner(name=app)],
        priority=draw(st.sampled_from([None, 0, 10])),
        spec=draw(pod_specs()),
    )
    return the_policy, nodes, pods, pending


# full_examples: the copy that ignores the pod's own requests got through 100 examples on one
# of five seeds; 300 caught it (issue 32.7)
@pytest.mark.full_examples
@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(clusters())
def test_pods_placed_through_the_extender_are_not_evicted_for_the_same_reason(
    case: tuple[DeschedulerPolicy, list[Any], list[Any], Any],
) -> None:
    the_policy, nodes, pods, pending = case
    cache = ClusterCache(policy=the_policy, now=lambda: NOW).load(nodes=nodes, pods=pods)
    names = [n["metadata"]["name"] for n in nodes]
    decision = decide_filter(
        pending,
        names,
        rules=PlacementRules.from_policy(the_policy),
        state=cache,
        veto=None,
        now=NOW,
    )
    if decision.policy_fallback:
        return
    for name in decision.passed:
        placed = deepcopy(pending)
        placed["spec"]["nodeName"] = name
        placed["status"] = {"phase": "Running", "startTime": stamp(NOW)}
        everything = [*pods, placed]
        view = CycleView(
            now=NOW,
            nodes=cycle_nodes(nodes, the_policy.node_selector_parsed),
            pods=everything,
            all_nodes=nodes,
        )
        report = run_cycle(descheduling_cycle(policy=the_policy, view=view), lambda r: True)
        evicted = [
            r.strategy for r in report.evicted if r.pod == "default/new" and r.strategy in PLACEMENT
        ]
        assert evicted == [], f"placed on {name}, evicted by {evicted}"
