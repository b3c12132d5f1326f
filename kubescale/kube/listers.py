"""Read-only queries over an informer's cache: what loops and servers use instead of the API.

A :class:`Lister` answers from memory (client-go ``cache.GenericLister`` + ``Indexer``):
``get`` by name, ``list`` by namespace and label selector, and lookups through the indexes of
:mod:`kubescale.kube.indexes` (controller owner uid, pod node name, any custom index). Label
selectors are :class:`kubescale.objects.selectors.LabelSelector` (or selector text, parsed with the
apimachinery
``labels.Parse`` grammar). Results are the cached dicts themselves: read-only, deep-copy before
changing; order is the order objects were first stored, not sorted.
"""

from __future__ import annotations

from typing import Any

from kubescale.kube.indexes import NAMESPACE_INDEX, NODE_INDEX, OWNER_INDEX, IndexedCache
from kubescale.kube.resources import ResourceType
from kubescale.objects.selectors import (
    FieldSelector,
    LabelSelector,
    parse_field_selector,
    parse_label_selector,
)

Objects = list[dict[str, Any]]


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


class Lister:
    """Queries over one informer's cache."""

    def __init__(self, cache: IndexedCache, resource: ResourceType) -> None:
        self._cache = cache
        self.resource = resource

    def get(self, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """The object named ``name`` (in ``namespace`` for namespaced kinds), if cached."""
        if self.resource.namespaced:
            if not namespace:
                raise ValueError(f"{self.resource.kind} is namespaced: a namespace is required")
            return self._cache.get(f"{namespace}/{name}")
        return self._cache.get(name)

    def list(
        self,
        *,
        namespace: str | None = None,
        selector: LabelSelector | str | None = None,
        field_selector: FieldSelector | str | None = None,
    ) -> Objects:
        """Objects in ``namespace`` (``None``: all) matching the selectors (``None``: all)."""
        if namespace is not None and self.resource.namespaced:
            candidates = self._cache.by_index(NAMESPACE_INDEX, namespace)
        else:
            candidates = self._cache.values()
        return self._filter(candidates, selector, field_selector)

    def by_owner(self, owner_uid: str, *, selector: LabelSelector | str | None = None) -> Objects:
        """Objects whose controller ownerReference has uid ``owner_uid``."""
        return self._filter(self._cache.by_index(OWNER_INDEX, owner_uid), selector, None)

    def by_node(self, node_name: str) -> Objects:
        """Pods bound to ``node_name`` (``spec.nodeName``)."""
        return self._cache.by_index(NODE_INDEX, node_name)

    def by_index(self, index: str, value: str) -> Objects:
        """Objects a custom (or built-in) index maps to ``value``."""
        return self._cache.by_index(index, value)

    def __len__(self) -> int:
        return len(self._cache)

    @staticmethod
    def _filter(
        candidates: Objects,
        selector: LabelSelector | str | None,
        field_selector: FieldSelector | str | None,
    ) -> Objects:
        if isinstance(selector, str):
            selector = parse_label_selector(selector)
        if isinstance(field_selector, str):
            field_selector = parse_field_selector(field_selector)
        if selector is not None:
            candidates = [obj for obj in candidates if selector.matches(_labels(obj))]
        if field_selector is not None:
            candidates = [obj for obj in candidates if field_selector.matches(obj)]
        return candidates
