"""RemovePodsViolatingInterPodAntiAffinity (Deschedule; upstream
``removepodsviolatinginterpodantiaffinity``).

1. The pods of every node of the cycle, filtered by the namespaces and the label selector only
   (the evictor's filters apply at eviction time), grouped by namespace.
2. Node by node, the node's pods from lowest to highest priority
   (:func:`~kubescale.scheduling.pods.sort_low_to_high`).
3. A pod violates (``CheckPodsWithAntiAffinityExist``, :func:`anti_affinity_conflict`) when one
   of its *required* anti-affinity terms selects another pod of the group — in the term's
   namespaces (default: the pod's own) — running on a node of the cycle with the same value of
   the term's ``topologyKey`` (the same node always counts).
4. A violating pod passing ``Filter`` and ``PreEvictionFilter`` is evicted and, once evicted,
   leaves the group: later pods are judged against the pods that remain.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kubescale.objects.selectors import LabelSelector
from kubescale.objects.views import Meta, spec_of
from kubescale.scheduling.cycle_view import node_labels, node_name
from kubescale.scheduling.fit import pod_key
from kubescale.scheduling.inter_pod_affinity import required_terms
from kubescale.scheduling.pods import sort_low_to_high

from ..framework.eviction import EvictionResult
from ..framework.strategy_context import StrategyContext, StrategyRun
from ..policy.common_args import labels_match
from ..policy.strategy_args import RemovePodsViolatingInterPodAntiAffinityArgs

__all__ = [
    "NAME",
    "ForbiddenDomains",
    "anti_affinity_conflict",
    "forbidden_domains",
    "remove_pods_violating_inter_pod_anti_affinity",
]

NAME: Final = "RemovePodsViolatingInterPodAntiAffinity"
Pod = Mapping[str, Any]
Node = Mapping[str, Any]


@dataclass(frozen=True)
class ForbiddenDomains:
    """Where one required anti-affinity term of a pod forbids it: the nodes running a pod the
    term selects, and those nodes' values of the term's ``topologyKey``."""

    topology_key: str
    nodes: Mapping[str, Pod]
    """Node name → one selected pod on it."""
    values: Mapping[str, Pod]
    """Topology value → one selected pod in that domain."""

    def conflict(self, node: Node) -> Pod | None:
        """The selected pod ``node`` would be next to (the same node always counts)."""
        return self.conflict_at(node_name(node), node_labels(node))

    def conflict_at(self, name: str, labels: Mapping[str, str]) -> Pod | None:
        """:meth:`conflict` for the node ``name`` with ``labels``."""
        found = self.nodes.get(name)
        if found is not None:
            return found
        value = labels.get(self.topology_key)
        return self.values.get(value) if value is not None else None


Select = Callable[[str, LabelSelector], Iterable[Pod]]
"""The pods of a namespace a selector may match (a superset: each is matched again)."""


def forbidden_domains(
    pod: Pod,
    pods_by_namespace: Mapping[str, Iterable[Pod]],
    nodes: Mapping[str, Node],
    namespace_labels: Mapping[str, Mapping[str, str]],
    *,
    select: Select | None = None,
) -> list[ForbiddenDomains]:
    """For each of ``pod``'s required anti-affinity terms, where the pods it selects run
    (module docstring, step 3): one pass over the pods, then a lookup per node. ``select``
    narrows a namespace's pods to those a selector may match (an index)."""
    found = []
    own = pod_key(pod)
    for term in required_terms(pod, "podAntiAffinity"):
        by_node: dict[str, Pod] = {}
        by_value: dict[str, Pod] = {}
        scope = term.namespaces or frozenset(pods_by_namespace)
        for namespace in sorted(scope):
            pods = (
                select(namespace, term.selector)
                if select is not None
                else pods_by_namespace.get(namespace, ())
            )
            for other in pods:
                if pod_key(other) == own or not term.matches(other, namespace_labels):
                    continue
                name = str(spec_of(other).get("nodeName") or "")
                other_node = nodes.get(name)
                if other_node is None:
                    continue
                by_node.setdefault(name, other)
                value = node_labels(other_node).get(term.topology_key)
                if value is not None:
                    by_value.setdefault(value, other)
        found.append(
            ForbiddenDomains(topology_key=term.topology_key, nodes=by_node, values=by_value)
        )
    return found


