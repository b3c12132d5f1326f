"""The metrics APIs over real HTTP, read with the real ``kubernetes.aio`` client and raw GETs.

Shapes are ``k8s.io/metrics``' (PodMetrics/NodeMetrics, MetricValueList v1beta2,
ExternalMetricValueList); not-found answers are metrics-server's (``podmetrics.metrics.k8s.io
"<ns>/<name>" not found``) and custom-metrics-apiserver's (``NewMetricNotFound*``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from kubernetes.aio import client

from kubescale.base.clock import VirtualClock
from kubescale.sim.apiserver.metrics_apis import (
    MetricsValues,
    add_metrics_routes,
    metrics_discovery_groups,
)
from kubescale.sim.apiserver.request_log import RequestLog, RequestRecord

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SAMPLED = START - timedelta(seconds=20)
NOW_TEXT = "2026-03-01T12:00:00Z"
SAMPLED_TEXT = "2026-03-01T11:59:40Z"


def as_dict(document: object) -> dict[str, Any]:
    """The client's ``object`` answer, which for these APIs is the decoded JSON document."""
    assert isinstance(document, dict)
    return document


@dataclass
class MetricsServer:
    values: MetricsValues
    url: str
    http: aiohttp.ClientSession
    api: client.CustomObjectsApi
    log: RequestLog

    async def get(self, path: str, **params: str) -> tuple[int, Any]:
        async with self.http.get(f"{self.url}{path}", params=params) as response:
            return response.status, await response.json()


@pytest.fixture
async def served() -> AsyncIterator[MetricsServer]:
    values = MetricsValues(clock=VirtualClock(START))
    app = web.Application()
    log = RequestLog()
    add_metrics_routes(app, values, log)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    url = f"http://{host}:{port}"
    configuration = client.Configuration(host=url)
    async with (
        aiohttp.ClientSession() as http,
        client.ApiClient(configuration) as api_client,
    ):
        yield MetricsServer(values, url, http, client.CustomObjectsApi(api_client), log)
    await runner.cleanup()


def seed_pods(values: MetricsValues) -> None:
    values.set_pod_metrics(
        namespace="default",
        name="web-1",
        labels={"app": "web"},
        containers={
            "app": {"cpu": "250m", "memory": "64Mi"},
            "proxy": {"cpu": 0.01, "memory": 1024},
        },
        timestamp=SAMPLED,
    )
    values.set_pod_metrics(
        namespace="default",
        name="db-0",
        labels={"app": "db"},
        containers={"db": {"cpu": "123456n", "memory": "1Gi"}},
        timestamp=SAMPLED,
        window=90,
    )
    values.set_pod_metrics(
        namespace="other", name="web-9", labels={"app": "web"}, containers={"app": {"cpu": 1}}
    )


WEB_1 = {
    "kind": "PodMetrics",
    "apiVersion": "metrics.k8s.io/v1beta1",
    "metadata": {
        "name": "web-1",
        "namespace": "default",
        "creationTimestamp": NOW_TEXT,
        "labels": {"app": "web"},
    },
    "timestamp": SAMPLED_TEXT,
    "window": "15s",
    "containers": [
        {"name": "app", "usage": {"cpu": "250m", "memory": "64Mi"}},
        {"name": "proxy", "usage": {"cpu": "10m", "memory": "1024"}},
    ],
}


# --- discovery --------------------------------------------------------------------------------


async def test_discovery_documents(served: MetricsServer) -> None:
    groups = {group["name"]: group for group in metrics_discovery_groups()}
    assert set(groups) == {"metrics.k8s.io", "custom.metrics.k8s.io", "external.metrics.k8s.io"}
    assert groups["custom.metrics.k8s.io"]["preferredVersion"] == {
        "groupVersion": "custom.metrics.k8s.io/v1beta2",
        "version": "v1beta2",
    }
    status, group = await served.get("/apis/metrics.k8s.io")
    assert (status, group) == (200, groups["metrics.k8s.io"])

    status, resources = await served.get("/apis/metrics.k8s.io/v1beta1")
    assert status == 200
    assert resources["groupVersion"] == "metrics.k8s.io/v1beta1"
    assert {(r["name"], r["kind"], r["namespaced"]) for r in resources["resources"]} == {
        ("pods", "PodMetrics", True),
        ("nodes", "NodeMetrics", False),
    }

    # never an empty resource list: client-go's discovery fails on one
    _, custom = await served.get("/apis/custom.metrics.k8s.io/v1beta2")
    assert [r["name"] for r in custom["resources"]] == ["pods/*"]
    _, external = await served.get("/apis/external.metrics.k8s.io/v1beta1")
    assert [r["name"] for r in external["resources"]] == ["externalmetrics"]

    served.values.set_pod_metric(namespace="default", pod="web-1", metric="rps", value=3)
    served.values.set_external_metric(namespace="default", metric="queue_depth", value=7)
    _, custom = await served.get("/apis/custom.metrics.k8s.io/v1beta2")
    assert [r["name"] for r in custom["resources"]] == ["pods/rps"]
    _, external = await served.get("/apis/external.metrics.k8s.io/v1beta1")
    assert [(r["name"], r["kind"]) for r in external["resources"]] == [
        ("externalmetrics", "ExternalMetricValueList"),
        ("queue_depth", "ExternalMetricValueList"),
    ]


