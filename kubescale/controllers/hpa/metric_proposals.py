"""One proposal per metric and their aggregation: ``computeReplicasForMetric(s)``, pure.

The loop fetches each metric first (:mod:`.metrics_sources`) and hands over what came back —
pod metrics, an object's value, external series, or the client's error text — and this module
turns it into upstream's proposal, metric status, metric name (used in event reasons) and, on
failure, upstream's condition reason and nested error messages (reference §2.2):

* the Warning event and the ``ScalingActive=False`` condition carry the calculator's error
  (the condition prefixed "the HPA was unable to compute the replica count: ");
* the aggregate error is "invalid metrics (N invalid out of M), first error is: <outer>", the
  outer text adding the per-type "failed to get ... metric value: " wrapper;
* all metrics failing, or some failing while the rest would scale below ``spec.replicas``,
  gives -1: no scaling on partial data. Otherwise the highest proposal wins.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final

from kubescale.controllers.hpa.hpa_spec import MetricSpec
from kubescale.controllers.hpa.hpa_status import go_selector_text, milli_quantity
from kubescale.controllers.hpa.replica_calculator import (
    PodMetric,
    ReplicaCalcError,
    Tolerances,
    external_per_pod_replicas,
    external_replicas,
    object_per_pod_replicas,
    object_replicas,
    plain_metric_replicas,
    resource_replicas,
)
from kubescale.objects.hpa import MetricIdentifier, MetricStatus, MetricValueStatus
from kubescale.objects.meta import CrossVersionObjectReference, LabelSelectorObject
from kubescale.objects.pod import Pod

__all__ = [
    "ExternalValues",
    "FetchError",
    "Fetched",
    "MetricOutcome",
    "MetricsResult",
    "ObjectValue",
    "ReplicaInputs",
    "compute_metric",
    "compute_metrics",
    "metric_display_name",
]

_UNABLE: Final = "the HPA was unable to compute the replica count: "


@dataclass(frozen=True)
class FetchError:
    """The metrics client's error text (without upstream's per-type wrapper)."""

    message: str


@dataclass(frozen=True)
class ObjectValue:
    value: int
    """milli"""


@dataclass(frozen=True)
class ExternalValues:
    values: tuple[int, ...]
    """milli, one per series"""


Fetched = Mapping[str, PodMetric] | ObjectValue | ExternalValues | FetchError


@dataclass(frozen=True, kw_only=True)
class ReplicaInputs:
    """What every proposal of one reconcile shares."""

    spec_replicas: int
    status_replicas: int
    pods: Sequence[Pod]
    tolerances: Tolerances
    cpu_initialization_period: timedelta
    initial_readiness_delay: timedelta
    now: datetime


@dataclass(frozen=True, kw_only=True)
class MetricOutcome:
    replicas: int = 0
    name: str = ""
    status: MetricStatus = field(default_factory=MetricStatus)
    reason: str = ""
    """On failure: the condition and event reason (``FailedGetResourceMetric``...)."""
    error: str = ""
    """On failure: the event message (condition message without its prefix)."""
    outer_error: str = ""

    @property
    def failed(self) -> bool:
        return bool(self.reason)


def metric_display_name(metric: MetricSpec) -> str:
    """The name a successful proposal gets (used in "<name> above target")."""
    target = metric.target
    if metric.type in ("Resource", "ContainerResource"):
        if target is not None and target.average_value_milli is not None:
            return f"{metric.resource_name} resource"
        if metric.type == "ContainerResource":
            return f"{metric.resource_name} container resource utilization (percentage of request)"
        return f"{metric.resource_name} resource utilization (percentage of request)"
    if metric.type == "Pods":
        return f"pods metric {metric.metric_name}"
    if (
        metric.type == "Object"
        and target is not None
        and target.type == "Value"
        and target.value_milli is not None
    ):
        kind = (metric.described_object or {}).get("kind", "")
        return f"{kind} metric {metric.metric_name}"
    return f"external metric {metric.metric_name}({go_selector_text(metric.metric_selector)})"


def _failure(reason: str, inner: str, outer: str) -> MetricOutcome:
    return MetricOutcome(reason=reason, error=inner, outer_error=outer)


def _identifier(metric: MetricSpec) -> MetricIdentifier:
    identifier = MetricIdentifier(name=metric.metric_name)
    if metric.metric_selector is not None:
        identifier["selector"] = LabelSelectorObject(**metric.metric_selector)
    return identifier


def _resource(metric: MetricSpec, fetched: Fetched | None, inputs: ReplicaInputs) -> MetricOutcome:
    container = metric.container if metric.type == "ContainerResource" else ""
    if metric.type == "ContainerResource":
        reason = "FailedGetContainerResourceMetric"
        outer = f"failed to get {metric.container} container metric value: "
    else:
        reason = "FailedGetResourceMetric"
        outer = f"failed to get {metric.resource_name} resource metric value: "
    resource = metric.resource_name
    target = metric.target
    average_value = target.average_value_milli if target is not None else None
    utilization = target.average_utilization if target is not None else None
    if average_value is None and utilization is None:
        inner = (
            "invalid resource metric source: neither an average utilization target nor an "
            "average value (usage) target was set"
        )
        return _failure(reason, inner, outer + inner)
    what = "usage" if average_value is not None else "utilization"
    try:
        if isinstance(fetched, FetchError) or not isinstance(fetched, Mapping):
            message = fetched.message if isinstance(fetched, FetchError) else "no metrics"
            raise ReplicaCalcError(f"unable to get metrics for resource {resource}: {message}")
        common = {
            "current": inputs.spec_replicas,
            "resource": resource,
            "tolerances": inputs.tolerances,
            "pods": inputs.pods,
            "metrics": fetched,
            "cpu_initialization_period": inputs.cpu_initialization_period,
            "initial_readiness_delay": inputs.initial_readiness_delay,
            "now": inputs.now,
        }
        if average_value is not None:
            replicas, raw = plain_metric_replicas(target_usage=average_value, **common)  # type: ignore[arg-type]
            current: MetricValueStatus = {"averageValue": milli_quantity(raw)}
        else:
            assert utilization is not None
            result = resource_replicas(
                target_utilization=utilization,
                container=container,
                **common,  # type: ignore[arg-type]
            )
            replicas = result.replicas
            current = {
                "averageValue": milli_quantity(result.raw_average),
                "averageUtilization": result.utilization,
            }
    except ReplicaCalcError as err:
        inner = f"failed to get {resource} {what}: {err}"
        return _failure(reason, inner, outer + inner)
    if metric.type == "ContainerResource":
        status: MetricStatus = {
            "type": "ContainerResource",
            "containerResource": {
                "name": resource,
                "container": metric.container,
                "current": current,
            },
        }
    else:
        status = {"type": "Resource", "resource": {"name": resource, "current": current}}
    return MetricOutcome(replicas=replicas, name=metric_display_name(metric), status=status)


def _pods(metric: MetricSpec, fetched: Fetched | None, inputs: ReplicaInputs) -> MetricOutcome:
    reason, outer = "FailedGetPodsMetric", "failed to get pods metric value: "
    target = metric.target
    target_value = target.average_value_milli if target is not None else None
    try:
        if isinstance(fetched, FetchError) or not isinstance(fetched, Mapping):
            message = fetched.message if isinstance(fetched, FetchError) else "no metrics"
            raise ReplicaCalcError(f"unable to get metric {metric.metric_name}: {message}")
        if target_value is None:
            raise ReplicaCalcError(
                "invalid pods metric source: an average value target is required"
            )
        replicas, usage = plain_metric_replicas(
            current=inputs.spec_replicas,
            target_usage=target_value,
            resource="",
            tolerances=inputs.tolerances,
            pods=inputs.pods,
            metrics=fetched,
            cpu_initialization_period=inputs.cpu_initialization_period,
            initial_readiness_delay=inputs.initial_readiness_delay,
            now=inputs.now,
        )
    except ReplicaCalcError as err:
        return _failure(reason, str(err), outer + str(err))
    status: MetricStatus = {
        "type": "Pods",
        "pods": {"metric": _identifier(metric), "current": {"averageValue": milli_quantity(usage)}},
    }
    return MetricOutcome(replicas=replicas, name=metric_display_name(metric), status=status)


def _object(
    metric: MetricSpec, fetched: Fetched | None, inputs: ReplicaInputs, namespace: str
) -> MetricOutcome:
    reason, outer = "FailedGetObjectMetric", "failed to get object metric value: "
    target = metric.target
    described = CrossVersionObjectReference(**(metric.described_object or {}))
    value_target = (
        target.value_milli
        if target is not None and target.type == "Value" and target.value_milli
        else None
    )
    average_target = (
        target.average_value_milli
        if target is not None and target.type == "AverageValue" and target.average_value_milli
        else None
    )
    if value_target is None and average_target is None:
        inner = (
            "invalid object metric source: neither a value target nor an average value "
            "target was set"
        )
        return _failure(reason, inner, outer + inner)
    if not isinstance(fetched, ObjectValue):
        message = fetched.message if isinstance(fetched, FetchError) else "no metrics"
        # upstream's argument order, kept as it prints
        inner = (
            f"unable to get metric {metric.metric_name}: {described.get('kind', '')} on "
            f"{namespace} {described.get('name', '')}/{message}"
        )
        if average_target is not None:
            return _failure(
                reason, inner, f"{outer}failed to get {metric.metric_name} object metric: {inner}"
            )
        return _failure(reason, inner, outer + inner)
    if value_target is not None:
        try:
            replicas = object_replicas(
                current=inputs.spec_replicas,
                usage=fetched.value,
                target=value_target,
                tolerances=inputs.tolerances,
                pods=inputs.pods,
            )
        except ReplicaCalcError as err:
            return _failure(reason, str(err), outer + str(err))
        current: MetricValueStatus = {"value": milli_quantity(fetched.value)}
    else:
        assert average_target is not None
        replicas, usage = object_per_pod_replicas(
            status_replicas=inputs.status_replicas,
            usage=fetched.value,
            target=average_target,
            tolerances=inputs.tolerances,
        )
        current = {"averageValue": milli_quantity(usage)}
    status: MetricStatus = {
        "type": "Object",
        "object": {"metric": _identifier(metric), "current": current, "describedObject": described},
    }
    return MetricOutcome(replicas=replicas, name=metric_display_name(metric), status=status)


def _external(
    metric: MetricSpec, fetched: Fetched | None, inputs: ReplicaInputs, namespace: str
) -> MetricOutcome:
    reason = "FailedGetExternalMetric"
    outer = f"failed to get {metric.metric_name} external metric value: "
    target = metric.target
    average_target = target.average_value_milli if target is not None else None
    value_target = target.value_milli if target is not None else None
    if average_target is None and value_target is None:
        inner = (
            "invalid external metric source: neither a value target nor an average value "
            "target was set"
        )
        return _failure(reason, inner, outer + inner)
    if not isinstance(fetched, ExternalValues):
        message = fetched.message if isinstance(fetched, FetchError) else "no metrics"
        inner = (
            f"unable to get external metric {namespace}/{metric.metric_name}/"
            f"{go_selector_text(metric.metric_selector)}: {message}"
        )
        if average_target is not None:
            wrapped = f"failed to get {metric.metric_name} external metric: {inner}"
        else:
            wrapped = f"failed to get external metric {metric.metric_name}: {inner}"
        return _failure(reason, inner, outer + wrapped)
    if average_target is not None:
        replicas, usage = external_per_pod_replicas(
            status_replicas=inputs.status_replicas,
            values=fetched.values,
            target=average_target,
            tolerances=inputs.tolerances,
        )
        current: MetricValueStatus = {"averageValue": milli_quantity(usage)}
    else:
        assert value_target is not None
        try:
            replicas, usage = external_replicas(
                current=inputs.spec_replicas,
                values=fetched.values,
                target=value_target,
                tolerances=inputs.tolerances,
                pods=inputs.pods,
            )
        except ReplicaCalcError as err:
            wrapped = f"failed to get external metric {metric.metric_name}: {err}"
            return _failure(reason, str(err), outer + wrapped)
        current = {"value": milli_quantity(usage)}
    status: MetricStatus = {
        "type": "External",
        "external": {"metric": _identifier(metric), "current": current},
    }
    return MetricOutcome(replicas=replicas, name=metric_display_name(metric), status=status)


_FAILED_REASONS: Final = {
    "Resource": "FailedGetResourceMetric",
    "ContainerResource": "FailedGetContainerResourceMetric",
    "Pods": "FailedGetPodsMetric",
    "Object": "FailedGetObjectMetric",
    "External": "FailedGetExternalMetric",
}


def compute_metric(
    metric: MetricSpec, fetched: Fetched | None, inputs: ReplicaInputs, *, namespace: str
) -> MetricOutcome:
    """``computeReplicasForMetric`` for one metric spec.

    A value or target the arithmetic cannot use (a target of 0, which kube-apiserver refuses
    but an object written before that rule or through another path may carry) is this metric's
    failure, under its ``FailedGet*Metric`` reason, never an exception out of the reconcile."""
    if metric.type not in _FAILED_REASONS:
        message = f'unknown metric source type "{metric.type}"'
        return _failure("InvalidMetricSourceType", message, message)
    try:
        if metric.type in ("Resource", "ContainerResource"):
            return _resource(metric, fetched, inputs)
        if metric.type == "Pods":
            return _pods(metric, fetched, inputs)
        if metric.type == "Object":
            return _object(metric, fetched, inputs, namespace)
        return _external(metric, fetched, inputs, namespace)
    except (ArithmeticError, ValueError) as err:
        inner = f"invalid metric value or target: {err}"
        return _failure(_FAILED_REASONS[metric.type], inner, inner)


@dataclass(frozen=True, kw_only=True)
class MetricsResult:
    """``computeReplicasForMetrics``' answer."""

    replicas: int
    """-1: do not scale (all metrics failed, or some failed and the rest would scale down)."""
    metric_name: str
    statuses: list[MetricStatus]
    outcomes: list[MetricOutcome]
    first_failure: MetricOutcome | None
    error: str
    """The aggregate error text (empty when every metric worked)."""


