"""The scale-up decision: ``ScaleUpOrchestrator.ScaleUp`` without the I/O (reference §2.2).

Given the pods that still need room, the node groups, their template nodes and the snapshot
(existing and upcoming nodes, the pending pods that fit already placed), in upstream's order:

1. pods are grouped into equivalence groups (:mod:`.equivalence`);
2. node groups are skipped, with the reason their pods will be told: not healthy (``not ready
   for scale-up``), backed off (``in backoff after failed scale-up``), at max size (``max node
   group size reached``), a zero-or-max group whose full size would pass ``--max-nodes-total``,
   no template node (``not ready for scale-up``), or one more node would pass the cluster's
   resource limits (``max cluster cpu limit reached``);
3. for each remaining group, one exemplar per equivalence group is checked on the template
   node; a failure records the filter's reasons for that group;
4. each group's expansion option: similar groups (``--balance-similar-node-groups``), then the
   binpacking estimate; zero-or-max groups are rounded up to their max size;
5. no option: ``NoOptionsAvailable``; else the expander chain picks one;
6. the node count is capped at ``--max-nodes-total`` (event ``MaxNodesTotalReached``; nothing
   left: an error) and at the resource limits;
7. the nodes are split between the chosen group and its similar groups, each capped by the
   resource limits in turn.

The result says which pods triggered the scale-up and, for the pods that cannot be helped, the
reasons per node group — what the loop turns into ``TriggeredScaleUp`` / ``NotTriggerScaleUp``
events with upstream's texts (:func:`reasons_message`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from kubescale.controllers.autoscaler.cloudprovider.cloud_provider import NodeGroup
from kubescale.controllers.autoscaler.clusterstate.cluster_state import ScaleUpSafety
from kubescale.controllers.autoscaler.config.autoscaler_settings import AutoscalerSettings
from kubescale.controllers.autoscaler.estimator.estimator import BinpackingLimiter, estimate_nodes
from kubescale.controllers.autoscaler.expander.expanders import ExpanderChain
from kubescale.controllers.autoscaler.expander.expansion_option import ExpansionOption
from kubescale.controllers.autoscaler.scaleup.balancing import (
    BASIC_IGNORED_LABELS,
    ScaleUpInfo,
    SimilarityRules,
    balance_scale_up,
    is_similar,
)
from kubescale.controllers.autoscaler.scaleup.resource_limits import (
    ResourceLimits,
    cores_and_memory,
)
from kubescale.controllers.autoscaler.simulator.equivalence import build_pod_groups
from kubescale.controllers.autoscaler.simulator.template_nodes import TemplateNode
from kubescale.objects.pod import Pod
from kubescale.scheduling.snapshot_journal import SnapshotJournal

__all__ = [
    "BACKOFF_REASON",
    "MAX_LIMIT_REACHED_REASON",
    "NOT_READY_REASON",
    "NoScaleUpInfo",
    "ScaleUpDecision",
    "ScaleUpInputs",
    "ScaleUpResult",
    "decide_scale_up",
    "reasons_message",
    "triggered_message",
]

BACKOFF_REASON: Final = "in backoff after failed scale-up"
MAX_LIMIT_REACHED_REASON: Final = "max node group size reached"
NOT_READY_REASON: Final = "not ready for scale-up"
ATOMIC_LIMIT_REASON: Final = "atomic scale-up exceeds cluster node count limit"
NO_OPTIONS_REASON: Final = "no scale-up options available"
FILTERED_OUT_REASON: Final = "expansion options filtered out by the expander"
EXECUTION_ERROR_REASON: Final = "failed to execute scale-up"
MAX_NODES_TOTAL_MESSAGE: Final = "max total nodes in cluster reached"


class ScaleUpResult(enum.Enum):
    SUCCESSFUL = "ScaleUpSuccessful"
    ERROR = "ScaleUpError"
    NO_OPTIONS_AVAILABLE = "ScaleUpNoOptionsAvailable"
    NOT_NEEDED = "ScaleUpNotNeeded"
    LIMITED_BY_MAX_NODES_TOTAL = "ScaleUpLimitedByMaxNodesTotal"


@dataclass(frozen=True)
class NoScaleUpInfo:
    """A pod no scale-up helps, with the reasons per node group."""

    pod: Pod
    rejected: Mapping[str, tuple[str, ...]]
    """Group id → why the pod does not fit its template."""
    skipped: Mapping[str, tuple[str, ...]]
    """Group id → why the group was not considered."""


@dataclass(frozen=True, kw_only=True)
class ScaleUpInputs:
    pending: Sequence[Pod]
    groups: Sequence[NodeGroup]
    templates: Mapping[str, TemplateNode]
    safety: Callable[[str], ScaleUpSafety]
    journal: SnapshotJournal
    """The snapshot with existing and upcoming nodes (unchanged on return)."""
    current_nodes: int
    """Nodes counted against ``--max-nodes-total``: upstream's ``len(nodes) +
    len(upcomingNodes)``, the ready nodes and those still coming (booting, unregistered, or
    only in a target size)."""
    other_capacity: Sequence[Mapping[str, int]] = ()
    """Capacity of nodes outside every group (resource limits)."""
    settings: AutoscalerSettings
    expander: ExpanderChain
    elapsed: Callable[[], float] | None = None


@dataclass(frozen=True, kw_only=True)
class ScaleUpDecision:
    result: ScaleUpResult
    infos: tuple[ScaleUpInfo, ...] = ()
    best: ExpansionOption | None = None
    triggered: tuple[Pod, ...] = ()
    remaining: tuple[NoScaleUpInfo, ...] = ()
    awaiting: tuple[Pod, ...] = ()
    """Pods that fit another group but not the chosen one: maybe next loop."""
    warnings: tuple[tuple[str, str], ...] = ()
    """(reason, message) Warning events on the status ConfigMap."""
    error: str = ""


@dataclass
class _PodGroup:
    pods: list[Pod]
    schedulable: bool = False
    schedulable_groups: list[str] = field(default_factory=list)
    errors: dict[str, tuple[str, ...]] = field(default_factory=dict)


def _similarity(settings: AutoscalerSettings) -> SimilarityRules:
    return SimilarityRules(
        memory_difference_ratio=settings.memory_difference_ratio,
        max_allocatable_difference_ratio=settings.max_allocatable_difference_ratio,
        max_free_difference_ratio=settings.max_free_difference_ratio,
        ignored_labels=BASIC_IGNORED_LABELS | frozenset(settings.balancing_ignore_labels),
        balancing_labels=settings.balancing_labels,
    )


def decide_scale_up(inputs: ScaleUpInputs) -> ScaleUpDecision:
    """The module docstring's steps."""
    settings = inputs.settings
    pod_groups = [_PodGroup(pods=list(g)) for g in build_pod_groups(inputs.pending)]
    if not pod_groups:
        return ScaleUpDecision(result=ScaleUpResult.NOT_NEEDED)
    limits = ResourceLimits(cores=settings.cores_total, memory=settings.memory_total)
    usage = limits.usage(
        groups=(
            (g.target_size, inputs.templates[g.id].capacity)
            for g in inputs.groups
            if g.id in inputs.templates
        ),
        other_nodes=inputs.other_capacity,
    )
    valid: list[NodeGroup] = []
    skipped: dict[str, tuple[str, ...]] = {}
    for group in inputs.groups:
        reason = _skip_reason(group, inputs, limits, usage)
        if reason is None:
            valid.append(group)
        else:
            skipped[group.id] = reason
    schedulable: dict[str, list[list[Pod]]] = {}
    for group in valid:
        schedulable[group.id] = _schedulable_pod_groups(pod_groups, group, inputs)
    rules = _similarity(settings)
    options: list[ExpansionOption] = []
    for group in valid:
        option = _expansion_option(group, valid, schedulable, inputs, rules)
        if option is not None and option.pods and option.node_count > 0:
            options.append(option)
    if not options:
        _mark_all(pod_groups, NO_OPTIONS_REASON)
        return ScaleUpDecision(
            result=ScaleUpResult.NO_OPTIONS_AVAILABLE,
            remaining=_remaining(pod_groups, skipped),
            warnings=_expander_warnings(inputs),
        )
    best = inputs.expander.best_option(options, inputs.templates)
    warnings = _expander_warnings(inputs)
    if best is None or best.node_count <= 0:
        _mark_all(pod_groups, FILTERED_OUT_REASON)
        return ScaleUpDecision(
            result=ScaleUpResult.NO_OPTIONS_AVAILABLE,
            remaining=_remaining(pod_groups, skipped),
            warnings=warnings,
        )
    new_nodes = best.node_count
    total = settings.max_nodes_total
    if total > 0 and new_nodes + inputs.current_nodes > total:
        new_nodes = total - inputs.current_nodes
        warnings += (("MaxNodesTotalReached", f"Max total nodes in cluster reached: {total}"),)
        if new_nodes < 1:
            _mark_all(pod_groups, EXECUTION_ERROR_REASON)
            return ScaleUpDecision(
                result=ScaleUpResult.ERROR,
                best=best,
                triggered=best.pods,
                remaining=_remaining(pod_groups, skipped),
                warnings=warnings,
                error="max node total count already reached",
            )
    template = inputs.templates[best.group.id]
    new_nodes, _ = limits.allowed_delta(usage=usage, per_node=template.capacity, wanted=new_nodes)
    targets = [best.group]
    if settings.balance_similar_node_groups:
        for candidate in _similar_groups(best.group, valid, schedulable, inputs, rules):
            if candidate.id in inputs.templates:
                fits, _ = limits.allowed_delta(
                    usage=usage, per_node=inputs.templates[candidate.id].capacity, wanted=1
                )
                if fits >= 1:
                    targets.append(candidate)
    infos = balance_scale_up(targets, new_nodes)
    infos = _cap_by_quota(infos, limits, usage, inputs.templates)
    awaiting = tuple(
        pod for g in pod_groups if g.schedulable and best.group.id in g.errors for pod in g.pods
    )
    return ScaleUpDecision(
        result=ScaleUpResult.SUCCESSFUL,
        infos=tuple(infos),
        best=best,
        triggered=best.pods,
        remaining=_remaining(pod_groups, skipped),
        awaiting=awaiting,
        warnings=warnings,
    )


