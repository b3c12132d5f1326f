"""RemovePodsViolatingInterPodAntiAffinity (Deschedule; upstream
``removepodsviolatinginterpodantiaffinity``).

1. The pods of every node of the cycle, filtered by the namespaces and the label selector only
   (the evictor's filters apply at eviction time), grouped by namespace.
2. Node by node, the node's pods from lowest to highest priority
   (:func:`~kubescale.scheduling.pods.sort_low_to_high`).
3. A pod violates (``CheckPodsWithAntiAffinityExist``,
   :func:`~kubescale.scheduling.descheduler_rules.anti_affinity_conflict`) when one
   of its *required* anti-affinity terms selects another pod of the group — in the term's
   namespaces (default: the pod's own) — running on a node of the cycle with the same value of
   the term's ``topologyKey`` (the same node always counts).
4. A violating pod passing ``Filter`` and ``PreEvictionFilter`` is evicted and, once evicted,
   leaves the group: later pods are judged against the pods that remain.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from kubescale.objects.pod import Pod
from kubescale.objects.selectors import LabelSelector
from kubescale.objects.views import Meta
from kubescale.scheduling.cycle_view import node_name
from kubescale.scheduling.descheduler_rules import ANTI_AFFINITY, forbidden_domains
from kubescale.scheduling.fit import pod_key
from kubescale.scheduling.inter_pod_affinity import required_terms
from kubescale.scheduling.pods import sort_low_to_high
from kubescale.scheduling.policy.common_args import labels_match
from kubescale.scheduling.policy.strategy_args import RemovePodsViolatingInterPodAntiAffinityArgs

from ..framework.eviction import EvictionResult
from ..framework.strategy_context import StrategyContext, StrategyRun

__all__ = [
    "NAME",
    "remove_pods_violating_inter_pod_anti_affinity",
]

NAME: Final = ANTI_AFFINITY


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
