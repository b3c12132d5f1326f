"""RemovePodsViolatingTopologySpreadConstraint (Balance; upstream
``removepodsviolatingtopologyspreadconstraint``).

1. The pods on the cycle's nodes passing ``Filter``, the label selector and the namespaces —
   only those are counted in the domains — grouped by namespace (namespaces in name order).
2. Per namespace, the distinct constraints
   (:class:`~kubescale.scheduling.spread_constraints.SpreadConstraint`) of the kinds in
   ``constraints`` found on its pods: ``maxSkew``, ``topologyKey``, ``whenUnsatisfiable``, the
   label selector with ``matchLabelKeys`` merged in from the pod's own labels,
   ``nodeAffinityPolicy`` (unset: Honor) and ``nodeTaintsPolicy`` (unset: Ignore) with the pod's
   required node affinity / tolerations when honoured. ``minDomains`` is not supported.
3. Per constraint: a domain for every value of ``topologyKey`` on the nodes passing the
   inclusion policies (:func:`~kubescale.scheduling.spread_constraints.node_included`: Honor
   affinity — the node matches the pod's required affinity; Honor taints — no untolerated
   NoSchedule/NoExecute taint), then every matching, non-terminating pod on a node with the
   label counts in its node's domain. A constraint whose largest and smallest domains differ
   by at most ``maxSkew`` is balanced.
4. ``balanceDomains`` (:func:`balance_domains`): ``idealAvg = pods / domains``; domains sorted by
   size (ties by value); within a domain the pods ordered non-evictable first, then pods with a
   nodeSelector or node affinity, then by priority as upstream's comparator orders them — no
   priority first, then ascending — and taken from the end. Two indices ``i = 0``, ``j = last``;
   while ``i < j``: if ``len(d[j]) <= idealAvg`` then ``j -= 1``; ``skew = len(d[j]) −
   len(d[i])``; ``skew <= maxSkew`` → ``i += 1``; else ``move = min(ceil(len(d[j]) − avg),
   ceil(avg − len(d[i])), ceil((skew − maxSkew) / 2))``, ``move <= 0`` → ``i += 1``; else d[j]
   is stable-sorted so pods that fit some node of the below-average domains go last, its last
   ``move`` pods are marked (with ``topologyBalanceNodeFit``, a pod fitting none of those nodes
   is not marked but still counted as moved) and move from d[j] to d[i].
5. The marked pods, in marking order, skipping nodes whose limit was hit, are evicted when they
   pass ``PreEvictionFilter``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Final

from kubescale.objects.node import Node
from kubescale.objects.pod import Pod
from kubescale.objects.selectors import LabelSelector
from kubescale.objects.views import Meta, spec_of
from kubescale.scheduling.cycle_view import node_labels, node_name
from kubescale.scheduling.descheduler_rules import TOPOLOGY_SPREAD
from kubescale.scheduling.fit import pod_key
from kubescale.scheduling.pods import pod_priority
from kubescale.scheduling.policy.common_args import labels_match
from kubescale.scheduling.policy.strategy_args import (
    RemovePodsViolatingTopologySpreadConstraintArgs,
)
from kubescale.scheduling.spread_constraints import (
    SpreadConstraint,
    domain_counts,
    includes_every_node,
    node_included,
    spread_constraints,
)

from ..framework.eviction import EvictionResult
from ..framework.strategy_context import StrategyContext, StrategyRun

__all__ = ["NAME", "balance_domains", "remove_pods_violating_topology_spread_constraint"]

NAME: Final = TOPOLOGY_SPREAD


def _has_selector_or_affinity(pod: Pod) -> bool:
    spec = spec_of(pod)
    return spec.get("nodeSelector") is not None or bool(
        (spec.get("affinity") or {}).get("nodeAffinity")
    )


def balance_domains(
    ctx: StrategyContext,
    constraint: SpreadConstraint,
    domains: Mapping[str, Sequence[Pod]],
    *,
    nodes: Sequence[Node],
    node_fit: bool,
) -> list[Pod]:
    """The pods ``balanceDomains`` marks for eviction (module docstring, step 4)."""
    total = sum(len(pods) for pods in domains.values())
    average = total / len(domains)

    def pod_order(pod: Pod) -> tuple[int, int, int, int]:
        priority = pod_priority(pod)
        return (
            1 if ctx.filter(pod) else 0,
            0 if _has_selector_or_affinity(pod) else 1,
            0 if priority is None else 1,
            priority or 0,
        )

    ordered = sorted(
        ((value, sorted(pods, key=pod_order)) for value, pods in domains.items()),
        key=lambda entry: len(entry[1]),
    )
    values = [value for value, _ in ordered]
    sizes: list[list[Pod]] = [pods for _, pods in ordered]
    eligible = (
        list(nodes)
        if includes_every_node(constraint)
        else [n for n in nodes if node_included(constraint, n)]
    )
    below_values = {values[k] for k in range(len(sizes)) if len(sizes[k]) < average}
    below = [n for n in eligible if node_labels(n).get(constraint.topology_key) in below_values]
    fits: dict[int, bool] = {}

    def fits_elsewhere(pod: Pod) -> bool:
        if id(pod) not in fits:
            fits[id(pod)] = ctx.view.fits_any(pod, below, other_nodes_only=True)
        return fits[id(pod)]

    marked: list[Pod] = []
    i, j = 0, len(sizes) - 1
    while i < j:
        if len(sizes[j]) <= average:
            j -= 1
        skew = len(sizes[j]) - len(sizes[i])
        if skew <= constraint.max_skew:
            i += 1
            continue
        move = int(
            min(
                math.ceil(len(sizes[j]) - average),
                math.ceil(average - len(sizes[i])),
                math.ceil((skew - constraint.max_skew) / 2),
            )
        )
        if move <= 0:
            i += 1
            continue
        sizes[j] = sorted(sizes[j], key=fits_elsewhere)
        moving = sizes[j][len(sizes[j]) - move :]
        for pod in moving:
            if node_fit and not fits_elsewhere(pod):
                continue
            marked.append(pod)
        sizes[j] = sizes[j][: len(sizes[j]) - move]
        sizes[i] = [*sizes[i], *moving]
    return marked


class _LabelIndex:
    """A namespace's pods by label: a selector with an exact requirement reads only those."""

    def __init__(self, pods: Sequence[Pod]) -> None:
        self.pods = pods
        self.by_label: dict[tuple[str, str], list[Pod]] = {}
        for pod in pods:
            for item in (Meta(pod).raw.get("labels") or {}).items():
                self.by_label.setdefault(item, []).append(pod)

    def select(self, selector: LabelSelector) -> Sequence[Pod]:
        """A superset of the pods ``selector`` matches, in listing order."""
        if selector.nothing:
            return ()
        for requirement in selector.requirements:
            value = selector.exact_value(requirement.key)
            if value is not None:
                return self.by_label.get((requirement.key, value), [])
        return self.pods


