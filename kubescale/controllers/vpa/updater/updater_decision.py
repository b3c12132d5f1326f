"""The updater's decision: from a snapshot of the cluster and the loop's memory to intents.

:func:`decide` is step 4 of ``RunOnce`` (:mod:`.updater_loop`): per VPA, build the
:class:`EvictionRestriction`, lower expired startup boosts, then walk :func:`prioritized_pods`
and resize in place or evict as upstream does. It touches no client and awaits nothing: it
yields intents (:mod:`kubescale.plans.intents`) and receives their outcomes, because
the budget counts an eviction or a resize only when it was done or may have been
(:attr:`~kubescale.plans.executor.Applied.counts`), and a resize refused falls back to
an eviction. The :class:`~kubescale.plans.executor.PlanExecutor` drives it in ``serve``;
:func:`~kubescale.plans.executor.collect_plan` gives its plan for a snapshot without
one (a dry run, a test).

The snapshot is read first (:class:`UpdaterSnapshot`: VPAs with their matched pods, those
pods' controllers, the namespace's LimitRanges and HPAs, the disruptions still in flight); the
memory (:class:`UpdaterMemory`) is what one iteration leaves to the next: the rate limiters,
the last in-place attempt per pod, the last ``HPAConflict`` message per VPA.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from kubescale.controllers.vpa.api.limit_ranges import merged_limit_range_item
from kubescale.controllers.vpa.api.startup_boost import (
    expired_boost_annotations,
    has_boost_in_progress,
)
from kubescale.controllers.vpa.api.vpa_matching import has_startup_boost, target_ref_of
from kubescale.controllers.vpa.api.vpa_policy import update_mode
from kubescale.controllers.vpa.updater.eviction_rate_limit import EvictionRateLimiter
from kubescale.controllers.vpa.updater.eviction_restriction import (
    ControllerKey,
    EvictionRestriction,
    InPlaceDecision,
    pod_id,
)
from kubescale.controllers.vpa.updater.priority_cache import PriorityCache
from kubescale.controllers.vpa.updater.update_priority import vpa_is_updated
from kubescale.controllers.vpa.updater.updater_actions import ACTOR, PodActions
from kubescale.controllers.vpa.updater.updater_config import UpdaterSettings
from kubescale.controllers.vpa.updater.updater_metrics import UpdaterMetrics, size_log2
from kubescale.coordination.disruption_ledger import DisruptionKind, WriteOutcome
from kubescale.coordination.resource_ownership import (
    hpa_conflict_message,
    hpa_scaled_resources,
    hpas_scaled_resources,
)
from kubescale.kube.errors import KubeApiError
from kubescale.objects.hpa import HorizontalPodAutoscaler
from kubescale.objects.limit_range import LimitRange
from kubescale.objects.pod import Pod
from kubescale.objects.scale import ReplicaCountedController
from kubescale.objects.views import Meta, status_of
from kubescale.objects.vpa import VerticalPodAutoscaler
from kubescale.plans.executor import Decision
from kubescale.plans.intents import Event
from kubescale.runtime.component import TimelineReport

__all__ = [
    "EVICTION_UNKNOWN_EVENT",
    "HPA_CONFLICT_REASON",
    "HPA_CONFLICT_REPORT",
    "MAX_REMEMBERED_DECISIONS",
    "UpdaterMemory",
    "UpdaterSnapshot",
    "VpaSnapshot",
    "decide",
    "has_recommendation",
    "vpa_key",
]

EVICTION_UNKNOWN_EVENT: Final = "vpa-eviction-unknown"
HPA_CONFLICT_REPORT: Final = "vpa-hpa-conflict"
HPA_CONFLICT_REASON: Final = "HPAConflict"
MAX_REMEMBERED_DECISIONS: Final = 10_000
_IN_PLACE_MODES = frozenset({"InPlaceOrRecreate", "InPlace"})
_NEVER_EVICTS = "InPlace"
"""Mode ``InPlace`` (feature gate ``InPlace``) resizes in place and never falls back to eviction."""


def has_recommendation(vpa: VerticalPodAutoscaler) -> bool:
    recommendation = status_of(vpa).get("recommendation") or {}
    return bool(recommendation.get("containerRecommendations"))


def looked_at(vpa: VerticalPodAutoscaler, settings: UpdaterSettings) -> bool:
    """``RunOnce`` step 1: a VPA the updater works on — updated by it (its mode) with a
    recommendation, or, with the ``CPUStartupBoost`` gate, one with a startup boost."""
    return (
        vpa_is_updated(vpa, in_place_gate=settings.priority.in_place_gate)
        and has_recommendation(vpa)
    ) or (settings.priority.cpu_startup_boost and has_startup_boost(vpa))


def vpa_key(vpa: VerticalPodAutoscaler) -> tuple[str, str]:
    metadata = Meta(vpa).raw
    return (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))


@dataclass(frozen=True, kw_only=True)
class VpaSnapshot:
    """One VPA the updater acts on, and what its decision reads."""

    vpa: VerticalPodAutoscaler
    pods: list[Pod]
    """Its updatable pods, matched as admission matches them, by ``namespace/name``."""
    controllers: Mapping[ControllerKey, ReplicaCountedController] = field(default_factory=dict)
    """The pods' controllers (their replicas make the eviction budget)."""
    limit_ranges: Sequence[LimitRange] = ()
    hpas: Sequence[HorizontalPodAutoscaler] | None = None
    """``--coordination one-brain``: the namespace's HPAs; ``None`` with ``separate``."""
    in_flight: Mapping[str, DisruptionKind] = field(default_factory=dict)
    """Per pod (``namespace/name``), a disruption made but not shown yet (the ledger)."""


