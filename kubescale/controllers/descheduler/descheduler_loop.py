"""The descheduler's loop: upstream ``runDeschedulerLoop``, one cycle per ``run_once(now)``.

Each cycle:

1. reads nodes, pods, namespaces, PodDisruptionBudgets, PVCs and PriorityClasses from the
   process's shared informers into a :class:`~kubescale.scheduling.cycle_view.CycleView`;
2. with a LowNodeUtilization reading real usage, collects it (:mod:`.usage_sources`): smoothed
   NodeMetrics and every pod's PodMetrics, or the Prometheus queries' values; the values are
   handed to the scheduler extender's cache too (``usage_listener``), so both judge a node by the
   same numbers;
3. runs :func:`~.descheduling_cycle.descheduling_cycle`, answering each eviction it asks for:

   * ``--dry-run``: logged ("Evicted pod in dry run mode") and counted as done, nothing sent;
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
from typing import Any, Final

from kubescale.base.logs import component_logger
from kubescale.base.objects import meta
from kubescale.coordination.descheduler_budget import ACTOR, WorkloadKey, desired_replicas
from kubescale.coordination.disruption_ledger import DisruptionLedger, WriteOutcome, evict_pod
from kubescale.coordination.eviction_memory import EvictionRecorder
from kubescale.coordination.ports import DeschedulerBudgets
from kubescale.coordination.separate import OwnBudgets
from kubescale.kube.client import KubeClient
from kubescale.kube.controller_lookups import ControllerLookups
from kubescale.kube.errors import KubeApiError
from kubescale.kube.events import EventRecorder
from kubescale.kube.informer_set import InformerSet
from kubescale.kube.resources import (
    NAMESPACES,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    POD_DISRUPTION_BUDGETS,
    PODS,
    PRIORITY_CLASSES,
)
from kubescale.scheduling.cycle_view import CycleView, cycle_nodes, node_name
from kubescale.scheduling.pod_resources import NON_MISSING_DEFAULTS, RequestCache

from .descheduler_config import DeschedulerSettings
from .descheduler_metrics import DeschedulerMetrics
from .descheduling_cycle import CycleReport, descheduling_cycle
from .framework.eviction import EvictionRequest
from .policy.policy_loading import DeschedulerPolicy
from .policy.utilization_args import KUBERNETES_METRICS, PROMETHEUS_METRICS
from .usage_sources import (
    NodeMetricsCollector,
    PrometheusNodeValues,
    UsageError,
    list_pod_usage,
    prometheus_token,
)

__all__ = ["EVENT_COMPONENT", "LOOP_NAME", "DeschedulerLoop", "UsageListener"]

log = component_logger("descheduler")

LOOP_NAME: Final = "descheduler"
EVENT_COMPONENT: Final = "sigs.k8s.io/descheduler"
REQUESTED_BY: Final = "kubescale-descheduler"

UsageListener = Callable[
    [Mapping[str, Mapping[str, int]] | None, Mapping[str, Mapping[str, float]]], None
]
"""Receives each cycle's node metrics and Prometheus values, by query (the extender's cache);
a query of the policy missing from the values failed this cycle."""

TimelineReport = tuple[str, str, str]
"""``(kind, subject, detail)`` (:class:`kubescale.runtime.component.ReportingLoop`)."""


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
        self.nodes = informers.informer(NODES)
        self.pods = informers.informer(PODS)
        self.disruptions.attach(self.pods)
        self.namespaces = informers.informer(NAMESPACES)
        self.pdbs = informers.informer(POD_DISRUPTION_BUDGETS)
        self.pvcs = informers.informer(PERSISTENT_VOLUME_CLAIMS)
        self.priority_classes = informers.informer(PRIORITY_CLASSES)
        self.collector: NodeMetricsCollector | None = None
        if policy.provider(KUBERNETES_METRICS) is not None:
            self.collector = NodeMetricsCollector(client, node_names=self._cycle_node_names)
        self._prometheus: PrometheusNodeValues | None = None
        self._requests = RequestCache()
        self._non_zero = RequestCache(non_missing=NON_MISSING_DEFAULTS)
        self.cycles = 0
        self.last_report: CycleReport | None = None
        self.last_dry_run: list[EvictionRequest] = []
        """The evictions the last dry-run cycle would have made, in order."""
        self._reports: list[TimelineReport] = []

    def drain_reports(self) -> list[TimelineReport]:
        """What the cycles did since the last call (a simulation's timeline)."""
        reports, self._reports = self._reports, []
        return reports

    async def wait_for_resource_version(self, resource_version: str, *, within: float) -> bool:
        """Every informer of the loop reflects ``resource_version`` (the simulator's settling)."""
        return await self.informers.wait_for_resource_version(resource_version, within=within)

    def _cycle_node_names(self) -> list[str]:
        nodes = cycle_nodes(self.nodes.lister.list(), self.policy.node_selector_parsed)
        return [node_name(n) for n in nodes]

    async def close(self) -> None:
        if self._prometheus is not None:
            await self._prometheus.close()
            self._prometheus = None

    # ---------------------------------------------------------------------------- view

    def _view(self, now: datetime) -> CycleView:
        all_nodes = self.nodes.lister.list()
        return CycleView(
            now=now,
            nodes=cycle_nodes(all_nodes, self.policy.node_selector_parsed),
            pods=self.pods.lister.list(),
            all_nodes=all_nodes,
            namespace_labels={
                str(ns["metadata"]["name"]): dict(ns["metadata"].get("labels") or {})
                for ns in self.namespaces.lister.list()
            },
            pdbs=self.pdbs.lister.list(),
            pvcs={
                (str(p["metadata"].get("namespace", "")), str(p["metadata"]["name"])): p
                for p in self.pvcs.lister.list()
            },
            priority_classes={
                str(pc["metadata"]["name"]): int(pc.get("value") or 0)
                for pc in self.priority_classes.lister.list()
            },
            requests=self._requests,
            non_zero=self._non_zero,
        )

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
        self.last_dry_run = []
        view = self._view(now)
        await self._usage(view, now)
        budget = self.budgets.budget(view=view, now=now, desired=lambda: self._desired(view))
        cycle = descheduling_cycle(
            policy=self.policy, view=view, timer=time.perf_counter, budget=budget
        )
        try:
            request = next(cycle)
            while True:
                evicted = await self._evict(request, now)
                request = cycle.send(evicted)
        except StopIteration as stop:
            report: CycleReport = stop.value
        self.last_report = report
        if report.skipped:
            log.info(report.skipped, extra={"fields": {"nodes": len(view.nodes)}})
            self._reports.append(("descheduler-skipped", "cycle", report.skipped))
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

    async def _evict(self, request: EvictionRequest, now: datetime) -> bool:
        fields: dict[str, Any] = {
            "pod": f"{request.namespace}/{request.name}",
            "node": request.node,
            "strategy": request.strategy,
            "profile": request.profile,
        }
        if self.settings.dry_run:
            self.last_dry_run.append(request)
            log.info("Evicted pod in dry run mode", extra={"fields": fields})
            self._reports.append(
                (
                    "descheduler-dry-run",
                    f"{request.namespace}/{request.name}",
                    f"would evict from {request.node}: {request.annotation_reason()}",
                )
            )
            return True
        result = await evict_pod(
            self.client,
            self.disruptions,
            request.pod,
            now=now,
            grace_period_seconds=self.policy.grace_period_seconds,
            actor=ACTOR,
            annotations={"reason": request.annotation_reason(), "requested-by": REQUESTED_BY},
        )
        err = result.error
        if result.maybe_ours and result.outcome is not WriteOutcome.DONE:
            log.warning(
                "eviction outcome unknown; counted as done",
                extra={"fields": {**fields, "error": str(err)}},
            )
            self._evicted(request, now)
            return True
        if err is not None:  # refused, or gone (404, the uid precondition's 409): a failure
            message = err.message if isinstance(err, KubeApiError) else str(err)
            code = err.code if isinstance(err, KubeApiError) else None
            log.error(
                "Error evicting pod", extra={"fields": {**fields, "code": code, "error": message}}
            )
            self._failed(request, message or str(err))
            return False
        log.info("Evicted pod", extra={"fields": fields})
        self._evicted(request, now)
        return True

    def _evicted(self, request: EvictionRequest, now: datetime) -> None:
        if self.memory is not None:
            self.memory.record(request.pod, request.node, now)
        self._reports.append(
            (
                "descheduler-eviction",
                f"{request.namespace}/{request.name}",
                f"from {request.node}: {request.annotation_reason()}",
            )
        )
        self.events.event(
            _with_kind(request.pod),
            type="Normal",
            reason=request.strategy,
            message=f"pod eviction from {request.node} node by {EVENT_COMPONENT}",
        )

    def _failed(self, request: EvictionRequest, message: str) -> None:
        self._reports.append(
            (
                "descheduler-eviction-failed",
                f"{request.namespace}/{request.name}",
                f"from {request.node}: {message}",
            )
        )
        if not self.policy.eviction_failure_event_notification:
            return
        self.events.event(
            _with_kind(request.pod),
            type="Warning",
            reason="EvictionFailed",
            message=f"pod eviction from {request.node} node by {EVENT_COMPONENT} failed: {message}",
        )


def _with_kind(pod: Mapping[str, Any]) -> dict[str, Any]:
    """Informer objects may lack apiVersion/kind; the event's involvedObject needs them."""
    return {"apiVersion": "v1", "kind": "Pod", **pod}
