"""The VPA updater as a component (:mod:`kubescale.runtime.component`): one leader-only loop.

* **Caches** (declared when built, by :class:`~.updater_loop.UpdaterLoop`): VPAs, pods,
  LimitRanges, the workload controllers.
* **Loop** ``vpa-updater`` every ``--updater-interval``, leader-only: only the replica holding
  the Lease evicts (upstream runs one updater replica, or leader-elects them). Events are
  written before an iteration ends.
* **Metrics** under upstream's names (:mod:`.updater_metrics`); **stop** closes the event
  recorder.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from kubescale.base.logs import component_logger
from kubescale.controllers.vpa.updater.updater_config import (
    UpdaterSettings,
)
from kubescale.controllers.vpa.updater.updater_loop import UpdaterLoop
from kubescale.controllers.vpa.updater.updater_metrics import UpdaterMetrics
from kubescale.kube.events import EventRecorder
from kubescale.runtime.component import BaseComponent, LoopSpec, Runtime

__all__ = ["EVENT_COMPONENT", "UpdaterComponent"]

log = component_logger("vpa-updater")

EVENT_COMPONENT: Final = "vpa-updater"


class UpdaterComponent(BaseComponent):
    """The VPA updater (module docstring)."""

    name = "vpa-updater"

    def __init__(self, settings: UpdaterSettings, runtime: Runtime) -> None:
        self.settings = settings
        self.metrics = UpdaterMetrics(runtime.registry)
        self.events = EventRecorder(
            client=runtime.leader_client, component=EVENT_COMPONENT, host=runtime.identity
        )
        self.loop = UpdaterLoop(
            client=runtime.leader_client,
            cache=runtime.cache,
            settings=settings,
            metrics=self.metrics,
            events=self.events,
        )

    def loops(self) -> Sequence[LoopSpec]:
        return [LoopSpec(loop=self.loop, interval=self.settings.interval)]

    async def start(self) -> None:
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

    async def stop(self) -> None:
        self.loop.close()
        await self.events.close()
