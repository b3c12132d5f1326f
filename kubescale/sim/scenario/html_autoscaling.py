"""The HTML report's autoscaling parts (:mod:`.html_report` places them): the three-way
comparison, what kubescale did (components, skipped loops, recommendations), the cluster's
node count and cost over time, per workload its VPA band and HPA charts, and the decisions.

Each VPA chart draws, per container and resource, the recommendation band — lower and upper
bound (dashed) around the target — over the workload's usage (the largest of its pods at each
step) and its request (likewise). Each HPA chart draws current and desired replicas with the
min/max bounds, next to the metric it scales on against its target. Built from the JSON
report only.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, Final

from kubescale.rendering.quantity_text import human_bytes, human_cores

from .decision_log import (
    comparison_rows,
    decisions,
    human_detail,
    loop_notes,
    recommendation_changes,
)
from .svg_charts import FULL_WIDTH, ROW_HEIGHT, LineSeries, Marker, TimeAxis, Unit, render_chart

__all__ = [
    "clip_upper",
    "comparison_table",
    "cost_chart",
    "decisions_table",
    "hpa_charts",
    "kubescale_panel",
    "vpa_charts",
]

_LOWER, _TARGET, _UPPER = "#7c3aed", "#9333ea", "#a855f7"
_USAGE, _REQUEST = "#16a34a", "#2563eb"
_COST = "#b45309"
_WIDE: Final = 1300


def _e(text: object) -> str:
    return html.escape(str(text))


def _num(value: float | None, decimals: int) -> str:
    return "–" if value is None else f"{value:,.{decimals}f}"


def comparison_table(report: Mapping[str, Any]) -> str:
    variants = report.get("comparison") or []
    if not variants:
        return ""
    head = '<tr><th class="name">same seed, three ways</th>' + "".join(
        f"<th>{_e(v['label'])}</th>" for v in variants
    )
    rows = "".join(
        f'<tr><td class="name">{_e(label)}</td>'
        + "".join(f"<td>{_e(cell)}</td>" for cell in cells)
        + "</tr>"
        for label, cells in comparison_rows(variants)
    )
    return f'<h2>Comparison</h2><table class="comparison">{head}</tr>{rows}</table>'


def kubescale_panel(report: Mapping[str, Any]) -> str:
    components = report.get("components") or []
    if not components:
        return ""
    notes = loop_notes(report)
    loops = (
        "".join(f'<p class="alert">{_e(note)}</p>' for note in notes)
        if notes
        else f'<p class="sub">{len(report.get("loops") or [])} loops; none skipped or failed.</p>'
    )
    changes = "".join(
        f'<tr><td class="name">{_e(name)}</td><td class="name wrap">{_e(first)}</td>'
        f'<td class="name wrap">{_e(last)}</td></tr>'
        for name, first, last in recommendation_changes(report)
    )
    table = (
        '<table><tr><th class="name">VPA / container</th><th class="name">first recommendation'
        ' — target [lower–upper]</th><th class="name">last recommendation</th></tr>'
        f"{changes}</table>"
        if changes
        else ""
    )
    return (
        f'<h2>What kubescale did</h2><p class="sub">components: {_e(", ".join(components))}</p>'
        f"{loops}{table}"
    )


def cost_chart(report: Mapping[str, Any], axis: TimeAxis) -> str:
    cluster = report["cluster"]
    series = cluster.get("cost_series")
    if not series:
        return ""
    return render_chart(
        title="cost accrued",
        axis=axis,
        series=[LineSeries("cost", _COST, list(zip(report["times"], series, strict=True)), "line")],
        unit="count",
        width=_WIDE,
        height=140,
    )


def _workload_max(
    containers: Sequence[Mapping[str, Any]], times: Sequence[float], field: str
) -> list[tuple[float, float | None]]:
    """Per record time the largest ``field`` over the given containers (None: none sampled)."""
    best: dict[float, float] = {}
    for container in containers:
        for t, value in zip(container["t"], container[field], strict=True):
            if value is not None and (t not in best or value > best[t]):
                best[t] = value
    return [(t, best.get(t)) for t in times]


def vpa_charts(report: Mapping[str, Any], workload: Mapping[str, Any], axis: TimeAxis) -> list[str]:
    """The VPA band charts of ``workload`` (one pair per container its VPA recommends)."""
    charts: list[str] = []
    for vpa in report.get("vpas", []):
        if vpa["namespace"] != workload["namespace"]:
            continue
        if vpa["target"].partition("/")[2] != workload["name"]:
            continue
        for band in vpa["containers"]:
            pods = [
                c
                for c in report["containers"]
                if c["namespace"] == workload["namespace"]
                and c["workload"] == workload["name"]
                and c["container"] == band["name"]
            ]
            pair = []
            resources: tuple[tuple[str, Unit], ...] = (("cpu", "cores"), ("memory", "bytes"))
            for resource, unit in resources:
                t = band["t"]
                series = [
                    LineSeries(
                        "usage (max pod)",
                        _USAGE,
                        _workload_max(pods, report["times"], f"{resource}_usage"),
                        "area",
                    ),
                    LineSeries(
                        "request",
                        _REQUEST,
                        _workload_max(pods, report["times"], f"{resource}_request"),
                        "step",
                    ),
                    LineSeries(
                        "lower", _LOWER, list(zip(t, band[resource]["lower"], strict=True)),
                        "step", "4 3",
                    ),
                    LineSeries(
                        "target", _TARGET, list(zip(t, band[resource]["target"], strict=True)),
                        "step",
                    ),
                    LineSeries(
                        "upper", _UPPER, list(zip(t, band[resource]["upper"], strict=True)),
                        "step", "4 3",
                    ),
                ]  # fmt: skip
                clipped, markers = clip_upper(series, unit)
                pair.append(
                    render_chart(
                        title=f"{vpa['name']}/{band['name']} {resource}",
                        axis=axis,
                        series=clipped,
                        unit=unit,
                        markers=markers,
                        width=FULL_WIDTH,
                        height=ROW_HEIGHT,
                    )
                )
            charts.append(
                f'<div class="label">VPA <b>{_e(vpa["namespace"])}/{_e(vpa["name"])}</b> '
                f"(mode {_e(vpa['mode'])}) · container {_e(band['name'])}: recommendation band "
                f'over usage and requests</div><div class="pair">{"".join(pair)}</div>'
            )
    return charts


def clip_upper(series: list[LineSeries], unit: Unit) -> tuple[list[LineSeries], list[Marker]]:
    """The upper bound starts huge (upstream: no confidence yet, up to 100 G cores / 90 TiB):
    drawn as is it sets the axis and flattens everything else; left out, the bound is drawn
    nowhere (issue 32.6). So it is clipped: values above 4× the largest of the other series are
    drawn at that ceiling, and each stretch where it is clipped starts with a marker whose
    tooltip gives the real value ("upper bound 100G cores, above the chart")."""
    others = [v for s in series if s.label != "upper" for _, v in s.points if v is not None]
    if not others or max(others) <= 0:
        return series, []
    ceiling = 4 * max(others)
    human = human_cores if unit == "cores" else human_bytes
    suffix = " cores" if unit == "cores" else ""
    clipped: list[LineSeries] = []
    markers: list[Marker] = []
    for s in series:
        if s.label != "upper":
            clipped.append(s)
            continue
        points: list[tuple[float, float | None]] = []
        above = False
        for t, v in s.points:
            over = v is not None and v > ceiling
            if over and not above:
                markers.append(
                    Marker(t, s.color, f"upper bound {human(v)}{suffix}, above the chart")
                )
            above = over
            points.append((t, ceiling if over else v))
        clipped.append(LineSeries(s.label, s.color, points, s.style, s.dash))
    return clipped, markers


def hpa_charts(report: Mapping[str, Any], workload: Mapping[str, Any], axis: TimeAxis) -> list[str]:
    """Replicas against the metric and its target, per HPA scaling ``workload``."""
    charts: list[str] = []
    for hpa in report.get("hpas", []):
        if hpa["namespace"] != workload["namespace"]:
            continue
        if hpa["target"].partition("/")[2] != workload["name"]:
            continue
        t = hpa["t"]
        replicas = render_chart(
            title=f"HPA {hpa['name']} · replicas ({hpa['min_replicas']}–{hpa['max_replicas']})",
            axis=axis,
            series=[
                LineSeries(
                    "current", "#7c3aed", list(zip(t, hpa["current_replicas"], strict=True)), "step"
                ),
                LineSeries(
                    "desired",
                    "#0891b2",
                    list(zip(t, hpa["desired_replicas"], strict=True)),
                    "step",
                    "4 3",
                ),
            ],
            unit="count",
            width=FULL_WIDTH,
            height=ROW_HEIGHT,
        )
        target = hpa["metric_target"]
        metric = render_chart(
            title=f"HPA {hpa['name']} · {hpa['metric']}",
            axis=axis,
            series=[
                LineSeries(
                    "current", _USAGE, list(zip(t, hpa["metric_current"], strict=True)), "line"
                ),
                LineSeries("target", "#dc2626", [(x, target) for x in t], "step", "6 4"),
            ],
            unit="count",
            width=FULL_WIDTH,
            height=ROW_HEIGHT,
        )
        charts.append(
            f'<div class="label">HPA <b>{_e(hpa["namespace"])}/{_e(hpa["name"])}</b>: replicas '
            f'against the metric and its target</div><div class="pair">{replicas}{metric}</div>'
        )
    return charts


def decisions_table(report: Mapping[str, Any], axis: TimeAxis) -> str:
    found = decisions(report)
    if not found:
        return ""
    rows = "".join(
        f'<tr><td class="name">{axis.start + timedelta(seconds=d.time):%H:%M}</td>'
        f'<td class="name">{_e(d.what)}</td><td class="name">{_e(d.subject)}</td>'
        f'<td class="name wrap">{_e(d.why)}</td></tr>'
        for d in found
    )
    return (
        f"<h2>Decisions ({len(found)})</h2>"
        '<table class="decisions"><tr><th class="name">time</th><th class="name">what</th>'
        f'<th class="name">subject</th><th class="name">why</th></tr>{rows}</table>'
    )


def event_detail(detail: str) -> str:
    """An event's detail as the page shows it (memory in binary units)."""
    return human_detail(detail)
