"""``--storage=prometheus``: the loop starts from Prometheus history, not checkpoints.

A stand-in Prometheus (:class:`tests.prometheus.prometheus_fixtures.FakePrometheus`) answers
the provider's PromQL with a day of hourly samples of one container (1 core, 1e9 bytes) and the
pod's labels. The first iteration's recommendation then already has a day of history behind
it, and no checkpoint is read or written.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Mapping
from dataclasses import replace
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from kubescale.components import by_name
from kubescale.controllers.vpa.recommender.prometheus_history import PrometheusHistoryProvider
from kubescale.controllers.vpa.recommender.prometheus_history_config import (
    PrometheusHistoryConfig,
    history_queries,
)
from kubescale.controllers.vpa.recommender.recommender_config import RecommenderSettings
from kubescale.controllers.vpa.recommender.recommender_loop import RecommenderLoop
from kubescale.controllers.vpa.recommender.recommender_metrics import RecommenderMetrics
from kubescale.kube.shared_cache import SharedCache
from kubescale.prometheus.client_settings import PrometheusAuth
from kubescale.sim.scenario.scenario_components import component_settings
from tests.controllers.vpa.recommender.test_recommender_loop import (
    NAMESPACE,
    START,
    Cluster,
    cluster,
    conditions,
    recommendation,
    web_with_one_pod,
)
from tests.prometheus.prometheus_fixtures import FakePrometheus, matrix

__all__ = ["cluster"]  # the fixture, re-exported for pytest

POD_LABELS = 'up{job="kubernetes-pods"}[1d]'


@pytest.fixture
async def prometheus() -> AsyncIterator[FakePrometheus]:
    server = FakePrometheus()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def history(address: str) -> PrometheusHistoryConfig:
    return PrometheusHistoryConfig(
        address=address, history_length="1d", pod_labels_metric=POD_LABELS
    )


def answer_with_a_day(prometheus: FakePrometheus, config: PrometheusHistoryConfig) -> None:
    queries = history_queries(config)
    end = int(START.timestamp())
    hours = [end - 3600 * h for h in range(24, 0, -1)]
    container = {"namespace": NAMESPACE, "pod_name": "web-1", "name": "app"}
    prometheus.answer(queries.cpu, matrix((container, [(t, "1") for t in hours])))
    prometheus.answer(queries.memory, matrix((container, [(t, "1000000000") for t in hours])))
    pod = {
        "kubernetes_namespace": NAMESPACE,
        "kubernetes_pod_name": "web-1",
        "pod_label_app": "web",
    }
    prometheus.answer(queries.pod_labels, matrix((pod, [(hours[-1], "1")])))


async def test_the_first_iteration_starts_from_the_history(
    cluster: Cluster, prometheus: FakePrometheus
) -> None:
    await web_with_one_pod(cluster)
    cluster.vpa("web")
    config = history(prometheus.address)
    answer_with_a_day(prometheus, config)
    settings = replace(_recommender_settings({}), storage="prometheus", prometheus=config)
    informers = SharedCache(client=cluster.client, clock=cluster.client.clock, rng=random.Random(1))
    cluster.loops.append(informers)
    provider = PrometheusHistoryProvider(config, auth=PrometheusAuth())
    loop = RecommenderLoop(
        client=cluster.client,
        cache=informers,
        settings=settings,
        metrics=RecommenderMetrics(CollectorRegistry()),
        history=provider,
    )
    informers.start()
    try:
        await cluster.run(loop)
    finally:
        await provider.close()
    vpa = cluster.get_vpa("web")
    (entry,) = recommendation(vpa)
    assert entry["target"] == {"cpu": "1168m", "memory": "1168723596"}
    # 24 hourly samples plus this minute's: the upper bound is finite (not the 1e14 clamp).
    assert entry["upperBound"]["cpu"] != "100G"
    assert conditions(vpa)["RecommendationProvided"]["status"] == "True"
    assert {r.params["query"] for r in prometheus.requests} == {
        history_queries(config).cpu,
        history_queries(config).memory,
        POD_LABELS,
    }
    assert loop.checkpoints_loaded == 0
    assert cluster.checkpoints() == []


async def test_prometheus_storage_needs_a_provider(cluster: Cluster) -> None:
    settings = replace(_recommender_settings({}), storage="prometheus")
    with pytest.raises(ValueError, match="history provider"):
        RecommenderLoop(
            client=cluster.client,
            cache=SharedCache(client=cluster.client, clock=cluster.client.clock),
            settings=settings,
            metrics=RecommenderMetrics(CollectorRegistry()),
        )


def _recommender_settings(flags: Mapping[str, Any]) -> RecommenderSettings:
    """The recommender's settings from flags written as in a scenario."""
    spec = by_name("vpa-recommender")
    assert spec is not None
    settings: RecommenderSettings = component_settings(spec, flags)
    return settings
