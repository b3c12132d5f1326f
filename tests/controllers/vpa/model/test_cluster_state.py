"""ClusterState: keys and links, recommendations with policies, checkpoints, GC."""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubescale.controllers.vpa.model.cluster_state import ClusterState, label_set_key
from kubescale.controllers.vpa.model.histogram import MEMORY_HISTOGRAM_OPTIONS
from kubescale.controllers.vpa.model.model_config import RecommenderConfig
from kubescale.objects.quantities import Quantity
from kubescale.objects.selectors import label_selector_from_set
from tests import builders

VPA = functools.partial(
    builders.vpas.typed_vpa,
    name="web",
    namespace="ns",
    target=builders.vpas.target_ref(name="web"),
    api_version=None,
)

T0 = datetime(2024, 6, 3, tzinfo=UTC)
APP = {"app": "web"}


def _state(config: RecommenderConfig | None = None) -> ClusterState:
    return ClusterState(config=config or RecommenderConfig())


def _feed(
    state: ClusterState,
    pod: str,
    container: str,
    *,
    cpu: int,
    memory: int,
    hours: int = 48,
    start: datetime = T0,
) -> datetime:
    moment = start
    for minute in range(hours * 60):
        moment = start + timedelta(minutes=minute)
        for resource, usage in (("cpu", cpu), ("memory", memory)):
            assert state.add_sample(
                namespace="ns",
                pod=pod,
                container=container,
                resource=resource,
                usage=usage,
                request=0,
                measure_start=moment,
            )
    return moment


def _pod(state: ClusterState, name: str, containers: tuple[str, ...] = ("app",)) -> None:
    state.add_or_update_pod(
        namespace="ns",
        name=name,
        labels=APP,
        phase="Running",
        containers={c: {"cpu": 100, "memory": 10**8} for c in containers},
        now=T0,
    )


def test_samples_for_unknown_pods_and_containers_are_dropped() -> None:
    state = _state()
    _pod(state, "p1")

    def cpu(pod: str, container: str) -> bool:
        return state.add_sample(
            namespace="ns",
            pod=pod,
            container=container,
            resource="cpu",
            usage=10,
            request=0,
            measure_start=T0,
        )

    assert not cpu("nope", "app")
    assert not cpu("p1", "nope")
    assert cpu("p1", "app")
    assert not cpu("p1", "app")  # not after the previous CPU sample
    assert not state.record_oom(
        namespace="ns", pod="nope", container="app", timestamp=T0, memory_request=1
    )


def test_pods_of_one_label_set_share_an_aggregate_and_count_for_the_vpa() -> None:
    state = _state()
    state.add_or_update_vpa(VPA(), selector=label_selector_from_set(APP))
    _pod(state, "p1")
    _pod(state, "p2")
    assert state.aggregate_count() == 1
    assert state.vpa_pod_count(namespace="ns", name="web") == 2
    state.add_or_update_pod(
        namespace="ns", name="p2", labels={"app": "other"}, phase="Running", containers={}
    )
    assert state.vpa_pod_count(namespace="ns", name="web") == 1
    assert state.aggregate_count() == 2
    state.delete_pod(namespace="ns", name="p1")
    assert state.vpa_pod_count(namespace="ns", name="web") == 0


def test_recommendation_for_one_container() -> None:
    state = _state()
    state.add_or_update_vpa(VPA(), selector=label_selector_from_set(APP))
    _pod(state, "p1")
    end = _feed(state, "p1", "app", cpu=1000, memory=10**9)
    result = state.recommendation(namespace="ns", name="web", now=end)
    assert result.pod_count == 1
    assert result.has_recommendation
    [entry] = result.container_recommendations
    assert entry["containerName"] == "app"
    assert entry["target"] == {"cpu": "1168m", "memory": "1168723596"}
    assert entry["uncappedTarget"] == entry["target"]
    assert set(entry) == {"containerName", "target", "lowerBound", "upperBound", "uncappedTarget"}


def test_pod_minimum_is_split_over_containers_and_off_containers_are_dropped() -> None:
    state = _state()
    policy = {"containerPolicies": [{"containerName": "sidecar", "mode": "Off"}]}
    state.add_or_update_vpa(
        VPA(spec={"resourcePolicy": policy}), selector=label_selector_from_set(APP)
    )
    _pod(state, "p1", ("a", "b", "sidecar"))
    end = T0
    for container in ("a", "b", "sidecar"):
        end = _feed(state, "p1", container, cpu=1, memory=1, hours=2)
    entries = state.recommendation(namespace="ns", name="web", now=end).container_recommendations
    assert [entry["containerName"] for entry in entries] == ["a", "b"]
    # 25m and 250Mi split over 2 containers: 12m and 125Mi.
    assert entries[0]["target"] == {"cpu": "12m", "memory": "125Mi"}


