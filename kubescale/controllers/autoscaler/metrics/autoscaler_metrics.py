"""The cluster autoscaler's Prometheus metrics, with upstream's names (``pkg/metrics/metrics.go``).

All under the ``cluster_autoscaler_`` prefix (reference §5), with upstream's label names: the
scale-down counter keeps upstream's GPU labels (always empty here, kubescale does not model
GPUs) so dashboards written for upstream keep working. kubescale's own series (consolidation)
are ``kubescale_cluster_autoscaler_*``.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["AutoscalerMetrics"]

_NS = "cluster_autoscaler"
_DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 2.5, 5.0, 7.5, 10.0, 12.5, 15.0, 30.0, 60.0)


class AutoscalerMetrics:
    """The metrics on one registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

        def gauge(name: str, text: str, labels: tuple[str, ...] = ()) -> Gauge:
            return Gauge(name, text, list(labels), namespace=_NS, registry=registry)

        def counter(name: str, text: str, labels: tuple[str, ...] = ()) -> Counter:
            return Counter(name, text, list(labels), namespace=_NS, registry=registry)

        self.cluster_safe_to_autoscale = gauge(
            "cluster_safe_to_autoscale", "Whether or not cluster is healthy enough for autoscaling."
        )
        self.nodes_count = gauge("nodes_count", "Number of nodes in cluster.", ("state",))
        self.node_groups_count = gauge(
            "node_groups_count", "Number of node groups managed by CA.", ("node_group_type",)
        )
        self.unschedulable_pods_count = gauge(
            "unschedulable_pods_count", "Number of unschedulable pods in the cluster.", ("type",)
        )
        self.max_nodes_count = gauge(
            "max_nodes_count", "Maximum number of nodes in all node groups"
        )
        self.cluster_cpu_current_cores = gauge(
            "cluster_cpu_current_cores",
            "Current number of cores in the cluster, minus deleting nodes.",
        )
        self.cluster_memory_current_bytes = gauge(
            "cluster_memory_current_bytes",
            "Current number of bytes of memory in the cluster, minus deleting nodes.",
        )
        self.cpu_limits_cores = gauge(
            "cpu_limits_cores",
            "Minimum and maximum number of cores in the cluster.",
            ("direction",),
        )
        self.memory_limits_bytes = gauge(
            "memory_limits_bytes",
            "Minimum and maximum number of bytes of memory in cluster.",
            ("direction",),
        )
        self.node_group_min_count = gauge(
            "node_group_min_count", "Minimum number of nodes in the node group", ("node_group",)
        )
        self.node_group_max_count = gauge(
            "node_group_max_count", "Maximum number of nodes in the node group", ("node_group",)
        )
        self.node_group_target_count = gauge(
            "node_group_target_count",
            "Target number of nodes in the node group by CA.",
            ("node_group",),
        )
        self.node_group_healthiness = gauge(
            "node_group_healthiness",
            "Whether or not node group is healthy enough for autoscaling. 1 if it is, 0 otherwise.",
            ("node_group",),
        )
        self.node_group_backoff_status = gauge(
            "node_group_backoff_status",
            "Whether or not node group is backoff for not autoscaling. 1 if it is, 0 otherwise.",
            ("node_group", "reason"),
        )
        self.last_activity = gauge(
            "last_activity", "Last time certain part of CA logic executed.", ("activity",)
        )
        self.function_duration_seconds = Histogram(
            "function_duration_seconds",
            "Time taken by various parts of CA main loop.",
            ["function"],
            namespace=_NS,
            buckets=_DURATION_BUCKETS,
            registry=registry,
        )
        self.pending_node_deletions = gauge(
            "pending_node_deletions",
            "Number of nodes that haven't been removed or aborted after finished scale-down phase.",
        )
        self.errors_total = counter(
            "errors_total", "The number of CA loops failed due to an error.", ("type",)
        )
        self.scaled_up_nodes_total = counter(
            "scaled_up_nodes_total", "Number of nodes added by CA."
        )
        self.failed_scale_ups_total = counter(
            "failed_scale_ups_total",
            "Number of times scale-up operation has failed.",
            ("reason",),
        )
        self.scaled_down_nodes_total = counter(
            "scaled_down_nodes_total",
            "Number of nodes removed by CA.",
            ("reason", "gpu_resource_name", "gpu_name"),
        )
        self.evicted_pods_total = counter(
            "evicted_pods_total", "Number of pods evicted by CA", ("eviction_result",)
        )
        self.unneeded_nodes_count = gauge(
            "unneeded_nodes_count", "Number of nodes currently considered unneeded by CA."
        )
        self.unremovable_nodes_count = gauge(
            "unremovable_nodes_count",
            "Number of nodes currently considered unremovable by CA.",
            ("reason",),
        )
        self.scale_down_in_cooldown = gauge(
            "scale_down_in_cooldown",
            "Whether or not the scale down is in cooldown. 1 if its, 0 otherwise.",
        )
        # upstream's counters without the _total suffix: gauges that only go up, so that the
        # exposed names are upstream's exactly (prometheus_client appends _total to counters)
        self.old_unregistered_nodes_removed_count = gauge(
            "old_unregistered_nodes_removed_count",
            "Number of unregistered nodes removed by CA.",
        )
        self.skipped_scale_events_count = gauge(
            "skipped_scale_events_count",
            "Count of scaling events that the CA has chosen to skip.",
            ("direction", "reason"),
        )
        self.consolidation_actions_total = Counter(
            "kubescale_cluster_autoscaler_consolidation_actions_total",
            "Consolidation commands carried out, by method (Empty, Delete, Replace).",
            ["method"],
            registry=registry,
        )
        self.consolidation_savings = Gauge(
            "kubescale_cluster_autoscaler_consolidation_savings_per_hour",
            "Price per hour saved by the consolidation commands carried out so far.",
            registry=registry,
        )
