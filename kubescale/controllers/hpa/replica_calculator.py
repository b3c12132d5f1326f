"""The replica calculator: upstream ``replica_calculator.go`` + ``metrics/utilization.go``, pure.

Every function takes the fetched metric values, the pods the lister returned and ``now``, and
returns a proposal; nothing here reads a clock or the API. Arithmetic is upstream's (reference
§1, §7): values are int64 **milli** (``Quantity.MilliValue``, rounded up), utilization is a
**truncated** int32 percentage, averages use integer division, replica counts are
``ceil(float64)`` capped at MaxInt32, tolerance is inclusive at both ends.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final, cast

from kubescale.base.times import parse_time
from kubescale.objects.containers import Container
from kubescale.objects.meta import Condition
from kubescale.objects.pod import Pod, PodSpec
from kubescale.objects.quantities import Quantity, QuantityError
from kubescale.objects.views import Meta, spec_of, status_of

__all__ = [
    "MAX_INT32",
    "MAX_INT64",
    "PodGroups",
    "PodMetric",
    "ReplicaCalcError",
    "ResourceReplicas",
    "Tolerances",
    "calculate_requests",
    "ceil_to_int32",
    "external_per_pod_replicas",
    "external_replicas",
    "group_pods",
    "metric_usage_ratio",
    "object_per_pod_replicas",
    "object_replicas",
    "plain_metric_replicas",
    "ready_pod_count",
    "resource_replicas",
    "resource_utilization_ratio",
    "usage_ratio_replica_count",
]

MAX_INT32: Final = 2**31 - 1
MAX_INT64: Final = 2**63 - 1
NO_PODS: Final = "no pods returned by selector while calculating replica count"
NO_METRICS_FOR_PODS: Final = "did not receive metrics for targeted pods (pods might be unready)"


class ReplicaCalcError(Exception):
    """A proposal that cannot be computed; the message is upstream's error text."""


@dataclass(frozen=True, slots=True)
class PodMetric:
    """``metricsclient.PodMetric``: a milli-value measured over ``window`` ending ``timestamp``."""

    value: int
    timestamp: datetime
    window: timedelta


@dataclass(frozen=True, slots=True)
class Tolerances:
    """``Tolerances{scaleDown, scaleUp}``."""

    scale_down: float
    scale_up: float

    def is_within(self, ratio: float) -> bool:
        """upstream: ``(1-scaleDown) <= ratio <= (1+scaleUp)``, both bounds inclusive."""
        return (1.0 - self.scale_down) <= ratio <= (1.0 + self.scale_up)


def ceil_to_int32(value: float) -> int:
    """``int32(math.Ceil(x))`` with upstream's overflow cap (``ceilToInt32``)."""
    if math.isnan(value):
        return 0
    if value >= MAX_INT32:
        return MAX_INT32
    return math.ceil(value)


# --- pods -------------------------------------------------------------------------------------


def _name(pod: Pod) -> str:
    return str(Meta(pod).raw.get("name") or "")


def _phase(pod: Pod) -> str:
    return str(status_of(pod).get("phase") or "")


def _ready_condition(pod: Pod) -> Condition | None:
    # The pod is the API server's JSON: an entry that is not an object is skipped, as before.
    entries: list[object] = list(status_of(pod).get("conditions") or ())
    for condition in entries:
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            return cast(Condition, condition)
    return None


def is_pod_ready(pod: Pod) -> bool:
    """``podutil.IsPodReady``: the Ready condition is True."""
    condition = _ready_condition(pod)
    return condition is not None and condition.get("status") == "True"


@dataclass(frozen=True, kw_only=True)
class PodGroups:
    """``groupPods``: the count of ready pods and the names in the other three sets."""

    ready_count: int
    unready: frozenset[str]
    missing: frozenset[str]
    ignored: frozenset[str]


