"""Upstream VPA's tuning frontier on a real trace, and where a policy sits on it (issue 31).

A policy is better than upstream only if it lies beyond the *frontier*: the best trade-offs
upstream's recommender reaches when its own flags are swept. This bench replays the Bitbrains
month (``bench/vpa_trace_replay.py``, replay protocol v1) under many settings of upstream's
recommender flags (``--target-memory-percentile``, ``--recommendation-margin-fraction``,
``--oom-bump-up-ratio``, the half-lives, ...) and under the adaptive policy, and draws two
frontiers: OOM samples against memory slack, throttled samples against CPU slack.

The protocol (``docs/vpa-recommendation-policy.md``, "The frontier"):

1. ``sweep SPEC.json``: every point of the sweep file on its ``tuning`` workloads, which must
   lie in the tuning part vm-001 ... vm-250 (a file naming any validation workload is refused,
   so the split cannot be crossed by accident). Writes the totals and the frontiers as JSON.
2. ``validate TUNING.json``: the points chosen on the tuning part (the memory and CPU frontiers,
   upstream's defaults and every adaptive point) replayed once on the validation part
   vm-251 ... vm-500, which no choice looked at.
3. ``report TUNING.json [VALIDATION.json]``: the tables side by side, the goal check and an SVG.

Usage (from the repository root)::

    .venv/bin/python bench/vpa_frontier.py sweep bench/vpa_frontier_sweep.json \\
        --out bench/results/vpa_frontier_tuning.json --jobs 2
    .venv/bin/python bench/vpa_frontier.py validate bench/results/vpa_frontier_tuning.json \\
        --out bench/results/vpa_frontier_validation.json --jobs 2
    .venv/bin/python bench/vpa_frontier.py report bench/results/vpa_frontier_tuning.json \\
        bench/results/vpa_frontier_validation.json --svg docs/vpa-frontier.svg
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.vpa_trace_replay import (
    DEFAULT_TRACE,
    PolicyTotals,
    model_config_from_flags,
    policy_from_params,
    read_workloads,
    replay_workload,
    workload_range,
)

TUNING_PART = frozenset(f"vm-{n:03d}" for n in range(1, 251))
"""The workloads every parameter is chosen on (issue 31: vm-001 ... vm-250 of 2013-07)."""
VALIDATION_PART = frozenset(f"vm-{n:03d}" for n in range(251, 501))
"""The workloads results are reported on and nothing is chosen on (vm-251 ... vm-500)."""
UPSTREAM = "upstream"
ADAPTIVE = "adaptive"
DEFAULT_POINT = "upstream-defaults"


class SweepError(ValueError):
    """A sweep file or results file that cannot be used; the message names the field."""


@dataclass(frozen=True)
class Point:
    """One setting: upstream's recommender with ``flags``, or the adaptive policy with
    ``params`` (``AdaptivePolicyConfig`` overrides as ``NAME=VALUE``) and upstream ``flags``."""

    name: str
    kind: str
    flags: dict[str, str] = field(default_factory=dict)
    params: tuple[str, ...] = ()


@dataclass(frozen=True)
class Sweep:
    tuning: frozenset[str]
    tuning_text: str
    points: tuple[Point, ...]


def _workloads(text: str, *, field_name: str) -> frozenset[str]:
    names = workload_range(text)
    if names is None:
        raise SweepError(f"{field_name}: 'all' would include the validation part; name the VMs")
    return frozenset(names)


def check_tuning_set(names: Iterable[str], *, field_name: str = "tuning") -> None:
    """Refuse a tuning set that names any workload outside the tuning part."""
    crossing = sorted(set(names) - TUNING_PART)
    if crossing:
        shown = ", ".join(crossing[:5]) + (", ..." if len(crossing) > 5 else "")
        raise SweepError(
            f"{field_name}: names {len(crossing)} workload(s) outside the tuning part "
            f"vm-001 ... vm-250 ({shown}); validation workloads are never tuned on"
        )


def check_validation_set(names: Iterable[str]) -> None:
    outside = sorted(set(names) - VALIDATION_PART)
    if outside:
        raise SweepError(
            f"--workloads: {', '.join(outside[:5])} not in the validation part vm-251 ... vm-500"
        )


def parse_sweep(data: object) -> Sweep:
    """A sweep file's content: ``{"tuning": "vm-001-vm-250", "points": [{"name": ...,
    "kind": "upstream"|"adaptive", "flags": {"--flag": value}, "params": ["NAME=VALUE"]}]}``."""
    if not isinstance(data, dict):
        raise SweepError("sweep file: want a JSON object")
    unknown = sorted(set(data) - {"tuning", "points", "comment"})
    if unknown:
        raise SweepError(f"sweep file: unknown field(s) {unknown}")
    tuning_text = data.get("tuning")
    if not isinstance(tuning_text, str) or not tuning_text.strip():
        raise SweepError("tuning: want the tuning workloads, e.g. 'vm-001-vm-250'")
    tuning = _workloads(tuning_text, field_name="tuning")
    check_tuning_set(tuning)
    raw_points = data.get("points")
    if not isinstance(raw_points, list) or not raw_points:
        raise SweepError("points: want a non-empty list")
    points: list[Point] = []
    for index, raw in enumerate(raw_points):
        where = f"points[{index}]"
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
            raise SweepError(f"{where}: want an object with a 'name'")
        kind = raw.get("kind", UPSTREAM)
        if kind not in (UPSTREAM, ADAPTIVE):
            raise SweepError(f"{where}.kind: want 'upstream' or 'adaptive', got {kind!r}")
        flags = {str(k): str(v) for k, v in dict(raw.get("flags", {})).items()}
        params = tuple(str(p) for p in raw.get("params", []))
        if params and kind != ADAPTIVE:
            raise SweepError(f"{where}.params: only for kind 'adaptive'")
        try:
            model_config_from_flags(flags)
            policy_from_params(params)
        except ValueError as exc:
            raise SweepError(f"{where} ({raw['name']}): {exc}") from None
        points.append(Point(raw["name"], kind, flags, params))
    names = [p.name for p in points]
    if len(set(names)) != len(names):
        raise SweepError("points: names must be unique")
    return Sweep(tuning, tuning_text, tuple(points))


def load_sweep(path: Path) -> Sweep:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise SweepError(f"sweep file {path}: {exc}") from None
    return parse_sweep(data)


# -- replaying --------------------------------------------------------------------------------


def _replay_points(
    trace: str, workloads: list[str], points: list[Point]
) -> dict[str, dict[str, Any]]:
    """Worker: every point over the workloads (the trace read once)."""
    configs = [(p, model_config_from_flags(p.flags)) for p in points]
    policies = {p.name: policy_from_params(p.params) for p in points if p.kind == ADAPTIVE}
    totals = {p.name: PolicyTotals() for p in points}
    seconds = {p.name: 0.0 for p in points}
    for workload, samples in read_workloads(Path(trace), only=set(workloads)):
        for point, config in configs:
            started = time.process_time()
            outcome = replay_workload(
                workload, samples, config=config, policy=policies.get(point.name)
            )
            totals[point.name].add(outcome.recommender)
            seconds[point.name] += time.process_time() - started
    return {
        name: {"totals": asdict(value), "cpu_seconds": seconds[name]}
        for name, value in totals.items()
    }


def replay_points(
    trace: Path, workloads: Iterable[str], points: Sequence[Point], *, jobs: int = 1
) -> dict[str, dict[str, Any]]:
    """Every point over the workloads, the points split round-robin over ``jobs`` processes."""
    names = sorted(workloads)
    chunks = [list(points[i::jobs]) for i in range(max(1, jobs))]
    chunks = [c for c in chunks if c]
    if len(chunks) == 1:
        return _replay_points(str(trace), names, chunks[0])
    results: dict[str, dict[str, Any]] = {}
    with ProcessPoolExecutor(len(chunks)) as pool:
        for part in pool.map(
            _replay_points, [str(trace)] * len(chunks), [names] * len(chunks), chunks
        ):
            results.update(part)
    return {p.name: results[p.name] for p in points}


# -- frontiers --------------------------------------------------------------------------------

MEMORY_AXES = ("memory_slack_gib_h", "oom_samples")
CPU_AXES = ("cpu_slack_core_h", "throttled_samples")


def frontier(points: dict[str, PolicyTotals], axes: tuple[str, str]) -> list[str]:
    """The Pareto-best points (less x and fewer y), by increasing x: a point is on it when no
    other has at most its x and at most its y, one of them strictly less."""
    x, y = axes
    ordered = sorted(points, key=lambda n: (getattr(points[n], x), getattr(points[n], y), n))
    best: list[str] = []
    lowest = math.inf
    for name in ordered:
        value = getattr(points[name], y)
        if value < lowest:
            best.append(name)
            lowest = value
    return best


@dataclass(frozen=True)
class GoalCheck:
    """The policy against the best upstream setting with at most its memory slack."""

    policy: str
    reference: str | None
    oom_ratio: float | None
    interpolated_oom: float | None
    met: bool
    reasons: tuple[str, ...]


def interpolate(points: dict[str, PolicyTotals], names: list[str], x: float) -> float | None:
    """The frontier's y at ``x``, linear between its neighbours (None outside it)."""
    xs = [points[n].memory_slack_gib_h for n in names]
    ys = [float(points[n].oom_samples) for n in names]
    for i in range(len(xs) - 1):
        if xs[i] <= x <= xs[i + 1]:
            span = xs[i + 1] - xs[i]
            return ys[i] if span == 0 else ys[i] + (ys[i + 1] - ys[i]) * (x - xs[i]) / span
    return None


