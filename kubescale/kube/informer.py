"""An informer: a local mirror of one resource collection, kept current by list → watch.

The loop is client-go's Reflector (``tools/cache/reflector.go``) for one
:class:`~kubescale.kube.resources.ResourceType`, on raw dicts:

1. **List** every object (paged, a consistent read) and reconcile the cache with it; the list's
   ``metadata.resourceVersion`` is where the watch starts. The informer is *synced* after a
   successful list, and *unsynced* again from the moment a re-list is needed (``410 Gone``, a
   ``4xx`` that starts over) until that re-list is stored: the cache then misses whatever
   changed while it was not watching, so a loop must not decide on it (client-go's
   ``HasSynced`` only covers the first list; kubescale's loops wait again, see
   :mod:`kubescale.runtime.loop_runner`). Handlers and listers keep serving the last state.
   A list answered ``404`` means the server does not serve the resource (a CRD not installed):
   the informer is *absent* — logged once as a warning naming the resource, reported by
   :attr:`Informer.absent` — until a list succeeds; it keeps retrying at the backoff's cap.
2. **Watch** from that resourceVersion with ``allowWatchBookmarks=true`` and a jittered server
   timeout ``timeoutSeconds`` uniform in ``[min_watch_timeout, max_watch_timeout)`` (client-go:
   ``minWatchTimeout * (1 + rand)``, 5-10 min) so a fleet of clients does not reconnect in step.
   Every ADDED/MODIFIED/DELETED is applied and its resourceVersion remembered; a BOOKMARK only
   moves the resourceVersion.
3. How a watch ends decides what comes next:

   - clean end (the server's timeout) → watch again from the last resourceVersion at once;
   - nothing received, not even a bookmark, for ``inactivity_timeout`` (the connection is
     presumed dead: kopf's "silent stall" case) → watch again from the last resourceVersion;
   - ``410 Gone`` as an HTTP status or as an ``ERROR`` event with code 410 → list again now;
   - ``429`` (HTTP or ERROR event) → wait ``Retry-After`` (or a backoff step), watch again;
   - ``5xx`` or a transport failure (refused, reset, stream cut) → backoff, then retry the same
     step (re-list if the list failed, else re-watch from the last resourceVersion);
   - any other error (403, 404 of a CRD not installed) → backoff, then re-list;
   - a watch that ends cleanly within a second having delivered nothing → backoff (client-go's
     "very short watch" rule), so a server that closes watches at once is not hammered.

   Backoff is jittered, capped and exponential (:mod:`kubescale.kube.backoff`, reflector defaults
   0.8 s → 30 s, jitter 1.0), timed on the injected clock; it starts over after a list
   succeeds or a watch delivers an event.

**Handler semantics (what a re-list does).** Handlers get ``on_add(obj)``,
``on_update(old, new)`` and ``on_delete(obj)`` exactly once per change the cache sees. After a
re-list the cache is *diffed* against the list rather than replaced wholesale: objects that are
new fire ``on_add``; objects whose resourceVersion changed fire ``on_update``; objects whose uid
changed (deleted and re-created under the same name while we were not watching) fire
``on_delete(old)`` then ``on_add(new)``; objects gone from the list fire ``on_delete`` with the
last state we knew (client-go's ``DeletedFinalStateUnknown`` case, unwrapped); unchanged objects
fire nothing. client-go's DeltaFIFO ``Replace`` instead queues a ``Replaced`` delta for every
listed object, which shared informers deliver as ``OnUpdate(old, new)`` even when nothing
changed; we drop those no-op updates, which no kubescale handler needs, so "each change once"
holds across re-lists. Periodic resync (``Sync`` deltas) is not implemented for the same reason:
loops re-read listers on their own interval. A watch event that repeats what the cache already
holds (same uid and resourceVersion) is ignored, as is a DELETED for an unknown key.

Handlers are plain callables run on the event loop, in registration order; an exception in one
is logged and does not stop the informer. A handler added after objects are cached first
receives ``on_add`` for each of them (client-go ``AddEventHandler``).

**Projected objects.** An informer built with a ``projection`` (the shared set gives one to
every kind :data:`kubescale.objects.projection.PROJECTIONS` declares) caches, and hands its
handlers, a new dict holding only the fields kubescale reads, strings interned; the decoded
response is dropped. A re-list diffs projected objects the same way (by uid and
resourceVersion, both kept), so each cached object is always the projection of the server's.

**Catching up.** :meth:`Informer.wait_for_resource_version` waits until the cache reflects a
given resourceVersion: every event up to it has been applied and its handlers have run. The
resourceVersion moves with each list, event and BOOKMARK, so a server that sends a bookmark at
its current resourceVersion (the in-process API server's ``bookmark_watches``) lets a caller
know the cache has caught up with the store. resourceVersions are compared as integers (etcd's
and the in-process server's are); Kubernetes calls them opaque, so this is a tool for servers
known to number them, like the simulator's.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, cast

from kubescale.base.collector import bulk_allocation
from kubescale.base.logs import component_logger
from kubescale.base.tasks import cancel_and_wait
from kubescale.kube.backoff import Backoff, BackoffPolicy
from kubescale.kube.client import KubeClient
from kubescale.kube.errors import KubeApiError, KubeTransportError, failure_log_level
from kubescale.kube.indexes import IndexedCache, IndexFunc, object_key
from kubescale.kube.listers import Lister, ObjectT
from kubescale.kube.resources import ResourceType
from kubescale.kube.served_resources import api_name
from kubescale.kube.watch_stream import MAX_WATCH_EVENT_BYTES, WatchEventTooLarge, WatchInactive
from kubescale.objects.projection import Projection, project
from kubescale.objects.views import Meta

log = component_logger("kube.informer")

ObjectHandler = Callable[[ObjectT], None]
UpdateHandler = Callable[[ObjectT, ObjectT], None]


@dataclass(frozen=True, kw_only=True)
class EventHandlers(Generic[ObjectT]):
    """Callbacks for changes in an informer's cache; any of them may be omitted. Typed with
    the informer's objects (``EventHandlers[Pod]`` for an ``Informer[Pod]``)."""

    on_add: ObjectHandler[ObjectT] | None = None
    on_update: UpdateHandler[ObjectT] | None = None
    on_delete: ObjectHandler[ObjectT] | None = None


