"""Carrying out a scale-up as a decision, without an API server: :func:`scale_up_decision`
yields one :class:`~kubescale.plans.intents.ResizeNodeGroup` per group and receives its outcome
(done; the provider's refusal; a write left unanswered, counted as done; nothing sent in time;
the leader Lease lost), as upstream's ``ExecuteScaleUps`` handles ``IncreaseSize``'s error.

Two groups: ``small`` 1 → 3 (max 5): delta 3 − 1 = +2; ``large`` 0 → 1 (max 3): delta +1.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TypeVar

import pytest
from prometheus_client import CollectorRegistry

from kubescale.controllers.autoscaler.cloudprovider.cloud_provider import (
    NodeGroup,
    NothingWritten,
    ProviderError,
    WriteOutcomeUnknown,
)
from kubescale.controllers.autoscaler.clusterstate.backoff import ExponentialBackoff
from kubescale.controllers.autoscaler.clusterstate.cluster_state import (
    ClusterStateRegistry,
    HealthConfig,
)
from kubescale.controllers.autoscaler.metrics.autoscaler_metrics import AutoscalerMetrics
from kubescale.controllers.autoscaler.scaleup.balancing import ScaleUpInfo
from kubescale.controllers.autoscaler.scaleup.scale_up_executor import (
    ScaleUpExecution,
    scale_up_decision,
)
from kubescale.coordination.disruption_ledger import WriteOutcome, WriteResult
from kubescale.kube.errors import NotLeaderError
from kubescale.plans.executor import Applied, Decision, collect_plan
from kubescale.plans.intents import Intent, ResizeNodeGroup, describe

R = TypeVar("R")

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
SMALL = NodeGroup(id="MachineDeployment/default/small", min_size=1, max_size=5, target_size=1)
LARGE = NodeGroup(id="MachineDeployment/default/large", min_size=0, max_size=3, target_size=0)
INFOS = [
    ScaleUpInfo(group=SMALL, current_size=1, new_size=3, max_size=5),
    ScaleUpInfo(group=LARGE, current_size=0, new_size=1, max_size=3),
]
INCREASE = "cluster-autoscaler: increase-size node-group MachineDeployment/default"
SMALL_UP = f"{INCREASE}/small delta=+2"
LARGE_UP = f"{INCREASE}/large delta=+1"
DONE = Applied(WriteResult(WriteOutcome.DONE))
TOO_LARGE = ProviderError("size increase too large - desired:6 max:5")
UNANSWERED = WriteOutcomeUnknown("resize: no answer within the 10s deadline of this iteration")
LATE = NothingWritten("resize: not sent, the 10s deadline of this iteration has passed")
LEASE_LOST = NotLeaderError("refused: this replica does not hold the leader Lease")


def failed(error: ProviderError) -> Applied:
    return Applied(WriteResult(error.outcome), failure=error)


def drive(decision: Decision[R], answer: Callable[[Intent], Applied]) -> tuple[list[str], R]:
    plan, result = collect_plan(decision, answer)
    return [describe(intent) for intent in plan], result


def answers(small: Applied, large: Applied = DONE) -> Callable[[Intent], Applied]:
    def answer(intent: Intent) -> Applied:
        assert isinstance(intent, ResizeNodeGroup)
        return small if intent.group == SMALL.id else large

    return answer


def registry() -> ClusterStateRegistry:
    return ClusterStateRegistry(
        health=HealthConfig(),
        backoff=ExponentialBackoff(
            initial=timedelta(minutes=5),
            maximum=timedelta(minutes=30),
            reset_timeout=timedelta(hours=3),
        ),
    )


@dataclass(frozen=True)
class Case:
    small: Applied
    large: Applied
    plan: list[str]
    done: list[NodeGroup]
    unconfirmed: list[NodeGroup]
    failed: NodeGroup | None
    backed_off: list[str]
    events: int
    """Status events: ``ScaledUpGroup`` before and after each resize done, one before a
    resize not done, and ``FailedToScaleUpGroup`` after a refused one."""


CASES = {
    # both resized: each registered as a scale-up request, no backoff
    "both done": Case(DONE, DONE, [SMALL_UP, LARGE_UP], [SMALL, LARGE], [], None, [], 4),
    # small refused: FailedToScaleUpGroup, small backs off, large is not tried
    "refused": Case(failed(TOO_LARGE), DONE, [SMALL_UP], [], [], SMALL, [SMALL.id], 2),
    # small unanswered: counted as done (registered, no backoff); large is not tried
    "unknown": Case(failed(UNANSWERED), DONE, [SMALL_UP], [SMALL], [SMALL], None, [], 1),
    # small not sent in time: not done, no backoff (not the group's fault), stop
    "not sent": Case(failed(LATE), DONE, [SMALL_UP], [], [], None, [], 1),
    # small done, large refused: the scale-up did not succeed as a whole
    "second refused": Case(
        DONE, failed(TOO_LARGE), [SMALL_UP, LARGE_UP], [SMALL], [], LARGE, [LARGE.id], 4
    ),
    # the Lease lost before small: refused by the executor, a failure like any refusal
    "lease lost": Case(
        Applied(WriteResult(WriteOutcome.REFUSED, LEASE_LOST)),
        DONE,
        [SMALL_UP],
        [],
        [],
        SMALL,
        [SMALL.id],
        2,
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_each_outcome_of_a_resize(case: Case) -> None:
    status: list[tuple[str, str, str]] = []
    state = registry()
    lines, execution = drive(
        scale_up_decision(
            INFOS,
            registry=state,
            metrics=AutoscalerMetrics(CollectorRegistry()),
            status_event=lambda *event: status.append(event),
            now=NOW,
        ),
        answers(case.small, case.large),
    )
    assert isinstance(execution, ScaleUpExecution)
    assert lines == case.plan
    assert [i.group for i in execution.done] == case.done
    assert [i.group for i in execution.unconfirmed] == case.unconfirmed
    assert (execution.failed.group if execution.failed else None) == case.failed
    assert execution.succeeded == (bool(case.done) and case.failed is None)
    assert sorted(state.scale_up_requests) == sorted(g.id for g in case.done)
    assert [g for g in (SMALL.id, LARGE.id) if state.backoff.status(g, NOW)] == case.backed_off
    assert len(status) == case.events
    if case.failed is not None:
        assert status[-1][:2] == ("Warning", "FailedToScaleUpGroup")
        assert status[-1][2].startswith(f"Scale-up failed for group {case.failed.id}: ")


def test_the_status_events_of_a_resize() -> None:
    status: list[tuple[str, str, str]] = []
    drive(
        scale_up_decision(
            INFOS[:1],
            registry=registry(),
            metrics=AutoscalerMetrics(CollectorRegistry()),
            status_event=lambda *event: status.append(event),
            now=NOW,
        ),
        answers(DONE),
    )
    small = "MachineDeployment/default/small"
    assert status == [
        (
            "Normal",
            "ScaledUpGroup",
            f"Scale-up: setting group {small} size to 3 instead of 1 (max: 5)",
        ),
        ("Normal", "ScaledUpGroup", f"Scale-up: group {small} size set to 3 instead of 1 (max: 5)"),
    ]
