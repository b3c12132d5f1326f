"""Usage models: each model's values at chosen times, determinism of the random ones for a seed,
bounds, and the division of shared load among replicas."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubescale.sim.cluster.usage_models import (
    BurstUsage,
    ConstantUsage,
    DiurnalUsage,
    LinearGrowthUsage,
    RandomWalkUsage,
    StepUsage,
    Usage,
    UsageBook,
    UsageModel,
)

DAY = 86400.0


def at(
    model: UsageModel, t: float, *, pod: int = 0, replicas: int = 1, since: float = 0.0
) -> Usage:
    return model.usage(t=t, pod_index=pod, replicas=replicas, since_start=since)


def close(a: Usage, b: Usage) -> bool:
    return math.isclose(a.cpu_cores, b.cpu_cores, abs_tol=1e-9) and math.isclose(
        a.memory_bytes, b.memory_bytes, abs_tol=1e-3
    )


@pytest.mark.parametrize(
    ("shared", "replicas", "expected"),
    [
        (False, 1, Usage(0.5, 2e8)),
        (False, 4, Usage(0.5, 2e8)),
        (True, 1, Usage(0.5, 2e8)),
        (True, 4, Usage(0.125, 5e7)),
        (True, 0, Usage(0.5, 2e8)),  # no Running replica yet: a pod alone takes it all
    ],
)
def test_constant_usage_and_shared_division(shared: bool, replicas: int, expected: Usage) -> None:
    model = ConstantUsage(cpu_cores=0.5, memory_bytes=2e8, shared=shared)
    for t in (0.0, 3600.0, 10 * DAY):
        assert at(model, t, replicas=replicas) == expected


@pytest.mark.parametrize(
    ("phase", "t", "cpu"),
    [
        (0.0, 0.0, 1.0),  # crossing the mean, going up
        (0.0, DAY / 4, 1.5),  # peak: 06:00
        (0.0, DAY / 2, 1.0),
        (0.0, 3 * DAY / 4, 0.5),  # trough: 18:00
        (0.0, DAY + DAY / 4, 1.5),  # every day
        (3 * 3600.0, 9 * 3600.0, 1.5),  # phase 03:00 → peak at 09:00
        (3 * 3600.0, 21 * 3600.0, 0.5),  # … trough at 21:00
    ],
)
def test_diurnal_peaks_and_troughs(phase: float, t: float, cpu: float) -> None:
    model = DiurnalUsage(mean=Usage(1.0, 1e9), amplitude=Usage(0.5, 2e8), phase=phase)
    value = at(model, t)
    assert math.isclose(value.cpu_cores, cpu, abs_tol=1e-9)
    assert math.isclose(value.memory_bytes, 1e9 + (cpu - 1.0) / 0.5 * 2e8, rel_tol=1e-9)


def test_diurnal_is_floored_at_zero_and_divided_when_shared() -> None:
    model = DiurnalUsage(mean=Usage(0.2, 1e8), amplitude=Usage(0.5, 2e8), period=3600.0)
    assert at(model, 2700.0) == Usage(0.0, 0.0)  # the trough would be negative
    shared = DiurnalUsage(
        mean=Usage(2.0, 4e9), amplitude=Usage(1.0, 0.0), period=3600.0, shared=True
    )
    assert close(at(shared, 900.0, replicas=3), Usage(1.0, 4e9 / 3))


@pytest.mark.parametrize(
    ("t", "expected"),
    [
        (-10.0, Usage(0.1, 1e8)),  # before the first step: the first step's value
        (0.0, Usage(0.1, 1e8)),
        (599.999, Usage(0.1, 1e8)),
        (600.0, Usage(2.0, 5e8)),  # the edge belongs to the new step
        (1199.0, Usage(2.0, 5e8)),
        (1200.0, Usage(0.3, 2e8)),
        (1e7, Usage(0.3, 2e8)),
    ],
)
def test_step_usage_edges(t: float, expected: Usage) -> None:
    model = StepUsage(
        steps=[(1200.0, Usage(0.3, 2e8)), (0.0, Usage(0.1, 1e8)), (600.0, Usage(2.0, 5e8))]
    )
    assert at(model, t) == expected


def test_step_usage_rejects_duplicate_times_and_no_steps() -> None:
    with pytest.raises(ValueError, match="distinct"):
        StepUsage(steps=[(0.0, Usage(1, 1)), (0.0, Usage(2, 2))])
    with pytest.raises(ValueError, match="at least one"):
        StepUsage(steps=[])


def walk(seed: str = "s", **overrides: object) -> RandomWalkUsage:
    fields: dict[str, object] = {
        "start": Usage(0.5, 5e8),
        "volatility": Usage(0.2, 1e8),
        "interval": 60.0,
        "seed": seed,
    }
    fields.update(overrides)
    return RandomWalkUsage(**fields)  # type: ignore[arg-type]


def test_random_walk_is_deterministic_for_a_seed_in_any_order() -> None:
    times = [i * 60.0 for i in range(200)]
    forward = [at(walk(), t, pod=3) for t in times]
    backward = [at(walk(), t, pod=3) for t in reversed(times)]
    assert forward == list(reversed(backward))
    assert at(walk(), 0.0, pod=3) == Usage(0.5, 5e8)  # starts at start
    assert forward != [at(walk(), t, pod=4) for t in times]  # another pod, another walk
    assert forward != [at(walk("other"), t, pod=3) for t in times]  # another seed
    assert at(walk(), 90.0, pod=3) == at(walk(), 60.0, pod=3)  # constant within an interval


@given(
    seed=st.text(max_size=8),
    pod=st.integers(min_value=0, max_value=50),
    t=st.floats(min_value=-100.0, max_value=6 * 3600.0),
)
def test_random_walk_stays_within_its_bounds(seed: str, pod: int, t: float) -> None:
    bounded = walk(
        seed, volatility=Usage(5.0, 5e9), minimum=Usage(0.1, 1e8), maximum=Usage(2.0, 3e9)
    )
    value = at(bounded, t, pod=pod)
    assert 0.1 <= value.cpu_cores <= 2.0
    assert 1e8 <= value.memory_bytes <= 3e9
    unbounded = walk(seed, volatility=Usage(5.0, 5e9))
    value = at(unbounded, t, pod=pod)
    assert value.cpu_cores >= 0.0
    assert value.memory_bytes >= 0.0


def test_a_shared_random_walk_is_one_walk_divided() -> None:
    model = walk(shared=True)
    assert at(model, 3000.0, pod=0, replicas=2) == at(model, 3000.0, pod=7, replicas=2)
    whole = at(model, 3000.0, replicas=1)
    assert close(at(model, 3000.0, replicas=4), Usage(whole.cpu_cores / 4, whole.memory_bytes / 4))


def burst(seed: str = "s", **overrides: object) -> BurstUsage:
    fields: dict[str, object] = {
        "base": Usage(0.2, 2e8),
        "burst": Usage(1.5, 6e8),
        "probability": 0.1,
        "duration": 300.0,
        "seed": seed,
    }
    fields.update(overrides)
    return BurstUsage(**fields)  # type: ignore[arg-type]


def test_bursts_are_deterministic_and_take_the_expected_share_of_time() -> None:
    times = [i * 60.0 for i in range(5000)]
    first = [at(burst(), t, pod=1) for t in times]
    assert first == [at(burst(), t, pod=1) for t in times]
    assert first != [at(burst(), t, pod=2) for t in times]
    assert set(first) == {Usage(0.2, 2e8), Usage(1.5, 6e8)}
    share = sum(u == Usage(1.5, 6e8) for u in first) / len(first)
    expected = 1 - 0.9**5  # some start among the 5 windows a 300 s burst spans
    assert abs(share - expected) < 0.05
    assert all(at(burst(probability=0.0), t) == Usage(0.2, 2e8) for t in times[:500])
    assert all(at(burst(probability=1.0), t) == Usage(1.5, 6e8) for t in times[:500])


def test_a_burst_lasts_its_duration() -> None:
    model = burst(probability=0.02, duration=180.0, interval=60.0)
    times = [i * 10.0 for i in range(60000)]
    flags = [model.bursting(t=t, pod_index=0) for t in times]
    runs: list[int] = []
    length = 0
    for flag in flags:
        if flag:
            length += 1
        elif length:
            runs.append(length)
            length = 0
    assert runs
    assert min(runs) == 18  # 180 s at 10 s resolution; overlapping bursts only lengthen a run
    assert all(r % 6 == 0 for r in runs)  # bursts start on a 60 s window edge


def test_a_shared_burst_hits_every_pod_at_once() -> None:
    model = burst(shared=True, probability=0.3)
    for t in range(0, 36000, 60):
        assert at(model, t, pod=0, replicas=2) == at(model, t, pod=5, replicas=2)


@pytest.mark.parametrize(
    ("reset", "t", "since", "expected"),
    [
        (True, 5000.0, 0.0, Usage(0.1, 1e8)),  # just restarted
        (True, 5000.0, 100.0, Usage(0.1 + 0.001 * 100, 1e8 + 1e5 * 100)),
        (False, 5000.0, 100.0, Usage(0.1 + 0.001 * 5000, 1e8 + 1e5 * 5000)),
        (True, 5000.0, 1e6, Usage(1.0, 2e9)),  # capped at the maximum
    ],
)
def test_linear_growth_restarts_with_the_container(
    reset: bool, t: float, since: float, expected: Usage
) -> None:
    model = LinearGrowthUsage(
        start=Usage(0.1, 1e8),
        rate=Usage(0.001, 1e5),
        reset_on_restart=reset,
        maximum=Usage(1.0, 2e9) if since == 1e6 else None,
    )
    assert close(at(model, t, since=since), expected)


def test_usage_is_never_negative_or_infinite() -> None:
    with pytest.raises(ValueError, match="cpu_cores"):
        Usage(-0.1, 0.0)
    with pytest.raises(ValueError, match="memory_bytes"):
        Usage(0.0, math.inf)


def test_the_book_seeds_models_by_place_and_answers_none_without_a_model() -> None:
    def book(seed: int) -> UsageBook:
        made = UsageBook(seed=seed)
        for workload in ("api", "worker"):
            made.set_model(workload=workload, container="app", model=walk("unused"))
        return made

    def series(made: UsageBook, workload: str) -> list[Usage | None]:
        return [
            made.usage(
                workload=workload,
                container="app",
                pod_index=0,
                t=i * 60.0,
                replicas=1,
                since_start=0.0,
            )
            for i in range(100)
        ]

    assert series(book(1), "api") == series(book(1), "api")
    assert series(book(1), "api") != series(book(2), "api")
    assert series(book(1), "api") != series(book(1), "worker")
    assert (
        book(1).usage(
            workload="api", container="sidecar", pod_index=0, t=0.0, replicas=1, since_start=0.0
        )
        is None
    )
    assert book(1).keys() == [("api", "app"), ("worker", "app")]


def test_set_model_changes_the_load_from_then_on() -> None:
    made = UsageBook(seed=0)
    made.set_model(workload="api", container="app", model=ConstantUsage(0.1, 1e8))
    before = made.usage(
        workload="api", container="app", pod_index=0, t=100.0, replicas=1, since_start=100.0
    )
    made.set_model(workload="api", container="app", model=ConstantUsage(0.9, 9e8, shared=True))
    after = made.usage(
        workload="api", container="app", pod_index=0, t=200.0, replicas=3, since_start=200.0
    )
    assert before == Usage(0.1, 1e8)
    assert after is not None
    assert close(after, Usage(0.3, 3e8))
