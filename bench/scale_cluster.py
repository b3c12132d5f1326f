"""``kubescale serve`` at Kubernetes' own limits (issue 29): memory, CPU and cache sync vs. pods.

A cluster shaped like Kubernetes' largest supported one, scaled by ``--pods`` (the full size is
150,000 pods): ``pods / 30`` nodes (5,000), ``pods / 15`` Deployments (10,000) of 15 replicas
each with their ReplicaSets, a VPA (``updateMode: Auto``) for every other Deployment, an HPA
(CPU at 70 %) for ``pods / 150`` of the others (1,000) and as many PodDisruptionBudgets, in
``deployments / 100`` namespaces. Every pod is bound to a node and ``Running`` with a ready
container; objects carry what kube-apiserver would store (``managedFields`` included).

The API server is kubescale's in-process one (``kubescale.sim.apiserver``) in a child process
(this file run as ``apiserver``), the objects put straight into its storage by its bulk path
(:meth:`~kubescale.sim.apiserver.store.ObjectStore.load`: no 180,000 POSTs). ``kubescale
serve`` runs as another child process with every component on (the webhook, the VPA recommender
and updater, the HPA controller, the cluster autoscaler with ``--cloud-provider clusterapi``,
the descheduler and the scheduler extender), leader election off. Measured on that process:

- ``synced_seconds``: from its start until every ``<component>-caches`` check of
  ``/readyz?verbose`` is ``[+]`` (each component's own time too);
- ``rss_mib``: ``VmRSS`` from ``/proc/<pid>/status`` when synced and at the end of each steady
  minute, ``peak_rss_mib`` its ``VmHWM``;
- ``cpu_seconds_per_minute``: user + system CPU (``/proc/<pid>/stat``) of each steady minute
  (``--steady-seconds`` long, ``--minutes`` of them, after ``--settle-seconds``) while about
  ``--churn-percent`` (1 %) of the pods change in that minute — half a label update, half a
  status update (restart count and condition time), spread over the minute — and, with
  ``--metrics`` (the default), every pod's PodMetrics new each minute (:class:`MetricsFeed`:
  usage within the HPAs' tolerance) and the HPA controller reconciling every HPA
  (``--hpa-selection all``), so the recommender reads and the HPAs decide as in a real
  cluster; ``--no-metrics`` is the shape measured before (no usage for either to read);
- ``webhook``: the same process started again with only the webhook on: RSS when synced and
  after a steady minute.

Results: ``bench/results/scale_cluster.json`` (a run per ``--pods`` value, by ``--label``, other
labels kept) and ``bench/results/scale_cluster.md`` (a table of every run in the JSON).

    .venv/bin/python bench/scale_cluster.py --pods 1000 10000 --label before
    .venv/bin/python bench/scale_cluster.py --quick       # 50 pods, short windows: a smoke test

The figures depend on the machine's load: the JSON records the load average and CPU count.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import platform
import re
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kubescale.base.clock import Clock, RealClock
from kubescale.certs.authority import generate_ca, issue_serving_certificate, service_dns_names
from kubescale.certs.authority import write_key_pairs as write_certificates
from kubescale.components import REGISTRY
from kubescale.kube.resources import PODS
from kubescale.sim.apiserver.server import ApiServer

SELF = Path(__file__).resolve()
REPO = SELF.parent.parent
RESULTS = REPO / "bench" / "results"
SERVICE, WEBHOOK_NAMESPACE = "vpa-webhook", "kube-system"
CREATED = "2026-01-01T00:00:00Z"
METRICS_INTERVAL = 60.0
"""Seconds between :class:`MetricsFeed` refreshes (the recommender's and the PodMetrics'
cadence: ``--recommender-interval`` 1 min)."""
POLICY = """
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
  - name: default
    pluginConfig:
      - name: DefaultEvictor
      - name: RemovePodsViolatingNodeTaints
      - name: RemoveDuplicates
    plugins:
      deschedule: {enabled: [RemovePodsViolatingNodeTaints]}
      balance: {enabled: [RemoveDuplicates]}
