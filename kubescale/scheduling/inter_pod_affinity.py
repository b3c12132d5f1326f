"""kube-scheduler's InterPodAffinity filter: required pod affinity and anti-affinity.

``plugins/interpodaffinity/filtering.go``. A required term selects pods by label selector in its
namespaces (``namespaces``; else ``namespaceSelector`` over the namespaces' labels, ``{}`` being
all of them; with neither, the term owner's own namespace) and compares the ``topologyKey``
label of nodes. PreFilter counts, over the pods already placed, the topology pairs
``(topologyKey, node's value)`` where

* a pod matches one of the incoming pod's affinity terms, or anti-affinity terms;
* an existing pod's own required anti-affinity term matches the incoming pod.

Filter then rejects a node, in this order:

1. ``node(s) didn't match pod affinity rules`` (unresolvable) when the node lacks a term's
   topology label or no matching pod shares its topology value — unless no pod matches any
   term anywhere and the incoming pod matches all its own terms (the first pod of a group
   with affinity to itself may go anywhere the topology exists);
2. ``node(s) didn't match pod anti-affinity rules`` when a pod the incoming pod's anti-affinity
   selects shares the node's topology value;
3. ``node(s) didn't satisfy existing pods anti-affinity rules`` when any of the node's labels
   is a pair an existing pod's anti-affinity forbids.

Only nodes with the topology label can violate an anti-affinity term.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Literal

from kubescale.objects.pod import Pod, PodAffinityTerm
from kubescale.objects.selectors import LabelSelector, SelectorError, label_selector_from_dict
from kubescale.objects.views import Meta, spec_of

from .filters import FilterStatus, NodeState

__all__ = [
    "REASON_AFFINITY",
    "REASON_ANTI_AFFINITY",
    "REASON_EXISTING_ANTI_AFFINITY",
    "AffinityKind",
    "AffinityTerm",
    "TopologyCounts",
    "required_terms",
]

REASON_AFFINITY: Final = "node(s) didn't match pod affinity rules"
REASON_ANTI_AFFINITY: Final = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING_ANTI_AFFINITY: Final = "node(s) didn't satisfy existing pods anti-affinity rules"

Pair = tuple[str, str]
AffinityKind = Literal["podAffinity", "podAntiAffinity"]
"""Which of ``spec.affinity``'s pod sections :func:`required_terms` reads."""


@dataclass(frozen=True)
class AffinityTerm:
    """A required ``PodAffinityTerm`` resolved against its owner pod's namespace."""

    selector: LabelSelector
    namespaces: frozenset[str]
    namespace_selector: LabelSelector | None
    topology_key: str

    @classmethod
    def parse(cls, term: PodAffinityTerm, *, owner_namespace: str) -> AffinityTerm | None:
        """The term, or ``None`` when its selectors do not parse (it then matches nothing)."""
        try:
            selector = label_selector_from_dict(term.get("labelSelector"))
            raw_ns_selector = term.get("namespaceSelector")
            ns_selector = (
                label_selector_from_dict(raw_ns_selector) if raw_ns_selector is not None else None
            )
        except SelectorError:
            return None
        namespaces = frozenset(term.get("namespaces") or [])
        if not namespaces and ns_selector is None:
            namespaces = frozenset({owner_namespace})
        return cls(
            selector=selector,
            namespaces=namespaces,
            namespace_selector=ns_selector,
            topology_key=str(term.get("topologyKey") or ""),
        )

    def matches(self, pod: Pod, namespace_labels: Mapping[str, Mapping[str, str]]) -> bool:
        """``AffinityTerm.Matches``: the pod's namespace is in scope and its labels match."""
        meta = Meta(pod).raw
        namespace = str(meta.get("namespace", ""))
        in_scope = namespace in self.namespaces or (
            self.namespace_selector is not None
            and self.namespace_selector.matches(namespace_labels.get(namespace, {}))
        )
        return in_scope and self.selector.matches(meta.get("labels") or {})


