"""One component's caches: what its loops wait for and what its ``/readyz`` line says.

Upstream's controllers start their workers only after ``cache.WaitForCacheSync`` of exactly the
informers they use (kube-controller-manager's HPA controller, the descheduler's
``sharedInformerFactory.WaitForCacheSync``, VPA's ``controllerFetcher.Start`` ...); a loop that
decides on a half-loaded cache evicts, scales down or recommends from a half-empty view.
Here every component declares its collections while it is built
(:meth:`kubescale.kube.informer_set.InformerSet.requested_by`), and :class:`CacheGate` holds
them:

* :meth:`CacheGate.waiting` names the collections not synced — not listed yet, or re-listing
  after a ``410 Gone`` (:attr:`kubescale.kube.informer.Informer.synced`); the loop runner does
  not start an iteration of the component's loops while it is not empty
  (:mod:`kubescale.runtime.loop_runner`), and :meth:`CacheGate.wait` returns once it is;
* :meth:`CacheGate.readiness_check` is the component's own ``/readyz`` check,
  ``<component>-caches``: ``caches not synced: nodes, pods``, and for a collection whose list
  the server answers ``404``, ``not served by the API server: machines.cluster.x-k8s.io/v1beta1``.
  Another component's collections never hold it.

A collection the component declared *optional* (it works without it:
:meth:`~kubescale.kube.informer_set.InformerSet.optional`) is waited for too, unless the
server does not serve it — then the component goes on without it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from kubescale.base.tasks import cancel_and_wait
from kubescale.kube.informer import Informer

__all__ = ["CacheGate"]


class CacheGate:
    """The collections one component reads (module docstring)."""

    def __init__(
        self,
        component: str,
        informers: Sequence[Informer[Any]],
        optional: Sequence[Informer[Any]] = (),
    ) -> None:
        self.component = component
        self._required = tuple(informers)
        self._optional = tuple(optional)

    @property
    def informers(self) -> tuple[Informer[Any], ...]:
        return self._required + self._optional

    def _awaited(self) -> list[Informer[Any]]:
        return [*self._required, *(i for i in self._optional if not i.absent)]

    def waiting(self) -> list[str]:
        """Names of the collections not synced (sorted); empty when the loops may run."""
        return sorted(informer.name for informer in self._awaited() if not informer.synced)

    def absent(self) -> list[str]:
        """The needed collections the server answers ``404`` for (``plural.group/version``)."""
        return sorted(informer.api_name for informer in self._required if informer.absent)

    async def wait(self) -> None:
        """Return once every awaited collection is synced at the same moment."""
        while True:
            pending = [informer for informer in self._awaited() if not informer.synced]
            if not pending:
                return
            changes = [asyncio.ensure_future(informer.state_changed()) for informer in pending]
            try:
                await asyncio.wait(changes, return_when=asyncio.FIRST_COMPLETED)
            finally:
                await cancel_and_wait(*changes)

    def readiness_check(self) -> str | None:
        waiting = self.waiting()
        if not waiting:
            return None
        reason = f"caches not synced: {', '.join(waiting)}"
        absent = self.absent()
        if absent:
            reason += f"; not served by the API server: {', '.join(absent)}"
        return reason
