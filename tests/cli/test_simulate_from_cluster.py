"""``kubescale simulate --from-cluster`` end to end: the in-process API server (real REST) as the
cluster, Debian's Prometheus loaded with synthetic cAdvisor and kube-state-metrics history,
the command run as a user runs it.

Worked out: the history covers the 2 hours before now at a 5-minute step. ``web`` (a Deployment
of 2 replicas with an HPA, a VPA and a PDB) has two pods whose ``app`` CPU counters grow at
0.2 and 0.4 cores — ``rate`` over a 300 s window of a counter scraped every 60 s growing
linearly is that slope exactly — so the captured per-replica CPU is their average, 0.3 cores;
memory gauges of 200 and 400 MiB average 300 MiB; kube-state-metrics says 2 replicas. ``db`` (a
StatefulSet, no HPA) has one pod at 0.1 cores / 1 GiB and no replica series. A kube-system
Deployment is left out; noise series (the ``POD`` pause container, the pod-level
``container=""`` cgroup, a pod of ``web-api``) must not be counted.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubescale.sim.apiserver.server import ApiServer
from tests.builders.workloads import deployment, pod_template
from tests.cli.in_process import run_main
from tests.prometheus.prometheus_fixtures import (
    RealPrometheus,
    Series,
    create_blocks,
    prometheus_tools,
    write_openmetrics,
)

MIB = 2**20
TIMEOUT = 300.0
SCRAPE = 60
HISTORY = 2 * 3600


def app_deployment(name: str, namespace: str, replicas: int) -> dict[str, Any]:
    labels = {"app": name}
    containers = [{"name": "app", "image": "shop:1", "resources": {
        "requests": {"cpu": "500m", "memory": "512Mi"}}}]  # fmt: skip
    return deployment(
        name=name, namespace=namespace, labels=labels, replicas=replicas, match_labels=labels,
        template=pod_template(labels=labels, containers=containers),
    )  # fmt: skip


def populate(server: ApiServer) -> None:
    store = server.store
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})
    for name in ("node-a", "node-b"):
        store.create({"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": name, "labels": {"node.kubernetes.io/instance-type": "m5.large"}}})  # fmt: skip
        node = store.get(store.registry.by_kind("v1", "Node"), name)  # type: ignore[arg-type]
        node["status"] = {"allocatable": {"cpu": "2", "memory": "8Gi", "pods": "110"}}
        store.update_status(node)
    store.create(app_deployment("web", "shop", 2))
    store.create(app_deployment("coredns", "kube-system", 1))
    store.create({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": "shop"},
        "spec": {"replicas": 1, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                 "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [
                     {"name": "postgres", "image": "postgres:16", "resources": {
                         "requests": {"cpu": "250m", "memory": "2Gi"}}}]}}},
    })  # fmt: skip
    store.create({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                 "minReplicas": 1, "maxReplicas": 4, "metrics": [{"type": "Resource", "resource": {
                     "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}}]},
    })  # fmt: skip
    store.create({
        "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                 "updatePolicy": {"updateMode": "Auto"}},
    })  # fmt: skip
    store.create({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
    })  # fmt: skip


def history(now: int, *, replicas: bool) -> list[Series]:
    """Scrapes every minute over the 2 hours before ``now`` (and a few minutes more, so the
    first step's window is full)."""
    times = list(range(now - HISTORY - 600, now + 1, SCRAPE))
    start = times[0]
    series: list[Series] = []

    def container(pod: str, name: str, cores: float, memory: float, ns: str = "shop") -> None:
        labels = {"namespace": ns, "pod": pod, "container": name}
        series.append(("container_cpu_usage_seconds_total", labels,
                       [(t, cores * (t - start)) for t in times]))  # fmt: skip
        series.append(("container_memory_working_set_bytes", labels, [(t, memory) for t in times]))

    container("web-6d4cf56db6-x2kzq", "app", 0.2, 200 * MIB)
    container("web-6d4cf56db6-bcdfg", "app", 0.4, 400 * MIB)
    container("web-6d4cf56db6-bcdfg", "POD", 5.0, 900 * MIB)  # the pause container
    container("web-6d4cf56db6-bcdfg", "", 5.0, 900 * MIB)  # the pod's cgroup
    container("web-api-6d4cf56db6-bcdfg", "app", 5.0, 900 * MIB)  # another Deployment's pod
    container("db-0", "postgres", 0.1, 1024 * MIB)
    if replicas:
        labels = {"namespace": "shop", "deployment": "web"}
        series.append(("kube_deployment_status_replicas", labels, [(t, 2.0) for t in times]))
    return series


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[ApiServer, Path]]:
    async with ApiServer() as server:
        populate(server)
        path = tmp_path / "kubeconfig"
        server.write_kubeconfig(path)
        yield server, path


