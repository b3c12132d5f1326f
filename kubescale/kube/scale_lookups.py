"""Controllers kubescale has no informer for, looked up in the background and kept in memory.

Upstream's admission controller resolves a pod's owner of a kind it does not watch (a custom
resource with a ``/scale`` subresource: an Argo Rollout, a Cluster API MachineDeployment ...)
by calling the API server from the request: discovery for the kind, a GET of the ``/scale``
subresource (with a cache in front, ``controller_cache_storage.go``). kubescale's admission path
never calls the API server, so:

* :meth:`ScaleLookups.lookup`, :meth:`ScaleLookups.is_scalable` and
  :meth:`ScaleLookups.selector` answer from memory only. On first sight of a kind or an object
  they answer "unknown" (``None``/``False``) — the pod is admitted unmutated — and queue what
  is missing; :meth:`ScaleLookups.resolve_pending` then asks the API server off the request
  path. The next pod of that controller finds the answer.
* A loop of the process (:class:`kubescale.kube.shared_cache.SharedCache`'s lookups loop)
  calls :meth:`~ScaleLookups.resolve_pending` and :meth:`~ScaleLookups.refresh_stale`, woken at
  once by a new miss (:attr:`ScaleLookups.wanted`) and every ``SWEEP_PERIOD``.

The references come from pods anyone with pod-create rights writes, so the lookups are built to
be steered by nobody:

* **Nothing unchecked reaches a URL.** An owner's ``apiVersion``, ``kind``, namespace and name
  are validated (:mod:`kubescale.kube.api_paths`: group a DNS-1123 subdomain, version a DNS-1035
  label, kind a kind name, namespace a DNS-1123 label, name a DNS-1123 subdomain as the API
  server requires of controllers); an invalid one is answered "not scalable" at once and counted
  (:attr:`ScaleLookups.refused`), nothing queued. Every path is then built by the one path
  builder.
* **Discovery is per group list and group version, not per kind.** Whether a group version is
  served comes from the ``/apis`` group list (one GET answers it for every group; the core group
  serves ``v1`` only); a served group version's resource list (``/apis/<g>/<v>``) answers every
  kind in it. A made-up group or a made-up kind in a real group costs no request of its own:
  the list and each document are fetched again at most once per ``negative_freshness`` when
  asked for something they do not hold (a CRD installed late is found within 30 s), and at
  most once per ``freshness`` otherwise (stale answers are served while the refresh is queued;
  upstream resets its discovery mapper every 5 min).
* **GETs are rate-limited.** Every request of the lookups takes a token from a token bucket on
  the clock (:class:`LookupLimits`: 5/s, burst 20, client-go's default shape); what finds it
  empty stays queued for the next run. A storm of admissions naming objects that do not exist
  becomes at most ``burst + qps × seconds`` GETs, whatever its size.
* **Every cache is bounded by size and age.** Group-version documents and objects are LRUs
  (:class:`LookupLimits`); the queues hold at most ``max_pending`` keys each (more are dropped:
  a later read queues them again); entries unread for ``lifetime`` are dropped.

Ages: an object found is fetched again by :meth:`refresh_stale` after ``freshness`` (10 min,
upstream's ``scaleCacheEntryFreshnessTime``); entries nobody read for ``lifetime`` (1 h,
``scaleCacheEntryLifetime``) are dropped. A negative answer — an object that does not exist, a
kind not served — holds ``negative_freshness`` (30 s): read after that, it is queued again (the
old answer stands meanwhile), so an unknown reference nobody asks about again costs nothing.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from kubescale.base.clock import Clock
from kubescale.base.logs import component_logger
from kubescale.kube.api_paths import (
    API_GROUP_LIST,
    InvalidPathSegment,
    is_dns1035_label,
    is_dns1123_label,
    is_dns1123_subdomain,
    split_api_version,
    validate_kind,
)
from kubescale.kube.client import KubeClient
from kubescale.kube.errors import KubeApiError, KubeError
from kubescale.kube.resources import ResourceType, by_kind
from kubescale.kube.token_bucket import TokenBucket
from kubescale.objects.selectors import LabelSelector, SelectorError, parse_label_selector
from kubescale.objects.views import status_of

__all__ = [
    "FRESHNESS",
    "LIFETIME",
    "NEGATIVE_FRESHNESS",
    "REPLICATION_CONTROLLERS",
    "LookupLimits",
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

_CORE_VERSIONS: Final = frozenset({"v1"})
"""The legacy group under ``/api`` has only ever served ``v1``."""


@dataclass(frozen=True, kw_only=True)
class LookupLimits:
    """Bounds of the lookups: request rate, cache sizes, queue length."""

    qps: float = 5.0
    """Requests per second the lookups may send, on average (client-go's default QPS)."""
    burst: int = 20
    """Requests that may be sent at once after a quiet spell."""
    max_group_versions: int = 256
    """Group-version resource lists kept (least recently read dropped first)."""
    max_objects: int = 10_000
    """Objects (found or not) kept (least recently read dropped first)."""
    max_pending: int = 1_000
    """Group versions, and objects, waiting to be looked up; further misses are not queued."""

    def __post_init__(self) -> None:
        if self.qps <= 0 or self.burst < 1:
            raise ValueError("the lookups need qps > 0 and burst >= 1")
        if min(self.max_group_versions, self.max_objects, self.max_pending) < 1:
            raise ValueError("the lookups' caches and queues need room for one entry")


K = TypeVar("K")
V = TypeVar("V")


class _Lru(Generic[K, V]):
    """A dict bounded by size: reading moves a key to the end, the front is dropped first."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[K, V] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: K) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self._size:
            self._items.popitem(last=False)

    def pop(self, key: K) -> None:
        self._items.pop(key, None)

    def items(self) -> Iterator[tuple[K, V]]:
        return iter(list(self._items.items()))


class _Unknown:
    """Not known yet: the answer is being looked up."""


UNKNOWN: Final = _Unknown()

_ObjectKey = tuple[str, str, str, str]
"""``(apiVersion, kind, namespace, name)``."""
_GroupVersion = tuple[str, str]


@dataclass
class _Document:
    """A group version's resources by kind; ``None``: not served (or it could not be read)."""

    resources: dict[str, ResourceType] | None
    fetched_at: float
    read_at: float


@dataclass
class _Entry:
    obj: dict[str, Any] | None
    """``None``: the object does not exist (or cannot be read)."""
    selector: LabelSelector | None
    fetched_at: float
    read_at: float


def _catalogued(api_version: str, kind: str) -> ResourceType | None:
    if (api_version, kind) == (REPLICATION_CONTROLLERS.group_version, REPLICATION_CONTROLLERS.kind):
        return REPLICATION_CONTROLLERS
    return by_kind(api_version, kind)


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
        limits: LookupLimits | None = None,
    ) -> None:
        self._client = client
        self._clock = clock
        self.freshness = freshness
        self.negative_freshness = negative_freshness
        self.lifetime = lifetime
        self.limits = limits if limits is not None else LookupLimits()
        self._served: frozenset[_GroupVersion] | None = None
        """The ``/apis`` group list: every served (group, version); ``None`` until read."""
        self._served_at = 0.0
        self._documents: _Lru[_GroupVersion, _Document] = _Lru(self.limits.max_group_versions)
        self._entries: _Lru[_ObjectKey, _Entry] = _Lru(self.limits.max_objects)
        self._want_group_list = False
        self._pending_documents: dict[_GroupVersion, None] = {}
        self._pending_objects: dict[_ObjectKey, None] = {}
        self._bucket = TokenBucket(
            qps=self.limits.qps, burst=self.limits.burst, now=clock.monotonic()
        )
        self.wanted = asyncio.Event()
        """Set by a miss: something is queued for :meth:`resolve_pending`."""
        self.fetches = 0
        """Requests sent."""
        self.failures = 0
        """Requests that failed (not counting a NotFound)."""
        self.refused = 0
        """References refused unlooked-up: an invalid group, version, kind, namespace or name."""
        self.throttled = 0
        """Runs that stopped at the rate limit with lookups still queued."""

    # -- sizes ---------------------------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Group versions and objects waiting to be looked up (and the group list)."""
        return (
            int(self._want_group_list) + len(self._pending_documents) + len(self._pending_objects)
        )

    @property
    def cached_group_versions(self) -> int:
        return len(self._documents)

    @property
    def cached_objects(self) -> int:
        return len(self._entries)

    # -- the request path: memory only --------------------------------------------------------

    def is_scalable(self, api_version: str, kind: str) -> bool:
        """Whether ``kind`` serves ``/scale``, as last discovered; unknown → ``False`` + queued."""
        resource = self._kind(api_version, kind)
        return isinstance(resource, ResourceType) and "scale" in resource.subresources

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

    def _kind(self, api_version: str, kind: str) -> ResourceType | _Unknown | None:
        """The kind's resource, ``None`` when not served (or invalid), or :data:`UNKNOWN`."""
        try:
            group, version = split_api_version(api_version)
            validate_kind(kind)
        except InvalidPathSegment:
            self.refused += 1
            return None
        catalogued = _catalogued(api_version, kind)
        if catalogued is not None:
            return catalogued
        now = self._clock.monotonic()
        if not group:
            if version not in _CORE_VERSIONS:
                return None
        elif self._served is None:
            self._queue_group_list()
            return UNKNOWN
        elif (group, version) not in self._served:
            if now - self._served_at >= self.negative_freshness:
                self._queue_group_list()
            return None
        key = (group, version)
        document = self._documents.get(key)
        if document is None:
            self._queue_document(key)
            return UNKNOWN
        document.read_at = now
        found = document.resources.get(kind) if document.resources is not None else None
        age = now - document.fetched_at
        if age >= (self.freshness if found is not None else self.negative_freshness):
            self._queue_document(key)  # the old answer stands until the new one comes
        return found

    def _entry(self, key: _ObjectKey) -> _Entry | None:
        api_version, kind, namespace, name = key
        resource = self._kind(api_version, kind)
        if resource is None:
            return None
        if isinstance(resource, ResourceType) and "scale" not in resource.subresources:
            return None
        if not is_dns1123_label(namespace) or not is_dns1123_subdomain(name):
            self.refused += 1
            return None
        entry = self._entries.get(key)
        if entry is None:
            self._queue_object(key)
            return None
        now = self._clock.monotonic()
        entry.read_at = now
        if entry.obj is None and now - entry.fetched_at >= self.negative_freshness:
            self._queue_object(key)
        return entry

    def _queue_group_list(self) -> None:
        if not self._want_group_list:
            self._want_group_list = True
            self.wanted.set()

    def _queue_document(self, key: _GroupVersion) -> None:
        if key not in self._pending_documents and (
            len(self._pending_documents) < self.limits.max_pending
        ):
            self._pending_documents[key] = None
            self.wanted.set()

    def _queue_object(self, key: _ObjectKey) -> None:
        if key not in self._pending_objects and (
            len(self._pending_objects) < self.limits.max_pending
        ):
            self._pending_objects[key] = None
            self.wanted.set()

    # -- off the request path: the API server -------------------------------------------------

    def _take_token(self) -> bool:
        return self._bucket.try_accept(self._clock.monotonic())

    async def resolve_pending(self) -> int:
        """Look up what is queued, as far as the rate limit allows; returns how many requests
        were sent. What the limit holds back stays queued for the next run."""
        self.wanted.clear()
        sent = 0
        while True:
            progress = 0
            if self._want_group_list:
                if not self._take_token():
                    break
                self._want_group_list = False
                await self._fetch_group_list()
                progress += 1
            while self._pending_documents:
                if not self._take_token():
                    break
                key = next(iter(self._pending_documents))
                del self._pending_documents[key]
                await self._fetch_document(key)
                progress += 1
            progress += await self._resolve_objects()
            sent += progress
            if progress == 0:
                break
        if self.pending:
            self.throttled += 1
        return sent

    async def _resolve_objects(self) -> int:
        sent = 0
        for key in list(self._pending_objects):
            resource = self._kind(key[0], key[1])
            if resource is UNKNOWN:
                continue  # its discovery is queued (or held back by the rate limit)
            if not isinstance(resource, ResourceType) or "scale" not in resource.subresources:
                del self._pending_objects[key]
                continue
            if not self._take_token():
                break
            del self._pending_objects[key]
            await self._fetch_object(key, resource)
            sent += 1
        return sent

    async def refresh_stale(self) -> int:
        """Fetch objects found longer than ``freshness`` ago again (as far as the rate limit
        allows); drop entries unread for ``lifetime``. Returns how many were fetched."""
        now = self._clock.monotonic()
        for key, entry in self._entries.items():
            if now - entry.read_at >= self.lifetime:
                self._entries.pop(key)
        for gv, document in self._documents.items():
            if now - document.read_at >= self.lifetime:
                self._documents.pop(gv)
        refreshed = 0
        for key, entry in self._entries.items():
            if entry.obj is None or now - entry.fetched_at < self.freshness:
                continue
            resource = self._kind(key[0], key[1])
            if not isinstance(resource, ResourceType):
                continue
            if not self._take_token():
                self.throttled += 1
                break
            await self._fetch_object(key, resource)
            refreshed += 1
        return refreshed

    async def _get(self, path_resource: ResourceType, what: str, **request: Any) -> Any:
        self.fetches += 1
        try:
            return await self._client.request(
                verb="get", method="GET", resource=path_resource, **request
            )
        except KubeApiError as err:
            if err.not_found:
                return None
            self.failures += 1
            log.warning("discovery failed", extra={"fields": {"what": what, "error": err.message}})
        except KubeError as err:
            self.failures += 1
            log.warning("discovery failed", extra={"fields": {"what": what, "error": str(err)}})
        raise _Failed

    async def _fetch_group_list(self) -> None:
        placeholder = ResourceType(
            group="", version="v1", kind="APIGroupList", plural="", namespaced=False
        )
        now = self._clock.monotonic()
        try:
            document = await self._get(placeholder, "group list", path=API_GROUP_LIST)
        except _Failed:
            self._served_at = now  # keep what was known; ask again after negative_freshness
            if self._served is None:
                self._served = frozenset()
            return
        self._served = frozenset(_served_group_versions(document))
        self._served_at = now

    async def _fetch_document(self, key: _GroupVersion) -> None:
        group, version = key
        placeholder = ResourceType(
            group=group, version=version, kind="APIResourceList", plural="", namespaced=False
        )
        now = self._clock.monotonic()
        previous = self._documents.get(key)
        read_at = previous.read_at if previous is not None else now
        try:
            document = await self._get(
                placeholder, f"{group}/{version}", path=placeholder.base_path()
            )
        except _Failed:
            if previous is not None:  # keep the last good answer on a transient error
                previous.fetched_at = now
                return
            document = None
        resources = (
            _resources_from_discovery(document.get("resources") or [], group, version)
            if isinstance(document, dict)
            else None
        )
        self._documents.put(key, _Document(resources=resources, fetched_at=now, read_at=read_at))

    async def _fetch_object(self, key: _ObjectKey, resource: ResourceType) -> None:
        _, _, namespace, name = key
        now = self._clock.monotonic()
        previous = self._entries.get(key)
        read_at = previous.read_at if previous is not None else now
        obj: dict[str, Any] | None = None
        selector: LabelSelector | None = None
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
        self._entries.put(key, _Entry(obj=obj, selector=selector, fetched_at=now, read_at=read_at))


