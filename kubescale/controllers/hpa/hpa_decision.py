"""One HPA's reconcile as a decision: ``decide(snapshot, memory, now)`` → the plan.

The loop (:mod:`.hpa_loop`) reads first — the target's ``/scale``, the pods its selector picks,
every metric — into an :class:`HpaSnapshot`; a read that fails is kept in the snapshot as the
failure upstream reports (:class:`ScaleReadFailed`, a metric's
:class:`~.metric_proposals.FetchError`, a selector refused by
:func:`~.pod_selection.select_pods`), so the decision writes upstream's condition and event
texts. :class:`HpaDecision` then decides without a client and without awaiting: a generator
(:data:`~kubescale.plans.executor.Decision`) yielding the intents in upstream's order — the
``Scale``, whose :class:`~kubescale.plans.executor.Applied` outcome it receives before it
yields the status write, and the events — and returning :class:`HpaOutcome`: the new
:class:`HpaMemory` and what the loop reports (metric labels, the timeline).

The order is upstream's ``reconcileAutoscaler`` (kubernetes ``pkg/controller/podautoscaler/
horizontal.go``; reference §2.1):

1. the scale cannot be read → ``FailedGetScale`` event, ``AbleToScale=False/FailedGetScale``,
   ``updateStatusIfNeeded``, done;
2. the recommendation history is seeded on first sight (``recordInitialRecommendation``);
   ``currentReplicas == 0`` with ``minReplicas != 0`` → ``ScalingActive=False/ScalingDisabled``;
   above max / below min → clamp without metrics;
3. otherwise ``computeReplicasForMetrics`` (the selector's failures, each metric's
   ``FailedGet*Metric`` event, the conditions) and the normalization
   (:mod:`.replica_decision`); no usable answer → the status, then
   ``FailedComputeMetricsReplicas``, done;
4. a changed count → ``Scale``; when it fails upstream still writes the status, with
   ``FailedRescale`` (event) and ``AbleToScale=False/FailedUpdateScale``
   (``setCurrentReplicasAndMetricsInStatus`` then ``updateStatusIfNeeded``); when it worked,
   ``AbleToScale=True/SucceededRescale`` and ``SuccessfulRescale``;
5. ``setStatus`` and ``updateStatusIfNeeded``: the status is written only when it changed; a
   failed write is a ``FailedUpdateStatus`` event.

Memory (:class:`HpaMemory`) is what upstream's controller keeps per HPA key —
``recommendations``, ``scaleUpEvents``, ``scaleDownEvents`` (:class:`~.normalization.
ScalingHistory`) — plus kubescale's scale-to-zero state (first sight, last active) and the
predictive demand history. The demand history is the one mutable part: an 8-day series
(bounded, :mod:`.predictive`) that the decision records the reconcile's sample into rather than
copy it every reconcile.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Final

from kubescale.controllers.hpa.hpa_config import HpaSettings
from kubescale.controllers.hpa.hpa_metrics import action_label
from kubescale.controllers.hpa.hpa_spec import HpaSpec, HpaSpecError, MetricSpec
from kubescale.controllers.hpa.hpa_status import ABLE_TO_SCALE, SCALING_ACTIVE, set_condition
from kubescale.controllers.hpa.metric_proposals import (
    Fetched,
    MetricOutcome,
    ReplicaInputs,
    compute_metric,
    compute_metrics,
)
from kubescale.controllers.hpa.normalization import (
    ScalingHistory,
    initial_history,
    store_scale_event,
)
from kubescale.controllers.hpa.pod_selection import SelectorOutcome
from kubescale.controllers.hpa.predictive import DemandHistory, demand_of, predictive_settings
from kubescale.controllers.hpa.replica_calculator import Tolerances
from kubescale.controllers.hpa.replica_decision import (
    decide_at_zero,
    decide_replicas,
    failed_metrics,
)
from kubescale.controllers.hpa.scale_to_zero import (
    ZeroSettings,
    activation_value,
    decide_zero,
    is_active,
    zero_settings,
)
from kubescale.kube.errors import KubeApiError, KubeError
from kubescale.kube.event_correlation import format_time
from kubescale.kube.resources import HORIZONTAL_POD_AUTOSCALERS, ResourceType
from kubescale.objects.hpa import (
    HorizontalPodAutoscaler,
    HorizontalPodAutoscalerStatus,
    MetricStatus,
)
from kubescale.objects.meta import Condition
from kubescale.objects.views import status_of
from kubescale.plans.executor import Decision
from kubescale.plans.intents import Event, ObjectRef, Scale, WriteStatus

__all__ = [
    "ACTOR",
    "HpaDecision",
    "HpaMemory",
    "HpaOutcome",
    "HpaSnapshot",
    "MetricComputation",
    "MetricRead",
    "ScaleRead",
    "ScaleReadFailed",
    "decide",
    "metrics_to_read",
    "zero_settings_or_none",
]

ACTOR: Final = "horizontal-pod-autoscaler"
"""The controller's name on its intents (upstream's event source)."""


@dataclass(frozen=True, kw_only=True)
class ScaleRead:
    """The target's Scale as read (``GET /scale``, or the informer's copy of a workload)."""

    replicas: int
    """``spec.replicas``: upstream's ``currentReplicas``."""
    status_replicas: int
    resource: ResourceType
    """The resource whose ``/scale`` answered (the ``Scale`` intent writes it)."""
    selector: str = ""
    """``status.selector``."""
    uid: str = ""