def test_controlled_resources_filter_the_lists() -> None:
    state = _state()
    policy = {"containerPolicies": [{"containerName": "*", "controlledResources": ["memory"]}]}
    state.add_or_update_vpa(
        VPA(spec={"resourcePolicy": policy}), selector=label_selector_from_set(APP)
    )
    _pod(state, "p1")
    end = _feed(state, "p1", "app", cpu=500, memory=10**9, hours=2)
    [entry] = state.recommendation(namespace="ns", name="web", now=end).container_recommendations
    assert set(entry["target"]) == {"memory"}
    assert set(entry["uncappedTarget"]) == {"memory"}


def test_min_and_max_allowed_cap_all_bounds_but_not_the_uncapped_target() -> None:
    config = RecommenderConfig(container_recommendation_max_allowed_memory=Quantity.parse("1Gi"))
    state = _state(config)
    policy = {"containerPolicies": [{"containerName": "app", "minAllowed": {"cpu": "2"}}]}
    state.add_or_update_vpa(
        VPA(spec={"resourcePolicy": policy}), selector=label_selector_from_set(APP)
    )
    _pod(state, "p1")
    end = _feed(state, "p1", "app", cpu=1000, memory=2 * 10**9)
    [entry] = state.recommendation(namespace="ns", name="web", now=end).container_recommendations
    for bound in ("target", "lowerBound", "upperBound"):
        assert entry[bound] == {"cpu": "2", "memory": "1Gi"}
    # 2e9 B falls in bucket 49: P90 = start(50) = 2093479957 B, plus the 15% margin.
    peak = int(MEMORY_HISTOGRAM_OPTIONS.bucket_start(50))
    assert peak == 2093479957
    assert entry["uncappedTarget"] == {"cpu": "1168m", "memory": str(peak + int(peak * 0.15))}


def test_vpa_max_allowed_wins_over_the_global_cap() -> None:
    config = RecommenderConfig(container_recommendation_max_allowed_cpu=Quantity.parse("500m"))
    state = _state(config)
    policy = {"containerPolicies": [{"containerName": "app", "maxAllowed": {"cpu": "800m"}}]}
    state.add_or_update_vpa(
        VPA(spec={"resourcePolicy": policy}), selector=label_selector_from_set(APP)
    )
    _pod(state, "p1")
    end = _feed(state, "p1", "app", cpu=1000, memory=10**9)
    [entry] = state.recommendation(namespace="ns", name="web", now=end).container_recommendations
    assert entry["target"]["cpu"] == "800m"


def test_integer_cpu_post_processor() -> None:
    config = RecommenderConfig(cpu_integer_post_processor_enabled=True)
    state = _state(config)
    annotations = {"vpa-post-processor.kubernetes.io/app_integerCPU": "true"}
    state.add_or_update_vpa(VPA(annotations=annotations), selector=label_selector_from_set(APP))
    _pod(state, "p1")
    end = _feed(state, "p1", "app", cpu=1000, memory=10**9)
    [entry] = state.recommendation(namespace="ns", name="web", now=end).container_recommendations
    assert entry["target"]["cpu"] == "2"
    assert entry["uncappedTarget"]["cpu"] == "2"
    assert entry["upperBound"]["cpu"] == "2"


def test_unsupported_config_matches_nothing() -> None:
    state = _state()
    _pod(state, "p1")
    state.add_or_update_vpa(VPA(), selector=None)
    result = state.recommendation(namespace="ns", name="web", now=T0)
    assert (result.pod_count, result.config_unsupported, result.has_recommendation) == (
        0,
        True,
        False,
    )


def test_memory_saver_tracks_only_matched_pods() -> None:
    state = _state(RecommenderConfig(memory_saver=True))
    _pod(state, "p1")
    assert state.pod_keys() == []
    state.add_or_update_vpa(VPA(), selector=label_selector_from_set(APP))
    _pod(state, "p1")
    assert state.pod_keys() == [("ns", "p1")]


