"""The scale-down actuator's decisions, without an API server: each yields its intents one at a
time and receives a chosen :class:`~kubescale.plans.executor.Applied` answer (done, refused,
the provider's error), as the loop's executor would give it. The expected plans are worked out
from upstream's actuation rules (``scaledown/actuation``, reference §3.2) with the default
flags: ``--node-delete-delay-after-taint`` 5 s, ``--max-pod-eviction-time`` 2 min,
``--max-graceful-termination-sec`` 600, ``--cordon-node-before-terminating`` true,
``--daemonset-eviction-for-occupied-nodes`` true, ``--daemonset-eviction-for-empty-nodes``
false.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import pytest
from prometheus_client import CollectorRegistry

from kubescale.controllers.autoscaler.cloudprovider.cloud_provider import (
    NodeGroup,
    ProviderError,
    ProviderSnapshot,
)
from kubescale.controllers.autoscaler.clusterstate.backoff import ExponentialBackoff
from kubescale.controllers.autoscaler.clusterstate.cluster_state import (
    ClusterStateRegistry,
    HealthConfig,
)
from kubescale.controllers.autoscaler.config.autoscaler_settings import AutoscalerSettings
from kubescale.controllers.autoscaler.metrics.autoscaler_metrics import AutoscalerMetrics
from kubescale.controllers.autoscaler.scaledown.scale_down_actuator import ScaleDownActuator
from kubescale.coordination.disruption_ledger import WriteOutcome, WriteResult
from kubescale.kube.errors import KubeApiError
from kubescale.objects.pod import Pod
from kubescale.plans.executor import Applied, Decision, collect_plan
from kubescale.plans.intents import DeleteNodes, Evict, Intent, Taint, describe
from tests.builders.nodes import typed_node
from tests.builders.pods import typed_pod

R = TypeVar("R")

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
STAMP = int(T0.timestamp())
GROUP = "MachineDeployment/default/small"
A = "cluster-autoscaler"
DONE = Applied(WriteResult(WriteOutcome.DONE))
PDB_429 = KubeApiError(code=429, reason="TooManyRequests", message="Cannot evict pod")
NODE = typed_node(name="n1", provider_id="capi://n1")
TAINTED = f"{A}: taint nodes n1 ToBeDeletedByClusterAutoscaler={STAMP}:NoSchedule cordon"
MARKED = f'{A}: event Node n1 Normal ScaleDown "marked the node as toBeDeleted/unschedulable"'
DELETE = f'{A}: delete-nodes node-group {GROUP} ["n1"]'
UNTAINT = f"{A}: untaint nodes n1 ToBeDeletedByClusterAutoscaler uncordon"


def on_n1(name: str, *, grace: int | None = None, going: bool = False, **kw: Any) -> Pod:
    spec = {"terminationGracePeriodSeconds": grace} if grace is not None else None
    return typed_pod(
        name=name,
        node_name="n1",
        spec=spec,
        deletion_timestamp="2026-03-02T09:00:00Z" if going else None,
        **kw,
    )


DAEMON = {
    "apiVersion": "apps/v1",
    "kind": "DaemonSet",
    "name": "ds",
    "uid": "u",
    "controller": True,
}


def answer_all(applied: Applied) -> Callable[[Intent], Applied]:
    return lambda _intent: applied


def drive(decision: Decision[R], answer: Callable[[Intent], Applied]) -> tuple[list[str], R]:
    """Run ``decision`` answering each intent with ``answer(intent)``: its plan as
    ``describe`` lines, and its result."""
    plan, result = collect_plan(decision, answer)
    return [describe(intent) for intent in plan], result


@dataclass
class Actuation:
    actuator: ScaleDownActuator
    registry: ClusterStateRegistry
    status: list[tuple[str, str, str]] = field(default_factory=list)

    def start(self, *, drain: bool, answer: Applied = DONE) -> tuple[list[str], list[str]]:
        return drive(
            self.actuator.start_decision(
                [(NODE, GROUP)], drain=drain, reason="empty", now=T0, report=None
            ),
            answer_all(answer),
        )

    def step(
        self,
        seconds: float,
        pods: Sequence[Pod] = (),
        answer: Callable[[Intent], Applied] | None = None,
    ) -> list[str]:
        snapshot = ProviderSnapshot(
            groups={GROUP: NodeGroup(id=GROUP, min_size=1, max_size=5, target_size=2)},
            group_by_instance={"capi://n1": GROUP},
        )
        lines, _ = drive(
            self.actuator.decide(
                now=T0 + timedelta(seconds=seconds),
                pods_by_node={"n1": list(pods)},
                existing_nodes={"n1"},
                snapshot=snapshot,
                registry=self.registry,
            ),
            answer or answer_all(DONE),
        )
        return lines


@pytest.fixture
def actuation() -> Actuation:
    settings = AutoscalerSettings()
    status: list[tuple[str, str, str]] = []
    actuator = ScaleDownActuator(
        metrics=AutoscalerMetrics(CollectorRegistry()),
        settings=settings,
        status_event=lambda *event: status.append(event),
        executor=None,
    )
    registry = ClusterStateRegistry(
        health=HealthConfig(),
        backoff=ExponentialBackoff(
            initial=settings.initial_node_group_backoff_duration,
            maximum=settings.max_node_group_backoff_duration,
            reset_timeout=settings.node_group_backoff_reset_timeout,
        ),
    )
    return Actuation(actuator=actuator, registry=registry, status=status)


def test_an_empty_node_is_deleted_once_the_taint_delay_has_passed(actuation: Actuation) -> None:
    assert actuation.start(drain=False) == ([TAINTED, MARKED], ["n1"])
    assert actuation.status == [
        ("Normal", "ScaleDownEmpty", 'Scale-down: removing empty node "n1"')
    ]
    # taint at t0, delay 5 s: at +3 s nothing yet; at +10 s (the next loop) the deletion
    assert actuation.step(3) == []
    assert actuation.step(10) == [DELETE]
    assert actuation.actuator.in_progress == {}
    assert actuation.actuator.deleted == ["n1"]
    assert actuation.actuator.last_delete == T0 + timedelta(seconds=10)
    assert actuation.status[-1] == ("Normal", "ScaleDownEmpty", "Scale-down: empty node n1 removed")


def test_an_empty_node_that_got_a_pod_is_not_deleted(actuation: Actuation) -> None:
    actuation.start(drain=False)
    assert actuation.step(10, [on_n1("late")]) == [
        f'{A}: event Node n1 Warning ScaleDownFailed "failed to delete the node"',
        UNTAINT,
    ]
    assert actuation.actuator.in_progress == {}
    assert actuation.actuator.last_failure == T0 + timedelta(seconds=10)


def test_a_taint_that_was_not_written_starts_no_deletion(actuation: Actuation) -> None:
    refused = KubeApiError(code=403, reason="Forbidden", message="nodes is forbidden")
    lines, started = actuation.start(
        drain=True, answer=Applied(WriteResult(WriteOutcome.REFUSED, refused))
    )
    assert started == []
    assert lines == [
        TAINTED,
        f"{A}: event Node n1 Warning ScaleDownFailed "
        f'"failed to mark the node as toBeDeleted/unschedulable: {refused}"',
    ]
    assert actuation.actuator.in_progress == {}


def test_drain_then_delete_waits_for_every_eviction(actuation: Actuation) -> None:
    """Pods ``a`` (grace 45 s), ``b`` (none: 30 s), a DaemonSet pod and a mirror pod. Grace:
    min(45, 600) = 45 and min(30, 600) = 30. ``b``'s eviction meets the PDB's 429 at +10 s and
    is tried again at +20 s; the node is deleted only once both are gone, after the DaemonSet
    pod's best-effort eviction (no event for it)."""
    actuation.start(drain=True)
    mirror = on_n1("static", annotations={"kubernetes.io/config.mirror": "x"})
    ds = on_n1("ds-1", owner_references=[DAEMON])
    evict_a = f"{A}: evict pods default/a grace=45"
    evict_b = f"{A}: evict pods default/b grace=30"
    event = f'{A}: event Pod default/{{}} Normal ScaleDown "deleting pod for node scale down"'

    def pdb_refuses_b(intent: Intent) -> Applied:
        if isinstance(intent, Evict) and intent.target.name == "b":
            return Applied(WriteResult(WriteOutcome.REFUSED, PDB_429))
        return DONE

    both = [on_n1("a", grace=45), on_n1("b"), ds, mirror]
    assert actuation.step(10, both, pdb_refuses_b) == [evict_a, event.format("a"), evict_b]
    assert actuation.actuator.evicted == ["default/a"]
    # a is terminating; b is evicted now
    second = [on_n1("a", grace=45, going=True), on_n1("b"), ds, mirror]
    assert actuation.step(20, second) == [evict_b, event.format("b")]
    # both terminating: wait (up to 600 s + 30 s from now)
    terminating = [on_n1("a", grace=45, going=True), on_n1("b", going=True), ds, mirror]
    assert actuation.step(30, terminating) == []
    assert actuation.step(40, [ds, mirror]) == [f"{A}: evict pods default/ds-1 grace=30", DELETE]
    assert actuation.actuator.in_progress == {}
    assert actuation.status[-1] == ("Normal", "ScaleDown", "Scale-down: node n1 removed with drain")


