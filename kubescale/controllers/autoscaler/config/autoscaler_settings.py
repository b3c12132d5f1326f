"""The cluster autoscaler's settings: what its flags (:mod:`.autoscaler_config`) become.

Defaults are upstream cluster-autoscaler's (``pkg/config/autoscaling_options.go``,
``pkg/config/const.go``); see :mod:`.autoscaler_config` for the flags and their validation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Final, Literal

from kubescale.base.flag_types import FlagValueError
from kubescale.controllers.autoscaler.config.disruption_budgets import DisruptionBudget

__all__ = [
    "DEFAULT_STATUS_CONFIG_MAP_NAME",
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
]

AutoscalerMode = Literal["auto", "true", "false"]
ConsolidationPolicy = Literal["Off", "WhenEmpty", "WhenEmptyOrUnderutilized"]
CandidatesOrder = Literal["utilization", "disruption-cost"]

DEFAULT_STATUS_CONFIG_MAP_NAME: Final = "cluster-autoscaler-status"
GIB: Final = 1024**3


class AutoscalerConfigError(FlagValueError):
    """A flag value that parsed but does not make sense; the message names the flag."""


@dataclass(frozen=True, kw_only=True)
class ResourceRange:
    """``<min>:<max>`` of ``--cores-total`` (cores) or ``--memory-total`` (bytes here)."""

    min: int
    max: int


@dataclass(frozen=True, kw_only=True)
class AutoDiscoverySpec:
    """``--node-group-auto-discovery=clusterapi:namespace=X,clusterName=Y,<label>=<v>``."""

    namespace: str = ""
    cluster_name: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class NodeGroupDefaults:
    """``NodeGroupAutoscalingOptions``: the per-group settings a provider may override."""

    scale_down_utilization_threshold: float = 0.5
    scale_down_gpu_utilization_threshold: float = 0.5
    scale_down_unneeded_time: timedelta = timedelta(minutes=10)
    scale_down_unready_time: timedelta = timedelta(minutes=20)
    max_node_provision_time: timedelta = timedelta(minutes=15)
    max_node_startup_time: timedelta = timedelta(minutes=15)
    zero_or_max_node_scaling: bool = False
    ignore_daemonsets_utilization: bool = False


@dataclass(frozen=True, kw_only=True)
class ConsolidationSettings:
    """kubescale's Karpenter-style consolidation (:mod:`.consolidation`); ``Off`` by default."""

    policy: ConsolidationPolicy = "Off"
    consolidate_after: timedelta = timedelta(0)
    """A node is consolidatable once it and its pods have not changed for this long
    (Karpenter's ``consolidateAfter``; its default 0s)."""
    budgets: tuple[DisruptionBudget, ...] = (DisruptionBudget(nodes="10%"),)
    validation_delay: timedelta = timedelta(seconds=15)
    """A decision is re-computed this long after it was made and acted on only if it still
    holds (Karpenter's ``commandValidationDelay``)."""


@dataclass(frozen=True, kw_only=True)
class AutoscalerSettings:
    """The cluster autoscaler's settings, validated once at start."""

    mode: AutoscalerMode = "auto"
    auto_off_reason: str | None = None
    """Why ``--cluster-autoscaler auto`` does not run it (upstream needs ``--cloud-provider``):
    neither ``--cloud-provider`` nor ``--node-group-auto-discovery`` given; ``None``: given."""
    scan_interval: float = 10.0
    dry_run: bool = False
    """``--dry-run`` (one flag for every system, :mod:`kubescale.plans.dry_run`; upstream's
    cluster autoscaler has none): every resize, node deletion, taint, eviction, status
    ConfigMap write and event printed, nothing written."""
    cloud_provider: str = "clusterapi"
    capi_group: str = "cluster.x-k8s.io"
    """Cluster API's API group (upstream's ``CAPI_GROUP`` environment variable)."""
    capi_version: str = ""
    """Its version (``CAPI_VERSION``); empty: the group's preferred version in discovery."""
    auto_discovery: tuple[AutoDiscoverySpec, ...] = ()
    namespace: str = "kube-system"
    write_status_configmap: bool = True
    status_config_map_name: str = DEFAULT_STATUS_CONFIG_MAP_NAME
    # scale-up
    max_nodes_total: int = 0
    cores_total: ResourceRange = ResourceRange(min=0, max=320000)
    memory_total: ResourceRange = ResourceRange(min=0, max=6400000 * GIB)
    expander: tuple[str, ...] = ("least-waste",)
    priority_config_map_name: str = "cluster-autoscaler-priority-expander"
    balance_similar_node_groups: bool = False
    balancing_ignore_labels: tuple[str, ...] = ()
    balancing_labels: tuple[str, ...] = ()
    memory_difference_ratio: float = 0.015
    max_allocatable_difference_ratio: float = 0.05
    max_free_difference_ratio: float = 0.05
    max_nodes_per_scaleup: int = 1000
    max_nodegroup_binpacking_duration: timedelta = timedelta(seconds=10)
    new_pod_scale_up_delay: timedelta = timedelta(0)
    expendable_pods_priority_cutoff: int = -10
    scale_up_from_zero: bool = True
    enforce_node_group_min_size: bool = False
    # cluster state
    ok_total_unready_count: int = 3
    max_total_unready_percentage: float = 45.0
    initial_node_group_backoff_duration: timedelta = timedelta(minutes=5)
    max_node_group_backoff_duration: timedelta = timedelta(minutes=30)
    node_group_backoff_reset_timeout: timedelta = timedelta(hours=3)
    force_delete_unregistered_nodes: bool = False
    startup_taints: tuple[str, ...] = ()
    status_taints: tuple[str, ...] = ()
    # scale-down
    scale_down_enabled: bool = True
    scale_down_delay_after_add: timedelta = timedelta(minutes=10)
    scale_down_delay_after_delete: timedelta = timedelta(0)
    scale_down_delay_after_failure: timedelta = timedelta(minutes=3)
    scale_down_unready_enabled: bool = True
    max_scale_down_parallelism: int = 10
    max_drain_parallelism: int = 1
    unremovable_node_recheck_timeout: timedelta = timedelta(minutes=5)
    skip_nodes_with_system_pods: bool = True
    skip_nodes_with_local_storage: bool = True
    skip_nodes_with_custom_controller_pods: bool = True
    min_replica_count: int = 0
    blocking_system_pod_distruption_timeout: timedelta = timedelta(hours=1)
    max_graceful_termination_sec: int = 600
    max_pod_eviction_time: timedelta = timedelta(minutes=2)
    node_delete_delay_after_taint: timedelta = timedelta(seconds=5)
    cordon_node_before_terminating: bool = True
    daemonset_eviction_for_empty_nodes: bool = False
    daemonset_eviction_for_occupied_nodes: bool = True
    ignore_mirror_pods_utilization: bool = False
    node_defaults: NodeGroupDefaults = field(default_factory=NodeGroupDefaults)
    # kubescale's additions
    candidates_order: CandidatesOrder = "utilization"
    consolidation: ConsolidationSettings = field(default_factory=ConsolidationSettings)
