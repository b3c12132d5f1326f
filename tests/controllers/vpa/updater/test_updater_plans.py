"""The VPA updater's decision as plans: a snapshot in, the intents out — no API server.

:func:`~kubescale.controllers.vpa.updater.updater_decision.decide` is driven by
:func:`~kubescale.plans.executor.collect_plan`, which answers every intent done. Each
row of the table is a snapshot — one ReplicaSet ``web-7d9f`` with ``replicas`` Running pods
requesting ``cpu 100m, memory 100Mi``, below their VPA's recommended lower bound
(``400m``/``200Mi``: "outside the recommended range", every pod a candidate at once, reference
§3.4) — and the plan upstream's rules give (reference §3.2-3.3, ``pods_eviction_restriction.go``):
``shouldBeAlive = configured − int(configured × tolerance)``, a pod may go while
``alive − evicted > shouldBeAlive``; a group below ``minReplicas`` is left alone; an eviction
still in flight counts as evicted.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from kubescale.controllers.vpa.updater.eviction_restriction import ControllerKey
from kubescale.controllers.vpa.updater.update_priority import UpdateSettings
from kubescale.controllers.vpa.updater.updater_config import UpdaterSettings
from kubescale.controllers.vpa.updater.updater_decision import (
    UpdaterMemory,
    UpdaterSnapshot,
    VpaSnapshot,
    decide,
)
from kubescale.controllers.vpa.updater.updater_metrics import UpdaterMetrics
from kubescale.coordination.disruption_ledger import DisruptionKind
from kubescale.objects.pod import Pod
from kubescale.plans.executor import DRY_RUN_PREFIX, collect_plan
from kubescale.plans.intents import Evict, describe
from kubescale.sim.apiserver.faults import WRITE_VERBS
from tests import builders
from tests.controllers.vpa.recommender.test_recommender_loop import NAMESPACE as LOOP_NAMESPACE
from tests.controllers.vpa.recommender.test_recommender_loop import Cluster, cluster

from .test_updater_loop import (
    Updater,
    live_pods,
    run,
    settle,
    start_updater,
    status_lease,
    updaters,
    web,
)

__all__ = ["cluster", "updaters"]  # the fixtures, re-exported for pytest

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)
NS = "prod"
RS = ControllerKey(namespace=NS, kind="ReplicaSet", name="web-7d9f")
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


def web_pod(index: int) -> Pod:
    started = (NOW - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return builders.pods.typed_pod(
        name=f"web-{index}",
        namespace=NS,
        uid=f"uid-{index}",
        labels={"app": "web"},
        creation_timestamp=started,
        owner_references=[builders.meta.owner_reference(name=RS.name, uid="rs-uid")],
        node_name="node-1",
        containers=[
            builders.pods.container(image="app", requests={"cpu": "100m", "memory": "100Mi"})
        ],
        status={
            "phase": "Running",
            "startTime": started,
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "app", "ready": True, "restartCount": 0}],
        },
    )


def snapshot(
    *, mode: str = "Recreate", replicas: int = 4, in_flight: Mapping[str, DisruptionKind] = {}
) -> UpdaterSnapshot:
    return UpdaterSnapshot(
        vpas=[
            VpaSnapshot(
                vpa=builders.vpas.typed_vpa(
                    name="web",
                    namespace=NS,
                    uid="vpa-uid",
                    target=builders.hpas.scale_target_ref(),
                    update_mode=mode,
                    status={"recommendation": RECOMMENDATION},
                ),
                pods=[web_pod(i) for i in range(replicas)],
                controllers={
                    RS: builders.workloads.typed_replica_set(
                        name=RS.name, namespace=NS, uid="rs-uid", replicas=replicas
                    )
                },
                in_flight=dict(in_flight),
            )
        ]
    )


def evict_lines(index: int) -> list[str]:
    """An eviction and its two events (``EvictedByVPA`` on the pod, ``EvictedPod`` on the VPA)."""
    return [
        f"vpa-updater: evict pods {NS}/web-{index}",
        f"vpa-updater: event Pod {NS}/web-{index} Normal EvictedByVPA "
        '"Pod was evicted by VPA Updater to apply resource recommendation."',
        f"vpa-updater: event VerticalPodAutoscaler {NS}/web Normal EvictedPod "
        f'"VPA Updater evicted Pod web-{index} to apply resource recommendation."',
    ]


def resize_lines(index: int) -> list[str]:
    """A resize to the target (500m / 256Mi), the annotation, the event."""
    return [
        f"vpa-updater: resize pods {NS}/web-{index} "
        '[{"op":"add","path":"/spec/containers/0/resources/requests/cpu","value":"500m"},'
        '{"op":"add","path":"/spec/containers/0/resources/requests/memory","value":"256Mi"}]',
        f"vpa-updater: patch pods {NS}/web-{index} merge "
        '{"metadata":{"annotations":{"vpaInPlaceUpdated":"true"}}}',
        f"vpa-updater: event Pod {NS}/web-{index} Normal InPlaceResizedByVPA "
        '"Pod was resized in place by VPA Updater."',
    ]


CASES: list[tuple[str, UpdaterSnapshot, UpdaterSettings, list[str]]] = [
    (
        # configured 4, int(4 × 0.5) = 2 may go: shouldBeAlive 2; alive 4 − 0 > 2 evicts web-0,
        # 4 − 1 > 2 evicts web-1, 4 − 2 > 2 is false.
        "half of four",
        snapshot(),
        UpdaterSettings(),
        evict_lines(0) + evict_lines(1),
    ),
    (
        # web-0's eviction is still in flight: it counts as evicted (and is not a candidate
        # again): 4 − 1 > 2 evicts web-1, then 4 − 2 > 2 is false.
        "one already in flight",
        snapshot(in_flight={f"{NS}/web-0": DisruptionKind.EVICTION}),
        UpdaterSettings(),
        evict_lines(1),
    ),
    (
        # configured 2 = --min-replicas 2: int(2 × 0.5) = 1 may go, shouldBeAlive 1: web-0.
        "two replicas",
        snapshot(replicas=2),
        UpdaterSettings(),
        evict_lines(0),
    ),
    (
        # configured 1 < --min-replicas 2: the group is left alone.
        "below min replicas",
        snapshot(replicas=1),
        UpdaterSettings(),
        [],
    ),
    (
        # --eviction-tolerance 1: int(4 × 1) = 4 may go, shouldBeAlive 0: all four.
        "tolerance one",
        snapshot(),
        UpdaterSettings(eviction_tolerance=1.0),
        evict_lines(0) + evict_lines(1) + evict_lines(2) + evict_lines(3),
    ),
    (
        # --eviction-rate-limit 1/s, burst 1: one token at this instant; the budget's second
        # eviction waits for the next iteration.
        "rate limited",
        snapshot(),
        UpdaterSettings(eviction_rate_limit=1.0, eviction_rate_burst=1),
        evict_lines(0),
    ),
    (
        # Mode Off: never acted on.
        "mode off",
        snapshot(mode="Off"),
        UpdaterSettings(),
        [],
    ),
    (
        # InPlaceOrRecreate (gate InPlaceOrRecreate is GA): a resize to the target spends the
        # same budget as an eviction: 2 of 4.
        "in place",
        snapshot(mode="InPlaceOrRecreate"),
        UpdaterSettings(),
        resize_lines(0) + resize_lines(1),
    ),
]


@pytest.mark.parametrize(
    ("snap", "settings", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_the_plan_for_a_snapshot(
    snap: UpdaterSnapshot, settings: UpdaterSettings, expected: list[str]
) -> None:
    memory = UpdaterMemory.for_settings(settings)
    metrics = UpdaterMetrics(CollectorRegistry())
    plan, _ = collect_plan(decide(snap, memory, NOW, settings=settings, metrics=metrics))
    assert [describe(intent) for intent in plan] == expected


def test_the_plan_fills_the_memory_the_next_iteration_reads() -> None:
    """What the loop keeps: the pods it evicted (a dry run answers done), the rate limiter's
    spent token — a second decision at the same instant gets no token."""
    settings = UpdaterSettings(eviction_rate_limit=1.0, eviction_rate_burst=1)
    memory = UpdaterMemory.for_settings(settings)
    metrics = UpdaterMetrics(CollectorRegistry())
    collect_plan(decide(snapshot(), memory, NOW, settings=settings, metrics=metrics))
    assert memory.evicted == [f"{NS}/web-0"]
    again, _ = collect_plan(decide(snapshot(), memory, NOW, settings=settings, metrics=metrics))
    assert again == []


def test_the_settings_are_upstream_defaults() -> None:
    """The table's rows rest on these defaults (``--min-replicas 2``, ``--eviction-tolerance
    0.5``, no rate limit)."""
    settings = UpdaterSettings()
    assert (settings.min_replicas, settings.eviction_tolerance) == (2, 0.5)
    assert settings.eviction_rate_limit <= 0
    assert settings.priority == UpdateSettings()
    assert not settings.dry_run


# -- --dry-run through the real loop, against the in-process API server ----------------------


async def test_dry_run_prints_the_plan_and_writes_nothing(
    cluster: Cluster, updaters: list[Updater], caplog: pytest.LogCaptureFixture
) -> None:
    """The loop of ``test_updater_loop`` (4 pods, budget 2) with ``--dry-run``: the plan — two
    evictions and their events — is printed, one line per intent, and not one write request
    reaches the API server; the pods all live."""
    web(cluster)
    status_lease(cluster, renewed_ago=timedelta(seconds=5))
    settings = UpdaterSettings(status_lease_namespace=LOOP_NAMESPACE, dry_run=True)
    updater = await start_updater(cluster, updaters, settings)
    await settle(cluster, updater)
    caplog.set_level(logging.INFO, logger="kubescale.plans")
    caplog.clear()
    cluster.api.requests.clear()
    await run(cluster, updater)
    written = {r: n for r, n in cluster.api.requests.counts().items() if r.verb in WRITE_VERBS}
    assert written == {}
    assert live_pods(cluster) == ["web-0", "web-1", "web-2", "web-3"]
    printed = [r.getMessage() for r in caplog.records if r.name == "kubescale.plans"]
    expected = [
        line.replace(f" {NS}/", f" {LOOP_NAMESPACE}/") for line in evict_lines(0) + evict_lines(1)
    ]
    assert printed == [DRY_RUN_PREFIX + line for line in expected]
    assert updater.sample("vpa_updater_evicted_pods_total", {"vpa_size_log2": "2"}) == 0
    assert updater.loop.executor.applied == 6


async def test_the_loop_gives_its_plan_without_executing_it(
    cluster: Cluster, updaters: list[Updater]
) -> None:
    """:meth:`UpdaterLoop.plan`: the same plan, read for ``simulate``/``report``, nothing sent."""
    web(cluster)
    status_lease(cluster, renewed_ago=timedelta(seconds=5))
    updater = await start_updater(cluster, updaters)
    await settle(cluster, updater)
    cluster.api.requests.clear()
    plan = await updater.loop.plan(cluster.now)
    assert plan is not None
    expected = [
        line.replace(f" {NS}/", f" {LOOP_NAMESPACE}/") for line in evict_lines(0) + evict_lines(1)
    ]
    assert [describe(intent) for intent in plan] == expected
    written = {r: n for r, n in cluster.api.requests.counts().items() if r.verb in WRITE_VERBS}
    assert written == {}


@settings(max_examples=60, deadline=None)
@given(
    replicas=st.integers(min_value=1, max_value=10),
    tolerance=st.floats(min_value=0.0, max_value=1.0),
    min_replicas=st.integers(min_value=1, max_value=4),
)
def test_the_plan_evicts_what_the_budget_allows(
    replicas: int, tolerance: float, min_replicas: int
) -> None:
    """For any group: below ``--min-replicas`` nothing; else ``int(replicas × tolerance)``
    evictions (``alive − evicted > shouldBeAlive``), at least one when that rounds to 0 and
    every configured pod runs (``isPodDisruptable``'s second clause) — each with its two
    events."""
    settings = UpdaterSettings(eviction_tolerance=tolerance, min_replicas=min_replicas)
    memory = UpdaterMemory.for_settings(settings)
    metrics = UpdaterMetrics(CollectorRegistry())
    snap = snapshot(replicas=replicas)
    plan, _ = collect_plan(decide(snap, memory, NOW, settings=settings, metrics=metrics))
    expected = 0 if replicas < min_replicas else max(int(replicas * tolerance), 1)
    evicted = [intent for intent in plan if isinstance(intent, Evict)]
    assert len(evicted) == expected
    assert len(plan) == 3 * expected
    assert len({intent.target.name for intent in evicted}) == expected  # never a pod twice
