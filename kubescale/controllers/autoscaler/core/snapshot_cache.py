"""The scan's pod lists and cluster snapshot from pieces kept across scans (issue 29).

Upstream's ``RunOnce`` lists every pod and node and builds its ``ClusterSnapshot`` anew each
loop (``static_autoscaler.go``: ``obtainNodeLists``, ``listPods``, then
``initializeClusterSnapshot`` / ``ClusterSnapshot.SetClusterState`` with the nodes and the
non-expendable scheduled pods). The snapshot built here is that same snapshot — the same nodes
in the same order, each with the same pods in the informer's order, the same requests, ports and
anti-affinity pods — but put together from pieces that did not change since the last scan, so
that a steady scan costs what changed, not what exists:

* :class:`PodFactsCache` keeps, per pod (by uid), what the scan derives from it: the pod as the
  VPA will make it (``--coordination one-brain``: :class:`~kubescale.coordination.ports.
  RequestsAhead`), its schedulability class (:func:`~.pod_lists.pods_by_schedulability`: bound,
  ``Unschedulable``, or neither) and its priority (expendable below
  ``--expendable-pods-priority-cutoff``). An entry holds while the informer's object is the same
  (the same object, or the same uid and resourceVersion), the VPA's answer still holds
  (:meth:`~kubescale.coordination.ports.RequestsAhead.still_current`) and the PriorityClasses
  are the same; every entry of a pod no longer listed is released at the scan (one entry per
  live pod). Re-listed pods are checked like any other: a changed pod gets new facts.
* :class:`NodePieces` keeps, per node, its :class:`~kubescale.scheduling.filters.NodeState`
  with its pods counted, reused (as a copy: an iteration changes its snapshot) while the node
  object and its placed pods' facts are the same objects as when it was built; nodes gone are
  released.

Both count what they recomputed in the last scan (:attr:`PodFactsCache.computed`,
:attr:`NodePieces.rebuilt`): a steady scan with nothing changed recomputes nothing.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kubescale.controllers.autoscaler.core.pod_lists import (
    SCHEDULED,
    UNSCHEDULABLE,
    PodsBySchedulability,
    schedulability,
)
from kubescale.controllers.autoscaler.model.pod_facts import PriorityResolver
from kubescale.coordination.ports import RequestsAhead
from kubescale.coordination.requests_ahead import AheadAnswer
from kubescale.objects.node import Node
from kubescale.objects.pod import Pod
from kubescale.objects.priority_class import PriorityClass
from kubescale.objects.views import Meta, spec_of
from kubescale.scheduling.filters import NodeState
from kubescale.scheduling.fit import ClusterSnapshot
from kubescale.scheduling.pod_resources import RequestCache, node_allocatable

__all__ = [
    "NodePieces",
    "PodFacts",
    "PodFactsCache",
    "PodListing",
    "priority_context",
]


@dataclass(frozen=True, slots=True)
class PodFacts:
    """What a scan derives from one pod (module docstring)."""

    source: Pod
    """The informer's object the facts were derived from."""
    uid: str
    resource_version: str
    key: tuple[str, str]
    """``(namespace, name)``."""
    answer: AheadAnswer
    """The pod as the VPA will make it (``answer.pod``: what the scan works with)."""
    schedulability: int
    node: str
    priority: int

    @property
    def pod(self) -> Pod:
        return self.answer.pod


@dataclass(frozen=True)
class PodListing:
    """One scan's pods: their facts in the informer's order, and the priorities they used."""

    facts: list[PodFacts]
    priority: PriorityResolver

    @property
    def pods(self) -> list[Pod]:
        return [f.answer.pod for f in self.facts]

    @property
    def keys(self) -> list[tuple[str, str]]:
        return [f.key for f in self.facts]

    def by_schedulability(self) -> PodsBySchedulability:
        """:func:`~.pod_lists.pods_by_schedulability` of :attr:`pods`."""
        lists = PodsBySchedulability()
        for facts in self.facts:
            if facts.schedulability == SCHEDULED:
                lists.scheduled.append(facts.answer.pod)
            elif facts.schedulability == UNSCHEDULABLE:
                lists.unschedulable.append(facts.answer.pod)
        return lists


def priority_context(priority_classes: Iterable[PriorityClass]) -> Hashable:
    """What :class:`PriorityResolver` reads of the PriorityClasses: when it changes, every
    pod's priority is computed again."""
    return tuple(
        sorted(
            (Meta(pc).name, int(pc.get("value") or 0), bool(pc.get("globalDefault")))
            for pc in priority_classes
        )
    )


