"""The ``cluster-autoscaler`` component in simulated runs (``examples/cluster-autoscaler-*.yaml``).

The three examples run through :class:`SimulationRun` exactly as ``kubescale simulate`` runs
them — the registry's component, built on the run's shared cache, its loop called on the
virtual clock — and their reports are checked against values worked out by hand from the
scenarios (provisioning 2m, deprovisioning 30s, the 10s / 30s steps):

* **burst**: ``least-waste`` picks ``general`` (four 1 cpu / 4Gi pods fill a 4 cpu / 16Gi node,
  a 16 cpu / 32Gi ``compute`` node would idle half its cpu) up to its max (1 → 5), then the 20
  pods left go to ``compute`` (0 → 3); all 40 run. Node-hours: one node for 20m, four from
  440 s and three from 450 s to 1200 s = 1/3 + 4·760/3600 + 3·750/3600 = 1.802778; cost
  0.192 · (1/3 + 0.844444) + 0.68 · 0.625 = 0.651133;
* **quiet night**: after ``web`` goes 12 → 2 at 600 s, the nodes are unneeded from 630 s and
  removed after 10m (1260 s): two empty ones together, one drained through the Eviction API
  (its ``web`` pod and DaemonSet pod); their Machines carry the delete-machine annotation; the
  PDB ``maxUnavailable: 1`` is never exceeded; one node is left (the min size);
* **consolidation**: both large nodes replaced by one small one (decided at 620 s, after
  scale-down's cooldown and the 15 s validation), drained when it is up (750 s) and gone at
  820 s; nothing moves afterwards. Node-hours 2·820/3600 + 2850/3600 = 1.247222, cost
  0.384 · 0.455556 + 0.192 · 0.791667 = 0.326933 — against 0.584533 without consolidation,
  where upstream's rules drain one large node into the other after 30m unneeded (1810 s) and
  keep the second: 1 + 1880/3600 = 1.522222 node-hours at 0.384.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kubescale.components import by_name
from kubescale.controllers.autoscaler.cloudprovider.clusterapi_annotations import (
    DELETE_MACHINE_ANNOTATION,
)
from kubescale.controllers.autoscaler.component import AutoscalerComponent
from kubescale.controllers.autoscaler.core.autoscaler_loop import AutoscalerLoop
from kubescale.kube.resources import MACHINES, NODES, PODS
from kubescale.sim.scenario.runner import SimulationRun
from kubescale.sim.scenario.scenario_format import Scenario, ScenarioError
from kubescale.sim.scenario.scenario_validation import load_scenario, parse_scenario
from tests.sim.scenario.shared_runs import run_to_end, shared_run

EXAMPLES = Path(__file__).resolve().parents[3] / "kubescale" / "sim" / "scenario" / "examples"


def _example(name: str) -> Scenario:
    return load_scenario(EXAMPLES / f"cluster-autoscaler-{name}.yaml")


def _document(flags: Any) -> dict[str, Any]:
    return {
        "name": "flags",
        "duration": "5m",
        "nodes": [{"name": "n", "allocatable": {"cpu": "4", "memory": "8Gi"}}],
        "kubescale": {"cluster-autoscaler": flags},
    }


def test_the_cluster_autoscaler_is_a_registered_component() -> None:
    spec = by_name("cluster-autoscaler")
    assert spec is not None
    assert spec.title == "the cluster autoscaler"


@pytest.mark.parametrize(
    "flags",
    [
        {},
        True,
        {"expander": "priority,least-waste", "scale-down-unneeded-time": "5m"},
        {"consolidation": "WhenEmpty", "consolidation-budgets": "nodes=1"},
    ],
)
def test_valid_flags(flags: Any) -> None:
    assert "cluster-autoscaler" in parse_scenario(_document(flags), base_dir=Path()).kubescale


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"cluster-autoscaler": True}, "unknown cluster-autoscaler flag"),
        ({"expander": "random,least-waste"}, "--expander: 'random' picks a single option"),
        ({"scale-down-utilization-threshold": 1.5}, "--scale-down-utilization-threshold"),
        ({"cores-total": "5:2"}, "--cores-total"),
        ({"consolidation-budgets": "nodes=ten"}, "--consolidation-budgets"),
    ],
)
def test_invalid_flags_name_the_field(flags: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError) as raised:
        parse_scenario(_document(flags), base_dir=Path())
    assert any(message in problem for problem in raised.value.problems), raised.value.problems


# ------------------------------------------------------------------------------ runs

StepHook = Callable[[SimulationRun], Awaitable[None] | None]


async def _run(scenario: Scenario, after_step: StepHook | None = None) -> dict[str, Any]:
    async with SimulationRun(scenario) as run:
        while not run.done:
            await run.step()
            if after_step is not None:
                result = after_step(run)
                if result is not None:
                    await result
        return run.report()


def _events(report: dict[str, Any], *kinds: str) -> list[tuple[float, str, str, str]]:
    return [
        (e["time"], e["kind"], e["subject"], e.get("detail", ""))
        for e in report["events"]
        if e["kind"] in kinds
    ]


def _running(run: SimulationRun, prefix: str) -> list[dict[str, Any]]:
    pods = [p for p in run.api.store.list(PODS) if p["metadata"]["name"].startswith(prefix)]
    return [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]


async def test_burst_scales_up_across_two_node_groups_with_least_waste() -> None:
    final: dict[str, Any] = {}

    def look(run: SimulationRun) -> None:
        if run.done:
            final["running"] = len(_running(run, "worker-"))
            final["nodes"] = sorted(n["metadata"]["name"] for n in run.api.store.list(NODES))

    report = await _run(_example("burst"), look)
    assert _events(report, "ca-scale-up") == [
        (310.0, "ca-scale-up", "MachineDeployment/default/general", "target 1 → 5"),
        (320.0, "ca-scale-up", "MachineDeployment/default/compute", "target 0 → 3"),
    ]
    assert final["running"] == 40
    assert [n.split("-")[0] for n in final["nodes"]].count("compute") == 3
    assert [n.split("-")[0] for n in final["nodes"]].count("general") == 5
    cluster = report["cluster"]
    assert cluster["node_hours"] == pytest.approx(1.802778, abs=1e-6)
    assert cluster["cost"] == pytest.approx(0.651133, abs=1e-6)
    assert cluster["node_count"]["max"] == 8


async def test_quiet_night_drains_through_the_eviction_api_and_deletes_machines() -> None:
    annotated: set[str] = set()
    unavailable: list[int] = []

    def look(run: SimulationRun) -> None:
        for machine in run.api.store.list(MACHINES):
            annotations = machine["metadata"].get("annotations") or {}
            if DELETE_MACHINE_ANNOTATION in annotations:
                node_ref = (machine.get("status") or {}).get("nodeRef") or {}
                annotated.add(str(node_ref.get("name")))
        if run.elapsed > 700:  # after the scale-in's own deletions
            web = [p for p in run.api.store.list(PODS) if p["metadata"]["name"].startswith("web-")]
            ready = [
                p
                for p in web
                if not p["metadata"].get("deletionTimestamp")
                and (p.get("status") or {}).get("phase") == "Running"
            ]
            unavailable.append(2 - len(ready))

    report = await _run(_example("quiet-night"), look)
    marked = _events(report, "ca-scale-down")
    assert [(t, detail) for t, _, _, detail in marked] == [
        (1260.0, "empty (empty)"),
        (1260.0, "empty (empty)"),
        (1260.0, "drain (underutilized)"),
    ]
    deleted = {subject for _, _, subject, _ in _events(report, "ca-node-deleted")}
    assert deleted == {subject for _, _, subject, _ in marked}
    assert annotated == deleted  # every Machine went through the delete-machine annotation
    evictions = _events(report, "ca-eviction")
    assert [s.split("/")[1].rsplit("-", 1)[0] for _, _, s, _ in evictions] == [
        "web-666d9fccc6",
        "node-exporter",
    ]
    assert report["cluster"]["evictions"] == 2  # the API server's Eviction subresource
    assert max(unavailable) <= 1  # the PodDisruptionBudget's maxUnavailable
    assert report["cluster"]["node_count"]["series"][-1] == 1
    assert report["cluster"]["cost"] < 4 * 1.5 * 0.192


async def test_consolidation_replaces_two_large_nodes_with_one_small_one() -> None:
    # the example whole, as the RBAC audit runs it too: made once a process
    # (tests.sim.scenario.shared_runs; issue 32.7)
    report = (await shared_run(run_to_end, _example("consolidation"))).report
    assert _events(report, "ca-consolidation") == [
        (
            620.0,
            "ca-consolidation",
            "large-r4rxq-49jnb, large-r4rxq-89zs2",
            "Replace with a node of MachineDeployment/default/small, saves 0.5760/h",
        )
    ]
    assert [(t, s) for t, _, s, _ in _events(report, "ca-scale-down")] == [
        (750.0, "large-r4rxq-49jnb"),
        (750.0, "large-r4rxq-89zs2"),
    ]
    changes = _events(report, "node-added", "node-removed")
    assert [(t, kind) for t, kind, _, _ in changes if t > 0] == [
        (750.0, "node-added"),
        (820.0, "node-removed"),
        (820.0, "node-removed"),
    ]  # and nothing after: no churn at steady state
    assert _events(report, "ca-scale-up") == []
    cluster = report["cluster"]
    assert cluster["node_hours"] == pytest.approx(1.247222, abs=1e-6)
    assert cluster["cost"] == pytest.approx(0.326933, abs=1e-6)

    scenario = _example("consolidation")
    without = replace(
        scenario, kubescale={"cluster-autoscaler": {"scale-down-unneeded-time": "30m"}}
    )
    baseline = await _run(without)
    # upstream's rules alone: one large node drained into the other once unneeded for 30m
    assert _events(baseline, "ca-consolidation") == []
    assert [(t, s) for t, _, s, _ in _events(baseline, "ca-scale-down")] == [
        (1810.0, "large-r4rxq-49jnb")
    ]
    assert baseline["cluster"]["node_hours"] == pytest.approx(1.522222, abs=1e-6)
    assert baseline["cluster"]["cost"] == pytest.approx(0.584533, abs=1e-6)


async def test_a_new_term_of_leadership_starts_the_loop_over() -> None:
    scenario = replace(_example("burst"), duration=60.0)
    async with SimulationRun(scenario) as run:
        (component,) = [c for c in run.components if c.name == "cluster-autoscaler"]
        assert isinstance(component, AutoscalerComponent)
        for _ in range(3):
            await run.step()
        first = component.loop
        assert isinstance(first, AutoscalerLoop)
        assert first.iterations == 3
        run.runtime.leadership.term += 1  # type: ignore[misc]
        await run.step()
        assert component.loop is not first
        assert component.loop.iterations == 1
        assert component.loop.informers is first.informers  # the shared cache's
