"""Checkpoint v3: encode/decode round trip and upstream-written checkpoints loading."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.controllers.vpa.model.aggregate_state import AggregateContainerState
from kubescale.controllers.vpa.model.checkpoint_format import (
    CheckpointFormatError,
    checkpoint_object,
    format_time,
    parse_time,
)
from kubescale.controllers.vpa.model.go_math import go_micros
from kubescale.controllers.vpa.model.histogram import (
    CPU_HISTOGRAM_OPTIONS,
    MEMORY_HISTOGRAM_OPTIONS,
)
from kubescale.objects.vpa_checkpoint import VerticalPodAutoscalerCheckpointStatus
from tests.builders.meta import stored_as

T0 = datetime(2019, 11, 15, 13, 35, 11, tzinfo=UTC)

# The checkpoint upstream's recommender wrote in kubernetes/autoscaler#2542, as JSON.
UPSTREAM_STATUS: VerticalPodAutoscalerCheckpointStatus = {
    "cpuHistogram": {
        "bucketWeights": {"0": 10000, "1": 133, "2": 96, "3": 29, "4": 4, "5": 5, "7": 2},
        "referenceTimestamp": "2019-11-16T00:00:00Z",
        "totalWeight": 4396.8574,
    },
    "firstSampleStart": None,
    "lastSampleStart": "2019-11-19T12:09:24Z",
    "lastUpdateTime": None,
    "memoryHistogram": {
        "bucketWeights": {"10": 324, "11": 10000},
        "referenceTimestamp": "2019-11-17T00:00:00Z",
        "totalWeight": 23.46872,
    },
    "totalSamplesCount": 11337,
    "version": "v3",
}


def test_upstream_checkpoint_loads_into_the_documented_histogram() -> None:
    state = AggregateContainerState.standalone()
    state.load_from_checkpoint(UPSTREAM_STATUS)
    cpu = state.cpu.bucket_weights()
    stored = {0: 10000, 1: 133, 2: 96, 3: 29, 4: 4, 5: 5, 7: 2}
    ratio = 4396.8574 / float(sum(stored.values()))
    assert {b: w for b, w in enumerate(cpu) if w} == {
        b: float(w) * ratio for b, w in stored.items()
    }
    assert state.cpu.total_weight == 4396.8574
    assert (state.cpu.min_bucket, state.cpu.max_bucket) == (0, 7)
    assert state.cpu.reference_timestamp == datetime(2019, 11, 16, tzinfo=UTC)
    memory = state.memory.bucket_weights()
    assert memory[10] == 324.0 * (23.46872 / 10324.0)
    assert memory[11] == 10000.0 * (23.46872 / 10324.0)
    assert state.total_samples_count == 11337
    assert state.first_sample_start is None
    assert state.last_sample_start == datetime(2019, 11, 19, 12, 9, 24, tzinfo=UTC)
    # P90 of CPU: bucket 0 holds 97% -> end of bucket 0; memory P90 in bucket 11.
    assert state.cpu.percentile(0.9) == CPU_HISTOGRAM_OPTIONS.bucket_start(1)
    assert state.memory.percentile(0.9) == MEMORY_HISTOGRAM_OPTIONS.bucket_start(12)


def test_saving_what_was_loaded_gives_the_same_checkpoint() -> None:
    state = AggregateContainerState.standalone()
    state.load_from_checkpoint(UPSTREAM_STATUS)
    saved = state.save_to_checkpoint()
    expected = {key: value for key, value in UPSTREAM_STATUS.items() if key != "lastUpdateTime"}
    assert saved == expected


@pytest.mark.parametrize("version", ["v2", "", None, "v4"])
def test_other_versions_do_not_load(version: str | None) -> None:
    with pytest.raises(CheckpointFormatError):
        AggregateContainerState.standalone().load_from_checkpoint(
            # as read from the server: any version text, or none
            stored_as(
                {**UPSTREAM_STATUS, "version": version}, VerticalPodAutoscalerCheckpointStatus
            )
        )


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=64_000),
            st.integers(min_value=0, max_value=2 * 10**11),
            st.integers(min_value=1, max_value=6 * 3600),
        ),
        min_size=1,
        max_size=40,
    )
)
def test_round_trip(samples: list[tuple[int, int, int]]) -> None:
    state = AggregateContainerState.standalone()
    moment = T0
    for cpu, memory, seconds in samples:
        moment += timedelta(seconds=seconds)
        state.add_cpu_sample(cpu, go_micros(moment))
        state.add_memory_peak(memory, go_micros(moment))
    saved = json.loads(json.dumps(state.save_to_checkpoint()))
    loaded = AggregateContainerState.standalone()
    loaded.load_from_checkpoint(saved)
    # Encoding what was decoded is the identity, and the header fields survive exactly.
    assert loaded.save_to_checkpoint() == saved
    assert loaded.total_samples_count == state.total_samples_count
    assert loaded.cpu.reference_us == state.cpu.reference_us
    # Buckets keep their relative weights to within the 1/10000 encoding step.
    for original, restored in ((state.cpu, loaded.cpu), (state.memory, loaded.memory)):
        heaviest = max(original.bucket_weights())
        for before, after in zip(original.bucket_weights(), restored.bucket_weights(), strict=True):
            assert abs(before - after) <= heaviest * 1e-4 + original.total_weight * 1e-4


def test_times_are_whole_seconds_and_zero_is_null() -> None:
    micros = go_micros(datetime(2024, 1, 2, 3, 4, 5, 678900, tzinfo=UTC))
    assert format_time(micros) == "2024-01-02T03:04:05Z"
    assert format_time(0) is None
    assert parse_time(None) == 0
    assert parse_time("2024-01-02T04:04:05+01:00") == micros - 678900
    with pytest.raises(CheckpointFormatError):
        parse_time("yesterday")


def test_checkpoint_object_shape() -> None:
    obj = checkpoint_object(namespace="ns", vpa_name="web", container_name="app", status={})
    assert obj["metadata"] == {"name": "web-app", "namespace": "ns"}
    assert obj["spec"] == {"vpaObjectName": "web", "containerName": "app"}
    assert (obj["apiVersion"], obj["kind"]) == (
        "autoscaling.k8s.io/v1",
        "VerticalPodAutoscalerCheckpoint",
    )
