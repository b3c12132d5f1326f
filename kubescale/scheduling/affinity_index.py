"""InterPodAffinity's topology counts for many pods over one snapshot, from indexes.

:meth:`kubescale.scheduling.inter_pod_affinity.TopologyCounts.build` counts, for one incoming
pod, by looking at every placed pod: fine for one pod, too slow for a descheduling cycle that
asks "would this pod fit elsewhere" for thousands of pods among 30,000. :class:`AffinityIndex`
is built once per cycle from the snapshot and gives the same counts
(:meth:`AffinityIndex.counts`) by reading only what can match:

* the incoming pod's affinity and anti-affinity terms read the placed pods of the terms'
  namespaces, and only those with the term selector's exact label when it has one;
* the placed pods' anti-affinity terms are kept by one exact label their selector requires (or
  in a short list when it requires none), and the incoming pod's labels pick the ones that can
  select it.

A property test holds the counts to :meth:`ClusterSnapshot.topology`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kubescale.objects.pod import Pod
from kubescale.objects.views import Meta
from kubescale.scheduling.fit import ClusterSnapshot, PodInfo
from kubescale.scheduling.inter_pod_affinity import AffinityTerm, TopologyCounts, required_terms

__all__ = ["AffinityIndex"]

Placed = tuple[Pod, Mapping[str, str]]
"""A placed pod and its node's labels."""


class AffinityIndex:
    """The placed pods and their anti-affinity terms, indexed (module docstring)."""

    def __init__(
        self, snapshot: ClusterSnapshot, namespace_labels: Mapping[str, Mapping[str, str]]
    ) -> None:
        self.namespace_labels = namespace_labels
        self._by_label: dict[tuple[str, str, str], list[Placed]] = {}
        self._by_namespace: dict[str, list[Placed]] = {}
        self._anti_by_label: dict[tuple[str, str], list[tuple[AffinityTerm, Mapping[str, str]]]]
        self._anti_by_label = {}
        self._anti_other: list[tuple[AffinityTerm, Mapping[str, str]]] = []
        for name in sorted(snapshot.nodes):
            state = snapshot.nodes[name]
            for pod in state.pods:
                meta = Meta(pod).raw
                namespace = str(meta.get("namespace", ""))
                entry = (pod, state.labels)
                self._by_namespace.setdefault(namespace, []).append(entry)
                for key, value in (meta.get("labels") or {}).items():
                    self._by_label.setdefault((namespace, key, value), []).append(entry)
                for term in required_terms(pod, "podAntiAffinity"):
                    exact = term.selector.first_exact_label()
                    if exact is None:
                        self._anti_other.append((term, state.labels))
                    else:
                        self._anti_by_label.setdefault(exact, []).append((term, state.labels))

    def _selected(self, term: AffinityTerm) -> Iterable[Placed]:
        if term.selector.nothing:
            return
        namespaces = term.namespaces
        if term.namespace_selector is not None:
            namespaces = namespaces | frozenset(self._by_namespace)
        exact = term.selector.first_exact_label()
        for namespace in sorted(namespaces):
            if exact is None:
                yield from self._by_namespace.get(namespace, ())
            else:
                yield from self._by_label.get((namespace, *exact), ())

    def counts(self, pod: Pod, info: PodInfo) -> TopologyCounts:
        """``TopologyCounts.build`` for ``pod`` over the indexed snapshot."""
        counts = TopologyCounts(pod=pod, affinity=info.affinity, anti_affinity=info.anti_affinity)
        labels_of_ns = self.namespace_labels
        for table, terms in (
            (counts.affinity, info.affinity),
            (counts.anti_affinity, info.anti_affinity),
        ):
            for term in terms:
                for existing, node_labels in self._selected(term):
                    value = node_labels.get(term.topology_key)
                    if value is not None and term.matches(existing, labels_of_ns):
                        pair = (term.topology_key, value)
                        table[pair] = table.get(pair, 0) + 1
        labels = Meta(pod).raw.get("labels") or {}
        candidates = list(self._anti_other)
        for key, value in labels.items():
            candidates.extend(self._anti_by_label.get((key, value), ()))
        for term, node_labels in candidates:
            value = node_labels.get(term.topology_key)
            if value is not None and term.matches(pod, labels_of_ns):
                pair = (term.topology_key, value)
                counts.existing_anti_affinity[pair] = counts.existing_anti_affinity.get(pair, 0) + 1
        counts.self_match = all(t.matches(pod, labels_of_ns) for t in info.affinity)
        return counts