def goal_check(policy: str, points: dict[str, PolicyTotals], upstream: list[str]) -> GoalCheck:
    """Issue 31's goal: at equal memory slack, at most half the OOM samples of the best
    upstream setting on the frontier, its throttled samples and updates no worse. The best
    upstream setting "at equal slack" is the frontier point with the most slack not above the
    policy's (upstream cannot do better without more memory)."""
    ours = points[policy]
    front = frontier({n: points[n] for n in upstream}, MEMORY_AXES)
    within = [n for n in front if points[n].memory_slack_gib_h <= ours.memory_slack_gib_h]
    interpolated = interpolate(points, front, ours.memory_slack_gib_h)
    if not within:
        return GoalCheck(policy, None, None, interpolated, False, ("less slack than any",))
    ref = points[within[-1]]
    reasons = []
    ratio = ours.oom_samples / ref.oom_samples if ref.oom_samples else math.inf
    if ours.oom_samples > 0.5 * ref.oom_samples:
        reasons.append(f"OOM samples {ours.oom_samples} > half of {ref.oom_samples}")
    if ours.throttled_samples > ref.throttled_samples:
        reasons.append(f"throttled {ours.throttled_samples} > {ref.throttled_samples}")
    if ours.updates > ref.updates:
        reasons.append(f"updates {ours.updates} > {ref.updates}")
    return GoalCheck(policy, within[-1], ratio, interpolated, not reasons, tuple(reasons))


