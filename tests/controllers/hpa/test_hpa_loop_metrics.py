"""Every metric source type, behavior, scale-to-zero and PromQL through the loop, end to end.

Expected counts are worked out from reference §1.6-1.7 and §2.3-2.4 in each test's comments.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, timedelta
from pathlib import Path
from typing import Any

import pytest

from kubescale.controllers.hpa.hpa_config import HpaSettings
from kubescale.kube.resources import DEPLOYMENTS
from kubescale.prometheus.client_settings import PrometheusAuth
from kubescale.prometheus.query_api import PrometheusQueryClient
from tests.controllers.vpa.recommender.test_recommender_loop import Cluster, cluster
from tests.prometheus.prometheus_fixtures import (
    RealPrometheus,
    create_blocks,
    prometheus_tools,
    write_openmetrics,
)

from .hpa_cluster import NAMESPACE, Hpas

__all__ = ["cluster"]

WEB = {"app": "web"}


@pytest.fixture
async def hpas(cluster: Cluster) -> AsyncIterator[Hpas]:
    built = Hpas(cluster)
    yield built
    await built.close()


def two_web_pods(hpas: Hpas, usage: str = "100m") -> None:
    hpas.deployment("web", replicas=2)
    for i in range(2):
        hpas.pod(f"web-{i}", labels=WEB, usage=usage)


def set_status_replicas(hpas: Hpas, name: str, replicas: int) -> None:
    store = hpas.cluster.api.store
    obj = store.get(DEPLOYMENTS, name, NAMESPACE)
    store.update_status({**obj, "status": {"replicas": replicas}})


def metric(kind: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    field = {"ContainerResource": "containerResource"}.get(kind, kind.lower())
    return [{"type": kind, field: body}]


async def test_pods_metric(hpas: Hpas) -> None:
    two_web_pods(hpas)
    for i in range(2):
        hpas.cluster.api.metrics.set_pod_metric(
            namespace=NAMESPACE, pod=f"web-{i}", metric="qps", value=30, pod_labels=WEB
        )
    hpas.hpa(
        "web",
        target="web",
        metrics=metric(
            "Pods",
            {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "20"}},
        ),
    )
    loop = await hpas.loop()
    await hpas.run(loop)
    # average 30 of 20 → 1.5; ceil(1.5 × 2) = 3 ≤ limit 4
    assert hpas.replicas("web") == 3
    assert hpas.get_hpa("web")["status"]["currentMetrics"] == [
        {"type": "Pods", "pods": {"metric": {"name": "qps"}, "current": {"averageValue": "30"}}}
    ]


async def test_object_metric_value_limited_by_scale_up_rule(hpas: Hpas) -> None:
    two_web_pods(hpas)
    hpas.cluster.api.metrics.set_object_metric(
        resource="deployments", namespace=NAMESPACE, name="web", metric="requests", value=30
    )
    described = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
    hpas.hpa(
        "web",
        target="web",
        metrics=metric(
            "Object",
            {
                "describedObject": described,
                "metric": {"name": "requests"},
                "target": {"type": "Value", "value": "10"},
            },
        ),
    )
    loop = await hpas.loop()
    await hpas.run(loop)
    # 30/10 = 3.0; 2 ready pods → ceil(6) = 6; limit max(2 × 2, 4) = 4 < max 10 → 4
    assert hpas.replicas("web") == 4
    assert hpas.conditions("web")["ScalingLimited"] == (
        "True",
        "ScaleUpLimit",
        "the desired replica count is increasing faster than the maximum scale rate",
    )
    assert (await hpas.events("web"))[-1][
        2
    ] == "New size: 4; reason: Deployment metric requests above target"
    assert hpas.get_hpa("web")["status"]["currentMetrics"][0]["object"] == {
        "metric": {"name": "requests"},
        "current": {"value": "30"},
        "describedObject": described,
    }


async def test_external_metrics_value_and_average(hpas: Hpas) -> None:
    two_web_pods(hpas)
    values = hpas.cluster.api.metrics
    values.set_external_metric(
        namespace=NAMESPACE, metric="queue", value="8600m", metric_labels={"q": "a"}
    )
    values.set_external_metric(
        namespace=NAMESPACE, metric="queue", value="1400m", metric_labels={"q": "b"}
    )
    hpas.hpa(
        "web",
        target="web",
        metrics=metric(
            "External",
            {"metric": {"name": "queue"}, "target": {"type": "Value", "value": "5"}},
        ),
    )
    loop = await hpas.loop()
    await hpas.run(loop)
    # 8.6 + 1.4 = 10 (summed); 10/5 = 2.0; 2 ready → 4
    assert hpas.replicas("web") == 4
    assert hpas.get_hpa("web")["status"]["currentMetrics"][0]["external"]["current"] == {
        "value": "10"
    }

    # AverageValue against status.replicas: a selector picks series a only (8.6);
    # status.replicas 2: 8.6/(2 × 2) = 2.15 → ceil(8.6/2) = 5; average ceil(8600/2) = 4300m
    hpas.deployment("avg", replicas=2, labels={"app": "avg"})
    set_status_replicas(hpas, "avg", 2)
    hpas.hpa(
        "avg",
        target="avg",
        metrics=metric(
            "External",
            {
                "metric": {"name": "queue", "selector": {"matchLabels": {"q": "a"}}},
                "target": {"type": "AverageValue", "averageValue": "2"},
            },
        ),
    )
    await hpas.run(loop)
    assert hpas.replicas("avg") == 4  # 5, but the legacy scale-up limit max(2 × 2, 4) = 4
    name = (
        "external metric queue(&LabelSelector{MatchLabels:map[string]string{q: a,},"
        "MatchExpressions:[]LabelSelectorRequirement{},})"
    )
    assert hpas.conditions("avg")["ScalingActive"][2] == (
        f"the HPA was able to successfully calculate a replica count from {name}"
    )
    assert hpas.get_hpa("avg")["status"]["currentMetrics"][0]["external"]["current"] == {
        "averageValue": "4300m"
    }


async def test_container_resource_metric(hpas: Hpas) -> None:
    two_web_pods(hpas, usage="900m")
    hpas.hpa(
        "web",
        target="web",
        metrics=metric(
            "ContainerResource",
            {
                "name": "cpu",
                "container": "app",
                "target": {"type": "Utilization", "averageUtilization": 60},
            },
        ),
    )
    loop = await hpas.loop()
    await hpas.run(loop)
    # 90% of 60 → 1.5; ceil(1.5 × 2) = 3
    assert hpas.replicas("web") == 3
    assert hpas.get_hpa("web")["status"]["currentMetrics"][0] == {
        "type": "ContainerResource",
        "containerResource": {
            "name": "cpu",
            "container": "app",
            "current": {"averageValue": "900m", "averageUtilization": 90},
        },
    }


async def test_several_metrics_take_the_highest_and_partial_failure_scales_up_only(
    hpas: Hpas,
) -> None:
    two_web_pods(hpas, usage="600m")
    hpas.hpa(
        "web",
        target="web",
        metrics=[
            *metric(
                "Resource",
                {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}},
            ),
            *metric(
                "External",
                {"metric": {"name": "absent"}, "target": {"type": "Value", "value": "1"}},
            ),
        ],
    )
    loop = await hpas.loop()
    await hpas.run(loop)
    # cpu: 60% of 50 → 1.2; ceil(2.4) = 3 > spec 2 → scaling up goes on despite the failed one
    assert hpas.replicas("web") == 3
    assert hpas.conditions("web")["ScalingActive"][1] == "ValidMetricFound"
    events = await hpas.events("web")
    assert events[0][:2] == ("Warning", "FailedGetExternalMetric")
    # cpu now 20%: a proposal below spec.replicas with a failed metric → no scale-down
    for i in range(2):
        hpas.usage(f"web-{i}", "200m", labels=WEB)
    await hpas.cluster.advance(600)
    for i in range(2):
        hpas.usage(f"web-{i}", "200m", labels=WEB)
    await hpas.run(loop)
    assert hpas.replicas("web") == 3
    assert hpas.conditions("web")["ScalingActive"][1] == "FailedGetExternalMetric"


async def test_behavior_policies_and_per_hpa_tolerance(hpas: Hpas) -> None:
    two_web_pods(hpas, usage="1050m")
    hpas.hpa(
        "web",
        target="web",
        metrics=metric(
            "Resource",
            {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 100}},
        ),
        behavior={
            "scaleUp": {
                "tolerance": "0.02",
                "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}],
            }
        },
    )
    loop = await hpas.loop()
    await hpas.run(loop)
    # 105% of 100: 1.05 > 1 + 0.02 → ceil(1.05 × 2) = 3; Pods 1/60 s: 2 + 1 = 3 → 3
    assert hpas.replicas("web") == 3
    # with the global 0.1 it would hold: the feature gate off ignores the per-HPA tolerance
    hpas.deployment("flat", replicas=2, labels={"app": "flat"})
    for i in range(2):
        hpas.pod(f"flat-{i}", labels={"app": "flat"}, usage="1050m")
    hpas.hpa(
        "flat",
        target="flat",
        metrics=metric(
            "Resource",
            {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 100}},
        ),
        behavior={"scaleUp": {"tolerance": "0.02"}},
    )
    gated = await hpas.loop(HpaSettings(feature_gates={"HPAConfigurableTolerance": False}))
    await hpas.run(gated)
    assert hpas.replicas("flat") == 2


def queue(hpas: Hpas, value: str) -> None:
    hpas.cluster.api.metrics.set_external_metric(namespace=NAMESPACE, metric="queue", value=value)


async def test_scale_to_zero_and_back_stepping_down_through_one(hpas: Hpas) -> None:
    """KEDA's semantics without its N→0 jump (module ``scale_to_zero``)."""
    hpas.deployment("worker", replicas=0, labels={"app": "worker"})
    queue(hpas, "0")
    hpas.hpa(
        "worker",
        target="worker",
        min_replicas=1,
        metrics=metric(
            "External",
            {"metric": {"name": "queue"}, "target": {"type": "AverageValue", "averageValue": "5"}},
        ),
        behavior={
            "scaleDown": {
                "stabilizationWindowSeconds": 0,
                "policies": [{"type": "Pods", "value": 1, "periodSeconds": 15}],
            }
        },
        annotations={
            "hpa.kubescale.io/scale-to-zero": "true",
            "hpa.kubescale.io/cooldown-period": "60",
        },
    )
    loop = await hpas.loop()
    counts = []

    async def step(seconds: float, value: str) -> None:
        await hpas.cluster.advance(seconds)
        queue(hpas, value)
        set_status_replicas(hpas, "worker", hpas.replicas("worker"))
        await hpas.run(loop)
        counts.append(hpas.replicas("worker"))

    await step(0, "0")  # inactive at 0: stays 0 (not ScalingDisabled)
    assert hpas.conditions("worker")["ScalingActive"][:2] == ("False", "ScaledToZero")
    await step(20, "12")  # 12 > threshold 0: activation → max(min 1, 1) = 1
    await step(20, "12")  # 1↔N by the HPA: 12/(5 × 1) = 2.4 → ceil(12/5) = 3
    # inactive: the math proposes 0, floored at 1, Pods 1 / 15 s → 2, then 1
    await step(20, "0")
    await step(20, "0")
    # at 1: last active 60 s ago; KEDA needs last active + cooldown < now (strict) → still 1
    await step(20, "0")
    await step(20, "0")  # 80 s > 60 s → 0
    assert counts == [0, 1, 3, 2, 1, 1, 0]
    assert (await hpas.events("worker"))[-1] == (
        "Normal",
        "SuccessfulRescale",
        "New size: 0; reason: All metrics below activation threshold and cooldown elapsed",
    )


