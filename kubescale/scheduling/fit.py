"""Would this pod fit, and where: kube-scheduler's filters over a snapshot of nodes and pods.

One implementation for every part that asks the question — the simulated scheduler, the
cluster autoscaler's binpacking and drain simulation, the descheduler's ``nodeFit`` and the
scheduler extender — so that they can never disagree about a node.

A :class:`ClusterSnapshot` holds nodes (:class:`~.filters.NodeState`: allocatable, requests
of the pods on it, labels, taints, cordon) and the namespaces' labels. It is mutable on
purpose: a binpacking or a drain simulation adds and removes pods and nodes as it goes
(:meth:`ClusterSnapshot.add_pod`, :meth:`~ClusterSnapshot.remove_pod`,
:meth:`~ClusterSnapshot.add_node`, :meth:`~ClusterSnapshot.remove_node`); a caller that needs
the original takes a :meth:`~ClusterSnapshot.copy` first.

:meth:`ClusterSnapshot.filter` runs the default profile's in-tree filters in upstream's order
(:mod:`.filters`, NodePorts from :mod:`.node_ports` before NodeResourcesFit, PodTopologySpread
from :mod:`.topology_spread`, then :mod:`.inter_pod_affinity`); the first rejection is the node's
verdict. :meth:`ClusterSnapshot.prefilter` is the PreFilter step: what the cross-pod filters
count over the whole snapshot for one pod, computed once and handed to every node's
:meth:`~ClusterSnapshot.filter`. A pod without host ports, ``DoNotSchedule`` spread constraints
or affinity terms (and no placed pod with anti-affinity) needs none of it.

Requests are parsed once per pod snapshot (:class:`~.pod_resources.RequestCache`; stored
dicts are never mutated, a changed pod is a new dict). For PodTopologySpread the snapshot keeps,
once asked, the matching pods per node of each (namespace, selector) and the nodes' domains
(:mod:`.spread_index`), updated as pods and nodes come and go — a binpacking that places pods one
by one sees the domains grow without recounting every pod.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from kubescale.objects.node import Node, Taint
from kubescale.objects.pod import Pod, Toleration
from kubescale.objects.selectors import LabelSelector
from kubescale.objects.views import Meta, spec_of, status_of

from .filters import (
    REASON_NODE_AFFINITY,
    REASON_UNSCHEDULABLE,
    UNSCHEDULABLE_TAINT,
    FilterStatus,
    NodeAffinity,
    NodeState,
    first_untolerated_taint,
    insufficient_resources,
    tolerates,
)
from .inter_pod_affinity import AffinityTerm, TopologyCounts, required_terms
from .node_ports import REASON_NODE_PORTS, HostPort, host_ports
from .pod_resources import NON_MISSING_DEFAULTS, Amounts, RequestCache, add_into, node_allocatable
from .spread_index import MAX_SPREAD_SELECTORS, SpreadIndex
from .topology_spread import (
    REASON_SPREAD_INVALID,
    SpreadConstraint,
    SpreadCounts,
    required_spread_constraints,
)

__all__ = [
    "MAX_SPREAD_SELECTORS",
    "ClusterSnapshot",
    "PodInfo",
    "PreFilterState",
    "least_allocated_score",
    "pod_key",
]

_TERMINAL: Final = ("Succeeded", "Failed")
_UNSCHEDULABLE_TOLERATION_TAINT: Final[Taint] = {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}


def pod_key(pod: Pod) -> tuple[str, str]:
    """``(namespace, name)`` of a pod."""
    meta = Meta(pod).raw
    return str(meta.get("namespace", "")), str(meta["name"])


@dataclass(frozen=True)
class PodInfo:
    """What filtering needs of the pod being placed (kube-scheduler's PreFilter state)."""

    pod: Pod
    requests: Amounts
    non_zero: Amounts
    """Requests with a container's missing cpu/memory counted as 100m / 200 MiB (scoring)."""
    tolerations: tuple[Toleration, ...]
    node_affinity: NodeAffinity
    affinity: tuple[AffinityTerm, ...]
    anti_affinity: tuple[AffinityTerm, ...]
    host_ports: tuple[HostPort, ...] = ()
    """The host ports the pod binds (NodePorts; empty: the filter is skipped)."""
    spread: tuple[SpreadConstraint, ...] | None = ()
    """Its ``DoNotSchedule`` spread constraints; ``None`` when one does not parse."""


@dataclass(frozen=True)
class PreFilterState:
    """The PreFilter state of one pod over the snapshot as it was when computed: the
    cross-pod filters' counts (``None``: that filter cannot reject anything)."""

    affinity: TopologyCounts | None = None
    spread: SpreadCounts | None = None
    spread_invalid: bool = False
    """A spread constraint's selector does not parse: upstream's PreFilter fails, the pod fits
    nowhere."""


class ClusterSnapshot:
    """Nodes and the pods on them, for "would this pod fit" questions (module docstring)."""

    def __init__(
        self,
        *,
        namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
        ignored_resources: frozenset[str] = frozenset(),
        requests: RequestCache | None = None,
        non_zero: RequestCache | None = None,
    ) -> None:
        self.nodes: dict[str, NodeState] = {}
        self.namespace_labels: dict[str, Mapping[str, str]] = dict(namespace_labels or {})
        self.ignored_resources = ignored_resources
        """Extended resources an extender manages (``ignoredResources``): not checked here."""
        self._requests = requests if requests is not None else RequestCache()
        self._non_zero = (
            non_zero if non_zero is not None else RequestCache(non_missing=NON_MISSING_DEFAULTS)
        )
        self._anti_affinity_pods = 0
        """Placed pods with required anti-affinity terms: when 0, a pod without affinity terms
        needs no topology counting at all."""
        self._anti_affinity_placed: dict[str, dict[tuple[str, str], Pod]] = {}
        """Node → the placed pods with required anti-affinity terms (a pod without affinity
        terms of its own is checked against these only)."""
        self._anti_terms: dict[tuple[str, str], tuple[Pod, tuple[AffinityTerm, ...]]]
        self._anti_terms = {}
        """The parsed anti-affinity terms per pod snapshot."""
        self._spread = SpreadIndex()
        """PodTopologySpread's counts, kept once asked for (:mod:`.spread_index`)."""

    @classmethod
    def build(
        cls,
        *,
        nodes: Iterable[Node],
        pods: Iterable[Pod],
        namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
        ignored_resources: frozenset[str] = frozenset(),
        requests: RequestCache | None = None,
        non_zero: RequestCache | None = None,
        allocatable: Callable[[Node], Amounts] = node_allocatable,
    ) -> ClusterSnapshot:
        """The snapshot of ``nodes`` with every bound, unfinished pod of ``pods`` on its node
        (pods bound to a node not in ``nodes`` are left out); ``allocatable`` reads what a node
        offers (a caller may cache it)."""
        snapshot = cls(
            namespace_labels=namespace_labels,
            ignored_resources=ignored_resources,
            requests=requests,
            non_zero=non_zero,
        )
        for node in nodes:
            snapshot.add_node(node, allocatable=allocatable(node))
        for pod in pods:
            node_name = spec_of(pod).get("nodeName")
            if not node_name or node_name not in snapshot.nodes:
                continue
            if status_of(pod).get("phase") in _TERMINAL:
                continue
            snapshot.add_pod(str(node_name), pod)
        return snapshot

    def copy(self) -> ClusterSnapshot:
        """An independent snapshot with the same nodes and pods (request caches shared)."""
        clone = ClusterSnapshot(
            namespace_labels=self.namespace_labels,
            ignored_resources=self.ignored_resources,
            requests=self._requests,
            non_zero=self._non_zero,
        )
        for name, state in self.nodes.items():
            clone.nodes[name] = state.copy()
        clone._anti_affinity_pods = self._anti_affinity_pods
        clone._anti_affinity_placed = {
            name: dict(pods) for name, pods in self._anti_affinity_placed.items()
        }
        clone._anti_terms = self._anti_terms
        return clone

    @property
    def request_cache(self) -> RequestCache:
        """The parsed requests per pod snapshot (share it with the next snapshot)."""
        return self._requests

    @property
    def non_zero_cache(self) -> RequestCache:
        return self._non_zero

    # ------------------------------------------------------------------------ changes

    def add_node(self, node: Node, *, allocatable: Amounts | None = None) -> NodeState:
        """Add (or replace, empty) a node; ``allocatable`` defaults to the node's status."""
        name = str(Meta(node).raw["name"])
        self.remove_node(name)
        offered = allocatable if allocatable is not None else node_allocatable(node)
        state = NodeState.of_node(node, offered)
        self.nodes[name] = state
        self._spread.node_changed()
        return state

    def remove_node(self, name: str) -> NodeState | None:
        """Remove a node with its pods; the removed state, if it was there."""
        state = self.nodes.pop(name, None)
        if state is not None:
            self._anti_affinity_pods -= sum(1 for p in state.pods if _has_anti_affinity(p))
            self._anti_affinity_placed.pop(name, None)
            self._spread.node_changed(state)
        return state

    def add_node_like(
        self, source: str, name: str, *, hostname_label: str = "kubernetes.io/hostname"
    ) -> NodeState:
        """Add an empty node shaped like node ``source`` (allocatable, labels, taints, cordon),
        named ``name``, its hostname label set to ``name``: a template copy for a binpacking
        (``FreshNodeInfoFromTemplateNodeInfo``). The source's pods are not copied."""
        return self.add_node_from(self.nodes[source], name, hostname_label=hostname_label)

    def add_node_from(
        self, template: NodeState, name: str, *, hostname_label: str = "kubernetes.io/hostname"
    ) -> NodeState:
        """:meth:`add_node_like` from a node state that need not be in the snapshot (a
        binpacking's template is not a node of the cluster: it must not count as a topology
        domain)."""
        labels = dict(template.labels)
        if hostname_label in labels:
            labels[hostname_label] = name
        self.remove_node(name)
        state = NodeState(
            name=name,
            labels=labels,
            taints=template.taints,
            unschedulable=template.unschedulable,
            allocatable=template.allocatable,
        )
        self.nodes[name] = state
        self._spread.node_changed()
        return state

    def add_node_state(
        self,
        state: NodeState,
        *,
        anti_affinity: Mapping[tuple[str, str], Pod] | None = None,
    ) -> None:
        """Add (or replace) a node with the pods ``state`` counts, as :meth:`add_node` then
        :meth:`add_pod` for each of them would (the snapshot takes ``state``): a node put
        together elsewhere, e.g. kept from an earlier snapshot. ``anti_affinity``: its pods
        with required anti-affinity terms by key, when the caller knows them
        (:meth:`anti_affinity_pods`), else found here."""
        self.remove_node(state.name)
        self.nodes[state.name] = state
        placed = anti_affinity
        if placed is None:
            placed = {pod_key(p): p for p in state.pods if _has_anti_affinity(p)}
        if placed:
            self._anti_affinity_pods += len(placed)
            self._anti_affinity_placed[state.name] = dict(placed)
        self._spread.node_changed(state, added=True)

    def anti_affinity_pods(self, node_name: str) -> Mapping[tuple[str, str], Pod]:
        """The pods with required anti-affinity terms placed on ``node_name``, by key."""
        return self._anti_affinity_placed.get(node_name, {})

    def restore_node(self, state: NodeState) -> None:
        """Put back a node (with its pods) that :meth:`remove_node` returned: undoing a
        simulated removal.

        The whole node comes back, its placed pods with required anti-affinity included, as
        upstream's ``DeltaSnapshotStore.Revert`` returns to the base data whose ``NodeInfo``
        still lists them (``havePodsWithRequiredAntiAffinity``, which InterPodAffinity's
        PreFilter reads for a pod without affinity terms of its own): :meth:`remove_node`
        dropped them from :meth:`anti_affinity_pods`, so they are found again here."""
        self.add_node_state(state)

    def add_pod(self, node_name: str, pod: Pod) -> None:
        """Count ``pod`` on ``node_name`` (which must be in the snapshot)."""
        state = self.nodes[node_name]
        add_into(state.requested, self._requests.requests(pod))
        add_into(state.non_zero_requested, self._non_zero.requests(pod))
        state.pods.append(pod)
        ports = host_ports(pod)
        if ports:
            state.used_ports.add(ports)
        if _has_anti_affinity(pod):
            self._anti_affinity_pods += 1
            self._anti_affinity_placed.setdefault(node_name, {})[pod_key(pod)] = pod
        self._spread.pod_added(node_name, pod)

    def remove_pod(self, node_name: str, pod: Pod) -> bool:
        """Stop counting the pod (matched by namespace/name) on ``node_name``; whether it was
        there."""
        state = self.nodes.get(node_name)
        if state is None:
            return False
        key = pod_key(pod)
        for index, placed in enumerate(state.pods):
            if pod_key(placed) == key:
                del state.pods[index]
                _subtract(state.requested, self._requests.requests(placed))
                _subtract(state.non_zero_requested, self._non_zero.requests(placed))
                ports = host_ports(placed)
                if ports:
                    state.used_ports.remove(ports)
                self._spread.pod_removed(node_name, placed)
                if _has_anti_affinity(placed):
                    self._anti_affinity_pods -= 1
                    self._anti_affinity_placed.get(node_name, {}).pop(key, None)
                return True
        return False

    def spread_matches(self, namespace: str, selector: LabelSelector) -> Mapping[str, int]:
        """Node → the pods on it in ``namespace``, not terminating, that ``selector`` matches
        (``countPodsMatchSelector``; nodes with none are left out). Counted once per selector,
        then kept current by every change to the snapshot."""
        return self._spread.matches(namespace, selector, self.nodes)

    @property
    def spread_selector_count(self) -> int:
        """How many selectors' match counts the snapshot keeps (at most
        :data:`~.spread_index.MAX_SPREAD_SELECTORS`)."""
        return self._spread.selector_count

    def forget_missing(self, keys: Iterable[tuple[str, str]]) -> None:
        """Drop cached requests of pods not in ``keys`` ((namespace, name) of live pods)."""
        live = list(keys)
        self._requests.forget_missing(live)
        self._non_zero.forget_missing(live)

    # ----------------------------------------------------------------------- questions

    def pod_info(self, pod: Pod) -> PodInfo:
        spec = spec_of(pod)
        return PodInfo(
            pod=pod,
            requests=self._requests.requests(pod),
            non_zero=self._non_zero.requests(pod),
            tolerations=tuple(spec.get("tolerations") or ()),
            node_affinity=NodeAffinity.of_pod(pod),
            affinity=required_terms(pod, "podAffinity"),
            anti_affinity=required_terms(pod, "podAntiAffinity"),
            host_ports=host_ports(pod),
            spread=required_spread_constraints(pod),
        )

    def prefilter(self, info: PodInfo) -> PreFilterState:
        """The PreFilter step for ``info`` over the snapshot as it is now (module docstring)."""
        return PreFilterState(
            affinity=self.topology(info),
            spread=self.spread(info),
            spread_invalid=info.spread is None,
        )

    def spread(self, info: PodInfo) -> SpreadCounts | None:
        """PodTopologySpread's PreFilter for ``info`` (``None``: no ``DoNotSchedule``
        constraint, or one that does not parse)."""
        if not info.spread:
            return None
        meta = Meta(info.pod).raw
        namespace = str(meta.get("namespace", ""))
        keys = tuple(c.topology_key for c in info.spread)
        return SpreadCounts.build(
            constraints=info.spread,
            pod_labels=meta.get("labels") or {},
            node_affinity=info.node_affinity,
            tolerations=info.tolerations,
            nodes=self.nodes,
            keyed=self._spread.keyed(keys, self.nodes),
            affine=lambda: self._spread.affine(keys, info.node_affinity, self.nodes),
            match_counts=lambda selector: self.spread_matches(namespace, selector),
        )

    def topology(self, info: PodInfo) -> TopologyCounts | None:
        """InterPodAffinity's PreFilter for ``info`` over every node; ``None`` when it cannot
        reject anything (no affinity terms on the pod, no anti-affinity on placed pods)."""
        if not info.affinity and not info.anti_affinity and self._anti_affinity_pods == 0:
            return None
        if not info.affinity and not info.anti_affinity:
            return TopologyCounts.of_existing(
                pod=info.pod,
                existing=(
                    (self.nodes[name].labels, self._terms_of(pod))
                    for name in sorted(self._anti_affinity_placed)
                    if name in self.nodes
                    for pod in self._anti_affinity_placed[name].values()
                ),
                namespace_labels=self.namespace_labels,
            )
        return TopologyCounts.build(
            pod=info.pod,
            affinity=info.affinity,
            anti_affinity=info.anti_affinity,
            nodes=(self.nodes[name] for name in sorted(self.nodes)),
            namespace_labels=self.namespace_labels,
        )

    def _terms_of(self, pod: Pod) -> tuple[AffinityTerm, ...]:
        """A placed pod's required anti-affinity terms, parsed once per snapshot of it."""
        key = pod_key(pod)
        cached = self._anti_terms.get(key)
        if cached is None or cached[0] is not pod:
            cached = (pod, required_terms(pod, "podAntiAffinity"))
            self._anti_terms[key] = cached
        return cached[1]

    def filter(
        self, info: PodInfo, node_name: str, state: PreFilterState | None = None
    ) -> FilterStatus | None:
        """The node's verdict for the pod (``None``: it fits): the in-tree filters in the
        default profile's order, the first rejection wins. ``state`` is :meth:`prefilter` of
        the same pod on the current snapshot (computed here when not given)."""
        if state is None:
            state = self.prefilter(info)
        node = self.nodes[node_name]
        if node.unschedulable and not any(
            tolerates(t, _UNSCHEDULABLE_TOLERATION_TAINT) for t in info.tolerations
        ):
            return FilterStatus((REASON_UNSCHEDULABLE,), unresolvable=True)
        taint = first_untolerated_taint(node.taints, info.tolerations)
        if taint is not None:
            key, value = taint.get("key", ""), taint.get("value", "")
            reason = f"node(s) had untolerated taint {{{key}: {value}}}"
            return FilterStatus((reason,), unresolvable=True)
        if not info.node_affinity.matches(node.name, node.labels):
            return FilterStatus((REASON_NODE_AFFINITY,), unresolvable=True)
        if info.host_ports and node.used_ports.conflicts(info.host_ports):
            return FilterStatus((REASON_NODE_PORTS,), unresolvable=False)
        reasons = insufficient_resources(info.requests, node, self.ignored_resources)
        if reasons:
            return FilterStatus(reasons, unresolvable=False)
        spread = state.spread
        if spread is not None or state.spread_invalid:
            status = (
                spread.filter(node)
                if spread is not None
                else FilterStatus((REASON_SPREAD_INVALID,), unresolvable=True)
            )
            if status is not None:
                return status
        affinity = state.affinity
        return affinity.filter(node) if affinity is not None else None

    def feasible(
        self, pod: Pod, *, nodes: Iterable[str] | None = None
    ) -> tuple[list[str], dict[str, FilterStatus]]:
        """The nodes (sorted by name; ``nodes`` limits the candidates) where ``pod`` fits, and
        why each other candidate was rejected."""
        info = self.pod_info(pod)
        state = self.prefilter(info)
        feasible: list[str] = []
        statuses: dict[str, FilterStatus] = {}
        for name in sorted(self.nodes if nodes is None else nodes):
            if name not in self.nodes:
                continue
            status = self.filter(info, name, state)
            if status is None:
                feasible.append(name)
            else:
                statuses[name] = status
        return feasible, statuses

    def fits(self, pod: Pod, node_name: str) -> bool:
        """Whether ``pod`` passes every filter on ``node_name``."""
        info = self.pod_info(pod)
        return self.filter(info, node_name, self.prefilter(info)) is None


def least_allocated_score(non_zero: Mapping[str, int], node: NodeState) -> int:
    """``leastResourceScorer`` over cpu and memory (weight 1 each): free share × 100."""
    total = weights = 0
    for resource in ("cpu", "memory"):
        capacity = node.allocatable.get(resource, 0)
        if capacity == 0:
            continue
        weights += 1
        requested = node.non_zero_requested.get(resource, 0) + non_zero.get(resource, 0)
        if requested <= capacity:
            total += (capacity - requested) * 100 // capacity
    return total // weights if weights else 0


def _has_anti_affinity(pod: Pod) -> bool:
    affinity = spec_of(pod).get("affinity") or {}
    section = affinity.get("podAntiAffinity") or {}
    return bool(section.get("requiredDuringSchedulingIgnoredDuringExecution"))


def _subtract(total: Amounts, amounts: Mapping[str, int]) -> None:
    for name, amount in amounts.items():
        total[name] = total.get(name, 0) - amount