def test_checkpoints_subtract_the_current_peak_and_restore_after_restart() -> None:
    state = _state()
    state.add_or_update_vpa(VPA(), selector=label_selector_from_set(APP))
    _pod(state, "p1")
    end = _feed(state, "p1", "app", cpu=1000, memory=10**9, hours=50)
    before = state.recommendation(namespace="ns", name="web", now=end)
    [checkpoint] = state.checkpoints(namespace="ns", name="web", now=end)
    assert checkpoint["metadata"]["name"] == "web-app"
    status = checkpoint["status"]
    assert status["version"] == "v3"
    assert status["lastUpdateTime"] == "2024-06-05T01:59:00Z"
    # Three windows have peaks; the in-progress third one is left out: weight 2 peaks remain.
    assert status["memoryHistogram"]["bucketWeights"] == {"36": 10000}
    assert status["totalSamplesCount"] == 50 * 60

    restarted = _state()
    assert not restarted.load_checkpoint(checkpoint)  # no VPA yet
    restarted.add_or_update_vpa(VPA(), selector=label_selector_from_set(APP))
    assert restarted.load_checkpoint(checkpoint)
    assert not restarted.load_checkpoint(
        {**checkpoint, "status": {**checkpoint["status"], "version": "v2"}}
    )
    after = restarted.recommendation(namespace="ns", name="web", now=end)
    assert (
        after.container_recommendations[0]["target"]
        == before.container_recommendations[0]["target"]
    )
    assert after.pod_count == 0


def test_garbage_collection() -> None:
    state = _state()
    state.add_or_update_vpa(VPA(), selector=label_selector_from_set(APP))
    _pod(state, "p1")
    state.add_or_update_pod(
        namespace="ns",
        name="idle",
        labels={"app": "idle"},
        phase="Running",
        containers={"app": {}},
        now=T0,
    )
    end = _feed(state, "p1", "app", cpu=10, memory=10**8, hours=1)
    assert state.garbage_collect(now=end) == 0
    state.delete_pod(namespace="ns", name="idle")
    assert state.garbage_collect(now=end) == 1  # empty and no pod uses it
    assert state.garbage_collect(now=end + timedelta(days=8)) == 1  # expired
    assert state.aggregate_count() == 0
    # A sample for the live container recreates its aggregate.
    _feed(state, "p1", "app", cpu=10, memory=10**8, hours=1, start=end + timedelta(days=8))
    assert state.aggregate_count() == 1


def test_deleted_vpa_releases_its_aggregates() -> None:
    state = _state()
    state.add_or_update_vpa(VPA(), selector=label_selector_from_set(APP))
    _pod(state, "p1")
    [key] = state.aggregate_keys()
    aggregate = state.aggregate(key)
    assert aggregate is not None
    assert aggregate.is_under_vpa
    state.delete_vpa(namespace="ns", name="web")
    assert aggregate.under_vpa() is False
    assert state.vpa_keys() == []
    with pytest.raises(KeyError):
        state.recommendation(namespace="ns", name="web", now=T0)


def _two_clusters() -> tuple[ClusterState, ClusterState]:
    clusters = (_state(), _state())
    for state in clusters:
        for index in range(6):
            labels = {"app": f"w{index % 4}"}  # w0 and w1 have two pods sharing an aggregate
            state.add_or_update_pod(
                namespace="ns",
                name=f"p{index}",
                labels=labels,
                phase="Running",
                containers={"a": {}, "b": {}},
                now=T0,
            )
        for index in range(4):
            policy = {"containerPolicies": [{"containerName": "b", "mode": "Off"}]}
            state.add_or_update_vpa(
                VPA(
                    name=f"w{index}",
                    target=builders.vpas.target_ref(name=f"w{index}"),
                    spec={"resourcePolicy": policy} if index == 3 else None,
                ),
                selector=label_selector_from_set({"app": f"w{index}"}),
            )
    return clusters


def test_batch_samples_and_recommendations_equal_the_scalar_path() -> None:
    scalar, batch = _two_clusters()
    rng = __import__("random").Random(7)
    moment = T0
    for _ in range(180):
        moment += timedelta(seconds=rng.choice((30, 60, 3600)))
        samples = [
            ("ns", f"p{pod}", container, resource, rng.randrange(0, 3000) * scale, moment)
            for pod in range(6)
            for container in ("a", "b", "ghost")
            for resource, scale in (("cpu", 1), ("memory", 10**6))
        ]
        accepted = 0
        for namespace, pod, container, resource, usage, at in samples:
            accepted += scalar.add_sample(
                namespace=namespace,
                pod=pod,
                container=container,
                resource=resource,
                usage=usage,
                request=0,
                measure_start=at,
            )
        assert batch.add_samples(samples) == accepted
    for key in scalar.aggregate_keys():
        one, other = scalar.aggregate(key), batch.aggregate(key)
        assert one is not None
        assert other is not None
        assert one.cpu.bucket_weights() == other.cpu.bucket_weights()
        assert one.memory.bucket_weights() == other.memory.bucket_weights()
        assert one.cpu.total_weight == other.cpu.total_weight
    expected = {
        key: scalar.recommendation(namespace=key[0], name=key[1], now=moment)
        for key in scalar.vpa_keys()
    }
    assert batch.recommendations(now=moment) == expected
    assert [e["containerName"] for e in expected[("ns", "w3")].container_recommendations] == ["a"]