@pytest.mark.parametrize(
    ("seconds", "aborted"),
    [
        (120, False),  # 120 s is not more than --max-pod-eviction-time (2 min): evict again
        (121, True),  # 121 s > 120 s: give up, untaint and uncordon
    ],
)
def test_a_drain_gives_up_after_max_pod_eviction_time(
    actuation: Actuation, seconds: int, aborted: bool
) -> None:
    actuation.start(drain=True)
    refused = answer_all(Applied(WriteResult(WriteOutcome.REFUSED, PDB_429)))
    lines = actuation.step(seconds, [on_n1("a")], refused)
    if aborted:
        assert lines == [
            f"{A}: event Node n1 Warning ScaleDownFailed "
            '"failed to drain the node, aborting ScaleDown"',
            UNTAINT,
        ]
        assert actuation.actuator.last_failure == T0 + timedelta(seconds=seconds)
        assert actuation.actuator.in_progress == {}
    else:
        assert lines == [f"{A}: evict pods default/a grace=30"]
        assert "n1" in actuation.actuator.in_progress


def test_a_deletion_the_provider_refuses_is_given_up(actuation: Actuation) -> None:
    actuation.start(drain=False)
    refusal = ProviderError("min size reached, nodes will not be deleted")

    def provider_refuses(intent: Intent) -> Applied:
        if isinstance(intent, DeleteNodes):
            return Applied(WriteResult(refusal.outcome), failure=refusal)
        return DONE

    assert actuation.step(10, answer=provider_refuses) == [
        DELETE,
        f'{A}: event Node n1 Warning ScaleDownFailed "failed to delete the node"',
        UNTAINT,
    ]
    assert actuation.actuator.deleted == []
    assert actuation.actuator.last_failure == T0 + timedelta(seconds=10)


def test_the_taint_is_the_first_intent_of_a_deletion(actuation: Actuation) -> None:
    """Nothing is evicted or deleted before the node's taint was answered: upstream taints
    every chosen node first, so evicted pods do not land on another victim."""
    decision = actuation.actuator.start_decision(
        [(NODE, GROUP)], drain=True, reason="underutilized", now=T0
    )
    first = next(decision)
    assert isinstance(first, Taint)
    assert actuation.actuator.in_progress == {}  # not tracked before the answer
    decision.close()