@dataclass(frozen=True, kw_only=True)
class UpdaterSnapshot:
    """What one iteration decides on: the VPAs (in the informer's order) with their pods, and
    per controller its pods being deleted."""

    vpas: Sequence[VpaSnapshot]
    terminating: Mapping[ControllerKey, int] = field(default_factory=Counter)


@dataclass(kw_only=True)
class UpdaterMemory:
    """What an iteration leaves to the next, and what the last one did."""

    eviction_limiter: EvictionRateLimiter
    in_place_limiter: EvictionRateLimiter
    last_in_place_attempt: dict[str, datetime] = field(default_factory=dict)
    hpa_decisions: dict[tuple[str, str], str] = field(default_factory=dict)
    """The last ``HPAConflict`` message per VPA (an Event when it changes)."""
    evicted: list[str] = field(default_factory=list)
    """Pods (``namespace/name``) evicted by the last iteration, in order."""
    resized: list[str] = field(default_factory=list)
    """Pods resized in place by the last iteration, in order."""
    reports: list[TimelineReport] = field(default_factory=list)
    priorities: PriorityCache = field(default_factory=PriorityCache)
    """Each pod's update priority, kept while its inputs hold (:mod:`.priority_cache`)."""

    @classmethod
    def for_settings(cls, settings: UpdaterSettings) -> UpdaterMemory:
        return cls(
            eviction_limiter=EvictionRateLimiter(
                rate=settings.eviction_rate_limit, burst=settings.eviction_rate_burst
            ),
            in_place_limiter=EvictionRateLimiter(
                rate=settings.eviction_rate_limit, burst=settings.eviction_rate_burst
            ),
        )


def decide(
    snapshot: UpdaterSnapshot,
    memory: UpdaterMemory,
    now: datetime,
    *,
    settings: UpdaterSettings,
    metrics: UpdaterMetrics,
) -> Decision[None]:
    """Step 4 of ``RunOnce`` for every VPA of ``snapshot`` (module docstring)."""
    actions = PodActions(metrics=metrics)
    memory.priorities.start()
    for entry in snapshot.vpas:
        size = size_log2(len(entry.pods))
        metrics.controlled_pods.labels(size).set(len(entry.pods))
        if entry.pods:
            yield from _update_vpa(
                entry,
                memory,
                now,
                terminating=snapshot.terminating,
                settings=settings,
                metrics=metrics,
                actions=actions,
            )
    memory.priorities.release()  # the pods not priced in this iteration


def _hpa_scaled(
    entry: VpaSnapshot, memory: UpdaterMemory
) -> Decision[tuple[Sequence[HorizontalPodAutoscaler], frozenset[str]]]:
    """``--coordination one-brain``: the HPAs of the namespace and the resources those
    targeting the VPA's workload scale on (the VPA leaves them alone: docs/coordination.md);
    an ``HPAConflict`` Event on the VPA when that decision is new or changes."""
    if entry.hpas is None:
        return [], frozenset()
    vpa, hpas = entry.vpa, entry.hpas
    target = target_ref_of(vpa)
    skipped = hpas_scaled_resources(hpas, target)
    key = vpa_key(vpa)
    if not skipped or target is None:
        memory.hpa_decisions.pop(key, None)
        return hpas, skipped
    names = sorted(Meta(hpa).name for hpa in hpas if hpa_scaled_resources(hpa, target))
    message = hpa_conflict_message(target=target, hpa_names=names, resources=skipped)
    if memory.hpa_decisions.get(key) != message:
        memory.hpa_decisions[key] = message
        if len(memory.hpa_decisions) > MAX_REMEMBERED_DECISIONS:
            memory.hpa_decisions.pop(next(iter(memory.hpa_decisions)))
        yield Event(
            actor=ACTOR, involved=vpa, type="Normal", reason=HPA_CONFLICT_REASON, message=message
        )
        memory.reports.append((HPA_CONFLICT_REPORT, f"{key[0]}/{key[1]}", message))
    return hpas, skipped