def test_label_sets_are_released_with_their_last_pod_and_aggregate() -> None:
    """Issue 29: a label whose value changes on every update (the scale bench's churn) made a
    new label set each time, and the model kept every one. A set stays while a pod or an
    aggregate uses it; after the pods are gone and GC removed their (empty) aggregates, the
    count is back to the baseline."""
    state = _state()
    state.add_or_update_vpa(VPA(), selector=label_selector_from_set(APP))
    _pod(state, "steady")
    baseline = state.label_set_count()  # {app=web}
    assert baseline == 1
    for cycle in range(50):
        # one pod relabelled on every update, one created and deleted
        state.add_or_update_pod(
            namespace="ns",
            name="churned",
            labels={**APP, "churn": str(cycle)},
            phase="Running",
            containers={"app": {}},
            now=T0,
        )
        state.add_or_update_pod(
            namespace="ns",
            name=f"gone-{cycle}",
            labels={"app": f"gone-{cycle}"},
            phase="Running",
            containers={"app": {}},
            now=T0,
        )
        state.delete_pod(namespace="ns", name=f"gone-{cycle}")
    # every set still has its aggregate (upstream keeps an aggregate until GC)
    assert state.label_set_count() == baseline + 50 + 50
    # 49 old churn sets and 50 deleted pods' sets: empty aggregates no pod uses
    assert state.garbage_collect(now=T0) == 49 + 50
    assert state.label_set_count() == baseline + 1  # {app=web} and the live churn=49
    state.delete_pod(namespace="ns", name="churned")
    assert state.garbage_collect(now=T0) == 1
    assert state.label_set_count() == baseline
    # the remaining set still matches: a VPA added now finds the steady pod's aggregate
    state.add_or_update_vpa(
        VPA(name="again", target=builders.vpas.target_ref(name="again")),
        selector=label_selector_from_set(APP),
    )
    assert state.vpa_pod_count(namespace="ns", name="again") == 1
    assert state.recommendation(namespace="ns", name="again", now=T0).pod_count == 1


_OPS = st.lists(
    st.tuples(
        st.sampled_from(["update", "delete", "gc"]),
        st.sampled_from(["p0", "p1", "p2", "p3"]),
        st.sampled_from(["a", "b", "c"]),
        st.booleans(),
    ),
    max_size=40,
)


@given(ops=_OPS)
def test_held_label_sets_are_exactly_those_of_live_pods_and_aggregates(
    ops: list[tuple[str, str, str, bool]],
) -> None:
    """For any pod updates (labels changing), deletions and GCs, the model holds the label
    sets of its pods and aggregates and no other (no leak, no set dropped while in use: a VPA
    added at the end counts every pod it matches)."""
    state = _state()
    labels_of: dict[str, dict[str, str]] = {}
    for op, name, app, second_container in ops:
        if op == "update":
            labels_of[name] = {"app": app}
            containers: dict[str, dict[str, int]] = {"app": {}}
            if second_container:
                containers["side"] = {}
            state.add_or_update_pod(
                namespace="ns",
                name=name,
                labels=labels_of[name],
                phase="Running",
                containers=containers,
                now=T0,
            )
        elif op == "delete":
            labels_of.pop(name, None)
            state.delete_pod(namespace="ns", name=name)
        else:
            state.garbage_collect(now=T0)
        in_use = {label_set_key(labels) for labels in labels_of.values()}
        in_use |= {key.labels for key in state.aggregate_keys()}
        assert state.label_set_count() == len(in_use)
    for app in ("a", "b", "c"):
        state.add_or_update_vpa(
            VPA(name=app, target=builders.vpas.target_ref(name=app)),
            selector=label_selector_from_set({"app": app}),
        )
        expected = sum(1 for labels in labels_of.values() if labels["app"] == app)
        assert state.vpa_pod_count(namespace="ns", name=app) == expected
        # the VPA took every aggregate of its label set (found by the set's held labels)
        for key in state.aggregate_keys():
            aggregate = state.aggregate(key)
            assert aggregate is not None
            if key.labels == f"app={app}":
                assert aggregate.is_under_vpa
