"""The ``adaptive`` policy's burst release and its input, the recent peaks: worked tables and
properties.

Bucket arithmetic as in ``test_adaptive_policy.py`` (``margin(x, m) = x + int(x * m)``). The
memory histogram used below: 95 peaks of 1 GiB and 5 of 4 GiB (``SPIKY``), so rung 1 (P99 +
15 %) and the OOM floor's ``P100 + 15 %`` are both 4340933439 + int(651140015.85) = 4992073454.
One OOM at 50 h with 3 GiB in use: OOM floor ``max(int(3 GiB * 2.0) = 6442450944,
4992073454, margin(remembered peak, 0.15))``.

The first table is worked out for the release's first parameters (``R3``: quiet 12 h, level
+ 100 %, minimum 8 GiB, hold 24 h, one OOM multiple 2.0), pinned in ``R3`` below so that its
arithmetic stays readable; ``test_burst_release_with_the_defaults`` works the defaults out.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.controllers.vpa.model.aggregate_state import AggregateContainerState, ContainerState
from kubescale.controllers.vpa.model.policy.adaptive_config import (
    DEFAULT_ADAPTIVE_POLICY,
    AdaptivePolicyConfig,
)
from kubescale.controllers.vpa.model.policy.adaptive_estimator import (
    estimate_adaptive,
    estimate_adaptive_states,
)
from kubescale.controllers.vpa.model.policy.recent_peaks import (
    HOUR_US,
    PEAK_MEMORY_US,
    RECENT_PEAKS_HOURS,
    RecentPeaks,
)
from tests.controllers.vpa.model.policy.test_adaptive_policy import (
    CONFIG,
    GIB,
    SPIKY,
    _aggregate,
    aggregates,
    at,
    in_one_store,
)

MIB_256 = 256 << 20
HOLD_FLOOR = 6442450944  # int(3 GiB * 2.0)
RUNG_1 = 4992073454
RELEASED = 2 * MIB_256  # margin(256 MiB, 1.0) = 268435456 + 268435456
HOUR_NS = 3600 * 10**9
R3 = replace(
    DEFAULT_ADAPTIVE_POLICY,
    release_quiet_ns=12 * HOUR_NS,
    release_margin=1.0,
    release_min_bytes=8 << 30,
    oom_hold_ns=24 * HOUR_NS,
    known_peak_bump_ratio=2.0,
)
LOW_MIN = replace(R3, release_min_bytes=GIB)


def _burst_state(usage: list[tuple[float, int]]) -> AggregateContainerState:
    """SPIKY peaks, one OOM at 50 h (3 GiB in use), then ``(hour, bytes)`` usage samples."""
    state = _aggregate(memory=SPIKY, hour=48)
    state.note_oom(at(50), 3 * GIB)
    for hour, used in usage:
        state.note_memory_usage(used, at(hour))
    return state


IDLE = [(h, MIB_256) for h in range(51, 81)]


@pytest.mark.parametrize(
    ("usage", "now", "policy", "expected"),
    [
        # 13 h after the OOM (>= 12 h), every hour since 51 h at 256 MiB: in the hold the target
        # is 6442450944, cap int(6442450944 * 0.5) = 3221225472 >= 256 MiB: quiet; level
        # margin(256 MiB, 1.0) = 536870912, 5905580032 lower (>= 1 GiB): released.
        (IDLE, 63, LOW_MIN, RELEASED),
        (IDLE, 61.5, LOW_MIN, HOLD_FLOOR),  # 11.5 h after the OOM: not yet
        # A 4 GiB hour at 55 h (> cap 3221225472) inside the last 12 h: not quiet.
        ([*IDLE, (55, 4 * GIB)], 63, LOW_MIN, HOLD_FLOOR),
        # A 2 GiB hour at 51 h (<= cap) outside the quiet window (from 52 h) but in the 46 h
        # history: level margin(2 GiB, 1.0) = 4294967296, 2147483648 lower: released to it.
        ([*IDLE, (51, 2 * GIB)], 64, LOW_MIN, 4 * GIB),
        # A 6 GiB hour at 51 h (> cap): not a quiet hour, left out of the level: 536870912.
        ([*IDLE, (51, 6 * GIB)], 64, LOW_MIN, RELEASED),
        # release_min_bytes 8 GiB: 5905580032 lower is not enough: the hold stays.
        (IDLE, 63, R3, HOLD_FLOOR),
        # After the hold (80 h): rung 1's 4992073454, cap 2496036727, released by 4455202542.
        (IDLE, 80, LOW_MIN, RELEASED),
        (IDLE, 63, replace(LOW_MIN, release_quiet_ns=0), HOLD_FLOOR),  # release off
        # No usage sample since the OOM: nothing known to release to.
        ([], 63, LOW_MIN, HOLD_FLOOR),
        # Quiet window 46 h but the recent peaks start at the OOM (50 h), 30 h before 80 h.
        (IDLE, 80, replace(LOW_MIN, release_quiet_ns=46 * 3600 * 10**9), RUNG_1),
    ],
)
def test_burst_release(
    usage: list[tuple[float, int]], now: float, policy: AdaptivePolicyConfig, expected: int
) -> None:
    state = _burst_state([(h, b) for h, b in usage if h <= now])
    result = estimate_adaptive(state, CONFIG, now_us=at(now), containers=1, policy=policy)
    assert result.target_memory == expected


def test_the_next_oom_jumps_to_the_remembered_peak() -> None:
    # A 6 GiB burst hour at 51 h, released at 64 h (previous table); the next OOM at 70 h with
    # the released 536870912 in use: floor max(int(536870912 * 2.0) = 1073741824, 4992073454,
    # margin(6 GiB, 0.15) = 6442450944 + int(966367641.6) = 7408818585); two episodes (50 h,
    # 70 h) -> rung 2 = P100 + 15 % = 4992073454. Straight to 7408818585, no ladder.
    state = _burst_state([*[(h, MIB_256) for h in range(51, 71)], (51, 6 * GIB)])
    released = estimate_adaptive(state, CONFIG, now_us=at(64), containers=1, policy=LOW_MIN)
    assert released.target_memory == RELEASED
    state.note_oom(at(70), RELEASED)
    result = estimate_adaptive(state, CONFIG, now_us=at(70), containers=1, policy=LOW_MIN)
    assert result.target_memory == 7408818585
    # With the release off the remembered peak is not part of the floor: 4992073454.
    off = replace(LOW_MIN, release_quiet_ns=0)
    assert (
        estimate_adaptive(state, CONFIG, now_us=at(70), containers=1, policy=off).target_memory
        == RUNG_1
    )


# The defaults: quiet 4 h, level + 85 %, minimum 4 GiB, hold 36 h. In the hold the target is
# HOLD_FLOOR (the remembered peak, margin(256 MiB, 0.15), is below the 3 GiB in use, so the
# multiple is oom_bump_ratio 2.0); cap int(6442450944 * 0.5) = 3221225472; the level is
# margin(256 MiB, 0.85) = 268435456 + int(228170137.6) = 496605593, 5945845351 lower (>= 4 GiB).
RELEASED_DEFAULT = 496605593


@pytest.mark.parametrize(
    ("usage", "now", "expected"),
    [
        (IDLE, 54, RELEASED_DEFAULT),  # 4 h after the OOM, every hour since 51 h quiet
        (IDLE, 53.5, HOLD_FLOOR),  # 3.5 h: not yet
        # A 4 GiB hour at 53 h: remembered, margin(4 GiB, 0.15) = 4294967296 + int(644245094.4)
        # = 4939212390 > 3 GiB in use, so the multiple is known_peak_bump_ratio 1.5: floor
        # max(int(3 GiB * 1.5) = 4831838208, 4992073454, 4939212390) = 4992073454; not quiet
        # (4 GiB > cap 2496036727): no release.
        ([*IDLE, (53, 4 * GIB)], 55, RUNG_1),
        # A 2 GiB hour at 51 h, before the quiet window (from 52 h): a quiet hour of the 46 h
        # history, level margin(2 GiB, 0.85) = 2147483648 + int(1825361100.8) = 3972844748,
        # 2469606196 lower: under the 4 GiB minimum, the hold stays.
        ([*IDLE, (51, 2 * GIB)], 56, HOLD_FLOOR),
        # After the hold (86 h), rung 1's 4992073454 (cap 2496036727) released by 4495467861.
        (IDLE, 86, RELEASED_DEFAULT),
    ],
)
def test_burst_release_with_the_defaults(
    usage: list[tuple[float, int]], now: float, expected: int
) -> None:
    state = _burst_state([(h, b) for h, b in usage if h <= now])
    result = estimate_adaptive(state, CONFIG, now_us=at(now), containers=1)
    assert result.target_memory == expected


# -- the OOM floor's multiple --------------------------------------------------------------------


def _bump_state(*, first_hour: float, peak: int | None) -> AggregateContainerState:
    """SPIKY peaks at 48 h, history from ``first_hour``; an OOM at 50 h with 3 GiB in use, then
    (when ``peak``) that usage at 51 h, so the release remembers it."""
    state = _aggregate(memory=SPIKY, first_hour=first_hour, hour=48)
    state.note_oom(at(50), 3 * GIB)
    if peak is not None:
        state.note_memory_usage(peak, at(51))
    return state


@pytest.mark.parametrize(
    ("first_hour", "peak", "used", "expected"),
    [
        # 48 h of history, nothing remembered: a second OOM at 52 h with 5.5 GiB in use (one
        # episode, rung 1 = 4992073454): floor max(int(5905580032 * 2.0) = 11811160064,
        # 4992073454) = 11811160064.
        (0, None, 5.5, 11811160064),
        # A 6 GiB hour remembered: margin(6 GiB, 0.15) = 6442450944 + int(966367641.6) =
        # 7408818585 > 5.5 GiB in use: the known height is in the floor, the multiple is
        # known_peak_bump_ratio 1.5: max(int(5905580032 * 1.5) = 8858370048, 7408818585).
        (0, 6 * GIB, 5.5, 8858370048),
        # 7 GiB in use is above the remembered 7408818585: a new height, multiple 2.0:
        # int(7516192768 * 2.0) = 15032385536.
        (0, 6 * GIB, 7, 15032385536),
        # 8 h of history (40 h .. 48 h): young, multiple young_oom_bump_ratio 8.0 whatever is
        # remembered: int(5905580032 * 8.0) = 47244640256 (above the young rule's
        # margin(P100, 1.0) = 8681866878).
        (40, None, 5.5, 47244640256),
        (40, 6 * GIB, 5.5, 47244640256),
    ],
)
def test_the_oom_floor_multiple(
    first_hour: float, peak: int | None, used: float, expected: int
) -> None:
    state = _bump_state(first_hour=first_hour, peak=peak)
    state.note_oom(at(52), int(used * GIB))
    result = estimate_adaptive(state, CONFIG, now_us=at(52), containers=1)
    assert result.target_memory == expected
    [vectorised] = estimate_adaptive_states([state], [1], CONFIG, now_us=at(52))
    assert vectorised == result


# -- the recent peaks --------------------------------------------------------------------------


def test_recent_peaks_keep_hourly_maxima_for_48_hours() -> None:
    peaks = RecentPeaks(0)
    peaks.add(5, 10)  # hour 0
    peaks.add(3, HOUR_US - 1)  # hour 0, lower: kept 5
    peaks.add(7, HOUR_US)  # hour 1
    assert peaks.hourly == {0: 5, 1: 7}
    assert peaks.max_between(HOUR_US, HOUR_US) == 7
    assert peaks.max_between(0, HOUR_US, at_most=6) == 5
    assert peaks.max_between(0, HOUR_US - 1) == 5  # hour 1 is after the end
    assert peaks.max_between(2 * HOUR_US, 3 * HOUR_US) == 0
    peaks.add(1, RECENT_PEAKS_HOURS * HOUR_US)  # hour 48: hour 0 leaves, hour 1 stays
    assert sorted(peaks.hourly) == [1, RECENT_PEAKS_HOURS]
    peaks.add(9, 0)  # older than the hours kept: not an hour, but the highest usage seen
    assert sorted(peaks.hourly) == [1, RECENT_PEAKS_HOURS]
    assert (peaks.peak_bytes, peaks.peak_us) == (9, 0)


def test_the_remembered_peak_is_replaced_after_14_days() -> None:
    peaks = RecentPeaks(0)
    peaks.add(10, 0)
    peaks.add(4, PEAK_MEMORY_US)  # exactly 14 days later: the 10 is still remembered
    assert peaks.peak_bytes == 10
    peaks.add(4, PEAK_MEMORY_US + 1)  # older than 14 days: replaced
    assert (peaks.peak_bytes, peaks.peak_us) == (4, PEAK_MEMORY_US + 1)


def test_merging_aggregates_merges_their_recent_peaks() -> None:
    one, two = AggregateContainerState.standalone(), AggregateContainerState.standalone()
    one.note_oom(at(1), GIB)
    one.note_memory_usage(2 * GIB, at(2))
    two.note_oom(at(3), GIB)
    two.note_memory_usage(3 * GIB, at(2.5))
    two.note_memory_usage(GIB, at(4))
    merged = AggregateContainerState.standalone()
    for source in (one, two, AggregateContainerState.standalone()):
        merged.merge(source)
    assert merged.recent_peaks is not None
    assert merged.recent_peaks.max_between(at(0), at(9)) == 3 * GIB
    assert merged.recent_peaks.max_between(at(3), at(9)) == GIB
    assert merged.recent_peaks.started_us == at(1)
    assert one.recent_peaks is not None
    assert one.recent_peaks.max_between(at(0), at(9)) == 2 * GIB


def test_usage_reaches_the_recent_peaks_only_after_an_oom() -> None:
    aggregate = AggregateContainerState.standalone()
    container = ContainerState(request_cpu=0, request_memory=0, aggregator=aggregate)
    container.add_memory_sample(GIB, at(1))
    before = aggregate.recent_peaks
    assert before is None  # never OOM-killed: nothing kept
    assert container.record_oom(at(2), GIB)
    # The OOM's bumped sample is not usage: the recent peaks start empty at the OOM.
    after = aggregate.recent_peaks
    assert after == RecentPeaks(at(2))
    container.add_memory_sample(2 * GIB, at(3))
    assert after is not None
    assert after.max_between(at(0), at(9)) == 2 * GIB


# -- properties ------------------------------------------------------------------------------


@st.composite
def bursts(draw: st.DrawFn) -> tuple[AggregateContainerState, int]:
    """An aggregate OOM-killed once in a burst, then mostly idle (where the release applies),
    and a ``now`` after the OOM (microseconds); young (history from 0 h) or not (from -48 h)."""
    state = AggregateContainerState.standalone()
    if draw(st.booleans()):
        state.count_cpu_sample(at(-48))
    for hour in range(0, 48, 4):
        state.add_cpu_sample(draw(st.integers(0, 4000)), at(hour))
    for hour, peak in enumerate(draw(st.lists(st.integers(1, 64 * GIB), min_size=1, max_size=8))):
        state.add_memory_peak(peak, at(hour * 6))
    oom_hour = draw(st.integers(40, 60))
    # 24 GiB in use: doubled it is above the 40 GiB burst's margin, x1.5 below (known bump).
    used = st.one_of(st.integers(GIB, 64 * GIB), st.just(24 * GIB))
    state.note_oom(at(oom_hour), draw(used))
    usage = st.sampled_from([MIB_256] * 12 + [GIB, 4 * GIB, 32 * GIB])  # mostly idle
    if draw(st.booleans()):  # the burst goes on after the OOM: a height to remember
        state.note_memory_usage(40 * GIB, at(oom_hour + 0.5))
    for hour in range(oom_hour + 1, oom_hour + 47):
        state.note_memory_usage(draw(usage), at(hour))
    return state, at(oom_hour + draw(st.one_of(st.floats(0, 46), st.sampled_from([1.0, 3.0]))))


release_policies = st.builds(
    replace,
    st.just(DEFAULT_ADAPTIVE_POLICY),
    release_quiet_ns=st.sampled_from([3600 * 10**9, 6 * 3600 * 10**9, 12 * 3600 * 10**9]),
    release_margin=st.floats(0, 2),
    release_ratio=st.floats(0.1, 1),
    release_min_bytes=st.sampled_from([0, 1 << 30]),
)


@settings(max_examples=150, deadline=None)
@given(st.one_of(bursts(), aggregates()), release_policies)
def test_the_release_never_goes_below_the_quiet_windows_usage(
    drawn: tuple[AggregateContainerState, int], on: AdaptivePolicyConfig
) -> None:
    # The released target is never below what the container used in the quiet window: with
    # the release on, the memory target is at least min(the target with it off, the highest
    # usage of the clock hours from now - release_quiet to now).
    state, now_us = drawn
    off = replace(on, release_quiet_ns=0)
    with_release = estimate_adaptive(state, CONFIG, now_us=now_us, containers=1, policy=on)
    without = estimate_adaptive(state, CONFIG, now_us=now_us, containers=1, policy=off)
    recent = state.recent_peaks
    since_us = now_us - on.release_quiet_ns // 1000
    used = recent.max_between(since_us, now_us) if recent is not None else 0
    assert with_release.target_memory >= min(without.target_memory, used)


@settings(max_examples=60, deadline=None)
@given(st.lists(bursts(), min_size=1, max_size=4), release_policies)
def test_released_vectorised_equals_scalar(
    drawn: list[tuple[AggregateContainerState, int]], policy: AdaptivePolicyConfig
) -> None:
    states = in_one_store(drawn)
    now_us = drawn[0][1]
    scalar = [
        estimate_adaptive(s, CONFIG, now_us=now_us, containers=1, policy=policy) for s in states
    ]
    vectorised = estimate_adaptive_states(
        states, [1] * len(states), CONFIG, now_us=now_us, policy=policy
    )
    assert scalar == vectorised
