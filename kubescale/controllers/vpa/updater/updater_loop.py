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
   :func:`kubescale.controllers.vpa.api.vpa_matching.choose_vpa`). Upstream asks that anew of
   every pod each loop; :class:`~.pod_matching.PodMatcher` gives the same answer from facts
   kept per pod (uid + resourceVersion), per controller walk and per target's candidates, so
   a steady iteration matches only the pods whose inputs changed (issue 29).
4. Per VPA (:func:`~.updater_decision.decide`, on the snapshot read in steps 1-3 -- the pods'
   controllers, LimitRanges, HPAs and in-flight disruptions too -- driven by the
   :class:`~kubescale.plans.executor.PlanExecutor`, or printed by ``--dry-run``):
   :meth:`EvictionRestriction.build` from its pods and their controllers (informers),
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

Evictions and resizes go through :mod:`kubescale.coordination.disruption_ledger`: one whose
outcome is unknown (no answer, 5xx — kube-apiserver answers 504 after etcd committed when its
deadline passes) counts as done, in this loop's budget and, until the pods' informer shows the pod
going (or the resize applied; 5 minutes at most), in the next loops' too, as do successful ones
the informer has not shown yet; a pod not found counts as gone. Upstream counts only answered
successes of the current loop, so a committed eviction answered 500 was evicted again (6 of 6
pods against a budget of 3). A resize whose outcome is unknown does not fall back to eviction.

Step 4's decision computes on the loop's worker thread
(:class:`~kubescale.runtime.off_loop.OffLoop`, issue 27 item 11) over the snapshot read on the
event loop's thread in steps 1-3; each write it yields is applied on the loop by the executor.

Deliberate difference: upstream blocks on the rate limiter (``Wait``); here no clock is slept
on, so a denied token ends this iteration's evictions and the next iteration continues.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Final, cast

from kubescale.base.logs import component_logger
from kubescale.base.times import parse_time
from kubescale.controllers.vpa.api.vpa_matching import target_ref_of
from kubescale.controllers.vpa.api.vpa_targets import VpaTargets
from kubescale.controllers.vpa.recommender.recommender_metrics import ExecutionTimer
from kubescale.controllers.vpa.updater.eviction_restriction import (
    ControllerKey,
    pod_id,
)
from kubescale.controllers.vpa.updater.pod_matching import PodMatcher
from kubescale.controllers.vpa.updater.updater_actions import ACTOR
from kubescale.controllers.vpa.updater.updater_config import UpdaterSettings
from kubescale.controllers.vpa.updater.updater_decision import (
    UpdaterMemory,
    UpdaterSnapshot,
    VpaSnapshot,
    decide,
    looked_at,
    vpa_key,
)
from kubescale.controllers.vpa.updater.updater_metrics import UpdaterMetrics
from kubescale.coordination.brain import brain_of
from kubescale.kube.client import KubeClient
from kubescale.kube.errors import KubeApiError, KubeError
from kubescale.kube.events import EventRecorder
from kubescale.kube.informer import Informer
from kubescale.kube.resources import (
    HORIZONTAL_POD_AUTOSCALERS,
    LEASES,
    LIMIT_RANGES,
    PODS,
    VERTICAL_POD_AUTOSCALERS,
)
from kubescale.kube.shared_cache import SharedCache
from kubescale.objects.lease import Lease
from kubescale.objects.pod import Pod
from kubescale.objects.scale import ReplicaCountedController
from kubescale.objects.selectors import LabelSelector
from kubescale.objects.views import Meta, meta, spec_of
from kubescale.objects.vpa import VerticalPodAutoscaler
from kubescale.plans.executor import Applied, PlanExecutor, collect_plan
from kubescale.plans.intents import Intent, Plan
from kubescale.runtime.component import TimelineReport
from kubescale.runtime.off_loop import OffLoop

__all__ = ["LOOP_NAME", "UpdaterLoop", "lease_is_fresh"]

