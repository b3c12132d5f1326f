"""The informer's in-memory store: objects by key, plus secondary indexes.

Mirrors client-go's ``cache.Indexer`` (``thread_safe_store.go``): objects are keyed
``<namespace>/<name>`` (``MetaNamespaceKeyFunc``; just ``<name>`` for cluster-scoped kinds) and
every index function maps an object to zero or more index values, kept up to date on each add,
update and delete so a lookup by value is a dict access, not a scan.

Built-in indexes, present on every cache:

- ``namespace``: ``metadata.namespace`` (client-go's ``NamespaceIndex``);
- ``owner``: the uid of the *controller* ownerReference (``controller: true``), the one
  ``metav1.GetControllerOf`` returns; other owner references are not indexed;
- ``node``: ``spec.nodeName`` of pods (empty for unscheduled pods and other kinds).

Stored objects are the raw dicts the API server sent and are shared with every reader: treat
them as read-only and deep-copy before changing one (the same contract as client-go listers).
Single-threaded by design: all access happens on the event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kubescale.objects.views import Meta, meta, spec_of

IndexFunc = Callable[[Mapping[str, Any]], Iterable[str]]

NAMESPACE_INDEX = "namespace"
OWNER_INDEX = "owner"
NODE_INDEX = "node"


def object_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` or ``name`` (client-go ``MetaNamespaceKeyFunc``)."""
    meta = Meta(obj).raw
    name = meta.get("name") or ""
    namespace = meta.get("namespace") or ""
    return f"{namespace}/{name}" if namespace else str(name)


def namespace_index(obj: Mapping[str, Any]) -> Iterable[str]:
    namespace = Meta(obj).raw.get("namespace")
    return (namespace,) if namespace else ()


def controller_owner_index(obj: Mapping[str, Any]) -> Iterable[str]:
    # metav1.GetControllerOf: the first ownerReference with controller == true.
    ref = meta(obj).controller
    return (ref.uid,) if ref is not None and ref.uid else ()


def node_name_index(obj: Mapping[str, Any]) -> Iterable[str]:
    if obj.get("kind") != "Pod":
        return ()  # only pods have spec.nodeName (other kinds' projections drop it)
    node = spec_of(obj).get("nodeName")
    return (node,) if node else ()


DEFAULT_INDEXERS: Mapping[str, IndexFunc] = {
    NAMESPACE_INDEX: namespace_index,
    OWNER_INDEX: controller_owner_index,
    NODE_INDEX: node_name_index,
}


class IndexedCache:
    """Objects by key with secondary indexes (see the module docstring)."""

    def __init__(self, indexers: Mapping[str, IndexFunc] | None = None) -> None:
        self._items: dict[str, dict[str, Any]] = {}
        self._indexers: dict[str, IndexFunc] = dict(DEFAULT_INDEXERS)
        self._indices: dict[str, dict[str, dict[str, None]]] = {}
        # What each object was indexed under, so removal does not re-run index functions.
        self._indexed_values: dict[str, dict[str, tuple[str, ...]]] = {}
        for name, func in (indexers or {}).items():
            self._indexers[name] = func
        for name in self._indexers:
            self._indices[name] = {}

    def add_indexer(self, name: str, func: IndexFunc) -> None:
        """Add (or replace) an index; existing objects are indexed at once."""
        if name in self._indexers:
            for key in self._items:
                self._unindex_one(name, key)
        self._indexers[name] = func
        self._indices[name] = {}
        for key, obj in self._items.items():
            self._index_one(name, key, obj)

    @property
    def index_names(self) -> tuple[str, ...]:
        return tuple(self._indexers)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def get(self, key: str) -> dict[str, Any] | None:
        return self._items.get(key)

    def keys_snapshot(self) -> list[str]:
        return list(self._items)

    def values(self) -> list[dict[str, Any]]:
        return list(self._items.values())

    def by_index(self, index: str, value: str) -> list[dict[str, Any]]:
        """Objects whose ``index`` function yielded ``value``."""
        try:
            keys = self._indices[index].get(value, {})
        except KeyError:
            raise KeyError(f"no index named {index!r}") from None
        return [self._items[key] for key in keys]

    def index_values(self, index: str) -> list[str]:
        """Every value currently present in ``index``."""
        return list(self._indices[index])

    def upsert(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        """Store ``obj`` under its key; returns the object it replaced, if any."""
        key = object_key(obj)
        old = self._items.get(key)
        if old is not None:
            for name in self._indexers:
                self._unindex_one(name, key)
        self._items[key] = obj
        for name in self._indexers:
            self._index_one(name, key, obj)
        return old

    def remove(self, key: str) -> dict[str, Any] | None:
        """Drop the object under ``key``; returns it, or ``None`` if absent."""
        old = self._items.pop(key, None)
        if old is not None:
            for name in self._indexers:
                self._unindex_one(name, key)
            self._indexed_values.pop(key, None)
        return old

    def clear(self) -> None:
        self._items.clear()
        self._indexed_values.clear()
        for name in self._indexers:
            self._indices[name] = {}

    def _index_one(self, name: str, key: str, obj: Mapping[str, Any]) -> None:
        values = tuple(dict.fromkeys(self._indexers[name](obj)))
        self._indexed_values.setdefault(key, {})[name] = values
        index = self._indices[name]
        for value in values:
            index.setdefault(value, {})[key] = None

    def _unindex_one(self, name: str, key: str) -> None:
        values = self._indexed_values.get(key, {}).pop(name, ())
        index = self._indices[name]
        for value in values:
            bucket = index.get(value)
            if bucket is None:
                continue
            bucket.pop(key, None)
            if not bucket:
                del index[value]
