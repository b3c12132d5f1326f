"""The writes a simulated workload controller makes, and its view of time and of the index.

Every write is in-process on the API server's store; creates go through the admission chain
(mutating, then validating webhooks — the VPA webhook rewrites pod resources there), as a
controller's POST would. Writes that would change nothing are not made: an unchanged status is
never written, so a quiet cluster costs no resourceVersions and wakes no watchers.

Failed writes raise :class:`~kubescale.sim.apiserver.errors.ApiError`; the controller loop catches
it, logs it, and syncs the object again on the next step (a controller's rate-limited requeue).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from kubescale.kube.resources import PODS, ResourceType
from kubescale.sim.apiserver.server import ApiServer
from kubescale.sim.apiserver.storage import format_time

from .workload_index import Key, WorkloadIndex

__all__ = ["ControllerContext"]


class ControllerContext:
    """One per :class:`~.workload_controllers.WorkloadControllers`; ``now`` is the step's time."""

    def __init__(self, *, api: ApiServer, index: WorkloadIndex, now: datetime) -> None:
        self.api = api
        self.index = index
        self.now = now
        self.wakeups: dict[Key, datetime] = {}
        """Keys to sync again at a later time (minReadySeconds, deadlines, backoff)."""

    @property
    def timestamp(self) -> str:
        """``now`` as a metav1.Time string."""
        return format_time(self.now)

    def wake_at(self, key: Key, when: datetime) -> None:
        """Sync ``key`` again on the first step at or after ``when``."""
        current = self.wakeups.get(key)
        if current is None or when < current:
            self.wakeups[key] = when

    def wake_after(self, key: Key, seconds: float) -> None:
        self.wake_at(key, self.now + timedelta(seconds=seconds))

    async def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        """POST ``obj`` through admission (``ApiServer.create_admitted``); the stored object."""
        return await self.api.create_admitted(obj)

    def update(self, obj: dict[str, Any]) -> dict[str, Any]:
        """PUT ``obj`` (its resourceVersion is the precondition); the stored object."""
        return self.api.store.update(obj)

    def update_status(self, obj: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
        """PUT ``status`` to ``obj``'s status subresource unless it is already the status."""
        if obj.get("status") == status:
            return obj
        return self.api.store.update_status({**obj, "status": status})

    def delete(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        """DELETE with default options (a pod is deleted gracefully), uid as precondition."""
        meta = obj["metadata"]
        self.api.store.delete(
            rt, meta["name"], meta.get("namespace"), preconditions={"uid": meta.get("uid")}
        )

    def delete_pod(self, pod: dict[str, Any]) -> None:
        self.delete(PODS, pod)
