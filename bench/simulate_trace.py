"""Benchmark: a cluster built from the Bitbrains month (``trace`` section), three ways.

Cuts the first ``--workloads`` VMs and ``--hours`` hours out of
``/work/shared/traces/bitbrains-rnd-2013-07.csv.xz`` (the file is sorted by workload, so the cut
stops reading early), builds the cluster by the trace section's rules on m5.4xlarge nodes
(16 cores, 64 GiB, $0.768/h), runs the three-way comparison (none / separate / one brain) as
``kubescale simulate`` does, and writes the process CPU seconds, peak RSS and the comparison
to ``bench/results/simulate_trace.json`` (``--out`` to change). It also prints the CPU per
workload-day and what 500 workloads × 30 days would take at that rate (a linear extrapolation:
the simulator's per-step work grows with the pods, so it is a lower bound).

Usage: ``.venv/bin/python bench/simulate_trace.py [--workloads 5] [--hours 6] [--out FILE]
[--event-loop asyncio|uvloop]``; where the CPU goes: ``docs/simulate-speed.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import io
import json
import lzma
import math
import platform
import resource
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from kubescale.runtime import event_loop
from kubescale.sim.scenario.comparison import compare_reports, run_variants
from kubescale.sim.scenario.scenario_validation import parse_scenario

TRACE = Path("/work/shared/traces/bitbrains-rnd-2013-07.csv.xz")
RESULTS = Path(__file__).resolve().parent / "results" / "simulate_trace.json"


def cut(source: Path, target: Path, *, workloads: int, hours: float) -> None:
    """The first ``workloads`` workloads' first ``hours`` hours of samples (each its own)."""
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


def cut_window(source: Path, target: Path, *, workloads: int, hours: float) -> int:
    """The first ``hours`` hours of the whole trace (from its earliest sample): every sample in
    that window of the first ``workloads`` workloads that have one; how many workloads."""
    span = hours * 3600
    rows: list[list[str]] = []
    start = math.inf
    with lzma.open(source, "rt", encoding="utf-8", newline="") as text:
        reader = csv.reader(text)
        header = next(reader)
        at, name = header.index("timestamp"), header.index("workload")
        for row in reader:  # a row at or past start + span now is past it at the end too
            when = float(row[at])
            start = min(start, when)
            if when < start + span:
                rows.append(row)
    end = start + span
    kept: list[str] = []
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    for row in rows:  # sorted by workload, then time
        if not start <= float(row[at]) < end:
            continue
        if not kept or kept[-1] != row[name]:
            if len(kept) == workloads:
                break
            kept.append(row[name])
        writer.writerow(row)
    target.write_text(out.getvalue(), encoding="utf-8")
    return len(kept)


def workload_figures(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per workload of a variant's report: the figures the comparison sums, to see which
    workloads (and decisions) make a difference between variants."""
    return {
        w["name"]: {
            "oom_kills": w["oom_kills"],
            "evictions": w["evictions"],
            "slack_core_hours": w["slack_core_hours"],
            "slack_gib_hours": w["slack_gib_hours"],
            "throttled_core_seconds": w["throttled_core_seconds"],
            "pending_pod_seconds": w["pending_pod_seconds"],
        }
        for w in report["workloads"]
    }


class _Progress:
    """Prints on stderr, every 2 % of the run, how far it is and the CPU seconds so far."""

    def __init__(self, cpu_before: float) -> None:
        self._cpu_before = cpu_before
        self._shown = -1

    def __call__(self, fraction: float) -> None:
        percent = int(fraction * 50) * 2
        if percent != self._shown:
            self._shown = percent
            cpu = time.process_time() - self._cpu_before
            print(f"{percent:3d} % after {cpu:.0f} CPU-s", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=5)
    parser.add_argument("--hours", type=float, default=6.0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--window",
        choices=("per-workload", "global"),
        default="per-workload",
        help="per-workload: each workload's own first hours; global: the trace's first hours",
    )
    parser.add_argument(
        "--per-workload-figures",
        action="store_true",
        help="also write each variant's per-workload figures and event counts",
    )
    parser.add_argument("--instance-type", default="m5.4xlarge")
    parser.add_argument("--node-cpu", default="16", help="allocatable CPU of a node")
    parser.add_argument("--node-memory", default="64Gi", help="allocatable memory of a node")
    parser.add_argument("--price", type=float, default=0.768, help="per node-hour")
    parser.add_argument(
        "--event-loop",
        choices=("asyncio", "uvloop"),
        default="asyncio",
        help="the loop the runs are on: asyncio's (what `kubescale simulate` uses) or uvloop "
        "(an experiment: same figures, but the report's plans differ, docs/simulate-speed.md)",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        trace = Path(scratch) / "slice.csv"
        workloads = args.workloads
        if args.window == "global":
            workloads = cut_window(TRACE, trace, workloads=args.workloads, hours=args.hours)
        else:
            cut(TRACE, trace, workloads=args.workloads, hours=args.hours)
        document: dict[str, Any] = {
            "name": "bench-trace",
            "seed": 1,
            "trace": {
                "file": str(trace),
                "nodeGroup": {
                    "instanceType": args.instance_type,
                    "allocatable": {"cpu": args.node_cpu, "memory": args.node_memory},
                    "pricePerHour": args.price,
                },
            },
        }
        cpu_before = time.process_time()
        scenario = parse_scenario(document, base_dir=Path(scratch))
        factory = event_loop.loop_factory({}) if args.event_loop == "uvloop" else None
        with asyncio.Runner(loop_factory=factory) as runner:
            reports = runner.run(run_variants(scenario, progress=_Progress(cpu_before)))
        cpu = time.process_time() - cpu_before
    details = {
        variant: {
            "workloads": workload_figures(variant_report),
            "events": dict(sorted(Counter(e["kind"] for e in variant_report["events"]).items())),
        }
        for variant, variant_report in reports.items()
    }
    report = compare_reports(reports)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    workload_days = workloads * scenario.duration / 86400
    per_workload_day = cpu / workload_days
    result = {
        "workloads": workloads,
        "window": args.window,
        "event_loop": args.event_loop,
        "node_group": {
            "instance_type": args.instance_type,
            "allocatable": {"cpu": args.node_cpu, "memory": args.node_memory},
            "price_per_hour": args.price,
        },
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
    if args.per_workload_figures:
        result["variants"] = details
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(
        json.dumps(
            {k: v for k, v in result.items() if k not in ("comparison", "variants")}, indent=2
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
