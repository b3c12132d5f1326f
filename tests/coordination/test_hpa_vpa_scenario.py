"""An HPA and a VPA on one Deployment (``examples/hpa-vpa-one-workload.yaml``): with upstream's
separate behaviour the VPA shrinks the CPU requests the HPA scales on and the HPA scales out
(4 → 14 replicas); with one brain the VPA leaves CPU alone, says so in an Event, and sets memory
only (4 replicas throughout)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubescale.base.coordination import Coordination
from kubescale.kube.resources import CORE_EVENTS
from kubescale.sim.scenario.runner import SimulationRun
from kubescale.sim.scenario.scenario_validation import load_scenario

EXAMPLE = (
    Path(__file__).resolve().parents[2]
    / "kubescale/sim/scenario/examples/hpa-vpa-one-workload.yaml"
)
MI = 1024 * 1024


async def _run(coordination: Coordination) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    scenario = load_scenario(EXAMPLE).with_overrides(duration=600.0, coordination=coordination)
    async with SimulationRun(scenario) as run:
        await run.run()
        events = run.api.store.snapshots(CORE_EVENTS)
        return run.report(), events


def _web(report: dict[str, Any]) -> dict[str, Any]:
    (web,) = [w for w in report["workloads"] if w["name"] == "web"]
    assert isinstance(web, dict)
    return web


@pytest.mark.parametrize("coordination", [Coordination.SEPARATE, Coordination.ONE_BRAIN])
async def test_hpa_and_vpa_on_one_deployment(coordination: Coordination) -> None:
    report, events = await _run(coordination)
    web = _web(report)
    replicas = web["series"]["replicas"]
    (app,) = web["containers"]
    conflicts = [e for e in events if e.get("reason") == "HPAConflict"]
    # Memory is the VPA's in both: 1Gi → the target 256Mi.
    assert app["memory"]["request_avg_bytes"] == 256 * MI
    if coordination is Coordination.SEPARATE:
        # The fight: requests 1 → 250m, then utilization 500m / 250m = 200 % → scale-out,
        # max(2 × 4, 4) = 8 in one step, then ceil(2 / (0.6 × 0.25)) = 14.
        assert app["cpu"]["request_avg_cores"] == 0.25
        assert replicas[0] == 4
        assert 8 in replicas
        assert max(replicas) == 14
        assert conflicts == []
    else:
        # One brain: CPU left to the HPA (1 CPU per pod), 500m / 1 = 50 %:
        # ceil(4 × 50 / 60) = 4 — no scale event at all.
        assert app["cpu"]["request_avg_cores"] == 1.0
        assert set(replicas) == {4}
        assert not any(e["kind"] == "hpa-rescale" for e in report["events"])
        assert conflicts, "an Event says what was decided"
        assert conflicts[0]["message"] == (
            "HorizontalPodAutoscaler web scales Deployment/web on cpu: "
            "the cpu requests and limits of its pods are left as they are"
        )
        decided = [e for e in report["events"] if e["kind"] == "vpa-hpa-conflict"]
        assert len(decided) == 1  # said once, not every loop
