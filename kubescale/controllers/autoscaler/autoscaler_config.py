"""Flags of the cluster autoscaler in ``kubescale serve``, and the settings built from them.

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
  Karpenter's consolidation (:mod:`.consolidation`);
* ``--scale-down-candidates-order utilization|disruption-cost`` — which removable node goes
  first (:mod:`.disruption_cost`).

Not provided: upstream's own leader-election, kubeconfig and metrics-address flags (``serve``
has one of each), cloud providers other than ``clusterapi``, autoprovisioning, GPUs/DRA/CSI.
"""

from __future__ import annotations

import argparse
import re
from datetime import timedelta
from typing import Final, cast

from kubescale.base.flag_types import parse_bool, parse_duration

from .autoscaler_settings import (
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
from .disruption_budgets import DisruptionBudgetError, parse_budgets

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
    "add_autoscaler_arguments",
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


def _duration_value(text: str) -> float:
    """A Go duration that may be 0 but not negative."""
    seconds = parse_duration(text)
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"duration must be >= 0, got {text!r}")
    return seconds


def _bool(group: argparse._ArgumentGroup, flag: str, default: bool, text: str) -> None:
    group.add_argument(
        flag,
        type=parse_bool,
        nargs="?",
        const=True,
        default=default,
        metavar="BOOL",
        help=f"{text} (default: {str(default).lower()})",
    )


def _duration(group: argparse._ArgumentGroup, flag: str, default: str, text: str) -> None:
    group.add_argument(
        flag,
        type=_duration_value,
        default=parse_duration(default),
        metavar="DURATION",
        help=f"{text} (default: {default})",
    )


def _int(group: argparse._ArgumentGroup, flag: str, default: int, text: str) -> None:
    group.add_argument(flag, type=int, default=default, help=f"{text} (default: %(default)s)")


def _float(group: argparse._ArgumentGroup, flag: str, default: float, text: str) -> None:
    group.add_argument(flag, type=float, default=default, help=f"{text} (default: %(default)s)")


