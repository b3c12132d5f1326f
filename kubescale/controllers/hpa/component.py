"""The HPA controller as a component (:mod:`kubescale.runtime.component`): one leader-only loop.

* **Caches** (declared when built, by :class:`~.hpa_loop.HpaLoop`): HPAs, pods, Deployments,
  StatefulSets and ReplicaSets (their Scale, and owner walks for ``selectionStrategy``).
* **Loop** ``hpa-controller`` every ``--horizontal-pod-autoscaler-sync-period``, leader-only:
  only the replica holding the Lease scales. A new term of leadership starts with no history,
  as a restarted kube-controller-manager does (the first sight of each HPA seeds
  ``{current, now}``).
* **Metrics** under upstream's names (:mod:`.hpa_metrics`); events as
  ``horizontal-pod-autoscaler``; **stop** closes the event recorder and the Prometheus client.
* ``--hpa-prometheus-address`` is serve-only: a simulated run has no Prometheus.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Final

from kubescale.base.logs import component_logger
from kubescale.controllers.hpa.hpa_config import (
    HpaSettings,
)
from kubescale.controllers.hpa.hpa_loop import LOOP_NAME, HpaLoop
from kubescale.controllers.hpa.hpa_metrics import HpaMetrics
from kubescale.kube.events import EventRecorder
from kubescale.prometheus.client_settings import PrometheusAuth
from kubescale.prometheus.query_api import PrometheusQueryClient
from kubescale.runtime.component import (
    BaseComponent,
    LoopSpec,
    Runtime,
    TimelineReport,
)

__all__ = ["EVENT_COMPONENT", "HpaComponent"]

log = component_logger("hpa-controller")

EVENT_COMPONENT: Final = "horizontal-pod-autoscaler"
"""Upstream's event source for HPA events."""


class _TermAwareLoop:
    """The HPA loop, its memory dropped at the start of each term of leadership."""

    name = LOOP_NAME

    def __init__(self, component: HpaComponent) -> None:
        self._component = component
        self._term: int | None = None

    async def run_once(self, now: datetime) -> None:
        component = self._component
        term = component.runtime.leadership.term
        if term != self._term:
            self._term = term
            component.loop.reset()
        await component.loop.run_once(now)
        await component.events.flush()

    def drain_reports(self) -> list[TimelineReport]:
        return self._component.loop.drain_reports()


class HpaComponent(BaseComponent):
    """The HPA controller (module docstring)."""

    name = "hpa-controller"

    def __init__(self, settings: HpaSettings, runtime: Runtime) -> None:
        self.settings = settings
        self.runtime = runtime
        self.metrics = HpaMetrics(runtime.registry)
        self.events = EventRecorder(
            client=runtime.leader_client, component=EVENT_COMPONENT, host=runtime.identity
        )
        self.prometheus: PrometheusQueryClient | None = None
        if settings.prometheus_address:
            self.prometheus = PrometheusQueryClient(
                address=settings.prometheus_address,
                auth=PrometheusAuth(),
                insecure=settings.prometheus_insecure,
                timeout=settings.prometheus_timeout.total_seconds(),
                clock=runtime.clock,
            )
        self.loop = HpaLoop(
            client=runtime.leader_client,
            cache=runtime.cache,
            settings=settings,
            metrics=self.metrics,
            events=self.events,
            prometheus=self.prometheus,
        )
        self._gated = _TermAwareLoop(self)

    def loops(self) -> Sequence[LoopSpec]:
        return [LoopSpec(loop=self._gated, interval=self.settings.sync_period.total_seconds())]

    async def start(self) -> None:
        log.info(
            "HPA controller started",
            extra={
                "fields": {
                    "selection": self.settings.selection,
                    "sync_period": self.settings.sync_period.total_seconds(),
                    "prometheus": self.settings.prometheus_address or "none",
                }
            },
        )

    async def stop(self) -> None:
        await self.loop.close()
        await self.events.close()
        if self.prometheus is not None:
            await self.prometheus.close()
