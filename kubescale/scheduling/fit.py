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
(:mod:`.filters`, then :mod:`.inter_pod_affinity`); the first rejection is the node's verdict.
Requests are parsed once per pod snapshot (:class:`~.pod_resources.RequestCache`; stored
dicts are never mutated, a changed pod is a new dict).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

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
from .pod_resources import NON_MISSING_DEFAULTS, Amounts, RequestCache, add_into, node_allocatable

__all__ = [
    "ClusterSnapshot",
    "PodInfo",
    "least_allocated_score",
    "pod_key",
]

_TERMINAL: Final = ("Succeeded", "Failed")
_UNSCHEDULABLE_TOLERATION_TAINT: Final = {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}


def pod_key(pod: Mapping[str, Any]) -> tuple[str, str]:
    """``(namespace, name)`` of a pod."""
    meta = pod["metadata"]
    return str(meta.get("namespace", "")), str(meta["name"])


@dataclass(frozen=True)
class PodInfo:
    """What filtering needs of the pod being placed (kube-scheduler's PreFilter state)."""

    pod: Mapping[str, Any]
    requests: Amounts
    non_zero: Amounts
    """Requests with a container's missing cpu/memory counted as 100m / 200 MiB (scoring)."""
    tolerations: tuple[Mapping[str, Any], ...]
    node_affinity: NodeAffinity
    affinity: tuple[AffinityTerm, ...]
    anti_affinity: tuple[AffinityTerm, ...]


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
        self._anti_affinity_placed: dict[str, dict[tuple[str, str], Mapping[str, Any]]] = {}
        """Node → the placed pods with required anti-affinity terms (a pod without affinity
        terms of its own is checked against these only)."""
        self._anti_terms: dict[tuple[str, str], tuple[Mapping[str, Any], tuple[AffinityTerm, ...]]]
        self._anti_terms = {}
        """The parsed anti-affinity terms per pod snapshot."""

    @classmethod
    def build(
        cls,
        *,
        nodes: Iterable[Mapping[str, Any]],
        pods: Iterable[Mapping[str, Any]],
        namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
        ignored_resources: frozenset[str] = frozenset(),
        requests: RequestCache | None = None,
        non_zero: RequestCache | None = None,
        allocatable: Callable[[Mapping[str, Any]], Amounts] = node_allocatable,
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
            node_name = (pod.get("spec") or {}).get("nodeName")
            if not node_name or node_name not in snapshot.nodes:
                continue
            if (pod.get("status") or {}).get("phase") in _TERMINAL:
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
            clone.nodes[name] = NodeState(
                name=state.name,
                labels=state.labels,
                taints=state.taints,
                unschedulable=state.unschedulable,
                allocatable=state.allocatable,
                requested=dict(state.requested),
                non_zero_requested=dict(state.non_zero_requested),
                pods=list(state.pods),
            )
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

    def add_node(self, node: Mapping[str, Any], *, allocatable: Amounts | None = None) -> NodeState:
        """Add (or replace, empty) a node; ``allocatable`` defaults to the node's status."""
        name = str(node["metadata"]["name"])
        self.remove_node(name)
        offered = allocatable if allocatable is not None else node_allocatable(node)
        state = NodeState.of_node(node, offered)
        self.nodes[name] = state
        return state

    def remove_node(self, name: str) -> NodeState | None:
        """Remove a node with its pods; the removed state, if it was there."""
        state = self.nodes.pop(name, None)
        if state is not None:
            self._anti_affinity_pods -= sum(1 for p in state.pods if _has_anti_affinity(p))
            self._anti_affinity_placed.pop(name, None)
        return state

    def add_node_like(
        self, source: str, name: str, *, hostname_label: str = "kubernetes.io/hostname"
    ) -> NodeState:
        """Add an empty node shaped like node ``source`` (allocatable, labels, taints, cordon),
        named ``name``, its hostname label set to ``name``: a template copy for a binpacking
        (``FreshNodeInfoFromTemplateNodeInfo``). The source's pods are not copied."""
        template = self.nodes[source]
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
        return state

    def restore_node(self, state: NodeState) -> None:
        """Put back a node (with its pods) that :meth:`remove_node` returned: undoing a
        simulated removal."""
        self.remove_node(state.name)
        self.nodes[state.name] = state
        self._anti_affinity_pods += sum(1 for p in state.pods if _has_anti_affinity(p))

    def add_pod(self, node_name: str, pod: Mapping[str, Any]) -> None:
        """Count ``pod`` on ``node_name`` (which must be in the snapshot)."""
        state = self.nodes[node_name]
        add_into(state.requested, self._requests.requests(pod))
        add_into(state.non_zero_requested, self._non_zero.requests(pod))
        state.pods.append(pod)
        if _has_anti_affinity(pod):
            self._anti_affinity_pods += 1
            self._anti_affinity_placed.setdefault(node_name, {})[pod_key(pod)] = pod

    def remove_pod(self, node_name: str, pod: Mapping[str, Any]) -> bool:
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
                if _has_anti_affinity(placed):
                    self._anti_affinity_pods -= 1
                    self._anti_affinity_placed.get(node_name, {}).pop(key, None)
                return True
        return False

    def forget_missing(self, keys: Iterable[tuple[str, str]]) -> None:
        """Drop cached requests of pods not in ``keys`` ((namespace, name) of live pods)."""
        live = list(keys)
        self._requests.forget_missing(live)
        self._non_zero.forget_missing(live)

    # ----------------------------------------------------------------------- questions

    def pod_info(self, pod: Mapping[str, Any]) -> PodInfo:
        spec = pod.get("spec") or {}
        return PodInfo(
            pod=pod,
            requests=self._requests.requests(pod),
            non_zero=self._non_zero.requests(pod),
            tolerations=tuple(spec.get("tolerations") or ()),
            node_affinity=NodeAffinity.of_pod(pod),
            affinity=required_terms(pod, "podAffinity"),
            anti_affinity=required_terms(pod, "podAntiAffinity"),
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

    def _terms_of(self, pod: Mapping[str, Any]) -> tuple[AffinityTerm, ...]:
        """A placed pod's required anti-affinity terms, parsed once per snapshot of it."""
        key = pod_key(pod)
        cached = self._anti_terms.get(key)
        if cached is None or cached[0] is not pod:
            cached = (pod, required_terms(pod, "podAntiAffinity"))
            self._anti_terms[key] = cached
        return cached[1]

    def filter(
        self, info: PodInfo, node_name: str, topology: TopologyCounts | None = None
    ) -> FilterStatus | None:
        """The node's verdict for the pod (``None``: it fits): the in-tree filters in the
        default profile's order, the first rejection wins. ``topology`` is
        :meth:`topology` of the same pod on the current snapshot."""
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
        reasons = insufficient_resources(info.requests, node, self.ignored_resources)
        if reasons:
            return FilterStatus(reasons, unresolvable=False)
        return topology.filter(node) if topology is not None else None

    def feasible(
        self, pod: Mapping[str, Any], *, nodes: Iterable[str] | None = None
    ) -> tuple[list[str], dict[str, FilterStatus]]:
        """The nodes (sorted by name; ``nodes`` limits the candidates) where ``pod`` fits, and
        why each other candidate was rejected."""
        info = self.pod_info(pod)
        topology = self.topology(info)
        feasible: list[str] = []
        statuses: dict[str, FilterStatus] = {}
        for name in sorted(self.nodes if nodes is None else nodes):
            if name not in self.nodes:
                continue
            status = self.filter(info, name, topology)
            if status is None:
                feasible.append(name)
            else:
                statuses[name] = status
        return feasible, statuses

    def fits(self, pod: Mapping[str, Any], node_name: str) -> bool:
        """Whether ``pod`` passes every filter on ``node_name``."""
        info = self.pod_info(pod)
        return self.filter(info, node_name, self.topology(info)) is None


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


def _has_anti_affinity(pod: Mapping[str, Any]) -> bool:
    affinity = (pod.get("spec") or {}).get("affinity") or {}
    section = affinity.get("podAntiAffinity") or {}
    return bool(section.get("requiredDuringSchedulingIgnoredDuringExecution"))


def _subtract(total: Amounts, amounts: Mapping[str, int]) -> None:
    for name, amount in amounts.items():
        total[name] = total.get(name, 0) - amount
