"""The cluster autoscaler's settings, built from its flags (declared in :mod:`.autoscaler_flags`).

Names and defaults are upstream cluster-autoscaler's (``pkg/config/flags/flags.go``,
``pkg/config/const.go``, reference §1-§3): ``--scan-interval 10s``, ``--expander least-waste``,
``--max-nodes-total 0``, ``--cores-total 0:320000``, ``--memory-total 0:6400000`` (GiB),
``--max-node-provision-time 15m``, ``--ok-total-unready-count 3``,
``--max-total-unready-percentage 45``, ``--new-pod-scale-up-delay 0s``,
``--expendable-pods-priority-cutoff -10``, the backoff trio (5m / 30m / 3h), the scale-down
flags of §3.1 and the balancing flags of §2.5. A value that parses but makes no sense raises
:class:`AutoscalerConfigError` naming the flag.

kubescale's additions, all off unless asked for:

* ``--cluster-autoscaler auto|true|false`` — whether ``serve`` runs the loop (``auto``: in a
  cluster or with ``--kubeconfig``, like ``--vpa-updater``);
* ``--consolidation Off|WhenEmpty|WhenEmptyOrUnderutilized``, ``--consolidate-after`` (0s),
  ``--consolidation-budgets`` (``nodes=10%``), ``--consolidation-validation-delay`` (15s) —
  Karpenter's consolidation (:mod:`kubescale.controllers.autoscaler.scaledown.consolidation`);
* ``--scale-down-candidates-order utilization|disruption-cost`` — which removable node goes
  first (:mod:`kubescale.controllers.autoscaler.scaledown.disruption_cost`).

Not provided: upstream's own leader-election, kubeconfig and metrics-address flags (``serve``
has one of each), cloud providers other than ``clusterapi``, autoprovisioning, GPUs/DRA/CSI.
"""

from __future__ import annotations

import argparse
import re
from datetime import timedelta
from typing import Final, cast

from kubescale.controllers.autoscaler.config.autoscaler_settings import (
    DEFAULT_STATUS_CONFIG_MAP_NAME,
    GIB,
    AutoDiscoverySpec,
    AutoscalerConfigError,
    AutoscalerMode,
    AutoscalerSettings,
    CandidatesOrder,
    ConsolidationPolicy,
    ConsolidationSettings,
    NodeGroupDefaults,
    ResourceRange,
)
from kubescale.controllers.autoscaler.config.disruption_budgets import (
    DisruptionBudgetError,
    parse_budgets,
)

__all__ = [
    "DEFAULT_STATUS_CONFIG_MAP_NAME",
    "EXPANDER_NAMES",
    "GIB",
    "AutoDiscoverySpec",
    "AutoscalerConfigError",
    "AutoscalerMode",
    "AutoscalerSettings",
    "CandidatesOrder",
    "ConsolidationPolicy",
    "ConsolidationSettings",
    "NodeGroupDefaults",
    "ResourceRange",
    "autoscaler_settings_from_args",
    "parse_auto_discovery",
    "parse_resource_range",
]

EXPANDER_NAMES: Final = ("random", "most-pods", "least-waste", "least-nodes", "price", "priority")
_STRATEGY_EXPANDERS: Final = frozenset({"random"})
"""Expanders that always return one option: only allowed last in a chain."""


# ------------------------------------------------------------------------------ parsing


def parse_resource_range(flag: str, text: str, *, unit: int = 1) -> ResourceRange:
    """``<min>:<max>`` (both integers, ``min <= max``), scaled by ``unit``."""
    parts = text.split(":")
    if len(parts) != 2:
        raise AutoscalerConfigError(f"{flag}: want <min>:<max>, got {text!r}")
    try:
        low, high = int(parts[0]), int(parts[1])
    except ValueError:
        raise AutoscalerConfigError(f"{flag}: want integers <min>:<max>, got {text!r}") from None
    if low < 0 or high < low:
        raise AutoscalerConfigError(f"{flag}: need 0 <= min <= max, got {text!r}")
    return ResourceRange(min=low * unit, max=high * unit)


