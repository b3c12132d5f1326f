"""The HPA controller's writes through the one plan executor, and ``--dry-run``.

``test_hpa_loop``'s first case (Deployment ``web``, 2 pods using 900m of 1000m requested, an
HPA on 50 % CPU): ``ceil(1.8 × 2) = 4``, limit ``max(2 × 2, 4) = 4``. With ``--dry-run`` the
loop decides the same and logs its intents — the scale to 4, the ``SuccessfulRescale`` event,
the status it would write — and not one write request reaches the API server.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest
from prometheus_client import CollectorRegistry

from kubescale.controllers.hpa.hpa_config import HpaSettings
from kubescale.plans.executor import DRY_RUN_PREFIX
from kubescale.plans.intents import describe
from kubescale.sim.apiserver.faults import WRITE_VERBS
from tests.controllers.vpa.recommender.test_recommender_loop import Cluster, cluster

from .hpa_cluster import NAMESPACE, Hpas

__all__ = ["cluster"]

WEB = {"app": "web"}


@pytest.fixture
async def hpas(cluster: Cluster) -> AsyncIterator[Hpas]:
    built = Hpas(cluster)
    yield built
    await built.close()


async def test_dry_run_logs_the_plan_and_writes_nothing(
    hpas: Hpas, caplog: pytest.LogCaptureFixture
) -> None:
    hpas.deployment("web", replicas=2)
    for i in range(2):
        hpas.pod(f"web-{i}", labels=WEB, usage="900m")
    hpas.hpa("web", target="web")
    registry = CollectorRegistry()
    loop = await hpas.loop(registry=registry, settings=HpaSettings(dry_run=True))
    caplog.set_level(logging.INFO, logger="kubescale.plans")
    caplog.clear()
    hpas.cluster.api.requests.clear()
    await hpas.run(loop)
    written = {r: n for r, n in hpas.cluster.api.requests.counts().items() if r.verb in WRITE_VERBS}
    assert written == {}
    assert hpas.replicas("web") == 2
    printed = [r.getMessage() for r in caplog.records if r.name == "kubescale.plans"]
    actor = f"{DRY_RUN_PREFIX}horizontal-pod-autoscaler"
    assert printed[:2] == [
        f"{actor}: scale deployments {NAMESPACE}/web replicas=4",
        f"{actor}: event HorizontalPodAutoscaler {NAMESPACE}/web Normal SuccessfulRescale "
        '"New size: 4; reason: cpu resource utilization (percentage of request) above target"',
    ]
    [status] = printed[2:]
    assert status.startswith(f"{actor}: write-status horizontalpodautoscalers {NAMESPACE}/web ")
    assert '"currentReplicas":2,"desiredReplicas":4' in status
    sample = registry.get_sample_value(
        "kubescale_plan_intents_total",
        {"actor": "horizontal-pod-autoscaler", "intent": "Scale", "outcome": "dry-run"},
    )
    assert sample == 1


async def test_scale_status_and_events_go_through_the_executor(hpas: Hpas) -> None:
    """Without ``--dry-run`` the same three intents are applied and counted done."""
    hpas.deployment("web", replicas=2)
    for i in range(2):
        hpas.pod(f"web-{i}", labels=WEB, usage="900m")
    hpas.hpa("web", target="web")
    registry = CollectorRegistry()
    loop = await hpas.loop(registry=registry)
    await hpas.run(loop)
    assert hpas.replicas("web") == 4
    for intent in ("Scale", "Event", "WriteStatus"):
        sample = registry.get_sample_value(
            "kubescale_plan_intents_total",
            {"actor": "horizontal-pod-autoscaler", "intent": intent, "outcome": "done"},
        )
        assert sample == 1, intent


async def test_the_loop_plan_is_what_dry_run_prints(
    hpas: Hpas, caplog: pytest.LogCaptureFixture
) -> None:
    """``HpaLoop.plan`` reads and decides as a pass does and sends nothing; ``--dry-run``
    prints that same plan, line for line."""
    hpas.deployment("web", replicas=2)
    for i in range(2):
        hpas.pod(f"web-{i}", labels=WEB, usage="900m")
    hpas.hpa("web", target="web")
    loop = await hpas.loop(settings=HpaSettings(dry_run=True))
    await hpas.settle(loop)
    hpas.cluster.api.requests.clear()
    planned = [describe(intent) for intent in await loop.plan(hpas.now)]
    assert planned[0] == f"horizontal-pod-autoscaler: scale deployments {NAMESPACE}/web replicas=4"
    caplog.set_level(logging.INFO, logger="kubescale.plans")
    caplog.clear()
    await loop.run_once(hpas.now)
    printed = [r.getMessage() for r in caplog.records if r.name == "kubescale.plans"]
    assert printed == [DRY_RUN_PREFIX + line for line in planned]
    written = {r: n for r, n in hpas.cluster.api.requests.counts().items() if r.verb in WRITE_VERBS}
    assert written == {}


async def test_dry_run_prints_a_failed_metric_read(
    hpas: Hpas, caplog: pytest.LogCaptureFixture
) -> None:
    """No PodMetrics for the pods: the decision's plan for a failed read -- the
    ``FailedGetResourceMetric`` event, the status with ``ScalingActive=False`` and that reason,
    then ``FailedComputeMetricsReplicas`` (upstream's order) -- printed, nothing written."""
    hpas.deployment("web", replicas=2)
    for i in range(2):
        hpas.pod(f"web-{i}", labels=WEB)
    hpas.hpa("web", target="web")
    loop = await hpas.loop(settings=HpaSettings(dry_run=True))
    caplog.set_level(logging.INFO, logger="kubescale.plans")
    caplog.clear()
    hpas.cluster.api.requests.clear()
    await hpas.run(loop)
    written = {r: n for r, n in hpas.cluster.api.requests.counts().items() if r.verb in WRITE_VERBS}
    assert written == {}
    printed = [r.getMessage() for r in caplog.records if r.name == "kubescale.plans"]
    event = (
        f"{DRY_RUN_PREFIX}horizontal-pod-autoscaler: event HorizontalPodAutoscaler {NAMESPACE}/web"
    )
    first, status, last = printed
    assert first.startswith(f"{event} Warning FailedGetResourceMetric ")
    assert status.startswith(
        f"{DRY_RUN_PREFIX}horizontal-pod-autoscaler: write-status horizontalpodautoscalers "
        f"{NAMESPACE}/web "
    )
    assert '"reason":"FailedGetResourceMetric","status":"False","type":"ScalingActive"' in status
    assert last.startswith(f"{event} Warning FailedComputeMetricsReplicas ")
