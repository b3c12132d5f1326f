"""``kubescale report`` on stdout: aligned tables (:mod:`kubescale.rendering.text_table`).

One line of totals, then per workload container: replicas, CPU request / lower / target /
upper / verdict, the same for memory, and the HPA; the nodes' requests and usage against
allocatable; last, the VPA updater's plan (each eviction or in-place resize it would make now,
with its reason). CPU in millicores (``250m``), memory in MiB (``256Mi``); ``-`` where there is no
value. Every line fits ``width`` (the terminal's, for stdout): prose wraps, a table too wide
splits its columns over several tables (:func:`~kubescale.rendering.text_table.fit_table`) —
no column is cut off.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Any, Final

from kubescale.rendering.text_table import WIDTH, Column, fit_table

__all__ = ["cpu_text", "memory_text", "percent_text", "render_text"]

_MIB: Final = 2**20


def cpu_text(millicores: int | None) -> str:
    return "-" if millicores is None else f"{millicores}m"


def memory_text(amount: int | None) -> str:
    """Bytes as MiB, rounded up (a request shown smaller than it is would mislead)."""
    return "-" if amount is None else f"{-(-amount // _MIB)}Mi"


def percent_text(part: int | None, whole: int) -> str:
    return "-" if part is None or whole <= 0 else f"{100 * part // whole}%"


_WORKLOAD_COLUMNS: Final = (
    Column("WORKLOAD / CONTAINER", numeric=False),
    Column("SOURCE", numeric=False),
    Column("REPLICAS"),
    Column("CPU REQ"),
    Column("LOWER"),
    Column("TARGET"),
    Column("UPPER"),
    Column("CPU", numeric=False),
    Column("MEM REQ"),
    Column("LOWER"),
    Column("TARGET"),
    Column("UPPER"),
    Column("MEM", numeric=False),
)
_HPA_COLUMNS: Final = (
    Column("WORKLOAD", numeric=False),
    Column("HPA", numeric=False),
    Column("REPLICAS"),
    Column("MIN"),
    Column("MAX"),
    Column("TARGETS", numeric=False),
    Column("CONDITIONS", numeric=False),
)
_NODE_COLUMNS: Final = (
    Column("NODE", numeric=False),
    Column("PODS"),
    Column("CPU ALLOC"),
    Column("CPU REQ"),
    Column("REQ%"),
    Column("CPU USE"),
    Column("USE%"),
    Column("MEM ALLOC"),
    Column("MEM REQ"),
    Column("REQ%"),
    Column("MEM USE"),
    Column("USE%"),
)


def _hpa_rows(workloads: list[dict[str, Any]]) -> list[list[str]]:
    rows = []
    for w in workloads:
        hpa = w["hpa"]
        if hpa is None:
            continue
        conditions = ",".join(
            f"{kind}={condition['status']}" for kind, condition in sorted(hpa["conditions"].items())
        )
        rows.append(
            [
                f"{w['namespace']}/{w['kind']}/{w['name']}",
                hpa["name"],
                "-" if hpa["current_replicas"] is None else str(hpa["current_replicas"]),
                str(hpa["min_replicas"]),
                str(hpa["max_replicas"]),
                hpa["targets"],
                conditions or "-",
            ]
        )
    return rows


def _workload_rows(workloads: list[dict[str, Any]]) -> list[list[str]]:
    rows: list[list[str]] = []
    for w in workloads:
        rows.append(
            [f"{w['namespace']}/{w['kind']}/{w['name']}", w["source"], str(w["replicas"])]
            + [""] * 10
        )
        for c in w["containers"]:
            cpu, memory = c["cpu"], c["memory"]
            rows.append(
                [f"  {c['name']}", "", ""]
                + [cpu_text(cpu[k]) for k in ("request", "lower", "target", "upper")]
                + [cpu["verdict"]]
                + [memory_text(memory[k]) for k in ("request", "lower", "target", "upper")]
                + [memory["verdict"]]
            )
    return rows


def _node_rows(nodes: list[dict[str, Any]]) -> list[list[str]]:
    rows = []
    for n in nodes:
        cpu, memory = n["cpu"], n["memory"]
        rows.append(
            [
                n["name"],
                str(n["pods"]),
                cpu_text(cpu["allocatable"]),
                cpu_text(cpu["requested"]),
                percent_text(cpu["requested"], cpu["allocatable"]),
                cpu_text(cpu["usage"]),
                percent_text(cpu["usage"], cpu["allocatable"]),
                memory_text(memory["allocatable"]),
                memory_text(memory["requested"]),
                percent_text(memory["requested"], memory["allocatable"]),
                memory_text(memory["usage"]),
                percent_text(memory["usage"], memory["allocatable"]),
            ]
        )
    return rows


def render_text(report: Mapping[str, Any], *, width: int = WIDTH) -> str:
    """The report as text, newline-terminated, every line at most ``width`` columns."""
    totals = report["totals"]
    scope = f"namespace {report['namespace']}" if report["namespace"] else "all namespaces"
    lines = [
        f"Recommendations at {report['generated']} ({scope}): {totals['workloads']} workloads, "
        f"{totals['with_vpa']} with a VPA, {totals['with_recommendation']} with a "
        f"recommendation",
        f"Requests {cpu_text(totals['cpu_request'])} CPU, {memory_text(totals['memory_request'])}"
        f" memory; targets {cpu_text(totals['cpu_target'])}, "
        f"{memory_text(totals['memory_target'])}. Possible savings "
        f"{cpu_text(totals['cpu_savings'])} CPU, {memory_text(totals['memory_savings'])} memory; "
        f"short of target {cpu_text(totals['cpu_risk'])} CPU, "
        f"{memory_text(totals['memory_risk'])} memory "
        f"({totals['containers_under']} containers under their lower bound or unset, "
        f"{totals['containers_over']} over their upper bound)",
    ]
    model = report.get("model")
    if model is not None:
        history = (
            f"{model['history_samples']} history samples"
            if model["history_samples"] is not None
            else "no Prometheus history"
        )
        lines.append(
            f"Model recommendations from {model['live_samples']} live samples and {history}"
            + (f" (history error: {model['history_error']})" if model["history_error"] else "")
        )
    for missing in report["missing"]:
        lines.append(f"Not served by this cluster: {missing}")
    if report["workloads"]:
        lines += [
            "",
            *fit_table(_WORKLOAD_COLUMNS, _workload_rows(report["workloads"]), width=width),
        ]
    else:
        hint = "" if report["all_workloads"] else " (--all-workloads for every workload)"
        lines += ["", f"No workload has a VPA{hint}."]
    hpa_rows = _hpa_rows(report["workloads"])
    if hpa_rows:
        lines += ["", *fit_table(_HPA_COLUMNS, hpa_rows, width=width)]
    if report["nodes"]:
        lines += ["", *fit_table(_NODE_COLUMNS, _node_rows(report["nodes"]), width=width)]
    lines += ["", *_updater_plan_lines(report["updater_plan"])]
    return "\n".join(_wrapped(line, width) for line in lines) + "\n"


def _updater_plan_lines(plan: list[dict[str, Any]]) -> list[str]:
    """One line per eviction or resize the updater would make now, with its reason."""
    if not plan:
        return ["VPA updater plan now (dry run, nothing written): nothing to evict or resize."]
    evictions = sum(1 for row in plan if row["action"] == "evict")
    return [
        f"VPA updater plan now (dry run, nothing written): {evictions} evictions, "
        f"{len(plan) - evictions} in-place resizes",
        *(
            f"  {row['action']} {row['namespace']}/{row['pod']} (VPA {row['vpa']}): {row['reason']}"
            for row in plan
        ),
    ]


def _wrapped(line: str, width: int) -> str:
    """A line too long for ``width`` (prose: a table's lines fit), wrapped with an indent."""
    if len(line) <= width:
        return line
    return "\n".join(textwrap.wrap(line, width, subsequent_indent="  ", break_on_hyphens=False))
