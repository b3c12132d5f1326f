"""The recommender's metrics, under upstream's names (``pkg/utils/metrics/recommender``).

* ``vpa_recommender_vpa_objects_count{update_mode,has_recommendation,api,matches_pods,
  unsupported_config}`` — gauge, VPAs per bucket after each ``UpdateVPAs``; every combination
  of the known modes is reset to 0 first, so stale buckets drop to zero (``ObjectCounter``).
  An unset mode counts as ``Auto``, as upstream's counter does; ``api`` is the object's version.
* ``vpa_recommender_recommendation_latency_seconds`` — histogram, from a VPA's creation to its
  first recommendation (upstream's buckets).
* ``vpa_recommender_execution_latency_seconds{step}`` — histogram of each ``RunOnce`` step
  (``LoadVPAs``, ``LoadPods``, ``LoadMetrics``, ``UpdateVPAs``, ``MaintainCheckpoints``,
  ``GarbageCollect``) and ``total``; buckets 1 ms × 2^k, 15 of them.
* ``vpa_recommender_aggregate_container_states_count`` — gauge, aggregates tracked.
* ``vpa_recommender_metric_server_responses{is_error,client_name}`` — count of PodMetrics
  queries. Upstream's is a counter named without ``_total``; prometheus_client would append
  one, so it is exposed as an untyped family under the exact name (like the Prometheus
  client's request counter of :mod:`kubescale.prometheus.query_api`).

Step latencies measure our own code, so they read a real timer (``time.perf_counter``), the one
exception to "time comes from the clock" (as the loop runner's latency histogram does).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Final

from prometheus_client import CollectorRegistry, Gauge, Histogram
from prometheus_client.metrics_core import Metric, UnknownMetricFamily
from prometheus_client.registry import Collector

__all__ = [
    "DEFAULT_METRICS_CLIENT",
    "ExecutionTimer",
    "ObjectCounter",
    "RecommenderMetrics",
]

DEFAULT_METRICS_CLIENT: Final = "default-metrics-client"
"""The ``client_name`` upstream's recommender gives its metrics.k8s.io client."""
_MODES: Final = ("Off", "Initial", "Recreate", "Auto", "InPlaceOrRecreate")
_API_VERSIONS: Final = ("v1beta1", "v1beta2", "v1")
_LATENCY_BUCKETS: Final = tuple(0.001 * 2**k for k in range(15))
_RECOMMENDATION_LATENCY_BUCKETS: Final = (
    1.0, 2.0, 5.0, 7.5, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 90.0, 120.0, 150.0, 180.0, 240.0,
    300.0, 600.0, 900.0, 1800.0,
)  # fmt: skip

_Bucket = tuple[str, str, str, str, str]


def _flag(value: bool) -> str:
    return "true" if value else "false"


class _ResponseCounts(Collector):
    """``metric_server_responses`` with upstream's exact name (see the module docstring)."""

    NAME: Final = "vpa_recommender_metric_server_responses"

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str], int] = {}

    def inc(self, *, is_error: bool, client_name: str) -> None:
        key = (_flag(is_error), client_name)
        self._counts[key] = self._counts.get(key, 0) + 1

    def value(self, *, is_error: bool, client_name: str) -> int:
        return self._counts.get((_flag(is_error), client_name), 0)

    def collect(self) -> Iterable[Metric]:
        family = UnknownMetricFamily(
            self.NAME,
            "Count of responses to queries to metrics server",
            labels=["is_error", "client_name"],
        )
        for labels, count in sorted(self._counts.items()):
            family.add_metric(list(labels), count)
        yield family


class RecommenderMetrics:
    """The recommender's metrics on one registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.vpa_objects = Gauge(
            "vpa_recommender_vpa_objects_count",
            "Number of VPA objects present in the cluster.",
            ["update_mode", "has_recommendation", "api", "matches_pods", "unsupported_config"],
            registry=registry,
        )
        self.recommendation_latency = Histogram(
            "vpa_recommender_recommendation_latency_seconds",
            "Time elapsed from creating a valid VPA configuration to the first recommendation.",
            buckets=_RECOMMENDATION_LATENCY_BUCKETS,
            registry=registry,
        )
        self.execution_latency = Histogram(
            "vpa_recommender_execution_latency_seconds",
            "Time spent in various parts of VPA Recommender main loop.",
            ["step"],
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self.aggregate_states = Gauge(
            "vpa_recommender_aggregate_container_states_count",
            "Number of aggregate container states being tracked by the recommender",
            registry=registry,
        )
        self.metric_server_responses = _ResponseCounts()
        registry.register(self.metric_server_responses)

    def record_metrics_server_response(
        self, *, error: bool, client_name: str = DEFAULT_METRICS_CLIENT
    ) -> None:
        self.metric_server_responses.inc(is_error=error, client_name=client_name)


class ObjectCounter:
    """Upstream's ``ObjectCounter``: VPAs per bucket, published in one go."""

    def __init__(self) -> None:
        self._counts: dict[_Bucket, int] = {
            (mode, has, api, matches, unsupported): 0
            for mode in _MODES
            for has in ("false", "true")
            for api in _API_VERSIONS
            for matches in ("false", "true")
            for unsupported in ("false", "true")
        }

    def add(
        self,
        *,
        update_mode: str | None,
        has_recommendation: bool,
        api_version: str,
        matches_pods: bool,
        unsupported_config: bool,
    ) -> None:
        bucket = (
            update_mode or "Auto",
            _flag(has_recommendation),
            api_version,
            _flag(matches_pods),
            _flag(unsupported_config),
        )
        self._counts[bucket] = self._counts.get(bucket, 0) + 1

    def observe(self, gauge: Gauge) -> None:
        for labels, count in self._counts.items():
            gauge.labels(*labels).set(count)


class ExecutionTimer:
    """``metrics.ExecutionTimer``: per-step latencies since the previous step, and the total."""

    def __init__(
        self, histogram: Histogram, *, timer: Callable[[], float] = time.perf_counter
    ) -> None:
        self._histogram = histogram
        self._timer = timer
        self._start = self._last = timer()

    def observe_step(self, step: str) -> None:
        now = self._timer()
        self._histogram.labels(step).observe(now - self._last)
        self._last = now

    def observe_total(self) -> None:
        self._histogram.labels("total").observe(self._timer() - self._start)
