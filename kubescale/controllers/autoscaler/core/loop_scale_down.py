"""The scale-down part of ``RunOnce`` (reference §1 step 21, §3.2) and consolidation.

Every loop, even in cooldown: candidates are the nodes of autoscaled groups above their min size
that are not being deleted, leaving out the groups rolling out (Cluster API: an older
MachineSet of the MachineDeployment still has replicas, upstream's
``ScaleDownNodeUpgradeProcessor``); the planner finds the unneeded ones (in a fork of the
snapshot, so its simulated moves do not leak into what follows), the cluster state learns them
(status ConfigMap candidates) and the ``DeletionCandidateOfClusterAutoscaler`` soft taints follow
them (at most 10 writes per loop, ``--max-bulk-soft-taint-count``).

Out of cooldown (``isScaleDownInCooldown``: a scale-up within ``--scale-down-delay-after-add``,
a failure within ``--scale-down-delay-after-failure``, a deletion within
``--scale-down-delay-after-delete``, or pods too new to judge this loop), the nodes that may go
now are handed to the actuator — empty nodes with reason ``empty``, the others ``underutilized``
or ``unready``. When nothing is deleted, no pod is pending and ``--consolidation`` is on,
consolidation decides (:mod:`.consolidation`); a ``Replace`` first adds the cheaper node and
drains the replaced ones once it is up (given up when the new node's group backs off).

With ``--coordination one-brain`` a node holding pods the descheduler just moved there is
neither a scale-down nor a consolidation candidate for ``--scale-down-unneeded-time`` after the
eviction (:mod:`kubescale.coordination.recent_moves`, unremovable reason
``RecentlyReceivedDescheduledPods``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial

from kubescale.base.logs import component_logger
from kubescale.controllers.autoscaler.cloudprovider.cloud_provider import (
    CloudProvider,
    ProviderSnapshot,
    WriteOutcomeUnknown,
)
from kubescale.controllers.autoscaler.cloudprovider.provider_writes import (
    ACTOR,
    node_group_failure,
)
from kubescale.controllers.autoscaler.clusterstate.cluster_state import ClusterStateRegistry
from kubescale.controllers.autoscaler.config.autoscaler_settings import AutoscalerSettings
from kubescale.controllers.autoscaler.expander.pricing import PricingModel
from kubescale.controllers.autoscaler.metrics.autoscaler_metrics import AutoscalerMetrics
from kubescale.controllers.autoscaler.model.node_facts import (
    DELETION_CANDIDATE_TAINT,
    NodeReadiness,
    currently_being_deleted,
    node_name,
    taint_time,
)
from kubescale.controllers.autoscaler.model.pod_facts import OwnerRef, PriorityResolver
from kubescale.controllers.autoscaler.scaledown.consolidation import (
    ConsolidationCommand,
    ConsolidationInputs,
    ConsolidationTracker,
    consolidation_candidates,
    decide_consolidation,
)
from kubescale.controllers.autoscaler.scaledown.scale_down_actuator import ScaleDownActuator
from kubescale.controllers.autoscaler.scaledown.scale_down_planner import (
    NodeToRemove,
    ScaleDownPlanner,
    Unremovable,
)
from kubescale.controllers.autoscaler.scaleup.resource_limits import node_capacity
from kubescale.controllers.autoscaler.simulator.drainability import (
    Controller,
    DrainContext,
    PdbTracker,
)
from kubescale.controllers.autoscaler.simulator.scheduling_simulation import SchedulingSimulator
from kubescale.controllers.autoscaler.simulator.template_nodes import TemplateNode
from kubescale.controllers.autoscaler.simulator.utilization import Utilization
from kubescale.coordination.recent_moves import (
    RECEIVED_DESCHEDULED_PODS,
    DescheduledMove,
    placed_pods,
    protected_nodes,
)
from kubescale.objects.node import Node
from kubescale.objects.pdb import PodDisruptionBudget
from kubescale.objects.pod import Pod
from kubescale.plans.executor import Decision
from kubescale.plans.intents import ResizeNodeGroup, Taint, Untaint
from kubescale.scheduling.snapshot_journal import SnapshotJournal

__all__ = [
    "MAX_BULK_SOFT_TAINT_COUNT",
    "ScaleDownOutcome",
    "ScaleDownPhase",
    "ScaleDownReads",
    "soft_taint_plan",
]

log = component_logger("cluster-autoscaler")

MAX_BULK_SOFT_TAINT_COUNT = 10
EventSink = Callable[[str, str, str], None]


def soft_taint_plan(
    nodes: Sequence[Node], unneeded: Collection[str], now: datetime
) -> list[Taint | Untaint]:
    """Upstream's ``UpdateSoftDeletionTaints``: each unneeded node without the
    ``DeletionCandidateOfClusterAutoscaler`` taint gets it (``PreferNoSchedule``, value the
    time in Unix seconds), each tainted node no longer unneeded loses it -- in node order, at
    most :data:`MAX_BULK_SOFT_TAINT_COUNT` writes per loop (``--max-bulk-soft-taint-count``;
    the rest wait for the next loop)."""
    plan: list[Taint | Untaint] = []
    for node in nodes:
        if len(plan) >= MAX_BULK_SOFT_TAINT_COUNT:
            break
        name = node_name(node)
        tainted = taint_time(node, DELETION_CANDIDATE_TAINT) is not None
        if name in unneeded and not tainted:
            plan.append(
                Taint(
                    actor=ACTOR,
                    node=name,
                    key=DELETION_CANDIDATE_TAINT,
                    value=str(int(now.timestamp())),
                    effect="PreferNoSchedule",
                )
            )
        elif name not in unneeded and tainted:
            plan.append(Untaint(actor=ACTOR, node=name, key=DELETION_CANDIDATE_TAINT))
    return plan


@dataclass
class ScaleDownOutcome:
    unneeded: list[str] = field(default_factory=list)
    tainted: list[str] = field(default_factory=list)
    consolidation: ConsolidationCommand | None = None


@dataclass(frozen=True)
class ScaleDownReads:
    """What scale-down reads besides the snapshot, read on the loop's thread with it
    (:meth:`ScaleDownPhase.read`): the PodDisruptionBudgets, the pods other systems are
    evicting (one brain) and the descheduler's recent moves (one brain)."""

    pdbs: Sequence[PodDisruptionBudget] = ()
    in_flight: Sequence[Pod] = ()
    moves: Sequence[DescheduledMove] = ()


