"""The VPA recommender model at scale: one loop over 10,000 containers with a day of history.

Set-up (not timed): 1,000 Deployments, each with one pod of 10 containers and a VPA, so 10,000
containers and 10,000 aggregates; a day of history already in the model — 1,440 one-minute
CPU samples per container (lognormal around a per-container level) and the day's memory peak.

One loop (timed, CPU seconds): the minute's samples go in — 10,000 CPU and 10,000 memory
samples through ``ClusterState.add_samples`` — and every VPA is recommended
(``ClusterState.recommendations``: merged states, six percentiles and the estimator chain per
container, API entries with post-processors). The loop runs ``--loops`` times, each a minute
later.

Memory per container: what the model holds after the loops (``tracemalloc`` current, numpy
arrays included) and the process's peak RSS growth (``getrusage``), both divided by 10,000.

``--recommendation-policy adaptive`` runs the same loop with kubescale's adaptive policy
(``docs/vpa-recommendation-policy.md``); so that its OOM path is exercised, ``--oom-fraction``
(default 5 %) of the containers are OOM-killed during the day of history (once each, at a
random minute; a quarter of them in its last 6 hours, so the policy's OOM hold is live).

Goals: <= 1 s per loop, <= 3 KB per container.

    .venv/bin/python bench/vpa_recommender_model.py   # -> bench/results/vpa_recommender_model.json
    .venv/bin/python bench/vpa_recommender_model.py --recommendation-policy adaptive
    # -> bench/results/vpa_recommender_model_adaptive.json
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import resource
import sys
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kubescale.controllers.vpa.model.cluster_state import ClusterState
from kubescale.controllers.vpa.model.go_math import go_micros
from kubescale.controllers.vpa.model.histogram import MIN_SAMPLE_WEIGHT
from kubescale.controllers.vpa.model.model_config import RecommenderConfig
from kubescale.controllers.vpa.model.policy.adaptive_config import (
    RECOMMENDATION_POLICIES,
    UPSTREAM_POLICY,
)
from kubescale.objects.selectors import label_selector_from_set

REPO = Path(__file__).resolve().parent.parent
START = datetime(2024, 1, 1, tzinfo=UTC)
NAMESPACE = "bench"


def _rss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def build(
    *,
    workloads: int,
    containers: int,
    seed: int,
    policy: str = UPSTREAM_POLICY,
    oom_fraction: float = 0.0,
) -> tuple[ClusterState, list[tuple[str, str]], np.ndarray, np.ndarray]:
    """The cluster with a day of history; returns it, the (pod, container) list and each
    container's CPU level (millicores) and memory level (bytes)."""
    rng = np.random.default_rng(seed)
    cluster = ClusterState(config=RecommenderConfig(recommendation_policy=policy))
    names = [f"c{index}" for index in range(containers)]
    pairs: list[tuple[str, str]] = []
    for workload in range(workloads):
        labels = {"app": f"w{workload}"}
        cluster.add_or_update_vpa(
            {
                "metadata": {"namespace": NAMESPACE, "name": f"w{workload}"},
                "spec": {
                    "targetRef": {
                        "apiVersion": "apps/v1",
                        "kind": "Deployment",
                        "name": f"w{workload}",
                    }
                },
            },
            selector=label_selector_from_set(labels),
        )
        pod = f"w{workload}-0"
        cluster.add_or_update_pod(
            namespace=NAMESPACE,
            name=pod,
            labels=labels,
            phase="Running",
            containers={name: {"cpu": 100, "memory": 256 << 20} for name in names},
            now=START,
        )
        pairs.extend((pod, name) for name in names)
    count = len(pairs)
    cpu_level = rng.uniform(20, 2000, count)
    memory_level = rng.uniform(64 << 20, 4 << 30, count)
    # A day of one-minute CPU samples, straight into the histogram columns (vectorised).
    aggregates = [cluster.container_state(NAMESPACE, pod, name) for pod, name in pairs]
    states = [container.aggregator.aggregate() for container in aggregates if container]
    rows = np.array([state.cpu_row for state in states], dtype=np.int64)
    store = cluster.stores.cpu
    for minute in range(1440):
        moment = go_micros(START + timedelta(minutes=minute))
        usage = np.floor(cpu_level * rng.lognormal(0.0, 0.3, count))
        store.add_samples_rows(
            rows, usage / 1000.0, np.full(count, MIN_SAMPLE_WEIGHT), np.full(count, moment)
        )
    first, last = go_micros(START), go_micros(START + timedelta(minutes=1439))
    for container, state in zip(aggregates, states, strict=True):
        assert container is not None
        state.first_sample_start_us, state.last_sample_start_us = first, last
        state.total_samples_count = 1440
        container.last_cpu_sample_start_us = last
    # The day's memory peak of each container.
    for (pod, name), level in zip(pairs, memory_level.tolist(), strict=True):
        cluster.add_sample(
            namespace=NAMESPACE,
            pod=pod,
            container=name,
            resource="memory",
            usage=int(level),
            request=0,
            measure_start=START,
        )
    # OOMs: a fraction of the containers, once each during the day (a quarter of them in its
    # last 6 h, so the adaptive policy's OOM hold is live at the first loop).
    killed = rng.choice(count, size=int(count * oom_fraction), replace=False)
    for position, index in enumerate(killed.tolist()):
        pod, name = pairs[index]
        minute = int(rng.integers(18 * 60, 1440) if position % 4 == 0 else rng.integers(0, 1440))
        assert cluster.record_oom(
            namespace=NAMESPACE,
            pod=pod,
            container=name,
            timestamp=START + timedelta(minutes=minute),
            memory_request=int(memory_level[index]),
        )
    return cluster, pairs, cpu_level, memory_level


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0], allow_abbrev=False)
    parser.add_argument("--workloads", type=int, default=1000)
    parser.add_argument("--containers-per-pod", type=int, default=10)
    parser.add_argument("--loops", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--recommendation-policy", choices=RECOMMENDATION_POLICIES, default=UPSTREAM_POLICY
    )
    parser.add_argument("--oom-fraction", type=float, default=0.05)
    parser.add_argument("--out", type=Path, help="default: bench/results/vpa_recommender_model")
    args = parser.parse_args(argv)
    policy = args.recommendation_policy
    if args.out is None:
        suffix = "" if policy == UPSTREAM_POLICY else f"_{policy}"
        args.out = REPO / "bench" / "results" / f"vpa_recommender_model{suffix}.json"

    rss_before = _rss_kib()
    tracemalloc.start()
    baseline = tracemalloc.get_traced_memory()[0]
    started = time.process_time()
    cluster, pairs, cpu_level, memory_level = build(
        workloads=args.workloads,
        containers=args.containers_per_pod,
        seed=args.seed,
        policy=policy,
        oom_fraction=args.oom_fraction,
    )
    setup_seconds = time.process_time() - started
    count = len(pairs)
    rng = np.random.default_rng(args.seed + 1)

    def samples_for(moment: datetime) -> list[tuple[str, str, str, str, int, datetime]]:
        cpu = np.floor(cpu_level * rng.lognormal(0.0, 0.3, count)).astype(np.int64).tolist()
        memory = (memory_level * rng.uniform(0.8, 1.05, count)).astype(np.int64).tolist()
        batch = [
            (NAMESPACE, pod, name, "cpu", usage, moment)
            for (pod, name), usage in zip(pairs, cpu, strict=True)
        ]
        batch += [
            (NAMESPACE, pod, name, "memory", usage, moment)
            for (pod, name), usage in zip(pairs, memory, strict=True)
        ]
        return batch

    # One loop under tracemalloc: what the model keeps, and the traced peak of a loop.
    moment = START + timedelta(minutes=1440)
    samples = samples_for(moment)
    tracemalloc.reset_peak()
    cluster.add_samples(samples)
    cluster.recommendations(now=moment)
    del samples
    gc.collect()
    current, peak = tracemalloc.get_traced_memory()
    harness = sys.getsizeof(pairs) + sum(sys.getsizeof(pair) for pair in pairs)
    tracemalloc.stop()

    loop_seconds: list[float] = []
    add_seconds: list[float] = []
    recommend_seconds: list[float] = []
    for loop in range(1, args.loops + 1):
        moment = START + timedelta(minutes=1440 + loop)
        samples = samples_for(moment)
        begin = time.process_time()
        accepted = cluster.add_samples(samples)
        middle = time.process_time()
        result = cluster.recommendations(now=moment)
        end = time.process_time()
        assert accepted == 2 * count
        assert sum(len(r.container_recommendations) for r in result.values()) == count
        add_seconds.append(middle - begin)
        recommend_seconds.append(end - middle)
        loop_seconds.append(end - begin)
        del samples, result
    rss_growth = (_rss_kib() - rss_before) * 1024
    report = {
        "recommendation_policy": policy,
        "oom_fraction": args.oom_fraction,
        "containers": count,
        "vpas": len(cluster.vpa_keys()),
        "loops": args.loops,
        "loop_cpu_seconds_max": max(loop_seconds),
        "loop_cpu_seconds_median": float(np.median(loop_seconds)),
        "add_samples_cpu_seconds_median": float(np.median(add_seconds)),
        "recommend_cpu_seconds_median": float(np.median(recommend_seconds)),
        "setup_cpu_seconds": setup_seconds,
        "model_bytes_per_container": (current - baseline - harness) / count,
        "histogram_bytes_per_container": (
            cluster.stores.cpu.weights_nbytes + cluster.stores.memory.weights_nbytes
        )
        / count,
        "traced_loop_peak_bytes_per_container": (peak - baseline - harness) / count,
        "peak_rss_growth_bytes_per_container": rss_growth / count,
        "python": platform.python_version(),
        "machine": platform.machine(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    for key, value in report.items():
        print(f"{key}: {value:.3f}" if isinstance(value, float) else f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
