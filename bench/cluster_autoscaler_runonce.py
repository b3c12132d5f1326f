"""One cluster autoscaler RunOnce on 1,000 nodes, 10 node groups and 1,000 pending pods.

Upstream's scalability SLO is one loop within 60 s for clusters of 100 to 1,000 nodes; the goal
here is one decision within 5 s of CPU. The cluster is built through the simulation, as a real
one would look to the loop: 10 Cluster API MachineDeployments of 100 machines (2, 4, 8 or 16
cpus, 4 GiB per cpu); in the five groups labelled ``tier=burst`` every node is 95 % full (two
pods), in the other five 30 % (one pod: 500 scale-down candidates); 10 Deployments of 100 pods
each (900m to 3 cpu, ``nodeSelector: tier=burst``) wait for room: no node has that much left,
the simulated scheduler marks them all Unschedulable. The loop's informers are synced, then
``run_once`` runs ``--loops`` times:

* ``run_once_cpu_seconds``: process CPU of each ``run_once`` — everything the loop does: the
  provider's refresh over 1,000 Machines, the cluster state, the snapshot, filter-out-
  schedulable, the scale-up decision (estimator for every group, expanders), the scale-down
  planner on 1,000 nodes, the ``/scale`` writes and the status ConfigMap, through the real client
  against the in-process API server (whose CPU is counted too: it runs in this process);
* ``events_written``: the events each loop wrote before it returned (``run_once`` waits for its
  events: one ``TriggeredScaleUp`` per pod helped, up to the recorder's queue of 1,000);
* ``functions``: upstream's ``function_duration_seconds`` breakdown (CPU) of the first loop —
  ``main`` is the decision and its API writes, without the events.

Writes ``bench/results/cluster_autoscaler_runonce.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import random
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from kubescale.base.clock import VirtualClock
from kubescale.controllers.autoscaler.config.autoscaler_settings import AutoscalerSettings
from kubescale.controllers.autoscaler.core.autoscaler_loop import AutoscalerLoop
from kubescale.controllers.autoscaler.metrics.autoscaler_metrics import AutoscalerMetrics
from kubescale.kube.client import connect
from kubescale.kube.events import EventRecorder
from kubescale.kube.informer_set import InformerSet
from kubescale.kube.resources import CORE_EVENTS, NODES, PODS
from kubescale.sim.apiserver.server import ApiServer
from kubescale.sim.cluster.node_groups import MachineDeploymentGroup, NodeGroups, NodeTemplate
from kubescale.sim.cluster.scheduler import Scheduler
from kubescale.sim.cluster.workload_controllers import WorkloadControllers
from kubescale.sim.scenario.runner import SimulationClientClock

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
GROUP_CPUS = (2, 4, 8, 16, 2, 4, 8, 16, 4, 8)


def deployment(
    name: str, replicas: int, cpu_milli: int, selector: dict[str, str]
) -> dict[str, Any]:
    labels = {"app": name}
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "app",
                "image": "app",
                "resources": {"requests": {"cpu": f"{cpu_milli}m", "memory": f"{cpu_milli}Mi"}},
            }
        ]
    }
    if selector:
        spec["nodeSelector"] = selector
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }


async def run(loops: int, seed: int) -> dict[str, Any]:
    clock = VirtualClock(START)
    started = time.perf_counter()
    async with ApiServer(clock=clock, crd_dirs=[], seed=seed) as api:
        groups = [
            MachineDeploymentGroup(
                name=f"g{i}",
                template=NodeTemplate(
                    instance_type=f"c{cpus}",
                    cpu=str(cpus),
                    memory=f"{4 * cpus}Gi",
                    labels={"pool": f"g{i}", **({"tier": "burst"} if i < 5 else {})},
                    price_per_hour=0.04 * cpus,
                ),
                min_size=0,
                max_size=400,
                replicas=100,
            )
            for i, cpus in enumerate(GROUP_CPUS)
        ]
        node_groups = NodeGroups(
            api, start=START, machine_deployments=groups, rng=random.Random(seed)
        )
        await node_groups.step(clock.now())
        # load, pinned to each pool: burst-tier nodes 95 % full (2 × 47.5 %), the others 30 %
        for i, cpus in enumerate(GROUP_CPUS):
            share, count = (475, 200) if i < 5 else (300, 100)
            api.store.create(deployment(f"load-{i}", count, cpus * share, {"pool": f"g{i}"}))
        # pending: 10 × 100 pods of 900m .. 3 cpu for the burst tier, more than any node has
        # left (named after the load, so the scheduler, which breaks ties by name, places the
        # load first)
        for i in range(10):
            api.store.create(deployment(f"wave-{i}", 100, 900 + 234 * i, {"tier": "burst"}))
        controllers = WorkloadControllers(api=api)
        scheduler = Scheduler(api)
        for _ in range(3):
            await controllers.step(clock.now())
            await scheduler.step(clock.now())
        await clock.advance(30)
        nodes = len(api.store.list(NODES))
        pods = api.store.list(PODS)
        pending = sum(1 for p in pods if not p["spec"].get("nodeName"))
        with tempfile.TemporaryDirectory() as tmp:
            api.write_kubeconfig(Path(tmp) / "kubeconfig")
            async with await connect(
                kubeconfig=Path(tmp) / "kubeconfig",
                clock=SimulationClientClock(clock),
                registry=CollectorRegistry(),
            ) as client:
                informers = InformerSet(client=client)
                registry = CollectorRegistry()
                events = EventRecorder(client=client, component="cluster-autoscaler")
                loop = AutoscalerLoop(
                    client=client,
                    informers=informers,
                    settings=AutoscalerSettings(),
                    metrics=AutoscalerMetrics(registry),
                    events=events,
                )
                informers.start()
                if not await asyncio.wait_for(informers.wait_synced(), timeout=120):
                    raise SystemExit(f"caches not synced: {informers.unsynced()}")
                setup = time.perf_counter() - started
                cpu: list[float] = []
                written: list[int] = []
                functions: dict[str, float] = {}
                scaled: list[Any] = []
                for index in range(loops):
                    before = time.process_time()
                    await loop.run_once(clock.now())
                    cpu.append(time.process_time() - before)
                    written.append(len(api.store.list(CORE_EVENTS)) - sum(written))
                    if index == 0:
                        scaled = loop.report.scaled_up
                        for name in ("main", "filterOutSchedulable", "scaleUp", "scaleDown"):
                            value = registry.get_sample_value(
                                "cluster_autoscaler_function_duration_seconds_sum",
                                {"function": name},
                            )
                            functions[name] = round(value or 0.0, 3)
                    await events.flush()
                    await clock.advance(10)
                await events.close()
                await informers.stop()
        controllers.close()
        await scheduler.close()
    return {
        "nodes": nodes,
        "node_groups": len(groups),
        "pods": len(pods),
        "pending_pods": pending,
        "setup_seconds": round(setup, 1),
        "run_once_cpu_seconds": [round(c, 3) for c in cpu],
        "events_written": written,
        "functions": functions,
        "first_scale_up": scaled,
        "goal_cpu_seconds": 5.0,
        "python": sys.version.split()[0],
        "machine": platform.machine(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0], allow_abbrev=False)
    parser.add_argument("--loops", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--out", type=Path, default=Path("bench/results/cluster_autoscaler_runonce.json")
    )
    args = parser.parse_args()
    result = asyncio.run(run(args.loops, args.seed))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
