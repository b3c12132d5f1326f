"""The descheduler loop against the in-process API server, through the real client.

Nodes n1 (tainted ``NoSchedule``) and n2; on n1 two pods of ReplicaSet ``web``, one pod of
``api`` guarded by a PodDisruptionBudget that allows no disruption (as the disruption controller
would write its status), and a bare pod. With RemovePodsViolatingNodeTaints, upstream's rules
give: web-0 and web-1 evicted (Eviction API: they get a deletionTimestamp), api-0 refused by the
API server (429 from the budget: result ``error``), the bare pod protected by the evictor.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from kubescale.base.clock import VirtualClock
from kubescale.base.coordination import Coordination
from kubescale.controllers.descheduler.descheduler_config import DeschedulerSettings
from kubescale.controllers.descheduler.descheduler_loop import DeschedulerLoop
from kubescale.controllers.descheduler.descheduler_metrics import DeschedulerMetrics
from kubescale.coordination.brain import brain_of
from kubescale.coordination.disruption_ledger import DisruptionLedger
from kubescale.coordination.eviction_memory import EvictionMemory
from kubescale.coordination.one_brain import LedgerBudgets
from kubescale.kube.client import KubeClient, connect
from kubescale.kube.events import EventRecorder
from kubescale.kube.informer_set import InformerSet
from kubescale.kube.resources import CORE_EVENTS, PODS
from kubescale.kube.shared_cache import SharedCache
from kubescale.objects.pod import Pod
from kubescale.scheduling.policy.policy_loading import (
    DeschedulerPolicy,
    parse_policy,
)
from kubescale.sim.apiserver.server import ApiServer
from kubescale.sim.scenario.runner import SimulationClientClock
from tests.builders.meta import json_body

from .builders import cycle_node, cycle_pod, owner

START = datetime(2026, 3, 1, 12, tzinfo=UTC)
TAINT = {"key": "maintenance", "effect": "NoSchedule"}


@dataclass
class Setup:
    api: ApiServer
    client: KubeClient
    clock: VirtualClock


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[Setup]:
    clock = VirtualClock(START)
    async with ApiServer(clock=clock, bookmark_interval=3600.0, seed=5) as api:
        kubeconfig = tmp_path / "kubeconfig"
        api.write_kubeconfig(kubeconfig)
        client = await connect(
            kubeconfig=kubeconfig,
            clock=SimulationClientClock(clock),
            registry=CollectorRegistry(),
            rng=random.Random(0),
        )
        try:
            yield Setup(api=api, client=client, clock=clock)
        finally:
            await client.close()


def create_pod(api: ApiServer, typed_pod: Pod) -> None:
    the_pod = json_body(typed_pod)
    body = {k: v for k, v in the_pod.items() if k != "status"}
    body["metadata"] = {
        k: v for k, v in the_pod["metadata"].items() if k not in ("uid", "creationTimestamp")
    }
    created = api.store.create(body)
    status = {**the_pod["status"], "conditions": [{"type": "Ready", "status": "True"}]}
    api.store.update_status({**created, "status": status})


def cluster(api: ApiServer) -> None:
    for made in (cycle_node("n1", taints=[TAINT]), cycle_node("n2")):
        api.store.create(json_body(made))
    for name in ("web-0", "web-1"):
        create_pod(api, cycle_pod(name, "n1", cpu="100m", labels={"app": "web"}))
    create_pod(
        api, cycle_pod("api-0", "n1", cpu="100m", labels={"app": "api"}, owners=[owner(name="api")])
    )
    create_pod(api, cycle_pod("bare", "n1", cpu="100m", owners=[]))
    created = api.store.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "api", "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "api"}}},
        }
    )
    api.store.update_status(
        {
            **created,
            "status": {
                "observedGeneration": created["metadata"].get("generation", 1),
                "disruptionsAllowed": 0,
                "currentHealthy": 1,
                "desiredHealthy": 1,
                "expectedPods": 1,
            },
        }
    )


def taints_policy(**top: Any) -> DeschedulerPolicy:
    return parse_policy(
        {
            "apiVersion": "descheduler/v1alpha2",
            "kind": "DeschedulerPolicy",
            **top,
            "profiles": [
                {
                    "name": "default",
                    "plugins": {"deschedule": {"enabled": ["RemovePodsViolatingNodeTaints"]}},
                }
            ],
        }
    )


@dataclass
class Loop:
    loop: DeschedulerLoop
    registry: CollectorRegistry
    events: EventRecorder
    informers: InformerSet
    memory: EvictionMemory

    def sample(self, name: str, labels: dict[str, str] | None = None) -> float:
        value = self.registry.get_sample_value(name, labels or {})
        return 0.0 if value is None else value


async def make_loop(
    setup: Setup,
    policy: DeschedulerPolicy,
    *,
    dry_run: bool = False,
    disruptions: DisruptionLedger | None = None,
    one_brain: bool = False,
) -> Loop:
    informers = InformerSet(client=setup.client, rng=random.Random(1))
    registry = CollectorRegistry()
    events = EventRecorder(client=setup.client, component="descheduler")
    memory = EvictionMemory(duration=timedelta(minutes=10))
    loop = DeschedulerLoop(
        client=setup.client,
        informers=informers,
        settings=DeschedulerSettings(policy=policy, dry_run=dry_run),
        policy=policy,
        metrics=DeschedulerMetrics(registry),
        events=events,
        memory=memory,
        disruptions=disruptions,
        budgets=LedgerBudgets(disruptions) if one_brain and disruptions is not None else None,
    )
    informers.start()
    assert await asyncio.wait_for(informers.wait_synced(), timeout=10)
    return Loop(loop=loop, registry=registry, events=events, informers=informers, memory=memory)


async def run(setup: Setup, made: Loop) -> None:
    target = str(setup.api.store.resource_version)
    for _ in range(100):
        setup.api.bookmark_watches()
        if await made.loop.wait_for_resource_version(target, within=0.1):
            break
    await made.loop.run_once(setup.clock.now())
    await made.events.flush()


def terminating(api: ApiServer) -> list[str]:
    return sorted(
        p["metadata"]["name"]
        for p in api.store.snapshots(PODS)
        if p["metadata"].get("deletionTimestamp")
    )


async def test_evicts_through_the_eviction_api(setup: Setup) -> None:
    cluster(setup.api)
    made = await make_loop(setup, taints_policy(evictionFailureEventNotification=True))
    try:
        await run(setup, made)
        assert terminating(setup.api) == ["web-0", "web-1"]
        labels = {
            "strategy": "RemovePodsViolatingNodeTaints",
            "profile": "default",
            "namespace": "default",
            "node": "n1",
        }
        assert made.sample("descheduler_pods_evicted_total", {"result": "success", **labels}) == 2
        assert made.sample("descheduler_pods_evicted_total", {"result": "error", **labels}) == 1
        assert made.sample("descheduler_loop_duration_seconds_count") == 1
        assert (
            made.sample(
                "descheduler_strategy_duration_seconds_count",
                {"strategy": "RemovePodsViolatingNodeTaints", "profile": "default"},
            )
            == 1
        )
        events = setup.api.store.snapshots(CORE_EVENTS)
        normal = sorted(
            (e["involvedObject"]["name"], e["reason"], e["message"])
            for e in events
            if e["type"] == "Normal"
        )
        assert normal == [
            (
                "web-0",
                "RemovePodsViolatingNodeTaints",
                "pod eviction from n1 node by sigs.k8s.io/descheduler",
            ),
            (
                "web-1",
                "RemovePodsViolatingNodeTaints",
                "pod eviction from n1 node by sigs.k8s.io/descheduler",
            ),
        ]
        warnings = [
            (e["involvedObject"]["name"], e["reason"]) for e in events if e["type"] == "Warning"
        ]
        assert warnings == [("api-0", "EvictionFailed")]
        # the extender's memory now refuses n1 to web's pods
        assert set(made.memory.refused_nodes(cycle_pod("web-9", None), setup.clock.now())) == {"n1"}
    finally:
        await made.events.close()
        await made.informers.stop()


async def test_dry_run_evicts_nothing_and_reports(setup: Setup) -> None:
    cluster(setup.api)
    made = await make_loop(setup, taints_policy(), dry_run=True)
    try:
        await run(setup, made)
        assert terminating(setup.api) == []
        # the API is never asked: the PDB-guarded pod is reported as well (listing order:
        # same creation time, by name)
        assert [(r.name, r.node, r.strategy) for r in made.loop.last_dry_run] == [
            ("api-0", "n1", "RemovePodsViolatingNodeTaints"),
            ("web-0", "n1", "RemovePodsViolatingNodeTaints"),
            ("web-1", "n1", "RemovePodsViolatingNodeTaints"),
        ]
        assert made.loop.last_report is not None
        assert len(made.loop.last_report.evicted) == 3
        assert setup.api.store.snapshots(CORE_EVENTS) == []
        assert len(made.memory) == 0
    finally:
        await made.events.close()
        await made.informers.stop()


async def test_low_node_utilization_from_node_metrics(setup: Setup) -> None:
    # Requests say both nodes are empty; NodeMetrics say n1 uses 3600m of 4 cores (90%), n2
    # 200m (5%). PodMetrics: each of n1's pods uses 900m. thresholds 20/50: n1 over, n2 under;
    # n1 may hold 2000m; 3600 → 2700 → 1800 → stop: two evictions (headroom 2000−200 = 1800
    # → 900 → 0, then the node is no longer above anyway).
    for made_node in (cycle_node("n1"), cycle_node("n2")):
        setup.api.store.create(json_body(made_node))
    for i in range(4):
        create_pod(setup.api, cycle_pod(f"w{i}", "n1", labels={"app": "web"}))
        setup.api.metrics.set_pod_metrics(
            namespace="default", name=f"w{i}", containers={"app": {"cpu": "900m", "memory": 0}}
        )
    setup.api.metrics.set_node_metrics(name="n1", usage={"cpu": "3600m", "memory": "1Gi"})
    setup.api.metrics.set_node_metrics(name="n2", usage={"cpu": "200m", "memory": "1Gi"})
    policy = parse_policy(
        yaml.safe_load(
            """
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
metricsProviders: [{source: KubernetesMetrics}]
profiles:
- name: real-usage
  pluginConfig:
  - name: LowNodeUtilization
    args:
      thresholds: {cpu: 20}
      targetThresholds: {cpu: 50}
      metricsUtilization: {source: KubernetesMetrics}
  plugins:
    balance: {enabled: [LowNodeUtilization]}
