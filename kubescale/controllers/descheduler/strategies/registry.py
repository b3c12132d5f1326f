"""Plugin name → strategy (the ten plugins ``setupplugins.go`` registers)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from ..framework.strategy_context import Strategy
from . import node_affinity, node_taints, pod_anti_affinity, remove_duplicates, topology_spread
from .node_utilization import HIGH_NAME, LOW_NAME, high_node_utilization, low_node_utilization
from .pod_status_rules import (
    FAILED_PODS,
    POD_LIFETIME,
    TOO_MANY_RESTARTS,
    pod_lifetime,
    remove_failed_pods,
    remove_pods_having_too_many_restarts,
)

__all__ = ["STRATEGIES"]

STRATEGIES: Final[Mapping[str, Strategy]] = {
    node_taints.NAME: node_taints.remove_pods_violating_node_taints,
    node_affinity.NAME: node_affinity.remove_pods_violating_node_affinity,
    pod_anti_affinity.NAME: pod_anti_affinity.remove_pods_violating_inter_pod_anti_affinity,
    TOO_MANY_RESTARTS: remove_pods_having_too_many_restarts,
    POD_LIFETIME: pod_lifetime,
    FAILED_PODS: remove_failed_pods,
    remove_duplicates.NAME: remove_duplicates.remove_duplicates,
    LOW_NAME: low_node_utilization,
    HIGH_NAME: high_node_utilization,
    topology_spread.NAME: topology_spread.remove_pods_violating_topology_spread_constraint,
}
