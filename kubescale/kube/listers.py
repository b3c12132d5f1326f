"""Read-only queries over an informer's cache: what loops and servers use instead of the API.

A :class:`Lister` answers from memory (client-go ``cache.GenericLister`` + ``Indexer``):
``get`` by name, ``list`` by namespace and label selector, and lookups through the indexes of
:mod:`kubescale.kube.indexes` (controller owner uid, pod node name, any custom index). Label
selectors are :class:`kubescale.objects.selectors.LabelSelector` (or selector text, parsed with the
apimachinery
``labels.Parse`` grammar). Results are the cached dicts themselves: read-only, deep-copy before
changing; order is the order objects were first stored, not sorted.

A lister is typed by the kind it holds (``Lister[Pod]``, the TypedDicts of
:mod:`kubescale.objects`): this is the one place where the JSON the informer stored becomes a
typed object (a ``cast``: a TypedDict is the same dict at run time, nothing is copied).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Generic, TypeVar, cast

from kubescale.kube.indexes import NAMESPACE_INDEX, NODE_INDEX, OWNER_INDEX, IndexedCache
from kubescale.kube.resources import ResourceType
from kubescale.objects.selectors import (
    FieldSelector,
    LabelSelector,
    parse_field_selector,
    parse_label_selector,
)
from kubescale.objects.views import meta

ObjectT = TypeVar("ObjectT", bound=Mapping[str, Any])
"""The kind a lister holds: a TypedDict of :mod:`kubescale.objects` (``Any`` where untyped)."""

Objects = list[ObjectT]
"""A list of objects (``list`` itself is shadowed by :meth:`Lister.list` in the class)."""


def _labels(obj: dict[str, Any]) -> Mapping[str, str]:
    return meta(obj).labels


class Lister(Generic[ObjectT]):
    """Queries over one informer's cache."""

    def __init__(self, cache: IndexedCache, resource: ResourceType) -> None:
        self._cache = cache
        self.resource = resource

    def get(self, name: str, namespace: str | None = None) -> ObjectT | None:
        """The object named ``name`` (in ``namespace`` for namespaced kinds), if cached."""
        if self.resource.namespaced:
            if not namespace:
                raise ValueError(f"{self.resource.kind} is namespaced: a namespace is required")
            return cast("ObjectT | None", self._cache.get(f"{namespace}/{name}"))
        return cast("ObjectT | None", self._cache.get(name))

    def list(
        self,
        *,
        namespace: str | None = None,
        selector: LabelSelector | str | None = None,
        field_selector: FieldSelector | str | None = None,
    ) -> Objects[ObjectT]:
        """Objects in ``namespace`` (``None``: all) matching the selectors (``None``: all)."""
        if namespace is not None and self.resource.namespaced:
            candidates = self._cache.by_index(NAMESPACE_INDEX, namespace)
        else:
            candidates = self._cache.values()
        return self._filter(candidates, selector, field_selector)

    def by_owner(
        self, owner_uid: str, *, selector: LabelSelector | str | None = None
    ) -> Objects[ObjectT]:
        """Objects whose controller ownerReference has uid ``owner_uid``."""
        return self._filter(self._cache.by_index(OWNER_INDEX, owner_uid), selector, None)

    def by_node(self, node_name: str) -> Objects[ObjectT]:
        """Pods bound to ``node_name`` (``spec.nodeName``)."""
        return cast("Objects[ObjectT]", self._cache.by_index(NODE_INDEX, node_name))

    def by_index(self, index: str, value: str) -> Objects[ObjectT]:
        """Objects a custom (or built-in) index maps to ``value``."""
        return cast("Objects[ObjectT]", self._cache.by_index(index, value))

    def __len__(self) -> int:
        return len(self._cache)

    @staticmethod
    def _filter(
        candidates: Objects[dict[str, Any]],
        selector: LabelSelector | str | None,
        field_selector: FieldSelector | str | None,
    ) -> Objects[ObjectT]:
        if isinstance(selector, str):
            selector = parse_label_selector(selector)
        if isinstance(field_selector, str):
            field_selector = parse_field_selector(field_selector)
        if selector is not None:
            candidates = [obj for obj in candidates if selector.matches(_labels(obj))]
        if field_selector is not None:
            candidates = [obj for obj in candidates if field_selector.matches(obj)]
        return cast("Objects[ObjectT]", candidates)
