"""The HPA loop: upstream ``reconcileAutoscaler`` for every handled HPA, once per sync period.

Each :meth:`HpaLoop.run_once` starts a reconcile of every HPA this process handles
(``--hpa-selection``, :func:`handles`) and waits for them at most one
``--horizontal-pod-autoscaler-sync-period``. Upstream's controller is a work queue that requeues
each key at the sync period, served by ``--concurrent-horizontal-pod-autoscaler-syncs`` workers
(reference §0 "Queue"); so here, likewise:

* each HPA's reconcile is its own task, at most ``--concurrent-horizontal-pod-autoscaler-syncs``
  running at a time; a pass never waits for the slowest: one hung dependency (one namespace's
  metrics API, one target's ``/scale``) delays only the HPAs that use it;
* a key is reconciled by one task at a time (the queue's rule): a pass skips an HPA whose
  previous reconcile is still running;
* each reconcile has its own deadline (``--hpa-reconcile-timeout``, on the injected clock) for
  what it reads and writes: past it, the step in progress fails with "context deadline
  exceeded" and the HPA gets that step's condition and event (``FailedGetScale``,
  ``FailedGet*Metric``, ``FailedRescale`` — a rescale whose outcome is unknown counts as done);
  its status is then written under a deadline of its own.

One reconcile (reference §2.1) is read → decide → apply:

1. **read** (:meth:`HpaLoop.read`) the snapshot (:class:`~.hpa_decision.HpaSnapshot`):
   resolve ``scaleTargetRef`` (:mod:`.scale_targets`) and read ``/scale``; when the metrics
   decide (the count within ``[minReplicas, maxReplicas]``,
   :func:`~.hpa_decision.metrics_to_read`), the pods of the scale's selector
   (``SelectorRequired``, ``InvalidSelector``, ``AmbiguousSelector`` against the selectors of
   the other HPAs of the pass) and every metric (:mod:`.metrics_sources`). A read that fails
   is kept as upstream's failure, for the decision to report;
2. **decide** (:class:`~.hpa_decision.HpaDecision`, pure: no client, no await) on the snapshot
   and the HPA's memory, in upstream's order: ``FailedGetScale``; ``ScalingDisabled`` or the
   clamp into ``[min, max]``; the proposals (:mod:`.metric_proposals`) and their
   normalization (:mod:`.replica_decision`, :mod:`.normalization`); the ``Scale``; the status
   (written only when it changed, also after a failed rescale); the events;
3. **apply**: the loop drives the decision, each intent through the executor under the
   reconcile's deadline, each outcome sent back (the status write follows the ``Scale``'s
   outcome), and keeps the memory the decision returns.

The kubescale additions hook in at step 3: scale to/from zero (:mod:`.scale_to_zero`),
PromQL External metrics (:class:`~.metrics_sources.PromQLSource`), predictive scale-up
(:mod:`.predictive`). Memory per HPA (history, selector, zero and demand state) is dropped when
the HPA disappears or stops being handled.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
from collections.abc import Awaitable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Final, TypeVar

from kubescale.base.clock import Clock
from kubescale.base.logs import component_logger
from kubescale.base.tasks import cancel_and_wait
from kubescale.controllers.hpa.hpa_config import CONTROLLER_ANNOTATION, HpaSettings
from kubescale.controllers.hpa.hpa_decision import (
    ACTOR,
    HpaDecision,
    HpaMemory,
    HpaOutcome,
    HpaSnapshot,
    MetricRead,
    ScaleRead,
    ScaleReadFailed,
    decide,
    metrics_to_read,
    zero_settings_or_none,
)
from kubescale.controllers.hpa.hpa_metrics import HpaMetrics
from kubescale.controllers.hpa.hpa_spec import HpaSpec, HpaSpecError, MetricSpec, parse_hpa
from kubescale.controllers.hpa.metric_proposals import Fetched
from kubescale.controllers.hpa.metrics_sources import (
    MetricFetcher,
    MetricsApiClient,
    PromQLSource,
    fetch_timed_out,
    promql_queries,
)
from kubescale.controllers.hpa.pod_selection import LivePodIndex, SelectionPass, select_pods
from kubescale.controllers.hpa.predictive import DemandHistory
from kubescale.controllers.hpa.scale_targets import (
    CACHED_WORKLOADS,
    ScaleTargetError,
    ScaleTargets,
)
from kubescale.coordination.brain import brain_of
from kubescale.coordination.disruption_ledger import WriteResult, write_outcome
from kubescale.kube.client import KubeClient
from kubescale.kube.errors import KubeApiError, KubeError, KubeTransportError
from kubescale.kube.events import EventRecorder
from kubescale.kube.informer import EventHandlers
from kubescale.kube.resources import (
    HORIZONTAL_POD_AUTOSCALERS,
    PODS,
    REPLICA_SETS,
)
from kubescale.kube.shared_cache import SharedCache
from kubescale.objects.hpa import HorizontalPodAutoscaler
from kubescale.objects.replica_set import ReplicaSet
from kubescale.objects.selectors import LabelSelector
from kubescale.objects.views import Meta, meta, spec_of, status_of
from kubescale.plans.executor import Applied, Decision, PlanExecutor, collect_plan
from kubescale.plans.intents import Event, Intent, Plan, WriteStatus
from kubescale.prometheus.query_api import PrometheusQueryClient
from kubescale.runtime.component import TimelineReport

__all__ = ["DEADLINE_EXCEEDED", "LOOP_NAME", "DeadlineExceeded", "HpaLoop", "handles"]

log = component_logger("hpa-controller")

LOOP_NAME: Final = "hpa-controller"
_MAX_REPORTS: Final = 1000
_HPA_API_VERSION: Final = "autoscaling/v2"
DEADLINE_EXCEEDED: Final = "context deadline exceeded"
"""Go's ``context.DeadlineExceeded`` text, what a client call past its context's deadline says."""

_T = TypeVar("_T")
_Key = tuple[str, str]


class DeadlineExceeded(KubeTransportError):
    """A call of one reconcile outlived the reconcile's deadline (no answer: outcome unknown)."""


