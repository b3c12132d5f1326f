"""Controllers kubescale has no informer for, looked up in the background and kept in memory.

Upstream's admission controller resolves a pod's owner of a kind it does not watch (a custom
resource with a ``/scale`` subresource: an Argo Rollout, a Cluster API MachineDeployment ...,
and ReplicationControllers here, which the in-process API server does not serve) by calling the
API server from the request: discovery for the kind, a GET of the ``/scale`` subresource (with a
cache in front, ``controller_cache_storage.go``). kubescale's admission path never calls the API
server, so:

* :meth:`ScaleLookups.lookup`, :meth:`ScaleLookups.is_scalable` and
  :meth:`ScaleLookups.selector` answer from memory only. On first sight of a kind or an object
  they answer "unknown" (``None``/``False``) — the pod is admitted unmutated — and queue the
  key; :meth:`ScaleLookups.resolve_pending` then asks the API server (discovery of the kind's
  group/version and a GET of its ``/scale``) off the request path. The next pod
  of that controller finds the answer.
* Entries older than ``freshness`` (10 min, upstream's ``scaleCacheEntryFreshnessTime``) are
  fetched again by :meth:`refresh_stale`; entries nobody read for ``lifetime`` (1 h,
  ``scaleCacheEntryLifetime``) are dropped. A kind's discovery result is kept for ``freshness``
  too (upstream resets its discovery mapper every 5 min). Negative answers — an object that
  does not exist, a kind not served — are kept only
  ``negative_freshness`` (30 s), so a controller created just after its first pod, or a CRD
  installed late, is found soon.
* A loop of the process (:class:`kubescale.kube.shared_cache.SharedCache`'s lookups loop)
  calls both, woken at once by a new miss (:attr:`ScaleLookups.wanted`).

A kind without ``/scale`` (or not served at all) is remembered as not scalable; an object that
does not exist is remembered as absent. Both count as misses until refreshed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from kubescale.base.clock import Clock
from kubescale.base.logs import component_logger
from kubescale.kube.client import KubeClient
from kubescale.kube.errors import KubeApiError, KubeError
from kubescale.kube.resources import ResourceType, by_kind
from kubescale.kube.selectors import LabelSelector, SelectorError, parse_label_selector

__all__ = [
    "FRESHNESS",
    "LIFETIME",
    "NEGATIVE_FRESHNESS",
    "REPLICATION_CONTROLLERS",
    "ScaleLookups",
]

log = component_logger("kube.scale-lookups")

FRESHNESS: Final = 600.0
NEGATIVE_FRESHNESS: Final = 30.0
LIFETIME: Final = 3600.0
SWEEP_PERIOD: Final = 7.0
"""How often the background task looks for stale entries (upstream ``scaleCacheLoopPeriod``)."""

REPLICATION_CONTROLLERS: Final = ResourceType(
    group="",
    version="v1",
    kind="ReplicationController",
    plural="replicationcontrollers",
    namespaced=True,
    subresources=frozenset({"status", "scale"}),
)
"""Well-known to VPA but not in kubescale's catalogue: read through this cache."""

_ObjectKey = tuple[str, str, str, str]
_KindKey = tuple[str, str]


@dataclass
class _Kind:
    resource: ResourceType | None
    """``None``: the kind is not served (or has no ``/scale``)."""
    fetched_at: float


@dataclass
class _Entry:
    obj: dict[str, Any] | None
    """``None``: the object does not exist (or cannot be read)."""
    selector: LabelSelector | None
    fetched_at: float
    read_at: float


def _split_api_version(api_version: str) -> tuple[str, str]:
    group, sep, version = api_version.rpartition("/")
    return (group, version) if sep else ("", api_version)


