"""The simulated kube-scheduler: binds pending pods once per step, in upstream's order.

Each :meth:`Scheduler.step` takes the pods addressed to this scheduler (``spec.schedulerName``)
that have no node, are not being deleted, are not finished and carry no scheduling gates, and
schedules them one by one the way ``scheduleOne`` does:

1. order: priority (``spec.priority``; else the PriorityClass named by ``priorityClassName``
   or the ``globalDefault`` one, which the Priority admission plugin would have stamped)
   descending, then creation time (PrioritySort), then namespace/name;
2. filter every node with the in-tree plugins (:mod:`kubescale.scheduling.fit`), then with the
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

``before_extenders`` (optional) is awaited before each call to the extenders: a simulated run
whose extender answers from an informer cache (kubescale's) settles that cache there, so the
extender sees the store as it is — the nodes added and the pods bound earlier in the step —
and a run does not depend on how fast watch events travel.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final, cast

from kubescale.base.logs import component_logger
from kubescale.kube.resources import NAMESPACES, NODES, PODS, PRIORITY_CLASSES
from kubescale.objects.node import Node
from kubescale.objects.pod import Pod
from kubescale.scheduling.filters import FilterStatus, fit_error_message
from kubescale.scheduling.fit import ClusterSnapshot, PodInfo, least_allocated_score, pod_key
from kubescale.scheduling.pod_resources import Amounts, node_allocatable
from kubescale.sim.apiserver.server import ApiServer

from .pod_binding import bind_pod, mark_unschedulable
from .scheduler_extenders import ExtenderClient, ExtenderConfig, ExtenderError

__all__ = ["DEFAULT_SCHEDULER_NAME", "NO_NODES_MESSAGE", "Scheduler"]

log = component_logger("sim.scheduler")

DEFAULT_SCHEDULER_NAME: Final = "default-scheduler"
NO_NODES_MESSAGE: Final = "no nodes available to schedule pods"
_TERMINAL: Final = ("Succeeded", "Failed")


class Scheduler:
    """An :class:`~kubescale.sim.cluster.actor.Actor` binding pending pods on ``api.store``."""

    def __init__(
        self,
        api: ApiServer,
        *,
        extenders: Sequence[ExtenderConfig] = (),
        scheduler_name: str = DEFAULT_SCHEDULER_NAME,
        before_extenders: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        self._store = api.store
        self.before_extenders = before_extenders
        self._name = scheduler_name
        self._extenders = [ExtenderClient(config) for config in extenders]
        self._ignored_resources = frozenset(
            name for config in extenders for name in config.ignored_resources()
        )
        self._allocatable: dict[str, tuple[Node, Amounts]] = {}
        self._snapshot = ClusterSnapshot(ignored_resources=self._ignored_resources)
        """Reused across steps for its request caches; rebuilt from the store each step."""
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

    def _pending(self, pods: Sequence[Pod]) -> list[Pod]:
        pending = []
        for pod in pods:
            spec: Mapping[str, Any] = pod.get("spec") or {}  # schedulingGates: not typed
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

    def _priority(self, pod: Pod, classes: Mapping[str, int], default: int) -> int:
        spec = pod.get("spec") or {}
        if isinstance(spec.get("priority"), int):
            return int(spec["priority"])
        name = spec.get("priorityClassName")
        if name and name in classes:
            return classes[name]
        return default

    def _queue(self, pending: list[Pod]) -> list[Pod]:
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

    def _build_snapshot(
        self,
        nodes: Sequence[Node],
        pods: Sequence[Pod],
        namespace_labels: Mapping[str, Mapping[str, str]],
    ) -> ClusterSnapshot:
        allocatable: dict[str, tuple[Node, Amounts]] = {}

        def offered(node: Node) -> Amounts:
            name = node["metadata"]["name"]
            cached = self._allocatable.get(name)
            if cached is None or cached[0] is not node:
                cached = (node, node_allocatable(node))
            allocatable[name] = cached
            return cached[1]

        self._snapshot = ClusterSnapshot.build(
            nodes=nodes,
            pods=pods,
            namespace_labels=namespace_labels,
            ignored_resources=self._ignored_resources,
            requests=self._snapshot.request_cache,
            non_zero=self._snapshot.non_zero_cache,
            allocatable=offered,
        )
        self._allocatable = allocatable
        return self._snapshot

    async def step(self, now: datetime) -> None:
        # The store's objects are untyped JSON; the shared fit (kubescale.scheduling) reads
        # them as the typed Pods and Nodes they are. A TypedDict is the same dict at run time:
        # nothing is copied. These casts (and the bound pod's in _schedule_one) are the
        # boundary.
        pods = cast(list[Pod], self._store.snapshots(PODS))
        pending = self._pending(pods)
        if not pending:
            return
        nodes = cast(list[Node], self._store.snapshots(NODES))
        node_objects = {n["metadata"]["name"]: n for n in nodes}
        namespace_labels = {
            ns["metadata"]["name"]: dict(ns["metadata"].get("labels") or {})
            for ns in self._store.snapshots(NAMESPACES)
        }
        snapshot = self._build_snapshot(nodes, pods, namespace_labels)
        for pod in self._queue(pending):
            await self._schedule_one(pod, snapshot, node_objects, now)
        snapshot.forget_missing(pod_key(p) for p in pods)

    # ------------------------------------------------------------------------ one pod

    async def _schedule_one(
        self,
        pod: Pod,
        snapshot: ClusterSnapshot,
        node_objects: Mapping[str, Node],
        now: datetime,
    ) -> None:
        if not snapshot.nodes:
            mark_unschedulable(
                self._store, pod, reason="Unschedulable", message=NO_NODES_MESSAGE, now=now
            )
            return
        info = snapshot.pod_info(pod)
        prefilter = snapshot.prefilter(info)
        statuses: dict[str, FilterStatus] = {}
        feasible: list[str] = []
        for name in sorted(snapshot.nodes):
            status = snapshot.filter(info, name, prefilter)
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
                num_nodes=len(snapshot.nodes),
                statuses=statuses,
                preemption_policy=_preemption_policy(pod),
            )
            mark_unschedulable(self._store, pod, reason="Unschedulable", message=message, now=now)
            return
        chosen = feasible[0]
        if len(feasible) > 1:
            scores = await self._scores(info, feasible, snapshot, node_objects)
            for name in feasible:  # sorted by name: the first of equal scores wins
                if scores[name] > scores[chosen]:
                    chosen = name
        if bind_pod(self._store, pod, chosen, now):
            self._bound += 1
            namespace, name = pod_key(pod)
            bound = cast(Pod | None, self._store.peek(PODS, name, namespace))
            snapshot.add_pod(chosen, bound or pod)

    async def _run_extender_filters(
        self,
        pod: Pod,
        feasible: list[str],
        node_objects: Mapping[str, Node],
        statuses: dict[str, FilterStatus],
    ) -> list[str]:
        """``findNodesThatPassExtenders``: each interested extender on the survivors in turn."""
        for client in self._extenders:
            if not feasible:
                break
            if not client.config.filter_verb or not client.config.is_interested(pod):
                continue
            if self.before_extenders is not None:
                await self.before_extenders()
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
        info: PodInfo,
        feasible: list[str],
        snapshot: ClusterSnapshot,
        node_objects: Mapping[str, Node],
    ) -> dict[str, int]:
        scores = {
            name: least_allocated_score(info.non_zero, snapshot.nodes[name]) for name in feasible
        }
        clients = [
            c
            for c in self._extenders
            if c.config.prioritize_verb and c.config.is_interested(info.pod)
        ]
        if not clients:
            return scores
        if self.before_extenders is not None:
            await self.before_extenders()
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


def _preemption_policy(pod: Pod) -> str | None:
    """``spec.preemptionPolicy`` (not a field the typed Pod names: only the simulated
    scheduler's FitError message reads it)."""
    spec: Mapping[str, Any] = pod.get("spec") or {}
    policy = spec.get("preemptionPolicy")
    return policy if isinstance(policy, str) else None
