"""LowNodeUtilization and HighNodeUtilization, from upstream's rules (reference §1a).

Arithmetic in every row: usage % = used / allocatable × 100 (cpu in millicores), under = every
threshold resource <= low, over = some resource > high, a node may hold ``int(high% × 0.01 ×
capacity)``, the headroom is Σ over under nodes of (available − usage).
"""

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

LNU = "LowNodeUtilization"


def lnu(**args: Any) -> tuple[str, str, dict[str, Any]]:
    return ("balance", LNU, args)


STATIC = {"thresholds": {"cpu": 30, "pods": 30}, "targetThresholds": {"cpu": 50, "pods": 50}}


def test_static_thresholds_evict_until_the_node_is_back_under_its_target() -> None:
    # n1: cpu 8×400m = 3200/4000 = 80% > 50 → over; n2: 400/4000 = 10%, pods 1/10 = 10% → under.
    # n1 may hold int(50×0.01×4000) = 2000m and int(0.5×9) = 4 pods; n2's headroom:
    # cpu 2000−400 = 1600m, pods 5−1 = 4. Evicting 400m pods: after p0 cpu 2800 pods 7,
    # headroom 1200/3; p1 2400/6, 800/2; p2 2000/5, 400/1 — cpu no longer above 2000 but
    # pods 5 > 4, so go on; p3 1600/4, headroom 0/0 → stop. Four pods.
    nodes = [cycle_node("n1", pods="9"), cycle_node("n2", pods="10")]
    pods = [cycle_pod(f"p{i}", "n1", cpu="400m") for i in range(8)] + [
        cycle_pod("q", "n2", cpu="400m")
    ]
    assert evicted(run(policy(lnu(**STATIC)), nodes, pods)) == ["p0", "p1", "p2", "p3"]


def test_a_cordoned_node_is_never_under_utilized() -> None:
    # n2 would be under (10%) but is cordoned: no under node → nothing to do.
    nodes = [cycle_node("n1", pods="9"), cycle_node("n2", pods="10", unschedulable=True)]
    pods = [cycle_pod(f"p{i}", "n1", cpu="400m") for i in range(8)] + [
        cycle_pod("q", "n2", cpu="400m")
    ]
    assert evicted(run(policy(lnu(**STATIC)), nodes, pods)) == []


@pytest.mark.parametrize(
    ("number_of_nodes", "expected"),
    [
        (0, 4),  # 1 under node > 0
        (1, 0),  # 1 under node <= numberOfNodes 1 → abort
    ],
)
def test_number_of_nodes(number_of_nodes: int, expected: int) -> None:
    nodes = [cycle_node("n1", pods="9"), cycle_node("n2", pods="10")]
    pods = [cycle_pod(f"p{i}", "n1", cpu="400m") for i in range(8)] + [
        cycle_pod("q", "n2", cpu="400m")
    ]
    args = {**STATIC, "numberOfNodes": number_of_nodes}
    assert len(evicted(run(policy(lnu(**args)), nodes, pods))) == expected


def test_every_node_under_or_none_over_aborts() -> None:
    # both 10% → both under → "all nodes are underutilized"
    nodes = [cycle_node("n1"), cycle_node("n2")]
    pods = [cycle_pod("a", "n1", cpu="400m"), cycle_pod("b", "n2", cpu="400m")]
    assert evicted(run(policy(lnu(**STATIC)), nodes, pods)) == []
    # n1 at 40% (between 30 and 50) is appropriately used; n2 under; no over node
    pods = [cycle_pod(f"a{i}", "n1", cpu="400m") for i in range(4)] + [
        cycle_pod("b", "n2", cpu="400m")
    ]
    assert evicted(run(policy(lnu(**STATIC)), nodes, pods)) == []