class PodFactsCache:
    """Per-pod facts across scans (module docstring); on the loop's thread (the VPA's answers
    read the shared caches)."""

    def __init__(self, ahead: RequestsAhead | None = None) -> None:
        self.ahead = ahead
        self._entries: dict[str, PodFacts] = {}
        self._by_object: dict[int, PodFacts] = {}
        """The same entries by ``id()`` of their source object (each entry keeps its source
        alive: an id found here whose entry's source is the very object is that pod's)."""
        self._context: Hashable = None
        self.computed = 0
        """Pods whose facts the last scan computed (0 on a scan where nothing changed)."""
        self.released = 0
        """Entries the last scan released (pods no longer listed)."""

    def __len__(self) -> int:
        return len(self._entries)

    def refresh(
        self,
        pods: Iterable[Pod],
        priority_classes: Sequence[PriorityClass],
    ) -> PodListing:
        """This scan's facts for ``pods`` (the informer's list), reusing every entry that still
        holds and releasing those of pods not listed."""
        priority = PriorityResolver(list(priority_classes))
        context = priority_context(priority_classes)
        previous = self._entries
        old, by_object = previous, self._by_object
        if context != self._context:
            old, by_object = {}, {}
            self._context = context
        entries: dict[str, PodFacts] = {}
        objects: dict[int, PodFacts] = {}
        facts: list[PodFacts] = []
        computed = 0
        ahead = self.ahead
        for pod in pods:
            # The informer replaces an object when it changes, never edits it: the same object
            # is the same resourceVersion, found without reading its metadata.
            entry = by_object.get(id(pod))
            if entry is None or entry.source is not pod:
                entry = old.get(Meta(pod).identity)
                version = Meta(pod).resource_version
                if entry is None or not (version and entry.resource_version == version):
                    entry = None
            if entry is not None and not (
                ahead is None or entry.answer.pod_only or ahead.still_current(entry.answer)
            ):
                entry = None
            if entry is None:
                entry = self._facts(pod, Meta(pod).identity, priority)
                computed += 1
            entries[entry.uid] = entry
            objects[id(pod)] = entry
            facts.append(entry)
        self.released = sum(1 for uid in previous if uid not in entries)
        self._entries, self._by_object = entries, objects
        self.computed = computed
        return PodListing(facts=facts, priority=priority)

    def _facts(self, pod: Pod, uid: str, priority: PriorityResolver) -> PodFacts:
        answer = (
            self.ahead.answer_for(pod)
            if self.ahead is not None
            else AheadAnswer(pod=pod, pod_only=True)
        )
        ahead = answer.pod
        meta = Meta(pod)
        return PodFacts(
            source=pod,
            uid=uid,
            resource_version=meta.resource_version,
            key=(meta.namespace, meta.name),
            answer=answer,
            schedulability=schedulability(ahead),
            node=str(spec_of(ahead).get("nodeName") or ""),
            priority=priority.priority(ahead),
        )


@dataclass(frozen=True)
class _Piece:
    node: Node
    placed: tuple[PodFacts, ...]
    state: NodeState
    """Never handed out: each snapshot gets a copy."""
    anti_affinity: Mapping[tuple[str, str], Pod] = field(default_factory=dict)


def _same(a: Sequence[PodFacts], b: Sequence[PodFacts]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


class NodePieces:
    """Per-node snapshot pieces across scans (module docstring); on the worker thread."""

    def __init__(self) -> None:
        self._pieces: dict[str, _Piece] = {}
        self.rebuilt = 0
        """Nodes whose piece the last snapshot built anew (0 when nothing changed)."""

    def __len__(self) -> int:
        return len(self._pieces)

    def snapshot(
        self,
        *,
        nodes: Sequence[Node],
        listing: PodListing,
        cutoff: int,
        namespace_labels: Mapping[str, Mapping[str, str]],
        requests: RequestCache,
        non_zero: RequestCache,
    ) -> ClusterSnapshot:
        """``ClusterSnapshot.build(nodes=nodes, pods=<the non-expendable scheduled pods>)``,
        from the pieces that still hold."""
        placed: dict[str, list[PodFacts]] = {}
        for facts in listing.facts:
            if facts.schedulability == SCHEDULED and facts.priority >= cutoff:
                placed.setdefault(facts.node, []).append(facts)
        snapshot = ClusterSnapshot(
            namespace_labels=namespace_labels, requests=requests, non_zero=non_zero
        )
        pieces: dict[str, _Piece] = {}
        rebuilt = 0
        for node in nodes:
            name = str(Meta(node).raw["name"])
            mine = placed.get(name, ())
            piece = self._pieces.get(name)
            if piece is None or not self._holds(piece, node, mine):
                piece = self._piece(node, name, mine, requests, non_zero)
                rebuilt += 1
            pieces[name] = piece
            snapshot.add_node_state(piece.state.copy(), anti_affinity=piece.anti_affinity)
        self._pieces = pieces
        self.rebuilt = rebuilt
        return snapshot

    @staticmethod
    def _holds(piece: _Piece, node: Node, placed: Sequence[PodFacts]) -> bool:
        if piece.node is not node:
            version = Meta(node).resource_version
            if not version or Meta(piece.node).resource_version != version:
                return False
        return _same(piece.placed, placed)

    @staticmethod
    def _piece(
        node: Node,
        name: str,
        placed: Sequence[PodFacts],
        requests: RequestCache,
        non_zero: RequestCache,
    ) -> _Piece:
        scratch = ClusterSnapshot(requests=requests, non_zero=non_zero)
        state = scratch.add_node(node, allocatable=node_allocatable(node))
        for facts in placed:
            scratch.add_pod(name, facts.answer.pod)
        return _Piece(
            node=node,
            placed=tuple(placed),
            state=state,
            anti_affinity=dict(scratch.anti_affinity_pods(name)),
        )
