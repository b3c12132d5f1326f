"""Normalization with and without ``behavior`` against upstream's rules (reference §2.3-2.5)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.controllers.hpa.hpa_spec import (
    Behavior,
    ScalingPolicy,
    ScalingRules,
    default_scale_down_rules,
    default_scale_up_rules,
    parse_hpa,
)
from kubescale.controllers.hpa.normalization import (
    Normalized,
    Recommendation,
    ScaleEvent,
    ScalingHistory,
    initial_history,
    normalize,
    store_scale_event,
)

from .pod_builders import NOW

WINDOW = timedelta(minutes=5)
DEFAULT = Behavior(scale_up=default_scale_up_rules(), scale_down=default_scale_down_rules())


def legacy(
    current: int, desired: int, *, lo: int = 1, hi: int = 100, history: ScalingHistory | None = None
) -> Normalized:
    return normalize(
        history=history or ScalingHistory(),
        behavior=None,
        current=current,
        desired=desired,
        min_replicas=lo,
        max_replicas=hi,
        downscale_window=WINDOW,
        now=NOW,
    )


@pytest.mark.parametrize(
    ("current", "desired", "lo", "hi", "expected", "limited", "reason"),
    [
        # limit max(2 × 1, 4) = 4 < max 20 → cap 4, ScaleUpLimit
        (1, 10, 1, 20, 4, True, "ScaleUpLimit"),
        # limit max(2 × 5, 4) = 10 >= max 8 → cap is max: 8, TooManyReplicas
        (5, 12, 1, 8, 8, True, "TooManyReplicas"),
        # limit 2 × 10 = 20 < 100 → 20
        (10, 50, 1, 100, 20, True, "ScaleUpLimit"),
        # below min after stabilization: 1 < 2 → 2, TooFewReplicas
        (3, 1, 2, 10, 2, True, "TooFewReplicas"),
        # within: 6 ≤ limit 8 and ≤ max → DesiredWithinRange, not limited
        (4, 6, 1, 10, 6, False, "DesiredWithinRange"),
        # a cap that equals the proposal is not "limited" (ScalingLimited False) but keeps the
        # possible-limit reason only when applied: 4 → limit 8 = desired 8 → within range
        (4, 8, 1, 10, 8, False, "DesiredWithinRange"),
    ],
)
def test_legacy_rules(  # noqa: PLR0917
    current: int, desired: int, lo: int, hi: int, expected: int, limited: bool, reason: str
) -> None:
    result = legacy(current, desired, lo=lo, hi=hi)
    assert (result.replicas, result.limited, result.limit[0]) == (expected, limited, reason)


def test_legacy_downscale_stabilization() -> None:
    history = ScalingHistory(
        recommendations=(
            Recommendation(9, NOW - timedelta(minutes=6)),  # older than the window: reused slot
            Recommendation(5, NOW - timedelta(minutes=4)),
            Recommendation(7, NOW - WINDOW),  # exactly at the cutoff: not Before → in window
        )
    )
    result = legacy(8, 2, history=history)
    # max(2, 5, 7) = 7; ScaleDownStabilized; the 6-minute-old slot now holds {2, now}
    assert result.replicas == 7
    assert result.able_to_scale[0] == "ScaleDownStabilized"
    assert result.history.recommendations[0] == Recommendation(2, NOW)
    assert len(result.history.recommendations) == 3


def test_initial_recommendation_holds_a_scale_down_after_restart() -> None:
    # TestScaleDownStabilizeInitialSize: history seeded with {current 5, now}; a proposal of 2
    # is held at 5 for one window
    result = legacy(5, 2, history=initial_history(5, NOW))
    assert result.replicas == 5
    assert result.able_to_scale == (
        "ScaleDownStabilized",
        "recent recommendations were higher than current one, applying the highest recent "
        "recommendation",
    )


def behaving(
    current: int,
    desired: int,
    behavior: Behavior = DEFAULT,
    *,
    lo: int = 1,
    hi: int = 100,
    history: ScalingHistory | None = None,
) -> Normalized:
    return normalize(
        history=history or ScalingHistory(),
        behavior=behavior,
        current=current,
        desired=desired,
        min_replicas=lo,
        max_replicas=hi,
        downscale_window=WINDOW,
        now=NOW,
    )


def rules(
    *policies: tuple[str, int, int], select: str = "Max", window: int | None = 0
) -> ScalingRules:
    return ScalingRules(
        stabilization_window_seconds=window,
        select_policy=select,
        policies=tuple(ScalingPolicy(type=t, value=v, period_seconds=p) for t, v, p in policies),
    )


def test_default_scale_up_policies() -> None:
    # Pods: 10 + 4 = 14; Percent: ceil(10 × 2.0) = 20; Max → 20 < max 100 → ScaleUpLimit
    result = behaving(10, 30)
    assert (result.replicas, result.limit[0], result.limited) == (20, "ScaleUpLimit", True)
    # Min → min(14, 20) = 14
    up_min = Behavior(
        scale_up=rules(("Pods", 4, 15), ("Percent", 100, 15), select="Min"),
        scale_down=default_scale_down_rules(),
    )
    assert behaving(10, 30, up_min).replicas == 14
    # from 1: Pods 1 + 4 = 5, Percent ceil(1 × 2) = 2 → Max 5
    assert behaving(1, 30).replicas == 5


def test_scale_up_events_within_the_period_count() -> None:
    # 8 replicas, 4 added 10 s ago (within 15 s): period start 8 − 4 = 4;
    # Pods 4 + 4 = 8, Percent ceil(4 × 2) = 8 → limit 8 = current → no scale up
    history = ScalingHistory(scale_up_events=(ScaleEvent(4, NOW - timedelta(seconds=10)),))
    result = behaving(8, 20, history=history)
    assert (result.replicas, result.limit[0]) == (8, "ScaleUpLimit")
    # the event exactly 15 s ago is not After(now − 15 s): start 8, limit max(12, 16) = 16
    history = ScalingHistory(scale_up_events=(ScaleEvent(4, NOW - timedelta(seconds=15)),))
    assert behaving(8, 20, history=history).replicas == 16


def test_scale_down_policies() -> None:
    # default Percent 100 / 15 s: int(10 × 0) = 0 → limit 0; min 1 is not < 0 → floor is min:
    # desired 2 ≥ 1 → 2 within range (scaleDown window from the flag: 5 m, empty history)
    assert behaving(10, 2).replicas == 2
    # Pods 1 / 60 s, one replica removed 30 s ago: start 9 + 1 = 10; limit 10 − 1 = 9
    slow = Behavior(scale_up=default_scale_up_rules(), scale_down=rules(("Pods", 1, 60)))
    history = ScalingHistory(scale_down_events=(ScaleEvent(1, NOW - timedelta(seconds=30)),))
    result = behaving(9, 5, slow, history=history)
    assert (result.replicas, result.limit[0], result.limited) == (9, "ScaleDownLimit", True)
    # Percent 10 truncates: int(25 × 0.9) = int(22.5) = 22; Pods 5: 25 − 5 = 20;
    # Max = largest change = min(22, 20) = 20; Min = smallest = max(22, 20) = 22
    both = rules(("Percent", 10, 60), ("Pods", 5, 60))
    assert (
        behaving(25, 1, Behavior(scale_up=default_scale_up_rules(), scale_down=both)).replicas == 20
    )
    both_min = rules(("Percent", 10, 60), ("Pods", 5, 60), select="Min")
    assert (
        behaving(25, 1, Behavior(scale_up=default_scale_up_rules(), scale_down=both_min)).replicas
        == 22
    )


def test_disabled_directions() -> None:
    frozen = Behavior(
        scale_up=rules(("Pods", 4, 15), select="Disabled"),
        scale_down=rules(("Percent", 100, 15), select="Disabled"),
    )
    assert behaving(5, 9, frozen).replicas == 5
    assert behaving(5, 1, frozen).replicas == 5


def test_min_max_with_behavior() -> None:
    # up: limit 20 > max 12 → cap 12, TooManyReplicas
    result = behaving(10, 30, hi=12)
    assert (result.replicas, result.limit[0]) == (12, "TooManyReplicas")
    # down: limit 0 < min 3 → floor 3, TooFewReplicas
    result = behaving(10, 1, lo=3)
    assert (result.replicas, result.limit[0]) == (3, "TooFewReplicas")


def test_stabilization_windows_with_behavior() -> None:
    up60 = Behavior(
        scale_up=rules(("Pods", 4, 15), window=60),
        scale_down=rules(("Percent", 100, 15), window=300),
    )
    history = ScalingHistory(recommendations=(Recommendation(4, NOW - timedelta(seconds=30)),))
    # up = min(8, 4) = 4; down = max(8, 4) = 8; rec = current 3 → raised to 4 → 4;
    # ScaleUpStabilized since 8 >= 3
    result = behaving(3, 8, up60, history=history)
    assert (result.stabilized, result.able_to_scale[0]) == (4, "ScaleUpStabilized")
    # down window: a recommendation of 6 within 300 s holds a proposal of 2 at 6
    history = ScalingHistory(recommendations=(Recommendation(6, NOW - timedelta(seconds=200)),))
    result = behaving(7, 2, up60, history=history)
    assert (result.replicas, result.able_to_scale[0]) == (6, "ScaleDownStabilized")


def test_scale_down_window_nil_comes_from_the_flag() -> None:
    spec = parse_hpa({"metadata": {"name": "h"}, "spec": {"maxReplicas": 5, "behavior": {}}})
    assert spec.behavior is not None
    assert spec.behavior.scale_down.stabilization_window_seconds is None
    # flag 5 m: a recommendation of 9 four minutes ago holds the scale-down
    history = ScalingHistory(recommendations=(Recommendation(9, NOW - timedelta(minutes=4)),))
    assert behaving(9, 2, spec.behavior, history=history).replicas == 9


def test_store_scale_event() -> None:
    old = ScaleEvent(2, NOW - timedelta(minutes=10))
    history = ScalingHistory(scale_up_events=(ScaleEvent(1, NOW - timedelta(seconds=5)), old))
    stored = store_scale_event(history, DEFAULT, previous=3, new=7, now=NOW)
    # the 10-minute-old event is beyond the longest up period (15 s): its slot is reused
    assert stored.scale_up_events == (ScaleEvent(1, NOW - timedelta(seconds=5)), ScaleEvent(4, NOW))
    # without behavior nothing is stored
    assert store_scale_event(history, None, previous=3, new=7, now=NOW) is history
    down = store_scale_event(ScalingHistory(), DEFAULT, previous=7, new=3, now=NOW)
    assert down.scale_down_events == (ScaleEvent(4, NOW),)


@settings(max_examples=300, deadline=None)
@given(
    current=st.integers(1, 60),
    desired=st.integers(0, 200),
    lo=st.integers(1, 10),
    span=st.integers(0, 80),
    use_behavior=st.booleans(),
    recs=st.lists(st.tuples(st.integers(0, 200), st.integers(0, 900)), max_size=5),
    ups=st.lists(st.tuples(st.integers(1, 40), st.integers(0, 30)), max_size=3),
    downs=st.lists(st.tuples(st.integers(1, 40), st.integers(0, 30)), max_size=3),
)
def test_result_stays_between_current_and_the_stabilized_proposal(  # noqa: PLR0917
    current: int,
    desired: int,
    lo: int,
    span: int,
    use_behavior: bool,
    recs: list[tuple[int, int]],
    ups: list[tuple[int, int]],
    downs: list[tuple[int, int]],
) -> None:
    """Normalization never overshoots: the result lies between ``current`` and the stabilized
    proposal, or is min/max — and stays within [min, max] when ``current`` does."""
    hi = lo + span
    current = min(max(current, lo), hi)
    history = ScalingHistory(
        recommendations=tuple(Recommendation(r, NOW - timedelta(seconds=age)) for r, age in recs),
        scale_up_events=tuple(ScaleEvent(c, NOW - timedelta(seconds=age)) for c, age in ups),
        scale_down_events=tuple(ScaleEvent(c, NOW - timedelta(seconds=age)) for c, age in downs),
    )
    result = normalize(
        history=history,
        behavior=DEFAULT if use_behavior else None,
        current=current,
        desired=desired,
        min_replicas=lo,
        max_replicas=hi,
        downscale_window=WINDOW,
        now=NOW,
    )
    assert lo <= result.replicas <= hi
    low, high = sorted((current, result.stabilized))
    assert low <= result.replicas <= high or result.replicas in (lo, hi)
    assert result.limited == (result.replicas != result.stabilized)
