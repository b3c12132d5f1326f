"""Benchmark: VPA admission webhook latency and throughput, with 1,000 VPAs in the cache.

Set-up: an in-process API server (this process) holding 1,000 Deployments, each with a
ReplicaSet and a VPA whose recommendation covers every container; ``kubescale serve`` with the
webhook (``--webhook true --register-webhook false``) in a child process pinned to ONE core
(``sched_setaffinity``; this process, the load generator and the API server, runs on the
other cores when there are any). Every request is the AdmissionReview of a pod CREATE of a
random one of the 1,000 ReplicaSets, so every answer is a real match and a real patch.

Measured for pods with 1 and with 10 containers:

- ``open_loop``: requests sent at a fixed 500/s for ``--seconds`` over HTTPS (keep-alive
  connections, the server's certificate verified); latency is completion minus the *scheduled*
  send time, so a stalled server cannot hide queueing (no coordinated omission). p50, p99, max,
  errors, the rate achieved. Goal: p99 ≤ 5 ms.
- ``closed_loop``: ``--concurrency`` requests always in flight for ``--seconds``: the throughput
  one core sustains, with its latencies.
- ``in_process``: the decision alone (``AdmissionWebhook.admit`` on the same caches, no HTTP),
  timed in this process: our own time per pod.

Written to ``bench/results/webhook_latency.json`` (``--out`` to change).

Usage: ``.venv/bin/python bench/webhook_latency.py [--seconds 10] [--out FILE]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import signal
import socket
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import aiohttp
from prometheus_client import CollectorRegistry

from kubescale.base.clock import RealClock
from kubescale.certs.authority import generate_ca, issue_serving_certificate, service_dns_names
from kubescale.certs.authority import write_key_pairs as write_certificates
from kubescale.kube.client import connect
from kubescale.sim.apiserver.server import ApiServer
from kubescale.webhook.admission_routes import AdmissionWebhook
from kubescale.webhook.component import build_caches
from kubescale.webhook.webhook_config import WebhookSettings

RESULTS: Final = Path(__file__).resolve().parent / "results" / "webhook_latency.json"
VPAS: Final = 1000
RATE: Final = 500.0
SERVICE, NAMESPACE = "vpa-webhook", "kube-system"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _container_names(count: int) -> list[str]:
    return ["app"] if count == 1 else [f"c{i}" for i in range(count)]


def seed_cluster(api: ApiServer, *, containers: list[str]) -> list[str]:
    """1,000 Deployments, ReplicaSets and VPAs (with recommendations); the ReplicaSet names."""
    store = api.store
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}})
    replica_sets: list[str] = []
    recommendation = {
        "containerRecommendations": [
            {"containerName": name, "target": {"cpu": "250m", "memory": "200Mi"}}
            for name in containers
        ]
    }
    for i in range(VPAS):
        name = f"app-{i:04d}"
        labels = {"app": name}
        template = {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "x"}]}}
        spec = {"selector": {"matchLabels": labels}, "template": template}
        meta = {"name": name, "namespace": "bench"}
        deployment = store.create(
            {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": spec}
        )
        owner = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": name,
            "uid": deployment["metadata"]["uid"],
            "controller": True,
        }
        store.create(
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {
                    "name": f"{name}-rs",
                    "namespace": "bench",
                    "ownerReferences": [owner],
                },
                "spec": spec,
            }
        )
        vpa = store.create(
            {
                "apiVersion": "autoscaling.k8s.io/v1",
                "kind": "VerticalPodAutoscaler",
                "metadata": meta,
                "spec": {
                    "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                    "updatePolicy": {"updateMode": "Initial"},
                },
            }
        )
        store.update_status({**vpa, "status": {"recommendation": recommendation}})
        replica_sets.append(name)
    return replica_sets


def review_body(app: str, containers: list[str], uid: int) -> bytes:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": f"{app}-rs-",
            "namespace": "bench",
            "labels": {"app": app},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"{app}-rs",
                    "uid": "00000000-0000-0000-0000-000000000000",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "containers": [
                {
                    "name": name,
                    "image": "nginx",
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "100Mi"},
                        "limits": {"cpu": "200m", "memory": "200Mi"},
                    },
                }
                for name in containers
            ]
        },
    }
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": f"bench-{uid}",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "bench",
            "operation": "CREATE",
            "object": pod,
            "oldObject": None,
        },
    }
    return json.dumps(review).encode()


def _percentiles(seconds: list[float]) -> dict[str, float]:
    if not seconds:
        return {"p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}
    ordered = sorted(seconds)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 3)

    return {"p50_ms": at(0.50), "p99_ms": at(0.99), "max_ms": round(ordered[-1] * 1000, 3)}


class Target:
    """The HTTPS endpoint of the child ``kubescale serve`` and a keep-alive session to it."""

    def __init__(self, url: str, ca_file: Path, *, connections: int) -> None:
        self.url = url
        context = ssl.create_default_context(cafile=str(ca_file))
        connector = aiohttp.TCPConnector(ssl=context, limit=connections)
        self.session = aiohttp.ClientSession(connector=connector)
        self.server_name = f"{SERVICE}.{NAMESPACE}.svc"

    async def post(self, body: bytes) -> bool:
        async with self.session.post(
            self.url,
            data=body,
            headers={"Content-Type": "application/json", "Host": self.server_name},
            server_hostname=self.server_name,
        ) as response:
            answer = await response.json()
            return response.status == 200 and bool(answer["response"].get("patch"))

    async def close(self) -> None:
        await self.session.close()


async def open_loop(
    target: Target, bodies: Callable[[int], bytes], seconds: float
) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    total = int(RATE * seconds)
    latencies: list[float] = []
    errors = 0
    start = loop.time() + 0.1

    async def one(i: int, scheduled: float) -> None:
        nonlocal errors
        try:
            ok = await target.post(bodies(i))
        except (aiohttp.ClientError, OSError):
            ok = False
        latencies.append(loop.time() - scheduled)
        errors += 0 if ok else 1

    # One dispatcher sends each request at its scheduled moment; a late dispatcher (a busy
    # loop) still measures from the scheduled moment, so lateness is never hidden.
    in_flight: set[asyncio.Task[None]] = set()
    for i in range(total):
        scheduled = start + i / RATE
        delay = scheduled - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        task = asyncio.create_task(one(i, scheduled))
        in_flight.add(task)
        task.add_done_callback(in_flight.discard)
    await asyncio.gather(*in_flight)
    elapsed = loop.time() - start
    return {
        "rate_rps": RATE,
        "requests": total,
        "errors": errors,
        "achieved_rps": round(total / elapsed, 1),
        **_percentiles(latencies),
    }


async def closed_loop(
    target: Target, bodies: Callable[[int], bytes], seconds: float, concurrency: int
) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    latencies: list[float] = []
    errors = 0
    counter = 0
    deadline = loop.time() + seconds

    async def worker() -> None:
        nonlocal errors, counter
        while loop.time() < deadline:
            counter += 1
            sent = loop.time()
            try:
                ok = await target.post(bodies(counter))
            except (aiohttp.ClientError, OSError):
                ok = False
            latencies.append(loop.time() - sent)
            errors += 0 if ok else 1

    began = loop.time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = loop.time() - began
    return {
        "concurrency": concurrency,
        "requests": len(latencies),
        "errors": errors,
        "throughput_rps": round(len(latencies) / elapsed, 1),
        **_percentiles(latencies),
    }


async def in_process(
    api: ApiServer, kubeconfig: Path, bodies: Callable[[int], bytes]
) -> dict[str, Any]:
    kube = await connect(kubeconfig=kubeconfig, rng=random.Random(0))
    settings = WebhookSettings()
    informers, caches = build_caches(kube, settings, clock=RealClock())
    informers.start()
    try:
        await informers.wait_synced()
        webhook = AdmissionWebhook(settings=settings, registry=CollectorRegistry(), caches=caches)
        samples: list[float] = []
        for i in range(3000):
            body = bodies(i)
            began = time.perf_counter()
            answer = await webhook.admit(body, content_type="application/json")
            samples.append(time.perf_counter() - began)
            assert answer.status == "applied", answer
        decision = _percentiles(samples[500:])  # after warm-up
        return {
            "requests": len(samples) - 500,
            "p50_us": round(decision["p50_ms"] * 1000, 1),
            "p99_us": round(decision["p99_ms"] * 1000, 1),
            "mean_us": round(statistics.fmean(samples[500:]) * 1e6, 1),
        }
    finally:
        await informers.stop()
        await kube.close()


def _pin(pid: int, cores: set[int]) -> None:
    with contextlib.suppress(AttributeError, OSError):
        os.sched_setaffinity(pid, cores)


async def _wait_ready(health_port: int, process: asyncio.subprocess.Process) -> None:
    async with aiohttp.ClientSession() as session:
        for _ in range(600):
            assert process.returncode is None, "kubescale serve exited"
            with contextlib.suppress(aiohttp.ClientError):
                async with session.get(f"http://127.0.0.1:{health_port}/readyz") as response:
                    if response.status == 200:
                        return
            await asyncio.sleep(0.1)
    raise RuntimeError("kubescale serve did not become ready")


async def measure_case(
    containers_per_pod: int, *, seconds: float, concurrency: int, cores: list[int], work: Path
) -> dict[str, Any]:
    containers = _container_names(containers_per_pod)
    async with ApiServer(seed=1) as api:
        apps = seed_cluster(api, containers=containers)
        kubeconfig = work / "kubeconfig"
        api.write_kubeconfig(kubeconfig)
        rng = random.Random(containers_per_pod)
        bodies_cache = [review_body(rng.choice(apps), containers, i) for i in range(2000)]

        def bodies(i: int) -> bytes:
            return bodies_cache[i % len(bodies_cache)]

        decision = await in_process(api, kubeconfig, bodies)
        port, health = _free_port(), _free_port()
        argv = [
            sys.executable, "-m", "kubescale", "serve",
            "--port", str(port), "--bind-address", "127.0.0.1",
            "--address", f"127.0.0.1:{health}",
            "--tls-cert-file", str(work / "serverCert.pem"),
            "--tls-private-key", str(work / "serverKey.pem"),
            "--client-ca-file", str(work / "caCert.pem"),
            "--kubeconfig", str(kubeconfig), "--leader-elect", "false",
            "--webhook", "true", "--register-webhook", "false", "--log-level", "warning",
        ]  # fmt: skip
        process = await asyncio.create_subprocess_exec(*argv, stderr=asyncio.subprocess.DEVNULL)
        server_core = {cores[0]}
        _pin(process.pid, server_core)
        try:
            await _wait_ready(health, process)
            target = Target(f"https://127.0.0.1:{port}/", work / "caCert.pem", connections=16)
            try:
                await open_loop(target, bodies, min(2.0, seconds))  # warm-up, discarded
                opened = await open_loop(target, bodies, seconds)
                closed = await closed_loop(target, bodies, seconds, concurrency)
            finally:
                await target.close()
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), timeout=30)
            except TimeoutError:
                process.kill()
                await process.wait()
    return {
        "containers_per_pod": containers_per_pod,
        "server_cores": sorted(server_core),
        "open_loop": opened,
        "closed_loop": closed,
        "in_process": decision,
    }


async def measure(*, seconds: float, concurrency: int) -> dict[str, Any]:
    available = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
    if len(available) > 1:
        _pin(0, set(available[1:]))  # the load generator and API server off the server's core
    with tempfile.TemporaryDirectory(prefix="kubescale-bench-") as directory:
        work = Path(directory)
        now = RealClock().now()
        ca = generate_ca(common_name="bench-ca", now=now, days=1, key_type="ecdsa")
        serving = issue_serving_certificate(
            ca=ca, names=service_dns_names(SERVICE, NAMESPACE), now=now, days=1, key_type="ecdsa"
        )
        write_certificates(work, ca=ca, server=serving)
        cases = [
            await measure_case(
                count, seconds=seconds, concurrency=concurrency, cores=available, work=work
            )
            for count in (1, 10)
        ]
    return {
        "benchmark": "webhook_latency",
        "vpas_in_cache": VPAS,
        "goal": "p99 <= 5 ms at 500 requests/s on one core",
        "seconds_per_measurement": seconds,
        "cases": cases,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": len(available),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").splitlines()[0], allow_abbrev=False
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="result file (JSON)")
    parser.add_argument("--seconds", type=float, default=10.0, help="per measurement")
    parser.add_argument("--concurrency", type=int, default=16, help="closed-loop in flight")
    args = parser.parse_args(argv)
    result = asyncio.run(measure(seconds=args.seconds, concurrency=args.concurrency))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    for case in result["cases"]:
        opened, closed, decision = case["open_loop"], case["closed_loop"], case["in_process"]
        sys.stdout.write(
            f"{case['containers_per_pod']:>2} container(s): 500 req/s p50 {opened['p50_ms']} ms "
            f"p99 {opened['p99_ms']} ms ({opened['errors']} errors); max "
            f"{closed['throughput_rps']} req/s; decision p50 {decision['p50_us']} µs "
            f"p99 {decision['p99_us']} µs\n"
        )
    sys.stdout.write(f"written to {args.out}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
