"""The estimator chain: margin, confidence multipliers, pod minimums, the worked example."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.controllers.vpa.model.aggregate_state import AggregateContainerState, scale_resource
from kubescale.controllers.vpa.model.estimators import (
    confidence,
    estimate,
    estimate_arrays,
    pod_minimums,
)
from kubescale.controllers.vpa.model.go_math import go_micros
from kubescale.controllers.vpa.model.model_config import RecommenderConfig

DAY_NS = 24 * 3600 * 10**9
T0 = datetime(2024, 5, 1, tzinfo=UTC)


def _constant(cores_m: int, memory: int, minutes: int) -> AggregateContainerState:
    state = AggregateContainerState.standalone()
    for minute in range(minutes):
        moment = go_micros(T0 + timedelta(minutes=minute))
        state.add_cpu_sample(cores_m, moment)
        if minute % 1440 == 0:
            state.add_memory_peak(memory, moment)
    return state


def test_worked_example_one_core_gives_1168m() -> None:
    # Reference §2.4: constant 1.0 core -> bucket 36, P90 = start(37) -> 1016m + 152m.
    result = estimate(_constant(1000, 10**9, 2 * 1440), RecommenderConfig(), containers=1)
    assert result.target_cpu == 1168
    assert result.target_memory == 1168723596  # 1016281388 + int(1016281388 * 0.15)


@pytest.mark.parametrize(("base", "expected"), [(1000, 1150), (1016, 1168), (7, 8), (6, 6), (0, 0)])
def test_margin_is_base_plus_truncated_fraction(base: int, expected: int) -> None:
    assert base + scale_resource(base, 0.15) == expected


@pytest.mark.parametrize(
    ("span", "samples", "expected"),
    [
        (DAY_NS, 1440, 1.0),
        (DAY_NS // 2, 720, 0.5),
        (7 * DAY_NS, 7 * 1440, 7.0),
        (7 * DAY_NS, 1440, 1.0),  # few samples over a long span: the sample count rules
        (0, 1, 0.0),
    ],
)
def test_confidence(span: int, samples: int, expected: float) -> None:
    assert confidence(
        first_us=0, last_us=span // 1000, total_samples=samples, interval_ns=DAY_NS
    ) == (expected)


@pytest.mark.parametrize(
    ("minutes", "upper_factor", "lower_factor"),
    [
        # logic/recommender.go comments: 12h history -> x3, 24h -> x2, 1 week -> x1.14;
        # lower bound x0.6 at 5m, x0.9 at 30m, x0.95 at 60m.
        (12 * 60 + 1, 3.0, None),
        (24 * 60 + 1, 2.0, None),
        (7 * 24 * 60 + 1, 1.14, None),
        (6, None, 0.6),
        (31, None, 0.9),
        (61, None, 0.95),
    ],
)
def test_confidence_multipliers(
    minutes: int, upper_factor: float | None, lower_factor: float | None
) -> None:
    state = _constant(1000, 10**9, minutes)
    result = estimate(state, RecommenderConfig(), containers=1)
    base = 1000 * 10162814 // 10**7  # P = start(37) in millicores, 1016
    with_margin = base + int(base * 0.15)
    if upper_factor is not None:
        assert result.upper_cpu / with_margin == pytest.approx(upper_factor, abs=0.01)
    if lower_factor is not None:
        assert result.lower_cpu / with_margin == pytest.approx(lower_factor, abs=0.015)


def test_no_history_gives_open_bounds() -> None:
    state = _constant(1000, 10**9, 1)
    result = estimate(state, RecommenderConfig(), containers=1)
    assert result.upper_cpu == 100_000_000_000_000
    assert result.upper_memory == 100_000_000_000_000
    assert (result.lower_cpu, result.lower_memory) == (25, 262144000)  # 0, then pod minimum


def test_empty_histograms_give_the_pod_minimum() -> None:
    result = estimate(AggregateContainerState.standalone(), RecommenderConfig(), containers=1)
    assert result == type(result)(25, 262144000, 25, 262144000, 25, 262144000)


@pytest.mark.parametrize(
    ("containers", "cpu", "memory"),
    [(1, 25, 262144000), (2, 12, 131072000), (3, 8, 87381333), (10, 2, 26214400)],
)
def test_pod_minimum_split(containers: int, cpu: int, memory: int) -> None:
    assert pod_minimums(RecommenderConfig(), containers) == (cpu, memory)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=4000),
            st.integers(min_value=0, max_value=10**10),
            st.integers(min_value=1, max_value=3000),
        ),
        min_size=1,
        max_size=6,
    ),
    st.integers(min_value=1, max_value=4),
)
def test_vectorised_estimates_equal_the_scalar_chain(
    workloads: list[tuple[int, int, int]], containers: int
) -> None:
    config = RecommenderConfig()
    states = [_constant(cpu, memory, minutes) for cpu, memory, minutes in workloads]
    levels = (
        config.target_cpu_percentile,
        config.recommendation_lower_bound_cpu_percentile,
        config.recommendation_upper_bound_cpu_percentile,
    )
    arrays = estimate_arrays(
        cpu_percentiles=np.array([[s.cpu.percentile(p) for p in levels] for s in states]),
        memory_percentiles=np.array([[s.memory.percentile(p) for p in levels] for s in states]),
        first_us=np.array([s.first_sample_start_us for s in states], dtype=np.int64),
        last_us=np.array([s.last_sample_start_us for s in states], dtype=np.int64),
        samples=np.array([s.total_samples_count for s in states], dtype=np.int64),
        containers=np.full(len(states), containers, dtype=np.int64),
        config=config,
    )
    for index, state in enumerate(states):
        scalar = estimate(state, config, containers=containers)
        assert {name: int(values[index]) for name, values in arrays.items()} == vars(scalar)
