"""The descheduler's loop: upstream ``runDeschedulerLoop``, one cycle per ``run_once(now)``.

Each cycle:

1. reads nodes, pods, namespaces, PodDisruptionBudgets, PVCs and PriorityClasses from the
   process's shared informers into a :class:`~kubescale.scheduling.cycle_view.CycleView`;
2. with a LowNodeUtilization reading real usage, collects it (:mod:`.usage_sources`): smoothed
   NodeMetrics and every pod's PodMetrics, or the Prometheus queries' values; the values are
   handed to the scheduler extender's cache too (``usage_listener``), so both judge a node by the
   same numbers;
3. runs :func:`~.descheduling_cycle.descheduling_cycle` — its steps on the loop's worker
   thread over the view taken in 1. and a copy of the coordination layer's record renewed
   after each eviction (:mod:`kubescale.runtime.off_loop`; the serving loop keeps answering
   meanwhile). Each eviction it asks for becomes, on the event loop, an
   :class:`~kubescale.plans.intents.Evict` intent (and its events
   :class:`~kubescale.plans.intents.Event` intents) applied by the
   :class:`~kubescale.plans.executor.PlanExecutor`, the outcome answered to the cycle
   (:class:`~.descheduler_decision.CycleDecision` is the decision, no client in it):

   * ``--dry-run``: the intent printed (``dry-run descheduler: evict pods <ns>/<name> ...``),
     logged ("Evicted pod in dry run mode") and counted as done, nothing sent;
   * else ``POST pods/<name>/eviction`` (policy/v1 ``Eviction``, annotations ``reason``
     "triggered by <profile>/<strategy>: ..." and ``requested-by``; ``deleteOptions.
     gracePeriodSeconds`` from the policy): the API server enforces PodDisruptionBudgets. A 429
     (budget), 404 (pod gone) or other refusal is a failure — logged, a Warning
     ``EvictionFailed`` event with ``evictionFailureEventNotification``; a transport error or a
     5xx leaves the outcome unknown and counts as done (the pod may well be going), and so does
     a 404 or 429 that answers the client's retry of a POST that got no answer or a 5xx — the
     first attempt may have committed, removing the pod or spending the budget (upstream
     counts it an error and evicts one more than its limits allow). Every
     eviction goes through the process's disruption ledger as ``descheduler``
     (:func:`kubescale.coordination.disruption_ledger.evict_pod`); with ``--coordination one-brain``
     the cycle's limits count every system's evictions on it and a pod goes only when the fit
     simulation finds it a better node (:mod:`kubescale.coordination.descheduler_budget`);
   * a successful eviction is a Normal event on the pod, reason = the strategy, message
     ``pod eviction from <node> node by sigs.k8s.io/descheduler``, and is remembered in the
     :class:`~.eviction_memory.EvictionMemory` the extender reads;
4. records upstream's ``descheduler_*`` metrics and keeps the cycle's report
   (:attr:`DeschedulerLoop.last_report`); what it did joins a simulation's timeline
   (:meth:`DeschedulerLoop.drain_reports`: ``descheduler-eviction``, ``descheduler-dry-run``,
   ``descheduler-eviction-failed``, ``descheduler-skipped``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Final

from kubescale.base.logs import component_logger
from kubescale.coordination.descheduler_budget import WorkloadKey, desired_replicas
from kubescale.coordination.disruption_ledger import DisruptionLedger
from kubescale.coordination.eviction_memory import EvictionRecorder
from kubescale.coordination.ports import DeschedulerBudgets
from kubescale.coordination.separate import OwnBudgets
from kubescale.kube.client import KubeClient
from kubescale.kube.controller_lookups import ControllerLookups
from kubescale.kube.events import EventRecorder
from kubescale.kube.informer import Informer
from kubescale.kube.informer_set import InformerSet
from kubescale.kube.resources import (
    NAMESPACES,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    POD_DISRUPTION_BUDGETS,
    PODS,
    PRIORITY_CLASSES,
)
from kubescale.objects.namespace import Namespace
from kubescale.objects.node import Node
from kubescale.objects.pdb import PodDisruptionBudget
from kubescale.objects.persistent_volume_claim import PersistentVolumeClaim
from kubescale.objects.pod import Pod
from kubescale.objects.priority_class import PriorityClass
from kubescale.objects.views import Meta, meta
from kubescale.plans.executor import PlanExecutor
from kubescale.runtime.off_loop import OffLoop
from kubescale.scheduling.cycle_view import CycleView, cycle_nodes, node_name
from kubescale.scheduling.pod_resources import NON_MISSING_DEFAULTS, RequestCache
from kubescale.scheduling.policy.policy_loading import DeschedulerPolicy
from kubescale.scheduling.policy.utilization_args import KUBERNETES_METRICS, PROMETHEUS_METRICS

from .descheduler_config import DeschedulerSettings
from .descheduler_decision import CycleDecision, TimelineReport
from .descheduler_metrics import DeschedulerMetrics
from .descheduling_cycle import CycleReport, descheduling_cycle
from .framework.eviction import EvictionRequest
from .usage_sources import (
    NodeMetricsCollector,
    PrometheusNodeValues,
    UsageError,
    list_pod_usage,
    prometheus_token,
)

__all__ = ["LOOP_NAME", "DeschedulerLoop", "UsageListener"]

log = component_logger("descheduler")

LOOP_NAME: Final = "descheduler"

UsageListener = Callable[
    [Mapping[str, Mapping[str, int]] | None, Mapping[str, Mapping[str, float]]], None
]
"""Receives each cycle's node metrics and Prometheus values, by query (the extender's cache);
a query of the policy missing from the values failed this cycle."""


class DeschedulerLoop:
    """One descheduling cycle per :meth:`run_once` (module docstring)."""

    name = LOOP_NAME

    def __init__(
        self,
        *,
        client: KubeClient,
        informers: InformerSet,
        settings: DeschedulerSettings,
        policy: DeschedulerPolicy,
        metrics: DeschedulerMetrics,
        events: EventRecorder,
        memory: EvictionRecorder | None = None,
        usage_listener: UsageListener | None = None,
        disruptions: DisruptionLedger | None = None,
        budgets: DeschedulerBudgets | None = None,
        controllers: ControllerLookups | None = None,
    ) -> None:
        """``disruptions``: the process's ledger (every eviction is recorded there as
        ``descheduler``); ``budgets``: the coordination layer's cycle budget (upstream's by
        default; with one brain the cycle's limits count every system's evictions on the ledger,
        and a pod is evicted only to a better node:
        :mod:`kubescale.coordination.descheduler_budget`);
        ``controllers``: the pods' controllers, whose desired replicas the per-namespace limit
        counts missing pods against when the budget counts them."""
        self.client = client
        self.controllers = controllers
        self.informers = informers
        self.settings = settings
        self.policy = policy
        self.metrics = metrics
        self.events = events
        self.memory = memory
        self.usage_listener = usage_listener
        self.disruptions = (
            disruptions if disruptions is not None else DisruptionLedger(shared=False)
        )
        self.budgets: DeschedulerBudgets = budgets if budgets is not None else OwnBudgets()
        self.nodes: Informer[Node] = informers.informer(NODES)
        self.pods: Informer[Pod] = informers.informer(PODS)
        self.disruptions.attach(self.pods)
        self.executor = PlanExecutor(
            client=client,
            ledger=self.disruptions,
            events=events,
            registry=metrics.registry,
            dry_run=settings.dry_run,
        )
        self.namespaces: Informer[Namespace] = informers.informer(NAMESPACES)
        self.pdbs: Informer[PodDisruptionBudget] = informers.informer(POD_DISRUPTION_BUDGETS)
        self.pvcs: Informer[PersistentVolumeClaim] = informers.informer(PERSISTENT_VOLUME_CLAIMS)
        self.priority_classes: Informer[PriorityClass] = informers.informer(PRIORITY_CLASSES)
        self.collector: NodeMetricsCollector | None = None
        if policy.provider(KUBERNETES_METRICS) is not None:
            self.collector = NodeMetricsCollector(client, node_names=self._cycle_node_names)
        self._prometheus: PrometheusNodeValues | None = None
        self._requests = RequestCache()
        self._non_zero = RequestCache(non_missing=NON_MISSING_DEFAULTS)
        self.cycles = 0
        self.last_report: CycleReport | None = None
        self.decision = CycleDecision(policy=policy, memory=memory)
        self.off_loop = OffLoop(LOOP_NAME)
        """The cycle's decision steps run on this worker (:mod:`kubescale.runtime.off_loop`)."""

    @property
    def last_dry_run(self) -> list[EvictionRequest]:
        """The evictions the last dry-run cycle would have made, in order."""
        return self.decision.last_dry_run

    def drain_reports(self) -> list[TimelineReport]:
        """What the cycles did since the last call (a simulation's timeline)."""
        reports = list(self.decision.reports)
        self.decision.reports.clear()
        return reports

    async def wait_for_resource_version(self, resource_version: str, *, within: float) -> bool:
        """Every informer of the loop reflects ``resource_version`` (the simulator's settling)."""
        return await self.informers.wait_for_resource_version(resource_version, within=within)

    def _cycle_node_names(self) -> list[str]:
        nodes = cycle_nodes(self.nodes.lister.list(), self.policy.node_selector_parsed)
        return [node_name(n) for n in nodes]

    async def close(self) -> None:
        self.off_loop.close()
        if self._prometheus is not None:
            await self._prometheus.close()
            self._prometheus = None

    # ---------------------------------------------------------------------------- view

    def _view(self, now: datetime) -> Callable[[], CycleView]:
        """The cycle's view: the informers' lists copied now (on the loop), the view built
        from them by the returned callable (on the worker thread: it sorts every pod)."""
        all_nodes = self.nodes.lister.list()
        pods = self.pods.lister.list()
        namespaces = self.namespaces.lister.list()
        pdbs = self.pdbs.lister.list()
        pvcs = self.pvcs.lister.list()
        priority_classes = self.priority_classes.lister.list()

        def build() -> CycleView:
            return CycleView(
                now=now,
                nodes=cycle_nodes(all_nodes, self.policy.node_selector_parsed),
                pods=pods,
                all_nodes=all_nodes,
                namespace_labels={
                    str(ns_meta["name"]): dict(ns_meta.get("labels") or {})
                    for ns_meta in (Meta(ns).raw for ns in namespaces)
                },
                pdbs=pdbs,
                pvcs={
                    (str(Meta(p).raw.get("namespace", "")), str(Meta(p).raw["name"])): p
                    for p in pvcs
                },
                priority_classes={
                    str(Meta(pc).raw["name"]): int(pc.get("value") or 0) for pc in priority_classes
                },
                requests=self._requests,
                non_zero=self._non_zero,
            )

        return build

    async def _metric_values(self, now: datetime) -> dict[str, Mapping[str, float]]:
        provider = self.policy.provider(PROMETHEUS_METRICS)
        queries = {
            args.metrics.prometheus_query
            for _, args in self.policy.low_node_utilization()
            if args.metrics is not None and args.metrics.source == PROMETHEUS_METRICS
        }
        if provider is None or not queries:
            return {}
        if self._prometheus is None:
            token = await prometheus_token(self.client, provider.auth_secret)
            self._prometheus = PrometheusNodeValues.connect(
                url=provider.prometheus_url, token=token
            )
        found: dict[str, Mapping[str, float]] = {}
        for query in sorted(queries):
            try:
                found[query] = await self._prometheus.values(query, now)
            except UsageError as err:
                log.error("prometheus query failed", extra={"fields": {"error": str(err)}})
        return found

    async def _usage(self, view: CycleView, now: datetime) -> None:
        wants_metrics = any(
            args.metrics is not None and args.metrics.source == KUBERNETES_METRICS
            for _, args in self.policy.low_node_utilization()
        )
        if self.collector is not None and wants_metrics:
            await self.collector.collect(node_name(n) for n in view.nodes)
            view.node_usage = self.collector.snapshot()
            try:
                view.pod_usage = await list_pod_usage(self.client)
            except UsageError as err:
                log.error("pod metrics unavailable", extra={"fields": {"error": str(err)}})
                view.pod_usage = {}
        try:
            view.metric_usage = await self._metric_values(now)
        except UsageError as err:
            log.error("prometheus unavailable", extra={"fields": {"error": str(err)}})
            view.metric_usage = {}
        if self.usage_listener is not None:
            self.usage_listener(view.node_usage, view.metric_usage or {})

    # ----------------------------------------------------------------------- the cycle

    async def run_once(self, now: datetime) -> None:
        started = time.perf_counter()
        self.cycles += 1
        self.decision.last_dry_run = []
        view = await self.off_loop.run(self._view(now))
        await self._usage(view, now)
        budget = self.budgets.budget(
            view=view, now=now, desired=lambda: self._desired(view), snapshot=True
        )
        cycle = descheduling_cycle(
            policy=self.policy, view=view, timer=time.perf_counter, budget=budget
        )

        async def act(request: EvictionRequest) -> bool:
            evicted = await self.executor.drive(self.decision.evict(request, now), now=now)
            budget.refresh()  # the next step counts every eviction made up to now
            return evicted

        # The cycle's steps compute on the loop's worker thread over the view (copies taken
        # above, on this thread); each eviction it asks for is decided and applied here, on
        # the loop.
        report: CycleReport = await self.off_loop.drive(cycle, act)
        self.last_report = report
        if report.skipped:
            log.info(report.skipped, extra={"fields": {"nodes": len(view.nodes)}})
            self.decision.reports.append(("descheduler-skipped", "cycle", report.skipped))
        for error in report.errors:
            log.error("descheduler plugin failed", extra={"fields": {"error": error}})
        self.metrics.observe_cycle(report, time.perf_counter() - started)
        log.info(
            "descheduling cycle done",
            extra={
                "fields": {
                    "evicted": len(report.evicted),
                    "requested": len(report.evictions),
                    "dry_run": self.settings.dry_run,
                }
            },
        )
        await self.events.flush()

    def _desired(self, view: CycleView) -> dict[WorkloadKey, int]:
        """Desired replicas of the controllers of the cycle's pods, from the shared cache."""
        if self.controllers is None or self.policy.max_pods_per_namespace is None:
            return {}
        desired: dict[WorkloadKey, int] = {}
        seen: set[WorkloadKey] = set()
        for pod in view.pods:
            pod_meta = meta(pod)
            ref = pod_meta.controller
            if ref is None:
                continue
            key = (pod_meta.namespace, ref.kind, ref.name)
            if key in seen:
                continue
            seen.add(key)
            owner = self.controllers.owner(ref.api_version, ref.kind, key[0], ref.name)
            replicas = desired_replicas(ref.kind, owner)
            if replicas is not None:
                desired[key] = replicas
        return desired
