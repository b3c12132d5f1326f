"""The updater's main loop: upstream ``logic/updater.go RunOnce``, one call per interval.

Each iteration (reference §3.2), the steps timed into
``vpa_updater_execution_latency_seconds{step}``:

1. With ``--use-admission-controller-status`` the admission controller's status Lease is read;
   missing, or last renewed (``renewTime``, else its ``creationTimestamp`` -- the webhook's
   first renewal, :mod:`kubescale.webhook.status_lease`) longer than
   ``--admission-controller-status-lease-timeout`` ago, the whole loop is skipped: without the
   webhook an evicted pod would come back with its old requests.
2. VPAs whose mode the updater acts on
   (:func:`kubescale.controllers.vpa.updater.update_priority.vpa_is_updated`) and that carry a
   recommendation; their target selectors (:class:`VpaTargets`).
3. Pods: :func:`pod_is_updatable`, matched to their controlling VPA as admission matches them
   (top-most controller == ``targetRef``, selector,
   :func:`kubescale.controllers.vpa.api.vpa_matching.choose_vpa`).
4. Per VPA: :meth:`EvictionRestriction.build` from its pods and their controllers (informers),
   :func:`prioritized_pods`, then in order: mode InPlaceOrRecreate → in-place resize when
   :meth:`EvictionRestriction.in_place_decision` approves (:class:`PodActions`: ``PATCH
   pods/<name>/resize`` with the container-resource operations admission would apply, then
   annotation ``vpaInPlaceUpdated``; a refused resize, or decision Evict, falls back to eviction);
   Recreate/Auto → eviction when :meth:`EvictionRestriction.can_evict` allows and the rate
   limiter grants a token. The Eviction API enforces PodDisruptionBudgets: a 429 is counted as
   a failed attempt and the loop goes on with the next pod.

With the ``CPUStartupBoost`` gate, VPAs with a ``startupBoost`` are handled in any mode: their
pods with a boost in progress are left out of step 4 and, once the boost expired (Ready for
``durationSeconds``), lowered in place when :meth:`EvictionRestriction.can_unboost` allows
(:meth:`PodActions.unboost`, :mod:`kubescale.controllers.vpa.api.startup_boost`); a group
holding a boosted pod is kept below minReplicas for that.

Evictions and resizes go through :mod:`kubescale.kube.disruption_ledger`: one whose outcome is
unknown (no answer, 5xx — kube-apiserver answers 504 after etcd committed when its deadline
passes) counts as done, in this loop's budget and, until the pods' informer shows the pod
going (or the resize applied; 5 minutes at most), in the next loops' too, as do successful ones
the informer has not shown yet; a pod not found counts as gone. Upstream counts only answered
successes of the current loop, so a committed eviction answered 500 was evicted again (6 of 6
pods against a budget of 3). A resize whose outcome is unknown does not fall back to eviction.

Deliberate difference: upstream blocks on the rate limiter (``Wait``); here no clock is slept
on, so a denied token ends this iteration's evictions and the next iteration continues.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from kubescale.base.logs import component_logger
from kubescale.base.times import parse_time
from kubescale.controllers.vpa.api.controller_refs import ControllerRef, topmost_controller
from kubescale.controllers.vpa.api.hpa_conflict import (
    hpa_conflict_message,
    hpa_scaled_resources,
    hpas_scaled_resources,
)
from kubescale.controllers.vpa.api.limit_ranges import merged_limit_range_item
from kubescale.controllers.vpa.api.startup_boost import (
    expired_boost_annotations,
    has_boost_in_progress,
)
from kubescale.controllers.vpa.api.vpa_matching import choose_vpa, has_startup_boost, target_ref_of
from kubescale.controllers.vpa.api.vpa_policy import update_mode
from kubescale.controllers.vpa.api.vpa_targets import VpaTargets, target_ref
from kubescale.controllers.vpa.recommender.recommender_metrics import ExecutionTimer
from kubescale.controllers.vpa.updater.eviction_rate_limit import EvictionRateLimiter
from kubescale.controllers.vpa.updater.eviction_restriction import (
    ControllerKey,
    EvictionRestriction,
    InPlaceDecision,
    controller_of,
    pod_id,
)
from kubescale.controllers.vpa.updater.update_priority import (
    is_terminating,
    pod_is_updatable,
    prioritized_pods,
    vpa_is_updated,
)
from kubescale.controllers.vpa.updater.updater_actions import ACTOR, PodActions
from kubescale.controllers.vpa.updater.updater_config import UpdaterSettings
from kubescale.controllers.vpa.updater.updater_metrics import UpdaterMetrics, size_log2
from kubescale.kube.client import KubeClient
from kubescale.kube.disruption_ledger import WriteOutcome
from kubescale.kube.errors import KubeApiError, KubeError
from kubescale.kube.events import EventRecorder
from kubescale.kube.resources import (
    HORIZONTAL_POD_AUTOSCALERS,
    LEASES,
    LIMIT_RANGES,
    PODS,
    VERTICAL_POD_AUTOSCALERS,
)
from kubescale.kube.shared_cache import SharedCache
from kubescale.objects.hpa import HorizontalPodAutoscaler
from kubescale.objects.selectors import LabelSelector
from kubescale.objects.views import Meta, meta, spec_of, status_of
from kubescale.runtime.component import TimelineReport

__all__ = ["LOOP_NAME", "UpdaterLoop", "lease_is_fresh"]

log = component_logger("vpa-updater")

LOOP_NAME: Final = "vpa-updater"
EVICTION_EVENT: Final = "vpa-eviction"
EVICTION_UNKNOWN_EVENT: Final = "vpa-eviction-unknown"
IN_PLACE_EVENT: Final = "vpa-in-place-resize"
SKIPPED_EVENT: Final = "vpa-updater-skipped"
HPA_CONFLICT_REPORT: Final = "vpa-hpa-conflict"
HPA_CONFLICT_REASON: Final = "HPAConflict"
MAX_REMEMBERED_DECISIONS: Final = 10_000
_IN_PLACE_MODES = frozenset({"InPlaceOrRecreate", "InPlace"})
_NEVER_EVICTS = "InPlace"
"""Mode ``InPlace`` (feature gate ``InPlace``) resizes in place and never falls back to eviction."""


def lease_is_fresh(
    lease: Mapping[str, Any] | None, *, now: datetime, settings: UpdaterSettings
) -> bool:
    """``IsStatusValid``: the Lease exists and was renewed less than the timeout ago."""
    if lease is None:
        return False
    spec = spec_of(lease)
    renewed = parse_time(spec.get("renewTime")) or parse_time(
        Meta(lease).raw.get("creationTimestamp")
    )
    return renewed is not None and renewed + settings.status_lease_timeout > now


def has_recommendation(vpa: Mapping[str, Any]) -> bool:
    recommendation = status_of(vpa).get("recommendation") or {}
    return bool(recommendation.get("containerRecommendations"))


class UpdaterLoop:
    """``RunOnce`` (module docstring); a :class:`kubescale.runtime.loop_runner.Loop`."""

    name = LOOP_NAME

    def __init__(
        self,
        *,
        client: KubeClient,
        cache: SharedCache,
        settings: UpdaterSettings,
        metrics: UpdaterMetrics,
        events: EventRecorder,
    ) -> None:
        self.client = client
        self.cache = cache
        self.settings = settings
        self.metrics = metrics
        self.events = events
        informers = cache.informers
        self.vpas = informers.informer(VERTICAL_POD_AUTOSCALERS)
        self.pods = informers.informer(PODS)
        self.limit_ranges = informers.informer(LIMIT_RANGES)
        self.hpas = (
            informers.informer(HORIZONTAL_POD_AUTOSCALERS) if cache.coordination.shared else None
        )
        """``--coordination one-brain``: the HPAs, whose resources the VPA leaves alone."""
        self._hpa_decisions: dict[tuple[str, str], str] = {}
        """The last ``HPAConflict`` message per VPA (an Event when it changes)."""
        self.disruptions = cache.disruptions
        self.disruptions.attach(self.pods)
        self.actions = PodActions(
            client=client, ledger=self.disruptions, metrics=metrics, events=events
        )
        self.targets = VpaTargets(controllers=cache.controllers)
        self.eviction_limiter = EvictionRateLimiter(
            rate=settings.eviction_rate_limit, burst=settings.eviction_rate_burst
        )
        self.in_place_limiter = EvictionRateLimiter(
            rate=settings.eviction_rate_limit, burst=settings.eviction_rate_burst
        )
        self.last_in_place_attempt: dict[str, datetime] = {}
        self.iterations = 0
        self.skipped_stale_status = 0
        self.evicted: list[str] = []
        """Pods (``namespace/name``) evicted by the last iteration, in order."""
        self.resized: list[str] = []
        """Pods resized in place by the last iteration, in order."""
        self._reports: list[TimelineReport] = []

    def drain_reports(self) -> list[TimelineReport]:
        """What the loop did since the last call, for a simulation's timeline: each eviction
        (``("vpa-eviction", "<namespace>/<pod>", "evicted by VPA")``), eviction whose outcome
        is unknown (``"vpa-eviction-unknown"``), in-place resize (``"vpa-in-place-resize"``) and
        iteration skipped for a stale admission status (``"vpa-updater-skipped"``, subject the
        status Lease)."""
        reports, self._reports = self._reports, []
        return reports

    async def admission_status_fresh(self, now: datetime) -> bool:
        settings = self.settings
        try:
            lease = await self.client.get(
                LEASES, settings.status_lease_name, namespace=settings.status_lease_namespace
            )
        except KubeApiError as err:
            if err.code != 404:
                log.error("cannot read the admission status", extra={"fields": {"error": str(err)}})
            return False
        return lease_is_fresh(lease, now=now, settings=settings)

    async def run_once(self, now: datetime) -> None:
        """One ``RunOnce``; the events it recorded are written before it returns."""
        self.evicted = []
        self.resized = []
        self.iterations += 1
        try:
            await self._run_once(now)
        finally:
            await self.events.flush()
        self._reports.extend((EVICTION_EVENT, pod, "evicted by VPA") for pod in self.evicted)
        self._reports.extend(
            (IN_PLACE_EVENT, pod, "resized in place by VPA") for pod in self.resized
        )

    async def _run_once(self, now: datetime) -> None:
        timer = ExecutionTimer(self.metrics.execution_latency)
        if self.settings.use_admission_controller_status and not await self.admission_status_fresh(
            now
        ):
            self.skipped_stale_status += 1
            log.info(
                "admission controller status is stale or missing; skipping the eviction loop",
                extra={"fields": {"timeout": str(self.settings.status_lease_timeout)}},
            )
            settings = self.settings
            self._reports.append(
                (
                    SKIPPED_EVENT,
                    f"{settings.status_lease_namespace}/{settings.status_lease_name}",
                    "admission controller status stale or missing: no update this loop",
                )
            )
            return
        boost_gate = self.settings.priority.cpu_startup_boost
        vpas = [
            vpa
            for vpa in self.vpas.lister.list()
            if (
                vpa_is_updated(vpa, in_place_gate=self.settings.priority.in_place_gate)
                and has_recommendation(vpa)
            )
            or (boost_gate and has_startup_boost(vpa))
        ]
        selectors = await self._selectors(vpas)
        timer.observe_step("ListVPAs")
        by_vpa, terminating = self._match_pods(vpas, selectors)
        timer.observe_step("ListPods")
        for vpa in vpas:
            key = _key(vpa)
            pods = by_vpa.get(key, [])
            size = size_log2(len(pods))
            self.metrics.controlled_pods.labels(size).set(len(pods))
            if pods:
                await self._update_vpa(vpa, pods, terminating=terminating, now=now)
        timer.observe_step("EvictPods")
        timer.observe_total()

    async def _selectors(
        self, vpas: Sequence[dict[str, Any]]
    ) -> dict[tuple[str, str, str], LabelSelector]:
        checks = [self.targets.check(vpa) for vpa in vpas]
        if self.targets.pending:
            try:
                await self.targets.refresh()
            except KubeError as err:
                log.warning("cannot look up VPA targets", extra={"fields": {"error": str(err)}})
            checks = [self.targets.check(vpa) for vpa in vpas]
        selectors: dict[tuple[str, str, str], LabelSelector] = {}
        for vpa, check in zip(vpas, checks, strict=True):
            ref = target_ref(vpa)
            if ref is not None and check.selector is not None:
                selectors[(ref.namespace, ref.kind, ref.name)] = check.selector
        return selectors

    def _match_pods(
        self,
        vpas: Sequence[dict[str, Any]],
        selectors: Mapping[tuple[str, str, str], LabelSelector],
    ) -> tuple[dict[tuple[str, str], list[dict[str, Any]]], Counter[ControllerKey]]:
        """Each VPA's updatable pods; and per controller, its pods being deleted."""

        def selector_of(ref: ControllerRef) -> LabelSelector | None:
            return selectors.get((ref.namespace, ref.kind, ref.name))

        matched: dict[tuple[str, str], list[dict[str, Any]]] = {}
        terminating: Counter[ControllerKey] = Counter()
        if not vpas:
            return matched, terminating
        for pod in sorted(self.pods.lister.list(), key=pod_id):
            if not pod_is_updatable(pod, unschedulable_too=self.cache.coordination.shared):
                owner = controller_of(pod)
                if owner is not None and is_terminating(pod):
                    terminating[owner] += 1
                continue
            controller = topmost_controller(
                pod, lookup=self.targets.owner, scalable_kinds=self.targets.is_scalable
            )
            vpa = choose_vpa(
                pod, controller=controller, candidate_vpas=vpas, selector_of=selector_of
            )
            if vpa is not None:
                matched.setdefault(_key(vpa), []).append(pod)
        return matched, terminating

    async def _unboost(
        self,
        vpa: dict[str, Any],
        pods: Sequence[dict[str, Any]],
        boosted: set[str],
        restriction: EvictionRestriction,
        limit_ranges: Sequence[dict[str, Any]],
        *,
        size: str,
        now: datetime,
    ) -> None:
        """CPU startup boost (gate ``CPUStartupBoost``): each boosted pod whose boost expired
        (:func:`expired_boost_annotations`) and that :meth:`EvictionRestriction.can_unboost`
        allows is resized back in place (:meth:`PodActions.unboost`), within the in-place rate
        limit; the resize counts in its group's budget."""
        for pod in pods:
            if pod_id(pod) not in boosted:
                continue
            expired = expired_boost_annotations(pod, vpa, now=now)
            if not expired or not restriction.can_unboost(pod):
                continue
            if not self.in_place_limiter.try_acquire(now):
                return
            result = await self.actions.unboost(pod, vpa, limit_ranges, expired, size=size, now=now)
            if result.outcome is WriteOutcome.DONE:
                self.resized.append(pod_id(pod))
            if result.counts:
                restriction.record_in_place_update(pod)

    def _controllers(self, pods: Sequence[dict[str, Any]]) -> dict[ControllerKey, dict[str, Any]]:
        found: dict[ControllerKey, dict[str, Any]] = {}
        for pod in pods:
            key = controller_of(pod)
            if key is None or key in found:
                continue
            ref = meta(pod).controller
            api_version = ref.api_version if ref is not None else ""
            obj = self.targets.owner(api_version, key.kind, key.namespace, key.name)
            if obj is not None:
                found[key] = obj
        return found

    def _hpa_scaled(
        self, vpa: Mapping[str, Any], namespace: str
    ) -> tuple[list[HorizontalPodAutoscaler], frozenset[str]]:
        """``--coordination one-brain``: the HPAs of the namespace and the resources those
        targeting the VPA's workload scale on (the VPA leaves them alone: docs/coordination.md);
        an ``HPAConflict`` Event on the VPA when that decision is new or changes."""
        if self.hpas is None:
            return [], frozenset()
        hpas = self.hpas.lister.list(namespace=namespace)
        target = target_ref_of(vpa)
        skipped = hpas_scaled_resources(hpas, target)
        key = _key(vpa)
        if not skipped or target is None:
            self._hpa_decisions.pop(key, None)
            return hpas, skipped
        names = sorted(
            str(Meta(hpa).raw.get("name") or "")
            for hpa in hpas
            if hpa_scaled_resources(hpa, target)
        )
        message = hpa_conflict_message(target=target, hpa_names=names, resources=skipped)
        if self._hpa_decisions.get(key) != message:
            self._hpa_decisions[key] = message
            if len(self._hpa_decisions) > MAX_REMEMBERED_DECISIONS:
                self._hpa_decisions.pop(next(iter(self._hpa_decisions)))
            self.events.event(vpa, type="Normal", reason=HPA_CONFLICT_REASON, message=message)
            self._reports.append((HPA_CONFLICT_REPORT, f"{key[0]}/{key[1]}", message))
        return hpas, skipped

    async def _update_vpa(
        self,
        vpa: dict[str, Any],
        pods: list[dict[str, Any]],
        *,
        terminating: Mapping[ControllerKey, int],
        now: datetime,
    ) -> None:
        settings = self.settings
        mode = update_mode(vpa)
        in_place = mode in _IN_PLACE_MODES
        never_evict = mode == _NEVER_EVICTS
        boosting = settings.priority.cpu_startup_boost and has_startup_boost(vpa)
        boosted = {pod_id(pod) for pod in pods if boosting and has_boost_in_progress(pod)}
        in_flight = {
            pod_id(pod): disruption.kind
            for pod in pods
            if (disruption := self.disruptions.pending(pod, now=now, actor=ACTOR)) is not None
        }
        restriction = EvictionRestriction.build(
            pods=pods,
            controllers=self._controllers(pods),
            vpa=vpa,
            min_replicas=settings.min_replicas,
            eviction_tolerance=settings.eviction_tolerance,
            in_place_skip_disruption_budget=settings.in_place_skip_disruption_budget,
            in_place_mode=in_place,
            in_flight=in_flight,
            terminating=terminating,
            boosted=boosted,
        )
        namespace = str(Meta(vpa).raw.get("namespace") or "")
        limit_ranges = self.limit_ranges.lister.list(namespace=namespace)
        hpas, skipped = self._hpa_scaled(vpa, namespace)
        size = size_log2(len(pods))
        if boosted:
            await self._unboost(vpa, pods, boosted, restriction, limit_ranges, size=size, now=now)
            # A boosted pod is left to the unboost (upstream excludes it from updates).
            pods = [pod for pod in pods if pod_id(pod) not in boosted]
        if not (
            vpa_is_updated(vpa, in_place_gate=settings.priority.in_place_gate)
            and has_recommendation(vpa)
        ):
            return
        candidates = prioritized_pods(
            vpa=vpa,
            pods=pods,
            now=now,
            settings=settings.priority,
            container_limit_range=merged_limit_range_item(limit_ranges, item_type="Container"),
            pod_limit_range=merged_limit_range_item(limit_ranges, item_type="Pod"),
            skip_resources=skipped,
        )
        self.metrics.evictable_pods.labels(size).set(len(candidates))
        for entry in candidates:
            pod = dict(entry.pod)
            if in_place:
                last = self.last_in_place_attempt.get(pod_id(pod))
                decision = restriction.in_place_decision(
                    pod, now=now, last_in_place_attempt=last, fall_back_to_eviction=not never_evict
                )
                if decision is InPlaceDecision.DEFERRED:
                    continue
                if decision is InPlaceDecision.APPROVED:
                    if not self.in_place_limiter.try_acquire(now):
                        return
                    self.last_in_place_attempt[pod_id(pod)] = now
                    resized = await self.actions.resize(
                        pod, vpa, limit_ranges, size=size, now=now, hpas=hpas
                    )
                    if resized.outcome is WriteOutcome.DONE:
                        self.resized.append(pod_id(pod))
                    if resized.counts:  # done, or maybe done: no eviction on top of it
                        restriction.record_in_place_update(pod)
                        continue
                if never_evict:
                    continue
            if not restriction.can_evict(
                pod, now=now, last_in_place_attempt=self.last_in_place_attempt.get(pod_id(pod))
            ):
                continue
            if not self.eviction_limiter.try_acquire(now):
                return  # no token: the next iteration goes on (module docstring)
            evicted = await self.actions.evict(pod, vpa, size=size, now=now)
            if evicted.outcome is WriteOutcome.DONE:
                self.evicted.append(pod_id(pod))
            elif evicted.outcome is WriteOutcome.UNKNOWN:
                code = evicted.error.code if isinstance(evicted.error, KubeApiError) else None
                self._reports.append(
                    (
                        EVICTION_UNKNOWN_EVENT,
                        pod_id(pod),
                        f"eviction answered {code or 'nothing'}: counted as evicted",
                    )
                )
            if evicted.counts:  # done, maybe done, or the pod is gone anyway
                restriction.record_eviction(pod)


def _key(vpa: Mapping[str, Any]) -> tuple[str, str]:
    metadata = Meta(vpa).raw
    return (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))
