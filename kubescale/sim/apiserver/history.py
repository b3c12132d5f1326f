"""The server-wide change log: bounded watch history and live subscribers.

Every committed write appends one :class:`StoredEvent` carrying the new resourceVersion, the
object after the write and the object before it. Like the watch cache of kube-apiserver
(``staging/src/k8s.io/apiserver/pkg/storage/cacher/watch_cache.go``), only the last
``window`` events are kept; a watch that asks to start from a resourceVersion older than the
oldest one still known gets ``410 Expired: too old resource version: X (Y)``.

The previous object of each event serves two purposes: selector-filtered watches turn a
MODIFIED into ADDED/DELETED when the object starts/stops matching (the ``cacheWatcher`` rule),
and a consistent snapshot at an older resourceVersion (continue tokens, resourceVersionMatch
``Exact``) is rebuilt by undoing the events after it.

Events are delivered synchronously, in resourceVersion order, into each subscriber's unbounded
queue at commit time; a subscriber registered with :meth:`EventLog.subscribe` receives the
backlog after its resourceVersion and then every later event, with no gap and no duplicate,
because both happen in one step of the event loop.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CLOSE", "DROP", "Bookmark", "EventLog", "StoredEvent", "Subscription"]

ObjectKey = tuple[str, str]
"""``(namespace, name)``; namespace is ``""`` for cluster-scoped objects."""


@dataclass(frozen=True, kw_only=True)
class StoredEvent:
    """One committed change. ``obj``/``previous`` are shared snapshots: never mutate them."""

    type: str
    """``ADDED``, ``MODIFIED`` or ``DELETED``."""
    resource: tuple[str, str]
    """``(group, plural)`` of the changed object."""
    namespace: str
    name: str
    rv: int
    obj: dict[str, Any]
    previous: dict[str, Any] | None


@dataclass(frozen=True)
class Bookmark:
    """Queued by :meth:`EventLog.bookmark`: a watch that allows bookmarks sends one carrying
    ``rv``. Queued behind every event committed before it, so a client that reads it has seen
    all of them."""

    rv: int


DROP = object()
"""Queued to a subscription by :meth:`EventLog.drop`: the watch must end abruptly."""
CLOSE = object()
"""Queued by :meth:`EventLog.close_all` (server shutdown): the watch ends cleanly."""


@dataclass(eq=False)
class Subscription:
    """A live watcher's inbox: :class:`StoredEvent` items, or :data:`DROP`."""

    resource: tuple[str, str]
    namespace: str | None
    queue: asyncio.Queue[object] = field(default_factory=asyncio.Queue)

    def wants(self, event: StoredEvent) -> bool:
        return event.resource == self.resource and (
            self.namespace is None or event.namespace == self.namespace
        )


class EventLog:
    """Bounded history of :class:`StoredEvent` plus the set of live subscriptions."""

    def __init__(self, *, window: int) -> None:
        if window < 1:
            raise ValueError("the watch history window must hold at least one event")
        self._window = window
        self._events: deque[StoredEvent] = deque()
        self._floor = 0
        self._subscriptions: set[Subscription] = set()

    @property
    def floor(self) -> int:
        """The oldest resourceVersion a watch or snapshot may start from."""
        return self._floor

    def append(self, event: StoredEvent) -> None:
        self._events.append(event)
        while len(self._events) > self._window:
            dropped = self._events.popleft()
            self._floor = dropped.rv
        for subscription in self._subscriptions:
            if subscription.wants(event):
                subscription.queue.put_nowait(event)

    def expire(self, current_rv: int) -> None:
        """Forget everything: only ``current_rv`` and later remain reachable."""
        self._events.clear()
        self._floor = current_rv

    def since(self, rv: int) -> list[StoredEvent]:
        """Events with a resourceVersion above ``rv`` (caller checked ``rv >= floor``)."""
        return [event for event in self._events if event.rv > rv]

    def subscribe(
        self, *, resource: tuple[str, str], namespace: str | None, after: int | None
    ) -> Subscription:
        """Register a watcher; with ``after`` its queue starts with the backlog after ``after``."""
        subscription = Subscription(resource=resource, namespace=namespace)
        if after is not None:
            for event in self.since(after):
                if subscription.wants(event):
                    subscription.queue.put_nowait(event)
        self._subscriptions.add(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        self._subscriptions.discard(subscription)

    def drop(self, predicate: Callable[[Subscription], bool]) -> int:
        """Tell the matching subscriptions to end their streams abruptly; how many there were."""
        count = 0
        for subscription in list(self._subscriptions):
            if predicate(subscription):
                subscription.queue.put_nowait(DROP)
                count += 1
        return count

    def bookmark(self, rv: int) -> int:
        """Queue a :class:`Bookmark` at ``rv`` to every live subscription; how many there were.

        The watches that allow bookmarks send it once the events queued before it are out
        (the simulator's settling step: a client's caches have then caught up with ``rv``).
        """
        for subscription in self._subscriptions:
            subscription.queue.put_nowait(Bookmark(rv))
        return len(self._subscriptions)

    def close_all(self) -> None:
        for subscription in self._subscriptions:
            subscription.queue.put_nowait(CLOSE)

    @property
    def subscriptions(self) -> int:
        return len(self._subscriptions)
