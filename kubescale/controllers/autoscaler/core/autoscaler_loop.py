"""The cluster autoscaler's loop: upstream's ``StaticAutoscaler.RunOnce``, one call per scan.

Steps, in upstream's order (reference §1). This module reads the snapshot (the caches, the
provider, and what the steps read besides: the PDBs, the evictions in flight, the descheduler's
moves, the pods per node, the priority expander's ConfigMap), on the event loop's thread; the
steps are one decision, ``decide(snapshot, memory, now)`` (:mod:`.run_once_decision`), a
generator of intents that computes on the loop's worker thread and that this module drives
through the one executor, each intent applied on the loop and its outcome sent back:

1. first loop only: ToBeDeleted taints left by an earlier run are removed;
2. nodes and their readiness (startup taints make a node not ready), pods by schedulability,
   the provider's snapshot (malformed node groups are reported as Warning events
   ``InvalidNodeGroup`` on their object and skipped), the cluster snapshot of nodes and
   non-expendable scheduled pods, template nodes;
3. the cluster state registry is updated; timed-out scale-ups are taken back
   (``DecreaseTargetSize``, event ``ScaleUpTimedOut``), instance creation errors reported;
4. instances unregistered for longer than ``--max-node-provision-time`` are deleted (within
   target − min unless ``--force-delete-unregistered-nodes``; event ``DeleteUnregistered``).
   A group resized here is not scaled up again in the same iteration: its target size in this
   iteration's snapshot is the one from before the deletions, and raising the size back at
   once would undo them before Cluster API removes the marked machines — the same machines,
   unregistered for as long as before, would be removed and re-added every loop. The next
   iteration sees the new size (deviation: upstream scales up on the stale snapshot and
   relies on its MachineSet controller being faster than its own loop);
5. an unhealthy cluster stops the loop here (event ``ClusterUnhealthy``, unneeded nodes
   forgotten);
6. instances whose creation failed are deleted; a group whose size is wrong for longer than
   ``--max-node-provision-time`` is fixed (``DecreaseTargetSize``), and the loop stops;
7. upcoming nodes join the snapshot as template copies; pending pods that fit the snapshot are
   placed there (they need no new node); young pods wait; the rest go to the scale-up decision,
   carried out by :mod:`.scale_up_executor`;
8. scale-down: the planner finds unneeded nodes (``DeletionCandidate`` soft taints follow it),
   and — unless in cooldown after a scale-up (``--scale-down-delay-after-add``), a deletion or a
   failure — the nodes to delete go to the actuator (:mod:`.scale_down_actuator`); then, when
   enabled, consolidation (:mod:`.consolidation`); the actuator advances the drains in progress
   every loop;
9. ``--enforce-node-group-min-size``: groups below their min grow to it, counting this
   iteration's scale-up;
10. the status ConfigMap (the decision's last intent) and the metrics are written whatever
    happened.

The provider's calls of one iteration (``/scale`` reads and writes, Machine marks) may wait on
the API server for ``--scan-interval`` in all (:mod:`.write_deadline`): a hung
``/scale`` write no longer holds the loop for the client's 5 × 30 s; left unanswered, it counts
as done (the scale-up is registered, scale-down goes into cooldown) and the next iteration reads
the size back from the object.

Upstream starts with scale-down in cooldown (its last scale-up time is its start time), so no
node is removed in the first ``--scale-down-delay-after-add`` after a start; so does kubescale.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any, Final

from kubescale.base.clock import Clock, RealClock
from kubescale.base.logs import component_logger
from kubescale.controllers.autoscaler.cloudprovider.cloud_provider import (
    CloudProvider,
    ProviderError,
    ProviderSnapshot,
)
from kubescale.controllers.autoscaler.cloudprovider.clusterapi_provider import ClusterApiProvider
from kubescale.controllers.autoscaler.cloudprovider.provider_writes import ProviderWrites
from kubescale.controllers.autoscaler.cloudprovider.write_deadline import WriteDeadline
from kubescale.controllers.autoscaler.clusterstate.backoff import ExponentialBackoff
from kubescale.controllers.autoscaler.clusterstate.cluster_state import (
    ClusterStateRegistry,
    HealthConfig,
)
from kubescale.controllers.autoscaler.config.autoscaler_settings import AutoscalerSettings
from kubescale.controllers.autoscaler.core.loop_housekeeping import Housekeeping
from kubescale.controllers.autoscaler.core.loop_scale_down import ScaleDownPhase
from kubescale.controllers.autoscaler.core.loop_scale_up import (
    ScaleUpPhase,
)
from kubescale.controllers.autoscaler.core.loop_status import StatusReporter
from kubescale.controllers.autoscaler.core.pod_lists import (
    PodsBySchedulability,
)
from kubescale.controllers.autoscaler.core.run_once_decision import (
    LoopReport,
    RunOnceMemory,
    RunOnceSnapshot,
    decide,
)
from kubescale.controllers.autoscaler.core.snapshot_cache import (
    NodePieces,
    PodFactsCache,
    PodListing,
)
from kubescale.controllers.autoscaler.expander.priority_expander import PRIORITY_CONFIG_MAP
from kubescale.controllers.autoscaler.metrics.autoscaler_metrics import AutoscalerMetrics
from kubescale.controllers.autoscaler.model.node_facts import (
    NodeReadiness,
    currently_being_deleted,
    node_name,
    node_readiness,
)
from kubescale.controllers.autoscaler.model.pod_facts import OwnerRef, PriorityResolver, pod_id
from kubescale.controllers.autoscaler.scaledown.scale_down_actuator import ScaleDownActuator
from kubescale.controllers.autoscaler.scaledown.scale_down_planner import ScaleDownPlanner
from kubescale.controllers.autoscaler.simulator.drainability import Controller
from kubescale.controllers.autoscaler.simulator.template_nodes import TemplateNode, TemplateRegistry
from kubescale.coordination.disruption_ledger import DisruptionLedger
from kubescale.coordination.ports import DisruptionGate, RecentMoves, RequestsAhead
from kubescale.coordination.recent_moves import (
    DescheduledMove,
)
from kubescale.coordination.separate import NoMoves, OwnEvictionsOnly
from kubescale.kube.client import KubeClient
from kubescale.kube.events import EventRecorder
from kubescale.kube.informer import Informer
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
    REPLICATION_CONTROLLERS,
    STATEFUL_SETS,
)
from kubescale.objects.config_map import ConfigMap
from kubescale.objects.daemon_set import DaemonSet
from kubescale.objects.job import Job
from kubescale.objects.namespace import Namespace
from kubescale.objects.node import Node
from kubescale.objects.pdb import PodDisruptionBudget
from kubescale.objects.pod import Pod
from kubescale.objects.priority_class import PriorityClass
from kubescale.objects.replica_set import ReplicaSet
from kubescale.objects.replication_controller import ReplicationController
from kubescale.objects.stateful_set import StatefulSet
from kubescale.objects.views import Meta, meta, spec_of
from kubescale.plans.executor import Applied, PlanExecutor
from kubescale.plans.intents import Intent, WriteConfigMap
from kubescale.runtime.component import TimelineReport
from kubescale.runtime.off_loop import OffLoop
from kubescale.scheduling.pod_resources import NON_MISSING_DEFAULTS, RequestCache
from kubescale.scheduling.snapshot_journal import SnapshotJournal

__all__ = ["LOOP_NAME", "AutoscalerLoop", "going_pods"]

log = component_logger("cluster-autoscaler")

LOOP_NAME: Final = "cluster-autoscaler"


@dataclass(frozen=True)
class _Listed:
    """What an iteration reads of the informers, copied on the loop's thread."""

    nodes: list[Node]
    pods: PodListing
    """Each pod's facts, kept across scans (:mod:`.snapshot_cache`)."""
    namespaces: list[Namespace]
    daemon_sets: list[DaemonSet]