async def test_promql_metric_from_real_prometheus(hpas: Hpas, tmp_path: Path) -> None:
    """An External metric answered by a PromQL query against Debian's Prometheus: no
    external-metrics APIService involved (the in-process server has no value for it)."""
    tools = prometheus_tools()
    if isinstance(tools, str):
        pytest.skip(tools)
    binary, promtool = tools
    now = hpas.now.astimezone(UTC)
    start = int((now - timedelta(minutes=10)).timestamp())
    samples = [(start + 60 * m, 0.0) for m in range(11)]
    series = [
        (
            "http_requests_in_flight",
            {"job": "web", "instance": "a"},
            [(t, 30.0) for t, _ in samples],
        ),
        (
            "http_requests_in_flight",
            {"job": "web", "instance": "b"},
            [(t, 10.5) for t, _ in samples],
        ),
    ]
    openmetrics = tmp_path / "series.om"
    write_openmetrics(openmetrics, series)
    tsdb = tmp_path / "tsdb"
    await create_blocks(promtool, openmetrics, tsdb)
    two_web_pods(hpas)
    hpas.hpa(
        "web",
        target="web",
        metrics=metric(
            "External",
            {"metric": {"name": "in_flight"}, "target": {"type": "Value", "value": "10"}},
        ),
        annotations={
            "hpa.kubescale.io/promql": json.dumps(
                {"in_flight": 'sum(http_requests_in_flight{job="web"})'}
            )
        },
    )
    async with RealPrometheus(binary=binary, tsdb=tsdb, workdir=tmp_path) as server:
        client = PrometheusQueryClient(address=server.address, auth=PrometheusAuth(), timeout=10)
        try:
            loop = await hpas.loop(prometheus=client)
            await hpas.run(loop)
        finally:
            await client.close()
    # sum = 40.5 → 40500m; 40.5/10 = 4.05; 2 ready → ceil(8.1) = 9; limit max(4, 4) = 4
    assert hpas.replicas("web") == 4
    assert hpas.get_hpa("web")["status"]["currentMetrics"][0]["external"]["current"] == {
        "value": "40500m"
    }


