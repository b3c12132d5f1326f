"""Benchmark: the reactive HPA's tuning frontier, and the predictive HPA placed on it (issue 31).

For each request series (requests per minute), the reactive HPA — kubescale's own pure
decisions, :func:`resource_replicas` then :func:`normalize`, the functions the loop runs — is
replayed with its target swept (``--targets``, default 50 % … 90 %). Each target gives a point
(replica-minutes, overloaded minutes); the points no other point beats on both are the
**frontier**: the best trade-offs upstream's HPA reaches with its own setting. The predictive
HPA (one parameter set, from ``--params``) is replayed once per series and compared with the
frontier interpolated at its replica-minutes.

**Protocol** (``docs/hpa-predictive.md``): the parameters are chosen on the tuning series
(``--tuning``, WorldCup98) only; the validation series (``--validation``, NASA-HTTP July 1995,
and any series nobody here has) are replayed with the same parameters, never used to choose
them. The parameter file names the series it was tuned on (``tuned_on``); the bench refuses a
file that names a validation series, or a series that is not the tuning series of this run.
``--sweep-coverage`` (the tuning aid) and ``--tuning-only`` run on the tuning series alone.
The parameter file may choose the predictive error model (``error_model``: ``ratio``, the
default, or ``sqrt``) and give ``"coverage": "from-target"`` — the HPA target as the share of
windows covered, a rule rather than a number (``bench/hpa_predictive_params_sqrt.json``).

Workload model (per series, no parameter): every request costs ``c`` ms of CPU with
``c = 6 × 229,426 ÷ (the series' busiest minute)`` — the rule of the traces' README, so that the
busiest minute of every series needs 22.94 cores (WorldCup98: c = 6). Each replica requests
1 core; ``minReplicas`` 1, ``maxReplicas`` 60, no ``behavior`` (upstream's legacy scale-up limit
``max(2 × current, 4)``, 5-minute downscale stabilization, tolerance 0.1); a new replica is
Pending for 2 minutes, then Ready, its CPU measured over 60 s; the HPA syncs once a minute; the
load spreads evenly over the Ready replicas. A minute is **overloaded** when their utilization is
above 70 % (the service's objective, fixed whatever the HPA's target); **replica-minutes**
count every replica that exists, Pending ones included.

Writes ``bench/results/hpa_predictive_frontier.json`` and, with ``--svg``, the chart.

Usage: ``.venv/bin/python bench/hpa_predictive_frontier.py [--jobs 2] [--svg FILE]``
"""

from __future__ import annotations

import argparse
import csv
import io
import itertools
import json
import lzma
import math
import platform
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from kubescale.controllers.hpa.normalization import ScalingHistory, initial_history, normalize
from kubescale.controllers.hpa.predictive import (
    ERROR_MODELS,
    DemandHistory,
    ErrorModel,
    coverage_from_target,
)
from kubescale.controllers.hpa.replica_calculator import PodMetric, Tolerances, resource_replicas
from kubescale.objects.pod import Pod, PodStatus

HERE: Final = Path(__file__).resolve().parent
TRACES: Final = Path("/work/shared/traces")
TUNING: Final = ("worldcup98", TRACES / "worldcup98-requests-per-minute.csv.xz")
VALIDATION: Final = (
    ("nasa-http-1995-07", TRACES / "hpa" / "nasa-http-1995-07-requests-per-minute.csv.xz"),
)
PARAMS: Final = HERE / "hpa_predictive_params.json"
RESULTS: Final = HERE / "results" / "hpa_predictive_frontier.json"
TARGETS: Final = tuple(range(50, 91, 5))
OVERLOAD_PERCENT: Final = 70
MIN_REPLICAS: Final = 1
MAX_REPLICAS: Final = 60
TOLERANCES: Final = Tolerances(scale_down=0.1, scale_up=0.1)
WINDOW: Final = timedelta(seconds=60)
STARTUP: Final = timedelta(minutes=2)
# the traces' README: the busiest minute of every series needs as many cores as WorldCup98's
# busiest minute (229,426 requests) at 6 ms a request
REFERENCE_PEAK_CORES: Final = 229_426 / 60 * 0.006
GOAL_REDUCTION: Final = 0.20


class ProtocolError(ValueError):
    """A parameter file that would cross the tuning/validation split, or is malformed."""


@dataclass(frozen=True, kw_only=True)
class Params:
    tuned_on: tuple[str, ...]
    hpa_target: int
    lead_minutes: int
    coverage: float
    error_model: ErrorModel = "ratio"


