"""The recommender's decision: from the model and a snapshot of the cluster to intents.

Upstream's ``RunOnce`` (``vertical-pod-autoscaler/pkg/recommender/routines/recommender.go``;
reference §2.2) is ``LoadVPAs``, ``LoadPods``, ``LoadRealTimeMetrics``, ``UpdateVPAs``,
``MaintainCheckpoints``, ``GarbageCollect``. The loads feed the model (the cluster state and its
aggregations: the loop's memory, :mod:`.recommender_loop`), ``GarbageCollect`` trims it; the
writes of the steps between are decided here, without the client and without awaiting:

1. ``UpdateVPAs`` (:meth:`RecommenderDecision.statuses`): for each VPA this recommender handles
   that got a recommendation, the status it should have (:mod:`.vpa_status`) is written only
   when it differs from the object's (upstream's ``UpdateVpaStatusIfNeeded``:
   ``!apiequality.Semantic.DeepEqual``) -- a :class:`~kubescale.plans.intents.PatchObject` on the
   ``status`` subresource;
2. ``MaintainCheckpoints``: ``StoreCheckpoints`` (:meth:`RecommenderDecision.checkpoint_pass`,
   :class:`~kubescale.controllers.vpa.checkpoint.checkpoint_store.CheckpointPass`), VPAs least
   recently checkpointed first, the pass stopping once ``--checkpoints-timeout`` (the deadline,
   on the injectable clock) has passed and at least ``--min-checkpoints`` checkpoints were tried
   (written or failed, as upstream's ``minCheckpoints--``); then, every
   ``--checkpoints-gc-interval``, ``GarbageCollectCheckpoints``
   (:meth:`RecommenderDecision.deletions`): a delete for each checkpoint of a VPA that does not
   exist. Nothing of this with ``--storage=prometheus`` (``useCheckpoints`` false).

:func:`decide` is the whole iteration's decision, one generator yielding those intents in that
order and receiving each one's :class:`~kubescale.plans.executor.Applied` (a status write that
failed is not counted as written; a checkpoint write counts towards the minimum either way, but
only a written one moves its VPA's "checkpoint written" time).
:func:`~kubescale.plans.executor.collect_plan` gives its plan without an executor. The loop
drives the same three parts on its one :class:`~kubescale.plans.executor.PlanExecutor`, timing
each step, with the pass's :meth:`~.CheckpointPass.work` run by ``write_concurrency`` writers at
once (a deliberate difference from upstream's single writer, issue 11: the VPAs are still taken
strictly oldest first, and with one writer the loop applies exactly :func:`decide`'s plan).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from kubescale.base.clock import Clock
from kubescale.base.logs import component_logger
from kubescale.controllers.vpa.checkpoint.checkpoint_store import (
    ACTOR,
    CheckpointPass,
    StoreResult,
    orphan_deletions,
)
from kubescale.controllers.vpa.model.cluster_state import ClusterState, VpaRecommendation
from kubescale.controllers.vpa.recommender.cluster_feeder import ObservedVpa
from kubescale.controllers.vpa.recommender.recommender_config import RecommenderSettings
from kubescale.controllers.vpa.recommender.vpa_status import (
    FETCHING_HISTORY,
    condition_active,
    desired_status,
    status_changed,
    status_patch,
)
from kubescale.kube.errors import KubeApiError
from kubescale.objects.views import optional_status_of
from kubescale.objects.vpa import VerticalPodAutoscalerStatus
from kubescale.objects.vpa_checkpoint import VerticalPodAutoscalerCheckpoint
from kubescale.plans.executor import Decision

__all__ = [
    "IterationResult",
    "RecommenderDecision",
    "RecommenderMemory",
    "RecommenderSnapshot",
    "checkpoint_gc_due",
    "decide",
]

log = component_logger("vpa-recommender")

VpaKey = tuple[str, str]


@dataclass(frozen=True, kw_only=True)
class RecommenderSnapshot:
    """What one iteration decides on, read before deciding."""

    vpas: Sequence[ObservedVpa]
    """The VPAs this recommender handles, as ``LoadVPAs`` listed them (by namespace/name)."""
    recommendations: Mapping[VpaKey, VpaRecommendation]
    """This iteration's recommendation pass over the model, by VPA."""
    checkpoints: Sequence[VerticalPodAutoscalerCheckpoint] = ()
    """The cached checkpoints outside the ignored namespaces (for their garbage collection;
    listed only when :func:`checkpoint_gc_due`)."""
    existing_vpas: Collection[VpaKey] = frozenset()
    """Every cached VPA, whichever recommender it names (their checkpoints are kept; listed
    only when :func:`checkpoint_gc_due`)."""


@dataclass(kw_only=True)
class RecommenderMemory:
    """What the loop keeps between iterations: the model, and what the last iteration did."""

    model: ClusterState
    """The cluster state and its aggregations (fed by the loads, read by the decision; the
    checkpoint pass moves each written VPA's "checkpoint written" time)."""
    last_checkpoint_gc: datetime | None = None
    """When checkpoints were last garbage-collected (start-up sets it: the first collection
    comes one ``--checkpoints-gc-interval`` later, as upstream's)."""
    status_writes: int = 0
    """VPA statuses written since start."""
    written: list[tuple[VpaKey, VerticalPodAutoscalerStatus]] = field(default_factory=list)
    """The statuses the last iteration wrote, by VPA (namespace, name)."""


