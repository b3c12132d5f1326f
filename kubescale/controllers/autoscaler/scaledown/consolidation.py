"""Consolidation: Karpenter's delete / replace-with-cheaper, without its churn (opt-in).

``--consolidation WhenEmpty|WhenEmptyOrUnderutilized`` (default ``Off``). Upstream's
cluster-autoscaler only deletes nodes below a utilization threshold; Karpenter also replaces
nodes with a cheaper one when their pods fit elsewhere (reference §7). kubescale decides, per
loop, one command with Karpenter's methods in Karpenter's order, the first that finds something
winning:

1. **Empty** — consolidatable nodes with no pod to move are deleted, as many as the budget for
   ``Empty`` allows;
2. **multi-node** — candidates sorted by disruption cost (:mod:`.disruption_cost`, at most 100):
   the largest prefix whose pods fit on the nodes that stay plus **at most one** new node that
   costs less than the prefix (binary search, as Karpenter's ``firstNConsolidationOption``);
3. **single-node** — in the same order, the first node whose pods fit elsewhere (delete) or on
   one cheaper new node (replace).

Only ``WhenEmptyOrUnderutilized`` runs 2 and 3. A **candidate** is a ready node of an
autoscaled group above its min size, not being deleted, without
``karpenter.sh/do-not-disrupt: "true"`` (on the node or any of its pods) or the upstream
``scale-down-disabled`` annotation, whose pods the drainability rules let go (PDBs counted), and
that is **consolidatable**: it and its pods have not changed for ``--consolidate-after``.

Karpenter's top complaint is churn at steady state; kubescale rules it out by construction:

* a node younger than ``--scale-down-delay-after-add`` is never a candidate (a node just added
  is not consolidated away), and nothing is consolidated while scale-down is in cooldown or
  pods are pending;
* a replacement must be strictly cheaper than what it replaces, and is never of a group one of
  the replaced nodes belongs to (no node is swapped for an identical one); a delete removes a
  node: every command strictly lowers the cluster's price per hour, so commands cannot cycle;
* a replacement must hold whichever nodes the scheduler fills first — the nodes that stay, or
  the new, empty one — so the drain cannot strand a pod whose pending would ask for a scale-up;
* a command is **re-validated** ``--consolidation-validation-delay`` (15 s) after it was
  decided: the decision is computed again from the cluster as it is then, and carried out only
  if it is the same (Karpenter's ``commandValidationDelay``) — :class:`ConsolidationTracker`;
* the disruption budgets (:mod:`.disruption_budgets`) bound how many nodes are disrupted at
  once, counting the deletions in progress.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final, Literal

from kubescale.controllers.autoscaler.cloudprovider.cloud_provider import (
    NodeGroup,
    ProviderSnapshot,
)
from kubescale.controllers.autoscaler.config.autoscaler_settings import AutoscalerSettings
from kubescale.controllers.autoscaler.config.disruption_budgets import allowed_disruptions
from kubescale.controllers.autoscaler.expander.pricing import PricingModel
from kubescale.controllers.autoscaler.model.node_facts import (
    SCALE_DOWN_DISABLED_ANNOTATION,
    NodeReadiness,
    currently_being_deleted,
    node_name,
)
from kubescale.controllers.autoscaler.model.pod_facts import (
    PriorityResolver,
    creation_time,
    parse_time,
    pod_annotations,
)
from kubescale.controllers.autoscaler.scaledown.disruption_cost import (
    DisruptionCost,
    node_disruption_cost,
)
from kubescale.controllers.autoscaler.simulator.drainability import DrainContext, classify_node_pods
from kubescale.controllers.autoscaler.simulator.scheduling_simulation import SchedulingSimulator
from kubescale.controllers.autoscaler.simulator.template_nodes import TemplateNode
from kubescale.objects.node import Node
from kubescale.objects.pod import Pod
from kubescale.objects.views import Meta, spec_of, status_of
from kubescale.scheduling.fit import ClusterSnapshot
from kubescale.scheduling.pod_resources import pod_requests
from kubescale.scheduling.snapshot_journal import SnapshotJournal

__all__ = [
    "DO_NOT_DISRUPT_ANNOTATION",
    "ConsolidationCandidate",
    "ConsolidationCommand",
    "ConsolidationInputs",
    "ConsolidationTracker",
    "consolidation_candidates",
    "decide_consolidation",
    "last_change",
    "move_order",
]

DO_NOT_DISRUPT_ANNOTATION: Final = "karpenter.sh/do-not-disrupt"
MAX_MULTI_NODE_CANDIDATES: Final = 100
Method = Literal["Empty", "Delete", "Replace"]


@dataclass(frozen=True, kw_only=True)
class ConsolidationCandidate:
    node: Node
    group: NodeGroup
    pods_to_move: tuple[Pod, ...]
    price_per_hour: float
    cost: DisruptionCost

    @property
    def name(self) -> str:
        return node_name(self.node)


@dataclass(frozen=True, kw_only=True)
class ConsolidationCommand:
    method: Method
    nodes: tuple[str, ...]
    replacement: str | None = None
    """Node group a cheaper node is added to (``Replace``)."""
    savings_per_hour: float = 0.0

    @property
    def reason(self) -> str:
        """The budget reason: ``Empty`` or ``Underutilized``."""
        return "Empty" if self.method == "Empty" else "Underutilized"


@dataclass(frozen=True, kw_only=True)
class ConsolidationInputs:
    candidates: Sequence[ConsolidationCandidate]
    """Consolidatable nodes (module docstring), any order."""
    journal: SnapshotJournal
    """The cluster snapshot; unchanged on return."""
    destinations: frozenset[str]
    """Nodes pods may move to (ready, schedulable, not being deleted)."""
    groups: Sequence[NodeGroup]
    templates: Mapping[str, TemplateNode]
    settings: AutoscalerSettings
    total_nodes: int
    disrupting: int
    """Nodes being deleted or replaced already (budgets)."""
    now: datetime
    pricing: PricingModel = field(default_factory=PricingModel)
    priority: Callable[[Pod], int] = lambda pod: 0


def _price(group: NodeGroup, template: TemplateNode | None, pricing: PricingModel) -> float:
    capacity = template.capacity if template is not None else {}
    return pricing.node_price(price_per_hour=group.price_per_hour, capacity=capacity, hours=1.0)


def _try(
    chosen: Sequence[ConsolidationCandidate], inputs: ConsolidationInputs
) -> ConsolidationCommand | None:
    """``computeConsolidation`` for removing ``chosen``: delete when their pods fit on the
    nodes that stay, else replace with the cheapest single new node that takes the rest and
    costs less; ``None`` when neither works."""
    journal = inputs.journal
    simulator = SchedulingSimulator(journal)
    names = {c.name for c in chosen}
    removed_price = sum(c.price_per_hour for c in chosen)
    pods = sorted(
        (p for c in chosen for p in c.pods_to_move), key=lambda p: move_order(p, inputs.priority(p))
    )
    journal.fork()
    try:
        for candidate in chosen:
            for pod in candidate.pods_to_move:
                journal.remove_pod(candidate.name, pod)
        stays = sorted(d for d in inputs.destinations if d not in names)
        result = simulator.try_schedule_pods(pods, candidates=stays)
        leftovers = list(result.unschedulable)
        if not leftovers:
            return ConsolidationCommand(
                method="Delete", nodes=tuple(sorted(names)), savings_per_hour=removed_price
            )
        best: tuple[float, str] | None = None
        own_groups = {c.group.id for c in chosen}
        for group in inputs.groups:
            template = inputs.templates.get(group.id)
            if template is None or group.target_size >= group.max_size:
                continue
            if group.id in own_groups:
                continue  # never replace a node with one of its own kind
            price = _price(group, template, inputs.pricing)
            if price >= removed_price or (best is not None and price >= best[0]):
                continue
            if _fit_all_on_one_node(journal, simulator, template, leftovers) and _fit_new_first(
                journal, template, pods, stays
            ):
                best = (price, group.id)
        if best is None:
            return None
        return ConsolidationCommand(
            method="Replace",
            nodes=tuple(sorted(names)),
            replacement=best[1],
            savings_per_hour=removed_price - best[0],
        )
    finally:
        journal.revert()


def move_order(pod: Pod, priority: int) -> tuple[int, int, int, str, str]:
    """The order a drained node's pods are simulated in: higher priority first (the scheduling
    queue), then largest first (CPU, then memory — Karpenter's first-fit-decreasing), then by
    name. One fixed order: a first-fit packing that holds for one order of the same pods can
    strand a pod in another (found by Hypothesis), so the decision and its check use this one."""
    amounts = pod_requests(pod)
    meta = Meta(pod).raw
    return (
        -priority,
        -amounts.get("cpu", 0),
        -amounts.get("memory", 0),
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
    )


def _fit_all_on_one_node(
    journal: SnapshotJournal,
    simulator: SchedulingSimulator,
    template: TemplateNode,
    pods: Sequence[Pod],
) -> bool:
    journal.fork()
    try:
        name = f"consolidation-{template.name}"
        journal.add_node(template.node, allocatable=template.allocatable)
        journal.add_node_like(template.name, name)
        for startup in template.pods:
            journal.add_pod(name, startup)
        result = simulator.try_schedule_pods(pods, candidates=[name], break_on_failure=True)
        return len(result.scheduled) == len(pods)
    finally:
        journal.revert()


def _fit_new_first(
    journal: SnapshotJournal,
    template: TemplateNode,
    pods: Sequence[Pod],
    stays: Sequence[str],
) -> bool:
    """The pods also all fit when the scheduler fills the new (empty, so best-scored) node
    first and the remaining nodes after it. A replacement whose packing holds only one way
    could leave a pod pending after the drain, and a pending pod means a scale-up: churn."""
    journal.fork()
    try:
        name = f"consolidation-{template.name}"
        journal.add_node(template.node, allocatable=template.allocatable)
        journal.add_node_like(template.name, name)
        for startup in template.pods:
            journal.add_pod(name, startup)
        result = SchedulingSimulator(journal).try_schedule_pods(
            pods, candidates=[name, *stays], break_on_failure=True
        )
        return len(result.scheduled) == len(pods)
    finally:
        journal.revert()


def _empty(inputs: ConsolidationInputs) -> ConsolidationCommand | None:
    budget = allowed_disruptions(
        inputs.settings.consolidation.budgets,
        reason="Empty",
        total_nodes=inputs.total_nodes,
        disrupting=inputs.disrupting,
        now=inputs.now,
    )
    empty = [c for c in sorted(inputs.candidates, key=lambda c: c.cost) if not c.pods_to_move]
    if not empty or budget < 1:
        return None
    chosen = _within_min_sizes(empty)[:budget]
    if not chosen:
        return None
    return ConsolidationCommand(
        method="Empty",
        nodes=tuple(sorted(c.name for c in chosen)),
        savings_per_hour=sum(c.price_per_hour for c in chosen),
    )


def _within_min_sizes(candidates: Sequence[ConsolidationCandidate]) -> list[ConsolidationCandidate]:
    """Keep groups at or above their min size when all of these go."""
    left = {c.group.id: c.group.target_size for c in candidates}
    kept = []
    for candidate in candidates:
        if left[candidate.group.id] - 1 < candidate.group.min_size:
            continue
        left[candidate.group.id] -= 1
        kept.append(candidate)
    return kept


def _multi_node(
    ordered: Sequence[ConsolidationCandidate], inputs: ConsolidationInputs, budget: int
) -> ConsolidationCommand | None:
    """``firstNConsolidationOption``: the largest prefix (2..n) that can be consolidated."""
    pool = _within_min_sizes(ordered)[: min(MAX_MULTI_NODE_CANDIDATES, budget)]
    if len(pool) < 2:
        return None
    low, high = 2, len(pool)
    found: ConsolidationCommand | None = None
    while low <= high:
        middle = (low + high) // 2
        command = _try(pool[:middle], inputs)
        if command is not None:
            found, low = command, middle + 1
        else:
            high = middle - 1
    return found


def _single_node(
    ordered: Sequence[ConsolidationCandidate], inputs: ConsolidationInputs
) -> ConsolidationCommand | None:
    for candidate in _within_min_sizes(ordered):
        command = _try([candidate], inputs)
        if command is not None:
            return command
    return None


def decide_consolidation(inputs: ConsolidationInputs) -> ConsolidationCommand | None:
    """One command (module docstring), or ``None``."""
    policy = inputs.settings.consolidation.policy
    if policy == "Off" or not inputs.candidates:
        return None
    command = _empty(inputs)
    if command is not None or policy == "WhenEmpty":
        return command
    budget = allowed_disruptions(
        inputs.settings.consolidation.budgets,
        reason="Underutilized",
        total_nodes=inputs.total_nodes,
        disrupting=inputs.disrupting,
        now=inputs.now,
    )
    if budget < 1:
        return None
    ordered = sorted(inputs.candidates, key=lambda c: c.cost)
    return _multi_node(ordered, inputs, budget) or _single_node(ordered, inputs)


def last_change(node: Node, pods: Sequence[Pod]) -> datetime:
    """When the node or its pods last changed: its creation, or a pod's creation or start."""
    latest = creation_time(node)
    for pod in pods:
        started = parse_time(status_of(pod).get("startTime"))
        for moment in (creation_time(pod), started):
            if moment is not None and moment > latest:
                latest = moment
    return latest


def consolidation_candidates(
    *,
    nodes: Sequence[Node],
    snapshot: ClusterSnapshot,
    provider: ProviderSnapshot,
    readiness: Callable[[Node], NodeReadiness],
    context: DrainContext,
    priority: PriorityResolver,
    templates: Mapping[str, TemplateNode],
    settings: AutoscalerSettings,
    now: datetime,
    pricing: PricingModel,
) -> list[ConsolidationCandidate]:
    """The consolidatable nodes (module docstring), with their pods and prices."""
    consolidate_after = settings.consolidation.consolidate_after
    youngest = settings.scale_down_delay_after_add
    found: list[ConsolidationCandidate] = []
    for node in nodes:
        name = node_name(node)
        group = provider.group_for_node(node)
        state = snapshot.nodes.get(name)
        if group is None or state is None or group.target_size <= group.min_size:
            continue
        annotations = Meta(node).raw.get("annotations") or {}
        if annotations.get(DO_NOT_DISRUPT_ANNOTATION) == "true":
            continue
        if annotations.get(SCALE_DOWN_DISABLED_ANNOTATION) == "true":
            continue
        if currently_being_deleted(node, now) or not readiness(node).ready:
            continue
        if spec_of(node).get("unschedulable"):
            continue
        if now - creation_time(node) < youngest:
            continue  # just added: never consolidated away
        if any(pod_annotations(p).get(DO_NOT_DISRUPT_ANNOTATION) == "true" for p in state.pods):
            continue
        if now - last_change(node, state.pods) < consolidate_after:
            continue
        pods = classify_node_pods(list(state.pods), context)
        if pods.blocked or pods.waiting or context.pdbs.can_disrupt(pods.to_move) is not None:
            continue
        found.append(
            ConsolidationCandidate(
                node=node,
                group=group,
                pods_to_move=tuple(pods.to_move),
                price_per_hour=_price(group, templates.get(group.id), pricing),
                cost=node_disruption_cost(name, pods.to_move, priority),
            )
        )
    return found


@dataclass
class ConsolidationTracker:
    """A decided command waits ``--consolidation-validation-delay`` and acts only if the same
    command is decided again then."""

    pending: ConsolidationCommand | None = None
    decided_at: datetime | None = None
    validated: int = 0
    abandoned: int = 0

    def offer(
        self, command: ConsolidationCommand | None, *, now: datetime, settings: AutoscalerSettings
    ) -> ConsolidationCommand | None:
        """The command to carry out now, if any."""
        delay = settings.consolidation.validation_delay
        if self.pending is None or self.decided_at is None:
            if command is not None:
                self.pending, self.decided_at = command, now
                if delay.total_seconds() <= 0:
                    return self._act()
            return None
        if now - self.decided_at < delay:
            if command is None or _same(command, self.pending):
                return None
            self.abandoned += 1
            self.pending, self.decided_at = command, now
            return None
        if command is not None and _same(command, self.pending):
            return self._act()
        self.abandoned += 1
        self.pending, self.decided_at = command, (now if command is not None else None)
        return None

    def _act(self) -> ConsolidationCommand | None:
        command = self.pending
        self.pending, self.decided_at = None, None
        self.validated += 1
        return command


def _same(a: ConsolidationCommand, b: ConsolidationCommand) -> bool:
    return (a.method, a.nodes, a.replacement) == (b.method, b.nodes, b.replacement)
