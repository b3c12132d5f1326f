"""End to end on the simulated cluster: the descheduler loop evicting, the simulated
kube-scheduler placing the replacements with and without the extender (over HTTPS).

Scenario 1 — LowNodeUtilization (cpu thresholds 20 / 50). ``hot-0`` (8 cpu, 16Gi) runs the six
``web`` pods (1000m, 256Mi each: 6000m = 75% cpu) before the two ``cache-*`` nodes (4 cpu, 8Gi)
join, where four ``cache`` pods (100m, 3840Mi) make them cpu-idle (200m = 5%: under-utilized)
but memory-heavy (7.5 of 8 Gi). The cycle evicts two web pods from hot-0 (6000 → 5000 → 4000m:
no longer above int(50% × 8000) = 4000; the cache nodes' headroom 2 × (2000 − 200) = 3600m
suffices). The ReplicaSet replaces them at once, while the evicted pods still terminate (their
requests still count on hot-0). The scheduler's LeastAllocated score averages cpu and memory
free after the pod: for the first replacement hot-0 scores (⌊(8000−7000)/8000×100⌋ = 12 +
⌊(16384−1792)/16384×100⌋ = 89) / 2 = 50, a cache node (⌊(4000−1200)/4000×100⌋ = 70 +
⌊(8192−7936)/8192×100⌋ = 3) / 2 = 36; for the second hot-0 (0 + 87) / 2 = 43 > 36. Without the
extender both replacements land back on hot-0, and each later cycle evicts two again (upstream's
most-filed complaint). With the extender hot-0 is refused — recently descheduled for web, and
with the terminating pods still counted it would be over 50% — and the replacements go to the
cache nodes (prioritize: both under-utilized, score 10); the next cycle has nothing to do.

Scenario 2 — a node tainted NoSchedule mid-run (RemovePodsViolatingNodeTaints): the pods that
do not tolerate the taint are evicted from it, the tolerating one stays, nothing returns.

Scenario 3 — ``--dry-run``: the same decisions as scenario 1, reported, nothing evicted.
"""

from __future__ import annotations

from pathlib import Path

from kubescale.scheduling.policy.policy_loading import DeschedulerPolicy
from tests.controllers.descheduler.builders import policy

from .sim_harness import Harness, simulated_cluster

LNU = policy(
    (
        "balance",
        "LowNodeUtilization",
        {"thresholds": {"cpu": 20}, "targetThresholds": {"cpu": 50}},
    )
)


async def hot_and_cold(cluster: Harness) -> None:
    cluster.add_node("hot-0", cpu="8", memory="16Gi")
    cluster.deploy("web", replicas=6, cpu="1000m", memory="256Mi")
    await cluster.step()
    await cluster.step()
    for name in ("cache-0", "cache-1"):
        cluster.add_node(name, labels={"pool": "cache"})
    cluster.deploy(
        "cache",
        replicas=4,
        cpu="100m",
        memory="3840Mi",
        pod_spec={"nodeSelector": {"pool": "cache"}},
    )
    await cluster.step()
    await cluster.step()
    assert cluster.placement("web") == {"hot-0": 6}
    assert cluster.placement("cache") == {"cache-0": 2, "cache-1": 2}


async def evict_and_replace(cluster: Harness) -> tuple[list[str], dict[str, str]]:
    """One cycle, then steps until the replacements are placed: (evicted pods, new pods)."""
    before = set(cluster.pods_of("web"))
    await cluster.deschedule()
    report = cluster.loop.last_report
    assert report is not None
    evicted = [r.pod.split("/")[1] for r in report.evicted]
    for _ in range(3):
        await cluster.step()
    after = cluster.pods_of("web")
    return evicted, {name: node for name, node in after.items() if name not in before}


async def test_lnu_replacements_land_back_without_the_extender(tmp_path: Path) -> None:
    async with simulated_cluster(LNU, tmp_path, extender=False) as cluster:
        await hot_and_cold(cluster)
        landed_back = []
        for _ in range(3):
            evicted, replacements = await evict_and_replace(cluster)
            assert len(evicted) == 2
            landed_back.append(sum(1 for node in replacements.values() if node == "hot-0"))
        # every cycle: 2 evicted, 2 replacements back on hot-0 — ping-pong
        assert landed_back == [2, 2, 2]
        assert cluster.placement("web") == {"hot-0": 6}


async def test_lnu_replacements_go_to_under_utilized_nodes_with_the_extender(
    tmp_path: Path,
) -> None:
    async with simulated_cluster(LNU, tmp_path, extender=True) as cluster:
        await hot_and_cold(cluster)
        evicted, replacements = await evict_and_replace(cluster)
        assert len(evicted) == 2
        assert sorted(replacements.values()) == ["cache-0", "cache-1"]
        assert cluster.placement("web") == {"cache-0": 1, "cache-1": 1, "hot-0": 4}
        # hot-0 is at 4000m = 50%: no longer over-utilized; the next cycle evicts nothing
        evicted, replacements = await evict_and_replace(cluster)
        assert (evicted, replacements) == ([], {})
        refused = cluster.extender_metrics.refused
        assert refused.labels("EvictionMemory")._value.get() == 2


TAINT = {"key": "maintenance", "value": "kernel", "effect": "NoSchedule"}
TAINTS: DeschedulerPolicy = policy(("deschedule", "RemovePodsViolatingNodeTaints", None))


async def test_node_tainted_mid_run_is_emptied_and_nothing_returns(tmp_path: Path) -> None:
    async with simulated_cluster(TAINTS, tmp_path, extender=True) as cluster:
        for name in ("a-0", "a-1", "a-2"):
            cluster.add_node(name)
        cluster.deploy("web", replicas=6, cpu="500m", memory="256Mi")
        tolerate = {"tolerations": [{"key": "maintenance", "operator": "Exists"}]}
        cluster.deploy("agent", replicas=3, cpu="100m", memory="64Mi", pod_spec=tolerate)
        for _ in range(2):
            await cluster.step()
        assert cluster.placement("web") == {"a-0": 2, "a-1": 2, "a-2": 2}
        agents_on_a1 = cluster.placement("agent").get("a-1", 0)
        assert agents_on_a1 == 1
        await cluster.deschedule()  # nothing to do yet
        assert cluster.loop.last_report is not None
        assert cluster.loop.last_report.evictions == []
        cluster.taint_node("a-1", TAINT)
        await cluster.step()
        await cluster.deschedule()
        report = cluster.loop.last_report
        assert sorted(r.node for r in report.evicted) == ["a-1", "a-1"]
        for _ in range(10):
            await cluster.step()
            await cluster.deschedule()
            assert cluster.placement("web").get("a-1", 0) == 0
        assert cluster.placement("web") == {"a-0": 3, "a-2": 3}
        # the tolerating pod stays where it is
        assert cluster.placement("agent").get("a-1", 0) == agents_on_a1


async def test_dry_run_evicts_nothing_and_reports(tmp_path: Path) -> None:
    async with simulated_cluster(LNU, tmp_path, extender=True, dry_run=True) as cluster:
        await hot_and_cold(cluster)
        web = cluster.pods_of("web")
        await cluster.deschedule()
        would = [(r.name, r.node, r.strategy) for r in cluster.loop.last_dry_run]
        assert len(would) == 2
        assert {node for _, node, _ in would} == {"hot-0"}
        assert {strategy for _, _, strategy in would} == {"LowNodeUtilization"}
        for _ in range(3):
            await cluster.step()
        assert cluster.pods_of("web") == web
        assert len(cluster.memory) == 0
