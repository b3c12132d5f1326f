"""The plain-text summary of a simulated run that ``kubescale simulate`` prints on stdout.

Tables drawn by :mod:`kubescale.rendering.text_table` (shared with ``kubescale report``).
Read from the JSON report (:mod:`kubescale.sim.scenario.report_assembly`) only, so a saved report
prints the same table. Three parts, every line at most :data:`WIDTH` columns: the run and cluster
totals; per workload container the requests against usage (time-weighted average request,
usage p50/p95/max, slack); per workload its behaviour (replicas, pending and unschedulable
pod-time, evictions, OOM kills, throttling). Column headers carry their unit on a second
line; names too long for the width are shortened with ``…``. One unit and one wording per
figure everywhere (issue 32.6): time summed over pods is "pod-time", as a duration (``2h26m``),
in the comparison, the cluster line and the tables alike; cost carries its currency (``$``:
node prices are dollars per hour, as the cloud providers' price lists).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any, Final

from kubescale.rendering.text_table import (
    WIDTH,
    Column,
    format_duration,
    format_number,
    render_table,
)

from .decision_log import (
    CURRENCY,
    comparison_rows,
    decisions,
    hpa_vpa_conflicts,
    loop_notes,
    recommendation_changes,
)

__all__ = ["WIDTH", "format_duration", "render_summary"]

_MIB: Final = float(2**20)
_Column = Column
_number = format_number


def _table(columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> list[str]:
    return render_table(columns, rows)


_RESOURCE_COLUMNS: Final = (
    _Column("WORKLOAD / CONTAINER", "", numeric=False),
    _Column("CPU REQ", "(cores)"),
    _Column("CPU P50", "(cores)"),
    _Column("CPU P95", "(cores)"),
    _Column("CPU MAX", "(cores)"),
    _Column("CPU SLACK", "(core-h)"),
    _Column("MEM REQ", "(MiB)"),
    _Column("MEM P50", "(MiB)"),
    _Column("MEM P95", "(MiB)"),
    _Column("MEM MAX", "(MiB)"),
    _Column("MEM SLACK", "(GiB-h)"),
)

_BEHAVIOUR_COLUMNS: Final = (
    _Column("WORKLOAD", "", numeric=False),
    _Column("REPLICAS", "min/avg/max"),
    _Column("PENDING", "(pod-time)"),
    _Column("UNSCHEDULABLE", "(pod-time)"),
    _Column("EVICTIONS", "(count)"),
    _Column("OOM KILLS", "(count)"),
    _Column("THROTTLED", "(pod-time)"),
    _Column("THROTTLED", "(core-s)"),
)


def _resource_rows(workloads: Sequence[dict[str, Any]]) -> list[list[str]]:
    rows: list[list[str]] = []
    for workload in workloads:
        rows.append([f"{workload['namespace']}/{workload['name']}"] + [""] * 10)
        for container in workload["containers"]:
            cpu, memory = container["cpu"], container["memory"]
            cpu_usage, memory_usage = cpu["usage_cores"], memory["usage_bytes"]
            rows.append(
                [
                    f"  {container['name']}",
                    _number(cpu["request_avg_cores"], 3),
                    _number(cpu_usage["p50"], 3),
                    _number(cpu_usage["p95"], 3),
                    _number(cpu_usage["max"], 3),
                    _number(cpu["slack_core_hours"], 3),
                    _number(memory["request_avg_bytes"], 1, _MIB),
                    _number(memory_usage["p50"], 1, _MIB),
                    _number(memory_usage["p95"], 1, _MIB),
                    _number(memory_usage["max"], 1, _MIB),
                    _number(memory["slack_gib_hours"], 3),
                ]
            )
    return rows


def _behaviour_rows(workloads: Sequence[dict[str, Any]]) -> list[list[str]]:
    rows: list[list[str]] = []
    for workload in workloads:
        replicas = workload["replicas"]
        rows.append(
            [
                f"{workload['namespace']}/{workload['name']}",
                f"{replicas['min']}/{_number(replicas['avg'], 1)}/{replicas['max']}",
                format_duration(workload["pending_pod_seconds"]),
                format_duration(workload["unschedulable_pod_seconds"]),
                str(workload["evictions"]),
                str(workload["oom_kills"]),
                format_duration(workload["throttled_seconds"]),
                _number(workload["throttled_core_seconds"], 1),
            ]
        )
    return rows


def _comparison_lines(report: dict[str, Any]) -> list[str]:
    variants = report.get("comparison") or []
    if not variants:
        return []
    columns = [_Column("SAME SEED, THREE WAYS", "", numeric=False)] + [
        _Column(v["label"], f"({v['variant']})") for v in variants
    ]
    rows = [[label, *cells] for label, cells in comparison_rows(variants)]
    return ["", *_table(columns, rows)]


def _wrapped(text: str, indent: str = "  ", more: str = "      ") -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=more)


def _kubescale_lines(report: dict[str, Any]) -> list[str]:
    """What kubescale did (:mod:`.decision_log`); nothing when no component ran."""
    components = report.get("components") or []
    if not components:
        return []
    lines = ["", *_wrapped(f"What kubescale did — components: {', '.join(components)}", "")]
    notes = loop_notes(report)
    if notes:
        lines += [line for note in notes for line in _wrapped(f"NOTE: {note}")]
    else:
        lines.append(f"  Loops: {len(report.get('loops') or [])}, none skipped or failed")
    changes = recommendation_changes(report)
    if changes:
        lines.append("  VPA recommendations (target [lower–upper]), first -> last:")
        for name, first, last in changes:
            lines += _wrapped(f"{name}: {first} -> {last}", "    ", "        ")
    found = decisions(report)
    if found:
        lines.append(f"  Decisions ({len(found)}):")
        for decision in found:
            lines += _wrapped(
                f"{format_duration(decision.time):>7}  {decision.what}  {decision.subject}: "
                f"{decision.why}",
                "    ",
                "             ",
            )
    else:
        lines.append("  Decisions: none")
    conflicts = hpa_vpa_conflicts(report)
    if conflicts:
        lines.append(f"  HPA/VPA conflicts ({len(conflicts)}):")
        for conflict in conflicts:
            lines += _wrapped(conflict, "    ", "        ")
    return lines


def render_summary(report: dict[str, Any]) -> str:
    """The summary of ``report`` (the dict of :meth:`Timeline.report`), newline-terminated: the
    comparison when the run was one (:mod:`.comparison`), what kubescale did, then the tables."""
    cluster = report["cluster"]
    nodes = cluster["node_count"]
    lines = [
        f"Scenario {report['scenario']!r}, seed {report['seed']}: "
        f"{format_duration(report['duration'])} from {report['start']} "
        f"at a {_number(report['step'], 0)} s step",
        *(lead := [*_comparison_lines(report), *_kubescale_lines(report)]),
        *([""] if lead else []),
        f"Cluster: {nodes['min']}-{nodes['max']} nodes (avg {_number(nodes['avg'], 1)}), "
        f"{_number(cluster['node_hours'], 2)} node-hours, cost {CURRENCY}"
        f"{_number(cluster['cost'], 2)}, "
        f"{cluster['oom_kills']} OOM kills, {cluster['evictions']} evictions, "
        f"pending pod-time {format_duration(cluster['pending_pod_seconds'])}",
    ]
    if cluster["unpriced_nodes"]:
        names = ", ".join(cluster["unpriced_nodes"])
        lines.append(f"Nodes without a price (cost 0): {names}")
    workloads = report["workloads"]
    if workloads:
        lines += ["", *_table(_RESOURCE_COLUMNS, _resource_rows(workloads))]
        lines += ["", *_table(_BEHAVIOUR_COLUMNS, _behaviour_rows(workloads))]
    else:
        lines += ["", "No workloads ran."]
    return (
        "\n".join(line if len(line) <= WIDTH else line[: WIDTH - 1] + "…" for line in lines) + "\n"
    )
