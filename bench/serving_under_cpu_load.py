"""Benchmark: does the process keep serving — webhook, ``/healthz``, Lease renewal — while CPU
work holds its event loop? (issue 27 item 11)

A child ``kubescale serve`` process (leader election on, against an in-process API server in
this process; election timings upstream's defaults: lease 15 s, renew deadline 10 s, retry 2 s)
serves the real VPA admission webhook route and the scheduler extender over a 5,000-node
:class:`ClusterCache` (``bench/extender_filter.py``'s cluster: 50,000 pods). Two scenarios:

- ``extender_flood``: ``--flood-clients`` (32) clients post 5,000-node filters back to back
  (closed loop, one connection each) for ``--seconds``;
- ``heavy_loops``: the leader runs a leader-only loop whose every iteration is one descheduling
  cycle over 1,000 nodes / 30,000 pods with all ten strategies and ``nodeFit``
  (``bench/descheduler_pass.py``'s cluster) — seconds of pure CPU each, back to back, called
  directly on the serving loop (a synthetic loop: it shows the loop runner's passes only);
- ``real_loops``: the real systems, as ``kubescale serve`` wires them from its flags: the
  descheduler (the same policy, ``nodeFit`` on, at most 50 evictions a cycle,
  ``--descheduling-interval 1s``) and the cluster autoscaler (``--cloud-provider clusterapi``,
  ``--scan-interval 1s``) over a cluster in the API server of 1,000 Cluster API nodes
  (10 MachineDeployments of 100 32-cpu machines) and ``descheduler_pass.py``'s 30,000 pods
  bound to them (their 1,000 ReplicaSets too), the VPA webhook serving; both loops overrun
  their interval (seconds each), so they run back to back. The child is
  ``python -m kubescale serve`` from ``--tree``;
- ``all_loops``: ``real_loops`` plus the VPA recommender and updater (``--recommender-interval``
  and ``--updater-interval`` 1 s: back to back) and the HPA controller (upstream's 15 s sync
  period), over the same cluster with PodMetrics for every pod, a ``Recreate`` VPA per
  ReplicaSet (1,000) and 250 CPU-utilization HPAs on the first ReplicaSets.

Meanwhile this process measures, for ``--seconds``:

- ``webhook``: an AdmissionReview every 50 ms over HTTPS (keep-alive); latency from the
  *scheduled* send time (a stalled server cannot hide queueing): p50/p99/max, errors;
- ``healthz``: ``GET /healthz`` every 100 ms: p50/p99/max, non-200 answers;
- ``lease``: the Lease in the API server, read every 20 ms: the gaps between successive
  ``renewTime`` changes as this process observed them (max, p99; the renew period is 2 s),
  holder changes (``leaseTransitions``);
- ``timeline`` (kept until the child has exited, so teardown is measured too): every Lease
  renewal and holder change as stored, stalls of this process's event loop (> 0.5 s: the
  in-process API server answers nothing meanwhile), the API server's requests slower than 1 s,
  the child's log lines about the Lease; ``api_server_stalls_in_window`` and
  ``lease_after_window`` summarise it. The child's stderr goes to
  ``<out>_<scenario>_<label>.log``;
- ``flood``: filter answers by kind (``ok``, ``busy``: the explicit refusal of the new
  turns, ``error``) and the p50/p99 of answered ones.

``--tree DIR`` runs the server from another source tree (the code before the change: ``git
archive <commit> | tar -x -C DIR``); the load generator and the API server are this tree's.
Both run ``nice``; on a shared machine the figures are noisy — run before and after back to
back. Written to ``bench/results/serving_under_cpu_load.json`` (``--out``).

Usage: ``.venv/bin/python bench/serving_under_cpu_load.py [--tree DIR] [--label before]
[--scenarios extender_flood,heavy_loops,real_loops,all_loops] [--seconds 30]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import platform
import signal
import socket
import ssl
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import aiohttp
import descheduler_pass  # bench/: the script's directory is first on sys.path
import extender_filter
from aiohttp import web
from prometheus_client import CollectorRegistry

from kubescale.base.clock import RealClock
from kubescale.cli.main import build_parser
from kubescale.cli.main import main as kubescale_main
from kubescale.cli.serve_config import serve_config_from_args
from kubescale.controllers.hpa.hpa_config import CONTROLLER_ANNOTATION as HPA_CONTROLLER_ANNOTATION
from kubescale.kube.resources import LEASES, NODES, PODS
from kubescale.runtime import event_loop
from kubescale.runtime.process import LoopSpec, serve
from kubescale.scheduling.pod_resources import NON_MISSING_DEFAULTS, RequestCache
from kubescale.sim.apiserver.server import ApiServer
from kubescale.sim.cluster.node_groups import MachineDeploymentGroup, NodeGroups, NodeTemplate
from kubescale.webhook.admission_routes import AdmissionWebhook
from kubescale.webhook.webhook_config import WebhookSettings

OFFLOAD: Any
try:  # the extender's worker thread (trees since the change; the server's tree decides)
    from kubescale.extender import offload as OFFLOAD
except ImportError:  # pragma: no cover - a tree from before the change
    OFFLOAD = None

SCRIPT: Final = Path(__file__).resolve()
BENCH: Final = SCRIPT.parent
RESULTS: Final = BENCH / "results" / "serving_under_cpu_load.json"
SERVER_NAME: Final = "kubescale.kube-system.svc"
WEBHOOK_EVERY: Final = 0.05
HEALTHZ_EVERY: Final = 0.1
LEASE_EVERY: Final = 0.02


# -- the server (child process) -----------------------------------------------------------------


class _DeschedulerPassLoop:
    """A leader-only loop: one full descheduling cycle per iteration (pure CPU)."""

    def __init__(self) -> None:
        self._module = descheduler_pass
        self._nodes = [descheduler_pass.node(i) for i in range(descheduler_pass.NODES)]
        self._pods = [descheduler_pass.pod(i) for i in range(descheduler_pass.PODS)]
        self._caches = (RequestCache(), RequestCache(non_missing=NON_MISSING_DEFAULTS))

    @property
    def name(self) -> str:
        return "descheduler-pass"

    async def run_once(self, now: datetime) -> None:
        self._module.one_pass(True, self._nodes, self._pods, self._caches)


class _Idle:
    @property
    def name(self) -> str:
        return "idle"

    async def run_once(self, now: datetime) -> None:
        return None


async def _server(args: argparse.Namespace) -> int:
    certs = Path(args.certs)
    argv = [
        "serve", "--port", str(args.port), "--bind-address", "127.0.0.1",
        "--address", f"127.0.0.1:{args.health_port}",
        "--tls-cert-file", str(certs / "serverCert.pem"),
        "--tls-private-key", str(certs / "serverKey.pem"),
        "--client-ca-file", str(certs / "caCert.pem"),
        "--kubeconfig", args.kubeconfig, "--log-level", "warning",
    ]  # fmt: skip
    config = serve_config_from_args(build_parser().parse_args(argv))
    extender, _names = extender_filter.build()
    offloaded = False
    if args.offload and OFFLOAD is not None:  # as the extender component wires it
        extender.decisions = OFFLOAD.DecisionThread(OFFLOAD.DeferredWrites())
        offloaded = True
    print(f"extender decisions offloaded: {offloaded}", file=sys.stderr, flush=True)
    webhook = AdmissionWebhook(settings=WebhookSettings(), registry=CollectorRegistry())
    heavy = args.scenario == "heavy_loops"
    loop: Any = _DeschedulerPassLoop() if heavy else _Idle()
    return await serve(
        config,
        clock=RealClock(),
        loops=[LoopSpec(loop=loop, interval=0.5 if heavy else 1.0)],
        mounts=[webhook.mount, extender.mount],
    )


# -- the real loops' cluster (this process's API server) ----------------------------------------

REAL_GROUPS: Final = 10
REAL_NODES_PER_GROUP: Final = 100
REAL_MAX_EVICTIONS: Final = 50


def _real_policy() -> dict[str, Any]:
    policy = descheduler_pass.policy_document(True)
    policy["maxNoOfPodsToEvictTotal"] = REAL_MAX_EVICTIONS
    return policy


async def _real_cluster(api: Any) -> dict[str, int]:
    """1,000 Cluster API nodes and ``descheduler_pass``'s 30,000 pods bound to them."""
    groups = [
        MachineDeploymentGroup(
            name=f"pool-{i}",
            template=NodeTemplate(
                instance_type="c32",
                cpu="32",
                memory="128Gi",
                labels={"disk": "ssd" if i % 2 else "hdd"},
                zones=descheduler_pass.ZONES,
                price_per_hour=1.28,
            ),
            min_size=0,
            max_size=2 * REAL_NODES_PER_GROUP,
            replicas=REAL_NODES_PER_GROUP,
        )
        for i in range(REAL_GROUPS)
    ]
    started = datetime.now(UTC)
    node_groups = NodeGroups(api, start=started, machine_deployments=groups)
    await node_groups.step(started)
    names = sorted(str(n["metadata"]["name"]) for n in api.store.list(NODES))
    for index in range(25):
        api.store.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"team-{index}"}}
        )
    for owner in range(descheduler_pass.OWNERS):
        app = f"app-{owner:04d}"
        labels = {"app": app}
        api.store.create(
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {"name": app, "namespace": f"team-{owner % 25}", "labels": labels},
                "spec": {
                    "replicas": descheduler_pass.PODS // descheduler_pass.OWNERS,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {"containers": [{"name": "app", "image": f"{app}:1"}]},
                    },
                },
            }
        )
    for index in range(descheduler_pass.PODS):
        made = descheduler_pass.pod(index)
        bound = int(made["spec"]["nodeName"].rsplit("-", 1)[1])
        made["spec"]["nodeName"] = names[bound % len(names)]
        made["metadata"].pop("uid")
        made["metadata"].pop("creationTimestamp")
        status = made.pop("status")
        created = api.store.create({"apiVersion": "v1", "kind": "Pod", **made})
        conditions = [{"type": "Ready", "status": "True"}] if status["phase"] == "Running" else []
        api.store.update_status({**created, "status": {**status, "conditions": conditions}})
    return {"nodes": len(names), "pods": descheduler_pass.PODS}


