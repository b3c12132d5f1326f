"""RemovePodsViolatingNodeAffinity (Deschedule; upstream ``removepodsviolatingnodeaffinity``).

For each ``nodeAffinityType`` in turn, node by node, pods passing the namespaces, the label
selector, ``Filter`` and ``PreEvictionFilter``:

* ``requiredDuringSchedulingIgnoredDuringExecution``: the pod has required node affinity, its
  node no longer matches its nodeSelector and required terms (:func:`violates_required`), and it
  fits some node of the cycle (``PodFitsAnyNode``);
* ``preferredDuringSchedulingIgnoredDuringExecution``: the pod has preferred terms, fits some
  node, and some node of the cycle scores a higher Σ weight of matching preferred terms than its
  own (:func:`preferred_weights`) — upstream takes the best weight over *all* the cycle's nodes,
  whether the pod fits there or not.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Final

from kubescale.objects.node import Node
from kubescale.objects.pod import Pod
from kubescale.objects.views import Meta
from kubescale.scheduling.cycle_view import node_labels, node_name
from kubescale.scheduling.descheduler_rules import (
    NODE_AFFINITY,
    has_preferred_affinity,
    has_required_affinity,
    node_affinity_of,
)
from kubescale.scheduling.filters import NodeAffinity, PreferredNodeAffinity
from kubescale.scheduling.policy.common_args import labels_match
from kubescale.scheduling.policy.strategy_args import (
    NODE_AFFINITY_PREFERRED,
    NODE_AFFINITY_REQUIRED,
    RemovePodsViolatingNodeAffinityArgs,
)

from ..framework.eviction import EvictionResult
from ..framework.strategy_context import StrategyContext, StrategyRun

__all__ = [
    "NAME",
    "best_preferred_weight",
    "remove_pods_violating_node_affinity",
    "violates_required",
]

NAME: Final = NODE_AFFINITY


def violates_required(pod: Pod, node: Node) -> bool:
    """The node does not match the pod's nodeSelector and required node affinity."""
    return not NodeAffinity.of_pod(pod).matches(node_name(node), node_labels(node))


def best_preferred_weight(pod: Pod, nodes: Sequence[Node]) -> int:
    """``GetBestNodeWeightGivenPodPreferredAffinity``: the highest Σ weight over ``nodes``."""
    preferred = PreferredNodeAffinity.of_pod(pod)
    weights = preferred.weights({node_name(n): node_labels(n) for n in nodes})
    return max(weights.values(), default=0)


def _candidates(
    ctx: StrategyContext, args: RemovePodsViolatingNodeAffinityArgs, node: Node
) -> list[Pod]:
    pods = []
    for pod in ctx.view.pods_on(node_name(node)):
        namespace = str(Meta(pod).raw.get("namespace", ""))
        if args.namespaces.allows(namespace) and labels_match(args.label_selector, pod):
            pods.append(pod)
    return pods


def remove_pods_violating_node_affinity(
    ctx: StrategyContext, args: RemovePodsViolatingNodeAffinityArgs
) -> StrategyRun:
    nodes = list(ctx.view.nodes)
    best_weights: dict[str, int] = {}

    def best_weight(pod: Pod) -> int:
        """The best weight over the nodes, once per distinct set of preferred terms."""
        spec = json.dumps(
            node_affinity_of(pod).get("preferredDuringSchedulingIgnoredDuringExecution"),
            sort_keys=True,
        )
        if spec not in best_weights:
            best_weights[spec] = best_preferred_weight(pod, nodes)
        return best_weights[spec]

    for affinity_type in args.node_affinity_type:
        for node in nodes:
            for pod in _candidates(ctx, args, node):
                if affinity_type == NODE_AFFINITY_REQUIRED:
                    if not has_required_affinity(pod) or not violates_required(pod, node):
                        continue
                    reason = "pod does not match its required node affinity on this node"
                elif affinity_type == NODE_AFFINITY_PREFERRED:
                    if not has_preferred_affinity(pod):
                        continue
                    current = PreferredNodeAffinity.of_pod(pod).weight(
                        node_name(node), node_labels(node)
                    )
                    if best_weight(pod) <= current:
                        continue
                    reason = "another node matches the pod's preferred node affinity better"
                else:  # pragma: no cover - validated when the policy is loaded
                    continue
                if not ctx.evictable(pod) or not ctx.view.fits_any(
                    pod, nodes, other_nodes_only=False
                ):
                    continue
                result = yield from ctx.evict(pod, reason)
                if result is EvictionResult.NODE_LIMIT:
                    break
                if result is EvictionResult.TOTAL_LIMIT:
                    return
