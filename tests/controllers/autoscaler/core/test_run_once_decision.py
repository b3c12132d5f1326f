"""One iteration of the cluster autoscaler as one decision (``run_once_decision.decide``),
without an API server: the plan of an iteration is read with ``collect_plan`` (every intent
answered done, as ``--dry-run`` does) or by answering chosen intents otherwise.

Upstream's ``RunOnce`` (``core/static_autoscaler.go``; reference §1) decides in this order:
``cleanUpIfRequired`` (first loop), ``updateClusterState``, ``removeOldUnregisteredNodes``, the
health check (an unhealthy cluster ends the loop), ``deleteCreatedNodesWithErrors``,
``fixNodeGroupSize`` (a fix ends the loop), the scale-up, the scale-down,
``--enforce-node-group-min-size`` (``ScaleUpToNodeGroupMinSize``), and — deferred, whatever
happened — ``WriteStatusConfigMap``.

The worlds: node group ``ng`` (Cluster API MachineDeployment), 4-CPU nodes; pods of 3 CPU, so
one per node (3 + 3 > 4).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from kubescale.controllers.autoscaler.cloudprovider.cloud_provider import (
    ProviderError,
    ProviderSnapshot,
    WriteOutcomeUnknown,
)
from kubescale.controllers.autoscaler.clusterstate.backoff import ExponentialBackoff
from kubescale.controllers.autoscaler.clusterstate.cluster_state import (
    ClusterStateRegistry,
    HealthConfig,
)
from kubescale.controllers.autoscaler.config.autoscaler_settings import AutoscalerSettings
from kubescale.controllers.autoscaler.core.loop_housekeeping import Housekeeping
from kubescale.controllers.autoscaler.core.loop_scale_down import ScaleDownPhase
from kubescale.controllers.autoscaler.core.loop_scale_up import ScaleUpPhase
from kubescale.controllers.autoscaler.core.loop_status import StatusReporter
from kubescale.controllers.autoscaler.core.pod_lists import (
    PodsBySchedulability,
    pods_by_schedulability,
)
from kubescale.controllers.autoscaler.core.run_once_decision import (
    RunOnceMemory,
    RunOnceSnapshot,
    decide,
)
from kubescale.controllers.autoscaler.metrics.autoscaler_metrics import AutoscalerMetrics
from kubescale.controllers.autoscaler.model.node_facts import (
    TO_BE_DELETED_TAINT,
    NodeReadiness,
    node_name,
    node_readiness,
)
from kubescale.controllers.autoscaler.model.pod_facts import PriorityResolver
from kubescale.controllers.autoscaler.scaledown.scale_down_actuator import ScaleDownActuator
from kubescale.controllers.autoscaler.simulator.template_nodes import TemplateNode, TemplateRegistry
from kubescale.coordination.disruption_ledger import WriteOutcome, WriteResult
from kubescale.objects.node import Node, Taint
from kubescale.objects.pod import Pod
from kubescale.objects.views import meta
from kubescale.plans.executor import Applied, Decision, collect_plan
from kubescale.plans.intents import Intent, ResizeNodeGroup, WriteConfigMap, describe
from kubescale.scheduling.fit import ClusterSnapshot
from kubescale.scheduling.snapshot_journal import SnapshotJournal
from tests.controllers.autoscaler.builders import NOW, ca_node, ca_pod, group, snapshot

R = TypeVar("R")

CA = "cluster-autoscaler"
NG = "MachineDeployment/default/ng"
STATUS = f"{CA}: write-configmap configmaps kube-system/cluster-autoscaler-status"
DONE = Applied(WriteResult(WriteOutcome.DONE))
REFUSED = ProviderError("the MachineDeployment refused the new size")
UNANSWERED = WriteOutcomeUnknown("no answer within the 10s deadline of this iteration")


@dataclass(frozen=True)
class Built:
    """The cluster snapshot, as ``AutoscalerLoop._build`` makes it."""

    nodes: list[Node]
    all_pods: list[Pod]
    priority: PriorityResolver
    lists: PodsBySchedulability
    journal: SnapshotJournal
    templates: dict[str, TemplateNode]
    pod_keys: list[tuple[str, str]]


def readiness(n: Node) -> NodeReadiness:
    return node_readiness(n, frozenset())


def memory_of(settings: AutoscalerSettings) -> RunOnceMemory:
    metrics = AutoscalerMetrics(CollectorRegistry())
    registry = ClusterStateRegistry(
        health=HealthConfig(),
        backoff=ExponentialBackoff(
            initial=timedelta(minutes=5),
            maximum=timedelta(minutes=30),
            reset_timeout=timedelta(hours=3),
        ),
    )
    # no executor: the decision's events are yielded (StatusReporter.collecting), never noted
    status = StatusReporter(executor=None, metrics=metrics, settings=settings)  # type: ignore[arg-type]
    # an earlier iteration wrote the status ConfigMap: the status events are about it (none
    # without --write-status-configmap, as upstream's LogRecorder is inactive then)
    collect_plan(status.decision(NOW - timedelta(seconds=10), registry, initializing=True))
    actuator = ScaleDownActuator(
        metrics=metrics, settings=settings, status_event=status.event, executor=None
    )
    return RunOnceMemory(
        settings=settings,
        metrics=metrics,
        registry=registry,
        housekeeping=Housekeeping(
            provider=None,  # type: ignore[arg-type]  # the decision does not call it
            registry=registry,
            settings=settings,
            metrics=metrics,
            status_event=status.event,
        ),
        scale_up=ScaleUpPhase(
            settings=settings,
            metrics=metrics,
            provider=None,  # type: ignore[arg-type]  # the decision does not call it
            registry=registry,
            rng=random.Random(0),
            status_event=status.event,
            cpu_clock=lambda: 0.0,
        ),
        scale_down=ScaleDownPhase(
            settings=settings,
            metrics=metrics,
            provider=None,  # type: ignore[arg-type]  # the decision does not call it
            registry=registry,
            actuator=actuator,
            readiness=readiness,
            pdbs=list,
            controller=lambda _namespace, _owner: {},
            status_event=status.event,
        ),
        actuator=actuator,
        status=status,
        readiness=readiness,
        cpu_clock=lambda: 0.0,
    )


def world(
    provider: ProviderSnapshot,
    nodes: Sequence[Node],
    pods: Sequence[Pod] = (),
    *,
    first: bool = False,
    now: datetime = NOW,
) -> RunOnceSnapshot:
    """The iteration's snapshot, built the way the loop builds it."""
    ordered = sorted(nodes, key=node_name)
    lists = pods_by_schedulability(list(pods))
    cluster = ClusterSnapshot.build(nodes=ordered, pods=lists.scheduled)
    templates = TemplateRegistry(startup_taints=(), status_taints=()).recompute(
        snapshot=provider,
        nodes=ordered,
        pods_by_node={name: list(state.pods) for name, state in cluster.nodes.items()},
        daemon_sets=[],
        readiness=readiness,
        being_deleted=lambda _n: False,
    )
    built = Built(
        nodes=ordered,
        all_pods=list(pods),
        priority=PriorityResolver([]),
        lists=lists,
        journal=SnapshotJournal(cluster),
        templates=templates,
        pod_keys=[(meta(p).namespace, meta(p).name) for p in pods],
    )
    by_node = {
        node_name(n): [p for p in pods if p["spec"].get("nodeName") == node_name(n)]
        for n in ordered
    }
    return RunOnceSnapshot(provider=provider, built=built, first=first, pods_by_node=by_node)


