"""Benchmark: predictive vs reactive HPA on the WorldCup98 trace (requests per minute).

Workload model (stated in ``docs/hpa-predictive.md``):

* every request costs ``--cpu-ms-per-request`` (default 6) ms of CPU, so the demand in cores
  is ``requests_per_minute / 60 × 0.006``;
* each replica requests 1 core; the HPA targets 70 % CPU utilization (min 1, max 60, no
  ``behavior``: upstream's legacy rules — scale-up limit ``max(2 × current, 4)``, 5-minute
  downscale stabilization, tolerance 0.1);
* a new replica is Pending for ``--startup-minutes`` (default 2), then Running and Ready; its
  CPU is measured over a 60 s window (so upstream's CPU-initialization rules apply);
* the load is spread evenly over the Ready replicas; a minute is **overloaded** when their
  utilization is above the 70 % target; **replica-minutes** count every replica that exists
  (Pending ones cost too).

The HPA runs once a minute on the trace's minute (a sync period of 60 s) with kubescale's own
pure decisions: :func:`resource_replicas` then :func:`normalize`. The predictive run adds
:class:`DemandHistory`'s seasonal proposal (lead ``--lead-minutes``, default 5) through the
same max-of-proposals rule; it never scales down on its own.

Written to ``bench/results/hpa_worldcup98_predictive.json``; prints the table.

Usage: ``.venv/bin/python bench/hpa_worldcup98_predictive.py [--out FILE]``
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import lzma
import math
import platform
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from kubescale.controllers.hpa.normalization import ScalingHistory, initial_history, normalize
from kubescale.controllers.hpa.predictive import DemandHistory
from kubescale.controllers.hpa.replica_calculator import PodMetric, Tolerances, resource_replicas

TRACE: Final = Path("/work/shared/traces/worldcup98-requests-per-minute.csv.xz")
RESULTS: Final = Path(__file__).resolve().parent / "results" / "hpa_worldcup98_predictive.json"
TARGET: Final = 70
MIN_REPLICAS: Final = 1
MAX_REPLICAS: Final = 60
TOLERANCES: Final = Tolerances(scale_down=0.1, scale_up=0.1)
WINDOW: Final = timedelta(seconds=60)


def load(path: Path) -> list[tuple[datetime, int]]:
    """The trace, one row per minute; missing minutes are filled with zero requests."""
    with lzma.open(path, "rt", encoding="utf-8") as handle:
        rows = [
            (datetime.fromisoformat(r["period"]).replace(tzinfo=UTC), int(r["count"]))
            for r in csv.DictReader(io.StringIO(handle.read()))
        ]
    filled: list[tuple[datetime, int]] = []
    for moment, count in rows:
        while filled and moment - filled[-1][0] > timedelta(minutes=1):
            filled.append((filled[-1][0] + timedelta(minutes=1), 0))
        filled.append((moment, count))
    return filled


def _fmt(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _pod(name: str, created: datetime, now: datetime, startup: timedelta) -> dict[str, Any]:
    ready_at = created + startup
    if now < ready_at:
        status: dict[str, Any] = {"phase": "Pending"}
    else:
        status = {
            "phase": "Running",
            "startTime": _fmt(ready_at),
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": _fmt(ready_at)}
            ],
        }
    return {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "1"}}}]},
        "status": status,
    }


def simulate(
    trace: Sequence[tuple[datetime, int]],
    *,
    predictive: bool,
    hpa_target: int = TARGET,
    cpu_seconds_per_request: float,
    startup: timedelta,
    lead: timedelta,
) -> dict[str, Any]:
    pods: list[tuple[str, datetime]] = [("p0", trace[0][0] - timedelta(hours=1))]
    serial = 1
    history: ScalingHistory | None = None
    demand = DemandHistory()
    overloaded = 0
    replica_minutes = 0
    peak = 0
    predicted_scale_ups = 0
    for now, requests in trace:
        cores = requests / 60.0 * cpu_seconds_per_request
        objects = [_pod(name, created, now, startup) for name, created in pods]
        ready = [o for o in objects if o["status"]["phase"] == "Running"]
        current = len(pods)
        replica_minutes += current
        peak = max(peak, current)
        per_pod = cores / max(len(ready), 1)
        if per_pod * 100 > TARGET:
            overloaded += 1
        milli = math.ceil(per_pod * 1000)
        metrics = {
            o["metadata"]["name"]: PodMetric(value=milli, timestamp=now, window=WINDOW)
            for o in ready
        }
        if history is None:
            history = initial_history(current, now)
        proposal = current
        reactive = None
        if metrics:
            result = resource_replicas(
                current=current,
                target_utilization=hpa_target,
                resource="cpu",
                container="",
                tolerances=TOLERANCES,
                pods=objects,
                metrics=metrics,
                cpu_initialization_period=timedelta(minutes=5),
                initial_readiness_delay=timedelta(seconds=30),
                now=now,
            )
            proposal = reactive = result.replicas
            if predictive:
                demand.record(now, result.utilization * len(ready) / hpa_target)
                predicted = demand.proposal(now, lead=lead)
                if predicted is not None and predicted > proposal and predicted > current:
                    proposal = predicted
                    predicted_scale_ups += 1
        normalized = normalize(
            history=history,
            behavior=None,
            current=current,
            desired=proposal,
            min_replicas=MIN_REPLICAS,
            max_replicas=MAX_REPLICAS,
            downscale_window=timedelta(minutes=5),
            now=now,
            recorded=reactive,
        )
        history = normalized.history
        desired = normalized.replicas
        if desired > current:
            for _ in range(desired - current):
                pods.append((f"p{serial}", now))
                serial += 1
        elif desired < current:
            pods = pods[:desired]  # the newest go first? upstream's ReplicaSet prefers
            # not-ready and younger pods; here the list is oldest first, so cut the tail
    return {
        "overloaded_minutes": overloaded,
        "replica_minutes": replica_minutes,
        "peak_replicas": peak,
        "minutes": len(trace),
        "minutes_with_a_predicted_scale_up": predicted_scale_ups,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0], allow_abbrev=False)
    parser.add_argument("--trace", type=Path, default=TRACE)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--cpu-ms-per-request", type=float, default=6.0)
    parser.add_argument("--startup-minutes", type=int, default=2)
    parser.add_argument("--lead-minutes", type=int, default=5)
    args = parser.parse_args(argv)
    trace = load(args.trace)
    settings: dict[str, Any] = {
        "cpu_seconds_per_request": args.cpu_ms_per_request / 1000.0,
        "startup": timedelta(minutes=args.startup_minutes),
        "lead": timedelta(minutes=args.lead_minutes),
    }
    started = time.perf_counter()
    reactive = simulate(trace, predictive=False, **settings)
    predicted = simulate(trace, predictive=True, **settings)
    # the same replica budget: the predictive HPA with a slightly higher target; and what
    # buying headroom without a forecast costs: the reactive HPA with a lower target
    lower = {
        "predictive_target_73": simulate(trace, predictive=True, hpa_target=73, **settings),
        "reactive_target_65": simulate(trace, predictive=False, hpa_target=65, **settings),
    }
    result: dict[str, Any] = {
        "trace": str(args.trace.name),
        "first_minute": trace[0][0].isoformat(),
        "last_minute": trace[-1][0].isoformat(),
        "model": {
            "cpu_ms_per_request": args.cpu_ms_per_request,
            "pod_request_cores": 1,
            "target_utilization_percent": TARGET,
            "min_replicas": MIN_REPLICAS,
            "max_replicas": MAX_REPLICAS,
            "startup_minutes": args.startup_minutes,
            "lead_minutes": args.lead_minutes,
            "sync_period_seconds": 60,
        },
        "reactive": reactive,
        "predictive": predicted,
        **lower,
        "seconds": round(time.perf_counter() - started, 1),
        "python": sys.version.split()[0],
        "machine": platform.machine(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print("| policy | overloaded minutes | replica-minutes | peak replicas |")
    print("|---|---|---|---|")
    for name in ("reactive", "predictive", *lower):
        row = result[name]
        cells = (row["overloaded_minutes"], row["replica_minutes"], row["peak_replicas"])
        print(f"| {name} | " + " | ".join(str(c) for c in cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