class _Failed(Exception):
    """A discovery request failed (logged and counted already)."""


def _served_group_versions(document: Any) -> Iterator[_GroupVersion]:
    """Every ``(group, version)`` of an ``APIGroupList`` (malformed entries skipped)."""
    groups = document.get("groups") if isinstance(document, dict) else None
    for group in groups if isinstance(groups, list) else []:
        versions = group.get("versions") if isinstance(group, dict) else None
        for entry in versions if isinstance(versions, list) else []:
            group_version = entry.get("groupVersion") if isinstance(entry, dict) else None
            if not isinstance(group_version, str):
                continue
            try:
                yield split_api_version(group_version)
            except InvalidPathSegment:
                continue


def _resources_from_discovery(
    entries: Iterable[Any], group: str, version: str
) -> dict[str, ResourceType]:
    """An ``APIResourceList``'s resources by kind, with their subresources; a resource whose
    name is not a DNS-1035 label is skipped (it could not be put in a path)."""
    plurals: dict[str, tuple[str, bool]] = {}
    subresources: dict[str, set[str]] = {}
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        name = str(entry.get("name") or "")
        plural, sep, subresource = name.partition("/")
        if sep:
            subresources.setdefault(plural, set()).add(subresource)
            continue
        kind = entry.get("kind")
        if isinstance(kind, str) and is_dns1035_label(plural) and kind not in plurals:
            plurals[kind] = (plural, bool(entry.get("namespaced", True)))
    return {
        kind: ResourceType(
            group=group,
            version=version,
            kind=kind,
            plural=plural,
            namespaced=namespaced,
            subresources=frozenset(s for s in subresources.get(plural, ()) if is_dns1035_label(s)),
        )
        for kind, (plural, namespaced) in plurals.items()
    }


def _scale_selector(scale: dict[str, Any]) -> LabelSelector | None:
    # labels.Parse(scale.Status.Selector): an empty or missing selector selects everything.
    text = status_of(scale).get("selector")
    if not isinstance(text, str):
        text = ""
    try:
        return parse_label_selector(text)
    except SelectorError:
        return None
