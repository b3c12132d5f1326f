"""Benchmark: one full HPA reconcile pass over 1,000 HPAs and 10,000 pods.

Set-up: the in-process API server runs in a **child process** holding 1,000 Deployments
(``app-0000`` … ``app-0999``, 10 Running and Ready pods each, 1000m CPU requested), their
PodMetrics and 1,000 HPAs (CPU 50 %, annotated for kubescale). This process runs the HPA loop
(:class:`kubescale.controllers.hpa.hpa_loop.HpaLoop`) on the real client with its informers
synced, and times ``run_once`` with ``time.process_time`` (this process's CPU: the loop, the
client, the informers; not the API server's) and wall time:

* ``first_pass`` — every HPA seen for the first time: ``/scale`` read, metrics read, status
  written (1,000 status PUTs);
* ``steady_pass`` — a pass later, nothing changed: reads only, no writes.

Pods use 500m (50 % of 50 % → ratio 1.0): no rescale, so the pass measures the controller,
not the Deployment controller's reaction. Goal (issue 12): all reconciled within one 15 s sync
period using ≤ 1 s of CPU.

Written to ``bench/results/hpa_reconcile_1000.json``.

Usage: ``.venv/bin/python bench/hpa_reconcile_1000.py [--hpas 1000] [--pods-per-hpa 10]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import platform
import random
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from prometheus_client import CollectorRegistry

from kubescale.controllers.hpa.hpa_config import CONTROLLER_ANNOTATION, HpaSettings
from kubescale.controllers.hpa.hpa_loop import HpaLoop
from kubescale.controllers.hpa.hpa_metrics import HpaMetrics
from kubescale.kube.client import connect
from kubescale.kube.events import EventRecorder
from kubescale.kube.shared_cache import SharedCache
from kubescale.sim.apiserver.server import ApiServer

RESULTS: Final = Path(__file__).resolve().parent / "results" / "hpa_reconcile_1000.json"
NAMESPACE: Final = "bench"


def _fmt(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _populate(api: ApiServer, hpas: int, pods_per_hpa: int) -> None:
    store = api.store
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    started = _fmt(datetime.now(UTC) - timedelta(hours=1))
    for i in range(hpas):
        name = f"app-{i:04d}"
        labels = {"app": name}
        store.create(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": name, "namespace": NAMESPACE},
                "spec": {
                    "replicas": pods_per_hpa,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {"containers": [{"name": "app", "image": "app"}]},
                    },
                },
            }
        )
        for p in range(pods_per_hpa):
            pod = store.create(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": f"{name}-{p}", "namespace": NAMESPACE, "labels": labels},
                    "spec": {
                        "nodeName": "node-1",
                        "containers": [
                            {"name": "app", "image": "app", "resources": {"requests": {"cpu": "1"}}}
                        ],
                    },
                }
            )
            store.update_status(
                {
                    **pod,
                    "status": {
                        "phase": "Running",
                        "startTime": started,
                        "conditions": [
                            {"type": "Ready", "status": "True", "lastTransitionTime": started}
                        ],
                    },
                }
            )
            api.metrics.set_pod_metrics(
                namespace=NAMESPACE,
                name=f"{name}-{p}",
                containers={"app": {"cpu": "500m"}},
                labels=labels,
            )
        store.create(
            {
                "apiVersion": "autoscaling/v2",
                "kind": "HorizontalPodAutoscaler",
                "metadata": {
                    "name": name,
                    "namespace": NAMESPACE,
                    "annotations": {CONTROLLER_ANNOTATION: "kubescale"},
                },
                "spec": {
                    "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                    "minReplicas": 1,
                    "maxReplicas": 100,
                    "metrics": [
                        {
                            "type": "Resource",
                            "resource": {
                                "name": "cpu",
                                "target": {"type": "Utilization", "averageUtilization": 50},
                            },
                        }
                    ],
                },
            }
        )


def _serve(kubeconfig: str, hpas: int, pods_per_hpa: int, ready: Any, stop: Any) -> None:
    async def run() -> None:
        async with ApiServer(seed=1) as api:
            _populate(api, hpas, pods_per_hpa)
            api.write_kubeconfig(Path(kubeconfig))
            ready.set()
            # a multiprocessing Event cannot be awaited: wait for it off the event loop
            await asyncio.to_thread(stop.wait)

    asyncio.run(run())


async def _measure(kubeconfig: Path) -> dict[str, Any]:
    client = await connect(
        kubeconfig=kubeconfig, registry=CollectorRegistry(), rng=random.Random(0)
    )
    informers = SharedCache(client=client, clock=client.clock)
    events = EventRecorder(client=client, component="horizontal-pod-autoscaler")
    loop = HpaLoop(
        client=client,
        cache=informers,
        settings=HpaSettings(),
        metrics=HpaMetrics(CollectorRegistry()),
        events=events,
    )
    informers.start()
    sync_started = time.perf_counter()
    assert await informers.wait_synced(120)
    synced = time.perf_counter() - sync_started
    passes: dict[str, Any] = {"informer_sync_wall_seconds": round(synced, 3)}
    try:
        for name in ("first_pass", "steady_pass"):
            cpu, wall = time.process_time(), time.perf_counter()
            # the whole pass: every reconcile started, waited for to its end (run_once would
            # stop waiting after one sync period, leaving the rest in flight)
            started = loop.start_pass(datetime.now(UTC))
            await asyncio.gather(*started.values())
            passes[name] = {
                "cpu_seconds": round(time.process_time() - cpu, 3),
                "wall_seconds": round(time.perf_counter() - wall, 3),
                "reconciled": loop.reconciled,
            }
            await asyncio.sleep(0.5)  # let the status writes' watch events land
    finally:
        await events.close()
        await informers.stop()
        await client.close()
    return passes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0], allow_abbrev=False)
    parser.add_argument("--hpas", type=int, default=1000)
    parser.add_argument("--pods-per-hpa", type=int, default=10)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    context = multiprocessing.get_context("spawn")
    ready, stop = context.Event(), context.Event()
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        server = context.Process(
            target=_serve, args=(str(kubeconfig), args.hpas, args.pods_per_hpa, ready, stop)
        )
        server.start()
        try:
            if not ready.wait(600):
                raise RuntimeError("the API server did not start")
            passes = asyncio.run(_measure(kubeconfig))
        finally:
            stop.set()
            server.join(30)
            if server.is_alive():
                server.terminate()
    result = {
        "hpas": args.hpas,
        "pods": args.hpas * args.pods_per_hpa,
        **passes,
        "goal": "one pass within a 15 s sync period using <= 1 s of CPU",
        "python": sys.version.split()[0],
        "machine": platform.machine(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
