"""The feeder's rules (upstream ``input/cluster_feeder.go``, ``input/spec``, ``input/metrics``):
which VPAs a recommender handles, what a pod's requests and PodMetrics become, and targets of
kinds without an informer (a ``/scale`` subresource looked up on the API server)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from kubescale.components import by_name
from kubescale.controllers.vpa.recommender.cluster_feeder import (
    ClusterFeeder,
    container_requests,
    handles_vpa,
    pod_metrics_samples,
)
from kubescale.controllers.vpa.recommender.recommender_config import RecommenderSettings
from kubescale.controllers.vpa.recommender.recommender_metrics import RecommenderMetrics
from kubescale.kube.client import ClientSettings, connect
from kubescale.kube.resources import PODS
from kubescale.kube.shared_cache import SharedCache
from kubescale.objects.metrics_api import PodMetrics
from kubescale.objects.pod import Pod
from kubescale.objects.vpa import VerticalPodAutoscaler
from kubescale.sim.apiserver.kubeconfig import build_kubeconfig, write_kubeconfig_file
from kubescale.sim.scenario.scenario_components import component_settings
from tests import builders
from tests.builders.meta import stored_as
from tests.controllers.vpa.recommender.test_recommender_loop import (
    NAMESPACE,
    Cluster,
    cluster,
    conditions,
    recommendation,
)

__all__ = ["cluster"]  # the fixture, re-exported for pytest


@pytest.mark.parametrize(
    ("recommenders", "name", "selected", "ignored", "handled"),
    [
        (None, "default", "", (), True),
        ([], "default", "", (), True),  # an empty list names no recommender
        (["default"], "default", "", (), True),
        (["custom"], "default", "", (), False),
        (None, "custom", "", (), False),
        (["custom"], "custom", "", (), True),
        (["default"], "custom", "", (), False),
        (None, "default", "shop", (), True),
        (None, "default", "other", (), False),  # --vpa-object-namespace
        (None, "default", "", ("shop",), False),  # --ignored-vpa-object-namespaces
        (["custom"], "custom", "", ("kube-system",), True),
    ],
)
def test_which_vpas_a_recommender_handles(
    recommenders: list[str] | None,
    name: str,
    selected: str,
    ignored: tuple[str, ...],
    handled: bool,
) -> None:
    assert (
        handles_vpa(
            stored_as(
                builders.vpas.vpa(
                    name="web",
                    namespace="shop",
                    target=builders.vpas.target_ref(api_version=None),
                    spec=None
                    if recommenders is None
                    else {"recommenders": [{"name": n} for n in recommenders]},
                    api_version=None,
                ),
                VerticalPodAutoscaler,
            ),
            recommender_name=name,
            vpa_object_namespace=selected,
            ignored_namespaces=ignored,
        )
        is handled
    )


def test_requests_come_from_the_status_before_the_spec_and_round_up() -> None:
    pod = {
        "spec": {
            "containers": [
                {"name": "app", "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}},
                {"name": "sidecar", "resources": {"requests": {"cpu": "0.0001"}}},
                {"name": "bare"},
            ],
            "initContainers": [{"name": "init", "resources": {"requests": {"cpu": "1"}}}],
        },
        "status": {
            "containerStatuses": [
                {"name": "app", "resources": {"requests": {"cpu": "300m", "memory": "1.5"}}}
            ]
        },
    }
    # MilliValue() and Value() round up; init containers are not tracked.
    assert container_requests(stored_as(pod, Pod)) == {
        "app": {"cpu": 300, "memory": 2},
        "sidecar": {"cpu": 1, "memory": 0},
        "bare": {"cpu": 0, "memory": 0},
    }


def test_pod_metrics_become_samples_at_their_timestamp() -> None:
    items: list[PodMetrics] = [
        {
            "metadata": {"namespace": "shop", "name": "web-1"},
            "timestamp": "2026-01-05T00:01:00Z",
            "window": "15s",
            "containers": [
                {"name": "app", "usage": {"cpu": "250000001n", "memory": "100Mi"}},
                {"name": "bad", "usage": {"cpu": "lots", "memory": "1"}},
            ],
        },
        {"metadata": {"namespace": "shop", "name": "no-time"}, "containers": []},
    ]
    at = datetime(2026, 1, 5, 0, 1, tzinfo=UTC)
    assert pod_metrics_samples(items) == [
        ("shop", "web-1", "app", "cpu", 251, at),
        ("shop", "web-1", "app", "memory", 104857600, at),
    ]


async def test_a_scalable_custom_target_is_looked_up_in_the_same_pass(cluster: Cluster) -> None:
    labels = {"cluster.x-k8s.io/deployment-name": "pool"}
    cluster.api.store.create(
        {
            "apiVersion": "cluster.x-k8s.io/v1beta1",
            "kind": "MachineDeployment",
            "metadata": {"name": "pool", "namespace": NAMESPACE},
            "spec": {
                "clusterName": "sim",
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"clusterName": "sim", "bootstrap": {}, "infrastructureRef": {}},
                },
            },
        }
    )
    cluster.pod("pool-1", labels=labels, containers={"agent": {"cpu": "100m"}})
    cluster.usage("pool-1", {"agent": {"cpu": "1", "memory": "1000000000"}})
    cluster.vpa("pool", target=("cluster.x-k8s.io/v1beta1", "MachineDeployment", "pool"))
    loop = await cluster.recommender()
    await cluster.run(loop)
    vpa = cluster.get_vpa("pool")
    assert "ConfigUnsupported" not in conditions(vpa)
    assert recommendation(vpa)[0]["target"] == {"cpu": "1168m", "memory": "1168723596"}


async def test_a_failing_metrics_server_is_counted_and_survived(tmp_path: Path) -> None:
    """An unreachable metrics API: counted as an error response, no samples, no exception."""
    path = tmp_path / "kubeconfig"
    write_kubeconfig_file(path, build_kubeconfig(server="http://127.0.0.1:9", ca_cert_pem=None))
    client = await connect(
        kubeconfig=path,
        registry=CollectorRegistry(),
        settings=ClientSettings(max_attempts=1, connect_timeout=1.0, request_timeout=2.0),
    )
    try:
        metrics = RecommenderMetrics(CollectorRegistry())
        feeder = ClusterFeeder(
            client=client,
            cache=SharedCache(
                client=client, clock=client.clock
            ),  # never started: nothing else is asked
            settings=_recommender_settings({}),
            metrics=metrics,
        )
        assert await feeder.load_real_time_metrics() == 0
    finally:
        await client.close()
    responses = metrics.metric_server_responses
    assert responses.value(is_error=True, client_name="default-metrics-client") == 1
    assert responses.value(is_error=False, client_name="default-metrics-client") == 0
    exposed = generate_latest(metrics_registry(metrics)).decode()
    assert (
        'vpa_recommender_metric_server_responses{client_name="default-metrics-client",'
        'is_error="true"} 1.0' in exposed
    )


def metrics_registry(metrics: RecommenderMetrics) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(metrics.metric_server_responses)
    return registry


def _recommender_settings(flags: Mapping[str, Any]) -> RecommenderSettings:
    """The recommender's settings from flags written as in a scenario."""
    spec = by_name("vpa-recommender")
    assert spec is not None
    settings: RecommenderSettings = component_settings(spec, flags)
    return settings