def anti_affinity_conflict(
    pod: Pod,
    node: Node,
    pods_by_namespace: Mapping[str, Sequence[Pod]],
    nodes: Mapping[str, Node],
    namespace_labels: Mapping[str, Mapping[str, str]],
) -> Pod | None:
    """The first other pod that one of ``pod``'s required anti-affinity terms forbids next to it
    if ``pod`` ran on ``node``; ``None`` when there is none (module docstring, step 3)."""
    for domains in forbidden_domains(pod, pods_by_namespace, nodes, namespace_labels):
        other = domains.conflict(node)
        if other is not None:
            return other
    return None


class _Pods:
    """The strategy's pods by namespace and by label, as pods leave (evicted)."""

    def __init__(self) -> None:
        self.by_namespace: dict[str, dict[tuple[str, str], Pod]] = {}
        self._by_label: dict[tuple[str, str, str], dict[tuple[str, str], Pod]] = {}

    def add(self, pod: Pod) -> None:
        key = pod_key(pod)
        self.by_namespace.setdefault(key[0], {})[key] = pod
        for label, value in (Meta(pod).raw.get("labels") or {}).items():
            self._by_label.setdefault((key[0], label, value), {})[key] = pod

    def remove(self, pod: Pod) -> None:
        key = pod_key(pod)
        self.by_namespace.get(key[0], {}).pop(key, None)
        for label, value in (Meta(pod).raw.get("labels") or {}).items():
            self._by_label.get((key[0], label, value), {}).pop(key, None)

    def select(self, namespace: str, selector: LabelSelector) -> Iterable[Pod]:
        if selector.nothing:
            return ()
        for requirement in selector.requirements:
            value = selector.exact_value(requirement.key)
            if value is not None:
                return list(self._by_label.get((namespace, requirement.key, value), {}).values())
        return list(self.by_namespace.get(namespace, {}).values())


def remove_pods_violating_inter_pod_anti_affinity(
    ctx: StrategyContext, args: RemovePodsViolatingInterPodAntiAffinityArgs
) -> StrategyRun:
    view = ctx.view
    nodes = {node_name(n): n for n in view.nodes}
    pods = _Pods()
    on_node: dict[str, list[Pod]] = {}
    for node in view.nodes:
        for pod in view.pods_on(node_name(node)):
            namespace = str(Meta(pod).raw.get("namespace", ""))
            if not args.namespaces.allows(namespace) or not labels_match(args.label_selector, pod):
                continue
            pods.add(pod)
            on_node.setdefault(node_name(node), []).append(pod)
    for node in view.nodes:
        for pod in sort_low_to_high(on_node.get(node_name(node), ())):
            if not required_terms(pod, "podAntiAffinity"):
                continue
            other = None
            scope: dict[str, tuple[Pod, ...]] = dict.fromkeys(pods.by_namespace, ())
            for domains in forbidden_domains(
                pod, scope, nodes, view.namespace_labels, select=pods.select
            ):
                other = domains.conflict(node)
                if other is not None:
                    break
            if other is None or not ctx.evictable(pod):
                continue
            meta = Meta(other).raw
            result = yield from ctx.evict(
                pod, f"pod's anti-affinity forbids {meta.get('namespace')}/{meta.get('name')}"
            )
            if result is EvictionResult.EVICTED:
                pods.remove(pod)
            elif result is EvictionResult.NODE_LIMIT:
                break
            elif result is EvictionResult.TOTAL_LIMIT:
                return