def line(intent: Intent) -> str:
    """``describe(intent)``; a status write shortened to its ``autoscalerStatus`` (its whole
    text is ``test_status_configmap``'s)."""
    if isinstance(intent, WriteConfigMap):
        status = intent.data["status"].splitlines()[0]
        return f"{intent.actor}: write-configmap {intent.target.text} {status}"
    return describe(intent)


def plan(snapshot: RunOnceSnapshot, memory: RunOnceMemory, now: datetime = NOW) -> list[str]:
    intents, _ = collect_plan(decide(snapshot, memory, now))
    return [line(i) for i in intents]


def drive(decision: Decision[R], answer: Callable[[Intent], Applied]) -> tuple[list[str], R]:
    plan, result = collect_plan(decision, answer)
    return [line(intent) for intent in plan], result


def resizes_answered(applied: Applied) -> Callable[[Intent], Applied]:
    def answer(intent: Intent) -> Applied:
        if isinstance(intent, ResizeNodeGroup):
            return applied
        return Applied(WriteResult(WriteOutcome.DONE), dry_run=True)

    return answer


def failed(err: ProviderError) -> Applied:
    return Applied(WriteResult(err.outcome), failure=err)


SETTINGS = replace(AutoscalerSettings(), enforce_node_group_min_size=True)
RUNNING = f"{STATUS} autoscalerStatus: Running"
INITIALIZING = f"{STATUS} autoscalerStatus: Initializing"
TO_BE_DELETED: Taint = {"key": TO_BE_DELETED_TAINT, "value": "1772442000", "effect": "NoSchedule"}


