"""Workload controllers by reference: informers for the well-known kinds, /scale for the rest.

Every system of the suite asks "which controller is this, and which pods does it select?": the
VPA webhook and recommender resolve a pod's top-most controller and a VPA's target, the updater
groups pods by controller, the HPA reads its target's selector, the descheduler and the cluster
autoscaler ask whether a pod is replicated. One :class:`ControllerLookups` per process answers
all of them from memory:

* the kinds upstream VPA's ``controllerfetcher`` informs on — Deployment, ReplicaSet,
  StatefulSet, DaemonSet, Job, CronJob and ReplicationController
  (:data:`WELL_KNOWN_INFORMED`) — come from the process's shared informers;
* any other kind (a custom resource with a ``/scale`` subresource: an Argo Rollout, a Cluster
  API MachineDeployment ...) comes from :class:`~kubescale.kube.scale_lookups.ScaleLookups`,
  which answers from memory and resolves misses off the request path.

Selectors are read as upstream's ``VpaTargetSelectorFetcher`` reads them: ``spec.selector``
(a LabelSelector); a CronJob's job template's pod labels; a ReplicationController's
``spec.selector`` label map; any other kind's ``/scale`` ``status.selector``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any, Final

from kubescale.kube.informer import EventHandlers, Informer
from kubescale.kube.informer_set import InformerSet
from kubescale.kube.resources import (
    CRON_JOBS,
    DAEMON_SETS,
    DEPLOYMENTS,
    JOBS,
    REPLICA_SETS,
    REPLICATION_CONTROLLERS,
    STATEFUL_SETS,
    ResourceType,
)
from kubescale.kube.scale_lookups import ScaleLookups
from kubescale.objects.projection import Projection, projection_of
from kubescale.objects.selectors import (
    LabelSelector,
    SelectorError,
    label_selector_from_dict,
    label_selector_from_set,
)
from kubescale.objects.views import Meta, ObjectRef, meta, raw_spec, spec_of
from kubescale.objects.workload_controller import WorkloadController

__all__ = ["LOOKUP_READS", "WELL_KNOWN_INFORMED", "ControllerLookups", "well_known_selector"]

WELL_KNOWN_INFORMED: Final[Mapping[str, ResourceType]] = {
    rt.kind: rt
    for rt in (
        DEPLOYMENTS,
        REPLICA_SETS,
        STATEFUL_SETS,
        DAEMON_SETS,
        JOBS,
        CRON_JOBS,
        REPLICATION_CONTROLLERS,
    )
}
"""Controller kinds read from informers, by kind (upstream keys its informer map by kind)."""

LOOKUP_READS: Final[Mapping[tuple[str, str], Projection]] = {
    (rt.group, rt.kind): projection_of(WorkloadController) for rt in WELL_KNOWN_INFORMED.values()
}
"""What the lookups read of each well-known kind (metadata and selector,
:mod:`kubescale.objects.workload_controller`): a component that reads these kinds only through
the lookups requests them inside ``InformerSet.reading(LOOKUP_READS)``."""


def well_known_selector(kind: str, obj: Mapping[str, Any]) -> LabelSelector | None:
    """``getLabelSelector`` of upstream's target fetcher for a well-known kind."""
    spec = spec_of(obj)
    try:
        if kind == CRON_JOBS.kind:
            # a jobTemplate.spec that is not an object fails (AttributeError) to None, below
            job_spec: Any = raw_spec(spec.get("jobTemplate") or {}) or {}
            template = job_spec.get("template") or {}
            labels = Meta(template).raw.get("labels") or {}
            return label_selector_from_set(labels)
        if kind == REPLICATION_CONTROLLERS.kind:
            return label_selector_from_set(spec.get("selector") or {})
        return label_selector_from_dict(spec.get("selector"))
    except (SelectorError, AttributeError, TypeError):
        return None


class ControllerLookups:
    """Controllers and their selectors, from memory (see the module docstring)."""

    def __init__(self, *, informers: InformerSet, scale_lookups: ScaleLookups) -> None:
        self.scale_lookups = scale_lookups
        self._controllers: dict[str, Informer[Any]] = {
            kind: informers.informer(rt) for kind, rt in WELL_KNOWN_INFORMED.items()
        }
        self._waiters: dict[tuple[str, str, str], list[asyncio.Future[None]]] = {}
        for kind, informer in self._controllers.items():
            informer.add_handlers(EventHandlers(on_add=self._arrived_handler(kind)))

    @property
    def informers(self) -> list[Informer[Any]]:
        """The informers of the well-known controller kinds."""
        return list(self._controllers.values())

    def informs(self, kind: str) -> bool:
        """Whether controllers of ``kind`` come from an informer (else from /scale lookups)."""
        return kind in self._controllers

    def owner(
        self, api_version: str, kind: str, namespace: str, name: str
    ) -> dict[str, Any] | None:
        """The cached controller object (``None`` when absent, or not looked up yet)."""
        informer = self._controllers.get(kind)
        if informer is not None:
            return informer.lister.get(name, namespace) if namespace and name else None
        return self.scale_lookups.lookup(api_version, kind, namespace, name)

    def is_scalable(self, api_version: str, kind: str) -> bool:
        """A well-known kind, or a kind that serves ``/scale`` (as last discovered)."""
        if kind in self._controllers:
            return True
        return self.scale_lookups.is_scalable(api_version, kind)

    def selector_of(self, target: ObjectRef) -> LabelSelector | None:
        """The label selector of a controller, or ``None`` when it is not known."""
        if target.kind in self._controllers:
            obj = self.owner(target.api_version, target.kind, target.namespace, target.name)
            return well_known_selector(target.kind, obj) if obj is not None else None
        # Both lookups run so that first sight queues the kind and the object together.
        scalable = self.scale_lookups.is_scalable(target.api_version, target.kind)
        selector = self.scale_lookups.selector(
            target.api_version, target.kind, target.namespace, target.name
        )
        return selector if scalable else None

    async def wait_for_controller(
        self, kind: str, namespace: str, name: str, *, within: float
    ) -> bool:
        """Wait up to ``within`` real seconds for the informer of ``kind`` to hold the object;
        ``True`` once it does (at once if it already does).

        The one wait the admission path may do: a pod's ReplicaSet is created a moment before
        the pod, and its watch event can arrive after the pod's admission request. This bounds
        our own latency like an I/O timeout; it never calls the API server.
        """
        informer = self._controllers.get(kind)
        if informer is None or not namespace or not name:
            return False
        if informer.lister.get(name, namespace) is not None:
            return True
        key = (kind, namespace, name)
        arrived: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(key, []).append(arrived)
        try:
            async with asyncio.timeout(within):
                await arrived
        except TimeoutError:
            return informer.lister.get(name, namespace) is not None
        finally:
            waiting = self._waiters.get(key, [])
            if arrived in waiting:
                waiting.remove(arrived)
            if not waiting:
                self._waiters.pop(key, None)
        return True

    def _arrived_handler(self, kind: str) -> Callable[[dict[str, Any]], None]:
        def arrived(obj: dict[str, Any]) -> None:
            view = meta(obj)
            for waiter in self._waiters.pop((kind, view.namespace, view.name), []):
                if not waiter.done():
                    waiter.set_result(None)

        return arrived