@dataclass(frozen=True, kw_only=True)
class ScaleReadFailed:
    """The Scale could not be read: upstream's error text (``FailedGetScale``)."""

    message: str
    spec_error: bool = False
    """The reference cannot be mapped (the ``spec`` error label), not a failed request."""


@dataclass(frozen=True, kw_only=True)
class MetricRead:
    """One metric spec and what its read gave (values, or the failure as a ``FetchError``)."""

    metric: MetricSpec
    fetched: Fetched | None
    seconds: float = 0.0
    """How long the read took (``metric_computation_duration_seconds``: upstream measures
    ``computeReplicasForMetric``, whose replica calculator does the read)."""


@dataclass(frozen=True, kw_only=True)
class HpaSnapshot:
    """What one reconcile decides on (module docstring)."""

    hpa: HorizontalPodAutoscaler
    """The HPA as read (with ``apiVersion`` and ``kind``); its status is the original one."""
    spec: HpaSpec
    scale: ScaleRead | ScaleReadFailed
    pods: SelectorOutcome | None = None
    """The selector's pods; None when step 3 was not reached (no metrics needed)."""
    metrics: tuple[MetricRead, ...] = ()
    """The metrics read (:func:`metrics_to_read`), in spec order."""


@dataclass(frozen=True, kw_only=True)
class HpaMemory:
    """What the controller keeps about one HPA between reconciles (module docstring)."""

    history: ScalingHistory | None = None
    first_seen: datetime | None = None
    last_active: datetime | None = None
    demand: DemandHistory | None = None


@dataclass(frozen=True, kw_only=True)
class MetricComputation:
    """One ``metric_computation_total`` sample: labels and the read's duration."""

    action: str
    error: str
    type: str
    seconds: float


@dataclass(frozen=True, kw_only=True)
class HpaOutcome:
    """What the loop keeps and reports of one decision."""

    memory: HpaMemory
    action: str
    """``reconciliations_total``'s ``action`` label."""
    error_label: str
    """``reconciliations_total``'s ``error`` label."""
    desired: int | None = None
    """``desired_replicas`` (None: not set, the reconcile ended early)."""
    rescaled: str = ""
    """The ``SuccessfulRescale`` message (empty: no rescale)."""
    reason: str = ""
    """The rescale's reason."""
    previous: int = 0
    computations: tuple[MetricComputation, ...] = ()


def zero_settings_or_none(hpa: HorizontalPodAutoscaler) -> ZeroSettings | None:
    """The HPA's scale-to-zero settings; None when off or invalid (the decision says why)."""
    try:
        return zero_settings(hpa)
    except HpaSpecError:
        return None


def _bounded(spec: HpaSpec, current: int, zero: ZeroSettings | None) -> tuple[str, int] | None:
    """Step 2: ``("", current)`` for ``ScalingDisabled``, ``(reason, bound)`` to clamp into
    ``[minReplicas, maxReplicas]``, None when the metrics decide."""
    if current == 0 and spec.min_replicas != 0 and zero is None:
        return "", current
    if current > spec.max_replicas:
        return "Current number of replicas above Spec.MaxReplicas", spec.max_replicas
    if current < spec.min_replicas and not (zero is not None and current == 0):
        return "Current number of replicas below Spec.MinReplicas", spec.min_replicas
    return None