ALL_LOOPS_HPAS: Final = 250
"""HPAs on the first ReplicaSets (every ReplicaSet has a VPA; those with an HPA also have one,
on CPU utilization, so the VPA's CPU recommendation is left to the HPA's own rules)."""


def _all_loops_cluster(api: Any) -> dict[str, int]:
    """``_real_cluster`` plus what the VPA and HPA loops read: PodMetrics for every pod, a VPA
    (``updateMode: Recreate``) per ReplicaSet and ``ALL_LOOPS_HPAS`` HPAs (``autoscaling/v2``,
    CPU utilization 50 %, owned by kubescale)."""
    for index in range(descheduler_pass.PODS):
        made = descheduler_pass.pod(index)
        requests = made["spec"]["containers"][0]["resources"]["requests"]
        cpu = int(requests["cpu"].removesuffix("m"))
        memory = int(requests["memory"].removesuffix("Mi"))
        api.metrics.set_pod_metrics(
            namespace=made["metadata"]["namespace"],
            name=made["metadata"]["name"],
            containers={"app": {"cpu": f"{cpu * (3 + index % 7) // 10}m",
                                "memory": f"{memory * (4 + index % 5) // 10}Mi"}},
            labels=made["metadata"]["labels"],
        )  # fmt: skip
    for owner in range(descheduler_pass.OWNERS):
        app = f"app-{owner:04d}"
        namespace = f"team-{owner % 25}"
        target = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": app}
        api.store.create(
            {
                "apiVersion": "autoscaling.k8s.io/v1",
                "kind": "VerticalPodAutoscaler",
                "metadata": {"name": app, "namespace": namespace},
                "spec": {"targetRef": target, "updatePolicy": {"updateMode": "Recreate"}},
            }
        )
        if owner >= ALL_LOOPS_HPAS:
            continue
        api.store.create(
            {
                "apiVersion": "autoscaling/v2",
                "kind": "HorizontalPodAutoscaler",
                "metadata": {
                    "name": app,
                    "namespace": namespace,
                    "annotations": {HPA_CONTROLLER_ANNOTATION: "kubescale"},
                },
                "spec": {
                    "scaleTargetRef": target,
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
    return {"vpas": descheduler_pass.OWNERS, "hpas": ALL_LOOPS_HPAS}


SAMPLED_SERVE: Final = """
import collections, json, os, runpy, sys, threading, time
counts = collections.Counter()
main = threading.main_thread().ident
out = os.environ["KUBESCALE_BENCH_SAMPLES"]
def sample():
    taken = 0
    while True:
        time.sleep(0.02)
        frame = sys._current_frames().get(main)
        stack = []
        while frame is not None and len(stack) < 5:
            code = frame.f_code
            where = code.co_filename.rsplit("/kubescale/", 1)[-1].rsplit("/site-packages/", 1)[-1]
            stack.append(f"{where}:{code.co_name}")
            frame = frame.f_back
        counts[" < ".join(stack)] += 1
        taken += 1
        if taken % 100 == 0:
            with open(out, "w") as sink:
                json.dump({"samples": taken, "top": counts.most_common(40)}, sink)
threading.Thread(target=sample, daemon=True).start()
sys.argv = ["kubescale", *sys.argv[1:]]
runpy.run_module("kubescale", run_name="__main__")
"""
"""``--sample-serving-thread``: the child's main thread (the serving event loop) sampled every
20 ms, its five innermost frames counted — where the serving loop spends its time (a thread
waiting for the GIL is counted where it waits)."""


def _real_server_argv(
    args: argparse.Namespace, port: int, health: int, work: Path, *, all_loops: bool = False
) -> list[str]:
    policy = work / "descheduler-policy.json"
    policy.write_text(json.dumps(_real_policy()))
    return [
        "-m", "kubescale", "serve", "--port", str(port), "--bind-address", "127.0.0.1",
        "--address", f"127.0.0.1:{health}",
        "--tls-cert-file", str(work / "serverCert.pem"),
        "--tls-private-key", str(work / "serverKey.pem"),
        "--client-ca-file", str(work / "caCert.pem"),
        "--kubeconfig", str(work / "kubeconfig"), "--log-level", args.server_log_level,
        "--webhook", "true", "--register-webhook", "false",
        "--cloud-provider", "clusterapi", "--scan-interval", "1s",
        "--policy-config-file", str(policy), "--descheduling-interval", "1s",
        *(
            ["--recommender-interval", "1s", "--updater-interval", "1s",
             "--horizontal-pod-autoscaler-sync-period", "15s"]
            if all_loops
            else ["--vpa-recommender", "false", "--vpa-updater", "false",
                  "--hpa-controller", "false"]
        ),
    ]  # fmt: skip


# -- the measurements (this process) ------------------------------------------------------------


def _percentiles(values: list[float]) -> dict[str, float | int]:
    if not values:
        return {"count": 0}
    ordered = sorted(values)

    def pick(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {
        "count": len(ordered),
        "p50_ms": round(statistics.median(ordered) * 1000, 1),
        "p99_ms": round(pick(0.99) * 1000, 1),
        "max_ms": round(ordered[-1] * 1000, 1),
    }


def _review(uid: int) -> bytes:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
           "spec": {"containers": [{"name": "app", "image": "x"}]}}  # fmt: skip
    request = {"uid": f"u{uid}", "kind": {"group": "", "version": "v1", "kind": "Pod"},
               "resource": {"group": "", "version": "v1", "resource": "pods"},
               "namespace": "default", "operation": "CREATE", "object": pod}  # fmt: skip
    return json.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    ).encode()


async def _webhook(session: aiohttp.ClientSession, url: str, seconds: float) -> dict[str, Any]:
    latencies: list[float] = []
    errors = 0
    loop = asyncio.get_running_loop()
    start = loop.time()

    async def one(i: int, scheduled: float) -> None:
        nonlocal errors
        try:
            async with session.post(
                url, data=_review(i), server_hostname=SERVER_NAME,
                headers={"Content-Type": "application/json"},
            ) as response:  # fmt: skip
                answer = await response.json()
            if response.status != 200 or answer["response"]["uid"] != f"u{i}":
                errors += 1
                return
        except (aiohttp.ClientError, TimeoutError, OSError, KeyError):
            errors += 1
            return
        latencies.append(loop.time() - scheduled)

    tasks = []
    for i in range(int(seconds / WEBHOOK_EVERY)):
        scheduled = start + i * WEBHOOK_EVERY
        await asyncio.sleep(max(0.0, scheduled - loop.time()))
        tasks.append(asyncio.create_task(one(i, scheduled)))
    await asyncio.gather(*tasks)
    return {**_percentiles(latencies), "errors": errors}


async def _healthz(port: int, seconds: float) -> dict[str, Any]:
    latencies: list[float] = []
    bad = 0
    loop = asyncio.get_running_loop()
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        end = loop.time() + seconds
        while loop.time() < end:
            began = loop.time()
            try:
                async with session.get(f"http://127.0.0.1:{port}/healthz") as response:
                    await response.read()
                    if response.status != 200:
                        bad += 1
            except (aiohttp.ClientError, TimeoutError, OSError):
                bad += 1
            latencies.append(loop.time() - began)
            await asyncio.sleep(HEALTHZ_EVERY)
    return {**_percentiles(latencies), "not_200": bad}


async def _lease(api: Any, seconds: float) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    last: str | None = None
    last_seen = loop.time()
    gaps: list[float] = []
    holders: set[str] = set()
    transitions: set[int] = set()
    while loop.time() < end:
        leases = api.store.list(LEASES)
        if leases:
            spec = leases[0].get("spec") or {}
            holders.add(str(spec.get("holderIdentity")))
            transitions.add(int(spec.get("leaseTransitions") or 0))
            renewed = spec.get("renewTime")
            if renewed != last:
                now = loop.time()
                if last is not None:
                    gaps.append(now - last_seen)
                last, last_seen = renewed, now
        await asyncio.sleep(LEASE_EVERY)
    gaps.append(loop.time() - last_seen)  # the gap still open at the end counts too
    return {
        "renewals": len(gaps) - 1,
        "renew_gap_max_s": round(max(gaps), 2),
        "renew_gap_p99_s": round(sorted(gaps)[min(len(gaps) - 1, int(0.99 * len(gaps)))], 2),
        "renew_gap_median_s": round(statistics.median(gaps), 2),
        "holders": sorted(holders),
        "lease_transitions_seen": sorted(transitions),
    }


async def _flood(url: str, context: ssl.SSLContext, clients: int, seconds: float) -> dict[str, Any]:
    names = [f"node-{i:05d}" for i in range(extender_filter.NODES)]
    bodies = [
        json.dumps(
            {"Pod": extender_filter.pending_pod("plain", i), "Nodes": None, "NodeNames": names}
        ).encode()
        for i in range(clients)
    ]
    counts = {"ok": 0, "busy": 0, "error": 0}
    answered: list[float] = []
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds

    async def client(body: bytes) -> None:
        connector = aiohttp.TCPConnector(ssl=context, limit=1)
        async with aiohttp.ClientSession(
            connector=connector, timeout=aiohttp.ClientTimeout(total=30)
        ) as session:
            while loop.time() < end:
                began = loop.time()
                try:
                    async with session.post(
                        url, data=body, server_hostname=SERVER_NAME,
                        headers={"Content-Type": "application/json"},
                    ) as response:  # fmt: skip
                        raw = await response.read()
                    error = json.loads(raw).get("Error") if response.status == 200 else "status"
                except (aiohttp.ClientError, TimeoutError, OSError, ValueError):
                    error = "transport"
                if not error:
                    counts["ok"] += 1
                    answered.append(loop.time() - began)
                elif "busy" in str(error):
                    counts["busy"] += 1
                    await asyncio.sleep(0.05)  # kube-scheduler moves on to the next pod
                else:
                    counts["error"] += 1
                    await asyncio.sleep(0.05)

    await asyncio.gather(*(client(body) for body in bodies))
    return {**counts, "answered": _percentiles(answered)}


async def _loop_latencies(health: int) -> dict[str, dict[str, float]]:
    """Each loop's iterations and mean iteration time (the child's
    ``kubescale_loop_execution_latency_seconds``)."""
    sums: dict[str, dict[str, float]] = {}
    with contextlib.suppress(aiohttp.ClientError, TimeoutError):
        timeout = aiohttp.ClientTimeout(total=30)
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.get(f"http://127.0.0.1:{health}/metrics") as response,
        ):
            text = await response.text()
        for line in text.splitlines():
            if line.startswith("cluster_autoscaler_function_duration_seconds_sum{"):
                function = line.split('function="', 1)[1].split('"', 1)[0]
                sums.setdefault(f"cluster-autoscaler cpu: {function}", {})["sum"] = float(
                    line.rsplit(" ", 1)[1]
                )
            for metric in ("vpa_recommender", "vpa_updater"):
                prefix = f'{metric}_execution_latency_seconds_sum{{step="'
                if line.startswith(prefix):
                    step, value = line[len(prefix) :].split('"}', 1)
                    sums.setdefault(f"{metric} step: {step}", {})["sum"] = float(value)
            for suffix in ("_sum", "_count"):
                prefix = f'kubescale_loop_execution_latency_seconds{suffix}{{loop="'
                if line.startswith(prefix):
                    loop, value = line[len(prefix) :].split('"}', 1)
                    sums.setdefault(loop, {})[suffix[1:]] = float(value)
    return {
        loop: {
            "iterations": int(values.get("count", 0)),
            "mean_s": round(values.get("sum", 0.0) / max(values.get("count", 0.0), 1.0), 2),
        }
        for loop, values in sorted(sums.items())
    }


class _Timeline:
    """What happened when, in seconds from the measurement window's start (wall clock, as the
    child's log lines): the Lease's renewals and holders as the API server stores them, stalls of
    this process's event loop (the in-process API server's loop: it answers nothing meanwhile),
    the bench's own phases, and the child's log lines about the Lease. Kept until the child has
    exited, so what happens after the window (teardown) is measured too."""

    def __init__(self) -> None:
        self.start = time.time()
        self.events: list[tuple[float, str]] = []

    def mark(self, what: str, at: float | None = None) -> None:
        moment = time.time() if at is None else at
        self.events.append((round(moment - self.start, 2), what))

    def sorted(self) -> list[list[Any]]:
        return [[at, what] for at, what in sorted(self.events)]


class _TimedApiServer(ApiServer):
    """The in-process API server, its slow requests (> 1 s from received to answered, watches
    aside) marked on the scenario's timeline: what kept it from answering the Lease."""

    timeline: _Timeline | None = None

    def build_app(self) -> web.Application:
        app = super().build_app()

        @web.middleware
        async def timed(request: web.Request, handler: Any) -> web.StreamResponse:
            began = time.time()
            try:
                return await handler(request)  # type: ignore[no-any-return]
            finally:
                took = time.time() - began
                if took > 1.0 and self.timeline is not None and "watch=" not in request.path_qs:
                    what = f"{request.method} {request.path_qs[:120]}"
                    self.timeline.mark(f"API server answered in {took:.2f}s: {what}", at=began)

        app.middlewares.append(timed)
        return app


async def _watch_bench_loop(timeline: _Timeline, stop: asyncio.Event) -> None:
    """Stalls of this process's loop (> 0.5 s): the API server answers nothing meanwhile."""
    every = 0.05
    last = time.time()
    while not stop.is_set():
        await asyncio.sleep(every)
        now = time.time()
        late = now - last - every
        if late > 0.5:
            timeline.mark(f"bench loop (API server) stalled {late:.2f}s", at=now - late)
        last = now


async def _watch_lease(api: Any, timeline: _Timeline, stop: asyncio.Event) -> None:
    """Every renewTime and holder change the API server stores, until ``stop``."""
    last: tuple[Any, Any] | None = None
    seen = time.time()
    while not stop.is_set():
        leases = api.store.snapshots(LEASES)
        if leases:
            spec = leases[0].get("spec") or {}
            now_record = (spec.get("renewTime"), spec.get("holderIdentity"))
            if now_record != last:
                now = time.time()
                holder = str(now_record[1] or "")[:12] or "(released)"
                timeline.mark(
                    f"lease renewTime={now_record[0]} holder={holder} "
                    f"transitions={spec.get('leaseTransitions')} gap={now - seen:.2f}s"
                )
                last, seen = now_record, now
        await asyncio.sleep(LEASE_EVERY)


async def _child_log(stream: asyncio.StreamReader, timeline: _Timeline, path: Path | None) -> None:
    """The child's stderr: lines about the Lease go into the timeline, all into ``path``."""
    keep = ("lease", "leader", "renew")
    sink = path.open("w") if path is not None else None
    try:
        while line := await stream.readline():
            text = line.decode(errors="replace").rstrip()
            if sink is not None:
                print(text, file=sink, flush=True)
            if any(word in text.lower() for word in keep) and len(timeline.events) < 2000:
                timeline.mark(f"child: {text[:300]}")
    finally:
        if sink is not None:
            sink.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def _wait_leading(api: Any, health: int, process: asyncio.subprocess.Process) -> float:
    began = time.monotonic()
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
        for _ in range(3000):
            if process.returncode is not None:
                raise RuntimeError("kubescale serve exited")
            ready = False
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with session.get(f"http://127.0.0.1:{health}/readyz") as response:
                    ready = response.status == 200
            leases = api.store.list(LEASES)
            if ready and leases and (leases[0].get("spec") or {}).get("holderIdentity"):
                return time.monotonic() - began
            await asyncio.sleep(0.1)
    raise RuntimeError("kubescale serve did not become ready and leading")


async def _scenario(name: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    api_server = _TimedApiServer()
    async with api_server as api:
        kubeconfig = work / "kubeconfig"
        api.write_kubeconfig(kubeconfig)
        port, health = _free_port(), _free_port()
        environ = dict(os.environ)
        tree = args.tree
        environ["PYTHONPATH"] = str(tree)
        cluster: dict[str, int] = {}
        if name in ("real_loops", "all_loops"):
            cluster = await _real_cluster(api)
            if name == "all_loops":
                cluster.update(_all_loops_cluster(api))
            # The API server's objects (30,000 pods, their PodMetrics, their history) out of the
            # cyclic GC's generations: a full collection over them paused this process — the
            # API server — for seconds (0.8 s of CPU each on an idle machine).
            gc.collect()
            gc.freeze()
            server = _real_server_argv(args, port, health, work, all_loops=name == "all_loops")
            if args.sample_serving_thread:
                samples = args.out.with_name(f"{args.out.stem}_{name}_{args.label}_samples.json")
                environ["KUBESCALE_BENCH_SAMPLES"] = str(samples)
                server = ["-c", SAMPLED_SERVE, *server[2:]]  # instead of "-m kubescale"
            argv = ["nice", "-n", str(args.nice), sys.executable, *server]
        else:
            argv = [
                "nice", "-n", str(args.nice), sys.executable, str(SCRIPT),
                "--role", "server", "--scenario", name, "--port", str(port),
                "--health-port", str(health), "--certs", str(work),
                "--kubeconfig", str(kubeconfig),
                "--offload", "true" if args.offload else "false",
            ]  # fmt: skip
        timeline = _Timeline()
        api_server.timeline = timeline
        process = await asyncio.create_subprocess_exec(
            *argv, env=environ, cwd=str(tree), stderr=asyncio.subprocess.PIPE
        )
        assert process.stderr is not None
        log_path = args.out.with_name(f"{args.out.stem}_{name}_{args.label}.log")
        log_path.parent.mkdir(parents=True, exist_ok=True)
        watching = asyncio.Event()
        watchers = [
            asyncio.create_task(_child_log(process.stderr, timeline, log_path)),
            asyncio.create_task(_watch_bench_loop(timeline, watching)),
            asyncio.create_task(_watch_lease(api, timeline, watching)),
        ]
        figures: dict[str, Any] = {}
        try:
            startup = await _wait_leading(api, health, process)
            timeline.mark("child ready and leading")
            context = ssl.create_default_context(cafile=str(work / "caCert.pem"))
            base = f"https://127.0.0.1:{port}"
            connector = aiohttp.TCPConnector(ssl=context, limit=8)
            async with aiohttp.ClientSession(
                connector=connector, timeout=aiohttp.ClientTimeout(total=30)
            ) as session:
                await _webhook(session, f"{base}/", 1.0)  # warm-up: connections, first calls
                jobs: dict[str, Any] = {
                    "webhook": _webhook(session, f"{base}/", args.seconds),
                    "healthz": _healthz(health, args.seconds),
                    "lease": _lease(api, args.seconds),
                }
                if name == "extender_flood":
                    jobs["flood"] = _flood(
                        f"{base}/scheduler/filter", context, args.flood_clients, args.seconds
                    )
                timeline.mark("window start")
                results = await asyncio.gather(*jobs.values())
                timeline.mark("window end")
            figures.update(zip(jobs, results, strict=True))
            figures["loops"] = await _loop_latencies(health)
            timeline.mark("child /metrics read")
            figures["startup_seconds"] = round(startup, 1)
            figures["server_exit_code"] = process.returncode
            return figures
        finally:
            if process.returncode is None:
                timeline.mark("SIGTERM sent to the child")
                process.send_signal(signal.SIGTERM)
                try:
                    await asyncio.wait_for(process.wait(), timeout=60)
                except TimeoutError:
                    timeline.mark("child killed (no exit 60 s after SIGTERM)")
                    process.kill()
                    await process.wait()
            timeline.mark(f"child exited ({process.returncode})")
            watching.set()
            await asyncio.gather(*watchers, return_exceptions=True)
            if cluster:
                # Counted once the child has exited: this process's loop is the API server's,
                # and a count that blocks it starves the child's Lease renewals (it did: see
                # _evicted).
                figures["cluster"] = cluster
                figures["evicted_pods"] = _evicted(api, cluster["pods"])
            figures["api_server_stalls_in_window"] = _stalls_in_window(timeline)
            figures["timeline"] = timeline.sorted()
            figures["lease_after_window"] = _lease_after_window(timeline)


def _evicted(api: Any, pods: int) -> int:
    """Pods evicted (deleted or terminating), read from the store's own objects.

    Not ``store.list``: that deep-copies the 30,000 pods (twice, before). Run right after the
    window, on this process's loop — the in-process API server's — it blocked the server for
    42 s on a loaded machine (load average 11): the child's Lease renewal went unanswered, it
    gave up the Lease at its renew deadline (upstream's rule) and took it again once the server
    answered. That was the "Lease lost after the window" of every earlier run: the bench's own
    count, not kubescale (issue 27 item 11)."""
    current = api.store.snapshots(PODS)
    terminating = sum(1 for p in current if p["metadata"].get("deletionTimestamp"))
    return terminating + (pods - len(current))


def _stalls_in_window(timeline: _Timeline) -> dict[str, Any]:
    """Stalls of the in-process API server's loop within the window (none: every figure of the
    window is the child's own)."""
    start = [at for at, what in timeline.events if what == "window start"]
    end = [at for at, what in timeline.events if what == "window end"]
    if not start or not end:
        return {}
    stalls = [
        float(what.split("stalled ", 1)[1].rstrip("s"))
        for at, what in timeline.events
        if "stalled" in what and start[0] <= at <= end[0]
    ]
    return {"count": len(stalls), "max_s": max(stalls, default=0.0)}


def _lease_after_window(timeline: _Timeline) -> dict[str, Any]:
    """From the window's end to the child's exit: the longest renew gap, holder changes."""
    ends = [at for at, what in timeline.events if what == "window end"]
    if not ends:
        return {}
    after = [(at, what) for at, what in sorted(timeline.events) if at >= ends[0]]
    renewals = [at for at, what in after if what.startswith("lease renewTime=")]
    gaps = [b - a for a, b in zip([ends[0], *renewals], renewals, strict=False)]
    exited = [at for at, what in after if what.startswith("child exited")]
    if exited and renewals:
        gaps.append(exited[0] - renewals[-1])
    return {
        "renewals": len(renewals),
        "renew_gap_max_s": round(max(gaps), 2) if gaps else None,
        "lost": any("leadership lost" in what for _, what in after),
        "released": any("holder=(released)" in what for _, what in after),
    }


async def _measure(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        argv = ["certs", "--service", "kubescale", "--namespace", "kube-system"]
        assert kubescale_main([*argv, "--out", str(work), "--key-type", "ecdsa"]) == 0
        for name in args.scenarios.split(","):
            results[name] = await _scenario(name, args, work)
            print(name, json.dumps(results[name]), flush=True)
    return {
        "benchmark": "serving_under_cpu_load",
        "label": args.label,
        "tree": str(args.tree),
        "seconds": args.seconds,
        "flood_clients": args.flood_clients,
        "offload": args.offload,
        "scenarios": results,
        "load_average": os.getloadavg(),
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--role", choices=("bench", "server"), default="bench")
    parser.add_argument("--scenarios", default="extender_flood,heavy_loops")
    parser.add_argument("--scenario", default="extender_flood")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--flood-clients", type=int, default=32)
    parser.add_argument(
        "--nice",
        type=int,
        default=10,
        help="niceness added to the server's (default 10; 0 when the bench itself runs nice)",
    )
    parser.add_argument(
        "--server-log-level",
        default="warning",
        help="the real loops' child's --log-level (its stderr: <out>_<scenario>_<label>.log)",
    )
    parser.add_argument(
        "--sample-serving-thread",
        action="store_true",
        help="real_loops/all_loops: sample the child's serving thread (<out>_<scenario>_<label>"
        "_samples.json)",
    )
    parser.add_argument("--tree", default=None)
    parser.add_argument("--label", default="after")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--health-port", type=int, default=0)
    parser.add_argument("--certs", default="")
    parser.add_argument("--kubeconfig", default="")
    parser.add_argument(
        "--offload",
        type=lambda text: text == "true",
        default=True,
        help="server: run the extender's decisions on its worker thread when the tree has one "
        "(true/false; default true, as the extender component does)",
    )
    args = parser.parse_args(argv)
    args.tree = Path(args.tree).resolve() if args.tree else BENCH.parent
    if args.role == "server":
        return event_loop.run(_server(args))  # uvloop, as kubescale serve runs
    figures = asyncio.run(_measure(args))
    out: Path = args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    previous = json.loads(out.read_text()) if out.exists() else {}
    previous[args.label] = figures
    out.write_text(json.dumps(previous, indent=2) + "\n")
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
