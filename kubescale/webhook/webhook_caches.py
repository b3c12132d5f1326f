"""What the admission path reads: informer caches and the lookups the pure decisions take.

Everything here answers from memory; the admission path never calls the API server.

Informers (shared through :class:`kubescale.kube.informer_set.InformerSet`):

- VerticalPodAutoscalers (only ``--vpa-object-namespace`` when set), indexed by
  ``namespace/targetRef.kind/targetRef.name`` (upstream ``TargetRefIndexFunc``; a VPA without a
  targetRef is not indexed); VPAs in ``--ignored-vpa-object-namespaces`` are never returned;
- the well-known controllers upstream watches: Deployments, ReplicaSets, StatefulSets,
  DaemonSets, Jobs, CronJobs (ReplicationControllers, which the in-process API server does not
  serve, and every other kind go through :class:`~kubescale.webhook.scale_lookups.ScaleLookups`);
- LimitRanges (all namespaces);
- HorizontalPodAutoscalers, only with ``--avoid-hpa-conflict``, indexed by
  ``namespace/scaleTargetRef.kind/scaleTargetRef.name``;
- Nodes, only with ``--cap-to-largest-node``.

Readiness (``/readyz``) is "every informer has synced". The lookups:

- :meth:`WebhookCaches.owner` / :meth:`WebhookCaches.is_scalable` for
  :func:`kubescale.controllers.vpa.api.controller_refs.topmost_controller`;
- :meth:`WebhookCaches.selector_of` for
  :func:`kubescale.controllers.vpa.api.vpa_matching.choose_vpa`: a well-known target's selector as
  upstream's ``VpaTargetSelectorFetcher`` reads it (``spec.selector``; CronJob: the job template's
  pod labels; ReplicationController: its
  ``spec.selector`` map), any other kind's ``/scale`` ``status.selector``;
- :meth:`WebhookCaches.limit_ranges`: a namespace's LimitRanges sorted by name (the merge's
  "last default wins" then does not depend on cache order; upstream's lister order is
  unspecified);
- :meth:`WebhookCaches.wait_for_controller`: the one wait the admission path may do. A pod's
  ReplicaSet is created a moment before the pod, and its watch event can arrive after the pod's
  admission request; upstream then finds no controller and leaves the pod unmutated. Here the
  route waits (up to a second by default, real time: it bounds our own latency like an I/O
  timeout) for the informer to deliver that object, then decides — still without calling the
  API server;
- :meth:`WebhookCaches.largest_node_allocatable`: per resource, the largest
  ``status.allocatable`` over Ready nodes — a bound no single node may exceed, so a request
  above it can never be scheduled (on mixed node shapes the cpu and memory maxima may come from
  different nodes). Recomputed only when nodes change.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from kubescale.controllers.vpa.api.controller_refs import ControllerRef
from kubescale.kube.indexes import IndexFunc
from kubescale.kube.informer import EventHandlers, Informer
from kubescale.kube.informer_set import InformerSet
from kubescale.kube.quantities import Quantity, QuantityError
from kubescale.kube.resources import (
    CRON_JOBS,
    DAEMON_SETS,
    DEPLOYMENTS,
    HORIZONTAL_POD_AUTOSCALERS,
    JOBS,
    LIMIT_RANGES,
    NODES,
    REPLICA_SETS,
    STATEFUL_SETS,
    VERTICAL_POD_AUTOSCALERS,
    ResourceType,
)
from kubescale.kube.selectors import (
    LabelSelector,
    SelectorError,
    label_selector_from_dict,
    label_selector_from_set,
)
from kubescale.webhook.scale_lookups import ScaleLookups

__all__ = [
    "HPA_TARGET_INDEX",
    "VPA_TARGET_INDEX",
    "WELL_KNOWN_INFORMED",
    "WebhookCaches",
    "largest_allocatable",
    "well_known_selector",
]

VPA_TARGET_INDEX: Final = "vpa-target"
HPA_TARGET_INDEX: Final = "hpa-target"

WELL_KNOWN_INFORMED: Final[Mapping[str, ResourceType]] = {
    rt.kind: rt for rt in (DEPLOYMENTS, REPLICA_SETS, STATEFUL_SETS, DAEMON_SETS, JOBS, CRON_JOBS)
}
"""Well-known controller kinds read from informers, by kind (upstream keys its map by kind)."""
_REPLICATION_CONTROLLER: Final = "ReplicationController"


def target_key(namespace: str, kind: str, name: str) -> str:
    return f"{namespace}/{kind}/{name}"


def _ref_index(spec_field: str) -> IndexFunc:
    def index(obj: Mapping[str, Any]) -> Iterable[str]:
        ref = (obj.get("spec") or {}).get(spec_field)
        if not isinstance(ref, Mapping):
            return ()
        namespace = (obj.get("metadata") or {}).get("namespace") or ""
        return (target_key(namespace, str(ref.get("kind") or ""), str(ref.get("name") or "")),)

    return index


def _is_ready(node: Mapping[str, Any]) -> bool:
    for condition in (node.get("status") or {}).get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def largest_allocatable(nodes: Iterable[Mapping[str, Any]]) -> dict[str, Quantity] | None:
    """Per resource, the largest allocatable over Ready nodes; ``None`` without Ready nodes."""
    largest: dict[str, Quantity] = {}
    ready = False
    for node in nodes:
        if not _is_ready(node):
            continue
        ready = True
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        if not isinstance(allocatable, Mapping):
            continue
        for resource, raw in allocatable.items():
            try:
                amount = Quantity.from_json(raw)
            except QuantityError:
                continue
            if resource not in largest or amount > largest[resource]:
                largest[resource] = amount
    return largest if ready else None


def well_known_selector(kind: str, obj: Mapping[str, Any]) -> LabelSelector | None:
    """``getLabelSelector`` of upstream's target fetcher for a well-known kind."""
    spec = obj.get("spec") or {}
    try:
        if kind == "CronJob":
            template = (((spec.get("jobTemplate") or {}).get("spec") or {}).get("template")) or {}
            labels = (template.get("metadata") or {}).get("labels") or {}
            return label_selector_from_set(labels)
        if kind == _REPLICATION_CONTROLLER:
            return label_selector_from_set(spec.get("selector") or {})
        return label_selector_from_dict(spec.get("selector"))
    except (SelectorError, AttributeError, TypeError):
        return None


