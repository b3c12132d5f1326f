"""What one descheduling cycle sees: nodes, pods and the objects the evictor consults.

The loop builds a :class:`CycleView` from its informer caches at the start of a cycle (upstream
reads the same informers); everything after is pure. Upstream rules kept here:

* the cycle's nodes (:func:`cycle_nodes`): nodes matching the policy's ``nodeSelector``, then
  only *ready* ones — a node with a ``Ready`` condition whose status is not ``True`` is left
  out, a node without one is kept, and cordoned nodes are kept (``ReadyNodes``/``IsReady``);
* ``ListPodsOnANode``/``ListAllPodsOnANode`` (:meth:`CycleView.pods_on`): the pods bound to a
  node, without or with the ``Succeeded``/``Failed`` ones.

Order: nodes by name, a node's pods by creation time then namespace/name (upstream lists them
in informer order, which is arbitrary; a fixed order makes every cycle reproducible).

"Would this pod fit" (``nodeFit``, ``PodFitsAnyNode``, ``PodFitsAnyOtherNode``) asks
:class:`kubescale.scheduling.fit.ClusterSnapshot` — the simulated scheduler's own filters over
the ready nodes — with the pod itself taken off its node first, as the scheduler would see its
replacement. Upstream's ``NodeFit`` checks a subset of those filters (node selector and required
affinity, NoSchedule/NoExecute taints, resources on other nodes, cordon, the pod's own
anti-affinity on the node); asking the scheduler's filters is stricter where they differ (a
zone-wide anti-affinity term, an existing pod's anti-affinity, a cordon the pod tolerates, a
host port already taken on the node, a ``DoNotSchedule`` topology spread constraint the move
would break — counted with the pod off its node).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from kubescale.objects.node import Node
from kubescale.objects.pdb import PodDisruptionBudget
from kubescale.objects.persistent_volume_claim import PersistentVolumeClaim
from kubescale.objects.pod import Pod
from kubescale.objects.selectors import LabelSelector
from kubescale.objects.views import Meta, spec_of
from kubescale.scheduling.filters import is_node_ready
from kubescale.scheduling.fit import ClusterSnapshot, PodInfo, PreFilterState, pod_key
from kubescale.scheduling.inter_pod_affinity import TopologyCounts
from kubescale.scheduling.pod_resources import Amounts, RequestCache

from .affinity_index import AffinityIndex
from .pods import creation_time, is_terminal, owner_refs, requests_of

__all__ = ["CycleView", "cycle_nodes"]


def node_labels(node: Node) -> Mapping[str, str]:
    return Meta(node).raw.get("labels") or {}


def node_name(node: Node) -> str:
    return str(Meta(node).raw.get("name", ""))


def cycle_nodes(nodes: Iterable[Node], selector: LabelSelector | None) -> list[Node]:
    """The ready nodes matching ``selector`` (module docstring), by name."""
    chosen = [
        node
        for node in nodes
        if (selector is None or selector.matches(node_labels(node))) and is_node_ready(node)
    ]
    return sorted(chosen, key=node_name)


def _pod_order(pod: Pod) -> tuple[str, str, str]:
    created = creation_time(pod)
    namespace, name = pod_key(pod)
    return (created.isoformat() if created else "", namespace, name)


@dataclass
class CycleView:
    """The cluster as one cycle sees it (module docstring)."""

    now: datetime
    nodes: Sequence[Node]
    """The cycle's nodes: ready, matching the policy's nodeSelector, by name."""
    pods: Sequence[Pod]
    """Every pod of the cluster."""
    all_nodes: Sequence[Node] = ()
    """Every node (the DefaultEvictor's ``nodeFit`` uses its own nodeSelector); defaults to
    :attr:`nodes`."""
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    pdbs: Sequence[PodDisruptionBudget] = ()
    pvcs: Mapping[tuple[str, str], PersistentVolumeClaim] = field(default_factory=dict)
    priority_classes: Mapping[str, int] = field(default_factory=dict)
    node_usage: Mapping[str, Amounts] | None = None
    """metrics.k8s.io node usage (cpu in millicores, memory in bytes), smoothed as upstream's
    metrics collector does; ``None`` when not collected."""
    pod_usage: Mapping[tuple[str, str], Amounts] | None = None
    """metrics.k8s.io usage per pod (sum of its containers)."""
    metric_usage: Mapping[str, Mapping[str, float]] | None = None
    """Prometheus results: query → node (the samples' ``instance`` label) → value."""
    requests: RequestCache | None = None
    """Parsed requests to share across cycles (the snapshot's cache)."""
    non_zero: RequestCache | None = None
    """The snapshot's scoring requests, shared across cycles likewise."""

    def __post_init__(self) -> None:
        if not self.all_nodes:
            self.all_nodes = self.nodes
        self.node_by_name: dict[str, Node] = {node_name(n): n for n in self.all_nodes}
        for node in self.nodes:
            self.node_by_name.setdefault(node_name(node), node)
        self._all_pods_by_node: dict[str, list[Pod]] = {}
        for pod in sorted(self.pods, key=_pod_order):
            bound = spec_of(pod).get("nodeName")
            if bound:
                self._all_pods_by_node.setdefault(str(bound), []).append(pod)
        self._live_pods_by_node: dict[str, list[Pod]] = {
            name: [p for p in pods if not is_terminal(p)]
            for name, pods in self._all_pods_by_node.items()
        }
        self._owner_counts: dict[str, int] | None = None
        self._snapshot: ClusterSnapshot | None = None
        self._topologies: dict[tuple[str, tuple[tuple[str, str], ...], str], TopologyCounts] = {}
        self._spec_requests: dict[int, tuple[Pod, Amounts]] = {}
        self._candidate_names: dict[int, tuple[Iterable[Node], list[str]]] = {}
        self._affinity_index: AffinityIndex | None = None

    # ------------------------------------------------------------------------ listings

    def pods_on(self, node: str, *, include_terminal: bool = False) -> list[Pod]:
        """``ListPodsOnANode`` (``include_terminal``: ``ListAllPodsOnANode``)."""
        source = self._all_pods_by_node if include_terminal else self._live_pods_by_node
        return list(source.get(node, ()))

    def pods_on_nodes(
        self, nodes: Iterable[Node] | None = None, *, include_terminal: bool = False
    ) -> list[Pod]:
        """``ListPodsOnNodes`` over ``nodes`` (default: the cycle's nodes), node by node."""
        return [
            pod
            for node in (self.nodes if nodes is None else nodes)
            for pod in self.pods_on(node_name(node), include_terminal=include_terminal)
        ]

    def requests_of(self, pod: Pod) -> Amounts:
        """:func:`~.pods.requests_of`, computed once per pod object this cycle (shared: do not
        change it)."""
        cached = self._spec_requests.get(id(pod))
        if cached is None or cached[0] is not pod:
            cached = (pod, requests_of(pod))
            self._spec_requests[id(pod)] = cached
        return cached[1]

    def owner_count(self, uid: str) -> int:
        """Pods (any phase) with an ownerReference of this uid (the informer's owner index)."""
        if self._owner_counts is None:
            counts: dict[str, int] = {}
            for pod in self.pods:
                for ref in owner_refs(pod):
                    if ref.get("uid"):
                        counts[str(ref["uid"])] = counts.get(str(ref["uid"]), 0) + 1
            self._owner_counts = counts
        return self._owner_counts.get(uid, 0)

    # ------------------------------------------------------------------------- fitting

    @property
    def snapshot(self) -> ClusterSnapshot:
        """The scheduler's view of the ready nodes of the cluster and their pods."""
        if self._snapshot is None:
            ready = [n for n in self.all_nodes if is_node_ready(n)]
            self._snapshot = ClusterSnapshot.build(
                nodes=ready,
                pods=self.pods,
                namespace_labels=self.namespace_labels,
                requests=self.requests,
                non_zero=self.non_zero,
            )
        return self._snapshot

    def fits_any(self, pod: Pod, candidates: Iterable[Node], *, other_nodes_only: bool) -> bool:
        """``PodFitsAnyNode`` / ``PodFitsAnyOtherNode`` (``other_nodes_only``) over
        ``candidates``, through the scheduler's filters (module docstring)."""
        snapshot = self.snapshot
        current = str(spec_of(pod).get("nodeName") or "")
        known = self._candidate_names.get(id(candidates))
        if known is None or known[0] is not candidates:
            listed = [node_name(n) for n in candidates]
            known = (candidates, [n for n in listed if n in snapshot.nodes])
            if isinstance(candidates, list | tuple):  # a re-iterable, stable candidate list
                self._candidate_names[id(candidates)] = known
        names = known[1]
        skip = current if other_nodes_only else None
        if not names or names == [skip]:
            return False
        info = snapshot.pod_info(pod)
        topology = self._topology_without(pod, info, current)
        removed = bool(current) and snapshot.remove_pod(current, pod)
        try:
            state = PreFilterState(
                affinity=topology, spread=snapshot.spread(info), spread_invalid=info.spread is None
            )
            return any(snapshot.filter(info, name, state) is None for name in names if name != skip)
        finally:
            if removed:
                snapshot.add_pod(current, pod)

    def _topology_without(self, pod: Pod, info: PodInfo, current: str) -> TopologyCounts | None:
        """InterPodAffinity's counts for ``pod`` as if it were not on its node.

        The counts over every pod depend only on the pod's namespace, labels and affinity
        terms, so they are computed once per such signature and cycle; the pod's own share
        (its node's topology values for the terms that select the pod itself) is then taken
        off, which is exactly what counting without it gives."""
        meta = Meta(pod).raw
        affinity = spec_of(pod).get("affinity") or {}
        signature = (
            str(meta.get("namespace", "")),
            tuple(sorted((meta.get("labels") or {}).items())),
            json.dumps(
                [affinity.get("podAffinity"), affinity.get("podAntiAffinity")], sort_keys=True
            ),
        )
        if signature not in self._topologies:
            if self._affinity_index is None:
                self._affinity_index = AffinityIndex(self.snapshot, self.namespace_labels)
            self._topologies[signature] = self._affinity_index.counts(pod, info)
        base = self._topologies[signature]
        if not info.affinity and not info.anti_affinity:
            return base  # the pod's own share is nothing: the shared counts are its counts
        counts = TopologyCounts(pod=pod, affinity=info.affinity, anti_affinity=info.anti_affinity)
        counts.affinity = dict(base.affinity)
        counts.anti_affinity = dict(base.anti_affinity)
        counts.existing_anti_affinity = dict(base.existing_anti_affinity)
        counts.self_match = base.self_match
        state = self.snapshot.nodes.get(current) if current else None
        if state is not None and any(pod_key(p) == pod_key(pod) for p in state.pods):
            labels, namespaces = state.labels, self.namespace_labels
            own = (
                (counts.affinity, info.affinity),
                (counts.anti_affinity, info.anti_affinity),
                (counts.existing_anti_affinity, info.anti_affinity),
            )
            for table, terms in own:
                for term in terms:
                    value = labels.get(term.topology_key)
                    if value is None or not term.matches(pod, namespaces):
                        continue
                    pair = (term.topology_key, value)
                    table[pair] -= 1
                    if table[pair] <= 0:
                        del table[pair]  # "no pod matches" is an empty table
        return counts
