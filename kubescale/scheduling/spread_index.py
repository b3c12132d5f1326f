"""What PodTopologySpread's PreFilter reads from a snapshot, kept current as it changes.

A binpacking places pods one by one and re-asks the PreFilter before each; a descheduling cycle
asks it for thousands of pods, each taken off its node and put back. Counting every placed pod
for every question (upstream's ``calPreFilterState``) would make both quadratic, so
:class:`SpreadIndex` keeps, once the first spread question is asked of a snapshot:

* the placed, non-terminating pods by ``(namespace, label key, label value)`` — the first count
  of a selector with an exact requirement (``app=web``) reads only the pods carrying it;
* per ``(namespace, selector)`` asked about, the matching pods per node, updated on every pod
  added or removed — only the selectors that can match the pod are looked at (those exact on one
  of its labels, and the few without an exact requirement); at most
  :data:`MAX_SPREAD_SELECTORS` selectors, past that the table starts over;
* per tuple of topology keys, the nodes carrying all of them with their values and the domains
  (:class:`~.topology_spread.KeyedNodes`), and the same restricted to a pod's required node
  affinity (``nodeAffinityPolicy: Honor``), dropped whenever a node comes or goes.

Before the first spread question a snapshot keeps nothing of this: pods without spread
constraints pay nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from kubescale.objects.pod import Pod
from kubescale.objects.selectors import LabelSelector
from kubescale.objects.views import Meta

from .filters import NodeAffinity, NodeState
from .topology_spread import KeyedNodes, is_terminating, keyed_nodes

__all__ = ["MAX_SPREAD_SELECTORS", "SpreadIndex"]

MAX_SPREAD_SELECTORS: Final = 256
"""Selectors whose per-node match counts an index keeps (module docstring)."""

LabelKey = tuple[str, str, str]
"""``(namespace, label key, label value)``."""


def _meta(pod: Pod) -> tuple[str, str, Mapping[str, str]]:
    meta = Meta(pod).raw
    return str(meta.get("namespace", "")), str(meta.get("name", "")), meta.get("labels") or {}


class SpreadIndex:
    """The spread counts of one snapshot (module docstring)."""

    def __init__(self) -> None:
        self._pods: dict[LabelKey, dict[tuple[str, str], Mapping[str, str]]] | None = None
        """(namespace, key, value) → (node, pod name) → the pod's labels; ``None`` until the
        first spread question."""
        self._matches: dict[str, dict[LabelSelector, dict[str, int]]] = {}
        self._by_label: dict[LabelKey, list[LabelSelector]] = {}
        self._other: dict[str, list[LabelSelector]] = {}
        self._selectors = 0
        self._keyed: dict[tuple[str, ...], KeyedNodes] = {}
        self._affine: dict[tuple[tuple[str, ...], NodeAffinity], KeyedNodes] = {}

    @property
    def selector_count(self) -> int:
        """How many selectors' counts are kept."""
        return self._selectors

    # --------------------------------------------------------------------- changes

    def pod_added(self, node: str, pod: Pod) -> None:
        if self._pods is not None and not is_terminating(pod):
            self._change(node, pod, 1)

    def pod_removed(self, node: str, pod: Pod) -> None:
        if self._pods is not None and not is_terminating(pod):
            self._change(node, pod, -1)

    def node_changed(self, state: NodeState | None = None, *, added: bool = False) -> None:
        """A node came (``added``: ``state`` with its pods) or went (``state`` with the pods it
        took away), or an empty node was added (``state`` ``None``)."""
        self._keyed.clear()
        self._affine.clear()
        if state is None:
            return
        for pod in state.pods:
            if added:
                self.pod_added(state.name, pod)
            else:
                self.pod_removed(state.name, pod)

    def _change(self, node: str, pod: Pod, delta: int) -> None:
        assert self._pods is not None
        namespace, name, labels = _meta(pod)
        for key, value in labels.items():
            entry = (namespace, key, value)
            if delta > 0:
                self._pods.setdefault(entry, {})[(node, name)] = labels
            else:
                holders = self._pods.get(entry)
                if holders is not None:
                    holders.pop((node, name), None)
        by_selector = self._matches.get(namespace)
        if not by_selector:
            return
        candidates: list[LabelSelector] = list(self._other.get(namespace, ()))
        for key, value in labels.items():
            candidates.extend(self._by_label.get((namespace, key, value), ()))
        for selector in candidates:
            if not selector.matches(labels):
                continue
            counts = by_selector[selector]
            left = counts.get(node, 0) + delta
            if left > 0:
                counts[node] = left
            else:
                counts.pop(node, None)

    # ------------------------------------------------------------------- questions

    def matches(
        self, namespace: str, selector: LabelSelector, nodes: Mapping[str, NodeState]
    ) -> Mapping[str, int]:
        """Node → its pods in ``namespace``, not terminating, that ``selector`` matches
        (``countPodsMatchSelector``; nodes with none left out)."""
        if self._pods is None:
            self._index(nodes.values())
        by_selector = self._matches.setdefault(namespace, {})
        counts = by_selector.get(selector)
        if counts is not None:
            return counts
        if self._selectors >= MAX_SPREAD_SELECTORS:
            self._matches, self._by_label, self._other = {}, {}, {}
            self._selectors = 0
            by_selector = self._matches.setdefault(namespace, {})
        counts = self._count(namespace, selector, nodes)
        by_selector[selector] = counts
        exact = selector.first_exact_label()
        if exact is None:
            self._other.setdefault(namespace, []).append(selector)
        else:
            self._by_label.setdefault((namespace, *exact), []).append(selector)
        self._selectors += 1
        return counts

    def keyed(self, keys: tuple[str, ...], nodes: Mapping[str, NodeState]) -> KeyedNodes:
        """The nodes carrying every key of ``keys``, with their values (cached until a node
        comes or goes)."""
        found = self._keyed.get(keys)
        if found is None:
            found = self._keyed[keys] = keyed_nodes(keys, nodes.values())
        return found

    def affine(
        self, keys: tuple[str, ...], affinity: NodeAffinity, nodes: Mapping[str, NodeState]
    ) -> KeyedNodes:
        """:meth:`keyed` restricted to the nodes ``affinity`` admits (``nodeAffinityPolicy:
        Honor``), cached per affinity until a node comes or goes (pods of one workload share
        it; at most :data:`MAX_SPREAD_SELECTORS` kept)."""
        found = self._affine.get((keys, affinity))
        if found is None:
            if len(self._affine) >= MAX_SPREAD_SELECTORS:
                self._affine.clear()
            keyed = self.keyed(keys, nodes)
            admitted = (
                nodes[name] for name in keyed.values if affinity.matches(name, nodes[name].labels)
            )
            found = self._affine[(keys, affinity)] = keyed_nodes(keys, admitted)
        return found

    def _index(self, states: Iterable[NodeState]) -> None:
        self._pods = {}
        for state in states:
            for pod in state.pods:
                if is_terminating(pod):
                    continue
                namespace, name, labels = _meta(pod)
                for key, value in labels.items():
                    self._pods.setdefault((namespace, key, value), {})[(state.name, name)] = labels

    def _count(
        self, namespace: str, selector: LabelSelector, nodes: Mapping[str, NodeState]
    ) -> dict[str, int]:
        counts: dict[str, int] = {}
        if selector.nothing:
            return counts
        exact = selector.first_exact_label()
        if exact is not None and self._pods is not None:
            for (node, _), labels in self._pods.get((namespace, *exact), {}).items():
                if selector.matches(labels):
                    counts[node] = counts.get(node, 0) + 1
            return counts
        for name, state in nodes.items():
            found = 0
            for pod in state.pods:
                pod_namespace, _, labels = _meta(pod)
                if pod_namespace == namespace and not is_terminating(pod):
                    found += 1 if selector.matches(labels) else 0
            if found:
                counts[name] = found
        return counts
