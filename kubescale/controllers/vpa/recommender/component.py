"""The VPA recommender as a component (:mod:`kubescale.runtime.component`): one leader-only loop.

* **Caches** (declared when built, by :class:`~.cluster_feeder.ClusterFeeder`): VPAs, pods,
  ``Evicted`` events, checkpoints, the workload controllers (scoped to
  ``--vpa-object-namespace`` when set).
* **Loop** ``vpa-recommender`` every ``--recommender-interval``, leader-only: only the replica
  holding the Lease computes and writes recommendations and checkpoints (upstream runs one
  recommender replica, or leader-elects them). When this replica starts a new term of
  leadership, the model is rebuilt from the checkpoints (or the history) before the iteration:
  what it knew when it last led is stale, and the checkpoints hold what the previous leader
  learned.
* **Metrics** under upstream's names (:mod:`.recommender_metrics`).
* **Start**: with ``--storage=prometheus`` the history provider is built; **stop** closes its
  session. No final checkpoint is written (upstream writes none either): at most one interval
  of learning is lost, as when upstream's recommender restarts.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from kubescale.base.logs import component_logger
from kubescale.controllers.vpa.recommender.prometheus_history import PrometheusHistoryProvider
from kubescale.controllers.vpa.recommender.prometheus_history_config import resolve_auth
from kubescale.controllers.vpa.recommender.recommender_config import (
    RecommenderSettings,
)
from kubescale.controllers.vpa.recommender.recommender_loop import LOOP_NAME, RecommenderLoop
from kubescale.controllers.vpa.recommender.recommender_metrics import RecommenderMetrics
from kubescale.prometheus.query_api import PrometheusClientMetrics
from kubescale.runtime.component import (
    BaseComponent,
    LoopSpec,
    Runtime,
    TimelineReport,
)

__all__ = ["RecommenderComponent"]

log = component_logger("vpa-recommender")


class _TermAwareLoop:
    """The recommender loop, rebuilt from checkpoints at the start of each term of leadership."""

    name = LOOP_NAME

    def __init__(self, component: RecommenderComponent) -> None:
        self._component = component
        self._term: int | None = None

    async def run_once(self, now: datetime) -> None:
        component = self._component
        term = component.runtime.leadership.term
        if term != self._term:
            self._term = term
            component.loop.reset()
        await component.loop.run_once(now)

    def drain_reports(self) -> list[TimelineReport]:
        return self._component.loop.drain_reports()


class RecommenderComponent(BaseComponent):
    """The VPA recommender (module docstring)."""

    name = "vpa-recommender"

    def __init__(self, settings: RecommenderSettings, runtime: Runtime) -> None:
        self.settings = settings
        self.runtime = runtime
        self.metrics = RecommenderMetrics(runtime.registry)
        self.history: PrometheusHistoryProvider | None = None
        if not settings.use_checkpoints:
            self.history = PrometheusHistoryProvider(
                settings.prometheus,
                auth=resolve_auth(settings.prometheus, environ=runtime.environ),
                metrics=PrometheusClientMetrics(runtime.registry),
                clock=runtime.clock,
            )
        self.loop = RecommenderLoop(
            client=runtime.leader_client,
            cache=runtime.cache,
            settings=settings,
            metrics=self.metrics,
            history=self.history,
        )
        self._gated = _TermAwareLoop(self)

    def loops(self) -> Sequence[LoopSpec]:
        return [LoopSpec(loop=self._gated, interval=self.settings.interval)]

    async def start(self) -> None:
        log.info(
            "VPA recommender started",
            extra={
                "fields": {
                    "recommender": self.settings.recommender_name,
                    "storage": self.settings.storage or "checkpoint",
                }
            },
        )

    async def stop(self) -> None:
        self.loop.close()
        if self.history is not None:
            await self.history.close()
