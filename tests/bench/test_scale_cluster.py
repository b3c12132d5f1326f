"""``bench/scale_cluster.py`` (issue 29): the cluster it generates and its machinery at 50 pods.

The figures themselves are the bench's; here the shape of the generated cluster (Kubernetes'
limits at 150,000 pods), that the generated objects load into the API server and read back as
a cluster of bound, running pods, and that a tiny run — an API server child, ``kubescale
serve`` twice as separate processes — produces every field of the JSON and the Markdown table.
No timing is asserted.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bench import scale_cluster as bench
from kubescale.base.clock import VirtualClock
from kubescale.components import REGISTRY
from kubescale.kube.resources import DEPLOYMENTS, NODES, PODS, REPLICA_SETS
from kubescale.sim.apiserver.server import ApiServer


@pytest.mark.parametrize(
    ("pods", "expected"),
    [
        # 150,000 pods: 150000 / 30 = 5,000 nodes; / 15 = 10,000 Deployments (and ReplicaSets);
        # VPAs for every other one = 5,000; HPAs and PDBs 150000 / 150 = 1,000; 10000 / 100 =
        # 100 namespaces.
        (
            150_000,
            {
                "pods": 150_000,
                "nodes": 5_000,
                "deployments": 10_000,
                "replicasets": 10_000,
                "vpas": 5_000,
                "hpas": 1_000,
                "pdbs": 1_000,
                "namespaces": 100,
            },
        ),
        # 10,000 pods: 333 nodes (10000 // 30), 666 Deployments, 333 VPAs ((666 + 1) // 2),
        # 66 HPAs and PDBs (10000 // 150), 6 namespaces (666 // 100).
        (
            10_000,
            {
                "pods": 10_000,
                "nodes": 333,
                "deployments": 666,
                "replicasets": 666,
                "vpas": 333,
                "hpas": 66,
                "pdbs": 66,
                "namespaces": 6,
            },
        ),
        # 50 pods: at least one of each; 3 Deployments (50 // 15), VPAs for #0 and #2, the one
        # HPA on #1 (min(3 // 2, 1)), one PDB.
        (
            50,
            {
                "pods": 50,
                "nodes": 1,
                "deployments": 3,
                "replicasets": 3,
                "vpas": 2,
                "hpas": 1,
                "pdbs": 1,
                "namespaces": 1,
            },
        ),
    ],
)
def test_the_cluster_shape_follows_kubernetes_limits(pods: int, expected: dict[str, int]) -> None:
    assert bench.Shape(pods).counts() == expected


async def test_the_generated_cluster_loads_bound_and_running() -> None:
    shape = bench.Shape(1500)
    kinds = Counter(o["kind"] for o in bench.generate(shape))
    assert kinds == {
        "Namespace": shape.namespaces,
        "Node": shape.nodes,
        "Deployment": shape.deployments,
        "ReplicaSet": shape.deployments,
        "Pod": shape.pods,
        "VerticalPodAutoscaler": shape.vpas,
        "HorizontalPodAutoscaler": shape.hpas,
        "PodDisruptionBudget": shape.pdbs,
    }
    async with ApiServer(seed=1) as api:
        assert api.store.load(bench.generate(shape)) == sum(kinds.values())
        pods = api.store.list(PODS)
        nodes = {n["metadata"]["name"] for n in api.store.list(NODES)}
        assert len(pods) == 1500
        assert {p["spec"]["nodeName"] for p in pods} == nodes  # every node has pods
        assert {p["status"]["phase"] for p in pods} == {"Running"}
        # Each pod's controller is a ReplicaSet whose controller is a Deployment, by uid.
        replica_sets = {r["metadata"]["uid"]: r for r in api.store.list(REPLICA_SETS)}
        deployments = {d["metadata"]["uid"] for d in api.store.list(DEPLOYMENTS)}
        for pod in pods:
            (owner,) = pod["metadata"]["ownerReferences"]
            (grand,) = replica_sets[owner["uid"]]["metadata"]["ownerReferences"]
            assert grand["uid"] in deployments
        # The churn changes a pod's labels, then another pod's status: two watch events.
        before = api.store.resource_version
        keys = [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods]
        churn = bench.Churn(api, keys)
        churn.step()
        churn.step()
        assert api.store.resource_version == before + 2
        first, second = pods[0]["metadata"], pods[1]["metadata"]
        assert (
            api.store.get(PODS, first["name"], first["namespace"])["metadata"]["labels"]["churn"]
            == "0"
        )
        status = api.store.get(PODS, second["name"], second["namespace"])["status"]
        assert status["containerStatuses"][0]["restartCount"] == 1


async def test_a_tiny_run_fills_every_field(tmp_path: Path) -> None:
    out = tmp_path / "scale_cluster.json"
    args = bench.parse_args(
        [
            "--quick", "--steady-seconds", "1", "--minutes", "2",
            # 50 pods x 600 % = 300 changes a minute, so the 1-second windows see churn.
            "--churn-percent", "600", "--label", "tiny", "--out", str(out),
        ]
    )  # fmt: skip
    report = await bench.measure(args)
    merged = bench.write_results(report, out)
    assert json.loads(out.read_text()) == merged
    (run,) = merged["tiny"]["runs"]
    assert run["pods"] == 50
    assert run["objects"] == bench.Shape(50).counts()
    assert run["apiserver"]["loaded"] == sum(run["objects"].values())  # one object each
    assert run["churn_pod_changes_per_minute"] == 300.0
    assert run["churn_changes"] >= 2  # one at the start of each run's steady minutes
    every, webhook = run["all"], run["webhook"]
    assert set(every["components_synced_seconds"]) == {spec.name for spec in REGISTRY}
    assert set(webhook["components_synced_seconds"]) == {"webhook"}
    assert len(every["steady"]) == 2
    assert len(webhook["steady"]) == 1
    for figures in (every, webhook):
        assert figures["synced_seconds"] > 0
        assert 0 < figures["rss_mib"] <= figures["peak_rss_mib"]
        assert figures["rss_mib_when_synced"] > 0
        assert figures["cpu_seconds_to_sync"] > 0  # kubescale's imports at least
        assert figures["apiserver_cpu_seconds_to_sync"] >= 0
        assert figures["cpu_seconds_per_minute"] >= 0
        for window in figures["steady"]:
            assert set(window) == {"cpu_seconds", "cpu_seconds_per_minute", "rss_mib"}
    table = out.with_suffix(".md").read_text().splitlines()
    assert table[0].startswith("| label | pods | RSS MiB (peak) |")
    assert table[2].startswith("| tiny | 50 | ")


def _run(pods: int, rss: float) -> dict[str, Any]:
    figures = {"rss_mib": rss, "peak_rss_mib": rss, "cpu_seconds_per_minute": 1.0}
    return {
        "pods": pods,
        "all": {**figures, "synced_seconds": 2.0},
        "webhook": {**figures, "synced_seconds": 1.0},
        "load_average_1m_before": 1.0,
    }


def test_results_keep_other_sizes_and_labels(tmp_path: Path) -> None:
    out = tmp_path / "scale.json"
    bench.write_results({"label": "before", "runs": [_run(1000, 100.0)]}, out)
    bench.write_results({"label": "before", "runs": [_run(10000, 200.0)]}, out)
    bench.write_results({"label": "after", "runs": [_run(1000, 50.0)]}, out)
    merged = bench.write_results({"label": "before", "runs": [_run(1000, 110.0)]}, out)
    # "before" keeps its 10k run and takes the new 1k one; "after" is untouched.
    assert [(r["pods"], r["all"]["rss_mib"]) for r in merged["before"]["runs"]] == [
        (1000, 110.0),
        (10000, 200.0),
    ]
    assert [r["pods"] for r in merged["after"]["runs"]] == [1000]
    rows = out.with_suffix(".md").read_text().splitlines()[2:]
    assert [row.split("|")[1:3] for row in rows] == [
        [" before ", " 1,000 "],
        [" before ", " 10,000 "],
        [" after ", " 1,000 "],
    ]


async def test_the_metrics_feed_gives_every_pod_new_usage_each_round() -> None:
    """Every pod has a PodMetrics; a refresh moves every timestamp (what the recommender needs
    to take a new sample) and keeps CPU usage within the HPAs' tolerance: 63–77m of a 100m
    request is 0.63–0.77 utilisation, a ratio of 0.9–1.1 to the 0.70 target, which upstream's
    0.1 tolerance leaves unscaled (|ratio - 1| <= 0.1)."""
    shape = bench.Shape(300)
    clock = VirtualClock(datetime(2026, 1, 1, tzinfo=UTC))
    async with ApiServer(seed=1) as api:
        api.store.load(bench.generate(shape))
        pods = api.store.list(PODS)
        keys = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods}
        feed = bench.MetricsFeed(
            api,
            [
                (p["metadata"]["namespace"], p["metadata"]["name"], p["metadata"]["labels"])
                for p in pods
            ],
            clock,
        )
        feed.refresh()
        first = {
            (m["metadata"]["namespace"], m["metadata"]["name"]): m
            for m in api.metrics.pod_metrics(None)
        }
        await clock.advance(bench.METRICS_INTERVAL)
        feed.refresh()
        second = {
            (m["metadata"]["namespace"], m["metadata"]["name"]): m
            for m in api.metrics.pod_metrics(None)
        }
    assert set(first) == set(second) == keys
    assert {m["timestamp"] for m in first.values()} == {"2026-01-01T00:00:00Z"}
    assert {m["timestamp"] for m in second.values()} == {"2026-01-01T00:01:00Z"}
    usages = [int(m["containers"][0]["usage"]["cpu"].removesuffix("m")) for m in second.values()]
    assert min(usages) >= 63
    assert max(usages) <= 77
    assert len(set(usages)) > 1  # pods differ
    changed = sum(first[k]["containers"] != second[k]["containers"] for k in keys)
    assert changed > len(keys) // 2  # most pods' usage moves between rounds
    assert feed.rounds == 2
