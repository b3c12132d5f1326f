"""Shared informers: one list/watch per collection for the whole process.

Like client-go's ``SharedInformerFactory``: every part of kubescale that needs pods asks this
set for the pods informer and gets the same one, so the API server sees one watch per
collection however many loops read it. An informer is identified by resource type, namespace
and server-side selectors. Informers requested after :meth:`InformerSet.start` start at once.
Who asked for each collection is recorded (:meth:`InformerSet.requested_by` while a component
declares its caches), for the start-up line that lists what the process watches.
:meth:`InformerSet.readiness_check` is a ``/readyz`` check (``kubescale.runtime.health.Check``):
healthy once every informer has synced. :meth:`InformerSet.wait_for_resource_version` waits until
every informer reflects a resourceVersion (see
:meth:`kubescale.kube.informer.Informer.wait_for_resource_version`).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Iterator, Mapping

from kubescale.kube.client import KubeClient
from kubescale.kube.indexes import IndexFunc
from kubescale.kube.informer import Informer, InformerSettings
from kubescale.kube.listers import Lister
from kubescale.kube.resources import ResourceType

_Key = tuple[tuple[str, str], str | None, str | None, str | None]


class InformerSet:
    """Informers shared by key (see the module docstring)."""

    def __init__(
        self,
        *,
        client: KubeClient,
        settings: InformerSettings | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.client = client
        self.settings = settings or InformerSettings()
        self.rng = rng or client.rng
        self._informers: dict[_Key, Informer] = {}
        self._requesters: dict[_Key, list[str]] = {}
        self._indexers: dict[tuple[_Key, str], IndexFunc] = {}
        self._requester: str | None = None
        self._started = False

    @contextlib.contextmanager
    def requested_by(self, requester: str) -> Iterator[None]:
        """Attribute the informers requested inside the block to ``requester``."""
        previous, self._requester = self._requester, requester
        try:
            yield
        finally:
            self._requester = previous

    def informer(
        self,
        resource: ResourceType,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        indexes: Mapping[str, IndexFunc] | None = None,
    ) -> Informer:
        """The shared informer for this collection, created on first request, with ``indexes``
        added (an index name means one function: asking for the same name with another
        function is a programming error and raises ``ValueError``)."""
        ns = namespace if resource.namespaced else None
        key: _Key = (resource.key, ns, label_selector or None, field_selector or None)
        informer = self._lookup_or_create(key, resource, ns, label_selector, field_selector)
        requesters = self._requesters.setdefault(key, [])
        if self._requester is not None and self._requester not in requesters:
            requesters.append(self._requester)
        for name, func in (indexes or {}).items():
            known = self._indexers.get((key, name))
            if known is None:
                self._indexers[(key, name)] = func
                informer.add_indexer(name, func)
            elif known is not func:
                raise ValueError(f"index {name!r} of {informer.name} declared twice, differently")
        return informer

    def _lookup_or_create(
        self,
        key: _Key,
        resource: ResourceType,
        ns: str | None,
        label_selector: str | None,
        field_selector: str | None,
    ) -> Informer:
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
            )
            self._informers[key] = informer
            if self._started:
                informer.start()
        return informer

    def lister(self, resource: ResourceType, *, namespace: str | None = None) -> Lister:
        return self.informer(resource, namespace=namespace).lister

    @property
    def informers(self) -> list[Informer]:
        return list(self._informers.values())

    def collections(self) -> dict[str, tuple[str, ...]]:
        """Each watched collection (informer name) and who requested it, in request order."""
        return {
            informer.name: tuple(self._requesters.get(key, ()))
            for key, informer in self._informers.items()
        }

    def start(self) -> None:
        self._started = True
        for informer in self._informers.values():
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
