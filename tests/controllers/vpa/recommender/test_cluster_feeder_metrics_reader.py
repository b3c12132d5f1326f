"""``LoadRealTimeMetrics`` reads only what the model can still take (issue 29).

:class:`MetricsReader` skips, before reading a usage, the containers the model does not know
and those whose two samples upstream's ``ContainerState`` would refuse by their time
(``addCPUSample``: not after ``LastCPUSampleStart``; ``addMemorySample``: before
``lastMemorySampleStart``), and converts each usage text once. The property: over loops of
listings (repeated and older timestamps, unknown pods and containers, unparsable usages) with
OOMs recorded between them (which move ``lastMemorySampleStart`` back), a model fed through the
reader ends equal, sample for sample, to one fed the from-scratch way
(:func:`pod_metrics_samples`): the same samples accepted, the same container states and the
same aggregates' checkpoints.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kubescale.controllers.vpa.model.cluster_state import ClusterState
from kubescale.controllers.vpa.model.model_config import RecommenderConfig
from kubescale.controllers.vpa.recommender.cluster_feeder import (
    MetricsReader,
    pod_metrics_samples,
)
from kubescale.objects.metrics_api import PodMetrics

START = datetime(2026, 1, 1, tzinfo=UTC)
PODS = ("p0", "p1", "p2")
CONTAINERS = ("app", "side")

_usage = st.sampled_from(["100m", "250m", "1", "x", "0"])
_memory = st.sampled_from(["100Mi", "200Mi", "1", "1Gi", "x"])  # "1" also a CPU text
_listing = st.lists(
    st.tuples(
        st.sampled_from((*PODS, "unknown")),
        st.integers(min_value=0, max_value=3),  # minutes after START: repeats and older ones
        st.lists(
            st.tuples(st.sampled_from((*CONTAINERS, "init")), _usage, _memory),
            max_size=2,
        ),
    ),
    max_size=4,
)
_loops = st.lists(
    st.tuples(_listing, st.lists(st.tuples(st.sampled_from(PODS), st.integers(0, 4)), max_size=2)),
    min_size=1,
    max_size=4,
)


def _model() -> ClusterState:
    state = ClusterState(config=RecommenderConfig())
    for pod in PODS:
        state.add_or_update_pod(
            namespace="ns",
            name=pod,
            labels={"app": "a"},
            phase="Running",
            containers={c: {"cpu": 100, "memory": 1 << 27} for c in CONTAINERS},
            now=START,
        )
    return state


def _items(listing: list[tuple[str, int, list[tuple[str, str, str]]]]) -> list[PodMetrics]:
    items: list[PodMetrics] = []
    for pod, minute, containers in listing:
        moment = START + timedelta(minutes=minute)
        items.append(
            {
                "metadata": {"namespace": "ns", "name": pod},
                "timestamp": moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "window": "30s",
                "containers": [
                    {"name": c, "usage": {"cpu": cpu, "memory": memory}}
                    for c, cpu, memory in containers
                ],
            }
        )
    return items


def _seen(state: ClusterState) -> list[Any]:
    containers = []
    for pod in PODS:
        for name in CONTAINERS:
            c = state.container_state("ns", pod, name)
            assert c is not None
            containers.append(
                (
                    c.last_cpu_sample_start_us,
                    c.last_memory_sample_start_us,
                    c.memory_peak,
                    c.oom_peak,
                    c.window_end_us,
                )
            )
    aggregates = []
    for key in sorted(state.aggregate_keys(), key=repr):
        aggregate = state.aggregate(key)
        assert aggregate is not None
        aggregates.append((key, aggregate.save_to_checkpoint(), aggregate.total_samples_count))
    return [containers, aggregates]


@given(loops=_loops)
def test_the_reader_feeds_what_the_from_scratch_path_feeds(
    loops: list[tuple[list[tuple[str, int, list[tuple[str, str, str]]]], list[tuple[str, int]]]],
) -> None:
    fast, scratch = _model(), _model()
    reader = MetricsReader()
    for listing, ooms in loops:
        items = _items(listing)
        assert fast.add_samples(reader.samples(items, fast)) == scratch.add_samples(
            pod_metrics_samples(items)
        )
        for pod, minute in ooms:
            for state in (fast, scratch):
                state.record_oom(
                    namespace="ns",
                    pod=pod,
                    container="app",
                    timestamp=START + timedelta(minutes=minute),
                    memory_request=1 << 27,
                )
        assert _seen(fast) == _seen(scratch)


def test_a_steady_listing_is_not_parsed_again() -> None:
    state = _model()
    reader = MetricsReader()
    items = _items([(pod, 0, [("app", "250m", "200Mi")]) for pod in PODS])
    # First loop: 1 timestamp + 2 usage texts ("250m" as CPU, "200Mi" as memory), each
    # converted once for the 3 pods; 3 CPU + 3 memory samples accepted.
    assert state.add_samples(reader.samples(items, state)) == 6
    assert reader.parsed == 3
    # The same listing again (metrics-server's window did not move): the CPU samples are
    # refused by their time (not after the last), the memory ones taken again (same time as
    # the last: not before it) — read from the memo, nothing parsed.
    assert state.add_samples(reader.samples(items, state)) == 3
    assert reader.parsed == 3
    # An older listing: both samples refused by their time, every container skipped unread
    # (its new timestamp text is parsed once: 3 + 1; the usages "300m"/"300Mi" never).
    older = _items([(pod, 0, [("app", "300m", "300Mi")]) for pod in PODS])
    for item in older:
        item["timestamp"] = "2025-12-31T23:59:00Z"
    skipped = reader.skipped
    assert state.add_samples(reader.samples(older, state)) == 0
    assert (reader.parsed, reader.skipped - skipped) == (4, 3)