"""
        )
    )
    made = await make_loop(setup, policy)
    seen: list[Any] = []
    made.loop.usage_listener = lambda nodes, values: seen.append(nodes)
    try:
        await run(setup, made)
        assert terminating(setup.api) == ["w0", "w1"]
        assert seen == [
            {"n1": {"cpu": 3600, "memory": 1 << 30}, "n2": {"cpu": 200, "memory": 1 << 30}}
        ]
        # the collector smooths: n1 now reads 1600m → round(0.9×3600 + 0.1×1600) = 3400
        setup.api.metrics.set_node_metrics(name="n1", usage={"cpu": "1600m", "memory": "1Gi"})
        assert made.loop.collector is not None
        await made.loop.collector.collect(["n1"])
        assert made.loop.collector.snapshot()["n1"]["cpu"] == 3400
    finally:
        await made.events.close()
        await made.informers.stop()


@pytest.mark.parametrize("one_brain", [False, True])
async def test_one_brain_evicts_only_pods_with_somewhere_to_go(
    setup: Setup, one_brain: bool
) -> None:
    """n1 tainted, n2 with 500m: ``big`` (1 CPU) fits nowhere else, ``small`` (100m) fits n2.
    Separate (upstream, nodeFit off): both evicted, big's replacement has nowhere to run.
    One brain: small only; big's refusal is counted under its result label; small's eviction
    is on the process's ledger as the descheduler's."""
    setup.api.store.create(json_body(cycle_node("n1", taints=[TAINT])))
    setup.api.store.create(json_body(cycle_node("n2", cpu="500m")))
    create_pod(setup.api, cycle_pod("big", "n1", cpu="1", labels={"app": "web"}))
    create_pod(setup.api, cycle_pod("small", "n1", cpu="100m", labels={"app": "web"}))
    ledger = DisruptionLedger(shared=one_brain)
    made = await make_loop(setup, taints_policy(), disruptions=ledger, one_brain=one_brain)
    try:
        await run(setup, made)
        labels = {
            "strategy": "RemovePodsViolatingNodeTaints",
            "profile": "default",
            "namespace": "default",
            "node": "n1",
        }
        success = made.sample("descheduler_pods_evicted_total", {"result": "success", **labels})
        no_fit = made.sample(
            "descheduler_pods_evicted_total", {"result": "pod fits on no other node", **labels}
        )
        if one_brain:
            assert terminating(setup.api) == ["small"]
            assert (success, no_fit) == (1, 1)
        else:
            assert terminating(setup.api) == ["big", "small"]
            assert (success, no_fit) == (2, 0)
        # every eviction made is on the ledger as the descheduler's (until the informer
        # shows it: the watch may already have delivered the deletion)
        assert {e.actor for e in ledger.in_flight(now=setup.clock.now())} <= {"descheduler"}
    finally:
        await made.events.close()
        await made.informers.stop()


@pytest.mark.parametrize("one_brain", [False, True])
async def test_one_brain_namespace_limit_counts_missing_pods(setup: Setup, one_brain: bool) -> None:
    """ReplicaSet web wants 3; one of its pods is gone (its replacement not created yet), two
    run on the tainted n1; maxNoOfPodsToEvictPerNamespace 1. Upstream (separate): its counter
    starts at 0, web-0 is evicted (then the limit), 2 of 3 down. One brain: the limit counts
    the missing pod, read against the ReplicaSet's spec through the process's shared cache —
    1 missing + 0 in flight is not below 1: nothing is evicted."""
    setup.api.store.create(json_body(cycle_node("n1", taints=[TAINT])))
    setup.api.store.create(json_body(cycle_node("n2", cpu="8")))
    replica_set = setup.api.store.create(
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}},
            },
        }
    )
    rs_ref = owner("ReplicaSet", "web", uid=replica_set["metadata"]["uid"])
    for name in ("web-0", "web-1"):
        create_pod(
            setup.api, cycle_pod(name, "n1", cpu="100m", labels={"app": "web"}, owners=[rs_ref])
        )
    coordination = Coordination.ONE_BRAIN if one_brain else Coordination.SEPARATE
    cache = SharedCache(client=setup.client, clock=setup.clock, coordination=coordination)
    policy = taints_policy(maxNoOfPodsToEvictPerNamespace=1)
    loop = DeschedulerLoop(
        client=setup.client,
        informers=cache.informers,
        settings=DeschedulerSettings(policy=policy),
        policy=policy,
        metrics=DeschedulerMetrics(CollectorRegistry()),
        events=EventRecorder(client=setup.client, component="descheduler"),
        disruptions=brain_of(cache).ledger,
        budgets=brain_of(cache).descheduler_budgets,
        controllers=cache.controllers if one_brain else None,
    )
    cache.start()
    try:
        assert await asyncio.wait_for(cache.wait_synced(), timeout=10)
        target = str(setup.api.store.resource_version)
        for _ in range(100):
            setup.api.bookmark_watches()
            if await loop.wait_for_resource_version(target, within=0.1):
                break
        await loop.run_once(setup.clock.now())
        await loop.events.flush()
        assert terminating(setup.api) == ([] if one_brain else ["web-0"])
    finally:
        await loop.events.close()
        await cache.stop()