"""


# -- the cluster -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    """How many objects of each kind a cluster of ``pods`` pods has (the module docstring)."""

    pods: int

    @property
    def nodes(self) -> int:
        return max(1, self.pods // 30)

    @property
    def deployments(self) -> int:
        return max(1, self.pods // 15)

    @property
    def vpas(self) -> int:
        return (self.deployments + 1) // 2

    @property
    def hpas(self) -> int:
        return min(self.deployments // 2, max(1, self.pods // 150))

    @property
    def pdbs(self) -> int:
        return min(self.vpas, max(1, self.pods // 150))

    @property
    def namespaces(self) -> int:
        return max(1, self.deployments // 100)

    def counts(self) -> dict[str, int]:
        return {
            "pods": self.pods,
            "nodes": self.nodes,
            "deployments": self.deployments,
            "replicasets": self.deployments,
            "vpas": self.vpas,
            "hpas": self.hpas,
            "pdbs": self.pdbs,
            "namespaces": self.namespaces,
        }


def _managed(manager: str, operation: str, subresource: str = "") -> dict[str, Any]:
    entry: dict[str, Any] = {
        "manager": manager,
        "operation": operation,
        "apiVersion": "v1",
        "time": CREATED,
        "fieldsType": "FieldsV1",
        "fieldsV1": {
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {"f:containers": {'k:{"name":"app"}': {".": {}, "f:image": {}}}},
        },
    }
    if subresource:
        entry["subresource"] = subresource
        entry["fieldsV1"] = {
            "f:status": {
                "f:conditions": {'k:{"type":"Ready"}': {".": {}, "f:status": {}}},
                "f:containerStatuses": {},
                "f:phase": {},
                "f:podIP": {},
            }
        }
    return entry


def _suffix(index: int, length: int) -> str:
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    out = []
    for _ in range(length):
        index, digit = divmod(index, len(alphabet))
        out.append(alphabet[digit])
    return "".join(out)


def _namespace(shape: Shape, deployment: int) -> str:
    return f"team-{deployment % shape.namespaces}"


def generate(shape: Shape) -> Iterator[dict[str, Any]]:
    """Every object of the cluster, its namespaces first (the API server has kube-system)."""
    for name in [f"team-{i}" for i in range(shape.namespaces)]:
        yield {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        }
    for index in range(shape.nodes):
        yield _node(index)
    per, extra = divmod(shape.pods, shape.deployments)
    pod_index = 0
    for index in range(shape.deployments):
        replicas = per + (1 if index < extra else 0)
        namespace = _namespace(shape, index)
        app = f"app-{index}"
        template_hash = _suffix(index, 10)
        labels = {"app": app}
        yield _deployment(namespace, app, replicas)
        rs_name = f"{app}-{template_hash}"
        yield _replica_set(namespace, app, rs_name, template_hash, replicas)
        for replica in range(replicas):
            node = f"node-{pod_index % shape.nodes}"
            yield _pod(
                namespace,
                rs_name,
                replica,
                template_hash=template_hash,
                labels=labels,
                node=node,
                index=pod_index,
            )
            pod_index += 1
        if index % 2 == 0 and index // 2 < shape.vpas:
            yield _vpa(namespace, app)
            if index // 2 < shape.pdbs:
                yield _pdb(namespace, app)
        elif index % 2 == 1 and index // 2 < shape.hpas:
            yield _hpa(namespace, app)


def _node(index: int) -> dict[str, Any]:
    name = f"node-{index}"
    capacity = {"cpu": "16", "memory": "64Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": "m5.4xlarge",
                "topology.kubernetes.io/zone": f"zone-{index % 3}",
            },
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {"podCIDR": f"10.{index // 256 % 256}.{index % 256}.0/24"},
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                    "lastHeartbeatTime": CREATED,
                    "lastTransitionTime": CREATED,
                }
            ],
            "addresses": [
                {"type": "InternalIP", "address": f"10.0.{index // 256 % 256}.{index % 256}"},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "kubeletVersion": "v1.31.0",
                "containerRuntimeVersion": "containerd://1.7.0",
                "osImage": "Debian GNU/Linux 12",
                "architecture": "amd64",
                "operatingSystem": "linux",
            },
        },
    }


def _template(labels: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"labels": dict(labels)},
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "registry.example/app:1.0",
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "128Mi"},
                        "limits": {"memory": "256Mi"},
                    },
                }
            ]
        },
    }


def _deployment(namespace: str, app: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": app,
            "namespace": namespace,
            "uid": _uid("Deployment", namespace, app),
            "labels": {"app": app},
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": app}},
            "template": _template({"app": app}),
        },
        "status": {
            "observedGeneration": 1,
            "replicas": replicas,
            "readyReplicas": replicas,
            "availableReplicas": replicas,
            "updatedReplicas": replicas,
        },
    }


def _owner(kind: str, name: str, uid: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _uid(kind: str, namespace: str, name: str) -> str:
    digest = hashlib.md5(f"{kind}/{namespace}/{name}".encode(), usedforsecurity=False).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-4{digest[13:16]}-8{digest[17:20]}-{digest[20:32]}"


def _replica_set(
    namespace: str, app: str, name: str, template_hash: str, replicas: int
) -> dict[str, Any]:
    labels = {"app": app, "pod-template-hash": template_hash}
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": _uid("ReplicaSet", namespace, name),
            "labels": labels,
            "ownerReferences": [_owner("Deployment", app, _uid("Deployment", namespace, app))],
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": _template(labels),
        },
        "status": {
            "replicas": replicas,
            "readyReplicas": replicas,
            "availableReplicas": replicas,
            "fullyLabeledReplicas": replicas,
            "observedGeneration": 1,
        },
    }


def _pod(
    namespace: str,
    rs_name: str,
    replica: int,
    *,
    template_hash: str,
    labels: dict[str, str],
    node: str,
    index: int,
) -> dict[str, Any]:
    name = f"{rs_name}-{_suffix(replica, 5)}"
    ip = f"10.{64 + index // 65536 % 64}.{index // 256 % 256}.{index % 256}"
    template = _template(labels)
    spec = template["spec"]
    spec.update(
        {
            "nodeName": node,
            "schedulerName": "default-scheduler",
            "serviceAccountName": "default",
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "priority": 0,
            "enableServiceLinks": True,
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
                {
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
            ],
        }
    )
    spec["containers"][0].update(
        {"terminationMessagePath": "/dev/termination-log", "imagePullPolicy": "IfNotPresent"}
    )
    conditions = [
        {"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": CREATED}
        for kind in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady")
    ]
    conditions.append(
        {
            "type": "PodScheduled",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": CREATED,
        }
    )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {**labels, "pod-template-hash": template_hash},
            "ownerReferences": [
                _owner("ReplicaSet", rs_name, _uid("ReplicaSet", namespace, rs_name))
            ],
            "managedFields": [
                _managed("kube-controller-manager", "Update"),
                _managed("kubelet", "Update", "status"),
            ],
        },
        "spec": spec,
        "status": {
            "phase": "Running",
            "conditions": conditions,
            "hostIP": "10.0.0.1",
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "startTime": CREATED,
            "qosClass": "Burstable",
            "containerStatuses": [
                {
                    "name": "app",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "image": "registry.example/app:1.0",
                    "imageID": "registry.example/app@sha256:" + "0" * 64,
                    "containerID": f"containerd://{index:064x}",
                    "state": {"running": {"startedAt": CREATED}},
                    "lastState": {},
                }
            ],
        },
    }


def _vpa(namespace: str, app: str) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": app, "namespace": namespace},
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": app},
            "updatePolicy": {"updateMode": "Auto"},
        },
    }


def _hpa(namespace: str, app: str) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": app, "namespace": namespace},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": app},
            "minReplicas": 1,
            "maxReplicas": 30,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": 70},
                    },
                }
            ],
        },
    }


def _pdb(namespace: str, app: str) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": app, "namespace": namespace},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": app}}},
    }


# -- the API server child ----------------------------------------------------------------------


class Churn:
    """About ``per_minute`` pod changes a minute, spread over it: label and status updates
    in turn, through the store (each a watch event, as a real write would be)."""

    def __init__(self, api: ApiServer, keys: list[tuple[str, str]]) -> None:
        self.api = api
        self.keys = keys
        self.changes = 0

    def step(self) -> None:
        namespace, name = self.keys[self.changes % len(self.keys)]
        store = self.api.store
        pod = store.get(PODS, name, namespace)
        if self.changes % 2 == 0:
            pod["metadata"].setdefault("labels", {})["churn"] = str(self.changes)
            store.update(pod)
        else:
            status = pod["status"]
            status["containerStatuses"][0]["restartCount"] += 1
            status["conditions"][2]["lastTransitionTime"] = (
                RealClock().now().strftime("%Y-%m-%dT%H:%M:%SZ")
            )
            store.update_status(pod)
        self.changes += 1

    async def run(self, per_minute: float) -> None:
        """A change every ``60 / per_minute`` seconds (the caller made the first one)."""
        interval = 60.0 / per_minute
        loop = asyncio.get_running_loop()
        due = loop.time()
        while True:
            due += interval
            await asyncio.sleep(max(0.0, due - loop.time()))
            self.step()


class MetricsFeed:
    """metrics-server's answers for every pod, new each ``interval`` seconds (metrics-server
    scrapes every kubelet each ``--metric-resolution``; its PodMetrics carry the scrape's
    timestamp, so a reader sees every pod's usage change every interval, as in a real cluster).

    CPU usage stays within the HPAs' tolerance of their 70 % target (63–77m of the 100m
    request: upstream's 0.1 tolerance, so the HPAs decide but do not rescale) and memory moves
    around 100Mi, both deterministic in (pod, round): the recommender gets new samples for
    every container each minute, the HPA controller new utilisations each pass.
    """

    def __init__(
        self,
        api: ApiServer,
        pods: list[tuple[str, str, dict[str, str]]],
        clock: Clock | None = None,
    ) -> None:
        self.api = api
        self.pods = pods
        self.clock: Clock = clock if clock is not None else RealClock()
        self.rounds = 0

    def refresh(self) -> None:
        metrics = self.api.metrics
        now = self.clock.now()
        for index, (namespace, name, labels) in enumerate(self.pods):
            wobble = (index * 7919 + self.rounds * 104_729) % 15
            metrics.set_pod_metrics(
                namespace=namespace,
                name=name,
                labels=labels,
                containers={"app": {"cpu": f"{63 + wobble}m", "memory": f"{96 + wobble}Mi"}},
                timestamp=now,
            )
        self.rounds += 1

    async def run(self, interval: float) -> None:
        """A refresh every ``interval`` seconds (the caller made the first one)."""
        while True:
            await asyncio.sleep(interval)
            self.refresh()


async def serve_apiserver(args: argparse.Namespace) -> int:
    """The ``apiserver`` mode: load the cluster, print one JSON line, then obey stdin lines
    (``churn <changes per minute>``, ``stop``)."""
    shape = Shape(args.pods)
    # A change log long enough that a paged LIST of every pod outlives the churn meanwhile.
    api = ApiServer(history_window=max(10_000, args.pods))
    begin = time.process_time()
    loaded = api.store.load(generate(shape))
    load_seconds = time.process_time() - begin
    await api.start()
    api.write_kubeconfig(args.kubeconfig_out)
    snapshots = api.store.snapshots(PODS)
    keys = [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in snapshots]
    churn = Churn(api, keys)
    feed: asyncio.Task[None] | None = None
    if args.metrics:
        metrics = MetricsFeed(
            api,
            [
                (o["metadata"]["namespace"], o["metadata"]["name"], o["metadata"]["labels"])
                for o in snapshots
            ],
        )
        metrics.refresh()
        feed = asyncio.create_task(metrics.run(METRICS_INTERVAL))
    del snapshots
    print(json.dumps({"loaded": loaded, "load_cpu_seconds": round(load_seconds, 2)}), flush=True)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    task: asyncio.Task[None] | None = None
    try:
        while line := (await reader.readline()).decode().split():
            if line[0] == "churn":
                if task is not None:
                    task.cancel()
                    task = None
                if float(line[1]) > 0:
                    churn.step()  # at once: a window always sees its churn begin
                    task = asyncio.create_task(churn.run(float(line[1])))
            elif line[0] == "stop":
                break
    finally:
        for running in (task, feed):
            if running is not None:
                running.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await running
        await api.stop()
    print(json.dumps({"churn_changes": churn.changes}), flush=True)
    return 0


# -- measuring kubescale serve -----------------------------------------------------------------


def proc_status(pid: int) -> dict[str, float]:
    """``VmRSS`` and ``VmHWM`` (MiB) of a process."""
    out: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = round(int(value.split()[0]) / 1024, 1)
    return out


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def component_flags() -> list[str]:
    """The ``--<component> {auto,true,false}`` flag of every registered component."""
    return sorted(f"--{spec.mode_flag}" for spec in REGISTRY)


CACHES = re.compile(r"^\[([+-])\]([a-z0-9-]+)-caches\b", re.MULTILINE)


async def readiness(session: aiohttp.ClientSession, health: int) -> dict[str, bool]:
    """Each component's ``<component>-caches`` check: synced or not (empty: not answering)."""
    with contextlib.suppress(aiohttp.ClientError, TimeoutError):
        async with session.get(f"http://127.0.0.1:{health}/readyz?verbose") as response:
            text = await response.text()
            return {name: sign == "+" for sign, name in CACHES.findall(text)}
    return {}


