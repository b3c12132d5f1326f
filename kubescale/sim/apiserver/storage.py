"""Storage: the objects of every kind, the global resourceVersion and the change log.

The etcd of this server. Every committed write takes the next value of one server-wide counter
as the object's ``metadata.resourceVersion`` (a decimal string) and is recorded as a
:class:`~.history.StoredEvent`; listeners (CRD registration) run right after each event.
Stored dicts are never mutated after a write, so snapshots in the history can be shared;
everything handed out by :meth:`Storage.get` is a deep copy. Objects are kept in etcd key order
(``<namespace>/<name>``), which is the order of every LIST.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kubescale.base.clock import Clock
from kubescale.kube.resources import ResourceType

from . import errors
from .encoded import EncodedObjects
from .history import EventLog, StoredEvent
from .json_copy import json_copy
from .registry import ResourceRegistry

__all__ = ["Storage", "format_time", "parse_time"]


def format_time(moment: datetime) -> str:
    """metav1.Time: RFC 3339 in UTC with second precision, ``2026-01-01T00:00:00Z``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


_LISTED_SNAPSHOTS = 16
"""How many (collection, namespace, resourceVersion) snapshots :meth:`Storage.snapshots_at`
keeps: enough for the informers of one client paging through their collections at once."""


def _etcd_key(key: tuple[str, str]) -> str:
    """Objects are listed in the order of their etcd keys: ``<namespace>/<name>``."""
    return f"{key[0]}/{key[1]}"