def _totals_of(results: dict[str, Any]) -> dict[str, PolicyTotals]:
    return {name: PolicyTotals(**value["totals"]) for name, value in results["points"].items()}


def _kinds(results: dict[str, Any]) -> dict[str, str]:
    return {p["name"]: p["kind"] for p in results["spec"]}


# -- reporting --------------------------------------------------------------------------------


def _flags_text(point: dict[str, Any]) -> str:
    parts = [f"{k} {v}" for k, v in point.get("flags", {}).items()]
    parts += list(point.get("params", []))
    return ", ".join(f"`{p}`" for p in parts) or "defaults"


def markdown_report(tuning: dict[str, Any], validation: dict[str, Any] | None) -> str:
    t_points = _totals_of(tuning)
    v_points = _totals_of(validation) if validation else {}
    kinds = _kinds(tuning)
    upstream = [n for n in t_points if kinds[n] == UPSTREAM]
    mem_front = set(frontier({n: t_points[n] for n in upstream}, MEMORY_AXES))
    cpu_front = set(frontier({n: t_points[n] for n in upstream}, CPU_AXES))
    spec = {p["name"]: p for p in tuning["spec"]}
    lines = [
        "| point | settings | on frontier (tuning) | OOM samples | memory slack (GiB-h) "
        "| throttled | CPU slack (core-h) | updates |",
        "|---|---|---|---|---|---|---|---|",
    ]

    def cell(name: str, attribute: str, fmt: str) -> str:
        a = format(getattr(t_points[name], attribute), fmt)
        if name in v_points:
            return f"{a} / {format(getattr(v_points[name], attribute), fmt)}"
        return a

    order = sorted(t_points, key=lambda n: t_points[n].memory_slack_gib_h)
    for name in order:
        on = "/".join(m for m, s in (("memory", mem_front), ("CPU", cpu_front)) if name in s)
        lines.append(
            f"| {name} | {_flags_text(spec[name])} | {on or '—'} | "
            f"{cell(name, 'oom_samples', ',')} | {cell(name, 'memory_slack_gib_h', ',.0f')} | "
            f"{cell(name, 'throttled_samples', ',')} | {cell(name, 'cpu_slack_core_h', ',.0f')} | "
            f"{cell(name, 'updates', ',')} |"
        )
    lines.append("")
    lines.append(
        "| part | policy | best upstream setting at ≤ its memory slack | OOM ratio "
        "| frontier's OOM samples at its slack (linear) | goal met? |"
    )
    lines.append("|---|---|---|---|---|---|")
    for part, points in (("tuning", t_points), ("validation", v_points)):
        ups = [n for n in upstream if n in points]
        for name in points:
            if kinds[name] != ADAPTIVE:
                continue
            check = goal_check(name, points, ups)
            ratio = f"{check.oom_ratio:.2f}" if check.oom_ratio is not None else "—"
            interp = f"{check.interpolated_oom:,.0f}" if check.interpolated_oom else "—"
            verdict = "yes" if check.met else "no: " + "; ".join(check.reasons)
            lines.append(
                f"| {part} | {name} | {check.reference or '—'} | {ratio} | {interp} | {verdict} |"
            )
    return "\n".join(lines)


