"""Container sample rules and OOM bump-up, as the tables of upstream's ``container_test.go``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from kubescale.controllers.vpa.model.aggregate_state import (
    AggregateContainerState,
    ContainerState,
    ContainerUsageSample,
)
from kubescale.controllers.vpa.model.go_math import go_micros
from kubescale.controllers.vpa.model.model_config import AggregationsConfig

MB = 1024 * 1024
T0 = datetime(2017, 4, 18, 17, 35, 5, tzinfo=UTC)  # upstream's testTimestamp
DAY = timedelta(days=1)


class RecordingAggregate:
    """A ContainerStateAggregator that records the peak operations (upstream's mock)."""

    def __init__(self, config: AggregationsConfig | None = None) -> None:
        self.real = AggregateContainerState.standalone(config)
        self.calls: list[tuple[str, float, datetime]] = []

    def aggregate(self) -> RecordingAggregate:
        return self

    @property
    def stores(self):  # type: ignore[no-untyped-def]
        return self.real.stores

    def add_cpu_sample(self, usage: int, time_us: int) -> None:
        self.calls.append(("cpu", usage / 1000.0, _dt(time_us)))
        self.real.add_cpu_sample(usage, time_us)

    def add_memory_peak(self, usage: int, time_us: int) -> None:
        self.calls.append(("add", float(usage), _dt(time_us)))
        self.real.add_memory_peak(usage, time_us)

    def subtract_memory_peak(self, usage: int, time_us: int) -> None:
        self.calls.append(("subtract", float(usage), _dt(time_us)))
        self.real.subtract_memory_peak(usage, time_us)

    def note_oom(self, time_us: int, memory_bytes: int) -> None:
        """The OOM log (kubescale's, for the adaptive policy): forwarded, not a peak call."""
        self.real.note_oom(time_us, memory_bytes)

    def note_memory_usage(self, usage_bytes: int, time_us: int) -> None:
        """The recent peaks (kubescale's, for the adaptive policy): forwarded, not a peak call."""
        self.real.note_memory_usage(usage_bytes, time_us)


def _dt(time_us: int) -> datetime:
    from kubescale.controllers.vpa.model.go_math import from_go_micros  # noqa: PLC0415

    return from_go_micros(time_us)


def _container(
    config: AggregationsConfig | None = None,
) -> tuple[ContainerState, RecordingAggregate]:
    recorder = RecordingAggregate(config)
    container = ContainerState(
        request_cpu=2300,
        request_memory=500_000_000,
        aggregator=recorder,  # type: ignore[arg-type]
    )
    return container, recorder


def _sample(moment: datetime, usage: int, resource: str) -> ContainerUsageSample:
    return ContainerUsageSample(measure_start=moment, usage=usage, resource=resource)


def test_aggregate_container_usage_samples() -> None:
    # TestAggregateContainerUsageSamples: three valid samples, three invalid ones.
    container, recorder = _container()
    step = DAY / 2
    assert container.add_sample(_sample(T0, 3140, "cpu"))
    assert container.add_sample(_sample(T0, 5, "memory"))
    assert container.add_sample(_sample(T0 + step, 6280, "cpu"))
    assert container.add_sample(_sample(T0 + step, 10, "memory"))
    assert container.add_sample(_sample(T0 + 2 * step, 1570, "cpu"))
    assert container.add_sample(_sample(T0 + 2 * step, 2, "memory"))
    assert not container.add_sample(_sample(T0 + 2 * step, 1000, "cpu"))  # out of order
    assert not container.add_sample(_sample(T0 + 4 * step, -1000, "cpu"))
    assert not container.add_sample(_sample(T0 + 4 * step, -1000, "memory"))
    end = T0 + DAY
    assert recorder.calls == [
        ("cpu", 3.14, T0),
        ("add", 5.0, end),
        ("cpu", 6.28, T0 + step),
        ("subtract", 5.0, end),
        ("add", 10.0, end),
        ("cpu", 1.57, T0 + 2 * step),
        ("add", 2.0, end + DAY),
    ]
    aggregate = recorder.real
    assert aggregate.total_samples_count == 3
    assert aggregate.first_sample_start == T0
    assert aggregate.last_sample_start == T0 + 2 * step


def test_cpu_samples_must_be_strictly_later() -> None:
    container, recorder = _container()
    assert container.add_cpu_sample(100, go_micros(T0))
    assert not container.add_cpu_sample(100, go_micros(T0))
    assert not container.add_cpu_sample(100, go_micros(T0 - timedelta(seconds=1)))
    assert [call[0] for call in recorder.calls] == ["cpu"]


def test_memory_sample_older_than_the_last_is_dropped() -> None:
    container, _ = _container()
    assert container.add_memory_sample(10, go_micros(T0))
    assert container.add_memory_sample(10, go_micros(T0))  # equal time is fine
    assert not container.add_memory_sample(10, go_micros(T0 - timedelta(seconds=1)))


def test_zero_peak_is_never_replaced_within_its_window() -> None:
    # addMemorySample only replaces a non-zero peak.
    container, recorder = _container()
    container.add_memory_sample(0, go_micros(T0))
    container.add_memory_sample(500, go_micros(T0 + timedelta(hours=1)))
    assert recorder.calls == [("add", 0.0, T0 + DAY)]


@pytest.mark.parametrize(
    ("request_mb", "expected_mb"),
    [
        (1000, 1200.0),  # TestRecordOOMIncreasedByBumpUp: +20%
        (1, 101.0),  # TestRecordOOMIncreasedByMin: at least +100 MiB
    ],
)
def test_record_oom_bump_up(request_mb: int, expected_mb: float) -> None:
    container, recorder = _container()
    assert container.record_oom(go_micros(T0), request_mb * MB)
    assert recorder.calls == [("add", expected_mb * MB, T0 + DAY)]


def test_record_oom_does_not_run_away() -> None:
    container, recorder = _container()
    assert container.record_oom(go_micros(T0), 1000 * MB)
    assert container.record_oom(go_micros(T0), 999 * MB)  # smaller OOMs change nothing
    assert container.record_oom(go_micros(T0), 999 * MB)
    assert container.record_oom(go_micros(T0), 2000 * MB)
    end = T0 + DAY
    assert recorder.calls == [
        ("add", 1200.0 * MB, end),
        ("subtract", 1200.0 * MB, end),
        ("add", 2400.0 * MB, end),
    ]


def test_record_oom_takes_the_known_peak() -> None:
    # TestRecordOOMMaxedWithKnownSample: the usage peak beats the request.
    container, recorder = _container()
    assert container.add_memory_sample(3000 * MB, go_micros(T0))
    assert container.record_oom(go_micros(T0), 1000 * MB)
    end = T0 + DAY
    assert recorder.calls == [
        ("add", 3000.0 * MB, end),
        ("subtract", 3000.0 * MB, end),
        ("add", 3600.0 * MB, end),
    ]


def test_record_oom_discards_old_events() -> None:
    # TestRecordOOMDiscardsOldSample: 30 h before the last memory sample.
    container, recorder = _container()
    assert container.add_memory_sample(1000 * MB, go_micros(T0))
    assert not container.record_oom(go_micros(T0 - timedelta(hours=30)), 1000 * MB)
    assert len(recorder.calls) == 1


def test_record_oom_in_a_new_window() -> None:
    container, recorder = _container()
    assert container.add_memory_sample(2000 * MB, go_micros(T0))
    assert container.record_oom(go_micros(T0 + 2 * DAY), 1000 * MB)
    assert recorder.calls[-1] == ("add", 2400.0 * MB, T0 + 3 * DAY)


def test_custom_interval_moves_windows_by_that_interval() -> None:
    hour = 3600 * 10**9
    container, recorder = _container(AggregationsConfig(memory_aggregation_interval_ns=hour))
    container.add_memory_sample(5, go_micros(T0))
    container.add_memory_sample(10, go_micros(T0 + timedelta(minutes=30)))
    container.add_memory_sample(7, go_micros(T0 + timedelta(hours=2)))
    end = T0 + timedelta(hours=1)
    assert recorder.calls == [
        ("add", 5.0, end),
        ("subtract", 5.0, end),
        ("add", 10.0, end),
        ("add", 7.0, end + timedelta(hours=2)),
    ]


def test_merge_keeps_earliest_first_and_latest_last() -> None:
    a = AggregateContainerState.standalone()
    b = AggregateContainerState(a.stores)
    a.add_cpu_sample(100, go_micros(T0 + DAY))
    b.add_cpu_sample(100, go_micros(T0))
    b.add_cpu_sample(100, go_micros(T0 + 2 * DAY))
    merged = AggregateContainerState(a.stores)
    merged.merge(a)
    merged.merge(b)
    assert (merged.first_sample_start, merged.last_sample_start) == (T0, T0 + 2 * DAY)
    assert merged.total_samples_count == 3


@pytest.mark.parametrize(
    ("samples", "age", "expired"),
    [
        (1, timedelta(days=8) - timedelta(seconds=1), False),
        (1, timedelta(days=8), True),
        (0, timedelta(days=8), True),  # empty: measured from creation
        (0, timedelta(days=7), False),
    ],
)
def test_expiry_after_eight_days(samples: int, age: timedelta, expired: bool) -> None:
    state = AggregateContainerState.standalone()
    state.creation_time_us = go_micros(T0)
    if samples:
        state.add_cpu_sample(100, go_micros(T0))
    assert state.is_expired(go_micros(T0 + age)) is expired


def test_policy_sets_scaling_mode_and_controlled_resources() -> None:
    state = AggregateContainerState.standalone()
    state.update_from_policy(None)
    assert (state.scaling_mode, state.get_controlled_resources()) == ("Auto", ("cpu", "memory"))
    state.update_from_policy({"mode": "Off", "controlledResources": ["memory", "gpu"]})
    assert (state.scaling_mode, state.get_controlled_resources()) == ("Off", ("memory",))