def parse_auto_discovery(text: str) -> AutoDiscoverySpec:
    """``clusterapi:namespace=X,clusterName=Y,<label>=<value>`` (clusterapi's discoverer)."""
    kind, sep, rest = text.partition(":")
    if kind != "clusterapi" or not sep:
        raise AutoscalerConfigError(
            f"--node-group-auto-discovery: unsupported discoverer {text!r} "
            "(want clusterapi:<key>=<value>,...)"
        )
    namespace = cluster = ""
    labels: dict[str, str] = {}
    for item in filter(None, rest.split(",")):
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise AutoscalerConfigError(
                f"--node-group-auto-discovery: {item!r} is not <key>=<value> in {text!r}"
            )
        if key == "namespace":
            namespace = value
        elif key == "clusterName":
            cluster = value
        else:
            labels[key] = value
    return AutoDiscoverySpec(namespace=namespace, cluster_name=cluster, labels=labels)


def parse_expander(text: str) -> tuple[str, ...]:
    """A comma-separated chain; a single-result strategy (``random``) only last."""
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if not names:
        raise AutoscalerConfigError("--expander: empty")
    for index, name in enumerate(names):
        if name not in EXPANDER_NAMES:
            raise AutoscalerConfigError(
                f"--expander: unknown expander {name!r} (one of {', '.join(EXPANDER_NAMES)})"
            )
        if name in _STRATEGY_EXPANDERS and index != len(names) - 1:
            raise AutoscalerConfigError(
                f"--expander: {name!r} picks a single option and must be last in {text!r}"
            )
    return names


_TAINT_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)


def _ratio(flag: str, value: float, *, high: float = 1.0) -> float:
    if not 0.0 <= value <= high:
        raise AutoscalerConfigError(f"{flag} must be in [0, {high:g}], got {value}")
    return float(value)


def _at_least(flag: str, value: int, low: int) -> int:
    if value < low:
        raise AutoscalerConfigError(f"{flag} must be >= {low}, got {value}")
    return int(value)


def _taint_keys(flag: str, keys: list[str]) -> tuple[str, ...]:
    for key in keys:
        if not _TAINT_KEY.match(key):
            raise AutoscalerConfigError(f"{flag}: {key!r} is not a valid taint key")
    return tuple(keys)


