"""The simulated kube-scheduler: binds pending pods once per step, in upstream's order.

Each :meth:`Scheduler.step` takes the pods addressed to this scheduler (``spec.schedulerName``)
that have no node, are not being deleted, are not finished and carry no scheduling gates, and
schedules them one by one the way ``scheduleOne`` does:

1. order: priority (``spec.priority``; else the PriorityClass named by ``priorityClassName``
   or the ``globalDefault`` one, which the Priority admission plugin would have stamped)
   descending, then creation time (PrioritySort), then namespace/name;
2. filter every node with the in-tree plugins (:mod:`.scheduling_filters`), then with the
   extenders in turn on the survivors (an ignorable extender's error skips it; any other error
   fails the pod with reason ``SchedulerError``);
3. score: NodeResourcesFit ``LeastAllocated`` (cpu and memory, weight 1 each, requests counted
   with the non-zero defaults) plus each extender's ``Score × weight × 10``; a single feasible
   node is taken without scoring. Ties go to the first node by name (upstream picks at random;
   the simulation must be reproducible);
4. bind as the ``binding`` subresource does (``spec.nodeName`` and ``PodScheduled=True``,
   replacing the condition), and count the pod on its node for the pods after it.

A pod that fits nowhere gets ``PodScheduled=False``, reason ``Unschedulable`` and the FitError
message (``0/3 nodes are available: 1 node(s) had untolerated taint {k: v}, 2 Insufficient cpu.
preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No preemption
victims found for incoming pod.``), written only when it differs from what the pod carries.
Preemption is not simulated. Node accounting counts every bound pod that has not finished.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from kubescale.base.logs import component_logger
from kubescale.kube.resources import NAMESPACES, NODES, PODS, PRIORITY_CLASSES
from kubescale.sim.apiserver.server import ApiServer

from .inter_pod_affinity import AffinityTerm, TopologyCounts, required_terms
from .pod_binding import bind_pod, mark_unschedulable
from .pod_resources import NON_MISSING_DEFAULTS, Amounts, RequestCache, add_into, node_allocatable
from .scheduler_extenders import ExtenderClient, ExtenderConfig, ExtenderError
from .scheduling_filters import (
    REASON_NODE_AFFINITY,
    REASON_UNSCHEDULABLE,
    UNSCHEDULABLE_TAINT,
    FilterStatus,
    NodeAffinity,
    NodeState,
    first_untolerated_taint,
    fit_error_message,
    insufficient_resources,
    tolerates,
)

__all__ = ["DEFAULT_SCHEDULER_NAME", "NO_NODES_MESSAGE", "Scheduler"]

log = component_logger("sim.scheduler")

DEFAULT_SCHEDULER_NAME: Final = "default-scheduler"
NO_NODES_MESSAGE: Final = "no nodes available to schedule pods"
_TERMINAL: Final = ("Succeeded", "Failed")
_UNSCHEDULABLE_TOLERATION_TAINT: Final = {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}


@dataclass(frozen=True)
class _PodInfo:
    """What filtering needs of the pod being scheduled (the PreFilter state)."""

    pod: Mapping[str, Any]
    requests: Amounts
    non_zero: Amounts
    tolerations: tuple[Mapping[str, Any], ...]
    node_affinity: NodeAffinity
    affinity: tuple[AffinityTerm, ...]
    anti_affinity: tuple[AffinityTerm, ...]


class Scheduler:
    """An :class:`~kubescale.sim.cluster.actor.Actor` binding pending pods on ``api.store``."""

    def __init__(
        self,
        api: ApiServer,
        *,
        extenders: Sequence[ExtenderConfig] = (),
        scheduler_name: str = DEFAULT_SCHEDULER_NAME,
    ) -> None:
        self._store = api.store
        self._name = scheduler_name
        self._extenders = [ExtenderClient(config) for config in extenders]
        self._ignored_resources = frozenset(
            name for config in extenders for name in config.ignored_resources()
        )
        self._requests = RequestCache()
        self._non_zero = RequestCache(non_missing=NON_MISSING_DEFAULTS)
        self._allocatable: dict[str, tuple[Mapping[str, Any], Amounts]] = {}
        self._bound = 0

    @property
    def bound_total(self) -> int:
        """Pods bound since the scheduler was made."""
        return self._bound

    async def close(self) -> None:
        """Close the extenders' HTTP sessions."""
        for client in self._extenders:
            await client.close()

    # ---------------------------------------------------------------------------- step

    def _pending(self, pods: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        pending = []
        for pod in pods:
            spec = pod.get("spec") or {}
            if spec.get("nodeName") or spec.get("schedulingGates"):
                continue
            if (spec.get("schedulerName") or DEFAULT_SCHEDULER_NAME) != self._name:
                continue
            if pod["metadata"].get("deletionTimestamp"):
                continue
            if (pod.get("status") or {}).get("phase") in _TERMINAL:
                continue
            pending.append(pod)
        return pending

    def _priority(self, pod: Mapping[str, Any], classes: Mapping[str, int], default: int) -> int:
        spec = pod.get("spec") or {}
        if isinstance(spec.get("priority"), int):
            return int(spec["priority"])
        name = spec.get("priorityClassName")
        if name and name in classes:
            return classes[name]
        return default

    def _queue(self, pending: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """PrioritySort: higher priority first, then older, then by namespace/name."""
        classes: dict[str, int] = {}
        default = 0
        for pc in self._store.snapshots(PRIORITY_CLASSES):
            classes[pc["metadata"]["name"]] = int(pc.get("value") or 0)
            if pc.get("globalDefault"):
                default = int(pc.get("value") or 0)
        return sorted(
            pending,
            key=lambda p: (
                -self._priority(p, classes, default),
                p["metadata"].get("creationTimestamp") or "",
                p["metadata"].get("namespace", ""),
                p["metadata"]["name"],
            ),
        )

    def _node_states(
        self, nodes: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]]
    ) -> dict[str, NodeState]:
        states: dict[str, NodeState] = {}
        allocatable: dict[str, tuple[Mapping[str, Any], Amounts]] = {}
        for node in nodes:
            name = node["metadata"]["name"]
            cached = self._allocatable.get(name)
            if cached is None or cached[0] is not node:
                cached = (node, node_allocatable(node))
            allocatable[name] = cached
            states[name] = NodeState.of_node(node, cached[1])
        self._allocatable = allocatable
        for pod in pods:
            node_name = (pod.get("spec") or {}).get("nodeName")
            state = states.get(node_name) if node_name else None
            if state is None or (pod.get("status") or {}).get("phase") in _TERMINAL:
                continue
            self._add_pod(state, pod)
        return states

    def _add_pod(self, state: NodeState, pod: Mapping[str, Any]) -> None:
        add_into(state.requested, self._requests.requests(pod))
        add_into(state.non_zero_requested, self._non_zero.requests(pod))
        state.pods.append(pod)

    async def step(self, now: datetime) -> None:
        pods = self._store.snapshots(PODS)
        pending = self._pending(pods)
        if not pending:
            return
        nodes = self._store.snapshots(NODES)
        states = self._node_states(nodes, pods)
        node_objects = {n["metadata"]["name"]: n for n in nodes}
        namespace_labels = {
            ns["metadata"]["name"]: dict(ns["metadata"].get("labels") or {})
            for ns in self._store.snapshots(NAMESPACES)
        }
        for pod in self._queue(pending):
            await self._schedule_one(pod, states, node_objects, namespace_labels, now)
        self._requests.forget_missing(
            (p["metadata"].get("namespace", ""), p["metadata"]["name"]) for p in pods
        )
        self._non_zero.forget_missing(
            (p["metadata"].get("namespace", ""), p["metadata"]["name"]) for p in pods
        )

    # ------------------------------------------------------------------------ one pod

    def _pod_info(self, pod: Mapping[str, Any]) -> _PodInfo:
        spec = pod.get("spec") or {}
        return _PodInfo(
            pod=pod,
            requests=self._requests.requests(pod),
            non_zero=self._non_zero.requests(pod),
            tolerations=tuple(spec.get("tolerations") or ()),
            node_affinity=NodeAffinity.of_pod(pod),
            affinity=required_terms(pod, "podAffinity"),
            anti_affinity=required_terms(pod, "podAntiAffinity"),
        )

    async def _schedule_one(
        self,
        pod: Mapping[str, Any],
        states: dict[str, NodeState],
        node_objects: Mapping[str, Mapping[str, Any]],
        namespace_labels: Mapping[str, Mapping[str, str]],
        now: datetime,
    ) -> None:
        if not states:
            mark_unschedulable(
                self._store, pod, reason="Unschedulable", message=NO_NODES_MESSAGE, now=now
            )
            return
        info = self._pod_info(pod)
        statuses: dict[str, FilterStatus] = {}
        topology = TopologyCounts.build(
            pod=pod,
            affinity=info.affinity,
            anti_affinity=info.anti_affinity,
            nodes=(states[name] for name in sorted(states)),
            namespace_labels=namespace_labels,
        )
        feasible: list[str] = []
        for name in sorted(states):
            status = self._filter(info, states[name], topology)
            if status is None:
                feasible.append(name)
            else:
                statuses[name] = status
        try:
            feasible = await self._run_extender_filters(pod, feasible, node_objects, statuses)
        except ExtenderError as exc:
            mark_unschedulable(self._store, pod, reason="SchedulerError", message=str(exc), now=now)
            return
        if not feasible:
            message = fit_error_message(
                num_nodes=len(states),
                statuses=statuses,
                preemption_policy=(pod.get("spec") or {}).get("preemptionPolicy"),
            )
            mark_unschedulable(self._store, pod, reason="Unschedulable", message=message, now=now)
            return
        chosen = feasible[0]
        if len(feasible) > 1:
            scores = await self._scores(info, feasible, states, node_objects)
            for name in feasible:  # sorted by name: the first of equal scores wins
                if scores[name] > scores[chosen]:
                    chosen = name
        if bind_pod(self._store, pod, chosen, now):
            self._bound += 1
            self._add_pod(states[chosen], self._store.peek(PODS, *_key(pod)) or pod)

    def _filter(
        self, info: _PodInfo, node: NodeState, topology: TopologyCounts
    ) -> FilterStatus | None:
        """The in-tree filters in the default profile's order; the first rejection wins."""
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
        reasons = insufficient_resources(info.requests, node, self._ignored_resources)
        if reasons:
            return FilterStatus(reasons, unresolvable=False)
        return topology.filter(node)

    async def _run_extender_filters(
        self,
        pod: Mapping[str, Any],
        feasible: list[str],
        node_objects: Mapping[str, Mapping[str, Any]],
        statuses: dict[str, FilterStatus],
    ) -> list[str]:
        """``findNodesThatPassExtenders``: each interested extender on the survivors in turn."""
        for client in self._extenders:
            if not feasible:
                break
            if not client.config.filter_verb or not client.config.is_interested(pod):
                continue
            try:
                result = await client.filter(pod, [node_objects[n] for n in feasible])
            except ExtenderError as exc:
                if client.config.ignorable:
                    log.warning(
                        "skipping ignorable extender",
                        extra={"fields": {"extender": client.config.name, "error": str(exc)}},
                    )
                    continue
                raise
            for name, message in result.failed_unresolvable.items():
                if name in feasible:
                    statuses[name] = FilterStatus((message,), unresolvable=True)
            for name, message in result.failed.items():
                if name in feasible and name not in result.failed_unresolvable:
                    statuses[name] = FilterStatus((message,), unresolvable=False)
            passed = set(result.passed)
            feasible = [name for name in feasible if name in passed]
        return feasible

    async def _scores(
        self,
        info: _PodInfo,
        feasible: list[str],
        states: Mapping[str, NodeState],
        node_objects: Mapping[str, Mapping[str, Any]],
    ) -> dict[str, int]:
        scores = {name: _least_allocated(info.non_zero, states[name]) for name in feasible}
        clients = [
            c
            for c in self._extenders
            if c.config.prioritize_verb and c.config.is_interested(info.pod)
        ]
        if not clients:
            return scores
        objects = [node_objects[n] for n in feasible]
        results = await asyncio.gather(
            *(c.prioritize(info.pod, objects) for c in clients), return_exceptions=True
        )
        for client, result in zip(clients, results, strict=True):
            if isinstance(result, BaseException):
                # prioritize errors are ignored: the extender just adds no score
                log.warning(
                    "extender prioritize failed",
                    extra={"fields": {"extender": client.config.name, "error": str(result)}},
                )
                continue
            for name, score in result.items():
                if name in scores:
                    scores[name] += score
        return scores


def _least_allocated(non_zero: Mapping[str, int], node: NodeState) -> int:
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


def _key(pod: Mapping[str, Any]) -> tuple[str, str]:
    return str(pod["metadata"]["name"]), str(pod["metadata"].get("namespace", ""))
