"""The built-in demo compared three ways, and a loop's silent no-op made visible.

The README's table comes from the full demo (6 h); here the same scenario and seed run for 4 h
(:mod:`tests.sim.demo_comparison`) and must order the three variants as the full run does on
every figure the README orders but three — not the exact numbers, which depend on the duration.
Node-hours, cost and CPU slack are left out: autoscaling pays for the load the static cluster
throttles or leaves pending, and earns it back only once the over-provisioned service has shrunk
(node-hours cross at about 5.5 h).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import yaml

from kubescale.sim.scenario.html_report import render_html
from kubescale.sim.scenario.runner import run_scenario
from kubescale.sim.scenario.scenario_validation import parse_scenario
from kubescale.sim.scenario.summary_table import render_summary
from tests.sim.demo_comparison import demo_comparison_report


def _variants(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["variant"]: v for v in report["comparison"]}


def test_the_demo_orders_the_three_ways_as_the_full_run_does() -> None:
    report = demo_comparison_report()
    v = _variants(report)
    assert list(v) == ["none", "separate", "one-brain"]
    none, separate, one_brain = v["none"], v["separate"], v["one-brain"]
    # Full run (README): OOM kills 2 > 1 = 1; throttled core-s 3904 > 0 = 0; pending 4h00m >
    # 2h18m = 2h18m; memory slack 95.9 > 60.6 = 60.6; evictions 0 < 20 = 20.
    assert none["oom_kills"] > one_brain["oom_kills"]
    assert none["throttled_core_seconds"] > one_brain["throttled_core_seconds"]
    assert none["pending_pod_seconds"] > one_brain["pending_pod_seconds"]
    assert none["slack_gib_hours"] > one_brain["slack_gib_hours"]
    assert none["evictions"] == 0 < one_brain["evictions"]
    for figure in ("oom_kills", "throttled_core_seconds", "pending_pod_seconds", "evictions"):
        assert one_brain[figure] <= separate[figure], figure
    # the report is the one-brain run's: every system of the suite ran and decided something
    assert report["components"] == [
        "cluster-autoscaler", "descheduler", "hpa-controller", "scheduler-extender",
        "vpa-recommender", "vpa-updater", "webhook",
    ]  # fmt: skip
    kinds = {e["kind"] for e in report["events"]}
    assert {
        "hpa-rescale", "vpa-eviction", "ca-scale-up", "ca-scale-down", "descheduler-eviction",
    } <= kinds  # fmt: skip
    # the one skipped iteration, said in the summary: the updater's first, at t = 0, before the
    # webhook wrote its first status Lease
    skipped = {loop["name"]: loop["skipped"] for loop in report["loops"] if loop["skipped"]}
    assert skipped == {"vpa-updater": 1}
    assert [e["time"] for e in report["events"] if e["kind"] == "vpa-updater-skipped"] == [0.0]


def test_the_summary_leads_with_the_comparison_then_what_kubescale_did() -> None:
    report = demo_comparison_report()
    lines = render_summary(report).splitlines()
    assert lines[2].startswith("SAME SEED, THREE WAYS")
    assert "no autoscaling" in lines[2]
    assert "kubescale, one brain" in lines[2]
    assert [line.split()[0] for line in lines[4:6]] == ["node-hours", "cost"]
    # the components line wraps at the summary's 120 columns
    did = lines.index(
        "What kubescale did — components: cluster-autoscaler, descheduler, hpa-controller, "
        "scheduler-extender, vpa-recommender,"
    )
    assert lines[did + 1] == "      vpa-updater, webhook"
    assert did < next(i for i, line in enumerate(lines) if line.startswith("Cluster:"))
    text = "\n".join(lines)
    # a recommendation before -> after and an eviction's reason, memory in binary units
    assert "shop/cache/redis: cpu" in text
    assert " -> cpu" in text
    assert "VPA eviction  shop/cache-0: redis memory request 334.9Mi below the lower bound" in text
    assert "descheduler eviction  shop/cache-0: from legacy-0" in text
    assert not re.search(r"memory=\d{5,}", text)  # never raw bytes


_UPDATER_WITHOUT_WEBHOOK = """
name: no-webhook
duration: 10m
step: 1m
nodes: [{name: n, allocatable: {cpu: "4", memory: 8Gi}}]
kubescale: {vpa-updater: {}}
workloads:
  - kind: Deployment
    name: web
    containers:
      - name: app
        requests: {cpu: 100m, memory: 128Mi}
        usage: {type: constant, cpu: 100m, memory: 100Mi}
"""


def test_a_loop_that_skips_its_work_is_counted_and_said() -> None:
    # The updater acts only while the webhook's status Lease is fresh; without the webhook
    # every iteration is skipped, which the report counts and both renderings say.
    scenario = parse_scenario(yaml.safe_load(_UPDATER_WITHOUT_WEBHOOK), base_dir=Path())
    report = asyncio.run(run_scenario(scenario))
    updater = next(loop for loop in report["loops"] if loop["name"] == "vpa-updater")
    assert (updater["iterations"], updater["skipped"], updater["failures"]) == (10, 10, 0)
    reason = "admission controller status stale or missing: no update this loop"
    assert updater["skip_reasons"] == [{"reason": reason, "count": 10}]
    summary = render_summary(report)
    assert f"NOTE: vpa-updater skipped 10 of 10 iterations: {reason} (10×)" in summary
    page = render_html(report)
    assert f'<p class="alert">vpa-updater skipped 10 of 10 iterations: {reason} (10×)</p>' in page
