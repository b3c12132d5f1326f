"""The scheduler extender's picture of the cluster, kept current object by object.

A request must be answered in milliseconds for thousands of nodes without an API call, so the
extender keeps, from the informers' events (:func:`kubescale.extender.informer_feed.feed`) or
from objects handed over directly (tests, benchmarks):

* nodes; namespaces' labels; PodDisruptionBudgets, PVCs and PriorityClasses (the
  DefaultEvictor's inputs); the bound, unfinished pods by namespace and by label (a selector
  with an exact requirement reads only the pods with that label), their distinct topology
  spread constraints per namespace, and pod counts per owner uid;
* a usage table: per node, the requests of its unfinished pods for every resource the policy's
  utilization plugins track (cpu, memory, pods, their threshold resources), updated in place as
  pods come and go — the same sums the descheduler's cycle computes from its pod list; and the
  last node metrics (metrics.k8s.io, smoothed) or Prometheus values the descheduler read, handed
  over by it (:meth:`ClusterCache.set_node_metrics`, :meth:`ClusterCache.set_metric_values`).

:class:`ClusterCache` is the :class:`~kubescale.coordination.placement_rules.
PlacementState` the extender's decisions read. Derived views (the descheduler's node set, the
usage arrays per plugin) are rebuilt only after a change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from kubescale.objects.namespace import Namespace
from kubescale.objects.node import Node, Taint
from kubescale.objects.pdb import PodDisruptionBudget
from kubescale.objects.persistent_volume_claim import PersistentVolumeClaim
from kubescale.objects.pod import Pod
from kubescale.objects.priority_class import PriorityClass
from kubescale.objects.selectors import LabelSelector
from kubescale.objects.views import Meta, spec_of
from kubescale.scheduling.cycle_view import cycle_nodes, node_name
from kubescale.scheduling.fit import pod_key
from kubescale.scheduling.pods import is_terminal, owner_refs, requests_of
from kubescale.scheduling.policy.policy_loading import DeschedulerPolicy
from kubescale.scheduling.policy.utilization_args import (
    KUBERNETES_METRICS,
    METRIC_RESOURCE,
    PROMETHEUS_METRICS,
    HighNodeUtilizationArgs,
    LowNodeUtilizationArgs,
)
from kubescale.scheduling.spread_constraints import (
    SpreadConstraint,
    spread_constraints,
)
from kubescale.scheduling.utilization_arrays import UtilizationArrays
from kubescale.scheduling.utilization_math import (
    BASIC_RESOURCES,
    node_capacity,
)

__all__ = ["ClusterCache", "tracked_resources"]

_INITIAL_ROWS = 64
_AMOUNT_CAP = 2**52
"""Per pod and resource (4.5e12 cores in millicores, 4 PiB): 2048 capped pods on one node
still sum within int64."""
_ALL_SPREAD_KINDS = ("DoNotSchedule", "ScheduleAnyway")


def tracked_resources(policy: DeschedulerPolicy) -> list[str]:
    """cpu, memory, pods, every utilization plugin's threshold resources, MetricResource."""
    names = list(BASIC_RESOURCES)
    for profile in policy.profiles:
        for plugin in profile.balance:
            args = profile.args.get(plugin)
            if isinstance(args, LowNodeUtilizationArgs | HighNodeUtilizationArgs):
                names.extend(r for r in args.thresholds if r not in names)
    if METRIC_RESOURCE not in names:
        names.append(METRIC_RESOURCE)
    return names


