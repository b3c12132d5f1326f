"""The ``webhook`` kubescale component in a simulated run: flags validated like ``serve``'s, the
MutatingWebhookConfiguration self-registration would write, pods created by the simulated
workload controllers mutated through the admission chain over verified TLS, and the status Lease
renewed on the run's clock.

The scenario is the shipped ``examples/vpa-webhook.yaml``. Its VPA carries a recommendation in
``status``; a create cannot set status (the API server resets it), so the test writes it through
the status subresource after the run started — what a recommender would have done before the
Deployment's pods were created. Expected values: target 250m / 384Mi; the container asks for
1 / 1Gi with limits 2 / 2Gi, so the limits become 250m × 2 = 500m and 384Mi × 2 = 768Mi.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from kubescale.components import by_name
from kubescale.kube.resources import (
    LEASES,
    MUTATING_WEBHOOK_CONFIGURATIONS,
    PODS,
    VERTICAL_POD_AUTOSCALERS,
)
from kubescale.sim.scenario.runner import SimulationRun
from kubescale.sim.scenario.scenario_format import ScenarioError
from kubescale.sim.scenario.scenario_validation import load_scenario, parse_scenario

EXAMPLE = (
    Path(__file__).resolve().parents[3]
    / "kubescale"
    / "sim"
    / "scenario"
    / "examples"
    / "vpa-webhook.yaml"
)


def _document(webhook_flags: Any) -> dict[str, Any]:
    return {
        "name": "flags",
        "duration": "5m",
        "nodes": [{"name": "n", "allocatable": {"cpu": "4", "memory": "8Gi"}}],
        "kubescale": {"webhook": webhook_flags},
    }


@pytest.mark.parametrize(
    "flags",
    [
        {},
        True,
        {"cap-to-largest-node": True, "avoid-hpa-conflict": "true"},
        {"feature-gates": "InPlace=true", "webhook-failure-policy-fail": True},
        {"status-lease-update-interval": "30s", "webhook-timeout-seconds": 10},
    ],
)
def test_valid_flags(flags: Any) -> None:
    scenario = parse_scenario(_document(flags), base_dir=Path())
    assert "webhook" in scenario.kubescale


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"register-by-url": True}, "kubescale.webhook: register-by-url: unknown webhook flag"),
        ({"webhook-service": "x"}, "kubescale.webhook: webhook-service: unknown webhook flag"),
        ({"feature-gates": "Magic=true"}, "unrecognized feature gate: Magic"),
        ({"webhook-timeout-seconds": 99}, "--webhook-timeout-seconds: 99 is out of range 1-30"),
        ({"status-lease-update-interval": "0s"}, "--status-lease-update-interval"),
        ({"cap-to-largest-node": "perhaps"}, "--cap-to-largest-node"),
    ],
)
def test_invalid_flags_name_the_field(flags: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError) as raised:
        parse_scenario(_document(flags), base_dir=Path())
    assert any(message in problem for problem in raised.value.problems), raised.value.problems


def test_the_webhook_is_a_registered_component() -> None:
    assert by_name("webhook") is not None


async def test_the_example_mutates_the_vpa_controlled_deployments_pods() -> None:
    scenario = load_scenario(EXAMPLE)
    (vpa_manifest,) = [o for o in scenario.objects if o["kind"] == "VerticalPodAutoscaler"]
    async with SimulationRun(scenario) as run:
        stored = run.api.store.get(VERTICAL_POD_AUTOSCALERS, "web", "shop")
        assert stored["spec"]["updatePolicy"] == {"updateMode": "Initial"}
        run.api.store.update_status({**stored, "status": vpa_manifest["status"]})
        lister = run.runtime.cache.informers.lister(VERTICAL_POD_AUTOSCALERS)
        for _ in range(2000):
            if "status" in (lister.get("web", "shop") or {}):
                break
            await asyncio.sleep(0.005)
        configuration = run.api.store.get(MUTATING_WEBHOOK_CONFIGURATIONS, "vpa-webhook-config")
        service = configuration["webhooks"][0]["clientConfig"]["service"]
        assert service == {"namespace": "kube-system", "name": "kubescale"}
        report = await run.run()
        pods = run.api.store.snapshots(PODS, "shop")
        lease = run.api.store.get(LEASES, "vpa-admission-controller", "kube-system")
    web = [p for p in pods if p["metadata"]["name"].startswith("web-")]
    batch = [p for p in pods if p["metadata"]["name"].startswith("batch-")]
    assert len(web) == 3
    assert len(batch) == 1
    for pod in web:
        (container,) = pod["spec"]["containers"]
        assert container["resources"]["requests"] == {"cpu": "250m", "memory": "384Mi"}
        assert container["resources"]["limits"] == {"cpu": "500m", "memory": "768Mi"}
        annotations = pod["metadata"]["annotations"]
        assert annotations["vpaUpdates"] == (
            "Pod resources updated by web: container 0: cpu request, memory request, "
            "cpu limit, memory limit"
        )
        assert annotations["vpaObservedContainers"] == "app"
    (batch_pod,) = batch
    assert batch_pod["spec"]["containers"][0]["resources"]["requests"] == {
        "cpu": "500m",
        "memory": "512Mi",
    }
    assert "vpaUpdates" not in (batch_pod["metadata"].get("annotations") or {})
    # the summary: web's average request is the recommendation, batch keeps its own
    workloads = {f"{w['namespace']}/{w['name']}": w for w in report["workloads"]}
    (web_app,) = workloads["shop/web"]["containers"]
    assert web_app["cpu"]["request_avg_cores"] == 0.25
    assert web_app["memory"]["request_avg_bytes"] == 384 * 2**20
    (batch_worker,) = workloads["shop/batch"]["containers"]
    assert batch_worker["cpu"]["request_avg_cores"] == 0.5
    # the status Lease was renewed on the run's clock (last at the final step)
    assert lease["spec"]["holderIdentity"] == "kubescale-simulated"
    assert lease["spec"]["renewTime"].startswith("2026-01-05T01:59:00")
