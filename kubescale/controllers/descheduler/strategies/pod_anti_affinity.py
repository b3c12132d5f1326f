"""RemovePodsViolatingInterPodAntiAffinity (Deschedule; upstream
``removepodsviolatinginterpodantiaffinity``).

1. The pods of every node of the cycle, filtered by the namespaces and the label selector only
   (the evictor's filters apply at eviction time), grouped by namespace.
2. Node by node, the node's pods from lowest to highest priority
   (:func:`~..framework.pods.sort_low_to_high`).
3. A pod violates (``CheckPodsWithAntiAffinityExist``, :func:`anti_affinity_conflict`) when one
   of its *required* anti-affinity terms selects another pod of the group — in the term's
   namespaces (default: the pod's own) — running on a node of the cycle with the same value of
   the term's ``topologyKey`` (the same node always counts).
4. A violating pod passing ``Filter`` and ``PreEvictionFilter`` is evicted and, once evicted,
   leaves the group: later pods are judged against the pods that remain.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from kubescale.scheduling.fit import pod_key
from kubescale.scheduling.inter_pod_affinity import required_terms

from ..framework.cycle_view import node_labels, node_name
from ..framework.eviction import EvictionResult
from ..framework.pods import sort_low_to_high
from ..framework.strategy_context import StrategyContext, StrategyRun
from ..policy.common_args import labels_match
from ..policy.strategy_args import RemovePodsViolatingInterPodAntiAffinityArgs

__all__ = ["NAME", "anti_affinity_conflict", "remove_pods_violating_inter_pod_anti_affinity"]

NAME: Final = "RemovePodsViolatingInterPodAntiAffinity"
Pod = Mapping[str, Any]
Node = Mapping[str, Any]


def _same_topology(a: Node, b: Node, key: str) -> bool:
    if node_name(a) == node_name(b):
        return True
    value = node_labels(a).get(key)
    return value is not None and node_labels(b).get(key) == value


def anti_affinity_conflict(
    pod: Pod,
    node: Node,
    pods_by_namespace: Mapping[str, Sequence[Pod]],
    nodes: Mapping[str, Node],
    namespace_labels: Mapping[str, Mapping[str, str]],
) -> Pod | None:
    """The first other pod that one of ``pod``'s required anti-affinity terms forbids next to it
    if ``pod`` ran on ``node``; ``None`` when there is none (module docstring, step 3)."""
    terms = required_terms(pod, "podAntiAffinity")
    if not terms:
        return None
    own = pod_key(pod)
    for term in terms:
        scope = term.namespaces or frozenset(pods_by_namespace)
        for namespace in sorted(scope):
            for other in pods_by_namespace.get(namespace, ()):
                if pod_key(other) == own or not term.matches(other, namespace_labels):
                    continue
                other_node = nodes.get(str((other.get("spec") or {}).get("nodeName") or ""))
                if other_node is not None and _same_topology(node, other_node, term.topology_key):
                    return other
    return None


def remove_pods_violating_inter_pod_anti_affinity(
    ctx: StrategyContext, args: RemovePodsViolatingInterPodAntiAffinityArgs
) -> StrategyRun:
    view = ctx.view
    nodes = {node_name(n): n for n in view.nodes}
    by_namespace: dict[str, list[Pod]] = {}
    on_node: dict[str, list[Pod]] = {}
    for node in view.nodes:
        for pod in view.pods_on(node_name(node)):
            namespace = str((pod.get("metadata") or {}).get("namespace", ""))
            if not args.namespaces.allows(namespace) or not labels_match(args.label_selector, pod):
                continue
            by_namespace.setdefault(namespace, []).append(pod)
            on_node.setdefault(node_name(node), []).append(pod)
    for node in view.nodes:
        for pod in sort_low_to_high(on_node.get(node_name(node), ())):
            other = anti_affinity_conflict(pod, node, by_namespace, nodes, view.namespace_labels)
            if other is None or not ctx.evictable(pod):
                continue
            meta = other.get("metadata") or {}
            result = yield from ctx.evict(
                pod, f"pod's anti-affinity forbids {meta.get('namespace')}/{meta.get('name')}"
            )
            if result is EvictionResult.EVICTED:
                namespace = str((pod.get("metadata") or {}).get("namespace", ""))
                by_namespace[namespace] = [
                    p for p in by_namespace[namespace] if pod_key(p) != pod_key(pod)
                ]
            elif result is EvictionResult.NODE_LIMIT:
                break
            elif result is EvictionResult.TOTAL_LIMIT:
                return