@dataclass(frozen=True, kw_only=True)
class InformerSettings:
    """Timeouts and backoff of the list/watch loop (defaults: client-go / kopf values)."""

    min_watch_timeout: float = 300.0
    max_watch_timeout: float = 600.0
    """``timeoutSeconds`` is drawn uniformly from ``[min, max)`` for each watch."""
    inactivity_timeout: float = 80.0
    """Seconds without a byte on an open watch (bookmarks come every ~60 s) before reconnecting."""
    connect_timeout: float = 10.0
    page_size: int = 500
    backoff: BackoffPolicy = field(default_factory=BackoffPolicy)
    max_watch_event_bytes: int = MAX_WATCH_EVENT_BYTES
    """The longest watch event read; a longer one ends the watch and the informer re-lists."""

    def __post_init__(self) -> None:
        if not 1.0 <= self.min_watch_timeout <= self.max_watch_timeout:
            raise ValueError("watch timeouts need 1 <= min_watch_timeout <= max_watch_timeout")
        if self.inactivity_timeout <= 0 or self.connect_timeout <= 0:
            raise ValueError("inactivity_timeout and connect_timeout must be positive")
        if self.max_watch_event_bytes <= 0:
            raise ValueError("max_watch_event_bytes must be positive")


@dataclass
class InformerStats:
    """Live counters of one informer (observability and tests)."""

    lists: int = 0
    watches: int = 0
    events: int = 0
    bookmarks: int = 0
    gone: int = 0
    """Re-lists forced by 410."""
    inactivity_reconnects: int = 0
    errors: int = 0
    """Failed lists/watches that were backed off (5xx, 429, transport, other)."""
    oversized_events: int = 0
    """Watches ended by an event over ``max_watch_event_bytes`` (each followed by a re-list)."""


