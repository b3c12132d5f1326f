"""``kubescale report -o html``: one self-contained page in the simulator's report style.

The style sheet, escaping and headline cards are the simulator's
(:mod:`kubescale.rendering.html_page`), so both reports look alike; no script is needed (the
page has no charts, only tables and inline bars). Top to bottom: totals as cards; per workload
container the current request against the recommendation's lower/target/upper with a verdict,
savings and risk; the HPAs; the nodes' requests and usage against allocatable, each with a
bar; the VPA updater's plan (what it would evict or resize now, and why).

The page fits a 1,280 px window (issue 32.6): names and conditions wrap (long workload, HPA
and node names were what widened the tables), numbers keep to one line, and a table still
wider than the window scrolls inside its own box instead of widening the page. A value not
known (an HPA that has not acted yet) is "–", never ``None``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubescale.rendering.html_page import PAGE_CSS, card, escape
from kubescale.report.text_report import cpu_text, memory_text, percent_text

__all__ = ["render_html"]

_EXTRA_CSS = """
.bar{display:inline-block;width:90px;height:9px;background:#e2e8f0;border-radius:3px;
vertical-align:middle;margin-left:6px;overflow:hidden}
.bar i{display:block;height:100%;background:#2563eb}
.bar.use i{background:#16a34a}
.scroll{overflow-x:auto;max-width:100%}
.scroll td.name{white-space:normal;overflow-wrap:anywhere;min-width:8em}
"""


def _scroll(table: str) -> str:
    """A table in a box that scrolls sideways, should it still be wider than the page."""
    return f'<div class="scroll">{table}</div>'


def _count(value: int | None) -> str:
    return "–" if value is None else str(value)


def _verdict(text: str) -> str:
    css = {"over": "over", "under": "under", "unset": "under", "ok": "ok"}.get(text, "none")
    return f'<td class="{css}">{escape(text)}</td>'


def _bar(part: int | None, whole: int, css: str = "") -> str:
    if part is None or whole <= 0:
        return ""
    width = max(0, min(100, 100 * part // whole))
    return f'<span class="bar {css}"><i style="width:{width}%"></i></span>'


def _workload_table(workloads: list[dict[str, Any]]) -> str:
    head = (
        '<tr><th class="name">workload / container</th><th>source</th><th>replicas</th>'
        "<th>CPU req</th><th>lower</th><th>target</th><th>upper</th><th>CPU</th>"
        "<th>savings</th><th>risk</th>"
        "<th>mem req</th><th>lower</th><th>target</th><th>upper</th><th>mem</th>"
        "<th>savings</th><th>risk</th><th>limits<br>CPU / mem</th></tr>"
    )
    rows = []
    for w in workloads:
        rows.append(
            f'<tr class="workload"><td class="name">{escape(w["namespace"])}/'
            f"{escape(w['kind'])}/{escape(w['name'])}</td><td>{escape(w['source'])}</td>"
            f"<td>{_count(w['replicas'])}</td><td colspan='15'></td></tr>"
        )
        for c in w["containers"]:
            cpu, memory = c["cpu"], c["memory"]
            cells = [
                *(f"<td>{cpu_text(cpu[k])}</td>" for k in ("request", "lower", "target", "upper")),
                _verdict(cpu["verdict"]),
                f"<td>{cpu_text(cpu['savings'])}</td><td>{cpu_text(cpu['risk'])}</td>",
                *(
                    f"<td>{memory_text(memory[k])}</td>"
                    for k in ("request", "lower", "target", "upper")
                ),
                _verdict(memory["verdict"]),
                f"<td>{memory_text(memory['savings'])}</td><td>{memory_text(memory['risk'])}</td>",
                f"<td>{cpu_text(cpu['limit'])} / {memory_text(memory['limit'])}</td>",
            ]
            rows.append(
                f'<tr><td class="name sub">{escape(c["name"])}</td><td></td><td></td>'
                + "".join(cells)
                + "</tr>"
            )
    return _scroll(f"<table>{head}{''.join(rows)}</table>")


def _hpa_table(workloads: list[dict[str, Any]]) -> str:
    rows = []
    for w in workloads:
        hpa = w["hpa"]
        if hpa is None:
            continue
        conditions = ", ".join(
            f"{kind}={condition['status']} ({condition['reason']})"
            for kind, condition in sorted(hpa["conditions"].items())
        )
        rows.append(
            f'<tr><td class="name">{escape(w["namespace"])}/{escape(w["name"])}</td>'
            f'<td class="name">{escape(hpa["name"])}</td>'
            f"<td>{_count(hpa['current_replicas'])}</td><td>{_count(hpa['desired_replicas'])}"
            f"</td><td>{_count(hpa['min_replicas'])}</td><td>{_count(hpa['max_replicas'])}</td>"
            f'<td class="name">{escape(hpa["targets"])}</td>'
            f'<td class="name">{escape(conditions or "–")}</td></tr>'
        )
    if not rows:
        return '<p class="none">No workload in the report has an HPA.</p>'
    head = (
        '<tr><th class="name">workload</th><th class="name">HPA</th><th>current</th>'
        '<th>desired</th><th>min</th><th>max</th><th class="name">targets</th>'
        '<th class="name">conditions</th></tr>'
    )
    return _scroll(f"<table>{head}{''.join(rows)}</table>")


def _node_table(nodes: list[dict[str, Any]]) -> str:
    if not nodes:
        return '<p class="none">No nodes.</p>'
    head = (
        '<tr><th class="name">node</th><th>pods</th><th>CPU allocatable</th>'
        '<th class="name">CPU requested</th><th class="name">CPU used</th>'
        '<th>memory allocatable</th><th class="name">memory requested</th>'
        '<th class="name">memory used</th></tr>'
    )
    rows = []
    for n in nodes:
        cpu, memory = n["cpu"], n["memory"]

        def cell(values: Mapping[str, Any], key: str, fmt: Any, css: str = "") -> str:
            amount = values[key]
            share = percent_text(amount, values["allocatable"])
            bar = _bar(amount, values["allocatable"], css)
            return f'<td class="name">{fmt(amount)} ({share}){bar}</td>'

        rows.append(
            f'<tr><td class="name">{escape(n["name"])}</td><td>{n["pods"]}</td>'
            f"<td>{cpu_text(cpu['allocatable'])}</td>"
            + cell(cpu, "requested", cpu_text)
            + cell(cpu, "usage", cpu_text, "use")
            + f"<td>{memory_text(memory['allocatable'])}</td>"
            + cell(memory, "requested", memory_text)
            + cell(memory, "usage", memory_text, "use")
            + "</tr>"
        )
    return _scroll(f"<table>{head}{''.join(rows)}</table>")


def _updater_plan(plan: list[dict[str, Any]]) -> str:
    """The updater's evictions and resizes with their reasons, or a line saying there are
    none."""
    if not plan:
        return '<p class="none">Nothing to evict or resize now.</p>'
    head = (
        '<tr><th>action</th><th class="name">pod</th><th class="name">VPA</th>'
        '<th class="name">reason</th></tr>'
    )
    rows = [
        f"<tr><td>{escape(row['action'])}</td>"
        f'<td class="name">{escape(row["namespace"])}/{escape(row["pod"])}</td>'
        f'<td class="name">{escape(row["vpa"])}</td>'
        f'<td class="name">{escape(row["reason"])}</td></tr>'
        for row in plan
    ]
    return _scroll(f"<table>{head}{''.join(rows)}</table>")


def render_html(report: Mapping[str, Any]) -> str:
    """The page for ``report`` (:func:`~kubescale.report.report_assembly.assemble_report`)."""
    totals = report["totals"]
    scope = f"namespace {report['namespace']}" if report["namespace"] else "all namespaces"
    cards = [
        card("workloads", str(totals["workloads"])),
        card("with a VPA", str(totals["with_vpa"])),
        card("with a recommendation", str(totals["with_recommendation"])),
        card(
            "CPU requested / target",
            f"{cpu_text(totals['cpu_request'])} / {cpu_text(totals['cpu_target'])}",
        ),
        card(
            "memory requested / target",
            f"{memory_text(totals['memory_request'])} / {memory_text(totals['memory_target'])}",
        ),
        card("CPU savings", cpu_text(totals["cpu_savings"])),
        card("memory savings", memory_text(totals["memory_savings"])),
        card("CPU short of target", cpu_text(totals["cpu_risk"]), alert=totals["cpu_risk"] > 0),
        card(
            "memory short of target",
            memory_text(totals["memory_risk"]),
            alert=totals["memory_risk"] > 0,
        ),
        card(
            "containers under / over",
            f"{totals['containers_under']} / {totals['containers_over']}",
            alert=totals["containers_under"] > 0,
        ),
    ]
    notes = "".join(
        f'<p class="sub">Not served by this cluster: {escape(m)}</p>' for m in report["missing"]
    )
    model = report.get("model")
    if model is not None:
        history = (
            f"{model['history_samples']} Prometheus history samples"
            if model["history_samples"] is not None
            else "no Prometheus history"
        )
        notes += (
            f'<p class="sub">Workloads without a VPA: the recommender\'s model on '
            f"{model['live_samples']} live samples and {escape(history)}.</p>"
        )
    workloads = report["workloads"]
    table = (
        _workload_table(workloads)
        if workloads
        else '<p class="none">No workload has a VPA (run with --all-workloads).</p>'
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8"><title>kubescale recommendations — '
        f"{escape(scope)}</title><style>{PAGE_CSS}{_EXTRA_CSS}</style></head>"
        f'<body data-report="recommendations"><main>'
        f"<h1>Resource recommendations</h1>"
        f'<p class="sub">{escape(report["generated"])} · {escape(scope)} · '
        f"{len(workloads)} workloads · {len(report['nodes'])} nodes</p>"
        f'<div class="cards">{"".join(cards)}</div>{notes}'
        f"<h2>Workloads</h2>{table}"
        f"<h2>Horizontal autoscalers</h2>{_hpa_table(workloads)}"
        f"<h2>Nodes</h2>{_node_table(report['nodes'])}"
        "<h2>VPA updater plan</h2>"
        '<p class="sub">What the VPA updater would do now, by its own decision on this '
        "reading (a dry run: nothing written).</p>"
        f"{_updater_plan(report['updater_plan'])}"
        "</main></body></html>\n"
    )
