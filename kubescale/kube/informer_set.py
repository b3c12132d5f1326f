"""Shared informers: one list/watch per collection for the whole process.

Like client-go's ``SharedInformerFactory``: every part of kubescale that needs pods asks this
set for the pods informer and gets the same one, so the API server sees one watch per
collection however many loops read it. An informer is identified by resource type, namespace
and server-side selectors. Informers requested after :meth:`InformerSet.start` start at once.
Who asked for each collection is recorded (:meth:`InformerSet.requested_by` while a component
declares its caches), for the start-up line that lists what the process watches, and so that
each component waits for — and is ready with — exactly the collections it reads
(:meth:`InformerSet.requested`); collections requested inside :meth:`InformerSet.optional`
are ones the requester can do without (its component still starts when the server does not
serve them). A component that reaches an informer through a shared helper built by another
(the controller lookups) claims it with :meth:`InformerSet.claim`.
:meth:`InformerSet.readiness_check` is a ``/readyz`` check (``kubescale.runtime.health.Check``):
healthy once every informer has synced. :meth:`InformerSet.wait_for_resource_version` waits until
every informer reflects a resourceVersion (see
:meth:`kubescale.kube.informer.Informer.wait_for_resource_version`).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from kubescale.kube.client import KubeClient
from kubescale.kube.indexes import IndexFunc
from kubescale.kube.informer import Informer, InformerSettings
from kubescale.kube.listers import Lister
from kubescale.kube.resources import ResourceType
from kubescale.objects.projection import Projection, covers, projection_for, widest

_Key = tuple[tuple[str, str], str | None, str | None, str | None]
_Kind = tuple[str, str]
"""``(group, kind)``, as :data:`kubescale.objects.projection.PROJECTIONS` keys kinds."""


class InformerSet:
    """Informers shared by key (see the module docstring)."""

    def __init__(
        self,
        *,
        client: KubeClient,
        settings: InformerSettings | None = None,
        rng: random.Random | None = None,
        projected: bool = True,
    ) -> None:
        self.client = client
        self.projected = projected
        """Informers of the kinds :data:`kubescale.objects.projection.PROJECTIONS` declares
        keep projected objects (``False``: whole objects, for comparisons)."""
        self.settings = settings or InformerSettings()
        self.rng = rng or client.rng
        self._informers: dict[_Key, Informer[Any]] = {}
        self._requesters: dict[_Key, list[str]] = {}
        self._indexers: dict[tuple[_Key, str], IndexFunc] = {}
        self._requester: str | None = None
        self._optional_depth = 0
        self._optional: set[tuple[_Key, str]] = set()
        self._reads_now: Mapping[_Kind, Projection] = {}
        self._reads: dict[_Key, dict[str | None, Projection | None]] = {}
        """Per collection, per requester: the fields it reads (``None``: the kind's own
        projection, :meth:`reading`)."""
        self._started = False

    @contextlib.contextmanager
    def requested_by(self, requester: str) -> Iterator[None]:
        """Attribute the informers requested inside the block to ``requester``."""
        previous, self._requester = self._requester, requester
        try:
            yield
        finally:
            self._requester = previous

    @contextlib.contextmanager
    def optional(self) -> Iterator[None]:
        """Collections requested inside the block are optional for the requester: it works
        (degraded) without them, so their absence from the server does not stop it."""
        self._optional_depth += 1
        try:
            yield
        finally:
            self._optional_depth -= 1

    @contextlib.contextmanager
    def reading(self, reads: Mapping[_Kind, Projection]) -> Iterator[None]:
        """Collections of the kinds in ``reads`` requested (or claimed) inside the block are
        read by the requester only through these projections (fewer fields than the kinds'
        own). An informer caches the widest projection its requesters read
        (:func:`~kubescale.objects.projection.widest`); one requester that did not say what it
        reads gets the kind's own projection (or whole objects) for everyone. Decided when the
        informers start: a request after that, by a requester (:meth:`requested_by`), which
        needs more fields than an informer caches raises ``RuntimeError`` (a programming error:
        the cache would miss fields); a lookup outside ``requested_by`` declares nothing."""
        previous, self._reads_now = self._reads_now, {**self._reads_now, **reads}
        try:
            yield
        finally:
            self._reads_now = previous

    def informer(
        self,
        resource: ResourceType,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        indexes: Mapping[str, IndexFunc] | None = None,
    ) -> Informer[Any]:
        """The shared informer for this collection, created on first request, with ``indexes``
        added (an index name means one function: asking for the same name with another
        function is a programming error and raises ``ValueError``)."""
        ns = namespace if resource.namespaced else None
        key: _Key = (resource.key, ns, label_selector or None, field_selector or None)
        informer = self._lookup_or_create(key, resource, ns, label_selector, field_selector)
        self._attribute(key)
        self._note_reads(key, informer)
        for name, func in (indexes or {}).items():
            known = self._indexers.get((key, name))
            if known is None:
                self._indexers[(key, name)] = func
                informer.add_indexer(name, func)
            elif known is not func:
                raise ValueError(f"index {name!r} of {informer.name} declared twice, differently")
        return informer

    def claim(self, informers: Iterable[Informer[Any]]) -> None:
        """Attribute ``informers`` (already in this set) to the current requester, as if it had
        requested each of them."""
        if self._requester is None:
            return
        keys = {id(informer): key for key, informer in self._informers.items()}
        for informer in informers:
            key = keys.get(id(informer))
            if key is not None:
                self._attribute(key)
                self._note_reads(key, informer)

    def _note_reads(self, key: _Key, informer: Informer[Any]) -> None:
        if self._started and self._requester is None:
            return  # a lookup of a running informer (a loop's), not a component declaring
        resource = informer.resource
        narrow = self._reads_now.get((resource.group, resource.kind))
        per_requester = self._reads.setdefault(key, {})
        requester = self._requester
        if requester not in per_requester:
            per_requester[requester] = narrow
        else:
            known = per_requester[requester]
            per_requester[requester] = (
                None if known is None or narrow is None else widest(known, narrow)
            )
        if not self._started:
            return
        if not covers(informer.projection, self._projection(key, resource)):
            raise RuntimeError(
                f"{informer.name} is already cached with other fields than {requester or 'a'}"
                " reader reads: request it before the informers start"
            )

    def _projection(self, key: _Key, resource: ResourceType) -> Projection | None:
        """What the collection's informer caches (:meth:`reading`)."""
        if not self.projected:
            return None
        reads = list(self._reads.get(key, {}).values())
        narrow = [r for r in reads if r is not None]
        if not reads or len(narrow) < len(reads):
            return projection_for(resource.group, resource.kind)
        merged = narrow[0]
        for each in narrow[1:]:
            merged = widest(merged, each)
        return merged

    def _attribute(self, key: _Key) -> None:
        requester = self._requester
        if requester is None:
            return
        requesters = self._requesters.setdefault(key, [])
        if requester not in requesters:
            requesters.append(requester)
            if self._optional_depth:
                self._optional.add((key, requester))
        elif not self._optional_depth:
            self._optional.discard((key, requester))  # also asked for as required

    def requested(self, requester: str, *, optional: bool | None = None) -> list[Informer[Any]]:
        """The informers ``requester`` asked for, in request order; ``optional=True``: only
        those it can do without, ``False``: only those it needs."""
        return [
            informer
            for key, informer in self._informers.items()
            if requester in self._requesters.get(key, ())
            and (optional is None or ((key, requester) in self._optional) == optional)
        ]

    def discard(self, requester: str) -> list[str]:
        """Forget ``requester`` (a component that will not run): the informers only it asked
        for are removed (before :meth:`start`); their names."""
        if self._started:
            raise RuntimeError("requesters are discarded before the informers start")
        removed: list[str] = []
        for key in list(self._informers):
            requesters = self._requesters.get(key)
            if not requesters or requester not in requesters:
                continue
            requesters.remove(requester)
            self._optional.discard((key, requester))
            self._reads.get(key, {}).pop(requester, None)
            if not requesters:
                removed.append(self._informers.pop(key).name)
                del self._requesters[key]
                self._reads.pop(key, None)
                for index_key in [k for k in self._indexers if k[0] == key]:
                    del self._indexers[index_key]
        return removed

    def _lookup_or_create(
        self,
        key: _Key,
        resource: ResourceType,
        ns: str | None,
        label_selector: str | None,
        field_selector: str | None,
    ) -> Informer[Any]:
        informer = self._informers.get(key)
        if informer is None:
            informer = Informer(
                client=self.client,
                resource=resource,
                namespace=ns,
                label_selector=label_selector or None,
                field_selector=field_selector or None,
                settings=self.settings,
                rng=self.rng,
                projection=(
                    projection_for(resource.group, resource.kind) if self.projected else None
                ),
            )
            self._informers[key] = informer
            if self._started:
                self._reads[key] = {
                    self._requester: self._reads_now.get((resource.group, resource.kind))
                }
                informer.projection = self._projection(key, resource)
                informer.start()
        return informer

    def lister(self, resource: ResourceType, *, namespace: str | None = None) -> Lister[Any]:
        return self.informer(resource, namespace=namespace).lister

    @property
    def informers(self) -> list[Informer[Any]]:
        return list(self._informers.values())

    def collections(self) -> dict[str, tuple[str, ...]]:
        """Each watched collection (informer name) and who requested it, in request order."""
        return {
            informer.name: tuple(self._requesters.get(key, ()))
            for key, informer in self._informers.items()
        }

    def start(self) -> None:
        self._started = True
        for key, informer in self._informers.items():
            if not informer.running:
                informer.projection = self._projection(key, informer.resource)
            informer.start()

    async def stop(self) -> None:
        self._started = False
        await asyncio.gather(*(informer.stop() for informer in self._informers.values()))

    def unsynced(self) -> list[str]:
        """Names of informers that have not completed their first list."""
        return [informer.name for informer in self._informers.values() if not informer.synced]

    async def wait_synced(self, within: float | None = None) -> bool:
        """Wait until every informer has synced; ``False`` if ``within`` seconds pass first."""
        informers = list(self._informers.values())
        results = await asyncio.gather(*(i.wait_synced(within) for i in informers))
        return all(results)

    async def wait_for_resource_version(self, resource_version: str, *, within: float) -> bool:
        """Wait until every informer's cache reflects ``resource_version`` (all events up to it
        applied, handlers run); ``False`` if ``within`` event-loop seconds pass first."""
        informers = list(self._informers.values())
        results = await asyncio.gather(
            *(i.wait_for_resource_version(resource_version, within=within) for i in informers)
        )
        return all(results)

    def readiness_check(self) -> str | None:
        waiting = self.unsynced()
        return f"caches not synced: {', '.join(sorted(waiting))}" if waiting else None
