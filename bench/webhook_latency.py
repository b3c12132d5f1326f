"""Benchmark: VPA admission webhook throughput and latency on one core, 1,000 VPAs cached.

Set-up: an in-process API server (this process) holding 1,000 Deployments, each with a
ReplicaSet and a VPA whose recommendation covers every container; ``kubescale serve`` with the
webhook (``--webhook true --register-webhook false``, every other component of that tree's
``serve --help`` turned off) in a child process pinned to ONE core
(``sched_setaffinity``, as ``taskset`` does); this process — the load generator and the API
server — is pinned to the other core(s). Every request is the AdmissionReview of a pod CREATE of
a random one of the 1,000 ReplicaSets, so every answer is a real match and a real patch, over
HTTPS keep-alive connections (the server's certificate verified). The load generator is a lean
HTTP/1.1 client (asyncio protocol, uvloop when installed) so that it is not the bottleneck.

Measured for pods with 1 and with 10 containers, each ``--repeat`` times:

- ``closed_loop``: ``--concurrency`` (8) connections, each sending its next request when the
  previous answer arrives, for ``--seconds``: the throughput one core sustains (its ceiling).
- ``open_loop``: requests sent at a fixed 500, 1,000 and 2,000 per second (``--rates``) for
  ``--seconds``, each on an idle connection of a pool of 64 (queued for one when all are busy);
  latency is completion minus the *scheduled* send time, so a saturated server cannot hide
  queueing (no coordinated omission): p50, p99, max, errors, the rate achieved.
- for both: the server's CPU time per request (``/proc/<pid>/stat`` utime + stime over the
  measurement), which contention on a shared machine hardly changes, and its CPU utilisation
  (near 1.0 in the closed loop means the server, not the load generator, was the limit).
- ``in_process``: the decision alone (``AdmissionWebhook.admit`` on the same caches, no HTTP,
  this tree's code): with the memo (every pod shape seen before) and without it.

Figures of every repetition are kept; the summary gives the min and the median. Results go to
``bench/results/webhook_latency.json`` under ``runs.<--label>`` (other labels in the file are
kept), so a ``before`` run on an older tree (``--server-pythonpath``: the child server imports
``kubescale`` from there) and an ``after`` run on this one sit side by side.

The load average before and after, and ``KUBESCALE_EVENT_LOOP`` (the server's loop), are
recorded with each run. ``--server-profile FILE`` runs the server under cProfile (its figures are
then inflated; for finding where the time goes).

Usage::

    .venv/bin/python bench/webhook_latency.py --label after
    git archive main | tar -x -C /tmp/before
    .venv/bin/python bench/webhook_latency.py --label before --server-pythonpath /tmp/before
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import re
import shutil
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import aiohttp
from prometheus_client import CollectorRegistry

from kubescale.base.clock import RealClock
from kubescale.certs.authority import generate_ca, issue_serving_certificate, service_dns_names
from kubescale.certs.authority import write_key_pairs as write_certificates
from kubescale.controllers.vpa.admission.admission_caches import AdmissionCaches
from kubescale.kube.client import connect
from kubescale.kube.shared_cache import SharedCache
from kubescale.sim.apiserver.server import ApiServer
from kubescale.webhook.admission_routes import AdmissionWebhook
from kubescale.webhook.webhook_config import WebhookSettings

RESULTS: Final = Path(__file__).resolve().parent / "results" / "webhook_latency.json"
VPAS: Final = 1000
RATES: Final = (500.0, 1000.0, 2000.0)
OPEN_LOOP_CONNECTIONS: Final = 64
GOALS: Final = {
    "closed_loop_rps": {"1": 6000, "10": 2000},
    "p99_ms_at_1000_rps": 5.0,
}
SERVICE, NAMESPACE = "vpa-webhook", "kube-system"
CLOCK_TICKS: Final = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


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
    apps: list[str] = []
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
        rs_meta = {"name": f"{name}-rs", "namespace": "bench", "ownerReferences": [owner]}
        store.create(
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": rs_meta, "spec": spec}
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
        apps.append(name)
    return apps


def review_body(app: str, containers: list[str], uid: int) -> bytes:
    owner = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": f"{app}-rs",
        "uid": "00000000-0000-0000-0000-000000000000",
        "controller": True,
    }
    resources = {
        "requests": {"cpu": "100m", "memory": "100Mi"},
        "limits": {"cpu": "200m", "memory": "200Mi"},
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": f"{app}-rs-",
            "namespace": "bench",
            "labels": {"app": app},
            "ownerReferences": [owner],
        },
        "spec": {
            "containers": [
                {"name": name, "image": "nginx", "resources": resources} for name in containers
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


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a process (Linux ``/proc``); 0 where unavailable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


# -- the load generator: HTTP/1.1 keep-alive over TLS, one request in flight per connection --


class _Connection(asyncio.Protocol):
    """One keep-alive connection; :meth:`post` sends a request and resolves on its answer."""

    def __init__(self) -> None:
        self.transport: Any = None
        self._buffer = bytearray()
        self._waiter: asyncio.Future[bool] | None = None
        self._length = -1
        self._header_end = -1
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # uvloop's transports are not asyncio.Transport subclasses

    def post(self, request: bytes) -> asyncio.Future[bool]:
        assert self.transport is not None
        self._waiter = asyncio.get_running_loop().create_future()
        self._buffer.clear()
        self._length = self._header_end = -1
        self.transport.write(request)
        return self._waiter

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        if self._header_end < 0:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            self._header_end = end + 4
            head = bytes(buffer[:end]).lower()
            start = head.find(b"content-length:")
            if start < 0:
                self._length = 0
            else:
                # The value ends at the line's end, or at the head's end when it is the last header.
                stop = head.find(b"\r\n", start)
                self._length = int(head[start + 15 : stop if stop >= 0 else len(head)])
        if len(buffer) - self._header_end < self._length:
            return
        body = bytes(buffer[self._header_end : self._header_end + self._length])
        ok = buffer.startswith(b"HTTP/1.1 200") and b'"patch"' in body
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(ok)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(ConnectionError("connection lost"))


class Target:
    """The child server's HTTPS endpoint: a pool of keep-alive connections to it."""

    def __init__(self, port: int, ca_file: Path) -> None:
        self.port = port
        self.context = ssl.create_default_context(cafile=str(ca_file))
        self.server_name = f"{SERVICE}.{NAMESPACE}.svc"
        self._idle: list[_Connection] = []
        self._all: list[_Connection] = []
        self._waiting: deque[asyncio.Future[_Connection]] = deque()

    async def open(self, count: int) -> None:
        for _ in range(count - len(self._all)):
            connection = await self._connect()
            self._all.append(connection)
            self._idle.append(connection)

    async def _connect(self) -> _Connection:
        _, connection = await asyncio.get_running_loop().create_connection(
            _Connection,
            "127.0.0.1",
            self.port,
            ssl=self.context,
            server_hostname=self.server_name,
        )
        return connection

    async def _live(self, connection: _Connection) -> _Connection:
        """``connection``, or a new one in its place when the server has closed it: the server
        closes a connection that sent no request within its read-header timeout (Go's
        ReadHeaderTimeout), and a write to a closed transport is dropped without an error."""
        if not connection.closed:
            return connection
        fresh = await self._connect()
        self._all[self._all.index(connection)] = fresh
        return fresh

    def request(self, body: bytes) -> bytes:
        head = (
            f"POST / HTTP/1.1\r\nHost: {self.server_name}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        return head.encode() + body

    async def post(self, request: bytes) -> bool:
        if self._idle:
            connection = self._idle.pop()
        else:
            waiter: asyncio.Future[_Connection] = asyncio.get_running_loop().create_future()
            self._waiting.append(waiter)
            connection = await waiter
        try:
            connection = await self._live(connection)
            return await connection.post(request)
        finally:
            if self._waiting:
                self._waiting.popleft().set_result(connection)
            else:
                self._idle.append(connection)

    def close(self) -> None:
        for connection in self._all:
            if connection.transport is not None:
                connection.transport.close()


async def open_loop(
    target: Target, requests: Callable[[int], bytes], rate: float, seconds: float, pid: int
) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    total = int(rate * seconds)
    latencies: list[float] = []
    errors = 0
    start = loop.time() + 0.05

    async def one(i: int, scheduled: float) -> None:
        nonlocal errors
        try:
            ok = await target.post(requests(i))
        except OSError:
            ok = False
        latencies.append(loop.time() - scheduled)
        errors += 0 if ok else 1

    # One dispatcher sends each request at its scheduled moment; a late dispatcher (a busy
    # loop) still measures from the scheduled moment, so lateness is never hidden.
    cpu_before = _cpu_seconds(pid)
    in_flight: set[asyncio.Task[None]] = set()
    for i in range(total):
        scheduled = start + i / rate
        delay = scheduled - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        task = asyncio.create_task(one(i, scheduled))
        in_flight.add(task)
        task.add_done_callback(in_flight.discard)
    await asyncio.gather(*in_flight)
    elapsed = loop.time() - start
    cpu = _cpu_seconds(pid) - cpu_before
    return {
        "rate_rps": rate,
        "requests": total,
        "errors": errors,
        "achieved_rps": round(total / elapsed, 1),
        "server_cpu_us_per_request": round(cpu / total * 1e6, 1),
        **_percentiles(latencies),
    }


async def closed_loop(
    target: Target, requests: Callable[[int], bytes], seconds: float, concurrency: int, pid: int
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
                ok = await target.post(requests(counter))
            except OSError:
                ok = False
            latencies.append(loop.time() - sent)
            errors += 0 if ok else 1

    cpu_before = _cpu_seconds(pid)
    began = loop.time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = loop.time() - began
    cpu = _cpu_seconds(pid) - cpu_before
    count = max(1, len(latencies))
    return {
        "concurrency": concurrency,
        "requests": len(latencies),
        "errors": errors,
        "throughput_rps": round(len(latencies) / elapsed, 1),
        "server_cpu_us_per_request": round(cpu / count * 1e6, 1),
        "server_cpu_utilization": round(cpu / elapsed, 3),
        **_percentiles(latencies),
    }


# -- the closed loop again, driven by wrk (C): a ceiling above the Python load generator's ----

_WRK_SCRIPT: Final = """
local requests, i = {}, 0
init = function(args)
  for line in io.lines(args[1]) do
    requests[#requests + 1] = wrk.format("POST", "/?timeout=10s", {
      ["Host"] = args[2], ["Content-Type"] = "application/json"}, line)
  end
end
request = function()
  i = i % #requests + 1
  return requests[i]
end
"""
_WRK_FIGURES: Final = {
    "throughput_rps": re.compile(r"Requests/sec:\s+([\d.]+)"),
    "requests": re.compile(r"(\d+) requests in"),
    "non_2xx": re.compile(r"Non-2xx or 3xx responses:\s+(\d+)"),
}
_WRK_PERCENTILE: Final = re.compile(r"^\s+(50|99)%\s+([\d.]+)(us|ms|s)\s*$", re.MULTILINE)


def wrk_binary() -> str | None:
    """Debian's wrk, installed when missing and this is a root shell with apt-get."""
    found = shutil.which("wrk")
    if found is None and os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["apt-get", "install", "-y", "-qq", "wrk"], capture_output=True, check=False)
        found = shutil.which("wrk")
    return found


async def closed_loop_wrk(
    wrk: str, *, port: int, bodies: list[bytes], seconds: float, concurrency: int, pid: int,
    work: Path,
) -> dict[str, Any]:  # fmt: skip
    """wrk, one thread, ``concurrency`` keep-alive connections, the same bodies in turn (wrk
    does not verify the certificate; it checks nothing but the status)."""
    script, lines = work / "bodies.lua", work / "bodies.ndjson"
    script.write_text(_WRK_SCRIPT, encoding="utf-8")
    lines.write_bytes(b"\n".join(bodies) + b"\n")
    cpu_before = _cpu_seconds(pid)
    process = await asyncio.create_subprocess_exec(
        wrk, "-t1", f"-c{concurrency}", f"-d{max(1, round(seconds))}s", "--latency",
        "-s", str(script),
        f"https://127.0.0.1:{port}/", "--", str(lines), f"{SERVICE}.{NAMESPACE}.svc",
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    output = (await process.communicate())[0].decode()
    cpu = _cpu_seconds(pid) - cpu_before
    figures: dict[str, Any] = {"concurrency": concurrency, "load_generator": "wrk"}
    for name, pattern in _WRK_FIGURES.items():
        match = pattern.search(output)
        figures[name] = float(match.group(1)) if match else 0.0
    units = {"us": 1e-3, "ms": 1.0, "s": 1e3}
    for quantile, value, unit in _WRK_PERCENTILE.findall(output):
        figures[f"p{quantile}_ms"] = round(float(value) * units[unit], 2)
    count = max(1.0, figures["requests"])
    figures["server_cpu_us_per_request"] = round(cpu / count * 1e6, 1)
    figures["server_cpu_utilization"] = round(cpu / seconds, 3)
    if process.returncode != 0 or not figures["throughput_rps"]:
        raise RuntimeError(f"wrk failed: {output}")
    return figures


# -- the decision alone ---------------------------------------------------------------------


async def in_process(kubeconfig: Path, bodies: Callable[[int], bytes]) -> dict[str, Any]:
    kube = await connect(kubeconfig=kubeconfig, rng=random.Random(0))
    cache = SharedCache(client=kube, clock=RealClock())
    caches = AdmissionCaches(cache=cache)
    cache.start()
    try:
        await cache.wait_synced()
        result: dict[str, Any] = {}
        for name, entries in (("cached", 4096), ("uncached", 0)):
            webhook = AdmissionWebhook(
                settings=WebhookSettings(), registry=CollectorRegistry(), caches=caches
            )
            webhook.memo.max_entries = entries
            for i in range(2000):  # every pod shape seen once
                await webhook.admit(bodies(i), content_type="application/json")
            samples: list[float] = []
            for i in range(2000):
                body = bodies(i)
                began = time.perf_counter()
                answer = await webhook.admit(body, content_type="application/json")
                samples.append(time.perf_counter() - began)
                assert answer.status == "applied", answer
            decision = _percentiles(samples)
            result[name] = {
                "requests": len(samples),
                "p50_us": round(decision["p50_ms"] * 1000, 1),
                "p99_us": round(decision["p99_ms"] * 1000, 1),
                "mean_us": round(statistics.fmean(samples) * 1e6, 1),
            }
        return result
    finally:
        await cache.stop()
        await kube.close()


# -- one case: a server, its measurements ----------------------------------------------------


def _pin(pid: int, cores: set[int]) -> None:
    with contextlib.suppress(AttributeError, OSError):
        os.sched_setaffinity(pid, cores)


async def _wait_ready(health_port: int, process: asyncio.subprocess.Process) -> None:
    # A bounded wait per probe: a probe that connects while the server is still starting must
    # not hang the benchmark (seen on an idle machine: the first probe never returned).
    probe = aiohttp.ClientTimeout(total=2.0)
    async with aiohttp.ClientSession(timeout=probe) as session:
        for _ in range(1200):
            assert process.returncode is None, "kubescale serve exited"
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with session.get(f"http://127.0.0.1:{health_port}/readyz") as response:
                    if response.status == 200:
                        return
            await asyncio.sleep(0.1)
    raise RuntimeError("kubescale serve did not become ready")


def _other_components_off(environ: dict[str, str], cwd: str | None) -> list[str]:
    """``--<component> false`` for every component of the server's tree but the webhook (with
    ``--kubeconfig`` their ``auto`` would run them on the measured core). Read from that tree's
    ``serve --help``, so a tree with other components gets its own flags."""
    shown = subprocess.run(
        [sys.executable, "-m", "kubescale", "serve", "--help"],
        env={**environ, "COLUMNS": "200"},
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    flags = sorted(set(re.findall(r"\[(--[a-z-]+) \{auto,true,false\}\]", shown)))
    return [arg for flag in flags if flag != "--webhook" for arg in (flag, "false")]


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per figure: min and median over the repetitions."""
    summary: dict[str, Any] = {}
    for key, value in runs[0].items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            values = [run[key] for run in runs]
            summary[key] = {"min": min(values), "median": statistics.median(values)}
    return summary


async def measure_case(
    containers_per_pod: int, *, args: argparse.Namespace, cores: list[int], work: Path
) -> dict[str, Any]:
    containers = _container_names(containers_per_pod)
    async with ApiServer(seed=1) as api:
        apps = seed_cluster(api, containers=containers)
        kubeconfig = work / "kubeconfig"
        api.write_kubeconfig(kubeconfig)
        rng = random.Random(containers_per_pod)
        bodies = [review_body(rng.choice(apps), containers, i) for i in range(4000)]
        decision = None
        if args.server_pythonpath is None:
            decision = await in_process(kubeconfig, lambda i: bodies[i % len(bodies)])
        port, health = _free_port(), _free_port()
        profiler = ["-m", "cProfile", "-o", str(args.server_profile)] if args.server_profile else []
        argv = [
            sys.executable, *profiler, "-m", "kubescale", "serve",
            "--port", str(port), "--bind-address", "127.0.0.1",
            "--address", f"127.0.0.1:{health}",
            "--tls-cert-file", str(work / "serverCert.pem"),
            "--tls-private-key", str(work / "serverKey.pem"),
            "--client-ca-file", str(work / "caCert.pem"),
            "--kubeconfig", str(kubeconfig), "--leader-elect", "false",
            "--webhook", "true", "--register-webhook", "false", "--log-level", "warning",
        ]  # fmt: skip
        environ = dict(os.environ)
        cwd = None
        if args.server_pythonpath is not None:
            # ``-m`` puts the working directory first on sys.path: run from the other tree.
            environ["PYTHONPATH"] = cwd = str(args.server_pythonpath)
        argv += _other_components_off(environ, cwd)
        process = await asyncio.create_subprocess_exec(
            *argv, stderr=asyncio.subprocess.DEVNULL, env=environ, cwd=cwd
        )
        server_core = {cores[0]}
        _pin(process.pid, server_core)
        target = Target(port, work / "caCert.pem")
        try:
            await _wait_ready(health, process)
            requests = [target.request(body) for body in bodies]

            def request(i: int) -> bytes:
                return requests[i % len(requests)]

            await target.open(OPEN_LOOP_CONNECTIONS)
            await open_loop(target, request, 500.0, min(2.0, args.seconds), process.pid)  # warm-up
            closed_runs: list[dict[str, Any]] = []
            open_runs: dict[str, list[dict[str, Any]]] = {str(int(r)): [] for r in args.rates}
            wrk_runs: list[dict[str, Any]] = []
            wrk = wrk_binary()
            for _ in range(args.repeat):
                closed_runs.append(
                    await closed_loop(target, request, args.seconds, args.concurrency, process.pid)
                )
                if wrk is not None:
                    wrk_runs.append(
                        await closed_loop_wrk(
                            wrk,
                            port=port,
                            bodies=bodies,
                            seconds=args.seconds,
                            concurrency=args.concurrency,
                            pid=process.pid,
                            work=work,
                        )
                    )
                for rate in args.rates:
                    open_runs[str(int(rate))].append(
                        await open_loop(target, request, rate, args.seconds, process.pid)
                    )
        finally:
            target.close()
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), timeout=30)
            except TimeoutError:
                process.kill()
                await process.wait()
    return {
        "containers_per_pod": containers_per_pod,
        "server_cores": sorted(server_core),
        "closed_loop": {"summary": _summary(closed_runs), "runs": closed_runs},
        "closed_loop_wrk": (
            {"summary": _summary(wrk_runs), "runs": wrk_runs} if wrk_runs else None
        ),
        "open_loop": {
            rate: {"summary": _summary(runs), "runs": runs} for rate, runs in open_runs.items()
        },
        "in_process": decision,
    }


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    available = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
    if len(available) > 1:
        _pin(0, set(available[1:]))  # the load generator and API server off the server's core
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    with tempfile.TemporaryDirectory(prefix="kubescale-bench-") as directory:
        work = Path(directory)
        now = RealClock().now()
        ca = generate_ca(common_name="bench-ca", now=now, days=1, key_type="ecdsa")
        serving = issue_serving_certificate(
            ca=ca, names=service_dns_names(SERVICE, NAMESPACE), now=now, days=1, key_type="ecdsa"
        )
        write_certificates(work, ca=ca, server=serving)
        cases = [
            await measure_case(count, args=args, cores=available, work=work)
            for count in args.containers
        ]
    return {
        "server_pythonpath": str(args.server_pythonpath or ""),
        "seconds_per_measurement": args.seconds,
        "repetitions": args.repeat,
        "load_average_before": [round(x, 2) for x in load],
        "load_average_after": [
            round(x, 2) for x in (os.getloadavg() if hasattr(os, "getloadavg") else (0, 0, 0))
        ],
        "server_event_loop": os.environ.get("KUBESCALE_EVENT_LOOP", "") or "default",
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cases": cases,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": len(available),
    }


def _print(label: str, run: dict[str, Any]) -> None:
    for case in run["cases"]:
        closed = case["closed_loop"]["summary"]
        line = (
            f"[{label}] {case['containers_per_pod']:>2} container(s): closed loop "
            f"{closed['throughput_rps']['median']:.0f} req/s median "
            f"(max {max(r['throughput_rps'] for r in case['closed_loop']['runs']):.0f}), "
            f"server CPU {closed['server_cpu_us_per_request']['median']:.0f} µs/request"
        )
        wrk = case.get("closed_loop_wrk")
        if wrk:
            line += (
                f"; wrk closed loop {wrk['summary']['throughput_rps']['median']:.0f} req/s median "
                f"(max {max(r['throughput_rps'] for r in wrk['runs']):.0f}), server CPU "
                f"{wrk['summary']['server_cpu_us_per_request']['median']:.0f} µs/request"
            )
        for rate, data in case["open_loop"].items():
            s = data["summary"]
            line += (
                f"; {rate}/s p50 {s['p50_ms']['median']} p99 {s['p99_ms']['median']} ms "
                f"({s['server_cpu_us_per_request']['median']:.0f} µs CPU)"
            )
        sys.stdout.write(line + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").splitlines()[0], allow_abbrev=False
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="result file (JSON)")
    parser.add_argument("--label", default="after", help="name of this run in the file")
    parser.add_argument("--seconds", type=float, default=5.0, help="per measurement")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions of each measurement")
    parser.add_argument("--concurrency", type=int, default=8, help="closed-loop connections")
    parser.add_argument(
        "--rates", type=lambda s: [float(r) for r in s.split(",")], default=list(RATES)
    )
    parser.add_argument(
        "--containers", type=lambda s: [int(c) for c in s.split(",")], default=[1, 10]
    )
    parser.add_argument(
        "--server-pythonpath",
        type=Path,
        default=None,
        help="run the server from this source tree (e.g. an export of main, for 'before')",
    )
    parser.add_argument(
        "--server-profile",
        type=Path,
        default=None,
        help="run the server under cProfile, writing its stats here (figures then inflated)",
    )
    args = parser.parse_args(argv)
    with contextlib.suppress(ImportError):
        import uvloop  # noqa: PLC0415 - optional: a faster load generator when installed

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    run = asyncio.run(measure(args))
    previous: dict[str, Any] = {}
    if args.out.exists():
        with contextlib.suppress(ValueError):
            previous = json.loads(args.out.read_text(encoding="utf-8"))
    runs = previous.get("runs", {}) if isinstance(previous.get("runs"), dict) else {}
    runs[args.label] = run
    document = {
        "benchmark": "webhook_latency",
        "vpas_in_cache": VPAS,
        "goals": GOALS,
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    _print(args.label, run)
    sys.stdout.write(f"written to {args.out}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
