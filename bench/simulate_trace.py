"""Benchmark: a cluster built from the Bitbrains month (``trace`` section), three ways.

Cuts the first ``--workloads`` VMs and ``--hours`` hours out of
``/work/shared/traces/bitbrains-rnd-2013-07.csv.xz`` (the file is sorted by workload, so the cut
stops reading early), builds the cluster by the trace section's rules on m5.4xlarge nodes
(16 cores, 64 GiB, $0.768/h), runs the three-way comparison (none / separate / one brain) as
``kubescale simulate`` does, and writes the process CPU seconds, peak RSS and the comparison
to ``bench/results/simulate_trace.json`` (``--out`` to change). It also prints the CPU per
workload-day and what 500 workloads × 30 days would take at that rate (a linear extrapolation:
the simulator's per-step work grows with the pods, so it is a lower bound).

Usage: ``.venv/bin/python bench/simulate_trace.py [--workloads 5] [--hours 6] [--out FILE]``
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import io
import json
import lzma
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kubescale.sim.scenario.comparison import run_comparison
from kubescale.sim.scenario.scenario_validation import parse_scenario

TRACE = Path("/work/shared/traces/bitbrains-rnd-2013-07.csv.xz")
RESULTS = Path(__file__).resolve().parent / "results" / "simulate_trace.json"


def cut(source: Path, target: Path, *, workloads: int, hours: float) -> None:
    """The first ``workloads`` workloads' first ``hours`` hours of samples."""
    with lzma.open(source, "rt", encoding="utf-8", newline="") as text:
        reader = csv.reader(text)
        header = next(reader)
        at, name = header.index("timestamp"), header.index("workload")
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(header)
        seen: list[str] = []
        first: dict[str, float] = {}
        for row in reader:
            if row[name] not in first:
                if len(seen) == workloads:
                    break
                seen.append(row[name])
                first[row[name]] = float(row[at])
            if float(row[at]) < first[row[name]] + hours * 3600:
                writer.writerow(row)
    target.write_text(out.getvalue(), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=5)
    parser.add_argument("--hours", type=float, default=6.0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        trace = Path(scratch) / "slice.csv"
        cut(TRACE, trace, workloads=args.workloads, hours=args.hours)
        document: dict[str, Any] = {
            "name": "bench-trace",
            "seed": 1,
            "trace": {
                "file": str(trace),
                "nodeGroup": {
                    "instanceType": "m5.4xlarge",
                    "allocatable": {"cpu": "16", "memory": "64Gi"},
                    "pricePerHour": 0.768,
                },
            },
        }
        cpu_before = time.process_time()
        scenario = parse_scenario(document, base_dir=Path(scratch))
        report = asyncio.run(run_comparison(scenario))
        cpu = time.process_time() - cpu_before
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    workload_days = args.workloads * scenario.duration / 86400
    per_workload_day = cpu / workload_days
    result = {
        "workloads": args.workloads,
        "simulated_hours": scenario.duration / 3600,
        "steps": scenario.steps,
        "cpu_seconds_three_ways": round(cpu, 1),
        "cpu_seconds_per_workload_day": round(per_workload_day, 2),
        "extrapolated_cpu_hours_500_workloads_30_days": round(
            per_workload_day * 500 * 30 / 3600, 1
        ),
        "peak_rss_mib": round(peak_kib / 1024, 1),
        "comparison": report["comparison"],
        "python": sys.version.split()[0],
        "machine": platform.machine(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in result.items() if k != "comparison"}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