def group_pods(
    pods: Sequence[Pod],
    metrics: Mapping[str, PodMetric],
    *,
    resource: str,
    cpu_initialization_period: timedelta,
    initial_readiness_delay: timedelta,
    now: datetime,
) -> PodGroups:
    """Reference §1.3, checks in upstream's order.

    1. deleting or Failed → ignored; 2. Pending → unready; 3. no metric → missing;
    4. ``cpu`` only: no Ready condition or no startTime → unready; within the CPU
    initialization period → unready if not Ready or the metric's window started before the
    last readiness change; after it → unready only if not Ready and never ready (the Ready
    condition last changed within ``initial_readiness_delay`` of the start); 5. ready.
    """
    ready = 0
    unready: set[str] = set()
    missing: set[str] = set()
    ignored: set[str] = set()
    for pod in pods:
        name = _name(pod)
        phase = _phase(pod)
        if Meta(pod).raw.get("deletionTimestamp") or phase == "Failed":
            ignored.add(name)
            continue
        if phase == "Pending":
            unready.add(name)
            continue
        metric = metrics.get(name)
        if metric is None:
            missing.add(name)
            continue
        if resource == "cpu":
            condition = _ready_condition(pod)
            start = parse_time(status_of(pod).get("startTime"))
            if condition is None or start is None:
                unready.add(name)
                continue
            transition = parse_time(condition.get("lastTransitionTime")) or start
            not_ready = condition.get("status") == "False"
            if start + cpu_initialization_period > now:
                is_unready = not_ready or metric.timestamp < transition + metric.window
            else:
                is_unready = not_ready and start + initial_readiness_delay > transition
            if is_unready:
                unready.add(name)
                continue
        ready += 1
    return PodGroups(
        ready_count=ready,
        unready=frozenset(unready),
        missing=frozenset(missing),
        ignored=frozenset(ignored),
    )


def _request_milli(container: Container | PodSpec, resource: str) -> int | None:
    requests = (container.get("resources") or {}).get("requests") or {}
    if resource not in requests:
        return None
    try:
        return Quantity.from_json(requests[resource]).milli_value()
    except QuantityError:
        return None


def calculate_requests(pods: Sequence[Pod], *, container: str, resource: str) -> dict[str, int]:
    """``calculatePodRequests``: milli request per pod name (reference §1.4).

    Pod-level ``spec.resources.requests`` when set for the resource and no container is named;
    otherwise the sum over ``spec.containers`` and restartable init containers (sidecars),
    or only the named container.
    """
    requests: dict[str, int] = {}
    for pod in pods:
        name = _name(pod)
        spec = spec_of(pod)
        if not container:
            pod_level = _request_milli(spec, resource)
            if pod_level is not None:
                requests[name] = pod_level
                continue
        containers = list(spec.get("containers") or ())
        containers += [
            c for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"
        ]
        total = 0
        found = False
        for c in containers:
            if container and c.get("name") != container:
                continue
            found = True
            request = _request_milli(c, resource)
            if request is None:
                raise ReplicaCalcError(
                    f"missing request for {resource} in container {c.get('name', '')} of Pod {name}"
                )
            total += request
        if container and not found:
            raise ReplicaCalcError(f"container {container} not found in Pod {name}")
        requests[name] = total
    return requests


# --- ratios (metrics/utilization.go) ------------------------------------------------------------


def resource_utilization_ratio(
    metrics: Mapping[str, PodMetric], requests: Mapping[str, int], target_utilization: int
) -> tuple[float, int, int]:
    """``GetResourceUtilizationRatio``: (ratio, truncated utilization %, raw average milli).

    Only pods with both a metric and a request count; ``int32(total*100/requests)``.
    """
    metrics_total = 0
    requests_total = 0
    entries = 0
    for name, metric in metrics.items():
        request = requests.get(name)
        if request is None:
            continue
        metrics_total += metric.value
        requests_total += request
        entries += 1
    if requests_total == 0:
        raise ReplicaCalcError("no metrics returned matched known pods")
    utilization = (metrics_total * 100) // requests_total
    return utilization / target_utilization, utilization, metrics_total // entries


def metric_usage_ratio(metrics: Mapping[str, PodMetric], target_usage: int) -> tuple[float, int]:
    """``GetMetricUsageRatio``: (average/target, integer average)."""
    total = sum(m.value for m in metrics.values())
    usage = total // len(metrics)
    return usage / target_usage, usage


# --- proposals ------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ResourceReplicas:
    replicas: int
    utilization: int
    """Truncated percentage of requests (status ``averageUtilization``)."""
    raw_average: int
    """Average milli-value over pods with a metric and a request (status ``averageValue``)."""


