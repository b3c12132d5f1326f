"""The scale-down planner: which nodes are unneeded, and which may go now (reference §3.2).

:meth:`ScaleDownPlanner.update` (``Planner.UpdateClusterState``) checks every candidate — a
node of an autoscaled group above its min size — for eligibility in upstream's order:
recently found unremovable in simulation (re-checked after
``--unremovable-node-recheck-timeout``, ``RecentlyUnremovable``), being deleted
(``CurrentlyBeingDeleted``), ``scale-down-disabled`` annotation
(``ScaleDownDisabledAnnotation``), not autoscaled (``NotAutoscaled``), no utilization
(``UnexpectedError``), unready with ``--scale-down-unready-enabled=false``
(``ScaleDownUnreadyDisabled``), utilization above the group's threshold (``NotUnderutilized``;
at the threshold is underutilized). The eligible nodes are then simulated
(:mod:`.removal_simulation`) in upstream's candidate order — empty nodes first (its
``EmptySorting`` processor: no pod to move and none blocking), then previously unneeded nodes
(``PreviousCandidates``, oldest first), then by name — or by disruption cost
(:mod:`.disruption_cost`)
— until ``min(unneeded + 2N, N × unneeded-time / scan-interval + N)`` unneeded nodes are found
(N = ``--max-scale-down-parallelism``). A node keeps the time it was first found unneeded while
it stays unneeded.

:meth:`ScaleDownPlanner.nodes_to_delete` (``NodesToDelete`` → ``RemovableAt``): an unneeded
node may go once it has been unneeded for longer than ``--scale-down-unneeded-time`` (unready
nodes: ``--scale-down-unready-time``; ``NotUnneededLongEnough`` / ``NotUnreadyLongEnough``), its
group stays above min size counting deletions in progress (``NodeGroupMinSizeReached``), and
the cluster stays above ``--cores-total``/``--memory-total`` minimums
(``MinimalResourceLimitExceeded``); a pod that asks to finish first keeps it
(``BlockedByOnCompletionPod``). Empty nodes come before nodes to drain; the lists are cut to
``--max-scale-down-parallelism`` minus deletions in progress, and drains to
``--max-drain-parallelism`` minus drains in progress.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from kubescale.controllers.autoscaler.cloudprovider.cloud_provider import ProviderSnapshot
from kubescale.controllers.autoscaler.config.autoscaler_settings import AutoscalerSettings
from kubescale.controllers.autoscaler.model.node_facts import (
    SCALE_DOWN_DISABLED_ANNOTATION,
    NodeReadiness,
    currently_being_deleted,
    node_name,
)
from kubescale.controllers.autoscaler.model.pod_facts import PriorityResolver
from kubescale.controllers.autoscaler.scaledown.disruption_cost import (
    DisruptionCost,
    node_disruption_cost,
)
from kubescale.controllers.autoscaler.scaleup.resource_limits import ResourceLimits, ScaleDownLimits
from kubescale.controllers.autoscaler.simulator.drainability import DrainContext, classify_node_pods
from kubescale.controllers.autoscaler.simulator.removal_simulation import simulate_node_removal
from kubescale.controllers.autoscaler.simulator.scheduling_simulation import SchedulingSimulator
from kubescale.controllers.autoscaler.simulator.utilization import Utilization, node_utilization
from kubescale.objects.node import Node
from kubescale.objects.pod import Pod
from kubescale.objects.views import Meta
from kubescale.scheduling.fit import ClusterSnapshot

__all__ = ["NodeToRemove", "ScaleDownPlanner", "Unremovable"]


@dataclass(frozen=True)
class NodeToRemove:
    node: Node
    group_id: str
    pods_to_move: tuple[Pod, ...]
    daemon_set_pods: tuple[Pod, ...]
    utilization: float
    since: datetime
    waiting: bool = False
    cost: DisruptionCost | None = None

    @property
    def name(self) -> str:
        return node_name(self.node)

    @property
    def empty(self) -> bool:
        return not self.pods_to_move


@dataclass(frozen=True)
class Unremovable:
    name: str
    reason: str
    detail: str = ""


@dataclass
class ScaleDownPlanner:
    """Unneeded nodes across loops (module docstring)."""

    settings: AutoscalerSettings
    unneeded: dict[str, NodeToRemove] = field(default_factory=dict)
    unremovable_until: dict[str, datetime] = field(default_factory=dict)
    unremovable: dict[str, Unremovable] = field(default_factory=dict)
    utilization: dict[str, Utilization] = field(default_factory=dict)

    def clear(self) -> None:
        self.unneeded.clear()

    def _limit(self) -> int:
        """``unneededNodesLimit``."""
        n = self.settings.max_scale_down_parallelism
        unneeded_time = self.settings.node_defaults.scale_down_unneeded_time.total_seconds()
        loops = (
            int(unneeded_time / self.settings.scan_interval) if self.settings.scan_interval else 0
        )
        return min(len(self.unneeded) + 2 * n, n * loops + n)

    def update(
        self,
        *,
        now: datetime,
        candidates: Sequence[Node],
        destinations: set[str],
        simulator: SchedulingSimulator,
        provider: ProviderSnapshot,
        readiness: Callable[[Node], NodeReadiness],
        context: DrainContext,
        priority: PriorityResolver,
        kept: Mapping[str, Unremovable] | None = None,
    ) -> list[NodeToRemove]:
        """``kept``: nodes that are not candidates this loop, and why — with
        ``--coordination one-brain`` the nodes holding pods the descheduler just moved
        (:mod:`kubescale.coordination.recent_moves`); they are not unneeded, so their unneeded
        time restarts."""
        settings = self.settings
        snapshot = simulator.journal.snapshot
        self.unremovable = {}
        self.utilization = {}
        self.unremovable_until = {n: t for n, t in self.unremovable_until.items() if t > now}
        recheck_at = now + settings.unremovable_node_recheck_timeout
        eligible: list[tuple[Node, str, float]] = []
        for node in candidates:
            name = node_name(node)
            if name in self.unremovable_until:
                self._mark(name, "RecentlyUnremovable")
                continue
            if kept and name in kept:
                self.unremovable[name] = kept[name]
                continue
            reason, group_id, used = self._eligibility(node, now, snapshot, provider, readiness)
            if reason:
                self._mark(name, reason)
                continue
            eligible.append((node, group_id, used))
        order = self._order(eligible, snapshot, context, priority)
        found: dict[str, NodeToRemove] = {}
        limit = self._limit()
        for node, group_id, used in order:
            if len(found) >= limit:
                break
            name = node_name(node)
            result = simulate_node_removal(
                name, simulator=simulator, destinations=destinations, context=context
            )
            if not result.removable:
                detail = result.blocking_reason.value if result.blocking_reason else ""
                self._mark(name, result.reason, detail)
                self.unremovable_until[name] = recheck_at
                continue
            previous = self.unneeded.get(name)
            found[name] = NodeToRemove(
                node=node,
                group_id=group_id,
                pods_to_move=tuple(result.pods.to_move),
                daemon_set_pods=tuple(result.pods.daemon_sets),
                utilization=used,
                since=previous.since if previous is not None else now,
                waiting=result.pods.waiting,
                cost=node_disruption_cost(name, result.pods.to_move, priority),
            )
        self.unneeded = found
        return list(found.values())

    def _mark(self, name: str, reason: str, detail: str = "") -> None:
        self.unremovable[name] = Unremovable(name=name, reason=reason, detail=detail)

    def _eligibility(
        self,
        node: Node,
        now: datetime,
        snapshot: ClusterSnapshot,
        provider: ProviderSnapshot,
        readiness: Callable[[Node], NodeReadiness],
    ) -> tuple[str, str, float]:
        """(unremovable reason or "", group id, utilization)."""
        if currently_being_deleted(node, now):
            return "CurrentlyBeingDeleted", "", 0.0
        annotations = Meta(node).raw.get("annotations") or {}
        if annotations.get(SCALE_DOWN_DISABLED_ANNOTATION) == "true":
            return "ScaleDownDisabledAnnotation", "", 0.0
        group = provider.group_for_node(node)
        if group is None:
            return "NotAutoscaled", "", 0.0
        state = snapshot.nodes.get(node_name(node))
        if state is None:
            return "UnexpectedError", group.id, 0.0
        used = node_utilization(
            allocatable=state.allocatable,
            pods=state.pods,
            now=now,
            skip_daemon_sets=group.options.ignore_daemonsets_utilization,
            skip_mirror_pods=self.settings.ignore_mirror_pods_utilization,
        )
        if used is None:
            return "UnexpectedError", group.id, 0.0
        self.utilization[node_name(node)] = used
        if not self.settings.scale_down_unready_enabled and not readiness(node).ready:
            return "ScaleDownUnreadyDisabled", group.id, used.value
        if used.value > group.options.scale_down_utilization_threshold:
            return "NotUnderutilized", group.id, used.value
        return "", group.id, used.value

    def _order(
        self,
        eligible: list[tuple[Node, str, float]],
        snapshot: ClusterSnapshot,
        context: DrainContext,
        priority: PriorityResolver,
    ) -> list[tuple[Node, str, float]]:
        if self.settings.candidates_order == "disruption-cost":

            def cost(item: tuple[Node, str, float]) -> DisruptionCost:
                name = node_name(item[0])
                pods = snapshot.nodes[name].pods if name in snapshot.nodes else []
                return node_disruption_cost(name, _movable(pods, context), priority)

            return sorted(eligible, key=cost)

        def emptiness(name: str) -> tuple[int, int]:
            """``EmptySorting.ScaleDownEarlierThan``: empty nodes (no pod to move, none
            blocking: ``GetPodsToMove`` on the snapshot) first, among them those without
            ``safe-to-evict: on-completion`` pods."""
            state = snapshot.nodes.get(name)
            if state is None:
                return 1, 0  # upstream: a node it cannot look up is not empty
            pods = classify_node_pods(state.pods, context)
            if pods.blocked or pods.to_move:
                return 1, 0
            return 0, 1 if pods.waiting else 0

        def empty_then_known_first(
            item: tuple[Node, str, float],
        ) -> tuple[int, int, int, float, str]:
            name = node_name(item[0])
            empty, on_completion = emptiness(name)
            previous = self.unneeded.get(name)
            if previous is not None:
                return empty, on_completion, 0, previous.since.timestamp(), name
            return empty, on_completion, 1, 0.0, name

        return sorted(eligible, key=empty_then_known_first)

    def nodes_to_delete(
        self,
        *,
        now: datetime,
        provider: ProviderSnapshot,
        readiness: Callable[[Node], NodeReadiness],
        all_nodes: Sequence[Node],
        node_capacity: Callable[[Node], Mapping[str, int]],
        deletions_in_progress: Mapping[str, int],
        drains_in_progress: int,
        priority: PriorityResolver,
    ) -> tuple[list[NodeToRemove], list[NodeToRemove]]:
        """(empty nodes, nodes to drain) that may be deleted now (module docstring)."""
        settings = self.settings
        sizes = {g.id: g.target_size for g in provider.groups.values()}
        limits = ScaleDownLimits.of(
            ResourceLimits(cores=settings.cores_total, memory=settings.memory_total),
            (node_capacity(n) for n in all_nodes if not currently_being_deleted(n, now)),
        )
        order = sorted(
            self.unneeded.values(),
            key=(
                (lambda c: (c.cost, c.name))
                if settings.candidates_order == "disruption-cost"
                else (lambda c: (c.since, c.name))
            ),
        )
        empty: list[NodeToRemove] = []
        drain: list[NodeToRemove] = []
        for candidate in [c for c in order if c.empty] + [c for c in order if not c.empty]:
            reason = self._removable_reason(candidate, now, provider, readiness)
            if not reason:
                group = provider.groups.get(candidate.group_id)
                if group is None:
                    reason = "NotAutoscaled"
                elif sizes[group.id] - deletions_in_progress.get(group.id, 0) <= group.min_size:
                    reason = "NodeGroupMinSizeReached"
                elif limits.try_remove(node_capacity(candidate.node)):
                    reason = "MinimalResourceLimitExceeded"
                else:
                    sizes[group.id] -= 1
            if reason:
                self._mark(candidate.name, reason)
                continue
            (empty if candidate.empty else drain).append(candidate)
        in_progress = sum(deletions_in_progress.values())
        budget = max(0, settings.max_scale_down_parallelism - in_progress)
        empty = empty[:budget]
        budget -= len(empty)
        drain_budget = max(0, settings.max_drain_parallelism - drains_in_progress)
        drain = drain[: min(budget, drain_budget)]
        return empty, drain

    def _removable_reason(
        self,
        candidate: NodeToRemove,
        now: datetime,
        provider: ProviderSnapshot,
        readiness: Callable[[Node], NodeReadiness],
    ) -> str:
        """``unremovableReason`` of ``RemovableAt`` up to the group checks."""
        annotations = Meta(candidate.node).raw.get("annotations") or {}
        if annotations.get(SCALE_DOWN_DISABLED_ANNOTATION) == "true":
            return "ScaleDownDisabledAnnotation"
        group = provider.groups.get(candidate.group_id)
        ready = readiness(candidate.node).ready
        if group is not None:
            threshold = (
                group.options.scale_down_unneeded_time
                if ready
                else group.options.scale_down_unready_time
            )
            if threshold > timedelta(0) and not candidate.since + threshold < now:
                return "NotUnneededLongEnough" if ready else "NotUnreadyLongEnough"
        if candidate.waiting:
            return "BlockedByOnCompletionPod"
        return ""


def _movable(pods: Sequence[Pod], context: DrainContext) -> list[Pod]:
    return classify_node_pods(pods, context).to_move
