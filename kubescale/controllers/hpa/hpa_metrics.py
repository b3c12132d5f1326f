"""The HPA controller's Prometheus metrics with upstream's names (``monitor/metrics.go``, §6).

Subsystem ``horizontal_pod_autoscaler_controller``:

* ``reconciliations_total{action,error}`` and ``reconciliation_duration_seconds{action,error}``
  — ``action`` is the rescale done (``scale_up``, ``scale_down``, ``none``), ``error`` is
  ``none``, ``spec`` (the HPA's own spec is wrong) or ``internal``;
* ``metric_computation_total{action,error,metric_type}`` and
  ``metric_computation_duration_seconds{...}`` — per metric, ``action`` compares its proposal
  with ``status.currentReplicas``;
* ``num_horizontal_pod_autoscalers`` and ``desired_replicas{namespace,hpa_name}`` (gauges).

Durations are measured on the injected clock's monotonic time. Buckets: ``0.001 × 2^k``,
15 of them.
"""

from __future__ import annotations

from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["HpaMetrics", "action_label"]

_SUBSYSTEM: Final = "horizontal_pod_autoscaler_controller"
_BUCKETS: Final = tuple(0.001 * 2**k for k in range(15))


def action_label(previous: int, new: int) -> str:
    if new > previous:
        return "scale_up"
    if new < previous:
        return "scale_down"
    return "none"


class HpaMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.reconciliations = Counter(
            f"{_SUBSYSTEM}_reconciliations",
            "Number of reconciliations of HPA controller. The label 'action' should be either "
            "'scale_down', 'scale_up', or 'none'. Also, the label 'error' should be either "
            "'spec', 'internal', or 'none'. Note that if both spec and internal errors happen "
            "during a reconciliation, the first one to occur is reported in `error` label.",
            ["action", "error"],
            registry=registry,
        )
        self.reconciliation_duration = Histogram(
            f"{_SUBSYSTEM}_reconciliation_duration_seconds",
            "The time(seconds) that the HPA controller takes to reconcile once. The label "
            "'action' should be either 'scale_down', 'scale_up', or 'none'. Also, the label "
            "'error' should be either 'spec', 'internal', or 'none'. Note that if both spec and "
            "internal errors happen during a reconciliation, the first one to occur is reported "
            "in `error` label.",
            ["action", "error"],
            buckets=_BUCKETS,
            registry=registry,
        )
        self.metric_computation = Counter(
            f"{_SUBSYSTEM}_metric_computation",
            "Number of metric computations. The label 'action' should be either 'scale_down', "
            "'scale_up', or 'none'. Also, the label 'error' should be either 'spec', "
            "'internal', or 'none'. The label 'metric_type' corresponds to "
            "HPA.spec.metrics[*].type",
            ["action", "error", "metric_type"],
            registry=registry,
        )
        self.metric_computation_duration = Histogram(
            f"{_SUBSYSTEM}_metric_computation_duration_seconds",
            "The time(seconds) that the HPA controller takes to calculate one metric. The label "
            "'action' should be either 'scale_down', 'scale_up', or 'none'. The label 'error' "
            "should be either 'spec', 'internal', or 'none'. The label 'metric_type' "
            "corresponds to HPA.spec.metrics[*].type",
            ["action", "error", "metric_type"],
            buckets=_BUCKETS,
            registry=registry,
        )
        self.num_hpas = Gauge(
            f"{_SUBSYSTEM}_num_horizontal_pod_autoscalers",
            "Current number of controlled HPA objects.",
            registry=registry,
        )
        self.desired_replicas = Gauge(
            f"{_SUBSYSTEM}_desired_replicas",
            "Current desired replica count of HPA objects.",
            ["namespace", "hpa_name"],
            registry=registry,
        )
