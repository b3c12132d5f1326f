"""Keep a :class:`~.cluster_cache.ClusterCache` current from the process's shared informers.

The extender requests the informers it reads (pods, nodes, namespaces, PodDisruptionBudgets,
PVCs, PriorityClasses) from the :class:`~kubescale.kube.informer_set.InformerSet` the whole
process shares and hands each event to the cache; the existing objects are replayed when the
handlers are added. :func:`feed` returns a readiness check (``None`` once every informer has
listed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubescale.kube.informer import EventHandlers
from kubescale.kube.informer_set import InformerSet
from kubescale.kube.resources import (
    NAMESPACES,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    POD_DISRUPTION_BUDGETS,
    PODS,
    PRIORITY_CLASSES,
    ResourceType,
)

from .cluster_cache import ClusterCache

__all__ = ["feed"]

Handler = Callable[[Any], None]


def _handlers(upsert: Handler, delete: Handler) -> EventHandlers[Any]:
    return EventHandlers(on_add=upsert, on_update=lambda old, new: upsert(new), on_delete=delete)


def feed(
    cache: ClusterCache,
    informers: InformerSet,
    *,
    defer: Callable[[Handler], Handler] = lambda handler: handler,
) -> Callable[[], str | None]:
    """Wire ``cache`` to ``informers`` (module docstring); the readiness check. ``defer``
    wraps every handler (the extender defers writes while a decision reads the cache)."""
    wiring: list[tuple[ResourceType, Handler, Handler]] = [
        (NODES, cache.upsert_node, cache.delete_node),
        (NAMESPACES, cache.upsert_namespace, cache.delete_namespace),
        (POD_DISRUPTION_BUDGETS, cache.upsert_pdb, cache.delete_pdb),
        (PERSISTENT_VOLUME_CLAIMS, cache.upsert_pvc, cache.delete_pvc),
        (PRIORITY_CLASSES, cache.upsert_priority_class, cache.delete_priority_class),
        (PODS, cache.upsert_pod, cache.delete_pod),
    ]
    used = []
    for resource, upsert, delete in wiring:
        informer = informers.informer(resource)
        informer.add_handlers(_handlers(defer(upsert), defer(delete)))
        used.append(informer)

    def readiness() -> str | None:
        waiting = [i.name for i in used if not i.synced]
        return f"extender caches not synced: {', '.join(waiting)}" if waiting else None

    return readiness
