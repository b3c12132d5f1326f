"""Upstream's ``descheduler_*`` metrics (``metrics/metrics.go``; reference §2 "Metrics").

* ``descheduler_build_info`` — gauge, 1, with the build's labels (``DeschedulerVersion``: the
  kubescale version, ``PythonVersion`` in place of Go's ``GoVersion``);
* ``descheduler_pods_evicted_total{result, strategy, profile, namespace, node}`` — one per
  eviction asked for; ``result`` is ``success``, ``error`` or a limit's error text;
* ``descheduler_loop_duration_seconds`` and the deprecated
  ``descheduler_descheduler_loop_duration_seconds`` — one cycle;
* ``descheduler_strategy_duration_seconds{strategy, profile}`` and the deprecated
  ``descheduler_descheduler_strategy_duration_seconds`` — one plugin's run.

Not exposed: the deprecated counter ``descheduler_pods_evicted`` — Prometheus' Python client
names the counter family ``descheduler_pods_evicted`` for ``descheduler_pods_evicted_total``,
so a second family of that name cannot sit next to it on one registry.
"""

from __future__ import annotations

import platform
from importlib import metadata

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from .descheduling_cycle import CycleReport

__all__ = ["DeschedulerMetrics"]

_LOOP_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0)
_STRATEGY_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0)


def _version() -> str:
    try:
        return metadata.version("kubescale")
    except metadata.PackageNotFoundError:
        return "unknown"


class DeschedulerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.build_info = Gauge(
            "descheduler_build_info",
            "Build info about descheduler, including Go version, Descheduler version, Git SHA, "
            "Git branch",
            ["DeschedulerVersion", "PythonVersion"],
            registry=registry,
        )
        self.build_info.labels(_version(), platform.python_version()).set(1)
        self.pods_evicted = Counter(
            "descheduler_pods_evicted_total",
            "Number of total evicted pods, by the result, by the strategy, by the namespace, by "
            "the node name. 'error' result means a pod could not be evicted",
            ["result", "strategy", "profile", "namespace", "node"],
            registry=registry,
        )
        self.loop_duration = Histogram(
            "descheduler_loop_duration_seconds",
            "Time taken to complete a full descheduling cycle",
            buckets=_LOOP_BUCKETS,
            registry=registry,
        )
        self.loop_duration_deprecated = Histogram(
            "descheduler_descheduler_loop_duration_seconds",
            "(Deprecated) Time taken to complete a full descheduling cycle",
            buckets=_LOOP_BUCKETS,
            registry=registry,
        )
        self.strategy_duration = Histogram(
            "descheduler_strategy_duration_seconds",
            "Time taken to complete Each strategy of the descheduling operation",
            ["strategy", "profile"],
            buckets=_STRATEGY_BUCKETS,
            registry=registry,
        )
        self.strategy_duration_deprecated = Histogram(
            "descheduler_descheduler_strategy_duration_seconds",
            "(Deprecated) Time taken to complete Each strategy of the descheduling operation",
            ["strategy", "profile"],
            buckets=_STRATEGY_BUCKETS,
            registry=registry,
        )

    def observe_cycle(self, report: CycleReport, seconds: float) -> None:
        for record in report.evictions:
            self.pods_evicted.labels(
                record.result.label, record.strategy, record.profile, record.namespace, record.node
            ).inc()
        for timing in report.strategies:
            self.strategy_duration.labels(timing.strategy, timing.profile).observe(timing.seconds)
            self.strategy_duration_deprecated.labels(timing.strategy, timing.profile).observe(
                timing.seconds
            )
        self.loop_duration.observe(seconds)
        self.loop_duration_deprecated.observe(seconds)
