"""The process-wide ``coordination`` setting reaches every component: ``serve --coordination``
(ProcessConfig), a scenario's ``coordination:`` key and ``simulate --coordination``, both into
:attr:`Runtime.coordination` and :attr:`SharedCache.coordination`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, ClassVar

import pytest

from kubescale.base.coordination import Coordination
from kubescale.cli.main import build_parser
from kubescale.runtime.component import BaseComponent, Runtime
from kubescale.runtime.process_config import add_process_arguments, process_config_from_args
from kubescale.sim.scenario.runner import SimulationRun
from kubescale.sim.scenario.scenario_format import ScenarioError
from kubescale.sim.scenario.scenario_validation import parse_scenario

DOCUMENT: dict[str, Any] = {
    "name": "coordination",
    "duration": "2m",
    "nodes": [{"name": "node", "count": 1, "allocatable": {"cpu": "4", "memory": "8Gi"}}],
}


def _process(argv: list[str]) -> Coordination:
    parser = argparse.ArgumentParser()
    add_process_arguments(parser)
    return process_config_from_args(parser.parse_args(argv)).coordination


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], Coordination.ONE_BRAIN),  # the default: kubescale's one brain
        (["--coordination", "one-brain"], Coordination.ONE_BRAIN),
        (["--coordination", "separate"], Coordination.SEPARATE),
    ],
)
def test_serve_flag(argv: list[str], expected: Coordination) -> None:
    assert _process(argv) is expected


def test_serve_refuses_an_unknown_value(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--coordination", "two-brains"])
    assert "--coordination: invalid choice: 'two-brains'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, Coordination.ONE_BRAIN), ("one-brain", Coordination.ONE_BRAIN),
     ("separate", Coordination.SEPARATE)],
)  # fmt: skip
def test_scenario_key(value: str | None, expected: Coordination) -> None:
    document = dict(DOCUMENT) if value is None else {**DOCUMENT, "coordination": value}
    assert parse_scenario(document, base_dir=Path()).coordination is expected


@pytest.mark.parametrize("value", ["both", 3])
def test_scenario_key_refuses_a_bad_value(value: object) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario({**DOCUMENT, "coordination": value}, base_dir=Path())
    assert len(caught.value.problems) == 1
    assert caught.value.problems[0].startswith("coordination: ")
    assert "one-brain, separate" in caught.value.problems[0]


def test_simulate_override_wins_over_the_file() -> None:
    scenario = parse_scenario({**DOCUMENT, "coordination": "one-brain"}, base_dir=Path())
    assert scenario.with_overrides(coordination=Coordination.SEPARATE).coordination is (
        Coordination.SEPARATE
    )
    assert scenario.with_overrides().coordination is Coordination.ONE_BRAIN
    args = build_parser().parse_args(["simulate", "--coordination", "separate"])
    assert args.coordination is Coordination.SEPARATE


class _Probe(BaseComponent):
    name = "probe"
    seen: ClassVar[list[tuple[Coordination, Coordination]]] = []

    def __init__(self, runtime: Runtime) -> None:
        _Probe.seen.append((runtime.coordination, runtime.cache.coordination))


@pytest.mark.parametrize("value", ["one-brain", "separate"])
async def test_a_simulated_run_gives_the_setting_to_every_component(value: str) -> None:
    scenario = parse_scenario({**DOCUMENT, "coordination": value}, base_dir=Path())
    _Probe.seen = []
    async with SimulationRun(scenario, extra_components=[_Probe, _Probe]) as run:
        await run.run()
    expected = Coordination(value)
    assert _Probe.seen == [(expected, expected), (expected, expected)]
