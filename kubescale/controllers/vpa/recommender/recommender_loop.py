"""The recommender's main loop: upstream ``routines/recommender.go RunOnce``, one call per interval.

Start-up (upstream ``main.go``: ``InitFromCheckpoints`` or ``InitFromHistoryProvider`` before the
first iteration), on the first :meth:`RecommenderLoop.run_once` and again after
:meth:`RecommenderLoop.reset` (a replica that becomes leader again starts from the checkpoints,
not from what it knew when it lost the Lease):

* checkpoints (default): ``LoadVPAs``, then every cached checkpoint of a known VPA becomes its
  container's initial state;
* ``--storage=prometheus``: ``LoadVPAs`` (so memory-saver mode knows what to keep), then the
  history provider's samples
  (:func:`kubescale.controllers.vpa.recommender.prometheus_history.load_history`); no checkpoints
  are read, written or collected.

Each iteration, in upstream's order, every step timed into
``vpa_recommender_execution_latency_seconds{step}``:

1. ``LoadVPAs``, ``LoadPods``, ``LoadMetrics`` (PodMetrics, then the OOMs seen since the last
   iteration), then the pods that disappeared are deleted;
2. ``UpdateVPAs``: one vectorised recommendation pass over every VPA (VPA counts per bucket
   and the first-recommendation latency are recorded); then the snapshot is read (the VPAs;
   when checkpoints are collected this iteration, the cached checkpoints and every VPA's key)
   and the decision
   (:mod:`kubescale.controllers.vpa.recommender.recommender_decision`, no client, no await)
   yields each handled VPA's status where it changed
   (:mod:`kubescale.controllers.vpa.recommender.vpa_status`);
3. ``MaintainCheckpoints``: the decision's checkpoint writes, oldest first until
   ``--checkpoints-timeout`` after the iteration's start, but at least ``--min-checkpoints`` of
   them; every ``--checkpoints-gc-interval`` (the first one an interval after start-up) the
   deletions of the checkpoints of deleted VPAs;
4. ``GarbageCollect``: aggregate states, at most once an hour (the first at the first
   iteration, as upstream's GC clock starts at the epoch): the model only, no write.

Every intent goes through the loop's one :class:`~kubescale.plans.executor.PlanExecutor` (the
Lease checked before each write).

``LoadPods``, the model half of ``LoadMetrics`` and the recommendation pass of ``UpdateVPAs``
compute on the loop's worker thread (:class:`~kubescale.runtime.off_loop.OffLoop`, issue 27
item 11: at 30,000 pods they are seconds of Python that held the webhook, the extender and
``/healthz``), over copies taken on the event loop's thread; reads of the API, the decision and
every write stay on the loop.

Times come from the ``now`` the caller passes (the runner's clock) and the deadline from the
client's clock; nothing here sleeps. :meth:`RecommenderLoop.wait_for_resource_version` lets the
simulator settle the loop's informers before an iteration.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from functools import partial
from typing import Final

from kubescale.base.logs import component_logger
from kubescale.base.times import parse_time
from kubescale.controllers.vpa.checkpoint.checkpoint_store import CheckpointStore
from kubescale.controllers.vpa.model.cluster_state import VpaRecommendation
from kubescale.controllers.vpa.recommender.cluster_feeder import ClusterFeeder
from kubescale.controllers.vpa.recommender.oom_observer import OomInfo
from kubescale.controllers.vpa.recommender.prometheus_history import HistoryProvider, load_history
from kubescale.controllers.vpa.recommender.recommender_config import RecommenderSettings
from kubescale.controllers.vpa.recommender.recommender_decision import (
    RecommenderDecision,
    RecommenderMemory,
    RecommenderSnapshot,
    checkpoint_gc_due,
    warn_if_timed_out,
)
from kubescale.controllers.vpa.recommender.recommender_metrics import (
    ExecutionTimer,
    ObjectCounter,
    RecommenderMetrics,
)
from kubescale.controllers.vpa.recommender.vpa_status import had_recommendation
from kubescale.coordination.brain import brain_of
from kubescale.kube.client import KubeClient
from kubescale.kube.shared_cache import SharedCache
from kubescale.objects.metrics_api import PodMetrics
from kubescale.objects.views import Meta, spec_of
from kubescale.objects.vpa import VerticalPodAutoscalerStatus
from kubescale.plans.executor import PlanExecutor
from kubescale.runtime.component import TimelineReport
from kubescale.runtime.off_loop import OffLoop

__all__ = ["AGGREGATE_GC_INTERVAL", "LOOP_NAME", "RECOMMENDATION_EVENT", "RecommenderLoop"]

log = component_logger("vpa-recommender")

LOOP_NAME: Final = "vpa-recommender"
RECOMMENDATION_EVENT: Final = "vpa-recommendation"
"""Timeline kind of a VPA container's new target (subject ``namespace/vpa``)."""
AGGREGATE_GC_INTERVAL: Final = timedelta(hours=1)
"""``aggregateContainerStateGCInterval``."""


