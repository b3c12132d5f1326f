"""The cluster autoscaler sizing a scale-up for the requests the VPA will give the pods
(``examples/cluster-autoscaler-vpa-sized.yaml``): 6 pods Pending at 2 CPU whose VPA
recommends 500m.

separate (upstream): 3 nodes of 4 CPU for 6 × 2 CPU; the pods land on them at 2 CPU and are
evicted by the updater (they are outside the recommended range), the new 500m pods need a fifth
of that room. one-brain: the updater replaces the unschedulable pods at once (they run nowhere:
no disruption), the autoscaler binpacks the replacements at 500m — 6 × 500m = 3 CPU, one node —
and they land there the first time they are scheduled."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubescale.base.coordination import Coordination
from kubescale.sim.scenario.runner import SimulationRun
from kubescale.sim.scenario.scenario_validation import load_scenario

EXAMPLE = (
    Path(__file__).resolve().parents[2]
    / "kubescale/sim/scenario/examples/cluster-autoscaler-vpa-sized.yaml"
)


async def _report(coordination: Coordination) -> dict[str, Any]:
    scenario = load_scenario(EXAMPLE).with_overrides(coordination=coordination)
    async with SimulationRun(scenario) as run:
        await run.run()
        report = run.report()
    assert isinstance(report, dict)
    return report


@pytest.mark.parametrize("coordination", [Coordination.SEPARATE, Coordination.ONE_BRAIN])
async def test_scale_up_sized_for_vpa_given_requests(coordination: Coordination) -> None:
    report = await _report(coordination)
    events = report["events"]
    scale_ups = [(e["time"], e["detail"]) for e in events if e["kind"] == "ca-scale-up"]
    (batch,) = report["workloads"]
    assert batch["series"]["pending"][-1] == 0  # everything runs in the end, either way
    arrived = min(e["time"] for e in events if e["kind"] == "node-added" and e["time"] > 0)
    stale = {  # the 6 pods created at 2 CPU that found no room
        e["subject"] for e in events if e["kind"] == "vpa-eviction"
    } - {e["subject"] for e in events if e["kind"] == "pod-started" and e["time"] <= 30}
    assert len(stale) == 6
    replaced_at = sorted(e["time"] for e in events if e["subject"] in stale)
    if coordination is Coordination.SEPARATE:
        # 6 × 2 CPU, 2 per 4-CPU node: 3 more nodes, at 90 s (pods a minute old).
        assert scale_ups == [(90.0, "target 1 → 4")]
        # The stale pods wait for those nodes, are placed on them at 2 CPU and only then
        # replaced: they land twice, on 3 nodes bought for 2-CPU pods.
        assert replaced_at[0] >= arrived
    else:
        # The updater replaces the unschedulable pods at 60 s (the VPA's switch to Recreate);
        # the autoscaler sizes for the replacements at 500m: 6 × 500m = 3 CPU → 1 node.
        assert replaced_at == [60.0] * 6
        assert scale_ups == [(180.0, "target 1 → 2")]
        # every replacement lands on the new node at its first try (no further scale-up)
        assert replaced_at[-1] < arrived


async def test_one_brain_costs_less() -> None:
    separate = await _report(Coordination.SEPARATE)
    one_brain = await _report(Coordination.ONE_BRAIN)
    # 0.75 against 0.39 node-hours in 15 minutes (4 nodes for most of it against 2).
    assert one_brain["cluster"]["node_hours"] < separate["cluster"]["node_hours"]