class Storage:
    """All objects, keyed by ``(group, plural)`` then ``(namespace, name)``."""

    def __init__(self, *, clock: Clock, registry: ResourceRegistry, history_window: int) -> None:
        self.clock = clock
        self.registry = registry
        self.events = EventLog(window=history_window)
        self._rv = 0
        self._objects: dict[tuple[str, str], dict[tuple[str, str], dict[str, Any]]] = {}
        self.listeners: list[Callable[[StoredEvent], None]] = []
        self._listed: OrderedDict[tuple[Any, ...], list[dict[str, Any]]] = OrderedDict()
        """Recent :meth:`snapshots_at` answers (a snapshot at a committed resourceVersion
        never changes), so the pages of one paged LIST sort the collection once."""
        """Called synchronously after every committed event (CRD registration hooks here)."""
        self.encoded = EncodedObjects()
        """Each stored object's LIST-item JSON (:mod:`.encoded`), dropped on every write."""

    @property
    def resource_version(self) -> int:
        """The resourceVersion of the latest committed write."""
        return self._rv

    def bump_resource_version(self) -> int:
        """Take the next resourceVersion without an event (a bulk load's objects)."""
        self._rv += 1
        return self._rv

    def served(self, rt: ResourceType) -> ResourceType:
        """The served type for ``rt``'s group and plural, or 404 for an unknown resource."""
        found = self.registry.by_plural(rt.group, rt.plural)
        if found is None:
            raise errors.status_error(
                code=404, message="the server could not find the requested resource"
            )
        return found

    def bucket(self, rt: ResourceType) -> dict[tuple[str, str], dict[str, Any]]:
        return self._objects.setdefault(rt.key, {})

    @staticmethod
    def namespace_key(rt: ResourceType, namespace: str | None) -> str:
        if not rt.namespaced:
            return ""
        if not namespace:
            raise errors.bad_request(f"a namespace is required for {rt.plural}")
        return namespace

    def peek(
        self, rt: ResourceType, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        """The stored snapshot (shared: do not mutate), or ``None``."""
        return self.bucket(rt).get((self.namespace_key(rt, namespace), name))

    def get(self, rt: ResourceType, name: str, namespace: str | None = None) -> dict[str, Any]:
        """A copy of the object, or 404 NotFound."""
        rt = self.served(rt)
        found = self.peek(rt, name, namespace)
        if found is None:
            raise errors.not_found(rt, name)
        return json_copy(found)

    def snapshots(self, rt: ResourceType, namespace: str | None = None) -> list[dict[str, Any]]:
        """Current objects sorted by key (shared snapshots); ``namespace=None``: all namespaces."""
        bucket = self.bucket(rt)
        keys = sorted((k for k in bucket if namespace is None or k[0] == namespace), key=_etcd_key)
        return [bucket[k] for k in keys]

    def list_item(self, rt: ResourceType, obj: dict[str, Any], *, builtin: bool) -> bytes:
        """``obj`` (a snapshot of ``rt``) as a LIST item's JSON; encoded once while it is the
        stored object (:mod:`.encoded`)."""
        meta = obj["metadata"]
        ns = str(meta.get("namespace") or "") if rt.namespaced else ""
        name = str(meta["name"])
        stored = self.bucket(rt).get((ns, name))
        return self.encoded.item((rt.key, ns, name), obj, stored=stored, builtin=builtin)

    def snapshots_at(
        self, rt: ResourceType, namespace: str | None, rv: int
    ) -> list[dict[str, Any]]:
        """The objects as they were at resourceVersion ``rv``: undo the later events.

        410 Expired when ``rv`` is older than the history still held (etcd compaction).
        """
        at = min(rv, self._rv)
        if at < self._rv and at < self.events.floor:
            raise errors.expired(f"too old resource version: {rv} ({self.events.floor})")
        key = (rt.key, namespace, at)
        cached = self._listed.get(key)
        if cached is not None:
            self._listed.move_to_end(key)
            return cached
        found = self._snapshots_at(rt, namespace, at)
        self._listed[key] = found
        if len(self._listed) > _LISTED_SNAPSHOTS:
            self._listed.popitem(last=False)
        return found

    def _snapshots_at(
        self, rt: ResourceType, namespace: str | None, rv: int
    ) -> list[dict[str, Any]]:
        if rv >= self._rv:
            return self.snapshots(rt, namespace)
        state = {
            key: obj
            for key, obj in self.bucket(rt).items()
            if namespace is None or key[0] == namespace
        }
        for event in reversed(self.events.since(rv)):
            if event.resource != rt.key or (namespace is not None and event.namespace != namespace):
                continue
            key = (event.namespace, event.name)
            if event.previous is None:
                state.pop(key, None)
            else:
                state[key] = event.previous
        return [state[k] for k in sorted(state, key=_etcd_key)]

    def write(
        self,
        rt: ResourceType,
        *,
        ns: str,
        name: str,
        event_type: str,
        obj: dict[str, Any],
        previous: dict[str, Any] | None,
    ) -> None:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        self.bucket(rt)[(ns, name)] = obj
        self.encoded.forget(rt.key, ns, name)
        self._record(
            StoredEvent(
                type=event_type,
                resource=rt.key,
                namespace=ns,
                name=name,
                rv=self._rv,
                obj=obj,
                previous=previous,
            )
        )

    def _record(self, event: StoredEvent) -> None:
        self.events.append(event)
        for listener in list(self.listeners):
            listener(event)

    def purge(self, rt: ResourceType, name: str, namespace: str | None = None) -> None:
        """Remove an object at once, finalizers notwithstanding (garbage collection's job)."""
        ns = self.namespace_key(rt, namespace)
        if (ns, name) in self.bucket(rt):
            self.remove(rt, ns, name)

    def remove(self, rt: ResourceType, ns: str, name: str) -> None:
        """Delete from storage: a DELETED event carrying the last state at the new version."""
        previous = self.bucket(rt).pop((ns, name))
        self.encoded.forget(rt.key, ns, name)
        self._rv += 1
        gone = json_copy(previous)
        gone["metadata"]["resourceVersion"] = str(self._rv)
        self._record(
            StoredEvent(
                type="DELETED",
                resource=rt.key,
                namespace=ns,
                name=name,
                rv=self._rv,
                obj=gone,
                previous=previous,
            )
        )
        self.after_remove(rt, ns)

    def after_remove(self, rt: ResourceType, namespace: str) -> None:
        """Hook run after an object left storage (namespace finalization uses it)."""

    def expire_history(self) -> None:
        """Forget the change log (watch from any older resourceVersion → 410 Gone)."""
        self.events.expire(self._rv)
