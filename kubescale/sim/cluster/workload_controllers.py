"""The workload controllers of the simulated cluster, as one :class:`~.actor.Actor`.

What kube-controller-manager's deployment, replicaset, statefulset, daemonset, job and
garbage-collector controllers do, acting in-process on ``ApiServer.store`` once per simulation
step (see :mod:`.deployments`, :mod:`.replica_sets`, :mod:`.stateful_sets`, :mod:`.daemon_sets`,
:mod:`.jobs` for each kind's rules). Every pod a controller creates carries
:data:`~.usage_models.WORKLOAD_LABEL` (the workload: the Deployment, StatefulSet, DaemonSet or
Job name unless the template sets the label) and :data:`~.usage_models.POD_INDEX_ANNOTATION`, an
ownerReference to its controller, and is created through the admission chain.

Cost: the store's commit listener feeds a :class:`~.workload_index.WorkloadIndex` that queues
only the objects whose inputs changed. A step syncs the queued keys (sorted, so runs repeat
exactly) and then whatever its own writes queued, in rounds, until nothing is left or
``max_rounds`` is reached — so a new Deployment gets its ReplicaSet and pods in the step it
appears, as it would within milliseconds on a real cluster. A quiet cluster costs an empty
queue per step. Time-driven work (``minReadySeconds``, progress deadlines, Job deadlines and
backoff) is queued for the first step at or after its moment.

Garbage collection (background propagation, which the API server leaves to controllers): when
an owner is deleted, what it controlled is deleted — ReplicaSets, then their pods (gracefully;
the kubelet actor finishes pods off). A write that fails (a webhook's denial, a conflict) is
logged and the object synced again on the next step.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, Final

from kubescale.base.logs import component_logger
from kubescale.kube.resources import PODS, ResourceType
from kubescale.sim.apiserver.errors import ApiError
from kubescale.sim.apiserver.server import ApiServer

from .controller_context import ControllerContext
from .daemon_sets import sync_daemon_set
from .deployments import sync_deployment
from .jobs import JobTracker, sync_job
from .replica_sets import sync_replica_set
from .stateful_sets import sync_stateful_set
from .workload_index import CONTROLLER_TYPES, Key, WorkloadIndex
from .workload_pods import controller_ref, is_terminating

__all__ = ["WorkloadControllers"]

log = component_logger("workloads")

DEFAULT_MAX_ROUNDS: Final = 16
_EPOCH: Final = datetime.fromisoformat("1970-01-01T00:00:00+00:00")

Sync = Callable[[ControllerContext, dict[str, Any]], Awaitable[None]]


class WorkloadControllers:
    """Deployment, ReplicaSet, StatefulSet, DaemonSet and Job controllers plus their garbage
    collection; create it once the API server exists (it indexes what is already stored), call
    :meth:`step` once per simulation step, :meth:`close` when done."""

    def __init__(self, *, api: ApiServer, max_rounds: int = DEFAULT_MAX_ROUNDS) -> None:
        self.api = api
        self.max_rounds = max_rounds
        self.index = WorkloadIndex()
        self.index.load(api.store)
        api.store.listeners.append(self.index.observe)
        self.jobs = JobTracker()
        self.ctx = ControllerContext(api=api, index=self.index, now=_EPOCH)
        self._syncs: dict[str, Sync] = {
            "deployments": sync_deployment,
            "replicasets": sync_replica_set,
            "statefulsets": sync_stateful_set,
            "daemonsets": sync_daemon_set,
            "jobs": self._sync_job,
        }
        self.syncs = 0
        """Syncs run so far (what a step cost)."""

    def close(self) -> None:
        """Stop listening to the store."""
        if self.index.observe in self.api.store.listeners:
            self.api.store.listeners.remove(self.index.observe)

    async def _sync_job(self, ctx: ControllerContext, job: dict[str, Any]) -> None:
        await sync_job(ctx, job, tracker=self.jobs)

    async def step(self, now: datetime) -> None:
        ctx = self.ctx
        ctx.now = now
        due = sorted(key for key, when in ctx.wakeups.items() if when <= now)
        for key in due:
            del ctx.wakeups[key]
        self.index.dirty.update(due)
        failed: set[Key] = set()
        for _ in range(self.max_rounds):
            self._collect_garbage()
            keys = [k for k in self.index.take_dirty() if k not in failed]
            if not keys:
                break
            for key in keys:
                obj = self.index.get(*key)
                if obj is None:
                    continue  # gone since it was queued
                self.syncs += 1
                ctx.wakeups.pop(key, None)  # the sync asks again for what it still needs
                try:
                    await self._syncs[key[0]](ctx, obj)
                except ApiError as exc:
                    failed.add(key)
                    log.info(
                        "sync failed; retrying next step",
                        extra={"fields": {"object": "/".join(key), "error": str(exc)}},
                    )
        self._collect_garbage()
        self.index.dirty.update(failed)

    def _collect_garbage(self) -> None:
        """Delete what deleted owners controlled (background propagation)."""
        while self.index.deleted_owners:
            uid = self.index.deleted_owners.pop(0)
            if self.index.key_of_uid(uid) is not None:
                continue
            self.jobs.forget(uid)
            for key in self.index.dependents(uid):
                obj = self.index.get(*key)
                if obj is None or is_terminating(obj):
                    continue
                ref = controller_ref(obj)
                if ref is None or str(ref.get("uid")) != uid:
                    continue
                rt: ResourceType = PODS if key[0] == PODS.plural else CONTROLLER_TYPES[key[0]]
                try:
                    self.ctx.delete(rt, obj)
                except ApiError as exc:
                    log.info(
                        "garbage collection failed",
                        extra={"fields": {"object": "/".join(key), "error": str(exc)}},
                    )