def _active_metrics(
    pods: Sequence[Pod],
    metrics: Mapping[str, PodMetric],
    *,
    resource: str,
    cpu_initialization_period: timedelta,
    initial_readiness_delay: timedelta,
    now: datetime,
) -> tuple[PodGroups, dict[str, PodMetric]]:
    if not pods:
        raise ReplicaCalcError(NO_PODS)
    groups = group_pods(
        pods,
        metrics,
        resource=resource,
        cpu_initialization_period=cpu_initialization_period,
        initial_readiness_delay=initial_readiness_delay,
        now=now,
    )
    kept = {
        name: metric
        for name, metric in metrics.items()
        if name not in groups.ignored and name not in groups.unready
    }
    if not kept:
        raise ReplicaCalcError(NO_METRICS_FOR_PODS)
    return groups, kept


def _direction_guards(
    *, current: int, ratio: float, new_ratio: float, count: int, tolerances: Tolerances
) -> int:
    """The re-computed proposal with upstream's two guards (reference §1.6)."""
    if tolerances.is_within(new_ratio) or (ratio < 1.0 < new_ratio) or (ratio > 1.0 > new_ratio):
        return current
    replicas = ceil_to_int32(new_ratio * count)
    if (new_ratio < 1.0 and replicas > current) or (new_ratio > 1.0 and replicas < current):
        return current  # count-direction guard (kubernetes#84142)
    return replicas


def resource_replicas(
    *,
    current: int,
    target_utilization: int,
    resource: str,
    container: str,
    tolerances: Tolerances,
    pods: Sequence[Pod],
    metrics: Mapping[str, PodMetric],
    cpu_initialization_period: timedelta,
    initial_readiness_delay: timedelta,
    now: datetime,
) -> ResourceReplicas:
    """``GetResourceReplicas`` after the fetch (reference §1.6)."""
    groups, kept = _active_metrics(
        pods,
        metrics,
        resource=resource,
        cpu_initialization_period=cpu_initialization_period,
        initial_readiness_delay=initial_readiness_delay,
        now=now,
    )
    requests = calculate_requests(pods, container=container, resource=resource)
    ratio, utilization, raw = resource_utilization_ratio(kept, requests, target_utilization)
    scale_up_with_unready = bool(groups.unready) and ratio > 1.0
    if not scale_up_with_unready and not groups.missing:
        replicas = (
            current if tolerances.is_within(ratio) else ceil_to_int32(ratio * groups.ready_count)
        )
        return ResourceReplicas(replicas=replicas, utilization=utilization, raw_average=raw)
    epoch = next(iter(kept.values()))
    if groups.missing:
        if ratio < 1.0:
            fallback = max(100, target_utilization)  # 100% of request, or the target if above
            for name in groups.missing:
                kept[name] = PodMetric(
                    value=requests.get(name, 0) * fallback // 100,
                    timestamp=epoch.timestamp,
                    window=epoch.window,
                )
        elif ratio > 1.0:
            for name in groups.missing:
                kept[name] = PodMetric(value=0, timestamp=epoch.timestamp, window=epoch.window)
    if scale_up_with_unready:
        for name in groups.unready:
            kept[name] = PodMetric(value=0, timestamp=epoch.timestamp, window=epoch.window)
    new_ratio, _, _ = resource_utilization_ratio(kept, requests, target_utilization)
    replicas = _direction_guards(
        current=current, ratio=ratio, new_ratio=new_ratio, count=len(kept), tolerances=tolerances
    )
    return ResourceReplicas(replicas=replicas, utilization=utilization, raw_average=raw)