class RecommenderLoop:
    """``RunOnce`` and start-up (module docstring); a
    :class:`kubescale.runtime.loop_runner.Loop`."""

    name = LOOP_NAME

    def __init__(
        self,
        *,
        client: KubeClient,
        cache: SharedCache,
        settings: RecommenderSettings,
        metrics: RecommenderMetrics,
        history: HistoryProvider | None = None,
    ) -> None:
        if not settings.use_checkpoints and history is None:
            raise ValueError("--storage=prometheus needs a history provider")
        self.client = client
        self.cache = cache
        self.settings = settings
        self.metrics = metrics
        self.executor = PlanExecutor(
            client=client,
            ledger=brain_of(cache).ledger,
            events=None,
            registry=metrics.registry,
            dry_run=settings.dry_run,
        )
        """The VPA status writes and the checkpoint writes and deletions go through it (with
        ``--dry-run`` it logs them instead)."""
        self.history = history
        self.feeder = ClusterFeeder(client=client, cache=cache, settings=settings, metrics=metrics)
        self.checkpoint_store = CheckpointStore(
            client=client,
            informer=self.feeder.checkpoints,
            ignored_namespace=self.feeder.ignores_namespace,
            min_checkpoints=settings.min_checkpoints,
            executor=self.executor,
        )
        self.initialized = False
        self.checkpoints_loaded = 0
        """Checkpoints the last start-up loaded into the model."""
        self.iterations = 0
        self.checkpoint_listings = 0
        """Iterations that listed the cached checkpoints (those that collect orphans)."""
        self.memory = RecommenderMemory(model=self.feeder.state)
        """The model and what the last iteration wrote (:mod:`.recommender_decision`)."""
        self._targets: dict[tuple[str, str, str], str] = {}
        self._reports: list[TimelineReport] = []
        self._last_aggregate_gc: datetime | None = None
        self.off_loop = OffLoop(LOOP_NAME)
        """The model's steps run on this worker (:mod:`kubescale.runtime.off_loop`)."""

    @property
    def status_writes(self) -> int:
        """VPA statuses written since start."""
        return self.memory.status_writes

    @property
    def written(self) -> list[tuple[tuple[str, str], VerticalPodAutoscalerStatus]]:
        """The statuses the last iteration wrote, by VPA (namespace, name)."""
        return self.memory.written

    def close(self) -> None:
        """Stop the worker thread (its current step, if any, finishes first)."""
        self.off_loop.close()

    def reset(self) -> None:
        """Forget the model: the next iteration starts over from checkpoints (or history)."""
        self.initialized = False

    async def initialize(self, now: datetime) -> None:
        """Start-up: a fresh model from checkpoints or from the history provider."""
        self.feeder.reset()
        await self.feeder.load_vpas()
        if self.settings.use_checkpoints:
            self.checkpoints_loaded = self.checkpoint_store.load_into(self.feeder.state)
        elif self.history is not None:
            await load_history(self.history, self.feeder.state, now=now)
        self.memory.model = self.feeder.state
        self.memory.last_checkpoint_gc = now
        self._last_aggregate_gc = None
        self.initialized = True

    async def run_once(self, now: datetime) -> None:
        """One ``RunOnce``."""
        if not self.initialized:
            await self.initialize(now)
        deadline = self.client.clock.monotonic() + self.settings.checkpoints_timeout
        timer = ExecutionTimer(self.metrics.execution_latency)
        feeder = self.feeder
        await feeder.load_vpas()
        timer.observe_step("LoadVPAs")
        # The model's CPU-heavy steps (the pods that changed, every sample, the recommendation
        # pass) run on the loop's worker thread over copies taken here, on the event loop's
        # thread: the informers' pods and the metrics API's answer (kubescale.runtime.off_loop).
        # The model is this loop's alone and each step is awaited, so one thread touches it at
        # a time.
        changes = feeder.take_pods()
        await self.off_loop.run(partial(feeder.feed, changes, now=now))
        timer.observe_step("LoadPods")
        items, ooms = await feeder.fetch_real_time_metrics()
        await self.off_loop.run(partial(self._feed_metrics, items, ooms))
        timer.observe_step("LoadMetrics")
        # UpdateVPAs, MaintainCheckpoints, GarbageCollect: upstream recommender.go RunOnce's
        # order. The recommendation pass feeds the decision, which yields the writes of the
        # first two steps (recommender_decision); GarbageCollect trims the model only.
        recommendations = await self.off_loop.run(partial(feeder.state.recommendations, now=now))
        self._observe_vpas(recommendations, now)
        decision = RecommenderDecision(
            self._snapshot(recommendations, now),
            self.memory,
            now,
            settings=self.settings,
            clock=self.client.clock,
            deadline=deadline,
        )
        await self.executor.drive(decision.statuses(), now=now)
        self._report_targets()
        timer.observe_step("UpdateVPAs")
        await self._maintain_checkpoints(decision, now)
        timer.observe_step("MaintainCheckpoints")
        self.garbage_collect(now)
        timer.observe_step("GarbageCollect")
        timer.observe_total()
        self.iterations += 1

    def _feed_metrics(self, items: list[PodMetrics], ooms: list[OomInfo]) -> None:
        self.feeder.feed_real_time_metrics(items, ooms)
        self.feeder.delete_removed_pods()

    def _snapshot(
        self, recommendations: Mapping[tuple[str, str], VpaRecommendation], now: datetime
    ) -> RecommenderSnapshot:
        """What the decision reads: the VPAs ``LoadVPAs`` listed, the recommendation pass and,
        when checkpoints are collected this iteration, the cached checkpoints and every VPA."""
        feeder = self.feeder
        if not checkpoint_gc_due(self.memory, now, settings=self.settings):
            return RecommenderSnapshot(vpas=feeder.observed, recommendations=recommendations)
        self.checkpoint_listings += 1
        return RecommenderSnapshot(
            vpas=feeder.observed,
            recommendations=recommendations,
            checkpoints=self.checkpoint_store.cached(),
            existing_vpas=feeder.all_vpa_keys(),
        )

    def _observe_vpas(
        self, recommendations: Mapping[tuple[str, str], VpaRecommendation], now: datetime
    ) -> None:
        """``UpdateVPAs``' metrics: VPA counts per bucket, and the latency of each VPA's first
        recommendation."""
        counter = ObjectCounter()
        for observed in self.feeder.observed:
            recommendation = recommendations.get(observed.key)
            if recommendation is None:
                continue
            vpa = observed.vpa
            if recommendation.has_recommendation and not had_recommendation(vpa):
                created = Meta(vpa).raw.get("creationTimestamp")
                self._observe_latency(created, now)
            spec = spec_of(vpa)
            counter.add(
                update_mode=(spec.get("updatePolicy") or {}).get("updateMode"),
                has_recommendation=recommendation.has_recommendation,
                api_version=str(vpa.get("apiVersion") or "v1").rpartition("/")[2],
                matches_pods=recommendation.has_matching_pods,
                unsupported_config=observed.check.unsupported is not None,
            )
        counter.observe(self.metrics.vpa_objects)

    def _report_targets(self) -> None:
        """Record each container whose target changed in a status this iteration wrote."""
        for (namespace, name), status in self.written:
            recommendation = status.get("recommendation") or {}
            for entry in recommendation.get("containerRecommendations") or []:
                container = str(entry.get("containerName") or "")
                target = _resources_text(entry.get("target"))
                key = (namespace, name, container)
                if self._targets.get(key) == target:
                    continue
                self._targets[key] = target
                detail = (
                    f"{container}: target {target} (lower "
                    f"{_resources_text(entry.get('lowerBound'))}, upper "
                    f"{_resources_text(entry.get('upperBound'))})"
                )
                self._reports.append((RECOMMENDATION_EVENT, f"{namespace}/{name}", detail))

    def drain_reports(self) -> list[TimelineReport]:
        """Each container's new target since the last call (``("vpa-recommendation",
        "<namespace>/<vpa>", "<container>: target cpu=... memory=... (lower ..., upper ...)")``):
        the record of the recommendations converging, for a simulation's timeline."""
        reports, self._reports = self._reports, []
        return reports

    def _observe_latency(self, created: object, now: datetime) -> None:
        moment = parse_time(created)
        if moment is None:
            return
        self.metrics.recommendation_latency.observe((now - moment).total_seconds())

    async def _maintain_checkpoints(self, decision: RecommenderDecision, now: datetime) -> None:
        """``MaintainCheckpoints``: the decision's checkpoint pass, its workers run by
        ``write_concurrency`` writers at once (issue 11), then its orphan deletions."""
        checkpoints = decision.checkpoint_pass()
        if checkpoints is None:
            return
        warn_if_timed_out(await self.checkpoint_store.write_pass(checkpoints, now=now))
        await self.executor.drive(decision.deletions(), now=now)

    def garbage_collect(self, now: datetime) -> None:
        """``RateLimitedGarbageCollectAggregateCollectionStates``."""
        last = self._last_aggregate_gc
        if last is not None and now - last < AGGREGATE_GC_INTERVAL:
            return
        self._last_aggregate_gc = now
        removed = self.feeder.state.garbage_collect(
            now=now, controller_exists=self.feeder.controller_exists
        )
        if removed:
            log.info("garbage-collected aggregate states", extra={"fields": {"removed": removed}})
        self.metrics.aggregate_states.set(self.feeder.state.aggregate_count())


def _resources_text(resources: object) -> str:
    values = resources if isinstance(resources, Mapping) else {}
    return " ".join(f"{name}={values[name]}" for name in sorted(values))
