"""The binpacking estimator: how many new nodes of a group the pending pods need.

``pkg/estimator/binpacking_estimator.go`` (reference §2.3), First-Fit Decreasing over the
cluster snapshot:

* equivalence groups are ordered by ``DecreasingPodOrderer``: the exemplar's regular
  containers' cpu request / template allocatable cpu + memory request / allocatable memory,
  highest first (a stable sort: equal scores keep their order);
* inside a fork of the snapshot, for each group: its pods are tried on the nodes **added during
  this estimation** (``e-0``, ``e-1``, ... in order), stopping at the first pod that fits none;
  each remaining pod is tried on the last added node; when a pod with a ``kubernetes.io/hostname``
  spread constraint is refused there by PodTopologySpread, it is tried on every other node of the
  snapshot (``SchedulePodOnAnyNodeMatching``, cluster nodes included — a node that takes it
  counts among the nodes with pods, as upstream's ``trackScheduledPod`` counts it); when it fits
  nowhere a new template node is added — unless the last added node is still empty (the pod
  cannot fit a fresh node: give up on the group) or the limiter refuses; a pod that does not fit
  a fresh node ends the group;
* the result is the number of nodes that received at least one pod, and the pods placed.

The template is not a node of the snapshot: only its copies are (a template in the snapshot
would be one more topology domain, empty for ever, and hold every spread constraint's minimum
at 0). Host ports and spread constraints are checked by the shared filters as pods are placed
one by one, so a pod with a host port takes a node of its own and a ``maxSkew`` bounds the pods
per domain, as upstream's binpacking finds.

The limiter (``threshold_based_limiter.go``) takes the minimum of its thresholds — 0 means no
limit, a negative value forbids adding nodes: ``--max-nodes-per-scaleup`` (1000) and
``--max-nodegroup-binpacking-duration`` (10s); the node group's (and its similar groups')
remaining capacity ``Σ(max − target)`` (≤ 0 → −1); ``--max-nodes-total − current nodes`` when
that flag is set (≤ 0 → −1).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from kubescale.controllers.autoscaler.cloudprovider.cloud_provider import NodeGroup
from kubescale.controllers.autoscaler.simulator.scheduling_simulation import (
    SchedulingSimulator,
    obviously_full,
)
from kubescale.controllers.autoscaler.simulator.template_nodes import TemplateNode
from kubescale.objects.pod import Pod
from kubescale.objects.views import spec_of
from kubescale.scheduling.filters import FilterStatus, NodeState, insufficient_resources
from kubescale.scheduling.fit import PodInfo
from kubescale.scheduling.pod_resources import container_amounts
from kubescale.scheduling.snapshot_journal import SnapshotJournal
from kubescale.scheduling.topology_spread import REASON_SPREAD

__all__ = [
    "BinpackingLimiter",
    "Estimate",
    "estimate_nodes",
    "limit_min",
    "pod_group_score",
]

HOSTNAME_LABEL: Final = "kubernetes.io/hostname"


def limit_min(base: float, target: float) -> float:
    """``getMinLimit``: negative wins, then the smaller positive; 0 means no limit."""
    if base < 0 or target < 0:
        return -1
    if (base == 0 or base > target) and target > 0:
        return target
    return base


@dataclass
class BinpackingLimiter:
    """``thresholdBasedEstimationLimiter`` for one estimation (module docstring)."""

    max_nodes: int = 0
    max_duration: float = 0.0
    elapsed: Callable[[], float] | None = None
    """Seconds since the estimation started (an injected clock); ``None``: no duration limit."""
    nodes: int = field(default=0, init=False)

    @classmethod
    def for_group(
        cls,
        *,
        group: NodeGroup,
        similar: Sequence[NodeGroup] = (),
        max_nodes_per_scaleup: int,
        max_duration: float,
        max_nodes_total: int,
        current_nodes: int,
        elapsed: Callable[[], float] | None = None,
    ) -> BinpackingLimiter:
        limit: float = 0
        limit = limit_min(limit, max_nodes_per_scaleup)
        capacity = sum(max(0, g.max_size - g.target_size) for g in (group, *similar))
        limit = limit_min(limit, capacity if capacity > 0 else -1)
        if max_nodes_total:
            room = max_nodes_total - current_nodes
            limit = limit_min(limit, room if room > 0 else -1)
        duration = limit_min(0.0, max_duration)
        return cls(max_nodes=int(limit), max_duration=duration, elapsed=elapsed)

    def permission_to_add_node(self) -> bool:
        if self.max_nodes < 0 or (self.max_nodes > 0 and self.nodes >= self.max_nodes):
            return False
        if self.max_duration < 0:
            return False
        if (
            self.max_duration > 0
            and self.elapsed is not None
            and self.elapsed() > self.max_duration
        ):
            return False
        self.nodes += 1
        return True


@dataclass(frozen=True)
class Estimate:
    node_count: int
    pods: tuple[Pod, ...]


def pod_group_score(exemplar: Pod, template: TemplateNode) -> float:
    """``DecreasingPodOrderer.calculatePodScore``."""
    cpu = memory = 0
    for container in spec_of(exemplar).get("containers") or ():
        requests = container_amounts(container)
        cpu += requests.get("cpu", 0)
        memory += requests.get("memory", 0)
    score = 0.0
    alloc_cpu = template.allocatable.get("cpu", 0)
    alloc_memory = template.allocatable.get("memory", 0)
    if alloc_cpu > 0:
        score += cpu / alloc_cpu
    if alloc_memory > 0:
        score += memory / alloc_memory
    return score


def estimate_nodes(
    *,
    journal: SnapshotJournal,
    template: TemplateNode,
    groups: Sequence[Sequence[Pod]],
    limiter: BinpackingLimiter,
) -> Estimate:
    """``BinpackingNodeEstimator.Estimate`` (module docstring); the snapshot is unchanged
    afterwards."""
    ordered = sorted((g for g in groups if g), key=lambda g: -pod_group_score(g[0], template))
    simulator = SchedulingSimulator(journal)
    journal.fork()
    try:
        snapshot = journal.snapshot
        source = NodeState.of_node(template.node, template.allocatable)
        new_nodes: list[str] = []
        with_pods: set[str] = set()
        scheduled: list[Pod] = []
        last: str | None = None

        def place(pod: Pod, node: str) -> None:
            journal.add_pod(node, pod)
            with_pods.add(node)
            scheduled.append(pod)

        def add_node() -> str:
            name = f"e-{len(new_nodes)}"
            journal.add_node_from(source, name)
            for startup in template.pods:
                journal.add_pod(name, startup)
            new_nodes.append(name)
            return name

        for group in ordered:
            remaining_from = len(group)
            for index, pod in enumerate(group):
                info = snapshot.pod_info(pod)
                found = simulator.find_node(info, new_nodes)
                if found is None:
                    remaining_from = index
                    break
                place(pod, found[1])
            for pod in group[remaining_from:]:
                info = snapshot.pod_info(pod)
                if last is not None:
                    status = _check(simulator, info, last)
                    if status is None:
                        place(pod, last)
                        continue
                    if REASON_SPREAD in status.reasons and _spreads_by_hostname(pod):
                        others = [n for n in sorted(snapshot.nodes) if n != last]
                        found = simulator.find_node(info, others)
                        if found is not None:
                            place(pod, found[1])
                            continue
                if last is not None and last not in with_pods:
                    break  # it did not fit an empty node: it will not fit a new one either
                if not limiter.permission_to_add_node():
                    break
                last = add_node()
                if not _fits(simulator, info, last):
                    break
                place(pod, last)
        return Estimate(node_count=len(with_pods), pods=tuple(scheduled))
    finally:
        journal.revert()


def _fits(simulator: SchedulingSimulator, info: PodInfo, node: str) -> bool:
    state = simulator.snapshot.nodes[node]
    if obviously_full(info.requests, state):
        return False
    return simulator.fits(info, node)


def _check(simulator: SchedulingSimulator, info: PodInfo, node: str) -> FilterStatus | None:
    """The node's verdict for the pod (``None``: it fits); a full node is refused by
    NodeResourcesFit before any cross-pod state is computed."""
    state = simulator.snapshot.nodes[node]
    if obviously_full(info.requests, state):
        return FilterStatus(insufficient_resources(info.requests, state), unresolvable=False)
    return simulator.check(info, node)


def _spreads_by_hostname(pod: Pod) -> bool:
    """``isPodUsingHostNameTopologyKey``: some spread constraint (of either kind) is keyed on
    ``kubernetes.io/hostname``."""
    constraints = spec_of(pod).get("topologySpreadConstraints") or ()
    return any(c.get("topologyKey") == HOSTNAME_LABEL for c in constraints)