async def test_a_steady_iteration_feeds_no_pod(cluster: Cluster) -> None:
    """Issue 29: ``LoadPods`` feeds the pods that changed since the last iteration, counted by
    ``ClusterFeeder.pods_fed``; the model holds what the from-scratch path would."""
    cluster.deployment("web")
    for name in ("web-1", "web-2", "web-3"):
        cluster.pod(name, labels={"app": "web"}, containers={"app": {"cpu": "500m"}})
    cluster.vpa("web")
    loop = await cluster.recommender()
    await cluster.run(loop)
    feeder = loop.feeder
    assert feeder.pods_fed == 3  # start-up: every pod
    await cluster.advance(60)
    await cluster.run(loop)
    assert feeder.pods_fed == 0  # nothing changed: no pod fed
    await cluster.advance(60)
    await cluster.run(loop)
    assert feeder.pods_fed == 0
    # web-2 gets another label (a new label set: its aggregate is another), web-3 goes
    pod = cluster.api.store.get(PODS, "web-2", NAMESPACE)
    pod["metadata"]["labels"]["track"] = "canary"
    cluster.api.store.update(pod)
    cluster.api.store.delete(PODS, "web-3", NAMESPACE, grace_period_seconds=0)
    await cluster.advance(60)
    await cluster.run(loop)
    assert feeder.pods_fed == 1
    assert feeder.state.pod_keys() == [(NAMESPACE, "web-1"), (NAMESPACE, "web-2")]
    assert [key.labels for key in feeder.state.aggregate_keys()] == [
        "app=web",
        "app=web,track=canary",
    ]
    assert feeder.state.vpa_pod_count(namespace=NAMESPACE, name="web") == 2
