"""CPU of one VPA updater iteration at scale (issue 29), in-process, without the rest of ``serve``.

The cluster of ``bench/scale_cluster.py`` (``--pods`` pods, a VPA ``updateMode: Auto`` for
every other Deployment) is put into kubescale's in-process API server by its bulk path; each VPA
gets a recommendation whose range holds the pods' requests (100m / 128Mi: a steady cluster, no
pod to evict), so every pod of a VPA is matched and priced each iteration as upstream's
``RunOnce`` does. One :class:`~kubescale.controllers.vpa.updater.updater_loop.UpdaterLoop`
over a :class:`~kubescale.kube.shared_cache.SharedCache` on the real client then runs
``--iterations`` iterations as ``kubescale serve --dry-run`` would plan them (steps 1-3, the
snapshot, then step 4, the decision, through
:func:`~kubescale.plans.executor.collect_plan`: nothing is written), with ``--churn`` pods
changed (a label update, as the scale bench's churn) before each but the first.

Measured: ``time.process_time()`` (CPU seconds of this process, the API server's share of the
churn's watch events and the informers' included) of each step, and how many pods the iteration
matched anew (``UpdaterLoop.matcher.matched``) and priced anew
(``UpdaterMemory.priorities.priced``), where the loop keeps them. ``--profile FILE``
writes a cProfile of the steady iterations (``pstats`` text, top 40 by cumulative time).

    .venv/bin/python bench/vpa_updater_iteration.py --pods 50000 --iterations 4 --churn 500

The figures depend on the machine's load: the JSON records the load average.
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
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from prometheus_client import CollectorRegistry

from bench.scale_cluster import Shape, generate
from kubescale.base.coordination import Coordination
from kubescale.controllers.vpa.updater.updater_config import UpdaterSettings
from kubescale.controllers.vpa.updater.updater_decision import decide
from kubescale.controllers.vpa.updater.updater_loop import UpdaterLoop
from kubescale.controllers.vpa.updater.updater_metrics import UpdaterMetrics
from kubescale.kube.client import connect
from kubescale.kube.events import EventRecorder
from kubescale.kube.resources import PODS
from kubescale.kube.shared_cache import SharedCache
from kubescale.plans.executor import collect_plan
from kubescale.sim.apiserver.server import ApiServer

RECOMMENDATION = {
    "containerRecommendations": [
        {
            "containerName": "app",
            "target": {"cpu": "100m", "memory": "128Mi"},
            "lowerBound": {"cpu": "50m", "memory": "64Mi"},
            "upperBound": {"cpu": "200m", "memory": "256Mi"},
        }
    ]
}


def _objects(shape: Shape) -> list[dict[str, Any]]:
    objects = []
    for obj in generate(shape):
        if obj["kind"] == "VerticalPodAutoscaler":
            obj["status"] = {"recommendation": RECOMMENDATION}
        objects.append(obj)
    return objects


async def _settle(api: ApiServer, cache: SharedCache) -> None:
    target = str(api.store.resource_version)
    for _ in range(600):
        api.bookmark_watches()
        if await cache.wait_for_resource_version(target, within=0.1):
            return
    raise RuntimeError("the informers did not catch up")


async def measure(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """The report, and the profile's text (empty without ``--profile``)."""
    shape = Shape(args.pods)
    api = ApiServer(history_window=max(10_000, args.pods))
    api.store.load(_objects(shape))
    keys = [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in api.store.snapshots(PODS)]
    rng = random.Random(args.seed)
    report: dict[str, Any] = {
        "pods": args.pods,
        "vpas": shape.vpas,
        "churn_per_iteration": args.churn,
        "load_average_start": os.getloadavg()[0],
        "iterations": [],
    }
    profiler = cProfile.Profile() if args.profile else None
    async with api:
        with tempfile.TemporaryDirectory() as work:
            kubeconfig = Path(work) / "kubeconfig"
            api.write_kubeconfig(kubeconfig)
            client = await connect(kubeconfig=kubeconfig, registry=CollectorRegistry())
            cache = SharedCache(
                client=client,
                clock=client.clock,
                rng=random.Random(2),
                coordination=Coordination.ONE_BRAIN,
            )
            settings = UpdaterSettings(use_admission_controller_status=False, dry_run=True)
            metrics = UpdaterMetrics(CollectorRegistry())
            events = EventRecorder(client=client, component="vpa-updater")
            loop = UpdaterLoop(
                client=client, cache=cache, settings=settings, metrics=metrics, events=events
            )
            cache.start()
            await cache.wait_synced()
            try:
                for index in range(args.iterations):
                    if index:
                        for namespace, name in rng.sample(keys, args.churn):
                            pod = api.store.get(PODS, name, namespace)
                            pod["metadata"].setdefault("labels", {})["churn"] = str(index)
                            api.store.update(pod)
                    await _settle(api, cache)
                    now = client.clock.now()
                    if profiler is not None and index:
                        profiler.enable()
                    begin = time.process_time()
                    snapshot = await loop.snapshot(now)
                    snapshot_seconds = time.process_time() - begin
                    assert snapshot is not None
                    begin = time.process_time()
                    plan, _ = collect_plan(
                        decide(snapshot, loop.memory, now, settings=settings, metrics=metrics)
                    )
                    decide_seconds = time.process_time() - begin
                    if profiler is not None:
                        profiler.disable()
                    matcher = getattr(loop, "matcher", None)
                    report["iterations"].append(
                        {
                            "snapshot_cpu_seconds": round(snapshot_seconds, 3),
                            "decide_cpu_seconds": round(decide_seconds, 3),
                            "matched_anew": getattr(matcher, "matched", None),
                            "priced_anew": getattr(
                                getattr(loop.memory, "priorities", None), "priced", None
                            ),
                            "vpas": len(snapshot.vpas),
                            "pods": sum(len(entry.pods) for entry in snapshot.vpas),
                            "intents": len(plan),
                        }
                    )
                    print(json.dumps(report["iterations"][-1]), file=sys.stderr, flush=True)
            finally:
                await events.close()
                await cache.stop()
                loop.close()
                await client.close()
    report["load_average_end"] = os.getloadavg()[0]
    text = io.StringIO()
    if profiler is not None:
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(40)
    return report, text.getvalue()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pods", type=int, default=50_000)
    parser.add_argument("--iterations", type=int, default=4)
    parser.add_argument("--churn", type=int, default=500, help="pods changed per iteration")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", default="", help="write a cProfile text report here")
    parser.add_argument("--out", default="", help="write the JSON report here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report, profile = asyncio.run(measure(args))
    if args.profile:
        Path(args.profile).write_text(profile)
    text = json.dumps(report, indent=2)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
