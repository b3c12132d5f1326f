"""``LowNodeUtilizationArgs`` and ``HighNodeUtilizationArgs`` (``nodeutilization/types.go``,
``validation.go``; reference §1a).

Thresholds are percentages per resource name (``cpu``, ``memory``, ``pods``, any extended
resource, or ``MetricResource`` for a Prometheus query), each in [0, 100]; they are floats, as
upstream's ``api.Percentage`` (a float64).

LowNodeUtilization: ``thresholds`` and ``targetThresholds`` are required, name the same
resources, and ``thresholds[r] <= targetThresholds[r]`` unless ``useDeviationThresholds``;
``numberOfNodes`` (0), ``evictableNamespaces`` (exclude only), ``evictionLimits.node``,
``metricsUtilization``: ``source`` ``KubernetesMetrics`` (or the deprecated ``metricsServer:
true``) takes node usage from metrics.k8s.io; ``Prometheus`` needs ``prometheus.query`` and
thresholds naming ``MetricResource`` only. ``MetricResource`` is refused anywhere else.

HighNodeUtilization: ``thresholds`` (required; the high threshold is 100% of every named
resource), ``numberOfNodes`` (0), ``evictionModes`` (``OnlyThresholdingResources``: only pods
requesting one of the threshold resources), ``evictableNamespaces`` (exclude only).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from kubescale.scheduling.utilization_math import METRIC_RESOURCE

from .common_args import ALL_NAMESPACES, Namespaces, read_namespaces
from .fields import Fields, fail

__all__ = [
    "KUBERNETES_METRICS",
    "METRIC_RESOURCE",
    "PROMETHEUS_METRICS",
    "HighNodeUtilizationArgs",
    "LowNodeUtilizationArgs",
    "MetricsUtilization",
    "read_high_node_utilization_args",
    "read_low_node_utilization_args",
]

KUBERNETES_METRICS: Final = "KubernetesMetrics"
PROMETHEUS_METRICS: Final = "Prometheus"
ONLY_THRESHOLDING_RESOURCES: Final = "OnlyThresholdingResources"
MIN_PERCENTAGE: Final = 0.0
MAX_PERCENTAGE: Final = 100.0


@dataclass(frozen=True, kw_only=True)
class MetricsUtilization:
    source: str
    """``KubernetesMetrics`` or ``Prometheus``."""
    prometheus_query: str = ""


@dataclass(frozen=True, kw_only=True)
class LowNodeUtilizationArgs:
    thresholds: Mapping[str, float]
    target_thresholds: Mapping[str, float]
    use_deviation_thresholds: bool = False
    number_of_nodes: int = 0
    evictable_namespaces: Namespaces = ALL_NAMESPACES
    eviction_limit_node: int | None = None
    metrics: MetricsUtilization | None = None


@dataclass(frozen=True, kw_only=True)
class HighNodeUtilizationArgs:
    thresholds: Mapping[str, float]
    number_of_nodes: int = 0
    eviction_modes: tuple[str, ...] = ()
    evictable_namespaces: Namespaces = ALL_NAMESPACES
    target_thresholds: Mapping[str, float] = field(default_factory=dict)
    """Filled with 100% per threshold resource (upstream sets the high threshold to 100)."""


def _thresholds(fields: Fields, key: str) -> dict[str, float]:
    obj = fields.raw(key)
    if obj is None or obj == {}:
        fail(fields.at(key), "no resource threshold is configured")
    if not isinstance(obj, Mapping):
        fail(fields.at(key), "must be an object of resource name to percentage")
    result: dict[str, float] = {}
    for name, value in obj.items():
        where = f"{fields.at(key)}.{name}"
        if isinstance(value, bool) or not isinstance(value, int | float):
            fail(where, "must be a number (a percentage)")
        percent = float(value)
        if not MIN_PERCENTAGE <= percent <= MAX_PERCENTAGE:
            fail(where, f"{value} is not in [0, 100]")
        result[str(name)] = percent
    return result


def _metrics(fields: Fields, low: Mapping[str, float]) -> MetricsUtilization | None:
    obj = fields.object("metricsUtilization", ("metricsServer", "source", "prometheus"))
    if obj is None:
        if METRIC_RESOURCE in low:
            fail(
                fields.at("thresholds"),
                f"{METRIC_RESOURCE} needs metricsUtilization.source {PROMETHEUS_METRICS}",
            )
        return None
    source = obj.text("source")
    if obj.flag("metricsServer"):
        if source and source != KUBERNETES_METRICS:
            fail(obj.at("source"), "metricsServer (deprecated) and source name different sources")
        source = KUBERNETES_METRICS
    if source not in (KUBERNETES_METRICS, PROMETHEUS_METRICS):
        fail(
            obj.at("source"),
            f"{source!r} is not {KUBERNETES_METRICS} or {PROMETHEUS_METRICS}"
            if source
            else "metrics source is empty",
        )
    prometheus = obj.object("prometheus", ("query",))
    if source == KUBERNETES_METRICS:
        if prometheus is not None:
            fail(obj.at("prometheus"), f"is only used with source {PROMETHEUS_METRICS}")
        if METRIC_RESOURCE in low:
            fail(fields.at("thresholds"), f"{METRIC_RESOURCE} is only used with Prometheus")
        return MetricsUtilization(source=source)
    if prometheus is None:
        fail(obj.at("prometheus"), "prometheus property is missing")
    query = prometheus.text("query")
    if not query:
        fail(prometheus.at("query"), "prometheus query is missing")
    if sorted(low) != [METRIC_RESOURCE]:
        fail(
            fields.at("thresholds"),
            f"expected to specify a single instance of {METRIC_RESOURCE!r} resource, "
            f"got {sorted(low)} instead",
        )
    return MetricsUtilization(source=source, prometheus_query=query)


def read_low_node_utilization_args(raw: object, path: str) -> LowNodeUtilizationArgs:
    fields = Fields(
        raw,
        path,
        (
            "thresholds",
            "targetThresholds",
            "useDeviationThresholds",
            "numberOfNodes",
            "evictableNamespaces",
            "evictionLimits",
            "metricsUtilization",
        ),
    )
    low = _thresholds(fields, "thresholds")
    high = _thresholds(fields, "targetThresholds")
    deviation = fields.flag("useDeviationThresholds")
    if set(low) != set(high):
        fail(
            fields.at("targetThresholds"),
            "thresholds and targetThresholds configured different resources",
        )
    for name, value in low.items():
        if value > high[name] and not deviation:
            fail(
                f"{fields.at('thresholds')}.{name}",
                f"thresholds' {name} percentage is greater than targetThresholds'",
            )
    metrics = _metrics(fields, low)
    limits = fields.object("evictionLimits", ("node",))
    return LowNodeUtilizationArgs(
        thresholds=low,
        target_thresholds=high,
        use_deviation_thresholds=deviation,
        number_of_nodes=fields.integer("numberOfNodes", 0, minimum=0),
        evictable_namespaces=read_namespaces(fields, "evictableNamespaces", exclude_only=True),
        eviction_limit_node=limits.optional_integer("node", minimum=0) if limits else None,
        metrics=metrics,
    )


def read_high_node_utilization_args(raw: object, path: str) -> HighNodeUtilizationArgs:
    fields = Fields(
        raw, path, ("thresholds", "numberOfNodes", "evictionModes", "evictableNamespaces")
    )
    thresholds = _thresholds(fields, "thresholds")
    if METRIC_RESOURCE in thresholds:
        fail(f"{fields.at('thresholds')}.{METRIC_RESOURCE}", "is only used by LowNodeUtilization")
    modes = fields.strings("evictionModes") or ()
    for index, mode in enumerate(modes):
        if mode != ONLY_THRESHOLDING_RESOURCES:
            fail(f"{fields.at('evictionModes')}[{index}]", f"invalid eviction mode {mode}")
    return HighNodeUtilizationArgs(
        thresholds=thresholds,
        number_of_nodes=fields.integer("numberOfNodes", 0, minimum=0),
        eviction_modes=modes,
        evictable_namespaces=read_namespaces(fields, "evictableNamespaces", exclude_only=True),
        target_thresholds=dict.fromkeys(thresholds, MAX_PERCENTAGE),
    )
