"""A synthetic six-hour run recorded into a Timeline, and the report properties it must have.

The run is built here from plain values, without any actor, so the report modules are tested
on their own: three workloads (a scaled web service with a sidecar, a cache whose memory leaks
into OOM kills, a CPU-throttled batch job), two static nodes and one node-group node that comes
and goes, a pod left Unschedulable until that node exists, and an eviction.
:func:`synthetic_timeline` is also what the Chromium test renders.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from kubescale.sim.scenario.html_report import render_html
from kubescale.sim.scenario.json_report import dumps_report, write_json_report
from kubescale.sim.scenario.report_assembly import assemble_report
from kubescale.sim.scenario.summary_table import WIDTH, render_summary
from kubescale.sim.scenario.timeline import WORKLOAD_LABEL, Timeline, TimelineEvent

START = datetime(2026, 3, 2, 6, 0, tzinfo=UTC)
STEP = 60.0
STEPS = 360
GIB = float(2**30)
MIB = float(2**20)


@dataclass(frozen=True)
class Sample:
    """The shape of sim.cluster.kubelet.ContainerSample (a structural stand-in)."""

    namespace: str
    pod: str
    workload: str
    container: str
    node: str
    cpu_request: float | None
    cpu_limit: float | None
    memory_request: float | None
    memory_limit: float | None
    cpu_usage: float
    memory_usage: float
    cpu_demand: float
    throttled: bool
    oom_killed: bool
    running: bool


def pod_dict(
    namespace: str, name: str, workload: str, *, phase: str, unschedulable: bool = False
) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase}
    if unschedulable:
        status["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/2 nodes are available: 2 Insufficient cpu.",
            }
        ]
    return {
        "metadata": {"namespace": namespace, "name": name, "labels": {WORKLOAD_LABEL: workload}},
        "status": status,
    }


def node_dict(name: str, instance_type: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"node.kubernetes.io/instance-type": instance_type}}
    }


def synthetic_timeline() -> Timeline:
    timeline = Timeline(
        scenario_name="synthetic-six-hours",
        seed=7,
        start=START,
        step=STEP,
        node_prices={"static-a": 0.1, "static-b": 0.2},
    )
    cache_memory = 300 * MIB
    for i in range(STEPS):
        t = i * STEP
        hours = t / 3600
        samples: list[Sample] = []
        pods: list[dict[str, Any]] = []
        events: list[TimelineEvent] = []
        nodes = [node_dict("static-a", "m5.large"), node_dict("static-b", "m5.xlarge")]
        if 130 <= i < 300:
            nodes.append(node_dict("group-1-abc", "c5.2xlarge"))
        if i == 130:
            timeline.add_node_price("group-1-abc", 0.5)
            events.append(TimelineEvent(t, "node-added", "group-1-abc", "group scale-up"))
        if i == 300:
            events.append(TimelineEvent(t, "node-removed", "group-1-abc", "group scale-down"))

        # web: 2 replicas, a third from 2h; it waits for the group node (Unschedulable) until
        # 2h10m; web-1 is evicted at 4h and replaced by web-3 a minute later.
        web_pods = ["web-0", "web-1"] if i < 240 else ["web-0", "web-3"]
        if i >= 120:
            web_pods.append("web-2")
        for index, name in enumerate(web_pods):
            if name == "web-2" and i < 130:
                pods.append(pod_dict("default", name, "web", phase="Pending", unschedulable=True))
                continue
            if name == "web-3" and i == 240:
                pods.append(pod_dict("default", name, "web", phase="Pending"))
                continue
            pods.append(pod_dict("default", name, "web", phase="Running"))
            node = "group-1-abc" if name == "web-2" else ("static-a" if index == 0 else "static-b")
            load = 0.3 + 0.2 * math.sin(2 * math.pi * hours / 6 + index)
            samples.append(
                Sample("default", name, "web", "app", node, 0.5, 1.0, 512 * MIB, GIB,
                       load, 400 * MIB + 50 * MIB * math.sin(hours + index), load, False,
                       False, True)
            )  # fmt: skip
            samples.append(
                Sample("default", name, "web", "proxy", node, 0.1, None, 64 * MIB, 128 * MIB,
                       0.02, 40 * MIB, 0.02, False, False, True)
            )  # fmt: skip
            if (name == "web-2" and i == 130) or (name == "web-3" and i == 241):
                events.append(TimelineEvent(t, "pod-started", f"default/{name}", ""))
        if i == 120:
            events.append(TimelineEvent(t, "scale", "default/web", "replicas 2 -> 3"))
        if i == 240:
            events.append(
                TimelineEvent(t, "evicted", "default/web-1", "EvictionByEvictionAPI (descheduler)")
            )

        # cache: leaks 4 MiB a minute from 300 MiB into a 512 MiB limit; OOM-killed when it
        # crosses it, down (not running) for one step, then back from 300 MiB.
        cache_memory += 4 * MIB
        oom = cache_memory > 512 * MIB
        running = not oom
        if oom:
            events.append(TimelineEvent(t, "oom-kill", "default/cache-0", "container cache"))
        samples.append(
            Sample("default", "cache-0", "cache", "cache", "static-a", 0.25, 0.5, 384 * MIB,
                   512 * MIB, 0.1 if running else 0.0, cache_memory if running else 0.0,
                   0.1 if running else 0.0, False, oom, running)
        )  # fmt: skip
        if oom:
            cache_memory = 300 * MIB
        pods.append(pod_dict("default", "cache-0", "cache", phase="Running"))

        # report: a batch job from 1h to 3h wanting 1.5 cores under a 1-core limit half the time.
        if 60 <= i < 180:
            demand = 1.5 if (i // 10) % 2 == 0 else 0.6
            samples.append(
                Sample("batch", "report-x7k2p", "report", "main", "static-b", 0.5, 1.0, GIB,
                       2 * GIB, min(demand, 1.0), 1.5 * GIB, demand, demand > 1.0, False, True)
            )  # fmt: skip
            pods.append(pod_dict("batch", "report-x7k2p", "report", phase="Running"))
        elif i == 180:
            pods.append(pod_dict("batch", "report-x7k2p", "report", phase="Succeeded"))

        timeline.record(
            now=START + timedelta(seconds=t), containers=samples, pods=pods, nodes=nodes,
            events=events,
        )  # fmt: skip
    return timeline


def test_report_bytes_are_identical_across_runs(tmp_path: Path) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    write_json_report(assemble_report(synthetic_timeline()), first)
    write_json_report(assemble_report(synthetic_timeline()), second)
    assert first.read_bytes() == second.read_bytes()
    assert render_html(json.loads(first.read_text())) == render_html(
        assemble_report(synthetic_timeline())
    )


def test_json_text_round_trips_and_keeps_columns_on_one_line() -> None:
    report = assemble_report(synthetic_timeline())
    text = dumps_report(report)
    assert json.loads(text) == report
    # one line per column: the file stays a few hundred lines for thousands of samples
    assert len(text.splitlines()) < 700
    assert any(line.strip().startswith('"cpu_usage": [') for line in text.splitlines())


def test_synthetic_run_summaries() -> None:
    report = assemble_report(synthetic_timeline())
    assert report["duration"] == STEPS * STEP
    assert report["start"] == "2026-03-02T06:00:00.000000Z"
    workloads = {w["name"]: w for w in report["workloads"]}
    assert sorted(workloads) == ["cache", "report", "web"]
    cluster = report["cluster"]
    # static-a 6 h at 0.1, static-b 6 h at 0.2, group node 170 min at 0.5
    assert cluster["node_hours"] == round(12 + 170 / 60, 6)
    assert cluster["cost"] == round(0.6 + 1.2 + 0.5 * 170 / 60, 6)
    assert cluster["node_count"] == {
        "min": 2, "max": 3, "avg": round((2 * 190 + 3 * 170) / 360, 4),
        "series": [2] * 130 + [3] * 170 + [2] * 60,
    }  # fmt: skip
    web = workloads["web"]
    assert web["unschedulable_pod_seconds"] == 10 * STEP
    assert web["pending_pod_seconds"] == 11 * STEP  # plus web-3's one step before it started
    assert web["evictions"] == 1
    assert web["replicas"] == {"min": 2, "max": 3, "avg": round((2 * 120 + 3 * 240) / 360, 4)}
    cache = workloads["cache"]
    # 300 MiB + 4 MiB per step crosses 512 MiB at the 54th step: an OOM kill every 54 steps
    assert cache["oom_kills"] == STEPS // 54 == cluster["oom_kills"]
    report_job = workloads["report"]
    # 120 steps, throttled in the 60 steps of the even tens, each 0.5 core over the limit
    assert report_job["throttled_seconds"] == 60 * STEP
    assert report_job["throttled_core_seconds"] == 60 * STEP * 0.5
    assert report_job["replicas"]["min"] == 0  # Succeeded at the end


def test_summary_table_fits_the_terminal() -> None:
    text = render_summary(assemble_report(synthetic_timeline()))
    lines = text.splitlines()
    assert all(len(line) <= WIDTH for line in lines)
    assert "synthetic-six-hours" in lines[0]
    assert any(line.startswith("default/web") for line in lines)
    assert any("(core-h)" in line and "(GiB-h)" in line for line in lines)