def required_terms(pod: Pod, kind: AffinityKind) -> tuple[AffinityTerm, ...]:
    """The pod's required ``podAffinity`` or ``podAntiAffinity`` (``kind``) terms."""
    affinity = spec_of(pod).get("affinity")
    if not affinity:
        return ()
    section = affinity.get(kind) or {}
    raw = section.get("requiredDuringSchedulingIgnoredDuringExecution") or []
    namespace = str(Meta(pod).raw.get("namespace", ""))
    parsed = (AffinityTerm.parse(t, owner_namespace=namespace) for t in raw)
    return tuple(t for t in parsed if t is not None)


def _count(counts: dict[Pair, int], pair: Pair) -> None:
    counts[pair] = counts.get(pair, 0) + 1


class TopologyCounts:
    """InterPodAffinity's PreFilter state for one incoming pod."""

    def __init__(
        self,
        *,
        pod: Pod,
        affinity: tuple[AffinityTerm, ...],
        anti_affinity: tuple[AffinityTerm, ...],
    ) -> None:
        self.pod = pod
        self.affinity_terms = affinity
        self.anti_affinity_terms = anti_affinity
        self.affinity: dict[Pair, int] = {}
        self.anti_affinity: dict[Pair, int] = {}
        self.existing_anti_affinity: dict[Pair, int] = {}
        self.self_match = False

    @classmethod
    def build(
        cls,
        *,
        pod: Pod,
        affinity: tuple[AffinityTerm, ...],
        anti_affinity: tuple[AffinityTerm, ...],
        nodes: Iterable[NodeState],
        namespace_labels: Mapping[str, Mapping[str, str]],
    ) -> TopologyCounts:
        counts = cls(pod=pod, affinity=affinity, anti_affinity=anti_affinity)
        for node in nodes:
            for existing in node.pods:
                for term in affinity:
                    value = node.labels.get(term.topology_key)
                    if value is not None and term.matches(existing, namespace_labels):
                        _count(counts.affinity, (term.topology_key, value))
                for term in anti_affinity:
                    value = node.labels.get(term.topology_key)
                    if value is not None and term.matches(existing, namespace_labels):
                        _count(counts.anti_affinity, (term.topology_key, value))
                for term in required_terms(existing, "podAntiAffinity"):
                    value = node.labels.get(term.topology_key)
                    if value is not None and term.matches(pod, namespace_labels):
                        _count(counts.existing_anti_affinity, (term.topology_key, value))
        counts.self_match = all(t.matches(pod, namespace_labels) for t in affinity)
        return counts

    @classmethod
    def of_existing(
        cls,
        *,
        pod: Pod,
        existing: Iterable[tuple[Mapping[str, str], tuple[AffinityTerm, ...]]],
        namespace_labels: Mapping[str, Mapping[str, str]],
    ) -> TopologyCounts:
        """:meth:`build` for a pod without affinity terms of its own: only the placed pods'
        anti-affinity terms count — ``existing`` gives, for each placed pod with some, its
        node's labels and its terms."""
        counts = cls(pod=pod, affinity=(), anti_affinity=())
        for labels, terms in existing:
            for term in terms:
                value = labels.get(term.topology_key)
                if value is not None and term.matches(pod, namespace_labels):
                    _count(counts.existing_anti_affinity, (term.topology_key, value))
        counts.self_match = True
        return counts

    def filter(self, node: NodeState) -> FilterStatus | None:
        """The node's verdict (``None``: it passes)."""
        pods_exist = True
        for term in self.affinity_terms:
            value = node.labels.get(term.topology_key)
            if value is None:
                return FilterStatus((REASON_AFFINITY,), unresolvable=True)
            if self.affinity.get((term.topology_key, value), 0) <= 0:
                pods_exist = False
        if not pods_exist and not (not self.affinity and self.self_match):
            return FilterStatus((REASON_AFFINITY,), unresolvable=True)
        for term in self.anti_affinity_terms:
            value = node.labels.get(term.topology_key)
            if value is not None and self.anti_affinity.get((term.topology_key, value), 0) > 0:
                return FilterStatus((REASON_ANTI_AFFINITY,), unresolvable=False)
        if self.existing_anti_affinity and any(
            self.existing_anti_affinity.get(pair, 0) > 0 for pair in node.labels.items()
        ):
            return FilterStatus((REASON_EXISTING_ANTI_AFFINITY,), unresolvable=False)
        return None