def autoscaler_settings_from_args(args: argparse.Namespace) -> AutoscalerSettings:
    """Validate the flags declared by :func:`add_autoscaler_arguments`."""
    if args.cloud_provider not in ("", "clusterapi"):
        raise AutoscalerConfigError(
            f"--cloud-provider: {args.cloud_provider!r} is not provided (only clusterapi)"
        )
    configured = bool(args.cloud_provider or args.node_group_auto_discovery)
    if args.scan_interval <= 0:
        raise AutoscalerConfigError("--scan-interval must be > 0")
    try:
        budgets = parse_budgets(args.consolidation_budgets)
    except DisruptionBudgetError as err:
        raise AutoscalerConfigError(f"--consolidation-budgets: {err}") from None
    defaults = NodeGroupDefaults(
        scale_down_utilization_threshold=_ratio(
            "--scale-down-utilization-threshold", args.scale_down_utilization_threshold
        ),
        scale_down_gpu_utilization_threshold=_ratio(
            "--scale-down-gpu-utilization-threshold", args.scale_down_gpu_utilization_threshold
        ),
        scale_down_unneeded_time=timedelta(seconds=args.scale_down_unneeded_time),
        scale_down_unready_time=timedelta(seconds=args.scale_down_unready_time),
        max_node_provision_time=timedelta(seconds=args.max_node_provision_time),
        max_node_startup_time=timedelta(seconds=args.max_node_startup_time),
        ignore_daemonsets_utilization=bool(args.ignore_daemonsets_utilization),
    )
    initial_backoff = timedelta(seconds=args.initial_node_group_backoff_duration)
    max_backoff = timedelta(seconds=args.max_node_group_backoff_duration)
    if max_backoff < initial_backoff:
        raise AutoscalerConfigError(
            "--max-node-group-backoff-duration must be >= --initial-node-group-backoff-duration"
        )
    return AutoscalerSettings(
        mode=cast(
            AutoscalerMode,
            "false"
            if args.cluster_autoscaler == "auto" and not configured
            else args.cluster_autoscaler,
        ),
        auto_off_reason=(
            "no --cloud-provider and no --node-group-auto-discovery"
            if args.cluster_autoscaler == "auto" and not configured
            else None
        ),
        scan_interval=float(args.scan_interval),
        dry_run=bool(args.dry_run),
        cloud_provider="clusterapi",
        auto_discovery=tuple(parse_auto_discovery(s) for s in args.node_group_auto_discovery),
        namespace=str(args.namespace),
        write_status_configmap=bool(args.write_status_configmap),
        status_config_map_name=str(args.status_config_map_name),
        max_nodes_total=_at_least("--max-nodes-total", args.max_nodes_total, 0),
        cores_total=parse_resource_range("--cores-total", args.cores_total),
        memory_total=parse_resource_range("--memory-total", args.memory_total, unit=GIB),
        expander=parse_expander(args.expander),
        balance_similar_node_groups=bool(args.balance_similar_node_groups),
        balancing_ignore_labels=tuple(args.balancing_ignore_label),
        balancing_labels=tuple(args.balancing_label),
        memory_difference_ratio=_ratio("--memory-difference-ratio", args.memory_difference_ratio),
        max_allocatable_difference_ratio=_ratio(
            "--max-allocatable-difference-ratio", args.max_allocatable_difference_ratio
        ),
        max_free_difference_ratio=_ratio(
            "--max-free-difference-ratio", args.max_free_difference_ratio
        ),
        max_nodes_per_scaleup=_at_least("--max-nodes-per-scaleup", args.max_nodes_per_scaleup, 0),
        max_nodegroup_binpacking_duration=timedelta(seconds=args.max_nodegroup_binpacking_duration),
        new_pod_scale_up_delay=timedelta(seconds=args.new_pod_scale_up_delay),
        expendable_pods_priority_cutoff=int(args.expendable_pods_priority_cutoff),
        scale_up_from_zero=bool(args.scale_up_from_zero),
        enforce_node_group_min_size=bool(args.enforce_node_group_min_size),
        ok_total_unready_count=_at_least(
            "--ok-total-unready-count", args.ok_total_unready_count, 0
        ),
        max_total_unready_percentage=_ratio(
            "--max-total-unready-percentage", args.max_total_unready_percentage, high=100.0
        ),
        initial_node_group_backoff_duration=initial_backoff,
        max_node_group_backoff_duration=max_backoff,
        node_group_backoff_reset_timeout=timedelta(seconds=args.node_group_backoff_reset_timeout),
        force_delete_unregistered_nodes=bool(args.force_delete_unregistered_nodes),
        startup_taints=_taint_keys("--startup-taint", args.startup_taint),
        status_taints=_taint_keys("--status-taint", args.status_taint),
        scale_down_enabled=bool(args.scale_down_enabled),
        scale_down_delay_after_add=timedelta(seconds=args.scale_down_delay_after_add),
        scale_down_delay_after_delete=timedelta(seconds=args.scale_down_delay_after_delete),
        scale_down_delay_after_failure=timedelta(seconds=args.scale_down_delay_after_failure),
        scale_down_unready_enabled=bool(args.scale_down_unready_enabled),
        max_scale_down_parallelism=_at_least(
            "--max-scale-down-parallelism", args.max_scale_down_parallelism, 1
        ),
        max_drain_parallelism=_at_least("--max-drain-parallelism", args.max_drain_parallelism, 1),
        unremovable_node_recheck_timeout=timedelta(seconds=args.unremovable_node_recheck_timeout),
        skip_nodes_with_system_pods=bool(args.skip_nodes_with_system_pods),
        skip_nodes_with_local_storage=bool(args.skip_nodes_with_local_storage),
        skip_nodes_with_custom_controller_pods=bool(args.skip_nodes_with_custom_controller_pods),
        min_replica_count=_at_least("--min-replica-count", args.min_replica_count, 0),
        blocking_system_pod_distruption_timeout=timedelta(
            seconds=args.blocking_system_pod_distruption_timeout
        ),
        max_graceful_termination_sec=_at_least(
            "--max-graceful-termination-sec", args.max_graceful_termination_sec, 0
        ),
        max_pod_eviction_time=timedelta(seconds=args.max_pod_eviction_time),
        node_delete_delay_after_taint=timedelta(seconds=args.node_delete_delay_after_taint),
        cordon_node_before_terminating=bool(args.cordon_node_before_terminating),
        daemonset_eviction_for_empty_nodes=bool(args.daemonset_eviction_for_empty_nodes),
        daemonset_eviction_for_occupied_nodes=bool(args.daemonset_eviction_for_occupied_nodes),
        ignore_mirror_pods_utilization=bool(args.ignore_mirror_pods_utilization),
        node_defaults=defaults,
        candidates_order=cast(CandidatesOrder, args.scale_down_candidates_order),
        consolidation=ConsolidationSettings(
            policy=cast(ConsolidationPolicy, args.consolidation),
            consolidate_after=timedelta(seconds=args.consolidate_after),
            budgets=budgets,
            validation_delay=timedelta(seconds=args.consolidation_validation_delay),
        ),
    )