# --- resource metrics through the kubernetes client -------------------------------------------


async def test_pod_metrics_list_with_label_selector(served: MetricsServer) -> None:
    seed_pods(served.values)
    listed = as_dict(
        await served.api.list_namespaced_custom_object(
            group="metrics.k8s.io",
            version="v1beta1",
            namespace="default",
            plural="pods",
            label_selector="app=web",
        )
    )
    assert listed == {
        "kind": "PodMetricsList",
        "apiVersion": "metrics.k8s.io/v1beta1",
        "metadata": {},
        "items": [WEB_1],
    }


async def test_pod_metrics_across_namespaces_and_by_field(served: MetricsServer) -> None:
    seed_pods(served.values)
    everywhere = as_dict(
        await served.api.list_cluster_custom_object(
            group="metrics.k8s.io", version="v1beta1", plural="pods"
        )
    )
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in everywhere["items"]] == [
        ("default", "db-0"),
        ("default", "web-1"),
        ("other", "web-9"),
    ]
    by_name = as_dict(
        await served.api.list_cluster_custom_object(
            group="metrics.k8s.io",
            version="v1beta1",
            plural="pods",
            field_selector="metadata.name=db-0",
        )
    )
    [db] = by_name["items"]
    assert db["window"] == "1m30s"  # Go's Duration.String()
    assert db["containers"] == [{"name": "db", "usage": {"cpu": "123456n", "memory": "1Gi"}}]


async def test_one_pods_metrics_and_the_metrics_server_404(served: MetricsServer) -> None:
    seed_pods(served.values)
    got = as_dict(
        await served.api.get_namespaced_custom_object(
            group="metrics.k8s.io",
            version="v1beta1",
            namespace="default",
            plural="pods",
            name="web-1",
        )
    )
    assert got == WEB_1

    status, body = await served.get("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/nope")
    assert status == 404
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'podmetrics.metrics.k8s.io "default/nope" not found',
        "reason": "NotFound",
        "details": {"name": "default/nope", "group": "metrics.k8s.io", "kind": "podmetrics"},
        "code": 404,
    }
    with pytest.raises(client.ApiException) as raised:
        await served.api.get_namespaced_custom_object(
            group="metrics.k8s.io",
            version="v1beta1",
            namespace="other",
            plural="pods",
            name="web-1",
        )
    assert raised.value.status == 404


async def test_node_metrics(served: MetricsServer) -> None:
    served.values.set_node_metrics(
        name="n1", usage={"cpu": "1500m", "memory": "3Gi"}, labels={"pool": "a"}, timestamp=SAMPLED
    )
    served.values.set_node_metrics(name="n2", usage={"cpu": 2}, labels={"pool": "b"}, window=60)
    got = as_dict(
        await served.api.get_cluster_custom_object(
            group="metrics.k8s.io", version="v1beta1", plural="nodes", name="n1"
        )
    )
    assert got == {
        "kind": "NodeMetrics",
        "apiVersion": "metrics.k8s.io/v1beta1",
        "metadata": {"name": "n1", "creationTimestamp": NOW_TEXT, "labels": {"pool": "a"}},
        "timestamp": SAMPLED_TEXT,
        "window": "15s",
        "usage": {"cpu": "1500m", "memory": "3Gi"},
    }
    pool_b = as_dict(
        await served.api.list_cluster_custom_object(
            group="metrics.k8s.io", version="v1beta1", plural="nodes", label_selector="pool in (b)"
        )
    )
    assert [(n["metadata"]["name"], n["window"], n["timestamp"]) for n in pool_b["items"]] == [
        ("n2", "1m0s", NOW_TEXT)
    ]
    status, body = await served.get("/apis/metrics.k8s.io/v1beta1/nodes/n3")
    assert (status, body["message"]) == (404, 'nodemetrics.metrics.k8s.io "n3" not found')