class ScaleLookups:
    """Objects and ``/scale`` selectors of controllers without an informer (see module doc)."""

    def __init__(
        self,
        *,
        client: KubeClient,
        clock: Clock,
        freshness: float = FRESHNESS,
        negative_freshness: float = NEGATIVE_FRESHNESS,
        lifetime: float = LIFETIME,
    ) -> None:
        self._client = client
        self._clock = clock
        self.freshness = freshness
        self.negative_freshness = negative_freshness
        self.lifetime = lifetime
        self._kinds: dict[_KindKey, _Kind] = {}
        self._entries: dict[_ObjectKey, _Entry] = {}
        self._pending_kinds: dict[_KindKey, None] = {}
        self._pending_objects: dict[_ObjectKey, None] = {}
        self.wanted = asyncio.Event()
        """Set by a miss: something is queued for :meth:`resolve_pending`."""
        self.fetches = 0
        self.failures = 0

    # -- the request path: memory only --------------------------------------------------------

    @property
    def pending(self) -> int:
        """Kinds and objects waiting to be looked up."""
        return len(self._pending_kinds) + len(self._pending_objects)

    def is_scalable(self, api_version: str, kind: str) -> bool:
        """Whether ``kind`` serves ``/scale``, as last discovered; unknown → ``False`` + queued."""
        known = self._kinds.get((api_version, kind))
        if known is None:
            self._queue_kind((api_version, kind))
            return False
        return known.resource is not None and "scale" in known.resource.subresources

    def lookup(
        self, api_version: str, kind: str, namespace: str, name: str
    ) -> dict[str, Any] | None:
        """The object as last fetched; unknown → ``None`` and queued for a fetch."""
        entry = self._entry((api_version, kind, namespace, name))
        return entry.obj if entry is not None else None

    def selector(
        self, api_version: str, kind: str, namespace: str, name: str
    ) -> LabelSelector | None:
        """The ``/scale`` ``status.selector`` as last fetched; unknown → ``None`` and queued."""
        entry = self._entry((api_version, kind, namespace, name))
        return entry.selector if entry is not None else None

    def _entry(self, key: _ObjectKey) -> _Entry | None:
        entry = self._entries.get(key)
        if entry is None:
            self._queue_object(key)
            return None
        entry.read_at = self._clock.monotonic()
        return entry

    def _queue_kind(self, key: _KindKey) -> None:
        if key not in self._pending_kinds:
            self._pending_kinds[key] = None
            self.wanted.set()

    def _queue_object(self, key: _ObjectKey) -> None:
        if key not in self._pending_objects:
            self._pending_objects[key] = None
            self.wanted.set()

    # -- off the request path: the API server -------------------------------------------------

    async def resolve_pending(self) -> int:
        """Look up everything queued; returns how many keys were resolved."""
        self.wanted.clear()
        resolved = 0
        while self._pending_kinds or self._pending_objects:
            kinds, self._pending_kinds = list(self._pending_kinds), {}
            objects, self._pending_objects = list(self._pending_objects), {}
            for kind_key in kinds:
                await self._resolve_kind(kind_key)
                resolved += 1
            for object_key in objects:
                await self._resolve_object(object_key)
                resolved += 1
        return resolved

    async def refresh_stale(self) -> int:
        """Fetch entries older than ``freshness`` again, drop those unread for ``lifetime``."""
        now = self._clock.monotonic()
        for key, entry in list(self._entries.items()):
            if now - entry.read_at >= self.lifetime:
                del self._entries[key]
        stale_kinds = [
            key
            for key, kind in self._kinds.items()
            if now - kind.fetched_at >= self._fresh_for(kind.resource is not None)
        ]
        stale = [
            key
            for key, entry in self._entries.items()
            if now - entry.fetched_at >= self._fresh_for(entry.obj is not None)
        ]
        for kind_key in stale_kinds:
            await self._resolve_kind(kind_key)
        for object_key in stale:
            await self._resolve_object(object_key)
        return len(stale_kinds) + len(stale)

    def _fresh_for(self, found: bool) -> float:
        return self.freshness if found else self.negative_freshness

    async def _resource(self, api_version: str, kind: str) -> ResourceType | None:
        known = self._kinds.get((api_version, kind))
        if known is None:
            await self._resolve_kind((api_version, kind))
            known = self._kinds.get((api_version, kind))
        return known.resource if known is not None else None

    async def _resolve_kind(self, key: _KindKey) -> None:
        api_version, kind = key
        resource = _catalogued(api_version, kind)
        if resource is None:
            resource = await self._discover(api_version, kind)
        self._kinds[key] = _Kind(resource=resource, fetched_at=self._clock.monotonic())

    async def _discover(self, api_version: str, kind: str) -> ResourceType | None:
        group, version = _split_api_version(api_version)
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        placeholder = ResourceType(
            group=group, version=version, kind="APIResourceList", plural="", namespaced=False
        )
        try:
            self.fetches += 1
            document = await self._client.request(
                verb="get", method="GET", resource=placeholder, path=path
            )
        except KubeApiError as err:
            if not err.not_found:
                self.failures += 1
                log.warning(
                    "discovery failed",
                    extra={"fields": {"groupVersion": api_version, "error": err.message}},
                )
            return None
        except KubeError as err:
            self.failures += 1
            log.warning(
                "discovery failed",
                extra={"fields": {"groupVersion": api_version, "error": str(err)}},
            )
            return None
        return _resource_from_discovery(document.get("resources") or [], group, version, kind)

    async def _resolve_object(self, key: _ObjectKey) -> None:
        api_version, kind, namespace, name = key
        now = self._clock.monotonic()
        previous = self._entries.get(key)
        read_at = previous.read_at if previous is not None else now
        resource = await self._resource(api_version, kind)
        obj: dict[str, Any] | None = None
        selector: LabelSelector | None = None
        if resource is not None and "scale" in resource.subresources and namespace and name:
            try:
                # Only /scale is read, as upstream does: it proves the controller exists and
                # gives its selector, and RBAC need grant no more than get on */scale (a
                # wildcard get on every kind would include Secrets). A Scale carries no owner
                # references, so the controller walk ends at such a kind, as upstream's does.
                self.fetches += 1
                obj = await self._client.get_scale(resource, name, namespace=namespace)
                selector = _scale_selector(obj)
            except KubeApiError as err:
                if not err.not_found:
                    self.failures += 1
                    log.warning(
                        "controller lookup failed",
                        extra={"fields": {"controller": "/".join(key), "error": err.message}},
                    )
                    if previous is not None:  # keep the last good answer on a transient error
                        previous.fetched_at = now
                        return
                obj, selector = None, None
            except KubeError as err:
                self.failures += 1
                log.warning(
                    "controller lookup failed",
                    extra={"fields": {"controller": "/".join(key), "error": str(err)}},
                )
                if previous is not None:
                    previous.fetched_at = now
                    return
        self._entries[key] = _Entry(obj=obj, selector=selector, fetched_at=now, read_at=read_at)