def _panel(
    points: dict[str, PolicyTotals],
    kinds: dict[str, str],
    axes: tuple[str, str],
    *,
    x0: float,
    y0: float,
    width: float,
    height: float,
    title: str,
    labels: tuple[str, str],
) -> list[str]:
    """One scatter panel: upstream points grey, its frontier a line, defaults and adaptive
    points labelled; y on a log scale (OOM and throttled counts span decades)."""
    xa, ya = axes
    xs = [float(getattr(p, xa)) for p in points.values()]
    ys = [max(1.0, float(getattr(p, ya))) for p in points.values()]
    xmin, xmax = min(xs), max(xs)
    pad = (xmax - xmin) * 0.05 or 1.0
    xmin, xmax = xmin - pad, xmax + pad
    lmin, lmax = math.log10(min(ys)) - 0.1, math.log10(max(ys)) + 0.1

    def px(value: float) -> float:
        return x0 + 50 + (value - xmin) / (xmax - xmin) * (width - 60)

    def py(value: float) -> float:
        return (
            y0 + height - 40 - (math.log10(max(1.0, value)) - lmin) / (lmax - lmin) * (height - 70)
        )

    out = [
        f'<rect x="{x0 + 50}" y="{y0 + 30}" width="{width - 60}" height="{height - 70}" '
        'fill="none" stroke="#999"/>',
        f'<text x="{x0 + width / 2}" y="{y0 + 20}" text-anchor="middle" '
        f'font-weight="bold">{escape(title)}</text>',
        f'<text x="{x0 + width / 2}" y="{y0 + height - 8}" text-anchor="middle">'
        f"{escape(labels[0])}</text>",
        f'<text x="{x0 + 12}" y="{y0 + height / 2}" text-anchor="middle" '
        f'transform="rotate(-90 {x0 + 12} {y0 + height / 2})">{escape(labels[1])} (log)</text>',
    ]
    for tick in range(math.ceil(lmin), math.floor(lmax) + 1):
        out.append(
            f'<text x="{x0 + 46}" y="{py(10.0**tick) + 4:.1f}" text-anchor="end" '
            f'font-size="10">{10**tick:,}</text>'
        )
    for i in range(5):
        value = xmin + (xmax - xmin) * (i + 0.5) / 5
        out.append(
            f'<text x="{px(value):.1f}" y="{y0 + height - 26}" text-anchor="middle" '
            f'font-size="10">{value:,.0f}</text>'
        )
    upstream = {n: p for n, p in points.items() if kinds.get(n) == UPSTREAM}
    front = frontier(upstream, axes)
    path = " ".join(
        f"{px(getattr(points[n], xa)):.1f},{py(getattr(points[n], ya)):.1f}" for n in front
    )
    out.append(f'<polyline points="{path}" fill="none" stroke="#1f77b4" stroke-width="1.5"/>')
    for name, p in points.items():
        cx, cy = px(getattr(p, xa)), py(getattr(p, ya))
        if kinds.get(name) == ADAPTIVE:
            out.append(
                f'<rect x="{cx - 4:.1f}" y="{cy - 4:.1f}" width="8" height="8" fill="#d62728"/>'
            )
            out.append(
                f'<text x="{cx + 6:.1f}" y="{cy - 6:.1f}" font-size="10" fill="#d62728">'
                f"{escape(name)}</text>"
            )
        elif name == DEFAULT_POINT:
            out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="5" fill="#2ca02c"/>')
            out.append(
                f'<text x="{cx + 6:.1f}" y="{cy + 12:.1f}" font-size="10" fill="#2ca02c">'
                "upstream defaults</text>"
            )
        else:
            color = "#1f77b4" if name in front else "#aaa"
            out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="3" fill="{color}"/>')
    return out


