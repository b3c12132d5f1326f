"""Carrying out scale-down: taint, drain through the Eviction API, delete through the provider.

``scaledown/actuation`` (reference §3.2 step 5), run as a state machine the loop advances every
``run_once`` instead of goroutines:

* :meth:`ScaleDownActuator.start` taints every chosen node ``ToBeDeletedByClusterAutoscaler``
  (and cordons it) first, so evicted pods do not land on another victim; event ``ScaleDown``
  "marked the node as toBeDeleted/unschedulable" (a failed taint: ``ScaleDownFailed``), and on
  the status ConfigMap ``ScaleDownEmpty`` "Scale-down: removing empty node "<n>"" or
  ``ScaleDown`` "Scale-down: removing node <n>, utilization: {<cpu> <mem> 0 0 <resource>
  <max>}, pods to reschedule: <p1>,<p2>";
* an **empty** node is deleted ``--node-delete-delay-after-taint`` after its taint, if it is
  still empty then (else the deletion is given up and the taint removed);
* a node to **drain** has its pods evicted through the Eviction API — every pod but mirror and
  DaemonSet pods, with grace ``min(terminationGracePeriodSeconds, --max-graceful-termination-sec)``
  (event ``ScaleDown`` "deleting pod for node scale down" on each pod); a refused eviction (a
  PodDisruptionBudget's 429) is retried on later loops until ``--max-pod-eviction-time`` (2m);
  then the pods get ``--max-graceful-termination-sec`` + 30 s to go; DaemonSet pods are evicted
  best-effort with ``--daemonset-eviction-for-occupied-nodes`` (empty nodes:
  ``--daemonset-eviction-for-empty-nodes``);
* then the node is deleted through the provider (Cluster API: the Machine gets the
  ``delete-machine`` annotation and the group shrinks by one): events ``ScaleDown`` "Scale-down:
  node <n> removed with drain" / ``ScaleDownEmpty`` "Scale-down: empty node <n> removed" on
  the status ConfigMap, ``cluster_autoscaler_scaled_down_nodes_total``;
* a drain that runs out of time, or a deletion the provider refuses, removes the taint and
  uncordons again (``ScaleDownFailed`` "failed to drain the node, aborting ScaleDown" / "failed
  to delete the node"), and starts ``--scale-down-delay-after-failure``.

Deviation: upstream waits the taint delay inside the deletion goroutine; here the deletion
happens on the first loop after the delay has passed (one scan interval later at most).

Both steps are decisions that need each write's outcome (:data:`~kubescale.plans.executor.
Decision`): :meth:`ScaleDownActuator.start_decision` and :meth:`ScaleDownActuator.decide`
yield one intent at a time — :class:`~kubescale.plans.intents.Taint` /
:class:`~kubescale.plans.intents.Untaint`, :class:`~kubescale.plans.intents.Evict`,
:class:`~kubescale.plans.intents.DeleteNodes`, :class:`~kubescale.plans.intents.Event` — and
receive its :class:`~kubescale.plans.executor.Applied` result: a node is tracked only once its
taint was written, and deleted only once its drain is done. The loop's one executor drives them
(:meth:`ScaleDownActuator.start`, :meth:`ScaleDownActuator.progress`); under ``--dry-run`` it
prints each intent and answers it done.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final

from kubescale.base.go_strings import go_quote
from kubescale.base.logs import component_logger
from kubescale.controllers.autoscaler.cloudprovider.cloud_provider import (
    ProviderError,
    ProviderSnapshot,
)
from kubescale.controllers.autoscaler.cloudprovider.provider_writes import (
    ACTOR,
    node_group_failure,
)
from kubescale.controllers.autoscaler.clusterstate.cluster_state import ClusterStateRegistry
from kubescale.controllers.autoscaler.config.autoscaler_settings import AutoscalerSettings
from kubescale.controllers.autoscaler.metrics.autoscaler_metrics import AutoscalerMetrics
from kubescale.controllers.autoscaler.model.node_facts import TO_BE_DELETED_TAINT
from kubescale.controllers.autoscaler.model.pod_facts import (
    is_daemonset_pod,
    is_mirror_pod,
    is_terminal,
    pod_id,
)
from kubescale.controllers.autoscaler.simulator.utilization import Utilization, go_utilization
from kubescale.coordination.disruption_ledger import DisruptionLedger, WriteOutcome
from kubescale.coordination.ports import DisruptionGate
from kubescale.coordination.separate import OwnEvictionsOnly
from kubescale.kube.errors import KubeApiError
from kubescale.objects.node import Node
from kubescale.objects.pod import Pod
from kubescale.objects.views import Meta, spec_of
from kubescale.plans.executor import Applied, Decision, PlanExecutor
from kubescale.plans.intents import DeleteNodes, Event, Evict, Intent, Taint, Untaint

__all__ = ["Deletion", "ScaleDownActuator"]

log = component_logger("cluster-autoscaler")

POD_EVICTION_HEADROOM: Final = timedelta(seconds=30)
MAX_CLOUD_PROVIDER_NODE_DELETION_TIME: Final = timedelta(minutes=5)
DEFAULT_GRACE: Final = 30

EventSink = Callable[[str, str, str], None]
"""(type, reason, message) on the status ConfigMap."""


@dataclass
class Deletion:
    """One node on its way out."""

    node: Node
    group_id: str
    drain: bool
    reason: str
    """``empty``, ``underutilized``, ``unready`` or ``consolidation`` (metrics)."""
    started: datetime
    delete_after: datetime
    evictions_done: datetime | None = None
    evicted: set[str] = field(default_factory=set)

    @property
    def name(self) -> str:
        return str(Meta(self.node).raw.get("name", ""))


class ScaleDownActuator:
    """The deletions in progress (module docstring)."""

    def __init__(
        self,
        *,
        metrics: AutoscalerMetrics,
        settings: AutoscalerSettings,
        status_event: EventSink,
        executor: PlanExecutor | None,
        disruptions: DisruptionLedger | None = None,
        gate: DisruptionGate | None = None,
    ) -> None:
        self.disruptions = (
            disruptions if disruptions is not None else DisruptionLedger(shared=False)
        )
        """The process's disruption ledger: evictions go on it (as ``cluster-autoscaler``)."""
        self.gate: DisruptionGate = gate if gate is not None else OwnEvictionsOnly()
        """The coordination layer's gate: with ``--coordination one-brain`` a pod another
        system is evicting is not evicted again (upstream's, no such check, by default)."""
        self._executor = executor
        """The loop's one executor, which drives the decisions (``None``: the decisions only,
        driven by their caller)."""
        self.metrics = metrics
        self.settings = settings
        self.status_event = status_event
        self.in_progress: dict[str, Deletion] = {}
        self._going: Collection[str] | None = None
        """The pods another system is evicting, given to the running :meth:`decide`."""
        self.last_delete: datetime | None = None
        self.last_failure: datetime | None = None
        self.deleted: list[str] = []
        """Nodes deleted by the last :meth:`progress`, in order."""
        self.evicted: list[str] = []
        """Pods evicted by the last :meth:`progress`, in order."""

    @property
    def executor(self) -> PlanExecutor:
        if self._executor is None:
            raise RuntimeError("this actuator has no executor: drive its decisions instead")
        return self._executor

    def deletions_by_group(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for deletion in self.in_progress.values():
            counts[deletion.group_id] = counts.get(deletion.group_id, 0) + 1
        return counts

    @property
    def drains_in_progress(self) -> int:
        return sum(1 for d in self.in_progress.values() if d.drain)

    async def start(
        self,
        nodes: Sequence[tuple[Node, str]],
        *,
        drain: bool,
        reason: str,
        now: datetime,
        report: Callable[[str], tuple[Utilization | None, Sequence[Pod]]] | None = None,
    ) -> list[str]:
        """:meth:`start_decision` driven by the loop's executor."""
        return await self.executor.drive(
            self.start_decision(nodes, drain=drain, reason=reason, now=now, report=report),
            now=now,
        )

    def start_decision(
        self,
        nodes: Sequence[tuple[Node, str]],
        *,
        drain: bool,
        reason: str,
        now: datetime,
        report: Callable[[str], tuple[Utilization | None, Sequence[Pod]]] | None = None,
    ) -> Decision[list[str]]:
        """Taint ``(node, group id)`` pairs and track the ones whose taint was written; the
        nodes tainted.

        ``report`` gives a node's utilization and its pods as the loop's snapshot holds them,
        for upstream's drain-start event (``scaleDownNodeToReport``)."""
        started: list[str] = []
        for node, group_id in nodes:
            name = str(Meta(node).raw.get("name", ""))
            if name in self.in_progress:
                continue
            marked = yield Taint(
                actor=ACTOR,
                node=name,
                key=TO_BE_DELETED_TAINT,
                value=str(int(now.timestamp())),
                effect="NoSchedule",
                cordon=self.settings.cordon_node_before_terminating,
            )
            if marked.error is not None:
                yield _event(
                    node,
                    type="Warning",
                    reason="ScaleDownFailed",
                    message=f"failed to mark the node as toBeDeleted/unschedulable: {marked.error}",
                )
                self.metrics.errors_total.labels("apiCallError").inc()
                continue
            yield _event(
                node,
                type="Normal",
                reason="ScaleDown",
                message="marked the node as toBeDeleted/unschedulable",
            )
            self._report_start(name, drain=drain, report=report)
            self.in_progress[name] = Deletion(
                node=node,
                group_id=group_id,
                drain=drain,
                reason=reason,
                started=now,
                delete_after=now + self.settings.node_delete_delay_after_taint,
            )
            started.append(name)
        return started

    def _report_start(
        self,
        name: str,
        *,
        drain: bool,
        report: Callable[[str], tuple[Utilization | None, Sequence[Pod]]] | None,
    ) -> None:
        """Upstream's status events when a deletion starts (``actuation/actuator.go``):
        ``deleteAsyncEmpty`` — ``ScaleDownEmpty`` "Scale-down: removing empty node %q";
        ``deleteAsyncDrain`` — ``ScaleDown`` "Scale-down: removing node %s, utilization: %v,
        pods to reschedule: %s", the utilization being ``utilization.Info`` and the pods the
        node's non-mirror, non-DaemonSet pods (``podsToEvict``), names joined by ","."""
        if not drain:
            self.status_event(
                "Normal", "ScaleDownEmpty", f"Scale-down: removing empty node {go_quote(name)}"
            )
            return
        used, pods = report(name) if report is not None else (None, ())
        names = ",".join(
            str(Meta(p).raw.get("name", ""))
            for p in pods
            if not is_mirror_pod(p) and not is_daemonset_pod(p)
        )
        self.status_event(
            "Normal",
            "ScaleDown",
            f"Scale-down: removing node {name}, utilization: {go_utilization(used)}, "
            f"pods to reschedule: {names}",
        )

    async def progress(
        self,
        *,
        now: datetime,
        pods_by_node: Mapping[str, Sequence[Pod]],
        existing_nodes: set[str],
        snapshot: ProviderSnapshot,
        registry: ClusterStateRegistry,
        going: Collection[str] | None = None,
    ) -> None:
        """:meth:`decide` driven by the loop's executor."""
        await self.executor.drive(
            self.decide(
                now=now,
                pods_by_node=pods_by_node,
                existing_nodes=existing_nodes,
                snapshot=snapshot,
                registry=registry,
                going=going,
            ),
            now=now,
        )

    def decide(
        self,
        *,
        now: datetime,
        pods_by_node: Mapping[str, Sequence[Pod]],
        existing_nodes: set[str],
        snapshot: ProviderSnapshot,
        registry: ClusterStateRegistry,
        going: Collection[str] | None = None,
    ) -> Decision[None]:
        """Advance every deletion in progress: evict what is left on a node to drain; delete
        a node once it is drained (or, empty, once its taint delay has passed).

        ``going``: the pods (``namespace/name``) another system is evicting, as the gate
        answered when the snapshot was read (a decision on a worker thread does not read the
        ledger the loop writes); ``None``: the gate is asked for each pod."""
        self._going = going
        self.deleted, self.evicted = [], []
        for name in sorted(self.in_progress):
            deletion = self.in_progress[name]
            if name not in existing_nodes:
                del self.in_progress[name]  # the node is gone already
                continue
            pods = [p for p in pods_by_node.get(name, ()) if not is_terminal(p)]
            movable = [p for p in pods if not is_mirror_pod(p) and not is_daemonset_pod(p)]
            if deletion.drain:
                if not (yield from self._drain(deletion, movable, now)):
                    continue
            elif now < deletion.delete_after:
                continue
            elif any(not Meta(p).raw.get("deletionTimestamp") for p in movable):
                yield from self._abort(
                    deletion, "failed to delete the node", now
                )  # no longer empty
                continue
            if now < deletion.delete_after:
                continue
            daemon_sets = [p for p in pods if is_daemonset_pod(p)]
            evict_ds = (
                self.settings.daemonset_eviction_for_occupied_nodes
                if deletion.drain
                else self.settings.daemonset_eviction_for_empty_nodes
            )
            if evict_ds:
                for pod in daemon_sets:
                    yield from self._evict(pod, best_effort=True, now=now)
            yield from self._delete(deletion, now, snapshot, registry)

    def _drain(self, deletion: Deletion, movable: Sequence[Pod], now: datetime) -> Decision[bool]:
        """Evict what is left; whether the node is drained."""
        waiting = [p for p in movable if not Meta(p).raw.get("deletionTimestamp")]
        if waiting:
            if now - deletion.started > self.settings.max_pod_eviction_time:
                yield from self._abort(
                    deletion, "failed to drain the node, aborting ScaleDown", now
                )
                return False
            for pod in waiting:
                if (yield from self._evict(pod, best_effort=False, now=now)):
                    deletion.evicted.add(pod_id(pod))
            return False
        if movable:  # evicted, still terminating
            if deletion.evictions_done is None:
                deletion.evictions_done = now
            limit = timedelta(seconds=self.settings.max_graceful_termination_sec)
            if now - deletion.evictions_done > limit + POD_EVICTION_HEADROOM:
                yield from self._abort(
                    deletion, "failed to drain the node, aborting ScaleDown", now
                )
            return False
        return True

    def _already_going(self, pod: Pod, now: datetime) -> bool:
        if self._going is not None:
            return pod_id(pod) in self._going
        return self.gate.already_going(pod, now=now)

    def _evict(self, pod: Pod, *, best_effort: bool, now: datetime) -> Decision[bool]:
        if self._already_going(pod, now):
            return True  # another system's eviction of it is in flight: it is going already
        grace = spec_of(pod).get("terminationGracePeriodSeconds")
        limit = self.settings.max_graceful_termination_sec
        seconds = min(grace, limit) if isinstance(grace, int) else min(DEFAULT_GRACE, limit)
        result = yield Evict(actor=ACTOR, pod=pod, grace_period_seconds=seconds)
        err = result.error
        if result.outcome is WriteOutcome.GONE:
            return True
        if isinstance(err, KubeApiError):
            self.metrics.evicted_pods_total.labels("failed").inc()
            level = log.debug if best_effort or err.code == 429 else log.warning
            level(
                "eviction refused",
                extra={"fields": {"pod": pod_id(pod), "code": err.code, "error": err.message}},
            )
            return False
        if err is not None:
            self.metrics.evicted_pods_total.labels("failed").inc()
            log.warning(
                "eviction failed", extra={"fields": {"pod": pod_id(pod), "error": str(err)}}
            )
            return False
        self.metrics.evicted_pods_total.labels("succeeded").inc()
        self.evicted.append(pod_id(pod))
        if not best_effort:
            yield _event(
                pod, type="Normal", reason="ScaleDown", message="deleting pod for node scale down"
            )
        return True

    def _delete(
        self,
        deletion: Deletion,
        now: datetime,
        snapshot: ProviderSnapshot,
        registry: ClusterStateRegistry,
    ) -> Decision[None]:
        name = deletion.name
        group = snapshot.groups.get(deletion.group_id)
        if group is None:
            err: Exception | None = ProviderError(f"node group {deletion.group_id} is gone")
        else:
            applied: Applied = yield DeleteNodes(actor=ACTOR, group=group.id, nodes=[deletion.node])
            err = node_group_failure(applied)
        if err is not None:
            log.warning("node deletion failed", extra={"fields": {"node": name, "error": str(err)}})
            yield from self._abort(deletion, "failed to delete the node", now)
            return
        del self.in_progress[name]
        self.deleted.append(name)
        self.last_delete = now
        registry.register_scale_down(
            deletion.group_id, name, now, now + MAX_CLOUD_PROVIDER_NODE_DELETION_TIME
        )
        self.metrics.scaled_down_nodes_total.labels(deletion.reason, "", "").inc()
        # upstream RegisterAndRecordSuccessfulScaleDownEvent (actuation/delete_in_batch.go)
        if deletion.drain:
            self.status_event("Normal", "ScaleDown", f"Scale-down: node {name} removed with drain")
        else:
            self.status_event("Normal", "ScaleDownEmpty", f"Scale-down: empty node {name} removed")
        log.info("node deleted", extra={"fields": {"node": name, "group": deletion.group_id}})

    def _abort(self, deletion: Deletion, message: str, now: datetime) -> Decision[None]:
        name = deletion.name
        self.in_progress.pop(name, None)
        self.last_failure = now
        yield _event(deletion.node, type="Warning", reason="ScaleDownFailed", message=message)
        cleaned = yield Untaint(
            actor=ACTOR,
            node=name,
            key=TO_BE_DELETED_TAINT,
            uncordon=self.settings.cordon_node_before_terminating,
        )
        if cleaned.error is not None:
            log.warning(
                "cannot remove the taint",
                extra={"fields": {"node": name, "error": str(cleaned.error)}},
            )


def _event(involved: Pod | Node, *, type: str, reason: str, message: str) -> Intent:
    return Event(actor=ACTOR, involved=involved, type=type, reason=reason, message=message)
