"""VerticalPodAutoscalerCheckpoints through the API server: written (oldest first, under the
deadline), loaded at start (for known VPAs only, v3 only), garbage-collected for deleted VPAs.

An upstream-written checkpoint is built from the documented v3 format (reference §2.6) and put
in the API server: a recommender starting from it recommends what its histograms hold.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any

import pytest

from kubescale.controllers.vpa.checkpoint.checkpoint_store import CheckpointStore
from kubescale.controllers.vpa.model.cluster_state import AggregateKey, ClusterState, LiveContainers
from kubescale.controllers.vpa.model.model_config import RecommenderConfig
from kubescale.kube.informer import Informer
from kubescale.kube.resources import VERTICAL_POD_AUTOSCALERS, VPA_CHECKPOINTS
from kubescale.kube.shared_cache import SharedCache
from kubescale.objects.selectors import label_selector_from_set
from tests.controllers.vpa.recommender.test_recommender_loop import (
    NAMESPACE,
    START,
    Cluster,
    _recommender_settings,
    cluster,
    conditions,
    recommendation,
    web_with_one_pod,
)

__all__ = ["cluster"]  # the fixture, re-exported for pytest


class SteppingClock:
    """A clock whose monotonic time moves one second each time it is read."""

    def __init__(self) -> None:
        self.reads = 0

    def now(self) -> datetime:
        return START

    def monotonic(self) -> float:
        self.reads += 1
        return float(self.reads)

    async def sleep(self, seconds: float) -> None:
        return None


def names(objects: list[dict[str, Any]]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objects)


async def test_checkpoints_are_created_then_replaced(cluster: Cluster) -> None:
    await web_with_one_pod(cluster)
    cluster.vpa("web")
    loop = await cluster.recommender()
    await cluster.run(loop)
    (created,) = cluster.checkpoints()
    assert created["metadata"]["name"] == "web-app"
    assert created["spec"] == {"vpaObjectName": "web", "containerName": "app"}
    status = created["status"]
    assert status["version"] == "v3"
    assert status["lastUpdateTime"] == "2026-01-05T00:00:00Z"
    assert status["totalSamplesCount"] == 1
    # One CPU sample in bucket 36 (1.0 core), scaled so the largest weight is 10000.
    assert status["cpuHistogram"]["bucketWeights"] == {"36": 10000}
    await cluster.advance(60)
    cluster.usage("web-1", {"app": {"cpu": "2", "memory": "1000000000"}})
    await cluster.run(loop)
    (replaced,) = cluster.checkpoints()
    assert replaced["metadata"]["uid"] == created["metadata"]["uid"]
    assert replaced["status"]["totalSamplesCount"] == 2
    assert replaced["status"]["lastUpdateTime"] == "2026-01-05T00:01:00Z"


async def test_oldest_first_until_the_deadline(cluster: Cluster) -> None:
    cluster.deployment("web")
    for name in ("a", "b", "c"):
        cluster.pod(f"{name}-1", labels={"app": "web", "v": name}, containers={"app": {}})
        cluster.usage(f"{name}-1", {"app": {"cpu": "100m", "memory": "100Mi"}})
        cluster.vpa(name, spec={"resourcePolicy": {"containerPolicies": []}})
    loop = await cluster.recommender()
    await cluster.run(loop)  # every VPA written once (the simulated clock does not move)
    assert names(cluster.checkpoints()) == ["a-app", "b-app", "c-app"]
    state = loop.feeder.state
    store = CheckpointStore(
        client=cluster.client, informer=loop.feeder.checkpoints, ignored_namespace=lambda _: False
    )
    # Deadline after two reads of the clock: two VPAs (a, b: all tie, then by name) are
    # written, then the deadline has passed.
    later = START + timedelta(minutes=1)
    first = await store.store(state, now=later, clock=SteppingClock(), deadline=3.0)
    assert (first.vpas, first.written, first.deadline_passed) == (2, 2, True)
    assert (
        cluster.api.store.get(VPA_CHECKPOINTS, "c-app", NAMESPACE)["status"]["lastUpdateTime"]
        == "2026-01-05T00:00:00Z"
    )
    # c, the least recently written, goes first now; then it is the most recent.
    assert state.vpa_keys_for_checkpoints()[0] == (NAMESPACE, "c")
    evenlater = later + timedelta(minutes=1)
    second = await store.store(state, now=evenlater, clock=SteppingClock(), deadline=2.0)
    assert (second.vpas, second.written, second.deadline_passed) == (1, 1, True)
    assert (
        cluster.api.store.get(VPA_CHECKPOINTS, "c-app", NAMESPACE)["status"]["lastUpdateTime"]
        == "2026-01-05T00:02:00Z"
    )
    assert state.vpa_keys_for_checkpoints()[-1] == (NAMESPACE, "c")


async def test_a_fetching_history_vpa_is_skipped(cluster: Cluster) -> None:
    await web_with_one_pod(cluster)
    created = cluster.vpa("web")
    cluster.api.store.update_status(
        {
            **created,
            "status": {
                "conditions": [
                    {
                        "type": "FetchingHistory",
                        "status": "True",
                        "lastTransitionTime": "2026-01-05T00:00:00Z",
                    }
                ]
            },
        }
    )
    loop = await cluster.recommender()
    await cluster.run(loop)
    assert cluster.checkpoints() == []
    assert "FetchingHistory" in conditions(cluster.get_vpa("web"))  # kept as it was


async def test_a_restarted_recommender_starts_from_the_checkpoints(cluster: Cluster) -> None:
    await web_with_one_pod(cluster)
    cluster.vpa("web")
    first = await cluster.recommender()
    for cpu in ("1", "2", "500m"):
        cluster.usage("web-1", {"app": {"cpu": cpu, "memory": "1000000000"}})
        await cluster.run(first)
        await cluster.advance(60)
    learned = recommendation(cluster.get_vpa("web"))
    # The pod goes away: a fresh recommender has nothing but the checkpoints.
    cluster.api.metrics.remove_pod_metrics(namespace=NAMESPACE, name="web-1")
    second = await cluster.recommender()
    await cluster.run(second)
    assert second.feeder.state.pod_keys() == [(NAMESPACE, "web-1")]
    restarted = recommendation(cluster.get_vpa("web"))
    assert [r["target"]["cpu"] for r in restarted] == [r["target"]["cpu"] for r in learned]


def upstream_checkpoint(
    vpa: str, container: str, *, version: str = "v3", namespace: str = NAMESPACE
) -> dict[str, Any]:
    """A checkpoint as upstream's writer stores it: a day of samples at 1 core / 1e9 bytes.

    Both histograms have all weight in bucket 36 (1.0 core; 1e9 B), scaled to 10000; the
    samples span 24 h with 1440 of them, so both confidence terms are 1.
    """
    histogram = {
        "referenceTimestamp": "2026-01-05T00:00:00Z",
        "bucketWeights": {"36": 10000},
        "totalWeight": 144.0,
    }
    return {
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscalerCheckpoint",
        "metadata": {"name": f"{vpa}-{container}", "namespace": namespace},
        "spec": {"vpaObjectName": vpa, "containerName": container},
        "status": {
            "lastUpdateTime": "2026-01-05T00:00:00Z",
            "version": version,
            "cpuHistogram": histogram,
            "memoryHistogram": {**histogram, "totalWeight": 8.0},
            "firstSampleStart": "2026-01-04T00:00:00Z",
            "lastSampleStart": "2026-01-05T00:00:00Z",
            "totalSamplesCount": 1440,
        },
    }


async def test_an_upstream_checkpoint_loads_for_a_known_vpa(cluster: Cluster) -> None:
    cluster.deployment("web")
    cluster.vpa("web")
    cluster.api.store.create(upstream_checkpoint("web", "app"))
    cluster.api.store.create(upstream_checkpoint("ghost", "app"))
    loop = await cluster.recommender()
    await cluster.run(loop)
    assert loop.checkpoint_store.load_into(loop.feeder.state) == 1
    vpa = cluster.get_vpa("web")
    # No pod yet, but the checkpointed state recommends: P50 = P90 = P95 = 1.01628 cores and
    # 1016281388 B (the end of bucket 36); margin 15 %; confidence 1 → lower ×(1.001)^-2,
    # upper ×2.
    assert recommendation(vpa) == [
        {
            "containerName": "app",
            "target": {"cpu": "1168m", "memory": "1168723596"},
            "lowerBound": {"cpu": "1165m", "memory": "1166389650"},
            "upperBound": {"cpu": "2336m", "memory": "2337447192"},
            "uncappedTarget": {"cpu": "1168m", "memory": "1168723596"},
        }
    ]
    assert conditions(vpa)["NoPodsMatched"]["status"] == "True"


async def test_other_versions_do_not_load(cluster: Cluster) -> None:
    cluster.deployment("web")
    cluster.vpa("web")
    cluster.api.store.create(upstream_checkpoint("web", "app", version="v2"))
    loop = await cluster.recommender()
    await cluster.run(loop)
    assert loop.checkpoint_store.load_into(loop.feeder.state) == 0
    assert recommendation(cluster.get_vpa("web")) == []


async def test_checkpoints_of_deleted_vpas_are_collected(cluster: Cluster) -> None:
    cluster.api.store.create(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ignored"}}
    )
    cluster.deployment("web")
    cluster.vpa("web")
    cluster.vpa("other", recommenders=["someone-else"])
    for vpa in ("web", "gone", "other"):
        cluster.api.store.create(upstream_checkpoint(vpa, "app"))
    cluster.api.store.create(upstream_checkpoint("gone", "app", namespace="ignored"))
    loop = await cluster.recommender({"ignored-vpa-object-namespaces": "ignored"})
    await cluster.run(loop)
    # The first collection comes one --checkpoints-gc-interval (10m) after start-up.
    assert "gone-app" in names(cluster.checkpoints())
    await cluster.advance(601)
    await cluster.run(loop)
    # An existing VPA keeps its checkpoint even when another recommender handles it; the
    # ignored namespace is left alone.
    assert names(cluster.checkpoints()) == ["other-app", "web-app"]
    assert cluster.api.store.get(VPA_CHECKPOINTS, "gone-app", "ignored")["spec"]["vpaObjectName"]
    cluster.api.store.delete(VERTICAL_POD_AUTOSCALERS, "web", NAMESPACE)
    await cluster.advance(601)
    await cluster.run(loop)
    assert names(cluster.checkpoints()) == ["other-app"]


# -- one walk over the pods per pass, writes in parallel (issue 11) ---------------------------


class _FixedClock(SteppingClock):
    def monotonic(self) -> float:
        return 0.0


class _CountingState(ClusterState):
    """A model that counts the walks over its pods made to build checkpoints."""

    walks = 0

    def live_containers(self, *, of: Collection[AggregateKey] | None = None) -> LiveContainers:
        self.walks += 1
        return super().live_containers(of=of)


def _model(vpas: int, *, pods_per_vpa: int = 1) -> _CountingState:
    state = _CountingState(config=RecommenderConfig())
    for index in range(vpas):
        labels = {"app": f"w{index}"}
        state.add_or_update_vpa(
            {
                "metadata": {"namespace": NAMESPACE, "name": f"w{index}"},
                "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment"}},
            },
            selector=label_selector_from_set(labels),
        )
        for pod in range(pods_per_vpa):
            name = f"w{index}-{pod}"
            # Two label sets per VPA (two ReplicaSets of a rollout): two aggregates per
            # container name, merged into one checkpoint.
            state.add_or_update_pod(
                namespace=NAMESPACE,
                name=name,
                labels={**labels, "hash": str(pod % 2)},
                phase="Running",
                containers={"app": {"cpu": 100, "memory": 10**8}},
                now=START,
            )
            for minute in range(30):
                moment = START + timedelta(minutes=minute)
                for resource, usage in (("cpu", 200 + pod), ("memory", (3 + pod) * 10**8)):
                    state.add_sample(
                        namespace=NAMESPACE,
                        pod=name,
                        container="app",
                        resource=resource,
                        usage=usage,
                        request=0,
                        measure_start=moment,
                    )
    return state


def test_the_kept_index_builds_what_a_walk_builds() -> None:
    state = _model(3, pods_per_vpa=4)
    now = START + timedelta(minutes=30)
    live = state.live_containers()
    state.walks = 0
    for namespace, name in state.vpa_keys():
        # The memory peaks of the window in progress (4 pods, 2 label sets) are subtracted
        # in the same order either way: equal to the last bit.
        assert state.checkpoints(namespace=namespace, name=name, now=now, live=live) == (
            state.checkpoints(namespace=namespace, name=name, now=now)
        )
    assert state.walks == 0  # without ``live``, the kept index: no walk over the pods


async def test_a_store_pass_walks_no_pod(cluster: Cluster) -> None:
    state = _model(5)
    store = CheckpointStore(
        client=cluster.client,
        informer=SharedCache(client=cluster.client, clock=cluster.clock).informers.informer(
            VPA_CHECKPOINTS
        ),
        ignored_namespace=lambda _: False,
    )
    result = await store.store(state, now=START, clock=_FixedClock(), deadline=1.0)
    assert (result.written, result.vpas, result.deadline_passed) == (5, 5, False)
    # Upstream walked every pod for every VPA: 5 walks here, 1,000 for 1,000 VPAs — 10 s of
    # the 30-54 s a pass over 10,000 containers took; kubescale then walked once per pass,
    # and now reads each VPA's entries of the model's kept index (issue 29): no walk.
    assert state.walks == 0
    assert state.containers_walked == 0


@pytest.mark.parametrize("concurrency", [8, 2, 1])
async def test_checkpoints_are_written_concurrently_within_the_bound(
    cluster: Cluster, concurrency: int
) -> None:
    state = _model(8)
    store = CheckpointStore(
        client=cluster.client,
        informer=SharedCache(client=cluster.client, clock=cluster.clock).informers.informer(
            VPA_CHECKPOINTS
        ),
        ignored_namespace=lambda _: False,
        write_concurrency=concurrency,
    )
    await store.store(state, now=START, clock=_FixedClock(), deadline=1.0)  # creates them
    # The API server holds every checkpoint PATCH (received, not answered) until released: the
    # writes in flight are exactly the PATCHes it has received, at most one per writer.
    released = cluster.api.faults.hold(
        verb="patch", resource="verticalpodautoscalercheckpoints", count=None
    )
    cluster.api.requests.clear()
    task = asyncio.create_task(
        store.store(state, now=START + timedelta(minutes=1), clock=_FixedClock(), deadline=1.0)
    )
    try:
        for _ in range(500):
            if patches(cluster) >= concurrency:
                break
            await asyncio.sleep(0.01)
        # Every writer is waiting for its answer: given time, no further write is sent (an
        # unbounded pass would have sent all eight by now).
        for _ in range(10):
            await asyncio.sleep(0.01)
        assert patches(cluster) == concurrency
    finally:
        released.set()
    result = await task
    assert (result.written, result.failed) == (8, 0)
    assert patches(cluster) == 8


def patches(cluster: Cluster) -> int:
    return cluster.api.requests.count(verb="patch", resource="verticalpodautoscalercheckpoints")


def test_the_bound_is_checked() -> None:
    with pytest.raises(ValueError, match="write_concurrency"):
        CheckpointStore(
            client=None,  # type: ignore[arg-type]
            informer=None,  # type: ignore[arg-type]
            ignored_namespace=lambda _: False,
            write_concurrency=0,
        )


# -- --min-checkpoints and --checkpoints-timeout: which VPAs one loop writes ---------------------


class WriteClock:
    """Monotonic time in seconds = the checkpoint PATCHes the API server has answered: every
    write costs one second, as if the API server were that slow."""

    def __init__(self, cluster: Cluster) -> None:
        self.requests = cluster.api.requests

    def now(self) -> datetime:
        return START

    def monotonic(self) -> float:
        return float(self.requests.count(verb="patch", resource="verticalpodautoscalercheckpoints"))

    async def sleep(self, seconds: float) -> None:
        return None


async def six_vpas(cluster: Cluster, *, containers: int) -> tuple[ClusterState, Informer[Any]]:
    """VPAs v0..v5 over the pods of Deployment web, each pod with ``containers`` containers
    (so ``containers`` checkpoints per VPA); one loop creates every checkpoint, so all six were
    last written at the same moment (ties broken by name)."""
    cluster.deployment("web")
    names = ["app", "sidecar", "log"][:containers]
    cluster.pod("web-1", labels={"app": "web"}, containers={name: {} for name in names})
    cluster.usage("web-1", {name: {"cpu": "100m", "memory": "100Mi"} for name in names})
    for index in range(6):
        cluster.vpa(f"v{index}", spec={"resourcePolicy": {"containerPolicies": []}})
    loop = await cluster.recommender()
    await cluster.run(loop)
    assert len(cluster.checkpoints()) == 6 * containers
    return loop.feeder.state, loop.feeder.checkpoints


V = [f"v{index}" for index in range(6)]


Row = tuple[float, int, int, list[str], list[str]]
"""--checkpoints-timeout (s), --min-checkpoints, containers per VPA, the VPAs the first loop
writes, the VPAs the second loop writes."""


@pytest.mark.parametrize(
    "row",
    [
        # Timeout alone (upstream >= 1.4, --min-checkpoints 0): before the third VPA the clock
        # reads t0 + 2 >= t0 + 2, so v0, v1; the next loop starts from the oldest, v2, v3.
        (2.0, 0, 1, V[:2], V[2:4]),
        # --min-checkpoints 4: the deadline passes before v2 (2 written), but 2 < 4 checkpoints
        # were tried, so v2 (3 < 4 before it: v3 too) go on; before v4 4 >= 4: stop. The next
        # loop: v4, v5 (never written since the first loop) then v0, v1 (oldest of this one).
        (2.0, 4, 1, V[:4], V[4:] + V[:2]),
        # The timeout already passed when the writing starts (UpdateVPAs took it all): only
        # --min-checkpoints 3 moves the oldest three, then the other three.
        (0.0, 3, 1, V[:3], V[3:]),
        # The minimum counts container checkpoints, not VPAs, and a started VPA is finished:
        # 2 containers each, minimum 3: v0 (0 < 3, tries 2), v1 (2 < 3, tries 4), then 4 >= 3.
        (0.0, 3, 2, V[:2], V[2:4]),
        # A minimum the timeout already covers adds nothing: t0+0, +1, +2 < t0+3 -> v0..v2.
        (3.0, 3, 1, V[:3], V[3:]),
        # The default --min-checkpoints 10 with a spent timeout writes all six 1-container VPAs
        # (6 < 10 before each); the next loop: all six again, ties by name.
        (0.0, 10, 1, V, V),
        # A timeout longer than the work: everything, both loops.
        (10.0, 0, 1, V, V),
    ],
)
async def test_min_checkpoints_and_timeout_choose_the_vpas_of_each_loop(
    cluster: Cluster, row: Row
) -> None:
    seconds, minimum, containers, first, second = row
    state, informer = await six_vpas(cluster, containers=containers)
    clock = WriteClock(cluster)
    store = CheckpointStore(
        client=cluster.client,
        informer=informer,
        ignored_namespace=lambda _: False,
        write_concurrency=1,  # upstream writes one after the other: the table is exact
        min_checkpoints=minimum,
    )
    written: list[list[str]] = []
    for minute in (1, 2):
        result = await store.store(
            state,
            now=START + timedelta(minutes=minute),
            clock=clock,
            deadline=clock.monotonic() + seconds,
        )
        assert result.failed == 0
        assert result.written == len(result.order) * containers
        # "Timed out" (the recommender's warning) only when VPAs were left unwritten.
        assert result.deadline_passed == (len(result.order) < len(V))
        written.append([name for _, name in result.order])
        # What the API server holds agrees: this loop's VPAs carry this loop's time.
        stamp = f"2026-01-05T00:0{minute}:00Z"
        stored = {
            o["spec"]["vpaObjectName"]
            for o in cluster.checkpoints()
            if o["status"]["lastUpdateTime"] == stamp
        }
        assert stored == set(written[-1])
    assert written == [first, second]


async def test_min_checkpoints_holds_with_concurrent_writers(cluster: Cluster) -> None:
    # Eight writers at once, the timeout spent before the first VPA: exactly the three oldest
    # are started (each writer checks the count its peers have already claimed, before it
    # awaits anything), not one per writer.
    state, informer = await six_vpas(cluster, containers=1)
    store = CheckpointStore(
        client=cluster.client,
        informer=informer,
        ignored_namespace=lambda _: False,
        min_checkpoints=3,
    )
    clock = WriteClock(cluster)
    result = await store.store(
        state, now=START + timedelta(minutes=1), clock=clock, deadline=clock.monotonic()
    )
    assert [name for _, name in result.order] == V[:3]
    assert (result.written, result.deadline_passed) == (3, True)


def test_min_checkpoints_flag_reaches_the_loop_and_rejects_a_negative() -> None:
    assert _recommender_settings({}).min_checkpoints == 10  # upstream's default
    assert _recommender_settings({"min-checkpoints": 0}).min_checkpoints == 0
    with pytest.raises(ValueError, match=r"^--min-checkpoints: must be >= 0, got -1$"):
        _recommender_settings({"min-checkpoints": -1})