def svg_chart(tuning: dict[str, Any], validation: dict[str, Any] | None) -> str:
    """Rows: tuning, validation; columns: OOM vs memory slack, throttled vs CPU slack."""
    kinds = _kinds(tuning)
    parts = [("tuning", _totals_of(tuning), tuning["workloads"])]
    if validation:
        parts.append(("validation", _totals_of(validation), validation["workloads"]))
    width, height = 460, 320
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * width}" '
        f'height="{len(parts) * height + 30}" font-family="sans-serif" font-size="12">',
        '<rect width="100%" height="100%" fill="white"/>',
        '<text x="10" y="18" font-size="11">Upstream VPA frontier (blue line: Pareto-best '
        "upstream flag settings; grey: dominated; green: upstream defaults; red: adaptive). "
        "Replay protocol v1, bitbrains-rnd 2013-07.</text>",
    ]
    for row, (part, points, count) in enumerate(parts):
        y0 = 30 + row * height
        out += _panel(
            points,
            kinds,
            MEMORY_AXES,
            x0=0,
            y0=y0,
            width=width,
            height=height,
            title=f"{part} ({count} VMs): OOM samples vs memory slack",
            labels=("memory slack (GiB-h)", "OOM samples"),
        )
        out += _panel(
            points,
            kinds,
            CPU_AXES,
            x0=width,
            y0=y0,
            width=width,
            height=height,
            title=f"{part} ({count} VMs): throttled vs CPU slack",
            labels=("CPU slack (core-h)", "throttled samples"),
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"


# -- main -------------------------------------------------------------------------------------


def _chosen(results: dict[str, Any]) -> set[str]:
    """The points a tuning result chooses: both frontiers, upstream's defaults, every
    adaptive point."""
    chosen = set(results["memory_frontier"]) | set(results["cpu_frontier"]) | {DEFAULT_POINT}
    return chosen | {p["name"] for p in results["spec"] if p["kind"] == ADAPTIVE}


def _write(path: Path | None, payload: dict[str, Any]) -> None:
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(payload, indent=2) + "\n")


