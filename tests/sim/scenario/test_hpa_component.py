"""The ``hpa-controller`` kubescale component in a simulated run (``examples/hpa-*.yaml``).

The diurnal example's frontend shares 2 ± 1.6 cores (trough at 03:00, mean at 09:00 rising)
among replicas requesting 500m, under an HPA at 60 %: the count the HPA should settle on is
``ceil(total / (0.6 × 0.5))`` — 2 (its minimum) at night, about 11 by noon
(``2 + 1.6 × sin(π/4)`` = 3.13 cores → 10.4 → 11). The first twelve hours are run.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kubescale.components import by_name
from kubescale.kube.resources import DEPLOYMENTS, HORIZONTAL_POD_AUTOSCALERS
from kubescale.sim.scenario.runner import SimulationRun
from kubescale.sim.scenario.scenario_format import ScenarioError
from kubescale.sim.scenario.scenario_validation import load_scenario, parse_scenario

EXAMPLES = Path(__file__).resolve().parents[3] / "kubescale" / "sim" / "scenario" / "examples"


def _document(flags: Any) -> dict[str, Any]:
    return {
        "name": "flags",
        "duration": "5m",
        "nodes": [{"name": "n", "allocatable": {"cpu": "4", "memory": "8Gi"}}],
        "kubescale": {"hpa-controller": flags},
    }


@pytest.mark.parametrize(
    "flags",
    [{}, True, {"horizontal-pod-autoscaler-tolerance": 0.05, "hpa-selection": "all"}],
)
def test_valid_flags(flags: Any) -> None:
    assert "hpa-controller" in parse_scenario(_document(flags), base_dir=Path()).kubescale


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"horizontal-pod-autoscaler-tolerance": -1}, "--horizontal-pod-autoscaler-tolerance"),
        ({"hpa-prometheus-address": "http://p:9090"}, "hpa-prometheus-address"),
        ({"hpa-feature-gates": "Nope=true"}, "unrecognized feature gate: Nope"),
    ],
)
def test_invalid_flags_name_the_field(flags: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError) as raised:
        parse_scenario(_document(flags), base_dir=Path())
    assert any(message in problem for problem in raised.value.problems), raised.value.problems


def test_the_hpa_controller_is_a_registered_component() -> None:
    assert by_name("hpa-controller") is not None


@pytest.mark.parametrize(
    "name",
    [
        "hpa-diurnal-cpu.yaml",
        "hpa-worldcup98.yaml",
        "hpa-pods-metric.yaml",
        "hpa-scale-to-zero.yaml",
    ],
)
def test_examples_validate(name: str) -> None:
    assert "hpa-controller" in load_scenario(EXAMPLES / name).kubescale


async def test_diurnal_frontend_follows_the_day() -> None:
    scenario = replace(load_scenario(EXAMPLES / "hpa-diurnal-cpu.yaml"), duration=12 * 3600.0)
    counts: list[int] = []
    async with SimulationRun(scenario) as run:
        while not run.done:
            await run.step()
            counts.append(run.api.store.get(DEPLOYMENTS, "frontend", "shop")["spec"]["replicas"])
        report = run.report()
        hpa = run.api.store.get(HORIZONTAL_POD_AUTOSCALERS, "frontend", "shop")
    total_at_noon = 2 + 1.6 * math.sin(2 * math.pi * (12 - 9) / 24)
    expected_at_noon = math.ceil(total_at_noon / (0.6 * 0.5))  # 3.13 / 0.3 = 10.4 → 11
    assert min(counts[60:300]) == 2  # 01:00-05:00: the minimum
    assert abs(counts[-1] - expected_at_noon) <= 1
    rescales = [e for e in report["events"] if e["kind"] == "hpa-rescale"]
    assert rescales
    assert all(e["subject"] == "shop/frontend" for e in rescales)
    conditions = {c["type"]: c for c in hpa["status"]["conditions"]}
    assert conditions["ScalingActive"]["reason"] == "ValidMetricFound"
    assert hpa["status"]["desiredReplicas"] == counts[-1]


async def _rescales(name: str) -> list[tuple[float, int]]:
    async with SimulationRun(load_scenario(EXAMPLES / name)) as run:
        while not run.done:
            await run.step()
        report = run.report()
    return [
        (e["time"], int(e["detail"].split(";")[0].removeprefix("New size: ")))
        for e in report["events"]
        if e["kind"] == "hpa-rescale"
    ]


async def test_pods_metric_example_follows_its_behavior() -> None:
    # 150 req/s over 100 per pod → 2; 800 at 10m → 8 at 2 pods a minute; 250 at 30m → 3 after
    # the 2-minute window, at most halving per minute (8 → 4 → 3)
    counts = [count for _, count in await _rescales("hpa-pods-metric.yaml")]
    assert counts == [2, 4, 6, 8, 4, 3]


async def test_scale_to_zero_example_steps_down_through_one() -> None:
    rescales = await _rescales("hpa-scale-to-zero.yaml")
    counts = [count for _, count in rescales]
    # activation 0 → 1, math 1 → ceil(35/10) = 4, walk down a pod per 30 s, 1 → 0 after the
    # cooldown, activation again and ceil(12/10) = 2
    assert counts == [1, 4, 3, 2, 1, 0, 1, 2]
    times = dict(zip(counts[:6], [t for t, _ in rescales[:6]], strict=True))
    # the queue was last non-empty at the 870 s reconcile: zero once 120 s have passed since
    assert times[0] - 870 > 120