@dataclass
class Serve:
    process: asyncio.subprocess.Process
    health: int
    started: float
    log: Path

    def alive(self) -> None:
        """Raise with the end of its log if the process has exited."""
        if self.process.returncode is not None or not Path(f"/proc/{self.process.pid}").exists():
            tail = self.log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"kubescale serve exited ({self.process.returncode}):\n{tail}")


async def start_serve(
    work: Path,
    *,
    webhook_only: bool,
    flags: list[str],
    profile: Path | None = None,
    trace: Path | None = None,
    hpa_all: bool = False,
) -> Serve:
    port, health = _free_port(), _free_port()
    # --profile: serve under bench/sampled_serve.py (SIGUSR1/SIGUSR2 bracket the steady minutes)
    # trace: under bench/traced_serve.py (SIGUSR1 writes a tracemalloc snapshot; issue29_memory)
    launcher = [str(SELF.parent / "sampled_serve.py")] if profile else ["-m", "kubescale"]
    if trace is not None:
        launcher = [str(SELF.parent / "traced_serve.py")]
    argv = [
        sys.executable, *launcher, "serve",
        "--port", str(port), "--bind-address", "127.0.0.1",
        "--address", f"127.0.0.1:{health}",
        "--tls-cert-file", str(work / "serverCert.pem"),
        "--tls-private-key", str(work / "serverKey.pem"),
        "--client-ca-file", str(work / "caCert.pem"),
        "--kubeconfig", str(work / "kubeconfig"), "--leader-elect", "false",
        "--webhook-service-namespace", WEBHOOK_NAMESPACE, "--register-webhook", "false",
        "--log-level", "error",
    ]  # fmt: skip
    if webhook_only:
        argv += [a for f in flags if f != "--webhook" for a in (f, "false")]
        argv += ["--webhook", "true"]
    else:
        argv += ["--descheduler-policy", POLICY, "--cloud-provider", "clusterapi"]
        if hpa_all:
            argv += ["--hpa-selection", "all"]
    log = work / f"serve-{'webhook' if webhook_only else 'all'}.log"
    with log.open("wb") as stderr:
        process = await asyncio.create_subprocess_exec(
            *argv,
            cwd=REPO,
            env={
                **os.environ,
                "PYTHONPATH": str(REPO),
                **({"KUBESCALE_PROFILE_OUT": str(profile)} if profile else {}),
                **({"KUBESCALE_TRACE_OUT": str(trace)} if trace else {}),
            },
            stdout=asyncio.subprocess.DEVNULL,
            stderr=stderr,
        )
    return Serve(process=process, health=health, started=time.monotonic(), log=log)


