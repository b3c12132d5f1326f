"""The scale-up part of ``RunOnce`` (reference §1 steps 16-20, §2.2).

* :func:`inject_upcoming` — nodes a group is bringing up join the snapshot as copies of its
  template, so pending pods can "land" on them (upstream's annotation
  ``cluster-autoscaler.k8s.io/upcoming-node``); the group's registered, not yet started nodes
  leave it (they are counted among the upcoming) and are no scale-down candidates;
* :func:`pods_of_draining_nodes` — ``CurrentlyDrainedNodes``: the pods of the nodes the
  actuator is draining need room elsewhere, so they join the pending pods;
* :class:`ScaleUpPhase` — the scale-up decision (:mod:`.scale_up`) and its execution
  (:mod:`.scale_up_executor`), and ``--enforce-node-group-min-size``: decisions the iteration's
  one decision (:mod:`.run_once_decision`) runs.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

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
from kubescale.controllers.autoscaler.expander.expander_chain import build_expander
from kubescale.controllers.autoscaler.metrics.autoscaler_metrics import AutoscalerMetrics
from kubescale.controllers.autoscaler.model.node_facts import currently_being_deleted
from kubescale.controllers.autoscaler.model.pod_facts import (
    controller_of,
    is_daemonset_pod,
    is_mirror_pod,
)
from kubescale.controllers.autoscaler.scaleup.resource_limits import node_capacity
from kubescale.controllers.autoscaler.scaleup.scale_up import (
    ScaleUpDecision,
    ScaleUpInputs,
    ScaleUpResult,
    decide_scale_up,
)
from kubescale.controllers.autoscaler.scaleup.scale_up_executor import (
    pod_events,
    scale_up_decision,
)
from kubescale.controllers.autoscaler.simulator.template_nodes import TemplateNode
from kubescale.objects.config_map import ConfigMap
from kubescale.objects.node import Node
from kubescale.objects.pod import Pod
from kubescale.objects.views import Meta
from kubescale.plans.executor import Decision
from kubescale.plans.intents import ResizeNodeGroup
from kubescale.scheduling.snapshot_journal import SnapshotJournal

__all__ = ["ScaleUpOutcome", "ScaleUpPhase", "inject_upcoming", "pods_of_draining_nodes"]

log = component_logger("cluster-autoscaler")

EventSink = Callable[[str, str, str], None]


def inject_upcoming(
    journal: SnapshotJournal,
    templates: Mapping[str, TemplateNode],
    upcoming: Mapping[str, int],
    registered: Mapping[str, Sequence[str]],
) -> set[str]:
    """Add the upcoming nodes; returns the registered not-started nodes taken out."""
    not_started: set[str] = set()
    for group_id, count in sorted(upcoming.items()):
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


def pods_of_draining_nodes(journal: SnapshotJournal, draining: Iterable[str]) -> list[Pod]:
    """Take the pods off the nodes being drained; those a controller will recreate need room
    elsewhere (upstream's ``FilterRecreatablePods``).

    Deviation: a pod already evicted (terminating) leaves its node but is not counted again —
    its controller's replacement is among the pending pods already. Upstream counts both while
    the evicted pod terminates, which can add a node the drain does not need."""
    moved: list[Pod] = []
    for name in sorted(draining):
        state = journal.snapshot.nodes.get(name)
        if state is None:
            continue
        for pod in list(state.pods):
            if is_daemonset_pod(pod) or is_mirror_pod(pod):
                continue
            journal.remove_pod(name, pod)
            terminating = Meta(pod).raw.get("deletionTimestamp") is not None
            if controller_of(pod) is not None and not terminating:
                moved.append(pod)
    return moved


@dataclass
class ScaleUpOutcome:
    decision: ScaleUpDecision
    scaled_up: list[tuple[str, int, int]]
    succeeded: bool


class ScaleUpPhase:
    """The scale-up step and ``--enforce-node-group-min-size``, as decisions."""

    def __init__(
        self,
        *,
        settings: AutoscalerSettings,
        metrics: AutoscalerMetrics,
        provider: CloudProvider,
        registry: ClusterStateRegistry,
        rng: random.Random,
        status_event: EventSink,
        cpu_clock: Callable[[], float],
    ) -> None:
        self.settings = settings
        self.metrics = metrics
        self.provider = provider
        self.registry = registry
        self.rng = rng
        self.status_event = status_event
        self.cpu_clock = cpu_clock

    def decision(
        self,
        *,
        pending: list[Pod],
        snapshot: ProviderSnapshot,
        templates: Mapping[str, TemplateNode],
        journal: SnapshotJournal,
        ready_nodes: Sequence[Node],
        upcoming: int,
        nodes: Sequence[Node],
        now: datetime,
        config_map: ConfigMap | None,
        resized: Collection[str] = (),
    ) -> Decision[ScaleUpOutcome]:
        """``ScaleUpOrchestrator.ScaleUp``: ``--max-nodes-total`` is checked against the ready
        nodes plus the ``upcoming`` ones (upstream: ``len(nodes)+len(upcomingNodes)`` in
        ``filterValidScaleUpNodeGroups``, ``ComputeExpansionOption`` and
        ``GetCappedNewNodeCount``), so nodes still booting count against the cap. Groups in
        ``resized`` (their unregistered nodes were removed this iteration) are not offered.
        ``config_map`` is the priority expander's ConfigMap, read with the snapshot.

        Then ``ExecuteScaleUps`` (:func:`.scale_up_decision`: each resize yielded, its outcome
        received) and the pod events."""
        other_capacity = [
            node_capacity(n)
            for n in nodes
            if snapshot.group_for_node(n) is None and not currently_being_deleted(n, now)
        ]
        expander = build_expander(
            self.settings,
            rng=self.rng,
            cluster_nodes=len(nodes),
            config_map=lambda: config_map,
        )
        start = self.cpu_clock()
        inputs = ScaleUpInputs(
            pending=pending,
            groups=[g for g in snapshot.groups.values() if g.id not in resized],
            templates=templates,
            safety=lambda g: self.registry.scale_up_safety(g, now),
            journal=journal,
            current_nodes=len(ready_nodes) + upcoming,
            other_capacity=other_capacity,
            settings=self.settings,
            expander=expander,
            elapsed=lambda: self.cpu_clock() - start,
        )
        decision = decide_scale_up(inputs)
        for reason, message in decision.warnings:
            self.status_event("Warning", reason, message)
        execution = yield from scale_up_decision(
            decision.infos,
            registry=self.registry,
            metrics=self.metrics,
            status_event=self.status_event,
            now=now,
        )
        result = decision.result if execution.failed is None else ScaleUpResult.ERROR
        # not ``yield from`` a list: the executor sends each event's result back
        for event in pod_events(  # noqa: UP028
            result=result,
            executed=execution.done if execution.succeeded else [],
            triggered=decision.triggered,
            remaining=decision.remaining,
        ):
            yield event
        if execution.succeeded:
            self.metrics.last_activity.labels("scaleUp").set(now.timestamp())
        return ScaleUpOutcome(
            decision=decision,
            scaled_up=[(i.group.id, i.current_size, i.new_size) for i in execution.done],
            succeeded=execution.succeeded,
        )

    def min_size_decision(
        self, snapshot: ProviderSnapshot, now: datetime, raised: Mapping[str, int]
    ) -> Decision[None]:
        """``--enforce-node-group-min-size`` (upstream's ``ScaleUpToNodeGroupMinSize``): each
        group below its min size grows to it (``IncreaseSize`` by min − target), unless it
        may not scale up now (backoff, unhealthy). ``raised`` holds the target sizes this
        iteration's scale-up set (upstream reads ``TargetSize()`` from the provider after its
        ``IncreaseSize``): a group it raised is not raised again on the snapshot's stale
        size."""
        for group in snapshot.groups.values():
            missing = group.min_size - raised.get(group.id, group.target_size)
            if missing <= 0 or not self.registry.scale_up_safety(group.id, now).safe:
                continue
            applied = yield ResizeNodeGroup(actor=ACTOR, group=group.id, delta=missing)
            err = node_group_failure(applied)
            if err is not None and not isinstance(err, WriteOutcomeUnknown):
                log.warning("cannot scale up to min size", extra={"fields": {"error": str(err)}})
                continue
            # done, or unanswered: counted as done until the group's object shows otherwise
            self.registry.register_scale_up(group, missing, now)