@dataclass(frozen=True)
class _Built:
    """The iteration's snapshot (:meth:`AutoscalerLoop._build`)."""

    nodes: list[Node]
    all_pods: list[Pod]
    priority: PriorityResolver
    lists: PodsBySchedulability
    journal: SnapshotJournal
    templates: dict[str, TemplateNode]
    pod_keys: list[tuple[str, str]]
    """``(namespace, name)`` of every listed pod."""


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
        disruptions: DisruptionLedger | None = None,
        gate: DisruptionGate | None = None,
        recent_moves: RecentMoves | None = None,
        requests_ahead: RequestsAhead | None = None,
        write_clock: Clock | None = None,
        off_loop: OffLoop | None = None,
    ) -> None:
        self.client = client
        self.write_deadline = WriteDeadline(
            clock=write_clock or RealClock(), seconds=settings.scan_interval
        )
        """How long each iteration's provider calls may wait on the API server in all
        (``--scan-interval``), on the real clock unless one is injected: it bounds real I/O
        (:mod:`.write_deadline`)."""
        self.pod_facts = PodFactsCache(requests_ahead)
        """Each pod's facts across scans (:mod:`.snapshot_cache`); with ``--coordination
        one-brain`` ``requests_ahead`` gives each pod as the VPA will make it (the requests the
        webhook gives it), for binpacking and scale-down."""
        self.node_pieces = NodePieces()
        """Each node's snapshot piece across scans (:mod:`.snapshot_cache`)."""
        self.disruptions = (
            disruptions if disruptions is not None else DisruptionLedger(shared=False)
        )
        """The process's disruption ledger (one arbiter for every system's evictions)."""
        self.gate: DisruptionGate = gate if gate is not None else OwnEvictionsOnly()
        """The coordination layer's answer to "which evictions in flight are others'" (upstream's,
        none, by default)."""
        self.recent_moves: RecentMoves = recent_moves if recent_moves is not None else NoMoves()
        """The coordination layer's recent descheduler moves (upstream's, none, by default)."""
        self.informers = informers
        self.settings = settings
        self.metrics = metrics
        self.events = events
        self.cpu_clock = cpu_clock
        self.provider: CloudProvider = provider or ClusterApiProvider(
            client=client,
            informers=informers,
            defaults=settings.node_defaults,
            discovery=settings.auto_discovery,
            capi_group=settings.capi_group,
            capi_version=settings.capi_version,
            deadline=self.write_deadline,
        )
        self.nodes: Informer[Node] = informers.informer(NODES)
        self.pods: Informer[Pod] = informers.informer(PODS)
        self.disruptions.attach(self.pods)
        self.daemon_sets: Informer[DaemonSet] = informers.informer(DAEMON_SETS)
        self.pdbs: Informer[PodDisruptionBudget] = informers.informer(POD_DISRUPTION_BUDGETS)
        self.priority_classes: Informer[PriorityClass] = informers.informer(PRIORITY_CLASSES)
        self.namespaces: Informer[Namespace] = informers.informer(NAMESPACES)
        self.replica_sets: Informer[ReplicaSet] = informers.informer(REPLICA_SETS)
        self.stateful_sets: Informer[StatefulSet] = informers.informer(STATEFUL_SETS)
        self.jobs: Informer[Job] = informers.informer(JOBS)
        self.replication_controllers: Informer[ReplicationController] = informers.informer(
            REPLICATION_CONTROLLERS
        )
        self.config_maps: Informer[ConfigMap] = informers.informer(
            CONFIG_MAPS, namespace=settings.namespace
        )
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
        self.off_loop = off_loop if off_loop is not None else OffLoop(LOOP_NAME)
        """The iteration's CPU-bound steps run on this worker — the snapshot,
        filter-out-schedulable, the scale-up decision, the scale-down planner — over copies
        taken on the loop; every write stays on the loop (:mod:`kubescale.runtime.off_loop`)."""
        self.templates = TemplateRegistry(
            startup_taints=settings.startup_taints, status_taints=settings.status_taints
        )
        self.provider_writes = ProviderWrites(self.provider)
        """The executor's node group port: the provider, on this iteration's snapshot."""
        self.executor = PlanExecutor(
            client=client,
            ledger=self.disruptions,
            events=events,
            registry=metrics.registry,
            dry_run=settings.dry_run,
            node_groups=self.provider_writes,
        )
        """The loop's one executor: every write of the iteration (node group resizes and
        deletions, taints, evictions, the status ConfigMap) and every event goes through it;
        with ``--dry-run`` it prints them instead (:mod:`kubescale.plans.dry_run`)."""
        self.status = StatusReporter(executor=self.executor, metrics=metrics, settings=settings)
        """The status ConfigMap, its events and the gauges; the events of an iteration are
        intents of its decision (:meth:`.StatusReporter.collecting`)."""
        self.actuator = ScaleDownActuator(
            metrics=metrics,
            settings=settings,
            status_event=self.status.event,
            executor=self.executor,
            disruptions=self.disruptions,
            gate=self.gate,
        )
        self.housekeeping = Housekeeping(
            provider=self.provider,
            registry=self.registry,
            settings=settings,
            metrics=metrics,
            status_event=self.status.event,
        )
        self.scale_up = ScaleUpPhase(
            settings=settings,
            metrics=metrics,
            provider=self.provider,
            registry=self.registry,
            rng=rng or random.Random(0),
            status_event=self.status.event,
            cpu_clock=cpu_clock,
        )
        self.scale_down = ScaleDownPhase(
            settings=settings,
            metrics=metrics,
            provider=self.provider,
            registry=self.registry,
            actuator=self.actuator,
            readiness=self.readiness,
            pdbs=self.pdbs.lister.list,
            controller=self._controller,
            status_event=self.status.event,
            in_flight=self._evictions_in_flight,
            moves=self._descheduled_moves,
        )
        self.requests = RequestCache()
        self.non_zero = RequestCache(non_missing=NON_MISSING_DEFAULTS)
        self.memory = RunOnceMemory(
            settings=settings,
            metrics=metrics,
            registry=self.registry,
            housekeeping=self.housekeeping,
            scale_up=self.scale_up,
            scale_down=self.scale_down,
            actuator=self.actuator,
            status=self.status,
            readiness=self.readiness,
            cpu_clock=cpu_clock,
        )
        """What the iterations' decisions keep between them (:mod:`.run_once_decision`)."""
        self._controllers: dict[str, dict[str, Controller]] | None = None
        """The controllers as the iteration's scale-down read them (:meth:`_freeze_controllers`)."""

        self.started: datetime | None = None
        self.iterations = 0
        self._reports: list[TimelineReport] = []

    def _evictions_in_flight(self, now: datetime) -> list[Pod]:
        """With ``--coordination one-brain``: the pods (as the informer shows them, not being
        deleted yet) that any system of the process has an eviction in flight for. Upstream's
        autoscaler (``separate``) counts none: it sees only the PDBs' status."""
        pods: list[Pod] = []
        for entry in self.gate.evictions_in_flight(now=now):
            pod = self.pods.lister.get(entry.name, entry.namespace)
            if pod is None or Meta(pod).raw.get("uid") != entry.uid:
                continue
            if Meta(pod).raw.get("deletionTimestamp"):
                continue  # the PDB's status counts it once the disruption controller sees it
            pods.append(pod)
        return pods

    def _descheduled_moves(self, now: datetime) -> list[DescheduledMove]:
        """With ``--coordination one-brain``: the descheduler's evictions within
        ``--scale-down-unneeded-time`` (the disruption ledger's history), so that scale-down
        does not undo them (:mod:`kubescale.coordination.recent_moves`). Upstream's autoscaler
        (``separate``) knows nothing of them."""
        window = self.settings.node_defaults.scale_down_unneeded_time
        return self.recent_moves.descheduled_moves(now=now, within=window)

    def drain_reports(self) -> list[TimelineReport]:
        """What the loop did since the last call, for a simulation's timeline: each scale-up
        (``("ca-scale-up", "<group id>", "target 2 → 4")``), node marked for removal
        (``"ca-scale-down"``, detail ``empty``/``drain`` and the reason), eviction
        (``"ca-eviction"``, subject ``<namespace>/<pod>``), node deleted through the provider
        (``"ca-node-deleted"``) and consolidation command carried out (``"ca-consolidation"``,
        subject the nodes, detail the method and the saving per hour)."""
        reports, self._reports = self._reports, []
        return reports

    def _record_reports(self) -> None:
        report = self.report
        for group_id, before, after in report.scaled_up:
            self._reports.append(("ca-scale-up", group_id, f"target {before} → {after}"))
        command = report.consolidation
        if command is not None:
            detail = f"{command.method}"
            if command.replacement is not None:
                detail += f" with a node of {command.replacement}"
            detail += f", saves {command.savings_per_hour:.4f}/h"
            self._reports.append(("ca-consolidation", ", ".join(command.nodes), detail))
        for name in report.tainted:
            deletion = self.actuator.in_progress.get(name)
            if deletion is not None:
                kind = "drain" if deletion.drain else "empty"
                self._reports.append(("ca-scale-down", name, f"{kind} ({deletion.reason})"))
        for pod in report.evicted:
            self._reports.append(("ca-eviction", pod, "evicted by the cluster autoscaler"))
        for name in report.deleted:
            self._reports.append(("ca-node-deleted", name, "deleted through the provider"))

    @property
    def report(self) -> LoopReport:
        """What the last iteration did."""
        return self.memory.report

    @report.setter
    def report(self, report: LoopReport) -> None:
        self.memory.report = report

    @property
    def planner(self) -> ScaleDownPlanner:
        return self.scale_down.planner

    async def wait_for_resource_version(self, resource_version: str, *, within: float) -> bool:
        """Every informer of the loop reflects ``resource_version`` (the simulator's settling)."""
        return await self.informers.wait_for_resource_version(resource_version, within=within)

    def readiness(self, node: Node) -> NodeReadiness:
        return node_readiness(node, self.settings.startup_taints)

    def _controller_informers(self) -> dict[str, Informer[Any]]:
        return {
            "ReplicaSet": self.replica_sets,
            "StatefulSet": self.stateful_sets,
            "Job": self.jobs,
            "DaemonSet": self.daemon_sets,
            "ReplicationController": self.replication_controllers,
        }

    def _freeze_controllers(self) -> None:
        """Copy the controllers the drainability rules look up (on the loop), for the
        scale-down planner on the worker thread and the drains of this iteration."""
        self._controllers = {
            kind: {f"{meta(obj).namespace}/{meta(obj).name}": obj for obj in informer.lister.list()}
            for kind, informer in self._controller_informers().items()
        }

    def _controller(self, namespace: str, owner: OwnerRef) -> Controller | None:
        if owner.kind not in self._controller_informers():
            return {}  # a kind the drainability rules do not look up
        if self._controllers is not None:
            return self._controllers[owner.kind].get(f"{namespace}/{owner.name}")
        informer = self._controller_informers()[owner.kind]
        return informer.lister.get(owner.name, namespace)

    def _timed(self, function: str, started: float) -> None:
        self.metrics.function_duration_seconds.labels(function).observe(self.cpu_clock() - started)

    # ------------------------------------------------------------------------ run once

    async def run_once(self, now: datetime) -> None:
        self.iterations += 1
        self.report = LoopReport()
        self.write_deadline.start()
        started = self.cpu_clock()
        if not await self._provider_ready():
            return
        first = self.started is None
        if first:
            self.started = now
            self.memory.last_scale_up = now  # upstream: scale-down starts in cooldown
        snapshot = self.provider.refresh()
        self.provider_writes.use(snapshot)
        try:
            await self._run(now, snapshot, first=first)
        finally:
            self.status.update_metrics(
                snapshot=snapshot,
                registry=self.registry,
                planner=self.scale_down.planner,
                actuator=self.actuator,
                nodes=self.nodes.lister.list(),
                now=now,
            )
            self._record_reports()
            self.metrics.last_activity.labels("main").set(now.timestamp())
            self._timed("main", started)
            await self.events.flush()  # the iteration's events are written before it ends

    async def _provider_ready(self) -> bool:
        """The provider knows what it reads (Cluster API: the version, upstream's
        ``newMachineController`` at start) and its caches are synced; else nothing is decided
        this iteration."""
        try:
            ready = await self.provider.prepare()
        except ProviderError as err:
            self.report.stopped = "CloudProviderNotReady"
            log.error("cloud provider not ready", extra={"fields": {"error": str(err)}})
            return False
        if not ready:
            self.report.stopped = "CloudProviderNotReady"
            log.warning("cloud provider caches not synced yet")
        return ready

    def _build(self, now: datetime, snapshot: ProviderSnapshot, listed: _Listed) -> _Built:
        """The iteration's snapshot, from the copies in ``listed`` (on the worker thread)."""
        nodes = sorted(listed.nodes, key=node_name)
        listing = listed.pods
        all_pods = listing.pods
        priority = listing.priority
        lists = listing.by_schedulability()
        # Upstream builds the snapshot of the nodes and the non-expendable scheduled pods anew
        # each RunOnce; this is the same snapshot, from the nodes whose pods did not change
        # since the last scan and the others built again (:mod:`.snapshot_cache`).
        cluster = self.node_pieces.snapshot(
            nodes=nodes,
            listing=listing,
            cutoff=self.settings.expendable_pods_priority_cutoff,
            namespace_labels={meta(n).name: dict(meta(n).labels) for n in listed.namespaces},
            requests=self.requests,
            non_zero=self.non_zero,
        )
        pod_keys = listing.keys
        if self.pod_facts.released or len(self.requests) > len(pod_keys):
            self.requests.forget_missing(pod_keys)
            self.non_zero.forget_missing(pod_keys)
        journal = SnapshotJournal(cluster)
        templates = self.templates.recompute(
            snapshot=snapshot,
            nodes=nodes,
            pods_by_node={name: state.pods for name, state in cluster.nodes.items()},
            daemon_sets=listed.daemon_sets,
            readiness=self.readiness,
            being_deleted=lambda n: currently_being_deleted(n, now),
        )
        return _Built(
            nodes=nodes,
            all_pods=all_pods,
            priority=priority,
            lists=lists,
            journal=journal,
            templates=templates,
            pod_keys=pod_keys,
        )

    async def _run(self, now: datetime, snapshot: ProviderSnapshot, *, first: bool) -> None:
        # Read on the loop: new lists of the cached objects (informers replace objects, never
        # change them) and the VPA's requests (the webhook's cache); the snapshot is built
        # from them on the loop's worker thread (kubescale.runtime.off_loop), so the serving
        # loop answers meanwhile.
        # Each pod's facts (with the VPA's requests) are kept across scans while the pod and
        # the VPA's answer are the same: only what changed is derived again
        # (kubescale/controllers/autoscaler/core/snapshot_cache.py).
        pods = self.pod_facts.refresh(
            self.pods.lister.list(), priority_classes=self.priority_classes.lister.list()
        )
        listed = _Listed(
            nodes=self.nodes.lister.list(),
            pods=pods,
            namespaces=self.namespaces.lister.list(),
            daemon_sets=self.daemon_sets.lister.list(),
        )
        built = await self.off_loop.run(partial(self._build, now, snapshot, listed))
        # The rest of what the iteration reads, also on the loop: the pods the drains evict,
        # those another system is evicting, the PDBs, the descheduler's moves, the priority
        # expander's ConfigMap, the controllers the drainability rules look up.
        pods_by_node = {
            node_name(n): list(self.pods.lister.by_node(node_name(n))) for n in built.nodes
        }
        run = RunOnceSnapshot(
            provider=snapshot,
            built=built,
            first=first,
            pods_by_node=pods_by_node,
            going=going_pods(self.gate, pods_by_node, self.pods.lister.get, now=now),
            scale_down=self.scale_down.read(now),
            priority_config_map=self.config_maps.lister.get(
                PRIORITY_CONFIG_MAP, self.settings.namespace
            ),
        )
        if self.settings.scale_down_enabled:
            self._freeze_controllers()

        failed: list[Intent] = []

        async def act(intent: Intent) -> Applied:
            try:
                return await self.executor.execute(intent, now=now)
            except Exception:
                failed.append(intent)
                raise

        # The decision computes on the loop's worker thread over the snapshot (copies taken
        # above, on the event loop's thread); each intent it yields is applied here, on the
        # loop, by the one executor (the Lease checked before each): kubescale.runtime.off_loop.
        try:
            await self.off_loop.drive(decide(run, self.memory, now), act)
        except Exception:
            # The executor failed on an intent: the status ConfigMap is still written, as
            # upstream's deferred write. (An error of the decision's own steps: the decision
            # wrote it before raising.)
            if failed and not isinstance(failed[-1], WriteConfigMap):
                await self.executor.drive(self.status.decision(now, self.registry), now=now)
            raise
        finally:
            self._controllers = None  # live lookups again outside the iteration


def going_pods(
    gate: DisruptionGate,
    pods_by_node: Mapping[str, Sequence[Pod]],
    lookup: Callable[[str, str], Pod | None],
    *,
    now: datetime,
) -> frozenset[str]:
    """``pod_id`` of every pod of ``pods_by_node`` another system is evicting
    (``gate.already_going``). Only the gate's candidates (:meth:`~kubescale.coordination.ports.
    DisruptionGate.possibly_going`, the ledger's few entries) are looked up (``lookup(name,
    namespace)``, the informer's pod) and asked, not every pod of the cluster each scan (issue 29):
    a pod that is no candidate is never going, so the answer is the same."""
    going: set[str] = set()
    for namespace, name in gate.possibly_going(now=now):
        pod = lookup(name, namespace)
        if pod is None:
            continue
        placed = pods_by_node.get(str(spec_of(pod).get("nodeName") or ""), ())
        if any(p is pod for p in placed) and gate.already_going(pod, now=now):
            going.add(pod_id(pod))
    return frozenset(going)
