"""One iteration of the cluster autoscaler (upstream's ``StaticAutoscaler.RunOnce``) as one
decision: ``decide(snapshot, memory, now)``, a generator of intents (docs/plans.md).

The loop (:mod:`.autoscaler_loop`) reads the snapshot on its thread — the provider's snapshot,
the cluster snapshot, and what the steps below read besides (:class:`RunOnceSnapshot`) — and
drives this decision through the one :class:`~kubescale.plans.executor.PlanExecutor`, each step
up to the next intent computing on the loop's worker thread
(:meth:`kubescale.runtime.off_loop.OffLoop.drive`). Every write of the iteration is an intent it
yields; where a later step needs an earlier outcome it receives the
:class:`~kubescale.plans.executor.Applied` result (a scale-up's success puts scale-down in
cooldown; a resize left unanswered counts as done). The status events
(:meth:`.loop_status.StatusReporter.event`) are yielded where they are recorded
(:meth:`.loop_status.StatusReporter.collecting`).

The steps, in upstream's order (``core/static_autoscaler.go`` ``RunOnce``; reference §1):

1. first iteration only: the status ConfigMap ``Initializing`` (upstream writes it when the
   autoscaler starts), ``cleanUpIfRequired`` — the ToBeDeleted taints an earlier run left. The
   snapshot was read before these writes, as upstream's lists (informer caches) are read right
   after them and do not show them yet either: the first iteration decides on the old taints;
2. the node groups the provider skipped are reported (``InvalidNodeGroup``);
3. ``updateClusterState``: the cluster state registry learns the snapshot; timed-out scale-ups
   are taken back, instance creation errors reported;
4. ``removeOldUnregisteredNodes``; the groups it resized are not scaled up on this iteration's
   stale target sizes (:mod:`.autoscaler_loop`, step 4);
5. an unhealthy cluster ends the iteration (``ClusterUnhealthy``);
6. ``deleteCreatedNodesWithErrors``; ``fixNodeGroupSize`` — a fix ends the iteration;
7. upcoming nodes into the snapshot, ``filterOutSchedulable``, ``filterOutYoungPods``,
   ``shouldScaleUp``, the scale-up (its execution receives each resize's outcome);
8. scale-down (the planner, the soft taints, the actuator's new deletions, consolidation),
   in cooldown after this iteration's successful scale-up (upstream: ``ScaleDownInCooldown``
   once ``scaleUpStatus.Result == ScaleUpSuccessful``);
9. the actuator advances the deletions in progress (drains, node deletions) — upstream's
   actuator does it in its own goroutines, started by the scale-down;
10. ``--enforce-node-group-min-size`` (``ScaleUpToNodeGroupMinSize``, the last step of
    upstream's ``RunOnce``, after the scale-down), on the target sizes this iteration's
    scale-up set (received from it, not the snapshot's older ones: a group is not raised
    twice for the same missing nodes);
11. the status ConfigMap, whatever happened (upstream's deferred ``WriteStatusConfigMap``).

The drains read the pods per node as the snapshot holds them (upstream's actuator takes the
pods to evict from its cluster snapshot too).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from kubescale.base.logs import component_logger
from kubescale.controllers.autoscaler.cloudprovider.cloud_provider import ProviderSnapshot
from kubescale.controllers.autoscaler.clusterstate.cluster_state import ClusterStateRegistry
from kubescale.controllers.autoscaler.config.autoscaler_settings import AutoscalerSettings
from kubescale.controllers.autoscaler.core.loop_housekeeping import Housekeeping
from kubescale.controllers.autoscaler.core.loop_scale_down import ScaleDownPhase, ScaleDownReads
from kubescale.controllers.autoscaler.core.loop_scale_up import (
    ScaleUpPhase,
    inject_upcoming,
    pods_of_draining_nodes,
)
from kubescale.controllers.autoscaler.core.loop_status import StatusReporter
from kubescale.controllers.autoscaler.core.pod_lists import (
    PodsBySchedulability,
    all_pods_are_new,
    drop_expendable,
    drop_young_pods,
    filter_out_schedulable,
)
from kubescale.controllers.autoscaler.metrics.autoscaler_metrics import AutoscalerMetrics
from kubescale.controllers.autoscaler.model.node_facts import NodeReadiness, node_name
from kubescale.controllers.autoscaler.model.pod_facts import PriorityResolver
from kubescale.controllers.autoscaler.scaledown.consolidation import ConsolidationCommand
from kubescale.controllers.autoscaler.scaledown.scale_down_actuator import ScaleDownActuator
from kubescale.controllers.autoscaler.scaleup.scale_up import ScaleUpDecision
from kubescale.controllers.autoscaler.simulator.scheduling_simulation import SchedulingSimulator
from kubescale.controllers.autoscaler.simulator.template_nodes import TemplateNode
from kubescale.objects.config_map import ConfigMap
from kubescale.objects.node import Node
from kubescale.objects.pod import Pod
from kubescale.plans.executor import Decision
from kubescale.scheduling.snapshot_journal import SnapshotJournal

__all__ = [
    "BuiltSnapshot",
    "LoopReport",
    "RunOnceMemory",
    "RunOnceSnapshot",
    "decide",
]

log = component_logger("cluster-autoscaler")


@dataclass
class LoopReport:
    """What the last iteration did (tests, the simulator's timeline)."""

    scale_up: ScaleUpDecision | None = None
    scaled_up: list[tuple[str, int, int]] = field(default_factory=list)
    tainted: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    evicted: list[str] = field(default_factory=list)
    unneeded: list[str] = field(default_factory=list)
    consolidation: ConsolidationCommand | None = None
    stopped: str = ""
    """Why the loop stopped early (``ClusterUnhealthy``, ``FixedNodeGroupSizes``), if it did."""


class BuiltSnapshot(Protocol):
    """The cluster snapshot the loop builds (``AutoscalerLoop._build``)."""

    @property
    def nodes(self) -> list[Node]: ...
    @property
    def all_pods(self) -> list[Pod]: ...
    @property
    def priority(self) -> PriorityResolver: ...
    @property
    def lists(self) -> PodsBySchedulability: ...
    @property
    def journal(self) -> SnapshotJournal: ...
    @property
    def templates(self) -> dict[str, TemplateNode]: ...
    @property
    def pod_keys(self) -> list[tuple[str, str]]: ...


@dataclass(frozen=True)
class RunOnceSnapshot:
    """Everything one iteration decides on, read on the loop's thread before it decides."""

    provider: ProviderSnapshot
    built: BuiltSnapshot
    first: bool = False
    """The process's first iteration (step 1)."""
    pods_by_node: Mapping[str, Sequence[Pod]] = field(default_factory=dict)
    """Each node's pods as the informer showed them (not as the VPA will make them): what
    the drains evict."""
    going: Collection[str] = frozenset()
    """Pods (``namespace/name``) another system is evicting (one brain): the drains leave
    them."""
    scale_down: ScaleDownReads = field(default_factory=ScaleDownReads)
    priority_config_map: ConfigMap | None = None
    """The priority expander's ConfigMap."""


@dataclass
class RunOnceMemory:
    """What the autoscaler keeps between iterations: its registry, the phases' state (the
    planner's unneeded times, the actuator's deletions in progress, the status history),
    the last scale-up and the last iteration's report."""

    settings: AutoscalerSettings
    metrics: AutoscalerMetrics
    registry: ClusterStateRegistry
    housekeeping: Housekeeping
    scale_up: ScaleUpPhase
    scale_down: ScaleDownPhase
    actuator: ScaleDownActuator
    status: StatusReporter
    readiness: Callable[[Node], NodeReadiness]
    cpu_clock: Callable[[], float]
    hints: dict[tuple[str, str], str] = field(default_factory=dict)
    """The scheduling simulator's hints (pod → node it fit last time)."""
    last_scale_up: datetime | None = None
    report: LoopReport = field(default_factory=LoopReport)

    def timed(self, function: str, started: float) -> None:
        """``cluster_autoscaler_function_duration_seconds{function}`` since ``started``."""
        self.metrics.function_duration_seconds.labels(function).observe(self.cpu_clock() - started)


def pending_pods(
    built: BuiltSnapshot,
    memory: RunOnceMemory,
    upcoming: Mapping[str, int],
    registered: Mapping[str, Sequence[str]],
    draining: list[str],
) -> tuple[set[str], list[Pod], SchedulingSimulator]:
    """Upcoming nodes into the snapshot, then the pending pods that still need room
    (``filterOutSchedulable``): the registered not-started nodes taken out, the pods, the
    simulator (on the snapshot with the pods that fit placed)."""
    journal, priority = built.journal, built.priority
    not_started = inject_upcoming(journal, built.templates, upcoming, registered)
    cutoff = memory.settings.expendable_pods_priority_cutoff
    pending: list[Pod] = list(
        drop_expendable(built.lists.unschedulable, cutoff=cutoff, priority=priority)
    )
    pending += pods_of_draining_nodes(journal, draining)
    simulator = SchedulingSimulator(journal)
    simulator.hints = memory.hints
    step = memory.cpu_clock()
    pending, _ = filter_out_schedulable(pending, simulator=simulator, priority=priority)
    memory.timed("filterOutSchedulable", step)
    simulator.forget_hints(built.pod_keys)
    return not_started, pending, simulator


def decide(snapshot: RunOnceSnapshot, memory: RunOnceMemory, now: datetime) -> Decision[LoopReport]:
    """One iteration (module docstring): its intents, in upstream's order, the status events
    among them; returns the iteration's report (also kept as ``memory.report``). An error in
    a step still ends with the status ConfigMap (upstream's deferred write), then is raised."""
    memory.report = LoopReport()
    return memory.status.collecting(_iteration_then_status(snapshot, memory, now))


def _iteration_then_status(
    snapshot: RunOnceSnapshot, memory: RunOnceMemory, now: datetime
) -> Decision[LoopReport]:
    failure: Exception | None = None
    try:
        yield from _iteration(snapshot, memory, now)
    except Exception as err:  # not BaseException: a cancellation or a close goes through
        failure = err
    # 11. upstream's deferred WriteStatusConfigMap: whatever happened
    yield from memory.status.decision(now, memory.registry)
    if failure is not None:
        raise failure
    return memory.report


def _iteration(snapshot: RunOnceSnapshot, memory: RunOnceMemory, now: datetime) -> Decision[None]:
    settings, registry, report = memory.settings, memory.registry, memory.report
    provider, built = snapshot.provider, snapshot.built
    nodes = built.nodes
    housekeeping = memory.housekeeping
    # 1. first iteration: Initializing, then cleanUpIfRequired
    if snapshot.first:
        yield from memory.status.decision(now, registry, initializing=True)
        yield from housekeeping.clean_up_decision(nodes)
    # 2. node groups skipped
    yield from housekeeping.problems_decision(provider)
    # 3. updateClusterState
    effects = registry.update(nodes=nodes, snapshot=provider, readiness=memory.readiness, now=now)
    yield from housekeeping.state_effects_decision(effects)
    # 4. removeOldUnregisteredNodes
    resized = yield from housekeeping.unregistered_decision(provider, registry.long_unregistered())
    # 5. IsClusterHealthy
    if not registry.is_cluster_healthy():
        memory.scale_down.planner.clear()
        memory.status.event("Warning", "ClusterUnhealthy", "Cluster is unhealthy")
        report.stopped = "ClusterUnhealthy"
        log.warning("cluster is not ready for autoscaling")
        return
    # 6. deleteCreatedNodesWithErrors, fixNodeGroupSize
    yield from housekeeping.created_with_errors_decision(provider)
    if (yield from housekeeping.fix_sizes_decision(provider, now)):
        report.stopped = "FixedNodeGroupSizes"
        return
    # 7. scale-up
    up = yield from _scale_up(snapshot, memory, now, resized)
    not_started, pending, simulator = up.not_started, up.pending, up.simulator
    # 8. scale-down
    if settings.scale_down_enabled:
        step = memory.cpu_clock()
        in_cooldown = up.scale_down_disabled or memory.scale_down.in_cooldown(
            now, memory.last_scale_up
        )
        result = yield from memory.scale_down.decision(
            now,
            reads=snapshot.scale_down,
            snapshot=provider,
            nodes=[n for n in nodes if node_name(n) not in not_started],
            journal=built.journal,
            simulator=simulator,
            priority=built.priority,
            templates=built.templates,
            in_cooldown=in_cooldown,
            pods_pending=bool(pending),
        )
        memory.timed("scaleDown", step)
        report.unneeded = result.unneeded
        report.tainted = result.tainted
        report.consolidation = result.consolidation
    # 9. the deletions in progress
    actuator = memory.actuator
    yield from actuator.decide(
        now=now,
        pods_by_node=snapshot.pods_by_node,
        existing_nodes={node_name(n) for n in nodes},
        snapshot=provider,
        registry=registry,
        going=snapshot.going,
    )
    report.deleted = list(actuator.deleted)
    report.evicted = list(actuator.evicted)
    # 10. --enforce-node-group-min-size, on the sizes step 7 set
    if settings.enforce_node_group_min_size:
        sizes = {group: after for group, _, after in report.scaled_up}
        yield from memory.scale_up.min_size_decision(provider, now, sizes)


@dataclass
class _ScaleUpStep:
    not_started: set[str]
    pending: list[Pod]
    simulator: SchedulingSimulator
    scale_down_disabled: bool = False
    """``shouldScaleUp``: every pending pod is new, more are probably coming."""


def _scale_up(
    snapshot: RunOnceSnapshot, memory: RunOnceMemory, now: datetime, resized: Collection[str]
) -> Decision[_ScaleUpStep]:
    settings, registry, report = memory.settings, memory.registry, memory.report
    provider, built = snapshot.provider, snapshot.built
    upcoming, registered = registry.upcoming_nodes()
    ready_nodes = [n for n in built.nodes if memory.readiness(n).ready]
    not_started, pending, simulator = pending_pods(
        built, memory, upcoming, registered, list(memory.actuator.in_progress)
    )
    pending = drop_young_pods(pending, now=now, delay=settings.new_pod_scale_up_delay)
    memory.metrics.unschedulable_pods_count.labels("unschedulable").set(len(pending))
    step = _ScaleUpStep(not_started=not_started, pending=pending, simulator=simulator)
    if not pending:
        return step
    if settings.max_nodes_total > 0 and len(ready_nodes) >= settings.max_nodes_total:
        message = f"Max total nodes in cluster reached: {settings.max_nodes_total}"
        memory.status.event("Warning", "MaxNodesTotalReached", message)
        memory.metrics.skipped_scale_events_count.labels("up", "MaxNodesTotalReached").inc()
    elif all_pods_are_new(pending, now=now):
        step.scale_down_disabled = True  # more pods are probably coming
    else:
        started = memory.cpu_clock()
        outcome = yield from memory.scale_up.decision(
            pending=pending,
            snapshot=provider,
            templates=built.templates,
            journal=built.journal,
            ready_nodes=ready_nodes,
            upcoming=sum(upcoming.values()),
            resized=resized,
            nodes=built.nodes,
            now=now,
            config_map=snapshot.priority_config_map,
        )
        memory.timed("scaleUp", started)
        report.scale_up = outcome.decision
        report.scaled_up = outcome.scaled_up
        if outcome.succeeded:
            memory.last_scale_up = now  # scale-down in cooldown from here
    return step
