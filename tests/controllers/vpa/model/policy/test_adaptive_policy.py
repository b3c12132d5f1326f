"""The ``adaptive`` recommendation policy: worked tables and properties.

Tables work the expected amounts out from the rules of
:mod:`kubescale.controllers.vpa.model.policy.adaptive_estimator` and upstream's bucket table
(``start(n) = 0.01 core * (1.05**n - 1) / 0.05`` for CPU, ``1e7 B * (1.05**n - 1) / 0.05`` for
memory; a percentile is the end of its bucket, i.e. ``start(n + 1)``; ``margin(x, m) = x +
int(x * m)``). Bucket ends used below: CPU bucket 8 (0.1 core) ends at 0.110265643 cores,
bucket 36 (1 core) at 1.016281389, bucket 49 (2 cores) at 2.093479957; memory bucket 37
(1 GiB) ends at 1077095457.98 B, bucket 63 (4 GiB) at 4340933439.84 B.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.controllers.vpa.model.aggregate_state import AggregateContainerState, ContainerState
from kubescale.controllers.vpa.model.estimators import estimate, pod_minimums
from kubescale.controllers.vpa.model.go_math import go_micros
from kubescale.controllers.vpa.model.model_config import RecommenderConfig
from kubescale.controllers.vpa.model.policy.adaptive_config import (
    DEFAULT_ADAPTIVE_POLICY,
    AdaptivePolicyConfig,
)
from kubescale.controllers.vpa.model.policy.adaptive_estimator import (
    estimate_adaptive,
    estimate_adaptive_states,
    oom_pressure,
)
from kubescale.controllers.vpa.model.policy.oom_log import (
    OOM_LOG_HORIZON_US,
    OOM_LOG_MAX_EVENTS,
    OomEvent,
    OomLog,
)
from kubescale.controllers.vpa.model.recommendation import build_recommendation
from kubescale.objects.quantities import Quantity
from kubescale.objects.vpa import PodResourcePolicy

T0 = datetime(2024, 5, 1, tzinfo=UTC)
GIB = 1 << 30
CONFIG = RecommenderConfig(recommendation_policy="adaptive")


def at(hours: float) -> int:
    return go_micros(T0 + timedelta(hours=hours))


def _aggregate(
    *,
    cpu: Sequence[tuple[int, int]] = ((1000, 100),),
    memory: Sequence[tuple[int, int]] = ((GIB, 1),),
    first_hour: float = 0.0,
    hour: float = 48.0,
) -> AggregateContainerState:
    """CPU ``(millicores, count)`` and memory ``(bytes, count)`` samples, all at ``hour`` (equal
    weights), the history counted from ``first_hour``."""
    state = AggregateContainerState.standalone()
    state.count_cpu_sample(at(first_hour))
    for millicores, count in cpu:
        for _ in range(count):
            state.add_cpu_sample(millicores, at(hour))
    for value, count in memory:
        for _ in range(count):
            state.add_memory_peak(value, at(hour))
    return state


# -- memory: rungs and the OOM floor -----------------------------------------------------------

# 95 peaks of 1 GiB and 5 of 4 GiB, equal weights: P90 -> bucket 37 (95 >= 90), P99 and P100
# -> bucket 63.
#   rung 0 (0.9, 0.15):  1077095457 + int(1077095457 * 0.15 = 161564318.55) = 1238659775
#   rung 1 (0.99, 0.15) and rung 2 (1.0, 0.15):
#                        4340933439 + int(4340933439 * 0.15 = 651140015.85) = 4992073454
#   rung 3 (1.0, 0.3):   4340933439 + int(4340933439 * 0.3 = 1302280031.7) = 5643213470
RUNG_0, RUNG_1, RUNG_3 = 1238659775, 4992073454, 5643213470
SPIKY = [(GIB, 95), (4 * GIB, 5)]


@pytest.mark.parametrize(
    ("ooms", "now", "expected"),
    [
        ([], 60, RUNG_0),  # no OOM: upstream's target percentile and margin
        ([(50, GIB)], 75, RUNG_1),  # one episode: rung 1 (the hold's max(2 GiB, P100 + 15 %) too)
        # Within the 36 h hold: floor max(int(3 GiB * 2.0) = 6442450944, margin(P100) =
        # 4992073454) = 6442450944 above rung 1 (the aggregate has 48 h of history: not young;
        # no usage since the OOM: no remembered peak, so the multiple is oom_bump_ratio) ...
        ([(50, 3 * GIB)], 85, 6442450944),
        ([(50, 3 * GIB)], 86, RUNG_1),  # ... until 36 h after the OOM
        # In the hold but a small OOM: floor max(2 GiB, 4992073454) = rung 1's amount.
        ([(50, GIB)], 51, RUNG_1),
        ([(50, GIB), (51, GIB)], 76, RUNG_1),  # 1 h apart: one episode
        ([(50, GIB), (57, GIB)], 82, RUNG_1),  # 7 h apart: two episodes, rung 2 = P100 + 15%
        ([(40, GIB), (47, GIB), (54, GIB)], 79, RUNG_3),  # three episodes: the last rung
        ([(30, GIB), (37, GIB), (44, GIB), (51, GIB)], 76, RUNG_3),  # beyond: still the last
        ([(50, GIB)], 50 + 12 * 24, RUNG_0),  # 12 days later the episode has left the window
        ([(50, GIB)], 50 + 12 * 24 - 1, RUNG_1),  # an hour before, it still counts
        ([(70, 3 * GIB)], 60, RUNG_0),  # an OOM after now is not seen (no look-ahead)
    ],
)
def test_memory_target_by_oom_pressure(
    ooms: list[tuple[float, int]], now: float, expected: int
) -> None:
    state = _aggregate(memory=SPIKY, hour=48)
    for hour, used in ooms:
        state.note_oom(at(hour), used)
    result = estimate_adaptive(state, CONFIG, now_us=at(now), containers=1)
    assert result.target_memory == expected


@pytest.mark.parametrize(
    ("first_hour", "young_ns", "margin", "expected"),
    [
        # 5 h of history (43 h .. 48 h) < 24 h: young, memory at least P100 + 50 % =
        # 4340933439 + int(2170466719.5) = 6511400158 (above rung 0's 1238659775).
        (43, 24 * 3600 * 10**9, 0.5, 6511400158),
        # margin 1.0: 4340933439 + int(4340933439.84 * 1.0 = 4340933439) = 8681866878.
        (43, 24 * 3600 * 10**9, 1.0, 8681866878),
        (24, 24 * 3600 * 10**9, 0.5, RUNG_0),  # exactly 24 h of history: no longer young
        (25, 24 * 3600 * 10**9, 0.5, 6511400158),  # 23 h: still young
        (43, 0, 0.5, RUNG_0),  # young_ns 0: the rule is off
    ],
)
def test_a_young_aggregate_holds_its_highest_peak(
    first_hour: float, young_ns: int, margin: float, expected: int
) -> None:
    policy = replace(DEFAULT_ADAPTIVE_POLICY, young_ns=young_ns, young_memory_margin=margin)
    state = _aggregate(memory=SPIKY, first_hour=first_hour, hour=48)
    result = estimate_adaptive(state, CONFIG, now_us=at(48), containers=1, policy=policy)
    assert result.target_memory == expected


def test_without_ooms_the_memory_target_is_upstreams() -> None:
    state = _aggregate(memory=SPIKY)
    assert estimate_adaptive(state, CONFIG, now_us=at(60), containers=1).target_memory == (
        estimate(state, CONFIG, containers=1).target_memory
    )


def test_an_oom_through_the_container_state_reaches_the_log() -> None:
    # RecordOOM with a 1 GiB request and no peak: used = max(1 GiB, 0); the bump-up sample
    # max(1 GiB + 100 MiB, int(1 GiB * 1.2)) = 1288490188 goes into the histogram as upstream.
    aggregate = AggregateContainerState.standalone()
    container = ContainerState(request_cpu=0, request_memory=0, aggregator=aggregate)
    assert container.record_oom(at(1), GIB)
    assert aggregate.oom_log == OomLog([OomEvent(at(1), GIB)])
    # Too old to count (before the last memory sample minus the 24 h interval): not logged.
    container.add_memory_sample(GIB, at(100))
    assert not container.record_oom(at(50), GIB)
    assert aggregate.oom_log == OomLog([OomEvent(at(1), GIB)])


def test_merging_aggregates_merges_their_logs() -> None:
    one, two = AggregateContainerState.standalone(), AggregateContainerState.standalone()
    one.note_oom(at(5), GIB)
    two.note_oom(at(3), 2 * GIB)
    merged = AggregateContainerState.standalone()
    merged.merge(one)
    merged.merge(two)
    merged.merge(AggregateContainerState.standalone())
    assert merged.oom_log == OomLog([OomEvent(at(3), 2 * GIB), OomEvent(at(5), GIB)])


def test_the_oom_log_is_bounded_by_age_and_size() -> None:
    log = OomLog()
    log.add(0, 1)
    log.add(OOM_LOG_HORIZON_US, 2)  # exactly the horizon after the first: both kept
    assert [e.memory_bytes for e in log.events] == [1, 2]
    log.add(OOM_LOG_HORIZON_US + 1, 3)  # the first is now older than the horizon
    assert [e.memory_bytes for e in log.events] == [2, 3]
    for index in range(100):
        log.add(OOM_LOG_HORIZON_US + 2 + index, 10 + index)
    assert len(log.events) == OOM_LOG_MAX_EVENTS
    assert log.events[-1].memory_bytes == 109
    assert log.events == sorted(log.events)


@pytest.mark.parametrize(
    ("hours", "now", "episodes", "last"),
    [
        ([], 10, 0, None),
        ([1], 10, 1, 1),
        ([1, 2, 6.9], 10, 1, 6.9),  # gaps under 6 h: one episode
        ([1, 7, 13], 14, 3, 13),  # gaps of exactly 6 h start new episodes
        ([1, 7, 13], 7, 2, 7),  # at 7 h the 13 h OOM has not happened yet
        ([1, 300], 300, 1, 300),  # the 1 h episode started 299 h ago (window 288 h)
        ([1, 90], 288, 2, 90),  # the 1 h episode started 287 h ago: inside the 288 h window
        ([1, 90], 289, 1, 90),  # 288 h ago: out (the window is open at its far end)
    ],
)
def test_oom_pressure(hours: list[float], now: float, episodes: int, last: float | None) -> None:
    log = OomLog()
    for hour in hours:
        log.add(at(hour), GIB)
    pressure = oom_pressure(log, at(now), DEFAULT_ADAPTIVE_POLICY)
    assert pressure.episodes == episodes
    assert (pressure.last.time_us if pressure.last else None) == (
        at(last) if last is not None else None
    )


# -- CPU: the cheapest candidate ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("cpu", "expected"),
    [
        # Steady 1 core: every candidate is bucket 36's end, 1016 + int(152.4) = 1168m; costs
        # 1168 + 20000 * (1 - p) are lowest for p = 0.95: 1168m.
        ([(1000, 100)], 1168),
        # 82 samples at 0.1 core, 18 at 2 cores: P80 -> bucket 8, 110 + int(16.5) = 126m,
        # cost 126 + 20000 * 0.2 = 4126; P85/P90/P95 -> bucket 49, 2093 + int(313.95) =
        # 2406m, costs 5406 / 4406 / 3406: P95 wins, 2406m.
        ([(100, 82), (2000, 18)], 2406),
        # 92 at 0.1 core, 8 at 2 cores: P80/P85/P90 -> 126m (costs 4126, 3126, 2126), P95 ->
        # 2406m (3406): P90 wins, 126m — the rare burst is not worth 2.3 cores.
        ([(100, 92), (2000, 8)], 126),
        # 96 at 1 core, 4 at 2 cores: P80..P95 all bucket 36 -> 1168m, P95 cost lowest.
        ([(1000, 96), (2000, 4)], 1168),
    ],
)
def test_cpu_target_is_the_cheapest_candidate(cpu: list[tuple[int, int]], expected: int) -> None:
    state = _aggregate(cpu=cpu)
    assert estimate_adaptive(state, CONFIG, now_us=at(60), containers=1).target_cpu == expected


def test_a_lower_throttle_cost_gives_up_the_burst() -> None:
    # Throttle cost 15 cores: P80 costs 126 + 15000 * 0.2 = 3126 < P95's 2406 + 750 = 3156.
    policy = replace(DEFAULT_ADAPTIVE_POLICY, throttle_cost_cores=15.0)
    state = _aggregate(cpu=[(100, 82), (2000, 18)])
    result = estimate_adaptive(state, CONFIG, now_us=at(60), containers=1, policy=policy)
    assert result.target_cpu == 126


# -- bounds ------------------------------------------------------------------------------------


def test_settled_history_tightens_the_upper_bounds() -> None:
    # 48 h of history (>= 6 h): upper bounds at most 4 x / 2 x the targets. Upstream's own
    # bounds are far wider here: 101 samples give confidence 101 / 1440 -> x15.3.
    state = _aggregate(first_hour=0, hour=48)
    result = estimate_adaptive(state, CONFIG, now_us=at(60), containers=1)
    upstream = estimate(state, CONFIG, containers=1)
    assert (result.target_cpu, result.target_memory) == (1168, RUNG_0)
    assert result.upper_cpu == 4 * 1168  # int(1168 * 4.0)
    assert result.upper_memory == 2 * RUNG_0  # int(1238659775 * 2.0)
    assert upstream.upper_cpu > result.upper_cpu
    assert upstream.upper_memory > result.upper_memory
    assert result.lower_cpu == min(upstream.lower_cpu, 1168)
    assert result.lower_memory == min(upstream.lower_memory, RUNG_0)


def test_a_young_aggregate_keeps_upstreams_wide_upper_bounds() -> None:
    # 5 h of history (< 6 h): CPU upperBound max(upstream's, highest candidate), memory
    # upstream's.
    state = _aggregate(first_hour=43, hour=48)
    result = estimate_adaptive(state, CONFIG, now_us=at(48), containers=1)
    upstream = estimate(state, CONFIG, containers=1)
    assert result.upper_cpu == max(upstream.upper_cpu, 1168)
    assert result.upper_memory == upstream.upper_memory


@pytest.mark.parametrize(("containers", "cpu", "memory"), [(1, 25, 262144000), (2, 12, 131072000)])
def test_tiny_usage_gets_the_pod_minimum(containers: int, cpu: int, memory: int) -> None:
    # 25m and 250 MiB (262144000 B) split over the containers: int(25 * 0.5) = 12.
    state = _aggregate(cpu=[(1, 100)], memory=[(1 << 20, 1)])
    result = estimate_adaptive(state, CONFIG, now_us=at(60), containers=containers)
    assert (result.target_cpu, result.target_memory) == (cpu, memory)
    assert (result.lower_cpu, result.lower_memory) == (cpu, memory)


# -- properties --------------------------------------------------------------------------------

_hours = st.floats(min_value=0, max_value=400, allow_nan=False)


@st.composite
def aggregates(draw: st.DrawFn) -> tuple[AggregateContainerState, int]:
    """An aggregate with random CPU/memory history and OOMs, and a ``now`` (microseconds)."""
    state = AggregateContainerState.standalone()
    times = sorted(draw(st.lists(_hours, min_size=1, max_size=30)))
    for hour in times:
        state.add_cpu_sample(draw(st.integers(0, 64000)), at(hour))
        state.add_memory_peak(draw(st.integers(0, 1 << 40)), at(hour))
    for hour in draw(st.lists(_hours, max_size=8)):
        state.note_oom(at(hour), draw(st.integers(0, 1 << 40)))
    # Usage samples after the OOMs reach the recent peaks (the burst release's input).
    for hour in sorted(draw(st.lists(_hours, max_size=30))):
        state.note_memory_usage(draw(st.integers(0, 1 << 40)), at(hour))
    return state, at(draw(_hours))


policies = st.builds(
    AdaptivePolicyConfig,
    memory_rungs=st.lists(st.tuples(st.floats(0, 1), st.floats(0, 2)), min_size=1, max_size=4).map(
        tuple
    ),
    oom_bump_ratio=st.floats(0, 4),
    young_oom_bump_ratio=st.floats(0, 16),
    known_peak_bump_ratio=st.floats(0, 4),
    cpu_percentiles=st.lists(st.floats(0, 1), min_size=1, max_size=5).map(tuple),
    throttle_cost_cores=st.floats(0, 100),
    young_ns=st.sampled_from([0, 6 * 3600 * 10**9, 24 * 3600 * 10**9, 400 * 3600 * 10**9]),
    young_memory_margin=st.floats(0, 2),
    release_quiet_ns=st.sampled_from([0, 3600 * 10**9, 12 * 3600 * 10**9, 46 * 3600 * 10**9]),
    release_history_ns=st.sampled_from([0, 12 * 3600 * 10**9, 46 * 3600 * 10**9]),
    release_margin=st.floats(0, 2),
    release_ratio=st.floats(0, 1),
    release_min_bytes=st.sampled_from([0, 1 << 30, 8 << 30]),
)


@settings(max_examples=150, deadline=None)
@given(aggregates(), st.integers(1, 5), policies)
def test_never_below_the_pod_minimums_and_bounds_enclose_the_target(
    drawn: tuple[AggregateContainerState, int], containers: int, policy: AdaptivePolicyConfig
) -> None:
    state, now_us = drawn
    result = estimate_adaptive(state, CONFIG, now_us=now_us, containers=containers, policy=policy)
    min_cpu, min_memory = pod_minimums(CONFIG, containers)
    assert min(result.target_cpu, result.lower_cpu, result.upper_cpu) >= min_cpu
    assert min(result.target_memory, result.lower_memory, result.upper_memory) >= min_memory
    assert result.lower_cpu <= result.target_cpu <= result.upper_cpu
    assert result.lower_memory <= result.target_memory <= result.upper_memory


@settings(max_examples=100, deadline=None)
@given(
    aggregates(),
    st.integers(1, 4000),
    st.integers(1, 1 << 40),
)
def test_never_above_max_allowed(
    drawn: tuple[AggregateContainerState, int], max_cpu_m: int, max_memory: int
) -> None:
    state, now_us = drawn
    estimates = {"app": estimate_adaptive(state, CONFIG, now_us=now_us, containers=1)}
    policy: PodResourcePolicy = {
        "containerPolicies": [
            {
                "containerName": "app",
                "maxAllowed": {"cpu": f"{max_cpu_m}m", "memory": str(max_memory)},
            }
        ]
    }
    [entry] = build_recommendation(
        estimates,
        {"app": ("cpu", "memory")},
        config=CONFIG,
        resource_policy=policy,
        annotations=None,
    )
    for bound in ("target", "lowerBound", "upperBound"):
        assert Quantity.parse(entry[bound]["cpu"]) <= Quantity.parse(f"{max_cpu_m}m")
        assert Quantity.parse(entry[bound]["memory"]) <= Quantity.parse(str(max_memory))


def in_one_store(
    drawn: list[tuple[AggregateContainerState, int]],
) -> list[AggregateContainerState]:
    """The drawn aggregates copied into one store (the vectorised path reads rows of one)."""
    stores = AggregateContainerState.standalone().stores
    states = []
    for source, _ in drawn:
        state = AggregateContainerState(stores)
        state.merge(source)
        states.append(state)
    return states


@settings(max_examples=60, deadline=None)
@given(st.lists(aggregates(), min_size=1, max_size=5), st.integers(1, 3), policies)
def test_deterministic_and_vectorised_equals_scalar(
    drawn: list[tuple[AggregateContainerState, int]],
    containers: int,
    policy: AdaptivePolicyConfig,
) -> None:
    states = in_one_store(drawn)
    now_us = drawn[0][1]
    scalar = [
        estimate_adaptive(s, CONFIG, now_us=now_us, containers=containers, policy=policy)
        for s in states
    ]
    again = [
        estimate_adaptive(s, CONFIG, now_us=now_us, containers=containers, policy=policy)
        for s in states
    ]
    vectorised = estimate_adaptive_states(
        states, [containers] * len(states), CONFIG, now_us=now_us, policy=policy
    )
    assert scalar == again == vectorised