def busy(name: str) -> tuple[Node, Pod]:
    """A node of ``ng`` and the 3-CPU pod that keeps it needed (3 of 4 CPU used: above the
    0.5 utilization threshold, and its pod fits on no other node)."""
    return ca_node(name, provider_id=f"sim://{name}"), ca_pod(
        f"{name}-app", cpu="3", node_name=name
    )


def pending(count: int) -> list[Pod]:
    return [ca_pod(f"p{i}", cpu="3", unschedulable=True) for i in range(count)]


def scaled(before: int, after: int, maximum: int = 10) -> list[str]:
    """The events and the resize of ``ExecuteScaleUps`` for ``ng`` (upstream's texts)."""
    sizes = f"{after} instead of {before} (max: {maximum})"
    on_status = f"{CA}: event ConfigMap kube-system/cluster-autoscaler-status Normal ScaledUpGroup"
    return [
        f'{on_status} "Scale-up: setting group {NG} size to {sizes}"',
        f"{CA}: increase-size node-group {NG} delta=+{after - before}",
        f'{on_status} "Scale-up: group {NG} size set to {sizes}"',
    ]


def triggered(pods: int, before: int, after: int, maximum: int = 10) -> list[str]:
    text = f'"pod triggered scale-up: [{{{NG} {before}->{after} (max: {maximum})}}]"'
    return [f"{CA}: event Pod default/p{i} Normal TriggeredScaleUp {text}" for i in range(pods)]


