"""VPA checkpoint writing at scale: one ``StoreCheckpoints`` pass over 10,000 containers.

Set-up (not timed): a recommender model (``ClusterState``) of ``--vpas`` VPAs, each with one pod
of ``--containers-per-pod`` containers (default 1,000 × 10 = 10,000 containers, so 10,000
checkpoints), an hour of one-minute CPU samples and a memory peak per container; and
kubescale's in-process API server, started as ``kubescale apiserver`` in a child process (as a
real API server is another process; its work does not share this process's core), reached by
the real client over HTTPS with keep-alive.

Timed (wall seconds): :meth:`CheckpointStore.store` — building every VPA's checkpoints from the
model (``ClusterState.checkpoints``) and writing them, oldest first, under a deadline far
enough away not to stop it:

- ``create``: the first pass, where every checkpoint is new (a JSON patch answered 404, then a
  create: two requests each);
- ``replace``: the next passes, a JSON patch ``replace /status`` each (the steady state).

Also timed alone (CPU seconds): building every VPA's checkpoints without writing them. And
``bounded_passes``: a loop whose ``--checkpoints-timeout`` is already spent, with
``--min-checkpoints`` (default 10: that many checkpoints, oldest first) and with 0 (nothing).

Goal: a pass over 10,000 containers in <= 5 s.

    .venv/bin/python bench/vpa_checkpoint_write.py   # -> bench/results/vpa_checkpoint_write.json
    .venv/bin/python bench/vpa_checkpoint_write.py --vpas 10000 --containers-per-pod 1
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kubescale.base.clock import RealClock
from kubescale.controllers.vpa.checkpoint.checkpoint_store import CheckpointStore
from kubescale.controllers.vpa.model.cluster_state import ClusterState
from kubescale.controllers.vpa.model.go_math import go_micros
from kubescale.controllers.vpa.model.histogram import MIN_SAMPLE_WEIGHT
from kubescale.controllers.vpa.model.model_config import RecommenderConfig
from kubescale.kube.client import KubeClient, connect
from kubescale.kube.informer_set import InformerSet
from kubescale.kube.resources import NAMESPACES, VPA_CHECKPOINTS
from kubescale.objects.selectors import label_selector_from_set

REPO = Path(__file__).resolve().parent.parent
START = datetime(2024, 1, 1, tzinfo=UTC)
NAMESPACE = "bench"
SAMPLE_MINUTES = 60


def build(*, vpas: int, containers: int, seed: int) -> ClusterState:
    """The model: ``vpas`` VPAs of one pod each, an hour of history per container."""
    rng = np.random.default_rng(seed)
    cluster = ClusterState(config=RecommenderConfig())
    names = [f"c{index}" for index in range(containers)]
    pairs: list[tuple[str, str]] = []
    for workload in range(vpas):
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
    containers_state = [cluster.container_state(NAMESPACE, pod, name) for pod, name in pairs]
    states = [c.aggregator.aggregate() for c in containers_state if c is not None]
    rows = np.array([state.cpu_row for state in states], dtype=np.int64)
    store = cluster.stores.cpu
    for minute in range(SAMPLE_MINUTES):
        moment = go_micros(START + timedelta(minutes=minute))
        usage = np.floor(cpu_level * rng.lognormal(0.0, 0.3, count))
        store.add_samples_rows(
            rows, usage / 1000.0, np.full(count, MIN_SAMPLE_WEIGHT), np.full(count, moment)
        )
    first, last = go_micros(START), go_micros(START + timedelta(minutes=SAMPLE_MINUTES - 1))
    for container, state in zip(containers_state, states, strict=True):
        assert container is not None
        state.first_sample_start_us, state.last_sample_start_us = first, last
        state.total_samples_count = SAMPLE_MINUTES
        container.last_cpu_sample_start_us = last
    memory_level = rng.uniform(64 << 20, 4 << 30, count)
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
    return cluster


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a process (Linux ``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@asynccontextmanager
async def api_server(directory: Path) -> AsyncIterator[tuple[KubeClient, int]]:
    """``kubescale apiserver`` in a child process (its pid) and a client on its kubeconfig."""
    kubeconfig = directory / "kubeconfig"
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "import sys; from kubescale.cli.main import main; sys.exit(main())",
        "apiserver",
        "--kubeconfig-out",
        str(kubeconfig),
        "--log-level",
        "warning",
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        for _ in range(2400):  # up to 2 min: a loaded machine starts a process slowly
            if kubeconfig.exists() or child.returncode is not None:
                break
            await asyncio.sleep(0.05)
        if not kubeconfig.exists():
            raise RuntimeError("kubescale apiserver did not write its kubeconfig")
        client = await connect(
            kubeconfig=kubeconfig, registry=CollectorRegistry(), rng=random.Random(0)
        )
        try:
            await client.create(
                NAMESPACES,
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            )
            yield client, child.pid
        finally:
            await client.close()
    finally:
        child.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(child.wait(), timeout=10)
        except TimeoutError:
            child.kill()
            await child.wait()


async def one_pass(
    store: CheckpointStore,
    cluster: ClusterState,
    *,
    now: datetime,
    clock: RealClock,
    server: int,
    checkpoints_timeout: float = 3600.0,
) -> dict[str, Any]:
    begin, cpu, server_cpu = time.perf_counter(), time.process_time(), _cpu_seconds(server)
    result = await store.store(
        cluster, now=now, clock=clock, deadline=clock.monotonic() + checkpoints_timeout
    )
    seconds = time.perf_counter() - begin
    return {
        "wall_seconds": round(seconds, 3),
        "kubescale_cpu_seconds": round(time.process_time() - cpu, 3),
        "apiserver_cpu_seconds": round(_cpu_seconds(server) - server_cpu, 3),
        "written": result.written,
        "failed": result.failed,
        "vpas": result.vpas,
    }


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    started = time.process_time()
    cluster = build(vpas=args.vpas, containers=args.containers_per_pod, seed=args.seed)
    setup_seconds = time.process_time() - started
    keys = cluster.vpa_keys_for_checkpoints()
    now = START + timedelta(minutes=SAMPLE_MINUTES)
    begin = time.process_time()
    if hasattr(cluster, "live_containers"):
        live = cluster.live_containers()
        built = sum(
            len(cluster.checkpoints(namespace=ns, name=name, now=now, live=live))
            for ns, name in keys
        )
    else:  # the code before the one walk over the pods, for a "before" figure
        built = sum(len(cluster.checkpoints(namespace=ns, name=name, now=now)) for ns, name in keys)
    build_seconds = time.process_time() - begin
    clock = RealClock()
    with tempfile.TemporaryDirectory() as tmp:
        async with api_server(Path(tmp)) as (client, server):
            informers = InformerSet(client=client)
            store = CheckpointStore(
                client=client,
                informer=informers.informer(VPA_CHECKPOINTS),
                ignored_namespace=lambda _: False,
            )
            create = await one_pass(store, cluster, now=now, clock=clock, server=server)
            replace = [
                await one_pass(
                    store, cluster, now=now + timedelta(minutes=index), clock=clock, server=server
                )
                for index in range(1, args.passes + 1)
            ]
            # One loop whose --checkpoints-timeout was spent before MaintainCheckpoints (the
            # UpdateVPAs step took it): upstream <= 1.3 and kubescale still write
            # --min-checkpoints (oldest first); 0 is upstream 1.4's rule (nothing written).
            bounded = {}
            for minimum in (args.min_checkpoints, 0):
                store.min_checkpoints = minimum
                bounded[f"timeout_spent_min_checkpoints_{minimum}"] = await one_pass(
                    store,
                    cluster,
                    now=now + timedelta(minutes=args.passes + 1 + minimum),
                    clock=clock,
                    server=server,
                    checkpoints_timeout=0.0,
                )
            stored = await client.list(VPA_CHECKPOINTS, namespace=NAMESPACE)
    assert create["written"] == built == len(stored["items"]), (create, built)
    return {
        "containers": args.vpas * args.containers_per_pod,
        "vpas": args.vpas,
        "containers_per_pod": args.containers_per_pod,
        "checkpoints": built,
        "build_checkpoints_cpu_seconds": round(build_seconds, 3),
        "create_pass": create,
        "replace_passes": replace,
        "replace_wall_seconds_median": float(np.median([p["wall_seconds"] for p in replace])),
        "bounded_passes": bounded,
        "setup_cpu_seconds": round(setup_seconds, 3),
        "goal_seconds": 5.0,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--vpas", type=int, default=1000)
    parser.add_argument("--containers-per-pod", type=int, default=10)
    parser.add_argument("--passes", type=int, default=3, help="replace passes after the first")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--min-checkpoints",
        type=int,
        default=10,
        help="for the pass whose timeout is already spent (default: 10)",
    )
    parser.add_argument(
        "--out", type=Path, default=REPO / "bench" / "results" / "vpa_checkpoint_write.json"
    )
    args = parser.parse_args(argv)
    report = asyncio.run(measure(args))
    report.update(
        {
            "python": platform.python_version(),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "load_average_1m": round(os.getloadavg()[0], 2),
        }
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