def _unboost(
    entry: VpaSnapshot,
    pods: Sequence[Pod],
    boosted: set[str],
    *,
    restriction: EvictionRestriction,
    memory: UpdaterMemory,
    now: datetime,
    size: str,
    actions: PodActions,
) -> Decision[None]:
    """CPU startup boost (gate ``CPUStartupBoost``): each boosted pod whose boost expired
    (:func:`expired_boost_annotations`) and that :meth:`EvictionRestriction.can_unboost`
    allows is resized back in place (:meth:`PodActions.unboost`), within the in-place rate
    limit; the resize counts in its group's budget."""
    vpa = entry.vpa
    for pod in pods:
        if pod_id(pod) not in boosted:
            continue
        expired = expired_boost_annotations(pod, vpa, now=now)
        if not expired or not restriction.can_unboost(pod):
            continue
        if not memory.in_place_limiter.try_acquire(now):
            return
        result = yield from actions.unboost(pod, vpa, entry.limit_ranges, expired, size=size)
        if result.outcome is WriteOutcome.DONE:
            memory.resized.append(pod_id(pod))
        if result.counts:
            restriction.record_in_place_update(pod)


def _update_vpa(
    entry: VpaSnapshot,
    memory: UpdaterMemory,
    now: datetime,
    *,
    terminating: Mapping[ControllerKey, int],
    settings: UpdaterSettings,
    metrics: UpdaterMetrics,
    actions: PodActions,
) -> Decision[None]:
    vpa, pods = entry.vpa, entry.pods
    mode = update_mode(vpa)
    in_place = mode in _IN_PLACE_MODES
    never_evict = mode == _NEVER_EVICTS
    boosting = settings.priority.cpu_startup_boost and has_startup_boost(vpa)
    boosted = {pod_id(pod) for pod in pods if boosting and has_boost_in_progress(pod)}
    restriction = EvictionRestriction.build(
        pods=pods,
        controllers=entry.controllers,
        vpa=vpa,
        min_replicas=settings.min_replicas,
        eviction_tolerance=settings.eviction_tolerance,
        in_place_skip_disruption_budget=settings.in_place_skip_disruption_budget,
        in_place_mode=in_place,
        in_flight=entry.in_flight,
        terminating=terminating,
        boosted=boosted,
    )
    limit_ranges = entry.limit_ranges
    hpas, skipped = yield from _hpa_scaled(entry, memory)
    size = size_log2(len(pods))
    if boosted:
        yield from _unboost(
            entry,
            pods,
            boosted,
            restriction=restriction,
            memory=memory,
            now=now,
            size=size,
            actions=actions,
        )
        # A boosted pod is left to the unboost (upstream excludes it from updates).
        pods = [pod for pod in pods if pod_id(pod) not in boosted]
    if not (
        vpa_is_updated(vpa, in_place_gate=settings.priority.in_place_gate)
        and has_recommendation(vpa)
    ):
        return
    # prioritized_pods, from the answers that still hold (PriorityCache)
    candidates = memory.priorities.prioritized(
        vpa=vpa,
        pods=pods,
        now=now,
        settings=settings.priority,
        container_limit_range=merged_limit_range_item(limit_ranges, item_type="Container"),
        pod_limit_range=merged_limit_range_item(limit_ranges, item_type="Pod"),
        skip_resources=skipped,
    )
    metrics.evictable_pods.labels(size).set(len(candidates))
    for candidate in candidates:
        pod = candidate.pod
        if in_place:
            last = memory.last_in_place_attempt.get(pod_id(pod))
            decision = restriction.in_place_decision(
                pod, now=now, last_in_place_attempt=last, fall_back_to_eviction=not never_evict
            )
            if decision is InPlaceDecision.DEFERRED:
                continue
            if decision is InPlaceDecision.APPROVED:
                if not memory.in_place_limiter.try_acquire(now):
                    return
                memory.last_in_place_attempt[pod_id(pod)] = now
                resized = yield from actions.resize(
                    pod, vpa, limit_ranges, size=size, hpas=list(hpas), reason=candidate.reason
                )
                if resized.outcome is WriteOutcome.DONE:
                    memory.resized.append(pod_id(pod))
                if resized.counts:  # done, or maybe done: no eviction on top of it
                    restriction.record_in_place_update(pod)
                    continue
            if never_evict:
                continue
        if not restriction.can_evict(
            pod, now=now, last_in_place_attempt=memory.last_in_place_attempt.get(pod_id(pod))
        ):
            continue
        if not memory.eviction_limiter.try_acquire(now):
            return  # no token: the next iteration goes on (module docstring of the loop)
        evicted = yield from actions.evict(pod, vpa, size=size, reason=candidate.reason)
        if evicted.outcome is WriteOutcome.DONE:
            memory.evicted.append(pod_id(pod))
        elif evicted.outcome is WriteOutcome.UNKNOWN:
            code = evicted.error.code if isinstance(evicted.error, KubeApiError) else None
            memory.reports.append(
                (
                    EVICTION_UNKNOWN_EVENT,
                    pod_id(pod),
                    f"eviction answered {code or 'nothing'}: counted as evicted",
                )
            )
        if evicted.counts:  # done, maybe done, or the pod is gone anyway
            restriction.record_eviction(pod)