def add_autoscaler_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the cluster autoscaler's flags on ``parser``."""
    group = parser.add_argument_group("cluster autoscaler (upstream cluster-autoscaler flags)")
    group.add_argument(
        "--cluster-autoscaler",
        choices=("auto", "true", "false"),
        default="auto",
        help="run the cluster autoscaler loop: auto = when in a cluster or given --kubeconfig "
        "(default: %(default)s)",
    )
    _duration(group, "--scan-interval", "10s", "how often the cluster is re-evaluated")
    group.add_argument(
        "--cloud-provider",
        default="clusterapi",
        help="cloud provider (default: %(default)s; the only one provided)",
    )
    group.add_argument(
        "--node-group-auto-discovery",
        action="append",
        default=[],
        metavar="SPEC",
        help="clusterapi:namespace=<ns>,clusterName=<name>,<label>=<value> (repeatable)",
    )
    group.add_argument(
        "--namespace",
        default="kube-system",
        help="namespace of the status ConfigMap and the priority expander's (default: %(default)s)",
    )
    _bool(group, "--write-status-configmap", True, "write the status ConfigMap every loop")
    group.add_argument(
        "--status-config-map-name",
        default=DEFAULT_STATUS_CONFIG_MAP_NAME,
        help="name of the status ConfigMap (default: %(default)s)",
    )
    _int(group, "--max-nodes-total", 0, "maximum nodes in all node groups; 0 = no limit")
    group.add_argument(
        "--cores-total",
        default="0:320000",
        help="minimum and maximum cores in the cluster, <min>:<max> (default: %(default)s)",
    )
    group.add_argument(
        "--memory-total",
        default="0:6400000",
        help="minimum and maximum GiB of memory in the cluster, <min>:<max> (default: %(default)s)",
    )
    group.add_argument(
        "--expander",
        default="least-waste",
        help="comma-separated chain of expanders: "
        + ", ".join(EXPANDER_NAMES)
        + " (default: %(default)s)",
    )
    _bool(
        group,
        "--balance-similar-node-groups",
        False,
        "split scale-ups between similar node groups",
    )
    group.add_argument(
        "--balancing-ignore-label",
        action="append",
        default=[],
        metavar="LABEL",
        help="a node label ignored when comparing node groups (repeatable)",
    )
    group.add_argument(
        "--balancing-label",
        action="append",
        default=[],
        metavar="LABEL",
        help="compare node groups by these labels only (repeatable)",
    )
    _float(
        group,
        "--memory-difference-ratio",
        0.015,
        "max relative memory capacity difference of similar node groups",
    )
    _float(
        group,
        "--max-allocatable-difference-ratio",
        0.05,
        "max relative allocatable difference of similar node groups",
    )
    _float(
        group,
        "--max-free-difference-ratio",
        0.05,
        "max relative free-resource difference of similar node groups",
    )
    _int(group, "--max-nodes-per-scaleup", 1000, "max nodes one binpacking may add")
    _duration(
        group,
        "--max-nodegroup-binpacking-duration",
        "10s",
        "max time one node group's binpacking may take",
    )
    _duration(
        group,
        "--new-pod-scale-up-delay",
        "0s",
        "pods younger than this do not trigger a scale-up",
    )
    _int(
        group,
        "--expendable-pods-priority-cutoff",
        -10,
        "pods below this priority neither trigger scale-up nor block scale-down",
    )
    _bool(group, "--scale-up-from-zero", True, "scale up when there are no ready nodes")
    _bool(
        group,
        "--enforce-node-group-min-size",
        False,
        "scale node groups below their minimum size up to it",
    )
    _int(group, "--ok-total-unready-count", 3, "unready nodes tolerated regardless of share")
    _float(
        group,
        "--max-total-unready-percentage",
        45.0,
        "max share of unready nodes before autoscaling halts",
    )
    _duration(
        group,
        "--max-node-provision-time",
        "15m",
        "how long a new node may take to register",
    )
    _duration(
        group,
        "--max-node-startup-time",
        "15m",
        "how long a registered node may take to become ready",
    )
    _duration(
        group,
        "--initial-node-group-backoff-duration",
        "5m",
        "first backoff after a failed scale-up",
    )
    _duration(group, "--max-node-group-backoff-duration", "30m", "longest backoff after failures")
    _duration(
        group,
        "--node-group-backoff-reset-timeout",
        "3h",
        "backoff is forgotten this long after the last failure",
    )
    _bool(
        group,
        "--force-delete-unregistered-nodes",
        False,
        "delete long-unregistered nodes even below the group's minimum",
    )
    group.add_argument(
        "--startup-taint",
        action="append",
        default=[],
        metavar="KEY",
        help="a taint key that marks a node not ready yet (repeatable)",
    )
    group.add_argument(
        "--status-taint",
        action="append",
        default=[],
        metavar="KEY",
        help="a taint key ignored in templates and similarity (repeatable)",
    )
    _bool(group, "--scale-down-enabled", True, "remove unneeded nodes")
    _float(
        group,
        "--scale-down-utilization-threshold",
        0.5,
        "a node below this utilization may be removed",
    )
    _float(
        group,
        "--scale-down-gpu-utilization-threshold",
        0.5,
        "the same for GPU nodes",
    )
    _duration(
        group,
        "--scale-down-unneeded-time",
        "10m",
        "how long a node must be unneeded before it is removed",
    )
    _duration(
        group,
        "--scale-down-unready-time",
        "20m",
        "how long an unready node must be unneeded before it is removed",
    )
    _bool(group, "--scale-down-unready-enabled", True, "remove unneeded unready nodes")
    _duration(group, "--scale-down-delay-after-add", "10m", "scale-down pause after a scale-up")
    _duration(
        group, "--scale-down-delay-after-delete", "0s", "scale-down pause after a node deletion"
    )
    _duration(
        group,
        "--scale-down-delay-after-failure",
        "3m",
        "scale-down pause after a failed scale-down",
    )
    _int(group, "--max-scale-down-parallelism", 10, "max nodes deleted at once")
    _int(group, "--max-drain-parallelism", 1, "max non-empty nodes drained at once")
    _duration(
        group,
        "--unremovable-node-recheck-timeout",
        "5m",
        "an unremovable node is not re-checked for this long",
    )
    _bool(
        group,
        "--skip-nodes-with-system-pods",
        True,
        "never remove nodes running kube-system pods without a PDB",
    )
    _bool(
        group,
        "--skip-nodes-with-local-storage",
        True,
        "never remove nodes running pods with local storage",
    )
    _bool(
        group,
        "--skip-nodes-with-custom-controller-pods",
        True,
        "only RC/RS/Job/StatefulSet pods count as replicated",
    )
    _int(group, "--min-replica-count", 0, "controllers with fewer replicas block removal")
    _duration(
        group,
        "--blocking-system-pod-distruption-timeout",
        "1h",
        "kube-system pods without PDB stop blocking after this age",
    )
    _int(group, "--max-graceful-termination-sec", 600, "max grace period when draining")
    _duration(group, "--max-pod-eviction-time", "2m", "how long evictions are retried")
    _duration(
        group,
        "--node-delete-delay-after-taint",
        "5s",
        "wait between tainting a node and deleting it",
    )
    _bool(group, "--cordon-node-before-terminating", True, "cordon nodes being removed")
    _bool(
        group,
        "--daemonset-eviction-for-empty-nodes",
        False,
        "evict DaemonSet pods from empty nodes being removed",
    )
    _bool(
        group,
        "--daemonset-eviction-for-occupied-nodes",
        True,
        "evict DaemonSet pods from drained nodes",
    )
    _bool(
        group,
        "--ignore-daemonsets-utilization",
        False,
        "leave DaemonSet pods out of node utilization",
    )
    _bool(
        group,
        "--ignore-mirror-pods-utilization",
        False,
        "leave mirror pods out of node utilization",
    )
    group.add_argument(
        "--scale-down-candidates-order",
        choices=("utilization", "disruption-cost"),
        default="utilization",
        help="kubescale: which removable nodes go first; disruption-cost = the node whose pods "
        "are cheapest to move (default: %(default)s)",
    )
    group.add_argument(
        "--consolidation",
        choices=("Off", "WhenEmpty", "WhenEmptyOrUnderutilized"),
        default="Off",
        help="kubescale: Karpenter-style consolidation (default: %(default)s)",
    )
    _duration(
        group,
        "--consolidate-after",
        "0s",
        "kubescale: a node is consolidatable after this long without pod changes",
    )
    group.add_argument(
        "--consolidation-budgets",
        default="nodes=10%",
        help="kubescale: disruption budgets, ';'-separated, each nodes=<n|n%%>[,reasons=Empty|"
        "Underutilized][,schedule=<cron>,duration=<d>] (default: %(default)s)",
    )
    _duration(
        group,
        "--consolidation-validation-delay",
        "15s",
        "kubescale: a consolidation decision is re-validated after this delay",
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
    if args.cloud_provider != "clusterapi":
        raise AutoscalerConfigError(
            f"--cloud-provider: {args.cloud_provider!r} is not provided (only clusterapi)"
        )
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
        mode=cast(AutoscalerMode, args.cluster_autoscaler),
        scan_interval=float(args.scan_interval),
        cloud_provider=str(args.cloud_provider),
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