def remove_pods_violating_topology_spread_constraint(
    ctx: StrategyContext, args: RemovePodsViolatingTopologySpreadConstraintArgs
) -> StrategyRun:
    view = ctx.view
    nodes = list(view.nodes)
    by_name = {node_name(n): n for n in nodes}

    def in_scope(pod: Pod) -> bool:
        namespace = str(Meta(pod).raw.get("namespace", ""))
        return (
            args.namespaces.allows(namespace)
            and labels_match(args.label_selector, pod)
            and ctx.filter(pod)
        )

    by_namespace: dict[str, list[Pod]] = {}
    for pod in view.pods_on_nodes(nodes):
        if in_scope(pod):
            namespace = str(Meta(pod).raw.get("namespace", ""))
            by_namespace.setdefault(namespace, []).append(pod)
    marked: dict[tuple[str, str], Pod] = {}
    for namespace in sorted(by_namespace):
        pods = by_namespace[namespace]
        constraints: dict[str, SpreadConstraint] = {}
        for pod in pods:
            for constraint in spread_constraints(pod, args.constraints):
                constraints.setdefault(constraint.identity, constraint)
        index = _LabelIndex(pods)
        for constraint in constraints.values():
            domains = domain_counts(constraint, by_name, index.select(constraint.selector))
            sizes = [len(p) for p in domains.values()]
            if not sizes or max(sizes) - min(sizes) <= constraint.max_skew:
                continue
            for pod in balance_domains(
                ctx, constraint, domains, nodes=nodes, node_fit=args.topology_balance_node_fit
            ):
                marked.setdefault(pod_key(pod), pod)
    limited: set[str] = set()
    for pod in marked.values():
        node = str(spec_of(pod).get("nodeName") or "")
        if node in limited or not in_scope(pod) or not ctx.pre_eviction_filter(pod):
            continue
        result = yield from ctx.evict(pod, "pod's topology spread constraint is violated")
        if result is EvictionResult.NODE_LIMIT:
            limited.add(node)
        elif result is EvictionResult.TOTAL_LIMIT:
            return
