"""One simulated run shared by the tests that read the same one (issue 32.7: the suite within
about 10 minutes on a loaded 2-core machine).

A run is deterministic by its scenario (seed included: ``test_runner`` and each component's
reproducibility test check that the same scenario gives a byte-identical report), so tests that
ran the same scenario through the same driver each got the same result; here the first of them
runs it and the others read a copy. The key is the driver's name and the scenario's full
content (its dataclass ``repr``: every field, the seed, duration, step, events and flags), so a
test that changes anything in the scenario gets a run of its own. A reproducibility test never
reads its *second* run from here (it compares a shared run with a fresh one).

The cache lives for the test process (with pytest-xdist, per worker) and holds plain data only
(reports, object snapshots), never a loop, client or server, so an async test of any event loop
may read it.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from kubescale.sim.apiserver.request_log import RequestRecord
from kubescale.sim.scenario.runner import SimulationRun
from kubescale.sim.scenario.scenario_format import Scenario

T = TypeVar("T")

_RUNS: dict[tuple[str, str], Any] = {}


def run_key(driver: Callable[[Scenario], Awaitable[Any]], scenario: Scenario) -> tuple[str, str]:
    """What identifies a run: the driver (module and name) and the scenario's whole content."""
    return (f"{driver.__module__}.{driver.__qualname__}", repr(scenario))


async def shared_run(driver: Callable[[Scenario], Awaitable[T]], scenario: Scenario) -> T:
    """``await driver(scenario)``, run once per test process for the same driver and scenario;
    each caller gets its own deep copy (a test may change what it reads)."""
    key = run_key(driver, scenario)
    if key not in _RUNS:
        _RUNS[key] = await driver(scenario)
    result: T = copy.deepcopy(_RUNS[key])
    return result


@dataclass(frozen=True)
class RunToEnd:
    """A run stepped from start to end with nothing between the steps: its report (what
    ``run_scenario`` returns) and every request the API server answered (verb, resource, …)."""

    report: dict[str, Any]
    requests: frozenset[RequestRecord]


async def run_to_end(scenario: Scenario) -> RunToEnd:
    """The driver of tests that only read a whole run's report or requests: the RBAC audit
    (every request the systems make), the autoscaler's consolidation example, the recommender's
    reproducibility check. Read it through :func:`shared_run`."""
    async with SimulationRun(scenario) as run:
        report = await run.run()
        return RunToEnd(report=report, requests=frozenset(run.api.requests.counts()))
