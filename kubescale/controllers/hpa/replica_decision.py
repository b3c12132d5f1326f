"""Step 3's decision once the metrics are read: from the metric outcomes to the new replica count.

Upstream's tail of ``computeReplicasForMetrics`` (the largest proposal wins; no usable metric →
``ScalingActive=False`` with the first failure's reason) and ``normalizeDesiredReplicas`` /
``normalizeDesiredReplicasWithBehaviors`` (:mod:`.normalization`), with the kubescale additions
at the same step: a predictive proposal may raise the count above the reactive one (it is not
remembered as a recommendation: ``recorded`` stays the reactive count), and scale to zero
(:mod:`.scale_to_zero`) may override the floor and the result.

Pure: :class:`~.hpa_decision.HpaDecision` passes what was read and what it remembers, and turns
the answer into the plan (conditions, history, events, ``/scale`` and status writes).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from kubescale.controllers.hpa.hpa_spec import HpaSpec
from kubescale.controllers.hpa.hpa_status import ABLE_TO_SCALE, SCALING_ACTIVE, SCALING_LIMITED
from kubescale.controllers.hpa.metric_proposals import MetricOutcome, MetricsResult
from kubescale.controllers.hpa.normalization import ScalingHistory, initial_history, normalize
from kubescale.controllers.hpa.scale_to_zero import ZeroDecision
from kubescale.objects.hpa import MetricStatus

__all__ = [
    "ConditionChange",
    "ReplicaDecision",
    "decide_at_zero",
    "decide_replicas",
    "failed_metrics",
]

ZERO_REASON = "All metrics below activation threshold and cooldown elapsed"


@dataclass(frozen=True, kw_only=True)
class ConditionChange:
    """One ``setCondition`` the loop applies, in order."""

    type: str
    status: bool
    reason: str
    message: str


@dataclass(frozen=True, kw_only=True)
class ReplicaDecision:
    """What step 3 decided.

    ``replicas`` is None when no metric gave a usable answer (upstream: the status is written,
    ``FailedComputeMetricsReplicas`` is recorded with ``failure``, no rescale). ``history`` is
    the HPA's new recommendation history (None: unchanged). ``error_label`` is the
    ``reconciliations_total`` error label this step sets (``"none"``: leaves it).
    """

    replicas: int | None
    reason: str
    statuses: list[MetricStatus]
    conditions: tuple[ConditionChange, ...]
    history: ScalingHistory | None = None
    error_label: str = "none"
    failure: str = ""


def decide_at_zero(replicas: int, outcomes: list[MetricOutcome]) -> ReplicaDecision:
    """At zero replicas only the activation metrics are read: scale from zero when one is
    above its threshold, else stay at zero (``ScaledToZero``)."""
    statuses = [o.status if not o.failed else MetricStatus(type="") for o in outcomes]
    if replicas > 0:
        active = ConditionChange(
            type=SCALING_ACTIVE,
            status=True,
            reason="ValidMetricFound",
            message="the HPA was able to successfully calculate a replica count from its "
            "activation metrics",
        )
        return ReplicaDecision(
            replicas=replicas,
            reason="activation metric above activation threshold",
            statuses=statuses,
            conditions=(active,),
        )
    idle = ConditionChange(
        type=SCALING_ACTIVE,
        status=False,
        reason="ScaledToZero",
        message="scaled to zero: no activation metric is above "
        "hpa.kubescale.io/activation-threshold",
    )
    return ReplicaDecision(replicas=0, reason="", statuses=statuses, conditions=(idle,))


def failed_metrics(result: MetricsResult) -> ReplicaDecision:
    """No metric gave a count (``result.replicas == -1``): ``ScalingActive=False`` with the
    first failure's reason; the error label is ``spec`` for an invalid source type."""
    first = result.first_failure
    conditions: tuple[ConditionChange, ...] = ()
    if first is not None:
        conditions = (
            ConditionChange(
                type=SCALING_ACTIVE,
                status=False,
                reason=first.reason,
                message=f"the HPA was unable to compute the replica count: {first.error}",
            ),
        )
    spec_error = first is not None and first.reason == "InvalidMetricSourceType"
    return ReplicaDecision(
        replicas=None,
        reason="",
        statuses=result.statuses,
        conditions=conditions,
        error_label="spec" if spec_error else "internal",
        failure=result.error,
    )


def decide_replicas(
    *,
    result: MetricsResult,
    spec: HpaSpec,
    current: int,
    history: ScalingHistory | None,
    zero: ZeroDecision | None,
    predicted: int | None,
    downscale_window: timedelta,
    now: datetime,
) -> ReplicaDecision:
    """The count from a usable ``result`` (``replicas >= 0``), normalized (module docstring)."""
    valid = ConditionChange(
        type=SCALING_ACTIVE,
        status=True,
        reason="ValidMetricFound",
        message="the HPA was able to successfully calculate a replica count from "
        f"{result.metric_name}",
    )
    desired, metric_name = result.replicas, result.metric_name
    reactive = desired
    if predicted is not None and predicted > desired and predicted > current:
        desired, metric_name = predicted, f"predicted {metric_name}"
    reason = ""
    if desired > current:
        reason = f"{metric_name} above target"
    if desired < current:
        reason = "All metrics below target"
    normalized = normalize(
        history=history or initial_history(current, now),
        behavior=spec.behavior,
        current=current,
        desired=desired,
        min_replicas=zero.floor if zero is not None else spec.min_replicas,
        max_replicas=spec.max_replicas,
        downscale_window=downscale_window,
        now=now,
        recorded=reactive,
    )
    able_reason, able_message = normalized.able_to_scale
    limit_reason, limit_message = normalized.limit
    conditions = (
        valid,
        ConditionChange(type=ABLE_TO_SCALE, status=True, reason=able_reason, message=able_message),
        ConditionChange(
            type=SCALING_LIMITED,
            status=normalized.limited,
            reason=limit_reason,
            message=limit_message,
        ),
    )
    desired = normalized.replicas
    if zero is not None and zero.replicas is not None:
        desired, reason = zero.replicas, ZERO_REASON
    return ReplicaDecision(
        replicas=desired,
        reason=reason,
        statuses=result.statuses,
        conditions=conditions,
        history=normalized.history,
        error_label="internal" if result.error else "none",
    )