def load_params(path: Path, *, tuning: Sequence[str], validation: Sequence[str]) -> Params:
    """The parameter file, refused (one line naming the field) when its ``tuned_on`` names a
    validation series or anything but this run's tuning series."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise ProtocolError(f"{path}: cannot read the parameter file: {err}") from None
    if not isinstance(raw, dict):
        raise ProtocolError(f"{path}: must be a JSON object")
    tuned_on = raw.get("tuned_on")
    if (
        not isinstance(tuned_on, list)
        or not tuned_on
        or not all(isinstance(n, str) for n in tuned_on)
    ):
        raise ProtocolError(f"{path}: tuned_on: must be a non-empty list of series names")
    crossed = sorted(set(tuned_on) & set(validation))
    if crossed:
        raise ProtocolError(
            f"{path}: tuned_on: names validation series {', '.join(crossed)}; parameters may "
            "only be chosen on the tuning series"
        )
    if set(tuned_on) != set(tuning):
        raise ProtocolError(
            f"{path}: tuned_on: {', '.join(tuned_on)} is not this run's tuning series "
            f"({', '.join(tuning)})"
        )
    target, lead, coverage = raw.get("hpa_target"), raw.get("lead_minutes"), raw.get("coverage")
    error_model = raw.get("error_model", "ratio")
    if not isinstance(target, int) or not 1 <= target <= 100:
        raise ProtocolError(f"{path}: hpa_target: must be a whole percentage in [1, 100]")
    if not isinstance(lead, int) or not 1 <= lead <= 60:
        raise ProtocolError(f"{path}: lead_minutes: must be whole minutes in [1, 60]")
    if error_model not in ERROR_MODELS:
        raise ProtocolError(f"{path}: error_model: must be one of {', '.join(ERROR_MODELS)}")
    if coverage == "from-target":
        # not a tuned number: the HPA's own target as the share of windows covered
        coverage = coverage_from_target(target)
    if not isinstance(coverage, int | float) or not 0 < coverage < 1:
        raise ProtocolError(f'{path}: coverage: must be in (0, 1) or "from-target"')
    return Params(
        tuned_on=tuple(tuned_on),
        hpa_target=target,
        lead_minutes=lead,
        coverage=float(coverage),
        error_model=error_model,
    )


def load(path: Path) -> list[tuple[datetime, int]]:
    """The series, one row per minute; missing minutes are filled with zero requests."""
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


def cpu_seconds_per_request(trace: Sequence[tuple[datetime, int]]) -> float:
    """The workload model's cost of a request (module docstring)."""
    peak = max(count for _, count in trace)
    return REFERENCE_PEAK_CORES * 60 / max(peak, 1)


def _fmt(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _pod(name: str, created: datetime, ready: bool) -> Pod:
    ready_at = created + STARTUP
    if not ready:
        status: PodStatus = {"phase": "Pending"}
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
    hpa_target: int,
    cpu_seconds: float,
    predictive: Params | None = None,
) -> dict[str, Any]:
    """One replay (module docstring); ``predictive`` adds the forecast's proposal through the
    same max-of-proposals rule as ``replica_decision.decide_replicas``."""
    start = trace[0][0] - timedelta(hours=1)
    pods: list[tuple[str, datetime]] = [("p0", start)]
    objects: dict[tuple[str, bool], Pod] = {}
    serial = 1
    history: ScalingHistory | None = None
    demand = (
        DemandHistory(coverage=predictive.coverage, error_model=predictive.error_model)
        if predictive
        else None
    )
    lead = timedelta(minutes=predictive.lead_minutes if predictive else 5)
    overloaded = replica_minutes = peak = predicted_scale_ups = 0
    for now, requests in trace:
        cores = requests / 60.0 * cpu_seconds
        states = [(name, now >= created + STARTUP, created) for name, created in pods]
        current_objects: list[Pod] = []
        for name, ready, created in states:
            key = (name, ready)
            if key not in objects:
                objects[key] = _pod(name, created, ready)
            current_objects.append(objects[key])
        ready_names = [name for name, ready, _ in states if ready]
        current = len(pods)
        replica_minutes += current
        peak = max(peak, current)
        per_pod = cores / max(len(ready_names), 1)
        if per_pod * 100 > OVERLOAD_PERCENT:
            overloaded += 1
        milli = math.ceil(per_pod * 1000)
        metric = PodMetric(value=milli, timestamp=now, window=WINDOW)
        metrics = dict.fromkeys(ready_names, metric)
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
                pods=current_objects,
                metrics=metrics,
                cpu_initialization_period=timedelta(minutes=5),
                initial_readiness_delay=timedelta(seconds=30),
                now=now,
            )
            proposal = reactive = result.replicas
            if demand is not None:
                demand.record(now, result.utilization * len(ready_names) / hpa_target)
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
            # upstream's ReplicaSet deletes not-ready and younger pods first: the tail
            for name, _ in pods[desired:]:
                objects.pop((name, False), None)
                objects.pop((name, True), None)
            pods = pods[:desired]
    return {
        "hpa_target": hpa_target,
        "overloaded_minutes": overloaded,
        "replica_minutes": replica_minutes,
        "peak_replicas": peak,
        "minutes": len(trace),
        "minutes_with_a_predicted_scale_up": predicted_scale_ups,
    }


