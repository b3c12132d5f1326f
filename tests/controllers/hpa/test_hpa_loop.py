"""The HPA loop end to end: the real client on the in-process API server.

Deployment ``web`` (selector ``app=web``), pods requesting 1000m CPU, an HPA on 50% CPU
utilization. Expected values follow reference §1-2: utilization is the truncated percentage of
requests, the proposal ``ceil(ratio × ready pods)``, then the legacy normalization (no
``behavior``: scale-up limit ``max(2 × current, 4)``, 5-minute downscale stabilization with the
first sight of the HPA seeding ``{current, now}``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from prometheus_client import CollectorRegistry

from kubescale.controllers.hpa.hpa_config import HpaSettings
from kubescale.kube.resources import DEPLOYMENTS
from tests.controllers.vpa.recommender.test_recommender_loop import Cluster, cluster

from .hpa_cluster import NAMESPACE, Hpas, fmt

__all__ = ["cluster"]

WEB = {"app": "web"}


@pytest.fixture
async def hpas(cluster: Cluster) -> AsyncIterator[Hpas]:
    built = Hpas(cluster)
    yield built
    await built.close()


def web(hpas: Hpas, *, pods: int, usage: str) -> None:
    hpas.deployment("web", replicas=pods)
    for i in range(pods):
        hpas.pod(f"web-{i}", labels=WEB, usage=usage)


async def test_scales_up_and_down_through_scale(hpas: Hpas) -> None:
    registry = CollectorRegistry()
    web(hpas, pods=2, usage="900m")
    hpas.hpa("web", target="web")
    loop = await hpas.loop(registry=registry)
    start = hpas.now

    # 1800m of 2000m = 90%; 90/50 = 1.8; ceil(1.8 × 2) = 4; limit max(2 × 2, 4) = 4 → 4
    await hpas.run(loop)
    assert hpas.replicas("web") == 4
    status = hpas.get_hpa("web")["status"]
    assert status["currentReplicas"] == 2
    assert status["desiredReplicas"] == 4
    assert status["lastScaleTime"] == fmt(start)
    assert status["currentMetrics"] == [
        {
            "type": "Resource",
            "resource": {
                "name": "cpu",
                "current": {"averageValue": "900m", "averageUtilization": 90},
            },
        }
    ]
    assert hpas.conditions("web") == {
        "AbleToScale": (
            "True",
            "SucceededRescale",
            "the HPA controller was able to update the target scale to 4",
        ),
        "ScalingActive": (
            "True",
            "ValidMetricFound",
            "the HPA was able to successfully calculate a replica count from cpu resource "
            "utilization (percentage of request)",
        ),
        "ScalingLimited": (
            "False",
            "DesiredWithinRange",
            "the desired count is within the acceptable range",
        ),
    }
    assert [c["type"] for c in status["conditions"]] == [
        "AbleToScale",
        "ScalingActive",
        "ScalingLimited",
    ]
    assert await hpas.events("web") == [
        (
            "Normal",
            "SuccessfulRescale",
            "New size: 4; reason: cpu resource utilization (percentage of request) above target",
        )
    ]
    assert (
        registry.get_sample_value(
            "horizontal_pod_autoscaler_controller_reconciliations_total",
            {"action": "scale_up", "error": "none"},
        )
        == 1.0
    )

    # the new pods start; everything at 100m: 400/4000 = 10% → 0.2; ceil(0.2 × 4) = 1, but the
    # 5-minute window holds 2 (seed) and 4 → 4, ScaleDownStabilized
    for i in range(2, 4):
        hpas.pod(f"web-{i}", labels=WEB)
    await hpas.cluster.advance(60)
    for i in range(4):
        hpas.usage(f"web-{i}", "100m", labels=WEB)
    await hpas.run(loop)
    assert hpas.replicas("web") == 4
    assert hpas.conditions("web")["AbleToScale"][:2] == ("True", "ScaleDownStabilized")
    assert hpas.get_hpa("web")["status"]["desiredReplicas"] == 4

    # 7 minutes after the start every recommendation (2, 4 at 0 m, 1 at 1 m) is older than
    # the window (cutoff 2 m): max(1) = 1 → scale to 1
    await hpas.cluster.advance(360)
    for i in range(4):
        hpas.usage(f"web-{i}", "100m", labels=WEB)
    await hpas.run(loop)
    assert hpas.replicas("web") == 1
    status = hpas.get_hpa("web")["status"]
    assert (status["currentReplicas"], status["desiredReplicas"]) == (4, 1)
    assert status["lastScaleTime"] == fmt(start + timedelta(seconds=420))
    assert (await hpas.events("web"))[-1] == (
        "Normal",
        "SuccessfulRescale",
        "New size: 1; reason: All metrics below target",
    )


async def test_status_written_only_when_changed(hpas: Hpas) -> None:
    web(hpas, pods=2, usage="500m")  # 50% of 50: ratio 1.0 → hold 2
    hpas.hpa("web", target="web")
    loop = await hpas.loop()
    await hpas.run(loop)
    version = hpas.get_hpa("web")["metadata"]["resourceVersion"]
    await hpas.run(loop)
    assert hpas.get_hpa("web")["metadata"]["resourceVersion"] == version
    assert hpas.replicas("web") == 2
    assert await hpas.events("web") == []


async def test_bad_inputs_give_upstream_conditions_and_the_loop_goes_on(hpas: Hpas) -> None:
    web(hpas, pods=2, usage="900m")
    hpas.hpa("web", target="web")  # a good one: the loop goes on past the bad ones
    hpas.deployment("empty", replicas=2, labels={"app": "nothing"})
    for name in ("u", "f", "z"):
        hpas.deployment(name, replicas=1)
        hpas.pod(f"{name}-0", labels={"app": name}, usage="100m")
    hpas.hpa("missing-target", target="nope")
    with hpas.past_validation():  # kube-apiserver refuses the type: an object from elsewhere
        hpas.hpa("unknown-type", target="u", metrics=[{"type": "Foo"}])
    hpas.hpa(
        "unfetchable",
        target="f",
        metrics=[
            {
                "type": "Pods",
                "pods": {
                    "metric": {"name": "qps"},
                    "target": {"type": "AverageValue", "averageValue": "10"},
                },
            }
        ],
    )
    hpas.hpa("no-pods", target="empty")
    hpas.hpa(
        "bad-annotation",
        target="z",
        annotations={
            "hpa.kubescale.io/scale-to-zero": "true",
            "hpa.kubescale.io/cooldown-period": "soon",
        },
    )
    loop = await hpas.loop()
    await hpas.run(loop)

    assert hpas.conditions("missing-target")["AbleToScale"] == (
        "False",
        "FailedGetScale",
        'the HPA controller was unable to get the target\'s current scale: deployments.apps "nope" '
        "not found",
    )
    assert await hpas.events("missing-target") == [
        ("Warning", "FailedGetScale", 'deployments.apps "nope" not found')
    ]

    assert hpas.conditions("unknown-type")["ScalingActive"] == (
        "False",
        "InvalidMetricSourceType",
        'the HPA was unable to compute the replica count: unknown metric source type "Foo"',
    )
    assert await hpas.events("unknown-type") == [
        ("Warning", "InvalidMetricSourceType", 'unknown metric source type "Foo"'),
        (
            "Warning",
            "FailedComputeMetricsReplicas",
            "invalid metrics (1 invalid out of 1), first error is: "
            'unknown metric source type "Foo"',
        ),
    ]
    assert hpas.get_hpa("unknown-type")["status"]["currentMetrics"] == [{"type": ""}]

    not_found = "the server could not find the metric qps for pods"
    inner = (
        f"unable to get metric qps: unable to fetch metrics from custom metrics API: {not_found}"
    )
    assert hpas.conditions("unfetchable")["ScalingActive"] == (
        "False",
        "FailedGetPodsMetric",
        f"the HPA was unable to compute the replica count: {inner}",
    )
    assert await hpas.events("unfetchable") == [
        ("Warning", "FailedGetPodsMetric", inner),
        (
            "Warning",
            "FailedComputeMetricsReplicas",
            "invalid metrics (1 invalid out of 1), first error is: failed to get pods metric "
            f"value: {inner}",
        ),
    ]

    inner = (
        "failed to get cpu utilization: unable to get metrics for resource cpu: no metrics "
        "returned from resource metrics API"
    )
    assert hpas.conditions("no-pods")["ScalingActive"] == (
        "False",
        "FailedGetResourceMetric",
        f"the HPA was unable to compute the replica count: {inner}",
    )
    for name in ("missing-target", "unknown-type", "unfetchable", "no-pods"):
        assert hpas.get_hpa(name)["status"].get("desiredReplicas", 0) == 0
    assert (hpas.replicas("u"), hpas.replicas("f"), hpas.replicas("empty")) == (1, 1, 2)
    assert (
        "Warning",
        "InvalidSpec",
        "metadata.annotations[hpa.kubescale.io/cooldown-period]: must be a whole number of "
        "seconds >= 0, got 'soon'",
    ) in await hpas.events("bad-annotation")
    assert hpas.replicas("web") == 4


async def test_ambiguous_selector(hpas: Hpas) -> None:
    web(hpas, pods=2, usage="900m")
    hpas.deployment("web-too", replicas=2, labels={"app": "web"})
    hpas.hpa("a", target="web")
    hpas.hpa("b", target="web-too")
    loop = await hpas.loop()
    await hpas.run(loop)
    # upstream knows an HPA's selector once it has been reconciled, so in the first pass the
    # one reconciled first may still scale; from the second pass on both are ambiguous
    message = "pods by selector app=web are controlled by multiple HPAs: [shop/a shop/b]"
    first = [hpas.conditions(n)["ScalingActive"] for n in ("a", "b")]
    assert ("False", "AmbiguousSelector", message) in first
    await hpas.run(loop)
    for name in ("a", "b"):
        assert hpas.conditions(name)["ScalingActive"] == ("False", "AmbiguousSelector", message)
        events = await hpas.events(name)
        assert ("Warning", "AmbiguousSelector", message) in events
        assert ("Warning", "FailedComputeMetricsReplicas", message) in events
    replicas = (hpas.replicas("web"), hpas.replicas("web-too"))
    await hpas.run(loop)
    assert (hpas.replicas("web"), hpas.replicas("web-too")) == replicas


async def test_scaling_disabled_and_clamps(hpas: Hpas) -> None:
    hpas.deployment("off", replicas=0)
    hpas.deployment("big", replicas=12)
    hpas.hpa("off", target="off")
    hpas.hpa("big", target="big", max_replicas=10)
    loop = await hpas.loop()
    await hpas.run(loop)
    assert hpas.conditions("off")["ScalingActive"] == (
        "False",
        "ScalingDisabled",
        "scaling is disabled since the replica count of the target is zero",
    )
    assert hpas.replicas("off") == 0
    assert hpas.replicas("big") == 10
    assert await hpas.events("big") == [
        (
            "Normal",
            "SuccessfulRescale",
            "New size: 10; reason: Current number of replicas above Spec.MaxReplicas",
        )
    ]


async def test_coexistence_leaves_unannotated_hpas_alone(hpas: Hpas) -> None:
    web(hpas, pods=2, usage="900m")
    hpas.hpa("kcm-owned", target="web", handled=False)
    loop = await hpas.loop()
    await hpas.run(loop)
    hpa = hpas.get_hpa("kcm-owned")
    assert "status" not in hpa or not hpa["status"].get("conditions")
    assert hpas.replicas("web") == 2
    assert await hpas.events("kcm-owned") == []
    # --hpa-selection=all takes it over; the kube-controller-manager annotation opts out
    hpas.hpa(
        "opted-out",
        target="web",
        handled=False,
        annotations={"hpa.kubescale.io/controller": "kube-controller-manager"},
    )
    everything = await hpas.loop(HpaSettings(selection="all"))
    await hpas.run(everything)
    assert hpas.replicas("web") == 4
    assert await hpas.events("opted-out") == []
    assert hpas.cluster.api.store.get(DEPLOYMENTS, "web", NAMESPACE)["spec"]["replicas"] == 4
