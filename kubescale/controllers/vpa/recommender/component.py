"""The VPA recommender as a part of ``kubescale serve``: one leader-gated loop.

Life cycle, driven by :func:`kubescale.cli.serve.serve`:

1. :meth:`RecommenderComponent.loop_specs` (before the runner starts): the ``vpa-recommender``
   loop, every ``--recommender-interval``. ``serve`` gates it on leadership with the other
   loops: only the replica holding the Lease computes and writes recommendations and
   checkpoints (upstream runs one recommender replica, or leader-elects them).
2. :meth:`RecommenderComponent.attach`: the recommender's metrics on ``/metrics``.
3. :meth:`RecommenderComponent.start` (client connected): the informers start on every replica,
   so a standby that takes over finds warm caches; with ``--storage=prometheus`` the history
   provider is built.
4. Each iteration first waits (up to ``CACHE_SYNC_TIMEOUT`` on the clock) for the caches to
   sync. When this replica starts a new term of leadership (``Server.leadership_terms`` moved),
   the model is rebuilt from the checkpoints (or the history) before the iteration: what it
   knew when it last led is stale, and the checkpoints hold what the previous leader learned.
5. :meth:`RecommenderComponent.stop`: informers and the history provider's session close. No
   final checkpoint is written (upstream writes none either); at most one interval of learning
   is lost, as when upstream's recommender restarts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Final

from kubescale.base.logs import component_logger
from kubescale.controllers.vpa.recommender.prometheus_history import PrometheusHistoryProvider
from kubescale.controllers.vpa.recommender.prometheus_history_config import resolve_auth
from kubescale.controllers.vpa.recommender.recommender_config import RecommenderSettings
from kubescale.controllers.vpa.recommender.recommender_loop import LOOP_NAME, RecommenderLoop
from kubescale.controllers.vpa.recommender.recommender_metrics import RecommenderMetrics
from kubescale.kube.informer_set import InformerSet
from kubescale.prometheus.query_api import PrometheusClientMetrics

if TYPE_CHECKING:
    from kubescale.cli.serve import LoopSpec, Server

__all__ = ["CACHE_SYNC_TIMEOUT", "RecommenderComponent"]

log = component_logger("vpa-recommender")

CACHE_SYNC_TIMEOUT: Final = 30.0
"""Seconds an iteration waits for the informers' first lists before giving up until the next."""


class _GatedLoop:
    """The runner's view of the component: one ``run_once`` per interval, under leadership."""

    name = LOOP_NAME

    def __init__(self, component: RecommenderComponent) -> None:
        self._component = component

    async def run_once(self, now: datetime) -> None:
        await self._component.run_once(now)


class RecommenderComponent:
    """``kubescale.cli.serve.ServeComponent`` for the VPA recommender (module docstring)."""

    needs_kube = True

    def __init__(
        self, settings: RecommenderSettings, *, environ: Mapping[str, str] | None = None
    ) -> None:
        self.settings = settings
        self._environ = environ
        self.loop: RecommenderLoop | None = None
        self.informers: InformerSet | None = None
        self.metrics: RecommenderMetrics | None = None
        self.history: PrometheusHistoryProvider | None = None
        self._server: Server | None = None
        self._term: int | None = None
        self._gated = _GatedLoop(self)

    def loop_specs(self) -> Sequence[LoopSpec]:
        from kubescale.cli.serve import LoopSpec  # noqa: PLC0415 (serve imports this module)

        return [LoopSpec(loop=self._gated, interval=self.settings.interval)]

    def attach(self, server: Server) -> None:
        self._server = server
        self.metrics = RecommenderMetrics(server.registry)

    async def start(self, server: Server) -> None:
        client = server.kube
        if client is None or self.metrics is None:
            raise RuntimeError("the recommender needs attach() and a Kubernetes client")
        if not self.settings.use_checkpoints:
            environ = self._environ if self._environ is not None else os.environ
            self.history = PrometheusHistoryProvider(
                self.settings.prometheus,
                auth=resolve_auth(self.settings.prometheus, environ=environ),
                metrics=PrometheusClientMetrics(server.registry),
                clock=server.clock,
            )
        self.informers = InformerSet(client=client)
        self.loop = RecommenderLoop(
            client=client,
            informers=self.informers,
            settings=self.settings,
            metrics=self.metrics,
            history=self.history,
        )
        self.informers.start()
        log.info(
            "VPA recommender started",
            extra={
                "fields": {
                    "recommender": self.settings.recommender_name,
                    "storage": self.settings.storage or "checkpoint",
                }
            },
        )

    async def run_once(self, now: datetime) -> None:
        loop, informers, server = self.loop, self.informers, self._server
        if loop is None or informers is None or server is None:
            raise RuntimeError("the recommender has not started")
        if informers.unsynced() and not await informers.wait_synced(within=CACHE_SYNC_TIMEOUT):
            raise RuntimeError(f"caches not synced: {', '.join(sorted(informers.unsynced()))}")
        term = server.leadership_terms
        if term != self._term:
            self._term = term
            loop.reset()
        await loop.run_once(now)

    async def stop(self) -> None:
        if self.informers is not None:
            await self.informers.stop()
        if self.history is not None:
            await self.history.close()
