"""A live cluster as a scenario (:mod:`kubescale.sim.scenario.cluster_capture`), without a
cluster: the rules of the module docstring on listed objects and histories, and the written
files loading as a valid scenario."""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubescale.sim.cluster.trace_replay import load_replica_series, scan_trace
from kubescale.sim.scenario.cluster_capture import (
    CaptureError,
    LiveCluster,
    WorkloadHistory,
    WorkloadKey,
    build_capture,
    write_capture,
)
from kubescale.sim.scenario.live_reading import HistoryQueries, pod_name_regex
from kubescale.sim.scenario.scenario_validation import load_scenario
from tests.builders.hpas import hpa, scale_target_ref
from tests.builders.nodes import node
from tests.builders.workloads import deployment, pod_template

START = datetime(2026, 11, 1, tzinfo=UTC)
END = START + timedelta(hours=1)
STEP = 300
TIMES = [int(START.timestamp()) + STEP * k for k in range(12)]


def shop_workload(name: str, *, replicas: int = 2, **pod: Any) -> dict[str, Any]:
    """A Deployment in ``shop`` of one ``app`` container (500m / 512Mi, memory limit 1Gi)."""
    labels = {"app": name}
    containers = [{"name": "app", "image": "shop:1", "resources": {
        "requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}}}]  # fmt: skip
    return deployment(
        name=name, namespace="shop", uid="u-" + name, replicas=replicas, match_labels=labels,
        template=pod_template(labels=labels, containers=containers, spec=pod),
        status={"replicas": replicas},
    )  # fmt: skip


def typed_node(name: str, instance_type: str, *, cpu: str = "2", zone: str = "",
               **labels: str) -> dict[str, Any]:  # fmt: skip
    all_labels = {"node.kubernetes.io/instance-type": instance_type, **labels}
    if zone:
        all_labels["topology.kubernetes.io/zone"] = zone
    return node(name=name, labels=all_labels,
                allocatable={"cpu": cpu, "memory": "8Gi", "pods": "110"})  # fmt: skip


shop_scaler = functools.partial(hpa, namespace="shop", min_replicas=1, max_replicas=5,
                                status={"currentReplicas": 2})  # fmt: skip
"""An HPA in ``shop`` at 2 replicas of 1..5 (its name, target and metrics given by each test)."""


CPU_METRIC = {"type": "Resource", "resource": {"name": "cpu", "target": {
    "type": "Utilization", "averageUtilization": 70}}}  # fmt: skip
PODS_METRIC = {"type": "Pods", "pods": {"metric": {"name": "rps"}, "target": {
    "type": "AverageValue", "averageValue": "10"}}}  # fmt: skip


def history(*, replicas: list[tuple[int, int]] | None = None) -> WorkloadHistory:
    return WorkloadHistory(
        cpu={"app": [(t, 0.25) for t in TIMES]},
        memory={"app": [(t, 300.0 * 2**20) for t in TIMES]},
        replicas=replicas,
    )


WEB = WorkloadKey("shop", "Deployment", "web")
API = WorkloadKey("shop", "Deployment", "api")


def capture(
    cluster: LiveCluster, histories: dict[WorkloadKey, WorkloadHistory], **prices: float
) -> Any:
    return build_capture(cluster, histories, start=START, end=END, step_seconds=STEP, prices=prices)


def test_workloads_objects_and_node_groups_as_found() -> None:
    cluster = LiveCluster(
        workloads=[shop_workload("web", nodeSelector={"disk": "ssd"}, priorityClassName="high"),
                   shop_workload("api", replicas=1)],
        hpas=[shop_scaler(name="web", target=scale_target_ref(name="web"),
                         metrics=[CPU_METRIC, PODS_METRIC])],
        vpas=[{"apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
               "metadata": {"name": "web-vpa", "namespace": "shop"},
               "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                        "updatePolicy": {"updateMode": "Auto"}},
               "status": {"recommendation": {}}}],
        pdbs=[{"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
               "metadata": {"name": "web", "namespace": "shop"},
               "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}}],
        nodes=[typed_node("a", "m5.large", zone="z1"), typed_node("b", "m5.large", zone="z2"),
               typed_node("c", "m5.large", cpu="4", zone="z1"),
               typed_node("cp", "m5.xlarge", **{"node-role.kubernetes.io/control-plane": ""})],
    )  # fmt: skip
    replicas = [(TIMES[0], 2), (TIMES[6], 3)]
    got = capture(cluster, {WEB: history(replicas=replicas), API: history()}, **{"m5.large": 0.096})
    doc = got.document
    web, api = sorted(doc["workloads"], key=lambda w: w["name"], reverse=True)
    # web has a replica series: its usage is shared (one replica's sample × the recorded count)
    assert web == {
        "kind": "Deployment", "name": "web", "namespace": "shop", "replicas": 2,
        "labels": {"app": "web"},
        "containers": [{"name": "app", "image": "shop:1",
                        "requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "1Gi"},
                        "usage": {"type": "replay", "file": "usage.csv", "workload": "shop/web",
                                  "container": "app", "shared": True, "replicas": "replicas.csv"}}],
        "podSpec": {"nodeSelector": {"disk": "ssd"}},  # priorityClassName is not carried over
    }  # fmt: skip
    assert "shared" not in api["containers"][0]["usage"]
    kinds = [(o["kind"], o["metadata"]["name"]) for o in doc["objects"]]
    assert kinds == [("VerticalPodAutoscaler", "web-vpa"), ("HorizontalPodAutoscaler", "web"),
                     ("PodDisruptionBudget", "web")]  # fmt: skip
    vpa, hpa_manifest, _ = doc["objects"]
    assert "status" not in vpa
    assert hpa_manifest["spec"]["metrics"] == [CPU_METRIC]
    assert hpa_manifest["metadata"]["annotations"] == {"hpa.kubescale.io/controller": "kubescale"}
    # the three m5.large nodes: two of 2 CPUs, one of 4 → the most common shape; the
    # control-plane node is left out; min 0, max 2 × 3
    assert doc["nodeGroups"] == [{
        "name": "ng-m5-large", "min": 0, "max": 6, "replicas": 3,
        "template": {"instanceType": "m5.large",
                     "allocatable": {"cpu": "2", "memory": "8Gi", "pods": 110},
                     "zones": ["z1", "z2"]},
        "pricePerHour": 0.096}]  # fmt: skip
    assert doc["kubescale"] == {"webhook": {}, "vpa-recommender": {}, "vpa-updater": {},
                                "cluster-autoscaler": {}, "hpa-controller": {}}  # fmt: skip
    assert (doc["start"], doc["duration"], doc["step"]) == (
        "2026-11-01T00:00:00+00:00",
        "3600s",
        "300s",
    )
    assert got.replica_rows == [(TIMES[0], "shop/web", 2), (TIMES[6], "shop/web", 3)]
    assert len(got.usage_rows) == 2 * 12
    assert any("1 metric(s) not of type Resource" in n for n in got.notes)
    assert any("node cp: control-plane" in n for n in got.notes)


def test_what_is_left_out_is_said() -> None:
    cluster = LiveCluster(
        workloads=[shop_workload("web"), shop_workload("api")],
        hpas=[shop_scaler(name="gone", target=scale_target_ref(name="gone"))],
        vpas=[{"apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
               "metadata": {"name": "v", "namespace": "shop"},
               "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                      "name": "api"}}}],
        nodes=[typed_node("a", "m5.large")],
    )  # fmt: skip
    got = capture(cluster, {WEB: history()})  # api has no history
    assert [w["name"] for w in got.document["workloads"]] == ["web"]
    assert got.document["objects"] == []
    assert got.notes == [
        "shop/Deployment/api: left out (no usage history for container(s) app)",
        "VerticalPodAutoscaler shop/v: left out (target shop/Deployment/api not captured)",
        "HorizontalPodAutoscaler shop/gone: left out (target shop/Deployment/gone not captured)",
        "instance type m5.large: no price given (--node-price), cost 0",
    ]
    assert "hpa-controller" not in got.document["kubescale"]


def test_an_hpa_without_a_replica_history_is_an_error_naming_the_metric() -> None:
    scaler = shop_scaler(name="web", target=scale_target_ref(name="web"), metrics=[CPU_METRIC])
    cluster = LiveCluster(workloads=[shop_workload("web")], hpas=[scaler],
                          nodes=[typed_node("a", "m5.large")])  # fmt: skip
    with pytest.raises(CaptureError) as caught:
        capture(cluster, {WEB: history()})
    assert str(caught.value) == (
        "shop/Deployment/web has an HorizontalPodAutoscaler: its replica history needs "
        "kube_deployment_status_replicas (kube-state-metrics) in Prometheus, and there is none"
    )


@pytest.mark.parametrize(
    ("cluster", "histories", "message"),
    [
        (LiveCluster(workloads=[shop_workload("web")], nodes=[typed_node("a", "t")]), {},
         "no workload has usage history in Prometheus over the history length"),
        (LiveCluster(workloads=[shop_workload("web")], nodes=[]), {WEB: history()},
         "the cluster has no worker nodes to build node groups from"),
    ],
)  # fmt: skip
def test_nothing_to_simulate_is_an_error(
    cluster: LiveCluster, histories: dict[WorkloadKey, WorkloadHistory], message: str
) -> None:
    with pytest.raises(CaptureError, match=f"^{re.escape(message)}$"):
        capture(cluster, histories)


def test_the_written_files_are_a_valid_scenario_and_trace(tmp_path: Path) -> None:
    cluster = LiveCluster(
        workloads=[shop_workload("web"), shop_workload("api", replicas=1)],
        hpas=[shop_scaler(name="web", target=scale_target_ref(name="web"), metrics=[CPU_METRIC])],
        nodes=[typed_node("a", "m5.large")],
    )
    got = capture(cluster, {WEB: history(replicas=[(TIMES[0], 2)]), API: history()})
    path = write_capture(got, tmp_path / "out", source="test")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "replicas.csv",
        "scenario.yaml",
        "usage.csv",
    ]  # fmt: skip (no partial file left)
    series = scan_trace(tmp_path / "out" / "usage.csv")
    assert sorted(series) == [("shop/api", "app"), ("shop/web", "app")]
    assert load_replica_series(tmp_path / "out" / "replicas.csv", known={"shop/api", "shop/web"},
                               trace_name="usage.csv")["shop/web"].counts == (2,)  # fmt: skip
    header = path.read_text(encoding="utf-8").splitlines()[:3]
    assert header[0] == "# Captured by kubescale simulate --from-cluster from test"
    assert header[2] == "# note: instance type m5.large: no price given (--node-price), cost 0"
    assert yaml.safe_load(path.read_text(encoding="utf-8")) == got.document
    scenario = load_scenario(path)  # validates like any scenario file
    assert scenario.compare
    assert [w.name for w in scenario.workloads] == ["api", "web"]


@pytest.mark.parametrize(
    ("kind", "name", "pod", "matches"),
    [
        # Deployment pods: <deployment>-<hash, 1..10 of bcdfghjklmnpqrstvwxz2456789>-<5 of them>
        ("Deployment", "web", "web-6d4cf56db6-x2kzq", True),
        ("Deployment", "web", "web-7c-bcdfg", True),
        ("Deployment", "web", "web-api-6d4cf56db6-x2kzq", False),  # a: not in the alphabet
        ("Deployment", "web", "web-6d4cf56db6-x2kz", False),  # 4 random characters
        ("Deployment", "web", "web-6d4cf56db6b-x2kzq", False),  # an 11-character hash
        ("Deployment", "web", "web-0", False),
        ("Deployment", "a.b", "a.b-6d4-x2kzq", True),
        ("Deployment", "a.b", "axb-6d4-x2kzq", False),  # the dot is literal
        ("StatefulSet", "db", "db-0", True),
        ("StatefulSet", "db", "db-12", True),
        ("StatefulSet", "db", "db-x", False),
        ("StatefulSet", "db", "db-0-1", False),
    ],
)
def test_pod_names_of_a_workload(kind: str, name: str, pod: str, matches: bool) -> None:
    # PromQL's =~ is fully anchored (RE2), as fullmatch is
    assert bool(re.fullmatch(pod_name_regex(WorkloadKey("ns", kind, name)), pod)) is matches


def test_history_queries_for_a_workload() -> None:
    queries = HistoryQueries.of(WorkloadKey("shop", "StatefulSet", "db"), 300)
    selector = 'namespace="shop",pod=~"db-[0-9]+",container!="",container!="POD"'
    assert queries.cpu == (
        f"avg by (container) (rate(container_cpu_usage_seconds_total{{{selector}}}[300s]))"
    )
    assert queries.memory == (
        "avg by (container) "
        f"(avg_over_time(container_memory_working_set_bytes{{{selector}}}[300s]))"
    )
    assert queries.replicas == 'kube_statefulset_status_replicas{namespace="shop",statefulset="db"}'
    dotted = HistoryQueries.of(WorkloadKey("shop", "Deployment", "a.b"), 60)
    assert 'pod=~"a\\\\.b-' in dotted.cpu  # the regex's \. escaped once more in the string
