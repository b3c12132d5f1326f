"""Normalization of a metric proposal: stabilization, rate limits, min/max (reference §2.3-2.5).

Pure: the per-HPA memory upstream keeps in maps (recommendations, scale-up and scale-down
events) is a :class:`ScalingHistory` value passed in and returned updated.

* Without ``behavior`` (``normalizeDesiredReplicas``): the highest recommendation of the
  downscale window (``--horizontal-pod-autoscaler-downscale-stabilization``), then
  ``convertDesiredReplicasWithRules`` — scale-up capped at ``max(2*current, 4)``.
* With ``behavior`` (``normalizeDesiredReplicasWithBehaviors``): the up window's lowest and the
  down window's highest recommendation bound the result around ``current``; then the policies'
  rate limits over the scale events kept within each policy's period.

Conditions come back as (reason, message) exactly as upstream sets them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Final

from kubescale.controllers.hpa.hpa_spec import (
    POLICY_PERCENT,
    POLICY_PODS,
    SELECT_DISABLED,
    SELECT_MIN,
    Behavior,
    ScalingRules,
)

__all__ = [
    "SCALE_UP_LIMIT_FACTOR",
    "SCALE_UP_LIMIT_MINIMUM",
    "Normalized",
    "Recommendation",
    "ScaleEvent",
    "ScalingHistory",
    "initial_history",
    "normalize",
    "scale_down_limit",
    "scale_up_limit",
    "store_scale_event",
]

SCALE_UP_LIMIT_FACTOR: Final = 2.0
SCALE_UP_LIMIT_MINIMUM: Final = 4.0
_MIN_INT32: Final = -(2**31)
_MAX_INT32: Final = 2**31 - 1

READY_FOR_NEW_SCALE: Final = ("ReadyForNewScale", "recommended size matches current size")
SCALE_DOWN_STABILIZED: Final = (
    "ScaleDownStabilized",
    "recent recommendations were higher than current one, applying the highest recent "
    "recommendation",
)
SCALE_UP_STABILIZED: Final = (
    "ScaleUpStabilized",
    "recent recommendations were lower than current one, applying the lowest recent recommendation",
)
WITHIN_RANGE: Final = ("DesiredWithinRange", "the desired count is within the acceptable range")
SCALE_UP_LIMIT: Final = (
    "ScaleUpLimit",
    "the desired replica count is increasing faster than the maximum scale rate",
)
SCALE_DOWN_LIMIT: Final = (
    "ScaleDownLimit",
    "the desired replica count is decreasing faster than the maximum scale rate",
)
TOO_MANY: Final = (
    "TooManyReplicas",
    "the desired replica count is more than the maximum replica count",
)
TOO_FEW: Final = (
    "TooFewReplicas",
    "the desired replica count is less than the minimum replica count",
)


@dataclass(frozen=True, slots=True)
class Recommendation:
    replicas: int
    timestamp: datetime


@dataclass(frozen=True, slots=True)
class ScaleEvent:
    change: int
    timestamp: datetime
    outdated: bool = False


@dataclass(frozen=True, kw_only=True)
class ScalingHistory:
    """What upstream keeps per HPA key between reconciles."""

    recommendations: tuple[Recommendation, ...] = ()
    scale_up_events: tuple[ScaleEvent, ...] = ()
    scale_down_events: tuple[ScaleEvent, ...] = ()


def initial_history(current: int, now: datetime) -> ScalingHistory:
    """``recordInitialRecommendation``: the first sight of a key seeds ``{current, now}``."""
    return ScalingHistory(recommendations=(Recommendation(current, now),))


@dataclass(frozen=True, kw_only=True)
class Normalized:
    replicas: int
    stabilized: int
    able_to_scale: tuple[str, str]
    """AbleToScale=True (reason, message)."""
    limited: bool
    """ScalingLimited status: True iff the result differs from the stabilized value."""
    limit: tuple[str, str]
    history: ScalingHistory


# --- legacy path ------------------------------------------------------------------------------


def _stabilize_legacy(
    history: ScalingHistory, desired: int, *, window: timedelta, now: datetime, recorded: int
) -> tuple[int, ScalingHistory]:
    """``stabilizeRecommendation``: max over recommendations not before ``now - window``; the
    last one older than that is overwritten, else the new one is appended."""
    cutoff = now - window
    highest = desired
    old_index = -1
    recs = list(history.recommendations)
    for i, rec in enumerate(recs):
        if rec.timestamp < cutoff:
            old_index = i
        elif rec.replicas > highest:
            highest = rec.replicas
    if old_index >= 0:
        recs[old_index] = Recommendation(recorded, now)
    else:
        recs.append(Recommendation(recorded, now))
    return highest, replace(history, recommendations=tuple(recs))


def _legacy_rules(
    current: int, desired: int, min_replicas: int, max_replicas: int
) -> tuple[int, tuple[str, str]]:
    """``convertDesiredReplicasWithRules``."""
    limit = int(max(SCALE_UP_LIMIT_FACTOR * current, SCALE_UP_LIMIT_MINIMUM))
    if max_replicas > limit:
        maximum, reason = limit, SCALE_UP_LIMIT
    else:
        maximum, reason = max_replicas, TOO_MANY
    if desired < min_replicas:
        return min_replicas, TOO_FEW
    if desired > maximum:
        return maximum, reason
    return desired, WITHIN_RANGE


# --- behavior path ----------------------------------------------------------------------------


def _stabilize_with_behavior(
    history: ScalingHistory,
    desired: int,
    *,
    current: int,
    up_window: int,
    down_window: int,
    now: datetime,
    recorded: int,
) -> tuple[int, tuple[str, str], ScalingHistory]:
    """``stabilizeRecommendationWithBehaviors`` (strict ``After`` for the windows; a slot older
    than both cutoffs is reused, the last such one)."""
    up_cutoff = now - timedelta(seconds=up_window)
    down_cutoff = now - timedelta(seconds=down_window)
    up = desired
    down = desired
    old_index = -1
    recs = list(history.recommendations)
    for i, rec in enumerate(recs):
        if rec.timestamp > up_cutoff:
            up = min(rec.replicas, up)
        if rec.timestamp > down_cutoff:
            down = max(rec.replicas, down)
        if rec.timestamp < up_cutoff and rec.timestamp < down_cutoff:
            old_index = i
    recommendation = current
    recommendation = max(recommendation, up)
    recommendation = min(recommendation, down)
    if old_index >= 0:
        recs[old_index] = Recommendation(recorded, now)
    else:
        recs.append(Recommendation(recorded, now))
    reason = SCALE_UP_STABILIZED if desired >= current else SCALE_DOWN_STABILIZED
    return recommendation, reason, replace(history, recommendations=tuple(recs))


def _change_in_period(period_seconds: int, events: Sequence[ScaleEvent], now: datetime) -> int:
    """``getReplicasChangePerPeriod``: events strictly after ``now - period``."""
    cutoff = now - timedelta(seconds=period_seconds)
    return sum(e.change for e in events if e.timestamp > cutoff)


def scale_up_limit(
    current: int, history: ScalingHistory, rules: ScalingRules, now: datetime
) -> int:
    """``calculateScaleUpLimitWithScalingRules``."""
    if rules.select_policy == SELECT_DISABLED:
        return current
    use_min = rules.select_policy == SELECT_MIN
    result = _MAX_INT32 if use_min else _MIN_INT32
    for policy in rules.policies:
        added = _change_in_period(policy.period_seconds, history.scale_up_events, now)
        deleted = _change_in_period(policy.period_seconds, history.scale_down_events, now)
        start = current - added + deleted
        if policy.type == POLICY_PODS:
            proposed = start + policy.value
        elif policy.type == POLICY_PERCENT:
            proposed = math.ceil(start * (1 + policy.value / 100))
        else:
            continue
        result = min(result, proposed) if use_min else max(result, proposed)
    return result


def scale_down_limit(
    current: int, history: ScalingHistory, rules: ScalingRules, now: datetime
) -> int:
    """``calculateScaleDownLimitWithBehaviors``: Max selects the largest change (the lowest
    count), Min the smallest; Percent truncates."""
    if rules.select_policy == SELECT_DISABLED:
        return current
    use_min_change = rules.select_policy == SELECT_MIN
    result = _MIN_INT32 if use_min_change else _MAX_INT32
    for policy in rules.policies:
        added = _change_in_period(policy.period_seconds, history.scale_up_events, now)
        deleted = _change_in_period(policy.period_seconds, history.scale_down_events, now)
        start = current - added + deleted
        if policy.type == POLICY_PODS:
            proposed = start - policy.value
        elif policy.type == POLICY_PERCENT:
            proposed = int(start * (1 - policy.value / 100))
        else:
            continue
        result = max(result, proposed) if use_min_change else min(result, proposed)
    return result


def _behavior_rate(
    *,
    history: ScalingHistory,
    behavior: Behavior,
    current: int,
    desired: int,
    min_replicas: int,
    max_replicas: int,
    now: datetime,
) -> tuple[int, tuple[str, str]]:
    """``convertDesiredReplicasWithBehaviorRate``."""
    if desired > current:
        limit = max(scale_up_limit(current, history, behavior.scale_up, now), current)
        if max_replicas > limit:
            maximum, reason = limit, SCALE_UP_LIMIT
        else:
            maximum, reason = max_replicas, TOO_MANY
        if desired > maximum:
            return maximum, reason
    elif desired < current:
        limit = min(scale_down_limit(current, history, behavior.scale_down, now), current)
        if min_replicas < limit:
            minimum, reason = limit, SCALE_DOWN_LIMIT
        else:
            minimum, reason = min_replicas, TOO_FEW
        if desired < minimum:
            return minimum, reason
    return desired, WITHIN_RANGE


def normalize(
    *,
    history: ScalingHistory,
    behavior: Behavior | None,
    current: int,
    desired: int,
    min_replicas: int,
    max_replicas: int,
    downscale_window: timedelta,
    now: datetime,
    recorded: int | None = None,
) -> Normalized:
    """The legacy or behavior normalization of a proposal (module docstring).

    ``recorded`` is the recommendation kept for later stabilization, ``desired`` unless
    given: a predictive proposal (:mod:`.predictive`) is applied but not remembered, so a
    forecast rise that does not come is not held for a whole downscale window.
    """
    keep = desired if recorded is None else recorded
    if behavior is None:
        stabilized, history = _stabilize_legacy(
            history, desired, window=downscale_window, now=now, recorded=keep
        )
        able = SCALE_DOWN_STABILIZED if stabilized != desired else READY_FOR_NEW_SCALE
        replicas, limit = _legacy_rules(current, stabilized, min_replicas, max_replicas)
    else:
        down_window = behavior.scale_down.stabilization_window_seconds
        if down_window is None:  # maybeInitScaleDownStabilizationWindow
            down_window = int(downscale_window.total_seconds())
        up_window = behavior.scale_up.stabilization_window_seconds or 0
        stabilized, reason, history = _stabilize_with_behavior(
            history,
            desired,
            current=current,
            up_window=up_window,
            down_window=down_window,
            now=now,
            recorded=keep,
        )
        able = reason if stabilized != desired else READY_FOR_NEW_SCALE
        replicas, limit = _behavior_rate(
            history=history,
            behavior=behavior,
            current=current,
            desired=stabilized,
            min_replicas=min_replicas,
            max_replicas=max_replicas,
            now=now,
        )
    return Normalized(
        replicas=replicas,
        stabilized=stabilized,
        able_to_scale=able,
        limited=replicas != stabilized,
        limit=limit,
        history=history,
    )


def _longest_period(rules: ScalingRules) -> int:
    return max((p.period_seconds for p in rules.policies), default=0)


def _stored(
    events: tuple[ScaleEvent, ...], change: int, longest: int, now: datetime
) -> tuple[ScaleEvent, ...]:
    cutoff = now - timedelta(seconds=longest)
    marked = [replace(e, outdated=True) if e.timestamp < cutoff else e for e in events]
    old_index = -1
    for i, event in enumerate(marked):
        if event.outdated:
            old_index = i
    if old_index >= 0:
        marked[old_index] = ScaleEvent(change, now)
    else:
        marked.append(ScaleEvent(change, now))
    return tuple(marked)


def store_scale_event(
    history: ScalingHistory,
    behavior: Behavior | None,
    *,
    previous: int,
    new: int,
    now: datetime,
) -> ScalingHistory:
    """``storeScaleEvent``: only with ``behavior``; ``|change|`` in the direction's list, events
    older than the direction's longest policy period marked outdated, the last outdated slot
    reused."""
    if behavior is None or new == previous:
        return history
    if new > previous:
        return replace(
            history,
            scale_up_events=_stored(
                history.scale_up_events, new - previous, _longest_period(behavior.scale_up), now
            ),
        )
    return replace(
        history,
        scale_down_events=_stored(
            history.scale_down_events, previous - new, _longest_period(behavior.scale_down), now
        ),
    )
