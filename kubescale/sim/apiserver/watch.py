"""WATCH: a chunked ``application/json`` stream of ``{"type": ..., "object": ...}`` lines.

The rules are those of kube-apiserver's watch cache (``cacher.go``/``cache_watcher.go``):

* ``resourceVersion`` unset or ``"0"``: synthetic ADDED events for the current (matching)
  objects, then live events; ``resourceVersion=N``: every event after N, then live events.
  N older than the change log → one ``ERROR`` event carrying a 410 Status
  (``too old resource version: N (oldest)``) and the stream ends;
* with a label/field selector an update is MODIFIED while the object matches before and after,
  ADDED when it starts matching and DELETED (the previous content at the new resourceVersion)
  when it stops matching (``cacheWatcher.convertToWatchEvent``);
* ``allowWatchBookmarks=true``: a BOOKMARK every ``bookmark_interval`` seconds of real time,
  carrying only kind, apiVersion and ``metadata.resourceVersion`` (the server's latest, safe
  because the queue is empty whenever a bookmark is sent);
* :meth:`~.server.ApiServer.bookmark_watches` queues a BOOKMARK at the server's current
  resourceVersion behind the events already queued, sent at once by every watch that allows
  bookmarks (the simulator's way to know a client's caches reflect the store);
* ``timeoutSeconds`` ends the stream cleanly; without it the server picks a timeout in
  [30, 60) minutes (``--min-request-timeout``), as upstream does.

A dropped watch (fault injection) closes the connection without the terminating chunk, which a
client sees as a broken stream rather than a clean end.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable
from typing import Any, Final

from aiohttp import web

from kubescale.base.logs import component_logger
from kubescale.kube.resources import ResourceType

from .encoded import encode_json
from .history import CLOSE, DROP, Bookmark, StoredEvent, Subscription
from .listing import Selection
from .store import ObjectStore

__all__ = ["WatchRequest", "convert_event", "serve_watch"]

log = component_logger("apiserver.watch")

MIN_REQUEST_TIMEOUT: Final = 1800.0
_POLL: Final = 1.0
"""How often an idle stream checks that its client is still connected."""


class WatchRequest:
    """The parsed parameters of one watch."""

    def __init__(
        self,
        *,
        rt: ResourceType,
        namespace: str | None,
        selection: Selection,
        resource_version: str,
        allow_bookmarks: bool,
        timeout_seconds: float | None,
        transform: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        self.rt = rt
        self.namespace = namespace
        self.selection = selection
        self.resource_version = resource_version
        self.allow_bookmarks = allow_bookmarks
        self.timeout_seconds = timeout_seconds
        self.transform = transform
        """Applied to every event's object: another API version's view (HPA autoscaling/v1)."""

    def out(self, line: bytes) -> bytes:
        """``line`` as this watcher sees it (:attr:`transform` applied)."""
        if self.transform is None:
            return line
        event = json.loads(line)
        if event.get("type") != "ERROR":
            event["object"] = self.transform(event["object"])
        return _line(str(event["type"]), event["object"])


def _line(event_type: str, obj: dict[str, Any]) -> bytes:
    return encode_json({"type": event_type, "object": obj}) + b"\n"


def convert_event(selection: Selection, event: StoredEvent) -> bytes | None:
    """The line this watcher sees for ``event`` (``None``: not visible through the selector)."""
    current = event.type != "DELETED" and selection.matches(event.obj)
    before = event.previous is not None and selection.matches(event.previous)
    if event.type == "DELETED":
        return _line("DELETED", event.obj) if before else None
    if current and before:
        return _line("MODIFIED", event.obj)
    if current:
        return _line("ADDED", event.obj)
    if before and event.previous is not None:
        gone = dict(event.previous)
        gone["metadata"] = {**event.previous["metadata"], "resourceVersion": str(event.rv)}
        return _line("DELETED", gone)
    return None


def _bookmark(watch: WatchRequest, rv: int) -> bytes:
    return _line(
        "BOOKMARK",
        {
            "kind": watch.rt.kind,
            "apiVersion": watch.rt.group_version,
            "metadata": {"resourceVersion": str(rv)},
        },
    )


def _too_old(rv: int, floor: int) -> bytes:
    return _line(
        "ERROR",
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": f"too old resource version: {rv} ({floor})",
            "reason": "Expired",
            "code": 410,
        },
    )


async def serve_watch(
    request: web.Request,
    *,
    store: ObjectStore,
    watch: WatchRequest,
    bookmark_interval: float,
    rng: random.Random,
) -> web.StreamResponse:
    """Stream events until the timeout, a drop, server shutdown or the client going away."""
    loop = asyncio.get_running_loop()
    timeout = watch.timeout_seconds
    if timeout is None or timeout <= 0:
        timeout = MIN_REQUEST_TIMEOUT * (1.0 + rng.random())
    deadline = loop.time() + timeout
    rv_text = watch.resource_version
    initial: list[bytes] = []
    subscription: Subscription | None = None
    expired: bytes | None = None
    if rv_text in ("", "0"):
        for obj in store.snapshots(watch.rt, watch.namespace):
            if watch.selection.matches(obj):
                initial.append(_line("ADDED", obj))
        subscription = store.events.subscribe(
            resource=watch.rt.key, namespace=watch.namespace, after=None
        )
    else:
        rv = int(rv_text)
        if rv < store.events.floor:
            expired = _too_old(rv, store.events.floor)
        else:
            subscription = store.events.subscribe(
                resource=watch.rt.key, namespace=watch.namespace, after=rv
            )

    response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    response.enable_chunked_encoding()
    try:
        await response.prepare(request)
        if expired is not None:
            await response.write(expired)
            await response.write_eof()
            return response
        assert subscription is not None
        for line in initial:
            await response.write(watch.out(line))
        dropped = await _pump(
            request,
            response,
            subscription=subscription,
            watch=watch,
            store=store,
            deadline=deadline,
            bookmark_interval=bookmark_interval,
        )
        if dropped:
            if request.transport is not None:
                request.transport.abort()
            return response
        await response.write_eof()
    except (ConnectionResetError, ConnectionError):
        log.debug("watch client went away", extra={"fields": {"resource": watch.rt.plural}})
    finally:
        if subscription is not None:
            store.events.unsubscribe(subscription)
    return response


async def _pump(
    request: web.Request,
    response: web.StreamResponse,
    *,
    subscription: Subscription,
    watch: WatchRequest,
    store: ObjectStore,
    deadline: float,
    bookmark_interval: float,
) -> bool:
    """Forward events until the deadline; ``True`` if the stream must be dropped."""
    loop = asyncio.get_running_loop()
    next_bookmark = loop.time() + bookmark_interval
    queue = subscription.queue
    while True:
        now = loop.time()
        if now >= deadline:
            return False
        if watch.allow_bookmarks and now >= next_bookmark and queue.empty():
            await response.write(watch.out(_bookmark(watch, store.resource_version)))
            next_bookmark = now + bookmark_interval
            continue
        if not queue.empty():
            # Take a queued event directly: with a bookmark already due the wait below would be
            # 0 s, and Python 3.11's wait_for(queue.get(), 0) cancels the get without taking
            # the item, so the stream would spin forever delivering nothing.
            item = queue.get_nowait()
        else:
            wake = min(deadline, next_bookmark if watch.allow_bookmarks else deadline, now + _POLL)
            try:
                item = await asyncio.wait_for(queue.get(), timeout=max(0.0, wake - now))
            except TimeoutError:
                if request.transport is None or request.transport.is_closing():
                    return False
                continue
        if item is DROP:
            return True
        if item is CLOSE:
            return False
        if isinstance(item, Bookmark):
            if watch.allow_bookmarks:
                await response.write(watch.out(_bookmark(watch, item.rv)))
                next_bookmark = loop.time() + bookmark_interval
            continue
        if isinstance(item, StoredEvent):
            line = convert_event(watch.selection, item)
            if line is not None:
                await response.write(watch.out(line))