class ClusterCache:
    """Objects and usage for the extender (module docstring)."""

    def __init__(self, *, policy: DeschedulerPolicy, now: Callable[[], datetime]) -> None:
        self.policy = policy
        self._now = now
        self.resources = tracked_resources(policy)
        self._column = {name: j for j, name in enumerate(self.resources)}
        self.nodes: dict[str, Node] = {}
        self._pods: dict[tuple[str, str], Pod] = {}
        self._bound: dict[str, dict[str, Pod]] = {}
        self._by_label: dict[tuple[str, str, str], dict[str, Pod]] = {}
        self._spread: dict[str, dict[str, tuple[SpreadConstraint, dict[str, Pod]]]] = {}
        self._owner_counts: dict[str, int] = {}
        self._namespace_labels: dict[str, Mapping[str, str]] = {}
        self._pdbs: dict[tuple[str, str], PodDisruptionBudget] = {}
        self._pvcs: dict[tuple[str, str], PersistentVolumeClaim] = {}
        self._priority_classes: dict[str, int] = {}
        self._rows: dict[str, int] = {}
        self._used = np.zeros((_INITIAL_ROWS, len(self.resources)), dtype=np.int64)
        self._capacity = np.zeros((_INITIAL_ROWS, len(self.resources)), dtype=np.int64)
        self._unschedulable = np.zeros(_INITIAL_ROWS, dtype=np.bool_)
        self._taints: dict[str, list[Taint]] = {}
        self._counted: dict[tuple[str, str], tuple[str, np.ndarray[Any, Any]]] = {}
        self._node_metrics: Mapping[str, Mapping[str, int]] | None = None
        self._metric_values: dict[str, Mapping[str, float]] = {}
        self.node_version = 0
        self.usage_version = 0
        self._views: dict[str, Any] = {}

    # ------------------------------------------------------------------------- updates

    def upsert_node(self, node: Node) -> None:
        name = node_name(node)
        self.nodes[name] = node
        row = self._row(name)
        offered = node_capacity(node)
        self._capacity[row] = [offered.get(r, 0) for r in self.resources]
        spec = spec_of(node)
        self._unschedulable[row] = bool(spec.get("unschedulable"))
        self._taints[name] = list(spec.get("taints") or ())
        self.node_version += 1

    def delete_node(self, node: Node | str) -> None:
        name = node if isinstance(node, str) else node_name(node)
        if self.nodes.pop(name, None) is not None:
            self.node_version += 1

    def _row(self, name: str) -> int:
        row = self._rows.get(name)
        if row is None:
            row = len(self._rows)
            if row >= self._used.shape[0]:
                size = self._used.shape[0]
                self._used = np.concatenate([self._used, np.zeros_like(self._used)])
                self._capacity = np.concatenate([self._capacity, np.zeros_like(self._capacity)])
                self._unschedulable = np.concatenate(
                    [self._unschedulable, np.zeros(size, dtype=np.bool_)]
                )
            self._rows[name] = row
        return row

    def _vector(self, pod: Pod) -> np.ndarray[Any, Any]:
        """The pod's requests as a table row; an amount beyond the table's int64 (a quantity
        such as ``99999999999999999999``, which the API server stores) is held at
        :data:`_AMOUNT_CAP` instead of raising in the informer's handler and leaving the pod
        half-indexed. The cap leaves room to add such pods up without wrapping around."""
        requests = requests_of(pod)
        values = []
        for name in self.resources:
            if name == "pods":
                values.append(1)
            elif name == METRIC_RESOURCE:
                values.append(0)
            else:
                values.append(max(-_AMOUNT_CAP, min(requests.get(name, 0), _AMOUNT_CAP)))
        return np.array(values, dtype=np.int64)

    def upsert_pod(self, pod: Pod) -> None:
        key = pod_key(pod)
        old = self._pods.get(key)
        if old is not None:
            self._forget_pod(key, old)
        self._pods[key] = pod
        for ref in owner_refs(pod):
            uid = str(ref.get("uid") or "")
            if uid:
                self._owner_counts[uid] = self._owner_counts.get(uid, 0) + 1
        node = str(spec_of(pod).get("nodeName") or "")
        if node and not is_terminal(pod):
            self._bound.setdefault(key[0], {})[key[1]] = pod
            for label, value in (Meta(pod).raw.get("labels") or {}).items():
                self._by_label.setdefault((key[0], label, value), {})[key[1]] = pod
            for constraint in spread_constraints(pod, _ALL_SPREAD_KINDS):
                entry = self._spread.setdefault(key[0], {}).setdefault(
                    constraint.identity, (constraint, {})
                )
                entry[1][key[1]] = pod
            vector = self._vector(pod)
            # The row first: _row may grow (replace) the table, and ``self._used[...]`` read
            # before it would add into the old, smaller array (IndexError at the 65th node).
            row = self._row(node)
            self._used[row] += vector
            self._counted[key] = (node, vector)
            self.usage_version += 1

    def delete_pod(self, pod: Pod) -> None:
        key = pod_key(pod)
        old = self._pods.pop(key, None)
        if old is not None:
            self._forget_pod(key, old)

    def _forget_pod(self, key: tuple[str, str], pod: Pod) -> None:
        for ref in owner_refs(pod):
            uid = str(ref.get("uid") or "")
            if uid and uid in self._owner_counts:
                self._owner_counts[uid] -= 1
                if self._owner_counts[uid] <= 0:
                    del self._owner_counts[uid]
        if self._bound.get(key[0], {}).pop(key[1], None) is not None:
            for label, value in (Meta(pod).raw.get("labels") or {}).items():
                index = self._by_label.get((key[0], label, value))
                if index is not None:
                    index.pop(key[1], None)
                    if not index:
                        del self._by_label[(key[0], label, value)]
            constraints = self._spread.get(key[0], {})
            for constraint in spread_constraints(pod, _ALL_SPREAD_KINDS):
                entry = constraints.get(constraint.identity)
                if entry is not None:
                    entry[1].pop(key[1], None)
                    if not entry[1]:
                        del constraints[constraint.identity]
        counted = self._counted.pop(key, None)
        if counted is not None:
            node, vector = counted
            self._used[self._rows[node]] -= vector
            self.usage_version += 1

    def upsert_namespace(self, namespace: Namespace) -> None:
        meta = Meta(namespace).raw
        self._namespace_labels[str(meta.get("name", ""))] = dict(meta.get("labels") or {})

    def delete_namespace(self, namespace: Namespace) -> None:
        self._namespace_labels.pop(str(Meta(namespace).raw.get("name", "")), None)

    @staticmethod
    def _key(obj: PodDisruptionBudget | PersistentVolumeClaim) -> tuple[str, str]:
        meta = Meta(obj).raw
        return (str(meta.get("namespace", "")), str(meta.get("name", "")))

    def upsert_pdb(self, pdb: PodDisruptionBudget) -> None:
        self._pdbs[self._key(pdb)] = pdb
        self._views.pop("pdbs", None)

    def delete_pdb(self, pdb: PodDisruptionBudget) -> None:
        self._pdbs.pop(self._key(pdb), None)
        self._views.pop("pdbs", None)

    def upsert_pvc(self, pvc: PersistentVolumeClaim) -> None:
        self._pvcs[self._key(pvc)] = pvc

    def delete_pvc(self, pvc: PersistentVolumeClaim) -> None:
        self._pvcs.pop(self._key(pvc), None)

    def upsert_priority_class(self, priority_class: PriorityClass) -> None:
        name = str(Meta(priority_class).raw.get("name", ""))
        self._priority_classes[name] = int(priority_class.get("value") or 0)

    def delete_priority_class(self, priority_class: PriorityClass) -> None:
        self._priority_classes.pop(str(Meta(priority_class).raw.get("name", "")), None)

    def set_node_metrics(self, usage: Mapping[str, Mapping[str, int]] | None) -> None:
        """The descheduler's latest smoothed NodeMetrics (cpu millicores, memory bytes)."""
        self._node_metrics = usage
        self.usage_version += 1

    def set_metric_values(self, query: str, values: Mapping[str, float] | None) -> None:
        """The descheduler's latest result of a Prometheus query (node → value in [0, 1])."""
        if values is None:
            self._metric_values.pop(query, None)
        else:
            self._metric_values[query] = values
        self.usage_version += 1

    def load(
        self,
        *,
        nodes: Iterable[Node] = (),
        pods: Iterable[Pod] = (),
        namespaces: Iterable[Namespace] = (),
    ) -> ClusterCache:
        """Add objects in bulk (tests and benchmarks)."""
        for node in nodes:
            self.upsert_node(node)
        for namespace in namespaces:
            self.upsert_namespace(namespace)
        for pod in pods:
            self.upsert_pod(pod)
        return self

    # -------------------------------------------------------------- PlacementState

    @property
    def now(self) -> datetime:
        return self._now()

    @property
    def all_nodes(self) -> Sequence[Node]:
        return list(self.nodes.values())

    @property
    def namespace_labels(self) -> Mapping[str, Mapping[str, str]]:
        return self._namespace_labels

    @property
    def pdbs(self) -> Sequence[PodDisruptionBudget]:
        cached = self._views.get("pdbs")
        if cached is None:
            cached = self._views["pdbs"] = list(self._pdbs.values())
        return list(cached)

    @property
    def pvcs(self) -> Mapping[tuple[str, str], PersistentVolumeClaim]:
        return self._pvcs

    @property
    def priority_classes(self) -> Mapping[str, int]:
        return self._priority_classes

    def owner_count(self, uid: str) -> int:
        return self._owner_counts.get(uid, 0)

    def fits_any(self, pod: Pod, candidates: Iterable[Node], *, other_nodes_only: bool) -> bool:
        """Not asked by the extender (PreEvictionFilter is not evaluated): ``True``."""
        return True

    def pod(self, namespace: str, name: str) -> Pod | None:
        return self._pods.get((namespace, name))

    def pods_selected(self, namespace: str, selector: LabelSelector) -> Sequence[Pod]:
        if selector.nothing:
            return []
        candidates: Iterable[Pod] | None = None
        for requirement in selector.requirements:
            value = selector.exact_value(requirement.key)
            if value is not None:
                candidates = self._by_label.get((namespace, requirement.key, value), {}).values()
                break
        if candidates is None:
            candidates = self._bound.get(namespace, {}).values()
        return [p for p in candidates if selector.matches(Meta(p).raw.get("labels"))]

    def spread_constraints_in(
        self, namespace: str
    ) -> Sequence[tuple[SpreadConstraint, Sequence[Pod]]]:
        return [
            (constraint, list(holders.values()))
            for constraint, holders in self._spread.get(namespace, {}).values()
        ]

    def descheduler_nodes(self) -> Mapping[str, Node]:
        cached = self._views.get("nodes")
        if cached is None or cached[0] != self.node_version:
            chosen = cycle_nodes(self.nodes.values(), self.policy.node_selector_parsed)
            cached = self._views["nodes"] = (self.node_version, {node_name(n): n for n in chosen})
        nodes: Mapping[str, Node] = cached[1]
        return nodes

    def node_labels_of(self) -> Mapping[str, Mapping[str, str]]:
        cached = self._views.get("labels")
        if cached is None or cached[0] != self.node_version:
            labels = {
                name: Meta(node).raw.get("labels") or {}
                for name, node in self.descheduler_nodes().items()
            }
            cached = self._views["labels"] = (self.node_version, labels)
        found: Mapping[str, Mapping[str, str]] = cached[1]
        return found

    def node_taints_of(self) -> Mapping[str, Sequence[Taint]]:
        cached = self._views.get("taints")
        if cached is None or cached[0] != self.node_version:
            taints = {
                name: self._taints[name]
                for name in self.descheduler_nodes()
                if self._taints.get(name)
            }
            cached = self._views["taints"] = (self.node_version, taints)
        found: Mapping[str, Sequence[Taint]] = cached[1]
        return found

    def node_groups(self, keys: tuple[str, ...]) -> Mapping[tuple[str | None, ...], Sequence[str]]:
        view = f"groups:{keys!r}"
        cached = self._views.get(view)
        if cached is None or cached[0] != self.node_version:
            groups: dict[tuple[str | None, ...], list[str]] = {}
            for name, labels in self.node_labels_of().items():
                groups.setdefault(tuple(labels.get(k) for k in keys), []).append(name)
            cached = self._views[view] = (self.node_version, groups)
        found: Mapping[tuple[str | None, ...], Sequence[str]] = cached[1]
        return found

    def utilization(
        self, args: LowNodeUtilizationArgs | HighNodeUtilizationArgs
    ) -> UtilizationArrays | None:
        source, query = "", ""
        if isinstance(args, LowNodeUtilizationArgs) and args.metrics is not None:
            source, query = args.metrics.source, args.metrics.prometheus_query
        version = (self.node_version, self.usage_version)
        key = f"usage:{source}:{query}"
        cached = self._views.get(key)
        if cached is not None and cached[0] == version:
            arrays: UtilizationArrays | None = cached[1]
            return arrays
        arrays = self._build_arrays(source, query)
        self._views[key] = (version, arrays)
        return arrays

    def _build_arrays(self, source: str, query: str) -> UtilizationArrays | None:
        nodes = list(self.descheduler_nodes().values())
        names = [node_name(n) for n in nodes]
        rows = np.array([self._rows[n] for n in names], dtype=np.int64)
        used = (
            self._used[rows].copy()
            if len(rows)
            else np.zeros((0, len(self.resources)), dtype=np.int64)
        )
        if source == KUBERNETES_METRICS:
            if self._node_metrics is None or any(n not in self._node_metrics for n in names):
                return None
            for i, name in enumerate(names):
                used[i, self._column["cpu"]] = int(self._node_metrics[name].get("cpu", 0))
                used[i, self._column["memory"]] = int(self._node_metrics[name].get("memory", 0))
        elif source == PROMETHEUS_METRICS:
            values = self._metric_values.get(query)
            if values is None or any(not 0 <= values.get(n, -1.0) <= 1 for n in names):
                return None
            for i, name in enumerate(names):
                used[i, self._column[METRIC_RESOURCE]] = int(values[name] * 100)
        return UtilizationArrays(
            names=names,
            resources=list(self.resources),
            used=used,
            capacity=self._capacity[rows],
            unschedulable=self._unschedulable[rows],
            taints=[self._taints.get(n, []) for n in names],
        )