def order_worlds() -> list[tuple[str, RunOnceSnapshot, AutoscalerSettings, list[str]]]:
    n1, app1 = busy("n1")
    left = ca_node("n1", provider_id="sim://n1", taints=[TO_BE_DELETED])
    unready = [ca_node(f"u{i}", ready=False, provider_id=f"sim://u{i}") for i in range(4)]
    return [
        (
            # cleanUpIfRequired on the first loop, after the Initializing status; ng at its
            # min size (1 of min 1) has no scale-down candidate; the status at the end
            "first loop: a ToBeDeleted taint left behind",
            world(snapshot(group(NG, min_size=1, nodes=[left])), [left], first=True),
            SETTINGS,
            [
                INITIALIZING,
                f"{CA}: untaint nodes n1 {TO_BE_DELETED_TAINT} uncordon",
                RUNNING,
            ],
        ),
        (
            # 4 unready of 4: 4 > --ok-total-unready-count 3 and 4 > 45 % × 4 = 1.8, so the
            # cluster is unhealthy: the loop ends there (no min-size step, though ng is at 0 of
            # min 1), the status is still written
            "unhealthy cluster: the loop ends, the status is written",
            world(snapshot(group(NG, min_size=1, target=4, nodes=unready)), unready, first=True),
            SETTINGS,
            [
                INITIALIZING,
                f"{CA}: event ConfigMap kube-system/cluster-autoscaler-status Warning "
                'ClusterUnhealthy "Cluster is unhealthy"',
                RUNNING,
            ],
        ),
        (
            # 2 pods of 3 CPU pending, one per 4-CPU node: ng 1 → 3; then the min size
            # (2) is enforced on the size the scale-up set, 3 ≥ 2: no second resize (on the
            # snapshot's stale size, 1 < 2, it would add min − target = 1 more)
            "scale-up, then the min size on the new size, then the status",
            world(snapshot(group(NG, min_size=2, nodes=[n1])), [n1], [app1, *pending(2)]),
            SETTINGS,
            [*scaled(1, 3), *triggered(2, 1, 3), RUNNING],
        ),
        (
            # no pod pending; ng at 1 of min 3: min − target = 3 − 1 = 2 more, after the
            # scale-down step (n1 is needed: not a candidate anyway at 1 ≤ min)
            "min size enforced after scale-down",
            world(snapshot(group(NG, min_size=3, nodes=[n1])), [n1], [app1]),
            SETTINGS,
            [f"{CA}: increase-size node-group {NG} delta=+2", RUNNING],
        ),
        (
            "min size not enforced without --enforce-node-group-min-size",
            world(snapshot(group(NG, min_size=3, nodes=[n1])), [n1], [app1]),
            AutoscalerSettings(),
            [RUNNING],
        ),
    ]


@pytest.mark.parametrize(
    ("name", "snapshot_", "settings", "expected"),
    order_worlds(),
    ids=[w[0] for w in order_worlds()],
)
def test_the_steps_of_one_iteration_come_in_upstreams_order(
    name: str, snapshot_: RunOnceSnapshot, settings: AutoscalerSettings, expected: list[str]
) -> None:
    assert plan(snapshot_, memory_of(settings)) == expected


# ----------------------------------------------------------------------- fixNodeGroupSize


def size_world() -> tuple[ProviderSnapshot, list[Node], list[Pod]]:
    """ng targets 3 but has 1 instance, registered: registered 1 < target 3 − unregistered 0,
    an incorrect size (expected 3, current 1)."""
    n1, app1 = busy("n1")
    return snapshot(group(NG, min_size=1, target=3, nodes=[n1])), [n1], [app1]


# first observed at NOW; fixed once first observed + --max-node-provision-time (15 min) is not
# after the loop's time: not at NOW + 14 min, at NOW + 15 min
FIX = f"{CA}: decrease-target-size node-group {NG} delta=-2"  # current − expected = 1 − 3


@pytest.mark.parametrize(
    ("later", "answer", "expected", "stopped"),
    [
        # within the provision time: not fixed; the 2 missing nodes are upcoming, nothing
        # else to do (n1 needed, ng at 3 ≥ min 1)
        (timedelta(minutes=14), DONE, [RUNNING], ""),
        # the fix ends the iteration (upstream: `if fixedSomething { return nil }`)
        (timedelta(minutes=15), DONE, [FIX, RUNNING], "FixedNodeGroupSizes"),
        # unanswered: counted as done, the iteration ends too
        (timedelta(minutes=15), failed(UNANSWERED), [FIX, RUNNING], "FixedNodeGroupSizes"),
        # refused: nothing fixed, the iteration goes on (and ends with the status)
        (timedelta(minutes=15), failed(REFUSED), [FIX, RUNNING], ""),
    ],
)
def test_a_node_group_of_the_wrong_size_is_fixed_by_a_resize(
    later: timedelta, answer: Applied, expected: list[str], stopped: str
) -> None:
    memory = memory_of(SETTINGS)
    provider, nodes, pods = size_world()
    assert plan(world(provider, nodes, pods), memory, NOW) == [RUNNING]  # first observed
    lines, report = drive(
        decide(world(provider, nodes, pods, now=NOW + later), memory, NOW + later),
        resizes_answered(answer),
    )
    assert lines == expected
    assert report.stopped == stopped