def _skip_reason(
    group: NodeGroup,
    inputs: ScaleUpInputs,
    limits: ResourceLimits,
    usage: tuple[int, int],
) -> tuple[str, ...] | None:
    safety = inputs.safety(group.id)
    if not safety.safe:
        return (NOT_READY_REASON,) if not safety.healthy else (BACKOFF_REASON,)
    if group.target_size >= group.max_size:
        return (MAX_LIMIT_REACHED_REASON,)
    count = 1
    if group.options.zero_or_max_node_scaling:
        count = group.max_size - group.target_size
        total = inputs.settings.max_nodes_total
        if total and inputs.current_nodes + count > total:
            return (ATOMIC_LIMIT_REASON,)
    template = inputs.templates.get(group.id)
    if template is None:
        return (NOT_READY_REASON,)
    allowed, exceeded = limits.allowed_delta(usage=usage, per_node=template.capacity, wanted=count)
    if allowed < count and exceeded:
        return (limits.exceeded_reason(exceeded),)
    return None


def _schedulable_pod_groups(
    pod_groups: list[_PodGroup], group: NodeGroup, inputs: ScaleUpInputs
) -> list[list[Pod]]:
    """``SchedulablePodGroups``: exemplars checked on the group's template node."""
    template = inputs.templates[group.id]
    journal = inputs.journal
    journal.fork()
    try:
        journal.add_node(template.node, allocatable=template.allocatable)
        for pod in template.pods:
            journal.add_pod(template.name, pod)
        snapshot = journal.snapshot
        fitting: list[list[Pod]] = []
        for pod_group in pod_groups:
            info = snapshot.pod_info(pod_group.pods[0])
            status = snapshot.filter(info, template.name, snapshot.prefilter(info))
            if status is None:
                fitting.append(pod_group.pods)
                pod_group.schedulable = True
                pod_group.schedulable_groups.append(group.id)
            else:
                pod_group.errors[group.id] = status.reasons
        return fitting
    finally:
        journal.revert()


