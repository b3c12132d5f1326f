"""The VPA updater as a part of ``kubescale serve``: one leader-gated loop.

Life cycle, driven by :func:`kubescale.cli.serve.serve` (as the recommender's,
:mod:`kubescale.controllers.vpa.recommender.component`):

1. :meth:`UpdaterComponent.loop_specs`: the ``vpa-updater`` loop every ``--updater-interval``,
   gated on leadership with the other loops: only the replica holding the Lease evicts
   (upstream runs one updater replica, or leader-elects them).
2. :meth:`UpdaterComponent.attach`: the updater's metrics on ``/metrics``.
3. :meth:`UpdaterComponent.start` (client connected): the informers start on every replica, so a
   standby that takes over finds warm caches; the event recorder is built.
4. Each iteration first waits (up to ``CACHE_SYNC_TIMEOUT`` on the clock) for the caches to
   sync, then runs :meth:`kubescale.controllers.vpa.updater.updater_loop.UpdaterLoop.run_once`.
5. :meth:`UpdaterComponent.stop`: informers and the event recorder close.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Final

from kubescale.base.logs import component_logger
from kubescale.controllers.vpa.updater.updater_config import UpdaterSettings
from kubescale.controllers.vpa.updater.updater_loop import LOOP_NAME, UpdaterLoop
from kubescale.controllers.vpa.updater.updater_metrics import UpdaterMetrics
from kubescale.kube.events import EventRecorder
from kubescale.kube.informer_set import InformerSet

if TYPE_CHECKING:
    from kubescale.cli.serve import LoopSpec, Server

__all__ = ["CACHE_SYNC_TIMEOUT", "UpdaterComponent"]

log = component_logger("vpa-updater")

CACHE_SYNC_TIMEOUT: Final = 30.0
"""Seconds an iteration waits for the informers' first lists before giving up until the next."""


class _GatedLoop:
    """The runner's view of the component: one ``run_once`` per interval, under leadership."""

    name = LOOP_NAME

    def __init__(self, component: UpdaterComponent) -> None:
        self._component = component

    async def run_once(self, now: datetime) -> None:
        await self._component.run_once(now)


class UpdaterComponent:
    """``kubescale.cli.serve.ServeComponent`` for the VPA updater (module docstring)."""

    needs_kube = True

    def __init__(self, settings: UpdaterSettings) -> None:
        self.settings = settings
        self.loop: UpdaterLoop | None = None
        self.informers: InformerSet | None = None
        self.metrics: UpdaterMetrics | None = None
        self.events: EventRecorder | None = None
        self._gated = _GatedLoop(self)

    def loop_specs(self) -> Sequence[LoopSpec]:
        from kubescale.cli.serve import LoopSpec  # noqa: PLC0415 (serve imports this module)

        return [LoopSpec(loop=self._gated, interval=self.settings.interval)]

    def attach(self, server: Server) -> None:
        self.metrics = UpdaterMetrics(server.registry)

    async def start(self, server: Server) -> None:
        client = server.kube
        if client is None or self.metrics is None:
            raise RuntimeError("the updater needs attach() and a Kubernetes client")
        self.informers = InformerSet(client=client)
        self.events = EventRecorder(client=client, component="vpa-updater")
        self.loop = UpdaterLoop(
            client=client,
            informers=self.informers,
            settings=self.settings,
            metrics=self.metrics,
            events=self.events,
        )
        self.informers.start()
        log.info(
            "VPA updater started",
            extra={
                "fields": {
                    "interval": self.settings.interval,
                    "status_lease": f"{self.settings.status_lease_namespace}/"
                    f"{self.settings.status_lease_name}",
                }
            },
        )

    async def run_once(self, now: datetime) -> None:
        loop, informers = self.loop, self.informers
        if loop is None or informers is None:
            raise RuntimeError("the updater has not started")
        if informers.unsynced() and not await informers.wait_synced(within=CACHE_SYNC_TIMEOUT):
            raise RuntimeError(f"caches not synced: {', '.join(sorted(informers.unsynced()))}")
        await loop.run_once(now)

    async def stop(self) -> None:
        if self.informers is not None:
            await self.informers.stop()
        if self.events is not None:
            await self.events.close()
