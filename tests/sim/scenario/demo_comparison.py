"""The built-in demo's three-way comparison at a reduced duration, run once per test session and
shared by the tests that read it (the ordering test and the browser test)."""

from __future__ import annotations

import asyncio
import copy
from functools import cache
from typing import Any, Final

import pytest

from kubescale.cli.simulate_command import demo_scenario_path
from kubescale.sim.scenario.comparison import run_comparison
from kubescale.sim.scenario.scenario_validation import load_scenario

DEMO_GROUP: Final = pytest.mark.xdist_group("demo-comparison")
"""On the tests that read the report: with pytest-xdist (tests/run.sh), they run on one worker,
so the three simulated runs are made once (the cache below is per process), not once per
worker."""

REDUCED_DURATION = 4 * 3600.0
"""Long enough for every ordering of the full run but node-hours and cost (see the README):
the web tier outgrows the static pods' CPU limit from about 3h15m."""


@cache
def _report() -> dict[str, Any]:
    scenario = load_scenario(demo_scenario_path()).with_overrides(duration=REDUCED_DURATION)
    return asyncio.run(run_comparison(scenario))


def demo_comparison_report() -> dict[str, Any]:
    """A copy of the reduced demo's report (the ``one-brain`` run with ``comparison``)."""
    return copy.deepcopy(_report())
