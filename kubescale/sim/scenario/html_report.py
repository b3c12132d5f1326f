"""The report of a simulated run as one self-contained HTML page.

One file with everything inline — CSS, SVG charts drawn by :mod:`kubescale.sim.scenario.svg_charts`,
and a few lines of plain script for hover read-outs — no external URL and no library, so it opens
from disk, from a CI artifact or from a mail attachment alike. Top to bottom: the run and
cluster totals (nodes, node-hours, cost, OOM kills, evictions, pending time); node count and
the events on the run's time axis; the per-workload table (requests against usage percentiles,
slack, replicas, pending, evictions, OOM kills, throttling); per workload its replicas and, per
container, CPU and memory charts of request and limit against usage (throttled time shaded,
OOM kills and evictions marked); and the table of every event. Built from the JSON report only.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Final

from kubescale.rendering.html_page import HOVER_SCRIPT, PAGE_CSS, card, escape, number

from .decision_log import CURRENCY
from .html_autoscaling import (
    comparison_table,
    cost_chart,
    decisions_table,
    event_detail,
    hpa_charts,
    kubescale_panel,
    vpa_charts,
)
from .summary_table import format_duration
from .svg_charts import (
    FULL_WIDTH,
    ROW_HEIGHT,
    LineSeries,
    Marker,
    TimeAxis,
    render_chart,
    render_event_strip,
)
from .timeline import EVICTED, NODE_ADDED, NODE_REMOVED, OOM_KILL, POD_DELETED, POD_STARTED

__all__ = ["render_html"]

EVENT_COLORS: Final = {
    OOM_KILL: "#dc2626",
    EVICTED: "#7c3aed",
    POD_STARTED: "#16a34a",
    POD_DELETED: "#64748b",
    NODE_ADDED: "#0284c7",
    NODE_REMOVED: "#ea580c",
}
_OTHER_EVENT_COLOR: Final = "#334155"
_REQUEST, _LIMIT, _USAGE, _DEMAND = "#2563eb", "#dc2626", "#16a34a", "#d97706"
_CONTAINERS_SHOWN: Final = 2  # per workload; the rest fold into a <details> (a short page)


_e = escape
_num = number
_card = card


def _event_title(event: dict[str, Any], start: datetime) -> str:
    moment = start + timedelta(seconds=event["time"])
    detail = f" — {event['detail']}" if event["detail"] else ""
    return f"{moment:%H:%M:%S} {event['kind']} {event['subject']}{detail}"


def _header(report: dict[str, Any], start: datetime) -> str:
    cluster = report["cluster"]
    nodes = cluster["node_count"]
    cards = [
        _card("nodes (min–max)", f"{nodes['min']}–{nodes['max']}"),
        _card("nodes (avg)", _num(nodes["avg"], 1)),
        _card("node-hours", _num(cluster["node_hours"], 1)),
        _card(f"cost ({CURRENCY})", _num(cluster["cost"], 2)),
        _card("OOM kills", str(cluster["oom_kills"]), alert=cluster["oom_kills"] > 0),
        _card("evictions", str(cluster["evictions"])),
        _card("pending pod-time", format_duration(cluster["pending_pod_seconds"])),
        _card("throttled core-seconds", _num(cluster["throttled_core_seconds"], 0)),
    ]
    unpriced = ""
    if cluster["unpriced_nodes"]:
        names = ", ".join(cluster["unpriced_nodes"])
        unpriced = f'<p class="sub">Nodes without a price (counted at 0): {_e(names)}</p>'
    return (
        f"<h1>Simulation report: {_e(report['scenario'])}</h1>"
        f'<p class="sub">seed {_e(report["seed"])} · from {start:%Y-%m-%d %H:%M:%S} UTC · '
        f"{_e(format_duration(report['duration']))} at a {_num(report['step'], 0)} s step · "
        f"{len(report['workloads'])} workloads · {len(report['containers'])} containers</p>"
        f'<div class="cards">{"".join(cards)}</div>{unpriced}'
    )


def _workload_table(workloads: Sequence[dict[str, Any]]) -> str:
    mib = float(2**20)
    head = (
        '<tr><th class="name">workload / container</th><th>CPU req<br>cores</th><th>p50</th>'
        "<th>p95</th><th>p99</th><th>max</th><th>slack<br>core-h</th><th>mem req<br>MiB</th>"
        "<th>p50</th><th>p95</th><th>p99</th><th>max</th><th>slack<br>GiB-h</th>"
        "<th>replicas<br>min/avg/max</th><th>pending<br>pod-s</th><th>evictions</th>"
        "<th>OOM<br>kills</th><th>throttled<br>s</th></tr>"
    )
    rows = []
    for w in workloads:
        r = w["replicas"]
        rows.append(
            f'<tr class="workload"><td class="name">{_e(w["namespace"])}/{_e(w["name"])}</td>'
            '<td colspan="5"></td>'
            f"<td>{_num(w['slack_core_hours'], 3)}</td><td colspan='5'></td>"
            f"<td>{_num(w['slack_gib_hours'], 3)}</td>"
            f"<td>{r['min']}/{_num(r['avg'], 1)}/{r['max']}</td>"
            f"<td>{_num(w['pending_pod_seconds'], 0)}</td><td>{w['evictions']}</td>"
            f"<td>{w['oom_kills']}</td><td>{_num(w['throttled_seconds'], 0)}</td></tr>"
        )
        for c in w["containers"]:
            cpu, mem = c["cpu"], c["memory"]
            cu, mu = cpu["usage_cores"], mem["usage_bytes"]
            cells = [
                _num(cpu["request_avg_cores"], 3),
                *(_num(cu[k], 3) for k in ("p50", "p95", "p99", "max")),
                _num(cpu["slack_core_hours"], 3),
                _num(mem["request_avg_bytes"], 1, mib),
                *(_num(mu[k], 1, mib) for k in ("p50", "p95", "p99", "max")),
                _num(mem["slack_gib_hours"], 3),
                "",
                "",
                "",
                str(c["oom_kills"]),
                _num(c["throttled_seconds"], 0),
            ]
            rows.append(
                f'<tr><td class="name sub">{_e(c["name"])}</td>'
                + "".join(f"<td>{cell}</td>" for cell in cells)
                + "</tr>"
            )
    return f"<table>{head}{''.join(rows)}</table>"


def _runs(times: Sequence[float], flags: Sequence[int], step: float) -> list[tuple[float, float]]:
    """Time ranges in which ``flags`` is set, each sample holding for one step."""
    spans: list[tuple[float, float]] = []
    for t, flag in zip(times, flags, strict=True):
        if not flag:
            continue
        if spans and t - spans[-1][1] < 0.5 * step:
            spans[-1] = (spans[-1][0], t + step)
        else:
            spans.append((t, t + step))
    return spans


def _container_charts(
    container: dict[str, Any], *, axis: TimeAxis, events: Sequence[dict[str, Any]]
) -> str:
    t = container["t"]
    ns_pod = f"{container['namespace']}/{container['pod']}"
    pod_markers = [
        Marker(
            e["time"], EVENT_COLORS.get(e["kind"], _OTHER_EVENT_COLOR), _event_title(e, axis.start)
        )
        for e in events
        if e["subject"] == ns_pod and e["kind"] != OOM_KILL
    ]
    oom_markers = [
        Marker(time, EVENT_COLORS[OOM_KILL], f"{axis.start + timedelta(seconds=time):%H:%M:%S} "
               f"OOM kill of {container['container']}")
        for time, oom in zip(t, container["oom"], strict=True)
        if oom
    ]  # fmt: skip
    cpu_series = [
        LineSeries("usage", _USAGE, list(zip(t, container["cpu_usage"], strict=True)), "area"),
    ]
    if container["cpu_demand"] != container["cpu_usage"]:
        demand = list(zip(t, container["cpu_demand"], strict=True))
        cpu_series.append(LineSeries("demand", _DEMAND, demand, "line", "3 3"))
    cpu_series += [
        LineSeries(
            "request", _REQUEST, list(zip(t, container["cpu_request"], strict=True)), "step"
        ),
        LineSeries(
            "limit", _LIMIT, list(zip(t, container["cpu_limit"], strict=True)), "step", "6 4"
        ),
    ]
    memory_series = [
        LineSeries("usage", _USAGE, list(zip(t, container["memory_usage"], strict=True)), "area"),
        LineSeries(
            "request", _REQUEST, list(zip(t, container["memory_request"], strict=True)), "step"
        ),
        LineSeries(
            "limit", _LIMIT, list(zip(t, container["memory_limit"], strict=True)), "step", "6 4"
        ),
    ]
    throttled = [
        (start, end, "throttled") for start, end in _runs(t, container["throttled"], axis.step)
    ]
    cpu = render_chart(
        title="CPU", axis=axis, series=cpu_series, unit="cores", markers=pod_markers,
        spans=throttled, width=FULL_WIDTH, height=ROW_HEIGHT,
    )  # fmt: skip
    memory = render_chart(
        title="memory", axis=axis, series=memory_series, unit="bytes",
        markers=[*pod_markers, *oom_markers], width=FULL_WIDTH, height=ROW_HEIGHT,
    )  # fmt: skip
    ooms = sum(container["oom"])
    facts = f" · {ooms} OOM kill{'s' if ooms != 1 else ''}" if ooms else ""
    return (
        f'<div class="label"><b>{_e(container["pod"])}</b> / {_e(container["container"])} · '
        f"node {_e(container['node'] or '–')}{facts}</div>"
        f'<div class="pair">{cpu}{memory}</div>'
    )


def _workload_section(
    workload: dict[str, Any],
    *,
    report: dict[str, Any],
    axis: TimeAxis,
    times: Sequence[float],
    containers: Sequence[dict[str, Any]],
    events: Sequence[dict[str, Any]],
) -> str:
    pods = {f"{c['namespace']}/{c['pod']}" for c in containers}
    series = workload["series"]
    first = next((i for i, n in enumerate(series["replicas"]) if n), 0)
    replicas_chart = render_chart(
        title="pods",
        axis=axis,
        series=[
            LineSeries(
                "replicas",
                "#7c3aed",
                list(zip(times, series["replicas"], strict=True))[first:],
                "step",
            ),
            LineSeries(
                "running", _USAGE, list(zip(times, series["running"], strict=True))[first:], "step"
            ),
            LineSeries(
                "pending",
                _DEMAND,
                list(zip(times, series["pending"], strict=True))[first:],
                "step",
                "4 3",
            ),
        ],
        unit="count",
        markers=[
            Marker(e["time"], EVENT_COLORS[e["kind"]], _event_title(e, axis.start))
            for e in events
            if e["subject"] in pods and e["kind"] in {OOM_KILL, EVICTED}
        ],
        width=1300,
        height=150,
    )
    charts = [_container_charts(c, axis=axis, events=events) for c in containers]
    shown = "".join(charts[:_CONTAINERS_SHOWN])
    if len(charts) > _CONTAINERS_SHOWN:
        rest = len(charts) - _CONTAINERS_SHOWN
        shown += (
            f"<details><summary>{rest} more container{'s' if rest != 1 else ''}</summary>"
            f"{''.join(charts[_CONTAINERS_SHOWN:])}</details>"
        )
    autoscaling = "".join(
        f'<div class="panel">{chart}</div>'
        for chart in [*hpa_charts(report, workload, axis), *vpa_charts(report, workload, axis)]
    )
    r = workload["replicas"]
    return (
        f"<h2>{_e(workload['namespace'])}/{_e(workload['name'])}</h2>"
        f'<p class="sub">replicas {r["min"]}–{r["max"]} (avg {_num(r["avg"], 1)}) · '
        f"{workload['oom_kills']} OOM kills · {workload['evictions']} evictions · "
        f"pending pod-time {_e(format_duration(workload['pending_pod_seconds']))} · "
        f"CPU slack {_num(workload['slack_core_hours'], 3)} core-h · "
        f"memory slack {_num(workload['slack_gib_hours'], 3)} GiB-h</p>"
        f'<div class="panel">{replicas_chart}</div>'
        f"{autoscaling}"
        f'<div class="panel">{shown or "<p class=none>No container ran.</p>"}</div>'
    )


def _events_strip(report: dict[str, Any], axis: TimeAxis) -> str:
    events = report["events"]
    if not events:
        return ""
    rows = [
        (
            kind,
            EVENT_COLORS.get(kind, _OTHER_EVENT_COLOR),
            [
                Marker(e["time"], "", _event_title(e, axis.start))
                for e in events
                if e["kind"] == kind
            ],
        )
        for kind in sorted({e["kind"] for e in events})
    ]
    return f'<div class="panel">{render_event_strip(axis=axis, rows=rows)}</div>'


def _events_table(report: dict[str, Any], axis: TimeAxis) -> str:
    events = report["events"]
    if not events:
        return '<h2>Events</h2><p class="none">No events.</p>'
    rows = "".join(
        f'<tr><td class="name">{axis.start + timedelta(seconds=e["time"]):%Y-%m-%d %H:%M:%S}</td>'
        f"<td>{_e(format_duration(e['time']))}</td>"
        f'<td class="name" style="color:{EVENT_COLORS.get(e["kind"], _OTHER_EVENT_COLOR)}">'
        f'{_e(e["kind"])}</td><td class="name">{_e(e["subject"])}</td>'
        f'<td class="name wrap">{_e(event_detail(e["detail"]))}</td></tr>'
        for e in events
        if not e["kind"].endswith("-skipped")  # counted per loop at the top instead
    )
    return (
        f"<h2>Events ({len(events)})</h2><details><summary>every event (a loop's skipped "
        "iterations are counted at the top, not listed)</summary>"
        '<table><tr><th class="name">time (UTC)</th><th>since start</th><th class="name">kind</th>'
        f'<th class="name">subject</th><th class="name">detail</th></tr>{rows}</table></details>'
    )


def render_html(report: dict[str, Any]) -> str:
    """The page for ``report`` (the dict of :meth:`Timeline.report`)."""
    start = datetime.fromisoformat(report["start"])
    axis = TimeAxis(start=start, duration=report["duration"], step=report["step"])
    times = report["times"]
    cluster = report["cluster"]
    node_chart = render_chart(
        title="nodes",
        axis=axis,
        series=[
            LineSeries(
                "nodes",
                "#0f766e",
                list(zip(times, cluster["node_count"]["series"], strict=True)),
                "step",
            )
        ],
        unit="count",
        markers=[
            Marker(e["time"], EVENT_COLORS[e["kind"]], _event_title(e, start))
            for e in report["events"]
            if e["kind"] in {NODE_ADDED, NODE_REMOVED}
        ],
        width=1300,
        height=160,
    )
    containers_by_workload: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for container in report["containers"]:
        key = (container["namespace"], container["workload"])
        containers_by_workload.setdefault(key, []).append(container)
    sections = [
        _workload_section(
            w,
            report=report,
            axis=axis,
            times=times,
            containers=containers_by_workload.get((w["namespace"], w["name"]), []),
            events=report["events"],
        )
        for w in report["workloads"]
    ]
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><title>{_e(report["scenario"])} — '
        f"kubescale simulation</title><style>{PAGE_CSS}</style></head>"
        f'<body data-start="{_e(report["start"])}"><main>{_header(report, start)}'
        f"{comparison_table(report)}{kubescale_panel(report)}"
        f'<h2>Cluster</h2><div class="panel">{node_chart}{cost_chart(report, axis)}</div>'
        f"{_events_strip(report, axis)}{decisions_table(report, axis)}"
        f"<h2>Workloads</h2>{_workload_table(report['workloads'])}"
        f"{''.join(sections)}{_events_table(report, axis)}"
        f'</main><div id="tooltip"></div><script>{HOVER_SCRIPT}</script></body></html>\n'
    )
