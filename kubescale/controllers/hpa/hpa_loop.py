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

One reconcile (reference §2.1):

1. resolve ``scaleTargetRef`` (:mod:`.scale_targets`) and GET ``/scale``; failure →
   ``AbleToScale=False/FailedGetScale`` and the event, status written, done;
2. seed the recommendation history on first sight; ``current == 0`` with ``minReplicas > 0``
   → ``ScalingDisabled``; above max / below min → clamp without reading metrics;
3. otherwise validate the scale's selector (``SelectorRequired``, ``InvalidSelector``,
   ``AmbiguousSelector`` against the selectors of the other HPAs reconciled so far), fetch
   every metric (:mod:`.metrics_sources`), compute the proposals (:mod:`.metric_proposals`)
   and decide (:mod:`.replica_decision`, pure: the largest proposal, normalized by
   :mod:`.normalization`); no usable answer → ``FailedComputeMetricsReplicas`` and the
   status, done;
4. rescale through ``/scale`` when the count changes (``SuccessfulRescale`` / ``FailedRescale``);
5. write the status only when it changed.

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
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, TypeVar

from kubescale.base.clock import Clock
from kubescale.base.logs import component_logger
from kubescale.base.tasks import cancel_and_wait
from kubescale.controllers.hpa.hpa_config import CONTROLLER_ANNOTATION, HpaSettings
from kubescale.controllers.hpa.hpa_metrics import HpaMetrics, action_label
from kubescale.controllers.hpa.hpa_spec import HpaSpec, HpaSpecError, MetricSpec, parse_hpa
from kubescale.controllers.hpa.hpa_status import (
    ABLE_TO_SCALE,
    SCALING_ACTIVE,
    set_condition,
)
from kubescale.controllers.hpa.metric_proposals import (
    Fetched,
    MetricOutcome,
    ReplicaInputs,
    compute_metric,
    compute_metrics,
)
from kubescale.controllers.hpa.metrics_sources import (
    MetricFetcher,
    MetricsApiClient,
    PromQLSource,
    fetch_timed_out,
    promql_queries,
)
from kubescale.controllers.hpa.normalization import (
    ScalingHistory,
    initial_history,
    store_scale_event,
)
from kubescale.controllers.hpa.pod_selection import SelectionPass, select_pods
from kubescale.controllers.hpa.predictive import DemandHistory, demand_of, predictive_settings
from kubescale.controllers.hpa.replica_calculator import Tolerances
from kubescale.controllers.hpa.replica_decision import (
    decide_at_zero,
    decide_replicas,
    failed_metrics,
)
from kubescale.controllers.hpa.scale_targets import (
    CACHED_WORKLOADS,
    ScaleTargetError,
    ScaleTargets,
)
from kubescale.controllers.hpa.scale_to_zero import (
    ZeroSettings,
    activation_value,
    decide_zero,
    is_active,
    zero_settings,
)
from kubescale.coordination.brain import brain_of
from kubescale.kube.client import KubeClient
from kubescale.kube.errors import KubeApiError, KubeError, KubeTransportError
from kubescale.kube.event_correlation import format_time
from kubescale.kube.events import EventRecorder
from kubescale.kube.resources import (
    HORIZONTAL_POD_AUTOSCALERS,
    PODS,
    REPLICA_SETS,
)
from kubescale.kube.shared_cache import SharedCache
from kubescale.objects.selectors import (
    LabelSelector,
)
from kubescale.objects.views import Meta, spec_of, status_of
from kubescale.plans.executor import PlanExecutor
from kubescale.plans.intents import Event, ObjectRef, Scale, WriteStatus
from kubescale.prometheus.query_api import PrometheusQueryClient
from kubescale.runtime.component import TimelineReport

__all__ = ["DEADLINE_EXCEEDED", "LOOP_NAME", "DeadlineExceeded", "HpaLoop", "handles"]

log = component_logger("hpa-controller")