async def prometheus_with(tmp_path: Path, series: list[Series]) -> RealPrometheus:
    found = prometheus_tools()
    if isinstance(found, str):
        pytest.skip(found)
    binary, promtool = found
    openmetrics = tmp_path / "history.om"
    write_openmetrics(openmetrics, series)
    tsdb = tmp_path / "tsdb"
    await create_blocks(promtool, openmetrics, tsdb)
    return RealPrometheus(binary=binary, tsdb=tsdb, workdir=tmp_path)


async def run_cli(*args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kubescale", "simulate", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "HOME": "/nonexistent", "KUBECONFIG": ""},
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), TIMEOUT)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def run_here(
    *args: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> tuple[int, str, str]:
    """``kubescale simulate ARGS`` in this process (:func:`tests.cli.in_process.run_main`), on
    a thread of its own (``main`` runs its own event loop; the test's serves the API server),
    with the child's environment. The what-if test above keeps the real child (issue 32.7)."""
    monkeypatch.setenv("HOME", "/nonexistent")
    monkeypatch.setenv("KUBECONFIG", "")
    done = await asyncio.to_thread(run_main, ["simulate", *args], capsys)
    return done.returncode, done.stdout, done.stderr


def _args(kubeconfig: Path, prometheus: str, out: Path) -> tuple[str, ...]:
    return ("--from-cluster", "--kubeconfig", str(kubeconfig), "--prometheus-address", prometheus,
            "--history-length", "2h", "--history-step", "5m", "--write-scenario", str(out),
            "--node-price", "m5.large=0.096", "--quiet")  # fmt: skip


async def test_from_cluster_writes_the_scenario_reads_only_and_runs_the_what_if(
    cluster: tuple[ApiServer, Path], tmp_path: Path
) -> None:
    server, kubeconfig = cluster
    now = int(time.time())
    out = tmp_path / "captured"
    async with await prometheus_with(tmp_path, history(now, replicas=True)) as prometheus:
        code, stdout, stderr = await run_cli(*_args(kubeconfig, prometheus.address, out))
    assert code == 0, stderr
    assert (
        stderr.splitlines()[-1]
        == f"kubescale simulate: wrote {out / 'scenario.yaml'} (edit and rerun it)"
    )

    doc = yaml.safe_load((out / "scenario.yaml").read_text(encoding="utf-8"))
    # by namespace, kind, name; coredns (kube-system) left out
    assert [(w["kind"], w["name"]) for w in doc["workloads"]] == [
        ("Deployment", "web"),
        ("StatefulSet", "db"),
    ]
    assert [o["kind"] for o in doc["objects"]] == [
        "VerticalPodAutoscaler", "HorizontalPodAutoscaler", "PodDisruptionBudget"]  # fmt: skip
    assert doc["nodeGroups"][0]["replicas"] == 2
    assert doc["nodeGroups"][0]["pricePerHour"] == 0.096

    rows = (out / "usage.csv").read_text(encoding="utf-8").splitlines()
    assert rows[0] == "timestamp,workload,container,cpu_cores,memory_bytes"
    web = [r.split(",") for r in rows[1:] if r.split(",")[1] == "shop/web"]
    db = [r.split(",") for r in rows[1:] if r.split(",")[1] == "shop/db"]
    assert len(web) == len(db) == HISTORY // 300 + 1  # every step of [start, end]
    for _, _, container, cpu, memory in web:
        assert container == "app"
        assert float(cpu) == pytest.approx(0.3, rel=1e-9)  # (0.2 + 0.4) / 2; noise excluded
        assert float(memory) == pytest.approx(300 * MIB, rel=1e-9)
    assert {(r[2], round(float(r[3]), 9), float(r[4])) for r in db} == {
        ("postgres", 0.1, 1024 * MIB)
    }
    replicas = (out / "replicas.csv").read_text(encoding="utf-8").splitlines()
    assert replicas[0] == "timestamp,workload,replicas"
    assert {tuple(r.split(",")[1:]) for r in replicas[1:]} == {("shop/web", "2")}

    assert "no autoscaling" in stdout  # the three-way summary of the what-if
    # read-only: nothing but get/list reached the API server
    assert {record.verb for record in server.requests.counts()} <= {"get", "list"}


async def test_an_hpa_without_kube_state_metrics_is_one_line_and_nothing_is_written(
    cluster: tuple[ApiServer, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, kubeconfig = cluster
    out = tmp_path / "captured"
    async with await prometheus_with(tmp_path, history(int(time.time()), replicas=False)) as prom:
        code, stdout, stderr = await run_here(
            *_args(kubeconfig, prom.address, out), capsys=capsys, monkeypatch=monkeypatch
        )
    assert (code, stdout) == (1, "")
    assert stderr == (
        "kubescale simulate: error: shop/Deployment/web has an HorizontalPodAutoscaler: its "
        "replica history needs kube_deployment_status_replicas (kube-state-metrics) in "
        "Prometheus, and there is none\n"
    )
    assert not out.exists()


async def test_a_prometheus_without_container_metrics_is_one_line(
    cluster: tuple[ApiServer, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, kubeconfig = cluster
    series: list[Series] = [("up", {"job": "x"}, [(int(time.time()) - 60, 1.0)])]
    async with await prometheus_with(tmp_path, series) as prom:
        code, _, stderr = await run_here(
            *_args(kubeconfig, prom.address, tmp_path / "o"), capsys=capsys, monkeypatch=monkeypatch
        )
    assert code == 1
    assert stderr == (
        f"kubescale simulate: error: Prometheus at {prom.address} has no "
        "container_cpu_usage_seconds_total or container_memory_working_set_bytes for any "
        "workload (is cAdvisor scraped?)\n"
    )


async def test_an_unreachable_prometheus_is_one_line(
    cluster: tuple[ApiServer, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, kubeconfig = cluster
    code, _, stderr = await run_here(
        *_args(kubeconfig, "http://127.0.0.1:1", tmp_path / "o"),
        capsys=capsys,
        monkeypatch=monkeypatch,
    )
    assert code == 1
    (line,) = stderr.splitlines()
    assert line.startswith(
        "kubescale simulate: error: Prometheus at http://127.0.0.1:1 did not answer "
    )
    assert "connection refused" in line.lower()
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--prometheus-address", ""),
         "--prometheus-address is required with --from-cluster (the usage history)"),
        (("--prometheus-address", "file:///x"),
         "--prometheus-address: prometheus address 'file:///x': unsupported protocol scheme "
         "'file' (http or https)"),
        (("--write-scenario", "/nonexistent/dir/x"),
         "--write-scenario /nonexistent/dir/x: directory /nonexistent/dir does not exist"),
    ],
)  # fmt: skip
async def test_bad_flags_are_one_line_before_anything_is_read(
    extra: tuple[str, ...],
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    args = ("--from-cluster", "--kubeconfig", "/nonexistent/kubeconfig",
            "--prometheus-address", "http://127.0.0.1:1", *extra)  # fmt: skip
    code, _, stderr = await run_here(*args, capsys=capsys, monkeypatch=monkeypatch)
    assert (code, stderr) == (1, f"kubescale simulate: error: {message}\n")
