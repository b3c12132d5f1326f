"""Running one scenario under both VPA recommendation policies and comparing the two reports.

``kubescale simulate --compare-recommendation-policies`` runs the scenario twice, the
``vpa-recommender`` component's ``recommendation-policy`` flag set to ``upstream`` and then to
``adaptive`` (everything else, the seed included, as the file says), and prints each run's
summary followed by :func:`render_policy_comparison`: one row per policy with the figures the
policies trade against each other — OOM kills, evictions (each a pod restart, as the VPA
updater's), CPU and memory slack summed over every workload container, and throttled seconds.
Read from the JSON reports only (:mod:`.report_assembly`), like the summary table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from kubescale.controllers.vpa.model.policy.adaptive_config import RECOMMENDATION_POLICIES

from .scenario_format import Scenario, ScenarioError

__all__ = [
    "COMPARED_POLICIES",
    "POLICY_FLAG",
    "RECOMMENDER",
    "policy_figures",
    "render_policy_comparison",
    "with_recommendation_policy",
]

RECOMMENDER: Final = "vpa-recommender"
POLICY_FLAG: Final = "recommendation-policy"
COMPARED_POLICIES: Final = RECOMMENDATION_POLICIES
"""The policies a comparison runs, in order (upstream first)."""


def with_recommendation_policy(scenario: Scenario, policy: str) -> Scenario:
    """``scenario`` with its recommender's ``recommendation-policy`` set to ``policy``.

    A scenario without the ``vpa-recommender`` component has nothing to compare: ScenarioError
    naming the field."""
    if policy not in RECOMMENDATION_POLICIES:
        raise ScenarioError([f"recommendation-policy: unknown policy {policy!r}"])
    if RECOMMENDER not in scenario.kubescale:
        raise ScenarioError(
            [
                f"kubescale.{RECOMMENDER}: comparing recommendation policies needs the "
                "VPA recommender in the scenario"
            ]
        )
    components = dict(scenario.kubescale)
    components[RECOMMENDER] = {**components[RECOMMENDER], POLICY_FLAG: policy}
    return replace(scenario, kubescale=components)


def policy_figures(report: Mapping[str, Any]) -> dict[str, float]:
    """The compared figures of one run's JSON report."""
    cluster = report["cluster"]
    cpu_slack = memory_slack = throttled = 0.0
    for workload in report["workloads"]:
        throttled += workload["throttled_seconds"] or 0.0
        for container in workload["containers"]:
            cpu_slack += container["cpu"]["slack_core_hours"] or 0.0
            memory_slack += container["memory"]["slack_gib_hours"] or 0.0
    return {
        "oom_kills": float(cluster["oom_kills"]),
        "evictions": float(cluster["evictions"]),
        "cpu_slack_core_hours": cpu_slack,
        "memory_slack_gib_hours": memory_slack,
        "throttled_seconds": throttled,
        "cost": float(cluster["cost"]),
    }


_COLUMNS: Final = (
    ("oom_kills", "OOM KILLS", "(count)", 0),
    ("evictions", "EVICTIONS", "(count)", 0),
    ("cpu_slack_core_hours", "CPU SLACK", "(core-h)", 3),
    ("memory_slack_gib_hours", "MEM SLACK", "(GiB-h)", 3),
    ("throttled_seconds", "THROTTLED", "(s)", 0),
    ("cost", "COST", "", 2),
)


def render_policy_comparison(reports: Mapping[str, Mapping[str, Any]]) -> str:
    """One aligned row per policy (``reports``: policy name -> JSON report), newline-ended."""
    header = [("RECOMMENDATION POLICY", ""), *((title, unit) for _, title, unit, _ in _COLUMNS)]
    rows = []
    for policy, report in reports.items():
        figures = policy_figures(report)
        rows.append([policy, *(f"{figures[key]:.{decimals}f}" for key, _, _, decimals in _COLUMNS)])
    widths = [
        max(len(header[i][0]), len(header[i][1]), *(len(row[i]) for row in rows))
        for i in range(len(header))
    ]

    def line(cells: list[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = (cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True))
        return "  ".join([first, *rest]).rstrip()

    lines = [
        line([title for title, _ in header]),
        line([unit for _, unit in header]),
        *(line(row) for row in rows),
    ]
    return "\n".join(lines) + "\n"