LOOP_NAME: Final = "hpa-controller"
ACTOR: Final = "horizontal-pod-autoscaler"
"""The controller's name on its intents (upstream's event source)."""
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


def handles(hpa: Mapping[str, Any], settings: HpaSettings) -> bool:
    """Whether this process reconciles ``hpa`` (coexistence with kube-controller-manager)."""
    owner = (Meta(hpa).raw.get("annotations") or {}).get(CONTROLLER_ANNOTATION)
    if settings.selection == "all":
        return owner != "kube-controller-manager"
    return owner == "kubescale"


@dataclass
class _State:
    """What the loop remembers about one HPA between reconciles."""

    history: ScalingHistory | None = None
    selector: LabelSelector | None = None
    first_seen: datetime | None = None
    last_active: datetime | None = None
    demand: DemandHistory | None = None


@dataclass
class _Reconcile:
    """One reconcile's working copy of the status."""

    hpa: dict[str, Any]
    spec: HpaSpec
    now: datetime
    conditions: list[dict[str, Any]] = field(default_factory=list)
    error_label: str = "none"
    deadline: _Deadline | None = None

    async def call(self, awaitable: Awaitable[_T]) -> _T:
        """``awaitable`` under the reconcile's deadline (:class:`_Deadline`)."""
        if self.deadline is None:
            return await awaitable
        return await self.deadline.call(awaitable)

    def condition(self, type: str, status: bool, reason: str, message: str) -> None:
        self.conditions = set_condition(
            self.conditions, type=type, status=status, reason=reason, message=message, now=self.now
        )


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
        self.selection = SelectionPass(self.pods.lister.list)
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
        if state.demand is None:
            state.demand = DemandHistory()
        return state.demand

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
        self.metrics_api.begin_pass()
        self.selection = SelectionPass(self.pods.lister.list)
        for (ns, name), state in self.states.items():  # hpaSelectors: the selectors known
            if state.selector is not None:
                self.selection.own(ns, name, self.selection.select(ns, state.selector))
        started: dict[_Key, asyncio.Task[None]] = {}
        for hpa in sorted(handled, key=_key):
            key = _key(hpa)
            if key in self._in_flight:
                continue
            task = asyncio.create_task(self._work(hpa, now), name=f"hpa:{key[0]}/{key[1]}")
            self._in_flight[key] = started[key] = task
            task.add_done_callback(functools.partial(self._ended, key))
        return started

    async def _work(self, hpa: Mapping[str, Any], now: datetime) -> None:
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

    async def reconcile(self, shared: Mapping[str, Any], now: datetime) -> None:
        started = self.client.clock.monotonic()
        # the cached object is read-only: a shallow copy, the status is rebuilt, never mutated
        hpa = dict(shared)
        hpa.setdefault("apiVersion", _HPA_API_VERSION)
        hpa.setdefault("kind", "HorizontalPodAutoscaler")
        key = _key(hpa)
        state = self.states.setdefault(key, _State())
        if state.first_seen is None:
            state.first_seen = now
        original_status: Mapping[str, Any] = status_of(hpa)
        action = "none"
        try:
            spec = parse_hpa(hpa)
        except HpaSpecError as err:
            self._event(hpa, "Warning", "InvalidSpec", str(err))
            self._observe(started, "none", "spec")
            return
        deadline = _Deadline(self.clock, self.settings.reconcile_timeout.total_seconds())
        run = _Reconcile(
            hpa=hpa,
            spec=spec,
            now=now,
            conditions=list(original_status.get("conditions") or []),
            deadline=deadline,
        )
        try:
            action = await self._reconcile(run, state, original_status)
        except asyncio.CancelledError:
            raise
        except KubeError as err:
            run.error_label = "internal"
            log.warning(
                "reconcile failed", extra={"fields": {"hpa": "/".join(key), "error": str(err)}}
            )
        except Exception as err:  # a bug, or an answer nothing above expected
            # this HPA's failure only: its condition and event, the other HPAs go on
            run.error_label = "internal"
            log.exception("reconcile failed", extra={"fields": {"hpa": "/".join(key)}})
            await self._internal_failure(run, f"internal error: {type(err).__name__}: {err}")
        finally:
            deadline.close()
        self.reconciled += 1
        self._observe(started, action, run.error_label)

    async def _internal_failure(self, run: _Reconcile, text: str) -> None:
        """``ScalingActive=False`` and a ``FailedComputeMetricsReplicas`` event for a reconcile
        that raised; the status written as far as the API server takes it."""
        self._event(run.hpa, "Warning", "FailedComputeMetricsReplicas", text)
        run.condition(
            SCALING_ACTIVE,
            False,
            "FailedComputeMetricsReplicas",
            f"the HPA was unable to compute the replica count: {text}",
        )
        try:
            await self._write_status(run, status_of(run.hpa), self._status(run.hpa, run))
        except asyncio.CancelledError:
            raise
        except Exception:  # the write path itself is what failed: the log has it already
            log.warning("status not written after a failed reconcile", exc_info=True)

    def _observe(self, started: float, action: str, error: str) -> None:
        elapsed = self.client.clock.monotonic() - started
        self.metrics.reconciliations.labels(action, error).inc()
        self.metrics.reconciliation_duration.labels(action, error).observe(max(0.0, elapsed))

    async def _reconcile(
        self, run: _Reconcile, state: _State, original_status: Mapping[str, Any]
    ) -> str:
        spec, hpa, now = run.spec, run.hpa, run.now
        reference = f"{spec.target_kind}/{spec.namespace}/{spec.target_name}"
        try:
            scale, resource = await run.call(
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
            run.error_label = "spec" if isinstance(err, ScaleTargetError) else "internal"
            self._event(hpa, "Warning", "FailedGetScale", text)
            run.condition(
                ABLE_TO_SCALE,
                False,
                "FailedGetScale",
                f"the HPA controller was unable to get the target's current scale: {text}",
            )
            await self._write_status(run, original_status, self._status(hpa, run))
            log.info("failed to query scale subresource", extra={"fields": {"target": reference}})
            return "none"
        run.condition(
            ABLE_TO_SCALE,
            True,
            "SucceededGetScale",
            "the HPA controller was able to get the target's current scale",
        )
        current = int(spec_of(scale).get("replicas") or 0)
        status_replicas = int(status_of(scale).get("replicas") or 0)
        if state.history is None:
            state.history = initial_history(current, now)
        try:
            zero = zero_settings(hpa)
        except HpaSpecError as err:
            self._event(hpa, "Warning", "InvalidSpec", str(err))
            zero = None
        min_replicas = spec.min_replicas
        desired = 0
        reason = ""
        statuses: list[dict[str, Any]] | None = None
        rescale = True
        if current == 0 and min_replicas != 0 and zero is None:
            rescale = False
            run.condition(
                SCALING_ACTIVE,
                False,
                "ScalingDisabled",
                "scaling is disabled since the replica count of the target is zero",
            )
        elif current > spec.max_replicas:
            reason, desired = "Current number of replicas above Spec.MaxReplicas", spec.max_replicas
        elif current < min_replicas and not (zero is not None and current == 0):
            reason, desired = "Current number of replicas below Spec.MinReplicas", min_replicas
        else:
            computed = await self._compute(
                run, state, scale, current=current, status_replicas=status_replicas, zero=zero
            )
            if computed is None:
                return "none"
            desired, reason, statuses = computed
            rescale = desired != current
        if rescale:
            failure: KubeError | None
            try:
                applied = await run.call(
                    self.executor.execute(
                        Scale(
                            actor=ACTOR,
                            target=ObjectRef(resource, spec.namespace, spec.target_name),
                            replicas=desired,
                        ),
                        now=now,
                    )
                )
                failure = applied.error
            except KubeError as err:
                failure = err
            if failure is not None:
                text = failure.message if isinstance(failure, KubeApiError) else str(failure)
                run.error_label = "internal"
                self._event(
                    hpa,
                    "Warning",
                    "FailedRescale",
                    f"New size: {desired}; reason: {reason}; error: {text}",
                )
                run.condition(
                    ABLE_TO_SCALE,
                    False,
                    "FailedUpdateScale",
                    f"the HPA controller was unable to update the target scale: {text}",
                )
                if not isinstance(failure, KubeApiError) or failure.code >= 500:
                    # outcome unknown: count it for the rate limits until proven otherwise
                    state.history = store_scale_event(
                        state.history, spec.behavior, previous=current, new=desired, now=now
                    )
                status = self._status(hpa, run)
                status["currentReplicas"] = current
                if statuses is not None:
                    status["currentMetrics"] = statuses
                await self._write_status(run, original_status, status)
                return "none"
            run.condition(
                ABLE_TO_SCALE,
                True,
                "SucceededRescale",
                f"the HPA controller was able to update the target scale to {desired}",
            )
            message = f"New size: {desired}; reason: {reason}"
            self._event(hpa, "Normal", "SuccessfulRescale", message)
            if len(self._reports) < _MAX_REPORTS:
                self._reports.append(("hpa-rescale", f"{spec.namespace}/{spec.name}", message))
            state.history = store_scale_event(
                state.history, spec.behavior, previous=current, new=desired, now=now
            )
            log.info(
                "successful rescale",
                extra={
                    "fields": {
                        "hpa": f"{spec.namespace}/{spec.name}",
                        "old": current,
                        "new": desired,
                        "reason": reason,
                    }
                },
            )
        else:
            desired = current
        self.metrics.desired_replicas.labels(spec.namespace, spec.name).set(desired)
        status = self._status(hpa, run)
        status["currentReplicas"] = current
        status["desiredReplicas"] = desired
        if statuses is not None:
            status["currentMetrics"] = statuses
        else:
            status.pop("currentMetrics", None)
        if rescale:
            status["lastScaleTime"] = format_time(now)
        await self._write_status(run, original_status, status)
        return action_label(current, desired) if rescale else "none"

    # --- metrics --------------------------------------------------------------------------------

    async def _compute(
        self,
        run: _Reconcile,
        state: _State,
        scale: Mapping[str, Any],
        *,
        current: int,
        status_replicas: int,
        zero: ZeroSettings | None,
    ) -> tuple[int, str, list[dict[str, Any]]] | None:
        """Step 3; None when the reconcile ended (status written)."""
        spec, hpa, now = run.spec, run.hpa, run.now
        selector_text = str(status_of(scale).get("selector") or "")
        pods = await self._selected_pods(run, state, selector_text, scale)
        if pods is None:
            return None
        tolerances = self._tolerances(spec)
        inputs = ReplicaInputs(
            spec_replicas=current,
            status_replicas=status_replicas,
            pods=pods,
            tolerances=tolerances,
            cpu_initialization_period=self.settings.cpu_initialization_period,
            initial_readiness_delay=self.settings.initial_readiness_delay,
            now=now,
        )
        queries = promql_queries(hpa)
        metric_specs = spec.metrics
        if zero is not None and current == 0:  # only activation metrics can be read at zero
            metric_specs = tuple(m for m in spec.metrics if m.type in ("Object", "External"))
        fetched = [
            await self._fetch(run, m, selector=selector_text, queries=queries) for m in metric_specs
        ]
        outcomes: list[MetricOutcome] = []
        for metric, values in zip(metric_specs, fetched, strict=True):
            clock = self.client.clock.monotonic()
            outcome = compute_metric(metric, values, inputs, namespace=spec.namespace)
            outcomes.append(outcome)
            if outcome.failed:
                self._event(hpa, "Warning", outcome.reason, outcome.error)
            error = (
                "spec"
                if outcome.reason == "InvalidMetricSourceType"
                else ("internal" if outcome.failed else "none")
            )
            action = (
                "none"
                if outcome.failed
                else action_label(int(status_of(hpa).get("currentReplicas") or 0), outcome.replicas)
            )
            self.metrics.metric_computation.labels(action, error, metric.type).inc()
            self.metrics.metric_computation_duration.labels(action, error, metric.type).observe(
                max(0.0, self.client.clock.monotonic() - clock)
            )
        activation = [
            activation_value(v)
            for m, v in zip(metric_specs, fetched, strict=True)
            if m.type in ("Object", "External")
        ]
        zero_decision = None
        if zero is not None:
            zero_decision = decide_zero(
                current=current,
                active=is_active(activation, threshold_milli=zero.activation_threshold_milli),
                last_active=state.last_active,
                first_seen=state.first_seen or now,
                min_replicas=spec.min_replicas,
                settings=zero,
                now=now,
            )
            state.last_active = zero_decision.last_active
        if zero_decision is not None and current == 0:
            decision = decide_at_zero(zero_decision.replicas or 0, outcomes)
        else:
            result = compute_metrics(outcomes, spec_replicas=current)
            if result.replicas == -1:
                decision = failed_metrics(result)
            else:
                decision = decide_replicas(
                    result=result,
                    spec=spec,
                    current=current,
                    history=state.history,
                    zero=zero_decision,
                    predicted=self._prediction(
                        run,
                        state,
                        spec.metrics[0] if spec.metrics else None,
                        outcomes[0] if outcomes else None,
                        current=current,
                    ),
                    downscale_window=self.settings.downscale_stabilization,
                    now=now,
                )
        for change in decision.conditions:
            run.condition(change.type, change.status, change.reason, change.message)
        if decision.error_label != "none":
            run.error_label = decision.error_label
        if decision.history is not None:
            state.history = decision.history
        if decision.replicas is None:
            status = self._status(hpa, run)
            status["currentReplicas"] = current
            status["currentMetrics"] = decision.statuses
            await self._write_status(run, status_of(hpa), status)
            self._event(hpa, "Warning", "FailedComputeMetricsReplicas", decision.failure)
            return None
        return decision.replicas, decision.reason, decision.statuses

    async def _fetch(
        self, run: _Reconcile, metric: MetricSpec, *, selector: str, queries: Mapping[str, str]
    ) -> Fetched | None:
        """One metric's values, or its fetch error once the reconcile's deadline has passed."""
        try:
            return await run.call(
                self.fetcher.fetch(
                    metric,
                    namespace=run.spec.namespace,
                    selector=selector,
                    queries=queries,
                    now=run.now,
                ),
            )
        except DeadlineExceeded as err:
            return fetch_timed_out(metric, queries, str(err))

    def _prediction(
        self,
        run: _Reconcile,
        state: _State,
        metric: MetricSpec | None,
        outcome: MetricOutcome | None,
        *,
        current: int,
    ) -> int | None:
        try:
            settings = predictive_settings(run.hpa)
        except HpaSpecError as err:
            self._event(run.hpa, "Warning", "InvalidSpec", str(err))
            return None
        if settings is None or metric is None or outcome is None or outcome.failed:
            return None
        demand = demand_of(metric, outcome.status, ready=max(current, 1))
        if demand is None:
            return None
        if state.demand is None:
            state.demand = DemandHistory()
        state.demand.record(run.now, demand)
        return state.demand.proposal(run.now, lead=settings.lead)

    def _tolerances(self, spec: HpaSpec) -> Tolerances:
        """``tolerancesForHpa``: the flag, overridden per direction by ``behavior.*.tolerance``
        when ``HPAConfigurableTolerance`` is on."""
        down = up = self.settings.tolerance
        if self.settings.configurable_tolerance_gate and spec.behavior is not None:
            if spec.behavior.scale_down.tolerance is not None:
                down = spec.behavior.scale_down.tolerance
            if spec.behavior.scale_up.tolerance is not None:
                up = spec.behavior.scale_up.tolerance
        return Tolerances(scale_down=down, scale_up=up)

    async def _selected_pods(
        self, run: _Reconcile, state: _State, selector_text: str, scale: Mapping[str, Any]
    ) -> list[dict[str, Any]] | None:
        """``validateAndParseSelector`` then the pods; None when the reconcile ended."""
        spec, hpa = run.spec, run.hpa
        outcome = select_pods(
            self.selection,
            namespace=spec.namespace,
            hpa=spec.name,
            selector_text=selector_text,
            owner_uid=str(Meta(scale).raw.get("uid") or "")
            if spec.selection_strategy == "OwnerReferences"
            else None,
            lookup=self._owner_lookup,
        )
        if outcome.selector is not None:
            state.selector = outcome.selector
        if outcome.pods is not None:
            return outcome.pods
        self._event(hpa, "Warning", outcome.event_reason, outcome.message)
        run.condition(SCALING_ACTIVE, False, outcome.condition_reason, outcome.condition_message)
        message = outcome.message
        run.error_label = "spec"
        status = self._status(hpa, run)
        status["currentReplicas"] = int(spec_of(scale).get("replicas") or 0)
        await self._write_status(run, status_of(hpa), status)
        self._event(hpa, "Warning", "FailedComputeMetricsReplicas", message)
        return None

    def _owner_lookup(self, namespace: str, kind: str, name: str) -> Mapping[str, Any] | None:
        if kind != "ReplicaSet":
            return None
        return self.informers.informer(REPLICA_SETS).lister.get(name, namespace)

    # --- writes ---------------------------------------------------------------------------------

    def _status(self, hpa: Mapping[str, Any], run: _Reconcile) -> dict[str, Any]:
        status = dict(status_of(hpa))
        status["conditions"] = run.conditions
        if run.spec.generation:
            status["observedGeneration"] = run.spec.generation
        status.setdefault("currentReplicas", 0)
        status.setdefault("desiredReplicas", 0)
        return status

    async def _write_status(
        self,
        run: _Reconcile,
        original: Mapping[str, Any],
        status: dict[str, Any],
    ) -> None:
        """``updateStatusIfNeeded``: PUT the status only when it differs."""
        if _json_equal(original, status):
            return
        body = {**run.hpa, "status": status}
        if run.deadline is not None:
            # a deadline of its own: the status tells what happened to the steps that timed out
            run.deadline.restart()
        failure: KubeError | None
        try:
            applied = await run.call(
                self.executor.execute(
                    WriteStatus(actor=ACTOR, resource=HORIZONTAL_POD_AUTOSCALERS, body=body),
                    now=run.now,
                )
            )
            failure = applied.error
        except KubeError as err:
            failure = err
        if failure is not None:
            text = failure.message if isinstance(failure, KubeApiError) else str(failure)
            self._event(run.hpa, "Warning", "FailedUpdateStatus", text)
            run.error_label = "internal"
            return
        updated = applied.stored
        if updated is None:  # a dry run: nothing was stored
            run.hpa["status"] = status
            return
        run.hpa["status"] = updated.get("status") or status
        run.hpa["metadata"] = {
            **Meta(run.hpa).raw,
            "resourceVersion": Meta(updated).raw.get("resourceVersion"),
        }

    def _event(self, hpa: Mapping[str, Any], type: str, reason: str, message: str) -> None:
        self.executor.note(
            Event(actor=ACTOR, involved=hpa, type=type, reason=reason, message=message)
        )


def _key(hpa: Mapping[str, Any]) -> tuple[str, str]:
    meta = Meta(hpa).raw
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def _json_equal(a: Any, b: Any) -> bool:
    return bool(a == b)
