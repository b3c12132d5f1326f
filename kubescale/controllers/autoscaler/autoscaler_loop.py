"""The cluster autoscaler's loop: upstream's ``StaticAutoscaler.RunOnce``, one call per scan.

Steps, in upstream's order (reference §1); the decisions are the pure modules of this package,
this module reads the caches and carries the decisions out:

1. first loop only: ToBeDeleted taints left by an earlier run are removed;
2. nodes and their readiness (startup taints make a node not ready), pods by schedulability,
   the provider's snapshot (malformed node groups are reported as Warning events
   ``InvalidNodeGroup`` on their object and skipped), the cluster snapshot of nodes and
   non-expendable scheduled pods, template nodes;
3. the cluster state registry is updated; timed-out scale-ups are taken back
   (``DecreaseTargetSize``, event ``ScaleUpTimedOut``), instance creation errors reported;
4. instances unregistered for longer than ``--max-node-provision-time`` are deleted (within
   target − min unless ``--force-delete-unregistered-nodes``; event ``DeleteUnregistered``);
5. an unhealthy cluster stops the loop here (event ``ClusterUnhealthy``, unneeded nodes
   forgotten);
6. instances whose creation failed are deleted; a group whose size is wrong for longer than
   ``--max-node-provision-time`` is fixed (``DecreaseTargetSize``), and the loop stops;
7. upcoming nodes join the snapshot as template copies; pending pods that fit the snapshot are
   placed there (they need no new node); young pods wait; the rest go to the scale-up decision,
   carried out by :mod:`.scale_up_executor`;
8. scale-down: the planner finds unneeded nodes (``DeletionCandidate`` soft taints follow it),
   and — unless in cooldown after a scale-up (``--scale-down-delay-after-add``), a deletion or a
   failure — the nodes to delete go to the actuator (:mod:`.scale_down_actuator`), which also
   advances the drains in progress every loop; then, when enabled, consolidation
   (:mod:`.consolidation`);
9. the status ConfigMap and the metrics are written whatever happened.

Upstream starts with scale-down in cooldown (its last scale-up time is its start time), so no
node is removed in the first ``--scale-down-delay-after-add`` after a start; so does kubescale.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from kubescale.base.logs import component_logger
from kubescale.kube.client import KubeClient
from kubescale.kube.errors import KubeApiError, KubeError
from kubescale.kube.events import EventRecorder
from kubescale.kube.informer_set import InformerSet
from kubescale.kube.resources import (
    CONFIG_MAPS,
    DAEMON_SETS,
    JOBS,
    NAMESPACES,
    NODES,
    POD_DISRUPTION_BUDGETS,
    PODS,
    PRIORITY_CLASSES,
    REPLICA_SETS,
    STATEFUL_SETS,
)
from kubescale.scheduling.fit import ClusterSnapshot
from kubescale.scheduling.pod_resources import RequestCache, amounts_of
from kubescale.scheduling.snapshot_journal import SnapshotJournal

from .autoscaler_config import AutoscalerSettings
from .autoscaler_metrics import AutoscalerMetrics
from .backoff import ExponentialBackoff
from .cloud_provider import CloudProvider, ProviderError, ProviderSnapshot
from .cluster_state import (
    ClusterStateRegistry,
    HealthConfig,
    InstanceCreationFailed,
    ScaleUpTimedOut,
    go_duration,
)
from .clusterapi_provider import ClusterApiProvider
from .consolidation import (
    ConsolidationCommand,
    ConsolidationInputs,
    ConsolidationTracker,
    consolidation_candidates,
    decide_consolidation,
)
from .drainability import DrainContext, PdbTracker
from .expanders import ExpanderChain, ExpanderFilter, LeastNodes, LeastWaste, MostPods, RandomPick
from .go_time import go_time_string
from .node_facts import (
    DELETION_CANDIDATE_TAINT,
    TO_BE_DELETED_TAINT,
    currently_being_deleted,
    node_name,
    node_readiness,
    taint_time,
)
from .pod_facts import OwnerRef, PriorityResolver, is_daemonset_pod, is_mirror_pod
from .pod_lists import (
    all_pods_are_new,
    drop_expendable,
    drop_young_pods,
    filter_out_schedulable,
    pods_by_schedulability,
)
from .price_expander import PriceExpander
from .pricing import PricingModel
from .priority_expander import PRIORITY_CONFIG_MAP, PriorityExpander
from .resource_limits import cores_and_memory
from .scale_down_actuator import ScaleDownActuator
from .scale_down_planner import ScaleDownPlanner
from .scale_up import ScaleUpDecision, ScaleUpInputs, ScaleUpResult, decide_scale_up
from .scale_up_executor import execute_scale_up, record_pod_events
from .scheduling_simulation import SchedulingSimulator
from .status_configmap import StatusHistory, build_status, status_config_map
from .template_nodes import TemplateRegistry

__all__ = ["LOOP_NAME", "AutoscalerLoop", "LoopReport"]

log = component_logger("cluster-autoscaler")

LOOP_NAME: Final = "cluster-autoscaler"
MAX_BULK_SOFT_TAINT_COUNT: Final = 10
Node = Mapping[str, Any]
Pod = Mapping[str, Any]


@dataclass
class LoopReport:
    """What the last ``run_once`` did (tests, the simulator's timeline)."""

    scale_up: ScaleUpDecision | None = None
    scaled_up: list[tuple[str, int, int]] = field(default_factory=list)
    tainted: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    evicted: list[str] = field(default_factory=list)
    unneeded: list[str] = field(default_factory=list)
    consolidation: ConsolidationCommand | None = None
    stopped: str = ""
    """Why the loop stopped early (``ClusterUnhealthy``, ``FixedNodeGroupSizes``), if it did."""


@dataclass
class _Replacement:
    command: ConsolidationCommand
    group_id: str
    nodes: list[tuple[Node, str]]


def build_expander(
    settings: AutoscalerSettings,
    *,
    rng: random.Random,
    cluster_nodes: int,
    config_map: Callable[[], Mapping[str, Any] | None],
) -> ExpanderChain:
    filters: list[ExpanderFilter] = []
    for name in settings.expander:
        if name == "random":
            filters.append(RandomPick(rng=rng))
        elif name == "most-pods":
            filters.append(MostPods())
        elif name == "least-waste":
            filters.append(LeastWaste())
        elif name == "least-nodes":
            filters.append(LeastNodes())
        elif name == "price":
            filters.append(PriceExpander(cluster_nodes=cluster_nodes))
        elif name == "priority":
            filters.append(PriorityExpander(config_map=config_map))
    return ExpanderChain(filters, rng=rng)


class AutoscalerLoop:
    """``RunOnce`` (module docstring); a :class:`kubescale.runtime.loop_runner.Loop`."""

    name = LOOP_NAME

    def __init__(
        self,
        *,
        client: KubeClient,
        informers: InformerSet,
        settings: AutoscalerSettings,
        metrics: AutoscalerMetrics,
        events: EventRecorder,
        provider: CloudProvider | None = None,
        rng: random.Random | None = None,
        cpu_clock: Callable[[], float] = time.process_time,
    ) -> None:
        self.client = client
        self.informers = informers
        self.settings = settings
        self.metrics = metrics
        self.events = events
        self.rng = rng or random.Random(0)
        self.cpu_clock = cpu_clock
        self.provider: CloudProvider = provider or ClusterApiProvider(
            client=client,
            informers=informers,
            defaults=settings.node_defaults,
            discovery=settings.auto_discovery,
        )
        self.nodes = informers.informer(NODES)
        self.pods = informers.informer(PODS)
        self.daemon_sets = informers.informer(DAEMON_SETS)
        self.pdbs = informers.informer(POD_DISRUPTION_BUDGETS)
        self.priority_classes = informers.informer(PRIORITY_CLASSES)
        self.namespaces = informers.informer(NAMESPACES)
        self.replica_sets = informers.informer(REPLICA_SETS)
        self.stateful_sets = informers.informer(STATEFUL_SETS)
        self.jobs = informers.informer(JOBS)
        self.config_maps = informers.informer(CONFIG_MAPS, namespace=settings.namespace)
        self.registry = ClusterStateRegistry(
            health=HealthConfig(
                ok_total_unready_count=settings.ok_total_unready_count,
                max_total_unready_percentage=settings.max_total_unready_percentage,
            ),
            backoff=ExponentialBackoff(
                initial=settings.initial_node_group_backoff_duration,
                maximum=settings.max_node_group_backoff_duration,
                reset_timeout=settings.node_group_backoff_reset_timeout,
            ),
        )
        self.templates = TemplateRegistry(
            startup_taints=settings.startup_taints, status_taints=settings.status_taints
        )
        self.planner = ScaleDownPlanner(settings=settings)
        self.actuator = ScaleDownActuator(
            client=client,
            provider=self.provider,
            events=events,
            metrics=metrics,
            settings=settings,
            status_event=self.status_event,
        )
        self.consolidation = ConsolidationTracker()
        self.history = StatusHistory()
        self.pricing = PricingModel()
        self.requests = RequestCache()
        self.hints: dict[tuple[str, str], str] = {}
        self.started: datetime | None = None
        self.last_scale_up: datetime | None = None
        self.replacement: _Replacement | None = None
        self.status_object: dict[str, Any] | None = None
        self.reported_problems: set[str] = set()
        self.report = LoopReport()
        self.iterations = 0

    # ------------------------------------------------------------------------ plumbing

    async def wait_for_resource_version(self, resource_version: str, *, within: float) -> bool:
        """Every informer of the loop reflects ``resource_version`` (the simulator's settling)."""
        return await self.informers.wait_for_resource_version(resource_version, within=within)

    def status_event(self, type_: str, reason: str, message: str) -> None:
        """An event on the status ConfigMap (upstream's ``LogRecorder``)."""
        if self.status_object is not None:
            self.events.event(self.status_object, type=type_, reason=reason, message=message)

    def readiness(self, node: Node) -> Any:
        return node_readiness(node, self.settings.startup_taints)

    def _controller(self, namespace: str, owner: OwnerRef) -> Mapping[str, Any] | None:
        informer = {
            "ReplicaSet": self.replica_sets,
            "StatefulSet": self.stateful_sets,
            "Job": self.jobs,
            "DaemonSet": self.daemon_sets,
        }.get(owner.kind)
        if informer is None:
            return {}  # a kind kubescale does not watch (ReplicationController): assume it exists
        return informer.lister.get(owner.name, namespace)

    def _timed(self, function: str, started: float) -> None:
        self.metrics.function_duration_seconds.labels(function).observe(self.cpu_clock() - started)

    # ------------------------------------------------------------------------ run once

    async def run_once(self, now: datetime) -> None:
        self.iterations += 1
        self.report = LoopReport()
        started = self.cpu_clock()
        if self.started is None:
            self.started = now
            self.last_scale_up = now  # upstream: scale-down starts in cooldown
            await self._write_status(now, initializing=True)
            await self._clean_up_taints()
        snapshot = self.provider.refresh()
        try:
            await self._run(now, snapshot)
        finally:
            self._update_metrics(snapshot, now)
            await self._write_status(now)
            self.metrics.last_activity.labels("main").set(now.timestamp())
            self._timed("main", started)

    async def _run(self, now: datetime, snapshot: ProviderSnapshot) -> None:
        settings = self.settings
        self._report_problems(snapshot)
        nodes = sorted(self.nodes.lister.list(), key=node_name)
        all_pods = self.pods.lister.list()
        priority = PriorityResolver(self.priority_classes.lister.list())
        lists = pods_by_schedulability(all_pods)
        scheduled = drop_expendable(
            lists.scheduled, cutoff=settings.expendable_pods_priority_cutoff, priority=priority
        )
        cluster = ClusterSnapshot.build(
            nodes=nodes,
            pods=scheduled,
            namespace_labels={
                str(n["metadata"]["name"]): dict(n["metadata"].get("labels") or {})
                for n in self.namespaces.lister.list()
            },
            requests=self.requests,
        )
        self.requests.forget_missing(
            (str(p["metadata"].get("namespace", "")), str(p["metadata"]["name"])) for p in all_pods
        )
        journal = SnapshotJournal(cluster)
        pods_by_node: dict[str, list[Pod]] = {
            name: list(state.pods) for name, state in cluster.nodes.items()
        }
        templates = self.templates.recompute(
            snapshot=snapshot,
            nodes=nodes,
            pods_by_node=pods_by_node,
            daemon_sets=self.daemon_sets.lister.list(),
            readiness=self.readiness,
            being_deleted=lambda n: currently_being_deleted(n, now),
        )
        effects = self.registry.update(
            nodes=nodes, snapshot=snapshot, readiness=self.readiness, now=now
        )
        await self._apply_state_effects(effects)
        await self._remove_old_unregistered(snapshot)
        if not self.registry.is_cluster_healthy():
            self.planner.clear()
            self.status_event("Warning", "ClusterUnhealthy", "Cluster is unhealthy")
            self.report.stopped = "ClusterUnhealthy"
            log.warning("cluster is not ready for autoscaling")
            return
        await self._delete_created_with_errors(snapshot)
        if await self._fix_node_group_sizes(snapshot, now):
            self.report.stopped = "FixedNodeGroupSizes"
            return
        # --------------------------------------------------------------- scale-up
        not_started = self._inject_upcoming(journal, templates, now)
        ready_nodes = [n for n in nodes if self.readiness(n).ready]
        pending = drop_expendable(
            lists.unschedulable, cutoff=settings.expendable_pods_priority_cutoff, priority=priority
        )
        pending += self._pods_of_draining_nodes(journal)
        simulator = SchedulingSimulator(journal)
        simulator.hints = self.hints
        step = self.cpu_clock()
        pending, _ = filter_out_schedulable(pending, simulator=simulator, priority=priority)
        self._timed("filterOutSchedulable", step)
        simulator.forget_hints(
            (str(p["metadata"].get("namespace", "")), str(p["metadata"]["name"])) for p in all_pods
        )
        pending = drop_young_pods(pending, now=now, delay=settings.new_pod_scale_up_delay)
        self.metrics.unschedulable_pods_count.labels("unschedulable").set(len(pending))
        scale_down_disabled_for_loop = False
        if pending:
            if settings.max_nodes_total > 0 and len(ready_nodes) >= settings.max_nodes_total:
                message = f"Max total nodes in cluster reached: {settings.max_nodes_total}"
                self.status_event("Warning", "MaxNodesTotalReached", message)
                self.metrics.skipped_scale_events_count.labels("up", "MaxNodesTotalReached").inc()
            elif all_pods_are_new(pending, now=now):
                scale_down_disabled_for_loop = True  # more pods are probably coming
            else:
                await self._scale_up(
                    pending=pending,
                    snapshot=snapshot,
                    templates=templates,
                    journal=journal,
                    ready_nodes=ready_nodes,
                    nodes=nodes,
                    now=now,
                )
        # ------------------------------------------------------------- scale-down
        if settings.scale_down_enabled:
            await self._scale_down(
                now,
                snapshot=snapshot,
                nodes=[n for n in nodes if node_name(n) not in not_started],
                journal=journal,
                simulator=simulator,
                priority=priority,
                templates=templates,
                in_cooldown=scale_down_disabled_for_loop or self._in_cooldown(now),
                pods_pending=bool(pending),
            )
        await self.actuator.progress(
            now=now,
            pods_by_node={n: self.pods.lister.by_node(n) for n in self.actuator.in_progress},
            existing_nodes={node_name(n) for n in nodes},
            snapshot=snapshot,
            registry=self.registry,
        )
        self.report.deleted = list(self.actuator.deleted)
        self.report.evicted = list(self.actuator.evicted)
        if settings.enforce_node_group_min_size:
            await self._scale_up_to_min_size(snapshot, now)

    # --------------------------------------------------------------------- housekeeping

    def _report_problems(self, snapshot: ProviderSnapshot) -> None:
        current = {p.message for p in snapshot.problems}
        for problem in snapshot.problems:
            if problem.message in self.reported_problems:
                continue
            log.warning("node group skipped", extra={"fields": {"problem": problem.message}})
            if problem.source is not None:
                self.events.event(
                    problem.source,
                    type="Warning",
                    reason="InvalidNodeGroup",
                    message=problem.message,
                )
        self.reported_problems = current

    async def _clean_up_taints(self) -> None:
        """``cleanUpIfRequired``: ToBeDeleted taints an earlier run left behind."""
        for node in self.nodes.lister.list():
            if taint_time(node, TO_BE_DELETED_TAINT) is None:
                continue
            try:
                await self.actuator.nodes.clean_to_be_deleted(
                    node_name(node), uncordon=self.settings.cordon_node_before_terminating
                )
            except KubeError as err:
                log.warning("cannot clean up a taint", extra={"fields": {"error": str(err)}})

    async def _apply_state_effects(self, effects: Sequence[object]) -> None:
        for effect in effects:
            if isinstance(effect, ScaleUpTimedOut):
                group = effect.group
                waited = go_duration(effect.waited)
                self.status_event(
                    "Warning",
                    "ScaleUpTimedOut",
                    f"Nodes added to group {group.id} failed to register within {waited}",
                )
                self.metrics.failed_scale_ups_total.labels("timeout").inc()
                try:
                    await self.provider.decrease_target_size(group, -effect.increase)
                except ProviderError as err:
                    self.status_event(
                        "Warning",
                        "FailedToRevertScaleUp",
                        f"Failed to decrease target size for group {group.id} after scale-up "
                        f"timeout: {err}",
                    )
            elif isinstance(effect, InstanceCreationFailed):
                self.status_event(
                    "Warning",
                    "ScaleUpFailed",
                    f"Failed adding {effect.count} nodes to group {effect.group.id} due to "
                    f"{effect.error.error_class.value}.{effect.error.code}; source errors: "
                    f"{effect.error.message}",
                )
                self.metrics.failed_scale_ups_total.labels("cloudProviderError").inc()

    async def _remove_old_unregistered(self, snapshot: ProviderSnapshot) -> None:
        """``removeOldUnregisteredNodes``."""
        removed: dict[str, int] = {}
        for unregistered in self.registry.long_unregistered():
            group = snapshot.groups.get(unregistered.group_id)
            if group is None:
                continue
            done = removed.get(group.id, 0)
            if not self.settings.force_delete_unregistered_nodes and (
                group.target_size - done <= group.min_size
            ):
                continue
            fake = {
                "metadata": {"name": unregistered.instance_id},
                "spec": {"providerID": unregistered.instance_id},
            }
            try:
                await self.provider.delete_nodes(group, [fake])
            except ProviderError as err:
                self.status_event(
                    "Warning",
                    "DeleteUnregisteredFailed",
                    f"Failed to remove node {unregistered.instance_id}: {err}",
                )
                continue
            removed[group.id] = done + 1
            self.status_event(
                "Normal",
                "DeleteUnregistered",
                f"Removed unregistered node {unregistered.instance_id}",
            )
            self.metrics.old_unregistered_nodes_removed_count.inc()

    async def _delete_created_with_errors(self, snapshot: ProviderSnapshot) -> None:
        """``deleteCreatedNodesWithErrors``: instances whose creation failed."""
        for group in snapshot.groups.values():
            failed = [i for i in group.instances if i.error is not None]
            if not failed:
                continue
            fakes = [{"metadata": {"name": i.id}, "spec": {"providerID": i.id}} for i in failed]
            try:
                await self.provider.delete_nodes(group, fakes)
            except ProviderError as err:
                log.warning(
                    "cannot delete failed instances",
                    extra={"fields": {"group": group.id, "error": str(err)}},
                )

    async def _fix_node_group_sizes(self, snapshot: ProviderSnapshot, now: datetime) -> bool:
        """``fixNodeGroupSize``: a size wrong for longer than the provision time is lowered."""
        fixed = False
        for group in snapshot.groups.values():
            incorrect = self.registry.incorrect_sizes.get(group.id)
            if incorrect is None:
                continue
            if incorrect.first_observed + group.options.max_node_provision_time > now:
                continue
            delta = incorrect.current - incorrect.expected
            if delta >= 0:
                continue
            log.info(
                "fixing node group size",
                extra={
                    "fields": {
                        "group": group.id,
                        "from": incorrect.expected,
                        "to": incorrect.current,
                    }
                },
            )
            try:
                await self.provider.decrease_target_size(group, delta)
            except ProviderError as err:
                log.warning("cannot fix node group size", extra={"fields": {"error": str(err)}})
                continue
            fixed = True
        return fixed

    # ------------------------------------------------------------------------- scale-up

    def _inject_upcoming(
        self, journal: SnapshotJournal, templates: Mapping[str, Any], now: datetime
    ) -> set[str]:
        """Upcoming nodes as template copies; the registered not-started ones leave the
        snapshot (they are counted among the upcoming). Returns those not-started nodes."""
        counts, registered = self.registry.upcoming_nodes(now)
        not_started: set[str] = set()
        for group_id, count in sorted(counts.items()):
            template = templates.get(group_id)
            if template is None:
                continue
            for name in registered.get(group_id, ()):
                journal.remove_node(name)
                not_started.add(name)
            source = journal.add_node(template.node, allocatable=template.allocatable).name
            for index in range(count):
                name = f"{source}-upcoming-{index}"
                journal.add_node_like(source, name)
                for pod in template.pods:
                    journal.add_pod(name, pod)
            journal.remove_node(source)
        return not_started

    def _pods_of_draining_nodes(self, journal: SnapshotJournal) -> list[Pod]:
        """``CurrentlyDrainedNodes``: the pods being evicted need room elsewhere."""
        moved: list[Pod] = []
        for name in sorted(self.actuator.in_progress):
            state = journal.snapshot.nodes.get(name)
            if state is None:
                continue
            for pod in list(state.pods):
                if is_daemonset_pod(pod) or is_mirror_pod(pod):
                    continue
                journal.remove_pod(name, pod)
                moved.append(pod)
        return moved

    async def _scale_up(
        self,
        *,
        pending: list[Pod],
        snapshot: ProviderSnapshot,
        templates: Mapping[str, Any],
        journal: SnapshotJournal,
        ready_nodes: Sequence[Node],
        nodes: Sequence[Node],
        now: datetime,
    ) -> None:
        started = self.cpu_clock()
        groups = list(snapshot.groups.values())
        other_capacity = [
            _capacity(n)
            for n in nodes
            if snapshot.group_for_node(n) is None and not currently_being_deleted(n, now)
        ]
        expander = build_expander(
            self.settings,
            rng=self.rng,
            cluster_nodes=len(nodes),
            config_map=lambda: self.config_maps.lister.get(
                PRIORITY_CONFIG_MAP, self.settings.namespace
            ),
        )
        decision = decide_scale_up(
            ScaleUpInputs(
                pending=pending,
                groups=groups,
                templates=templates,
                safety=lambda g: self.registry.scale_up_safety(g, now),
                journal=journal,
                current_nodes=len(ready_nodes),
                other_capacity=other_capacity,
                settings=self.settings,
                expander=expander,
                elapsed=_since(self.cpu_clock),
            )
        )
        self.report.scale_up = decision
        for reason, message in decision.warnings:
            self.status_event("Warning", reason, message)
        execution = await execute_scale_up(
            decision.infos,
            provider=self.provider,
            registry=self.registry,
            metrics=self.metrics,
            status_event=self.status_event,
            now=now,
        )
        self.report.scaled_up = [(i.group.id, i.current_size, i.new_size) for i in execution.done]
        result = decision.result
        if execution.failed is not None:
            result = ScaleUpResult.ERROR
        record_pod_events(
            self.events,
            result=result,
            executed=execution.done if execution.succeeded else [],
            triggered=decision.triggered,
            remaining=decision.remaining,
        )
        if execution.succeeded:
            self.last_scale_up = now
            self.metrics.last_activity.labels("scaleUp").set(now.timestamp())
        self._timed("scaleUp", started)

    async def _scale_up_to_min_size(self, snapshot: ProviderSnapshot, now: datetime) -> None:
        """``--enforce-node-group-min-size``: groups below min grow to it."""
        for group in snapshot.groups.values():
            if group.target_size >= group.min_size:
                continue
            if not self.registry.scale_up_safety(group.id, now).safe:
                continue
            try:
                await self.provider.increase_size(group, group.min_size - group.target_size)
            except ProviderError as err:
                log.warning("cannot scale up to min size", extra={"fields": {"error": str(err)}})
                continue
            self.registry.register_scale_up(group, group.min_size - group.target_size, now)

    # ----------------------------------------------------------------------- scale-down

    def _in_cooldown(self, now: datetime) -> bool:
        """``isScaleDownInCooldown``."""
        settings = self.settings
        for moment, delay in (
            (self.last_scale_up, settings.scale_down_delay_after_add),
            (self.actuator.last_failure, settings.scale_down_delay_after_failure),
            (self.actuator.last_delete, settings.scale_down_delay_after_delete),
        ):
            if moment is not None and moment + delay > now:
                return True
        return False

    async def _scale_down(
        self,
        now: datetime,
        *,
        snapshot: ProviderSnapshot,
        nodes: Sequence[Node],
        journal: SnapshotJournal,
        simulator: SchedulingSimulator,
        priority: PriorityResolver,
        templates: Mapping[str, Any],
        in_cooldown: bool,
        pods_pending: bool,
    ) -> None:
        started = self.cpu_clock()
        settings = self.settings
        in_progress = set(self.actuator.in_progress)
        sizes = {g.id: g.target_size for g in snapshot.groups.values()}
        candidates = []
        for node in nodes:
            group = snapshot.group_for_node(node)
            if group is None or node_name(node) in in_progress:
                continue
            if sizes[group.id] <= group.min_size:
                continue
            candidates.append(node)
        destinations = {
            node_name(n)
            for n in nodes
            if node_name(n) not in in_progress and not currently_being_deleted(n, now)
        }
        context = DrainContext(
            pdbs=PdbTracker(self.pdbs.lister.list()),
            now=now,
            controller=self._controller,
            skip_nodes_with_system_pods=settings.skip_nodes_with_system_pods,
            skip_nodes_with_local_storage=settings.skip_nodes_with_local_storage,
            skip_nodes_with_custom_controller_pods=settings.skip_nodes_with_custom_controller_pods,
            min_replica_count=settings.min_replica_count,
            blocking_system_pod_timeout=settings.blocking_system_pod_distruption_timeout,
        )
        journal.fork()  # the planner's simulated moves are for its own pass only
        try:
            unneeded = self.planner.update(
                now=now,
                candidates=candidates,
                destinations=destinations,
                simulator=simulator,
                provider=snapshot,
                readiness=self.readiness,
                context=context,
                priority=priority,
            )
        finally:
            journal.revert()
        self._timed("findUnneeded", started)
        self.report.unneeded = sorted(c.name for c in unneeded)
        by_group: dict[str, list[str]] = {}
        for candidate in unneeded:
            by_group.setdefault(candidate.group_id, []).append(candidate.name)
        self.registry.update_scale_down_candidates(by_group, now)
        await self._update_soft_taints(nodes, {c.name for c in unneeded}, now)
        self.metrics.scale_down_in_cooldown.set(1 if in_cooldown else 0)
        if in_cooldown:
            return
        empty, drain = self.planner.nodes_to_delete(
            now=now,
            provider=snapshot,
            readiness=self.readiness,
            all_nodes=nodes,
            node_capacity=_capacity,
            deletions_in_progress=self.actuator.deletions_by_group(),
            drains_in_progress=self.actuator.drains_in_progress,
            priority=priority,
        )
        for chosen, drains in ((empty, False), (drain, True)):
            if not chosen:
                continue
            reasons: dict[str, list[tuple[Node, str]]] = {}
            for candidate in chosen:
                reason = "underutilized" if self.readiness(candidate.node).ready else "unready"
                reasons.setdefault("empty" if not drains else reason, []).append(
                    (candidate.node, candidate.group_id)
                )
            for reason, pairs in reasons.items():
                self.report.tainted += await self.actuator.start(
                    pairs, drain=drains, reason=reason, now=now
                )
        if empty or drain:
            self.metrics.last_activity.labels("scaleDown").set(now.timestamp())
        elif settings.consolidation.policy != "Off" and not pods_pending:
            await self._consolidate(
                now,
                snapshot=snapshot,
                nodes=nodes,
                journal=journal,
                context=context,
                priority=priority,
                templates=templates,
                destinations=destinations,
            )
        self._timed("scaleDown", started)

    async def _update_soft_taints(
        self, nodes: Sequence[Node], unneeded: set[str], now: datetime
    ) -> None:
        """DeletionCandidate taints follow the unneeded set (≤ 10 writes per loop)."""
        budget = MAX_BULK_SOFT_TAINT_COUNT
        for node in nodes:
            if budget <= 0:
                return
            name = node_name(node)
            tainted = taint_time(node, DELETION_CANDIDATE_TAINT) is not None
            try:
                if name in unneeded and not tainted:
                    budget -= 1
                    await self.actuator.nodes.mark_deletion_candidate(name, now=now)
                elif name not in unneeded and tainted:
                    budget -= 1
                    await self.actuator.nodes.clean_deletion_candidate(name)
            except KubeError as err:
                log.warning(
                    "soft taint failed", extra={"fields": {"node": name, "error": str(err)}}
                )

    async def _consolidate(
        self,
        now: datetime,
        *,
        snapshot: ProviderSnapshot,
        nodes: Sequence[Node],
        journal: SnapshotJournal,
        context: DrainContext,
        priority: PriorityResolver,
        templates: Mapping[str, Any],
        destinations: set[str],
    ) -> None:
        if self.replacement is not None:
            await self._finish_replacement(now)
            return
        candidates = consolidation_candidates(
            nodes=nodes,
            snapshot=journal.snapshot,
            provider=snapshot,
            readiness=self.readiness,
            context=DrainContext(
                pdbs=PdbTracker(self.pdbs.lister.list()),
                now=now,
                controller=context.controller,
                skip_nodes_with_system_pods=context.skip_nodes_with_system_pods,
                skip_nodes_with_local_storage=context.skip_nodes_with_local_storage,
                skip_nodes_with_custom_controller_pods=context.skip_nodes_with_custom_controller_pods,
                min_replica_count=context.min_replica_count,
                blocking_system_pod_timeout=context.blocking_system_pod_timeout,
            ),
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
            return
        self.report.consolidation = act
        chosen = [(c.node, c.group.id) for c in candidates if c.name in act.nodes]
        self.metrics.consolidation_actions_total.labels(act.method).inc()
        if act.method == "Replace" and act.replacement is not None:
            group = snapshot.groups[act.replacement]
            try:
                await self.provider.increase_size(group, 1)
            except ProviderError as err:
                log.warning("replacement failed", extra={"fields": {"error": str(err)}})
                return
            self.registry.register_scale_up(group, 1, now)
            self.replacement = _Replacement(command=act, group_id=group.id, nodes=chosen)
            self.status_event(
                "Normal",
                "ConsolidationReplace",
                f"Consolidation: replacing {', '.join(act.nodes)} with a node of {group.id} "
                f"(saves {act.savings_per_hour:.4f}/h)",
            )
            return
        self.status_event(
            "Normal",
            "ConsolidationDelete",
            f"Consolidation: removing {', '.join(act.nodes)} (saves {act.savings_per_hour:.4f}/h)",
        )
        self.metrics.consolidation_savings.inc(act.savings_per_hour)
        self.report.tainted += await self.actuator.start(
            chosen, drain=act.method != "Empty", reason="consolidation", now=now
        )

    async def _finish_replacement(self, now: datetime) -> None:
        replacement = self.replacement
        assert replacement is not None
        if replacement.group_id in self.registry.scale_up_requests:
            return  # the new node is not there yet
        self.replacement = None
        if self.registry.backoff.status(replacement.group_id, now) is not None:
            log.warning(
                "replacement node did not come up; consolidation abandoned",
                extra={"fields": {"group": replacement.group_id}},
            )
            return
        self.metrics.consolidation_savings.inc(replacement.command.savings_per_hour)
        self.report.tainted += await self.actuator.start(
            replacement.nodes, drain=True, reason="consolidation", now=now
        )

    # --------------------------------------------------------------------- status, metrics

    async def _write_status(self, now: datetime, *, initializing: bool = False) -> None:
        settings = self.settings
        if not settings.write_status_configmap:
            return
        if initializing:
            status: dict[str, Any] = {
                "time": go_time_string(now),
                "autoscalerStatus": "Initializing",
            }
        else:
            status = build_status(self.registry, self.history, now)
        try:
            try:
                existing: dict[str, Any] | None = await self.client.get(
                    CONFIG_MAPS, settings.status_config_map_name, namespace=settings.namespace
                )
            except KubeApiError as err:
                if not err.not_found:
                    raise
                existing = None
            body = status_config_map(
                name=settings.status_config_map_name,
                namespace=settings.namespace,
                status=status,
                existing=existing,
            )
            if existing is None:
                self.status_object = await self.client.create(CONFIG_MAPS, body)
            else:
                self.status_object = await self.client.update(CONFIG_MAPS, body)
        except KubeError as err:
            log.error("Failed to write status configmap", extra={"fields": {"error": str(err)}})

    def _update_metrics(self, snapshot: ProviderSnapshot, now: datetime) -> None:
        metrics, registry = self.metrics, self.registry
        metrics.cluster_safe_to_autoscale.set(1 if registry.is_cluster_healthy() else 0)
        total = registry.total
        for state, names in (
            ("ready", total.ready),
            ("unready", total.unready),
            ("notStarted", total.not_started),
            ("longUnregistered", total.long_unregistered),
            ("unregistered", total.unregistered),
        ):
            metrics.nodes_count.labels(state).set(len(names))
        metrics.node_groups_count.labels("autoscaled").set(len(snapshot.groups))
        metrics.node_groups_count.labels("autoprovisioned").set(0)
        groups_max = sum(g.max_size for g in snapshot.groups.values())
        total_max = self.settings.max_nodes_total
        metrics.max_nodes_count.set(min(total_max, groups_max) if total_max else groups_max)
        cores = memory = 0
        for node in self.nodes.lister.list():
            if currently_being_deleted(node, now):
                continue
            c, m = cores_and_memory(_capacity(node))
            cores += c
            memory += m
        metrics.cluster_cpu_current_cores.set(cores)
        metrics.cluster_memory_current_bytes.set(memory)
        metrics.cpu_limits_cores.labels("minimum").set(self.settings.cores_total.min)
        metrics.cpu_limits_cores.labels("maximum").set(self.settings.cores_total.max)
        metrics.memory_limits_bytes.labels("minimum").set(self.settings.memory_total.min)
        metrics.memory_limits_bytes.labels("maximum").set(self.settings.memory_total.max)
        for group in snapshot.groups.values():
            metrics.node_group_min_count.labels(group.id).set(group.min_size)
            metrics.node_group_max_count.labels(group.id).set(group.max_size)
            metrics.node_group_target_count.labels(group.id).set(group.target_size)
            metrics.node_group_healthiness.labels(group.id).set(
                1 if registry.is_node_group_healthy(group.id) else 0
            )
            backoff = registry.backoff.status(group.id, now)
            metrics.node_group_backoff_status.labels(group.id, "").set(1 if backoff else 0)
        metrics.unneeded_nodes_count.set(len(self.planner.unneeded))
        reasons: dict[str, int] = {}
        for unremovable in self.planner.unremovable.values():
            reasons[unremovable.reason] = reasons.get(unremovable.reason, 0) + 1
        for reason, count in reasons.items():
            metrics.unremovable_nodes_count.labels(reason).set(count)
        metrics.pending_node_deletions.set(len(self.actuator.in_progress))


def _since(clock: Callable[[], float]) -> Callable[[], float]:
    start = clock()
    return lambda: clock() - start


def _capacity(node: Node) -> dict[str, int]:
    status = node.get("status") or {}
    return amounts_of(status.get("capacity") or status.get("allocatable"))