@dataclass
class _Replacement:
    command: ConsolidationCommand
    group_id: str
    nodes: list[tuple[Node, str]]


def _planner_pass(
    journal: SnapshotJournal, update: Callable[[], list[NodeToRemove]]
) -> list[NodeToRemove]:
    """``update`` (one planner pass) over a fork of ``journal`` (its simulated moves are for
    this pass only), within the iteration's decision (on the loop's worker thread); the fork is
    reverted there too, never by the loop while the planner still reads it."""
    journal.fork()
    try:
        return update()
    finally:
        journal.revert()


class ScaleDownPhase:
    """Scale-down and consolidation across loops (module docstring)."""

    def __init__(
        self,
        *,
        settings: AutoscalerSettings,
        metrics: AutoscalerMetrics,
        provider: CloudProvider,
        registry: ClusterStateRegistry,
        actuator: ScaleDownActuator,
        readiness: Callable[[Node], NodeReadiness],
        pdbs: Callable[[], list[PodDisruptionBudget]],
        controller: Callable[[str, OwnerRef], Controller | None],
        status_event: EventSink,
        in_flight: Callable[[datetime], Sequence[Pod]] = lambda _now: (),
        moves: Callable[[datetime], Sequence[DescheduledMove]] = lambda _now: (),
    ) -> None:
        self.in_flight = in_flight
        """Pods being evicted (the disruption ledger) that the drain budget counts."""
        self.moves = moves
        """One brain: the descheduler's recent evictions (none with ``separate``)."""
        self.settings = settings
        self.metrics = metrics
        self.provider = provider
        self.registry = registry
        self.actuator = actuator
        self.readiness = readiness
        self.pdbs = pdbs
        self.controller = controller
        self.status_event = status_event
        self.planner = ScaleDownPlanner(settings=settings)
        self.consolidation = ConsolidationTracker()
        self.replacement: _Replacement | None = None
        self.pricing = PricingModel()

    def in_cooldown(self, now: datetime, last_scale_up: datetime | None) -> bool:
        """``isScaleDownInCooldown`` (without the per-loop flag, which the caller adds)."""
        settings = self.settings
        for moment, delay in (
            (last_scale_up, settings.scale_down_delay_after_add),
            (self.actuator.last_failure, settings.scale_down_delay_after_failure),
            (self.actuator.last_delete, settings.scale_down_delay_after_delete),
        ):
            if moment is not None and moment + delay > now:
                return True
        return False

    def read(self, now: datetime) -> ScaleDownReads:
        """:class:`ScaleDownReads`, on the loop's thread (the caches and the ledger)."""
        return ScaleDownReads(
            pdbs=self.pdbs(), in_flight=list(self.in_flight(now)), moves=list(self.moves(now))
        )

    def drain_context(self, now: datetime, reads: ScaleDownReads) -> DrainContext:
        settings = self.settings
        return DrainContext(
            pdbs=PdbTracker(list(reads.pdbs), in_flight=reads.in_flight),
            now=now,
            controller=self.controller,
            skip_nodes_with_system_pods=settings.skip_nodes_with_system_pods,
            skip_nodes_with_local_storage=settings.skip_nodes_with_local_storage,
            skip_nodes_with_custom_controller_pods=settings.skip_nodes_with_custom_controller_pods,
            min_replica_count=settings.min_replica_count,
            blocking_system_pod_timeout=settings.blocking_system_pod_distruption_timeout,
        )

    def decision(
        self,
        now: datetime,
        *,
        reads: ScaleDownReads,
        snapshot: ProviderSnapshot,
        nodes: Sequence[Node],
        journal: SnapshotJournal,
        simulator: SchedulingSimulator,
        priority: PriorityResolver,
        templates: Mapping[str, TemplateNode],
        in_cooldown: bool,
        pods_pending: bool,
    ) -> Decision[ScaleDownOutcome]:
        """The module docstring's steps: each write yielded, its outcome received."""
        outcome = ScaleDownOutcome()
        in_progress = set(self.actuator.in_progress)
        sizes = {g.id: g.target_size for g in snapshot.groups.values()}
        candidates = []
        for node in nodes:
            group = snapshot.group_for_node(node)
            if group is None or node_name(node) in in_progress:
                continue
            if sizes[group.id] <= group.min_size:
                continue
            if group.rolling_out:
                # upstream's clusterapi ScaleDownNodeUpgradeProcessor: no node of a
                # MachineDeployment mid-rollout is a candidate (it stays a destination)
                continue
            candidates.append(node)
        destinations = {
            node_name(n)
            for n in nodes
            if node_name(n) not in in_progress and not currently_being_deleted(n, now)
        }
        kept = self._kept(now, journal, reads.moves)
        context = self.drain_context(now, reads)
        unneeded = _planner_pass(
            journal,
            partial(
                self.planner.update,
                now=now,
                candidates=candidates,
                destinations=destinations,
                simulator=simulator,
                provider=snapshot,
                readiness=self.readiness,
                context=context,
                priority=priority,
                kept=kept,
            ),
        )
        outcome.unneeded = sorted(c.name for c in unneeded)
        by_group: dict[str, list[str]] = {}
        for candidate in unneeded:
            by_group.setdefault(candidate.group_id, []).append(candidate.name)
        self.registry.update_scale_down_candidates(by_group, now)
        yield from self._soft_taints(nodes, {c.name for c in unneeded}, now)
        self.metrics.scale_down_in_cooldown.set(1 if in_cooldown else 0)
        if in_cooldown:
            return outcome
        empty, drain = self.planner.nodes_to_delete(
            now=now,
            provider=snapshot,
            readiness=self.readiness,
            all_nodes=nodes,
            node_capacity=node_capacity,
            deletions_in_progress=self.actuator.deletions_by_group(),
            drains_in_progress=self.actuator.drains_in_progress,
            priority=priority,
        )
        for chosen, drains in ((empty, False), (drain, True)):
            by_reason: dict[str, list[tuple[Node, str]]] = {}
            for candidate in chosen:
                if not drains:
                    reason = "empty"
                else:
                    reason = "underutilized" if self.readiness(candidate.node).ready else "unready"
                by_reason.setdefault(reason, []).append((candidate.node, candidate.group_id))
            for reason, pairs in by_reason.items():
                outcome.tainted += yield from self.actuator.start_decision(
                    pairs,
                    drain=drains,
                    reason=reason,
                    now=now,
                    report=self._reporter(journal),
                )
        if empty or drain:
            self.metrics.last_activity.labels("scaleDown").set(now.timestamp())
        elif self.settings.consolidation.policy != "Off" and not pods_pending:
            outcome.consolidation = yield from self._consolidate(
                now,
                reads=reads,
                snapshot=snapshot,
                nodes=[n for n in nodes if node_name(n) not in kept],
                journal=journal,
                priority=priority,
                templates=templates,
                destinations=destinations,
                outcome=outcome,
            )
        return outcome

    def _reporter(
        self, journal: SnapshotJournal
    ) -> Callable[[str], tuple[Utilization | None, Sequence[Pod]]]:
        """A node's utilization (this loop's eligibility check) and its pods in the loop's
        snapshot: what upstream's ``scaleDownNodeToReport`` puts in the drain-start event."""

        def report(name: str) -> tuple[Utilization | None, Sequence[Pod]]:
            state = journal.snapshot.nodes.get(name)
            return self.planner.utilization.get(name), tuple(state.pods) if state else ()

        return report

    def _kept(
        self, now: datetime, journal: SnapshotJournal, moves: Sequence[DescheduledMove]
    ) -> dict[str, Unremovable]:
        """The nodes holding fresh replacements of the descheduler's moves (one brain)."""
        if not moves:
            return {}
        protected = protected_nodes(
            moves=moves,
            pods=placed_pods({name: state.pods for name, state in journal.snapshot.nodes.items()}),
            now=now,
            window=self.settings.node_defaults.scale_down_unneeded_time,
        )
        return {
            name: Unremovable(name=name, reason=RECEIVED_DESCHEDULED_PODS, detail=p.describe())
            for name, p in protected.items()
        }

    def _soft_taints(
        self, nodes: Sequence[Node], unneeded: set[str], now: datetime
    ) -> Decision[None]:
        for intent in soft_taint_plan(nodes, unneeded, now):
            applied = yield intent
            if applied.error is not None:
                log.warning(
                    "soft taint failed",
                    extra={"fields": {"node": intent.node, "error": str(applied.error)}},
                )

    def _consolidate(
        self,
        now: datetime,
        *,
        reads: ScaleDownReads,
        snapshot: ProviderSnapshot,
        nodes: Sequence[Node],
        journal: SnapshotJournal,
        priority: PriorityResolver,
        templates: Mapping[str, TemplateNode],
        destinations: set[str],
        outcome: ScaleDownOutcome,
    ) -> Decision[ConsolidationCommand | None]:
        if self.replacement is not None:
            outcome.tainted += yield from self._finish_replacement(now)
            return None
        candidates = consolidation_candidates(
            nodes=nodes,
            snapshot=journal.snapshot,
            provider=snapshot,
            readiness=self.readiness,
            context=self.drain_context(now, reads),
            priority=priority,
            templates=templates,
            settings=self.settings,
            now=now,
            pricing=self.pricing,
        )
        autoscaled = sum(1 for n in nodes if snapshot.group_for_node(n) is not None)
        command = decide_consolidation(
            ConsolidationInputs(
                candidates=candidates,
                journal=journal,
                destinations=frozenset(destinations),
                groups=list(snapshot.groups.values()),
                templates=templates,
                settings=self.settings,
                total_nodes=autoscaled,
                disrupting=len(self.actuator.in_progress),
                now=now,
                pricing=self.pricing,
                priority=priority.priority,
            )
        )
        act = self.consolidation.offer(command, now=now, settings=self.settings)
        if act is None:
            return None
        chosen = [(c.node, c.group.id) for c in candidates if c.name in act.nodes]
        self.metrics.consolidation_actions_total.labels(act.method).inc()
        if act.method == "Replace" and act.replacement is not None:
            group = snapshot.groups[act.replacement]
            applied = yield ResizeNodeGroup(actor=ACTOR, group=group.id, delta=1)
            err = node_group_failure(applied)
            if err is not None and not isinstance(err, WriteOutcomeUnknown):
                log.warning("replacement failed", extra={"fields": {"error": str(err)}})
                return act
            # done, or unanswered (counted as done): the replaced nodes are drained once the
            # new node is up, or given up when its scale-up times out and the group backs off
            self.registry.register_scale_up(group, 1, now)
            self.replacement = _Replacement(command=act, group_id=group.id, nodes=chosen)
            self.status_event(
                "Normal",
                "ConsolidationReplace",
                f"Consolidation: replacing {', '.join(act.nodes)} with a node of {group.id} "
                f"(saves {act.savings_per_hour:.4f}/h)",
            )
            return act
        self.status_event(
            "Normal",
            "ConsolidationDelete",
            f"Consolidation: removing {', '.join(act.nodes)} (saves {act.savings_per_hour:.4f}/h)",
        )
        self.metrics.consolidation_savings.inc(act.savings_per_hour)
        outcome.tainted += yield from self.actuator.start_decision(
            chosen,
            drain=act.method != "Empty",
            reason="consolidation",
            now=now,
            report=self._reporter(journal),
        )
        return act

    def _finish_replacement(self, now: datetime) -> Decision[list[str]]:
        replacement = self.replacement
        if replacement is None or replacement.group_id in self.registry.scale_up_requests:
            return []  # the new node is not there yet
        self.replacement = None
        if self.registry.backoff.status(replacement.group_id, now) is not None:
            log.warning(
                "replacement node did not come up; consolidation abandoned",
                extra={"fields": {"group": replacement.group_id}},
            )
            return []
        self.metrics.consolidation_savings.inc(replacement.command.savings_per_hour)
        return (
            yield from self.actuator.start_decision(
                replacement.nodes, drain=True, reason="consolidation", now=now
            )
        )