async def test_a_bad_selector_is_a_bad_request(served: MetricsServer) -> None:
    status, body = await served.get("/apis/metrics.k8s.io/v1beta1/pods", labelSelector="app in (")
    assert (status, body["reason"], body["code"]) == (400, "BadRequest", 400)


# --- custom metrics ---------------------------------------------------------------------------


async def test_object_metric_of_a_deployment(served: MetricsServer) -> None:
    served.values.set_object_metric(
        namespace="default",
        resource="deployments",
        name="web",
        metric="requests",
        value=20.5,
        timestamp=SAMPLED,
        window_seconds=60,
    )
    status, body = await served.get(
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/deployments.apps/web/requests"
    )
    assert status == 200
    assert body == {
        "kind": "MetricValueList",
        "apiVersion": "custom.metrics.k8s.io/v1beta2",
        "metadata": {},
        "items": [
            {
                "describedObject": {
                    "kind": "Deployment",
                    "namespace": "default",
                    "name": "web",
                    "apiVersion": "apps/v1",
                },
                "metric": {"name": "requests"},
                "timestamp": SAMPLED_TEXT,
                "windowSeconds": 60,
                "value": "20500m",
            }
        ],
    }


async def test_object_metric_through_the_kubernetes_client(served: MetricsServer) -> None:
    served.values.set_object_metric(
        namespace="default", resource="deployments.apps", name="web", metric="requests", value=7
    )
    # the client quotes "web/requests" into one path segment; the server decodes it as kube does
    got = as_dict(
        await served.api.get_namespaced_custom_object(
            group="custom.metrics.k8s.io",
            version="v1beta2",
            namespace="default",
            plural="deployments.apps",
            name="web/requests",
        )
    )
    assert [item["value"] for item in got["items"]] == ["7"]
    served.values.set_pod_metric(namespace="default", pod="web-1", metric="rps", value=2)
    per_pod = as_dict(
        await served.api.get_namespaced_custom_object(
            group="custom.metrics.k8s.io",
            version="v1beta2",
            namespace="default",
            plural="pods",
            name="*/rps",
        )
    )
    assert [item["describedObject"]["name"] for item in per_pod["items"]] == ["web-1"]


async def test_metric_label_selector_picks_series_and_is_echoed(served: MetricsServer) -> None:
    for verb, value in (("GET", 10), ("POST", 2)):
        served.values.set_object_metric(
            namespace="default",
            resource="services",
            name="front",
            metric="hits",
            value=value,
            metric_labels={"verb": verb},
            kind="Service",
        )
    _, body = await served.get(
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/services/front/hits",
        metricLabelSelector="verb=POST",
    )
    [item] = body["items"]
    assert item["value"] == "2"
    assert item["metric"] == {"name": "hits", "selector": {"matchLabels": {"verb": "POST"}}}
    assert item["describedObject"]["kind"] == "Service"
    _, both = await served.get(
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/services/front/hits"
    )
    assert sorted(item["value"] for item in both["items"]) == ["10", "2"]


async def test_per_pod_metric_with_label_selector(served: MetricsServer) -> None:
    for pod, app, value in (("web-1", "web", 5), ("web-0", "web", 3), ("db-0", "db", 9)):
        served.values.set_pod_metric(
            namespace="default", pod=pod, metric="rps", value=value, pod_labels={"app": app}
        )
    served.values.set_pod_metric(
        namespace="other", pod="web-9", metric="rps", value=1, pod_labels={"app": "web"}
    )
    status, body = await served.get(
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/rps", labelSelector="app=web"
    )
    assert status == 200
    assert [
        (item["describedObject"]["name"], item["describedObject"]["kind"], item["value"])
        for item in body["items"]
    ] == [("web-0", "Pod", "3"), ("web-1", "Pod", "5")]
    assert body["items"][0]["describedObject"]["apiVersion"] == "v1"

    _, none = await served.get(
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/rps", labelSelector="app=x"
    )
    assert none["items"] == []


async def test_namespace_and_root_scoped_object_metrics(served: MetricsServer) -> None:
    served.values.set_object_metric(resource="namespaces", name="default", metric="queue", value=4)
    served.values.set_object_metric(resource="nodes", name="n1", metric="temperature", value=61)
    _, ns = await served.get("/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/metrics/queue")
    assert ns["items"][0]["describedObject"] == {
        "kind": "Namespace",
        "name": "default",
        "apiVersion": "v1",
    }
    _, node = await served.get("/apis/custom.metrics.k8s.io/v1beta2/nodes/n1/temperature")
    assert [(i["describedObject"]["kind"], i["value"]) for i in node["items"]] == [("Node", "61")]