def test_pods_sorted_low_to_high_priority_then_qos() -> None:
    # n1: 5 × 700m = 3500/4000 = 87.5% > 50 → over; n2 empty → under, headroom cpu
    # int(0.5×4000) − 0 = 2000. Order: no priority first ("none"), then priority 1 by QoS
    # (Burstable "low" before Guaranteed "guaranteed"), then priority 10. Evicting 700m:
    # 3500→2800 (headroom 1300) →2100 (600) →1400, no longer above 2000 → stop.
    nodes = [cycle_node("n1"), cycle_node("n2")]
    pods = [
        cycle_pod("high", "n1", cpu="700m", priority=10),
        cycle_pod(
            "guaranteed",
            "n1",
            cpu="700m",
            priority=1,
            limits={"cpu": "700m", "memory": "1Gi"},
            memory="1Gi",
        ),
        cycle_pod("low", "n1", cpu="700m", priority=1),
        cycle_pod("none", "n1", cpu="700m"),
        cycle_pod("high2", "n1", cpu="700m", priority=10),
    ]
    args = {"thresholds": {"cpu": 30}, "targetThresholds": {"cpu": 50}}
    assert evicted(run(policy(lnu(**args)), nodes, pods)) == ["none", "low", "guaranteed"]


def test_a_pod_must_tolerate_every_taint_of_some_under_node() -> None:
    # n2 (the only under node) has one NoSchedule taint: "plain" has no toleration → skipped;
    # "tolerant" tolerates it (1 toleration >= 1 taint) → evicted. PodToleratesTaints' quirk:
    # "wildcard" tolerates everything with one Exists toleration, but the node has 2 taints and
    # the pod only 1 toleration → not enough tolerations, skipped (second case).
    taint = {"key": "dedicated", "value": "x", "effect": "NoSchedule"}
    toleration = {"key": "dedicated", "operator": "Exists"}
    args = {"thresholds": {"cpu": 30}, "targetThresholds": {"cpu": 50}}
    pods = [
        cycle_pod("plain", "n1", cpu="1500m"),
        cycle_pod("tolerant", "n1", cpu="1500m", spec={"tolerations": [toleration]}),
    ]
    nodes = [cycle_node("n1"), cycle_node("n2", taints=[taint])]
    assert evicted(run(policy(lnu(**args)), nodes, pods)) == ["tolerant"]
    two = [taint, {"key": "other", "effect": "PreferNoSchedule"}]
    pods = [
        cycle_pod("wildcard", "n1", cpu="1500m", spec={"tolerations": [{"operator": "Exists"}]}),
        cycle_pod("filler", "n1", cpu="1500m", owners=[]),  # bare: not evictable
    ]
    assert (
        evicted(run(policy(lnu(**args)), [cycle_node("n1"), cycle_node("n2", taints=two)], pods))
        == []
    )


def test_eviction_limits_node_and_evictable_namespaces() -> None:
    # n1 3 × 1200m = 90% → over; limit 1 per node → one eviction; the kube-system pod is first
    # by priority order (none) but its namespace is excluded.
    nodes = [cycle_node("n1"), cycle_node("n2")]
    pods = [
        cycle_pod("sys", "n1", cpu="1200m", namespace="kube-system"),
        cycle_pod("a", "n1", cpu="1200m", priority=1),
        cycle_pod("b", "n1", cpu="1200m", priority=2),
    ]
    args = {
        "thresholds": {"cpu": 30},
        "targetThresholds": {"cpu": 50},
        "evictionLimits": {"node": 1},
        "evictableNamespaces": {"exclude": ["kube-system"]},
    }
    assert evicted(run(policy(lnu(**args)), nodes, pods)) == ["a"]


def test_deviation_thresholds() -> None:
    # cpu % : n1 3000/4000 = 75, n2 1000/4000 = 25, n3 500/4000 = 12.5 → avg 37.5.
    # low = 37.5 − 10 = 27.5, high = 37.5 + 10 = 47.5. n1 over (75 > 47.5); n2 25 <= 27.5 under;
    # n3 under. n1 may hold int(47.5×0.01×4000) = 1900m; headroom: n2 1900−1000 = 900,
    # n3 1900−500 = 1400 → 2300. Evicting 1000m pods: 3000→2000 (still > 1900), →1000 stop.
    # Headroom 2300→1300→300, still positive.
    nodes = [cycle_node("n1"), cycle_node("n2"), cycle_node("n3")]
    pods = [cycle_pod(f"p{i}", "n1", cpu="1000m") for i in range(3)]
    pods += [cycle_pod("q", "n2", cpu="1000m"), cycle_pod("r", "n3", cpu="500m")]
    args = {
        "useDeviationThresholds": True,
        "thresholds": {"cpu": 10},
        "targetThresholds": {"cpu": 10},
    }
    assert evicted(run(policy(lnu(**args)), nodes, pods)) == ["p0", "p1"]


