"""The drain simulation: could this node go, and where would its pods land.

Upstream's ``SimulateNodeRemoval``.

``pkg/simulator/cluster.go`` (reference §3.2 step 2): the node's pods are classified by the
drainability rules (:mod:`.drainability`) — a blocking pod ends it (``BlockedByPod``); the
PodDisruptionBudgets must allow moving all of them (the disruptions earlier candidates of this
loop use count); then, in a fork of the snapshot, the pods to move are taken off the node and
placed on the destination nodes (every other node still a destination), stopping at the first
pod that fits nowhere (``NoPlaceToMovePods``); a node the snapshot does not hold is
``NoNodeInfo``. On success the fork is committed: the moved pods
stay where they landed, so the next candidate sees them, and the node stops being a
destination. The node itself stays in the snapshot with what remains (its DaemonSet pods), so
topology domains do not change — upstream's "ghost" node.
"""

from __future__ import annotations

from collections.abc import MutableSet
from dataclasses import dataclass

from kubescale.controllers.autoscaler.simulator.drainability import (
    BlockingReason,
    DrainContext,
    NodePods,
    classify_node_pods,
)
from kubescale.controllers.autoscaler.simulator.scheduling_simulation import SchedulingSimulator
from kubescale.objects.pod import Pod

__all__ = ["RemovalResult", "simulate_node_removal"]


@dataclass(frozen=True)
class RemovalResult:
    removable: bool
    pods: NodePods
    reason: str = ""
    """``BlockedByPod``, ``NoPlaceToMovePods``, ``NoNodeInfo`` (not in the snapshot) or empty."""
    blocking_reason: BlockingReason | None = None
    placements: tuple[tuple[Pod, str], ...] = ()
    """Where each moved pod would land."""


def simulate_node_removal(
    node: str,
    *,
    simulator: SchedulingSimulator,
    destinations: MutableSet[str],
    context: DrainContext,
) -> RemovalResult:
    """The module docstring's simulation; on success ``node`` leaves ``destinations``."""
    journal = simulator.journal
    state = journal.snapshot.nodes.get(node)
    if state is None:
        # upstream SimulateNodeRemoval: GetNodeInfo failing with ErrNodeNotFound is NoNodeInfo
        # ("node_not_found_in_cluster_snapshot"), any other error UnexpectedError
        return RemovalResult(removable=False, pods=NodePods(), reason="NoNodeInfo")
    pods = classify_node_pods(list(state.pods), context)
    if pods.blocked:
        return RemovalResult(
            removable=False, pods=pods, reason="BlockedByPod", blocking_reason=pods.reason
        )
    if context.pdbs.can_disrupt(pods.to_move) is not None:
        return RemovalResult(
            removable=False,
            pods=pods,
            reason="BlockedByPod",
            blocking_reason=BlockingReason.NOT_ENOUGH_PDB,
        )
    journal.fork()
    for pod in pods.to_move:
        journal.remove_pod(node, pod)
    result = simulator.try_schedule_pods(
        pods.to_move,
        candidates=sorted(d for d in destinations if d != node),
        break_on_failure=True,
    )
    if len(result.scheduled) != len(pods.to_move):
        journal.revert()
        return RemovalResult(removable=False, pods=pods, reason="NoPlaceToMovePods")
    journal.commit()
    context.pdbs.disrupt(pods.to_move)
    destinations.discard(node)
    return RemovalResult(
        removable=True,
        pods=pods,
        placements=tuple((p.pod, p.node) for p in result.scheduled),
    )
