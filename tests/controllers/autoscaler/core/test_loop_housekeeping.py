"""``removeOldUnregisteredNodes`` as a decision, without an API server: one ``DeleteNodes`` per
long-unregistered instance, oldest first, while its group stays above its min size counting
the removals already made this loop (unless ``--force-delete-unregistered-nodes``); a removal
left unanswered counts as done, a refused one does not (event ``DeleteUnregisteredFailed``).

Group ``small``: target 3, min 1; instances i1, i2, i3 long unregistered. Without force:
i1 (3 − 0 = 3 > 1), i2 (3 − 1 = 2 > 1), not i3 (3 − 2 = 1, not > 1).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TypeVar

import pytest
from prometheus_client import CollectorRegistry

from kubescale.controllers.autoscaler.cloudprovider.cloud_provider import (
    NodeGroup,
    ProviderError,
    ProviderSnapshot,
    WriteOutcomeUnknown,
)
from kubescale.controllers.autoscaler.clusterstate.backoff import ExponentialBackoff
from kubescale.controllers.autoscaler.clusterstate.cluster_state import (
    ClusterStateRegistry,
    HealthConfig,
    UnregisteredNode,
)
from kubescale.controllers.autoscaler.config.autoscaler_settings import AutoscalerSettings
from kubescale.controllers.autoscaler.core.loop_housekeeping import Housekeeping
from kubescale.controllers.autoscaler.metrics.autoscaler_metrics import AutoscalerMetrics
from kubescale.coordination.disruption_ledger import WriteOutcome, WriteResult
from kubescale.plans.executor import Applied, Decision, collect_plan
from kubescale.plans.intents import DeleteNodes, Intent, describe

R = TypeVar("R")

SINCE = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
SMALL = "MachineDeployment/default/small"
SNAPSHOT = ProviderSnapshot(
    groups={SMALL: NodeGroup(id=SMALL, min_size=1, max_size=5, target_size=3)},
    group_by_instance={},
)
LONG = [
    UnregisteredNode(instance_id=f"i{n}", group_id=SMALL, since=SINCE + timedelta(seconds=n))
    for n in (1, 2, 3)
] + [UnregisteredNode(instance_id="x1", group_id="MachineSet/default/gone", since=SINCE)]
DONE = Applied(WriteResult(WriteOutcome.DONE))


def delete(instance: str) -> str:
    return f'cluster-autoscaler: delete-nodes node-group {SMALL} ["{instance}"]'


def first_answered(first: Applied) -> Callable[[Intent], Applied]:
    def answer(intent: Intent) -> Applied:
        assert isinstance(intent, DeleteNodes)
        return first if intent.names == ["i1"] else DONE

    return answer


def drive(decision: Decision[R], answer: Callable[[Intent], Applied]) -> tuple[list[str], R]:
    plan, result = collect_plan(decision, answer)
    return [describe(intent) for intent in plan], result


def housekeeping(settings: AutoscalerSettings, status: list[tuple[str, str, str]]) -> Housekeeping:
    return Housekeeping(
        provider=None,  # type: ignore[arg-type]  # the decision does not call it
        registry=ClusterStateRegistry(
            health=HealthConfig(),
            backoff=ExponentialBackoff(
                initial=timedelta(minutes=5),
                maximum=timedelta(minutes=30),
                reset_timeout=timedelta(hours=3),
            ),
        ),
        settings=settings,
        metrics=AutoscalerMetrics(CollectorRegistry()),
        status_event=lambda *event: status.append(event),
    )


UNANSWERED = WriteOutcomeUnknown("no answer within the 10s deadline of this iteration")
REFUSED = ProviderError("min size reached, nodes will not be deleted")
UNKNOWN = Applied(WriteResult(UNANSWERED.outcome), failure=UNANSWERED)
NOT_DONE = Applied(WriteResult(REFUSED.outcome), failure=REFUSED)


@pytest.mark.parametrize(
    ("force", "first", "plan", "removed_events"),
    [
        (False, DONE, [delete("i1"), delete("i2")], ["i1", "i2"]),
        (True, DONE, [delete("i1"), delete("i2"), delete("i3")], ["i1", "i2", "i3"]),
        # unanswered: counted as done (i3 still left out), but no DeleteUnregistered event
        (False, UNKNOWN, [delete("i1"), delete("i2")], ["i2"]),
        # refused: not counted, so i3 fits (3 − 1 = 2 > 1)
        (False, NOT_DONE, [delete("i1"), delete("i2"), delete("i3")], ["i2", "i3"]),
    ],
)
def test_old_unregistered_instances_are_removed_down_to_the_min_size(
    force: bool, first: Applied, plan: list[str], removed_events: list[str]
) -> None:
    status: list[tuple[str, str, str]] = []
    settings = replace(AutoscalerSettings(), force_delete_unregistered_nodes=force)
    lines, resized = drive(
        housekeeping(settings, status).unregistered_decision(SNAPSHOT, LONG),
        first_answered(first),
    )
    assert lines == plan
    assert resized == {SMALL}
    removed = [
        m.removeprefix("Removed unregistered node ")
        for _, r, m in status
        if r == "DeleteUnregistered"
    ]
    assert removed == removed_events
    failed = [m for _, r, m in status if r == "DeleteUnregisteredFailed"]
    assert failed == ([f"Failed to remove node i1: {REFUSED}"] if first.failure is REFUSED else [])
