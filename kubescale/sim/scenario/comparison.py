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
and evictions (:func:`variant_totals`). The runs are sequential in one process, so the result
does not depend on how many cores the machine has; the demo's three take about 25 s of CPU.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Final

from kubescale.base.coordination import parse_coordination

from .runner import run_scenario
from .scenario_format import Scenario
from .time_statistics import rounded

__all__ = ["VARIANTS", "run_comparison", "variant_scenario", "variant_totals"]

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
    }


async def run_comparison(
    scenario: Scenario, *, progress: Callable[[float], None] | None = None
) -> dict[str, Any]:
    """Run the three variants in order; the ``one-brain`` report with the ``comparison``."""
    reports: dict[str, dict[str, Any]] = {}
    count = len(VARIANTS)
    for position, (variant, _) in enumerate(VARIANTS):

        def part(fraction: float, position: int = position) -> None:
            if progress is not None:
                progress((position + fraction) / count)

        reports[variant] = await run_scenario(variant_scenario(scenario, variant), progress=part)
    report = reports["one-brain"]
    report["comparison"] = [
        {"variant": variant, "label": label, **variant_totals(reports[variant])}
        for variant, label in VARIANTS
    ]
    return report
