"""Disruption cost: when several nodes could go, remove the one whose pods are cheapest to move.

kubescale's answer to an open request on both upstream trackers (cluster-autoscaler #1070,
#1240, proposal #9399; Karpenter's disruption cost), opt-in with
``--scale-down-candidates-order disruption-cost`` and always used by consolidation.

A node's cost compares, in this order:

1. the pods to move that keep data on the node (an ``emptyDir`` not in memory, a ``hostPath``)
   — moving them loses that data, whatever else it costs;
2. the sum of the pods' eviction costs, Karpenter's ``EvictionCost``: ``1 + pod-deletion-cost /
   2^27 + priority / 2^25``, each clamped to [-10, 10] (a pod of priority 1,000,000,000 counts
   about 30 plain pods; ``controller.kubernetes.io/pod-deletion-cost`` adds or removes a few);
3. the number of pods to move;
4. the node's name, so the order is total.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from kubescale.controllers.autoscaler.model.pod_facts import PriorityResolver, pod_annotations
from kubescale.objects.pod import Pod
from kubescale.objects.views import spec_of

__all__ = [
    "POD_DELETION_COST_ANNOTATION",
    "DisruptionCost",
    "eviction_cost",
    "node_disruption_cost",
]

POD_DELETION_COST_ANNOTATION: Final = "controller.kubernetes.io/pod-deletion-cost"


def eviction_cost(pod: Pod, priority: PriorityResolver) -> float:
    """Karpenter's ``EvictionCost``."""
    cost = 1.0
    raw = pod_annotations(pod).get(POD_DELETION_COST_ANNOTATION)
    if raw is not None:
        with contextlib.suppress(ValueError):  # Karpenter ignores an unparsable annotation
            cost += float(raw) / 2.0**27
    cost += priority.priority(pod) / 2.0**25
    return min(10.0, max(-10.0, cost))


def keeps_local_data(pod: Pod) -> bool:
    for volume in spec_of(pod).get("volumes") or ():
        if "hostPath" in volume:
            return True
        empty_dir = volume.get("emptyDir")
        if empty_dir is not None and (empty_dir or {}).get("medium") != "Memory":
            return True
    return False


@dataclass(frozen=True, order=True)
class DisruptionCost:
    """The module docstring's order (compare with ``<``)."""

    local_data_pods: int
    eviction_cost: float
    pods: int
    node: str


def node_disruption_cost(
    node: str, pods_to_move: Iterable[Pod], priority: PriorityResolver
) -> DisruptionCost:
    pods = list(pods_to_move)
    return DisruptionCost(
        local_data_pods=sum(1 for p in pods if keeps_local_data(p)),
        eviction_cost=round(sum(eviction_cost(p, priority) for p in pods), 9),
        pods=len(pods),
        node=node,
    )