def frontier(points: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The points no other point beats (fewer or equal replica-minutes *and* overloaded
    minutes, one of them strictly), by replica-minutes."""
    ordered = sorted(points, key=lambda p: (p["replica_minutes"], p["overloaded_minutes"]))
    kept: list[Mapping[str, Any]] = []
    for point in ordered:
        if not kept or point["overloaded_minutes"] < kept[-1]["overloaded_minutes"]:
            kept.append(point)
    return kept


def interpolate(front: Sequence[Mapping[str, Any]], replica_minutes: float) -> float | None:
    """The frontier's overloaded minutes at ``replica_minutes`` (linear between its two
    neighbours); None outside its range."""
    for low, high in itertools.pairwise(front):
        x0, x1 = low["replica_minutes"], high["replica_minutes"]
        if x0 <= replica_minutes <= x1:
            y0, y1 = low["overloaded_minutes"], high["overloaded_minutes"]
            share = (replica_minutes - x0) / (x1 - x0) if x1 > x0 else 0.0
            return float(y0 + (y1 - y0) * share)
    if len(front) == 1 and front[0]["replica_minutes"] == replica_minutes:
        return float(front[0]["overloaded_minutes"])
    return None


def equivalent_target(front: Sequence[Mapping[str, Any]], replica_minutes: float) -> float | None:
    """The reactive target (interpolated) that spends ``replica_minutes``."""
    for low, high in itertools.pairwise(front):
        x0, x1 = low["replica_minutes"], high["replica_minutes"]
        if x0 <= replica_minutes <= x1 and x1 > x0:
            share = (replica_minutes - x0) / (x1 - x0)
            return float(low["hpa_target"] + (high["hpa_target"] - low["hpa_target"]) * share)
    return None


def evaluate(
    name: str,
    role: str,
    trace: Sequence[tuple[datetime, int]],
    *,
    params: Params,
    targets: Sequence[int],
    pool: Executor,
    known: Mapping[int, dict[str, Any]] | None = None,
) -> Callable[[], dict[str, Any]]:
    """Start the series' replays on ``pool``; the returned call waits and gathers them.
    ``known``: reactive replays of this series already run, by target (they do not depend on
    the parameters)."""
    cpu = cpu_seconds_per_request(trace)
    sweep: list[Future[dict[str, Any]]] = []
    for target in targets:
        if known is not None and target in known:
            done: Future[dict[str, Any]] = Future()
            done.set_result(known[target])
            sweep.append(done)
        else:
            sweep.append(pool.submit(simulate, trace, hpa_target=target, cpu_seconds=cpu))
    predicted = pool.submit(
        simulate, trace, hpa_target=params.hpa_target, cpu_seconds=cpu, predictive=params
    )

    def gather() -> dict[str, Any]:
        points = [f.result() for f in sweep]
        front = frontier(points)
        point = predicted.result()
        at = interpolate(front, point["replica_minutes"])
        reduction = None if at is None or at == 0 else 1 - point["overloaded_minutes"] / at
        return {
            "series": name,
            "role": role,
            "minutes": len(trace),
            "cpu_ms_per_request": round(cpu * 1000, 4),
            "reactive_sweep": points,
            "frontier_targets": [p["hpa_target"] for p in front],
            "predictive": point,
            "frontier_overloaded_at_predictive_replica_minutes": at,
            "reactive_target_with_the_same_replica_minutes": equivalent_target(
                front, point["replica_minutes"]
            ),
            "reduction_vs_frontier": reduction,
            "goal_met": reduction is not None and reduction >= GOAL_REDUCTION,
        }

    return gather


def svg(results: Sequence[Mapping[str, Any]]) -> str:
    """One panel per series: the reactive sweep (frontier drawn as a line, each point labelled
    with its target) and the predictive point. Hand-written SVG, no dependency."""
    width, height, pad = 420, 320, 56
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width * len(results)}" '
        f'height="{height}" font-family="sans-serif" font-size="11">',
        f'<rect width="{width * len(results)}" height="{height}" fill="white"/>',
    ]
    for index, result in enumerate(results):
        left = index * width
        sweep = result["reactive_sweep"]
        point = result["predictive"]
        xs = [p["replica_minutes"] for p in [*sweep, point]]
        ys = [p["overloaded_minutes"] for p in [*sweep, point]]
        x_low, x_high = min(xs), max(xs)
        y_high = max(ys) or 1

        def at(
            p: Mapping[str, Any],
            *,
            x_low: float = x_low,
            x_high: float = x_high,
            y_high: float = y_high,
            left: int = left,
        ) -> tuple[float, float]:
            span = (x_high - x_low) or 1
            x = left + pad + (p["replica_minutes"] - x_low) / span * (width - 2 * pad)
            y = height - pad - p["overloaded_minutes"] / y_high * (height - 2 * pad)
            return round(x, 1), round(y, 1)

        title = f"{result['series']} ({result['role']})"
        parts.append(
            f'<text x="{left + width / 2}" y="18" text-anchor="middle" '
            f'font-weight="bold">{title}</text>'
        )
        parts.append(
            f'<line x1="{left + pad}" y1="{height - pad}" x2="{left + width - pad / 2}" '
            f'y2="{height - pad}" stroke="black"/>'
        )
        parts.append(
            f'<line x1="{left + pad}" y1="{pad / 2}" x2="{left + pad}" '
            f'y2="{height - pad}" stroke="black"/>'
        )
        parts.append(
            f'<text x="{left + width / 2}" y="{height - 14}" text-anchor="middle">'
            f"replica-minutes ({x_low:,} … {x_high:,})</text>"
        )
        parts.append(
            f'<text x="{left + 14}" y="{height / 2}" text-anchor="middle" '
            f'transform="rotate(-90 {left + 14} {height / 2})">'
            f"overloaded minutes (0 … {y_high:,})</text>"
        )
        front = {p["hpa_target"] for p in sweep if p["hpa_target"] in result["frontier_targets"]}
        line = " ".join(f"{x},{y}" for x, y in (at(p) for p in sweep if p["hpa_target"] in front))
        parts.append(f'<polyline points="{line}" fill="none" stroke="#1f77b4" stroke-width="2"/>')
        for p in sweep:
            x, y = at(p)
            parts.append(f'<circle cx="{x}" cy="{y}" r="3" fill="#1f77b4"/>')
            parts.append(f'<text x="{x + 4}" y="{y - 4}" fill="#1f77b4">{p["hpa_target"]}%</text>')
        x, y = at(point)
        parts.append(f'<rect x="{x - 4}" y="{y - 4}" width="8" height="8" fill="#d62728"/>')
        parts.append(f'<text x="{x + 6}" y="{y + 12}" fill="#d62728">predictive</text>')
    parts.append(
        f'<text x="8" y="{height - 2}" fill="#555">blue: reactive HPA, target swept '
        "(line: frontier); red: predictive HPA, one parameter set</text>"
    )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _named(text: str) -> tuple[str, Path]:
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"expected NAME=PATH, got {text!r}")
    return name, Path(path)


def _table(result: Mapping[str, Any]) -> str:
    lines = [
        f"### {result['series']} ({result['role']})",
        "",
        "| policy | HPA target | overloaded minutes | replica-minutes | peak replicas |",
        "|---|---|---|---|---|",
    ]
    front = set(result["frontier_targets"])
    for p in result["reactive_sweep"]:
        mark = " (frontier)" if p["hpa_target"] in front else ""
        lines.append(
            f"| reactive{mark} | {p['hpa_target']} % | {p['overloaded_minutes']:,} | "
            f"{p['replica_minutes']:,} | {p['peak_replicas']} |"
        )
    p = result["predictive"]
    lines.append(
        f"| **predictive** | {p['hpa_target']} % | **{p['overloaded_minutes']:,}** | "
        f"{p['replica_minutes']:,} | {p['peak_replicas']} |"
    )
    at = result["frontier_overloaded_at_predictive_replica_minutes"]
    reduction = result["reduction_vs_frontier"]
    target = result["reactive_target_with_the_same_replica_minutes"]
    lines.append("")
    lines.append(
        f"frontier at the predictive replica-minutes: "
        f"{'outside the sweep' if at is None else f'{at:,.0f} overloaded minutes'}"
        f"{'' if target is None else f' (reactive target {target:.1f} %)'}; "
        f"reduction {'n/a' if reduction is None else f'{reduction:+.1%}'} "
        f"(goal ≥ {GOAL_REDUCTION:.0%}: {'met' if result['goal_met'] else 'not met'})"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0], allow_abbrev=False)
    parser.add_argument("--params", type=Path, default=PARAMS)
    parser.add_argument("--tuning", type=_named, default=TUNING, metavar="NAME=PATH")
    parser.add_argument("--validation", type=_named, action="append", metavar="NAME=PATH")
    parser.add_argument("--targets", default=",".join(str(t) for t in TARGETS))
    parser.add_argument(
        "--sweep-coverage",
        default="",
        metavar="Q,Q,…",
        help="tuning aid: the predictive HPA at each coverage, tuning series only",
    )
    parser.add_argument(
        "--tuning-only",
        action="store_true",
        help="replay the tuning series alone: no validation figure while choosing",
    )
    parser.add_argument(
        "--reuse-sweep",
        type=Path,
        metavar="JSON",
        help="take the reactive replays from an earlier output of this bench (same series)",
    )
    parser.add_argument("--jobs", type=int, default=1, help="replays run in parallel")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--svg", type=Path)
    args = parser.parse_args(argv)
    tuning_name, tuning_path = args.tuning
    validation = list(args.validation or VALIDATION)
    try:
        targets = [int(t) for t in args.targets.split(",") if t]
        coverages = [float(q) for q in args.sweep_coverage.split(",") if q]
    except ValueError:
        print("error: --targets and --sweep-coverage take comma-separated numbers", file=sys.stderr)
        return 2
    if tuning_name in {name for name, _ in validation}:
        print(f"error: --tuning: {tuning_name} is also a validation series", file=sys.stderr)
        return 2
    try:
        params = load_params(
            args.params, tuning=[tuning_name], validation=[name for name, _ in validation]
        )
    except ProtocolError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    known: dict[str, dict[int, dict[str, Any]]] = {}
    if args.reuse_sweep is not None:
        earlier = json.loads(args.reuse_sweep.read_text(encoding="utf-8"))
        for series in earlier.get("series", []):
            known[series["series"]] = {p["hpa_target"]: p for p in series["reactive_sweep"]}
    started = time.perf_counter()
    tuning_trace = load(tuning_path)
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        pending = [
            evaluate(
                tuning_name,
                "tuning",
                tuning_trace,
                params=params,
                targets=targets,
                pool=pool,
                known=known.get(tuning_name),
            )
        ]
        cpu = cpu_seconds_per_request(tuning_trace)
        trials = [
            (
                coverage,
                pool.submit(
                    simulate,
                    tuning_trace,
                    hpa_target=params.hpa_target,
                    cpu_seconds=cpu,
                    predictive=replace(params, coverage=coverage),
                ),
            )
            for coverage in coverages
        ]
        # the tuning aid looks at the tuning series alone: no validation figure while choosing
        for name, path in [] if coverages or args.tuning_only else validation:
            pending.append(
                evaluate(
                    name,
                    "validation",
                    load(path),
                    params=params,
                    targets=targets,
                    pool=pool,
                    known=known.get(name),
                )
            )
        results = [gather() for gather in pending]
        tuning_aid = []
        front = frontier(results[0]["reactive_sweep"])
        for coverage, future in trials:
            point = future.result()
            at = interpolate(front, point["replica_minutes"])
            tuning_aid.append({"coverage": coverage, **point, "frontier_overloaded_at": at})
            print(
                f"coverage {coverage}: {point['overloaded_minutes']} overloaded, "
                f"{point['replica_minutes']} replica-minutes, frontier there {at}"
            )
    document: dict[str, Any] = {
        "params": {**params.__dict__, "tuned_on": list(params.tuned_on), "file": str(args.params)},
        "model": {
            "overload_above_percent": OVERLOAD_PERCENT,
            "pod_request_cores": 1,
            "min_replicas": MIN_REPLICAS,
            "max_replicas": MAX_REPLICAS,
            "startup_minutes": STARTUP.total_seconds() / 60,
            "sync_period_seconds": 60,
            "reference_peak_cores": round(REFERENCE_PEAK_CORES, 4),
        },
        "series": results,
        "tuning_aid": tuning_aid,
        "seconds": round(time.perf_counter() - started, 1),
        "python": sys.version.split()[0],
        "machine": platform.machine(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    if args.svg is not None:
        args.svg.write_text(svg(results), encoding="utf-8")
    for result in results:
        print(_table(result))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
