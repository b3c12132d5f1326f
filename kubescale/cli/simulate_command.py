"""``kubescale simulate [SCENARIO]``: run a scenario on the embedded simulated cluster.

Without a SCENARIO the built-in demo (``sim/scenario/examples/demo.yaml``) runs. A scenario
with ``compare: true`` (the demo) runs three times — no autoscaling, the upstream suite as
separate programs, kubescale — and the summary leads with the comparison (``--no-compare``:
once, with kubescale). ``--seed``, ``--duration`` and ``--step`` override the file's values.
Progress goes to stderr — a bar redrawn in place on a terminal, else one line per 10 %
("simulated 6h00m of 1d00h00m (25%)") — unless ``--quiet``; the summary table goes to stdout;
``--report-json``/``--report-html`` write
the full report. ``--from-cluster`` builds the scenario from a live cluster and its Prometheus
history (:mod:`kubescale.cli.simulate_from_cluster`).
``--compare-recommendation-policies`` runs the scenario once per VPA
recommendation policy (its ``vpa-recommender``'s ``recommendation-policy`` set to ``upstream``,
then ``adaptive``), prints both summaries and a table of the two policies' figures, and writes
the reports as ``FILE`` with the policy before the suffix (``report.upstream.json``).
An invalid scenario ends with exit code 2 and every problem on its own line,
``kubescale simulate: <file>: <field path>: <message>``; an object of the scenario that the API
server refuses at start (``objects[1]: cannot create ...``) with exit code 1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any, Final, TextIO

from kubescale.base.coordination import COORDINATION_VALUES, parse_coordination
from kubescale.base.flag_types import positive_duration
from kubescale.base.logs import LOG_LEVELS, configure_logging
from kubescale.cli import simulate_from_cluster
from kubescale.sim.scenario.comparison import VARIANTS, run_comparison
from kubescale.sim.scenario.html_report import render_html
from kubescale.sim.scenario.json_report import write_json_report
from kubescale.sim.scenario.policy_comparison import (
    COMPARED_POLICIES,
    render_policy_comparison,
    with_recommendation_policy,
)
from kubescale.sim.scenario.runner import SimulationError, run_scenario
from kubescale.sim.scenario.scenario_format import Scenario, ScenarioError
from kubescale.sim.scenario.scenario_validation import load_scenario, parse_scenario
from kubescale.sim.scenario.summary_table import format_duration, render_summary

PROG = "kubescale simulate"
_BAR_WIDTH = 30


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid seed {text!r} (want an integer ≥ 0)") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"seed must be ≥ 0, got {value}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "scenario",
        nargs="?",
        type=Path,
        metavar="SCENARIO",
        help="scenario YAML file, or the name of a shipped example (e.g. vpa-updater; "
        "default: the built-in demo)",
    )
    parser.add_argument("--seed", type=_seed, help="override the scenario's seed")
    parser.add_argument(
        "--duration", type=positive_duration, help="override the simulated duration (e.g. 6h)"
    )
    parser.add_argument(
        "--step", type=positive_duration, help="override the simulation step (e.g. 30s)"
    )
    parser.add_argument(
        "--coordination",
        type=parse_coordination,
        metavar="{" + ",".join(COORDINATION_VALUES) + "}",
        help="override the scenario's coordination of the systems (one-brain: kubescale's; "
        "separate: upstream's, each system on its own)",
    )
    parser.add_argument("--report-json", type=Path, metavar="FILE", help="write the JSON report")
    parser.add_argument("--report-html", type=Path, metavar="FILE", help="write the HTML report")
    parser.add_argument(
        "--no-compare",
        action="store_true",
        help="run a scenario with `compare: true` (the demo) once, with kubescale, "
        "instead of three times",
    )
    parser.add_argument(
        "--compare-recommendation-policies",
        action="store_true",
        help="run the scenario with the VPA recommender's upstream and adaptive policies and "
        "compare their figures",
    )
    parser.add_argument(
        "--trace",
        type=Path,
        metavar="FILE",
        help="build the cluster from a usage trace (replay protocol v1 CSV, plain or .xz) "
        "instead of a scenario file: the one-line form of a scenario's `trace` section",
    )
    parser.add_argument(
        "--trace-replicas",
        type=Path,
        metavar="FILE",
        help="with --trace: replica counts per workload and time (timestamp,workload,replicas)",
    )
    parser.add_argument(
        "--trace-limit",
        type=int,
        metavar="N",
        help="with --trace: only the first N workloads (by name)",
    )
    parser.add_argument(
        "--node-group",
        metavar="SPEC",
        help="with --trace: the node group, e.g. "
        "instanceType=m5.2xlarge,cpu=8,memory=32Gi,price=0.384 (also min, max, pods)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress output")
    simulate_from_cluster.add_arguments(parser)
    parser.add_argument(
        "--log-level", choices=LOG_LEVELS, default="warning", help="(default: %(default)s)"
    )


def demo_scenario_path() -> Path:
    """The built-in demo scenario, shipped as package data."""
    return Path(str(resources.files("kubescale.sim.scenario") / "examples" / "demo.yaml"))


class ProgressReporter:
    """Progress of a run on ``stream``: a bar on a terminal, a line per 10 % otherwise."""

    def __init__(self, *, stream: TextIO, duration: float, interactive: bool) -> None:
        self._stream = stream
        self._duration = duration
        self._interactive = interactive
        self._last_decile = 0
        self._last_percent = -1

    def _describe(self, fraction: float) -> str:
        done = format_duration(self._duration * fraction)
        return f"simulated {done} of {format_duration(self._duration)} ({fraction:.0%})"

    def __call__(self, fraction: float) -> None:
        if self._interactive:
            percent = int(fraction * 100)
            if percent == self._last_percent:
                return
            self._last_percent = percent
            filled = int(fraction * _BAR_WIDTH)
            bar = "#" * filled + "-" * (_BAR_WIDTH - filled)
            end = "\n" if fraction >= 1.0 else ""
            self._stream.write(f"\r[{bar}] {self._describe(fraction)}{end}")
            self._stream.flush()
            return
        decile = int(fraction * 10 + 1e-9)
        if decile > self._last_decile:
            self._last_decile = decile
            self._stream.write(self._describe(fraction) + "\n")
            self._stream.flush()


def examples_dir() -> Path:
    """The shipped example scenarios (package data)."""
    return demo_scenario_path().parent


def scenario_path(given: Path | None) -> Path:
    """The scenario file: the demo without one; a bare name without a file of that name (no
    directory, no suffix: ``vpa-updater``) is the shipped example of that name."""
    if given is None:
        return demo_scenario_path()
    if given.exists() or given.suffix or len(given.parts) != 1:
        return given
    return examples_dir() / f"{given}.yaml"


def _output_problem(flag: str, path: Path) -> str | None:
    """Why ``path`` cannot be written after the run (checked before it), or ``None``."""
    parent = path.parent
    if path.is_dir():
        return f"{flag} {path}: is a directory"
    if not parent.is_dir():
        return f"{flag} {path}: directory {parent} does not exist"
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        return f"{flag} {path}: not writable"
    return None


def _policy_path(path: Path, policy: str) -> Path:
    """``report.json`` -> ``report.upstream.json``."""
    return path.with_name(f"{path.stem}.{policy}{path.suffix}")


_NODE_GROUP_KEYS: Final = ("instanceType", "cpu", "memory", "price", "min", "max", "pods")


def trace_document(args: argparse.Namespace) -> dict[str, Any]:
    """The scenario document ``--trace FILE --node-group SPEC ...`` stands for (a ``trace``
    section; ``ValueError`` naming the flag for a malformed ``--node-group``)."""
    if args.node_group is None:
        raise ValueError(
            "--node-group is required with --trace "
            "(e.g. instanceType=m5.2xlarge,cpu=8,memory=32Gi,price=0.384)"
        )
    fields: dict[str, str] = {}
    for part in args.node_group.split(","):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in _NODE_GROUP_KEYS or not value.strip():
            raise ValueError(
                f"--node-group: {part!r} is not KEY=VALUE with KEY one of "
                f"{', '.join(_NODE_GROUP_KEYS)}"
            )
        fields[key] = value.strip()
    group: dict[str, Any] = {
        "allocatable": {k: fields[k] for k in ("cpu", "memory") if k in fields},
    }
    if "instanceType" in fields:
        group["instanceType"] = fields["instanceType"]
    for key, target in (("min", "min"), ("max", "max")):
        if key in fields:
            group[target] = _integer_field(key, fields[key])
    if "pods" in fields:
        group["allocatable"]["pods"] = _integer_field("pods", fields["pods"])
    if "price" in fields:
        try:
            group["pricePerHour"] = float(fields["price"])
        except ValueError:
            raise ValueError(f"--node-group: price {fields['price']!r} is not a number") from None
    section: dict[str, Any] = {"file": str(args.trace), "nodeGroup": group}
    if args.trace_replicas is not None:
        section["replicas"] = str(args.trace_replicas)
    if args.trace_limit is not None:
        section["limit"] = args.trace_limit
    return {"name": f"trace {args.trace.name}", "trace": section}


def _integer_field(key: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"--node-group: {key} {text!r} is not an integer") from None


def run(args: argparse.Namespace) -> int:
    configure_logging(level=args.log_level, fmt="text")
    if getattr(args, "from_cluster", False):
        if args.scenario is not None or getattr(args, "trace", None) is not None:
            sys.stderr.write(
                f"{PROG}: error: give a SCENARIO, --trace or --from-cluster, not two\n"
            )
            return 2
        captured = simulate_from_cluster.capture(args)
        if isinstance(captured, str):
            sys.stderr.write(f"{PROG}: error: {captured}\n")
            return 1
        return _run(args, captured, lambda: load_scenario(captured))
    if getattr(args, "trace", None) is not None:
        if args.scenario is not None:
            sys.stderr.write(f"{PROG}: error: give a SCENARIO or --trace, not both\n")
            return 2
        try:
            document = trace_document(args)
        except ValueError as exc:
            sys.stderr.write(f"{PROG}: error: {exc}\n")
            return 2
        return _run(args, args.trace, lambda: parse_scenario(document, base_dir=Path.cwd()))
    if any(
        getattr(args, flag, None) is not None
        for flag in ("trace_replicas", "trace_limit", "node_group")
    ):
        sys.stderr.write(
            f"{PROG}: error: --trace-replicas, --trace-limit and --node-group need --trace\n"
        )
        return 2
    path = scenario_path(args.scenario)
    if not path.is_file():
        names = ", ".join(sorted(p.stem for p in examples_dir().glob("*.yaml")))
        sys.stderr.write(
            f"{PROG}: error: {args.scenario}: no such scenario file or example (examples: "
            f"{names})\n"
        )
        return 2
    return _run(args, path, lambda: load_scenario(path))


def _run(args: argparse.Namespace, path: Path, load: Callable[[], Scenario]) -> int:
    """Run the scenario ``load`` reads (``path`` names it in messages)."""
    for flag, target in (("--report-json", args.report_json), ("--report-html", args.report_html)):
        problem = _output_problem(flag, target) if target is not None else None
        if problem is not None:  # before the run, not after it
            sys.stderr.write(f"{PROG}: error: {problem}\n")
            return 2
    compare = bool(getattr(args, "compare_recommendation_policies", False))
    try:
        scenario = load().with_overrides(
            seed=args.seed,
            duration=args.duration,
            step=args.step,
            coordination=args.coordination,
        )
        runs = (
            {policy: with_recommendation_policy(scenario, policy) for policy in COMPARED_POLICIES}
            if compare
            else {"": scenario}
        )
    except ScenarioError as exc:
        for problem in exc.problems:
            sys.stderr.write(f"{PROG}: {path}: {problem}\n")
        return 2
    three_way = scenario.compare and not args.no_compare and not compare
    reports = {}
    for policy, variant in runs.items():
        progress = None
        if not args.quiet:
            if policy:
                sys.stderr.write(f"recommendation policy {policy}\n")
            # a three-way comparison's progress is over its three runs' simulated time together
            progress = ProgressReporter(
                stream=sys.stderr,
                duration=variant.duration * (len(VARIANTS) if three_way else 1),
                interactive=sys.stderr.isatty(),
            )
        try:
            if three_way:
                reports[policy] = asyncio.run(run_comparison(variant, progress=progress))
            else:
                reports[policy] = asyncio.run(run_scenario(variant, progress=progress))
        except SimulationError as exc:
            sys.stderr.write(f"{PROG}: {path}: {exc}\n")
            return 1
        except OSError as exc:
            sys.stderr.write(f"{PROG}: error: {exc}\n")
            return 1
    for policy, report in reports.items():
        if args.report_json is not None:
            target = _policy_path(args.report_json, policy) if policy else args.report_json
            write_json_report(report, target)
        if args.report_html is not None:
            target = _policy_path(args.report_html, policy) if policy else args.report_html
            target.write_text(render_html(report), encoding="utf-8")
        if policy:
            sys.stdout.write(f"== recommendation policy {policy} ==\n")
        sys.stdout.write(render_summary(report))
        if policy:
            sys.stdout.write("\n")
    if compare:
        sys.stdout.write(render_policy_comparison(reports))
    return 0