class Informer(Generic[ObjectT]):
    """One resource collection mirrored in memory (see the module docstring); its
    :attr:`lister` reads the cache as ``ObjectT`` (``Informer[Pod]``, ``Informer[Any]``)."""

    def __init__(
        self,
        *,
        client: KubeClient,
        resource: ResourceType,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        settings: InformerSettings | None = None,
        rng: random.Random | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,
        projection: Projection | None = None,
    ) -> None:
        if "watch" not in resource.verbs or "list" not in resource.verbs:
            raise ValueError(f"{resource.plural} cannot be listed and watched")
        self.client = client
        self.resource = resource
        self.namespace = namespace if resource.namespaced else None
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.settings = settings or InformerSettings()
        self.projection = projection
        """What the cache keeps of each object (:mod:`kubescale.objects.projection`); ``None``:
        whole objects."""
        self.clock = client.clock
        self.rng = rng or client.rng
        self.cache = IndexedCache(indexers)
        self.lister: Lister[ObjectT] = Lister(self.cache, resource)
        self.stats = InformerStats()
        self._handlers: list[EventHandlers[ObjectT]] = []
        self._synced = asyncio.Event()
        self._ever_synced = False
        self._absent = False
        self._changed = asyncio.Event()
        self._resource_version = ""
        self._version_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._task: asyncio.Task[None] | None = None

    # -- public surface ---------------------------------------------------------------------

    @property
    def name(self) -> str:
        """``plural`` (``plural@namespace`` when scoped), for logs and readiness reports."""
        scope = f"@{self.namespace}" if self.namespace else ""
        return f"{self.resource.plural}{scope}"

    @property
    def synced(self) -> bool:
        """True while the cache reflects a stored list and no re-list is pending (module
        docstring)."""
        return self._synced.is_set()

    @property
    def absent(self) -> bool:
        """True while the last list was answered ``404``: the server does not serve the resource
        (a CRD not installed)."""
        return self._absent

    @property
    def api_name(self) -> str:
        """``plural.group/version`` (``plural/v1`` for the core group), as an operator looks
        it up (``kubectl api-resources``)."""
        return api_name(self.resource)

    @property
    def resource_version(self) -> str:
        """The resourceVersion the cache reflects (the next watch starts after it)."""
        return self._resource_version

    def add_handlers(self, handlers: EventHandlers[ObjectT]) -> None:
        self._handlers.append(handlers)
        if handlers.on_add is not None:
            for obj in self.cache.values():
                self._call(handlers.on_add, obj)

    def add_indexer(self, name: str, func: IndexFunc) -> None:
        self.cache.add_indexer(name, func)

    async def wait_synced(self, within: float | None = None) -> bool:
        """Wait until :attr:`synced`; ``False`` if ``within`` seconds (on the clock) pass first."""
        if self._synced.is_set():
            return True
        if within is None:
            await self._synced.wait()
            return True
        waiter = asyncio.ensure_future(self._synced.wait())
        sleeper = asyncio.ensure_future(self.clock.sleep(within))
        try:
            await asyncio.wait({waiter, sleeper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await cancel_and_wait(waiter, sleeper)
        return self._synced.is_set()

    async def state_changed(self) -> None:
        """Return at the next change of :attr:`synced` or :attr:`absent`."""
        await self._changed.wait()

    def _notify_state(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def reflects(self, resource_version: str) -> bool:
        """Whether the cache has processed everything up to ``resource_version``."""
        wanted = _version_number(resource_version)
        current = _version_number(self._resource_version)
        if wanted is None or current is None:
            return bool(self._resource_version) and self._resource_version == resource_version
        return current >= wanted

    async def wait_for_resource_version(self, resource_version: str, *, within: float) -> bool:
        """Wait until the cache reflects ``resource_version`` (see the module docstring).

        ``within`` bounds the wait in event-loop seconds: this waits on I/O (the watch
        delivering events and bookmarks), not on the clock's time. ``False`` if it passed first.
        """
        if self.reflects(resource_version):
            return True
        wanted = _version_number(resource_version)
        if wanted is None:
            return False
        reached: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._version_waiters.append((wanted, reached))
        try:
            async with asyncio.timeout(within):
                await reached
        except TimeoutError:
            return self.reflects(resource_version)
        finally:
            self._version_waiters = [w for w in self._version_waiters if w[1] is not reached]
        return True

    def _set_resource_version(self, resource_version: str) -> None:
        self._resource_version = resource_version
        if not self._version_waiters:
            return
        current = _version_number(resource_version)
        if current is None:
            return
        for wanted, reached in self._version_waiters:
            if wanted <= current and not reached.done():
                reached.set_result(None)

    def start(self) -> None:
        """Run the list/watch loop in a background task (idempotent)."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self.run(), name=f"informer:{self.name}")

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    # -- the loop -----------------------------------------------------------------------------

    async def run(self) -> None:
        """List and watch until cancelled."""
        backoff = Backoff(self.settings.backoff, clock=self.clock, rng=self.rng)
        need_list = True
        while True:
            try:
                if need_list:
                    await self._list_and_sync()
                    need_list = False
                    backoff.reset()
                await self._watch_once(backoff)
            except WatchInactive:
                self.stats.inactivity_reconnects += 1
                log.info("watch inactive; reconnecting", extra={"fields": {"informer": self.name}})
            except KubeApiError as err:
                if err.gone:
                    self.stats.gone += 1
                    need_list = True
                    self._unsync("resourceVersion expired")
                    log.info(
                        "resourceVersion expired; re-listing",
                        extra={"fields": {"informer": self.name, "message": err.message}},
                    )
                    continue
                self.stats.errors += 1
                absent = need_list and err.not_found
                # 401: the transport reports it once per backoff step for the whole client;
                # a resource not served is reported once (_mark_absent)
                level = logging.DEBUG if absent else failure_log_level(err, logging.WARNING)
                log.log(
                    level,
                    "list/watch failed",
                    extra={
                        "fields": {
                            "informer": self.name,
                            "code": err.code,
                            "reason": err.reason,
                            "message": err.message,
                        }
                    },
                )
                if err.code != 429 and err.code < 500:
                    if absent:
                        self._mark_absent(err)
                    need_list = True  # 403, 404 (CRD not installed) ...: start over
                    self._unsync(f"list/watch failed with {err.code}")
                if err.too_many_requests and err.retry_after is not None:
                    backoff.next_delay()
                    await self.clock.sleep(err.retry_after)
                else:
                    await backoff.sleep()
            except WatchEventTooLarge as err:
                # Re-watching from the same resourceVersion would read the same line again:
                # start over from a list (paged), which reads the object's current state.
                self.stats.errors += 1
                self.stats.oversized_events += 1
                log.warning(
                    "watch event too large; dropped the watch, re-listing",
                    extra={
                        "fields": {
                            "informer": self.name,
                            "limit_bytes": err.limit,
                            "received_bytes": err.received,
                        }
                    },
                )
                need_list = True
                self._unsync("watch event too large")
                await backoff.sleep()
            except KubeTransportError as err:
                self.stats.errors += 1
                # reported by the transport once per backoff step for the whole client
                log.debug(
                    "list/watch connection failed",
                    extra={"fields": {"informer": self.name, "error": str(err)}},
                )
                await backoff.sleep()
            except Exception:
                # Anything else (an undecodable list body, a bug) must not end the loop and
                # leave a silently stale cache: start over from a list.
                self.stats.errors += 1
                log.exception(
                    "list/watch failed unexpectedly", extra={"fields": {"informer": self.name}}
                )
                need_list = True
                self._unsync("list/watch failed unexpectedly")
                await backoff.sleep()

    async def _list_and_sync(self) -> None:
        # The listed collection is a burst of long-lived, acyclic containers: collect less
        # often while it is decoded, projected, stored and handed to the handlers.
        with bulk_allocation():
            result = await self.client.list_all(
                self.resource,
                namespace=self.namespace,
                label_selector=self.label_selector,
                field_selector=self.field_selector,
                page_size=self.settings.page_size,
                transform=self._projected,
            )
            self.stats.lists += 1
            self._reconcile(result.items)
        self._set_resource_version(result.resource_version)
        if self._absent:
            self._absent = False
            log.warning(
                "the API server serves the resource now",
                extra={"fields": {"informer": self.name, "resource": self.api_name}},
            )
        if not self._synced.is_set():
            log.info(
                "cache synced",
                extra={
                    "fields": {
                        "informer": self.name,
                        "objects": len(self.cache),
                        "relisted": self._ever_synced,
                    }
                },
            )
            self._ever_synced = True
            self._synced.set()
            self._notify_state()

    def _unsync(self, why: str) -> None:
        """A re-list is needed: the cache is not synced until it is stored."""
        if not self._synced.is_set():
            return
        self._synced.clear()
        self._notify_state()
        log.info(
            "cache not synced until the re-list completes",
            extra={"fields": {"informer": self.name, "reason": why}},
        )

    def _mark_absent(self, err: KubeApiError) -> None:
        if self._absent:
            return
        self._absent = True
        self._notify_state()
        log.warning(
            "the API server does not serve this resource; retrying",
            extra={
                "fields": {
                    "informer": self.name,
                    "resource": self.api_name,
                    "message": err.message,
                }
            },
        )

    def next_watch_timeout(self) -> int:
        """``timeoutSeconds`` for the next watch: uniform in ``[min, max)``, whole seconds."""
        low, high = self.settings.min_watch_timeout, self.settings.max_watch_timeout
        return max(1, int(low + self.rng.random() * (high - low)))

    def _watch_query(self) -> list[tuple[str, str]]:
        query = [
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", self._resource_version),
            ("timeoutSeconds", str(self.next_watch_timeout())),
        ]
        if self.label_selector:
            query.append(("labelSelector", self.label_selector))
        if self.field_selector:
            query.append(("fieldSelector", self.field_selector))
        return query

    async def _watch_once(self, backoff: Backoff) -> None:
        stream = await self.client.open_watch(
            self.resource,
            namespace=self.namespace,
            query=self._watch_query(),
            inactivity_timeout=self.settings.inactivity_timeout,
            connect_timeout=self.settings.connect_timeout,
            max_event_bytes=self.settings.max_watch_event_bytes,
        )
        self.stats.watches += 1
        # Connection lifetime is I/O time, measured on the event loop like the timeouts.
        opened = asyncio.get_running_loop().time()
        try:
            while True:
                event = await stream.next_event()
                if event is None:
                    break
                self._apply(event)
                backoff.reset()
        finally:
            await stream.close()
        if stream.events_read == 0 and asyncio.get_running_loop().time() - opened < 1.0:
            # client-go: "very short watch ... watch lasted less than a second and no items
            # received" is treated as an error, so a server that closes at once is not hammered.
            self.stats.errors += 1
            await backoff.sleep()

    # -- cache updates ------------------------------------------------------------------------

    def _apply(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        obj: dict[str, Any] = event["object"]
        if kind == "ERROR":
            # An ERROR event ends the watch like the same HTTP status would (see run()).
            raise KubeApiError.from_status(obj)
        rv = Meta(obj).raw.get("resourceVersion")
        if kind == "BOOKMARK":
            self.stats.bookmarks += 1
            if rv:
                self._set_resource_version(str(rv))
            return
        self.stats.events += 1
        obj = self._projected(obj)
        if kind == "DELETED":
            old = self.cache.remove(object_key(obj))
            if old is not None:
                self._notify_delete(obj)
        else:
            self._store(obj)
        if rv:
            self._set_resource_version(str(rv))

    def _projected(self, obj: dict[str, Any]) -> dict[str, Any]:
        """The object as cached: self-describing (list items carry no apiVersion/kind) and,
        for a projected kind, only the fields kubescale reads — a new dict, so nothing of the
        decoded response (``managedFields``, unread status) stays referenced."""
        if "apiVersion" not in obj:
            obj["apiVersion"] = self.resource.group_version
        if "kind" not in obj:
            obj["kind"] = self.resource.kind
        if self.projection is None:
            return obj
        projected: dict[str, Any] = project(obj, self.projection)
        return projected

    def _store(self, obj: dict[str, Any]) -> None:
        key = object_key(obj)
        old = self.cache.get(key)
        if old is None:
            self.cache.upsert(obj)
            self._notify_add(obj)
            return
        old_meta, new_meta = Meta(old).raw, Meta(obj).raw
        if old_meta.get("uid") != new_meta.get("uid"):
            self.cache.upsert(obj)
            self._notify_delete(old)
            self._notify_add(obj)
        elif old_meta.get("resourceVersion") != new_meta.get("resourceVersion"):
            self.cache.upsert(obj)
            self._notify_update(old, obj)

    def _reconcile(self, items: list[dict[str, Any]]) -> None:
        listed: set[str] = set()
        for obj in items:  # already projected page by page (list_all's transform)
            listed.add(object_key(obj))
            self._store(obj)
        for key in self.cache.keys_snapshot():
            if key not in listed:
                old = self.cache.remove(key)
                if old is not None:
                    self._notify_delete(old)

    def _notify_add(self, obj: dict[str, Any]) -> None:
        for handlers in self._handlers:
            if handlers.on_add is not None:
                self._call(handlers.on_add, obj)

    def _notify_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        for handlers in self._handlers:
            if handlers.on_update is not None:
                self._call2(handlers.on_update, old, new)

    def _notify_delete(self, obj: dict[str, Any]) -> None:
        for handlers in self._handlers:
            if handlers.on_delete is not None:
                self._call(handlers.on_delete, obj)

    def _call(self, handler: ObjectHandler[ObjectT], obj: dict[str, Any]) -> None:
        try:
            # The transport boundary: the cache's JSON as the informer's typed objects.
            handler(cast(ObjectT, obj))
        except Exception:
            log.exception("event handler failed", extra={"fields": {"informer": self.name}})

    def _call2(
        self, handler: UpdateHandler[ObjectT], old: dict[str, Any], new: dict[str, Any]
    ) -> None:
        try:
            # The transport boundary, as in _call.
            handler(cast(ObjectT, old), cast(ObjectT, new))
        except Exception:
            log.exception("event handler failed", extra={"fields": {"informer": self.name}})


def _version_number(resource_version: str) -> int | None:
    try:
        return int(resource_version)
    except ValueError:
        return None


__all__ = ["EventHandlers", "Informer", "InformerSettings", "InformerStats"]