async def stop_api_child(api: asyncio.subprocess.Process) -> None:
    """Stop the bulk-loaded API server child: ``stop`` on its stdin, killed after 30 s."""
    if api.returncode is None and api.stdin is not None and not api.stdin.is_closing():
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            api.stdin.write(b"stop\n")
            await api.stdin.drain()
    try:
        await asyncio.wait_for(api.wait(), timeout=30)
    except TimeoutError:
        api.kill()
        await api.wait()


async def stop_process(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), timeout=30)
        except TimeoutError:
            process.kill()
            await process.wait()


async def wait_synced(serve: Serve, *, limit: float) -> dict[str, Any]:
    """Poll ``/readyz?verbose`` until every ``-caches`` check is ``[+]``: seconds from the
    start, per component and in all, and the RSS samples meanwhile."""
    first: dict[str, float] = {}
    peak = 0.0
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
        while True:
            serve.alive()
            peak = max(peak, proc_status(serve.process.pid).get("VmRSS", 0.0))
            checks = await readiness(session, serve.health)
            elapsed = time.monotonic() - serve.started
            for name, synced in checks.items():
                if synced:
                    first.setdefault(name, round(elapsed, 2))
            if checks and all(checks.values()):
                return {
                    "synced_seconds": round(elapsed, 2),
                    "components_synced_seconds": dict(sorted(first.items())),
                    "rss_mib_while_syncing_max": peak,
                }
            if elapsed > limit:
                raise RuntimeError(f"caches not synced after {limit} s: {checks}")
            await asyncio.sleep(0.25)