@dataclass(frozen=True)
class IterationResult:
    """What :func:`decide` did: statuses written, the checkpoint pass (``None`` without
    checkpoints), orphan checkpoints deleted."""

    statuses: int
    checkpoints: StoreResult | None
    deleted: int


class RecommenderDecision:
    """The three parts of one iteration's decision (module docstring), each a decision the
    executor drives; :func:`decide` chains them."""

    def __init__(
        self,
        snapshot: RecommenderSnapshot,
        memory: RecommenderMemory,
        now: datetime,
        *,
        settings: RecommenderSettings,
        clock: Clock,
        deadline: float,
    ) -> None:
        self.snapshot = snapshot
        self.memory = memory
        self.now = now
        self.settings = settings
        self.clock = clock
        self.deadline = deadline
        """``--checkpoints-timeout`` after the iteration's start, on ``clock.monotonic()``."""

    def statuses(self) -> Decision[int]:
        """``UpdateVPAs``' writes: each handled VPA's status where it changed; how many were
        written (``memory.written`` lists them)."""
        memory, now = self.memory, self.now
        memory.written = []
        for observed in self.snapshot.vpas:
            recommendation = self.snapshot.recommendations.get(observed.key)
            if recommendation is None:
                continue
            vpa = observed.vpa
            status = desired_status(
                vpa, recommendation, unsupported=observed.check.unsupported, now=now
            )
            # UpdateVpaStatusIfNeeded: no write when the status is semantically the same.
            if not status_changed(optional_status_of(vpa), status):
                continue
            applied = yield status_patch(vpa, status, actor=ACTOR)
            failure = applied.error
            if failure is not None:
                namespace, name = observed.key
                if isinstance(failure, KubeApiError) and failure.not_found:
                    # deleted while this iteration worked on it: nothing to do
                    log.info(
                        "VPA object is gone, its status is not updated",
                        extra={"fields": {"vpa": f"{namespace}/{name}"}},
                    )
                    continue
                log.error(
                    "cannot update VPA object",
                    extra={"fields": {"vpa": f"{namespace}/{name}", "error": str(failure)}},
                )
                continue
            memory.status_writes += 1
            memory.written.append((observed.key, status))
        return len(memory.written)

    def checkpoint_pass(self) -> CheckpointPass | None:
        """``StoreCheckpoints``' pass over the model as it is now (``None`` with
        ``--storage=prometheus``); VPAs whose ``FetchingHistory`` condition is True are
        skipped (upstream's ``checkpoint_writer.go``)."""
        if not self.settings.use_checkpoints:
            return None
        fetching = {
            entry.key
            for entry in self.snapshot.vpas
            if condition_active(entry.vpa, FETCHING_HISTORY)
        }
        return CheckpointPass.start(
            self.memory.model,
            now=self.now,
            clock=self.clock,
            deadline=self.deadline,
            skip=fetching,
            min_checkpoints=self.settings.min_checkpoints,
        )

    def deletions(self) -> Decision[int]:
        """``GarbageCollectCheckpoints``, when ``--checkpoints-gc-interval`` has passed since
        the last one (upstream: ``time.Since(lastCheckpointGC) > checkpointsGCInterval``);
        how many orphans were deleted."""
        if not checkpoint_gc_due(self.memory, self.now, settings=self.settings):
            return 0
        self.memory.last_checkpoint_gc = self.now
        return (
            yield from orphan_deletions(
                self.snapshot.checkpoints, existing_vpas=self.snapshot.existing_vpas
            )
        )


def checkpoint_gc_due(
    memory: RecommenderMemory, now: datetime, *, settings: RecommenderSettings
) -> bool:
    """Whether this iteration collects orphan checkpoints (``GarbageCollectCheckpoints``):
    with checkpoints, once ``--checkpoints-gc-interval`` has passed since the last collection
    (upstream: ``time.Since(lastCheckpointGC) > checkpointsGCInterval``). Only then does the
    loop list the cached checkpoints and every VPA for the snapshot, as upstream lists them in
    its garbage collection only."""
    if not settings.use_checkpoints:
        return False
    last = memory.last_checkpoint_gc
    interval = timedelta(seconds=settings.checkpoints_gc_interval)
    return last is None or now - last > interval


def warn_if_timed_out(result: StoreResult) -> None:
    """Upstream's warning when the deadline left VPAs without new checkpoints."""
    if result.deadline_passed:
        log.warning(
            "checkpoints timeout: not every VPA's checkpoints were written",
            extra={"fields": {"written": result.written, "vpas": result.vpas}},
        )


def decide(
    snapshot: RecommenderSnapshot,
    memory: RecommenderMemory,
    now: datetime,
    *,
    settings: RecommenderSettings,
    clock: Clock,
    deadline: float,
) -> Decision[IterationResult]:
    """One iteration's writes, in upstream's order (module docstring): status writes, then the
    checkpoint writes (one writer), then the orphan checkpoints' deletions."""
    decision = RecommenderDecision(
        snapshot, memory, now, settings=settings, clock=clock, deadline=deadline
    )
    statuses = yield from decision.statuses()
    checkpoints = decision.checkpoint_pass()
    result: StoreResult | None = None
    if checkpoints is not None:
        yield from checkpoints.work()
        result = checkpoints.result()
        warn_if_timed_out(result)
    deleted = yield from decision.deletions()
    return IterationResult(statuses, result, deleted)
