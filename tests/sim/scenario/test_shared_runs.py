"""tests.sim.scenario.shared_runs: a run is made once per driver and scenario content, and each
reader gets a copy of its own (issue 32.7). The driver here only counts its calls: no
simulation is needed to check the cache."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from kubescale.sim.scenario.scenario_format import Scenario
from kubescale.sim.scenario.scenario_validation import parse_scenario
from tests.sim.scenario.shared_runs import shared_run

CALLS: list[str] = []


async def _counting_driver(scenario: Scenario) -> dict[str, Any]:
    CALLS.append(scenario.name)
    return {"name": scenario.name, "seed": scenario.seed, "events": [{"kind": "made"}]}


async def _other_driver(scenario: Scenario) -> dict[str, Any]:
    CALLS.append(f"other:{scenario.name}")
    return {"name": scenario.name}


def _scenario(name: str) -> Scenario:
    document = {
        "name": name,
        "duration": "5m",
        "nodes": [{"name": "n", "allocatable": {"cpu": "1", "memory": "1Gi"}}],
    }
    return parse_scenario(document, base_dir=Path())


async def test_one_run_per_driver_and_scenario_content() -> None:
    name = "shared-runs-once"
    first = await shared_run(_counting_driver, _scenario(name))
    again = await shared_run(_counting_driver, _scenario(name))  # parsed anew, same content
    assert first == again
    assert CALLS.count(name) == 1
    # any field of the scenario changed: a run of its own
    reseeded = await shared_run(_counting_driver, replace(_scenario(name), seed=99))
    assert reseeded["seed"] == 99
    assert CALLS.count(name) == 2
    # another driver of the same scenario: a run of its own
    await shared_run(_other_driver, _scenario(name))
    assert CALLS.count(f"other:{name}") == 1


async def test_a_reader_changing_its_copy_changes_no_other_readers() -> None:
    name = "shared-runs-copies"
    mine = await shared_run(_counting_driver, _scenario(name))
    mine["events"].append({"kind": "planted"})
    mine["name"] = "changed"
    theirs = await shared_run(_counting_driver, _scenario(name))
    assert theirs == {"name": name, "seed": theirs["seed"], "events": [{"kind": "made"}]}
    assert CALLS.count(name) == 1