def _run(
    trace: Path,
    workloads: frozenset[str],
    points: Sequence[Point],
    *,
    jobs: int,
    part: str,
    spec: list[dict[str, Any]],
    tuning_text: str,
) -> dict[str, Any]:
    started = time.time()
    results = replay_points(trace, workloads, points, jobs=jobs)
    totals = {n: PolicyTotals(**r["totals"]) for n, r in results.items()}
    upstream = {p.name: totals[p.name] for p in points if p.kind == UPSTREAM}
    return {
        "part": part,
        "trace": trace.name,
        "tuning": tuning_text,
        "workloads": len(workloads),
        "workload_names": sorted(workloads),
        "wall_seconds": time.time() - started,
        "spec": spec,
        "points": results,
        "memory_frontier": frontier(upstream, MEMORY_AXES),
        "cpu_frontier": frontier(upstream, CPU_AXES),
        "totals_check": {n: t.oom_samples for n, t in totals.items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0], allow_abbrev=False)
    commands = parser.add_subparsers(dest="command", required=True)
    sweep = commands.add_parser("sweep", help="replay a sweep file's points on its tuning VMs")
    sweep.add_argument("spec", type=Path)
    sweep.add_argument(
        "--workloads", help="tuning workloads instead of the file's (within vm-001 ... vm-250)"
    )
    sweep.add_argument(
        "--frontier-of",
        type=Path,
        help="replay only the points on this tuning result's frontiers (+ defaults, adaptive)",
    )
    validate = commands.add_parser("validate", help="replay the chosen points on validation")
    validate.add_argument("tuning_results", type=Path)
    validate.add_argument(
        "--workloads", default="vm-251-vm-500", help="a subset of the validation part"
    )
    for command in (sweep, validate):
        command.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
        command.add_argument("--out", type=Path)
        command.add_argument("--jobs", type=int, default=1)
    report = commands.add_parser("report", help="tables, goal check and SVG from results")
    report.add_argument("tuning_results", type=Path)
    report.add_argument("validation_results", type=Path, nargs="?")
    report.add_argument("--svg", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.command == "sweep":
            spec = load_sweep(args.spec)
            if not args.trace.exists():
                parser.error(f"--trace: {args.trace} not found")
            raw = [asdict(p) for p in spec.points]
            points, tuning_set, tuning_text = spec.points, spec.tuning, spec.tuning_text
            if args.workloads is not None:  # e.g. the whole tuning part after a screen
                tuning_set = _workloads(args.workloads, field_name="--workloads")
                check_tuning_set(tuning_set, field_name="--workloads")
                tuning_text = args.workloads
            if args.frontier_of is not None:
                screened = json.loads(args.frontier_of.read_text())
                points = tuple(p for p in points if p.name in _chosen(screened))
            raw = [asdict(p) for p in points]
            result = _run(
                args.trace,
                tuning_set,
                points,
                jobs=args.jobs,
                part="tuning",
                spec=raw,
                tuning_text=tuning_text,
            )
            _write(args.out, result)
            print(markdown_report(result, None))
            return 0
        if args.command == "validate":
            tuning = json.loads(args.tuning_results.read_text())
            check_tuning_set(tuning["workload_names"], field_name="tuning results")
            workloads = _workloads(args.workloads, field_name="--workloads")
            check_validation_set(workloads)
            chosen = _chosen(tuning)
            points = tuple(
                Point(p["name"], p["kind"], p["flags"], tuple(p["params"]))
                for p in tuning["spec"]
                if p["name"] in chosen
            )
            result = _run(
                args.trace,
                workloads,
                points,
                jobs=args.jobs,
                part="validation",
                spec=[asdict(p) for p in points],
                tuning_text=tuning["tuning"],
            )
            _write(args.out, result)
            print(markdown_report(tuning, result))
            return 0
        tuning = json.loads(args.tuning_results.read_text())
        validation = (
            json.loads(args.validation_results.read_text()) if args.validation_results else None
        )
        print(markdown_report(tuning, validation))
        if args.svg is not None:
            args.svg.write_text(svg_chart(tuning, validation))
        return 0
    except SweepError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