async def _until(clock: Clock, deadline: float) -> None:
    """Return once ``deadline`` (``clock.monotonic()``) has passed. A clock whose sleeps take
    no time (a simulated step: time stands still while the step runs) never gets there: then
    this never returns."""
    while (remaining := deadline - clock.monotonic()) > 0:
        before = clock.monotonic()
        await clock.sleep(remaining)
        if clock.monotonic() == before:
            await asyncio.Event().wait()


class _Deadline:
    """One reconcile's deadline on the loop's clock, ``asyncio.timeout``'s mechanism: one timer
    per reconcile, no task per call. Past it, the call in progress (:meth:`call`) is cancelled
    and raises :class:`DeadlineExceeded`, and so does every later call; a cancellation aimed at
    the reconcile from elsewhere (the loop stopping) stays a cancellation."""

    def __init__(self, clock: Clock, seconds: float) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._task = task
        self._clock = clock
        self._seconds = seconds
        self._inside = False
        self._cancelled = False
        self.expired = False
        self._timer: asyncio.Task[None] | None = None
        self.restart()

    def restart(self) -> None:
        """A fresh deadline, ``seconds`` from now."""
        self.close()
        self.expired = False
        self._timer = asyncio.ensure_future(self._expire(self._clock.monotonic() + self._seconds))

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    async def _expire(self, at: float) -> None:
        await _until(self._clock, at)
        self.expired = True
        if self._inside:  # the reconcile waits inside a call: cancel that wait
            self._cancelled = True
            self._task.cancel()

    async def call(self, awaitable: Awaitable[_T]) -> _T:
        if self.expired:
            if inspect.iscoroutine(awaitable):
                awaitable.close()
            raise DeadlineExceeded(DEADLINE_EXCEEDED)
        self._inside = True
        try:
            return await awaitable
        except asyncio.CancelledError:
            if self._cancelled:
                self._cancelled = False
                if self._task.uncancel() == 0:  # ours alone
                    raise DeadlineExceeded(DEADLINE_EXCEEDED) from None
            raise
        finally:
            self._inside = False
            if self._cancelled:  # the call ended otherwise than by our cancellation
                self._cancelled = False
                self._task.uncancel()


