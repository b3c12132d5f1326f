"""The descheduler and the cluster autoscaler's scale-down on one cluster
(``examples/descheduler-and-scale-down.yaml``), through the real client against the in-process
API server: does scale-down undo the move the descheduler just made?

At 2m LowNodeUtilization evicts two ``web`` pods from ``hot-0`` (75% of its cpu requested,
over the 50% target) and their replacements land on the ``spare`` node. Once the Job that kept
spare busy is done, spare is at 50% of its cpu (the autoscaler's threshold: underutilized) and
the pods fit back on hot-0.

separate (upstream): the autoscaler drains spare (unneeded time 5m, recheck 1m after the Job's
pod stopped blocking it): the two replacements are evicted and land back on hot-0 — the
descheduler's move undone. one-brain: spare holds fresh replacements of the descheduler's
evictions, so it is no scale-down candidate until 5m after them; its unneeded time starts only
then, and nothing is drained within the 11 minutes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubescale.base.coordination import Coordination
from kubescale.controllers.autoscaler.component import AutoscalerComponent
from kubescale.controllers.descheduler.component import DeschedulerComponent
from kubescale.coordination.brain import brain_of
from kubescale.sim.scenario.runner import SimulationRun
from kubescale.sim.scenario.scenario_validation import load_scenario

EXAMPLE = (
    Path(__file__).resolve().parents[2]
    / "kubescale/sim/scenario/examples/descheduler-and-scale-down.yaml"
)


async def _report(coordination: Coordination) -> dict[str, Any]:
    scenario = load_scenario(EXAMPLE).with_overrides(coordination=coordination)
    async with SimulationRun(scenario) as run:
        # every evicting system records on the process's one ledger (an empty ledger is
        # falsy: a ``ledger or DisruptionLedger()`` default once gave each its own)
        ledger = brain_of(run.runtime.cache).ledger
        assert ledger.shared is coordination.shared
        by_name = {c.name: c for c in run.components}
        autoscaler = by_name["cluster-autoscaler"]
        descheduler = by_name["descheduler"]
        assert isinstance(autoscaler, AutoscalerComponent)
        assert isinstance(descheduler, DeschedulerComponent)
        assert autoscaler.loop.disruptions is ledger
        assert autoscaler.loop.actuator.disruptions is ledger
        assert descheduler.loop.disruptions is ledger
        await run.run()
        report = run.report()
    assert isinstance(report, dict)
    return report


def _where(events: list[dict[str, Any]]) -> dict[str, str]:
    """Pod → the node it last started on."""
    return {
        e["subject"]: e["detail"].removeprefix("on node ")
        for e in events
        if e["kind"] == "pod-started"
    }


@pytest.mark.parametrize("coordination", [Coordination.SEPARATE, Coordination.ONE_BRAIN])
async def test_scale_down_does_not_undo_the_descheduler(coordination: Coordination) -> None:
    events = (await _report(coordination))["events"]
    moved = [e["subject"] for e in events if e["kind"] == "descheduler-eviction"]
    assert len(moved) == 2  # LowNodeUtilization: 6000m → 4000m on hot-0, either way
    moved_at = min(e["time"] for e in events if e["kind"] == "descheduler-eviction")
    started = [e for e in events if e["kind"] == "pod-started" and e["time"] > moved_at]
    replacements = [e["subject"] for e in started if "web" in e["subject"]]
    spare = next(
        e["subject"] for e in events if e["kind"] == "node-added" and "spare" in e["subject"]
    )
    where = _where(events)
    # the replacements landed on spare: the move happened
    assert [where[p] for p in replacements[:2]] == [spare, spare]
    drained = [e["subject"] for e in events if e["kind"] == "ca-eviction"]
    deleted = [e["subject"] for e in events if e["kind"] == "ca-node-deleted"]
    web_on_hot = sum(
        1
        for pod, node in where.items()
        if "web" in pod and node == "hot-0" and pod not in moved and pod not in drained
    )
    if coordination is Coordination.SEPARATE:
        # the drain evicts exactly the descheduler's replacements, which land back on hot-0
        assert sorted(drained) == sorted(replacements[:2])
        assert deleted == [spare]
        assert web_on_hot == 6
    else:
        assert drained == []
        assert deleted == []
        assert web_on_hot == 4
