"""A three-way comparison of a cluster built from a trace: same seed, same report."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import yaml

from kubescale.sim.scenario.comparison import VARIANTS, compare_reports, run_variants
from kubescale.sim.scenario.scenario_validation import load_scenario

T0 = 1372636800  # 2013-07-01T00:00:00Z
GI = 1 << 30
HEADER = (
    "timestamp,workload,container,cpu_cores,memory_bytes,"
    "cpu_provisioned_cores,memory_provisioned_bytes\n"
)
# two workloads, twelve 5-minute samples (one hour): web's memory grows past its provisioned
# 1 GiB (OOM kills without autoscaling), db is over-provisioned (the VPA shrinks it)
TRACE = HEADER + "".join(
    f"{T0 + 300 * i},{w},main,{cpu},{mem},{pcpu},{pmem}\n"
    for w, pcpu, pmem, cpus, mems in (
        (
            "web",
            0.5,
            GI,
            [0.2 + 0.05 * i for i in range(12)],
            [GI // 2 + GI // 10 * i for i in range(12)],
        ),
        ("db", 2.0, 4 * GI, [0.3] * 12, [GI // 4] * 12),
    )
    for i, (cpu, mem) in enumerate(zip(cpus, mems, strict=True))
)
REPLICAS = f"timestamp,workload,replicas\n{T0},web,2\n{T0 + 1800},web,3\n"


def _scenario(tmp_path: Path) -> Path:
    (tmp_path / "usage.csv").write_text(TRACE)
    (tmp_path / "replicas.csv").write_text(REPLICAS)
    section = {
        "file": "usage.csv",
        "replicas": "replicas.csv",
        "nodeGroup": {"instanceType": "m5.xlarge", "allocatable": {"cpu": "4", "memory": "8Gi"}},
    }
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"name": "from-trace", "seed": 7, "trace": section}))
    return path


def _run(path: Path) -> tuple[str, dict[str, Any]]:
    reports = asyncio.run(run_variants(load_scenario(path)))
    variants = {variant: report["workloads"] for variant, report in reports.items()}
    return json.dumps(compare_reports(reports), sort_keys=True), variants


def test_same_seed_same_report(tmp_path: Path) -> None:
    path = _scenario(tmp_path)
    first, variants = _run(path)
    second, _ = _run(path)
    assert first == second
    # the run is not trivially the same: the autoscaled variants changed something
    assert list(variants) == [variant for variant, _ in VARIANTS]
    assert variants["none"] != variants["separate"]
