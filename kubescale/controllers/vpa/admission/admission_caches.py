"""What the admission path reads: the process's shared caches, and the lookups the pure
decisions take.

Everything here answers from memory; the admission path never calls the API server.

Informers (from the process's :class:`~kubescale.kube.shared_cache.SharedCache`):

- VerticalPodAutoscalers (only ``--vpa-object-namespace`` when set), indexed by
  ``namespace/targetRef.kind/targetRef.name`` (upstream ``TargetRefIndexFunc``; a VPA without a
  targetRef is not indexed); VPAs in ``--ignored-vpa-object-namespaces`` are never returned;
  requested as :data:`ADMISSION_READS` declares (below);
- the workload controllers, through the shared
  :class:`~kubescale.kube.controller_lookups.ControllerLookups` (informers for the kinds upstream
  watches — ReplicationControllers included — and ``/scale`` lookups for any other kind);
- LimitRanges (all namespaces);
- HorizontalPodAutoscalers, only with ``--avoid-hpa-conflict``, indexed by
  ``namespace/scaleTargetRef.kind/scaleTargetRef.name``;
- Nodes, only with ``--cap-to-largest-node``;

VPAs and HPAs are requested inside ``InformerSet.reading(ADMISSION_READS)``: the admission path
reads them only through the fields their TypedDicts name and never writes them back (upstream's
admission controller only lists them), so in a process where no other component reads them
(the webhook alone) their caches hold projected objects — no ``managedFields``, no unread
annotations, strings shared — instead of whole ones (issue 29). With the recommender, the
updater or the HPA controller in the process (they write VPAs and HPAs back whole and declare
nothing), the caches keep whole objects as before.
- Namespaces: a namespace's DELETE releases every piece of state kept for it (issue 26, item 7:
  the webhook kept the state of 2,250 deleted namespaces, +146 MiB). The namespace controller
  deletes a namespace's objects before it removes the namespace, so this runs after their own
  DELETEs (which release what was made with them) and catches what outlived them: the
  namespace's sorted LimitRanges (kept even when empty), the parsed selectors and the
  memo's entries of its pods, the event throttle's keys
  (:meth:`AdmissionCaches.on_namespace_deleted`). A deleted controller's parsed selector is
  released by the controller's own DELETE.

The lookups:

- :meth:`AdmissionCaches.owner` / :meth:`AdmissionCaches.is_scalable` for
  :func:`kubescale.controllers.vpa.api.controller_refs.topmost_controller`;
- :meth:`AdmissionCaches.selector_of` for
  :func:`kubescale.controllers.vpa.api.vpa_matching.choose_vpa`;
- :meth:`AdmissionCaches.limit_ranges`: a namespace's LimitRanges sorted by name (the merge's
  "last default wins" then does not depend on cache order; upstream's lister order is
  unspecified), kept per namespace until a LimitRange of that namespace changes;
- :meth:`AdmissionCaches.wait_for_controller`: the one wait the admission path may do (a pod's
  ReplicaSet reaching the informer just after the pod's admission request);
- :meth:`AdmissionCaches.largest_node_allocatable`: per resource, the largest
  ``status.allocatable`` over Ready nodes — a bound no single node may exceed, so a request
  above it can never be scheduled (on mixed node shapes the cpu and memory maxima may come from
  different nodes). Recomputed only when nodes change.

:meth:`AdmissionCaches.on_input_change` tells a listener (the memo,
:mod:`kubescale.controllers.vpa.admission.admission_memo`) when a VPA, the LimitRanges or HPAs of a
namespace, or the nodes changed, from the informers' event handlers — after the informer holds the
change, so
the next lookup reads it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Protocol

from kubescale.kube.controller_lookups import (
    LOOKUP_READS,
    WELL_KNOWN_INFORMED,
    ControllerLookups,
    well_known_selector,
)
from kubescale.kube.indexes import IndexFunc
from kubescale.kube.informer import EventHandlers, Informer
from kubescale.kube.resources import (
    HORIZONTAL_POD_AUTOSCALERS,
    LIMIT_RANGES,
    NAMESPACES,
    NODES,
    VERTICAL_POD_AUTOSCALERS,
)
from kubescale.kube.shared_cache import SharedCache
from kubescale.objects.hpa import HorizontalPodAutoscaler
from kubescale.objects.limit_range import LimitRange
from kubescale.objects.namespace import Namespace
from kubescale.objects.node import Node
from kubescale.objects.projection import Projection, projection_of
from kubescale.objects.quantities import Quantity, QuantityError
from kubescale.objects.selectors import LabelSelector
from kubescale.objects.views import Meta, ObjectRef, spec_of, status_of
from kubescale.objects.vpa import VerticalPodAutoscaler

__all__ = [
    "ADMISSION_READS",
    "HPA_TARGET_INDEX",
    "VPA_TARGET_INDEX",
    "AdmissionCaches",
    "InputListener",
    "largest_allocatable",
    "target_key",
]

VPA_TARGET_INDEX: Final = "vpa-target"
_MAX_SELECTORS_KEPT: Final = 100_000
"""VPA targets whose parsed selector is kept (then all are parsed again)."""
_MAX_NAMESPACES_KEPT: Final = 10_000
"""Namespaces whose sorted LimitRanges are kept between changes (then all are read again)."""
HPA_TARGET_INDEX: Final = "hpa-target"
ADMISSION_READS: Final[Mapping[tuple[str, str], Projection]] = {
    (rt.group, rt.kind): projection_of(typed)
    for rt, typed in (
        (VERTICAL_POD_AUTOSCALERS, VerticalPodAutoscaler),
        (HORIZONTAL_POD_AUTOSCALERS, HorizontalPodAutoscaler),
    )
}
"""What the admission path reads of VPAs and HPAs: the fields of their TypedDicts (the
webhook's projection audit, ``tests/webhook/conftest.py``, checks every read against it)."""


def target_key(namespace: str, kind: str, name: str) -> str:
    return f"{namespace}/{kind}/{name}"


def _ref_index(spec_field: str) -> IndexFunc:
    def index(obj: Mapping[str, object]) -> Iterable[str]:  # a VPA or an HPA
        ref = spec_of(obj).get(spec_field)
        if not isinstance(ref, Mapping):
            return ()
        namespace = Meta(obj).raw.get("namespace") or ""
        return (target_key(namespace, str(ref.get("kind") or ""), str(ref.get("name") or "")),)

    return index


VPA_TARGET_INDEX_FUNC: Final = _ref_index("targetRef")
HPA_TARGET_INDEX_FUNC: Final = _ref_index("scaleTargetRef")


def _is_ready(node: Node) -> bool:
    conditions: object = status_of(node).get("conditions") or ()  # as sent: entries checked
    for condition in conditions if isinstance(conditions, list | tuple) else ():
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def largest_allocatable(nodes: Iterable[Node]) -> dict[str, Quantity] | None:
    """Per resource, the largest allocatable over Ready nodes; ``None`` without Ready nodes."""
    largest: dict[str, Quantity] = {}
    ready = False
    for node in nodes:
        if not _is_ready(node):
            continue
        ready = True
        allocatable: object = status_of(node).get("allocatable") or {}  # as sent: checked
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


class InputListener(Protocol):
    """Told by :class:`AdmissionCaches` when an input of pod admission changed."""

    def forget_vpa(self, uid: str) -> None: ...

    def forget_namespace(self, namespace: str) -> None: ...

    def clear(self) -> None: ...


def _uid(obj: VerticalPodAutoscaler) -> str:
    return str(Meta(obj).raw.get("uid") or "")


def _namespace_of(obj: LimitRange | HorizontalPodAutoscaler) -> str:
    return str(Meta(obj).raw.get("namespace") or "")


class AdmissionCaches:
    """The informers and lookups of the admission path (see the module docstring)."""

    def __init__(
        self,
        *,
        cache: SharedCache,
        vpa_object_namespace: str = "",
        ignored_namespaces: Iterable[str] = (),
        watch_hpas: bool = False,
        watch_nodes: bool = False,
    ) -> None:
        self.cache = cache
        self._synced = False
        # Of the workload controllers, the admission path reads what the lookups read (the
        # owner chain and the selector; upstream's admission controller no more): without
        # another reader in the process, their caches hold no pod template (issue 29).
        with cache.informers.reading(LOOKUP_READS):
            self.controllers: ControllerLookups = cache.controllers
        self._selectors: dict[
            str, dict[tuple[str, str], tuple[Mapping[str, object], LabelSelector | None]]
        ]
        self._selectors = {}
        """Parsed selectors of informed VPA targets: namespace → (kind, name) → (object,
        selector)."""
        self._selector_count = 0
        self.ignored_namespaces = frozenset(ignored_namespaces)
        informers = cache.informers
        with informers.reading(ADMISSION_READS):
            self._vpas: Informer[VerticalPodAutoscaler] = informers.informer(
                VERTICAL_POD_AUTOSCALERS,
                namespace=vpa_object_namespace or None,
                indexes={VPA_TARGET_INDEX: VPA_TARGET_INDEX_FUNC},
            )
        self._listeners: list[InputListener] = []
        self._vpas.add_handlers(
            EventHandlers(
                on_update=self._vpa_updated,
                on_delete=self._vpa_changed,
            )
        )
        self._limit_ranges: Informer[LimitRange] = informers.informer(LIMIT_RANGES)
        self._limit_ranges_by_namespace: dict[str, list[LimitRange]] = {}
        self._limit_ranges.add_handlers(
            EventHandlers(
                on_add=self._limit_range_changed,
                on_update=self._limit_range_updated,
                on_delete=self._limit_range_changed,
            )
        )
        self._hpas: Informer[HorizontalPodAutoscaler] | None = None
        if watch_hpas:
            with informers.reading(ADMISSION_READS):
                self._hpas = informers.informer(
                    HORIZONTAL_POD_AUTOSCALERS, indexes={HPA_TARGET_INDEX: HPA_TARGET_INDEX_FUNC}
                )
            self._hpas.add_handlers(
                EventHandlers(
                    on_add=self._hpa_changed,
                    on_update=self._hpa_updated,
                    on_delete=self._hpa_changed,
                )
            )
        with informers.reading(LOOKUP_READS):
            for kind, resource in WELL_KNOWN_INFORMED.items():
                informers.informer(resource).add_handlers(
                    EventHandlers(on_delete=self._controller_deleted_handler(kind))
                )
        self._namespace_listeners: list[Callable[[str], None]] = []
        self._namespaces: Informer[Namespace] = informers.informer(NAMESPACES)
        self._namespaces.add_handlers(EventHandlers(on_delete=self._namespace_deleted))
        self._nodes: Informer[Node] | None = None
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

    @property
    def informers(self) -> list[Informer[Any]]:  # of several kinds
        """The informers the admission path reads (and only these: another system's caches
        never hold the webhook)."""
        used: list[Informer[Any]] = [self._vpas, self._limit_ranges, *self.controllers.informers]
        optional: tuple[Informer[Any] | None, ...] = (self._hpas, self._nodes)
        return used + [i for i in optional if i is not None]

    @property
    def synced(self) -> bool:
        """Each informer of the admission path has listed once. Once true it stays true: during a
        re-list after ``410 Gone`` pods are still answered from the last state, as upstream's
        admission controller answers from its listers."""
        if not self._synced:
            self._synced = all(informer.synced for informer in self.informers)
        return self._synced

    async def wait_synced(self, within: float | None = None) -> bool:
        """Wait until :attr:`synced`; ``False`` if ``within`` seconds (on the clock) pass."""
        results = await asyncio.gather(*(i.wait_synced(within) for i in self.informers))
        return all(results)

    # -- controllers ---------------------------------------------------------------------------

    def owner(
        self, api_version: str, kind: str, namespace: str, name: str
    ) -> Mapping[str, object] | None:
        """:data:`kubescale.controllers.vpa.api.controller_refs.OwnerLookup` over the caches."""
        return self.controllers.owner(api_version, kind, namespace, name)

    def informs(self, kind: str) -> bool:
        """Whether controllers of ``kind`` come from an informer (else from scale lookups)."""
        return self.controllers.informs(kind)

    async def wait_for_controller(
        self, kind: str, namespace: str, name: str, *, within: float
    ) -> bool:
        """See :meth:`kubescale.kube.controller_lookups.ControllerLookups.wait_for_controller`."""
        return await self.controllers.wait_for_controller(kind, namespace, name, within=within)

    def is_scalable(self, api_version: str, kind: str) -> bool:
        return self.controllers.is_scalable(api_version, kind)

    def selector_of(self, target: ObjectRef) -> LabelSelector | None:
        """The label selector of a VPA's target, or ``None`` when it is not known.

        An informed kind's selector is parsed once per version of the object: the informer
        replaces an object on every change, so the same object is the same selector.
        """
        if not self.controllers.informs(target.kind):
            return self.controllers.selector_of(target)
        obj = self.controllers.owner(target.api_version, target.kind, target.namespace, target.name)
        if obj is None:
            return None
        key = (target.kind, target.name)
        in_namespace = self._selectors.get(target.namespace)
        known = in_namespace.get(key) if in_namespace is not None else None
        if known is not None and known[0] is obj:
            return known[1]
        selector = well_known_selector(target.kind, obj)
        if self._selector_count >= _MAX_SELECTORS_KEPT:
            self._selectors.clear()
            self._selector_count = 0
        in_namespace = self._selectors.setdefault(target.namespace, {})
        if key not in in_namespace:
            self._selector_count += 1
        in_namespace[key] = (obj, selector)
        return selector

    def held_namespaces(self) -> set[str]:
        """Namespaces this object keeps state for (sorted LimitRanges, parsed selectors)."""
        return set(self._limit_ranges_by_namespace) | set(self._selectors)

    def _controller_deleted_handler(self, kind: str) -> Callable[[Mapping[str, object]], None]:
        def deleted(obj: Mapping[str, object]) -> None:
            metadata = Meta(obj).raw
            namespace = str(metadata.get("namespace") or "")
            in_namespace = self._selectors.get(namespace)
            if in_namespace is None:
                return
            if in_namespace.pop((kind, str(metadata.get("name") or "")), None) is not None:
                self._selector_count -= 1
            if not in_namespace:
                del self._selectors[namespace]

        return deleted

    # -- VPAs, LimitRanges, HPAs ---------------------------------------------------------------

    def vpas_for(self, controller: ObjectRef) -> list[VerticalPodAutoscaler]:
        """VPAs whose targetRef names ``controller`` (namespace, kind, name)."""
        if controller.namespace in self.ignored_namespaces:
            return []
        key = target_key(controller.namespace, controller.kind, controller.name)
        return self._vpas.lister.by_index(VPA_TARGET_INDEX, key)

    def limit_ranges(self, namespace: str) -> list[LimitRange]:
        """The namespace's LimitRanges by name (callers must not modify the list)."""
        known = self._limit_ranges_by_namespace.get(namespace)
        if known is not None:
            return known
        items = self._limit_ranges.lister.list(namespace=namespace)
        ordered = sorted(items, key=lambda obj: str(Meta(obj).raw.get("name") or ""))
        if len(self._limit_ranges_by_namespace) >= _MAX_NAMESPACES_KEPT:
            self._limit_ranges_by_namespace.clear()
        self._limit_ranges_by_namespace[namespace] = ordered
        return ordered

    def hpas_for(self, namespace: str, kind: str, name: str) -> list[HorizontalPodAutoscaler]:
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

    def _nodes_changed(self, _node: Node) -> None:
        self._invalidate()

    def _invalidate(self) -> None:
        self._largest_valid = False
        for listener in self._listeners:
            listener.clear()

    # -- change notifications ------------------------------------------------------------------

    def on_input_change(self, listener: InputListener) -> None:
        """Tell ``listener`` about every later change of an admission input (module doc)."""
        self._listeners.append(listener)

    def on_namespace_deleted(self, forget: Callable[[str], None]) -> None:
        """Call ``forget(namespace)`` when a namespace's DELETE arrives, after this object and
        the input listeners released what they kept for it."""
        self._namespace_listeners.append(forget)

    def _namespace_deleted(self, namespace_obj: Namespace) -> None:
        namespace = str(Meta(namespace_obj).raw.get("name") or "")
        if not namespace:
            return
        self._limit_ranges_by_namespace.pop(namespace, None)
        self._selector_count -= len(self._selectors.pop(namespace, {}))
        for listener in self._listeners:
            listener.forget_namespace(namespace)
        for forget in self._namespace_listeners:
            forget(namespace)

    def _vpa_updated(self, old: VerticalPodAutoscaler, _new: VerticalPodAutoscaler) -> None:
        self._vpa_changed(old)

    def _vpa_changed(self, vpa: VerticalPodAutoscaler) -> None:
        uid = _uid(vpa)
        for listener in self._listeners:
            listener.forget_vpa(uid)

    def _limit_range_changed(self, limit_range: LimitRange) -> None:
        namespace = _namespace_of(limit_range)
        self._limit_ranges_by_namespace.pop(namespace, None)
        for listener in self._listeners:
            listener.forget_namespace(namespace)

    def _limit_range_updated(self, old: LimitRange, new: LimitRange) -> None:
        self._limit_range_changed(old)
        self._limit_range_changed(new)

    def _hpa_updated(self, old: HorizontalPodAutoscaler, new: HorizontalPodAutoscaler) -> None:
        self._hpa_changed(old)
        self._hpa_changed(new)

    def _hpa_changed(self, hpa: HorizontalPodAutoscaler) -> None:
        namespace = _namespace_of(hpa)
        for listener in self._listeners:
            listener.forget_namespace(namespace)
