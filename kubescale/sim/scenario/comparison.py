"""One scenario run three ways on the same seed, and the comparison the report leads with.

A scenario with ``compare: true`` (the built-in demo) is run as:

* ``none`` — *no autoscaling*: the ``kubescale`` section emptied, everything else (objects,
  workloads, events, node groups at their initial size) unchanged;
* ``separate`` — *the upstream suite as separate programs*: every component of the section with
  ``coordination: separate`` (each loop with upstream's behaviour and its own budget);
* ``one-brain`` — *kubescale*: the section as written, ``coordination: one-brain``.

The ``coordination:`` key of the scenario itself (and ``simulate --coordination``) is overridden
by the two runs that have kubescale (a comparison always shows both).

Same seed, same start, same events: the runs differ only in who autoscales. The report of the
comparison is the ``one-brain`` run's (what kubescale did) with a ``comparison`` section: per
variant the cluster's node-hours and cost, OOM kills, CPU throttling, slack, pending pod-time
and evictions, then the figures where the systems' coordination shows: nodes added by
scale-ups, the HPA's rescales and its replicas at most, and the VPA updater's evictions
(:func:`variant_totals`). The runs are sequential in one process, so the result
does not depend on how many cores the machine has; the demo's three take about 25 s of CPU.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Final

from kubescale.base.coordination import parse_coordination

from .runner import run_scenario
from .scenario_format import Scenario
from .time_statistics import rounded
from .timeline import POD_STARTED

__all__ = [
    "VARIANTS",
    "compare_reports",
    "coordination_figures",
    "run_comparison",
    "run_variants",
    "variant_scenario",
    "variant_totals",
]

VARIANTS: Final = (
    ("none", "no autoscaling"),
    ("separate", "upstream suite, separate programs"),
    ("one-brain", "kubescale, one brain"),
)
"""``(variant, label)`` in the order the comparison shows them."""


def variant_scenario(scenario: Scenario, variant: str) -> Scenario:
    """The scenario as run for ``variant`` (module docstring); never itself a comparison."""
    if variant == "none":
        return replace(scenario, kubescale={}, compare=False)
    return replace(scenario, compare=False, coordination=parse_coordination(variant))


def variant_totals(report: Mapping[str, Any]) -> dict[str, Any]:
    """The figures a variant is compared on, from its report: cluster totals, and slack summed
    over the workloads (core-hours, GiB-hours; requested but unused)."""
    cluster = report["cluster"]
    workloads = report["workloads"]
    return {
        "node_hours": cluster["node_hours"],
        "cost": cluster["cost"],
        "nodes_max": cluster["node_count"]["max"],
        "oom_kills": cluster["oom_kills"],
        "throttled_core_seconds": cluster["throttled_core_seconds"],
        "throttled_seconds": rounded(
            math.fsum(w["throttled_seconds"] for w in workloads), "seconds"
        ),
        "slack_core_hours": rounded(math.fsum(w["slack_core_hours"] for w in workloads), "hours"),
        "slack_gib_hours": rounded(math.fsum(w["slack_gib_hours"] for w in workloads), "hours"),
        "pending_pod_seconds": cluster["pending_pod_seconds"],
        "evictions": cluster["evictions"],
        **coordination_figures(report),
    }


def coordination_figures(report: Mapping[str, Any]) -> dict[str, Any]:
    """Where the systems' coordination shows, from the report's events, nodes and HPA records:

    * ``nodes_added`` — nodes that appeared after the start (scale-ups);
    * ``vpa_restarts`` — running pods the VPA updater evicted to apply a recommendation;
    * ``vpa_pending_replaced`` — pods the updater evicted before they ever started: with one
      brain mostly unschedulable pods created with stale requests, re-created with the
      recommended ones (no disruption); otherwise pods bound to a node but not yet running;
    * ``hpa_rescales`` — the HPA controller's rescales (``SuccessfulRescale``);
    * ``hpa_replicas_max`` — the most replicas each HPA's target workload had, summed over the
      HPAs (the target's replicas, so also without an HPA controller); ``None`` without an HPA.

    A VPA that moves the requests an HPA divides usage by makes the HPA rescale on a changed
    utilization (more rescales, more replicas); an autoscaler that sizes a scale-up for stale
    requests adds nodes the pods do not need."""
    kinds = Counter(event["kind"] for event in report["events"])
    started: set[str] = set()
    vpa_evicted = {True: 0, False: 0}  # by whether the pod had started
    for event in report["events"]:  # in time order
        if event["kind"] == POD_STARTED:
            started.add(event["subject"])
        elif event["kind"] == "vpa-eviction":
            vpa_evicted[event["subject"] in started] += 1
    replicas = {(w["namespace"], w["name"]): w["replicas"]["max"] for w in report["workloads"]}
    hpas = report.get("hpas", [])
    return {
        "nodes_added": sum(1 for node in report["cluster"]["nodes"] if node["first_seen"] > 0),
        "vpa_restarts": vpa_evicted[True],
        "vpa_pending_replaced": vpa_evicted[False],
        "hpa_rescales": kinds["hpa-rescale"],
        "hpa_replicas_max": (
            sum(replicas.get((h["namespace"], h["target"].partition("/")[2]), 0) for h in hpas)
            if hpas
            else None
        ),
    }


async def run_variants(
    scenario: Scenario, *, progress: Callable[[float], None] | None = None
) -> dict[str, dict[str, Any]]:
    """Run the three variants in order; each variant's own report, by variant."""
    reports: dict[str, dict[str, Any]] = {}
    count = len(VARIANTS)
    for position, (variant, _) in enumerate(VARIANTS):

        def part(fraction: float, position: int = position) -> None:
            if progress is not None:
                progress((position + fraction) / count)

        reports[variant] = await run_scenario(variant_scenario(scenario, variant), progress=part)
    return reports


def compare_reports(reports: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """The ``one-brain`` report of :func:`run_variants` with the ``comparison``."""
    report = reports["one-brain"]
    report["comparison"] = [
        {"variant": variant, "label": label, **variant_totals(reports[variant])}
        for variant, label in VARIANTS
    ]
    return report


async def run_comparison(
    scenario: Scenario, *, progress: Callable[[float], None] | None = None
) -> dict[str, Any]:
    """Run the three variants in order; the ``one-brain`` report with the ``comparison``."""
    return compare_reports(await run_variants(scenario, progress=progress))