async def test_predictive_scale_up_ahead_of_a_daily_rise(hpas: Hpas) -> None:
    two_web_pods(hpas, usage="500m")  # 50% of 50: ratio 1.0 → the metrics alone hold 2
    hpas.hpa("web", target="web", annotations={"hpa.kubescale.io/predictive": "true"})
    loop = await hpas.loop()
    history = loop.demand_history(NAMESPACE, "web")
    now = hpas.now
    for minute in range(1, 24 * 60 + 30):
        moment = now - timedelta(days=1, minutes=30) + timedelta(minutes=minute)
        risen = now - timedelta(days=1) + timedelta(minutes=2) <= moment < now - timedelta(hours=1)
        history.record(moment, 6.0 if risen else 2.0)
    await hpas.run(loop)
    # demand now 50 × 2 / 50 = 2 replicas' worth; a day ago it grew ×3 two minutes later:
    # forecast 2 × 3 = 6 > the metrics' 2 → proposal 6; legacy limit max(2 × 2, 4) = 4
    assert hpas.replicas("web") == 4
    assert (await hpas.events("web"))[-1][2] == (
        "New size: 4; reason: predicted cpu resource utilization (percentage of request) above "
        "target"
    )
    # the HPA's limits bound the prediction like any proposal
    assert hpas.conditions("web")["ScalingLimited"][1] == "ScaleUpLimit"