def test_over_nodes_by_descending_usage_sum_and_the_total_headroom() -> None:
    # over: n1 cpu 3000 (75%), n2 cpu 2500 (62.5%); sums with memory 0 and pods:
    # n1 3000+0+3 = 3003, n2 2500+0+5 = 2505 → n1 first. Under n3 (0%): headroom cpu 2000.
    # n1: 1000m pods: 3000→2000 (headroom 1000), →... 2000 not > 2000 and pods 2 ok → stop.
    # n2: 500m pods: 2500 > 2000 → evict one (headroom 500), usage 2000 → stop.
    nodes = [cycle_node("n1"), cycle_node("n2"), cycle_node("n3")]
    pods = [cycle_pod(f"a{i}", "n1", cpu="1000m") for i in range(3)]
    pods += [cycle_pod(f"b{i}", "n2", cpu="500m") for i in range(5)]
    args = {"thresholds": {"cpu": 30}, "targetThresholds": {"cpu": 50}}
    assert evicted(run(policy(lnu(**args)), nodes, pods)) == ["a0", "b0"]


def test_metrics_utilization_from_node_metrics() -> None:
    # Requests say n1 is empty; real usage says 3600m of 4000 = 90% → over, n2 400m = 10% under.
    # Pod usage from PodMetrics: each 900m. Available int(0.5×4000) = 2000, headroom 2000−400 =
    # 1600. 3600→2700→1800 (stop: no longer above); headroom 1600→700→−200.
    nodes = [cycle_node("n1"), cycle_node("n2")]
    pods = [cycle_pod(f"p{i}", "n1") for i in range(4)] + [cycle_pod("q", "n2")]
    the_policy = policy(
        lnu(
            thresholds={"cpu": 30},
            targetThresholds={"cpu": 50},
            metricsUtilization={"source": "KubernetesMetrics"},
        ),
        metricsProviders=[{"source": "KubernetesMetrics"}],
    )
    usage = {"n1": {"cpu": 3600, "memory": 0}, "n2": {"cpu": 400, "memory": 0}}
    pod_usage = {("default", f"p{i}"): {"cpu": 900, "memory": 0} for i in range(4)}
    report = run(the_policy, nodes, pods, node_usage=usage, pod_usage=pod_usage)
    assert evicted(report) == ["p0", "p1"]
    # A node without metrics fails the plugin (an error, no eviction).
    report = run(the_policy, nodes, pods, node_usage={"n1": usage["n1"]}, pod_usage=pod_usage)
    assert evicted(report) == []
    assert "unable to find node 'n2' in the collected metrics" in report.errors[0]


def test_prometheus_usage_evicts_one_pod_per_node_without_a_limit() -> None:
    # MetricResource = int(0.9×100) = 90 > 50 → n1 over; n2 int(0.1×100) = 10 <= 30 under.
    # The pod's share is unknown: one eviction per over node, or evictionLimits.node of them.
    nodes = [cycle_node("n1"), cycle_node("n2")]
    pods = [cycle_pod(f"p{i}", "n1") for i in range(3)] + [cycle_pod("q", "n2")]
    base = {
        "thresholds": {"MetricResource": 30},
        "targetThresholds": {"MetricResource": 50},
        "metricsUtilization": {"source": "Prometheus", "prometheus": {"query": "node_util"}},
    }
    providers = [{"source": "Prometheus", "prometheus": {"url": "http://prometheus:9090"}}]
    values = {"node_util": {"n1": 0.9, "n2": 0.1}}
    report = run(policy(lnu(**base), metricsProviders=providers), nodes, pods, metric_usage=values)
    assert evicted(report) == ["p0"]
    limited = {**base, "evictionLimits": {"node": 2}}
    report = run(
        policy(lnu(**limited), metricsProviders=providers), nodes, pods, metric_usage=values
    )
    assert evicted(report) == ["p0", "p1"]
    report = run(
        policy(lnu(**base), metricsProviders=providers),
        nodes,
        pods,
        metric_usage={"node_util": {"n1": 1.5, "n2": 0.1}},
    )
    assert "outside of <0; 1> interval" in report.errors[0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"thresholds": {"cpu": 30}}, "targetThresholds: no resource threshold is configured"),
        (
            {"thresholds": {"cpu": 120}, "targetThresholds": {"cpu": 130}},
            "thresholds.cpu: 120 is not in [0, 100]",
        ),
        (
            {"thresholds": {"cpu": 60}, "targetThresholds": {"cpu": 50}},
            "thresholds.cpu: thresholds' cpu percentage is greater than targetThresholds'",
        ),
        (
            {"thresholds": {"cpu": 20}, "targetThresholds": {"memory": 50}},
            "different resources",
        ),
        (
            {**STATIC, "evictableNamespaces": {"include": ["a"]}},
            "evictableNamespaces.include: only exclude namespaces can be set",
        ),
        (
            {**STATIC, "metricsUtilization": {"source": "Prometheus"}},
            "prometheus property is missing",
        ),
        (
            {**STATIC, "metricsUtilization": {"source": "KubernetesMetrics"}},
            "KubernetesMetrics needs a metricsProviders entry",
        ),
        ({**STATIC, "numberOfNode": 1}, "numberOfNode: unknown field"),
    ],
)
def test_validation_names_the_field(args: dict[str, Any], message: str) -> None:
    with pytest.raises(PolicyError) as caught:
        policy(lnu(**args))
    assert message in str(caught.value)
    assert "profiles[default].pluginConfig[LowNodeUtilization].args" in str(caught.value)


