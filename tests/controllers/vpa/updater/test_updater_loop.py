"""The updater's ``RunOnce`` against the in-process API server, through the real client.

A Deployment → ReplicaSet (4 replicas) → 4 running pods requesting less than their VPA's
recommendation (lower bound above the requests: "outside the recommended range", so every pod
is a candidate at once, reference §3.4). Expected counts follow reference §3.2-3.3: the budget
lets ``int(4 × 0.5) = 2`` pods go per loop; a PodDisruptionBudget whose status allows one
disruption (as the disruption controller would write it) lets the API server accept one
eviction and answer 429 to the others; a stale or missing admission-controller status Lease
skips the loop; modes Off and Initial are never acted on.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta

import pytest
from prometheus_client import CollectorRegistry

from kubescale.base.coordination import Coordination
from kubescale.controllers.vpa.updater.update_priority import UpdateSettings
from kubescale.controllers.vpa.updater.updater_config import UpdaterSettings
from kubescale.controllers.vpa.updater.updater_loop import UpdaterLoop, lease_is_fresh
from kubescale.controllers.vpa.updater.updater_metrics import UpdaterMetrics
from kubescale.coordination.disruption_ledger import Disruption, DisruptionKind
from kubescale.kube.events import EventRecorder
from kubescale.kube.lease_record import format_micro_time
from kubescale.kube.resources import CORE_EVENTS, LEASES, PODS
from kubescale.kube.shared_cache import SharedCache
from kubescale.objects.lease import Lease
from tests.controllers.vpa.recommender.test_recommender_loop import NAMESPACE, Cluster, cluster

__all__ = ["cluster"]  # the fixture, re-exported for pytest

LEASE = "vpa-admission-controller"
RECOMMENDATION = {
    "containerRecommendations": [
        {
            "containerName": "app",
            "target": {"cpu": "500m", "memory": "256Mi"},
            "lowerBound": {"cpu": "400m", "memory": "200Mi"},
            "upperBound": {"cpu": "1", "memory": "512Mi"},
        }
    ]
}


@dataclass
class Updater:
    loop: UpdaterLoop
    events: EventRecorder
    registry: CollectorRegistry

    def sample(self, name: str, labels: dict[str, str]) -> float:
        value = self.registry.get_sample_value(name, labels)
        return 0.0 if value is None else value


@pytest.fixture
async def updaters(cluster: Cluster) -> AsyncIterator[list[Updater]]:
    made: list[Updater] = []
    yield made
    for updater in made:
        await updater.events.close()


async def start_updater(
    cluster: Cluster,
    updaters: list[Updater],
    settings: UpdaterSettings | None = None,
    *,
    coordination: Coordination = Coordination.ONE_BRAIN,
) -> Updater:
    informers = SharedCache(
        client=cluster.client,
        clock=cluster.client.clock,
        rng=random.Random(2),
        coordination=coordination,
    )
    cluster.loops.append(informers)
    registry = CollectorRegistry()
    events = EventRecorder(client=cluster.client, component="vpa-updater")
    loop = UpdaterLoop(
        client=cluster.client,
        cache=informers,
        settings=settings or UpdaterSettings(status_lease_namespace=NAMESPACE),
        metrics=UpdaterMetrics(registry),
        events=events,
    )
    informers.start()
    assert await asyncio.wait_for(informers.wait_synced(), timeout=10)
    updater = Updater(loop=loop, events=events, registry=registry)
    updaters.append(updater)
    return updater


async def settle(cluster: Cluster, updater: Updater) -> None:
    """Wait until the updater's informers hold the store as it is now."""
    target = str(cluster.api.store.resource_version)
    for _ in range(100):
        cluster.api.bookmark_watches()
        if await updater.loop.cache.wait_for_resource_version(target, within=0.1):
            return
    raise AssertionError("the updater's informers did not catch up")


async def run(cluster: Cluster, updater: Updater) -> None:
    await settle(cluster, updater)
    await updater.loop.run_once(cluster.now)
    await updater.events.flush()


def status_lease(cluster: Cluster, *, renewed_ago: timedelta) -> None:
    cluster.api.store.create(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": LEASE, "namespace": NAMESPACE},
            "spec": {
                "holderIdentity": "webhook-0",
                "leaseDurationSeconds": 10,
                "renewTime": format_micro_time(cluster.now - renewed_ago),
            },
        }
    )


