"""The cycle: nodes, plugin order, limits and errors (reference §1, §2 "Limits")."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from kubescale.controllers.descheduler.descheduling_cycle import descheduling_cycle, run_cycle
from kubescale.controllers.descheduler.framework.eviction import EvictionRequest, EvictionResult
from kubescale.scheduling.policy.policy_loading import parse_policy

from .builders import NOW, cycle_node, cycle_pod, evicted, policy, run, view

TAINT = {"key": "bad", "effect": "NoSchedule"}
TAINTS = ("deschedule", "RemovePodsViolatingNodeTaints", None)


def test_at_most_one_node_skips_the_cycle() -> None:
    report = run(policy(TAINTS), [cycle_node("n1", taints=[TAINT])], [cycle_pod("a", "n1")])
    assert report.skipped.startswith("The cluster size is 0 or 1")
    assert evicted(report) == []


def test_nodes_are_ready_nodes_matching_the_node_selector_cordoned_kept() -> None:
    nodes = [
        cycle_node("n1", taints=[TAINT], labels={"pool": "a"}),
        cycle_node("n2", taints=[TAINT], labels={"pool": "a"}, ready=False),  # not ready: left out
        cycle_node(
            "n3", taints=[TAINT], labels={"pool": "a"}, unschedulable=True
        ),  # cordoned: kept
        cycle_node("n4", taints=[TAINT], labels={"pool": "b"}),  # not selected
        cycle_node("n5", labels={"pool": "a"}, ready=None),  # no Ready condition: kept
    ]
    pods = [cycle_pod(f"p{i}", f"n{i}") for i in range(1, 5)]
    the_policy = policy(TAINTS, nodeSelector="pool=a")
    assert [n["metadata"]["name"] for n in view(nodes, pods, the_policy=the_policy).nodes] == [
        "n1",
        "n3",
        "n5",
    ]
    assert evicted(run(the_policy, nodes, pods)) == ["p1", "p3"]


def test_deschedule_plugins_of_every_profile_run_before_balance_plugins() -> None:
    document = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [
            {
                "name": "first",
                "pluginConfig": [{"name": "RemoveDuplicates"}],
                "plugins": {"balance": {"enabled": ["RemoveDuplicates"]}},
            },
            {
                "name": "second",
                "plugins": {"deschedule": {"enabled": ["RemovePodsViolatingNodeTaints"]}},
            },
        ],
    }
    the_policy = parse_policy(document)
    nodes = [cycle_node("n1", taints=[TAINT]), cycle_node("n2"), cycle_node("n3")]
    pods = [
        cycle_pod("t", "n1", image="a"),
        cycle_pod("d1", "n2"),
        cycle_pod("d2", "n2"),
        cycle_pod("d3", "n2"),
    ]
    report = run(the_policy, nodes, pods)
    # second's taint plugin first (t), then first's duplicates: 3 copies of web/nginx on n2;
    # the copies do not tolerate n1's taint → 2 target nodes (n2, n3) → upperAvg ceil(3/2) = 2
    # → dups [d2, d3], 3 > 2 → dups[1:] = [d3]
    assert [(r.profile, r.strategy, r.pod) for r in report.evicted] == [
        ("second", "RemovePodsViolatingNodeTaints", "default/t"),
        ("first", "RemoveDuplicates", "default/d3"),
    ]
    assert [(t.profile, t.strategy) for t in report.strategies] == [
        ("second", "RemovePodsViolatingNodeTaints"),
        ("first", "RemoveDuplicates"),
    ]


def taint_cluster() -> tuple[list[Any], list[Any]]:
    nodes = [cycle_node("n1", taints=[TAINT]), cycle_node("n2", taints=[TAINT]), cycle_node("n3")]
    pods = [
        cycle_pod("a1", "n1", namespace="a"),
        cycle_pod("a2", "n1", namespace="a"),
        cycle_pod("b1", "n1", namespace="b"),
        cycle_pod("a3", "n2", namespace="a"),
        cycle_pod("b2", "n2", namespace="b"),
    ]
    return nodes, pods


@pytest.mark.parametrize(
    ("limits", "expected", "results"),
    [
        # total 3: the fourth request is refused before any API call
        ({"maxNoOfPodsToEvictTotal": 3}, ["a1", "a2", "b1"], [EvictionResult.TOTAL_LIMIT]),
        # 1 per node: n1 → a1, then the node limit moves on to n2 → a3
        ({"maxNoOfPodsToEvictPerNode": 1}, ["a1", "a3"], [EvictionResult.NODE_LIMIT] * 2),
        # 1 per namespace: a1; a2 refused (next pod), b1; a3 refused, b2 refused
        ({"maxNoOfPodsToEvictPerNamespace": 1}, ["a1", "b1"], [EvictionResult.NAMESPACE_LIMIT] * 3),
    ],
)
def test_limits(limits: dict[str, int], expected: list[str], results: list[EvictionResult]) -> None:
    nodes, pods = taint_cluster()
    report = run(policy(TAINTS, **limits), nodes, pods)
    assert evicted(report) == expected
    assert [r.result for r in report.evictions if r.result is not EvictionResult.EVICTED] == results


def test_limit_check_order_is_total_node_namespace() -> None:
    # with every limit at 1: the second request breaks all three; total is reported
    nodes, pods = taint_cluster()
    the_policy = policy(
        TAINTS,
        maxNoOfPodsToEvictTotal=1,
        maxNoOfPodsToEvictPerNode=1,
        maxNoOfPodsToEvictPerNamespace=1,
    )
    report = run(the_policy, nodes, pods)
    assert [r.result.label for r in report.evictions] == [
        "success",
        "maximum number of evicted pods per a descheduling cycle reached",
    ]


def test_failed_evictions_do_not_count_against_limits() -> None:
    # a1's eviction fails (a PDB): the total limit of 1 still lets a2 go
    nodes, pods = taint_cluster()

    def answer(request: EvictionRequest) -> bool:
        return request.name != "a1"

    report = run(policy(TAINTS, maxNoOfPodsToEvictTotal=1), nodes, pods, answer=answer)
    assert [(r.pod, r.result.label) for r in report.evictions][:2] == [
        ("a/a1", "error"),
        ("a/a2", "success"),
    ]


def test_plugin_errors_are_recorded_and_the_cycle_goes_on() -> None:
    document = yaml.safe_load(
        """
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
metricsProviders: [{source: KubernetesMetrics}]
profiles:
- name: p
  pluginConfig:
  - name: LowNodeUtilization
    args:
      thresholds: {cpu: 20}
      targetThresholds: {cpu: 50}
      metricsUtilization: {source: KubernetesMetrics}
  plugins:
    balance: {enabled: [LowNodeUtilization]}
    deschedule: {enabled: [RemovePodsViolatingNodeTaints]}
"""
    )
    the_policy = parse_policy(document)
    nodes, pods = taint_cluster()
    cycle_view = view(nodes, pods, the_policy=the_policy)  # no node metrics collected
    report = run_cycle(descheduling_cycle(policy=the_policy, view=cycle_view), lambda r: True)
    assert len(report.evicted) == 5
    assert report.errors == [
        "profile p, plugin LowNodeUtilization: error getting node usage: metrics client not "
        "initialized"
    ]


def test_eviction_request_names_profile_strategy_and_reason() -> None:
    nodes, pods = taint_cluster()
    cycle = descheduling_cycle(policy=policy(TAINTS), view=view(nodes, pods, now=NOW))
    request = next(cycle)
    assert request.annotation_reason() == (
        "triggered by default/RemovePodsViolatingNodeTaints: pod does not tolerate taint "
        "bad:NoSchedule"
    )
    assert (request.namespace, request.name, request.node) == ("a", "a1", "n1")