def _similar_groups(
    group: NodeGroup,
    valid: Sequence[NodeGroup],
    schedulable: Mapping[str, list[list[Pod]]],
    inputs: ScaleUpInputs,
    rules: SimilarityRules,
) -> list[NodeGroup]:
    """``ComputeSimilarNodeGroups``: similar templates, safe to scale, same pod groups."""
    if not inputs.settings.balance_similar_node_groups or group.options.zero_or_max_node_scaling:
        return []
    mine = schedulable.get(group.id) or []
    if not mine:
        return []
    template = inputs.templates[group.id]
    exemplars = {id(g[0]) for g in mine}
    similar: list[NodeGroup] = []
    for other in valid:
        if other.id == group.id or other.id not in inputs.templates:
            continue
        if not is_similar(template, inputs.templates[other.id], rules):
            continue
        if not inputs.safety(other.id).safe:
            continue
        theirs = {id(g[0]) for g in schedulable.get(other.id) or []}
        if exemplars <= theirs:
            similar.append(other)
    return similar


def _expansion_option(
    group: NodeGroup,
    valid: Sequence[NodeGroup],
    schedulable: Mapping[str, list[list[Pod]]],
    inputs: ScaleUpInputs,
    rules: SimilarityRules,
) -> ExpansionOption | None:
    pods = schedulable.get(group.id) or []
    if not pods:
        return None
    similar = _similar_groups(group, valid, schedulable, inputs, rules)
    settings = inputs.settings
    limiter = BinpackingLimiter.for_group(
        group=group,
        similar=similar,
        max_nodes_per_scaleup=settings.max_nodes_per_scaleup,
        max_duration=settings.max_nodegroup_binpacking_duration.total_seconds(),
        max_nodes_total=settings.max_nodes_total,
        current_nodes=inputs.current_nodes,
        elapsed=inputs.elapsed,
    )
    estimate = estimate_nodes(
        journal=inputs.journal,
        template=inputs.templates[group.id],
        groups=pods,
        limiter=limiter,
    )
    count = estimate.node_count
    if group.options.zero_or_max_node_scaling and count > 0:
        count = group.max_size
    return ExpansionOption(
        group=group, node_count=count, pods=estimate.pods, similar=tuple(similar)
    )


