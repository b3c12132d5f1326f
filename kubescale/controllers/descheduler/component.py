"""The descheduler as a component (:mod:`kubescale.runtime.component`).

* **Caches** (declared when built, by :class:`~.descheduler_loop.DeschedulerLoop`): Nodes,
  Pods, Namespaces, PodDisruptionBudgets, PersistentVolumeClaims, PriorityClasses.
* **Loop** ``descheduler`` every ``--descheduling-interval``: one cycle per iteration (all
  Deschedule plugins of all profiles, then all Balance plugins). With the interval 0 (upstream:
  one cycle and exit) the loop runs one cycle and then nothing more — ``serve`` is a
  long-running process shared with other systems, so it does not exit. Leader-only (evictions
  are writes) unless ``--dry-run``, which writes nothing: upstream elects a leader only when
  looping and never in dry-run; here a replica that is not leading never evicts, run-once
  included, so two replicas never both evict.
* **Loop** ``descheduler-metrics`` every 5 s on every replica, when a LowNodeUtilization reads
  ``KubernetesMetrics``: upstream's metrics collector (smoothed NodeMetrics), whose readings
  also go to the scheduler extender of the process.
* **Shared with the scheduler extender** (:mod:`.descheduling_board`): every eviction is
  recorded in the extender's eviction memory; the node metrics and Prometheus values read go to
  the extender's cache.
* **Metrics** upstream's ``descheduler_*`` (:mod:`.descheduler_metrics`); **events** Normal
  ``<strategy>`` / Warning ``EvictionFailed`` on the pod, source ``sigs.k8s.io/descheduler``,
  written before an iteration ends; **stop** closes the event recorder and the Prometheus
  client.
* What a cycle did joins a simulation's timeline (:meth:`.DeschedulerLoop.drain_reports`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Final

from kubescale.base.logs import component_logger
from kubescale.coordination.brain import brain_of
from kubescale.kube.events import EventRecorder
from kubescale.runtime.component import (
    BaseComponent,
    LoopSpec,
    Runtime,
    TimelineReport,
)
from kubescale.scheduling.policy.policy_loading import DeschedulerPolicy
from kubescale.scheduling.policy.utilization_args import PROMETHEUS_METRICS

from .descheduler_config import (
    DeschedulerConfigError,
    DeschedulerSettings,
)
from .descheduler_decision import EVENT_COMPONENT
from .descheduler_loop import LOOP_NAME, DeschedulerLoop
from .descheduler_metrics import DeschedulerMetrics
from .usage_sources import COLLECTOR_INTERVAL, NodeMetricsCollector

__all__ = ["RUN_ONCE_RECHECK", "DeschedulerComponent"]

log = component_logger("descheduler")

RUN_ONCE_RECHECK: Final = 60.0
"""With ``--descheduling-interval 0``: how often the loop checks whether its one cycle is still
to run (it waits for the Lease, and a failed cycle is tried again)."""


def _prometheus_queries(policy: DeschedulerPolicy) -> frozenset[str]:
    return frozenset(
        args.metrics.prometheus_query
        for _, args in policy.low_node_utilization()
        if args.metrics is not None and args.metrics.source == PROMETHEUS_METRICS
    )


class _CycleLoop:
    """The descheduler loop as the component runs it: once, with the interval 0."""

    name = LOOP_NAME

    def __init__(self, loop: DeschedulerLoop, *, once: bool) -> None:
        self.loop = loop
        self.once = once
        self.done = False

    async def run_once(self, now: datetime) -> None:
        if self.once and self.done:
            return
        await self.loop.run_once(now)
        self.done = True

    def drain_reports(self) -> list[TimelineReport]:
        return self.loop.drain_reports()


class _CollectorLoop:
    """Upstream's metrics collector, its readings handed to the extender's cache."""

    name = "descheduler-metrics"

    def __init__(
        self,
        collector: NodeMetricsCollector,
        publish: Callable[[Mapping[str, Mapping[str, int]] | None], None],
    ) -> None:
        self.collector = collector
        self._publish = publish

    async def run_once(self, now: datetime) -> None:
        await self.collector.run_once(now)
        self._publish(self.collector.snapshot())


class DeschedulerComponent(BaseComponent):
    """The descheduler (module docstring)."""

    name = "descheduler"

    def __init__(self, settings: DeschedulerSettings, runtime: Runtime) -> None:
        policy = settings.policy
        if policy is None:
            raise DeschedulerConfigError(
                "--policy-config-file or --descheduler-policy: the descheduler needs a policy"
            )
        self.settings = settings
        self.policy = policy
        self.runtime = runtime
        brain = brain_of(runtime.cache)
        self.board = brain.board
        self.metrics = DeschedulerMetrics(runtime.registry)
        self.events = EventRecorder(
            client=runtime.leader_client, component=EVENT_COMPONENT, host=runtime.identity
        )
        queries = _prometheus_queries(policy)
        self.loop = DeschedulerLoop(
            client=runtime.leader_client,
            informers=runtime.cache.informers,
            settings=settings,
            policy=policy,
            metrics=self.metrics,
            events=self.events,
            memory=self.board,
            usage_listener=lambda nodes, values: self.board.publish_usage(
                nodes, values, queries=queries
            ),
            disruptions=brain.ledger,
            budgets=brain.descheduler_budgets,
            # one brain: the per-namespace limit counts a workload's missing pods against
            # its controller's desired replicas (the shared cache's controller informers)
            controllers=runtime.cache.controllers
            if brain.descheduler_budgets.counts_missing_pods
            and policy.max_pods_per_namespace is not None
            else None,
        )
        self._cycle = _CycleLoop(self.loop, once=settings.run_once)

    def loops(self) -> Sequence[LoopSpec]:
        interval = RUN_ONCE_RECHECK if self.settings.run_once else self.settings.interval
        specs = [
            LoopSpec(loop=self._cycle, interval=interval, leader_only=not self.settings.dry_run)
        ]
        if self.loop.collector is not None:
            specs.append(
                LoopSpec(
                    loop=_CollectorLoop(self.loop.collector, self.board.publish_node_metrics),
                    interval=COLLECTOR_INTERVAL,
                    leader_only=False,
                )
            )
        return specs

    async def start(self) -> None:
        settings = self.settings
        log.info(
            "descheduler started",
            extra={
                "fields": {
                    "policy": settings.policy_origin,
                    "profiles": [p.name for p in self.policy.profiles],
                    "interval": settings.interval,
                    "run_once": settings.run_once,
                    "dry_run": settings.dry_run,
                }
            },
        )

    async def stop(self) -> None:
        await self.events.close()
        await self.loop.close()