def handles(hpa: HorizontalPodAutoscaler, settings: HpaSettings) -> bool:
    """Whether this process reconciles ``hpa`` (coexistence with kube-controller-manager)."""
    owner = (Meta(hpa).raw.get("annotations") or {}).get(CONTROLLER_ANNOTATION)
    if settings.selection == "all":
        return owner != "kube-controller-manager"
    return owner == "kubescale"


@dataclass
class _State:
    """What the loop keeps about one HPA between reconciles: the decision's memory, and the
    selector last read (upstream's ``hpaSelectors``: each pass starts knowing which pods every
    HPA selects, for ``AmbiguousSelector``)."""

    memory: HpaMemory = field(default_factory=HpaMemory)
    selector: LabelSelector | None = None


@dataclass
class _Reconcile:
    """One reconcile: the HPA (a copy), its spec, and the deadline its reads and writes run
    under."""

    hpa: HorizontalPodAutoscaler
    spec: HpaSpec
    now: datetime
    deadline: _Deadline | None = None

    async def call(self, awaitable: Awaitable[_T]) -> _T:
        """``awaitable`` under the reconcile's deadline (:class:`_Deadline`)."""
        if self.deadline is None:
            return await awaitable
        return await self.deadline.call(awaitable)


class HpaLoop:
    """The HPA controller's loop (module docstring); a ``kubescale.runtime`` loop."""

    name = LOOP_NAME

    def __init__(
        self,
        *,
        client: KubeClient,
        cache: SharedCache,
        settings: HpaSettings,
        metrics: HpaMetrics,
        events: EventRecorder,
        prometheus: PrometheusQueryClient | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.client = client
        self.clock = clock if clock is not None else client.clock
        """Deadlines and the pass's wait (the client's clock unless given)."""
        self.cache = cache
        self.informers = informers = cache.informers
        self.settings = settings
        self.metrics = metrics
        self.events = events
        self.executor = PlanExecutor(
            client=client,
            ledger=brain_of(cache).ledger,
            events=events,
            registry=metrics.registry,
            dry_run=settings.dry_run,
        )
        """Every write of the loop -- scale, status, events -- goes through it (``--dry-run``:
        printed instead)."""
        self.hpas = informers.informer(HORIZONTAL_POD_AUTOSCALERS)
        self.pods = informers.informer(PODS)
        for workload in CACHED_WORKLOADS:  # the Scale of the built-in workloads, cached
            informers.informer(workload)
        self.metrics_api = MetricsApiClient(client)
        self.fetcher = MetricFetcher(self.metrics_api, PromQLSource(prometheus))
        self.targets = ScaleTargets(client)
        self.states: dict[tuple[str, str], _State] = {}
        self.reconciled = 0
        self._reports: list[TimelineReport] = []
        self.pod_index = LivePodIndex()
        """The pods by label, kept by the pod informer's events (not rebuilt each pass)."""
        self.pods.add_handlers(
            EventHandlers(
                on_add=self.pod_index.add,
                on_update=self.pod_index.update,
                on_delete=self.pod_index.delete,
            )
        )
        self.selection = SelectionPass(self.pods.lister.list, self.pod_index)
        self._workers = asyncio.Semaphore(settings.concurrent_syncs)
        self._in_flight: dict[_Key, asyncio.Task[None]] = {}

    def drain_reports(self) -> list[TimelineReport]:
        """What the loop did since the last call, for a simulation's timeline: each rescale
        (``("hpa-rescale", "<namespace>/<hpa>", "New size: N; reason: ...")``)."""
        reports, self._reports = self._reports, []
        return reports

    def reset(self) -> None:
        """Forget every HPA's history: a new term of leadership starts as upstream's
        controller starts (another replica may have scaled meanwhile). Reconciles still
        running from the previous term are cancelled."""
        self.states = {}
        for task in self._in_flight.values():
            task.cancel()

    async def close(self) -> None:
        """Cancel the reconciles in flight and wait for them to end."""
        await cancel_and_wait(*self._in_flight.values())

    def in_flight(self) -> frozenset[_Key]:
        """The HPAs (namespace, name) whose reconcile is running."""
        return frozenset(self._in_flight)

    def demand_history(self, namespace: str, name: str) -> DemandHistory:
        """The predictive demand history of one HPA (created empty on first use)."""
        state = self.states.setdefault((namespace, name), _State())
        demand = state.memory.demand
        if demand is None:
            demand = DemandHistory()
            state.memory = replace(state.memory, demand=demand)
        return demand

    async def wait_for_resource_version(self, resource_version: str, *, within: float) -> bool:
        return await self.cache.wait_for_resource_version(resource_version, within=within)

    async def run_once(self, now: datetime) -> None:
        """Start a reconcile of every handled HPA not in flight (:meth:`start_pass`), then wait
        for them until they end or one sync period has passed on the clock, whichever is first:
        the reconciles still running go on, and the next pass skips their HPAs."""
        started = self.start_pass(now)
        if started:
            budget = self.clock.monotonic() + self.settings.sync_period.total_seconds()
            await self._wait(started.values(), until=budget)

    def start_pass(self, now: datetime) -> dict[_Key, asyncio.Task[None]]:
        """The queue's pass: forget the HPAs gone, then one reconcile task per handled HPA whose
        previous reconcile has ended (upstream processes a key in one worker at a time); the
        tasks started, by key."""
        handled = [h for h in self.hpas.lister.list() if handles(h, self.settings)]
        keys = {_key(h) for h in handled}
        for gone in set(self.states) - keys:  # deleted or handed back: forget (upstream)
            del self.states[gone]
            with contextlib.suppress(KeyError):
                self.metrics.desired_replicas.remove(*gone)
        for gone in set(self._in_flight) - keys:  # its reconcile has nothing left to do
            self._in_flight[gone].cancel()
        self.metrics.num_hpas.set(len(handled))
        self._begin_pass()
        started: dict[_Key, asyncio.Task[None]] = {}
        for hpa in sorted(handled, key=_key):
            key = _key(hpa)
            if key in self._in_flight:
                continue
            task = asyncio.create_task(self._work(hpa, now), name=f"hpa:{key[0]}/{key[1]}")
            self._in_flight[key] = started[key] = task
            task.add_done_callback(functools.partial(self._ended, key))
        return started

    def _begin_pass(self) -> None:
        """A pass's fresh reads: the metrics APIs' per-pass answers, and the pods each HPA
        selects (upstream's ``hpaSelectors``: the selectors known so far)."""
        self.metrics_api.begin_pass()
        self.selection = SelectionPass(self.pods.lister.list, self.pod_index)
        for (ns, name), state in self.states.items():
            if state.selector is not None:
                self.selection.own(ns, name, self.selection.select(ns, state.selector))

    async def plan(self, now: datetime) -> Plan:
        """The plan this loop would make now for every handled HPA, in key order: each one's
        snapshot read (:meth:`read`) and decided on its memory, every intent answered done and
        nothing sent. The memory is left as it is -- but for a predictive HPA's demand sample,
        recorded as a reconcile records it. Not while a pass runs: it starts a pass's reads
        afresh (the metrics APIs' answers, the selectors)."""
        handled = sorted(
            (h for h in self.hpas.lister.list() if handles(h, self.settings)), key=_key
        )
        self._begin_pass()
        plan: Plan = []
        for shared in handled:
            hpa = _working_copy(shared)
            try:
                spec = parse_hpa(hpa)
            except HpaSpecError as err:
                plan.append(_invalid_spec(hpa, err))
                continue
            kept = self.states.get(_key(hpa)) or _State(memory=HpaMemory(first_seen=now))
            state = _State(memory=kept.memory, selector=kept.selector)  # a copy: nothing moves
            deadline = _Deadline(self.clock, self.settings.reconcile_timeout.total_seconds())
            try:
                snapshot = await self.read(_Reconcile(hpa, spec, now, deadline), state)
            finally:
                deadline.close()
            intents, _ = collect_plan(decide(snapshot, state.memory, now, settings=self.settings))
            plan.extend(intents)
        return plan

    async def _work(self, hpa: HorizontalPodAutoscaler, now: datetime) -> None:
        async with self._workers:  # --concurrent-horizontal-pod-autoscaler-syncs
            await self.reconcile(hpa, now)

    def _ended(self, key: _Key, task: asyncio.Task[None]) -> None:
        if self._in_flight.get(key) is task:
            del self._in_flight[key]
        if not task.cancelled() and task.exception() is not None:  # reconcile catches Exception
            log.error("reconcile task failed", exc_info=task.exception())

    async def _wait(self, tasks: Iterable[asyncio.Task[None]], *, until: float) -> None:
        """Until every task has ended or ``until`` (monotonic) has passed; the tasks are not
        cancelled by the budget, only when this wait is (the loop is stopping). One callback
        per task (a pass of 1,000 HPAs is not 1,000 ``asyncio.wait`` calls over the rest)."""
        pending = {task for task in tasks if not task.done()}
        if not pending:
            return
        all_ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def ended(task: asyncio.Task[None]) -> None:
            pending.discard(task)
            if not pending and not all_ended.done():
                all_ended.set_result(None)

        watched = list(pending)
        for task in watched:
            task.add_done_callback(ended)
        timer = asyncio.ensure_future(_until(self.clock, until))
        try:
            await asyncio.wait({all_ended, timer}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            await cancel_and_wait(*pending)
            raise
        finally:
            for task in watched:
                task.remove_done_callback(ended)
            all_ended.cancel()
            await cancel_and_wait(timer)

    # --- one reconcile ------------------------------------------------------------------------

    async def reconcile(self, shared: HorizontalPodAutoscaler, now: datetime) -> None:
        """One HPA: read its snapshot (:meth:`read`), decide (:class:`~.hpa_decision.
        HpaDecision`, pure), and apply the decision's intents through the executor as it
        yields them (:meth:`_drive`)."""
        started = self.client.clock.monotonic()
        hpa = _working_copy(shared)
        key = _key(hpa)
        state = self.states.setdefault(key, _State())
        if state.memory.first_seen is None:
            state.memory = replace(state.memory, first_seen=now)
        action, error_label = "none", "none"
        try:
            spec = parse_hpa(hpa)
        except HpaSpecError as err:
            self.executor.note(_invalid_spec(hpa, err))
            self._observe(started, "none", "spec")
            return
        deadline = _Deadline(self.clock, self.settings.reconcile_timeout.total_seconds())
        run = _Reconcile(hpa=hpa, spec=spec, now=now, deadline=deadline)
        decision: HpaDecision | None = None
        try:
            snapshot = await self.read(run, state)
            decision = HpaDecision(snapshot, state.memory, now, settings=self.settings)
            outcome = await self._drive(run, decision.decide())
            state.memory = outcome.memory
            action, error_label = outcome.action, outcome.error_label
            self._report(snapshot, outcome)
        except asyncio.CancelledError:
            raise
        except KubeError as err:
            error_label = "internal"
            log.warning(
                "reconcile failed", extra={"fields": {"hpa": "/".join(key), "error": str(err)}}
            )
        except Exception as err:  # a bug, or an answer nothing above expected
            # this HPA's failure only: its condition and event, the other HPAs go on
            error_label = "internal"
            log.exception("reconcile failed", extra={"fields": {"hpa": "/".join(key)}})
            if decision is None:  # the reads raised: nothing decided yet
                decision = HpaDecision(
                    HpaSnapshot(hpa=hpa, spec=spec, scale=ScaleReadFailed(message="")),
                    state.memory,
                    now,
                    settings=self.settings,
                )
            await self._internal_failure(
                run, decision, f"internal error: {type(err).__name__}: {err}"
            )
        finally:
            deadline.close()
        self.reconciled += 1
        self._observe(started, action, error_label)

    async def _internal_failure(self, run: _Reconcile, decision: HpaDecision, text: str) -> None:
        """A reconcile that raised: its decision's :meth:`~.hpa_decision.HpaDecision.
        internal_failure` plan, the status written as far as the API server takes it."""
        try:
            await self._drive(run, decision.internal_failure(text))
        except asyncio.CancelledError:
            raise
        except Exception:  # the write path itself is what failed: the log has it already
            log.warning("status not written after a failed reconcile", exc_info=True)

    def _observe(self, started: float, action: str, error: str) -> None:
        elapsed = self.client.clock.monotonic() - started
        self.metrics.reconciliations.labels(action, error).inc()
        self.metrics.reconciliation_duration.labels(action, error).observe(max(0.0, elapsed))

    def _report(self, snapshot: HpaSnapshot, outcome: HpaOutcome) -> None:
        """The decision's metrics, timeline entry and log line."""
        spec = snapshot.spec
        for computed in outcome.computations:
            labels = (computed.action, computed.error, computed.type)
            self.metrics.metric_computation.labels(*labels).inc()
            self.metrics.metric_computation_duration.labels(*labels).observe(computed.seconds)
        if isinstance(snapshot.scale, ScaleReadFailed):
            reference = f"{spec.target_kind}/{spec.namespace}/{spec.target_name}"
            log.info("failed to query scale subresource", extra={"fields": {"target": reference}})
        if outcome.desired is not None:
            self.metrics.desired_replicas.labels(spec.namespace, spec.name).set(outcome.desired)
        if not outcome.rescaled:
            return
        if len(self._reports) < _MAX_REPORTS:
            self._reports.append(("hpa-rescale", f"{spec.namespace}/{spec.name}", outcome.rescaled))
        log.info(
            "successful rescale",
            extra={
                "fields": {
                    "hpa": f"{spec.namespace}/{spec.name}",
                    "old": outcome.previous,
                    "new": outcome.desired,
                    "reason": outcome.reason,
                }
            },
        )

    # --- applying a decision --------------------------------------------------------------------

    async def _drive(self, run: _Reconcile, decision: Decision[_T]) -> _T:
        """Run ``decision``: each intent it yields applied (:meth:`_apply`), its outcome sent
        back; its return value."""
        try:
            intent = next(decision)
            while True:
                intent = decision.send(await self._apply(run, intent))
        except StopIteration as stop:
            result: _T = stop.value
            return result

    async def _apply(self, run: _Reconcile, intent: Intent) -> Applied:
        """One intent through the executor, under the reconcile's deadline: past it the write's
        outcome is unknown (:class:`DeadlineExceeded`: no answer). The status write gets a
        deadline of its own: the status tells what happened to the steps that timed out."""
        if isinstance(intent, Event):
            return self.executor.note(intent)
        if isinstance(intent, WriteStatus) and run.deadline is not None:
            run.deadline.restart()
        try:
            return await run.call(self.executor.execute(intent, now=run.now))
        except KubeError as err:
            return Applied(WriteResult(write_outcome(err), err))

    # --- reading ---------------------------------------------------------------------------------

    async def read(self, run: _Reconcile, state: _State) -> HpaSnapshot:
        """The snapshot one reconcile decides on: the target's Scale, then — when the metrics
        decide (:func:`~.hpa_decision.metrics_to_read`) — the selector's pods and every metric.
        A failed read is kept as its failure (:class:`~.hpa_decision.ScaleReadFailed`, a
        metric's ``FetchError``); a read past the reconcile's deadline fails with
        "context deadline exceeded"."""
        spec, hpa = run.spec, run.hpa
        try:
            answer, resource = await run.call(
                self.targets.current_scale(
                    spec.target_api_version,
                    spec.target_kind,
                    name=spec.target_name,
                    namespace=spec.namespace,
                    informers=self.informers,
                ),
            )
        except (ScaleTargetError, KubeError) as err:
            text = err.message if isinstance(err, KubeApiError) else str(err)
            failed = ScaleReadFailed(message=text, spec_error=isinstance(err, ScaleTargetError))
            return HpaSnapshot(hpa=hpa, spec=spec, scale=failed)
        scale = ScaleRead(
            replicas=int(spec_of(answer).get("replicas") or 0),
            status_replicas=int(status_of(answer).get("replicas") or 0),
            resource=resource,
            selector=str(status_of(answer).get("selector") or ""),
            uid=meta(answer).uid,
        )
        wanted = metrics_to_read(spec, scale.replicas, zero_settings_or_none(hpa))
        if wanted is None:
            return HpaSnapshot(hpa=hpa, spec=spec, scale=scale)
        pods = select_pods(
            self.selection,
            namespace=spec.namespace,
            hpa=spec.name,
            selector_text=scale.selector,
            owner_uid=scale.uid if spec.selection_strategy == "OwnerReferences" else None,
            lookup=self._owner_lookup,
        )
        if pods.selector is not None:
            state.selector = pods.selector
        if pods.pods is None:
            return HpaSnapshot(hpa=hpa, spec=spec, scale=scale, pods=pods)
        queries = promql_queries(hpa)
        metrics = [
            await self._fetch(run, m, selector=scale.selector, queries=queries) for m in wanted
        ]
        return HpaSnapshot(hpa=hpa, spec=spec, scale=scale, pods=pods, metrics=tuple(metrics))

    async def _fetch(
        self, run: _Reconcile, metric: MetricSpec, *, selector: str, queries: Mapping[str, str]
    ) -> MetricRead:
        """One metric's values, or its fetch error once the reconcile's deadline has passed."""
        started = self.client.clock.monotonic()
        fetched: Fetched | None
        try:
            fetched = await run.call(
                self.fetcher.fetch(
                    metric,
                    namespace=run.spec.namespace,
                    selector=selector,
                    queries=queries,
                    now=run.now,
                ),
            )
        except DeadlineExceeded as err:
            fetched = fetch_timed_out(metric, queries, str(err))
        seconds = max(0.0, self.client.clock.monotonic() - started)
        return MetricRead(metric=metric, fetched=fetched, seconds=seconds)

    def _owner_lookup(self, namespace: str, kind: str, name: str) -> ReplicaSet | None:
        if kind != "ReplicaSet":
            return None
        return self.informers.informer(REPLICA_SETS).lister.get(name, namespace)


def _working_copy(shared: HorizontalPodAutoscaler) -> HorizontalPodAutoscaler:
    """The cached object is read-only: a shallow copy, whose status is rebuilt, never
    mutated."""
    hpa = HorizontalPodAutoscaler(**shared)
    hpa.setdefault("apiVersion", _HPA_API_VERSION)
    hpa.setdefault("kind", "HorizontalPodAutoscaler")
    return hpa


def _invalid_spec(hpa: HorizontalPodAutoscaler, err: HpaSpecError) -> Event:
    return Event(actor=ACTOR, involved=hpa, type="Warning", reason="InvalidSpec", message=str(err))


def _key(hpa: HorizontalPodAutoscaler) -> tuple[str, str]:
    view = meta(hpa)
    return (view.namespace, view.name)
