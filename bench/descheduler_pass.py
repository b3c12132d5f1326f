"""Benchmark: one descheduling cycle over 1,000 nodes and 30,000 pods with all ten strategies.

Set-up: 1,000 nodes (three zones; one in 40 with a ``PreferNoSchedule`` taint, one in fifty
with a ``NoSchedule`` taint, one in a hundred cordoned), 30,000 pods of 1,000 ReplicaSets with
varied requests; one ReplicaSet in ten has required anti-affinity, one in five a zone spread
constraint, one in 21 required node affinity, one in eleven preferred node affinity; some
pods restart often, some are old, some have failed. The policy's one profile enables all ten
strategies — RemovePodsViolatingNodeTaints, RemovePodsViolatingNodeAffinity (both types),
RemovePodsViolatingInterPodAntiAffinity, RemovePodsHavingTooManyRestarts, PodLifeTime,
RemoveFailedPods (Deschedule), RemoveDuplicates, LowNodeUtilization, HighNodeUtilization,
RemovePodsViolatingTopologySpreadConstraint (Balance) — without limits, every eviction
answered "done" at once (no API: the cycle's own cost).

Measured: the CPU seconds (``time.process_time``) of building the cycle's view from the object
lists and running the whole cycle — the first cycle (every pod's requests parsed) and then
``--repeat`` cycles as a running loop does them (parsed requests kept across cycles, as
``DeschedulerLoop`` keeps them); once with the DefaultEvictor's defaults and once with
``nodeFit: true`` (every candidate checked against the other nodes with the scheduler's
filters). Goal: ≤ 3 s CPU for the pass.

Written to ``bench/results/descheduler_pass.json`` (``--out`` to change).

Usage: ``.venv/bin/python bench/descheduler_pass.py [--repeat 3] [--out FILE]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from kubescale.controllers.descheduler.descheduling_cycle import descheduling_cycle, run_cycle
from kubescale.scheduling.cycle_view import CycleView, cycle_nodes
from kubescale.scheduling.pod_resources import NON_MISSING_DEFAULTS, RequestCache
from kubescale.scheduling.policy.policy_loading import parse_policy

RESULTS: Final = Path(__file__).resolve().parent / "results" / "descheduler_pass.json"
NODES: Final = 1000
PODS: Final = 30_000
OWNERS: Final = 1000
NOW: Final = datetime(2026, 3, 1, 12, tzinfo=UTC)
ZONES: Final = ("zone-a", "zone-b", "zone-c")


def policy_document(node_fit: bool) -> dict[str, Any]:
    return {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [
            {
                "name": "all",
                "pluginConfig": [
                    {"name": "DefaultEvictor", "args": {"nodeFit": node_fit}},
                    {
                        "name": "RemovePodsViolatingNodeTaints",
                        "args": {"includePreferNoSchedule": True},
                    },
                    {
                        "name": "RemovePodsViolatingNodeAffinity",
                        "args": {
                            "nodeAffinityType": [
                                "requiredDuringSchedulingIgnoredDuringExecution",
                                "preferredDuringSchedulingIgnoredDuringExecution",
                            ]
                        },
                    },
                    {
                        "name": "RemovePodsHavingTooManyRestarts",
                        "args": {"podRestartThreshold": 10},
                    },
                    {"name": "PodLifeTime", "args": {"maxPodLifeTimeSeconds": 86400}},
                    {"name": "RemoveFailedPods", "args": {"minPodLifetimeSeconds": 600}},
                    {
                        "name": "LowNodeUtilization",
                        "args": {
                            "thresholds": {"cpu": 20, "memory": 20, "pods": 20},
                            "targetThresholds": {"cpu": 60, "memory": 60, "pods": 60},
                        },
                    },
                    {"name": "HighNodeUtilization", "args": {"thresholds": {"cpu": 10}}},
                ],
                "plugins": {
                    "deschedule": {
                        "enabled": [
                            "RemovePodsViolatingNodeTaints",
                            "RemovePodsViolatingNodeAffinity",
                            "RemovePodsViolatingInterPodAntiAffinity",
                            "RemovePodsHavingTooManyRestarts",
                            "PodLifeTime",
                            "RemoveFailedPods",
                        ]
                    },
                    "balance": {
                        "enabled": [
                            "RemoveDuplicates",
                            "LowNodeUtilization",
                            "HighNodeUtilization",
                            "RemovePodsViolatingTopologySpreadConstraint",
                        ]
                    },
                },
            }
        ],
    }


def node(index: int) -> dict[str, Any]:
    name = f"node-{index:04d}"
    spec: dict[str, Any] = {}
    taints = []
    if index % 40 == 0:
        taints.append({"key": "spot", "value": "true", "effect": "PreferNoSchedule"})
    if index % 50 == 0:
        taints.append({"key": "maintenance", "effect": "NoSchedule"})
    if taints:
        spec["taints"] = taints
    if index % 100 == 1:
        spec["unschedulable"] = True
    return {
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "topology.kubernetes.io/zone": ZONES[index % 3],
                "disk": "ssd" if index % 2 else "hdd",
            },
        },
        "spec": spec,
        "status": {
            "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(index: int) -> dict[str, Any]:
    owner = index % OWNERS
    # an owner's pods on distinct nodes; one owner in six crowds them on five nodes
    # (duplicates, imbalance)
    replica = index // OWNERS
    if owner % 6 == 0:
        node_index = (owner * 7 + replica % 5) % NODES
    else:
        node_index = (owner * 37 + replica * 101) % NODES
    app = f"app-{owner:04d}"
    spec: dict[str, Any] = {
        "nodeName": f"node-{node_index:04d}",
        "containers": [
            {
                "name": "app",
                "image": f"{app}:1",
                "resources": {
                    "requests": {
                        "cpu": f"{100 + (index % 13) * 50}m",
                        "memory": f"{256 + (index % 5) * 128}Mi",
                    }
                },
            }
        ],
    }
    affinity: dict[str, Any] = {}
    if owner % 10 == 0:
        affinity["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": app}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    if owner % 21 == 0:
        affinity["nodeAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}
                ]
            }
        }
    elif owner % 11 == 0:
        affinity["nodeAffinity"] = {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 20,
                    "preference": {
                        "matchExpressions": [
                            {
                                "key": "topology.kubernetes.io/zone",
                                "operator": "In",
                                "values": ["zone-a"],
                            }
                        ]
                    },
                }
            ]
        }
    if affinity:
        spec["affinity"] = affinity
    if owner % 5 == 0:
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": app}},
            }
        ]
    phase = "Failed" if index % 97 == 0 else "Running"
    created = "2026-02-27T12:00:00Z" if index % 31 == 0 else "2026-03-01T09:00:00Z"
    restarts = 15 if index % 43 == 0 else 0
    return {
        "metadata": {
            "name": f"{app}-{index}",
            "namespace": f"team-{owner % 25}",
            "uid": f"uid-pod-{index}",
            "labels": {"app": app},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": app,
                    "uid": f"uid-rs-{owner}",
                    "controller": True,
                }
            ],
            "creationTimestamp": created,
        },
        "spec": spec,
        "status": {
            "phase": phase,
            "startTime": created,
            "containerStatuses": [
                {"name": "app", "restartCount": restarts, "state": {"running": {}}}
            ],
        },
    }


def one_pass(
    node_fit: bool,
    nodes: list[Any],
    pods: list[Any],
    caches: tuple[RequestCache, RequestCache] | None = None,
) -> tuple[float, dict[str, Any]]:
    """One cycle; ``caches`` are the parsed requests a running loop keeps across cycles."""
    policy = parse_policy(policy_document(node_fit))
    requests, non_zero = caches or (RequestCache(), RequestCache(non_missing=NON_MISSING_DEFAULTS))
    started = time.process_time()
    view = CycleView(
        now=NOW,
        nodes=cycle_nodes(nodes, policy.node_selector_parsed),
        pods=pods,
        all_nodes=nodes,
        requests=requests,
        non_zero=non_zero,
    )
    report = run_cycle(
        descheduling_cycle(policy=policy, view=view, timer=time.process_time),
        lambda request: True,
    )
    seconds = time.process_time() - started
    by_strategy = Counter(r.strategy for r in report.evicted)
    return seconds, {
        "evicted": len(report.evicted),
        "by_strategy": dict(sorted(by_strategy.items())),
        "errors": report.errors,
        "strategy_seconds": {t.strategy: round(t.seconds, 3) for t in report.strategies},
    }


def calibration_ms() -> float:
    """CPU milliseconds of a fixed pure-Python workload: compare runs on a shared machine."""
    started = time.process_time()
    table: dict[int, int] = {}
    for i in range(1_000_000):
        table[i & 1023] = table.get(i & 1023, 0) + i
    return round((time.process_time() - started) * 1000, 1)


def main(repeat: int) -> dict[str, Any]:
    nodes = [node(i) for i in range(NODES)]
    pods = [pod(i) for i in range(PODS)]
    results: dict[str, Any] = {}
    for node_fit in (False, True):
        caches = (RequestCache(), RequestCache(non_missing=NON_MISSING_DEFAULTS))
        cold, detail = one_pass(node_fit, nodes, pods, caches)
        warm = []
        for _ in range(repeat):
            seconds, detail = one_pass(node_fit, nodes, pods, caches)
            warm.append(seconds)
        results["node_fit" if node_fit else "default_evictor"] = {
            "cpu_seconds_first_cycle": round(cold, 3),
            "cpu_seconds_median": round(statistics.median(warm), 3),
            "cpu_seconds_runs": [round(s, 3) for s in warm],
            **detail,
        }
    return {
        "benchmark": "descheduler_pass",
        "nodes": NODES,
        "pods": PODS,
        "goal": "<= 3 s CPU for one pass with all strategies",
        "calibration_ms": calibration_ms(),
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "results": results,
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    options = parser.parse_args()
    figures = main(options.repeat)
    options.out.parent.mkdir(parents=True, exist_ok=True)
    options.out.write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))
