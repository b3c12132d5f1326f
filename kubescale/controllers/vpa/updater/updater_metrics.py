"""The updater's Prometheus metrics, with upstream's names (``pkg/utils/metrics/updater``).

Counters and gauges are labelled ``vpa_size_log2`` (upstream's ``NewSizeLog2``: the base-2
logarithm of the VPA's number of controlled pods, rounded down); the failure counters add a
``reason``. ``vpa_updater_execution_latency_seconds{step}`` times the loop's steps with the
recommender's :class:`kubescale.controllers.vpa.recommender.recommender_metrics.ExecutionTimer`.
"""

from __future__ import annotations

import math

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["UpdaterMetrics", "size_log2"]

_LATENCY_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0)


def size_log2(pods: int) -> str:
    """``NewSizeLog2``: ``floor(log2(pods))``, 0 for an empty or one-pod VPA."""
    return str(int(math.log2(pods))) if pods > 0 else "0"


class UpdaterMetrics:
    """The updater's metrics on one registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.execution_latency = Histogram(
            "vpa_updater_execution_latency_seconds",
            "Time spent in various parts of VPA Updater main loop.",
            ["step"],
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self.evicted_pods = Counter(
            "vpa_updater_evicted_pods",
            "Number of Pods evicted by Updater to apply a new recommendation.",
            ["vpa_size_log2"],
            registry=registry,
        )
        self.failed_evictions = Counter(
            "vpa_updater_failed_eviction_attempts",
            "Number of failed attempts to update Pods by eviction",
            ["vpa_size_log2", "reason"],
            registry=registry,
        )
        self.in_place_updated_pods = Counter(
            "vpa_updater_in_place_updated_pods",
            "Number of Pods updated in-place by Updater to apply a new recommendation.",
            ["vpa_size_log2"],
            registry=registry,
        )
        self.failed_in_place_updates = Counter(
            "vpa_updater_failed_in_place_update_attempts",
            "Number of failed attempts to update Pods in-place.",
            ["vpa_size_log2", "reason"],
            registry=registry,
        )
        self.controlled_pods = Gauge(
            "vpa_updater_controlled_pods_count",
            "Number of Pods controlled by VPA updater.",
            ["vpa_size_log2"],
            registry=registry,
        )
        self.evictable_pods = Gauge(
            "vpa_updater_evictable_pods_count",
            "Number of Pods matching evicition criteria.",
            ["vpa_size_log2"],
            registry=registry,
        )
