"""The ``vpa-recommender`` kubescale component in a simulated run.

Flags are ``serve``'s recommender flags without the dashes (no Prometheus history); the loop's
informers are settled on the store before each iteration, so a run with the recommender is
byte-for-byte reproducible; the shipped ``examples/vpa-recommender.yaml`` shows the
recommendation being written, converging, and reaching new pods through the webhook.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kubescale.components import by_name
from kubescale.kube.resources import PODS, VERTICAL_POD_AUTOSCALERS, VPA_CHECKPOINTS
from kubescale.sim.scenario.json_report import dumps_report
from kubescale.sim.scenario.runner import SimulationRun, run_scenario
from kubescale.sim.scenario.scenario_format import ApplyEvent, ScenarioError
from kubescale.sim.scenario.scenario_validation import load_scenario, parse_scenario
from tests.sim.scenario.shared_runs import run_to_end, shared_run

EXAMPLE = (
    Path(__file__).resolve().parents[3]
    / "kubescale"
    / "sim"
    / "scenario"
    / "examples"
    / "vpa-recommender.yaml"
)


def _document(flags: Any) -> dict[str, Any]:
    return {
        "name": "flags",
        "duration": "5m",
        "nodes": [{"name": "n", "allocatable": {"cpu": "4", "memory": "8Gi"}}],
        "kubescale": {"vpa-recommender": flags},
    }


@pytest.mark.parametrize(
    "flags",
    [
        {},
        True,
        {"recommender-interval": "30s", "memory-saver": True},
        {"target-cpu-percentile": 0.95, "recommender-name": "custom", "checkpoints-timeout": "10s"},
        {"vpa-object-namespace": "shop", "container-recommendation-max-allowed-cpu": "2"},
    ],
)
def test_valid_flags(flags: Any) -> None:
    scenario = parse_scenario(_document(flags), base_dir=Path())
    assert "vpa-recommender" in scenario.kubescale


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"storage": "prometheus"}, "kubescale.vpa-recommender: storage: unknown vpa-recommender"),
        ({"prometheus-address": "http://p"}, "prometheus-address: unknown vpa-recommender flag"),
        ({"target-cpu-percentile": 2}, "--target-cpu-percentile: must be within [0, 1]"),
        ({"recommender-interval": "0s"}, "--recommender-interval"),
        (
            {"vpa-object-namespace": "a", "ignored-vpa-object-namespaces": "b"},
            "mutually exclusive",
        ),
    ],
)
def test_invalid_flags_name_the_field(flags: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError) as raised:
        parse_scenario(_document(flags), base_dir=Path())
    assert any(message in problem for problem in raised.value.problems), raised.value.problems


def test_the_recommender_is_a_registered_component() -> None:
    assert by_name("vpa-recommender") is not None


def _short_example() -> Any:
    return load_scenario(EXAMPLE).with_overrides(duration=2 * 3600.0)


async def test_the_example_writes_recommendations_and_checkpoints() -> None:
    async with SimulationRun(_short_example()) as run:
        report = await run.run()
        vpa = run.api.store.get(VERTICAL_POD_AUTOSCALERS, "web", "shop")
        checkpoints = run.api.store.list(VPA_CHECKPOINTS, namespace="shop")
        loop = run.loops["vpa-recommender"]
        pods = run.api.store.list(PODS, namespace="shop")
    assert loop.failures == 0
    assert loop.iterations == 120  # every minute of two hours
    conditions = {c["type"]: c["status"] for c in vpa["status"]["conditions"]}
    assert conditions == {"RecommendationProvided": "True"}
    (entry,) = vpa["status"]["recommendation"]["containerRecommendations"]
    assert entry["containerName"] == "app"
    assert [c["metadata"]["name"] for c in checkpoints] == ["web-app"]
    # Every change of target is on the report's timeline, in time order.
    changes = [e for e in report["events"] if e["kind"] == "vpa-recommendation"]
    assert changes[0]["time"] == 60.0  # the pods' first PodMetrics come a step after start
    assert all(e["subject"] == "shop/web" for e in changes)
    assert changes[-1]["detail"].startswith(f"app: target cpu={entry['target']['cpu']} ")
    # Before the roll-out at 12 h, pods keep the requests they were created with.
    assert {p["spec"]["containers"][0]["resources"]["requests"]["cpu"] for p in pods} == {"1"}


async def test_a_run_with_the_recommender_is_reproducible() -> None:
    scenario = load_scenario(EXAMPLE).with_overrides(duration=3600.0)
    # the first is the RBAC audit's first hour of the example where it ran in this process
    # (tests.sim.scenario.shared_runs; issue 32.7), the second a fresh run
    first = dumps_report((await shared_run(run_to_end, scenario)).report)
    second = dumps_report(await run_scenario(scenario))
    assert first == second
    assert '"vpa-recommendation"' in first


async def test_new_pods_get_the_recommendation_after_the_roll_out() -> None:
    """The example with its roll-out moved from 12 h to 1 h (and 80 minutes long)."""
    scenario = load_scenario(EXAMPLE)
    (rollout,) = scenario.events
    assert isinstance(rollout, ApplyEvent)
    early = replace(
        scenario.with_overrides(duration=80 * 60.0), events=(replace(rollout, at=3600.0),)
    )
    async with SimulationRun(early) as run:
        report = await run.run()
        pods = run.api.store.list(PODS, namespace="shop")
    reported = {
        e["detail"].split()[2].removeprefix("cpu=")
        for e in report["events"]
        if e["kind"] == "vpa-recommendation" and e["time"] <= 3600.0
    }
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    requests = {p["spec"]["containers"][0]["resources"]["requests"]["cpu"] for p in live}
    # The webhook gave the new pods a target the recommender had written before the roll-out,
    # well below the 1 CPU the Deployment asks for.
    assert len(live) == 3
    assert requests <= reported
    assert "1" not in requests