def web(cluster: Cluster, *, mode: str = "Recreate", replicas: int = 4) -> None:
    """Deployment/ReplicaSet ``web`` with ``replicas`` under-provisioned pods and their VPA."""
    deployment = cluster.deployment("web")
    replica_set = cluster.replica_set("web-7d9f", owner=deployment)
    cluster.api.store.update({**replica_set, "spec": {**replica_set["spec"], "replicas": replicas}})
    for index in range(replicas):
        pod = cluster.pod(
            f"web-{index}",
            labels={"app": "web"},
            containers={"app": {"cpu": "100m", "memory": "100Mi"}},
            owner=replica_set,
        )
        # Ready, so a PDB guards it (the Eviction API lets unready pods go when healthy enough).
        ready = {"type": "Ready", "status": "True"}
        cluster.api.store.update_status({**pod, "status": {**pod["status"], "conditions": [ready]}})
    vpa = cluster.vpa("web", spec={"updatePolicy": {"updateMode": mode}})
    cluster.api.store.update_status({**vpa, "status": {"recommendation": RECOMMENDATION}})


def pdb(cluster: Cluster, *, disruptions_allowed: int) -> None:
    """A PDB ``maxUnavailable: 1`` over ``app=web``, its status as the disruption controller's."""
    created = cluster.api.store.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": NAMESPACE},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        }
    )
    cluster.api.store.update_status(
        {
            **created,
            "status": {
                "observedGeneration": created["metadata"].get("generation", 1),
                "disruptionsAllowed": disruptions_allowed,
                "currentHealthy": 4,
                "desiredHealthy": 3,
                "expectedPods": 4,
            },
        }
    )


def live_pods(cluster: Cluster) -> list[str]:
    return sorted(
        pod["metadata"]["name"]
        for pod in cluster.api.store.list(PODS, namespace=NAMESPACE)
        if not pod["metadata"].get("deletionTimestamp")
    )


def event_reasons(cluster: Cluster) -> list[tuple[str, str]]:
    return sorted(
        (event["involvedObject"]["kind"], event["reason"])
        for event in cluster.api.store.list(CORE_EVENTS, namespace=NAMESPACE)
    )


async def test_the_budget_lets_half_of_the_replicas_go_per_loop(
    cluster: Cluster, updaters: list[Updater]
) -> None:
    web(cluster)
    status_lease(cluster, renewed_ago=timedelta(seconds=5))
    updater = await start_updater(cluster, updaters)
    await run(cluster, updater)
    # configured 4, tolerance int(4 × 0.5) = 2: two evictions, then alive (2) == shouldBeAlive.
    assert len(updater.loop.evicted) == 2
    assert len(live_pods(cluster)) == 2
    assert updater.sample("vpa_updater_evicted_pods_total", {"vpa_size_log2": "2"}) == 2
    assert updater.sample("vpa_updater_controlled_pods_count", {"vpa_size_log2": "2"}) == 4
    assert event_reasons(cluster) == [
        ("Pod", "EvictedByVPA"),
        ("Pod", "EvictedByVPA"),
        ("VerticalPodAutoscaler", "EvictedPod"),
        ("VerticalPodAutoscaler", "EvictedPod"),
    ]


async def test_a_pdb_allowing_one_disruption_gets_one_eviction_and_429s(
    cluster: Cluster, updaters: list[Updater]
) -> None:
    web(cluster)
    pdb(cluster, disruptions_allowed=1)
    status_lease(cluster, renewed_ago=timedelta(seconds=5))
    updater = await start_updater(cluster, updaters)
    await run(cluster, updater)
    assert len(updater.loop.evicted) == 1
    assert len(live_pods(cluster)) == 3
    # The other candidates are within the updater's budget (alive 3 > shouldBeAlive 2) but
    # the API server refuses each with a 429; a refused attempt spends no budget.
    refused = {"vpa_size_log2": "2", "reason": "DisruptionBudget"}
    assert updater.sample("vpa_updater_failed_eviction_attempts_total", refused) == 3
    # Next loop: the PDB's status (not refreshed: no disruption controller) allows nothing.
    await run(cluster, updater)
    assert updater.loop.evicted == []
    assert len(live_pods(cluster)) == 3
    # Three pods left (size log2 1), each still within the updater's budget, each refused.
    refused_now = {"vpa_size_log2": "1", "reason": "DisruptionBudget"}
    assert updater.sample("vpa_updater_failed_eviction_attempts_total", refused_now) == 3


@pytest.mark.parametrize(
    "lease",
    [pytest.param(timedelta(minutes=2), id="stale"), pytest.param(None, id="missing")],
)
async def test_a_stale_or_missing_admission_status_skips_the_loop(
    cluster: Cluster, updaters: list[Updater], lease: timedelta | None
) -> None:
    web(cluster)
    if lease is not None:
        status_lease(cluster, renewed_ago=lease)
    updater = await start_updater(cluster, updaters)
    await run(cluster, updater)
    assert updater.loop.skipped_stale_status == 1
    assert updater.loop.evicted == []
    assert len(live_pods(cluster)) == 4


