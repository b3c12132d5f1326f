"""The cluster autoscaler's flags in ``kubescale serve``: names, defaults and help texts.

Names and defaults are upstream cluster-autoscaler's (``pkg/config/flags/flags.go``,
``pkg/config/const.go``, reference §1-§3). The values are checked and turned into
:class:`AutoscalerSettings` by :mod:`.autoscaler_config`.
"""

from __future__ import annotations

import argparse

from kubescale.base.flag_types import add_bool_flag, add_duration_flag
from kubescale.base.go_time import parse_duration
from kubescale.controllers.autoscaler.config.autoscaler_config import (
    EXPANDER_NAMES,
)
from kubescale.controllers.autoscaler.config.autoscaler_settings import (
    DEFAULT_STATUS_CONFIG_MAP_NAME,
)
from kubescale.plans.dry_run import add_dry_run_flag

__all__ = ["add_autoscaler_arguments"]


def _duration_value(text: str) -> float:
    """A Go duration that may be 0 but not negative."""
    seconds = parse_duration(text)
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"duration must be >= 0, got {text!r}")
    return seconds


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
        help="run the cluster autoscaler loop: auto = in a cluster or given --kubeconfig, when "
        "--cloud-provider or --node-group-auto-discovery is given (default: %(default)s)",
    )
    add_duration_flag(
        group,
        "--scan-interval",
        "10s",
        "how often the cluster is re-evaluated",
        parse=_duration_value,
    )
    add_dry_run_flag(group)
    group.add_argument(
        "--cloud-provider",
        default="",
        help="cloud provider: clusterapi, the only one provided; giving it (or "
        "--node-group-auto-discovery) is what runs the autoscaler with --cluster-autoscaler auto",
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
    add_bool_flag(group, "--write-status-configmap", True, "write the status ConfigMap every loop")
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
    add_bool_flag(
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
    add_duration_flag(
        group,
        "--max-nodegroup-binpacking-duration",
        "10s",
        "max time one node group's binpacking may take",
        parse=_duration_value,
    )
    add_duration_flag(
        group,
        "--new-pod-scale-up-delay",
        "0s",
        "pods younger than this do not trigger a scale-up",
        parse=_duration_value,
    )
    _int(
        group,
        "--expendable-pods-priority-cutoff",
        -10,
        "pods below this priority neither trigger scale-up nor block scale-down",
    )
    add_bool_flag(group, "--scale-up-from-zero", True, "scale up when there are no ready nodes")
    add_bool_flag(
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
    add_duration_flag(
        group,
        "--max-node-provision-time",
        "15m",
        "how long a new node may take to register",
        parse=_duration_value,
    )
    add_duration_flag(
        group,
        "--max-node-startup-time",
        "15m",
        "how long a registered node may take to become ready",
        parse=_duration_value,
    )
    add_duration_flag(
        group,
        "--initial-node-group-backoff-duration",
        "5m",
        "first backoff after a failed scale-up",
        parse=_duration_value,
    )
    add_duration_flag(
        group,
        "--max-node-group-backoff-duration",
        "30m",
        "longest backoff after failures",
        parse=_duration_value,
    )
    add_duration_flag(
        group,
        "--node-group-backoff-reset-timeout",
        "3h",
        "backoff is forgotten this long after the last failure",
        parse=_duration_value,
    )
    add_bool_flag(
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
    add_bool_flag(group, "--scale-down-enabled", True, "remove unneeded nodes")
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
    add_duration_flag(
        group,
        "--scale-down-unneeded-time",
        "10m",
        "how long a node must be unneeded before it is removed",
        parse=_duration_value,
    )
    add_duration_flag(
        group,
        "--scale-down-unready-time",
        "20m",
        "how long an unready node must be unneeded before it is removed",
        parse=_duration_value,
    )
    add_bool_flag(group, "--scale-down-unready-enabled", True, "remove unneeded unready nodes")
    add_duration_flag(
        group,
        "--scale-down-delay-after-add",
        "10m",
        "scale-down pause after a scale-up",
        parse=_duration_value,
    )
    add_duration_flag(
        group,
        "--scale-down-delay-after-delete",
        "0s",
        "scale-down pause after a node deletion",
        parse=_duration_value,
    )
    add_duration_flag(
        group,
        "--scale-down-delay-after-failure",
        "3m",
        "scale-down pause after a failed scale-down",
        parse=_duration_value,
    )
    _int(group, "--max-scale-down-parallelism", 10, "max nodes deleted at once")
    _int(group, "--max-drain-parallelism", 1, "max non-empty nodes drained at once")
    add_duration_flag(
        group,
        "--unremovable-node-recheck-timeout",
        "5m",
        "an unremovable node is not re-checked for this long",
        parse=_duration_value,
    )
    add_bool_flag(
        group,
        "--skip-nodes-with-system-pods",
        True,
        "never remove nodes running kube-system pods without a PDB",
    )
    add_bool_flag(
        group,
        "--skip-nodes-with-local-storage",
        True,
        "never remove nodes running pods with local storage",
    )
    add_bool_flag(
        group,
        "--skip-nodes-with-custom-controller-pods",
        True,
        "only RC/RS/Job/StatefulSet pods count as replicated",
    )
    _int(group, "--min-replica-count", 0, "controllers with fewer replicas block removal")
    add_duration_flag(
        group,
        "--blocking-system-pod-distruption-timeout",
        "1h",
        "kube-system pods without PDB stop blocking after this age",
        parse=_duration_value,
    )
    _int(group, "--max-graceful-termination-sec", 600, "max grace period when draining")
    add_duration_flag(
        group,
        "--max-pod-eviction-time",
        "2m",
        "how long evictions are retried",
        parse=_duration_value,
    )
    add_duration_flag(
        group,
        "--node-delete-delay-after-taint",
        "5s",
        "wait between tainting a node and deleting it",
        parse=_duration_value,
    )
    add_bool_flag(group, "--cordon-node-before-terminating", True, "cordon nodes being removed")
    add_bool_flag(
        group,
        "--daemonset-eviction-for-empty-nodes",
        False,
        "evict DaemonSet pods from empty nodes being removed",
    )
    add_bool_flag(
        group,
        "--daemonset-eviction-for-occupied-nodes",
        True,
        "evict DaemonSet pods from drained nodes",
    )
    add_bool_flag(
        group,
        "--ignore-daemonsets-utilization",
        False,
        "leave DaemonSet pods out of node utilization",
    )
    add_bool_flag(
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
    add_duration_flag(
        group,
        "--consolidate-after",
        "0s",
        "kubescale: a node is consolidatable after this long without pod changes",
        parse=_duration_value,
    )
    group.add_argument(
        "--consolidation-budgets",
        default="nodes=10%",
        help="kubescale: disruption budgets, ';'-separated, each nodes=<n|n%%>[,reasons=Empty|"
        "Underutilized][,schedule=<cron>,duration=<d>] (default: %(default)s)",
    )
    add_duration_flag(
        group,
        "--consolidation-validation-delay",
        "15s",
        "kubescale: a consolidation decision is re-validated after this delay",
        parse=_duration_value,
    )
