"""RemovePodsViolatingTopologySpreadConstraint (Balance; upstream
``removepodsviolatingtopologyspreadconstraint``).

1. The pods on the cycle's nodes passing ``Filter``, the label selector and the namespaces —
   only those are counted in the domains — grouped by namespace (namespaces in name order).
2. Per namespace, the distinct constraints (:class:`SpreadConstraint`) of the kinds in
   ``constraints`` found on its pods: ``maxSkew``, ``topologyKey``, ``whenUnsatisfiable``, the
   label selector with ``matchLabelKeys`` merged in from the pod's own labels,
   ``nodeAffinityPolicy`` (unset: Honor) and ``nodeTaintsPolicy`` (unset: Ignore) with the pod's
   required node affinity / tolerations when honoured. ``minDomains`` is not supported.
3. Per constraint: a domain for every value of ``topologyKey`` on the nodes passing the
   inclusion policies (:func:`node_included`: Honor affinity — the node matches the pod's
   required affinity; Honor taints — no untolerated NoSchedule/NoExecute taint), then every
   matching, non-terminating pod on a node with the label counts in its node's domain. A
   constraint whose largest and smallest domains differ by at most ``maxSkew`` is balanced.
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

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from kubescale.objects.selectors import (
    EQUALS,
    LabelSelector,
    SelectorError,
    label_selector_from_dict,
    new_requirement,
)
from kubescale.objects.views import Meta, spec_of
from kubescale.scheduling.cycle_view import node_labels, node_name
from kubescale.scheduling.filters import FILTERED_EFFECTS, NodeAffinity, first_untolerated_taint
from kubescale.scheduling.fit import pod_key
from kubescale.scheduling.pods import is_terminating, pod_priority

from ..framework.eviction import EvictionResult
from ..framework.strategy_context import StrategyContext, StrategyRun
from ..policy.common_args import labels_match
from ..policy.strategy_args import RemovePodsViolatingTopologySpreadConstraintArgs

__all__ = [
    "NAME",
    "SpreadConstraint",
    "balance_domains",
    "domain_counts",
    "node_included",
    "remove_pods_violating_topology_spread_constraint",
    "spread_constraints",
]

NAME: Final = "RemovePodsViolatingTopologySpreadConstraint"
HONOR: Final = "Honor"
Pod = Mapping[str, Any]
Node = Mapping[str, Any]


@dataclass(frozen=True)
class SpreadConstraint:
    """One ``TopologySpreadConstraint`` as a pod carries it (module docstring, step 2)."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    selector: LabelSelector
    node_affinity: NodeAffinity | None
    """The pod's required node affinity when ``nodeAffinityPolicy`` is Honor."""
    tolerations: tuple[Mapping[str, Any], ...] | None
    """The pod's tolerations when ``nodeTaintsPolicy`` is Honor."""
    identity: str = field(compare=False)
    """Upstream's DeepEqual of constraints, as text."""


def _merged_selector(raw: Mapping[str, Any], pod: Pod) -> LabelSelector:
    selector = label_selector_from_dict(raw.get("labelSelector"))
    keys = raw.get("matchLabelKeys") or []
    labels = Meta(pod).raw.get("labels") or {}
    if not keys or not labels or selector.nothing:
        return selector
    extra = [new_requirement(k, EQUALS, (labels[k],)) for k in keys if k in labels]
    if not extra:
        return selector
    return LabelSelector(
        requirements=tuple(sorted([*extra, *selector.requirements], key=lambda r: r.key))
    )


def spread_constraint(raw: Mapping[str, Any], pod: Pod) -> SpreadConstraint | None:
    """``newTopologySpreadConstraint``; ``None`` when its selector does not parse."""
    try:
        selector = _merged_selector(raw, pod)
    except SelectorError:
        return None
    spec = spec_of(pod)
    affinity_policy = raw.get("nodeAffinityPolicy") or HONOR
    taints_policy = raw.get("nodeTaintsPolicy") or "Ignore"
    node_affinity = NodeAffinity.of_pod(pod) if affinity_policy == HONOR else None
    tolerations = tuple(spec.get("tolerations") or ()) if taints_policy == HONOR else None
    identity = json.dumps(
        [
            int(raw.get("maxSkew") or 0),
            str(raw.get("topologyKey") or ""),
            str(raw.get("whenUnsatisfiable") or ""),
            str(selector) if not selector.nothing else None,
            repr(node_affinity),
            list(tolerations) if tolerations is not None else None,
        ],
        sort_keys=True,
        default=str,
    )
    return SpreadConstraint(
        max_skew=int(raw.get("maxSkew") or 0),
        topology_key=str(raw.get("topologyKey") or ""),
        when_unsatisfiable=str(raw.get("whenUnsatisfiable") or ""),
        selector=selector,
        node_affinity=node_affinity,
        tolerations=tolerations,
        identity=identity,
    )


def spread_constraints(pod: Pod, kinds: Sequence[str]) -> list[SpreadConstraint]:
    """The pod's constraints of the ``whenUnsatisfiable`` kinds in ``kinds``."""
    found = []
    for raw in spec_of(pod).get("topologySpreadConstraints") or ():
        if raw.get("whenUnsatisfiable") not in kinds:
            continue
        constraint = spread_constraint(raw, pod)
        if constraint is not None:
            found.append(constraint)
    return found


def node_included(constraint: SpreadConstraint, node: Node) -> bool:
    """``matchNodeInclusionPolicies`` (module docstring, step 3)."""
    affinity = constraint.node_affinity
    if (
        affinity is not None
        and (affinity.selector or affinity.terms is not None)
        and not affinity.matches(node_name(node), node_labels(node))
    ):
        return False
    if constraint.tolerations is not None:
        taints = spec_of(node).get("taints") or ()
        if first_untolerated_taint(taints, constraint.tolerations, FILTERED_EFFECTS) is not None:
            return False
    return True


def _inclusive(constraint: SpreadConstraint) -> bool:
    """Every node passes the constraint's inclusion policies."""
    affinity = constraint.node_affinity
    return constraint.tolerations is None and (
        affinity is None or (not affinity.selector and affinity.terms is None)
    )


def domain_counts(
    constraint: SpreadConstraint,
    nodes: Mapping[str, Node],
    pods: Sequence[Pod],
    *,
    values: Iterable[str] | None = None,
) -> dict[str, list[Pod]]:
    """Domain value → matching pods (module docstring, step 3), domains by value; ``nodes`` by
    name. ``values``, when known, are the nodes' values of the topology key: with no inclusion
    policy to apply they are the domains, and the nodes need not be read."""
    domains: dict[str, list[Pod]] = {}
    key = constraint.topology_key
    inclusive = _inclusive(constraint)
    if inclusive and values is not None:
        domains = {value: [] for value in values}
        nodes_to_read: Iterable[Node] = ()
    else:
        nodes_to_read = nodes.values()
    for node in nodes_to_read:
        value = (Meta(node).raw.get("labels") or {}).get(key)
        if (
            value is not None
            and value not in domains
            and (inclusive or node_included(constraint, node))
        ):
            domains[value] = []
    for pod in pods:
        if is_terminating(pod) or not constraint.selector.matches(
            Meta(pod).raw.get("labels") or {}
        ):
            continue
        bound = nodes.get(str(spec_of(pod).get("nodeName") or ""))
        if bound is None:
            continue
        value = node_labels(bound).get(key)
        if value is not None:
            domains.setdefault(value, []).append(pod)
    return dict(sorted(domains.items()))


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
        if _inclusive(constraint)
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