async def test_without_use_admission_controller_status_the_lease_is_not_read(
    cluster: Cluster, updaters: list[Updater]
) -> None:
    web(cluster)
    settings = UpdaterSettings(use_admission_controller_status=False)
    updater = await start_updater(cluster, updaters, settings)
    await run(cluster, updater)
    assert len(updater.loop.evicted) == 2


@pytest.mark.parametrize("mode", ["Off", "Initial"])
async def test_off_and_initial_vpas_are_left_alone(
    cluster: Cluster, updaters: list[Updater], mode: str
) -> None:
    web(cluster, mode=mode)
    status_lease(cluster, renewed_ago=timedelta(seconds=5))
    updater = await start_updater(cluster, updaters)
    await run(cluster, updater)
    assert updater.loop.evicted == []
    assert len(live_pods(cluster)) == 4
    assert event_reasons(cluster) == []


async def test_the_rate_limiter_bounds_evictions_per_loop(
    cluster: Cluster, updaters: list[Updater]
) -> None:
    web(cluster)
    status_lease(cluster, renewed_ago=timedelta(seconds=5))
    settings = UpdaterSettings(
        status_lease_namespace=NAMESPACE, eviction_rate_limit=0.001, eviction_rate_burst=1
    )
    updater = await start_updater(cluster, updaters, settings)
    await run(cluster, updater)
    assert len(updater.loop.evicted) == 1  # burst 1; the next token is 1000 s away


@pytest.mark.parametrize(
    ("renew", "expected"),
    [
        (timedelta(seconds=59), True),
        (timedelta(seconds=60), False),  # renewTime + timeout must be after now
        (timedelta(minutes=5), False),
    ],
)
def test_lease_freshness(renew: timedelta, expected: bool) -> None:
    from datetime import UTC, datetime  # noqa: PLC0415

    now = datetime(2026, 1, 5, tzinfo=UTC)
    lease: Lease = {"spec": {"renewTime": format_micro_time(now - renew)}}
    assert lease_is_fresh(lease, now=now, settings=UpdaterSettings()) is expected
    assert lease_is_fresh(None, now=now, settings=UpdaterSettings()) is False


async def test_in_place_or_recreate_resizes_within_the_budget(
    cluster: Cluster, updaters: list[Updater]
) -> None:
    web(cluster, mode="InPlaceOrRecreate")
    status_lease(cluster, renewed_ago=timedelta(seconds=5))
    updater = await start_updater(cluster, updaters)
    await run(cluster, updater)
    # The same budget as evictions (2 of 4), spent on resizes; nothing is evicted.
    assert updater.loop.evicted == []
    assert len(updater.loop.resized) == 2
    for pod_name in updater.loop.resized:
        pod = cluster.api.store.get(PODS, pod_name.partition("/")[2], NAMESPACE)
        assert pod["metadata"]["annotations"]["vpaInPlaceUpdated"] == "true"
        assert pod["spec"]["containers"][0]["resources"]["requests"] == {
            "cpu": "500m",
            "memory": "256Mi",
        }
    assert event_reasons(cluster) == [("Pod", "InPlaceResizedByVPA")] * 2


async def test_in_place_mode_resizes_and_never_evicts_behind_its_gate(
    cluster: Cluster, updaters: list[Updater]
) -> None:
    web(cluster, mode="InPlace")
    status_lease(cluster, renewed_ago=timedelta(seconds=5))
    gated = UpdaterSettings(
        status_lease_namespace=NAMESPACE, priority=UpdateSettings(in_place_gate=True)
    )
    updater = await start_updater(cluster, updaters, gated)
    await run(cluster, updater)
    assert updater.loop.evicted == []
    assert len(updater.loop.resized) == 2  # the same budget, spent on resizes only


async def test_in_place_mode_is_left_alone_without_its_gate(
    cluster: Cluster, updaters: list[Updater]
) -> None:
    web(cluster, mode="InPlace")
    status_lease(cluster, renewed_ago=timedelta(seconds=5))
    updater = await start_updater(cluster, updaters)  # the InPlace gate is off by default
    await run(cluster, updater)
    assert (updater.loop.evicted, updater.loop.resized) == ([], [])


# -- writes whose outcome is unknown (kubescale.coordination.disruption_ledger) --------------------


def _evicted_or_going(cluster: Cluster) -> list[str]:
    return sorted(
        pod["metadata"]["name"]
        for pod in cluster.api.store.list(PODS, namespace=NAMESPACE)
        if pod["metadata"].get("deletionTimestamp")
    )


def renew_lease(cluster: Cluster) -> None:
    """The webhook's status Lease, renewed now (its loop runs every 10 s)."""
    lease = cluster.api.store.get(LEASES, LEASE, NAMESPACE)
    spec = {**lease["spec"], "renewTime": format_micro_time(cluster.now)}
    cluster.api.store.update({**lease, "spec": spec})


