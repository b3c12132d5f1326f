"""CPU of one VPA recommender iteration (``RunOnce``) on a large cluster, per step (issue 29).

Set-up (not timed): the in-process API server loaded with ``bench.scale_cluster``'s cluster of
``--pods`` pods (Deployments, ReplicaSets, pods, a VPA for every other Deployment), a PodMetrics
for every pod; one :class:`RecommenderLoop` on it (checkpoints storage, defaults), its informers
synced through the real client; a first iteration (start-up + every pod fed).

Then ``--iterations`` steady iterations, each a minute later, each after about
``--churn-percent`` of the pods changed (half a label update, half a status update, as
``bench/scale_cluster.py``'s churn) and the informers caught up. Measured per iteration with
``time.process_time()`` (the whole process: the loop's steps run inline here, not on the worker
thread, so a profile sees them): the CPU of ``run_once`` and of each of its steps, and how many
pods ``LoadPods`` fed. ``--profile`` prints the top functions of the last iteration (cProfile,
cumulative).

    .venv/bin/python bench/vpa_recommender_iteration.py --pods 50000

CPU-seconds depend on the machine's load: the output records the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import os
import pstats
import random
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from prometheus_client import CollectorRegistry

from bench.scale_cluster import Shape, generate
from kubescale.base.clock import VirtualClock
from kubescale.components import by_name
from kubescale.controllers.vpa.recommender import recommender_loop as loop_module
from kubescale.controllers.vpa.recommender.recommender_config import RecommenderSettings
from kubescale.controllers.vpa.recommender.recommender_loop import RecommenderLoop
from kubescale.controllers.vpa.recommender.recommender_metrics import (
    ExecutionTimer,
    RecommenderMetrics,
)
from kubescale.kube.client import connect
from kubescale.kube.resources import PODS
from kubescale.kube.shared_cache import SharedCache
from kubescale.runtime.off_loop import OffLoop
from kubescale.sim.apiserver.server import ApiServer
from kubescale.sim.scenario.runner import SimulationClientClock
from kubescale.sim.scenario.scenario_components import component_settings

START = datetime(2026, 1, 5, tzinfo=UTC)
KINDS = {"Namespace", "Deployment", "ReplicaSet", "Pod", "VerticalPodAutoscaler"}


def _settings() -> RecommenderSettings:
    spec = by_name("vpa-recommender")
    assert spec is not None
    settings = component_settings(spec, {})
    assert isinstance(settings, RecommenderSettings)
    return settings


class StepClock:
    """Process CPU per step of ``run_once``, read from the loop's own step timer."""

    def __init__(self) -> None:
        self.steps: dict[str, float] = {}
        self._last = 0.0

    def start(self) -> None:
        self.steps = {}
        self._last = time.process_time()

    def observe(self, step: str) -> None:
        now = time.process_time()
        self.steps[step] = round(now - self._last, 4)
        self._last = now


def churn(api: ApiServer, keys: list[tuple[str, str]], count: int, start: int) -> None:
    store = api.store
    for change in range(start, start + count):
        namespace, name = keys[change % len(keys)]
        pod = store.get(PODS, name, namespace)
        if change % 2 == 0:
            pod["metadata"].setdefault("labels", {})["churn"] = str(change)
            store.update(pod)
        else:
            pod["status"]["containerStatuses"][0]["restartCount"] += 1
            store.update_status(pod)


async def settle(api: ApiServer, cache: SharedCache) -> None:
    target = str(api.store.resource_version)
    for _ in range(1000):
        api.bookmark_watches()
        if await cache.wait_for_resource_version(target, within=0.5):
            return
    raise RuntimeError("informers did not catch up")


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    clock = VirtualClock(START)
    shape = Shape(args.pods)
    api = ApiServer(clock=clock, bookmark_interval=3600.0, seed=3, history_window=args.pods * 2)
    api.store.load(o for o in generate(shape) if o["kind"] in KINDS)
    for pod in api.store.snapshots(PODS):
        api.metrics.set_pod_metrics(
            namespace=pod["metadata"]["namespace"],
            name=pod["metadata"]["name"],
            containers={"app": {"cpu": "100m", "memory": "64Mi"}},
            timestamp=START,
        )
    keys = [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in api.store.snapshots(PODS)]
    random.Random(7).shuffle(keys)
    async with api:
        with tempfile.TemporaryDirectory() as tmp:
            kubeconfig = Path(tmp) / "kubeconfig"
            api.write_kubeconfig(kubeconfig)
            client = await connect(
                kubeconfig=kubeconfig,
                clock=SimulationClientClock(clock),
                registry=CollectorRegistry(),
                rng=random.Random(0),
            )
        cache = SharedCache(client=client, clock=client.clock, rng=random.Random(1))
        loop = RecommenderLoop(
            client=client,
            cache=cache,
            settings=_settings(),
            metrics=RecommenderMetrics(CollectorRegistry()),
        )
        loop.off_loop = OffLoop("bench", run_inline=True)
        steps = StepClock()

        class Timer(ExecutionTimer):
            def __init__(self, *a: Any, **k: Any) -> None:
                super().__init__(*a, **k)
                steps.start()

            def observe_step(self, step: str) -> None:
                steps.observe(step)
                super().observe_step(step)

        setattr(loop_module, "ExecutionTimer", Timer)  # noqa: B010 - the bench's own timer
        cache.start()
        began = time.process_time()
        await asyncio.wait_for(cache.wait_synced(), timeout=600)
        synced = time.process_time() - began
        began = time.process_time()
        await loop.run_once(clock.now())
        first = time.process_time() - began
        per_iteration = int(args.pods * args.churn_percent / 100)
        iterations: list[dict[str, Any]] = []
        changed = 0
        for index in range(args.iterations):
            await clock.advance(60)
            churn(api, keys, per_iteration, changed)
            changed += per_iteration
            await settle(api, cache)
            profile = cProfile.Profile() if args.profile and index == args.iterations - 1 else None
            began = time.process_time()
            if profile is not None:
                profile.enable()
            await loop.run_once(clock.now())
            if profile is not None:
                profile.disable()
            spent = time.process_time() - began
            fed = getattr(loop.feeder, "pods_fed", None)
            iterations.append(
                {"cpu_seconds": round(spent, 3), "steps": dict(steps.steps), "pods_fed": fed}
            )
            print(json.dumps(iterations[-1]), flush=True)
            if profile is not None:
                out = io.StringIO()
                pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(40)
                print(out.getvalue())
        loop.close()
        await cache.stop()
        await client.close()
    steady = [float(entry["cpu_seconds"]) for entry in iterations]
    return {
        "pods": args.pods,
        "vpas": shape.vpas,
        "churn_pods_per_iteration": per_iteration,
        "sync_cpu_seconds": round(synced, 2),
        "first_iteration_cpu_seconds": round(first, 2),
        "steady_iteration_cpu_seconds": steady,
        "steady_mean": round(sum(steady) / len(steady), 3) if steady else None,
        "iterations": iterations,
        "load_average": os.getloadavg(),
        "cpus": os.cpu_count(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=50_000)
    parser.add_argument("--iterations", type=int, default=4)
    parser.add_argument("--churn-percent", type=float, default=1.0)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    load = os.getloadavg()
    result = asyncio.run(bench(args))
    result["load_average_start"] = load
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
