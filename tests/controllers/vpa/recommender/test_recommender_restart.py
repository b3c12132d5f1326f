"""Restart safety on the simulated cluster: kill the recommender, start a fresh one, and the
recommendations carry on from the checkpoints as if nothing had happened.

Two runs of the same scenario: one with the recommender running throughout, one in which, at
90 minutes, the recommender is stopped (its informers closed, its model dropped, no final
checkpoint) and a new one is built from scratch on the run's client. The new one loads the
checkpoints the old one wrote (each minute, after each iteration) and the VPA's recommendation
is then identical, minute by minute, to the uninterrupted run's: the bounds do not fall back to
"no confidence" (upper bound 1e14), the target does not restart from one sample.

The workload's CPU follows a step pattern across a few histogram buckets and its memory is
constant. That keeps the comparison exact: a checkpoint stores bucket weights rescaled to
integers (max 10000, upstream's v3 format), so with many buckets of close weights a restored
histogram can, rarely, put a percentile one bucket away — as upstream's would. The memory peak
of the window in progress is not in a checkpoint (upstream subtracts it) and is re-learnt from
the next sample; with constant memory it is the same peak.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from kubescale.controllers.vpa.recommender.component import RecommenderComponent
from kubescale.kube.resources import VERTICAL_POD_AUTOSCALERS, VPA_CHECKPOINTS
from kubescale.sim.scenario.runner import SimulationRun
from kubescale.sim.scenario.scenario_format import Scenario
from kubescale.sim.scenario.scenario_validation import parse_scenario

RESTART_AT = 90 * 60.0


def scenario() -> Scenario:
    return parse_scenario(
        {
            "name": "restart",
            "seed": 4,
            "start": "2026-01-05T00:00:00Z",
            "duration": "3h",
            "step": "1m",
            "nodes": [{"name": "n", "count": 2, "allocatable": {"cpu": "8", "memory": "16Gi"}}],
            "namespaces": ["shop"],
            "kubescale": {"vpa-recommender": {}},
            "objects": [
                {
                    "apiVersion": "autoscaling.k8s.io/v1",
                    "kind": "VerticalPodAutoscaler",
                    "metadata": {"name": "web", "namespace": "shop"},
                    "spec": {
                        "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                        "updatePolicy": {"updateMode": "Off"},
                    },
                }
            ],
            "workloads": [
                {
                    "kind": "Deployment",
                    "name": "web",
                    "namespace": "shop",
                    "replicas": 2,
                    "containers": [
                        {
                            "name": "app",
                            "requests": {"cpu": "1", "memory": "1Gi"},
                            "usage": {
                                "type": "step",
                                "steps": [
                                    {"at": "0", "cpu": "300m", "memory": "400Mi"},
                                    {"at": "40m", "cpu": "600m", "memory": "400Mi"},
                                    {"at": "100m", "cpu": "450m", "memory": "400Mi"},
                                    {"at": "150m", "cpu": "900m", "memory": "400Mi"},
                                ],
                            },
                        }
                    ],
                }
            ],
        },
        base_dir=Path(),
    )


def _status(run: SimulationRun) -> dict[str, Any]:
    vpa = run.api.store.get(VERTICAL_POD_AUTOSCALERS, "web", "shop")
    return dict(vpa.get("status") or {})


def _restart(run: SimulationRun) -> RecommenderComponent:
    """Put a freshly built recommender in place of the run's (the old one is never run again):
    what it knows comes from the checkpoints alone."""
    state = run.loops["vpa-recommender"]
    (old,) = [c for c in run.components if isinstance(c, RecommenderComponent)]
    fresh = RecommenderComponent(old.settings, replace(run.runtime, registry=CollectorRegistry()))
    (spec,) = fresh.loops()
    state.loop = spec.loop
    return fresh


async def _history(*, restart: bool) -> tuple[list[dict[str, Any]], RecommenderComponent]:
    async with SimulationRun(scenario()) as run:
        history: list[dict[str, Any]] = []
        (component,) = [c for c in run.components if isinstance(c, RecommenderComponent)]
        while not run.done:
            if restart and abs(run.elapsed - RESTART_AT) < 1e-6:
                component = _restart(run)
            await run.step()
            history.append(_status(run))
        assert run.api.store.list(VPA_CHECKPOINTS, namespace="shop")
        return history, component


def _upper_cpu(status: dict[str, Any]) -> str:
    entries = (status.get("recommendation") or {}).get("containerRecommendations") or []
    return str(entries[0]["upperBound"]["cpu"]) if entries else ""


async def test_recommendations_continue_from_checkpoints_with_no_reset() -> None:
    uninterrupted, _ = await _history(restart=False)
    restarted, fresh = await _history(restart=True)
    index = int(RESTART_AT // 60)
    # The fresh recommender started from the one checkpoint of the VPA's container.
    assert fresh.loop.checkpoints_loaded == 1
    assert fresh.loop.iterations == len(restarted) - index
    # Not a reset: the first status after the restart still has confidence.
    assert _upper_cpu(restarted[index]) != "100G"
    # And minute by minute, the same recommendation and conditions as without the restart.
    assert restarted == uninterrupted
    targets = {
        entry["target"]["cpu"]
        for status in uninterrupted
        for entry in (status.get("recommendation") or {}).get("containerRecommendations") or []
    }
    assert len(targets) >= 3  # the steps moved the target: the comparison is not trivial
