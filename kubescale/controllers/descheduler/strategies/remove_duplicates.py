"""RemoveDuplicates (Balance; upstream ``removeduplicates``): spread copies of one workload.

1. Node by node, the pods passing ``Filter``, ``PreEvictionFilter`` and the namespaces; pods
   without ownerReferences, or with an ownerReference of an ``excludeOwnerKinds`` kind, are
   left out.
2. A pod's owner keys: ``(namespace, kind, name, imagesHash)`` per ownerReference, where
   ``imagesHash`` joins the sorted images of its containers with ``#``; each key's occurrences
   are counted over every node.
3. A pod's *key list*: ``namespace/kind/name/image`` for every ownerReference × container
   image, sorted. On each node the first pod with a given key list is the original; later pods
   with the same list are duplicates, filed under each of their owner keys and the node.
4. Per owner key, the target nodes (:func:`target_nodes`) are the nodes a class of its
   duplicates — same tolerations, required node affinity and nodeSelector — could run on
   (NoSchedule/NoExecute taints tolerated, selector and affinity matched), counted only for a
   class matching more than one node. Fewer than two target nodes: nothing to do. Otherwise
   ``upperAvg = ceil(occurrences / len(targets))`` and a node holding ``len(dups) + 1 >
   upperAvg`` copies has ``dups[upperAvg - 1:]`` evicted, in listing order.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Final

from kubescale.objects.node import Node
from kubescale.objects.pod import Pod
from kubescale.objects.views import Meta, spec_of
from kubescale.scheduling.cycle_view import node_labels, node_name
from kubescale.scheduling.filters import FILTERED_EFFECTS, NodeAffinity, first_untolerated_taint
from kubescale.scheduling.pods import owner_refs
from kubescale.scheduling.policy.strategy_args import RemoveDuplicatesArgs

from ..framework.eviction import EvictionResult
from ..framework.strategy_context import StrategyContext, StrategyRun

__all__ = ["NAME", "OwnerKey", "owner_keys", "remove_duplicates", "target_nodes"]

NAME: Final = "RemoveDuplicates"
OwnerKey = tuple[str, str, str, str]
"""``(namespace, kind, name, imagesHash)``."""


def _images(pod: Pod) -> list[str]:
    return sorted(str(c.get("image", "")) for c in spec_of(pod).get("containers") or ())


def owner_keys(pod: Pod) -> list[OwnerKey]:
    namespace = str(Meta(pod).raw.get("namespace", ""))
    images_hash = "#".join(_images(pod))
    return [
        (namespace, str(ref.get("kind", "")), str(ref.get("name", "")), images_hash)
        for ref in owner_refs(pod)
    ]


def _key_list(pod: Pod) -> str:
    namespace = str(Meta(pod).raw.get("namespace", ""))
    keys = sorted(
        "/".join((namespace, str(ref.get("kind", "")), str(ref.get("name", "")), image))
        for ref in owner_refs(pod)
        for image in _images(pod)
    )
    return "/".join(keys)


def _placement_class(pod: Pod) -> str:
    spec = spec_of(pod)
    affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    return json.dumps(
        [spec.get("tolerations") or [], affinity, spec.get("nodeSelector") or {}], sort_keys=True
    )


def _class_nodes(pod: Pod, nodes: Sequence[Node]) -> list[str]:
    """The nodes one placement class could run on."""
    tolerations = spec_of(pod).get("tolerations") or ()
    affinity = NodeAffinity.of_pod(pod)
    return [
        node_name(node)
        for node in nodes
        if first_untolerated_taint(spec_of(node).get("taints") or (), tolerations, FILTERED_EFFECTS)
        is None
        and affinity.matches(node_name(node), node_labels(node))
    ]


def target_nodes(
    pods: Sequence[Pod],
    nodes: Sequence[Node],
    memo: dict[str, list[str]] | None = None,
) -> set[str]:
    """``getTargetNodes`` (module docstring, step 4): the nodes' names. ``memo`` keeps each
    placement class's nodes across owners (a cycle's nodes do not change)."""
    memo = {} if memo is None else memo
    chosen: set[str] = set()
    classes: dict[str, Pod] = {}
    for pod in pods:
        classes.setdefault(_placement_class(pod), pod)
    for key, pod in classes.items():
        if key not in memo:
            memo[key] = _class_nodes(pod, nodes)
        if len(memo[key]) > 1:
            chosen.update(memo[key])
    return chosen


def remove_duplicates(ctx: StrategyContext, args: RemoveDuplicatesArgs) -> StrategyRun:
    view = ctx.view
    occurrences: dict[OwnerKey, int] = {}
    duplicates: dict[OwnerKey, dict[str, list[Pod]]] = {}
    for node in view.nodes:
        originals: set[str] = set()
        for pod in view.pods_on(node_name(node)):
            namespace = str(Meta(pod).raw.get("namespace", ""))
            refs = owner_refs(pod)
            if not refs or any(ref.get("kind") in args.exclude_owner_kinds for ref in refs):
                continue
            if not args.namespaces.allows(namespace) or not ctx.evictable(pod):
                continue
            keys = owner_keys(pod)
            for key in keys:
                occurrences[key] = occurrences.get(key, 0) + 1
            key_list = _key_list(pod)
            if key_list not in originals:
                originals.add(key_list)
                continue
            for key in keys:
                duplicates.setdefault(key, {}).setdefault(node_name(node), []).append(pod)
    classes: dict[str, list[str]] = {}
    for key, by_node in duplicates.items():
        pods = [pod for dups in by_node.values() for pod in dups]
        targets = target_nodes(pods, view.nodes, classes)
        if len(targets) < 2:
            continue
        upper_avg = -(-occurrences[key] // len(targets))  # ceil
        for dups in by_node.values():
            if len(dups) + 1 <= upper_avg:
                continue
            for pod in dups[upper_avg - 1 :]:
                result = yield from ctx.evict(
                    pod,
                    f"{len(dups) + 1} copies of {key[1]}/{key[2]} on the node, {upper_avg} wanted",
                )
                if result is EvictionResult.NODE_LIMIT:
                    break
                if result is EvictionResult.TOTAL_LIMIT:
                    return
