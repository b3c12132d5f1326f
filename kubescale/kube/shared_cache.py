"""The process's one view of the cluster: shared informers and /scale lookups.

``kubescale serve`` and ``kubescale simulate`` build exactly one :class:`SharedCache` and hand
it to every component. Components declare what they read by asking it for informers while they
are built (:meth:`kubescale.kube.informer_set.InformerSet.requested_by` attributes each
collection to them), so each collection is listed and watched once however many systems read
it, and :meth:`SharedCache.collections` can say at start-up what the process watches and why.

* :attr:`SharedCache.informers` — the informers (one per collection, namespace and selector);
* :attr:`SharedCache.scale_lookups` — controllers of kinds without an informer, by ``/scale``;
* :attr:`SharedCache.controllers` — the controller lookups over both
  (:class:`~kubescale.kube.controller_lookups.ControllerLookups`), created on first use (it
  requests the well-known controller informers);
* :meth:`SharedCache.one_per_process` — one object of a kind the layers above define, for the
  whole process: the coordination layer keeps its brain there (the disruption ledger every
  system that budgets disruptions counts, :func:`kubescale.coordination.brain.brain_of`).

Readiness (``/readyz``) is per component: "every informer that component requested has
synced" (:mod:`kubescale.runtime.cache_gate`), and its loops wait for the same.
The scale lookups resolve their misses off the request path: :meth:`SharedCache.resolve_lookups`
is run by a loop of the process (every replica), woken at once by a new miss
(:attr:`SharedCache.lookups_wanted`).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import TypeVar

from kubescale.base.clock import Clock
from kubescale.base.coordination import DEFAULT_COORDINATION, Coordination
from kubescale.kube.client import KubeClient
from kubescale.kube.controller_lookups import ControllerLookups
from kubescale.kube.informer import InformerSettings
from kubescale.kube.informer_set import InformerSet
from kubescale.kube.scale_lookups import ScaleLookups

__all__ = ["SharedCache"]

_T = TypeVar("_T")


class SharedCache:
    """Informers and lookups shared by every component of the process (module docstring)."""

    def __init__(
        self,
        *,
        client: KubeClient,
        clock: Clock,
        settings: InformerSettings | None = None,
        rng: random.Random | None = None,
        coordination: Coordination = DEFAULT_COORDINATION,
    ) -> None:
        self.coordination = coordination
        """How the systems coordinate: whether they count each other's disruptions."""
        self.informers = InformerSet(client=client, settings=settings, rng=rng)
        self.scale_lookups = ScaleLookups(client=client, clock=clock)
        self._controllers: ControllerLookups | None = None
        self._per_process: dict[type, object] = {}

    def one_per_process(self, kind: type[_T], create: Callable[[], _T]) -> _T:
        """The process's one object of ``kind`` (made by ``create`` on first use): what every
        component of the process shares beyond the informers, defined above this layer (the
        coordination layer's brain). Explicit, not a global keyed by the cache."""
        found = self._per_process.get(kind)
        if isinstance(found, kind):
            return found
        made = create()
        self._per_process[kind] = made
        return made

    @property
    def controllers(self) -> ControllerLookups:
        """Controllers by reference (requests the well-known controller informers: each
        component that uses them is attributed them, not only the first)."""
        if self._controllers is None:
            self._controllers = ControllerLookups(
                informers=self.informers, scale_lookups=self.scale_lookups
            )
        else:
            self.informers.claim(self._controllers.informers)
        return self._controllers

    @property
    def lookups_wanted(self) -> asyncio.Event:
        """Set when a lookup missed: the lookups loop should run now, not at its interval."""
        return self.scale_lookups.wanted

    async def resolve_lookups(self) -> None:
        """Resolve the queued /scale lookups and refresh stale answers."""
        await self.scale_lookups.resolve_pending()
        await self.scale_lookups.refresh_stale()

    def collections(self) -> dict[str, tuple[str, ...]]:
        """Each watched collection and the components that requested it."""
        return self.informers.collections()

    def start(self) -> None:
        self.informers.start()

    async def stop(self) -> None:
        await self.informers.stop()

    def readiness_check(self) -> str | None:
        return self.informers.readiness_check()

    async def wait_synced(self, within: float | None = None) -> bool:
        return await self.informers.wait_synced(within)

    async def wait_for_resource_version(self, resource_version: str, *, within: float) -> bool:
        return await self.informers.wait_for_resource_version(resource_version, within=within)
