"""The scale-up decision (reference §2.2): options per group, skip reasons, limits, balancing,
and the event texts."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from kubescale.controllers.autoscaler.cloudprovider.cloud_provider import (
    ErrorClass,
    InstanceErrorInfo,
    NodeGroup,
)
from kubescale.controllers.autoscaler.clusterstate.backoff import BackoffEntry
from kubescale.controllers.autoscaler.clusterstate.cluster_state import ScaleUpSafety
from kubescale.controllers.autoscaler.config.autoscaler_config import (
    AutoscalerSettings,
    ResourceRange,
)
from kubescale.controllers.autoscaler.expander.expanders import ExpanderChain, LeastWaste
from kubescale.controllers.autoscaler.scaleup.scale_up import (
    NoScaleUpInfo,
    ScaleUpDecision,
    ScaleUpInputs,
    ScaleUpResult,
    decide_scale_up,
    reasons_message,
    triggered_message,
)
from kubescale.controllers.autoscaler.simulator.template_nodes import (
    TemplateNode,
    sanitize_template,
)
from kubescale.objects.pod import Pod
from kubescale.scheduling.fit import ClusterSnapshot
from kubescale.scheduling.snapshot_journal import SnapshotJournal
from tests.controllers.autoscaler.builders import NOW, ca_node, ca_pod, group

SAFE = ScaleUpSafety(safe=True, healthy=True, backoff=None)
BATCH_TAINT = {"key": "dedicated", "value": "batch", "effect": "NoSchedule"}


def template(group_id: str, cpu: str, memory: str, **kw: Any) -> TemplateNode:
    return sanitize_template(
        node=ca_node(group_id, cpu=cpu, memory=memory, **kw),
        pods=[],
        group_id=group_id,
        source="node",
    )


def pending(
    count: int, *, cpu: str = "1", memory: str = "2Gi", owner: str = "web", **kw: Any
) -> list[Pod]:
    return [
        ca_pod(
            f"{owner}-{i}",
            cpu=cpu,
            memory=memory,
            owner=("ReplicaSet", owner),
            unschedulable=True,
            **kw,
        )
        for i in range(count)
    ]


def decide(
    pods: list[Pod],
    groups: list[NodeGroup],
    templates: dict[str, TemplateNode],
    *,
    settings: AutoscalerSettings | None = None,
    safety: dict[str, ScaleUpSafety] | None = None,
    current_nodes: int = 0,
    other_capacity: list[dict[str, int]] | None = None,
) -> ScaleUpDecision:
    snapshot = ClusterSnapshot.build(nodes=[], pods=[])
    return decide_scale_up(
        ScaleUpInputs(
            pending=pods,
            groups=groups,
            templates=templates,
            safety=lambda g: (safety or {}).get(g, SAFE),
            journal=SnapshotJournal(snapshot),
            current_nodes=current_nodes,
            other_capacity=other_capacity or [],
            settings=settings or AutoscalerSettings(),
            expander=ExpanderChain([LeastWaste()], rng=random.Random(0)),
        )
    )


def sizes(decision: ScaleUpDecision) -> dict[str, tuple[int, int]]:
    return {i.group.id: (i.current_size, i.new_size) for i in decision.infos}


TWO_GROUPS = {"small": template("small", "2", "8Gi"), "large": template("large", "8", "32Gi")}


def test_least_waste_chooses_the_snug_group() -> None:
    # 10 × (1 cpu, 2Gi). small: 2 per node → 5 nodes, avail 10 cpu / 40Gi:
    #   waste (10−10)/10 + (40−20)/40 = 0.5
    # large: min(8 by cpu, 16 by memory) = 8 per node → 2 nodes, 16 cpu / 64Gi:
    #   (16−10)/16 + (64−20)/64 = 0.375 + 0.6875 = 1.0625 → small
    decision = decide(pending(10), [group("small"), group("large")], TWO_GROUPS)
    assert decision.result is ScaleUpResult.SUCCESSFUL
    assert sizes(decision) == {"small": (0, 5)}
    assert len(decision.triggered) == 10
    assert triggered_message(decision.infos) == "pod triggered scale-up: [{small 0->5 (max: 10)}]"


def test_a_capped_group_triggers_for_the_pods_it_can_take() -> None:
    # small may add 3: 3 nodes × 2 pods = 6 pods; waste 0 + (24−12)/24 = 0.5 < large's 1.0625
    decision = decide(pending(10), [group("small", max_size=3), group("large")], TWO_GROUPS)
    assert sizes(decision) == {"small": (0, 3)}
    assert len(decision.triggered) == 6
    # the other 4 fit large too: not "remaining", they wait for the next loop
    assert decision.remaining == ()


def test_skip_reasons_reach_the_not_triggered_message() -> None:
    templates = {
        "full": template("full", "4", "16Gi"),
        "backoff": template("backoff", "4", "16Gi"),
        "sick": template("sick", "4", "16Gi"),
        "batch": template("batch", "4", "16Gi", taints=[BATCH_TAINT]),
        "tiny": template("tiny", "1", "4Gi"),
    }
    groups = [
        group("full", max_size=2, target=2),
        group("backoff"),
        group("sick"),
        group("batch"),
        group("tiny"),
        group("no-template"),
    ]
    error = InstanceErrorInfo(error_class=ErrorClass.OTHER, code="timeout", message="x")
    safety = {
        "backoff": ScaleUpSafety(
            safe=False,
            healthy=True,
            backoff=BackoffEntry(duration=NOW - NOW, until=NOW, last_failure=NOW, error=error),
        ),
        "sick": ScaleUpSafety(safe=False, healthy=False, backoff=None),
    }
    decision = decide(pending(1, cpu="2"), groups, templates, safety=safety)
    assert decision.result is ScaleUpResult.NO_OPTIONS_AVAILABLE
    [info] = decision.remaining
    assert info.skipped == {
        "full": ("max node group size reached",),
        "backoff": ("in backoff after failed scale-up",),
        "sick": ("not ready for scale-up",),
        "no-template": ("not ready for scale-up",),
    }
    assert info.rejected == {
        "batch": ("node(s) had untolerated taint {dedicated: batch}",),
        "tiny": ("Insufficient cpu",),
    }
    # counts per reason, sorted by reason
    assert reasons_message(info, decision.result) == (
        "1 Insufficient cpu, 1 in backoff after failed scale-up, 1 max node group size reached, "
        "1 node(s) had untolerated taint {dedicated: batch}, 2 not ready for scale-up"
    )


def test_max_nodes_total_caps_the_scale_up() -> None:
    settings = AutoscalerSettings(max_nodes_total=10)
    # small needs 5; 8 nodes exist: only 10 − 8 = 2 more
    decision = decide(pending(10), [group("small")], TWO_GROUPS, settings=settings, current_nodes=8)
    # (the estimator's cluster-capacity threshold already stops at 2: no capping event)
    assert sizes(decision) == {"small": (0, 2)}
    assert decision.warnings == ()
    # a zero-or-max group must add its max (4): 8 + 4 > 10 → skipped
    atomic = replace(
        group("small", max_size=4),
        options=replace(group("x").options, zero_or_max_node_scaling=True),
    )
    decision = decide(pending(2), [atomic], TWO_GROUPS, settings=settings, current_nodes=8)
    assert decision.remaining[0].skipped == {
        "small": ("atomic scale-up exceeds cluster node count limit",)
    }
    # already at the total: the estimator may not add anything → no option at all
    decision = decide(
        pending(10), [group("small")], TWO_GROUPS, settings=settings, current_nodes=10
    )
    assert decision.result is ScaleUpResult.NO_OPTIONS_AVAILABLE


def test_cores_total_skips_and_caps() -> None:
    # 6 cores used outside groups; --cores-total 0:10 leaves 4; small nodes have 2 cores →
    # floor(4/2) = 2 of the 5 nodes
    settings = AutoscalerSettings(cores_total=ResourceRange(min=0, max=10))
    other = [{"cpu": 6000, "memory": 0}]
    decision = decide(
        pending(10), [group("small")], TWO_GROUPS, settings=settings, other_capacity=other
    )
    assert sizes(decision) == {"small": (0, 2)}
    # 9 cores used: 1 left < 2 per node → skipped with the limit's reason
    other = [{"cpu": 9000, "memory": 0}]
    decision = decide(
        pending(10), [group("small")], TWO_GROUPS, settings=settings, other_capacity=other
    )
    assert decision.result is ScaleUpResult.NO_OPTIONS_AVAILABLE
    assert decision.remaining[0].skipped == {"small": ("max cluster cpu limit reached",)}


def test_balance_similar_groups_splits_the_nodes() -> None:
    zone_a = template("web-a", "2", "8Gi", labels={"topology.kubernetes.io/zone": "a"})
    zone_b = template("web-b", "2", "8Gi", labels={"topology.kubernetes.io/zone": "b"})
    templates = {"web-a": zone_a, "web-b": zone_b}
    settings = AutoscalerSettings(balance_similar_node_groups=True)
    # 8 pods × 1 cpu on 2-cpu nodes = 4 nodes, split 2 / 2 (web-a has 1 node already: 1→3?
    # no — sizes 0 and 0, round robin a, b, a, b)
    decision = decide(pending(8), [group("web-a"), group("web-b")], templates, settings=settings)
    assert sizes(decision) == {"web-a": (0, 2), "web-b": (0, 2)}
    # without the flag the chosen group takes all 4
    decision = decide(pending(8), [group("web-a"), group("web-b")], templates)
    assert sum(new - cur for cur, new in sizes(decision).values()) == 4
    assert len(sizes(decision)) == 1


def test_zero_or_max_groups_go_to_max() -> None:
    atomic = replace(
        group("tpu", max_size=4), options=replace(group("x").options, zero_or_max_node_scaling=True)
    )
    decision = decide(pending(2), [atomic], {"tpu": template("tpu", "2", "8Gi")})
    assert sizes(decision) == {"tpu": (0, 4)}


def test_reasons_message_for_the_node_total() -> None:
    info = NoScaleUpInfo(
        pod=ca_pod("p"), rejected={}, skipped={"a": ("max node group size reached",)}
    )
    assert reasons_message(info, ScaleUpResult.LIMITED_BY_MAX_NODES_TOTAL) == (
        "max total nodes in cluster reached"
    )


def test_no_pending_pods_means_not_needed() -> None:
    assert decide([], [group("small")], TWO_GROUPS).result is ScaleUpResult.NOT_NEEDED


def test_host_ports_take_a_node_each_in_the_estimate() -> None:
    # 4 × (1 cpu, 2Gi) all binding host port 8080: one pod per node in any group.
    # small (2 cpu, 8Gi): 4 nodes → waste (8−4)/8 + (32−8)/32 = 0.5 + 0.75 = 1.25
    # large (8 cpu, 32Gi): 4 nodes → (32−4)/32 + (128−8)/128 = 0.875 + 0.9375 = 1.8125
    # → small 0->4 (without NodePorts it would pack 2 per node: small 0->2)
    pods = pending(4)
    for made in pods:
        made["spec"]["containers"][0]["ports"] = [{"containerPort": 8080, "hostPort": 8080}]
    decision = decide(pods, [group("small"), group("large")], TWO_GROUPS)
    assert decision.result is ScaleUpResult.SUCCESSFUL
    assert sizes(decision) == {"small": (0, 4)}
    assert len(decision.triggered) == 4
