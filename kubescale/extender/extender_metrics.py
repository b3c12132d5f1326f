"""The extender's Prometheus metrics (kubescale's own: upstream has no extender).

* ``kubescale_extender_requests_total{verb, result}`` — ``result`` ``ok``, ``error``,
  ``busy`` (refused at once: ``--extender-max-waiting-requests`` were already waiting) or
  ``unauthenticated`` (no client certificate issued by ``--extender-client-ca-file``'s CA);
* ``kubescale_extender_requests_waiting`` — requests waiting for their turn to compute;
* ``kubescale_extender_request_duration_seconds{verb}`` — time to answer, body read to JSON out;
* ``kubescale_extender_refused_nodes_total{reason}`` — nodes refused by the filter, by the
  descheduler strategy (or ``EvictionMemory``) that refused them;
* ``kubescale_extender_policy_fallbacks_total`` — filters where the policy would have refused
  every candidate and therefore refused none.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["ExtenderMetrics"]

_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class ExtenderMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "kubescale_extender_requests",
            "Scheduler extender requests answered, by verb and result.",
            ["verb", "result"],
            registry=registry,
        )
        self.waiting = Gauge(
            "kubescale_extender_requests_waiting",
            "Scheduler extender requests waiting for their turn to compute.",
            registry=registry,
        )
        self.duration = Histogram(
            "kubescale_extender_request_duration_seconds",
            "Time the scheduler extender took to answer, by verb.",
            ["verb"],
            buckets=_BUCKETS,
            registry=registry,
        )
        self.refused = Counter(
            "kubescale_extender_refused_nodes",
            "Nodes the extender's filter refused, by the rule that refused them.",
            ["reason"],
            registry=registry,
        )
        self.fallbacks = Counter(
            "kubescale_extender_policy_fallbacks",
            "Filters where the descheduler policy would have refused every candidate node.",
            registry=registry,
        )