def test_a_refused_size_fix_lets_the_iteration_go_on_to_the_min_size() -> None:
    """ng targets 3 with 1 instance, min 4: the fix (−2) is refused, so the iteration goes on
    and enforces the min size on the snapshot's target: 4 − 3 = 1 more."""
    memory = memory_of(SETTINGS)
    n1, app1 = busy("n1")
    provider = snapshot(group(NG, min_size=4, target=3, nodes=[n1]))
    plan(world(provider, [n1], [app1]), memory, NOW)
    later = NOW + timedelta(minutes=15)
    lines, _ = drive(
        decide(world(provider, [n1], [app1]), memory, later),
        lambda intent: failed(REFUSED) if "delta=-2" in describe(intent) else DONE,
    )
    assert lines == [FIX, f"{CA}: increase-size node-group {NG} delta=+1", RUNNING]


# ------------------------------------------------------------------------------ min size


@pytest.mark.parametrize(
    ("min_size", "target", "pods", "expected"),
    [
        # ng at 1 of min 3, nothing pending: + (3 − 1) = +2
        (3, 1, 0, [f"{CA}: increase-size node-group {NG} delta=+2"]),
        # at its min already: nothing
        (1, 1, 0, []),
        # 1 pod pending: the scale-up sets 1 → 2 (one 3-CPU pod per node) and the min of 2
        # is met by it: no second resize
        (2, 1, 1, [*scaled(1, 2), *triggered(1, 1, 2)]),
        # 1 pod pending, min 4: the scale-up sets 1 → 2, the min step adds 4 − 2 = 2 (on the
        # size the scale-up set, not 4 − 1 = 3 on the snapshot's)
        (
            4,
            1,
            1,
            [*scaled(1, 2), *triggered(1, 1, 2), f"{CA}: increase-size node-group {NG} delta=+2"],
        ),
    ],
)
def test_min_size_enforcement_counts_this_iterations_scale_up(
    min_size: int, target: int, pods: int, expected: list[str]
) -> None:
    n1, app1 = busy("n1")
    provider = snapshot(group(NG, min_size=min_size, target=target, nodes=[n1]))
    assert plan(world(provider, [n1], [app1, *pending(pods)]), memory_of(SETTINGS)) == [
        *expected,
        RUNNING,
    ]


def test_a_min_size_resize_is_registered_as_a_scale_up() -> None:
    """Done or unanswered, the min-size resize is registered as a scale-up request (once the
    provider shows the new target the status says ``InProgress``); refused, it is not."""
    n1, app1 = busy("n1")
    provider = snapshot(group(NG, min_size=3, nodes=[n1]))
    for answer, in_progress in ((DONE, True), (failed(UNANSWERED), True), (failed(REFUSED), False)):
        memory = memory_of(SETTINGS)
        drive(decide(world(provider, [n1], [app1]), memory, NOW), resizes_answered(answer))
        assert (NG in memory.registry.scale_up_requests) is in_progress


# ---------------------------------------------------------------------- the status ConfigMap


def status_text(intent: Intent) -> str:
    assert isinstance(intent, WriteConfigMap)
    return str(intent.data["status"])