def plain_metric_replicas(
    *,
    current: int,
    target_usage: int,
    resource: str,
    tolerances: Tolerances,
    pods: Sequence[Pod],
    metrics: Mapping[str, PodMetric],
    cpu_initialization_period: timedelta,
    initial_readiness_delay: timedelta,
    now: datetime,
) -> tuple[int, int]:
    """``calcPlainMetricReplicas``: (replicas, average usage milli).

    Pods metrics and Resource AverageValue targets. As the resource path, except that a missing
    pod counts as exactly ``target_usage`` on a scale-down, and readiness beyond Pending
    applies to ``cpu`` only (``resource`` is ``""`` for custom metrics).
    """
    groups, kept = _active_metrics(
        pods,
        metrics,
        resource=resource,
        cpu_initialization_period=cpu_initialization_period,
        initial_readiness_delay=initial_readiness_delay,
        now=now,
    )
    ratio, usage = metric_usage_ratio(kept, target_usage)
    scale_up_with_unready = bool(groups.unready) and ratio > 1.0
    if not scale_up_with_unready and not groups.missing:
        if tolerances.is_within(ratio):
            return current, usage
        return ceil_to_int32(ratio * groups.ready_count), usage
    epoch = next(iter(kept.values()))
    if groups.missing:
        if ratio < 1.0:
            for name in groups.missing:
                kept[name] = PodMetric(
                    value=target_usage, timestamp=epoch.timestamp, window=epoch.window
                )
        elif ratio > 1.0:
            for name in groups.missing:
                kept[name] = PodMetric(value=0, timestamp=epoch.timestamp, window=epoch.window)
    if scale_up_with_unready:
        for name in groups.unready:
            kept[name] = PodMetric(value=0, timestamp=epoch.timestamp, window=epoch.window)
    new_ratio, _ = metric_usage_ratio(kept, target_usage)
    replicas = _direction_guards(
        current=current, ratio=ratio, new_ratio=new_ratio, count=len(kept), tolerances=tolerances
    )
    return replicas, usage


def ready_pod_count(pods: Sequence[Pod]) -> int:
    """``getReadyPodsCount``: pods Running with Ready True; no pods at all is an error."""
    if not pods:
        raise ReplicaCalcError(f"unable to calculate ready pods: {NO_PODS}")
    return sum(1 for pod in pods if _phase(pod) == "Running" and is_pod_ready(pod))


def usage_ratio_replica_count(
    *, current: int, ratio: float, tolerances: Tolerances, pods: Sequence[Pod]
) -> int:
    """``getUsageRatioReplicaCount``: from zero, ``ceil(ratio)`` ignoring tolerance and pods."""
    if current != 0:
        if tolerances.is_within(ratio):
            return current
        return ceil_to_int32(ratio * ready_pod_count(pods))
    return ceil_to_int32(ratio)


def object_replicas(
    *,
    current: int,
    usage: int,
    target: int,
    tolerances: Tolerances,
    pods: Sequence[Pod],
) -> int:
    """``GetObjectMetricReplicas`` (target Value) after the fetch; ``current`` is spec.replicas."""
    return usage_ratio_replica_count(
        current=current, ratio=usage / target, tolerances=tolerances, pods=pods
    )


def _sum_capped(values: Iterable[int]) -> int:
    total = 0
    for value in values:
        total = min(MAX_INT64, total + value)
    return total


def external_replicas(
    *,
    current: int,
    values: Sequence[int],
    target: int,
    tolerances: Tolerances,
    pods: Sequence[Pod],
) -> tuple[int, int]:
    """``GetExternalMetricReplicas``: the series are summed; (replicas, usage)."""
    usage = _sum_capped(values)
    replicas = usage_ratio_replica_count(
        current=current, ratio=usage / target, tolerances=tolerances, pods=pods
    )
    return replicas, usage


def _per_pod(
    *, status_replicas: int, usage: int, target: int, tolerances: Tolerances
) -> tuple[int, int]:
    replicas = status_replicas
    ratio = usage / (target * status_replicas) if status_replicas else math.inf
    if not tolerances.is_within(ratio):
        replicas = ceil_to_int32(usage / target)
    average = math.ceil(usage / status_replicas) if status_replicas else 0
    return replicas, average


def object_per_pod_replicas(
    *, status_replicas: int, usage: int, target: int, tolerances: Tolerances
) -> tuple[int, int]:
    """``GetObjectPerPodMetricReplicas``: against ``status.replicas``, no readiness."""
    return _per_pod(
        status_replicas=status_replicas, usage=usage, target=target, tolerances=tolerances
    )


def external_per_pod_replicas(
    *, status_replicas: int, values: Sequence[int], target: int, tolerances: Tolerances
) -> tuple[int, int]:
    """``GetExternalPerPodMetricReplicas``: the summed series per ``status.replicas``."""
    return _per_pod(
        status_replicas=status_replicas,
        usage=_sum_capped(values),
        target=target,
        tolerances=tolerances,
    )