log = component_logger("vpa-updater")

LOOP_NAME: Final = "vpa-updater"
EVICTION_EVENT: Final = "vpa-eviction"
IN_PLACE_EVENT: Final = "vpa-in-place-resize"
SKIPPED_EVENT: Final = "vpa-updater-skipped"


def lease_is_fresh(lease: Lease | None, *, now: datetime, settings: UpdaterSettings) -> bool:
    """``IsStatusValid``: the Lease exists and was renewed less than the timeout ago."""
    if lease is None:
        return False
    spec = spec_of(lease)
    renewed = parse_time(spec.get("renewTime")) or parse_time(
        Meta(lease).raw.get("creationTimestamp")
    )
    return renewed is not None and renewed + settings.status_lease_timeout > now


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
        self.vpas: Informer[VerticalPodAutoscaler] = informers.informer(VERTICAL_POD_AUTOSCALERS)
        self.pods: Informer[Pod] = informers.informer(PODS)
        self.limit_ranges = informers.informer(LIMIT_RANGES)
        brain = brain_of(cache)
        self.ownership = brain.ownership
        """Which resources of a workload an HPA owns (the VPA leaves them alone)."""
        self.replaces_pending = brain.requests_ahead.updater_replaces_pending
        """Whether a pod the scheduler could not place is replaced too (the autoscaler sized
        for the requests its replacement gets)."""
        self.hpas = (
            informers.informer(HORIZONTAL_POD_AUTOSCALERS)
            if self.ownership.vpa_leaves_hpa_resources(requested=False)
            else None
        )
        """The HPAs, whose resources the VPA leaves alone (``--coordination one-brain``)."""
        self.disruptions = brain.ledger
        self.disruptions.attach(self.pods)
        self.executor = PlanExecutor(
            client=client,
            ledger=self.disruptions,
            events=events,
            registry=metrics.registry,
            dry_run=settings.dry_run,
        )
        self.targets = VpaTargets(controllers=cache.controllers)
        self.memory = UpdaterMemory.for_settings(settings)
        self.matcher = PodMatcher(unschedulable_too=self.replaces_pending)
        """Pods matched to VPAs, kept across iterations (:mod:`.pod_matching`)."""
        self.iterations = 0
        self.skipped_stale_status = 0
        self._reports: list[TimelineReport] = []
        self.off_loop = OffLoop(LOOP_NAME)
        """Step 4's decision runs on this worker (:mod:`kubescale.runtime.off_loop`)."""

    def close(self) -> None:
        """Stop the worker thread (its current step, if any, finishes first)."""
        self.off_loop.close()

    @property
    def evicted(self) -> list[str]:
        """Pods (``namespace/name``) evicted by the last iteration, in order."""
        return self.memory.evicted

    @property
    def resized(self) -> list[str]:
        """Pods resized in place by the last iteration, in order."""
        return self.memory.resized

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
        return lease_is_fresh(cast(Lease, lease), now=now, settings=settings)  # a LEASES get

    async def run_once(self, now: datetime) -> None:
        """One ``RunOnce``; the events it recorded are written before it returns."""
        memory = self.memory
        memory.evicted = []
        memory.resized = []
        self.iterations += 1
        try:
            await self._run_once(now)
        finally:
            self._reports.extend(memory.reports)
            memory.reports = []
            await self.events.flush()
        self._reports.extend((EVICTION_EVENT, pod, "evicted by VPA") for pod in self.evicted)
        self._reports.extend(
            (IN_PLACE_EVENT, pod, "resized in place by VPA") for pod in self.resized
        )

    async def plan(self, now: datetime) -> Plan | None:
        """The plan this loop would make now, every intent answered done and nothing sent
        (``None``: skipped, the admission status is stale); it moves the loop's memory (rate
        limiters, last in-place attempts) as an iteration would."""
        snapshot = await self.snapshot(now)
        if snapshot is None:
            return None
        plan, _ = collect_plan(
            decide(snapshot, self.memory, now, settings=self.settings, metrics=self.metrics)
        )
        return plan

    async def _run_once(self, now: datetime) -> None:
        timer = ExecutionTimer(self.metrics.execution_latency)
        snapshot = await self.snapshot(now, timer)
        if snapshot is None:
            return

        async def act(intent: Intent) -> Applied:
            return await self.executor.execute(intent, now=now)

        # The decision computes on the loop's worker thread over the snapshot (copies taken
        # above, on the event loop's thread); each write it asks for is applied here, on the
        # loop, through the executor (the Lease checked before each): kubescale.runtime.off_loop.
        await self.off_loop.drive(
            decide(snapshot, self.memory, now, settings=self.settings, metrics=self.metrics), act
        )
        timer.observe_step("EvictPods")
        timer.observe_total()

    async def snapshot(
        self, now: datetime, timer: ExecutionTimer | None = None
    ) -> UpdaterSnapshot | None:
        """Steps 1-3 of ``RunOnce`` and what step 4 reads (``None``: the admission status is
        stale or missing, the iteration is skipped)."""
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
            return None
        vpas = [vpa for vpa in self.vpas.lister.list() if looked_at(vpa, self.settings)]
        selectors = await self._selectors(vpas)
        if timer is not None:
            timer.observe_step("ListVPAs")
        by_vpa, terminating = self._match_pods(vpas, selectors)
        if timer is not None:
            timer.observe_step("ListPods")
        entries: list[VpaSnapshot] = []
        for vpa in vpas:
            pods = by_vpa.get(vpa_key(vpa), [])
            namespace = vpa_key(vpa)[0]
            entries.append(
                VpaSnapshot(
                    vpa=vpa,
                    pods=pods,
                    controllers=self._controllers(pods),
                    limit_ranges=self.limit_ranges.lister.list(namespace=namespace) if pods else [],
                    hpas=(
                        self.hpas.lister.list(namespace=namespace)
                        if self.hpas is not None and pods
                        else None
                    ),
                    in_flight={
                        pod_id(pod): disruption.kind
                        for pod in pods
                        if (disruption := self.disruptions.pending(pod, now=now, actor=ACTOR))
                        is not None
                    },
                )
            )
        return UpdaterSnapshot(vpas=entries, terminating=terminating)

    async def _selectors(
        self, vpas: Sequence[VerticalPodAutoscaler]
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
            ref = target_ref_of(vpa)
            if ref is not None and check.selector is not None:
                selectors[(ref.namespace, ref.kind, ref.name)] = check.selector
        return selectors

    def _match_pods(
        self,
        vpas: Sequence[VerticalPodAutoscaler],
        selectors: Mapping[tuple[str, str, str], LabelSelector],
    ) -> tuple[dict[tuple[str, str], list[Pod]], Counter[ControllerKey]]:
        """Each VPA's updatable pods; and per controller, its pods being deleted
        (:class:`~.pod_matching.PodMatcher`: only what changed since the last iteration is
        matched anew)."""
        return self.matcher.match(
            self.pods.lister.list(),
            vpas,
            selectors,
            lookup=self.targets.owner,
            scalable_kinds=self.targets.is_scalable,
        )

    def _controllers(self, pods: Sequence[Pod]) -> dict[ControllerKey, ReplicaCountedController]:
        found: dict[ControllerKey, ReplicaCountedController] = {}
        for pod in pods:
            key = self.matcher.controller_key(pod)  # controller_of, kept per pod
            if key is None or key in found:
                continue
            ref = meta(pod).controller
            api_version = ref.api_version if ref is not None else ""
            obj = self.targets.owner(api_version, key.kind, key.namespace, key.name)
            if obj is not None:
                # the pods' controller (a replicated kind) or its Scale
                found[key] = cast(ReplicaCountedController, obj)
        return found
