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
from kubescale.sim.scenario.decision_log import decisions
from kubescale.sim.scenario.runner import SimulationRun
from kubescale.sim.scenario.scenario_format import Scenario, ScenarioError
from kubescale.sim.scenario.scenario_validation import load_scenario, parse_scenario
from tests.sim.scenario.shared_runs import run_key, shared_run

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
    # step=30.0 is the example as written: the same run as the journal test's below, made once
    # (tests.sim.scenario.shared_runs)
    result, unavailable = await shared_run(_run, replace(load_scenario(EXAMPLE), step=step))
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


def test_the_journal_test_reads_the_30s_convergence_run() -> None:
    # the example's own step is 30 s: one run serves both tests (no second simulation)
    example = load_scenario(EXAMPLE)
    assert run_key(_run, replace(example, step=30.0)) == run_key(_run, example)
    assert run_key(_run, replace(example, step=60.0)) != run_key(_run, example)


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


# Upstream's AddPod, first rule: a request below its lowerBound puts the pod outside the
# recommended range. Every pod asks 100m / 128Mi; the VPA's (uncapped: no policy, no
# LimitRange) band is cpu [200m, 500m] target 250m, memory [200Mi, 512Mi] target 256Mi:
# 100m < 200m and 128Mi < 200Mi, both said, cpu first.
RECORDED_REASON = (
    "app cpu request 100m below the lower bound 200m (target 250m); "
    "app memory request 128.0Mi below the lower bound 200.0Mi (target 256.0Mi)"
)


async def test_the_run_records_the_plans_the_updater_executed() -> None:
    result, _ = await shared_run(_run, load_scenario(EXAMPLE))
    report = result["report"]
    plans = report["plans"]
    evicts = [
        entry
        for entry in plans["entries"]
        if entry["actor"] == "vpa-updater" and entry["intent"] == "Evict"
    ]
    done = [entry for entry in evicts if entry["outcome"] == "done"]
    # each eviction the timeline shows is an Evict intent executed at that time, with the
    # reason the updater's decision gave it
    assert [(e["time"], f"pods {e['subject']}") for e in _evictions(report)] == [
        (entry["time"], entry["object"]) for entry in done
    ]
    assert len(done) == REPLICAS
    assert {entry["reason"] for entry in evicts} == {RECORDED_REASON}
    assert done[0]["describe"] == f"vpa-updater: evict {done[0]['object']}"
    # the PodDisruptionBudget refuses some (429): recorded too, with their outcome
    counts = {(c["actor"], c["intent"], c["outcome"]): c["count"] for c in plans["counts"]}
    assert counts[("vpa-updater", "Evict", "done")] == REPLICAS
    assert counts.get(("vpa-updater", "Evict", "refused"), 0) == len(evicts) - REPLICAS
    assert plans["total"] == sum(counts.values())
    # the summary reads the journal: each VPA eviction's why is the recorded reason
    whys = [d.why for d in decisions(report) if d.what == "VPA eviction"]
    assert whys == [RECORDED_REASON] * REPLICAS
