"""Karpenter's disruption budgets: scaling (percentages round up), reasons, schedules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from kubescale.controllers.autoscaler.config.disruption_budgets import (
    CronSchedule,
    DisruptionBudget,
    DisruptionBudgetError,
    allowed_disruptions,
    parse_budgets,
)

# A Monday.
NOW = datetime(2026, 3, 2, 10, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("nodes", "total", "expected"),
    [
        ("10%", 10, 1),  # ceil(10 × 0.10) = 1
        ("10%", 11, 2),  # ceil(1.1) = 2: roundUp=true
        ("10%", 0, 0),  # ceil(0) = 0
        ("50%", 3, 2),  # ceil(1.5) = 2
        ("0%", 40, 0),
        ("100%", 7, 7),
        ("3", 100, 3),  # an integer is taken as is
        ("0", 5, 0),
    ],
)
def test_scaled_rounds_percentages_up(nodes: str, total: int, expected: int) -> None:
    assert DisruptionBudget(nodes=nodes).scaled(total) == expected


@pytest.mark.parametrize(
    ("budgets", "reason", "total", "disrupting", "expected"),
    [
        # one default budget: ceil(20 × 10%) = 2, minus 0 disrupting
        ("nodes=10%", "Underutilized", 20, 0, 2),
        # 2 − 1 disrupting = 1
        ("nodes=10%", "Underutilized", 20, 1, 1),
        # 2 − 3 = −1 → never below 0
        ("nodes=10%", "Underutilized", 20, 3, 0),
        # most restrictive of two applying budgets: min(ceil(20×50%)=10, 3) = 3
        ("nodes=50%;nodes=3", "Empty", 20, 0, 3),
        # a budget for other reasons does not apply: only nodes=10 → 10
        ("nodes=0,reasons=Empty;nodes=10", "Underutilized", 20, 0, 10),
        # ... but it does to its own reason: min(0, 10) = 0
        ("nodes=0,reasons=Empty;nodes=10", "Empty", 20, 0, 0),
        # no budget at all: unlimited
        ("", "Empty", 20, 5, 2**31 - 1 - 5),
    ],
)
def test_allowed_disruptions(
    budgets: str, reason: str, total: int, disrupting: int, expected: int
) -> None:
    parsed = parse_budgets(budgets)
    assert (
        allowed_disruptions(
            parsed, reason=reason, total_nodes=total, disrupting=disrupting, now=NOW
        )
        == expected
    )


@pytest.mark.parametrize(
    ("schedule", "duration", "active"),
    [
        # every day 09:00 for 2h: 10:30 is inside [09:00, 11:00]
        ("0 9 * * *", timedelta(hours=2), True),
        # for 1h: window [09:00, 10:00] is over at 10:30
        ("0 9 * * *", timedelta(hours=1), False),
        # hit exactly now (10:30) with any duration > 0 is active
        ("30 10 * * *", timedelta(minutes=1), True),
        # weekdays only (Mon-Fri): Monday 10:00 for 1h → active
        ("0 10 * * 1-5", timedelta(hours=1), True),
        # Sundays only (0 and 7 both mean Sunday) → not active on a Monday
        ("0 0 * * 0", timedelta(hours=12), False),
        ("0 0 * * 7", timedelta(hours=12), False),
        # @daily = 0 0 * * *, 12h: [00:00, 12:00] contains 10:30
        ("@daily", timedelta(hours=12), True),
        # day-of-month 2 OR Friday (both restricted → OR): the 2nd → active
        ("0 10 2 * 5", timedelta(hours=1), True),
        # every 15 minutes, 10 minutes long: last hit 10:30 → active
        ("*/15 * * * *", timedelta(minutes=10), True),
        # at minute 20 every hour, 5 minutes long: [10:20, 10:25] → over
        ("20 * * * *", timedelta(minutes=5), False),
    ],
)
def test_scheduled_budgets(schedule: str, duration: timedelta, active: bool) -> None:
    budget = DisruptionBudget(nodes="0", schedule=CronSchedule.parse(schedule), duration=duration)
    assert budget.is_active(NOW) is active


def test_an_inactive_budget_does_not_limit() -> None:
    budgets = parse_budgets("nodes=0,schedule=0 0 * * 0,duration=1h;nodes=5")
    # the blocking Sunday budget is inactive on Monday: only nodes=5 applies
    assert allowed_disruptions(budgets, reason="Empty", total_nodes=10, disrupting=0, now=NOW) == 5


@pytest.mark.parametrize(
    "text",
    [
        "nodes=abc",
        "nodes=150%",
        "nodes=1,reasons=Drifted",
        "nodes=1,schedule=0 9 * * *",
        "nodes=1,duration=1h",
        "nodes=1,schedule=61 9 * * *,duration=1h",
        "nodes=1,schedule=0 9 * *,duration=1h",
        "reasons=Empty",
        "nodes=1,foo=bar",
        "nodes=1,schedule=0 9 * * *,duration=soon",
    ],
)
def test_malformed_budgets(text: str) -> None:
    with pytest.raises(DisruptionBudgetError):
        parse_budgets(text)
