"""The recommender's metrics under upstream's names (``pkg/utils/metrics/recommender``), as
``/metrics`` exposes them after real iterations."""

from __future__ import annotations

import re

from prometheus_client import CollectorRegistry, generate_latest

from kubescale.controllers.vpa.recommender.recommender_metrics import (
    ObjectCounter,
    RecommenderMetrics,
)
from tests.controllers.vpa.recommender.test_recommender_loop import (
    Cluster,
    cluster,
    web_with_one_pod,
)

__all__ = ["cluster"]  # the fixture, re-exported for pytest

STEPS = ("LoadVPAs", "LoadPods", "LoadMetrics", "UpdateVPAs", "MaintainCheckpoints")


def sample(text: str, name: str, **labels: str) -> float | None:
    """The value of one exposed sample, labels in any order."""
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        match = re.fullmatch(r"([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)", line)
        if match is None or match.group(1) != name:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2) or ""))
        if found == labels:
            return float(match.group(3))
    return None


async def test_metrics_after_two_iterations(cluster: Cluster) -> None:
    await web_with_one_pod(cluster)
    cluster.vpa("web")  # updateMode Off
    cluster.vpa("lonely", target=("apps/v1", "Deployment", "nothing-here"))
    registry = CollectorRegistry()
    loop = await cluster.recommender(registry=registry)
    await cluster.run(loop)
    await cluster.advance(60)
    await cluster.run(loop)
    text = generate_latest(registry).decode()

    def objects(**labels: str) -> float | None:
        return sample(text, "vpa_recommender_vpa_objects_count", **labels)

    assert (
        objects(
            update_mode="Off",
            has_recommendation="true",
            api="v1",
            matches_pods="true",
            unsupported_config="false",
        )
        == 1.0
    )
    assert (
        objects(
            update_mode="Off",
            has_recommendation="false",
            api="v1",
            matches_pods="false",
            unsupported_config="true",
        )
        == 1.0
    )
    # Every other bucket is published as 0 (stale buckets drop).
    assert (
        objects(
            update_mode="Auto",
            has_recommendation="true",
            api="v1",
            matches_pods="true",
            unsupported_config="false",
        )
        == 0.0
    )
    for step in (*STEPS, "GarbageCollect", "total"):
        assert sample(text, "vpa_recommender_execution_latency_seconds_count", step=step) == 2.0
    assert sample(text, "vpa_recommender_aggregate_container_states_count") == 1.0
    # First recommendation of "web" came at the first iteration, right at its creation.
    assert sample(text, "vpa_recommender_recommendation_latency_seconds_count") == 1.0
    assert sample(text, "vpa_recommender_recommendation_latency_seconds_sum") == 0.0
    assert (
        sample(
            text,
            "vpa_recommender_metric_server_responses",
            is_error="false",
            client_name="default-metrics-client",
        )
        == 2.0
    )
    assert "vpa_recommender_metric_server_responses_total" not in text


def test_object_counter_defaults_an_unset_mode_to_auto() -> None:
    registry = CollectorRegistry()
    metrics = RecommenderMetrics(registry)
    counter = ObjectCounter()
    for _ in range(2):
        counter.add(
            update_mode=None,
            has_recommendation=False,
            api_version="v1",
            matches_pods=True,
            unsupported_config=False,
        )
    counter.observe(metrics.vpa_objects)
    text = generate_latest(registry).decode()
    labels = {
        "has_recommendation": "false",
        "api": "v1",
        "matches_pods": "true",
        "unsupported_config": "false",
    }
    assert sample(text, "vpa_recommender_vpa_objects_count", update_mode="Auto", **labels) == 2.0
    assert sample(text, "vpa_recommender_vpa_objects_count", update_mode="Off", **labels) == 0.0