def _cap_by_quota(
    infos: list[ScaleUpInfo],
    limits: ResourceLimits,
    usage: tuple[int, int],
    templates: Mapping[str, TemplateNode],
) -> list[ScaleUpInfo]:
    """``capScaleUpsByQuota``: each group's delta within what the limits still allow, the
    quota consumed group by group; groups capped to nothing are dropped."""
    cores, memory = usage
    capped: list[ScaleUpInfo] = []
    for info in infos:
        delta = info.new_size - info.current_size
        template = templates[info.group.id]
        allowed, _ = limits.allowed_delta(
            usage=(cores, memory), per_node=template.capacity, wanted=delta
        )
        info.new_size = info.current_size + allowed
        node_cores, node_memory = cores_and_memory(template.capacity)
        cores += allowed * node_cores
        memory += allowed * node_memory
        if info.new_size != info.current_size:
            capped.append(info)
    return capped


def _mark_all(pod_groups: list[_PodGroup], reason: str) -> None:
    """``markAllGroupsAsUnschedulable``."""
    for group in pod_groups:
        if group.schedulable:
            for group_id in group.schedulable_groups:
                group.errors[group_id] = (reason,)
            group.schedulable = False


def _remaining(
    pod_groups: list[_PodGroup], skipped: Mapping[str, tuple[str, ...]]
) -> tuple[NoScaleUpInfo, ...]:
    """``GetRemainingPods``: pods of groups no option helps."""
    return tuple(
        NoScaleUpInfo(pod=pod, rejected=dict(g.errors), skipped=dict(skipped))
        for g in pod_groups
        if not g.schedulable
        for pod in g.pods
    )


def _expander_warnings(inputs: ScaleUpInputs) -> tuple[tuple[str, str], ...]:
    warnings: list[tuple[str, str]] = []
    for expander in inputs.expander.filters:
        warnings.extend(getattr(expander, "warnings", ()))
    return tuple(warnings)


def reasons_message(info: NoScaleUpInfo, result: ScaleUpResult) -> str:
    """``ReasonsMessage``: ``<count> <reason>`` over rejected and skipped groups.

    Upstream joins a Go map, in random order; kubescale sorts by reason so the same state
    gives the same event text.
    """
    if result is ScaleUpResult.LIMITED_BY_MAX_NODES_TOTAL:
        return MAX_NODES_TOTAL_MESSAGE
    counts: dict[str, int] = {}
    for reasons in (*info.rejected.values(), *info.skipped.values()):
        for reason in reasons:
            counts[reason] = counts.get(reason, 0) + 1
    return ", ".join(f"{count} {reason}" for reason, count in sorted(counts.items()))


def triggered_message(infos: Sequence[ScaleUpInfo]) -> str:
    """``pod triggered scale-up: [{g 1->2 (max: 10)} ...]`` (Go's ``%v`` of the slice)."""
    return "pod triggered scale-up: [" + " ".join(str(i) for i in infos) + "]"