async def steady(
    serve: Serve,
    *,
    minutes: int,
    seconds: float,
    churn_per_minute: float,
    control: Any,
    profile: bool = False,
) -> list[dict[str, Any]]:
    """``minutes`` windows of ``seconds`` each with the churn on: CPU and RSS per window."""
    control.write(f"churn {churn_per_minute}\n".encode())
    await control.drain()
    windows = []
    pid = serve.process.pid
    if profile:
        serve.process.send_signal(signal.SIGUSR1)
    for _ in range(minutes):
        serve.alive()
        cpu = cpu_seconds(pid)
        await asyncio.sleep(seconds)
        serve.alive()
        used = cpu_seconds(pid) - cpu
        windows.append(
            {
                "cpu_seconds": round(used, 2),
                "cpu_seconds_per_minute": round(used * 60.0 / seconds, 2),
                "rss_mib": proc_status(pid)["VmRSS"],
            }
        )
    if profile:
        serve.process.send_signal(signal.SIGUSR2)
    control.write(b"churn 0\n")
    await control.drain()
    return windows


async def start_apiserver(
    pods: int, work: Path, *, metrics: bool = False
) -> asyncio.subprocess.Process:
    """This file run as ``apiserver`` with ``pods`` bulk-loaded, its kubeconfig written to
    ``work``; it prints one JSON line when loaded, then obeys its stdin (:func:`stop_api_child`).
    ``metrics``: it serves every pod's PodMetrics, new each minute (:class:`MetricsFeed`)."""
    return await asyncio.create_subprocess_exec(
        sys.executable, str(SELF), "apiserver",
        "--pods", str(pods), "--kubeconfig-out", str(work / "kubeconfig"),
        "--metrics" if metrics else "--no-metrics",
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip


async def measure_size(pods: int, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    shape = Shape(pods)
    api = await start_apiserver(pods, work, metrics=args.metrics)
    assert api.stdin is not None
    assert api.stdout is not None
    try:
        line = await api.stdout.readline()
        if not line:
            raise RuntimeError("the API server child exited before loading")
        loaded = json.loads(line)
        flags = component_flags()
        churn = pods * args.churn_percent / 100.0
        result: dict[str, Any] = {
            "pods": pods,
            "objects": shape.counts(),
            "apiserver": loaded,
            "churn_pod_changes_per_minute": churn,
            "metrics": args.metrics,
        }
        for mode in ("all", "webhook"):
            profile = (
                args.profile / f"serve-{mode}-{pods}.txt" if args.profile is not None else None
            )
            server_cpu = cpu_seconds(api.pid)
            serve = await start_serve(
                work,
                webhook_only=mode == "webhook",
                flags=flags,
                profile=profile,
                hpa_all=args.metrics,
            )
            try:
                synced = await wait_synced(serve, limit=args.sync_limit)
                synced["rss_mib_when_synced"] = proc_status(serve.process.pid)["VmRSS"]
                # CPU until synced, each side: kubescale's (imports and start-up included) and
                # the API server child's (the LISTs it served meanwhile).
                synced["cpu_seconds_to_sync"] = round(cpu_seconds(serve.process.pid), 2)
                synced["apiserver_cpu_seconds_to_sync"] = round(
                    cpu_seconds(api.pid) - server_cpu, 2
                )
                await asyncio.sleep(args.settle_seconds)
                windows = await steady(
                    serve,
                    minutes=args.minutes if mode == "all" else 1,
                    seconds=args.steady_seconds,
                    churn_per_minute=churn,
                    control=api.stdin,
                    profile=profile is not None,
                )
                status = proc_status(serve.process.pid)
            finally:
                await stop_process(serve.process)
            cpu = [w["cpu_seconds_per_minute"] for w in windows]
            result[mode] = {
                **synced,
                "steady": windows,
                "rss_mib": windows[-1]["rss_mib"],
                "peak_rss_mib": status["VmHWM"],
                "cpu_seconds_per_minute": round(sum(cpu) / len(cpu), 2),
            }
        api.stdin.write(b"stop\n")
        await api.stdin.drain()
        result["churn_changes"] = json.loads(await api.stdout.readline())["churn_changes"]
        return result
    finally:
        await stop_api_child(api)


def write_serving_certificates(work: Path) -> None:
    """A one-day CA and the webhook Service's serving certificate in ``work``, where
    :func:`start_serve` passes them to ``kubescale serve``."""
    now = RealClock().now()
    ca = generate_ca(common_name="bench-ca", now=now, days=1, key_type="ecdsa")
    serving = issue_serving_certificate(
        ca=ca,
        names=service_dns_names(SERVICE, WEBHOOK_NAMESPACE),
        now=now,
        days=1,
        key_type="ecdsa",
    )
    write_certificates(work, ca=ca, server=serving)


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    runs = []
    with tempfile.TemporaryDirectory(prefix="kubescale-scale-") as directory:
        work = Path(directory)
        write_serving_certificates(work)
        for pods in args.pods:
            load = os.getloadavg()[0]
            run = await measure_size(pods, args, work)
            run["load_average_1m_before"] = round(load, 2)
            run["load_average_1m_after"] = round(os.getloadavg()[0], 2)
            runs.append(run)
            print(json.dumps(run), flush=True)
    return {
        "label": args.label,
        "steady_seconds": args.steady_seconds,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "runs": runs,
    }


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "| label | pods | RSS MiB (peak) | CPU-s per steady minute | caches synced after | "
        "webhook alone RSS MiB | load avg |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for label, entry in report.items():
        for run in entry["runs"]:
            every, webhook = run["all"], run["webhook"]
            lines.append(
                f"| {label} | {run['pods']:,} | {every['rss_mib']:,.0f} "
                f"({every['peak_rss_mib']:,.0f}) | {every['cpu_seconds_per_minute']} | "
                f"{every['synced_seconds']} s | {webhook['rss_mib']:,.0f} | "
                f"{run['load_average_1m_before']} |"
            )
    return "\n".join(lines) + "\n"


def write_results(report: dict[str, Any], out: Path) -> dict[str, Any]:
    """Merge ``report`` into ``out`` under its label (other labels, and this label's runs of
    other sizes, kept); the Markdown table
    of every label goes next to it (``.md``). The merged content."""
    merged: dict[str, Any] = {}
    if out.exists():
        with contextlib.suppress(ValueError):
            merged = json.loads(out.read_text())
    # Within a label, a run replaces the earlier one of the same size; other sizes are kept.
    earlier = merged.get(report["label"], {}).get("runs", [])
    sizes = {run["pods"] for run in report["runs"]}
    runs = [run for run in earlier if run["pods"] not in sizes] + report["runs"]
    merged[report["label"]] = {**report, "runs": sorted(runs, key=lambda run: run["pods"])}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(merged, indent=2) + "\n")
    out.with_suffix(".md").write_text(markdown(merged))
    return merged


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    sub = parser.add_subparsers(dest="mode")
    child = sub.add_parser("apiserver", help="(internal) the loaded API server child")
    child.add_argument("--pods", type=int, required=True)
    child.add_argument("--kubeconfig-out", type=Path, required=True)
    child.add_argument("--metrics", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument(
        "--pods",
        "--sizes",
        dest="pods",
        type=int,
        nargs="+",
        help="cluster sizes in pods (default: 1000 10000; the full size is 150000)",
    )
    parser.add_argument("--minutes", type=int, help="steady windows (default: 2)")
    parser.add_argument("--steady-seconds", type=float, help="one steady window (default: 60)")
    parser.add_argument(
        "--settle-seconds",
        type=float,
        help="wait after the caches synced, before measuring (default: 30)",
    )
    parser.add_argument("--churn-percent", type=float, default=1.0)
    parser.add_argument(
        "--metrics",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="serve PodMetrics for every pod, new each minute, and have the HPA controller"
        " reconcile every HPA (--hpa-selection all); --no-metrics: the shape measured before"
        " 2026-11-29 23:00, where the recommender and the HPAs had no usage to read",
    )
    parser.add_argument("--sync-limit", type=float, default=900.0, help="give up after (s)")
    parser.add_argument("--label", default="current")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a smoke test: 50 pods, one 2-second window, no settling (unless given)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "scale_cluster.json")
    parser.add_argument(
        "--profile",
        type=Path,
        help="a directory: sample serve's stack over the steady minutes (bench/sampled_serve.py)"
        " and write the top functions there (the sampler's CPU counts in the figures)",
    )
    args = parser.parse_args(argv)
    defaults = ([50], 1, 2.0, 0.0) if args.quick else ([1000, 10000], 2, 60.0, 30.0)
    for name, default in zip(
        ("pods", "minutes", "steady_seconds", "settle_seconds"), defaults, strict=True
    ):
        if getattr(args, name) is None:
            setattr(args, name, default)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.mode == "apiserver":
        return asyncio.run(serve_apiserver(args))
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    report = asyncio.run(measure(args))
    merged = write_results(report, args.out)
    print(markdown(merged))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
