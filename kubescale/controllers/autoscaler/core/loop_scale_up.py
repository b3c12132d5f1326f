"""The scale-up part of ``RunOnce`` (reference §1 steps 16-20, §2.2).

* :func:`inject_upcoming` — nodes a group is bringing up join the snapshot as copies of its
  template, so pending pods can "land" on them (upstream's annotation
  ``cluster-autoscaler.k8s.io/upcoming-node``); the group's registered, not yet started nodes
  leave it (they are counted among the upcoming) and are no scale-down candidates;
* :func:`pods_of_draining_nodes` — ``CurrentlyDrainedNodes``: the pods of the nodes the
  actuator is draining need room elsewhere, so they join the pending pods;
* :class:`ScaleUpPhase` — the scale-up decision (:mod:`.scale_up`) carried out
  (:mod:`.scale_up_executor`), and ``--enforce-node-group-min-size``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from kubescale.base.logs import component_logger
from kubescale.controllers.autoscaler.cloudprovider.cloud_provider import (
    CloudProvider,
    ProviderError,
    ProviderSnapshot,
)
from kubescale.controllers.autoscaler.cloudprovider.provider_writes import (
    ACTOR,
    write_node_group,
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
    execute_scale_up,
    record_pod_events,
)
from kubescale.controllers.autoscaler.simulator.template_nodes import TemplateNode
from kubescale.objects.config_map import ConfigMap
from kubescale.objects.node import Node
from kubescale.objects.pod import Pod
from kubescale.objects.views import Meta
from kubescale.plans.executor import PlanExecutor
from kubescale.plans.intents import ResizeNodeGroup
from kubescale.runtime.off_loop import OffLoop
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
    def __init__(
        self,
        *,
        settings: AutoscalerSettings,
        metrics: AutoscalerMetrics,
        provider: CloudProvider,
        registry: ClusterStateRegistry,
        rng: random.Random,
        priority_config_map: Callable[[], ConfigMap | None],
        status_event: EventSink,
        cpu_clock: Callable[[], float],
        executor: PlanExecutor,
        off_loop: OffLoop | None = None,
    ) -> None:
        self.off_loop = off_loop if off_loop is not None else OffLoop("scale-up", run_inline=True)
        """Where the decision computes (the loop's worker thread; inline when not given)."""
        self.settings = settings
        self.metrics = metrics
        self.executor = executor
        """The loop's one executor: resizes and pod events go through it."""
        self.provider = provider
        self.registry = registry
        self.rng = rng
        self.priority_config_map = priority_config_map
        self.status_event = status_event
        self.cpu_clock = cpu_clock

    async def run(
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
        resized: Collection[str] = (),
    ) -> ScaleUpOutcome:
        """``ScaleUpOrchestrator.ScaleUp``: ``--max-nodes-total`` is checked against the ready
        nodes plus the ``upcoming`` ones (upstream: ``len(nodes)+len(upcomingNodes)`` in
        ``filterValidScaleUpNodeGroups``, ``ComputeExpansionOption`` and
        ``GetCappedNewNodeCount``), so nodes still booting count against the cap. Groups in
        ``resized`` (their unregistered nodes were removed this iteration) are not offered."""
        other_capacity = [
            node_capacity(n)
            for n in nodes
            if snapshot.group_for_node(n) is None and not currently_being_deleted(n, now)
        ]
        config_map = self.priority_config_map()  # read on the loop, the decision on a thread
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
        decision = await self.off_loop.run(partial(decide_scale_up, inputs))
        for reason, message in decision.warnings:
            self.status_event("Warning", reason, message)
        execution = await execute_scale_up(
            decision.infos,
            executor=self.executor,
            registry=self.registry,
            metrics=self.metrics,
            status_event=self.status_event,
            now=now,
        )
        result = decision.result if execution.failed is None else ScaleUpResult.ERROR
        record_pod_events(
            self.executor,
            result=result,
            executed=execution.done if execution.succeeded else [],
            triggered=decision.triggered,
            remaining=decision.remaining,
        )
        if execution.succeeded:
            self.metrics.last_activity.labels("scaleUp").set(now.timestamp())
        return ScaleUpOutcome(
            decision=decision,
            scaled_up=[(i.group.id, i.current_size, i.new_size) for i in execution.done],
            succeeded=execution.succeeded,
        )

    async def to_min_size(self, snapshot: ProviderSnapshot, now: datetime) -> None:
        """``--enforce-node-group-min-size``: groups below their min grow to it."""
        for group in snapshot.groups.values():
            missing = group.min_size - group.target_size
            if missing <= 0 or not self.registry.scale_up_safety(group.id, now).safe:
                continue
            try:
                await write_node_group(
                    self.executor,
                    ResizeNodeGroup(actor=ACTOR, group=group.id, delta=missing),
                    now=now,
                )
            except ProviderError as err:
                log.warning("cannot scale up to min size", extra={"fields": {"error": str(err)}})
                continue
            self.registry.register_scale_up(group, missing, now)