class WebhookCaches:
    """The informers and lookups of the admission path (see the module docstring)."""

    def __init__(
        self,
        *,
        informers: InformerSet,
        scale_lookups: ScaleLookups,
        vpa_object_namespace: str = "",
        ignored_namespaces: Iterable[str] = (),
        watch_hpas: bool = False,
        watch_nodes: bool = False,
    ) -> None:
        self.informers = informers
        self.scale_lookups = scale_lookups
        self.ignored_namespaces = frozenset(ignored_namespaces)
        self._vpas = informers.informer(
            VERTICAL_POD_AUTOSCALERS, namespace=vpa_object_namespace or None
        )
        self._vpas.add_indexer(VPA_TARGET_INDEX, _ref_index("targetRef"))
        self._controllers: dict[str, Informer] = {
            kind: informers.informer(rt) for kind, rt in WELL_KNOWN_INFORMED.items()
        }
        self._waiters: dict[tuple[str, str, str], list[asyncio.Future[None]]] = {}
        for kind, informer in self._controllers.items():
            informer.add_handlers(EventHandlers(on_add=self._arrived_handler(kind)))
        self._limit_ranges = informers.informer(LIMIT_RANGES)
        self._hpas: Informer | None = None
        if watch_hpas:
            self._hpas = informers.informer(HORIZONTAL_POD_AUTOSCALERS)
            self._hpas.add_indexer(HPA_TARGET_INDEX, _ref_index("scaleTargetRef"))
        self._nodes: Informer | None = None
        self._largest: dict[str, Quantity] | None = None
        self._largest_valid = False
        if watch_nodes:
            self._nodes = informers.informer(NODES)
            self._nodes.add_handlers(
                EventHandlers(
                    on_add=self._nodes_changed,
                    on_update=lambda _old, _new: self._invalidate(),
                    on_delete=self._nodes_changed,
                )
            )

    # -- readiness ----------------------------------------------------------------------------

    @property
    def synced(self) -> bool:
        return not self.informers.unsynced()

    def readiness_check(self) -> str | None:
        """``/readyz``: healthy once every informer has synced."""
        return self.informers.readiness_check()

    # -- controllers ---------------------------------------------------------------------------

    def owner(
        self, api_version: str, kind: str, namespace: str, name: str
    ) -> dict[str, Any] | None:
        """:data:`kubescale.controllers.vpa.api.controller_refs.OwnerLookup` over the caches."""
        informer = self._controllers.get(kind)
        if informer is not None:
            return informer.lister.get(name, namespace) if namespace and name else None
        return self.scale_lookups.lookup(api_version, kind, namespace, name)

    def informs(self, kind: str) -> bool:
        """Whether controllers of ``kind`` come from an informer (else from scale lookups)."""
        return kind in self._controllers

    async def wait_for_controller(
        self, kind: str, namespace: str, name: str, *, within: float
    ) -> bool:
        """Wait up to ``within`` real seconds for the informer of ``kind`` to hold the object;
        ``True`` once it does (at once if it already does)."""
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
            meta = obj.get("metadata") or {}
            key = (kind, str(meta.get("namespace") or ""), str(meta.get("name") or ""))
            for waiter in self._waiters.pop(key, []):
                if not waiter.done():
                    waiter.set_result(None)

        return arrived

    def is_scalable(self, api_version: str, kind: str) -> bool:
        if kind in self._controllers:
            return True
        return self.scale_lookups.is_scalable(api_version, kind)

    def selector_of(self, target: ControllerRef) -> LabelSelector | None:
        """The label selector of a VPA's target, or ``None`` when it is not known."""
        if target.kind in self._controllers or target.kind == _REPLICATION_CONTROLLER:
            obj = self.owner(target.api_version, target.kind, target.namespace, target.name)
            return well_known_selector(target.kind, obj) if obj is not None else None
        # Both lookups run so that first sight queues the kind and the object together.
        scalable = self.scale_lookups.is_scalable(target.api_version, target.kind)
        selector = self.scale_lookups.selector(
            target.api_version, target.kind, target.namespace, target.name
        )
        return selector if scalable else None

    # -- VPAs, LimitRanges, HPAs ---------------------------------------------------------------

    def vpas_for(self, controller: ControllerRef) -> list[dict[str, Any]]:
        """VPAs whose targetRef names ``controller`` (namespace, kind, name)."""
        if controller.namespace in self.ignored_namespaces:
            return []
        key = target_key(controller.namespace, controller.kind, controller.name)
        return self._vpas.lister.by_index(VPA_TARGET_INDEX, key)

    def limit_ranges(self, namespace: str) -> list[dict[str, Any]]:
        items = self._limit_ranges.lister.list(namespace=namespace)
        return sorted(items, key=lambda obj: str((obj.get("metadata") or {}).get("name") or ""))

    def hpas_for(self, namespace: str, kind: str, name: str) -> list[dict[str, Any]]:
        """HPAs whose scaleTargetRef names ``kind``/``name`` in ``namespace``."""
        if self._hpas is None:
            return []
        return self._hpas.lister.by_index(HPA_TARGET_INDEX, target_key(namespace, kind, name))

    # -- nodes ---------------------------------------------------------------------------------

    def largest_node_allocatable(self) -> dict[str, Quantity] | None:
        if self._nodes is None:
            return None
        if not self._largest_valid:
            self._largest = largest_allocatable(self._nodes.lister.list())
            self._largest_valid = True
        return self._largest

    def _nodes_changed(self, _node: dict[str, Any]) -> None:
        self._invalidate()

    def _invalidate(self) -> None:
        self._largest_valid = False
