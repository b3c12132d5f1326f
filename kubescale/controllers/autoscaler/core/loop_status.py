"""What ``RunOnce`` leaves behind every loop: the status ConfigMap, its events, the metrics.

* The ConfigMap ``--status-config-map-name`` in ``--namespace`` (``--write-status-configmap``)
  is read and written every loop, as ``WriteStatusConfigMap`` does (GET, then update or
  create); it starts as ``autoscalerStatus: Initializing``. Upstream's ``LogRecorder`` events
  (``ScaledUpGroup``, ``ScaleUpTimedOut``, ``ScaleDown`` ...) are recorded on it — none while the
  ConfigMap is not written, as upstream's recorder is inactive then. A failed write is logged
  and retried next loop. The write is a :class:`~kubescale.plans.intents.WriteConfigMap` and
  the events :class:`~kubescale.plans.intents.Event` intents of the iteration's one decision
  (:mod:`.run_once_decision`), applied by the loop's executor; under ``--dry-run`` both are
  printed, the events about the ConfigMap that would be written.
* The gauges of :class:`~.autoscaler_metrics.AutoscalerMetrics` are set from the registry, the
  planner and the actuator.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, TypeVar

from kubescale.base.go_time import go_time_string
from kubescale.base.logs import component_logger
from kubescale.controllers.autoscaler.cloudprovider.cloud_provider import ProviderSnapshot
from kubescale.controllers.autoscaler.cloudprovider.provider_writes import ACTOR
from kubescale.controllers.autoscaler.clusterstate.cluster_state import ClusterStateRegistry
from kubescale.controllers.autoscaler.clusterstate.status_configmap import (
    StatusHistory,
    build_status,
    status_write,
)
from kubescale.controllers.autoscaler.config.autoscaler_settings import AutoscalerSettings
from kubescale.controllers.autoscaler.metrics.autoscaler_metrics import AutoscalerMetrics
from kubescale.controllers.autoscaler.model.node_facts import currently_being_deleted
from kubescale.controllers.autoscaler.scaledown.scale_down_actuator import ScaleDownActuator
from kubescale.controllers.autoscaler.scaledown.scale_down_planner import ScaleDownPlanner
from kubescale.controllers.autoscaler.scaleup.resource_limits import cores_and_memory, node_capacity
from kubescale.objects.node import Node
from kubescale.plans.config_maps import config_map_body
from kubescale.plans.executor import Applied, Decision, PlanExecutor
from kubescale.plans.intents import Event

__all__ = ["StatusReporter"]

log = component_logger("cluster-autoscaler")

R = TypeVar("R")


class StatusReporter:
    """The status ConfigMap, its events and the gauges (module docstring)."""

    def __init__(
        self,
        *,
        executor: PlanExecutor,
        metrics: AutoscalerMetrics,
        settings: AutoscalerSettings,
    ) -> None:
        self.executor = executor
        self.metrics = metrics
        self.settings = settings
        self.history = StatusHistory()
        self.status_object: dict[str, Any] | None = None
        self.pending: list[Event] | None = None
        """The events recorded by the decision running now (:meth:`collecting`)."""

    def event(self, type_: str, reason: str, message: str) -> None:
        """An event on the status ConfigMap (upstream's ``LogRecorder``): noted on the executor,
        or, while a decision runs (:meth:`collecting`), kept for it to yield."""
        if self.status_object is None:
            return
        event = Event(
            actor=ACTOR, involved=self.status_object, type=type_, reason=reason, message=message
        )
        if self.pending is not None:
            self.pending.append(event)
        else:
            self.executor.note(event)

    def collecting(self, decision: Decision[R]) -> Decision[R]:
        """``decision`` with the status events it records (:meth:`event`, called by its steps)
        yielded as :class:`~kubescale.plans.intents.Event` intents where they were recorded:
        before the next intent it yields, or before it returns. So an iteration's plan holds
        its events in order, and the events are queued on the loop's thread by the executor,
        never on the worker thread the decision computes on."""
        self.pending = []
        try:
            answer: Applied | None = None
            first = True
            while True:
                try:
                    intent = next(decision) if first else decision.send(answer)  # type: ignore[arg-type]
                except StopIteration as stop:
                    yield from self._flush()
                    result: R = stop.value
                    return result
                first = False
                yield from self._flush()
                answer = yield intent
        finally:
            self.pending = None  # also when the decision is dropped (its task cancelled)

    def _flush(self) -> Decision[None]:
        while self.pending:
            yield self.pending.pop(0)

    def decision(
        self, now: datetime, registry: ClusterStateRegistry, *, initializing: bool = False
    ) -> Decision[None]:
        """``WriteStatusConfigMap``: the status (``Initializing`` on the first loop) as a
        :class:`~kubescale.plans.intents.WriteConfigMap`; the object written is what later
        events are about."""
        settings = self.settings
        if not settings.write_status_configmap:
            return
        status: dict[str, Any]
        if initializing:
            status = {"time": go_time_string(now), "autoscalerStatus": "Initializing"}
        else:
            status = build_status(registry, self.history, now)
        intent = status_write(
            actor=ACTOR,
            name=settings.status_config_map_name,
            namespace=settings.namespace,
            status=status,
        )
        applied = yield intent
        if applied.error is not None:
            log.error(
                "Failed to write status configmap", extra={"fields": {"error": str(applied.error)}}
            )
        elif applied.stored is not None:
            self.status_object = dict(applied.stored)
        elif applied.dry_run and self.status_object is None:
            self.status_object = config_map_body(intent, None)  # what events would be about

    def update_metrics(
        self,
        *,
        snapshot: ProviderSnapshot,
        registry: ClusterStateRegistry,
        planner: ScaleDownPlanner,
        actuator: ScaleDownActuator,
        nodes: Iterable[Node],
        now: datetime,
    ) -> None:
        metrics, settings = self.metrics, self.settings
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
        total_max = settings.max_nodes_total
        metrics.max_nodes_count.set(min(total_max, groups_max) if total_max else groups_max)
        cores = memory = 0
        for node in nodes:
            if currently_being_deleted(node, now):
                continue
            c, m = cores_and_memory(node_capacity(node))
            cores += c
            memory += m
        metrics.cluster_cpu_current_cores.set(cores)
        metrics.cluster_memory_current_bytes.set(memory)
        metrics.cpu_limits_cores.labels("minimum").set(settings.cores_total.min)
        metrics.cpu_limits_cores.labels("maximum").set(settings.cores_total.max)
        metrics.memory_limits_bytes.labels("minimum").set(settings.memory_total.min)
        metrics.memory_limits_bytes.labels("maximum").set(settings.memory_total.max)
        for group in snapshot.groups.values():
            metrics.node_group_min_count.labels(group.id).set(group.min_size)
            metrics.node_group_max_count.labels(group.id).set(group.max_size)
            metrics.node_group_target_count.labels(group.id).set(group.target_size)
            metrics.node_group_healthiness.labels(group.id).set(
                1 if registry.is_node_group_healthy(group.id) else 0
            )
            backoff = registry.backoff.status(group.id, now)
            metrics.node_group_backoff_status.labels(group.id, "").set(1 if backoff else 0)
        metrics.unneeded_nodes_count.set(len(planner.unneeded))
        reasons: dict[str, int] = {}
        for unremovable in planner.unremovable.values():
            reasons[unremovable.reason] = reasons.get(unremovable.reason, 0) + 1
        metrics.unremovable_nodes_count.clear()
        for reason, count in reasons.items():
            metrics.unremovable_nodes_count.labels(reason).set(count)
        metrics.pending_node_deletions.set(len(actuator.in_progress))
