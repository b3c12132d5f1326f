"""Carrying out a scale-up decision: ``scaleUpExecutor.ExecuteScaleUps`` and the pod events.

For each group of the decision, in order (upstream's synchronous mode): event ``ScaledUpGroup``
"Scale-up: setting group <g> size to <new> instead of <cur> (max: <max>)", ``IncreaseSize``;
success: the request is registered in the cluster state (expected within
``max-node-provision-time``) and ``ScaledUpGroup`` "Scale-up: group <g> size set to ..."; a
failure: ``FailedToScaleUpGroup`` "Scale-up failed for group <g>: <error>", the group backs off,
and the groups after it are not tried. A write left unanswered at the iteration's deadline
(``WriteOutcomeUnknown``) counts as done until proven otherwise: the request is registered and
the scale-up reported as made, with no backoff; the groups after it are not tried, and the
next iteration reads the size back from the object (the write is not repeated blindly: if it
did not land, the next decision starts from the size the object shows). A call not sent in
time (``NothingWritten``) stops the execution with no backoff either. Then, like
``EventingScaleUpStatusProcessor``: when the scale-up succeeded each pod that triggered it
gets ``TriggeredScaleUp`` "pod triggered scale-up: [{g cur->new (max: m)} ...]"; when no
scale-up was possible (not on an error), each pod left gets ``NotTriggerScaleUp`` "pod didn't
trigger scale-up: <reasons>".

The execution is a decision that needs each write's outcome (:data:`~kubescale.plans.executor.
Decision`): :func:`scale_up_decision` yields one :class:`~kubescale.plans.intents.
ResizeNodeGroup` per group and receives its result from the loop's one executor, which prints
it instead under ``--dry-run`` (answered done). The pod events are
:class:`~kubescale.plans.intents.Event` intents (:func:`pod_events`) the iteration's decision
yields after it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from kubescale.base.logs import component_logger
from kubescale.controllers.autoscaler.cloudprovider.cloud_provider import (
    ErrorClass,
    InstanceErrorInfo,
    NothingWritten,
    WriteOutcomeUnknown,
)
from kubescale.controllers.autoscaler.cloudprovider.provider_writes import (
    ACTOR,
    node_group_failure,
)
from kubescale.controllers.autoscaler.clusterstate.cluster_state import ClusterStateRegistry
from kubescale.controllers.autoscaler.metrics.autoscaler_metrics import AutoscalerMetrics
from kubescale.controllers.autoscaler.scaleup.balancing import ScaleUpInfo
from kubescale.controllers.autoscaler.scaleup.scale_up import (
    NoScaleUpInfo,
    ScaleUpResult,
    reasons_message,
    triggered_message,
)
from kubescale.objects.pod import Pod
from kubescale.plans.executor import Decision
from kubescale.plans.intents import Event, ResizeNodeGroup

__all__ = [
    "ScaleUpExecution",
    "pod_events",
    "scale_up_decision",
]

log = component_logger("cluster-autoscaler")

EventSink = Callable[[str, str, str], None]


@dataclass
class ScaleUpExecution:
    done: list[ScaleUpInfo] = field(default_factory=list)
    unconfirmed: list[ScaleUpInfo] = field(default_factory=list)
    """Among ``done``: writes with no answer, counted as done until proven otherwise."""
    failed: ScaleUpInfo | None = None
    error: str = ""

    @property
    def succeeded(self) -> bool:
        return bool(self.done) and self.failed is None


def scale_up_decision(
    infos: Sequence[ScaleUpInfo],
    *,
    registry: ClusterStateRegistry,
    metrics: AutoscalerMetrics,
    status_event: EventSink,
    now: datetime,
) -> Decision[ScaleUpExecution]:
    """``ExecuteScaleUps`` (module docstring): yields each group's resize, receives its
    outcome."""
    result = ScaleUpExecution()
    for info in infos:
        group_id = info.group.id
        sizes = f"{info.new_size} instead of {info.current_size} (max: {info.max_size})"
        status_event(
            "Normal", "ScaledUpGroup", f"Scale-up: setting group {group_id} size to {sizes}"
        )
        increase = info.new_size - info.current_size
        applied = yield ResizeNodeGroup(actor=ACTOR, group=group_id, delta=increase)
        err = node_group_failure(applied)
        if isinstance(err, WriteOutcomeUnknown):
            # A write whose outcome is unknown counts as done until proven otherwise.
            registry.register_scale_up(info.group, increase, now)
            log.warning(
                "scale-up outcome unknown; counted as done",
                extra={"fields": {"group": group_id, "error": str(err)}},
            )
            result.done.append(info)
            result.unconfirmed.append(info)
            break
        if isinstance(err, NothingWritten):
            fields = {"group": group_id, "error": str(err)}
            log.warning("scale-up not sent in time", extra={"fields": fields})
            break
        if err is not None:
            status_event(
                "Warning", "FailedToScaleUpGroup", f"Scale-up failed for group {group_id}: {err}"
            )
            registry.register_failed_scale_up(
                info.group,
                InstanceErrorInfo(
                    error_class=ErrorClass.OTHER,
                    code="cloudProviderError",
                    message=f"failed to increase node group size: {err}",
                ),
                now,
            )
            metrics.failed_scale_ups_total.labels("cloudProviderError").inc()
            metrics.errors_total.labels("cloudProviderError").inc()
            log.warning("scale-up failed", extra={"fields": {"group": group_id, "error": str(err)}})
            result.failed, result.error = info, str(err)
            break
        registry.register_scale_up(info.group, increase, now)
        metrics.scaled_up_nodes_total.inc(increase)
        status_event("Normal", "ScaledUpGroup", f"Scale-up: group {group_id} size set to {sizes}")
        log.info(
            "scaled up",
            extra={"fields": {"group": group_id, "from": info.current_size, "to": info.new_size}},
        )
        result.done.append(info)
    return result


def pod_events(
    *,
    result: ScaleUpResult,
    executed: Sequence[ScaleUpInfo],
    triggered: Sequence[Pod],
    remaining: Sequence[NoScaleUpInfo],
) -> list[Event]:
    """The pod events of a scale-up (``EventingScaleUpStatusProcessor``, module docstring)."""
    events: list[Event] = []
    if result not in (ScaleUpResult.SUCCESSFUL, ScaleUpResult.ERROR):
        events += [
            Event(
                actor=ACTOR,
                involved=info.pod,
                type="Normal",
                reason="NotTriggerScaleUp",
                message=f"pod didn't trigger scale-up: {reasons_message(info, result)}",
            )
            for info in remaining
        ]
    if executed:
        message = triggered_message(executed)
        events += [
            Event(
                actor=ACTOR,
                involved=pod,
                type="Normal",
                reason="TriggeredScaleUp",
                message=message,
            )
            for pod in triggered
        ]
    return events