def _catalogued(api_version: str, kind: str) -> ResourceType | None:
    if (api_version, kind) == (REPLICATION_CONTROLLERS.group_version, REPLICATION_CONTROLLERS.kind):
        return REPLICATION_CONTROLLERS
    return by_kind(api_version, kind)


def _resource_from_discovery(
    entries: Iterable[Any], group: str, version: str, kind: str
) -> ResourceType | None:
    plural = ""
    namespaced = True
    names: set[str] = set()
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        name = str(entry.get("name") or "")
        names.add(name)
        if "/" not in name and entry.get("kind") == kind:
            plural = name
            namespaced = bool(entry.get("namespaced", True))
    if not plural:
        return None
    subresources = frozenset(
        name.split("/", 1)[1] for name in names if name.startswith(plural + "/")
    )
    return ResourceType(
        group=group,
        version=version,
        kind=kind,
        plural=plural,
        namespaced=namespaced,
        subresources=subresources,
    )


def _scale_selector(scale: dict[str, Any]) -> LabelSelector | None:
    # labels.Parse(scale.Status.Selector): an empty or missing selector selects everything.
    text = (scale.get("status") or {}).get("selector")
    if not isinstance(text, str):
        text = ""
    try:
        return parse_label_selector(text)
    except SelectorError:
        return None
