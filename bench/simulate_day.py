"""Benchmark: one simulated day of a 50-pod, 10-node cluster at a 1-minute step.

Runs the whole simulation (API server, kubescale's TLS server, actors, timeline and report) the
way ``kubescale simulate`` does and writes the wall time and the step rate to
``bench/results/simulate_day.json`` (``--out`` to change). The cluster: ten 8-core nodes; five
Deployments of ten pods, one per usage model kind (diurnal shared, diurnal, random walk,
bursts, constant), so every actor and model is exercised. Budget: well under 2 minutes of wall
time on 2 cores.

Usage: ``.venv/bin/python bench/simulate_day.py [--out FILE] [--seed N]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

from kubescale.sim.scenario.runner import SimulationRun
from kubescale.sim.scenario.scenario_validation import parse_scenario

RESULTS = Path(__file__).resolve().parent / "results" / "simulate_day.json"


def scenario_document(seed: int) -> dict[str, Any]:
    def deployment(name: str, usage: dict[str, Any]) -> dict[str, Any]:
        return {
            "kind": "Deployment",
            "name": name,
            "namespace": "bench",
            "replicas": 10,
            "containers": [
                {
                    "name": "app",
                    "requests": {"cpu": "500m", "memory": "512Mi"},
                    "limits": {"cpu": "1", "memory": "1Gi"},
                    "usage": usage,
                }
            ],
        }

    return {
        "name": "bench-day",
        "seed": seed,
        "duration": "24h",
        "step": "1m",
        "namespaces": ["bench"],
        "nodes": [
            {
                "name": "node",
                "count": 10,
                "allocatable": {"cpu": "8", "memory": "32Gi"},
                "zones": ["zone-a", "zone-b", "zone-c"],
                "pricePerHour": 0.38,
            }
        ],
        "workloads": [
            deployment(
                "frontend",
                {"type": "diurnal", "shared": True, "mean": {"cpu": "4", "memory": "4Gi"},
                 "amplitude": {"cpu": "3", "memory": "1Gi"}, "phase": "8h"},
            ),
            deployment(
                "api",
                {"type": "diurnal", "mean": {"cpu": "400m", "memory": "400Mi"},
                 "amplitude": {"cpu": "300m", "memory": "50Mi"}},
            ),
            deployment(
                "search",
                {"type": "randomWalk", "start": {"cpu": "500m", "memory": "500Mi"},
                 "volatility": {"cpu": "50m", "memory": "16Mi"}, "max": {"memory": "900Mi",
                 "cpu": "2"}},
            ),
            deployment(
                "checkout",
                {"type": "bursts", "base": {"cpu": "200m", "memory": "300Mi"},
                 "burst": {"cpu": "1200m", "memory": "600Mi"}, "probability": 0.05},
            ),
            deployment("worker", {"type": "constant", "cpu": "300m", "memory": "256Mi"}),
        ],
    }  # fmt: skip


async def measure(seed: int) -> dict[str, Any]:
    scenario = parse_scenario(scenario_document(seed), base_dir=Path())
    began = time.perf_counter()
    async with SimulationRun(scenario) as run:
        started = time.perf_counter()
        report = await run.run()
    finished = time.perf_counter()
    steps = scenario.steps
    stepping = finished - started
    return {
        "benchmark": "simulate_day",
        "scenario": scenario.name,
        "seed": seed,
        "nodes": 10,
        "pods": 50,
        "steps": steps,
        "step_seconds": scenario.step,
        "simulated_seconds": scenario.duration,
        "wall_seconds": round(finished - began, 3),
        "setup_seconds": round(started - began, 3),
        "stepping_seconds": round(stepping, 3),
        "steps_per_second": round(steps / stepping, 1),
        "containers_sampled": len(report["containers"]),
        "python": platform.python_version(),
        "machine": platform.machine(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--out", type=Path, default=RESULTS, help="result file (JSON)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    result = asyncio.run(measure(args.seed))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    sys.stdout.write(
        f"{result['steps']} steps in {result['wall_seconds']:.2f} s wall "
        f"({result['steps_per_second']:.0f} steps/s); written to {args.out}\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