UNKNOWN_CUSTOM = [
    (
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/deployments.apps/web/nope",
        "the server could not find the metric nope for deployments.apps web",
    ),
    (
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/nope",
        "the server could not find the metric nope for pods",
    ),
    (
        "/apis/custom.metrics.k8s.io/v1beta2/nodes/n9/nope",
        "the server could not find the metric nope for nodes n9",
    ),
]


@pytest.mark.parametrize(("path", "message"), UNKNOWN_CUSTOM)
async def test_unknown_custom_metric_is_404(served: MetricsServer, path: str, message: str) -> None:
    served.values.set_object_metric(
        namespace="default", resource="deployments", name="web", metric="requests", value=1
    )
    status, body = await served.get(path)
    assert (status, body["reason"], body["message"]) == (404, "NotFound", message)


# --- external metrics -------------------------------------------------------------------------


async def test_external_metric_series_filtered_by_label_selector(served: MetricsServer) -> None:
    for queue, depth in (("orders", 8.6), ("emails", 2)):
        served.values.set_external_metric(
            namespace="default",
            metric="queue_depth",
            value=depth,
            metric_labels={"queue": queue},
            timestamp=SAMPLED,
        )
    status, body = await served.get(
        "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_depth",
        labelSelector="queue=orders",
    )
    assert status == 200
    assert body == {
        "kind": "ExternalMetricValueList",
        "apiVersion": "external.metrics.k8s.io/v1beta1",
        "metadata": {},
        "items": [
            {
                "metricName": "queue_depth",
                "metricLabels": {"queue": "orders"},
                "timestamp": SAMPLED_TEXT,
                "value": "8600m",
            }
        ],
    }
    _, everything = await served.get(
        "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_depth"
    )
    assert sorted(item["value"] for item in everything["items"]) == ["2", "8600m"]

    status, missing = await served.get(
        "/apis/external.metrics.k8s.io/v1beta1/namespaces/other/queue_depth"
    )
    assert (status, missing["message"]) == (
        404,
        "the server could not find the metric queue_depth for provided labels",
    )


async def test_clear_and_remove_forget_values(served: MetricsServer) -> None:
    seed_pods(served.values)
    served.values.set_external_metric(namespace="default", metric="q", value=1)
    served.values.remove_pod_metrics(namespace="default", name="web-1")
    _, listed = await served.get("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods")
    assert [item["metadata"]["name"] for item in listed["items"]] == ["db-0"]

    served.values.clear()
    _, listed = await served.get("/apis/metrics.k8s.io/v1beta1/pods")
    assert listed["items"] == []
    status, _ = await served.get("/apis/external.metrics.k8s.io/v1beta1/namespaces/default/q")
    assert status == 404


# What kube-apiserver's RequestInfo (so the RBAC authorizer) makes of each request:
# (path, (verb, group, resource, subresource, namespace, name)).
RBAC_VIEWS = [
    ("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods",
     ("list", "metrics.k8s.io", "pods", "", "default", "")),
    ("/apis/metrics.k8s.io/v1beta1/nodes/n1", ("get", "metrics.k8s.io", "nodes", "", "", "n1")),
    ("/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/qps",
     ("get", "custom.metrics.k8s.io", "pods", "qps", "default", "*")),
    ("/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/metrics/qps",
     ("get", "custom.metrics.k8s.io", "metrics", "", "default", "qps")),
    ("/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_depth",
     ("list", "external.metrics.k8s.io", "queue_depth", "", "default", "")),
]  # fmt: skip


@pytest.mark.parametrize(("path", "view"), RBAC_VIEWS)
async def test_each_request_is_logged_as_the_rbac_authorizer_sees_it(
    served: MetricsServer, path: str, view: tuple[str, str, str, str, str, str]
) -> None:
    await served.get(path)
    verb, group, resource, subresource, namespace, name = view
    assert served.log.counts() == {
        RequestRecord(verb=verb, group=group, resource=resource, subresource=subresource,
                      namespace=namespace, name=name): 1
    }  # fmt: skip


async def test_discovery_documents_are_not_resource_requests(served: MetricsServer) -> None:
    await served.get("/apis/custom.metrics.k8s.io/v1beta2")
    await served.get("/apis/metrics.k8s.io")
    assert served.log.counts() == {}