def test_the_status_configmap_is_the_last_intent_and_shows_the_scale_up_in_progress() -> None:
    """``--status-config-map-name`` in ``--namespace``. An iteration scales ng 1 → 3 (its
    status: no activity yet — upstream's ``IsNodeGroupScalingUp`` needs upcoming nodes, counted
    from the target the iteration started with). The next iteration sees target 3 with 1 node:
    3 − 1 = 2 upcoming and the scale-up request, so ng's ``scaleUp`` is ``InProgress`` and so is
    the cluster's (upstream's ``GetStatus``); the 2 pending pods fit the upcoming nodes, nothing
    else is done."""
    n1, app1 = busy("n1")
    settings = replace(SETTINGS, status_config_map_name="ca-status", namespace="autoscaling")
    memory = memory_of(settings)
    pods = [app1, *pending(2)]
    first = plan(world(snapshot(group(NG, min_size=1, nodes=[n1])), [n1], pods), memory)
    assert first[-1] == (
        f"{CA}: write-configmap configmaps autoscaling/ca-status autoscalerStatus: Running"
    )
    later = NOW + timedelta(seconds=10)
    intents, _ = collect_plan(
        decide(
            world(snapshot(group(NG, min_size=1, target=3, nodes=[n1])), [n1], pods), memory, later
        )
    )
    last = intents[-1]
    assert isinstance(last, WriteConfigMap)
    assert describe(last).startswith(f"{CA}: write-configmap configmaps autoscaling/ca-status ")
    text = status_text(last)
    assert text.startswith("autoscalerStatus: Running\n")
    cluster_wide = text.split("clusterWide:", 1)[1].split("nodeGroups:", 1)[0]
    assert "scaleUp:\n    lastProbeTime:" in cluster_wide
    assert "status: InProgress" in cluster_wide.split("scaleUp:", 1)[1]
    group_part = text.split("nodeGroups:", 1)[1]
    assert "status: InProgress" in group_part.split("scaleUp:", 1)[1]
    assert sum(isinstance(i, WriteConfigMap) for i in intents) == 1


def test_no_status_configmap_without_write_status_configmap() -> None:
    n1, app1 = busy("n1")
    settings = replace(SETTINGS, write_status_configmap=False)
    provider = snapshot(group(NG, min_size=1, nodes=[n1]))
    # no ConfigMap: no object for the status events either (upstream's inactive LogRecorder)
    assert plan(world(provider, [n1], [app1, *pending(1)], first=True), memory_of(settings)) == [
        f"{CA}: increase-size node-group {NG} delta=+1",
        *triggered(1, 1, 2),
    ]


def test_a_failing_step_still_ends_with_the_status_configmap() -> None:
    """Upstream's write is deferred: it is made whatever happened; the step's error is raised
    after it."""
    memory = memory_of(SETTINGS)

    def broken(_node: Node) -> NodeReadiness:
        raise RuntimeError("readiness unknown")

    memory.readiness = broken
    n1, app1 = busy("n1")
    lines: list[str] = []

    def answer(intent: Intent) -> Applied:
        lines.append(line(intent))
        return DONE

    decision = decide(world(snapshot(group(NG, nodes=[n1])), [n1], [app1]), memory, NOW)
    with pytest.raises(RuntimeError, match="readiness unknown"):
        drive(decision, answer)
    assert lines == [RUNNING]


# ---------------------------------------------------------------------------- properties


@settings(max_examples=40, deadline=None)
@given(
    min_size=st.integers(min_value=0, max_value=5),
    waiting=st.integers(min_value=0, max_value=4),
    write_status=st.booleans(),
)
def test_an_iteration_raises_a_group_once_to_what_it_needs_and_ends_with_the_status(
    min_size: int, waiting: int, write_status: bool
) -> None:
    """ng at 1 busy node, ``waiting`` pods of 3 CPU pending (one per 4-CPU node), min size
    ``min_size``, ``--enforce-node-group-min-size``: the iteration's resizes of ng add
    max(waiting, min − 1, 0) nodes in all — the scale-up's 1 → 1 + waiting, then the min step
    only what the scale-up left below the min — and the status ConfigMap, when written, is its
    one last intent."""
    n1, app1 = busy("n1")
    memory = memory_of(replace(SETTINGS, write_status_configmap=write_status))
    provider = snapshot(group(NG, min_size=min_size, nodes=[n1]))
    intents, _ = collect_plan(decide(world(provider, [n1], [app1, *pending(waiting)]), memory, NOW))
    added = sum(i.delta for i in intents if isinstance(i, ResizeNodeGroup) and i.group == NG)
    assert added == max(waiting, min_size - 1, 0)
    writes = [n for n, i in enumerate(intents) if isinstance(i, WriteConfigMap)]
    assert writes == ([len(intents) - 1] if write_status else [])
