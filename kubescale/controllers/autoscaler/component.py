"""The cluster autoscaler as a component (:mod:`kubescale.runtime.component`): one leader-only loop.

* **Caches** (declared when built, by :class:`~.autoscaler_loop.AutoscalerLoop` and its
  :class:`~.clusterapi_provider.ClusterApiProvider`): Nodes, Pods, PodDisruptionBudgets,
  PriorityClasses, Namespaces, DaemonSets, ReplicaSets, StatefulSets, Jobs,
  ReplicationControllers, the ConfigMaps of ``--namespace`` (the priority expander's), and
  Cluster API MachineDeployments, MachineSets and Machines (at ``CAPI_VERSION``, else the
  ``CAPI_GROUP`` group's preferred version, discovered by the loop's first iteration).
* **Loop** ``cluster-autoscaler`` every ``--scan-interval``, leader-only: upstream runs one
  cluster-autoscaler replica, or leader-elects them. When this replica starts a new term of
  leadership, the loop starts over as upstream's process does after a restart: its registry,
  unneeded times, backoffs and drains in progress were about a world another replica may have
  changed; the first iteration removes the ``ToBeDeletedByClusterAutoscaler`` taints a previous
  leader left, and scale-down starts in cooldown.
* **Metrics** under upstream's names (:mod:`.autoscaler_metrics`), registered once;
  **stop** closes the event recorder.
* What the loop did joins a simulation's timeline (:meth:`.AutoscalerLoop.drain_reports`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Final

from kubescale.base.logs import component_logger
from kubescale.controllers.autoscaler.cloudprovider.clusterapi_provider import ClusterApiProvider
from kubescale.controllers.autoscaler.config.autoscaler_settings import (
    AutoscalerSettings,
)
from kubescale.controllers.autoscaler.core.autoscaler_loop import LOOP_NAME, AutoscalerLoop
from kubescale.controllers.autoscaler.metrics.autoscaler_metrics import AutoscalerMetrics
from kubescale.coordination.brain import brain_of
from kubescale.coordination.ports import RequestsAhead
from kubescale.kube.events import EventRecorder
from kubescale.kube.shared_cache import SharedCache
from kubescale.runtime.component import (
    BaseComponent,
    LoopSpec,
    Runtime,
    TimelineReport,
)
from kubescale.runtime.off_loop import OffLoop

__all__ = ["EVENT_COMPONENT", "AutoscalerComponent"]

log = component_logger("cluster-autoscaler")

EVENT_COMPONENT: Final = "cluster-autoscaler"
"""The events' ``source.component`` (upstream's)."""


class _TermAwareLoop:
    """The autoscaler loop, started over at the start of each term of leadership."""

    name = LOOP_NAME

    def __init__(self, component: AutoscalerComponent) -> None:
        self._component = component
        self._term: int | None = None

    async def run_once(self, now: datetime) -> None:
        component = self._component
        term = component.runtime.leadership.term
        if term != self._term:
            if self._term is not None:
                log.info("new term of leadership: the loop starts over")
                component.loop = component.new_loop()
            self._term = term
        await component.loop.run_once(now)

    def drain_reports(self) -> list[TimelineReport]:
        return self._component.loop.drain_reports()


class AutoscalerComponent(BaseComponent):
    """The cluster autoscaler (module docstring)."""

    name = "cluster-autoscaler"

    def __init__(
        self,
        settings: AutoscalerSettings,
        runtime: Runtime,
        *,
        requests_ahead: Callable[[SharedCache], RequestsAhead] | None = None,
    ) -> None:
        """``requests_ahead``: the VPA's provider of the requests it will give a pod (plugged in
        by the wiring, :mod:`kubescale.components`), built if the coordination uses it."""
        self.settings = settings
        self.runtime = runtime
        self.metrics = AutoscalerMetrics(runtime.registry)
        self.events = EventRecorder(
            client=runtime.leader_client, component=EVENT_COMPONENT, host=runtime.identity
        )
        brain = brain_of(runtime.cache)
        self.brain = brain
        # One brain: pods are binpacked with the requests the VPA's webhook gives them
        # (kubescale/coordination/requests_ahead.py), the provider plugged in by the wiring.
        self.requests_ahead: RequestsAhead | None = brain.requests_ahead.provider(
            (lambda: requests_ahead(runtime.cache)) if requests_ahead is not None else None
        )
        self.off_loop = OffLoop(LOOP_NAME)
        self.loop = self.new_loop()
        self._gated = _TermAwareLoop(self)

    def new_loop(self) -> AutoscalerLoop:
        """A loop with no memory (the informers are the shared cache's); its random choices (the
        ``random`` expander, ties) come from the client's generator: the scenario seed in a
        simulated run."""
        return AutoscalerLoop(
            client=self.runtime.leader_client,
            informers=self.runtime.cache.informers,
            settings=self.settings,
            metrics=self.metrics,
            events=self.events,
            rng=random.Random(self.runtime.client.rng.random()),
            disruptions=self.brain.ledger,
            gate=self.brain.gate,
            recent_moves=self.brain.recent_moves,
            requests_ahead=self.requests_ahead,
            off_loop=self.off_loop,  # one worker thread for every term's loop
        )

    def loops(self) -> Sequence[LoopSpec]:
        return [LoopSpec(loop=self._gated, interval=self.settings.scan_interval)]

    async def unserved_apis(self) -> Sequence[str]:
        """The Cluster API, when the server does not serve it (its version is discovered, so
        its collections are declared later than every other component's): the autoscaler is
        then not started, and the rest of kubescale runs."""
        provider = self.loop.provider
        if not isinstance(provider, ClusterApiProvider):
            return ()
        return await provider.unserved_apis()

    async def start(self) -> None:
        settings = self.settings
        log.info(
            "cluster autoscaler started",
            extra={
                "fields": {
                    "scan_interval": settings.scan_interval,
                    "expander": ",".join(settings.expander),
                    "cloud_provider": "clusterapi",
                    "consolidation": settings.consolidation.policy,
                }
            },
        )

    async def stop(self) -> None:
        self.off_loop.close()
        await self.events.close()
