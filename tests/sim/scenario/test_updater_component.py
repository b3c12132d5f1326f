"""The ``vpa-updater`` kubescale component in a simulated run (``examples/vpa-updater.yaml``).

Four under-provisioned pods, a VPA switched to Recreate at 2m whose recommendation is in its
status from the start, a PodDisruptionBudget ``maxUnavailable: 1``, the webhook and the
updater. The simulator has no disruption controller, so the test plays it: before every step
it recomputes the PDB's status from the pods (``currentHealthy`` = Ready pods not being
deleted, ``desiredHealthy`` = expected − maxUnavailable, ``disruptionsAllowed`` = their
difference, never below 0). Then every pod ends with the recommended requests and, once the
pods first ran, never more than one of the four is unavailable at a step. Without the webhook
the updater never sees a fresh admission status Lease and evicts nothing.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kubescale.components import by_name
from kubescale.kube.resources import POD_DISRUPTION_BUDGETS, PODS
from kubescale.sim.scenario.runner import SimulationRun
from kubescale.sim.scenario.scenario_format import Scenario, ScenarioError
from kubescale.sim.scenario.scenario_validation import load_scenario, parse_scenario

EXAMPLE = (
    Path(__file__).resolve().parents[3]
    / "kubescale"
    / "sim"
    / "scenario"
    / "examples"
    / "vpa-updater.yaml"
)
NAMESPACE = "shop"
REPLICAS = 4
RECOMMENDED = {"cpu": "250m", "memory": "256Mi"}


def _document(flags: Any) -> dict[str, Any]:
    return {
        "name": "flags",
        "duration": "5m",
        "nodes": [{"name": "n", "allocatable": {"cpu": "4", "memory": "8Gi"}}],
        "kubescale": {"vpa-updater": flags},
    }


@pytest.mark.parametrize(
    "flags",
    [{}, True, {"updater-interval": "30s", "min-replicas": 1, "eviction-rate-limit": 0.5}],
)
def test_valid_flags(flags: Any) -> None:
    assert "vpa-updater" in parse_scenario(_document(flags), base_dir=Path()).kubescale


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"vpa-updater": True}, "vpa-updater: unknown vpa-updater flag"),
        ({"eviction-tolerance": 2}, "--eviction-tolerance must be in [0, 1]"),
        ({"updater-interval": "0s"}, "--updater-interval"),
    ],
)
def test_invalid_flags_name_the_field(flags: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError) as raised:
        parse_scenario(_document(flags), base_dir=Path())
    assert any(message in problem for problem in raised.value.problems), raised.value.problems


def test_the_updater_is_a_registered_component() -> None:
    assert by_name("vpa-updater") is not None


def _web_pods(run: SimulationRun) -> list[dict[str, Any]]:
    return [
        pod
        for pod in run.api.store.list(PODS, namespace=NAMESPACE)
        if (pod["metadata"].get("labels") or {}).get("app") == "web"
    ]


def _healthy(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    return ready and not pod["metadata"].get("deletionTimestamp")


def _play_disruption_controller(run: SimulationRun) -> int:
    """Recompute the PDB's status as the disruption controller would; the healthy count."""
    healthy = sum(1 for pod in _web_pods(run) if _healthy(pod))
    desired = REPLICAS - 1  # maxUnavailable 1
    pdb = run.api.store.get(POD_DISRUPTION_BUDGETS, "web", NAMESPACE)
    status = {
        **(pdb.get("status") or {}),
        "observedGeneration": pdb["metadata"].get("generation", 1),
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": REPLICAS,
        "disruptionsAllowed": max(0, healthy - desired),
    }
    run.api.store.update_status({**pdb, "status": status})
    return healthy


def _evictions(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [event for event in report["events"] if event["kind"] == "vpa-eviction"]


async def _run(scenario: Scenario) -> tuple[dict[str, Any], list[int]]:
    unavailable: list[int] = []
    ran = False
    async with SimulationRun(scenario) as run:
        while not run.done:
            healthy = _play_disruption_controller(run)
            ran = ran or healthy == REPLICAS
            if ran:
                unavailable.append(REPLICAS - healthy)
            await run.step()
        report = run.report()
        pods = _web_pods(run)
    return {"report": report, "pods": pods}, unavailable


@pytest.mark.parametrize("step", [30.0, 60.0])
async def test_pods_converge_one_at_a_time(step: float) -> None:
    """At the example's 30 s step and at the default 1-minute one: the webhook's status Lease
    (renewed every 10 s) runs within each step before the updater reads it, so no updater loop
    after the first (at t = 0 the Lease does not exist yet) is skipped as stale."""
    result, unavailable = await _run(replace(load_scenario(EXAMPLE), step=step))
    skipped = [e["time"] for e in result["report"]["events"] if e["kind"] == "vpa-updater-skipped"]
    assert skipped == [0.0]
    live = [pod for pod in result["pods"] if not pod["metadata"].get("deletionTimestamp")]
    assert len(live) == REPLICAS
    for pod in live:
        assert pod["spec"]["containers"][0]["resources"]["requests"] == RECOMMENDED
        assert _healthy(pod)
    assert len(_evictions(result["report"])) == REPLICAS
    assert unavailable
    assert max(unavailable) == 1


async def test_without_the_webhook_nothing_is_evicted() -> None:
    scenario = load_scenario(EXAMPLE)
    kubescale = {name: flags for name, flags in scenario.kubescale.items() if name != "webhook"}
    result, _ = await _run(replace(scenario, kubescale=kubescale))
    report = result["report"]
    assert _evictions(report) == []
    assert any(event["kind"] == "vpa-updater-skipped" for event in report["events"])
    for pod in result["pods"]:
        assert pod["spec"]["containers"][0]["resources"]["requests"] == {
            "cpu": "100m",
            "memory": "128Mi",
        }