def compute_metrics(outcomes: Sequence[MetricOutcome], *, spec_replicas: int) -> MetricsResult:
    """Aggregate the per-metric outcomes (module docstring)."""
    replicas = 0
    name = ""
    invalid = 0
    first: MetricOutcome | None = None
    statuses: list[MetricStatus] = []
    for outcome in outcomes:
        # a failed metric leaves a zero MetricStatus behind, as upstream's slice does
        statuses.append(outcome.status if not outcome.failed else MetricStatus(type=""))
        if outcome.failed:
            if first is None:
                first = outcome
            invalid += 1
            continue
        if replicas == 0 or outcome.replicas > replicas:
            replicas = outcome.replicas
            name = outcome.name
    error = ""
    if first is not None:
        error = (
            f"invalid metrics ({invalid} invalid out of {len(outcomes)}), "
            f"first error is: {first.outer_error}"
        )
    if invalid >= len(outcomes) or (invalid > 0 and replicas < spec_replicas):
        return MetricsResult(
            replicas=-1,
            metric_name="",
            statuses=statuses,
            outcomes=list(outcomes),
            first_failure=first,
            error=error,
        )
    return MetricsResult(
        replicas=replicas,
        metric_name=name,
        statuses=statuses,
        outcomes=list(outcomes),
        first_failure=first,
        error=error,
    )