def metrics_to_read(
    spec: HpaSpec, current: int, zero: ZeroSettings | None
) -> tuple[MetricSpec, ...] | None:
    """The metric specs a reconcile reads at ``current`` replicas (``zero``: its scale-to-zero
    settings); None when step 3 is not reached (neither pods nor metrics read). At zero with
    scale to zero on, only the activation metrics (Object, External) can be read."""
    if _bounded(spec, current, zero) is not None:
        return None
    if zero is not None and current == 0:
        return tuple(m for m in spec.metrics if m.type in ("Object", "External"))
    return spec.metrics


class HpaDecision:
    """One reconcile's decision (module docstring); :meth:`decide` is the generator. The
    conditions as set so far stay readable (:attr:`conditions`), so that a decision that
    raises still gets its condition and event (:meth:`internal_failure`)."""

    def __init__(
        self, snapshot: HpaSnapshot, memory: HpaMemory, now: datetime, *, settings: HpaSettings
    ) -> None:
        self.snapshot = snapshot
        self.memory = memory
        self.now = now
        self.settings = settings
        self.conditions: list[Condition] = list(status_of(snapshot.hpa).get("conditions") or [])
        self.error_label = "none"
        self._computations: list[MetricComputation] = []

    # --- pieces ----------------------------------------------------------------------------------

    def _condition(self, type: str, status: bool, reason: str, message: str) -> None:
        self.conditions = set_condition(
            self.conditions, type=type, status=status, reason=reason, message=message, now=self.now
        )

    def _event(self, type: str, reason: str, message: str) -> Event:
        return Event(
            actor=ACTOR, involved=self.snapshot.hpa, type=type, reason=reason, message=message
        )

    def _status(self) -> HorizontalPodAutoscalerStatus:
        status = HorizontalPodAutoscalerStatus(**status_of(self.snapshot.hpa))
        status["conditions"] = self.conditions
        if self.snapshot.spec.generation:
            status["observedGeneration"] = self.snapshot.spec.generation
        status.setdefault("currentReplicas", 0)
        status.setdefault("desiredReplicas", 0)
        return status

    def _write_status(self, status: HorizontalPodAutoscalerStatus) -> Decision[None]:
        """``updateStatusIfNeeded``: the status write only when it differs from the one read;
        a failed write is a ``FailedUpdateStatus`` event."""
        hpa = self.snapshot.hpa
        if status_of(hpa) == status:
            return
        applied = yield WriteStatus(
            actor=ACTOR, resource=HORIZONTAL_POD_AUTOSCALERS, body={**hpa, "status": status}
        )
        if applied.error is not None:
            yield self._event("Warning", "FailedUpdateStatus", _text(applied.error))
            self.error_label = "internal"

    def _outcome(
        self,
        action: str,
        *,
        desired: int | None = None,
        rescaled: str = "",
        reason: str = "",
        previous: int = 0,
    ) -> HpaOutcome:
        return HpaOutcome(
            memory=self.memory,
            action=action,
            error_label=self.error_label,
            desired=desired,
            rescaled=rescaled,
            reason=reason,
            previous=previous,
            computations=tuple(self._computations),
        )

    def internal_failure(self, text: str) -> Decision[None]:
        """A decision that raised: ``ScalingActive=False`` and a
        ``FailedComputeMetricsReplicas`` event, the status written as far as it got."""
        self.error_label = "internal"
        yield self._event("Warning", "FailedComputeMetricsReplicas", text)
        self._condition(
            SCALING_ACTIVE,
            False,
            "FailedComputeMetricsReplicas",
            f"the HPA was unable to compute the replica count: {text}",
        )
        yield from self._write_status(self._status())

    # --- the reconcile ---------------------------------------------------------------------------

    def decide(self) -> Decision[HpaOutcome]:
        """Steps 1-5 (module docstring)."""
        spec, now = self.snapshot.spec, self.now
        scale = self.snapshot.scale
        if isinstance(scale, ScaleReadFailed):
            self.error_label = "spec" if scale.spec_error else "internal"
            yield self._event("Warning", "FailedGetScale", scale.message)
            self._condition(
                ABLE_TO_SCALE,
                False,
                "FailedGetScale",
                f"the HPA controller was unable to get the target's current scale: {scale.message}",
            )
            yield from self._write_status(self._status())
            return self._outcome("none")
        self._condition(
            ABLE_TO_SCALE,
            True,
            "SucceededGetScale",
            "the HPA controller was able to get the target's current scale",
        )
        current = scale.replicas
        if self.memory.history is None:  # recordInitialRecommendation
            self.memory = replace(self.memory, history=initial_history(current, now))
        try:
            zero = zero_settings(self.snapshot.hpa)
        except HpaSpecError as err:
            yield self._event("Warning", "InvalidSpec", str(err))
            zero = None
        statuses: list[MetricStatus] | None = None
        bounded = _bounded(spec, current, zero)
        if bounded is not None:
            reason, desired = bounded
            rescale = bool(reason)
            if not rescale:
                self._condition(
                    SCALING_ACTIVE,
                    False,
                    "ScalingDisabled",
                    "scaling is disabled since the replica count of the target is zero",
                )
        else:
            computed = yield from self._compute(scale, zero)
            if computed is None:
                return self._outcome("none")
            desired, reason, statuses = computed
            rescale = desired != current
        if rescale:
            applied = yield Scale(
                actor=ACTOR,
                target=ObjectRef(scale.resource, spec.namespace, spec.target_name),
                replicas=desired,
            )
            failure = applied.error
            if failure is not None:
                text = _text(failure)
                self.error_label = "internal"
                yield self._event(
                    "Warning",
                    "FailedRescale",
                    f"New size: {desired}; reason: {reason}; error: {text}",
                )
                self._condition(
                    ABLE_TO_SCALE,
                    False,
                    "FailedUpdateScale",
                    f"the HPA controller was unable to update the target scale: {text}",
                )
                if not isinstance(failure, KubeApiError) or failure.code >= 500:
                    # outcome unknown: count it for the rate limits until proven otherwise
                    self._store_scale_event(current, desired)
                status = self._status()  # setCurrentReplicasAndMetricsInStatus
                status["currentReplicas"] = current
                if statuses is not None:
                    status["currentMetrics"] = statuses
                yield from self._write_status(status)
                return self._outcome("none")
            self._condition(
                ABLE_TO_SCALE,
                True,
                "SucceededRescale",
                f"the HPA controller was able to update the target scale to {desired}",
            )
            message = f"New size: {desired}; reason: {reason}"
            yield self._event("Normal", "SuccessfulRescale", message)
            self._store_scale_event(current, desired)
        else:
            desired, message = current, ""
        status = self._status()  # setStatus
        status["currentReplicas"] = current
        status["desiredReplicas"] = desired
        if statuses is not None:
            status["currentMetrics"] = statuses
        else:
            status.pop("currentMetrics", None)
        if rescale:
            status["lastScaleTime"] = format_time(now)
        yield from self._write_status(status)
        return self._outcome(
            action_label(current, desired) if rescale else "none",
            desired=desired,
            rescaled=message,
            reason=reason,
            previous=current,
        )

    def _store_scale_event(self, current: int, desired: int) -> None:
        history = self.memory.history
        assert history is not None
        self.memory = replace(
            self.memory,
            history=store_scale_event(
                history, self.snapshot.spec.behavior, previous=current, new=desired, now=self.now
            ),
        )

    def _compute(
        self, scale: ScaleRead, zero: ZeroSettings | None
    ) -> Decision[tuple[int, str, list[MetricStatus]] | None]:
        """Step 3; None when the reconcile ended (status written)."""
        snapshot, spec, now = self.snapshot, self.snapshot.spec, self.now
        current = scale.replicas
        selected = snapshot.pods
        assert selected is not None, "step 3 without the selector's pods read"
        if selected.pods is None:  # validateAndParseSelector refused
            yield self._event("Warning", selected.event_reason, selected.message)
            self._condition(
                SCALING_ACTIVE, False, selected.condition_reason, selected.condition_message
            )
            self.error_label = "spec"
            status = self._status()
            status["currentReplicas"] = current
            yield from self._write_status(status)
            yield self._event("Warning", "FailedComputeMetricsReplicas", selected.message)
            return None
        inputs = ReplicaInputs(
            spec_replicas=current,
            status_replicas=scale.status_replicas,
            pods=selected.pods,
            tolerances=self._tolerances(),
            cpu_initialization_period=self.settings.cpu_initialization_period,
            initial_readiness_delay=self.settings.initial_readiness_delay,
            now=now,
        )
        outcomes: list[MetricOutcome] = []
        status_replicas = int(status_of(snapshot.hpa).get("currentReplicas") or 0)
        for read in snapshot.metrics:
            outcome = compute_metric(read.metric, read.fetched, inputs, namespace=spec.namespace)
            outcomes.append(outcome)
            if outcome.failed:
                yield self._event("Warning", outcome.reason, outcome.error)
            error = (
                "spec"
                if outcome.reason == "InvalidMetricSourceType"
                else ("internal" if outcome.failed else "none")
            )
            action = "none" if outcome.failed else action_label(status_replicas, outcome.replicas)
            self._computations.append(
                MetricComputation(
                    action=action, error=error, type=read.metric.type, seconds=read.seconds
                )
            )
        zero_decision = None
        if zero is not None:
            activation = [
                activation_value(read.fetched)
                for read in snapshot.metrics
                if read.metric.type in ("Object", "External")
            ]
            zero_decision = decide_zero(
                current=current,
                active=is_active(activation, threshold_milli=zero.activation_threshold_milli),
                last_active=self.memory.last_active,
                first_seen=self.memory.first_seen or now,
                min_replicas=spec.min_replicas,
                settings=zero,
                now=now,
            )
            self.memory = replace(self.memory, last_active=zero_decision.last_active)
        if zero_decision is not None and current == 0:
            decision = decide_at_zero(zero_decision.replicas or 0, outcomes)
        else:
            result = compute_metrics(outcomes, spec_replicas=current)
            if result.replicas == -1:
                decision = failed_metrics(result)
            else:
                predicted = yield from self._prediction(
                    snapshot.metrics[0].metric if snapshot.metrics else None,
                    outcomes[0] if outcomes else None,
                    current=current,
                )
                decision = decide_replicas(
                    result=result,
                    spec=spec,
                    current=current,
                    history=self.memory.history,
                    zero=zero_decision,
                    predicted=predicted,
                    downscale_window=self.settings.downscale_stabilization,
                    now=now,
                )
        for change in decision.conditions:
            self._condition(change.type, change.status, change.reason, change.message)
        if decision.error_label != "none":
            self.error_label = decision.error_label
        if decision.history is not None:
            self.memory = replace(self.memory, history=decision.history)
        if decision.replicas is None:
            status = self._status()
            status["currentReplicas"] = current
            status["currentMetrics"] = decision.statuses
            yield from self._write_status(status)
            yield self._event("Warning", "FailedComputeMetricsReplicas", decision.failure)
            return None
        return decision.replicas, decision.reason, decision.statuses

    def _prediction(
        self, metric: MetricSpec | None, outcome: MetricOutcome | None, *, current: int
    ) -> Decision[int | None]:
        """The predictive proposal (:mod:`.predictive`), the demand sample recorded first."""
        try:
            settings = predictive_settings(self.snapshot.hpa)
        except HpaSpecError as err:
            yield self._event("Warning", "InvalidSpec", str(err))
            return None
        if settings is None or metric is None or outcome is None or outcome.failed:
            return None
        demand = demand_of(metric, outcome.status, ready=max(current, 1))
        if demand is None:
            return None
        history = self.memory.demand
        if history is None:
            history = DemandHistory()
            self.memory = replace(self.memory, demand=history)
        history.record(self.now, demand)
        return history.proposal(self.now, lead=settings.lead)

    def _tolerances(self) -> Tolerances:
        """``tolerancesForHpa``: the flag, overridden per direction by ``behavior.*.tolerance``
        when ``HPAConfigurableTolerance`` is on."""
        spec = self.snapshot.spec
        down = up = self.settings.tolerance
        if self.settings.configurable_tolerance_gate and spec.behavior is not None:
            if spec.behavior.scale_down.tolerance is not None:
                down = spec.behavior.scale_down.tolerance
            if spec.behavior.scale_up.tolerance is not None:
                up = spec.behavior.scale_up.tolerance
        return Tolerances(scale_down=down, scale_up=up)


def decide(
    snapshot: HpaSnapshot, memory: HpaMemory, now: datetime, *, settings: HpaSettings
) -> Decision[HpaOutcome]:
    """One HPA's reconcile decided (module docstring); drive it with the executor, or read its
    plan with :func:`~kubescale.plans.executor.collect_plan`."""
    return HpaDecision(snapshot, memory, now, settings=settings).decide()


def _text(error: KubeError) -> str:
    return error.message if isinstance(error, KubeApiError) else str(error)