# ---------------------------------------------------------------------------------- HNU


def hnu(**args: Any) -> tuple[str, str, dict[str, Any]]:
    return ("balance", "HighNodeUtilization", args)


def test_high_node_utilization_empties_the_least_used_nodes() -> None:
    # threshold cpu 20: n1 500/4000 = 12.5% under, n2 200/4000 = 5% under, n3 3000/4000 = 75%
    # destination. Sources by ascending usage sum: n2 (200+0+1 pods) before n1 (500+0+2).
    # Headroom = n3's capacity − usage: cpu 4000−3000 = 1000, memory, pods 110−1.
    # n2: "c" 200m → headroom 800; n1: "a" 250m → 550, "b" 250m → 300. All positive.
    nodes = [cycle_node("n1"), cycle_node("n2"), cycle_node("n3")]
    pods = [
        cycle_pod("a", "n1", cpu="250m"),
        cycle_pod("b", "n1", cpu="250m"),
        cycle_pod("c", "n2", cpu="200m"),
        cycle_pod("big", "n3", cpu="3000m"),
    ]
    assert evicted(run(policy(hnu(thresholds={"cpu": 20})), nodes, pods)) == ["c", "a", "b"]


def test_high_node_utilization_cordoned_sources_and_only_thresholding_resources() -> None:
    # n1 cordoned but under → still a source; n2 (75%) destination. "nocpu" requests no cpu:
    # skipped with OnlyThresholdingResources.
    nodes = [cycle_node("n1", unschedulable=True), cycle_node("n2")]
    pods = [
        cycle_pod("nocpu", "n1", memory="1Gi"),
        cycle_pod("cpu", "n1", cpu="100m"),
        cycle_pod("big", "n2", cpu="3000m"),
    ]
    args = {"thresholds": {"cpu": 20}, "evictionModes": ["OnlyThresholdingResources"]}
    assert evicted(run(policy(hnu(**args)), nodes, pods)) == ["cpu"]
    # Without the mode both go, in list order (same priority and QoS; "cpu" < "nocpu" by
    # name at equal creation time): headroom cpu 4000−3000 = 1000 → 900, memory 8Gi → 7Gi.
    assert evicted(run(policy(hnu(thresholds={"cpu": 20})), nodes, pods)) == ["cpu", "nocpu"]


def test_high_node_utilization_needs_a_destination_and_enough_headroom() -> None:
    # every node under → abort
    nodes = [cycle_node("n1"), cycle_node("n2")]
    pods = [cycle_pod("a", "n1", cpu="100m"), cycle_pod("b", "n2", cpu="100m")]
    assert evicted(run(policy(hnu(thresholds={"cpu": 20})), nodes, pods)) == []
    # destination full on pods: n2 allows 2 pods and holds 2 → headroom pods 0 → nothing moves
    nodes = [cycle_node("n1"), cycle_node("n2", pods="2")]
    pods = [
        cycle_pod("a", "n1", cpu="100m"),
        cycle_pod("x", "n2", cpu="2000m"),
        cycle_pod("y", "n2", cpu="2000m", owners=[owner(name="other")]),
    ]
    assert evicted(run(policy(hnu(thresholds={"cpu": 20})), nodes, pods)) == []