async def test_an_eviction_refused_with_a_500_holds_its_budget_until_it_expires(
    cluster: Cluster, updaters: list[Updater]
) -> None:
    web(cluster)  # 4 pods: budget int(4 × 0.5) = 2
    status_lease(cluster, renewed_ago=timedelta(0))
    # The first eviction fails before anything happened; the client cannot know that.
    cluster.api.faults.add(verb="create", resource="pods/eviction", status=500)
    updater = await start_updater(cluster, updaters)
    await run(cluster, updater)
    # web-0's outcome is unknown: it counts, so one more (web-1) goes: alive 4 − 2 = 2.
    assert _evicted_or_going(cluster) == ["web-1"]
    assert updater.loop.drain_reports() == [
        (
            "vpa-eviction-unknown",
            f"{NAMESPACE}/web-0",
            "eviction answered 500: counted as evicted",
        ),
        ("vpa-eviction", f"{NAMESPACE}/web-1", "evicted by VPA"),
    ]
    unknown = {"vpa_size_log2": "2", "reason": "InternalError"}
    assert updater.sample("vpa_updater_failed_eviction_attempts_total", unknown) == 1
    # A minute later web-0 still shows no eviction: still counted (alive 3 − 1 = 2), nothing.
    await cluster.advance(60)
    renew_lease(cluster)
    await run(cluster, updater)
    assert _evicted_or_going(cluster) == ["web-1"]
    # Five minutes after the attempt the ledger gives up on it: web-0 is live, and goes.
    await cluster.advance(240)
    renew_lease(cluster)
    await run(cluster, updater)
    assert _evicted_or_going(cluster) == ["web-0", "web-1"]
    # Once the informer shows web-0 going, the ledger forgets it.
    await settle(cluster, updater)
    assert len(updater.loop.disruptions) == 0


@pytest.mark.parametrize(
    ("coordination", "expected"),
    [
        # One brain: the autoscaler's 2 evictions in flight spend the budget int(6 × 0.5) = 3
        # as the updater's own would: 1 more goes (3 of 6 down or going).
        (Coordination.ONE_BRAIN, ["web-0", "web-4", "web-5"]),
        # Separate (upstream): the updater does not know them: 3 more, 5 of 6 down or going.
        (Coordination.SEPARATE, ["web-0", "web-1", "web-2", "web-4", "web-5"]),
    ],
)
async def test_another_systems_evictions_in_flight_spend_the_updaters_budget(
    cluster: Cluster, updaters: list[Updater], coordination: Coordination, expected: list[str]
) -> None:
    web(cluster, replicas=6)
    status_lease(cluster, renewed_ago=timedelta(0))
    updater = await start_updater(cluster, updaters, coordination=coordination)
    await settle(cluster, updater)
    # The cluster autoscaler evicted web-4 and web-5 a moment ago (its node is drained); the
    # informer shows neither yet: the ledger holds them.
    autoscaled = ("web-4", "web-5")
    for name in autoscaled:
        shown = cluster.api.store.get(PODS, name, namespace=NAMESPACE)
        assert shown is not None
        updater.loop.disruptions.record(
            Disruption(
                kind=DisruptionKind.EVICTION,
                uid=shown["metadata"]["uid"],
                namespace=NAMESPACE,
                name=name,
                recorded_at=cluster.now,
                confirmed=True,
                actor="cluster-autoscaler",
            )
        )
    await run(cluster, updater)
    assert sorted({*_evicted_or_going(cluster), *autoscaled}) == expected


@pytest.mark.parametrize("status", [500, 504])
async def test_a_resize_committed_then_failed_counts_and_is_not_followed_by_an_eviction(
    cluster: Cluster, updaters: list[Updater], status: int
) -> None:
    web(cluster, mode="InPlaceOrRecreate")
    status_lease(cluster, renewed_ago=timedelta(0))
    cluster.api.faults.add(
        verb="patch", resource="pods/resize", status=status, count=None, after_commit=True
    )
    updater = await start_updater(cluster, updaters)
    await run(cluster, updater)
    # The budget (2 of 4) is spent on two resizes whose answers were errors; upstream fell back
    # to evicting them as well.
    assert (updater.loop.evicted, updater.loop.resized) == ([], [])
    assert _evicted_or_going(cluster) == []
    resized = [
        pod["metadata"]["name"]
        for pod in cluster.api.store.list(PODS, namespace=NAMESPACE)
        if pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "500m"
    ]
    assert resized == ["web-0", "web-1"]
    # The next loop sees the resizes applied (the ledger lets go) and resizes the other two.
    cluster.api.faults.clear()
    await cluster.advance(60)
    renew_lease(cluster)
    await run(cluster, updater)
    assert sorted(updater.loop.resized) == [f"{NAMESPACE}/web-2", f"{NAMESPACE}/web-3"]
    assert _evicted_or_going(cluster) == []
